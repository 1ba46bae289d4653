"""Checkpoint and resume under the dual optimizer: a stopped run continues bit for bit where it
stopped (mid-epoch or at an epoch's end, its shrunk sets and stopping test with it), and a
checkpoint of the other optimizer is refused in one line."""
import h5py
import numpy as np
import pytest
from mpi4py import MPI

from ppack import PackSVC
from ppack.errors import PPackError
from ppack.mpi.comm import polite_barrier

from helpers import make_multiclass, make_problem

WORLD, SELF = MPI.COMM_WORLD, MPI.COMM_SELF
PARAMS = {"kernel": "rbf", "gamma": 0.3, "C": 5.0, "optimizer": "dual", "epochs": 60, "tol": 1e-2, "pack": 25,
          "seed": 7, "dtype": "float64"}


def same_run(resumed, full, X):
    np.testing.assert_array_equal(resumed.decision_function(X), full.decision_function(X))
    a, b = resumed.training_["convergence"], full.training_["convergence"]
    assert {k: v for k, v in a.items()} == {k: v for k, v in b.items()}
    assert resumed.training_["iterations_done"] == full.training_["iterations_done"]
    assert resumed.training_["packs"] == full.training_["packs"]
    assert resumed.training_["bytes"] == full.training_["bytes"]
    assert (resumed.n_iter_, resumed.converged_, resumed.n_support_) == (full.n_iter_, full.converged_, full.n_support_)


@pytest.mark.parametrize("stop_after", [3, 8, 40])  # mid first epoch, its last pack (8 packs of 200 rows), later
@pytest.mark.parametrize("which", ["binary", "multiclass"])
def test_a_resumed_dual_run_equals_an_uninterrupted_one(stop_after, which, tmp_path):
    X, y = make_problem(200, 6, seed=41) if which == "binary" else make_multiclass(200, 6, seed=42)
    full = PackSVC(comm=SELF, **PARAMS).fit(X, y)
    assert full.n_iter_ > 3 and min(full.training_["convergence"]["history"]["rows_drawn"]) < 200  # shrinking ran
    path = tmp_path / "dual.h5"
    first = PackSVC(comm=SELF, **PARAMS).fit(X, y, checkpoint=path, stop_after_packs=stop_after)
    assert first.stopped_
    with h5py.File(path, "r") as f:
        assert f.attrs["complete"] and "dual" in f.attrs and f["dual_active"].shape[0] == 200
    resumed = PackSVC(comm=SELF, **PARAMS).fit(X, y, checkpoint=path, resume=True)
    assert resumed.resumed_from_ == first.training_["iterations_done"] and not resumed.stopped_
    same_run(resumed, full, X)


def test_checkpoints_every_packs_leave_the_run_unchanged(tmp_path):
    X, y = make_problem(200, 6, seed=41)
    full = PackSVC(comm=SELF, **PARAMS).fit(X, y)
    checkpointed = PackSVC(comm=SELF, **PARAMS).fit(X, y, checkpoint=tmp_path / "d.h5", checkpoint_every_packs=5)
    assert checkpointed.training_["checkpoints"]["written"] > 1
    np.testing.assert_array_equal(checkpointed.decision_function(X), full.decision_function(X))


@pytest.mark.mpi(min_size=2)
def test_a_resumed_dual_run_on_all_ranks_is_exact(mpi_tmp_path):
    X, y = make_multiclass(240, 6, seed=43)
    full = PackSVC(comm=WORLD, **PARAMS).fit(X, y)
    path = mpi_tmp_path / "dual.h5"
    assert PackSVC(comm=WORLD, **PARAMS).fit(X, y, checkpoint=path, stop_after_packs=13).stopped_
    resumed = PackSVC(comm=WORLD, **PARAMS).fit(X, y, checkpoint=path, resume=True)
    same_run(resumed, full, X)
    polite_barrier(WORLD)


def test_resuming_under_the_other_optimizer_is_refused_in_one_line(tmp_path):
    X, y = make_problem(100, 5, seed=44)
    path = tmp_path / "dual.h5"
    PackSVC(comm=SELF, **PARAMS).fit(X, y, checkpoint=path, stop_after_packs=2)
    sgd = {**PARAMS, "optimizer": "sgd", "tol": None}
    with pytest.raises(PPackError, match="made by optimizer 'dual', this run has optimizer 'sgd'"):
        PackSVC(comm=SELF, **sgd).fit(X, y, checkpoint=path, resume=True)
    other = tmp_path / "sgd.h5"
    PackSVC(comm=SELF, **sgd).fit(X, y, checkpoint=other, stop_after_packs=2)
    with pytest.raises(PPackError, match="made by optimizer 'sgd', this run has optimizer 'dual'"):
        PackSVC(comm=SELF, **PARAMS).fit(X, y, checkpoint=other, resume=True)
