"""Block averaging of the linear solvers, on one rank and on all ranks."""
import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

from ppack.data.shard import Shard
from ppack.linear.estimator import BlockAveragedSVC
from ppack.linear.problem import primal_objective

from conftest import make_problem

WORLD = MPI.COMM_WORLD
SELF = MPI.COMM_SELF


def linear_problem(n=400, d=15, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.4, random_state=seed, format="csr")
    w = rng.normal(size=d)
    y = np.where(X @ w + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def identical_blocks_shard(X, y, comm):
    """Every rank holds the same rows as its block of a data set made of ``size`` copies."""
    n, size, rank = X.shape[0], comm.Get_size(), comm.Get_rank()
    return Shard("<copies>", n * size, X.shape[1], rank * n, (rank + 1) * n, X, y, X.shape[1])


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("mode", ["oneshot", "iterative"])
def test_identical_blocks_give_the_single_rank_model(mode):
    """P identical blocks on P ranks = the whole data (P copies) on one rank."""
    X, y = linear_problem(seed=1)
    size = WORLD.Get_size()
    options = {"tol": 1e-8, "max_epochs": 100000}
    whole = BlockAveragedSVC("dcd", C=0.5, averaging="oneshot", solver_options=options, comm=SELF).fit(
        sp.vstack([X] * size).tocsr(), np.tile(y, size))
    blocks = BlockAveragedSVC("dcd", C=0.5, averaging=mode, rounds=50, tol=1e-8, solver_options=options,
                              shuffle=False, comm=WORLD).fit(identical_blocks_shard(X, y, WORLD))
    rtol = 1e-5 if mode == "oneshot" else 1e-3  # solver accuracy; CoCoA rounds converge linearly
    np.testing.assert_allclose(blocks.w_, whole.w_, rtol=rtol, atol=rtol)
    assert blocks.b_ == pytest.approx(whole.b_, rel=rtol, abs=rtol)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("solver", ["dcd", "llsvm"])
def test_iterative_averaging_reaches_the_single_rank_objective(solver):
    X, y = linear_problem(n=1200, seed=2)
    # the reference optimum: dcd on the whole data, solved tightly on one rank
    single = BlockAveragedSVC("dcd", C=1.0, averaging="oneshot", solver_options={"tol": 1e-6}, comm=SELF).fit(X, y)
    single_objective = primal_objective(X, y, single.w_, single.b_, 1.0)
    oneshot = BlockAveragedSVC(solver, C=1.0, averaging="oneshot", comm=WORLD).fit(X, y)
    iterative = BlockAveragedSVC(solver, C=1.0, averaging="iterative", rounds=60, tol=1e-6, comm=WORLD).fit(X, y)
    assert iterative.report_.primal[-1] == pytest.approx(primal_objective(X, y, iterative.w_, iterative.b_, 1.0))
    assert iterative.report_.primal[-1] <= 1.01 * single_objective
    assert iterative.report_.gap >= -1e-6 * single_objective  # weak duality
    assert oneshot.report_.primal[-1] >= single_objective * (1 - 1e-9)  # no free lunch


def test_linear_model_file_round_trip(tmp_path):
    X, y = make_problem(300, 8, seed=3)
    model = BlockAveragedSVC("dcd", C=1.0, comm=SELF).fit(X, y)
    model.save(tmp_path / "linear.h5")
    loaded = BlockAveragedSVC.load(tmp_path / "linear.h5", SELF)
    np.testing.assert_array_equal(loaded.decision_function(X), model.decision_function(X))
    assert loaded.solver == "dcd" and loaded.training_["rounds"] == model.report_.rounds


def test_feature_map_model_predicts_through_the_map(tmp_path):
    X, y = make_problem(400, 5, seed=4)
    Xt, yt = make_problem(300, 5, seed=5)
    plain = BlockAveragedSVC("dcd", C=1.0, comm=SELF).fit(X, y)
    poly = BlockAveragedSVC("dcd", C=1.0, features="poly2", comm=SELF).fit(X, y)
    assert poly.score(Xt, yt) > plain.score(Xt, yt) + 0.1  # x0 * x1 is a poly2 feature
    poly.save(tmp_path / "poly.h5")
    np.testing.assert_array_equal(BlockAveragedSVC.load(tmp_path / "poly.h5", SELF).decision_function(Xt),
                                  poly.decision_function(Xt))


@pytest.mark.mpi(min_size=2)
def test_rows_of_a_sorted_file_are_dealt_out_at_random():
    """Contiguous shards of a label-sorted data set hold one class each; the blocks must not."""
    X, y = linear_problem(n=800, seed=6)
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]
    from ppack.linear.blocks import random_blocks

    shard = Shard.from_arrays(X, y, WORLD.Get_rank(), WORLD.Get_size())
    X_block, y_block = random_blocks(WORLD, shard.X, shard.y, seed=1)
    assert len(np.unique(y_block)) == 2
    assert WORLD.allreduce(X_block.shape[0]) == 800
    assert WORLD.allreduce(float(X_block.sum())) == pytest.approx(float(X.sum()))
    single = BlockAveragedSVC("dcd", C=1.0, averaging="oneshot", solver_options={"tol": 1e-6}, comm=SELF).fit(X, y)
    optimum = primal_objective(X, y, single.w_, single.b_, 1.0)
    model = BlockAveragedSVC("dcd", C=1.0, rounds=60, tol=1e-6, comm=WORLD).fit(shard)
    assert model.report_.primal[-1] <= 1.01 * optimum


@pytest.mark.mpi(min_size=2)
def test_alm_iterative_mode_is_the_single_rank_run():
    """alm sums the blocks' gradient and step at every iteration: the single-rank iterates."""
    X, y = linear_problem(n=900, seed=7)
    options = {"max_epochs": 200}
    single = BlockAveragedSVC("alm", C=1.0, averaging="iterative", solver_options=options, comm=SELF).fit(X, y)
    spread = BlockAveragedSVC("alm", C=1.0, averaging="iterative", solver_options=options, shuffle=False,
                              comm=WORLD).fit(X, y)
    np.testing.assert_allclose(spread.w_, single.w_, rtol=1e-8, atol=1e-10)
    assert spread.report_.primal[-1] == pytest.approx(single.report_.primal[-1], rel=1e-10)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("sparse", [False, True])
def test_pegasos_iterative_mode_does_not_depend_on_the_rank_count(sparse):
    """Rows drawn from one stream and delivered to every rank: 1 and all ranks agree."""
    X, y = linear_problem(n=800, seed=8)
    if not sparse:
        X = X.toarray()
    single = BlockAveragedSVC("dcd", C=1.0, averaging="oneshot", solver_options={"tol": 1e-6}, comm=SELF).fit(X, y)
    optimum = primal_objective(X, y, single.w_, single.b_, 1.0)
    options = {"epochs": 60, "pack": 37}
    one = BlockAveragedSVC("pegasos", C=1.0, solver_options=options, comm=SELF).fit(X, y)
    spread = BlockAveragedSVC("pegasos", C=1.0, solver_options=options, comm=WORLD).fit(X, y)
    np.testing.assert_allclose(spread.w_, one.w_, rtol=1e-9, atol=1e-12)
    assert spread.report_.primal[-1] == pytest.approx(primal_objective(X, y, spread.w_, spread.b_, 1.0))
    assert spread.report_.primal[-1] <= 1.05 * optimum
