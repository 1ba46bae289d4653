"""Which float type a kernel run computes in: ``dtype="auto"`` resolved against the data.

float32 storage computes dot products and kernel values in float32 (``gemm_partial_sums``'
docstring has the error analysis): about twice as fast and half the memory, but an rbf
kernel value can be off by a factor within exp(+-gamma delta), delta = 2 g_d ||x|| ||z||,
g_d = d u / (1 - d u), u = 2^-24, however close x and z are (the distance cancels, the dot
product does not); the laplacian's L1 overlap likewise, with delta = 4 g_d max(||x||_1,
||z||_1). "auto" bounds gamma delta over the data set's largest norm and picks float32 when
that worst case stays under ``AUTO_FLOAT32_BOUND``, float64 otherwise (features with a large
common offset, or a large gamma). The kernels whose table entry has no ``float32_error``
(linear, poly, sigmoid) err in absolute terms, not relative to the kernel value, so "auto"
keeps float64 for them.
"""
import math

from mpi4py import MPI

from .compute import row_norms

# The worst-case relative error of a float32 kernel value that "auto" accepts. Blocked sums
# stay 100 to 300 times inside the worst case in tests, so typical errors are ~1e-4 or less.
AUTO_FLOAT32_BOUND = 1e-2
# Rows converted to float64 at a time when measuring the largest norm: no shard-sized temporary.
NORM_ROWS = 8192

UNIT_ROUNDOFF32 = 2.0 ** -24
# A float32 kernel value's own error: the float32 exp (7.4e-8 relative) and its rounding.
FLOAT32_VALUE_ERROR = 2e-7


def float32_kernel_error(spec, max_norm, n_features):
    """Worst-case relative error of one float32 kernel value (exp(gamma delta) - 1) for rows
    whose kernel norm (squared L2 for rbf, L1 for laplacian) is at most ``max_norm``, or
    None for the kernels whose error is absolute (``Kernel.float32_error`` None). The rows' own rounding to float32 counts as two
    more terms of the dot product; the exp's error and the value's rounding are added."""
    factor = spec.facts.float32_error
    if factor is None:
        return None
    du = (n_features + 2) * UNIT_ROUNDOFF32
    g = du / (1.0 - du) if du < 1.0 else math.inf
    delta = factor * g * max_norm
    exponent = spec.gamma * delta
    return math.expm1(exponent) + FLOAT32_VALUE_ERROR if exponent < 700.0 else math.inf


def read_dtype(requested):
    """The float type data is read in for a run asked for ``requested``: "auto" reads float64,
    the larger case, until ``resolve_dtype`` has seen the data."""
    return "float64" if requested == "auto" else requested


def largest_norm(comm, shard, spec):
    """Collective: the largest kernel norm (``compute.row_norms``) of any row of the data set."""
    largest = 0.0
    for start in range(0, shard.stop - shard.start, NORM_ROWS):
        rows = shard.float_rows(start, start + NORM_ROWS)
        largest = max(largest, float(row_norms(rows, spec).max(initial=0.0)))
    return comm.allreduce(largest, op=MPI.MAX)


def resolve_dtype(comm, requested, shard, spec):
    """Collective: ``(dtype name, float32 error bound)`` for a run asked for ``requested``
    ("auto", "float32" or "float64") on ``shard`` (read in float64 for "auto") with ``spec``.
    The bound (``float32_kernel_error``) is None for float64 runs and the kernels whose error is absolute."""
    if requested == "float64" or spec.facts.float32_error is None:
        return read_dtype(requested), None
    bound = float32_kernel_error(spec, largest_norm(comm, shard, spec), shard.n_features)
    if requested == "auto":
        return ("float32" if bound <= AUTO_FLOAT32_BOUND else "float64"), bound
    return requested, bound
