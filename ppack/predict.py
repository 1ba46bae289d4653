"""Distributed decision values: the partial-kernel-sum primitive over blocks of rows.

Rows of the data set are taken in blocks; each block is delivered to every rank (one
Allreduce), every rank sums its own support vectors' kernels against it, and a Reduce
brings the block's decision values to rank 0.
"""
import numpy as np
from mpi4py import MPI

from .rows import deliver_rows

# Rows per block: the block's dense transposed copy (n_features x rows, float64) should
# stay in a core's cache while every support vector sweeps over it.
BLOCK_BYTES = 512 * 1024
MIN_BLOCK_ROWS, MAX_BLOCK_ROWS = 64, 2048


def distributed_decisions(comm, table, scale, spec, shard, n_features):
    """Collective: ``(decisions, labels)`` of every row of ``shard``'s data set on rank 0.

    decisions (n_samples,) = scale * sum_j beta_j (K(sv_j, x) + offset); labels
    (n_samples,) the raw labels as stored (NaN when absent). Other ranks get ``(None, None)``.
    """
    rank = comm.Get_rank()
    n = shard.n_samples
    rows = min(MAX_BLOCK_ROWS, max(MIN_BLOCK_ROWS, BLOCK_BYTES // (8 * max(1, n_features))))
    decisions = np.empty(n) if rank == 0 else None
    labels = np.empty(n) if rank == 0 else None
    for b0 in range(0, n, rows):
        ids = np.arange(b0, min(n, b0 + rows), dtype=np.int64)
        block = deliver_rows(comm, shard, shard.y, ids, spec, n_features)
        part = np.zeros(len(ids))
        table.partial_sums(block, part)
        total = np.empty_like(part) if rank == 0 else None
        comm.Reduce(part, total, op=MPI.SUM, root=0)
        if rank == 0:
            decisions[b0:b0 + len(ids)] = scale * total
            labels[b0:b0 + len(ids)] = block.y
    return decisions, labels
