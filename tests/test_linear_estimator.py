"""BlockAveragedSVC (ppack.linear.estimator): model files, feature-map models, and the
iterative modes of alm (data-parallel) and pegasos (distributed SGD), also through maps."""
import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

from ppack.errors import PPackError
from ppack.linear import pegasos
from ppack.linear.estimator import BlockAveragedSVC
from ppack.linear.features import FeatureMap
from ppack.linear.problem import primal_objective
from ppack.registry import FEATURE_MAP_SOLVERS, LINEAR_SOLVERS

from conftest import make_problem
from naive import averaging_problem, tiny_images

WORLD = MPI.COMM_WORLD
SELF = MPI.COMM_SELF
serial = pytest.mark.usefixtures("rank0_only")  # one-rank tests run once under MPI


@serial
def test_linear_model_file_round_trip(tmp_path):
    X, y = make_problem(300, 8, seed=3)
    model = BlockAveragedSVC("dcd", C=1.0, comm=SELF).fit(X, y)
    model.save(tmp_path / "linear.h5")
    loaded = BlockAveragedSVC.load(tmp_path / "linear.h5", SELF)
    np.testing.assert_array_equal(loaded.decision_function(X), model.decision_function(X))
    assert loaded.solver == "dcd" and loaded.training_["rounds"] == model.report_.rounds


@serial
def test_feature_map_model_predicts_through_the_map(tmp_path):
    X, y = make_problem(400, 5, seed=4)
    Xt, yt = make_problem(300, 5, seed=5)
    plain = BlockAveragedSVC("dcd", C=1.0, comm=SELF).fit(X, y)
    poly = BlockAveragedSVC("dcd", C=1.0, features="poly2", comm=SELF).fit(X, y)
    assert poly.score(Xt, yt) > plain.score(Xt, yt) + 0.1  # x0 * x1 is a poly2 feature
    poly.save(tmp_path / "poly.h5")
    np.testing.assert_array_equal(BlockAveragedSVC.load(tmp_path / "poly.h5", SELF).decision_function(Xt),
                                  poly.decision_function(Xt))


@serial
def test_every_linear_solver_takes_a_feature_map():
    assert set(FEATURE_MAP_SOLVERS) == set(LINEAR_SOLVERS)
    with pytest.raises(PPackError, match="features: feature map: expected identity, poly2"):
        BlockAveragedSVC("dcd", features="cubic", comm=SELF).fit(*make_problem(40, 4, seed=6))


@pytest.mark.mpi(min_size=2)
def test_alm_iterative_mode_is_the_single_rank_run():
    """alm sums the blocks' gradient and step at every iteration: the single-rank iterates."""
    X, y = averaging_problem(n=900, seed=7)
    options = {"max_epochs": 200}
    single = BlockAveragedSVC("alm", C=1.0, averaging="iterative", solver_options=options, comm=SELF).fit(X, y)
    spread = BlockAveragedSVC("alm", C=1.0, averaging="iterative", solver_options=options, shuffle=False,
                              comm=WORLD).fit(X, y)
    np.testing.assert_allclose(spread.w_, single.w_, rtol=1e-8, atol=1e-10)
    assert spread.report_.primal[-1] == pytest.approx(single.report_.primal[-1], rel=1e-10)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("features", ["poly2", "shifts:1"])
def test_alm_iterative_mode_through_a_map_is_the_single_rank_run(features):
    images, y = tiny_images(48, side=4, seed=8)
    X = images.reshape(48, -1)
    options = {"max_epochs": 60}
    single = BlockAveragedSVC("alm", C=0.5, loss="l2", features=features, solver_options=options,
                              comm=SELF).fit(X, y)
    spread = BlockAveragedSVC("alm", C=0.5, loss="l2", features=features, solver_options=options, shuffle=False,
                              comm=WORLD).fit(X, y)
    np.testing.assert_allclose(spread.w_, single.w_, rtol=1e-8, atol=1e-10)
    fmap = FeatureMap.parse(features)
    expanded = primal_objective(fmap.expand(X), np.repeat(y, fmap.n_virtual), spread.w_, spread.b_, 0.5, 2.0)
    assert spread.report_.primal[-1] == pytest.approx(expanded, rel=1e-10)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("sparse", [False, True])
def test_pegasos_iterative_mode_does_not_depend_on_the_rank_count(sparse):
    """Rows drawn from one stream and delivered to every rank: 1 and all ranks agree."""
    X, y = averaging_problem(n=800, seed=8)
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


@pytest.mark.parametrize("features", ["hash:6", "shifts:1"])
def test_pegasos_iterative_mode_through_a_map(features):
    """One rank serially, every rank under MPI: the same model as on one rank, and a report
    whose primal counts every virtual row."""
    images, y = tiny_images(30, side=4, seed=9)
    X = sp.csr_matrix(images.reshape(30, -1))
    options = {"epochs": 8, "pack": 25}
    one = BlockAveragedSVC("pegasos", C=1.0, features=features, solver_options=options, comm=SELF).fit(X, y)
    spread = BlockAveragedSVC("pegasos", C=1.0, features=features, solver_options=options, comm=WORLD).fit(X, y)
    np.testing.assert_allclose(spread.w_, one.w_, rtol=1e-9, atol=1e-12)
    fmap = FeatureMap.parse(features)
    assert spread.w_.shape == (fmap.n_out(16),)
    expanded = primal_objective(fmap.expand(X), np.repeat(y, fmap.n_virtual), spread.w_, spread.b_, 1.0)
    assert spread.report_.primal[-1] == pytest.approx(expanded, rel=1e-10)


@serial
def test_pegasos_iterative_mode_takes_every_registry_option():
    X, y = make_problem(120, 5, seed=10)
    options = {"tol": 0.1, "max_epochs": 3, "seed": 2, "epochs": 20, "t0": 5, "average": False, "pack": 16}
    model = BlockAveragedSVC("pegasos", C=1.0, solver_options=options, shuffle=False, comm=SELF).fit(X, y)
    labels = np.where(y == model.classes_[1], 1.0, -1.0)
    w, b, steps = pegasos.solve_distributed(SELF, model._as_shard(X, y), labels, 1.0, **options)
    assert steps == 3 * 120
    np.testing.assert_array_equal(model.w_, w)
    assert model.b_ == b
