"""epsilon-SVR and one-class SVM in the packed solver: against the unpacked references of the
same losses (tests/naive.py), r- and p-invariance, bit-exact resume, the offset rho in the
replica digest, and the projection radius each loss derives."""
import math

import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

from ppack import PackOneClassSVM, PackSVC, PackSVR
from ppack.data.sampler import make_sampler
from ppack.errors import PPackError
from ppack.packsvm.state import SolverState, replica_digest

from naive import kernel_matrix, offset_reference

WORLD = MPI.COMM_WORLD
SELF = MPI.COMM_SELF
SMALL = {"kernel": "rbf", "gamma": 0.3, "iterations": 450, "pack": 64, "seed": 3, "dtype": "float64"}


def make_regression(n=150, d=5, sparse=False, seed=0):
    """Targets around 10 with a nonlinear signal and noise: X (n, d), y (n,)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if sparse:
        X[:, 2:][rng.random((n, d - 2)) > 0.3] = 0.0
    y = 10.0 + 2.0 * np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.2 * rng.normal(size=n)
    return (sp.csr_matrix(X) if sparse else X), y


def coefficients(model):
    """{row id: coefficient of phi(x_row) in w} of a model trained on one rank."""
    return dict(zip(model.table_.keys.tolist(), model.scale_ * model.table_.coef[:, 0]))


def decisions(model, X):
    """f(x) of every row: a regressor's predictions, a one-class model's decision values."""
    return model.predict(X) if isinstance(model, PackSVR) else model.decision_function(X)


def assert_same_expansion(got, expected):
    assert set(got) == set(expected)
    keys = sorted(expected)
    # both float64; the packed side reorders sums: 1e-9 relative
    np.testing.assert_allclose([got[k] for k in keys], [expected[k] for k in keys], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("sparse,average,step", [(False, False, 1.0), (True, False, 0.5), (False, True, 0.5)])
def test_svr_packed_equals_unpacked_reference(sparse, average, step):
    X, y = make_regression(sparse=sparse, seed=1)
    model = PackSVR(comm=SELF, sigma=0.02, epsilon=0.3, average=average, step=step, **SMALL).fit(X, y)
    ids = make_sampler(model.sampling, len(y), SMALL["seed"]).take(SMALL["iterations"])
    radius2 = model.loss_.bound / 0.02
    expected, rho = offset_reference(X, y, 0.02, ids, "epsilon_svr", gamma=0.3, epsilon=0.3, rho=-np.mean(y),
                                     radius2=radius2, average=average, step=step)
    assert_same_expansion(coefficients(model), expected)
    np.testing.assert_allclose(model.rho_, rho, rtol=1e-12)
    if not average:  # fixed at minus the targets' mean (summed exactly)
        assert model.rho_ == -math.fsum(y) / len(y)
    assert model.stats_.projections > 0, "the test must exercise the projection"


def test_svr_radius_is_the_largest_deviation_beyond_the_tube():
    """sigma ||w*||^2 <= max_weight * max_i (|y_i - mean| - epsilon): with weights 2 and 0.5 the bound is twice it."""
    X, y = make_regression(seed=2)
    weights = np.where(np.arange(len(y)) % 2 == 0, 2.0, 0.5)
    model = PackSVR(comm=SELF, sigma=0.02, epsilon=0.3, average=False, step=1.0, **SMALL).fit(X, y,
                                                                                           sample_weight=weights)
    assert model.loss_.bound == pytest.approx(2.0 * (np.abs(y - y.mean()).max() - 0.3), rel=1e-12)
    ids = make_sampler(model.sampling, len(y), SMALL["seed"]).take(SMALL["iterations"])
    expected, _ = offset_reference(X, y, 0.02, ids, "epsilon_svr", gamma=0.3, epsilon=0.3, rho=-np.mean(y),
                                   radius2=model.loss_.bound / 0.02, weights=weights)
    assert_same_expansion(coefficients(model), expected)


@pytest.mark.parametrize("sparse,average,step", [(False, False, 1.0), (True, False, 0.5), (False, True, 0.5)])
def test_one_class_packed_equals_unpacked_reference(sparse, average, step):
    X, _ = make_regression(sparse=sparse, seed=3)
    model = PackOneClassSVM(comm=SELF, nu=0.3, average=average, step=step, **SMALL).fit(X)
    ids = make_sampler(model.sampling, X.shape[0], SMALL["seed"]).take(SMALL["iterations"])
    assert model.loss_.bound == 0.3 * 1.0  # sigma = nu times max K(x, x) = 1 for rbf
    assert (model.loss_.rho_low, model.loss_.rho_high) == (0.0, 1.0)  # rho* in [0, max K(x, x)]
    expected, rho = offset_reference(X, None, 0.3, ids, "one_class", gamma=0.3, rho_step=1 / 0.3, radius2=1.0,
                                     average=average, step=step, rho_box=(0.0, 1.0))
    assert_same_expansion(coefficients(model), expected)
    np.testing.assert_allclose(model.training_["rho_sgd"], rho, rtol=1e-9)
    unboxed, _ = offset_reference(X, None, 0.3, ids, "one_class", gamma=0.3, rho_step=1 / 0.3, radius2=1.0,
                                  average=average, step=step)
    assert set(unboxed) != set(expected), "the test must exercise rho's interval"
    assert model.stats_.projections > 0, "the test must exercise the projection"
    # the model's rho: the ceil(nu m)-th smallest training score of the expansion
    keys = sorted(expected)
    scores = kernel_matrix(X, X[keys], "rbf", 0.3) @ np.array([expected[k] for k in keys])
    np.testing.assert_allclose(model.rho_, np.sort(scores)[math.ceil(0.3 * X.shape[0]) - 1], rtol=1e-9)
    assert model.rho_ > 0


def test_one_class_radius_bounds_k_of_x_x_for_the_linear_and_poly_kernels():
    X, _ = make_regression(n=60, seed=4)
    largest = float(np.max(np.sum(X * X, axis=1)))
    linear = PackOneClassSVM(comm=SELF, kernel="linear", nu=0.5, iterations=100, pack=50).fit(X)
    assert linear.loss_.bound == pytest.approx(0.5 * largest, rel=1e-12)
    poly = PackOneClassSVM(comm=SELF, kernel="poly", gamma=0.1, coef0=-2.0, degree=2, nu=0.5, iterations=100,
                           pack=50).fit(X)
    assert poly.loss_.bound == pytest.approx(0.5 * max(abs(0.1 * largest - 2.0), 2.0) ** 2, rel=1e-12)
    diagonal = np.diag(kernel_matrix(X, X, "poly", 0.1, 2, -2.0))
    assert poly.loss_.bound / 0.5 >= diagonal.max()


@pytest.mark.parametrize("estimator", [PackSVR, PackOneClassSVM])
def test_pack_size_does_not_change_the_model(estimator):
    X, y = make_regression(n=200, seed=5)
    params = dict(SMALL, iterations=400)
    one = estimator(comm=SELF, **dict(params, pack=1)).fit(X, y)
    hundred = estimator(comm=SELF, **dict(params, pack=100)).fit(X, y)
    np.testing.assert_array_equal(np.sort(one.table_.keys), np.sort(hundred.table_.keys))
    expected = decisions(one, X)
    np.testing.assert_allclose(decisions(hundred, X), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
    assert hundred.rho_ == pytest.approx(one.rho_, rel=1e-9)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("estimator", [PackSVR, PackOneClassSVM])
def test_rank_count_does_not_change_the_model(estimator):
    X, y = make_regression(n=400, sparse=True, seed=6)
    serial = estimator(comm=SELF, **SMALL).fit(X, y)
    parallel = estimator(comm=WORLD, **SMALL).fit(X, y)
    keys = np.sort(np.concatenate(WORLD.allgather(parallel.table_.keys)))
    np.testing.assert_array_equal(keys, np.sort(serial.table_.keys))
    expected = decisions(serial, X)
    np.testing.assert_allclose(decisions(parallel, X), expected, rtol=1e-9,
                               atol=1e-9 * np.abs(expected).max())
    assert parallel.rho_ == pytest.approx(serial.rho_, rel=1e-9)


@pytest.mark.parametrize("comm", [pytest.param(SELF, id="1rank"),
                                  pytest.param(WORLD, id="all", marks=pytest.mark.mpi(min_size=2))])
@pytest.mark.parametrize("estimator", [PackSVR, PackOneClassSVM])
def test_resume_is_bit_exact(estimator, comm, mpi_tmp_path):
    X, y = make_regression(n=300, seed=7)
    params = dict(SMALL, iterations=600, pack=50, average=True)
    path = mpi_tmp_path / f"{estimator.__name__}{comm.Get_size()}.h5"
    full = estimator(comm=comm, **params).fit(X, y)
    first = estimator(comm=comm, **params).fit(X, y, checkpoint=path, stop_after_packs=5)
    assert first.stopped_
    resumed = estimator(comm=comm, **params).fit(X, y, checkpoint=path, resume=True)
    assert resumed.resumed_from_ == 5 * params["pack"]
    assert resumed.rho_ == full.rho_
    np.testing.assert_array_equal(decisions(resumed, X), decisions(full, X))


def test_resume_refuses_a_checkpoint_of_another_svm_type_or_epsilon(tmp_path):
    X, y = make_regression(n=200, seed=8)
    path = tmp_path / "svr.h5"
    PackSVR(comm=SELF, **SMALL).fit(X, y, checkpoint=path, stop_after_packs=2)
    with pytest.raises(PPackError, match="epsilon=0.1, this run has epsilon=0.2"):
        PackSVR(comm=SELF, epsilon=0.2, **SMALL).fit(X, y, checkpoint=path, resume=True)
    with pytest.raises(PPackError, match="checkpoint was made with n_classes=0, this run has n_classes=2"):
        PackSVC(comm=SELF, **SMALL).fit(X, np.where(y > 10, 1.0, -1.0), checkpoint=path, resume=True)
    with pytest.raises(PPackError, match="checkpoint was made with sigma=0.005, this run has sigma=0.5"):
        PackOneClassSVM(comm=SELF, **SMALL).fit(X, checkpoint=path, resume=True)


def test_replica_digest_sees_rho_and_its_sum():
    state = SolverState(iteration=40, scale=np.ones(1), norm=np.ones(1), occupancy=np.array([3, 4]),
                        rho=np.array([0.25]), rho_sum=np.array([7.0]))
    digest = replica_digest(state)
    moved = [SolverState(**dict(vars(state), rho=np.nextafter(state.rho, 1.0))),
             SolverState(**dict(vars(state), rho_sum=np.nextafter(state.rho_sum, 0.0)))]
    assert digest == replica_digest(SolverState(**vars(state)))
    assert all(replica_digest(other) != digest for other in moved)


def test_svr_refuses_targets_it_cannot_regress():
    X, y = make_regression(n=50, seed=9)
    with pytest.raises(PPackError, match="regression targets must be numbers"):
        PackSVR(comm=SELF, **SMALL).fit(X, np.where(y > 10, "high", "low"))
    gap = y.copy()
    gap[7] = np.nan
    with pytest.raises(PPackError, match="1 rows have no finite target"):
        PackSVR(comm=SELF, **SMALL).fit(X, gap)
    with pytest.raises(PPackError, match="epsilon: must be a finite number >= 0, got -1"):
        PackSVR(comm=SELF, epsilon=-1, **SMALL).fit(X, y)
    with pytest.raises(PPackError, match="nu: must be a finite number > 0 and <= 1, got 1.5"):
        PackOneClassSVM(comm=SELF, nu=1.5, **SMALL).fit(X)


def test_svr_validation_measures_held_out_r2_and_one_class_refuses_it():
    X, y = make_regression(n=400, seed=10)
    model = PackSVR(comm=SELF, gamma=0.3, C=10.0, epochs=4, pack=50, validation=0.2, validation_every=4,
                    patience=100).fit(X, y)
    report = model.training_["validation"]
    scores = [score for _, score in report["history"]]
    assert report["best_r2"] == max(scores) == scores[-1] > 0.5 and not report["stopped_early"]
    assert "validation" not in PackOneClassSVM.PARAMS and "validation" in PackSVR.PARAMS
