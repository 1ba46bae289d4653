"""`train`, in process on every rank of the test run and as real mpiexec jobs: both trainers, every
bad option or input ending every rank with one clear message and no model file."""
import json
import os
import re

import h5py
import numpy as np
import pytest
from mpi4py import MPI

from ppack.base import load_model
from ppack.cli import main
from ppack.mpi.comm import polite_barrier

from helpers import TRAIN, fails_with, make_problem, run_ppack, write_libsvm

WORLD = MPI.COMM_WORLD


def test_bad_inputs_give_clear_errors_and_leave_no_model(mpi_tmp_path, capsys):
    d = mpi_tmp_path
    X, y = make_problem(200, 6, seed=33)
    write_libsvm(d / "good.txt", X, y)
    write_libsvm(d / "one_class.txt", X, np.ones(200))
    Xw, yw = make_problem(50, 9, seed=34)
    write_libsvm(d / "wide.txt", Xw, yw)
    if WORLD.Get_rank() == 0:
        (d / "malformed.txt").write_text("1 1:0.5 2:0.25\n-1 1:0.5 2:0.25\n1 1:0.5 two:3\n")
        (d / "nan.txt").write_text("1 1:0.5\n-1 1:nan\n")
        with h5py.File(d / "layout.h5", "w") as f:
            f["features"] = X
    polite_barrier(WORLD)
    model = str(d / "m.h5")
    fails_with(capsys, ["train", "--data", str(d / "missing.h5"), "--model", model], "missing.h5: No such file")
    fails_with(capsys, ["train", "--data", str(d / "layout.h5"), "--model", model], "layout.h5")
    fails_with(capsys, ["train", "--data", str(d / "malformed.txt"), "--model", model], "malformed.txt: line 3")
    fails_with(capsys, ["train", "--data", str(d / "nan.txt"), "--model", model], "nan.txt: line 2")
    fails_with(capsys, ["train", "--data", str(d / "one_class.txt"), "--model", model], "found one class")
    fails_with(capsys, ["train", "--data", str(d / "good.txt"), "--C", "-1", "--model", model], "C: must be")
    assert not (d / "m.h5").exists()
    main(["train", "--data", str(d / "good.txt"), "--model", model, *TRAIN])
    fails_with(capsys, ["predict", "--model", model, "--data", str(d / "wide.txt")],
               "the data has 9 features but the model was trained with 6")
    fails_with(capsys, ["predict", "--model", str(d / "good.txt"), "--data", str(d / "good.txt")],
               "good.txt: not an HDF5 model file")
    fails_with(capsys, ["predict", "--model", model, "--data", str(d / "good.txt"), "--output",
                        str(d / "out.xyz")], "--output: unknown file type '.xyz'")
    assert not (d / "out.xyz").exists()
    # a test set with fewer features than the model is fine: the missing features are zeros
    narrow = X.copy()
    narrow[:, 4:] = 0.0
    write_libsvm(d / "narrow.txt", narrow[:, :4], y)
    main(["predict", "--model", model, "--data", str(d / "narrow.txt"), "--output", str(d / "narrow.npy"), "--quiet"])
    expected = load_model(model, WORLD).decision_function(narrow)
    if WORLD.Get_rank() == 0:
        got = np.load(d / "narrow.npy")[:, 0]
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
        assert not np.allclose(expected, load_model(model, MPI.COMM_SELF).decision_function(X))
    polite_barrier(WORLD)


# (command-line options, what rank 0's one-line error must say): every bad option or solver
# option, and every option the chosen trainer does not read, ends every rank with status 1
BAD_OPTIONS = [
    (["--pack", "0"], "pack: must be an integer >= 1, got 0"),
    (["--tol-window", "0"], "tol_window: must be an integer >= 1, got 0"),
    (["--gamma", "-1"], "gamma: must be a finite number > 0"),
    (["--degree", "0", "--kernel", "poly"], "degree: must be an integer >= 1, got 0"),
    (["--epochs", "0"], "epochs: must be a finite number > 0 or 'auto', got 0.0"),
    (["--solver-option", "tol=0.1"], "--solver-option: applies to the linear solvers"),
    (["--loss", "l2"], "--loss: applies to the linear solvers"),
    (["--features", "poly2"], "--features: applies to the linear solvers"),
    (["--rounds", "5"], "--rounds: applies to the linear solvers"),
    (["--solver", "dcd", "--kernel", "poly"], "--kernel: applies to the kernel trainer (--solver packsvm)"),
    (["--solver", "dcd", "--pack", "10"], "--pack: applies to the kernel trainer"),
    (["--solver", "dcd", "--checkpoint", "state.h5"], "--checkpoint: applies to the kernel trainer"),
    (["--solver", "dcd", "--bias"], "--bias: applies to the kernel trainer"),
    (["--solver", "dcd", "--solver-option", "tol=-1"], "tol: must be a finite number > 0, got -1"),
    (["--solver", "llsvm", "--solver-option", "tol=-1"], "tol: must be a finite number > 0, got -1"),
    (["--solver", "stream", "--solver-option", "shrink=1"], "solver option shrink: not an option of the stream solver"),
    (["--solver", "dcd", "--solver-option", "max_epochs=2.5"], "max_epochs: must be an integer >= 1, got 2.5"),
    (["--solver", "dcd", "--solver-option", "shrinking=maybe"], "shrinking: must be True or False, got 'maybe'"),
    (["--solver", "dcd", "--solver-option", "cache_rows=10"],
     "solver option cache_rows: not an option of the dcd solver; expected one of"),
    (["--solver", "stream", "--solver-option", "tol"], "--solver-option: expected NAME=VALUE, got 'tol'"),
    (["--solver", "dcd", "--features", "cubic"], "features: feature map: expected identity, poly2"),
    (["--solver", "dcd", "--features", "shifts:1"], "shifts: 6 features are not a square image"),
    (["--solver", "pegasos", "--loss", "l2"], "loss: pegasos optimises the hinge loss only"),
    (["--solver", "dcd", "--p", "1.5"], "p: only the alm solver takes a loss power p, not dcd"),
    (["--solver", "alm", "--p", "2.5"], "p: must be a finite number >= 1 and <= 2 or None, got 2.5"),
    (["--solver", "dcd", "--rounds", "0"], "rounds: must be an integer >= 1, got 0"),
    (["--solver", "dcd", "--C", "0"], "C: must be a finite number > 0, got 0.0"),
    # given options whose value is False or zero: given all the same
    (["--no-bias"], "--no-bias: applies to the linear solvers"),
    (["--solver", "dcd", "--no-average"], "--no-average: applies to the kernel trainer"),
    (["--solver", "dcd", "--coef0", "0"], "--coef0: applies to the kernel trainer"),
    (["--epsilon", "0"], "--epsilon: does not apply to --svm-type c_svc"),
    (["--solver", "dcd", "--delay", "mean=1ms"], "--delay: applies to the kernel trainer (--solver packsvm)"),
    (["--solver", "dcd", "--pipeline", "on"], "--pipeline: applies to the kernel trainer"),
    (["--delay", "mean=1ms,ranks=0+9"], "delay ranks=0+9: rank 9 is not among the ranks, 0 to"),
]


@pytest.mark.parametrize("options,message", [
    (["--pipeline", "bogus"], "argument --pipeline: invalid choice: 'bogus' (choose from 'auto', 'on', 'off')"),
    (["--delay", "mean=2"], "argument --delay: mean=2: not seconds with a unit or a percentage; expected mean=X"),
    (["--delay", "often"], "argument --delay: 'often': not an item of a delay; expected mean=X"),
])
def test_a_bad_pipeline_or_delay_is_a_usage_error(options, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(["train", *options], comm=MPI.COMM_SELF)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_unwritable_outputs_and_foreign_checkpoints_fail_before_any_data_is_read(mpi_tmp_path, capsys):
    """The data path does not exist either: the error names the output, so it came first."""
    d = mpi_tmp_path
    missing = str(d / "missing.h5")
    fails_with(capsys, ["train", "--data", missing, "--model", str(d / "no" / "m.h5")],
               f"--model {d / 'no' / 'm.h5'}: the folder {d / 'no'} does not exist")
    fails_with(capsys, ["train", "--data", missing, "--metrics-json", str(d)], f"--metrics-json {d}: is a folder")
    fails_with(capsys, ["train", "--data", missing, "--checkpoint", str(d / "no" / "c.h5")],
               f"--checkpoint {d / 'no' / 'c.h5'}: the folder {d / 'no'} does not exist")
    if WORLD.Get_rank() == 0:
        (d / "notes.h5").write_text("not a checkpoint")
    polite_barrier(WORLD)
    fails_with(capsys, ["train", "--data", missing, "--checkpoint", str(d / "notes.h5"), "--resume"],
               f"{d / 'notes.h5'}: not a readable HDF5 file")
    fails_with(capsys, ["predict", "--model", missing, "--data", missing, "--output", str(d / "no" / "o.npy")],
               f"--output {d / 'no' / 'o.npy'}: the folder {d / 'no'} does not exist")
    fails_with(capsys, ["convert", missing, str(d / "no" / "x.h5")], "the folder")


@pytest.mark.parametrize("bad", ["0", "-5"])
def test_threads_below_one_are_refused_before_any_data_is_read(bad, mpi_tmp_path, capsys):
    missing = str(mpi_tmp_path / "missing.h5")
    for command in (["train", "--data", missing], ["predict", "--model", missing, "--data", missing]):
        fails_with(capsys, [*command, "--threads", bad], f"--threads: must be an integer >= 1, got {bad}")


@pytest.mark.parametrize("options,message", BAD_OPTIONS)
def test_bad_options_and_combinations_give_one_line_errors(options, message, mpi_tmp_path, capsys):
    X, y = make_problem(60, 6, seed=40)
    write_libsvm(mpi_tmp_path / "train.txt", X, y)
    fails_with(capsys, ["train", "--data", str(mpi_tmp_path / "train.txt"), "--model",
                        str(mpi_tmp_path / "m.h5"), *options], message)
    assert not (mpi_tmp_path / "m.h5").exists()


@pytest.mark.job
@pytest.mark.second_tier  # starts its own jobs: the CI's second tier keeps the first under 4 minutes
def test_real_mpiexec_jobs_exit_cleanly(tmp_path):
    """Whole jobs on 2 ranks: a run succeeds; bad input ends every rank with status 1, one
    message, no traceback, no MPI_Abort, no model file. (Each option's error is tested
    in-process on every rank above.)"""
    X, y = make_problem(300, 6, sparse=True, seed=35)
    from ppack.data.hdf5 import write_dataset

    write_dataset(tmp_path / "train.h5", X, y, storage="csr")
    ok = run_ppack(["train", "--data", tmp_path / "train.h5", "--test", tmp_path / "train.h5",
                    "--model", tmp_path / "m.h5", "--iterations", "600", "--pack", "50"], ranks=2)
    assert ok.returncode == 0, ok.stderr
    assert "test accuracy" in ok.stdout and "2 ranks" in ok.stdout
    assert (tmp_path / "m.h5").exists()
    predict = run_ppack(["predict", "--model", tmp_path / "m.h5", "--data", tmp_path / "train.h5",
                         "--output", tmp_path / "d.h5"], ranks=2)
    assert predict.returncode == 0, predict.stderr
    with h5py.File(tmp_path / "d.h5", "r") as f:
        assert f["decision"].shape == (300,) and f["label"].shape == (300,)

    missing = run_ppack(["train", "--data", tmp_path / "nope.h5", "--model", tmp_path / "bad.h5"], ranks=2, timeout=120)
    assert missing.returncode == 1, missing.stderr
    assert missing.stderr.count("nope.h5: No such file") == 1  # printed once, by rank 0
    assert "Traceback" not in missing.stderr and "Abort" not in missing.stderr + missing.stdout
    assert not (tmp_path / "bad.h5").exists()
    assert list(tmp_path.glob(".*tmp")) == []


@pytest.mark.parametrize("extra", [[], ["--features", "poly2", "--averaging", "oneshot"]])
def test_linear_solver_train_and_predict(extra, mpi_tmp_path, capsys):
    X, y = make_problem(500, 6, seed=36)
    d = mpi_tmp_path
    write_libsvm(d / "train.txt", X, y)
    main(["train", "--solver", "dcd", "--data", str(d / "train.txt"), "--test", str(d / "train.txt"), "--C", "2",
          "--model", str(d / "lin.h5"), "--metrics-json", str(d / "lin.json"), "--quiet",
          "--solver-option", "tol=0.01", *extra])
    main(["predict", "--model", str(d / "lin.h5"), "--data", str(d / "train.txt"), "--output", str(d / "o.npy"),
          "--quiet"])
    if WORLD.Get_rank() == 0:
        metrics = json.loads((d / "lin.json").read_text())
        out = np.load(d / "o.npy")
        assert metrics["solver"] == "dcd" and metrics["ranks"] == WORLD.Get_size()
        assert metrics["test_accuracy"] == pytest.approx(np.mean(out[:, 1] == y))
        assert metrics["primal_objective"] > 0 and len(metrics["primal_by_round"]) == metrics["rounds"]
        with h5py.File(d / "lin.h5", "r") as f:
            assert f.attrs["model_type"] == "linear" and f.attrs["solver"] == "dcd"
    polite_barrier(WORLD)
    fails_with(capsys, ["train", "--solver", "dcd", "--data", str(d / "train.txt"), "--p", "1.5"],
               "p: only the alm solver")


@pytest.mark.parametrize("ranks_per_node", ["1", ""])
def test_the_log_and_metrics_say_how_checkpoints_and_the_model_were_written(ranks_per_node, mpi_tmp_path, capsys,
                                                                             monkeypatch):
    """One group per rank (PPACK_RANKS_PER_NODE=1) or the machine's one node: one sequential open
    per group, for each of the 9 checkpoints (every 2 packs of 18) and for the model."""
    from ppack.collective_write import parallel_hdf5

    monkeypatch.setenv("PPACK_RANKS_PER_NODE", ranks_per_node)
    X, y = make_problem(300, 6, seed=37)
    d = mpi_tmp_path
    write_libsvm(d / "train.txt", X, y)
    main(["train", "--data", str(d / "train.txt"), "--model", str(d / "m.h5"), "--checkpoint", str(d / "c.h5"),
          "--checkpoint-every", "2p", "--metrics-json", str(d / "m.json"), *TRAIN[:-1]])
    nodes = WORLD.Get_size() if ranks_per_node else 1
    out = capsys.readouterr().out
    if WORLD.Get_rank() == 0:
        metrics = json.loads((d / "m.json").read_text())
        if parallel_hdf5():  # all ranks at once, whatever the grouping
            how, said = {"method": "parallel", "nodes": None, "sequential_opens": 2}, "by parallel HDF5, 2"
        else:
            how = {"method": "node leaders", "nodes": nodes, "sequential_opens": nodes}
            said = f"by the leaders of {nodes} node(s), {nodes}"
        assert metrics["file_writes"] == {"checkpoint": dict(how, written=9), "save": how}
        assert 0 < metrics["seconds"]["checkpoint"] and 0 < metrics["seconds"]["save"]
        assert f"9 checkpoint(s) written to {d / 'c.h5'} in " in out
        assert f"{said} sequential file open(s)" in out
        assert f"model written to {d / 'm.h5'} in " in out
    polite_barrier(WORLD)


def test_inputs_are_checked_before_training_and_a_failing_test_set_leaves_the_model(mpi_tmp_path, capsys):
    """A missing, truncated or other-width HDF5 --test fails before the first pack (no
    'trained in' line, no model); a test set that fails only when read (a bad line of LIBSVM
    text) fails after the model is written, which stays."""
    from ppack.data.hdf5 import write_dataset

    d = mpi_tmp_path
    X, y = make_problem(200, 6, seed=50)
    write_libsvm(d / "train.txt", X, y)
    if WORLD.Get_rank() == 0:
        for name, width in (("wide.h5", 9), ("narrow.h5", 4)):
            write_dataset(d / name, *make_problem(40, width, seed=51))
        write_dataset(d / "whole.h5", X, y)
        (d / "truncated.h5").write_bytes((d / "whole.h5").read_bytes()[:2000])
        (d / "malformed.txt").write_text("1 1:0.5 2:0.25\n-1 1:0.5\n1 1:0.5 two:3\n")
    polite_barrier(WORLD)
    model = d / "m.h5"
    train = ["train", "--data", str(d / "train.txt"), "--model", str(model), *TRAIN[:-1]]
    for test, message in (("missing.h5", "No such file"), ("truncated.h5", "cannot open HDF5 file"),
                          ("wide.h5", "the data has 9 features but the training data"),
                          ("narrow.h5", "the data has 4 features but the training data")):
        with pytest.raises(SystemExit) as info:
            main([*train, "--test", str(d / test)])
        out, err = capsys.readouterr()
        assert info.value.code == 1
        assert "trained in" not in out and not model.exists(), out
        if WORLD.Get_rank() == 0:
            assert err.count(f"--test {d / test}: {message}") == 1, err
        polite_barrier(WORLD)
    with pytest.raises(SystemExit) as info:
        main([*train, "--test", str(d / "malformed.txt")])
    out, err = capsys.readouterr()
    assert info.value.code == 1 and "Traceback" not in err
    if WORLD.Get_rank() == 0:
        assert "trained in" in out and f"model written to {model}" in out, out
        assert err.count("malformed.txt: line 3") == 1, err
    polite_barrier(WORLD)
    assert load_model(model, WORLD).n_features_in_ == 6
    fails_with(capsys, ["predict", "--model", str(d / "none.h5"), "--data", str(d / "train.txt")],
               f"--model {d / 'none.h5'}: No such file")
    fails_with(capsys, ["predict", "--model", str(model), "--data", str(d / "truncated.h5")],
               f"--data {d / 'truncated.h5'}: cannot open HDF5 file")


def _endless_job_checkpointing(tmp_path, state, extra):
    """An endless `train` job on 2 ranks (a Popen), checkpointing to ``state`` every 5 packs,
    returned once its first checkpoint shows training under way."""
    import subprocess
    import sys
    import time

    from ppack.data.hdf5 import write_dataset

    from helpers import clean_mpi_env, mpiexec

    write_dataset(tmp_path / "train.h5", *make_problem(2000, 10, seed=52))
    args = ["train", "--data", tmp_path / "train.h5", "--iterations", 10 ** 12, "--pack", "20", "--checkpoint", state,
            "--checkpoint-every", "5p", *extra]
    job = subprocess.Popen([mpiexec(), "-n", "2", sys.executable, "-m", "ppack", *map(str, args)], env=clean_mpi_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not state.exists() and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if not (state.exists() and job.poll() is None):
        job.kill()
        raise AssertionError("no periodic checkpoint within 240 s")
    return job


@pytest.mark.job
@pytest.mark.second_tier  # starts its own jobs: the CI's second tier keeps the first under 4 minutes
def test_ctrl_c_stops_every_rank_after_the_pack_with_a_checkpoint(tmp_path):
    """SIGINT to mpiexec (Ctrl-C; hydra forwards it to the ranks) stops the run as SIGTERM
    does: a complete checkpoint at the iteration it names, one line saying how to resume, no
    traceback or MPI abort; the status is the shell's 130. The run is endless, so the signal is
    its only way out; it is sent once the first periodic checkpoint shows training under way."""
    import signal

    state = tmp_path / "state.h5"
    job = _endless_job_checkpointing(tmp_path, state, ["--model", tmp_path / "m.h5"])
    try:
        job.send_signal(signal.SIGINT)
        out, err = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 130, err
    assert "Traceback" not in err and "Abort(" not in err + out, err
    stop = re.search(rf"stopped at iteration (\d+) of 1000000000000 \(SIGINT\); state saved to {re.escape(str(state))}; "
                     r"run the same command with --resume to continue", out)
    assert stop, out
    with h5py.File(state, "r") as f:
        assert f.attrs["complete"] and int(f.attrs["iteration"]) == int(stop[1]) > 0
    assert not (tmp_path / "m.h5").exists()


def _descendants(pid):
    """Process ids under ``pid`` (read from /proc), children before grandchildren."""
    from pathlib import Path

    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(0), [])
        found += children
        todo += children
    return found


@pytest.mark.job
@pytest.mark.second_tier  # starts its own jobs: the CI's second tier keeps the first under 4 minutes
def test_a_rank_killed_mid_pack_ends_the_pipelined_job_without_a_hang(tmp_path):
    """SIGKILL of one rank while the pipelined packs' collectives are in flight: the launcher
    ends the job (non-zero status) instead of leaving the other rank in a Wait forever."""
    import signal
    from pathlib import Path

    job = _endless_job_checkpointing(tmp_path, tmp_path / "state.h5", ["--pipeline", "on"])
    try:
        ranks = [pid for pid in _descendants(job.pid)
                 if b"ppack" in Path(f"/proc/{pid}/cmdline").read_bytes() and b"train" in
                 Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(ranks) >= 2, ranks
        os.kill(ranks[-1], signal.SIGKILL)
        job.communicate(timeout=120)  # a hang fails here
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode != 0


def test_pipeline_and_delay_reach_the_run_and_its_metrics(mpi_tmp_path):
    """--pipeline and --delay go to the estimator and its fit; the metrics say which schedule
    and which delay the run had."""
    X, y = make_problem(120, 6, seed=41)
    write_libsvm(mpi_tmp_path / "train.txt", X, y)
    metrics = mpi_tmp_path / "m.json"
    main(["train", "--data", str(mpi_tmp_path / "train.txt"), "--pipeline", "off", "--delay", "mean=100us,ranks=one",
          "--metrics-json", str(metrics), *TRAIN])
    if WORLD.Get_rank() == 0:
        got = json.loads(metrics.read_text())
        assert got["pipeline"] == "off"
        assert got["delay"] == "uniform, mean 100 us, one rank a pack, seed 0"
    polite_barrier(WORLD)
