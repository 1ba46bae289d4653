"""Inexact SVM-ALM (ppack.linear.alm): e-updates, the optimal step, the iteration against
a literal transcription of Algorithm 2, optimality on small problems, and LIBLINEAR on
the real benchmark sets in tests/data."""
import time

import numpy as np
import pytest
import scipy.optimize as so
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from ppack.errors import PPackError
from ppack.linear import alm
from ppack.linear.features import FeatureMap
from ppack.linear.problem import primal_objective

from naive import alm_algorithm2_twin, alm_problem, alm_reference_optimum, alm_row_objective, tiny_images




@pytest.fixture(autouse=True)
def one_blas_thread():
    # As under the CLI (ppack.comm): threaded BLAS on tiny dot products only adds waiting.
    with threadpool_limits(1, user_api="blas"):
        yield


# ------------------------------------------------------------------ e-update


@pytest.mark.parametrize("p", [1.0, 2.0, 1.5, 1.3])
def test_e_update_is_the_row_minimiser(p):
    rng = np.random.default_rng(1)
    n = 60
    y = rng.choice([-1.0, 1.0], size=n)
    t = rng.normal(scale=2.0, size=n)
    gamma = 0.7
    # p = 1 has three cases (Eq. 12): y t < 0, 0 <= y t <= gamma, y t > gamma; cover each.
    t[:3] = y[:3] * np.array([-0.5, 0.3 * gamma, 2.0 * gamma])
    e = alm.e_update(t, y, gamma, p)
    # brute force 1: a fine grid around the answer's whole possible range
    grid = np.linspace(-8.0, 8.0, 160001)
    Fg = alm_row_objective(grid[None, :], t[:, None], y[:, None], gamma, p)
    e_grid = grid[np.argmin(Fg, axis=1)]
    assert np.all(np.abs(e - e_grid) <= 2 * (grid[1] - grid[0]))
    assert np.all(alm_row_objective(e, t, y, gamma, p) <= Fg.min(axis=1) + 1e-12)
    # brute force 2: a scalar minimiser on each row
    for i in range(n):
        lo, hi = min(t[i], 0.0) - 1.0, max(t[i], 0.0) + 1.0
        r = so.minimize_scalar(lambda v: alm_row_objective(v, t[i], y[i], gamma, p), bounds=(lo, hi),
                               method="bounded", options={"xatol": 1e-11})
        assert abs(e[i] - r.x) < 1e-6
        assert alm_row_objective(e[i], t[i], y[i], gamma, p) <= r.fun + 1e-13


def test_closed_forms_cases():
    y = np.array([1.0, 1.0, 1.0, -1.0, -1.0, -1.0])
    t = np.array([-0.4, 0.2, 1.5, 0.4, -0.2, -1.5])
    gamma = 0.5
    np.testing.assert_allclose(alm.e_update(t, y, gamma, 1.0), [-0.4, 0.0, 1.0, 0.4, 0.0, -1.0])
    np.testing.assert_allclose(alm.e_update(t, y, gamma, 2.0), [-0.4, 0.1, 0.75, 0.4, -0.1, -0.75])


@pytest.mark.parametrize("p", [1.2, 1.5, 1.9])
@pytest.mark.parametrize("width", [1e-12, 1e-4])
def test_bisection_meets_its_tolerance(p, width):
    rng = np.random.default_rng(2)
    s = rng.exponential(2.0, size=200)
    for gamma in (1e-3, 0.5, 50.0):
        u = alm._bisect_slack(s, gamma, p, width)
        exact = np.array([so.brentq(lambda v: p * gamma * v ** (p - 1) + v - si, 0.0, si,
                                    xtol=1e-15, rtol=4 * np.finfo(float).eps) for si in s])
        assert np.all(np.abs(u - exact) <= 0.5 * width + 1e-15)


def test_bisection_agrees_with_the_closed_forms():
    s = np.random.default_rng(3).exponential(1.0, size=100)
    gamma = 0.3
    np.testing.assert_allclose(alm._bisect_slack(s, gamma, 2.0, 1e-13), s / (1 + 2 * gamma), atol=1e-13)
    np.testing.assert_allclose(alm._bisect_slack(s, gamma, 1.0, 1e-13), np.maximum(s - gamma, 0), atol=1e-13)


# ------------------------------------------------------------ the (w, b) step


@pytest.mark.parametrize("bias,regb", [(True, True), (True, False), (False, False)])
@pytest.mark.parametrize("sparse", [False, True])
def test_optimal_step_is_the_line_search_minimum(bias, regb, sparse):
    X, _ = alm_problem(n=120, d=6, seed=4, sparse=sparse)
    Xd = X.toarray() if sparse else X
    rng = np.random.default_rng(5)
    w, b, z, mu = rng.normal(size=6), (0.7 if bias else 0.0), rng.normal(size=120), 0.37

    def G(wv, bv):
        return (wv @ wv + (bv * bv if regb else 0.0)) / mu + np.sum((Xd @ wv + bv - z) ** 2)

    r = Xd @ w + b - z
    wg, bg, Xwg, s = alm.gradient_step(X, w, b, r, mu, bias, regb)
    np.testing.assert_allclose(Xwg, Xd @ wg, rtol=1e-12, atol=1e-12)
    # (wg, bg) is half the gradient of G (Eq. 16): G is quadratic, so central differences are exact
    h = 1e-3
    for k in range(6):
        dw = np.zeros(6)
        dw[k] = h
        assert np.isclose((G(w + dw, b) - G(w - dw, b)) / (2 * h), 2 * wg[k], rtol=1e-7, atol=1e-7)
    if bias:
        assert np.isclose((G(w, b + h) - G(w, b - h)) / (2 * h), 2 * bg, rtol=1e-7, atol=1e-7)
    else:
        assert bg == 0.0
    line = so.minimize_scalar(lambda a: G(w - a * wg, b - a * bg), bracket=(0.0, 1e-3),
                              method="brent", options={"xtol": 1e-12})
    assert abs(s - line.x) <= 1e-6 * abs(line.x)
    assert G(w - s * wg, b - s * bg) <= line.fun * (1 + 1e-12)
    assert G(w - s * wg, b - s * bg) < G(w, b)


# ------------------------------------------------------------ objective gradient


@pytest.mark.parametrize("p", [1.0, 1.5, 2.0])
@pytest.mark.parametrize("regb", [True, False])
def test_objective_gradient_matches_finite_differences(p, regb):
    X, y = alm_problem(n=80, d=5, seed=6)
    rng = np.random.default_rng(7)
    w, b, C = rng.normal(scale=0.3, size=5), 0.2, 0.8

    def obj(wv, bv):
        slack = np.maximum(0.0, 1.0 - y * (X @ wv + bv))
        return 0.5 * (wv @ wv + (bv * bv if regb else 0.0)) + C * np.sum(slack ** p)

    gw, gb = alm.objective_gradient(X, y, w, b, X @ w, C, p, True, regb)
    h = 1e-6  # for p = 1 no margin lies within h * |x| of the kink at this point
    assert np.min(np.abs(1.0 - y * (X @ w + b))) > 1e-3
    for k in range(5):
        dw = np.zeros(5)
        dw[k] = h
        assert np.isclose((obj(w + dw, b) - obj(w - dw, b)) / (2 * h), gw[k], rtol=1e-5, atol=1e-6)
    assert np.isclose((obj(w, b + h) - obj(w, b - h)) / (2 * h), gb, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------ the iteration


@pytest.mark.parametrize("p,regb", [(1.0, True), (2.0, True), (1.5, False)])
def test_iterates_follow_algorithm2(p, regb):
    X, y = alm_problem(n=60, d=4, seed=8)
    k = 12
    ref_w, ref_b, ref_lam, ref_mu = alm_algorithm2_twin(X, y, 1.0, p, k, 0.2, 1.3, 0.9, regb)
    for Xin in (X, sp.csr_matrix(X)):
        sol = alm.solve(Xin, y, 1.0, p=p, tol=1e-300, max_epochs=k, mu0=0.2, rho=1.3,
                        mu_max=0.9, regularize_bias=regb)
        assert sol.iterations == k and sol.alpha is None
        np.testing.assert_allclose(sol.w, ref_w, rtol=1e-6, atol=1e-7)
        assert np.isclose(sol.b, ref_b, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(sol.info["lambda"], ref_lam, rtol=1e-6, atol=1e-7)
        assert sol.info["mu"] == pytest.approx(ref_mu)  # capped at mu_max after 6 steps


@pytest.mark.parametrize("p", [1.0, 1.4, 2.0])
@pytest.mark.parametrize("bias,regb", [(True, True), (True, False), (False, False)])
def test_reaches_the_optimum_and_its_dual(p, bias, regb):
    X, y = alm_problem(n=70, d=5, seed=9)
    C = 0.5
    sol = alm.solve(X, y, C, p=p, bias=bias, regularize_bias=regb, tol=1e-7, max_epochs=5000)
    opt = alm_reference_optimum(X, y, C, p, bias, regb)
    # the hinge's subgradient (0 taken at the kink) need not shrink at the optimum, where
    # support vectors sit on the kink: for p = 1 only max_epochs stops it
    assert sol.info["converged"] == (p > 1)
    assert sol.info["objective"] == pytest.approx(opt, rel=1e-5, abs=1e-6)
    assert sol.info["objective"] >= opt - 1e-6 * abs(opt)
    # stationarity of the Lagrangian: w = -X^T lambda, b = -sum(lambda), alpha = -y lambda
    # is the dual solution (in [0, C] for hinge loss)
    lam = sol.info["lambda"]
    assert np.linalg.norm(sol.w + X.T @ lam) <= 1e-4 * (1 + np.linalg.norm(sol.w))
    if regb:
        assert abs(sol.b + lam.sum()) <= 1e-4 * (1 + abs(sol.b))
    elif bias:
        assert abs(lam.sum()) <= 1e-4 * np.abs(lam).sum()
    alpha = -y * lam
    assert alpha.min() >= -1e-5 * C
    if p == 1.0:
        assert alpha.max() <= C * (1 + 1e-5)


def test_dense_and_sparse_agree_and_report_consistently():
    X, y = alm_problem(n=200, d=10, seed=10, sparse=True)
    a = alm.solve(X, y, 1.0, loss="l2", tol=1e-4)
    b = alm.solve(X.toarray(), y, 1.0, loss="l2", tol=1e-4)
    assert a.iterations == b.iterations
    np.testing.assert_allclose(a.w, b.w, rtol=1e-9, atol=1e-12)
    # the reported objective and gradient are those of the returned model
    assert a.info["objective"] == pytest.approx(primal_objective(X, y, a.w, a.b, 1.0, 2.0), rel=1e-12)
    gw, gb = alm.objective_gradient(X, y, a.w, a.b, X @ a.w, 1.0, 2.0)
    assert a.info["grad_norm"] == pytest.approx(np.sqrt(gw @ gw + gb * gb), rel=1e-9)
    assert a.info["converged"] and a.info["grad_norm"] <= a.info["grad_tol"]
    n_pos = int(np.sum(y > 0))
    gw0, gb0 = alm.objective_gradient(X, y, np.zeros(10), 0.0, np.zeros(200), 1.0, 2.0)
    expected = 1e-4 * min(n_pos, 200 - n_pos) / 200 * np.sqrt(gw0 @ gw0 + gb0 * gb0)
    assert a.info["grad_tol"] == pytest.approx(expected, rel=1e-12)


def test_loss_and_p():
    X, y = alm_problem(n=100, d=4, seed=11)
    kw = dict(tol=1e-300, max_epochs=5)
    assert alm.solve(X, y, 1.0, loss="l1", **kw).info["p"] == 1.0
    assert alm.solve(X, y, 1.0, loss="l2", **kw).info["p"] == 2.0
    over = alm.solve(X, y, 1.0, loss="l1", p=2.0, **kw)
    np.testing.assert_array_equal(over.w, alm.solve(X, y, 1.0, loss="l2", **kw).w)


def test_warm_start():
    X, y = alm_problem(n=150, d=6, seed=12)
    first = alm.solve(X, y, 1.0, loss="l2", tol=1e-5, max_epochs=5000)
    assert first.info["converged"]
    w0 = first.w.copy()
    again = alm.solve(X, y, 1.0, loss="l2", tol=1e-5, w0=w0, b0=first.b, alpha0=-y * first.info["lambda"])
    assert again.iterations == 0 and again.info["converged"]
    np.testing.assert_array_equal(again.w, first.w)
    np.testing.assert_array_equal(w0, first.w)  # the caller's w0 is not written to
    np.testing.assert_allclose(again.info["lambda"], first.info["lambda"])
    # from a perturbed start it resumes and converges again, to the same optimum
    moved = alm.solve(X, y, 1.0, loss="l2", tol=1e-5, w0=w0 + 0.1, b0=first.b)
    assert moved.iterations > 0 and moved.info["converged"]
    assert moved.info["objective"] == pytest.approx(first.info["objective"], rel=1e-6)


@pytest.mark.parametrize("kwargs,name", [
    (dict(C=0.0), "C"), (dict(C=float("inf")), "C"), (dict(loss="hinge"), "loss"),
    (dict(p=2.5), "p"), (dict(p=0.9), "p"), (dict(tol=0.0), "tol"), (dict(max_epochs=0), "max_epochs"),
    (dict(max_epochs=2.5), "max_epochs"), (dict(mu0=-1.0), "mu0"), (dict(rho=0.9), "rho"),
    (dict(mu0=10.0, mu_max=1.0), "mu_max"), (dict(bisect_tol=0.0), "bisect_tol"),
    (dict(w0=np.zeros(3)), "w0"), (dict(alpha0=np.full(50, np.inf)), "alpha0"), (dict(alpha0=np.ones(7)), "alpha0"),
    (dict(bias=False, b0=1.0), "b0"), (dict(b0=float("nan")), "b0"),
])
def test_argument_errors_name_the_parameter(kwargs, name):
    X, y = alm_problem(n=50, d=4, seed=13)
    C = kwargs.pop("C", 1.0)
    with pytest.raises(PPackError, match=rf"^{name}: must"):
        alm.solve(X, y, C, **kwargs)


def test_data_errors():
    X, y = alm_problem(n=50, d=4, seed=13)
    with pytest.raises(PPackError, match=r"y: labels must be -1 or \+1, row \d+ has 0.0"):
        alm.solve(X, np.where(y > 0, 1.0, 0.0), 1.0)
    with pytest.raises(PPackError, match="one label per row"):
        alm.solve(X, y[:-1], 1.0)
    with pytest.raises(PPackError, match=r"X: must be 2-dimensional \(n_samples, n_features\), got shape \(50,\)"):
        alm.solve(X[:, 0], y, 1.0)
    with pytest.raises(PPackError, match="solver option shrinking: not an option of the alm solver; expected one of "
                                         "tol, max_epochs, seed, mu0, rho, mu_max, regularize_bias, bisect_tol"):
        alm.solve(X, y, 1.0, shrinking=True)
    with pytest.raises(PPackError, match=r"feature_map: must fit X's 3 features, got shifts:1"):
        alm.solve(X[:, :3], y, 1.0, feature_map="shifts:1")


# ------------------------------------------------------------ COFFIN feature maps


def mapped_problem(spec):
    """(X, y, phi(X) with its virtual rows, their labels) for a map spec."""
    fmap = FeatureMap.parse(spec)
    if fmap.n_virtual > 1:
        images, y = tiny_images(12, side=4)
        X = sp.csr_matrix(images.reshape(12, -1))
    else:
        X, y = alm_problem(n=60, d=5, seed=14, sparse=True)
    return X, y, fmap.expand(X), np.repeat(y, fmap.n_virtual)


@pytest.mark.parametrize("spec,p", [("poly2", 1.0), ("hash:4", 2.0), ("shifts:1", 1.5)])
def test_feature_map_iterates_are_those_on_the_expanded_rows(spec, p):
    """X w and X^T r through the map (numba loops over rows) instead of scipy's products on
    phi(X): the same iterates up to the order of the sums, 1e-9 relative after 40 iterations."""
    X, y, Phi, labels = mapped_problem(spec)
    options = dict(p=p, tol=1e-300, max_epochs=40, mu0=0.2, rho=1.2)
    expanded = alm.solve(Phi, labels, 0.5, **options)
    for rows in (X, X.toarray()):
        mapped = alm.solve(rows, y, 0.5, feature_map=spec, **options)
        assert mapped.iterations == expanded.iterations == 40
        np.testing.assert_allclose(mapped.w, expanded.w, rtol=1e-9, atol=1e-11)
        assert mapped.b == pytest.approx(expanded.b, rel=1e-9, abs=1e-11)
        assert mapped.info["lambda"].shape == (len(labels),)
        np.testing.assert_allclose(mapped.info["lambda"], expanded.info["lambda"], rtol=1e-9, atol=1e-11)
        assert mapped.info["objective"] == pytest.approx(expanded.info["objective"], rel=1e-10)


@pytest.mark.parametrize("spec", ["poly2", "shifts:1"])
def test_feature_map_reaches_the_expanded_optimum(spec):
    X, y, Phi, labels = mapped_problem(spec)
    mapped = alm.solve(X, y, 0.5, loss="l2", tol=1e-6, max_epochs=5000, feature_map=spec)
    assert mapped.info["converged"]
    optimum = alm_reference_optimum(Phi.toarray(), labels, 0.5, 2.0)
    assert mapped.info["objective"] == pytest.approx(optimum, rel=1e-7)
    assert mapped.info["objective"] == pytest.approx(
        primal_objective(X, y, mapped.w, mapped.b, 0.5, 2.0, FeatureMap.parse(spec)), rel=1e-12)
    # a warm start from the multipliers of every virtual row stops at once
    again = alm.solve(X, y, 0.5, loss="l2", tol=1e-6, feature_map=spec, w0=mapped.w, b0=mapped.b,
                      alpha0=-labels * mapped.info["lambda"])
    assert again.iterations == 0 and again.info["converged"]


# ------------------------------------------------------------ benchmark sets vs LIBLINEAR


def accuracy(X, y, w, b):
    return 100.0 * np.mean(np.where(np.asarray(X @ w) + b > 0, 1.0, -1.0) == y)


# a9a in the fast tier; the larger sets in the CI's second tier (seconds each)
@pytest.mark.parametrize("name", ["a9a", pytest.param("w8a", marks=pytest.mark.second_tier),
                                  pytest.param("ijcnn1", marks=pytest.mark.second_tier)])
@pytest.mark.parametrize("p", [1, 2])
def test_matches_liblinear(benchmark_data, name, p):
    ll = pytest.importorskip("liblinear.liblinearutil", reason="liblinear-official is not installed")
    X, y, Xt, yt = benchmark_data(name)
    model = ll.train(ll.problem(y, X), ll.parameter(f"-s {3 if p == 1 else 1} -B 1 -e 0.001 -c 1 -q"))
    sign = 1.0 if model.get_labels()[0] == 1 else -1.0
    W = sign * np.array([model.w[j] for j in range(X.shape[1] + 1)])
    ref_obj, ref_acc = primal_objective(X, y, W[:-1], W[-1], 1.0, p), accuracy(Xt, yt, W[:-1], W[-1])
    start = time.perf_counter()
    sol = alm.solve(X, y, 1.0, loss=f"l{p}", tol=1e-3, max_epochs=300)
    seconds = time.perf_counter() - start
    obj, acc = primal_objective(X, y, sol.w, sol.b, 1.0, p), accuracy(Xt, yt, sol.w, sol.b)
    print(f"\n{name} p={p}: ALM obj {obj:.3f} ({(obj - ref_obj) / ref_obj:+.2e} vs LIBLINEAR {ref_obj:.3f}), "
          f"acc {acc:.3f} (LIBLINEAR {ref_acc:.3f}), {sol.iterations} iterations, {seconds:.2f} s, "
          f"converged {sol.info['converged']}")
    assert obj <= 1.01 * ref_obj
    assert abs(acc - ref_acc) <= 0.3


@pytest.mark.second_tier  # three real sets at several p: several seconds
def test_accuracy_across_p(benchmark_data):
    """Like the paper's Table 3: test accuracy for several p (printed; asserted only to be
    better than always predicting the majority class)."""
    for name in ("a9a", "w8a", "ijcnn1"):
        X, y, Xt, yt = benchmark_data(name)
        majority = 100.0 * max(np.mean(yt > 0), np.mean(yt < 0))
        row = []
        for p in (1.0, 1.3, 1.6, 2.0):
            sol = alm.solve(X, y, 1.0, p=p, tol=1e-3, max_epochs=100, bisect_tol=1e-9)
            acc = accuracy(Xt, yt, sol.w, sol.b)
            row.append(f"p={p}: {acc:.3f}% ({sol.iterations} it)")
            assert acc > majority
        print(f"\n{name} (majority {majority:.2f}%): " + ", ".join(row))


# ------------------------------------------------------------ row weights


@pytest.mark.parametrize("p", [1.0, 1.5, 2.0])
def test_weighted_alm_reaches_the_weighted_optimum(p):
    """Row weights (some 0) on the loss: ALM's objective is the weighted primal's minimum,
    found independently (tolerances as for the unweighted problem above); integer weights
    give the optimum of the repeated rows."""
    X, y = alm_problem(n=70, d=5, seed=9)
    C = 0.5
    weights = np.random.default_rng(2).integers(0, 4, 70).astype(float)
    sol = alm.solve(X, y, C, p=p, tol=1e-7, max_epochs=5000, weights=weights)
    opt = alm_reference_optimum(X, y, C, p, weights=weights)
    assert sol.info["converged"] == (p > 1)
    assert sol.info["objective"] == pytest.approx(opt, rel=1e-5, abs=1e-6)
    assert sol.info["objective"] >= opt - 1e-6 * abs(opt)
    assert sol.info["objective"] == pytest.approx(primal_objective(X, y, sol.w, sol.b, C, p, weights=weights),
                                                  rel=1e-12)
    rows = np.repeat(np.arange(70), weights.astype(int))
    assert opt == pytest.approx(alm_reference_optimum(X[rows], y[rows], C, p), rel=1e-5, abs=1e-6)
    unweighted = alm_reference_optimum(X, y, C, p)
    assert abs(unweighted - opt) > 1e-2 * opt


def test_unit_weights_give_the_unweighted_iterates_and_e_update_takes_per_row_gamma():
    X, y = alm_problem(n=60, d=5, seed=3)
    plain = alm.solve(X, y, 0.5, max_epochs=50)
    ones = alm.solve(X, y, 0.5, max_epochs=50, weights=np.ones(60))
    np.testing.assert_allclose(ones.w, plain.w, rtol=1e-13, atol=1e-15)
    t = np.random.default_rng(4).normal(size=60)
    gamma = np.random.default_rng(5).uniform(0.0, 2.0, 60)
    for p in (1.0, 1.5, 2.0):
        e = alm.e_update(t, y, gamma, p)
        one_by_one = [alm.e_update(t[i:i + 1], y[i:i + 1], float(gamma[i]), p)[0] for i in range(60)]
        np.testing.assert_allclose(e, one_by_one, rtol=1e-12, atol=1e-12)
    with pytest.raises(PPackError, match="weights: must have shape"):
        alm.solve(X, y, 0.5, weights=np.ones(3))
