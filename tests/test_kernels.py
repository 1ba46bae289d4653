"""Every numba kernel against its slow numpy twin (tests/naive.py)."""
import numpy as np
import pytest
import scipy.sparse as sp

from ppack.data.block import RowBlock
from ppack.kernels import ops
from ppack.kernels.cpu import exp_nonpositive
from ppack.kernels.spec import KernelSpec
from ppack.packsvm.table import SupportVectorTable

from conftest import make_problem
from naive import kernel_matrix

KERNELS = [("rbf", {}), ("laplacian", {}), ("linear", {}), ("poly", {"degree": 3, "coef0": 0.5}),
           ("rbf", {"offset": 1.0})]
# float64 storage: sums agree to rounding; float32 storage rounds the features first,
# so the twin is fed the same float32-rounded values and only the dot products differ.
RTOL = {np.float64: 1e-10, np.float32: 2e-4}


def test_fast_exp_matches_numpy():
    rng = np.random.default_rng(0)
    x = np.concatenate([-np.abs(rng.normal(size=100_000)) * 40, [0.0, -1e-300, -5e-324, -0.5, -699.9]])
    got = exp_nonpositive(x)
    expected = np.exp(x)
    assert np.max(np.abs(got - expected) / expected) < 4e-16


def test_fast_exp_clamps_far_tail_to_tiny():
    got = exp_nonpositive(np.array([-800.0, -1e6]))
    assert np.all(got <= np.exp(-699.0)) and np.all(got >= 0.0)


def _table_and_block(sparse, dtype, name, params, n_sv=150, r=37, d=20):
    spec = KernelSpec(name, gamma=0.05, **params)
    X, _ = make_problem(n_sv + r, d, sparse=sparse, seed=3)
    X = X.astype(dtype)
    sv, rows = X[:n_sv], X[n_sv:]
    table = SupportVectorTable(d, sparse, dtype)
    coef = np.random.default_rng(1).normal(size=n_sv)
    table.insert_many(1000 + np.arange(n_sv), coef, sv, ops.row_norms(sv, spec))
    block = RowBlock.from_rows(rows, np.zeros(r), d)
    return spec, table, block, sv, rows, coef


@pytest.mark.parametrize("name,params", KERNELS)
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("work_bytes", [64 << 20, 2048])  # 2 KiB forces many tiles / column groups
def test_partial_sums_match_naive(name, params, sparse, dtype, work_bytes):
    spec, table, block, sv, rows, coef = _table_and_block(sparse, dtype, name, params)
    out = np.zeros(block.n_rows)
    ops.partial_sums(table.features, table.norms, table.coef, block, ops.row_norms(block, spec), spec, out,
                     work_bytes)
    expected = coef @ kernel_matrix(sv, rows, name, spec.gamma, spec.degree, spec.coef0, spec.offset)
    np.testing.assert_allclose(out, expected, rtol=RTOL[dtype], atol=RTOL[dtype] * np.abs(expected).max())


@pytest.mark.parametrize("name,params", KERNELS)
@pytest.mark.parametrize("sparse", [False, True])
def test_pair_kernels_match_naive(name, params, sparse):
    spec = KernelSpec(name, gamma=0.05, **params)
    X, _ = make_problem(30, 15, sparse=sparse, seed=4)
    block = RowBlock.from_rows(X, np.zeros(30), 15)
    left, right = np.triu_indices(30)
    out = np.empty(len(left))
    ops.pair_kernels(block, ops.row_norms(block, spec), left, right, spec, out)
    K = kernel_matrix(X, X, name, spec.gamma, spec.degree, spec.coef0, spec.offset)
    np.testing.assert_allclose(out, K[left, right], rtol=1e-12, atol=1e-12)


def test_block_transposed_is_dense_transpose():
    X, _ = make_problem(10, 7, sparse=True, seed=5)
    block = RowBlock.from_rows(X, np.zeros(10), 9)  # padded to 9 features
    XT = block.transposed(2, 8)
    expected = np.zeros((9, 6))
    expected[:7] = X.toarray()[2:8].T
    np.testing.assert_array_equal(XT, expected)


def test_table_lookup_growth_and_bulk_insert():
    spec = KernelSpec("rbf")
    X, _ = make_problem(300, 5, sparse=True, seed=6)
    table = SupportVectorTable(5, True, np.float64)
    for j in range(200):  # grows past the initial capacity several times
        table.insert_many([10 * j], [float(j)], X[j], ops.row_norms(X[j], spec))
        assert table.slot_of(10 * j) == j
    table.insert_many(np.arange(5000, 5100), np.ones(100), X[200:300], ops.row_norms(X[200:300], spec))
    assert len(table) == 300
    assert table.slot_of(10 * 123) == 123 and table.slot_of(5050) == 250 and table.slot_of(7) == -1
    table.add_to(table.slot_of(10 * 7), 0.5)
    assert table.coef[7] == 7.5
    indptr, indices, values = table.features
    rebuilt = sp.csr_matrix((values, indices, indptr), shape=(300, 5))
    np.testing.assert_array_equal(rebuilt.toarray(), X.toarray())
    np.testing.assert_allclose(table.norms, np.asarray(X.multiply(X).sum(axis=1)).ravel())
    with pytest.raises(KeyError):
        table.insert_many([10 * 7], [1.0], X[0], ops.row_norms(X[0], spec))


def test_kernel_spec_rejects_bad_parameters():
    from ppack.errors import PPackError

    with pytest.raises(PPackError, match="unknown kernel 'sigmoid'"):
        KernelSpec("sigmoid")
    with pytest.raises(PPackError, match="gamma: must be a finite number > 0"):
        KernelSpec("rbf", gamma=-1.0)
    with pytest.raises(PPackError, match="degree: must be an integer >= 1"):
        KernelSpec("poly", degree=0)
