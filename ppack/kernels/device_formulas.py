"""The kernel formulas on a device, one file for the GPU as ``formulas.py`` is for the CPU: the
CUDA source of the raw kernels ``ArrayCompute``'s fused path launches, and their numpy twins.

Per tile of stored rows, after the GEMM of dot products, one kernel (``values``) turns the
(a, b) dot products into kernel values in float64 with both sides' norms (the formula and
the offset in one pass); L1 kernels (laplacian) skip the GEMM: one kernel (``l1_values``)
takes the L1 distances and the formula together. ``pair_values`` computes the pack's pair
kernels from the block's columns and the pair indices; ``fold_columns`` and ``set_rows``
keep the coefficient mirror equal to the table (the scale folds as ``table.merge_pack``
applies them, then the pack's rows). Every reduction and formula is in float64, whatever the
rows' dtype; the source is compiled with ``--fmad=false``, so that additions and products
round as numpy's do (only exp and tanh differ, by an ulp or two).

``CudaFormulas`` launches the compiled kernels on CuPy arrays; ``NumpyFormulas`` computes the
same values with numpy, operation for operation, for the numpy stand-in (the tests check it
against the CPU kernels). Both count each call as one launch on the ``DeviceQueue``.
"""
from functools import lru_cache

import numpy as np

from ..registry import KERNELS

THREADS = 256  # per CUDA block
MAX_BLOCKS = 1 << 16  # grid-stride loops beyond this
COMPILE_OPTIONS = ("--fmad=false",)
PAIRS_AT_ONCE = 256  # the numpy twin's pair kernels, a piece at a time
# the rows' dtypes and their C types: one variant of each templated kernel per dtype
C_TYPES = {"float32": "float", "float64": "double"}

_COMMON = r"""
#define RBF {RBF}
#define LINEAR {LINEAR}
#define POLY {POLY}
#define LAPLACIAN {LAPLACIAN}
#define SIGMOID {SIGMOID}

// the kernel value (offset added) of two rows whose reduction is z (dot product, or L1
// distance for the L1 kernels) and whose squared norms are na and nb
__device__ double kernel_value(int kind, double z, double na, double nb, double gamma, double coef0,
                               int degree, double offset) {{
    double v = z;
    if (kind == RBF) {{
        v = exp(-gamma * fmax(na + nb - 2.0 * z, 0.0));
    }} else if (kind == LAPLACIAN) {{
        v = exp(-gamma * z);
    }} else if (kind == POLY) {{
        double base = gamma * z + coef0;
        v = base;
        for (int i = 1; i < degree; ++i) v *= base;
    }} else if (kind == SIGMOID) {{
        v = tanh(gamma * z + coef0);
    }}
    return v + offset;
}}

// k / b, by 32-bit division where a * b fits in 32 bits (64-bit division is emulated: many
// times slower, in a pass that is otherwise bound by memory)
__device__ __forceinline__ long long row_of(long long k, long long b, bool narrow) {{
    return narrow ? (long long)((unsigned int)k / (unsigned int)b) : k / b;
}}

// coef (n, K): each column c whose fold (mantissa, exponent) is not (1, 0) becomes
// ldexp(coef * mantissa, exponent), the exponent clamped to [-4000, 4000]
extern "C" __global__ void fold_columns(double* coef, long long n, long long K, const double* fold) {{
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n * K;
         k += (long long)gridDim.x * blockDim.x) {{
        long long c = k % K;
        double mantissa = fold[2 * c], exponent = fold[2 * c + 1];
        if (mantissa != 1.0 || exponent != 0.0) {{
            coef[k] = ldexp(coef[k] * mantissa, (int)fmin(fmax(exponent, -4000.0), 4000.0));
        }}
    }}
}}

// coef (capacity, K): row slots[s] becomes values[s] (m, K)
extern "C" __global__ void set_rows(double* coef, long long K, const long long* slots, long long m,
                                    const double* values) {{
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < m * K;
         k += (long long)gridDim.x * blockDim.x) {{
        coef[slots[k / K] * K + k % K] = values[k];
    }}
}}
"""

_TYPED = r"""
// out (a, b) float64: the kernel values of dot products dots (a, b) with norms_a (a), norms_b (b)
extern "C" __global__ void values_{T}(const {T}* dots, const double* norms_a, const double* norms_b,
                                     long long a, long long b, int kind, double gamma, double coef0,
                                     int degree, double offset, double* out) {{
    bool narrow = a * b <= 0xffffffffLL;
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < a * b;
         k += (long long)gridDim.x * blockDim.x) {{
        long long i = row_of(k, b, narrow);
        out[k] = kernel_value(kind, (double)dots[k], norms_a[i], norms_b[k - i * b], gamma, coef0, degree, offset);
    }}
}}

// out (a, b) float64: the kernel values of rows (a, d) against columns (d, b) whose reduction
// is the L1 distance, summed over the features in order
extern "C" __global__ void l1_values_{T}(const {T}* rows, const {T}* columns, long long a, long long b,
                                        long long d, int kind, double gamma, double coef0, int degree,
                                        double offset, double* out) {{
    bool narrow = a * b <= 0xffffffffLL;
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < a * b;
         k += (long long)gridDim.x * blockDim.x) {{
        long long i = row_of(k, b, narrow), j = k - i * b;
        double z = 0.0;
        for (long long f = 0; f < d; ++f) z += fabs((double)rows[i * d + f] - (double)columns[f * b + j]);
        out[k] = kernel_value(kind, z, 0.0, 0.0, gamma, coef0, degree, offset);
    }}
}}

// out (q,) float64: the kernel values of the block's rows left[p] and right[p], from its columns
// (d, r) and norms (r,); the reduction summed over the features in order
extern "C" __global__ void pair_values_{T}(const {T}* columns, long long d, long long r, const double* norms,
                                          const long long* left, const long long* right, long long q,
                                          int l1, int kind, double gamma, double coef0, int degree,
                                          double offset, double* out) {{
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < q;
         p += (long long)gridDim.x * blockDim.x) {{
        long long x = left[p], y = right[p];
        double z = 0.0;
        if (l1) {{
            for (long long f = 0; f < d; ++f) z += fabs((double)columns[f * r + x] - (double)columns[f * r + y]);
        }} else {{
            for (long long f = 0; f < d; ++f) z += (double)columns[f * r + x] * (double)columns[f * r + y];
        }}
        out[p] = kernel_value(kind, z, norms[x], norms[y], gamma, coef0, degree, offset);
    }}
}}
"""


def cuda_source():
    """The CUDA C++ source of every raw kernel, for each rows' dtype of ``C_TYPES``."""
    kinds = {name.upper(): KERNELS.index(name) for name in ("rbf", "linear", "poly", "laplacian", "sigmoid")}
    return _COMMON.format(**kinds) + "".join(_TYPED.format(T=t) for t in C_TYPES.values())


def _blocks(n):
    return (max(1, min(MAX_BLOCKS, (n + THREADS - 1) // THREADS)),)


@lru_cache(maxsize=None)
def _module(cupy):
    """The compiled module (one NVRTC compile a process; CuPy caches the binary on disk too)."""
    return cupy.RawModule(code=cuda_source(), options=COMPILE_OPTIONS)


class CudaFormulas:
    """The raw kernels for ``spec`` on CuPy arrays, launched on the current stream (the queue's)."""

    def __init__(self, cupy, spec, queue):
        self.module, self.queue = _module(cupy), queue
        self.kind, gamma, coef0, degree, offset = spec.params()
        self.scalars = (np.int32(self.kind), np.float64(gamma), np.float64(coef0), np.int32(degree),
                        np.float64(offset))
        self.l1 = spec.uses_l1

    def _launch(self, name, n, args):
        self.queue.launched()
        self.module.get_function(name)(_blocks(n), (THREADS,), args)

    def values(self, dots, norms_a, norms_b, out):
        a, b = dots.shape
        self._launch(f"values_{C_TYPES[dots.dtype.name]}", a * b,
                     (dots, norms_a, norms_b, np.int64(a), np.int64(b), *self.scalars, out))

    def l1_values(self, rows, columns, out):
        (a, d), b = rows.shape, columns.shape[1]
        self._launch(f"l1_values_{C_TYPES[rows.dtype.name]}", a * b,
                     (rows, columns, np.int64(a), np.int64(b), np.int64(d), *self.scalars, out))

    def pair_values(self, columns, norms, left, right, out):
        d, r = columns.shape
        self._launch(f"pair_values_{C_TYPES[columns.dtype.name]}", len(left),
                     (columns, np.int64(d), np.int64(r), norms, left, right, np.int64(len(left)),
                      np.int32(self.l1), *self.scalars, out))

    def fold_columns(self, coef, fold):
        n, K = coef.shape
        self._launch("fold_columns", n * K, (coef, np.int64(n), np.int64(K), fold))

    def set_rows(self, coef, slots, values):
        self._launch("set_rows", values.size, (coef, np.int64(coef.shape[1]), slots, np.int64(len(slots)), values))


def numpy_kernel_values(spec, z, na, nb):
    """``kernel_value`` of the CUDA source on arrays, without the offset: the values of the
    pairs whose reductions are z (float64: dot products, or L1 distances for laplacian) and
    whose squared norms are na and nb (broadcasting with z; read by rbf only)."""
    gamma, coef0 = spec.gamma, spec.coef0
    if spec.name == "rbf":
        return np.exp(-gamma * np.maximum(na + nb - 2.0 * z, 0.0))
    if spec.name == "laplacian":
        return np.exp(-gamma * z)
    if spec.name == "poly":
        base = gamma * z + coef0
        z = base.copy()
        for _ in range(spec.degree - 1):
            z *= base
        return z
    if spec.name == "sigmoid":
        return np.tanh(gamma * z + coef0)
    return z


class NumpyFormulas:
    """``CudaFormulas``' twins in numpy, operation for operation (the numpy stand-in's)."""

    def __init__(self, spec, queue, work_bytes):
        self.spec, self.queue, self.work_bytes = spec, queue, work_bytes

    def _formula(self, z, na, nb):
        """``kernel_value`` of the CUDA source on arrays: z float64, na and nb broadcasting with it."""
        return numpy_kernel_values(self.spec, z, na, nb) + self.spec.offset

    def values(self, dots, norms_a, norms_b, out):
        self.queue.launched()
        out[...] = self._formula(dots.astype(np.float64), norms_a[:, None], norms_b[None, :])

    def _l1_distances(self, rows, columns):
        """(a, b) float64: sum over the features in order of |row - column|."""
        z = np.zeros((rows.shape[0], columns.shape[1]))
        for f in range(rows.shape[1]):
            z += np.abs(rows[:, f, None].astype(np.float64) - columns[f][None, :].astype(np.float64))
        return z

    def l1_values(self, rows, columns, out):
        self.queue.launched()
        out[...] = self._formula(self._l1_distances(rows, columns), 0.0, 0.0)

    def pair_values(self, columns, norms, left, right, out):
        self.queue.launched()
        z = np.empty(len(left))
        for p0 in range(0, len(left), PAIRS_AT_ONCE):  # in pieces: (d, pairs) float64 work arrays stay small
            at = slice(p0, p0 + PAIRS_AT_ONCE)
            x, y = columns[:, left[at]].astype(np.float64), columns[:, right[at]].astype(np.float64)
            terms = np.abs(x - y) if self.spec.uses_l1 else x * y
            z[at] = terms.sum(axis=0)  # (d, pairs) over its first axis: row after row, the CUDA loop's order
        out[...] = self._formula(z, norms[left], norms[right])

    def fold_columns(self, coef, fold):
        self.queue.launched()
        for c in range(fold.shape[0]):
            if fold[c, 0] != 1.0 or fold[c, 1] != 0.0:
                coef[:, c] = np.ldexp(coef[:, c] * fold[c, 0], int(min(max(fold[c, 1], -4000.0), 4000.0)))

    def set_rows(self, coef, slots, values):
        self.queue.launched()
        coef[slots] = values
