"""Partial kernel sums and pair kernels of the compute seam (whichever backend it chooses) against the numpy
twins (tests/naive.py)."""
import numpy as np
import pytest

from ppack.kernels.block import RowBlock
from ppack.kernels import compute as compute_module
from ppack.kernels.compute import DEFAULT_WORK_BYTES, KernelCompute, KernelGroups, csr_row_norms, row_norms
from ppack.kernels.cpu import NARROW_GROUP, exp_nonpositive
from ppack.kernels.spec import KernelSpec

from helpers import make_problem
from naive import kernel_matrix, kernel_sums

KERNELS = [("rbf", {}), ("laplacian", {}), ("linear", {}), ("poly", {"degree": 3, "coef0": 0.5}),
           ("sigmoid", {"coef0": -0.5}),
           ("rbf", {"offset": 1.0})]
# float64 storage: sums agree to rounding; float32 storage rounds the features first,
# so the twin is fed the same float32-rounded values and only the dot products differ.
RTOL = {np.float64: 1e-10, np.float32: 2e-4}


def _compute_and_block(sparse, dtype, name, params, n_sv=150, r=37, d=20, work_bytes=DEFAULT_WORK_BYTES):
    spec = KernelSpec(name, gamma=0.05, **params)
    X, _ = make_problem(n_sv + r, d, sparse=sparse, seed=3)
    X = X.astype(dtype)
    sv, rows = X[:n_sv], X[n_sv:]
    compute = KernelCompute(spec, d, sparse, dtype, work_bytes)
    coef = np.random.default_rng(1).normal(size=n_sv)
    compute.store(sv)
    block = RowBlock.from_rows(rows, np.zeros(r), d)
    return spec, compute, block, sv, rows, coef


@pytest.mark.parametrize("name,params", KERNELS)
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("work_bytes", [64 << 20, 2048])  # 2 KiB forces many tiles / column groups
@pytest.mark.parametrize("n_columns", [None, 3])  # None: coef (n,) and out (r,); else coef (n, K), out (K, r)
def test_partial_sums_match_naive(name, params, sparse, dtype, work_bytes, n_columns):
    spec, compute, block, sv, rows, coef = _compute_and_block(sparse, dtype, name, params, work_bytes=work_bytes)
    r = block.n_rows
    if n_columns is not None:
        coef = np.random.default_rng(2).normal(size=(len(coef), n_columns))
    start = np.random.default_rng(5).normal(size=(r,) if n_columns is None else (n_columns, r))
    out = start.copy()
    compute.partial_sums(coef, block, compute.row_norms(block), out)
    expected = start + kernel_sums(sv, rows, coef, name, spec.gamma, spec.degree, spec.coef0, spec.offset)
    np.testing.assert_allclose(out, expected, rtol=RTOL[dtype], atol=RTOL[dtype] * np.abs(expected).max())


@pytest.mark.parametrize("name,params", KERNELS)
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("grouped", [False, True])
def test_few_sums_are_partial_sums_of_few_rows_bit_for_bit(name, params, sparse, grouped):
    """``few_sums`` (no checks) adds what ``partial_sums(few=True)`` adds, to the bit, for one
    kernel and for kernel groups sharing the reduction."""
    spec, compute, block, sv, rows, coef = _compute_and_block(sparse, np.float32, name, params, n_sv=5)
    if grouped:
        compute = compute.with_groups(KernelGroups([spec, KernelSpec(name, gamma=0.2, **params)], [0, 2, 3]))
    coef = np.random.default_rng(2).normal(size=(sv.shape[0], 3))
    norms = compute.row_norms(block)
    start = np.random.default_rng(4).normal(size=(3, block.n_rows))
    checked, unchecked = start.copy(), start.copy()
    compute.partial_sums(coef, block, norms, checked, few=True)
    compute.few_sums(coef, block, norms, unchecked)
    np.testing.assert_array_equal(unchecked, checked)
    assert not np.array_equal(unchecked, start)


@pytest.mark.parametrize("name,params", KERNELS)
@pytest.mark.parametrize("sparse", [False, True])
def test_partial_sums_columns_match_one_column_runs_exactly(name, params, sparse):
    """Each of K columns gets the same operations in the same order as a one-column run."""
    spec, compute, block, sv, rows, coef = _compute_and_block(sparse, np.float32, name, params, work_bytes=2048)
    coef = np.random.default_rng(2).normal(size=(len(coef), 5))
    norms = compute.row_norms(block)
    out = np.zeros((5, block.n_rows))
    compute.partial_sums(coef, block, norms, out)
    for c in range(5):
        one = np.zeros(block.n_rows)
        compute.partial_sums(coef[:, c], block, norms, one)
        np.testing.assert_array_equal(out[c], one)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("work_bytes", [64 << 20, 2048])  # 2 KiB: sparse columns are built a group at a time
def test_prepare_builds_the_columns_the_products_then_use(sparse, work_bytes):
    """``prepare`` builds the block's columns when the kernel sums and pair kernels take
    them whole, and then they reuse them; the sums are those of an unprepared block."""
    spec, compute, block, sv, rows, coef = _compute_and_block(sparse, np.float32, "rbf", {}, work_bytes=work_bytes)
    compute.prepare(block)
    whole = not sparse or 8 * block.n_rows * block.n_features <= work_bytes
    assert (block._columns is not None) == whole
    built = block._columns
    norms = compute.row_norms(block)
    out, fresh = np.zeros(block.n_rows), np.zeros(block.n_rows)
    compute.partial_sums(coef, block, norms, out)
    assert block._columns is built  # reused, not rebuilt
    plain = RowBlock.from_rows(rows, np.zeros(block.n_rows), block.n_features)
    compute.partial_sums(coef, plain, compute.row_norms(plain), fresh)
    np.testing.assert_array_equal(out, fresh)


def test_partial_sums_shapes():
    spec, compute, block, sv, rows, coef = _compute_and_block(False, np.float64, "rbf", {})
    r, norms = block.n_rows, compute.row_norms(block)
    one_column = np.zeros((1, r))  # coef (n,) or (n, 1) may also fill a (1, r) out
    compute.partial_sums(coef, block, norms, one_column)
    flat = np.zeros(r)
    compute.partial_sums(coef[:, None], block, norms, flat)
    np.testing.assert_array_equal(one_column[0], flat)
    for bad_coef, bad_out in [(coef, np.zeros((2, r))), (np.stack([coef] * 2, 1), np.zeros(r)),
                              (np.stack([coef] * 2, 1), np.zeros((2, r + 1))), (coef[:, None, None], flat),
                              (coef[:-1], flat)]:  # one coefficient row per stored row
        with pytest.raises(ValueError):
            compute.partial_sums(bad_coef, block, norms, bad_out)
    empty = np.zeros((0, 3))  # no stored rows: nothing to add
    out = np.ones((3, r))
    KernelCompute(spec, block.n_features, False).partial_sums(empty, block, norms, out)
    assert np.all(out == 1.0)


@pytest.mark.parametrize("name,params", KERNELS)
@pytest.mark.parametrize("sparse", [False, True])
def test_pair_kernels_match_naive(name, params, sparse):
    spec = KernelSpec(name, gamma=0.05, **params)
    X, _ = make_problem(30, 15, sparse=sparse, seed=4)
    block = RowBlock.from_rows(X, np.zeros(30), 15)
    left, right = np.triu_indices(30)
    out = np.empty(len(left))
    compute = KernelCompute(spec, 15, sparse)
    compute.pair_kernels(block, compute.row_norms(block), left, right, out)
    K = kernel_matrix(X, X, name, spec.gamma, spec.degree, spec.coef0, spec.offset)
    np.testing.assert_allclose(out, K[left, right], rtol=1e-12, atol=1e-12)



def _pair_reference(rows, a, b, kind):
    """The reduction of rows a and b feature by feature in order, each product (or laplacian
    term) rounded in the rows' dtype and added to a float64 sum: what every pair path must give."""
    z = np.float64(0.0)  # a float64 sum (a Python float would follow a float32 product's type)
    for va, vb in zip(rows[a], rows[b]):
        z += (abs(va) + abs(vb) - abs(va - vb)) if kind == "laplacian" else va * vb
    return z


@pytest.mark.parametrize("name", ["rbf", "laplacian", "linear"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("density", [0.6, 0.05])  # a CSR block dense enough for the dense path, and not
def test_pair_kernels_are_the_same_bits_whatever_the_path_and_the_split(name, dtype, density):
    """Dense and CSR blocks of the same rows give identical pair kernels, equal to the in-order
    reference, and a split of the pairs (as ranks take them) gives the same values as all at once."""
    import scipy.sparse as sp

    rng = np.random.default_rng(8)
    r, d = 24, 13
    X = rng.normal(size=(r, d)).astype(dtype)
    X[rng.random((r, d)) > density] = 0.0
    spec = KernelSpec(name, gamma=0.3)
    left, right = np.triu_indices(r)
    compute = KernelCompute(spec, d, False, dtype)  # pair kernels read the block, not the stored rows
    norms = row_norms(X, spec)  # one set of norms for both blocks (dense and CSR norms sum in other orders)
    results = []
    for rows in (X, sp.csr_matrix(X)):
        block = RowBlock.from_rows(rows, np.zeros(r), d)
        whole = np.empty(len(left))
        compute.pair_kernels(block, norms, left, right, whole)
        for lo, hi in [(0, 50), (50, 51), (51, len(left))]:
            part = np.empty(hi - lo)
            compute.pair_kernels(block, norms, left[lo:hi], right[lo:hi], part)
            np.testing.assert_array_equal(part, whole[lo:hi])
        results.append(whole)
    np.testing.assert_array_equal(results[0], results[1])
    for q in range(0, len(left), 7):
        a, b = left[q], right[q]
        z = _pair_reference(X, a, b, name)
        if name == "linear":
            expected = z
        else:
            twice = 2.0 if name == "rbf" else 1.0
            # the cores' own exp (within 2.2e-16 of numpy's: tests/test_kernels_cpu.py)
            expected = exp_nonpositive(np.array([-spec.gamma * max(norms[a] + norms[b] - twice * z, 0.0)]))[0]
        assert results[0][q] == expected



def _near_rows(dtype, d=784, r=24, seed=7):
    """r rows in [0, 1]^d and, for each, a stored row differing by 1e-3 in 4 coordinates."""
    rng = np.random.default_rng(seed)
    rows = rng.random((r, d)).astype(dtype)
    sv = rows.copy()
    for k in range(r):
        f = rng.choice(d, size=4, replace=False)
        sv[k, f] = np.clip(sv[k, f] + rng.choice([-1e-3, 1e-3], size=4), 0.0, 1.0)
    return sv, rows, rng.uniform(0.5, 1.5, size=r)


# float32 rows at gamma = 1 (gamma delta ~ 0.02) and 40 (~1), float64 rows at gamma = 1e4
@pytest.mark.parametrize("dtype,gamma", [(np.float32, 1.0), (np.float32, 40.0), (np.float64, 1e4)])
@pytest.mark.parametrize("work_bytes", [64 << 20, 2048])
def test_dense_rbf_near_rows_within_dot_product_bound(dtype, gamma, work_bytes):
    """rbf sums of rows within ~2e-6 squared distance of the block rows (d = 784, values in
    [0, 1]) stay within the bound in ``cpu.gemm_partial_sums``'s docstring: the dot product
    is off by at most g_d sum_f |x_f z_f| with g_d = d u / (1 - d u), u the storage type's
    unit roundoff, so each kernel value is off by at most K (exp(gamma delta) - 1),
    delta = 2 g_d sum_f |x_f z_f| (plus float64 rounding of the norms and the sums).
    The twin is float64 on the stored (rounded) values and never forms x.z.
    """
    d = 784
    sv, rows, coef = _near_rows(dtype, d)
    r = len(rows)
    spec = KernelSpec("rbf", gamma=gamma)
    compute = KernelCompute(spec, d, False, dtype, work_bytes)
    compute.store(sv)
    block = RowBlock.from_rows(rows, np.zeros(r), d)
    out = np.zeros(r)
    compute.partial_sums(coef, block, compute.row_norms(block), out)
    A, B = sv.astype(np.float64), rows.astype(np.float64)
    K = kernel_matrix(A, B, "rbf", gamma)
    expected = coef @ K
    u = np.finfo(dtype).eps / 2
    g_d = d * u / (1 - d * u)
    norms = (A ** 2).sum(1)[:, None] + (B ** 2).sum(1)[None, :]
    delta = 2 * g_d * (np.abs(A) @ np.abs(B).T) + 8 * 2.0 ** -53 * norms
    bound = np.abs(coef) @ (K * np.expm1(gamma * delta)) + 1e-12 * (np.abs(coef) @ K) + 1e-300
    assert np.diag(K).min() > 0.9  # the near pairs carry the sums
    if dtype == np.float32 and gamma == 1.0:
        assert (bound / expected).max() < 0.05  # the bound is far from vacuous here
    np.testing.assert_array_less(np.abs(out - expected), bound)


def test_dense_kernel_sums_run_with_single_threaded_blas(monkeypatch):
    """The GEMM path calls BLAS from numba's parallel loop: BLAS must be held at one thread
    there (two pools spinning against each other ran 20x slower) and given back afterwards."""
    from threadpoolctl import threadpool_info, threadpool_limits

    spec, compute, block, sv, rows, coef = _compute_and_block(False, np.float64, "rbf", {})
    seen = []

    def recording_gemm(*args):
        seen.append({lib["filepath"]: lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"})

    monkeypatch.setattr(compute_module.BACKEND, "gemm_partial_sums", recording_gemm)
    with threadpool_limits(2, user_api="blas"):
        before = {lib["filepath"]: lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}
        compute.partial_sums(coef, block, compute.row_norms(block), np.zeros(block.n_rows))
        after = {lib["filepath"]: lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}
    assert len(seen) == 1 and seen[0] and set(seen[0].values()) == {1}
    assert after == before


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("l1", [False, True])
def test_csr_row_norms_match_numpys_reduceat(dtype, l1):
    """The numba CSR norms against numpy (squares or magnitudes in float64, ``np.add.reduceat``):
    the same bits for rows of 0 to 3,000 nonzeros (every branch of the pairwise order)."""
    rng = np.random.default_rng(2)
    lengths = np.concatenate([rng.integers(0, 20, 200), rng.integers(100, 700, 20), [0, 1, 7, 8, 9, 128, 129, 257],
                              [3000, 0, 1500]])
    indptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    values = (rng.normal(size=indptr[-1]) * 10 ** rng.uniform(-3, 3, size=indptr[-1])).astype(dtype)
    terms = np.abs(values).astype(np.float64) if l1 else values.astype(np.float64) ** 2
    nonempty = lengths > 0
    expected = np.zeros(len(lengths))
    expected[nonempty] = np.add.reduceat(terms, indptr[:-1][nonempty])
    np.testing.assert_array_equal(csr_row_norms(indptr, None, values, l1), expected)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.uint8, np.float16])
@pytest.mark.parametrize("l1", [False, True])
def test_dense_row_norms_match_their_twin(dtype, l1):
    """The numba dense norms against a plain loop in the same order (terms in float64, eight
    running sums by feature modulo 8, added in a fixed tree): the same bits for rows of 1 to
    3,000 features, and within rounding of numpy's sum."""
    from ppack.kernels.compute import dense_row_norms

    rng = np.random.default_rng(4)
    for d in (1, 7, 8, 9, 128, 129, 257, 784, 3000):
        X = (rng.normal(size=(6, d)) * 100).astype(dtype) if dtype != np.uint8 else rng.integers(0, 256, (6, d), dtype)
        got = dense_row_norms(X, l1)
        np.testing.assert_array_equal(got, _twin_norms(X, l1))
        terms = X.astype(np.float64)
        np.testing.assert_allclose(got, (np.abs(terms) if l1 else terms * terms).sum(axis=1), rtol=1e-13)


def _twin_norms(X, l1):
    """The dense norms' plain loop: terms in float64, eight running sums by feature modulo 8,
    added in a fixed tree (terms that overflow are infinite)."""
    with np.errstate(over="ignore", invalid="ignore"):
        terms = X.astype(np.float64)
        terms = np.abs(terms) if l1 else terms * terms
        expected = []
        for row in terms:
            s = [0.0] * 8
            for f, term in enumerate(row):
                s[f % 8] += term
            expected.append(((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])))
    return np.array(expected)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("l1", [False, True])
def test_dense_row_norms_vectorised_and_strided_rows_match_the_twin(dtype, l1):
    """Contiguous float rows take the eight sums as one vector (``norms._lane_sums_simd``),
    strided rows the scalar loop: both the twin's bits, with infinities, NaNs, signed zeros,
    subnormals and values that overflow when squared among the terms; and delivery's
    conversion (``_scaled``) gives the same norms."""
    from ppack.data.delivery import _scaled
    from ppack.kernels.compute import dense_row_norms

    rng = np.random.default_rng(5)
    info = np.finfo(dtype)
    special = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, info.tiny / 4, -info.tiny, info.max, -info.max],
                       dtype=dtype)
    for d in (8, 15, 64, 785):
        X = (rng.normal(size=(9, 2 * d)) * 10 ** rng.uniform(-20, 20, size=(9, 2 * d))).astype(dtype)
        for k in range(len(special)):  # row k holds special value k at a few places; the last rows none
            X[k, rng.integers(0, 2 * d, 3)] = special[k]
        for rows in (X[:, :d].copy(), X[:, ::2]):
            np.testing.assert_array_equal(dense_row_norms(rows, l1), _twin_norms(rows, l1))
        contiguous = X[:, :d].copy()
        out, norms, columns = np.empty_like(contiguous), np.empty(len(contiguous)), np.empty(contiguous.shape[::-1],
                                                                                               dtype=dtype)
        _scaled(contiguous, 1.0, out, l1, norms, columns)
        np.testing.assert_array_equal(norms, _twin_norms(contiguous, l1))
        assert columns.tobytes() == np.ascontiguousarray(out.T).tobytes()


# kernel groups: the dot-product kernels share one reduction, laplacian kernels another
DOT_GROUPS = [KernelSpec("rbf", gamma=0.05), KernelSpec("poly", gamma=0.1, degree=2, coef0=0.5),
              KernelSpec("sigmoid", gamma=0.02, coef0=-0.5), KernelSpec("linear"), KernelSpec("rbf", gamma=0.4)]
L1_GROUPS = [KernelSpec("laplacian", gamma=0.05), KernelSpec("laplacian", gamma=0.3)]


def _grouped(specs, sparse, dtype, work_bytes, widths=(2, 1, 3, 2, 1)):
    """A grouped compute over ``specs`` with group g taking widths[g] columns, its stored rows,
    block, coefficients and the one-kernel computes of each group."""
    _, _, block, sv, rows, _ = _compute_and_block(sparse, dtype, "rbf", {}, work_bytes=work_bytes)
    widths = widths[:len(specs)]
    groups = KernelGroups(specs, np.concatenate([[0], np.cumsum(widths)]))
    compute = KernelCompute(specs[0], sv.shape[1], sparse, dtype, work_bytes, groups=groups)
    compute.store(sv)
    singles = [KernelCompute(spec, sv.shape[1], sparse, dtype, work_bytes) for spec in specs]
    for single in singles:
        single.store(sv)
    rng = np.random.default_rng(2)
    coef = rng.normal(size=(sv.shape[0], groups.n_columns))
    for g in range(len(specs)):  # rows with no coefficient in a group (the grouped cores skip them)
        coef[rng.random(sv.shape[0]) < 0.4, groups.starts[g]:groups.starts[g + 1]] = 0.0
    coef[:70, groups.starts[1]:] = 0.0  # whole blocks and tiles with nothing for the later groups
    return groups, compute, singles, block, sv, rows, coef


@pytest.mark.parametrize("specs", [DOT_GROUPS, L1_GROUPS], ids=["dot", "l1"])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("work_bytes, few", [(64 << 20, False), (2048, False), (64 << 20, True)])
@pytest.mark.parametrize("widths", [(2, 1, 3, 2, 1), (2, NARROW_GROUP + 4, 3, NARROW_GROUP + 2, 1)],
                         ids=["narrow", "wide"])
def test_grouped_partial_sums_match_naive_and_each_groups_one_kernel_call(specs, sparse, dtype, work_bytes, few,
                                                                         widths):
    """One pass over rbf, poly, sigmoid and linear groups (or two laplacian gammas): each group's
    columns equal the numpy twin and a one-kernel call with its kernel to rounding (the same
    kernel values; the weighted sums are a GEMM per wide group, in BLAS's order, and a fused
    loop per narrow one (``cpu.NARROW_GROUP`` columns or fewer); the rows a group has no
    coefficient for, which the grouped cores skip, add exact zeros in the other)."""
    groups, compute, singles, block, sv, rows, coef = _grouped(specs, sparse, dtype, work_bytes, widths)
    norms = compute.row_norms(block)
    out = np.zeros((groups.n_columns, block.n_rows))
    compute.partial_sums(coef, block, norms, out, few=few)
    for g, (spec, single) in enumerate(zip(specs, singles)):
        cols = slice(groups.starts[g], groups.starts[g + 1])
        expected = kernel_sums(sv, rows, coef[:, cols], spec.name, spec.gamma, spec.degree, spec.coef0, spec.offset)
        np.testing.assert_allclose(out[cols], expected, rtol=RTOL[dtype], atol=RTOL[dtype] * np.abs(expected).max())
        one = np.zeros((cols.stop - cols.start, block.n_rows))
        single.partial_sums(coef[:, cols], block, norms, one, few=few)
        np.testing.assert_allclose(out[cols], one, rtol=1e-12, atol=1e-12 * np.abs(one).max())


@pytest.mark.parametrize("sparse", [False, True])
def test_grouped_pair_kernels_are_each_groups_kernel(sparse):
    groups, compute, singles, block, _, rows, _ = _grouped(DOT_GROUPS, sparse, np.float64, 64 << 20)
    norms = compute.row_norms(block)
    left, right = np.triu_indices(block.n_rows)
    out = np.empty((len(DOT_GROUPS), len(left)))
    compute.pair_kernels(block, norms, left.astype(np.int64), right.astype(np.int64), out)
    for g, (spec, single) in enumerate(zip(DOT_GROUPS, singles)):
        one = np.empty(len(left))
        single.pair_kernels(block, norms, left.astype(np.int64), right.astype(np.int64), one)
        np.testing.assert_array_equal(out[g], one)
        expected = kernel_matrix(rows, rows, spec.name, spec.gamma, spec.degree, spec.coef0)[left, right]
        np.testing.assert_allclose(out[g], expected, rtol=1e-10, atol=1e-12)


def test_kernel_groups_refuse_kernels_without_a_shared_reduction():
    with pytest.raises(ValueError, match="share a reduction"):
        KernelGroups([KernelSpec("rbf"), KernelSpec("laplacian")], [0, 1, 2])
    with pytest.raises(ValueError, match="increasing column starts"):
        KernelGroups([KernelSpec("rbf"), KernelSpec("poly")], [0, 2, 2])
