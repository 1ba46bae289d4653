"""BlockAveragedSVC (ppack.linear.estimator): model files, feature-map models, and the
iterative modes of alm (data-parallel) and pegasos (distributed SGD), also through maps."""
import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

from ppack.data.shard import Shard
from ppack.errors import PPackError
from ppack.linear import pegasos
from ppack.linear.estimator import BlockAveragedSVC
from ppack.linear.features import FeatureMap
from ppack.linear.problem import primal_objective
from ppack.registry import LINEAR_SOLVERS

from helpers import make_problem
from naive import alm_reference_optimum, averaging_problem, liblinear_optimum, tiny_images

WORLD = MPI.COMM_WORLD
SELF = MPI.COMM_SELF


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


def test_every_linear_solver_takes_a_feature_map():
    X, y = make_problem(40, 4, seed=6)
    for solver in LINEAR_SOLVERS:
        model = BlockAveragedSVC(solver, features="poly2", comm=SELF).fit(X, y)
        assert model.w_.shape == (FeatureMap.parse("poly2").n_out(4),), solver
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


@pytest.mark.mpi
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


def test_pegasos_iterative_mode_takes_every_registry_option():
    X, y = make_problem(120, 5, seed=10)
    options = {"tol": 0.1, "max_epochs": 3, "seed": 2, "epochs": 20, "t0": 5, "average": False, "pack": 16}
    model = BlockAveragedSVC("pegasos", C=1.0, solver_options=options, shuffle=False, comm=SELF).fit(X, y)
    labels = np.where(y == model.classes_[1], 1.0, -1.0)
    w, b, steps = pegasos.solve_distributed(SELF, model._as_shard(X, y), labels, 1.0, **options)
    assert steps == 3 * 120
    np.testing.assert_array_equal(model.w_, w)
    assert model.b_ == b


# ---------------------------------------------------------------- class and row weights


def weighted_optimum(X, y, C, weights, loss="l1"):
    """The minimum of the primal with integer row weights, independently of the package:
    LIBLINEAR on the rows repeated weights times (the same primal): (objective, w, b)."""
    labels = np.where(y == np.unique(y)[1], 1.0, -1.0)
    repeat = np.repeat(np.arange(len(y)), weights.astype(int))
    assert np.array_equal(weights, weights.astype(int))
    return liblinear_optimum(X[repeat], labels[repeat], C, loss)


def test_balanced_class_weight_is_the_explicit_dict():
    X, y = averaging_problem(n=500, seed=11)
    y = np.where(np.arange(500) % 5 == 0, 3.0, 7.0)  # 100 of class 3, 400 of class 7
    n, K = 500, 2
    explicit = {3.0: n / (K * 100), 7.0: n / (K * 400)}
    options = {"tol": 1e-6}
    balanced = BlockAveragedSVC("dcd", C=1.0, class_weight="balanced", solver_options=options, comm=SELF).fit(X, y)
    given = BlockAveragedSVC("dcd", C=1.0, class_weight=explicit, solver_options=options, comm=SELF).fit(X, y)
    as_rows = BlockAveragedSVC("dcd", C=1.0, solver_options=options, comm=SELF).fit(
        X, y, sample_weight=np.where(y == 3.0, explicit[3.0], explicit[7.0]))
    np.testing.assert_array_equal(balanced.w_, given.w_)
    np.testing.assert_array_equal(balanced.w_, as_rows.w_)
    plain = BlockAveragedSVC("dcd", C=1.0, solver_options=options, comm=SELF).fit(X, y)
    assert np.max(np.abs(plain.w_ - balanced.w_)) > 1e-2
    text = BlockAveragedSVC("dcd", C=1.0, class_weight="3:2.5", solver_options=options, comm=SELF).fit(X, y)
    dict_ = BlockAveragedSVC("dcd", C=1.0, class_weight={3.0: 2.5}, solver_options=options, comm=SELF).fit(X, y)
    np.testing.assert_array_equal(text.w_, dict_.w_)
    with pytest.raises(PPackError, match=r"class_weight: 5.0 is not a class of the data \(classes: 3.0, 7.0\)"):
        BlockAveragedSVC("dcd", class_weight={5: 2.0}, comm=SELF).fit(X, y)


@pytest.mark.parametrize("solver", LINEAR_SOLVERS)
def test_every_solver_takes_row_weights(solver):
    """Integer sample weights: every solver's reported objective is the weighted one, and
    near the weighted optimum (scipy's minimum of the weighted primal): within 2% for
    pegasos' SGD, 0.1% for the others."""
    X, y = averaging_problem(n=300, seed=12)
    weights = np.random.default_rng(3).integers(1, 4, 300).astype(float)
    optimum = alm_reference_optimum(X.toarray(), np.where(y == np.unique(y)[1], 1.0, -1.0), 1.0, 1.0,
                                    weights=weights)  # scipy's, independent of the package
    options = {"pegasos": {"epochs": 300}, "alm": {"max_epochs": 3000}, "dcd": {"tol": 1e-6},
               "llsvm": {"tol": 1e-6}, "stream": {"tol": 1e-6}}.get(solver, {})
    model = BlockAveragedSVC(solver, C=1.0, solver_options=options, comm=SELF).fit(X, y, sample_weight=weights)
    labels = np.where(y == model.classes_[1], 1.0, -1.0)
    reported = model.report_.primal[-1]
    assert reported == pytest.approx(primal_objective(X, labels, model.w_, model.b_, 1.0, weights=weights),
                                     rel=1e-10)
    assert optimum * (1 - 1e-9) <= reported <= optimum * (1.02 if solver == "pegasos" else 1.001)
    if model.report_.dual:
        assert model.report_.gap >= -1e-9 * reported


def test_shard_weights_need_no_sample_weight_and_refuse_a_second_one():
    X, y = averaging_problem(n=200, seed=13)
    weights = np.random.default_rng(4).uniform(0.5, 2.0, 200)
    shard = Shard.from_arrays(X, y, w=weights)
    from_shard = BlockAveragedSVC("dcd", C=1.0, comm=SELF).fit(shard)
    from_arrays = BlockAveragedSVC("dcd", C=1.0, comm=SELF).fit(X, y, sample_weight=weights)
    np.testing.assert_array_equal(from_shard.w_, from_arrays.w_)
    with pytest.raises(PPackError, match="sample_weight: a Shard carries its row weights"):
        BlockAveragedSVC("dcd", C=1.0, comm=SELF).fit(shard, sample_weight=weights)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("solver,loss", [("dcd", "l1"), ("llsvm", "l1"), ("stream", "l1"), ("dcd", "l2")])
def test_weighted_block_averaging_reaches_the_weighted_optimum(solver, loss):
    """Rows dealt out at random with their weights (shuffle) and CoCoA rounds: near the
    optimum of the weighted problem on one rank (1%, as unweighted averaging is held to);
    the one-rank optimum of the same weights on the wrong rows is more than 5% off, and
    weak duality holds for the weighted dual."""
    X, y = averaging_problem(n=800, seed=14)
    rng = np.random.default_rng(5)
    weights = rng.integers(1, 4, 800).astype(float)
    weights[y == np.unique(y)[1]] *= 3.0  # and heavier positives
    p = 1.0 if loss == "l1" else 2.0
    optimum, _, _ = weighted_optimum(X, y, 0.2, weights, loss)
    model = BlockAveragedSVC(solver, C=0.2, loss=loss, rounds=60, rounds_tol=1e-6, shuffle=True,
                             comm=WORLD).fit(X, y, sample_weight=weights)
    labels = np.where(y == model.classes_[1], 1.0, -1.0)
    ours = primal_objective(X, labels, model.w_, model.b_, 0.2, p, weights=weights)
    assert model.report_.primal[-1] == pytest.approx(ours, rel=1e-10)
    assert model.report_.gap >= -1e-6 * ours
    assert optimum * (1 - 1e-9) <= ours <= optimum * 1.01
    _, w, b = weighted_optimum(X, y, 0.2, rng.permutation(weights), loss)
    assert primal_objective(X, labels, w, b, 0.2, p, weights=weights) > optimum * 1.05


@pytest.mark.mpi(min_size=2)
def test_weighted_pegasos_and_alm_do_not_depend_on_the_rank_count():
    """Distributed pegasos delivers each row's weight with it; alm sums weighted gradients:
    on every rank count the single-rank model."""
    X, y = averaging_problem(n=600, seed=15)
    weights = np.random.default_rng(6).uniform(0.3, 3.0, 600)
    for solver, options, tol in (("pegasos", {"epochs": 20, "pack": 37}, 1e-9), ("alm", {"max_epochs": 200}, 1e-8)):
        one = BlockAveragedSVC(solver, C=1.0, solver_options=options, comm=SELF).fit(X, y, sample_weight=weights)
        spread = BlockAveragedSVC(solver, C=1.0, solver_options=options, shuffle=False,
                                  comm=WORLD).fit(X, y, sample_weight=weights)
        np.testing.assert_allclose(spread.w_, one.w_, rtol=tol, atol=1e-11)
        assert spread.report_.primal[-1] == pytest.approx(one.report_.primal[-1], rel=1e-9)
        plain = BlockAveragedSVC(solver, C=1.0, solver_options=options, comm=SELF).fit(X, y)
        assert np.max(np.abs(plain.w_ - one.w_)) > 1e-3


@pytest.mark.mpi
@pytest.mark.parametrize("features", ["shifts:1", "poly2"])
def test_weighted_report_under_a_map_counts_every_virtual_row_with_its_image_weight(features):
    """One rank serially, every rank under MPI: the reported primal and (by weak duality
    and the closing gap) dual are those of the expanded rows, each virtual row weighted by
    its image's weight."""
    images, y = tiny_images(40, side=4, seed=10)
    X = images.reshape(40, -1)
    weights = np.random.default_rng(7).uniform(0.5, 3.0, 40)
    fmap = FeatureMap.parse(features)
    for loss in ("l1", "l2"):
        model = BlockAveragedSVC("dcd", C=0.5, loss=loss, features=features, rounds=200, rounds_tol=1e-5,
                                 shuffle=False, comm=WORLD).fit(X, y, sample_weight=weights)
        labels = np.where(y == model.classes_[1], 1.0, -1.0)
        expanded = primal_objective(fmap.expand(X), np.repeat(labels, fmap.n_virtual), model.w_, model.b_, 0.5,
                                    1.0 if loss == "l1" else 2.0, weights=np.repeat(weights, fmap.n_virtual))
        assert model.report_.primal[-1] == pytest.approx(expanded, rel=1e-10)
        assert model.report_.gap >= -1e-9 * expanded
        if WORLD.Get_size() == 1:  # CoCoA's averaged rounds on several ranks close the gap slowly
            assert model.report_.gap <= 1e-5 * expanded


def test_a_run_stopped_at_its_iteration_limit_says_so():
    """converged_, n_iter_ and a convergence warning when the rounds or the solver's epochs
    run out before their tolerance; none when the tolerance is met (dcd one-shot: its own
    epochs; alm: one data-parallel run), or where the limit is the solver's usual stop."""
    import warnings

    X, y = make_problem(300, 8, seed=3)
    with pytest.warns(BlockAveragedSVC.convergence_warning, match="max_epochs"):
        short = BlockAveragedSVC("dcd", C=10.0, averaging="oneshot", solver_options={"max_epochs": 1},
                                 comm=SELF).fit(X, y)
    assert short.converged_ is False and short.training_["converged"] is False and short.n_iter_ == 1
    assert short.training_["advice"] is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error", BlockAveragedSVC.convergence_warning)
        done = BlockAveragedSVC("dcd", C=1.0, averaging="oneshot", comm=SELF).fit(X, y)
    assert done.converged_ is True and done.training_["advice"] is None
    with pytest.warns(BlockAveragedSVC.convergence_warning, match="max_epochs"):
        BlockAveragedSVC("alm", C=10.0, loss="l2", solver_options={"max_epochs": 2}, comm=SELF).fit(X, y)
    # alm's hinge (p = 1): its subgradient need not shrink, the limit is its usual stop
    with warnings.catch_warnings():
        warnings.simplefilter("error", BlockAveragedSVC.convergence_warning)
        assert BlockAveragedSVC("alm", C=10.0, solver_options={"max_epochs": 2}, comm=SELF).fit(X, y).converged_
