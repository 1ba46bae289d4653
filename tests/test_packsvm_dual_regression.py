"""epsilon-SVR's dual coordinate step (``dual/regression.py``): its packed steps against one
coordinate at a time, its optimum against L-BFGS-B on the box-constrained dual and LIBLINEAR's
``-s 13`` for the linear kernel, its invariance to the pack size, the rank count and the
targets' scale, and what a grid refuses."""
import numpy as np
import pytest
from mpi4py import MPI

from ppack import PackSVC, PackSVR
from ppack.errors import PPackError
from ppack.packsvm.dual.coordinate import EPOCH_FIGURES
from ppack.packsvm.dual.regression import regression_steps
from ppack.packsvm.grid import train_grid

from helpers import check_certificate
from naive import kernel_matrix, regression_block_sweeps, regression_dual_reference

WORLD = MPI.COMM_WORLD
DUAL = {"kernel": "rbf", "gamma": 0.5, "C": 2.0, "epsilon": 0.1, "optimizer": "dual", "epochs": 2000, "tol": 1e-5,
        "dtype": "float64", "seed": 3, "comm": MPI.COMM_SELF}


def make_targets(n, d=4, seed=0, scale=1.0):
    """X (n, d) uniform, y (n,) a smooth function of the first two columns plus noise, times ``scale``."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, d))
    y = np.sin(2.0 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.standard_normal(n) + 3.0
    return X, scale * y


def model_beta(model, n):
    beta = np.zeros(n)
    beta[model.table_.keys] = model.table_.coef[:, 0]
    return beta


def objectives(K, y, beta, bounds, epsilon):
    """(primal, dual) of epsilon-SVR at beta, targets y centred."""
    f = K @ beta
    w2 = beta @ f
    primal = 0.5 * w2 + bounds @ np.maximum(0.0, np.abs(y - f) - epsilon)
    return primal, y @ beta - epsilon * np.abs(beta).sum() - 0.5 * w2


@pytest.mark.parametrize("r, sweeps", [(1, 1), (7, 1), (40, 1), (7, 3), (40, 30)])
def test_a_pack_of_steps_equals_the_steps_one_at_a_time(r, sweeps):
    """Row k's margin in a pack is its partial sum plus the pack's earlier steps: the betas after a
    pack equal r steps taken one at a time, from a start with betas inside, at and off the box;
    further sweeps over the pack equal further passes over its rows one at a time."""
    X, y = make_targets(60, seed=4)
    y = y - y.mean()
    K = kernel_matrix(X, X, "rbf", 0.5)
    bounds = np.random.default_rng(1).uniform(0.5, 2.0, 60)
    beta = np.random.default_rng(2).uniform(-1.0, 1.0, 60) * bounds
    beta[:5], beta[5:10], beta[10:15] = 0.0, bounds[5:10], -bounds[10:15]
    ids = np.random.default_rng(3).permutation(60)[:r]
    predictions = (K[ids] @ beta)[None, :]
    pairs = K[np.ix_(ids, ids)][np.triu_indices(r)][None, :]
    delta, stepped, margin = np.empty((1, r)), np.empty((1, r)), np.empty((1, r))
    w2, linear, figures = np.array([beta @ K @ beta]), np.array([y @ beta - 0.1 * np.abs(beta).sum()]), \
        np.zeros((1, EPOCH_FIGURES))
    figures[:, 0], figures[:, 1] = -np.inf, np.inf
    regression_steps(predictions, pairs, beta[ids][None, :], y[ids], bounds[ids], 0.1, np.array([-1]),
                     np.full(r, -1), np.array([0]), np.ones(1), np.array([[np.inf, -np.inf]]),
                     np.ones((1, r), dtype=np.uint8), w2, linear, figures, delta, stepped, margin, sweeps, 1e-6)
    packed = beta.copy()
    packed[ids] += delta[0]
    expected = regression_block_sweeps(K, y, beta, bounds, 0.1, ids, sweeps, 1e-6)
    np.testing.assert_allclose(packed, expected, rtol=0, atol=1e-12 if sweeps == 1 else 1e-9)
    np.testing.assert_array_equal(stepped[0], (delta[0] != 0).astype(float))
    assert np.all(np.abs(packed) <= bounds + 1e-12)
    # the running sums track the dual's parts exactly
    assert w2[0] == pytest.approx(packed @ K @ packed, rel=1e-10)
    assert linear[0] == pytest.approx(y @ packed - 0.1 * np.abs(packed).sum(), rel=1e-10)


def test_it_reaches_the_box_constrained_optimum_of_l_bfgs_b():
    """Converged: the primal within 1% of the L-BFGS-B optimum's, the dual within 1e-6, the
    certificate's P and D those of the model, rho = -mean(y) and predictions K beta + mean(y)."""
    X, y = make_targets(150, seed=6)
    model = PackSVR(**DUAL).fit(X, y)
    assert model.converged_ and model.training_["optimizer"] == "dual"
    K = kernel_matrix(X, X, "rbf", 0.5)
    centred, bounds = y - y.mean(), np.full(150, 2.0)
    ours = model_beta(model, 150)
    P, D = objectives(K, centred, ours, bounds, 0.1)
    P_ref, D_ref = objectives(K, centred, regression_dual_reference(K, centred, bounds, 0.1), bounds, 0.1)
    assert abs(P - P_ref) <= 0.01 * P_ref
    assert D == pytest.approx(D_ref, rel=1e-6)
    report = model.training_["convergence"]
    check_certificate(report, P, D)
    assert model.rho_ == pytest.approx(-y.mean(), rel=1e-12)
    np.testing.assert_allclose(model.predict(X), K @ ours + y.mean(), rtol=0, atol=1e-9)
    # rows inside the tube have beta 0 and leave the table
    assert np.all(model.table_.coef[:, 0] != 0) and model.n_support_ == np.count_nonzero(ours) < 150


def test_the_linear_kernel_matches_liblinears_svr_dual_without_bias():
    """LIBLINEAR -s 13 -B -1 (L1-loss SVR dual, no bias) on the centred targets at a tight -e:
    the same primal within 1%."""
    liblinear = pytest.importorskip("liblinear.liblinearutil")
    X, y = make_targets(200, d=5, seed=8)
    model = PackSVR(**{**DUAL, "kernel": "linear", "C": 0.5, "epsilon": 0.05, "epochs": 3000}).fit(X, y)
    assert model.converged_
    centred = y - y.mean()
    m = liblinear.train(centred.tolist(), X.tolist(), "-s 13 -c 0.5 -p 0.05 -B -1 -e 1e-6 -q")
    w = np.array([m.get_decfun_coef(j + 1) for j in range(5)])
    primal_ll = 0.5 * w @ w + 0.5 * np.maximum(0, np.abs(centred - X @ w) - 0.05).sum()
    assert model.training_["convergence"]["primal"][0] == pytest.approx(primal_ll, rel=1e-2)


def test_the_pack_size_does_not_change_the_optimum():
    """r = 1 against r = 100, float64, at convergence: the same betas to 1e-9."""
    X, y = make_targets(100, seed=9)
    params = {**DUAL, "C": 0.5, "tol": 1e-11, "epochs": 5000}  # the betas' error is about the KKT gap's
    one, packed = PackSVR(pack=1, **params).fit(X, y), PackSVR(pack=100, **params).fit(X, y)
    assert one.converged_ and packed.converged_
    np.testing.assert_allclose(model_beta(one, 100), model_beta(packed, 100), rtol=0, atol=1e-9)


def test_the_tolerance_is_relative_to_the_targets_scale():
    """Targets and epsilon 1000 times larger, C the same: betas 1000 times larger after the same
    epochs (the KKT gap is measured in the largest target deviation)."""
    X, y = make_targets(120, seed=11)
    params = {**DUAL, "tol": 1e-3}
    small = PackSVR(**params).fit(X, y)
    large = PackSVR(**{**params, "C": 2000.0, "epsilon": 100.0}).fit(X, 1000.0 * y)
    assert small.n_iter_ == large.n_iter_ and small.converged_
    np.testing.assert_allclose(model_beta(large, 120), 1000.0 * model_beta(small, 120), rtol=1e-8, atol=1e-8)


def test_shrinking_leaves_the_rows_inside_the_tube_out():
    """With a wide tube most rows sit at beta 0 inside it: they leave the draws, and come back
    for the check before the stop."""
    X, y = make_targets(400, seed=10)
    model = PackSVR(**{**DUAL, "epsilon": 0.3, "tol": 1e-3}).fit(X, y)
    drawn = model.training_["convergence"]["history"]["rows_drawn"]
    assert drawn[0] == 400 and min(drawn) < 200 and drawn[-1] == 400 and model.converged_


def test_a_grid_pass_of_epsilon_svr_under_the_dual_is_refused():
    X, y = make_targets(60, seed=12)
    with pytest.raises(PPackError, match="epsilon_svr grid pass trains with the SGD only"):
        train_grid(PackSVR(**{**DUAL, "epochs": 3}), X, y, [1.0, 2.0], np.arange(60) % 2, 2)


@pytest.mark.mpi(min_size=2)
def test_the_rank_count_does_not_change_the_optimum():
    """p ranks against one, float64, at convergence: the same betas to 1e-9."""
    X, y = make_targets(120, seed=18)
    params = {**DUAL, "C": 0.5, "tol": 1e-6, "epochs": 5000}
    many = PackSVR(**{**params, "comm": WORLD}).fit(X, y)
    one = PackSVR(**params).fit(X, y)
    beta = np.zeros(120)
    beta[many.table_.keys] = many.table_.coef[:, 0]
    beta = WORLD.allreduce(beta)
    assert many.converged_ and many.rho_ == pytest.approx(one.rho_, rel=1e-14)
    np.testing.assert_allclose(beta, model_beta(one, 120), rtol=0, atol=1e-9)


@pytest.mark.parametrize("stop_after", [2, 11])  # mid first epoch, a later one
def test_a_resumed_run_equals_an_uninterrupted_one(stop_after, tmp_path):
    """Stopped after some packs and resumed from its checkpoint: the same betas, rho and report, bit for bit."""
    X, y = make_targets(150, seed=21)
    params = {**DUAL, "epsilon": 0.2, "tol": 2e-2, "pack": 25, "epochs": 300}
    full = PackSVR(**params).fit(X, y)
    assert full.n_iter_ > 2 and min(full.training_["convergence"]["history"]["rows_drawn"]) < 150  # shrinking ran
    path = tmp_path / "svr.h5"
    assert PackSVR(**params).fit(X, y, checkpoint=path, stop_after_packs=stop_after).stopped_
    resumed = PackSVR(**params).fit(X, y, checkpoint=path, resume=True)
    assert resumed.resumed_from_ is not None and not resumed.stopped_
    np.testing.assert_array_equal(resumed.predict(X), full.predict(X))
    assert resumed.training_["convergence"] == full.training_["convergence"] and resumed.rho_ == full.rho_


def test_the_warm_up_leaves_the_dual_steps_compiled():
    """After ``warm_kernels(..., dual=True)`` the dual's numba functions hold the run's specialisations: a fit of
    either problem compiles none of them again (their time is reported apart, as compile)."""
    from ppack.kernels.spec import KernelSpec
    from ppack.packsvm.dual import coordinate, regression
    from ppack.packsvm.warmup import warm_kernels

    kernels = (coordinate.coordinate_steps, coordinate.certificate_sums, regression.regression_steps,
               regression.regression_certificate_sums)
    assert warm_kernels(MPI.COMM_SELF, KernelSpec("rbf", gamma=0.5), np.float64, False, dual=True) >= 0.0
    before = [len(f.signatures) for f in kernels]
    assert min(before) >= 1
    X, y = make_targets(60, seed=30)
    PackSVR(**{**DUAL, "epochs": 3}).fit(X, y)
    classifier = {k: v for k, v in DUAL.items() if k != "epsilon"}
    PackSVC(**{**classifier, "epochs": 3}).fit(X, np.where(y > y.mean(), 1.0, -1.0))
    assert [len(f.signatures) for f in kernels] == before
