"""The packed solver against the plain S-packSVM of Figures 1 and 2 (tests/naive.py)."""
import numpy as np
import pytest
from mpi4py import MPI

from ppack.mpi.comm import chunk, chunk_starts, owners_of
from ppack import PackSVC
from ppack.packsvm.replay import replay_pack
from ppack.data.sampler import RowSampler

from conftest import make_problem
from naive import kernel_matrix, spack_reference

SELF = MPI.COMM_SELF


def fitted(X, y, comm=SELF, **params):
    params = {"kernel": "rbf", "gamma": 0.2, "iterations": 600, "pack": 100, "seed": 3, **params}
    if "sigma" not in params:
        params.setdefault("C", 5.0)
    return PackSVC(comm=comm, **params).fit(X, y)


def w_coefficients(model):
    """{row id: coefficient of phi(x_row) in w} of a model trained on one rank."""
    return dict(zip(model.table_.keys.tolist(), model.scale_ * model.table_.coef))


@pytest.mark.parametrize("name", ["rbf", "laplacian", "poly", "linear"])
@pytest.mark.parametrize("sparse", [False, True])
def test_packed_equals_unpacked_reference(name, sparse):
    X, y = make_problem(120, 6, sparse=sparse, seed=1)
    params = {"kernel": name, "gamma": 0.3, "degree": 2, "coef0": 1.0, "sigma": 0.02, "iterations": 450,
              "pack": 64}
    model = fitted(X, y, **params)
    ids = RowSampler(120, 3).take(450)
    expected, _ = spack_reference(X, y, 0.02, ids, name, 0.3, 2, 1.0)
    got = w_coefficients(model)
    assert set(got) == set(expected)
    keys = sorted(expected)
    # tolerance: both sides are float64; the packed side reorders sums, so 1e-9 relative
    np.testing.assert_allclose([got[k] for k in keys], [expected[k] for k in keys], rtol=1e-9, atol=1e-12)
    assert model.stats_.projections > 0, "the test must exercise the projection"


def test_replay_tests_the_same_predictions_as_the_reference():
    """Each iteration's hinge test sees the prediction the unpacked algorithm computes from scratch.

    With this small sigma most steps project, so a missing or wrong rescale of the pack's
    remaining predictions after a projection would show here.
    """
    X, y = make_problem(60, 5, seed=2)
    sigma, r = 1e-3, 60
    ids = RowSampler(60, 0).take(r)
    _, tested = spack_reference(X, y, sigma, ids, "rbf", 0.4)
    K = kernel_matrix(X[ids], X[ids], "rbf", 0.4)
    pred = np.zeros(r)
    coef, loss = np.empty(r), np.empty(r)
    _, _, projections = replay_pack(y[ids], pred, K, 0, 1.0, 0.0, sigma, coef, loss)
    assert projections > r // 2
    np.testing.assert_allclose(pred, tested, rtol=1e-10, atol=1e-12)


def test_projection_shrinks_the_remaining_predictions():
    """A projection inside a pack multiplies the later predictions by 1/sqrt(sigma * norm)."""
    sigma, t0 = 0.1, 9  # first step t = 10: scale a = 0.9, step eta = 1 / (sigma t) = 1
    y = np.array([1.0, 1.0, -1.0])
    pair = np.array([[1.0, 0.2, 0.1], [0.2, 1.0, 0.3], [0.1, 0.3, 1.0]])
    pred = np.array([0.9, 0.4, 0.3])  # predictions of w_9, whose squared norm is 10 = 1/sigma
    coef, loss = np.empty(3), np.empty(3)
    replay_pack(y, pred, pair, t0, 1.0, 10.0, sigma, coef, loss)
    a, eta = 0.9, 1.0
    norm = a * a * 10.0 + 2 * eta * a * 0.9 + eta * eta * pair[0, 0]
    assert norm > 1.0 / sigma  # so step 1 projects
    unprojected = a * 0.4 + eta * pair[0, 1]
    assert pred[1] == pytest.approx(unprojected / np.sqrt(sigma * norm), rel=1e-14)
    assert pred[1] < unprojected


def test_first_iteration_resets_w():
    """At t = 1 the factor (1 - 1/t) is 0: w restarts from zero, never dividing by a zero scale."""
    sigma = 0.1
    y = np.array([-1.0, 1.0])
    pair = np.array([[1.0, 0.5], [0.5, 1.0]])
    pred = np.array([3.0, -2.0])  # whatever w_0 predicted is wiped out at t = 1
    coef, loss = np.empty(2), np.empty(2)
    s, norm, _ = replay_pack(y, pred, pair, 0, 1.0, 5.0, sigma, coef, loss)
    assert loss[0] == 4.0  # the hinge test at t = 1 still uses w_0's prediction
    assert coef[0] == -10.0  # w_1 = -(1 / sigma) phi(x_0) with the scale restarted at 1
    # ||w_1||^2 = 100 > 1/sigma = 10: projected by 1/sqrt(10) before t = 2 predicts
    assert pred[1] == pytest.approx(-10.0 * 0.5 / np.sqrt(10.0), rel=1e-14)
    assert np.isfinite(s) and np.isfinite(norm)


@pytest.mark.parametrize("sparse", [False, True])
def test_pack_size_does_not_change_the_model(sparse):
    """r-invariance: same seed, r = 1 and r = 100 give the same support vectors and decisions.

    Tolerance: decision values within 1e-9 relative (float64 sums in different orders).
    """
    X, y = make_problem(500, 8, sparse=sparse, seed=7)
    one = fitted(X, y, pack=1, iterations=1000)
    hundred = fitted(X, y, pack=100, iterations=1000)
    assert np.array_equal(np.sort(one.table_.keys), np.sort(hundred.table_.keys))
    np.testing.assert_allclose(hundred.decision_function(X), one.decision_function(X), rtol=1e-9, atol=1e-9)


def test_sampler_stream_is_independent_of_pack_size():
    a = RowSampler(1000, 5)
    b = RowSampler(1000, 5)
    drawn = np.concatenate([a.take(r) for r in [1, 7, 100, 8192, 3, 20000]])
    np.testing.assert_array_equal(drawn, b.take(len(drawn)))
    assert drawn.min() >= 0 and drawn.max() < 1000


def test_chunk_partition_is_exact_and_balanced():
    for n in [0, 1, 7, 100, 101]:
        for size in [1, 2, 3, 4, 7]:
            spans = [chunk(n, k, size) for k in range(size)]
            assert spans[0][0] == 0 and spans[-1][1] == n
            assert all(spans[k][1] == spans[k + 1][0] for k in range(size - 1))
            lengths = [b - a for a, b in spans]
            assert max(lengths) - min(lengths) <= 1
            if n:
                rows = np.arange(n)
                owners = owners_of(rows, chunk_starts(n, size))
                assert all(spans[o][0] <= i < spans[o][1] for i, o in zip(rows, owners))


def test_model_learns_a_nonlinear_problem():
    X, y = make_problem(1500, 6, seed=8)
    Xt, yt = make_problem(500, 6, seed=9)
    model = fitted(X, y, C=10.0, gamma=0.5, epochs=3, iterations=None)
    assert model.score(Xt, yt) > 0.85
    linear = fitted(X, y, kernel="linear", C=10.0, epochs=3, iterations=None)
    assert linear.score(Xt, yt) < 0.7  # the problem really is nonlinear


def test_any_two_label_values_map_to_the_classes():
    X, y = make_problem(300, 6, seed=10, labels=(3.0, 7.0))
    model = fitted(X, y)
    np.testing.assert_array_equal(model.classes_, [3.0, 7.0])
    assert set(np.unique(model.predict(X))) <= {3.0, 7.0}
    assert model.score(X, y) > 0.7


def test_tol_stops_when_the_windowed_hinge_loss_is_stable():
    X, y = make_problem(2000, 6, seed=12)
    capped = fitted(X, y, iterations=20000, pack=100, tol=0.05, tol_window=500)
    assert capped.training_["converged"] and capped.training_["iterations_done"] < 20000
    assert capped.training_["iterations_done"] % 500 == 0  # decided at a window boundary
    never = fitted(X, y, iterations=3000, pack=100, tol=1e-12, tol_window=500)
    assert not never.training_["converged"] and never.training_["iterations_done"] == 3000
