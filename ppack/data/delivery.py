"""Collective 1: the rows of given global ids, delivered to every rank with one sum.

Rank k holds only its shard of the data. To work on rows drawn from anywhere, each rank
fills the rows it owns into one flat float64 buffer (zeros elsewhere) and a single sum
over the ranks gives every rank every row. Sparse rows travel padded to the data set's
longest row, so nothing of size n_features is sent for sparse data. Buffer layout, r
rows: ``[labels (r) | dense rows (r*d)]`` or ``[labels (r) | nnz (r) | indices (r*L) |
values (r*L)]`` with L the longest row. Used by the kernel trainer's packs, its
predictions and linear Pegasos.
"""
import numpy as np
from numba import njit

from ..kernels.block import RowBlock


@njit(cache=True)
def _pad_rows(indptr, indices, values, rows, positions, nnz, idx, val):
    """Copy CSR rows ``rows`` into the padded buffer slots ``positions`` (nnz, idx, val)."""
    for k in range(rows.shape[0]):
        row, pos = rows[k], positions[k]
        a, b = indptr[row], indptr[row + 1]
        nnz[pos] = b - a
        for j in range(b - a):
            idx[pos, j] = indices[a + j]
            val[pos, j] = values[a + j]


@njit(cache=True)
def _unpad_rows(nnz, idx, val):
    """The CSR triple (indptr int64, indices int32, values float64) of padded rows: row k's
    ``nnz[k]`` leading entries of ``idx[k]`` and ``val[k]`` (all float64, as summed)."""
    r = nnz.shape[0]
    indptr = np.zeros(r + 1, dtype=np.int64)
    for k in range(r):
        indptr[k + 1] = indptr[k] + np.int64(nnz[k])
    indices = np.empty(indptr[r], dtype=np.int32)
    values = np.empty(indptr[r])
    for k in range(r):
        a = indptr[k]
        for j in range(indptr[k + 1] - a):
            indices[a + j] = np.int32(idx[k, j])
            values[a + j] = val[k, j]
    return indptr, indices, values


def deliver_rows(collectives, shard, labels, ids, n_features=None, weights=None, dtype=None):
    """Collective: every rank gets the rows ``ids`` (global row numbers) of the data set.

    ``collectives``: a ``mpi.collectives.Collectives`` (one ``sum``); ``shard`` this
    rank's ``Shard``; ``labels`` its rows' labels (or None); ``n_features`` pads rows to a
    model's width; ``weights`` its rows' weights (or None), delivered as the block's ``weight``.
    Returns a ``RowBlock`` of feature values in the float ``dtype`` (default: the shard's)
    (compact stored rows are scaled here, r rows at a time).
    """
    dtype = shard.dtype if dtype is None else np.dtype(dtype)
    d = shard.n_features if n_features is None else n_features
    r = len(ids)
    mine = np.flatnonzero((ids >= shard.start) & (ids < shard.stop))
    local = ids[mine] - shard.start
    head = r if weights is None else 2 * r  # labels, then the weights
    if shard.sparse:
        L = shard.max_row_nnz
        buf = np.zeros(head + r + 2 * r * L)
        ylab, nnz = buf[:r], buf[head:head + r]
        idx = buf[head + r:head + r + r * L].reshape(r, L)
        val = buf[head + r + r * L:].reshape(r, L)
        _pad_rows(shard.X.indptr, shard.X.indices, shard.X.data, local, mine, nnz, idx, val)
        if shard.value_scale != 1.0:
            val[mine] *= shard.value_scale
    else:
        buf = np.zeros(head + r * d)
        ylab = buf[:r]
        rows = buf[head:].reshape(r, d)
        rows[mine, :shard.n_features] = shard.X[local]
        if shard.value_scale != 1.0:
            rows[mine] *= shard.value_scale
    if labels is not None:
        ylab[mine] = labels[local]
    if weights is not None:
        buf[r:2 * r][mine] = weights[local]
    collectives.sum(buf)
    y = ylab.copy()
    weight = None if weights is None else buf[r:2 * r].copy()
    if shard.sparse:
        indptr, indices, values = _unpad_rows(nnz, idx, val)
        return RowBlock(d, y, csr=(indptr, indices, values.astype(dtype, copy=False)), weight=weight)
    return RowBlock(d, y, dense=rows.astype(dtype), weight=weight)
