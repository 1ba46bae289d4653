"""The SLURM job scripts of jobs/, submitted with sbatch to a real SLURM.

They run wherever sbatch reaches a controller with an idle node (jobs/local-slurm/up.sh
starts a one-node SLURM on this machine) and fail, with the reason, where none answers. Each job runs the unmodified script on 2 tasks (the #SBATCH layout, time limit,
signal and log file are overridden on the sbatch command line) on small data:

- two_node_example.sbatch to completion: the same model, bit for bit, as
  ``mpiexec -n 2 python -m ppack train`` with the same command line;
- mnist8m.sbatch generating its data from tiny MNIST IDX files, then training;
- the same mnist8m job with a one-minute limit: SLURM's own SIGTERM (--signal=TERM@20)
  stops it mid-run, it checkpoints, requeues itself, resumes, and ends with the model of
  the uninterrupted run;
- a node failure stand-in: every process of a running two_node_example job is killed
  (SIGKILL, no chance to checkpoint) once it has written a periodic checkpoint, then SLURM
  requeues the job; it resumes from that checkpoint and ends with the reference model;
- predict.sbatch on the mnist8m model, and sweep_array.sbatch as a two-task array.

A job that must be stopped mid-run cannot end first, whatever the machine's speed: its
first start trains for a practically endless number of iterations (the job's PYTHON is a
wrapper that sets ``--iterations``), and only after the stop, once the checkpoint's
iteration s is known, the test sets the total of the restart to s plus a little; its
reference is an uninterrupted ``mpiexec -n 2`` run of the same command line with that total.

The scripts put the numba cache in ``$TMPDIR/numba-cache-$SLURM_JOB_ID``, one per job, so
every job would compile ppack's kernels afresh. To keep the module within a few minutes,
each job is submitted held, its cache folder is filled from the kernels earlier runs
compiled, then it is released. A requeued job keeps its id, hence its cache.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from helpers import clean_mpi_env, make_problem, run_ppack

pytestmark = pytest.mark.second_tier  # minutes long: the CI's second tier

JOBS = Path(__file__).resolve().parents[1] / "jobs"
LAYOUT = ["--nodes=1", "--ntasks=2", "--ntasks-per-node=2", "--cpus-per-task=1"]
FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
                "BOOT_FAIL", "DEADLINE"}
# ppack train options of the two_node_example jobs (the script's names) and of the mnist8m jobs
TWO_NODE = {"GAMMA": "0.5", "SIGMA": "1e-5", "EPOCHS": "8", "PACK": "100"}
MNIST8M = {"ROWS": "40000", "EPOCHS": "5", "DATA_SEED": "0"}  # about 50 s of training on 2 cores
_memo = {}  # what several tests share: reference runs and data


def _slurm_unavailable():
    """None if sbatch reaches a controller with a usable node, else why not."""
    hint = "start a local one with jobs/local-slurm/up.sh (root, Debian/Ubuntu)"
    if shutil.which("sbatch") is None or shutil.which("scontrol") is None:
        return f"no SLURM client tools (sbatch, scontrol) on PATH; {hint}"
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
        nodes = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"SLURM does not answer ({error}); {hint}"
    said = " ".join((ping.stdout + ping.stderr).split())
    if ping.returncode != 0 or " is UP" not in ping.stdout:
        return f"no SLURM controller reachable (scontrol ping: {said or 'status ' + str(ping.returncode)}); {hint}"
    states = set(nodes.stdout.split())
    if nodes.returncode != 0 or not states & {"idle", "mixed", "allocated", "completing"}:
        return f"SLURM has no usable node (sinfo: {' '.join(states) or nodes.stderr.strip()}); {hint}"
    return None


class Slurm:
    """Submit the scripts of jobs/ and follow their jobs; every folder under ``root``."""

    def __init__(self, root):
        self.root = root
        self.node_tmp = root / "node"  # the jobs' TMPDIR: their numba caches
        self.warm = root / "numba-warm"  # kernels compiled so far, to seed new jobs' caches
        self.node_tmp.mkdir(parents=True, exist_ok=True)
        self.submitted = []

    def env(self, **variables):
        """The environment sbatch passes on (--export=ALL): ours without the MPI job we may be
        running in and without SLURM's own variables, plus ``variables``."""
        drop = ("SLURM_", "SBATCH_", "SRUN_", "SALLOC_", "MPIEXEC")
        env = {k: v for k, v in clean_mpi_env().items() if not k.startswith(drop)}
        env.update(PYTHON=sys.executable, TMPDIR=str(self.node_tmp))
        env.update({k: str(v) for k, v in variables.items()})
        return env

    def submit(self, script, log, *options, **variables):
        """sbatch the script on 2 tasks, held until its numba cache is seeded; the job id."""
        cmd = ["sbatch", "--parsable", "--hold", *LAYOUT, f"--output={log}", *options, str(JOBS / script)]
        proc = subprocess.run(cmd, env=self.env(**variables), capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"{' '.join(cmd)}: {proc.stderr}"
        job = proc.stdout.strip().split(";")[0]
        self.submitted.append(job)
        if self.warm.is_dir():
            shutil.copytree(self.warm, self.node_tmp / f"numba-cache-{job}", dirs_exist_ok=True)
        scontrol("release", job)
        return job

    def harvest(self, job):
        """Keep the kernels a finished job compiled for the jobs after it."""
        for cache in self.node_tmp.glob(f"numba-cache-{job}*"):
            shutil.copytree(cache, self.warm, dirs_exist_ok=True)

    def wait(self, job, log, until, timeout, what):
        """Poll until ``until(states, text of log)``; the job's states (one per array task)."""
        deadline = time.monotonic() + timeout
        while True:
            states = job_states(job)
            text = log.read_text() if log.exists() else ""
            if until(states, text):
                return states
            if set(states) <= FINAL_STATES and states:
                pytest.fail(f"job {job} ended ({', '.join(states)}) before {what}:\n{text}")
            if time.monotonic() > deadline:
                pytest.fail(f"job {job}: no {what} within {timeout} s (states {states}):\n{text}")
            time.sleep(1)

    def run_to_end(self, job, log, timeout):
        """Wait for the job (every array task) to end; asserts COMPLETED and returns the log."""
        self.wait(job, log, lambda states, _: states and set(states) <= FINAL_STATES, timeout, "its end")
        states, text = job_states(job), log.read_text() if log.exists() else ""
        assert set(states) == {"COMPLETED"}, f"job {job}: {states}\n{text}"
        self.harvest(job)
        return text

    def cancel_running(self):
        """scancel every job of ours that has not ended (after a failed test)."""
        for job in self.submitted:
            if not set(job_states(job)) <= FINAL_STATES:
                subprocess.run(["scancel", job], capture_output=True, timeout=60)


def scontrol(*args):
    proc = subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"scontrol {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def job_info(job):
    """``scontrol show job -o``: one line per job (per task of an array); empty once purged."""
    proc = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True, timeout=60)
    return proc.stdout.splitlines() if proc.returncode == 0 else []


def job_states(job):
    return [m[1] for line in job_info(job) if (m := re.search(r"\bJobState=(\S+)", line))]


def kill_job_processes(job):
    """SIGKILL every process of the job on this machine (the batch shell first, then srun and
    the ranks: those with SLURM_JOB_ID=job in their environment). Returns the files in
    /dev/shm they had mapped: MPICH's shared memory, which a crashed node loses with its RAM."""
    mark, found, shm = f"SLURM_JOB_ID={job}".encode(), [], set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and mark in (entry / "environ").read_bytes().split(b"\0"):
                found.append((b"slurm_script" not in (entry / "cmdline").read_bytes(), int(entry.name)))
                shm.update(re.findall(r"(/dev/shm/\S+)$", (entry / "maps").read_text(), re.M))
        except OSError:  # gone meanwhile, or not ours to read
            pass
    for _, pid in sorted(found):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert found, f"no process of job {job} found"
    return [Path(p) for p in shm]


def restarts(job):
    return [int(m[1]) for line in job_info(job) if (m := re.search(r"\bRestarts=(\d+)", line))]


ENDLESS = 10 ** 12  # iterations of a first start: only a stop ends it


def endless_python(folder):
    """A PYTHON for a job that must be stopped mid-run: the real interpreter, with the train
    command's ``--epochs E`` replaced by ``--iterations T``. T is ENDLESS on the job's first
    start; a restart waits for the test to write its T (``set_total``). Rank 0's command
    line goes to ``folder/argv.json``. Returns the wrapper's path."""
    folder.mkdir()
    wrapper = folder / "python"
    wrapper.write_text(f"""#!{sys.executable}
import json, os, sys, time
args = sys.argv[1:]
if "--epochs" in args:
    total_file, restart = {str(folder / "total")!r}, int(os.environ.get("SLURM_RESTART_COUNT", "0"))
    deadline = time.monotonic() + 300
    while restart and not os.path.exists(total_file) and time.monotonic() < deadline:
        time.sleep(0.2)
    at = args.index("--epochs")
    args[at:at + 2] = ["--iterations", open(total_file).read() if restart else "{ENDLESS}"]
    if os.environ.get("SLURM_PROCID", "0") == "0":
        with open({str(folder / "argv.json")!r}, "w") as f:
            json.dump(args, f)
os.execv(sys.executable, [sys.executable, *args])
""")
    wrapper.chmod(0o755)
    return wrapper


def set_total(wrapper, total):
    """The iterations of the restarts of the job run by ``wrapper`` (written atomically)."""
    part = wrapper.parent / "total.part"
    part.write_text(str(total))
    part.replace(wrapper.parent / "total")


def uninterrupted_reference(cluster, wrapper, out, total):
    """The model of ``mpiexec -n 2 python -m ppack`` with the command line the job's rank 0
    ran (``wrapper``'s record), ``--iterations total``, and its outputs under a new folder
    instead of ``out``: the model the stopped and resumed job must end with."""
    args = json.loads((wrapper.parent / "argv.json").read_text())[2:]  # after "-m ppack"
    fresh = wrapper.parent / "reference"
    fresh.mkdir()
    args = [arg.replace(str(out), str(fresh)) for arg in args]
    args[args.index("--iterations") + 1] = str(total)
    proc = run_ppack(args, ranks=2, timeout=300, env={"NUMBA_CACHE_DIR": str(cluster.warm)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    models = [arg for arg in args if arg.startswith(str(fresh)) and arg.endswith("model.h5")]
    assert len(models) == 1, args
    return Path(models[0])


def checkpoint_iteration(path):
    with h5py.File(path, "r") as f:
        return int(f.attrs["iteration"])


@pytest.fixture
def slurm(tmp_path_factory):
    """The SLURM to submit to (the test fails, with the reason, where none answers: `.ci/run`
    brings one up with jobs/local-slurm/up.sh);
    cancels the test's unfinished jobs after it."""
    if "unavailable" not in _memo:
        _memo["unavailable"] = _slurm_unavailable()
    if _memo["unavailable"]:
        pytest.fail(_memo["unavailable"])
    if "slurm" not in _memo:
        _memo["slurm"] = Slurm(tmp_path_factory.mktemp("real-slurm"))
    cluster = _memo["slurm"]
    yield cluster
    cluster.cancel_running()


def same_model(path, reference):
    """Both model files hold the same model, bit for bit (the training record aside: times, paths)."""
    with h5py.File(path, "r") as a, h5py.File(reference, "r") as b:
        assert sorted(a) == sorted(b)
        for name in a:
            np.testing.assert_array_equal(a[name][...], b[name][...], err_msg=name)
            assert a[name].dtype == b[name].dtype
        skip = {"training"}
        assert sorted(set(a.attrs) - skip) == sorted(set(b.attrs) - skip)
        for key in set(a.attrs) - skip:
            np.testing.assert_array_equal(a.attrs[key], b.attrs[key], err_msg=key)
        done = [json.loads(f.attrs["training"]) for f in (a, b)]
        assert done[0]["iterations"] == done[1]["iterations"]


def train_args(data, test, model, checkpoint, every, gamma, sigma, epochs, pack, extra=()):
    """two_node_example.sbatch's train command line, with THREADS = 1."""
    return ["train", "--data", data, "--test", test, "--kernel", "rbf", "--gamma", gamma, "--sigma", sigma,
            "--epochs", epochs, "--pack", pack, "--seed", "0", "--threads", "1", *extra, "--model", model,
            "--metrics-json", str(model) + ".json", "--checkpoint", checkpoint, "--checkpoint-every", every,
            "--resume"]


def two_node_reference(cluster):
    """Small two-class data, and the model of ``mpiexec -n 2 python -m ppack train`` on it with the
    command line of two_node_example.sbatch (it also compiles the float64 kernels, for the jobs)."""
    if "two_node" not in _memo:
        folder = cluster.root / "two-node"
        folder.mkdir()
        from ppack.data.hdf5 import write_dataset

        for name, n, seed in (("train.h5", 30000, 1), ("test.h5", 2000, 2)):
            X, y = make_problem(n=n, d=12, seed=seed)
            write_dataset(folder / name, X, y, storage="dense")
        model = folder / "reference.model.h5"
        args = train_args(folder / "train.h5", folder / "test.h5", model, folder / "reference.checkpoint.h5", "300s",
                          **{k.lower(): v for k, v in TWO_NODE.items()})
        proc = run_ppack(args, ranks=2, timeout=300, env={"NUMBA_CACHE_DIR": str(cluster.warm)})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        _memo["two_node"] = folder, model
    return _memo["two_node"]


def write_idx_source(folder, n_train, n_test, seed):
    """Tiny stand-ins for the four MNIST IDX files (gzipped): a bright block whose place is the
    digit, on sparse noise, with half the labels shown at a random place (so training keeps
    many support vectors and takes a while)."""
    import gzip

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        labels = rng.integers(10, size=n).astype(np.uint8)
        shown = np.where(rng.random(n) < 0.5, labels, rng.integers(10, size=n))
        images = ((rng.random((n, 28, 28)) < 0.05) * rng.integers(256, size=(n, 28, 28))).astype(np.uint8)
        for image, digit in zip(images, shown):
            i, j = 4 + 7 * (digit % 3), 4 + 6 * (digit // 3)
            image[i:i + 6, j:j + 5] = 255
        for kind, array in (("images-idx3-ubyte", images), ("labels-idx1-ubyte", labels)):
            header = bytes([0, 0, 8, array.ndim]) + np.array(array.shape, dtype=">u4").tobytes()
            (folder / f"{prefix}-{kind}.gz").write_bytes(gzip.compress(header + array.tobytes()))


def mnist8m_reference(cluster):
    """mnist8m.sbatch, uninterrupted, generating DATA and TEST from tiny IDX files first:
    (folder, DATA, TEST, model, log text). The reference of the time-limit test."""
    if "mnist8m" not in _memo:
        folder = cluster.root / "mnist8m"
        write_idx_source(folder / "idx", 2000, 500, seed=0)
        data, test = folder / "data" / "train.h5", folder / "data" / "test.h5"
        out, log = folder / "ref", folder / "ref.out"
        job = cluster.submit("mnist8m.sbatch", log, "--time=15", "--signal=TERM@60", DATA=data, TEST=test, OUT=out,
                             MNIST_SOURCE=folder / "idx", CHECKPOINT_EVERY="3600s", **MNIST8M)
        text = cluster.run_to_end(job, log, timeout=420)
        _memo["mnist8m"] = folder, data, test, out / "mnist8m.model.h5", text
    return _memo["mnist8m"]


# ---------------------------------------------------------------- the tests


@pytest.mark.timeout(600)
def test_two_node_example_real_slurm_matches_mpiexec(slurm):
    folder, reference = two_node_reference(slurm)
    out, log = folder / "job", folder / "job.out"
    job = slurm.submit("two_node_example.sbatch", log, "--time=10", "--signal=TERM@60",
                       DATA=folder / "train.h5", TEST=folder / "test.h5", OUT=out, **TWO_NODE)
    text = slurm.run_to_end(job, log, timeout=300)
    assert "30000 rows, 12 features, dense; 2 ranks x 1 thread" in text, text  # one MPI job of 2 ranks under srun
    assert f"ppack: model written to {out}/model.h5" in text and "requeueing" not in text, text
    same_model(out / "model.h5", reference)
    # and the same decisions on the test set
    from mpi4py import MPI

    from ppack import load_model  # the public one: it registers the model types itself
    from ppack.data.hdf5 import read_rows

    X, _ = read_rows(folder / "test.h5", 0, 2000)
    decisions = [load_model(path, comm=MPI.COMM_SELF).decision_function(X) for path in (out / "model.h5", reference)]
    np.testing.assert_array_equal(*decisions)


@pytest.mark.timeout(600)
def test_node_failure_real_slurm_resumes_from_periodic_checkpoint(slurm):
    """Once the job has written a periodic checkpoint, every one of its processes dies at
    once by SIGKILL, as on a crashed node, its shared memory is lost, then SLURM requeues it,
    as it does itself for a --requeue job whose node failed. (scancel and scontrol requeue
    of a running job send SIGTERM first, and ppack would answer with a fresh checkpoint; a
    node failure gives no such chance.) The first start is endless, so the kill is its only
    way out."""
    folder, _ = two_node_reference(slurm)
    out, log = folder / "failure", folder / "failure.out"
    checkpoint = out / "checkpoint.h5"
    python = endless_python(folder / "failure-python")
    job = slurm.submit("two_node_example.sbatch", log, "--time=10", "--signal=TERM@60", DATA=folder / "train.h5",
                       TEST=folder / "test.h5", OUT=out, CHECKPOINT_EVERY="5p", PYTHON=python, **TWO_NODE)
    slurm.wait(job, log, lambda states, _: checkpoint.exists(), 300, "periodic checkpoint")
    shared_memory = kill_job_processes(job)
    states = slurm.wait(job, log, lambda states, _: set(states) <= FINAL_STATES, 120, "end after SIGKILL")
    # The node "reboots": its shared memory is gone. (Left in place, MPICH's segment, named
    # after SLURM's PMI2 key space "jobid.stepid", would be attached by the requeued job's
    # ranks, which have the same job and step ids, and MPI_Init would fail.)
    for path in shared_memory:
        path.unlink(missing_ok=True)
    assert states != ["COMPLETED"] and not (out / "model.h5").exists(), states
    saved = checkpoint_iteration(checkpoint)
    assert 0 < saved < ENDLESS
    total = saved + 20 * int(TWO_NODE["PACK"])
    set_total(python, total)
    scontrol("requeue", job)  # what SLURM does itself when a --requeue job's node fails
    text = slurm.run_to_end(job, log, timeout=300)
    assert "stopped at iteration" not in text, text  # no SIGTERM: the periodic checkpoint is what survived
    assert f"resumed from {checkpoint} at iteration {saved}\n" in text, text
    assert restarts(job) == [1] and f"ppack: model written to {out}/model.h5" in text, text
    same_model(out / "model.h5", uninterrupted_reference(slurm, python, out, total))


@pytest.mark.timeout(900)
def test_mnist8m_real_slurm_generates_data_and_trains(slurm):
    folder, data, test, model, text = mnist8m_reference(slurm)
    assert f"generating DATA={data}: {MNIST8M['ROWS']} rows, seed 0" in text and f"writing TEST={test}" in text
    assert f"{MNIST8M['ROWS']} rows, 784 features, dense; 2 ranks x 1 thread" in text, text
    assert f"ppack: model written to {model}" in text and "requeueing" not in text, text
    with h5py.File(model, "r") as f:
        assert list(f["classes"][...]) == list(range(10)) and f["coef"].shape[1] == 10
    # the file the job generated on 2 ranks equals one generated on 1 rank
    again = folder / "again.h5"
    proc = run_ppack(["data", "mnist8m", again, "--rows", MNIST8M["ROWS"], "--seed", "0", "--source", folder / "idx",
                      "--quiet"], ranks=1, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with h5py.File(data, "r") as a, h5py.File(again, "r") as b:
        for name in ("X", "y"):
            np.testing.assert_array_equal(a[name][...], b[name][...])


@pytest.mark.timeout(900)
def test_time_limit_real_slurm_sigterm_requeue_resume_same_model(slurm):
    """A one-minute limit and --signal=TERM@20: SLURM sends SIGTERM to the ranks 10 to 40 s
    after the start (it checks every 30 s, so up to 30 s early); ppack checkpoints, the script
    requeues the job, and the next start resumes. The first start is endless, so only the
    signal ends it. Once the first stop is seen the pending job gets a longer limit, so the
    test needs one restart, not several."""
    folder, data, test, _, _ = mnist8m_reference(slurm)
    out, log = folder / "limit", folder / "limit.out"
    python = endless_python(folder / "limit-python")
    job = slurm.submit("mnist8m.sbatch", log, "--time=1", "--signal=TERM@20", DATA=data, TEST=test, OUT=out,
                       CHECKPOINT_EVERY="3600s", PYTHON=python, **MNIST8M)
    first = slurm.wait(job, log, lambda states, text: "requeueing job" in text, 240, "SIGTERM stop and requeue")
    scontrol("update", f"JobId={job}", "TimeLimit=15")
    text = log.read_text()
    stop = re.search(r"stopped at iteration (\d+) of (\d+) \(SIGTERM\); state saved to (\S+);", text)
    assert stop and int(stop[2]) == ENDLESS, (first, text)
    saved = int(stop[1])
    assert 0 < saved == checkpoint_iteration(stop[3]) and stop[3] == f"{out}/mnist8m.checkpoint.h5", text
    total = saved + 2000
    set_total(python, total)
    text = slurm.run_to_end(job, log, timeout=420)
    assert f"ppack: stopped by SIGTERM, state saved in {stop[3]}; requeueing job {job} (restart 1 of" in text, text
    resumed = re.findall(r"resumed from \S+ at iteration (\d+)", text)
    assert resumed and resumed[0] == stop[1], text
    assert restarts(job)[0] >= 1 and f"ppack: model written to {out}/mnist8m.model.h5" in text, text
    same_model(out / "mnist8m.model.h5", uninterrupted_reference(slurm, python, out, total))


@pytest.mark.timeout(900)
def test_predict_real_slurm_one_model(slurm):
    folder, data, test, model, _ = mnist8m_reference(slurm)
    out, log = folder / "predict", folder / "predict.out"
    job = slurm.submit("predict.sbatch", log, "--time=10", "--signal=B:USR1@60", MODEL=model, DATA=test, OUT=out)
    text = slurm.run_to_end(job, log, timeout=300)
    decisions = np.load(out / "mnist8m.model.decisions.npy")
    metrics = json.loads((out / "mnist8m.model.decisions.metrics.json").read_text())
    trained = json.loads((model.parent / "mnist8m.metrics.json").read_text())
    with h5py.File(test, "r") as f:
        y = f["y"][...]
    assert decisions.shape == (y.size, 11), decisions.shape  # ten decision columns, then the label
    np.testing.assert_array_equal(decisions[:, 10], np.argmax(decisions[:, :10], axis=1))
    assert metrics["test_accuracy"] == trained["test_accuracy"] == np.mean(decisions[:, 10] == y), text
    assert "USR1" not in text, text


@pytest.mark.timeout(600)
def test_sweep_array_real_slurm_two_rows(slurm):
    folder, _ = two_node_reference(slurm)
    out, log = folder / "sweep", folder / "sweep-%A_%a.out"
    job = slurm.submit("sweep_array.sbatch", log, "--array=0-1", "--time=10", "--signal=TERM@60",
                       DATA=folder / "train.h5", TEST=folder / "test.h5", OUT=out, EPOCHS="1")
    slurm.wait(job, log, lambda states, _: len(states) == 2 and set(states) <= FINAL_STATES, 300, "both tasks' end")
    assert set(job_states(job)) == {"COMPLETED"}
    slurm.harvest(job)
    logs = {int(p.stem.rsplit("_", 1)[1]): p.read_text() for p in folder.glob(f"sweep-{job}_*.out")}
    assert sorted(logs) == [0, 1], logs
    for index, (gamma, C) in enumerate([("0.5", "2"), ("0.5", "8")]):
        assert f"sweep row {index}: gamma={gamma} C={C}" in logs[index], logs[index]
        metrics = json.loads((out / f"gamma{gamma}_C{C}.metrics.json").read_text())
        assert (metrics["gamma"], metrics["C"], metrics["ranks"]) == (float(gamma), float(C), 2)
        assert 0.5 < metrics["test_accuracy"] <= 1 and (out / f"gamma{gamma}_C{C}.model.h5").exists()
