"""dtype "auto": the float32 error bound holds for the real float32 kernel values, and the
choice follows it (float32 for well-scaled rows, float64 for rows with a large offset)."""
import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

from ppack import PackSVC
from ppack.kernels.block import RowBlock
from ppack.data.shard import Shard
from ppack.kernels.compute import KernelCompute, row_norms
from ppack.kernels.precision import AUTO_FLOAT32_BOUND, float32_kernel_error, resolve_dtype
from ppack.kernels.spec import KernelSpec

from helpers import make_problem
from naive import kernel_matrix

SELF = MPI.COMM_SELF


def float32_kernel_matrix(A, B, spec):
    """The (len(A), len(B)) kernel values ppack's float32 kernel sums take: one coefficient
    column per stored row (identity coefficients), so each output is one kernel value."""
    n, d = A.shape
    compute = KernelCompute(spec, d, False, np.float32)
    compute.store(A)
    block = RowBlock.from_rows(B, np.zeros(len(B)), d)
    out = np.zeros((n, len(B)))
    compute.partial_sums(np.eye(n), block, compute.row_norms(block), out)
    return out


# (kernel, gamma, offset of the rows, whether the bound is informative there). The bound grows as
# exp(gamma * c * d u * max_norm): with rows near 1000 (squared norm 4e7) it is 2e4 for rbf at
# gamma 0.05 and 1e174 at gamma 2, above 1 and so vacuous for a kernel value in (0, 1]; laplacian
# (an L1 norm of 4e4) and rbf at gamma 0.001 keep it below 1 even there.
BOUND_CASES = [("rbf", 0.05, 0.0, True), ("rbf", 0.05, 30.0, True), ("rbf", 0.05, 1000.0, False),
               ("rbf", 2.0, 0.0, True), ("rbf", 2.0, 30.0, True), ("rbf", 2.0, 1000.0, False),
               ("rbf", 0.001, 1000.0, True),
               ("laplacian", 0.1, 0.0, True), ("laplacian", 0.1, 30.0, True), ("laplacian", 0.1, 1000.0, True)]


@pytest.mark.parametrize("kernel,gamma,offset,informative", BOUND_CASES)
def test_float32_kernel_values_stay_within_the_bound(kernel, gamma, offset, informative):
    """Relative error of every float32 kernel value (rows rounded to float32, dot products and exp
    in float32) against float64 on the original rows: at most ``float32_kernel_error``. Near
    pairs are included, where the distance cancels. Where the bound is below 1 it is also
    tight: within a factor 50 of the largest error seen (it was 6 to 32 here)."""
    rng = np.random.default_rng(5)
    X = rng.random((60, 40)) + offset
    X[30:] = X[:30] + rng.normal(scale=1e-3, size=(30, 40))  # near copies of the first rows
    spec = KernelSpec(kernel, gamma=gamma)
    got = float32_kernel_matrix(X[:30].astype(np.float32), X.astype(np.float32), spec)
    exact = kernel_matrix(X[:30], X, kernel, gamma)
    seen = exact > 1e-30  # values float32 cannot hold are 0 there
    relative = np.abs(got[seen] - exact[seen]) / exact[seen]
    bound = float32_kernel_error(spec, row_norms(X, spec).max(), X.shape[1])
    assert relative.max() <= bound
    if informative:
        assert bound < 1 and bound <= 50 * relative.max()
    else:
        assert bound > 1  # vacuous: says nothing about a kernel value in (0, 1]


def test_float32_kernel_error_is_none_for_linear_poly_and_sigmoid_and_grows_with_gamma_and_norm():
    assert float32_kernel_error(KernelSpec("linear"), 10.0, 5) is None
    assert float32_kernel_error(KernelSpec("poly", gamma=1.0), 10.0, 5) is None
    assert float32_kernel_error(KernelSpec("sigmoid", gamma=1.0), 10.0, 5) is None
    small = float32_kernel_error(KernelSpec("rbf", gamma=0.1), 10.0, 20)
    assert small < float32_kernel_error(KernelSpec("rbf", gamma=1.0), 10.0, 20)
    assert small < float32_kernel_error(KernelSpec("rbf", gamma=0.1), 1e3, 20)
    assert float32_kernel_error(KernelSpec("rbf", gamma=1.0), 1e12, 20) == np.inf


def _shard(X):
    return Shard.from_arrays(X, np.where(np.arange(X.shape[0]) % 2, 1.0, -1.0))


@pytest.mark.parametrize("sparse", [False, True])
def test_auto_chooses_float32_for_scaled_rows_and_float64_for_offset_rows(sparse):
    X, _ = make_problem(200, 10, sparse=sparse, seed=4)
    spec = KernelSpec("rbf", gamma=0.1)
    dtype, bound = resolve_dtype(SELF, "auto", _shard(X), spec)
    assert dtype == "float32" and bound <= AUTO_FLOAT32_BOUND
    far = X + 1e4 * (sp.csr_matrix(np.ones(X.shape)) if sparse else 1.0)
    dtype, bound = resolve_dtype(SELF, "auto", _shard(far), spec)
    assert dtype == "float64" and bound > AUTO_FLOAT32_BOUND
    # an explicit float32 is kept, with its bound reported; float64 and linear have none
    assert resolve_dtype(SELF, "float32", _shard(far), spec) == ("float32", bound)
    assert resolve_dtype(SELF, "float64", _shard(far), spec) == ("float64", None)
    assert resolve_dtype(SELF, "auto", _shard(X), KernelSpec("linear")) == ("float64", None)
    assert resolve_dtype(SELF, "auto", _shard(X), KernelSpec("sigmoid", gamma=0.1)) == ("float64", None)


def test_auto_trains_the_model_of_the_type_it_chose():
    """auto's model is the explicit float32 model on scaled rows and the float64 model on rows
    with an offset, bit for bit; predictions read data in the chosen type."""
    X, y = make_problem(300, 6, seed=9)
    params = {"gamma": 0.3, "C": 5.0, "iterations": 600, "pack": 50, "seed": 2, "comm": SELF}
    for rows, chosen in [(X, "float32"), (X + 5e3, "float64")]:
        auto = PackSVC(**params).fit(rows, y)
        explicit = PackSVC(dtype=chosen, **params).fit(rows, y)
        assert auto.dtype_ == chosen and auto.table_.dtype == np.dtype(chosen)
        assert auto.training_["dtype"] == chosen
        assert auto.feature_dtype == np.dtype(chosen)
        np.testing.assert_array_equal(auto.decision_function(rows), explicit.decision_function(rows))
    assert PackSVC().feature_dtype == np.float64  # before fit, auto reads in float64


@pytest.mark.parametrize("sparse", [False, True])
def test_shard_computed_in_converts_float_rows_and_keeps_compact_ones(sparse):
    X, y = make_problem(50, 5, sparse=sparse, seed=3)
    shard = Shard.from_arrays(X, y)
    single = shard.computed_in(np.float32)
    assert single.dtype == np.float32 and single.X.dtype == np.float32 and single.sparse == sparse
    rows = single.X.toarray() if sparse else single.X
    np.testing.assert_array_equal(rows, (X.toarray() if sparse else X).astype(np.float32))
    assert shard.computed_in(np.float64) is shard
    steps = np.arange(50 * 5, dtype=np.uint8).reshape(50, 5)
    compact = Shard("<u8>", 50, 5, 0, 50, steps, y, 5, value_scale=1 / 255, dtype=np.float64)
    kept = compact.computed_in(np.float32)
    assert kept.X is steps and kept.dtype == np.float32
