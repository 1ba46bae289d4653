"""Pipelined packs: the next pack's kernel sums are taken while this pack's collectives are in flight.

After pack k the table's coefficients are ``c(k) = fold(k) * c(k-1) + delta(k)``: ``fold(k)``
one factor per column (``merge_pack`` applies it as mantissa times 2^exponent), ``delta(k)``
nonzero only on the keys of pack k's rows. So pack k+1's partial sums against the stored
rows are

    S(k+1) = fold(k) * F(k+1) + sum over pack k's changed rows j of delta(k)_j (K(x_j, B(k+1)) + offset),

``F(k+1)`` being the same sum on the table as it stood before pack k's update. ``F(k+1)``
needs only pack k+1's rows, so each rank takes it while pack k's collective 2 (and pack
k+2's collective 1) are in flight, testing them between tiles so that MPI progresses them
(``KernelCompute.partial_sums(between=...)``). Once pack k is replayed, the fold is applied
as the table applies it (``fold_sums``) and each rank adds its share of the correction
(``Correction``): the kernel values between its even share of pack k's rows and pack k+1's,
also taken in the shadow, times delta(k). Summed over ranks this is the unpipelined
partial sum up to rounding.

The loop (``loop.PackedSolver``) holds the packs delivered ahead as ``PackAhead``s: pack
k+1's, its sums and pair kernels taken in pack k's shadow, and pack k+2's, delivered by the
collective 1 started with pack k's collective 2. Nothing is in flight between packs, so
validation, the replicas' check and checkpoints (which save ``PackAhead``'s pending sums
and the ids delivered ahead, so that a resumed run equals an uninterrupted one) run as in
the unpipelined schedule.
"""
import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..kernels.compute import KernelCompute
from ..kernels.stored import StoredRows, append_positions
from .pack_buffer import PackBuffer


@dataclass
class PackAhead:
    """A pack delivered before its turn: ``ids`` (r,), its ``block`` (a RowBlock) and ``norms``
    (r,); ``buf``, its collective 2's PackBuffer once its sums and this rank's pair kernels
    are in it (``ready``); ``sums_seconds``, how long its partial sums took on this rank."""

    ids: np.ndarray
    block: object
    norms: np.ndarray
    buf: PackBuffer = None
    ready: bool = False
    sums_seconds: float = 0.0
    local_seconds: float = 0.0  # its sums, pair kernels and delay on this rank

    @property
    def r(self):
        return len(self.ids)


@dataclass
class Pending:
    """What a pipelined run's checkpoint holds besides the table: the ids of the packs delivered
    ahead (a list of int64 arrays, one or two) and this rank's sums (K, r) of the first of them,
    folded and corrected (None where they cannot be used: another number of ranks)."""

    ids: list
    sums: np.ndarray = None


@njit(cache=True)
def fold_sums(sums, fold):
    """Partial sums (K, r) times each column's fold (K, 2) (mantissa, exponent), in place, as
    ``table.merge_pack`` folds the coefficients (never as one float: the product can leave
    the float range)."""
    for c in range(sums.shape[0]):
        if fold[c, 0] == 1.0 and fold[c, 1] == 0.0:
            continue
        mantissa, exponent = fold[c, 0], int(min(max(fold[c, 1], -4000.0), 4000.0))
        for k in range(sums.shape[1]):
            sums[c, k] = math.ldexp(sums[c, k] * mantissa, exponent)


def row_share(r, rank, size):
    """[lo, hi): this rank's even share of a pack's r row positions."""
    return r * rank // size, r * (rank + 1) // size


class Correction:
    """This rank's share of ``sum_j delta_j (K(x_j, x_i) + offset)`` over pack k's rows j, for
    pack k+1's rows i. ``prepare``, in the shadow of pack k's collectives: the kernel values
    between this rank's share of pack k's rows (stored as the table stores rows,
    ``stored.append_positions``, so in its dtype) and pack k+1's, as ``partial_sums`` of a
    small compute of the same kernel with identity coefficients (one small GEMM on dense rows;
    the sparse and L1 cores otherwise). ``add``, once pack k's replay gave delta: one small
    product. Rows whose keys the pack left unchanged have delta 0 and add nothing."""

    def __init__(self, spec, n_features, sparse, dtype, work_bytes):
        self.compute = KernelCompute(spec, n_features, sparse, dtype, work_bytes)
        self.share = (0, 0)
        self.kernels = np.zeros((0, 0))

    def prepare(self, block, norms, rank, size, next_block, next_norms):
        """The kernel values (m, r') between this rank's share (m rows) of ``block`` (r rows, with
        ``norms``) and ``next_block`` (r' rows, with ``next_norms``), offset included."""
        lo, hi = self.share = row_share(block.n_rows, rank, size)
        stored = self.compute.stored
        self.compute.stored = rows = StoredRows(stored.n_features, stored.sparse, stored.dtype)
        source, target = rows.room_for(block)
        rows.n = append_positions(*source, np.arange(lo, hi), norms, 0, *target)
        self.kernels = np.zeros((hi - lo, next_block.n_rows))
        self.compute.partial_sums(np.eye(hi - lo), next_block, next_norms, self.kernels)

    def add(self, delta, out):
        """out (K, r') += delta (K, r), the pack's change per position, times the prepared kernel values."""
        lo, hi = self.share
        if hi > lo:
            out += delta[:, lo:hi] @ self.kernels
