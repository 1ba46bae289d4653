"""Checkpoint and resume: a stopped run continues exactly where it stopped."""
import copy

import h5py
import numpy as np
import pytest
from mpi4py import MPI

from ppack.errors import PPackError
from ppack import PackSVC
from ppack.mpi.comm import polite_barrier

from helpers import empty_folder_and_failing_rank_1, make_problem

WORLD = MPI.COMM_WORLD
SELF = MPI.COMM_SELF
PARAMS = {"kernel": "rbf", "gamma": 0.2, "C": 5.0, "iterations": 1200, "pack": 50, "seed": 5}


def interrupted_and_resumed(comm, X, y, path):
    first = PackSVC(comm=comm, **PARAMS).fit(X, y, checkpoint=path, checkpoint_every_packs=4, stop_after_packs=10)
    assert first.stopped_
    with h5py.File(path, "r") as f:
        assert f.attrs["complete"] and f.attrs["iteration"] == 10 * PARAMS["pack"]
    return PackSVC(comm=comm, **PARAMS).fit(X, y, checkpoint=path, resume=True)


@pytest.mark.parametrize("sparse", [False, True])
def test_resume_on_one_rank_equals_an_uninterrupted_run(sparse, tmp_path):
    X, y = make_problem(500, 8, sparse=sparse, seed=41)
    full = PackSVC(comm=SELF, **PARAMS).fit(X, y)
    resumed = interrupted_and_resumed(SELF, X, y, tmp_path / "state.h5")
    assert resumed.resumed_from_ == 500 and not resumed.stopped_
    assert resumed.training_["bytes"] == full.training_["bytes"]  # the packs before the stop count too
    np.testing.assert_array_equal(np.sort(resumed.table_.keys), np.sort(full.table_.keys))
    np.testing.assert_array_equal(resumed.decision_function(X), full.decision_function(X))
    # the convergence diagnostic's figures (the loss windows go through the checkpoint) and verdict
    assert resumed.training_["convergence"] == full.training_["convergence"]
    assert resumed.training_["convergence"]["window_means"]  # a window closed, across the stop
    assert len(resumed.training_["convergence"]["loss_curve"]) == 8  # windows of 150 rows, across the stop too
    assert (resumed.n_iter_, resumed.converged_) == (full.n_iter_, full.converged_)


@pytest.mark.mpi(min_size=2)
def test_resume_on_all_ranks_is_exact_and_other_rank_counts_redistribute(mpi_tmp_path):
    X, y = make_problem(600, 8, sparse=True, seed=42)
    path = mpi_tmp_path / "state.h5"
    full = PackSVC(comm=WORLD, **PARAMS).fit(X, y)
    resumed = interrupted_and_resumed(WORLD, X, y, path)
    assert resumed.resumed_from_ == 500
    # same ranks: every entry back on its rank and slot, so the run continues bit for bit
    np.testing.assert_array_equal(resumed.decision_function(X), full.decision_function(X))
    polite_barrier(WORLD)
    # one rank reading the 4-rank checkpoint: entries dealt out again, same model up to rounding
    on_one = PackSVC(comm=SELF, **PARAMS).fit(X, y, checkpoint=path, resume=True)
    np.testing.assert_allclose(on_one.decision_function(X), full.decision_function(X), rtol=1e-9, atol=1e-9)


def test_resume_refuses_a_checkpoint_of_other_settings(tmp_path):
    X, y = make_problem(300, 6, seed=43)
    PackSVC(comm=SELF, **PARAMS).fit(X, y, checkpoint=tmp_path / "s.h5", stop_after_packs=2)
    with pytest.raises(PPackError, match="gamma=0.2.*gamma=0.3"):
        PackSVC(comm=SELF, **dict(PARAMS, gamma=0.3)).fit(X, y, checkpoint=tmp_path / "s.h5", resume=True)


def test_checkpoint_every_packs_keeps_one_complete_file(tmp_path):
    X, y = make_problem(300, 6, seed=44)
    model = PackSVC(comm=SELF, **dict(PARAMS, iterations=600)).fit(X, y, checkpoint=tmp_path / "s.h5",
                                                                    checkpoint_every_packs=5)
    assert not model.stopped_
    with h5py.File(tmp_path / "s.h5", "r") as f:
        assert f.attrs["complete"] and f.attrs["iteration"] == 500  # the last multiple of 5 packs
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.h5"]  # no temporary files left


@pytest.mark.job
@pytest.mark.second_tier  # three real jobs
def test_sigterm_writes_a_checkpoint_and_resume_finishes(tmp_path):
    """SLURM's time limit, for real: SIGTERM to one rank of a 4-rank job stops every rank
    after the current pack with a complete checkpoint; --resume on 2 ranks then finishes
    the run, with the model of an uninterrupted run of as many iterations. The run is endless (10^12 iterations), so the signal is its only way out; it is sent once
    the first periodic checkpoint shows that training is under way."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from ppack.base import load_model
    from ppack.data.hdf5 import write_dataset

    from helpers import clean_mpi_env, mpiexec, run_ppack

    X, y = make_problem(3000, 20, seed=45)
    write_dataset(tmp_path / "train.h5", X, y)
    endless = str(10 ** 12)
    args = ["train", "--data", tmp_path / "train.h5", "--iterations", endless, "--pack", "20",
            "--checkpoint", tmp_path / "state.h5", "--checkpoint-every", "5p", "--model", tmp_path / "model.h5",
            "--dtype", "float64"]
    cmd = [mpiexec(), "-n", "4", sys.executable, "-m", "ppack", *map(str, args)]
    job = subprocess.Popen(cmd, env=clean_mpi_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not (tmp_path / "state.h5").exists() and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (tmp_path / "state.h5").exists() and job.poll() is None, "no periodic checkpoint within 240 s"
        found = subprocess.run(["pgrep", "-f", "--", f"-m ppack train .*{tmp_path}"], capture_output=True,
                               text=True).stdout
        ranks = [int(pid) for pid in found.split() if int(pid) != job.pid]  # the 4 python ranks under mpiexec
        assert len(ranks) == 4, found
        os.kill(ranks[-1], signal.SIGTERM)
        out, err = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 0, err
    assert "stopped at iteration" in out and "--resume" in out
    assert not (tmp_path / "model.h5").exists()
    with h5py.File(tmp_path / "state.h5", "r") as f:
        assert f.attrs["complete"]
        stopped_at = int(f.attrs["iteration"])
    assert 0 < stopped_at < 10 ** 12 and stopped_at % 20 == 0
    args[args.index(endless)] = str(stopped_at + 200)  # finish quickly, on another rank count
    done = run_ppack(args + ["--resume"], ranks=2)
    assert done.returncode == 0, done.stderr
    assert f"resumed from {tmp_path / 'state.h5'} at iteration {stopped_at}" in done.stdout
    # the uninterrupted run of as many iterations gives the same model (p-invariance: to 1e-9)
    straight = run_ppack(["train", "--data", tmp_path / "train.h5", "--iterations", stopped_at + 200, "--pack", "20",
                          "--model", tmp_path / "straight.h5", "--dtype", "float64"], ranks=2)
    assert straight.returncode == 0, straight.stderr
    resumed, uninterrupted = (load_model(tmp_path / name, MPI.COMM_SELF) for name in ("model.h5", "straight.h5"))
    assert resumed.training_["iterations_done"] == uninterrupted.training_["iterations_done"] == stopped_at + 200
    expected = uninterrupted.decision_function(X)
    np.testing.assert_allclose(resumed.decision_function(X), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())


def test_a_tol_run_resumed_mid_window_stops_where_an_uninterrupted_one_does(tmp_path):
    """The --tol windows are part of the state: stopped 350 rows into a 500-row window and
    resumed, the run converges at the same iteration with the same model."""
    X, y = make_problem(2000, 6, seed=46)
    params = dict(PARAMS, iterations=20000, pack=50, tol=0.05, tol_window=500)
    full = PackSVC(comm=SELF, **params).fit(X, y)
    assert full.training_["converged"] and full.training_["iterations_done"] < 20000
    first = PackSVC(comm=SELF, **params).fit(X, y, checkpoint=tmp_path / "s.h5", stop_after_packs=7)
    assert first.stopped_ and first.training_["iterations_done"] == 350
    resumed = PackSVC(comm=SELF, **params).fit(X, y, checkpoint=tmp_path / "s.h5", resume=True)
    assert resumed.training_["converged"]
    assert resumed.training_["iterations_done"] == full.training_["iterations_done"]
    np.testing.assert_array_equal(resumed.decision_function(X), full.decision_function(X))


def test_a_file_at_the_checkpoint_path_that_is_not_this_runs_checkpoint_is_refused(tmp_path):
    """Only a missing file starts afresh: a model, a truncated file or another run's
    checkpoint is an error naming the file, with or without resume, and is left as it was."""
    X, y = make_problem(300, 6, seed=47)
    model = PackSVC(comm=SELF, **dict(PARAMS, iterations=300)).fit(X, y)
    model.save(tmp_path / "model.h5")
    (tmp_path / "cut.h5").write_bytes((tmp_path / "model.h5").read_bytes()[:1000])
    PackSVC(comm=SELF, **PARAMS).fit(X, y, checkpoint=tmp_path / "other.h5", stop_after_packs=2)
    cases = [("model.h5", "attribute 'format': expected 'ppack-checkpoint', got 'ppack-model'"),
             ("cut.h5", "not a readable HDF5 file"),
             ("other.h5", "checkpoint was made with gamma=0.2, this run has gamma=0.5")]
    for name, message in cases:
        before = (tmp_path / name).read_bytes()
        for resume in (False, True):
            with pytest.raises(PPackError, match=message) as info:
                PackSVC(comm=SELF, **dict(PARAMS, gamma=0.5)).fit(X, y, checkpoint=tmp_path / name, resume=resume)
            assert str(info.value).startswith(str(tmp_path / name))
        assert (tmp_path / name).read_bytes() == before


def _checkpoint_contents(path):
    with h5py.File(path, "r") as f:
        return {k: v for k, v in f.attrs.items()}, {name: f[name][()] for name in f}


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("sparse", [False, True])
def test_checkpoint_is_written_rank_by_rank_without_gathering_the_table(sparse, mpi_tmp_path, monkeypatch):
    """Each rank writes its own shard in turn (no pickled gather of the table); the file holds
    every rank's entries in rank and slot order and the attributes one rank would write."""
    import scipy.sparse as sp

    import ppack.packsvm.loop as loop
    from ppack.packsvm.checkpoint import write_checkpoint

    from helpers import CountingComm, assert_rows_move_only_in_pieces

    seen, counting_of = [], []

    def counted(comm, path, table, state, stats, sampler, params, pending=None, *grid):
        counting = CountingComm(comm)
        counting_of.append(counting)
        report = write_checkpoint(counting, path, table, state, stats, sampler, params, pending, *grid)
        seen.append((counting.calls, table, state, copy.deepcopy(stats), sampler, params, pending))  # stats as written
        return report

    monkeypatch.setattr(loop, "write_checkpoint", counted)
    X, y = make_problem(400, 7, sparse=sparse, seed=63)
    path = mpi_tmp_path / f"state{sparse}.h5"
    PackSVC(comm=WORLD, **PARAMS).fit(X, y, checkpoint=path, stop_after_packs=6)
    calls, table, state, stats, sampler, params, pending = seen[-1]
    assert_rows_move_only_in_pieces(counting_of[-1])
    if WORLD.Get_size() > 1:  # one node here: the other ranks hand their rows to the leader
        assert calls["Send"] + calls["Recv"] > 0
    if sparse:
        indptr, indices, values = table.features
        rows = sp.csr_matrix((values, indices, indptr), shape=(table.n, 7)).toarray()
    else:
        rows = table.features.copy()
    parts = WORLD.gather((table.keys.copy(), table.coef[:, 0].copy(), rows))
    if WORLD.Get_rank() == 0:
        # what one rank would write about the same state (its attributes), and every shard in rank order
        write_checkpoint(SELF, mpi_tmp_path / "one.h5", table, state, stats, sampler, params, pending)
        attrs, data = _checkpoint_contents(path)
        one_attrs, _ = _checkpoint_contents(mpi_tmp_path / "one.h5")
        assert attrs.keys() == one_attrs.keys() and attrs["complete"] and attrs["ranks"] == WORLD.Get_size()
        for name in one_attrs:
            if name != "ranks":
                assert np.all(attrs[name] == one_attrs[name]), name
        np.testing.assert_array_equal(data["keys"], np.concatenate([p[0] for p in parts]))
        np.testing.assert_array_equal(data["coef"], np.concatenate([p[1] for p in parts]))
        counts = [len(p[0]) for p in parts]
        np.testing.assert_array_equal(data["owner"], np.repeat(np.arange(len(parts)), counts))
        np.testing.assert_array_equal(data["rank_offsets"], np.concatenate([[0], np.cumsum(counts)]))
        if sparse:
            saved = sp.csr_matrix((data["values"], data["indices"], data["indptr"]),
                                  shape=(len(data["keys"]), 7)).toarray()
        else:
            saved = data["features"]
        np.testing.assert_array_equal(saved, np.concatenate([p[2] for p in parts]))
        assert data["values" if sparse else "features"].dtype == table.dtype
    polite_barrier(WORLD)


@pytest.mark.mpi(min_size=2)
def test_a_failure_on_one_rank_during_a_checkpoint_raises_everywhere_and_leaves_no_file(mpi_tmp_path, monkeypatch):
    import ppack.packsvm.checkpoint as checkpoint

    d = empty_folder_and_failing_rank_1(mpi_tmp_path, monkeypatch, checkpoint, "shard_parts")
    X, y = make_problem(300, 6, seed=64)
    with pytest.raises(PPackError, match="disk full on rank 1"):
        PackSVC(comm=WORLD, **PARAMS).fit(X, y, checkpoint=d / "state.h5", stop_after_packs=2)
    polite_barrier(WORLD)
    assert list(d.iterdir()) == []


def test_a_checkpoint_without_rank_offsets_still_resumes_exactly(tmp_path):
    """Files written before ``rank_offsets`` existed: each rank finds its rows by ``owner``."""
    X, y = make_problem(500, 8, seed=65)
    full = PackSVC(comm=SELF, **PARAMS).fit(X, y)
    path = tmp_path / "state.h5"
    PackSVC(comm=SELF, **PARAMS).fit(X, y, checkpoint=path, stop_after_packs=10)
    with h5py.File(path, "r+") as f:
        del f["rank_offsets"]
    resumed = PackSVC(comm=SELF, **PARAMS).fit(X, y, checkpoint=path, resume=True)
    np.testing.assert_array_equal(resumed.decision_function(X), full.decision_function(X))


@pytest.mark.parametrize("comm", [pytest.param(SELF, id="1rank"),
                                  pytest.param(WORLD, id="all", marks=pytest.mark.mpi(min_size=2))])
def test_multiclass_weighted_and_averaged_runs_resume_exactly(comm, mpi_tmp_path):
    """K classes (K scales and norms, (n, K) coefficients), class weights and the lazy averages
    come back from a checkpoint bit for bit; the binary problem's run refuses the K-class checkpoint."""
    from helpers import make_multiclass

    X, y = make_multiclass(400, 6, seed=45)
    params = dict(PARAMS, class_weight="balanced", average=True)
    path = mpi_tmp_path / f"multi{comm.Get_size()}.h5"
    full = PackSVC(comm=comm, **params).fit(X, y)
    PackSVC(comm=comm, **params).fit(X, y, checkpoint=path, stop_after_packs=4)
    resumed = PackSVC(comm=comm, **params).fit(X, y, checkpoint=path, resume=True)
    assert resumed.resumed_from_ == 4 * PARAMS["pack"]
    np.testing.assert_array_equal(resumed.decision_function(X), full.decision_function(X))
    with pytest.raises(PPackError, match="n_classes=4, this run has n_classes=2"):
        PackSVC(comm=comm, **params).fit(X, np.where(y == y[0], 1.0, -1.0), checkpoint=path, resume=True)


def test_run_identity_leaves_out_the_settings_earlier_versions_did_not_record():
    """A checkpoint of an earlier version (no averaging, uniform sampling, c = 1, no weights,
    no validation) matches a run with those settings, so it still resumes."""
    from ppack.kernels.spec import KernelSpec
    from ppack.packsvm.checkpoint import run_identity

    spec = KernelSpec("rbf", 0.5)
    plain = run_identity(spec, 1e-3, 100, 0, 500, 8, "float64", 1000, 2)
    assert set(plain) == {"kernel", "gamma", "degree", "coef0", "offset", "sigma", "pack", "seed", "n_samples",
                          "n_features", "dtype", "iterations", "n_classes"}
    full = run_identity(spec, 1e-3, 100, 0, 500, 8, "float64", 1000, 2, average=True, sampling="epochs", step=0.5,
                        class_weight="{1.0: 2.0}", row_weights=True, validation=0.1)
    assert {k: v for k, v in full.items() if k not in plain} == {
        "average": True, "sampling": "epochs", "step": 0.5, "class_weight": "{1.0: 2.0}", "row_weights": True,
        "validation": 0.1}


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("sparse", [False, True])
def test_a_resume_reads_only_each_ranks_own_rows(sparse, mpi_tmp_path, monkeypatch):
    """The rows each rank reads from a checkpoint, counted: on the rank count that wrote it, its
    own entries (``rank_offsets``); on half the ranks, its share of them. Together every entry
    once, and no rank more than its share."""
    import ppack.packsvm.checkpoint as checkpoint

    read = []
    reader = checkpoint._read_range

    def counted(f, sparse, n_features, lo, hi):
        read.append((lo, hi))
        return reader(f, sparse, n_features, lo, hi)

    monkeypatch.setattr(checkpoint, "_read_range", counted)
    X, y = make_problem(600, 8, sparse=sparse, seed=44)
    path = mpi_tmp_path / "state.h5"
    PackSVC(comm=WORLD, **PARAMS).fit(X, y, checkpoint=path, stop_after_packs=10)
    with h5py.File(path, "r") as f:
        offsets, n = f["rank_offsets"][()], len(f["keys"])
    rank = WORLD.Get_rank()
    for comm in (WORLD, WORLD.Split(rank % 2, rank)):
        read.clear()
        PackSVC(comm=comm, **dict(PARAMS, iterations=501)).fit(X, y, checkpoint=path, resume=True)
        rows = sorted({row for lo, hi in read for row in range(lo, hi)})
        if comm is WORLD:
            assert rows == list(range(offsets[rank], offsets[rank + 1]))
        else:
            share = -(-n // comm.Get_size())
            assert len(rows) <= share and len(rows) == sum(hi - lo for lo, hi in read)  # read once each
            counts = comm.allgather(rows)
            assert sorted(row for part in counts for row in part) == list(range(n))
            comm.Free()
        polite_barrier(WORLD)
