"""Random blocks: deal the rows of contiguous shards out to the ranks at random.

Block averaging assumes each rank's block is a random sample of the data. A rank's
shard is a contiguous slice of the file, and files are often sorted (w8a: all positive
rows together), which leaves some blocks with one class only; one exchange after loading
fixes that for every solver.
"""
import numpy as np
import scipy.sparse as sp

from ..mpi.collectives import Collectives


def random_blocks(comm, X, y, seed=0, weights=None):
    """Collective: this rank's new block ``(X, y)``, or ``(X, y, weights)`` when ``weights``
    (n_local,) are given (they travel with their rows); every row goes to a random rank.

    X (n_local, d) CSR or dense and y (n_local,) are this rank's rows; destinations are
    drawn from a generator seeded with (seed, rank), so the result is reproducible. The
    new block holds the rows received from rank 0, then rank 1, ..., each in their
    original order. Buffer exchanges of labels and row contents; on one rank nothing moves.
    """
    size, rank = comm.Get_size(), comm.Get_rank()
    if size == 1:
        return (X, y) if weights is None else (X, y, weights)
    collectives = Collectives(comm)
    destination = np.random.default_rng([seed, rank]).integers(0, size, X.shape[0])
    order = np.argsort(destination, kind="stable")
    row_cuts = np.cumsum(np.bincount(destination, minlength=size))[:-1]
    y_new = np.concatenate(collectives.exchange(np.split(y[order], row_cuts)))
    moved = () if weights is None else (
        np.concatenate(collectives.exchange(np.split(np.asarray(weights, dtype=np.float64)[order], row_cuts))),)
    if not sp.issparse(X):
        d = X.shape[1]
        values = np.ascontiguousarray(X[order]).reshape(-1)
        X_new = np.concatenate(collectives.exchange(np.split(values, row_cuts * d))).reshape(-1, d)
        return (X_new, y_new, *moved)
    X = sp.csr_matrix(X)[order]
    row_nnz = np.diff(X.indptr).astype(np.int64)
    nnz_cuts = X.indptr[row_cuts]
    counts = np.concatenate(collectives.exchange(np.split(row_nnz, row_cuts)))
    indices = np.concatenate(collectives.exchange(np.split(X.indices.astype(np.int32), nnz_cuts)))
    values = np.concatenate(collectives.exchange(np.split(X.data, nnz_cuts)))
    X_new = sp.csr_matrix((values, indices, np.concatenate([[0], np.cumsum(counts)])), shape=(len(y_new), X.shape[1]))
    X_new.sort_indices()
    return (X_new, y_new, *moved)
