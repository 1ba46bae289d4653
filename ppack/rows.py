"""Row blocks: the r rows of a pack (or of a prediction block), delivered to every rank.

Rank k holds only its shard of the data. To work on rows drawn from anywhere, each rank
fills the rows it owns into one flat float64 buffer (zeros elsewhere) and a single
``Allreduce`` sums the buffers: every rank then has every row. Sparse rows travel padded
to the data set's longest row, so nothing of size n_features is sent for sparse data.
Buffer layout, r rows: ``[labels (r) | dense rows (r*d)]`` or
``[labels (r) | nnz (r) | indices (r*L) | values (r*L)]`` with L the longest row.
"""
import numpy as np
import scipy.sparse as sp
from mpi4py import MPI
from numba import njit

from .kernels.sums import csr_pair_kernels, dense_pair_kernels


class RowBlock:
    """r rows held by every rank: dense ``X`` (r, d) or CSR ``(indptr, indices, values)``.

    ``y`` (r,) labels in {-1, +1} (zeros for unlabeled data); ``norms`` (r,) are the
    per-row norms the kernel needs (squared L2, or L1 for laplacian).
    """

    def __init__(self, n_features, y, norms, dense=None, csr=None):
        self.n_features = n_features
        self.y = y
        self.norms = norms
        self.dense = dense
        self.csr = csr
        self.n_rows = len(y)

    @classmethod
    def from_rows(cls, X, y, spec, n_features):
        """Block from local rows: X dense (r, <=d) or scipy CSR; y (r,)."""
        if sp.issparse(X):
            X = sp.csr_matrix(X)
            csr = (X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data)
            return cls(n_features, y, row_norms_csr(*csr, spec.uses_l1), csr=csr)
        X = np.asarray(X)
        if X.shape[1] < n_features:
            X = np.pad(X, ((0, 0), (0, n_features - X.shape[1])))
        X = np.ascontiguousarray(X)
        return cls(n_features, y, row_norms_dense(X, spec.uses_l1), dense=X)

    def row(self, k):
        """Row k as ``(indices, values)`` for a sparse block or a dense vector (d,)."""
        if self.dense is not None:
            return self.dense[k]
        indptr, indices, values = self.csr
        return indices[indptr[k]:indptr[k + 1]], values[indptr[k]:indptr[k + 1]]

    def take(self, rows):
        """Rows ``rows`` (list of positions) as a dense array or a scipy CSR matrix."""
        if self.dense is not None:
            return self.dense[rows]
        return sp.csr_matrix(self.csr[::-1], shape=(self.n_rows, self.n_features))[rows]

    def transposed(self, start, stop):
        """Dense float64 array (n_features, stop - start): rows start..stop-1 as columns."""
        XT = np.zeros((self.n_features, stop - start))
        if self.dense is not None:
            XT[:, :] = self.dense[start:stop].T
        else:
            indptr, indices, values = self.csr
            span = slice(indptr[start], indptr[stop])
            columns = np.repeat(np.arange(stop - start), np.diff(indptr[start:stop + 1]))
            XT[indices[span], columns] = values[span]
        return XT

    def pair_kernels(self, left, right, spec, out):
        """out[q] = K(row left[q], row right[q]) (+ the kernel offset)."""
        if self.dense is not None:
            dense_pair_kernels(self.dense, self.norms, left, right, *spec.params(), out)
        else:
            csr_pair_kernels(*self.csr, self.norms, left, right, *spec.params(), out)


def row_norms_dense(X, l1):
    X = np.asarray(X, dtype=np.float64)
    return np.abs(X).sum(axis=1) if l1 else np.einsum("ij,ij->i", X, X)


def row_norms_csr(indptr, indices, values, l1):
    v = np.abs(values).astype(np.float64) if l1 else values.astype(np.float64) ** 2
    # reduceat gives v[start] for an empty row (start may be len(v): hence the extra 0)
    sums = np.add.reduceat(np.append(v, 0.0), indptr[:-1])
    sums[np.diff(indptr) == 0] = 0.0
    return sums


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


def deliver_rows(comm, shard, labels, ids, spec, n_features=None, allreduce=None):
    """Collective: every rank gets the rows ``ids`` (global row numbers) of the data set.

    ``shard`` is this rank's ``Shard``; ``labels`` its rows' labels (or None);
    ``n_features`` pads rows to a model's width. Exactly one sum-Allreduce, done by
    ``allreduce(buffer)`` when given (to count and time it). Returns a ``RowBlock``.
    """
    d = shard.n_features if n_features is None else n_features
    r = len(ids)
    mine = np.flatnonzero((ids >= shard.start) & (ids < shard.stop))
    local = ids[mine] - shard.start
    if shard.sparse:
        L = shard.max_row_nnz
        buf = np.zeros(2 * r + 2 * r * L)
        ylab, nnz = buf[:r], buf[r:2 * r]
        idx = buf[2 * r:2 * r + r * L].reshape(r, L)
        val = buf[2 * r + r * L:].reshape(r, L)
        _pad_rows(shard.X.indptr, shard.X.indices, shard.X.data, local, mine, nnz, idx, val)
    else:
        buf = np.zeros(r + r * d)
        ylab = buf[:r]
        rows = buf[r:].reshape(r, d)
        rows[mine, :shard.n_features] = shard.X[local]
    if labels is not None:
        ylab[mine] = labels[local]
    if allreduce is None:
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
    else:
        allreduce(buf)
    y = ylab.copy()
    if shard.sparse:
        counts = nnz.astype(np.int64)
        indptr = np.zeros(r + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        keep = np.arange(L)[None, :] < counts[:, None]
        csr = (indptr, idx[keep].astype(np.int32), val[keep].astype(shard.dtype))
        return RowBlock(d, y, row_norms_csr(*csr, spec.uses_l1), csr=csr)
    dense = rows.astype(shard.dtype)
    return RowBlock(d, y, row_norms_dense(dense, spec.uses_l1), dense=dense)
