"""LLSVM (harsh-shrinking dual ascent) against numpy twins (tests/naive.py), its file format,
LIBLINEAR, and under COFFIN feature maps against the same problem on explicit phi(X)."""
import math
import os
import struct
import time

import numpy as np
import pytest
import scipy.sparse as sp

from ppack.errors import PPackError
from ppack.linear import llsvm
from ppack.linear.features import FeatureMap, _sqnorms, as_rows
from ppack.linear.problem import dual_objective, primal_objective

from naive import alm_reference_optimum, explicit_features, llsvm_sweep, product_problem, tiny_image_rows, weighted_problem




def linear_problem(n=60, d=10, density=0.5, seed=0, flip=0.1):
    """A noisy linear problem: CSR X (n, d) with one empty row, y (n,) in {-1, +1}."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < density)
    X[3] = 0.0
    y = np.where(X @ rng.normal(size=d) + 0.3 > 0, 1.0, -1.0)
    y[rng.random(n) < flip] *= -1.0
    return sp.csr_matrix(X), y


def mapped_problem(spec, seed=0):
    """(X, y, FeatureMap, phi(X) as CSR, labels of the virtual rows) for a map spec."""
    fmap = FeatureMap.parse(spec)
    X, y = tiny_image_rows(12, seed=seed) if fmap.n_virtual > 1 else product_problem(40, seed=seed)
    return X, y, fmap, sp.csr_matrix(explicit_features(X, spec)), np.repeat(y, fmap.n_virtual)


MAPS = ["poly2", "hash:6", "shifts:1"]


# ---------------------------------------------------------------- twins


def identity_sweep(X, labels, rows, order, alpha, w, tau, diag, upper):
    """llsvm._sweep on the rows of X (CSR or dense) without a map: block row k is row k."""
    indptr, indices, values, dense = as_rows(X)
    return llsvm._sweep(indptr, indices, values, dense, labels, rows, 1, order, 0, np.array([X.shape[1]]), 1,
                        alpha, w, np.empty(0), tau, diag, upper, np.empty(0), np.empty(0))


def twin_records(Xd, y, rows):
    """The file bytes for rows ``rows``: label, nnz, indices int32, values float64 (native order)."""
    out = b""
    for i in rows:
        cols = np.flatnonzero(Xd[i])
        out += struct.pack("=di", y[i], cols.size) + cols.astype(np.int32).tobytes() + Xd[i, cols].tobytes()
    return out


# ---------------------------------------------------------------- numba cores


@pytest.mark.parametrize("loss", ["l1", "l2"])
@pytest.mark.parametrize("tau", [0.0, 1.0, 2.5])
@pytest.mark.parametrize("dense", [False, True])
def test_sweep_matches_twin(loss, tau, dense):
    X, y = linear_problem(40, 7, seed=1)
    Xd = X.toarray()
    C = 0.7
    upper, diag = (C, 0.0) if loss == "l1" else (np.inf, 1.0 / (2 * C))
    rng = np.random.default_rng(2)
    n_all = 55
    rows = rng.choice(n_all, size=40, replace=False)  # block row k is global row rows[k]
    alpha = np.where(rng.random(n_all) < 0.3, 0.0, rng.random(n_all) * 0.5)
    alpha[rows[:5]] = upper if loss == "l1" else 0.0  # some rows start at a bound
    w = rng.normal(size=8) * 0.1
    a_twin, w_twin = alpha.copy(), w.copy()
    for k in range(40):  # one row at a time: (max, min) is that row's projected gradient
        row = np.array([k])
        got = identity_sweep(Xd if dense else X, y, rows, row, alpha, w, tau, diag, upper)
        expected = llsvm_sweep(Xd, y, rows, row, a_twin, w_twin, tau, diag, upper)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    for sweep in range(3):
        order = rng.permutation(40)
        got = identity_sweep(Xd if dense else X, y, rows, order, alpha, w, tau, diag, upper)
        expected = llsvm_sweep(Xd, y, rows, order, a_twin, w_twin, tau, diag, upper)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(alpha, a_twin, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(w, w_twin, rtol=1e-12, atol=1e-14)
    assert np.any((alpha > 0) & (alpha < upper)) and np.any(alpha == 0)
    if tau == 0.0:
        assert w[-1] == w_twin[-1]


@pytest.mark.parametrize("loss", ["l1", "l2"])
@pytest.mark.parametrize("spec", MAPS)
def test_mapped_sweep_matches_twin_on_explicit_rows(spec, loss):
    """The first pass reads every virtual row from X (stride V); a file block holds the
    original row of each dual it carries. Both equal the twin's sweep over rows of phi(X)."""
    X, y, fmap, Phi, yz = mapped_problem(spec, seed=2)
    Z, V, n_dual = Phi.toarray(), fmap.n_virtual, Phi.shape[0]
    kind, params, C, tau = fmap.kind, fmap.params(X.shape[1]), 0.7, 1.5
    upper, diag = (C, 0.0) if loss == "l1" else (np.inf, 1.0 / (2 * C))
    rng = np.random.default_rng(3)
    alpha = np.where(rng.random(n_dual) < 0.3, 0.0, rng.random(n_dual) * 0.5)
    w = rng.normal(size=Z.shape[1] + 1) * 0.1
    qd = np.empty(n_dual)
    for dense in (False, True):
        _sqnorms(*as_rows(X.toarray() if dense else X), kind, params, V, tau * tau + diag, qd)
        np.testing.assert_allclose(qd, np.einsum("ij,ij->i", Z, Z) + tau * tau + diag, rtol=1e-13)
    a_twin, w_twin = alpha.copy(), w.copy()
    all_rows = np.arange(n_dual)
    for dense in (False, True):
        order = rng.permutation(n_dual)
        got = llsvm._sweep(*as_rows(X.toarray() if dense else X), y, all_rows, V, order, kind, params, V,
                           alpha, w, qd, tau, diag, upper, np.empty(0), np.empty(0))
        expected = llsvm_sweep(Z, yz, all_rows, order, a_twin, w_twin, tau, diag, upper)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(alpha, a_twin, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(w, w_twin, rtol=1e-12, atol=1e-14)
    duals = np.sort(rng.choice(n_dual, size=n_dual // 3, replace=False))
    block = X[duals // V]  # what _load_block returns for these records
    for _ in range(3):
        order = rng.permutation(duals.size)
        got = llsvm._sweep(block.indptr.astype(np.int64), block.indices, block.data, False, yz[duals], duals, 1,
                           order, kind, params, V, alpha, w, qd, tau, diag, upper, np.empty(0), np.empty(0))
        expected = llsvm_sweep(Z[duals], yz[duals], duals, order, a_twin, w_twin, tau, diag, upper)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(alpha, a_twin, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(w, w_twin, rtol=1e-12, atol=1e-14)
    assert np.any((alpha > 0) & (alpha < upper)) and np.any(alpha == 0)


# ---------------------------------------------------------------- the active-set file


@pytest.mark.parametrize("dense", [False, True])
def test_active_set_file_round_trips_exactly(tmp_path, dense):
    X, y = linear_problem(50, 9, seed=3)
    X.data[::4] = np.random.default_rng(4).normal(size=X.data[::4].size) * 1e-300  # odd values survive
    Xd = X.toarray()
    kept = np.array([0, 1, 2, 3, 7, 8, 20, 21, 22, 49])  # row 3 is empty
    path = tmp_path / "records.bin"
    with open(path, "w+b") as f:
        offsets = llsvm._write_active_set(f, Xd if dense else X, y, kept)
        assert path.read_bytes() == twin_records(Xd, y, kept)
        assert offsets[-1] == path.stat().st_size
        for ids in (np.arange(kept.size), np.array([1, 2, 3, 6, 9]), np.array([4])):
            labels, indptr, indices, data = llsvm._load_block(f, offsets, ids)
            block = sp.csr_matrix((data, indices, indptr), shape=(ids.size, X.shape[1]))
            assert np.array_equal(labels, y[kept[ids]])
            assert np.array_equal(block.toarray(), Xd[kept[ids]])  # bit-exact values
            assert indices.dtype == np.int32 and data.dtype == np.float64


def test_truncated_file_is_reported(tmp_path):
    X, y = linear_problem(10, 4, seed=5)
    with open(tmp_path / "records.bin", "w+b") as f:
        offsets = llsvm._write_active_set(f, X, y, np.arange(10))
        f.truncate(offsets[-1] - 3)
        with pytest.raises(OSError, match="ended early"):
            llsvm._load_block(f, offsets, np.array([8, 9]))


def test_file_lives_in_workdir_and_is_removed(tmp_path, monkeypatch):
    X, y = linear_problem(80, 6, seed=6)
    seen = []
    load = llsvm._load_block

    def spy(f, offsets, ids):
        seen.append(sorted(os.listdir(tmp_path)))
        return load(f, offsets, ids)

    monkeypatch.setattr(llsvm, "_load_block", spy)
    llsvm.solve(X, y, 1.0, workdir=tmp_path, max_block_rows=9, tol=1e-3)
    assert seen and all(len(names) == 1 and names[0].startswith("llsvm-") for names in seen)
    assert os.listdir(tmp_path) == []


def test_file_is_removed_when_solve_raises(tmp_path, monkeypatch):
    X, y = linear_problem(80, 6, seed=6)
    calls = []
    load = llsvm._load_block

    def failing(f, offsets, ids):
        calls.append(os.listdir(tmp_path))
        if len(calls) == 3:
            raise RuntimeError("disk gone")
        return load(f, offsets, ids)

    monkeypatch.setattr(llsvm, "_load_block", failing)
    with pytest.raises(RuntimeError, match="disk gone"):
        llsvm.solve(X, y, 1.0, workdir=tmp_path, max_block_rows=9, tol=1e-6)
    assert len(calls) == 3 and len(calls[-1]) == 1  # it failed mid-way, with the file present
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- the algorithm


def test_first_pass_drops_exactly_the_rows_at_a_bound(monkeypatch):
    """One shuffled pass from alpha = 0; rows left at 0 or C are never touched again."""
    X, y = linear_problem(120, 8, seed=7, flip=0.25)
    C, seed = 0.05, 11  # small C: many rows reach alpha = C in the first pass
    written = []
    write = llsvm._write_active_set
    monkeypatch.setattr(llsvm, "_write_active_set",
                        lambda f, X_, y_, kept: written.append(kept.copy()) or write(f, X_, y_, kept))
    sol = llsvm.solve(X, y, C, seed=seed, tol=1e-4, full_passes=1)  # the paper's single pass

    alpha, w = np.zeros(120), np.zeros(X.shape[1] + 1)
    order = np.random.default_rng(seed).permutation(120)
    llsvm_sweep(X.toarray(), y, np.arange(120), order, alpha, w, 1.0, 0.0, C)
    free = (alpha > 0) & (alpha < C)
    assert np.array_equal(written[0], np.flatnonzero(free))
    assert np.sum(alpha == C) > 0 and np.sum(alpha == 0) > 0
    assert sol.info["active_first_pass"] == [free.sum()]
    dropped = ~free
    assert np.array_equal(sol.alpha[dropped], alpha[dropped])


def test_rows_that_reach_a_bound_are_not_read_again(monkeypatch):
    X, y = linear_problem(150, 8, seed=8, flip=0.2)
    C = 0.5
    state = {}
    load = llsvm._load_block
    at_load = []

    def spy(f, offsets, ids):
        state.setdefault("loads", []).append(ids.copy())
        return load(f, offsets, ids)

    write = llsvm._write_active_set

    def spy_write(f, X_, y_, kept):
        state["kept"] = kept.copy()
        return write(f, X_, y_, kept)

    sweep = llsvm._sweep

    def spy_sweep(*args):
        rows, alpha = args[5], args[11]
        if rows.size < 150:  # a block of the file: every row read must be strictly free
            at_load.append(alpha[rows].copy())
        return sweep(*args)

    monkeypatch.setattr(llsvm, "_load_block", spy)
    monkeypatch.setattr(llsvm, "_write_active_set", spy_write)
    monkeypatch.setattr(llsvm, "_sweep", spy_sweep)
    sol = llsvm.solve(X, y, C, tol=1e-6, inner_iterations=1, full_passes=1)
    history = sol.info["active_history"]
    assert history == sorted(history, reverse=True) and history[-1] < history[0]
    assert at_load and len(at_load) == len(state["loads"])  # one sweep per block (inner_iterations=1)
    for a in at_load:
        assert np.all((a > 0) & (a < C))
    assert [ids.size for ids in state["loads"]] == history[:len(state["loads"])]


def test_blocks_never_hold_more_than_max_block_rows(monkeypatch):
    X, y = linear_problem(300, 10, seed=9)
    sizes = []
    load = llsvm._load_block

    def counting(f, offsets, ids):
        out = load(f, offsets, ids)
        sizes.append((ids.size, out[0].size, out[1].size - 1))
        return out

    monkeypatch.setattr(llsvm, "_load_block", counting)
    sol = llsvm.solve(X, y, 1.0, max_block_rows=7, tol=1e-3)
    assert sizes and max(max(s) for s in sizes) <= 7
    assert sol.info["max_rows_loaded"] == max(s[0] for s in sizes) <= 7
    n_iter = len(sol.info["blocks_history"])
    assert sol.info["blocks_history"] == [math.ceil(a / 7) for a in sol.info["active_history"][:n_iter]]
    assert sum(sol.info["blocks_history"]) == len(sizes) and len(sol.info["blocks_history"]) > 1
    assert sol.info["rows_loaded"] == sum(s[0] for s in sizes)


@pytest.mark.parametrize("tau", [1.0, 3.0, "radius"])
@pytest.mark.parametrize("loss", ["l1", "l2"])
def test_model_is_the_duals_weighted_sum(tau, loss):
    """Without a warm start, w = sum alpha_i y_i x_i and b = tau * w_tau = tau^2 sum alpha_i y_i."""
    X, y = linear_problem(100, 8, seed=10)
    sol = llsvm.solve(X, y, 0.8, loss=loss, tau=tau, tol=1e-3, full_passes=3)
    radius = np.sqrt(X.multiply(X).sum(axis=1).max())
    t = radius if tau == "radius" else tau
    assert sol.info["tau"] == pytest.approx(t, rel=1e-15)
    coef = sol.alpha * y
    np.testing.assert_allclose(sol.w, X.T @ coef, rtol=1e-10, atol=1e-12)
    assert sol.b == pytest.approx(t * t * coef.sum(), rel=1e-10, abs=1e-12)
    if loss == "l1":
        assert np.all((sol.alpha >= 0) & (sol.alpha <= 0.8))


def test_no_bias_gives_b_zero():
    X, y = linear_problem(50, 6, seed=12)
    sol = llsvm.solve(X, y, 1.0, bias=False, max_epochs=1, inner_iterations=1, seed=4)
    assert sol.b == 0.0 and sol.info["tau"] == 0.0
    np.testing.assert_allclose(sol.w, X.T @ (sol.alpha * y), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("tau", [1.0, 3.0])
def test_warm_start_updates_given_w_incrementally(tau):
    """w0 holding another block's contribution keeps it; alpha0 rows resume where they were."""
    X, y = linear_problem(120, 8, seed=13)
    other = np.random.default_rng(14).normal(size=8)
    b_other = 0.37
    first = llsvm.solve(X, y, 1.0, max_epochs=2, seed=1, tau=tau)
    w0 = first.w + other
    b0 = first.b + b_other
    sol = llsvm.solve(X, y, 1.0, alpha0=first.alpha, w0=w0, b0=b0, seed=2, tol=1e-3, tau=tau)
    coef = sol.alpha * y
    np.testing.assert_allclose(sol.w - other, X.T @ coef, rtol=1e-9, atol=1e-11)
    assert sol.b - b_other == pytest.approx(tau * tau * coef.sum(), rel=1e-9, abs=1e-11)
    if tau == 1.0:  # alpha0 without w0: the model is rebuilt from alpha0, then improved
        again = llsvm.solve(X, y, 1.0, alpha0=sol.alpha, seed=3, tol=1e-3)
        assert dual_objective(X, y, again.alpha, 1.0) >= dual_objective(X, y, sol.alpha, 1.0) - 1e-9
        np.testing.assert_allclose(again.w, X.T @ (again.alpha * y), rtol=1e-9, atol=1e-11)


def test_dense_and_sparse_give_the_same_model():
    X, y = linear_problem(90, 7, seed=15)
    a = llsvm.solve(X, y, 1.0, seed=5, tol=1e-3)
    b = llsvm.solve(X.toarray(), y, 1.0, seed=5, tol=1e-3)
    np.testing.assert_allclose(a.alpha, b.alpha, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a.w, b.w, rtol=1e-10, atol=1e-12)
    assert a.iterations == b.iterations


def liblinear_model(X, y, options):
    liblinear = pytest.importorskip("liblinear.liblinearutil", reason="liblinear-official is not installed")
    model = liblinear.train(liblinear.problem(y, X), liblinear.parameter(options + " -q"))
    w, b = model.get_decfun()
    sign = 1.0 if model.get_labels()[0] == 1 else -1.0  # LIBLINEAR scores its first label
    return sign * np.array(w), sign * b


@pytest.mark.parametrize("loss,solver", [("l1", 3), ("l2", 1)])
def test_small_problem_reaches_liblinear_optimum(loss, solver):
    """With re-admission (full_passes) the problem of liblinear -B 1 is solved: duality gap < 1e-6."""
    X, y = linear_problem(300, 12, seed=16, flip=0.15)
    C, p = 2.0, (1 if loss == "l1" else 2)
    w, b = liblinear_model(X, y, f"-s {solver} -B 1 -c {C} -e 1e-7")
    sol = llsvm.solve(X, y, C, loss=loss, tol=1e-7, full_passes=50, max_epochs=20000)
    ours, ref = primal_objective(X, y, sol.w, sol.b, C, p), primal_objective(X, y, w, b, C, p)
    lower = dual_objective(X, y, sol.alpha, C, loss=loss)
    assert ours - lower <= 1e-6 * ours
    assert lower <= ref and ours <= ref * (1 + 1e-6)  # LIBLINEAR's model is no better
    assert sol.info["converged"]


@pytest.mark.parametrize("bad,match", [
    ({"C": 0.0}, "C: must be"), ({"C": float("nan")}, "C: must be"), ({"loss": "hinge"}, "loss: must be"),
    ({"tol": -1.0}, "tol: must be"), ({"max_epochs": 0}, "max_epochs: must be"),
    ({"inner_iterations": 1.5}, "inner_iterations: must be"), ({"max_block_rows": 0}, "max_block_rows: must be"),
    ({"full_passes": 0}, "full_passes: must be"), ({"tau": "R"}, "tau: must be"), ({"tau": -2.0}, "tau: must be"),
    ({"workdir": "/nonexistent-llsvm-dir"}, "workdir: must be"),
    ({"alpha0": np.full(20, 2.0)}, r"alpha0: must lie in \[0, 1.0\]"),
    ({"alpha0": np.zeros(19)}, r"alpha0: must have shape \(20,\)"), ({"w0": np.zeros(3)}, "w0: must have shape"),
    ({"bias": False, "b0": 1.0}, "b0: must be 0"), ({"y": np.zeros(20)}, "y: labels must be -1 or"),
    ({"y": np.ones(21)}, "y: must have shape"),
    ({"foo": 1}, "solver option foo: not an option of the llsvm solver; expected one of tol, max_epochs, "
                 ".*full_passes"),
    ({"feature_map": "cubic"}, "feature_map: must be a FeatureMap, None or a map name"),
    ({"feature_map": 3}, "feature_map: must be a FeatureMap"),
    ({"feature_map": "shifts:1"}, "feature_map: must fit X's 5 features, got shifts:1"),
    ({"feature_map": "poly2", "w0": np.zeros(5)}, r"w0: must have shape \(20,\)"),
    ({"feature_map": "shifts:1:1x5", "alpha0": np.zeros(20)}, r"alpha0: must have shape \(180,\)"),
])
def test_invalid_arguments_are_named(bad, match):
    X, y = linear_problem(20, 5, seed=17)
    kwargs = {"C": 1.0, "y": y, **bad}
    C, y = kwargs.pop("C"), kwargs.pop("y")
    with pytest.raises(PPackError, match=match):
        llsvm.solve(X, y, C, **kwargs)


# ---------------------------------------------------------------- benchmark data vs LIBLINEAR

def accuracy(T, yt, w, b):
    return 100.0 * np.mean(np.where(T @ w + b >= 0, 1.0, -1.0) == yt)


# a9a in the fast tier; the larger sets in the CI's second tier (seconds each)
@pytest.mark.parametrize("name", ["a9a", pytest.param("w8a", marks=pytest.mark.second_tier),
                                  pytest.param("ijcnn1", marks=pytest.mark.second_tier)])
def test_benchmark_against_liblinear(benchmark_data, name):
    """C = 1 against liblinear -s 3 -B 1 -e 0.001.

    The paper's algorithm alone (full_passes=1) drops for good every row left at alpha = 0
    after one update in the first pass, when w is still far from the optimum; the rows that
    later violate their margin are never seen again. Measured (seed 0): objective +1.6% (a9a),
    +24% (w8a), +3.9% (ijcnn1); test accuracy -0.07, -0.39, -0.67 points. So the paper's
    version is held only to weak duality here, and the 1% / 0.3-point criterion is checked
    with full_passes=5 (Algorithm 2 re-run warm from its own result, re-admitting violators).
    """
    X, y, T, yt = benchmark_data(name)
    start = time.perf_counter()
    w_ref, b_ref = liblinear_model(X, y, "-s 3 -B 1 -c 1 -e 0.001")
    ref_seconds = time.perf_counter() - start
    ref_obj, ref_acc = primal_objective(X, y, w_ref, b_ref, 1.0), accuracy(T, yt, w_ref, b_ref)

    paper = llsvm.solve(X, y, 1.0, tol=0.01)
    start = time.perf_counter()
    sol = llsvm.solve(X, y, 1.0, tol=0.01, full_passes=5)
    seconds = time.perf_counter() - start
    obj, acc = primal_objective(X, y, sol.w, sol.b, 1.0), accuracy(T, yt, sol.w, sol.b)
    paper_obj, paper_acc = primal_objective(X, y, paper.w, paper.b, 1.0), accuracy(T, yt, paper.w, paper.b)
    print(f"\n{name}: liblinear obj {ref_obj:.2f} acc {ref_acc:.3f} ({ref_seconds:.2f}s) | "
          f"llsvm paper obj {paper_obj:.2f} ({100 * (paper_obj / ref_obj - 1):+.2f}%) acc {paper_acc:.3f}, "
          f"active after pass 1: {paper.info['active_first_pass'][0]}/{y.size} | "
          f"full_passes=5 obj {obj:.2f} ({100 * (obj / ref_obj - 1):+.3f}%) acc {acc:.3f} ({seconds:.2f}s)")
    assert abs(obj - ref_obj) <= 0.01 * ref_obj
    assert abs(acc - ref_acc) <= 0.3
    # weak duality: every feasible alpha's dual value is below every primal value
    assert dual_objective(X, y, paper.alpha, 1.0) <= min(ref_obj, paper_obj)
    assert dual_objective(X, y, sol.alpha, 1.0) <= min(ref_obj, obj)
    assert paper.info["active_first_pass"][0] < y.size


# ---------------------------------------------------------------- feature maps


@pytest.mark.parametrize("spec", MAPS)
def test_map_reaches_the_optimum_on_explicit_features(spec):
    """The map computed on demand solves the problem scipy solves on phi(X) (one row per
    virtual row): primal objectives within 1e-6 relative; w = sum_r alpha_r y_r phi(x_r) throughout."""
    X, y, fmap, Phi, yz = mapped_problem(spec)
    C = 0.5
    best = alm_reference_optimum(Phi.toarray(), yz, C, 1.0)  # scipy's
    sol = llsvm.solve(X, y, C, feature_map=spec, tol=1e-7, full_passes=50, max_epochs=20000)
    ours = primal_objective(Phi, yz, sol.w, sol.b, C)
    assert abs(ours - best) <= 1e-6 * best
    assert sol.alpha.shape == (Phi.shape[0],) and sol.w.shape == (fmap.n_out(X.shape[1]),)
    assert sol.info["feature_map"] == fmap.name and sol.info["converged"]
    coef = sol.alpha * yz
    np.testing.assert_allclose(sol.w, Phi.T @ coef, rtol=1e-9, atol=1e-11)
    assert sol.b == pytest.approx(coef.sum(), rel=1e-9, abs=1e-11)
    dense = llsvm.solve(X.toarray(), y, C, feature_map=fmap, tol=1e-7, full_passes=50, max_epochs=20000)
    np.testing.assert_allclose(dense.w, sol.w, rtol=1e-9, atol=1e-11)
    assert dense.iterations == sol.iterations


@pytest.mark.parametrize("spec", MAPS)
def test_map_radius_and_warm_start(spec):
    """tau="radius" is the largest ||phi(x)||; alpha0 alone rebuilds w through the map."""
    X, y, fmap, Phi, yz = mapped_problem(spec, seed=4)
    radius = np.sqrt(Phi.multiply(Phi).sum(axis=1).max())
    first = llsvm.solve(X, y, 0.8, feature_map=fmap, tau="radius", max_epochs=2, full_passes=1, seed=1)
    assert first.info["tau"] == pytest.approx(radius, rel=1e-12)
    coef = first.alpha * yz
    assert first.b == pytest.approx(radius ** 2 * coef.sum(), rel=1e-9, abs=1e-11)
    again = llsvm.solve(X, y, 0.8, feature_map=fmap, alpha0=first.alpha, max_epochs=1, full_passes=1, seed=2,
                        inner_iterations=1)
    np.testing.assert_allclose(again.w, Phi.T @ (again.alpha * yz), rtol=1e-9, atol=1e-11)
    assert again.b == pytest.approx(np.sum(again.alpha * yz), rel=1e-9, abs=1e-11)
    assert dual_objective(Phi, yz, again.alpha, 0.8) >= dual_objective(Phi, yz, first.alpha, 0.8) - 1e-9


# ---------------------------------------------------------------- row weights


# one case in the fast tier, the other three in the CI's second tier (seconds each)
@pytest.mark.parametrize("spec, loss", [("identity", "l1")] + [pytest.param(spec, loss, marks=pytest.mark.second_tier)
                                                       for spec, loss in (("identity", "l2"), ("poly2", "l1"),
                                                                          ("poly2", "l2"))])
def test_weighted_llsvm_reaches_the_weighted_optimum(spec, loss):
    """Row weights (some 0): llsvm's model is the weighted optimum (scipy's, on explicit
    rows); llsvm stops at a spread of 1e-6, which leaves its objective within 1e-6 relative."""
    X, y, weights, fmap, p, optimum = weighted_problem(spec, loss)
    for block_rows in (None, 40):
        sol = llsvm.solve(X, y, 0.5, loss=loss, tol=1e-6, full_passes=20, max_block_rows=block_rows,
                          feature_map=fmap, weights=weights)
        ours = primal_objective(X, y, sol.w, sol.b, 0.5, p, fmap, weights)
        assert optimum * (1 - 1e-9) <= ours <= optimum * (1 + 1e-6)
        assert np.all(sol.alpha[weights == 0.0] == 0.0)
        if loss == "l1":
            assert np.all(sol.alpha <= 0.5 * weights)
        if spec == "identity":
            gap = ours - dual_objective(X, y, sol.alpha, 0.5, loss, weights=weights)
            assert 0.0 <= gap <= 1e-6 * ours
    plain = llsvm.solve(X, y, 0.5, loss=loss, tol=1e-6, full_passes=20, feature_map=fmap)
    assert primal_objective(X, y, plain.w, plain.b, 0.5, p, fmap, weights) > optimum * (1 + 1e-3)


def test_weighted_sweep_matches_twin_with_per_row_bounds():
    """The sweep with per-dual U_i = C c_i equals the twin's sweep row by row with U = C c_i."""
    X, y = product_problem(n=60, d=5, seed=2)
    C, tau = 0.8, 1.0
    weights = np.random.default_rng(3).uniform(0.1, 2.0, 60)
    uppers, diags = C * weights, np.zeros(60)
    alpha, w = np.zeros(60), np.zeros(X.shape[1] + 1)
    a_twin, w_twin = alpha.copy(), w.copy()
    rows, Xd = np.arange(60), X.toarray()
    indptr, indices, values, dense = as_rows(X)
    for order in np.random.default_rng(5).permutation(np.tile(np.arange(60), (4, 1)), axis=1):
        llsvm._sweep(indptr, indices, values, dense, y, rows, 1, order, 0, np.array([X.shape[1]]), 1,
                     alpha, w, np.empty(0), tau, 0.0, C, uppers, diags)
        for k in order:  # the twin, one row at a time with that row's bound
            llsvm_sweep(Xd, y, rows, [k], a_twin, w_twin, tau, 0.0, uppers[k])
    np.testing.assert_allclose(alpha, a_twin, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(w, w_twin, rtol=1e-12, atol=1e-14)
