"""The SLURM job scripts in jobs/, run by bash with stand-ins for srun and scontrol.

The stand-in srun records the exact argument list and environment the script would start
on the allocation; the ppack part of it is parsed with the CLI's own parser. It then
plays one outcome (model written, stopped by SIGTERM, killed, failed, or the real ppack
command on one rank), so the requeue logic is tested too. Neither SLURM nor an MPI
launcher is needed.
"""
import gzip
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from ppack.cli import build_parser
from ppack.data.hdf5 import read_rows, write_dataset

from helpers import clean_mpi_env


JOBS = Path(__file__).resolve().parents[1] / "jobs"
SCRIPTS = sorted(JOBS.glob("*.sbatch"))
JOB_ID = "4242"
TRAINING = ["mnist8m.sbatch", "sweep_array.sbatch", "tune.sbatch", "two_node_example.sbatch"]

# What the stand-ins do; STUB_MODE picks srun's outcome.
STUB = r'''
import json, os, signal, subprocess, sys

tool, argv = sys.argv[1], sys.argv[2:]
with open(os.environ["STUB_LOG"], "a") as log:
    env = {k: os.environ.get(k) for k in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "NUMBA_CACHE_DIR")}
    log.write(json.dumps({"tool": tool, "argv": argv, "env": env}) + "\n")
if tool == "scontrol":
    sys.exit(int(os.environ.get("STUB_SCONTROL_STATUS", "0")))
if tool == "squeue":  # squeue -h -j ID -o %L: the job's time left
    print(os.environ.get("STUB_TIME_LEFT", "1:30"))
    sys.exit(0)


def value(flag):
    return argv[argv.index(flag) + 1] if flag in argv else None


mode = os.environ.get("STUB_MODE", "done")
at = next(i for i in range(len(argv) - 1) if argv[i:i + 2] == ["-m", "ppack"])
if mode == "run":  # the real command, on one rank, with the package's own numba cache
    command = argv[next(i for i, a in enumerate(argv) if not a.startswith("-")):]
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    sys.exit(subprocess.run(command, env=env).returncode)
if mode == "usr1":  # SLURM's --signal=B:USR1 reaches the batch shell while srun runs
    os.kill(os.getppid(), signal.SIGUSR1)
if mode in ("done", "usr1"):
    if argv[at + 2] == "data":  # data KIND OUTPUT... --options: placeholder output files
        for path in argv[at + 4:]:
            if path.startswith("--"):
                break
            open(path, "w").write("data")
    elif value("--output"):  # predict: decision = the +-1 label of the row, so the vote is exact
        import h5py, numpy as np
        with h5py.File(value("--data"), "r") as f:
            y = f["y"][...]
        np.save(value("--output"), np.column_stack([y, y]))
    else:
        open(value("--model"), "w").write("model")
elif mode == "stopped":  # ppack after SIGTERM: checkpoint written, status 0, no model
    open(value("--checkpoint"), "w").write("checkpoint")
elif mode == "killed":
    sys.exit(143)
elif mode == "fail":
    sys.exit(1)
'''


def write_idx_source(folder, n_train, n_test, seed):
    """A folder with tiny stand-ins for the official MNIST IDX files (gzipped): images of a
    bright square whose place is the digit, labels 0..9. Returns the training labels."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        labels = rng.integers(10, size=n).astype(np.uint8)
        images = np.zeros((n, 28, 28), dtype=np.uint8)
        for image, label in zip(images, labels):
            i, j = 4 + 7 * (label % 3), 4 + 6 * (label // 3)
            image[i:i + 6, j:j + 5] = 255
        for kind, array in (("images-idx3-ubyte", images), ("labels-idx1-ubyte", labels)):
            header = bytes([0, 0, 8, array.ndim]) + np.array(array.shape, dtype=">u4").tobytes()
            (folder / f"{prefix}-{kind}.gz").write_bytes(gzip.compress(header + array.tobytes()))
        if prefix == "train":
            train_labels = labels
    return train_labels


def make_digits(path, n, labels, seed):
    """A ppack HDF5 file of n rows in 4 dense features: rows of the i-th label lie at
    3 * e_i plus N(0, 0.5^2) noise, so the classes are well separated."""
    rng = np.random.default_rng(seed)
    which = rng.integers(len(labels), size=n)
    X = 3.0 * np.eye(4)[which] + rng.normal(scale=0.5, size=(n, 4))
    y = np.asarray(labels, dtype=float)[which]
    write_dataset(path, X, y, storage="dense")
    return X, y


@pytest.fixture
def job(tmp_path):
    """run(script, mode="done", **env) -> (CompletedProcess, srun calls, scontrol calls)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "stub.py").write_text(STUB)
    for tool in ("srun", "scontrol", "squeue"):
        wrapper = bin_dir / tool
        wrapper.write_text(f'#!/bin/bash\nexec {shlex.quote(sys.executable)} {shlex.quote(str(bin_dir / "stub.py"))} '
                           f'{tool} "$@"\n')
        wrapper.chmod(0o755)
    log = tmp_path / "calls.jsonl"

    def run(script, mode="done", **extra):
        env = {k: v for k, v in clean_mpi_env().items() if not k.startswith("SLURM_")}
        env.update(PATH=f"{bin_dir}:{env['PATH']}", HOME=str(tmp_path / "home"), TMPDIR=str(tmp_path / "node"),
                   PYTHON=sys.executable, SLURM_JOB_ID=JOB_ID, SLURM_CPUS_PER_TASK="3", STUB_LOG=str(log),
                   STUB_MODE=mode)
        env.update(extra)
        log.unlink(missing_ok=True)
        proc = subprocess.run(["bash", str(JOBS / script)], env=env, capture_output=True, text=True, timeout=200)
        calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return (proc, [c for c in calls if c["tool"] == "srun"], [c["argv"] for c in calls if c["tool"] == "scontrol"])

    return run


def python_at(call):
    argv = call["argv"]
    at = next(i for i in range(len(argv) - 1) if argv[i:i + 2] == ["-m", "ppack"])
    assert argv[at - 1] == sys.executable, argv  # $PYTHON, as the job sets it
    return at - 1


def ppack_args(call):
    """The arguments after ``python -m ppack`` in a recorded srun command line."""
    return call["argv"][python_at(call) + 3:]


def srun_options(call):
    """srun's own options in a recorded srun command line."""
    return call["argv"][:python_at(call)]


def array_range(script):
    """The (first, last) index of the script's ``#SBATCH --array=FIRST-LAST``."""
    match = re.search(r"^#SBATCH --array=(\d+)-(\d+)\s*$", (JOBS / script).read_text(), re.M)
    return int(match[1]), int(match[2])


def function_text(script, name):
    match = re.search(rf"^{name}\(\) {{.*?^}}$", (JOBS / script).read_text(), re.M | re.S)
    assert match, f"{script} defines no {name}()"
    return match[0]


def test_every_ppack_command_site_is_exercised_below():
    """The tests below run each of the scripts' ppack command lines (``"$PYTHON" -m ppack``;
    ``python -m ppack`` appears only in comments and messages); a new script or another
    command line in one must come with its own test."""
    sites = {p.name: re.findall(r'"\$PYTHON" -m ppack (data \w+|\w+)', p.read_text()) for p in SCRIPTS}
    assert sites == {"mnist8m.sbatch": ["data mnist8m", "data mnist", "train"], "predict.sbatch": ["predict"],
                     "sweep_array.sbatch": ["train"], "tune.sbatch": ["tune"], "two_node_example.sbatch": ["train"]}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_bash_syntax(script):
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_slurm_directives(script):
    text = script.read_text()
    directives = re.findall(r"^#SBATCH (\S+)", text, re.M)
    assert "--requeue" in directives and "--open-mode=append" in directives
    signal = [d for d in directives if d.startswith("--signal=")]
    # training: SIGTERM to the ranks (ppack checkpoints); predict: USR1 to the batch shell only
    assert signal == (["--signal=B:USR1@600"] if script.name == "predict.sbatch" else ["--signal=TERM@120"])
    assert re.search(r"^set -euo pipefail$", text, re.M)


def check_calls(calls, threads="3"):
    """Every recorded ppack command parses; threads and the numba cache are set for it."""
    assert calls
    for call in calls:
        args = ppack_args(call)
        parsed = build_parser().parse_args(args)  # SystemExit (status 2) if argparse rejects it
        assert f"--cpus-per-task={threads}" in srun_options(call)
        if parsed.command != "data":  # data has no --threads; numba reads NUMBA_NUM_THREADS
            assert parsed.threads == int(threads)
        assert call["env"]["NUMBA_NUM_THREADS"] == call["env"]["OMP_NUM_THREADS"] == threads
        assert Path(call["env"]["NUMBA_CACHE_DIR"]).name == f"numba-cache-{JOB_ID}"
        if parsed.command in ("train", "tune"):
            assert parsed.resume and parsed.checkpoint and parsed.model
    return [build_parser().parse_args(ppack_args(call)) for call in calls]


def test_two_node_example_command(job, tmp_path):
    proc, calls, requeues = job("two_node_example.sbatch")
    assert proc.returncode == 0, proc.stderr
    (args,) = check_calls(calls)
    home = tmp_path / "home"
    assert (args.data, args.test) == (f"{home}/ppack-data/a9a.h5", f"{home}/ppack-data/a9a.t.h5")
    assert (args.gamma, args.sigma, args.epochs, args.pack) == (1.0, 1e-4, 1.0, 100)
    assert Path(calls[0]["env"]["NUMBA_CACHE_DIR"]).parent == tmp_path / "node"
    assert requeues == []


def test_sweep_rows_and_array_range_agree(job):
    first, last = array_range("sweep_array.sbatch")
    assert first == 0
    seen = set()
    for index in range(first, last + 1):
        proc, calls, _ = job("sweep_array.sbatch", SLURM_ARRAY_TASK_ID=str(index))
        assert proc.returncode == 0, proc.stderr
        (args,) = check_calls(calls)
        seen.add((args.gamma, args.C))
        assert Path(args.model).name == f"gamma{args.gamma:g}_C{args.C:g}.model.h5"
    assert len(seen) == last + 1  # every row a different setting
    proc, calls, _ = job("sweep_array.sbatch", SLURM_ARRAY_TASK_ID=str(last + 1))
    assert proc.returncode == 2 and f"rows 0..{last}" in proc.stderr and not calls


def test_tune_command_and_early_exit(job, tmp_path):
    """One tune pass over the script's grid, with its checkpoint; a finished grid (its model
    written) is not searched again."""
    proc, calls, requeues = job("tune.sbatch", OUT=str(tmp_path / "out"), C_VALUES="1,10", GAMMAS="0.5")
    assert proc.returncode == 0, proc.stderr
    (args,) = check_calls(calls)
    assert (args.C, args.gamma, args.folds) == ([1.0, 10.0], [0.5], 5)
    assert args.model == str(tmp_path / "out" / "best.model.h5") and args.results == str(tmp_path / "out" / "cv.json")
    assert requeues == []
    proc, calls, _ = job("tune.sbatch", OUT=str(tmp_path / "out"))
    assert proc.returncode == 0 and not calls and "the grid is done" in proc.stdout


def test_mnist8m_command_and_early_exit(job, tmp_path):
    """The ten-class job with the default paths: DATA and TEST go to train unchanged."""
    data = tmp_path / "home" / "ppack-data"
    data.mkdir(parents=True)
    for name in ("mnist8m.h5", "mnist.t.h5"):  # the stand-in srun reads neither
        (data / name).write_text("data")
    proc, calls, requeues = job("mnist8m.sbatch")
    assert proc.returncode == 0, proc.stderr
    (args,) = check_calls(calls)
    out = tmp_path / "home" / "ppack-runs" / "mnist8m"
    assert (args.data, args.test) == (str(data / "mnist8m.h5"), str(data / "mnist.t.h5"))
    assert (args.model, args.checkpoint) == (str(out / "mnist8m.model.h5"), str(out / "mnist8m.checkpoint.h5"))
    assert (args.kernel, args.gamma, args.sigma, args.epochs, args.pack) == ("rbf", 0.02, 1e-6, 0.125, 100)
    assert srun_options(calls[0]) == ["--cpus-per-task=3", "--kill-on-bad-exit=1"]  # the whole allocation
    assert requeues == [] and "model written to" in proc.stdout
    assert list((out / "data").iterdir()) == []  # no label files without DIGIT
    proc, calls, _ = job("mnist8m.sbatch")
    assert proc.returncode == 0 and "is done" in proc.stdout and not calls  # model exists: nothing to run


def test_mnist8m_generates_missing_data(job, tmp_path):
    source, out = tmp_path / "mnist-idx", tmp_path / "runs"
    data, test = tmp_path / "new" / "mnist8m.h5", tmp_path / "new-test" / "mnist.t.h5"  # folders absent too
    proc, calls, requeues = job("mnist8m.sbatch", DATA=str(data), TEST=str(test), OUT=str(out),
                                MNIST_SOURCE=str(source), ROWS="1234", DATA_SEED="7")
    assert proc.returncode == 0, proc.stderr
    generate, originals, train = check_calls(calls)
    assert (generate.command, generate.kind) == ("data", "mnist8m")
    assert (generate.output, generate.rows, generate.seed, generate.source) == (str(data), 1234, 7, str(source))
    assert "--ntasks=1" not in srun_options(calls[0])  # every rank of the allocation generates its share
    assert (originals.command, originals.kind, originals.source) == ("data", "mnist", str(source))
    assert (originals.train_output, originals.test_output) == (str(out / "data" / "mnist.train.h5"), str(test))
    assert {"--nodes=1", "--ntasks=1"} <= set(srun_options(calls[1]))
    assert (train.command, train.data, train.test) == ("train", str(data), str(test))
    assert requeues == []
    # TEST exists now; a new DATA with the defaults: 8,100,000 rows, seed 0
    data = tmp_path / "new" / "other.h5"
    proc, calls, _ = job("mnist8m.sbatch", DATA=str(data), TEST=str(test), OUT=str(tmp_path / "runs2"),
                         MNIST_SOURCE=str(source))
    assert proc.returncode == 0, proc.stderr
    generate, train = check_calls(calls)
    assert (generate.kind, generate.output, generate.rows, generate.seed) == ("mnist8m", str(data), 8100000, 0)
    assert (train.data, train.test) == (str(data), str(test))


def test_mnist8m_without_data_or_source_says_how_to_make_it(job, tmp_path):
    data, test = tmp_path / "mnist8m.h5", tmp_path / "mnist.t.h5"
    proc, calls, _ = job("mnist8m.sbatch", DATA=str(data), TEST=str(test), OUT=str(tmp_path / "runs"),
                         MNIST_SOURCE="")
    assert proc.returncode == 2 and not calls
    assert f"DATA={data} does not exist" in proc.stderr and f"TEST={test} does not exist" in proc.stderr
    assert "python -m ppack convert mnist8m.scale.bz2" in proc.stderr and "--dtype uint8" in proc.stderr
    assert "set MNIST_SOURCE" in proc.stderr
    make_digits(test, 10, [1, 2], seed=0)  # only DATA missing
    proc, calls, _ = job("mnist8m.sbatch", DATA=str(data), TEST=str(test), OUT=str(tmp_path / "runs"))
    assert proc.returncode == 2 and not calls
    assert f"DATA={data} does not exist" in proc.stderr and "TEST=" not in proc.stderr


def test_mnist8m_digit_mode_label_files(job, tmp_path):
    X, y = make_digits(tmp_path / "train.h5", 120, [0, 3, 9], seed=1)
    make_digits(tmp_path / "test.h5", 40, [0, 3, 9], seed=2)
    out = tmp_path / "runs"
    common = dict(DATA=str(tmp_path / "train.h5"), TEST=str(tmp_path / "test.h5"), OUT=str(out))
    for digit in (0, 9):
        proc, calls, requeues = job("mnist8m.sbatch", DIGIT=str(digit), **common)
        assert proc.returncode == 0, proc.stderr
        (args,) = check_calls(calls)
        assert args.data == f"{out}/data/train.class{digit}.h5" and args.test == f"{out}/data/test.class{digit}.h5"
        assert args.model == f"{out}/class{digit}.model.h5" and args.checkpoint == f"{out}/class{digit}.checkpoint.h5"
        assert (args.gamma, args.sigma, args.epochs) == (0.02, 1e-6, 0.125)
        assert requeues == []
        # the label file: X read through the link equals the source, y is +1 for the digit
        Xb, yb = read_rows(args.data, 0, 120)
        np.testing.assert_array_equal(Xb, X)
        np.testing.assert_array_equal(yb, np.where(y == digit, 1.0, -1.0))
    proc, calls, _ = job("mnist8m.sbatch", DIGIT="0", **common)
    assert proc.returncode == 0 and "is done" in proc.stdout and not calls  # model exists: nothing to run
    proc, calls, _ = job("mnist8m.sbatch", DIGIT="5", **common)
    assert proc.returncode != 0 and "label 5 is on 0 of 120 rows" in proc.stderr and not calls
    for bad in ("10", "x", "-1"):
        proc, calls, _ = job("mnist8m.sbatch", DIGIT=bad, **common)
        assert proc.returncode == 2 and "DIGIT: expected a digit 0..9" in proc.stderr and not calls


def test_predict_commands_and_class_vs_rest_vote(job, tmp_path):
    _, y = make_digits(tmp_path / "test.h5", 50, [1, 3, 7], seed=3)
    proc, calls, _ = job("predict.sbatch", DATA=str(tmp_path / "test.h5"))  # the ten-class model
    assert proc.returncode == 0, proc.stderr
    (args,) = check_calls(calls)
    runs = tmp_path / "home" / "ppack-runs" / "mnist8m"
    assert (args.model, args.output) == (str(runs / "mnist8m.model.h5"),
                                         str(runs / "predict" / "mnist8m.model.decisions.npy"))
    proc, calls, _ = job("predict.sbatch", MODEL=str(tmp_path / "m.h5"), MODEL_DIR=str(tmp_path / "models"))
    assert proc.returncode == 2 and "not both" in proc.stderr and not calls

    proc, calls, _ = job("predict.sbatch", MODEL=str(tmp_path / "m.h5"), DATA=str(tmp_path / "test.h5"),
                         OUT=str(tmp_path / "single"))
    assert proc.returncode == 0, proc.stderr
    (args,) = check_calls(calls)
    assert (args.model, args.output) == (str(tmp_path / "m.h5"), str(tmp_path / "single" / "m.decisions.npy"))

    out = tmp_path / "vote"
    proc, calls, _ = job("predict.sbatch", MODEL_DIR=str(tmp_path / "models"), CLASSES="1 3 7",
                         DATA=str(tmp_path / "test.h5"), OUT=str(out))
    assert proc.returncode == 0, proc.stderr
    parsed = check_calls(calls)
    assert [a.model for a in parsed] == [str(tmp_path / "models" / f"class{k}.model.h5") for k in (1, 3, 7)]
    # the stand-in's decisions are the +-1 labels of each label file, so the vote is exact
    table = np.loadtxt(out / "predictions.txt", skiprows=1)
    np.testing.assert_array_equal(table, np.column_stack([y, y]))
    assert "accuracy 100.00% on 50 rows" in proc.stdout


def test_predict_requeues_after_usr1_and_resumes(job, tmp_path):
    make_digits(tmp_path / "test.h5", 30, [1, 3, 7], seed=4)
    env = dict(MODEL_DIR=str(tmp_path / "models"), CLASSES="1 3 7", DATA=str(tmp_path / "test.h5"),
               OUT=str(tmp_path / "out"))
    proc, calls, requeues = job("predict.sbatch", mode="usr1", **env)
    assert proc.returncode == 0, proc.stderr
    assert len(calls) == 1 and requeues == [["requeue", JOB_ID]]  # digit 1 finished, then requeued
    assert not (tmp_path / "out" / "predictions.txt").exists()
    proc, calls, requeues = job("predict.sbatch", SLURM_RESTART_COUNT="1", **env)
    assert proc.returncode == 0, proc.stderr
    assert [Path(a.model).name for a in check_calls(calls)] == ["class3.model.h5", "class7.model.h5"]
    assert requeues == [] and (tmp_path / "out" / "predictions.txt").exists()


def test_requeue_logic_is_the_same_in_every_training_script():
    first = function_text(TRAINING[0], "requeue_unless_done")
    assert all(function_text(s, "requeue_unless_done") == first for s in TRAINING[1:])
    left = function_text(TRAINING[0], "seconds_left")
    assert all(function_text(s, "seconds_left") == left for s in TRAINING[1:])
    assert function_text("predict.sbatch", "binarise") == function_text("mnist8m.sbatch", "binarise")


@pytest.mark.parametrize("mode, restarts, scontrol_status, time_left, status, requeued, message", [
    ("done", "0", "0", "1:30", 0, False, "model written to"),
    ("stopped", "0", "0", "1:30", 0, True, "stopped by SIGTERM"),
    ("killed", "0", "0", "1:30", 0, True, "killed by SIGTERM near the time limit"),
    ("killed", "0", "0", "04:59", 0, True, "killed by SIGTERM near the time limit"),
    # far from the limit, 143 is srun ending the ranks after another one failed: no requeue loop
    ("killed", "0", "0", "05:01", 143, False, "failed with status 143; not requeueing"),
    ("killed", "0", "0", "1-02:00:00", 143, False, "failed with status 143; not requeueing"),
    ("killed", "0", "0", "UNLIMITED", 143, False, "failed with status 143; not requeueing"),
    ("fail", "0", "0", "1:30", 1, False, "failed with status 1; not requeueing"),
    ("stopped", "5", "0", "1:30", 1, False, "already restarted 5 times"),
    ("stopped", "0", "1", "1:30", 1, True, "scontrol requeue failed"),
])
def test_requeue_decision(job, tmp_path, mode, restarts, scontrol_status, time_left, status, requeued,
                          message):
    proc, calls, requeues = job("two_node_example.sbatch", mode=mode, SLURM_RESTART_COUNT=restarts,
                                STUB_SCONTROL_STATUS=scontrol_status, STUB_TIME_LEFT=time_left,
                                OUT=str(tmp_path / "out"))
    assert proc.returncode == status, proc.stderr
    assert len(calls) == 1
    assert requeues == ([["requeue", JOB_ID]] if requeued else [])
    assert message in proc.stdout + proc.stderr


@pytest.mark.second_tier  # runs ppack itself, several times: the CI's second tier
def test_ten_class_job_end_to_end_with_real_ppack(job, tmp_path):
    """Train one K-class model with the mnist8m job and predict with it, running ppack itself."""
    make_digits(tmp_path / "train.h5", 240, [1, 4, 8], seed=7)
    _, y = make_digits(tmp_path / "test.h5", 60, [1, 4, 8], seed=8)
    out = tmp_path / "runs"
    proc, calls, requeues = job("mnist8m.sbatch", mode="run", DATA=str(tmp_path / "train.h5"),
                                TEST=str(tmp_path / "test.h5"), OUT=str(out), SLURM_CPUS_PER_TASK="1",
                                GAMMA="0.5", SIGMA="1e-2", EPOCHS="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "model written to" in proc.stdout and requeues == []
    assert (out / "mnist8m.model.h5").is_file() and not list((out / "data").glob("*class*"))
    proc, calls, _ = job("predict.sbatch", mode="run", SLURM_CPUS_PER_TASK="1", MODEL=str(out / "mnist8m.model.h5"),
                         DATA=str(tmp_path / "test.h5"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (args,) = check_calls(calls, threads="1")
    decisions = np.load(out / "predict" / "mnist8m.model.decisions.npy")  # a column per class, then the label
    assert decisions.shape == (60, 4)
    np.testing.assert_array_equal(decisions[:, 3], np.array([1.0, 4.0, 8.0])[np.argmax(decisions[:, :3], axis=1)])
    accuracy = np.mean(decisions[:, 3] == y)
    assert f"accuracy {100 * accuracy:.2f}%" in proc.stdout
    assert accuracy > 0.9  # three clusters 3 sigma apart


@pytest.mark.second_tier  # runs ppack itself: the CI's second tier
def test_tune_job_end_to_end_with_real_ppack(job, tmp_path):
    """The tune job searches its grid with ppack itself: every point's scores and the best
    refit model (no checkpoint: the pass ends before CHECKPOINT_EVERY)."""
    make_digits(tmp_path / "train.h5", 240, [-1, 1], seed=9)
    out = tmp_path / "runs"
    proc, calls, requeues = job("tune.sbatch", mode="run", DATA=str(tmp_path / "train.h5"), OUT=str(out),
                                SLURM_CPUS_PER_TASK="1", C_VALUES="1,10", GAMMAS="0.1,1", FOLDS="3", EPOCHS="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "model written to" in proc.stdout and requeues == []
    results = json.loads((out / "cv.json").read_text())
    assert [(row["C"], row["gamma"]) for row in results["grid"]] == [(1.0, 0.1), (10.0, 0.1), (1.0, 1.0), (10.0, 1.0)]
    assert results["best"]["mean"] > 0.9  # two clusters 3 sigma apart
    assert (out / "best.model.h5").is_file() and not (out / "tune.checkpoint.h5").exists()


@pytest.mark.second_tier  # runs ppack itself, several times: the CI's second tier
def test_mnist8m_job_generates_its_data_with_real_ppack(job, tmp_path):
    """MNIST_SOURCE with tiny IDX files: the job writes DATA (originals, then deformed copies)
    and TEST with ppack itself, then trains on them."""
    labels = write_idx_source(tmp_path / "idx", n_train=30, n_test=20, seed=9)
    data, test, out = tmp_path / "data" / "mnist8m.h5", tmp_path / "data" / "mnist.t.h5", tmp_path / "runs"
    proc, calls, requeues = job("mnist8m.sbatch", mode="run", DATA=str(data), TEST=str(test), OUT=str(out),
                                MNIST_SOURCE=str(tmp_path / "idx"), ROWS="75", SLURM_CPUS_PER_TASK="1",
                                EPOCHS="0.5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(calls) == 3 and "model written to" in proc.stdout and requeues == []
    X, y = read_rows(data, 0, 75)
    assert X.shape == (75, 784) and 0 <= X.min() and X.max() <= 1
    np.testing.assert_array_equal(y, labels[np.arange(75) % 30])
    assert not np.array_equal(X[30:60], X[:30])  # rows past the originals are deformed copies
    assert read_rows(test, 0, 20)[0].shape == (20, 784)


@pytest.mark.second_tier  # runs ppack itself, several times: the CI's second tier
def test_digit_jobs_and_vote_end_to_end_with_real_ppack(job, tmp_path):
    """Train two digits with DIGIT=k runs of the mnist8m job and vote with the predict job."""
    make_digits(tmp_path / "train.h5", 200, [3, 7], seed=5)
    _, y = make_digits(tmp_path / "test.h5", 60, [3, 7], seed=6)
    out = tmp_path / "runs"
    common = dict(DATA=str(tmp_path / "train.h5"), TEST=str(tmp_path / "test.h5"), OUT=str(out),
                  SLURM_CPUS_PER_TASK="1", GAMMA="0.5", SIGMA="1e-2", EPOCHS="1")
    for digit in (3, 7):
        proc, calls, requeues = job("mnist8m.sbatch", mode="run", DIGIT=str(digit), **common)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "model written to" in proc.stdout and requeues == []
    proc, calls, _ = job("predict.sbatch", mode="run", SLURM_CPUS_PER_TASK="1", MODEL_DIR=str(out), CLASSES="3 7",
                         DATA=str(tmp_path / "test.h5"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check_calls(calls, threads="1")
    table = np.loadtxt(out / "predict" / "predictions.txt", skiprows=1)
    np.testing.assert_array_equal(table[:, 0], y)
    accuracy = np.mean(table[:, 1] == y)
    assert f"accuracy {100 * accuracy:.2f}% on 60 rows" in proc.stdout
    assert accuracy > 0.9  # two clusters 3 sigma apart
    with h5py.File(out / "predict" / "data" / "test.class3.h5", "r") as f:
        assert isinstance(f.get("X", getlink=True), h5py.ExternalLink)
