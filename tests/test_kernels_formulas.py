"""The kernel table's facts hold together, and each kernel's numba formula is its numpy formula:
every kernel of ``registry.KERNEL_TABLE``, through both pair-kernel cores and both sum cores."""
import numpy as np
import pytest
import scipy.sparse as sp

from ppack.kernels.block import RowBlock
from ppack.kernels.compute import KernelCompute
from ppack.kernels.spec import KernelSpec
from ppack.registry import KERNEL_TABLE, KERNELS

from naive import kernel_matrix

PARAMS = {"gamma": 0.4, "degree": 3, "coef0": -0.3}


@pytest.mark.parametrize("facts", KERNEL_TABLE, ids=KERNELS)
def test_the_facts_of_each_kernel_agree(facts):
    assert facts.reduction in ("dot", "l1")
    assert not (facts.gemm and facts.reduction != "dot"), "GEMM gives dot products only"
    assert facts.float32_error is None or (facts.exp and facts.float32_error > 0), \
        "a relative float32 bound needs an exp of a distance"
    assert set(facts.params) <= {"gamma", "degree", "coef0"}
    assert "gamma" in facts.params or facts.name == "linear"


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("name", KERNELS)
def test_each_kernel_formula_equals_numpy(name, sparse):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(9, 5)) * (rng.random((9, 5)) < 0.7)
    block = RowBlock.from_rows(sp.csr_matrix(X) if sparse else X, np.ones(9), 5)
    spec = KernelSpec(name, **PARAMS)
    compute = KernelCompute(spec, 5, sparse)
    compute.store(block.csr if sparse else X)
    norms = compute.row_norms(block)
    left, right = (a.astype(np.int64) for a in np.triu_indices(9))
    pairs = np.empty(len(left))
    compute.pair_kernels(block, norms, left, right, pairs)
    expected = kernel_matrix(X, X, name, **PARAMS)
    np.testing.assert_allclose(pairs, expected[left, right], rtol=1e-12, atol=1e-14)
    coef = rng.normal(size=(9, 1))
    sums = np.zeros(9)
    compute.partial_sums(coef, block, norms, sums)
    np.testing.assert_allclose(sums, coef[:, 0] @ expected, rtol=1e-11, atol=1e-12)
