"""The r sequential updates of a pack, against the unpacked reference and by hand."""
import numpy as np
import pytest

from ppack.data.sampler import RowSampler
from ppack.packsvm.replay import replay_pack

from helpers import make_problem
from naive import kernel_matrix, spack_reference


@pytest.mark.parametrize("step", [1.0, 0.5])
def test_replay_tests_the_same_predictions_as_the_reference(step):
    """Each iteration's hinge test sees the prediction the unpacked algorithm computes from scratch.

    With this small sigma most steps project, so a missing or wrong rescale of the pack's
    remaining predictions after a projection would show here.
    """
    X, y = make_problem(60, 5, seed=2)
    sigma, r = 1e-3, 60
    ids = RowSampler(60, 0).take(r)
    _, tested = spack_reference(X, y, sigma, ids, "rbf", 0.4, step=step)
    K = kernel_matrix(X[ids], X[ids], "rbf", 0.4)
    pred = np.zeros(r)
    coef, loss = np.empty(r), np.empty(r)
    _, _, projections = replay_pack(y[ids], pred, K, 0, 1.0, 0.0, sigma, coef, loss, step=step)
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


@pytest.mark.parametrize("sigma", [1e-7, 1e-9, 1e-11])
@pytest.mark.parametrize("step", [1.0, 0.5])
def test_tiny_sigma_pack_folds_the_scale_into_its_coefficients(sigma, step):
    """With a tiny sigma nearly every step projects by ~sqrt(sigma) t, so the scale of one pack
    would underflow: the replay folds it into the pack's coefficients and w stays exact."""
    X, y = make_problem(80, 5, seed=4)
    r = 400
    ids = RowSampler(80, 1).take(r)
    expected, tested = spack_reference(X, y, sigma, ids, "rbf", 0.4, step=step)
    K = kernel_matrix(X[ids], X[ids], "rbf", 0.4)
    pred, coef, loss = np.zeros(r), np.empty(r), np.empty(r)
    s, norm, _ = replay_pack(y[ids], pred, K, 0, 1.0, 0.0, sigma, coef, loss, step=step)
    assert np.isfinite(tested).all() and all(np.isfinite(v) for v in expected.values())
    assert np.isfinite(coef).all() and np.isfinite(s) and s > 0 and np.isfinite(norm)
    np.testing.assert_allclose(pred, tested, rtol=1e-9, atol=1e-12)
    alpha = np.zeros(80)
    np.add.at(alpha, ids, s * coef)
    want = np.zeros(80)
    want[list(expected)] = list(expected.values())
    np.testing.assert_allclose(alpha, want, rtol=1e-9, atol=1e-12 * np.abs(want).max())


def test_replay_all_columns_with_their_own_sigma_class_held_out_fold_and_kernel_group():
    """replay_all's columns (grid search): each with its own sigma, class, held-out fold and
    kernel group (its gamma's pair kernels) tests, from a cold start over one pack, the
    predictions the unpacked reference computes for that one problem with the fold's rows
    weighted 0 (and the radius from the others)."""
    from ppack.packsvm.replay import replay_all, replay_work_arrays
    X, _ = make_problem(50, 4, seed=3)
    codes = np.arange(50) % 3  # three classes
    folds = (np.arange(50) * 7) % 4
    r = 50
    ids = RowSampler(50, 1).take(r)
    gammas = (0.5, 0.2)  # two kernel groups
    pairs = np.stack([kernel_matrix(X[ids], X[ids], "rbf", gamma)[np.triu_indices(r)] for gamma in gammas])
    column_group = np.array([0, 0, 1, 1, 1])
    sigma = np.array([1e-2, 1e-3, 1e-2, 5e-2, 1e-3])
    column_class = np.array([0, 0, 1, 2, 2])
    column_fold = np.array([-1, 2, 0, 3, -1])
    weight = np.linspace(0.5, 2.0, 50)[ids]
    max_weight = np.array([weight[(folds[ids] != f) | (f < 0)].max() for f in column_fold])
    Q = len(sigma)
    scale, norm = np.ones(Q), np.zeros(Q)
    coef, loss, info, tested = np.empty((Q, r)), np.empty((Q, r)), np.empty((Q, 4)), np.empty((Q, r))
    work = replay_work_arrays(Q, r)
    failed, _ = replay_all(np.zeros((Q, r)), pairs, scale, norm, codes[ids].astype(float), 0, sigma, coef, loss,
                           info, weight, max_weight, np.empty((Q, 0)), 1.0, work.pred, work.sign, np.empty(r), 0, 0.0,
                           np.zeros((Q, 2)), np.zeros(Q), np.full(Q, -np.inf), np.full(Q, np.inf), column_class,
                           folds[ids].astype(np.int64),
                           column_fold, work.column_weight, column_group, tested, np.ones(Q, dtype=bool))
    assert failed == -1
    for c in range(Q):
        y = np.where(codes == column_class[c], 1.0, -1.0)
        w = np.linspace(0.5, 2.0, 50)
        if column_fold[c] >= 0:
            w = np.where(folds == column_fold[c], 0.0, w)
        alpha, predictions = spack_reference(X, y, sigma[c], ids, "rbf", gammas[column_group[c]], weights=w)
        np.testing.assert_allclose(tested[c], predictions, rtol=1e-9, atol=1e-12)  # each row's test, before its step
        stepped = np.zeros(50)
        for k, i in enumerate(ids):  # the reference's alpha at the end, from the replay's coefficients
            stepped[i] += coef[c, k] * scale[c]
        expected = np.zeros(50)
        for i, a in alpha.items():
            expected[i] = a
        np.testing.assert_allclose(stepped, expected, rtol=1e-9, atol=1e-12)
        assert np.all(coef[c][(folds[ids] == column_fold[c])] == 0.0)


def test_replay_all_one_class_columns_each_follow_their_own_rho_rule():
    """One-class columns of different nu (sigma, rho step) and kernel (rho's interval, bound):
    each column's replay equals ``replay_pack`` of that column alone, rho and its sum included."""
    from ppack.packsvm.replay import ONE_CLASS, replay_all, replay_work_arrays

    X, _ = make_problem(40, 4, seed=5)
    r = 30
    ids = RowSampler(40, 3).take(r)
    gammas = (0.5, 0.1)
    pair_matrices = [kernel_matrix(X[ids], X[ids], "rbf", gamma) for gamma in gammas]
    pairs = np.stack([K[np.triu_indices(r)] for K in pair_matrices])
    column_group = np.array([0, 0, 1])
    sigma = np.array([0.1, 0.4, 0.2])
    rho_step, rho_low, rho_high = 1.0 / sigma, np.array([0.0, 0.0, 0.05]), np.array([1.0, 1.0, 0.3])
    bound = sigma * np.array([1.0, 1.0, 2.0])
    Q = len(sigma)
    scale, norm, offsets = np.ones(Q), np.zeros(Q), np.zeros((Q, 2))
    coef, loss, info = np.empty((Q, r)), np.empty((Q, r)), np.empty((Q, 4))
    average = np.empty((Q, r + 1))
    work = replay_work_arrays(Q, r)
    weight = np.linspace(0.5, 1.5, r)
    failed, _ = replay_all(np.zeros((Q, r)), pairs, scale, norm, np.ones(r), 0, sigma, coef, loss, info, weight,
                           bound, average, 1.0, work.pred, work.sign, np.empty(r), ONE_CLASS, 0.0, offsets,
                           rho_step, rho_low, rho_high, np.full(Q, -1), np.full(r, -1), np.full(Q, -1),
                           work.column_weight, column_group, np.empty((Q, 0)), np.ones(Q, dtype=bool))
    assert failed == -1
    moved = set()
    for c in range(Q):
        one_coef, one_loss, one_average, one_offset = np.empty(r), np.empty(r), np.empty(r + 1), np.zeros(2)
        s, n, _ = replay_pack(np.ones(r), np.zeros(r), pair_matrices[column_group[c]], 0, 1.0, 0.0, sigma[c],
                              one_coef, one_loss, weight=weight, max_weight=bound[c], average_out=one_average,
                              mode=ONE_CLASS, offset=one_offset, rho_step=rho_step[c],
                              rho_box=(rho_low[c], rho_high[c]))
        np.testing.assert_array_equal(coef[c], one_coef)
        np.testing.assert_array_equal(average[c], one_average)
        np.testing.assert_array_equal(offsets[c], one_offset)
        assert (scale[c], norm[c]) == (s, n)
        assert rho_low[c] <= offsets[c, 0] <= rho_high[c]
        moved.add(offsets[c, 0])
    assert len(moved) == Q  # the columns' rules differ, so do their rho
