"""Kernel operations the trainers call: row norms, partial kernel sums, pair kernels.

Stored rows (a rank's support vectors) are a dense (n, d) array or a CSR triple
``(indptr, indices, values)``, with their norms (n,); a block of rows is a
``data.block.RowBlock`` with its norms (r,). Partial kernel sums take one coefficient
column (n,) or K of them (n, K), e.g. one per class of a one-vs-rest model: every kernel
value is then evaluated once for all K columns. The work is done by a backend module with
the numba cores' names; ``BACKEND`` is the one place it is chosen (CPU today; a GPU
backend would be a sibling of ``cpu.py``).
"""
import contextlib
import functools

import numpy as np

from . import cpu as BACKEND

# Working memory for one kernel-sum pass: the dense transposed row block of the sparse
# path and the (tile, r) dot-product tile of the dense path stay under this many bytes.
DEFAULT_WORK_BYTES = 64 * 2**20
# Support vectors per GEMM tile on the dense path: small enough that the tile of dot
# products is still in cache when the fused kernel pass reads it.
MAX_TILE_ROWS = 512
# Pair kernels of a CSR block take the dense path when the block, densified, holds at most
# this many times its nonzeros.
DENSE_PAIRS_FILL = 4


@functools.lru_cache(maxsize=1)
def _blas_pools():
    """The loaded BLAS libraries' thread pools (found once: a lookup costs milliseconds,
    a limit through the cached controller about ten microseconds)."""
    import scipy.linalg.cython_blas  # noqa: F401 - the BLAS numba's np.dot calls
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


_blas_limited = 0  # depth of open single_threaded_blas contexts


@contextlib.contextmanager
def single_threaded_blas():
    """Context: BLAS single-threaded for a kernel-sum pass that calls it from numba's
    parallel loops, where BLAS's own threads would spin against numba's (dense data in a
    process that left BLAS at its default of every core ran 20 times slower). Nested
    contexts cost nothing: the training loop opens one around all its packs, so each
    pack's kernel sums skip the limit's tens of microseconds."""
    global _blas_limited
    if _blas_limited:
        yield
        return
    with _blas_pools().limit(limits=1, user_api="blas"):
        _blas_limited += 1
        try:
            yield
        finally:
            _blas_limited -= 1


def dense_row_norms(X, l1):
    """Squared L2 (or, with ``l1``, L1) norm of every row of a dense array, (n,) float64."""
    X = np.asarray(X, dtype=np.float64)
    return np.abs(X).sum(axis=1) if l1 else np.einsum("ij,ij->i", X, X)


def csr_row_norms(indptr, indices, values, l1):
    """``dense_row_norms`` of CSR rows."""
    return BACKEND.csr_row_norms(np.asarray(indptr, dtype=np.int64), values, bool(l1))


def row_norms(rows, spec):
    """The per-row norms ``spec``'s kernel needs, (n,) float64: squared L2, or L1 for the L1
    reductions (laplacian). ``rows``: a RowBlock, a dense array, a scipy CSR matrix or a CSR triple."""
    l1 = spec.uses_l1
    if hasattr(rows, "n_rows"):  # a RowBlock
        return dense_row_norms(rows.dense, l1) if rows.dense is not None else csr_row_norms(*rows.csr, l1)
    if isinstance(rows, tuple):
        return csr_row_norms(*rows, l1)
    if hasattr(rows, "indptr"):
        return csr_row_norms(rows.indptr, rows.indices, rows.data, l1)
    return dense_row_norms(rows, l1)


def partial_sums(stored, stored_norms, coef, block, block_norms, spec, out, work_bytes=DEFAULT_WORK_BYTES):
    """out[k] += sum_j coef_j (K(sv_j, x_k) + offset) over the stored rows, for the block's rows;
    with K coefficient columns, out[c, k] += sum_j coef[j, c] (K(sv_j, x_k) + offset).

    stored: dense (n, d) or CSR triple; stored_norms (n,); coef (n,) with out (r,), or
    coef (n, K) with out (K, r) (or (r,) when K is 1); block: a RowBlock of r rows with
    block_norms (r,); out float64. The work is split into column groups (sparse path) or
    row tiles (dense path) so that working arrays stay under ``work_bytes``.
    """
    coef = np.asarray(coef)
    if coef.ndim not in (1, 2):
        raise ValueError(f"partial_sums: coef must be (n,) or (n, K), got shape {coef.shape}")
    n = coef.shape[0]
    r = block.n_rows
    n_columns = 1 if coef.ndim == 1 else coef.shape[1]
    # the cores take coef (n, K) and out (K, r): 1-D arguments become views of that shape
    out2 = out[None, :] if out.ndim == 1 else out
    if out2.shape != (n_columns, r):
        raise ValueError(f"partial_sums: out has shape {out.shape}; coef {coef.shape} and {r} rows need "
                         f"({n_columns}, {r})" + (f" or ({r},)" if n_columns == 1 else ""))
    if n == 0 or n_columns == 0:
        return
    coef = np.ascontiguousarray(coef, dtype=np.float64).reshape(n, n_columns)
    sparse = isinstance(stored, tuple)
    d = block.n_features
    if sparse or not spec.facts.gemm:
        # the reductions run in the stored rows' dtype: float32 storage computes in float32
        dtype = (stored[2] if sparse else stored).dtype
        cols = max(1, min(r, work_bytes // (8 * d)))
        for c0 in range(0, r, cols):
            c1 = min(r, c0 + cols)
            # the whole block is the pack's columns, which the pair kernels use too: built once
            XT = (block.columns() if c1 - c0 == r else block.transposed(c0, c1)).astype(dtype, copy=False)
            part = np.zeros((n_columns, c1 - c0))
            items = BACKEND.work_items(n)
            if sparse:
                BACKEND.csr_partial_sums(*stored, stored_norms, coef, n, XT, block_norms[c0:c1], items,
                                         *spec.params(), part)
            else:
                BACKEND.dense_partial_sums(stored, stored_norms, coef, n, XT, block_norms[c0:c1], items,
                                           *spec.params(), part)
            out2[:, c0:c1] += part
        return
    # dense: dot products by BLAS GEMM on tiles of stored rows, kernel fused after
    XT = np.ascontiguousarray(block.columns(), dtype=stored.dtype)
    tile = max(1, min(MAX_TILE_ROWS, work_bytes // (8 * r)))
    with single_threaded_blas():
        BACKEND.gemm_partial_sums(stored, stored_norms, coef, n, XT, block_norms, tile, *spec.params(), out2)


def pair_kernels(block, block_norms, left, right, spec, out):
    """out[q] = K(row left[q], row right[q]) + offset for rows of the block."""
    # a CSR block dense enough takes the vectorised dense path too: it adds only exact zeros
    # where a row has no entry, so the values equal the sparse path's bit for bit
    if block.dense is not None or block.n_rows * block.n_features <= DENSE_PAIRS_FILL * len(block.csr[2]):
        XT = block.columns()
        X = block.dense if block.dense is not None else np.ascontiguousarray(XT.T)
        BACKEND.dense_pair_kernels(X, XT, block_norms, left, right, *spec.params(), out)
    else:
        BACKEND.csr_pair_kernels(*block.csr, block_norms, left, right, *spec.params(), out)
