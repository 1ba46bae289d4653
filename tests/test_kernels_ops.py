"""Partial kernel sums and pair kernels (whichever backend ops chooses) against the numpy twins (tests/naive.py)."""
import numpy as np
import pytest

from ppack.data.block import RowBlock
from ppack.kernels import ops
from ppack.kernels.spec import KernelSpec
from ppack.packsvm.table import SupportVectorTable

from conftest import make_problem
from naive import kernel_matrix

KERNELS = [("rbf", {}), ("laplacian", {}), ("linear", {}), ("poly", {"degree": 3, "coef0": 0.5}),
           ("rbf", {"offset": 1.0})]
# float64 storage: sums agree to rounding; float32 storage rounds the features first,
# so the twin is fed the same float32-rounded values and only the dot products differ.
RTOL = {np.float64: 1e-10, np.float32: 2e-4}


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
