"""Random blocks: deal the rows of contiguous shards out to the ranks at random.

Block averaging assumes each rank's block is a random sample of the data. A rank's
shard is a contiguous slice of the file, and files are often sorted (w8a: all positive
rows together), which leaves some blocks with one class only; one exchange after loading
fixes that for every solver.
"""
import numpy as np
import scipy.sparse as sp


def random_blocks(comm, X, y, seed=0):
    """Collective: this rank's new block ``(X, y)``; every row goes to a random rank.

    X (n_local, d) CSR or dense and y (n_local,) are this rank's rows; destinations are
    drawn from a generator seeded with (seed, rank), so the result is reproducible.
    One alltoall of the rows; on one rank nothing moves.
    """
    size, rank = comm.Get_size(), comm.Get_rank()
    if size == 1:
        return X, y
    destination = np.random.default_rng([seed, rank]).integers(0, size, X.shape[0])
    outgoing = []
    for k in range(size):
        rows = np.flatnonzero(destination == k)
        outgoing.append((X[rows], y[rows]))
    incoming = comm.alltoall(outgoing)
    blocks = [part[0] for part in incoming]
    X_new = sp.vstack(blocks, format="csr") if sp.issparse(X) else np.concatenate(blocks)
    if sp.issparse(X_new):
        X_new.sort_indices()
    return X_new, np.concatenate([part[1] for part in incoming])
