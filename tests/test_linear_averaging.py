"""Block averaging of the linear solvers (ppack.linear.averaging), on one rank and on all ranks."""
import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

from ppack.data.shard import Shard
from ppack.linear.estimator import BlockAveragedSVC
from ppack.linear.features import FeatureMap
from ppack.linear.problem import primal_objective

from naive import averaging_problem, liblinear_optimum

WORLD = MPI.COMM_WORLD
SELF = MPI.COMM_SELF


def identical_blocks_shard(X, y, comm):
    """Every rank holds the same rows as its block of a data set made of ``size`` copies."""
    n, size, rank = X.shape[0], comm.Get_size(), comm.Get_rank()
    return Shard("<copies>", n * size, X.shape[1], rank * n, (rank + 1) * n, X, y, X.shape[1])


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("mode", ["oneshot", "iterative"])
def test_identical_blocks_give_the_single_rank_model(mode):
    """P identical blocks on P ranks = the whole data (P copies) on one rank."""
    X, y = averaging_problem(seed=1)
    size = WORLD.Get_size()
    options = {"tol": 1e-8, "max_epochs": 100000}
    whole = BlockAveragedSVC("dcd", C=0.5, averaging="oneshot", solver_options=options, comm=SELF).fit(
        sp.vstack([X] * size).tocsr(), np.tile(y, size))
    blocks = BlockAveragedSVC("dcd", C=0.5, averaging=mode, rounds=50, rounds_tol=1e-8, solver_options=options,
                              shuffle=False, comm=WORLD).fit(identical_blocks_shard(X, y, WORLD))
    rtol = 1e-5 if mode == "oneshot" else 1e-3  # solver accuracy; CoCoA rounds converge linearly
    np.testing.assert_allclose(blocks.w_, whole.w_, rtol=rtol, atol=rtol)
    assert blocks.b_ == pytest.approx(whole.b_, rel=rtol, abs=rtol)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("solver", ["dcd", "llsvm"])
def test_iterative_averaging_reaches_the_single_rank_objective(solver):
    X, y = averaging_problem(n=1200, seed=2)
    # the reference optimum: LIBLINEAR on the whole data (at most 2e-4 above the minimum here)
    single_objective, _, _ = liblinear_optimum(X, y, 1.0)
    oneshot = BlockAveragedSVC(solver, C=1.0, averaging="oneshot", comm=WORLD).fit(X, y)
    iterative = BlockAveragedSVC(solver, C=1.0, averaging="iterative", rounds=60, rounds_tol=1e-6,
                                 comm=WORLD).fit(X, y)
    assert iterative.report_.primal[-1] == pytest.approx(primal_objective(X, y, iterative.w_, iterative.b_, 1.0))
    assert iterative.report_.primal[-1] <= 1.01 * single_objective
    assert iterative.report_.gap >= -1e-6 * single_objective  # weak duality
    assert oneshot.report_.primal[-1] >= single_objective * (1 - 1e-3)  # no free lunch (to the reference's accuracy)


@pytest.mark.mpi
def test_shifts_report_counts_every_virtual_row():
    """Under shifts:S the dual covers every virtual row, so the reported primal must too: it is
    the primal of phi(X) with each image's label repeated, and never below the dual. Runs on
    one rank serially and on all ranks under MPI."""
    rng = np.random.default_rng(21)
    images = rng.normal(size=(40, 16)) * (rng.random((40, 16)) < 0.7)
    y = np.where(images[:, 5] + images[:, 6] - images[:, 9] > 0, 1.0, -1.0)
    model = BlockAveragedSVC("dcd", C=0.5, features="shifts:1", rounds=6, rounds_tol=1e-6,
                             solver_options={"tol": 1e-3}, comm=WORLD).fit(images, y)
    fmap = FeatureMap.parse("shifts:1")
    expanded, labels = fmap.expand(images), np.repeat(y, fmap.n_virtual)
    report = model.report_
    assert report.rounds == 6, "with every virtual row counted the gap stays open at tol=1e-6"
    assert report.primal[-1] == pytest.approx(primal_objective(expanded, labels, model.w_, model.b_, 0.5), rel=1e-10)
    gaps = np.array(report.primal) - np.array(report.dual)
    assert np.all(gaps >= -1e-9 * np.array(report.primal)), gaps
