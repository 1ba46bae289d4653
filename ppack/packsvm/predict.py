"""Distributed decision values: the partial-kernel-sum primitive over blocks of rows.

Rows of the data set are taken in blocks; each block is delivered to every rank (one
sum), every rank sums its own support vectors' kernels against it, and a sum to rank 0
brings the block's decision values there. On a device the blocks are larger (the GEMM
needs wide blocks to keep the device busy) and coefficients other than the table's (the
averaged ones) cross once per pass, not once per block.
"""
import numpy as np

from ..data.delivery import deliver_rows
from ..mpi.collectives import Collectives

# Rows per block: the block's dense transposed copy (n_features x rows, float64) should
# stay in a core's cache while every support vector sweeps over it.
BLOCK_BYTES = 512 * 1024
MIN_BLOCK_ROWS, MAX_BLOCK_ROWS = 64, 2048
# On a device the block is one GEMM's columns: it crosses the bus once for all the stored rows.
DEVICE_BLOCK_BYTES, DEVICE_MAX_BLOCK_ROWS = 8 * 2**20, 2048


def block_rows(n_features, on_device=False):
    """Rows per block of a prediction pass over rows of ``n_features`` features (every rank
    computes on the same kind of device, so every rank takes the same blocks)."""
    if on_device:
        return min(DEVICE_MAX_BLOCK_ROWS, max(MIN_BLOCK_ROWS, DEVICE_BLOCK_BYTES // (8 * max(1, n_features))))
    return min(MAX_BLOCK_ROWS, max(MIN_BLOCK_ROWS, BLOCK_BYTES // (8 * max(1, n_features))))


def distributed_decisions(comm, table, scale, shard, n_features, ids=None, collectives=None, coef=None):
    """Collective: ``(decisions, labels)`` of every row of ``shard``'s data set (or of the
    global row ids ``ids``, the same on every rank) on rank 0.

    decisions (n_samples,) = scale * sum_j beta_j (K(sv_j, x) + offset) for a one-column
    table, (n_samples, K) with each column's own scale (``scale`` (K,)) for K columns; labels
    (n_samples,) the raw labels as stored (NaN when absent). Other ranks get ``(None, None)``.
    table: a SupportVectorTable (its rows and kernel are its ``compute``'s); coef: the
    coefficients to sum (n, K), the table's when None (validation passes the averaged ones).
    ``collectives``: the ``Collectives`` to count the calls on (a new one if None).
    """
    root = comm.Get_rank() == 0
    n = shard.n_samples if ids is None else len(ids)
    Q = table.n_columns
    decisions = np.empty((Q, n)) if root else None
    labels = np.empty(n) if root else None
    for b0, block, total in decision_blocks(comm, table, scale, shard, n_features, ids, collectives, coef):
        if root:
            decisions[:, b0:b0 + len(block.y)] = total
            labels[b0:b0 + len(block.y)] = block.y
    if root:
        decisions = decisions[0] if Q == 1 else np.ascontiguousarray(decisions.T)
    return decisions, labels


def decision_blocks(comm, table, scale, shard, n_features, ids=None, collectives=None, coef=None, weights=None,
                    everywhere=False):
    """Collective: ``distributed_decisions`` a block at a time, holding one block only.

    Yields ``(start, block, decisions)`` for each block of the rows (all rows, or ``ids``):
    the rows' position in that sequence, the delivered ``RowBlock`` (labels ``y``, and
    ``weight`` when ``weights``, this rank's rows' weights, are given) and the (K, rows)
    decision values, on rank 0 (None elsewhere), or on every rank when ``everywhere``.
    """
    collectives = Collectives(comm) if collectives is None else collectives
    compute = table.compute
    # the same coefficients for every block: a device mirrors the table's and keeps others for this pass
    coef_on_device = {"mirrored": True} if coef is None else {"kept": object()}
    coef = table.coef if coef is None else coef
    n = shard.n_samples if ids is None else len(ids)
    rows = block_rows(n_features, compute.on_device)
    Q = table.n_columns
    scale = np.reshape(scale, (Q, 1))
    for b0 in range(0, n, rows):
        if ids is None:
            block_ids = np.arange(b0, min(n, b0 + rows), dtype=np.int64)
        else:
            block_ids = np.asarray(ids[b0:b0 + rows], dtype=np.int64)
        # rows in the table's type, whatever the shard's: norms and dot products of the same values
        block = deliver_rows(collectives, shard, shard.y, block_ids, n_features, weights=weights, dtype=table.dtype)
        part = np.zeros((Q, len(block_ids)))
        compute.partial_sums(coef, block, compute.row_norms(block), part, **coef_on_device)
        total = collectives.sum(part) if everywhere else collectives.sum_to_root(part)
        yield b0, block, None if total is None else scale * total
