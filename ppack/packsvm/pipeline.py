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
(``Correction``): the rows pack k changed, split evenly over the ranks, their kernel values
against pack k+1's rows times delta(k). Summed over ranks this is the unpipelined partial
sum up to rounding.

The loop (``loop.PackedSolver``) holds the packs delivered ahead as ``PackAhead``s: pack
k+1's, its sums and pair kernels taken in pack k's shadow, and pack k+2's, delivered by the
collective 1 started in pack k's shadow, after its collective 2. Pack k+2's rows wait in the
delivery buffer until pack k+1's shadow unpacks them (with their norms) before it gathers
pack k+3's: the delivery, like the block's columns, is done while collectives are in flight
(the "shadow" work of the metrics), not in the serial stretch between packs. The owner flags
of pack k+1 are taken in pack k's update call, after its merge. Nothing is in flight between packs, so
validation, the replicas' check and checkpoints (which save ``PackAhead``'s pending sums
and the ids delivered ahead, so that a resumed run equals an uninterrupted one) run as in
the unpipelined schedule.
"""
import math
from dataclasses import dataclass

import numpy as np

from ..jit import njit
from ..kernels.compute import KernelCompute
from ..kernels.stored import append_positions
from .pack_buffer import PackBuffer


@dataclass
class PackAhead:
    """A pack delivered before its turn: ``ids`` (r,), its ``block`` (a RowBlock) and ``norms``
    (r,), None while its rows wait in the delivery buffer (``arrival``, a ``RowsInFlight``
    waited for: the next pack's shadow unpacks them); ``buf``, its collective 2's PackBuffer
    once its sums and this rank's pair kernels are in it (``ready``); ``sums_seconds``, how long
    its partial sums took on this rank."""

    ids: np.ndarray
    block: object
    norms: np.ndarray
    buf: PackBuffer = None
    ready: bool = False
    sums_seconds: float = 0.0
    local_seconds: float = 0.0  # its sums, pair kernels and delay on this rank
    arrival: object = None  # its rows, arrived in the delivery buffer, before they are unpacked
    flagged: bool = False  # its buffer's owner flags were taken with the previous pack's update
    queued: object = None  # its sums and pair kernels queued on a device, until the fold (``PendingSums``)

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


@njit(cache=True)
def changed_share(delta, rank, size, positions, coefs):
    """The pack positions whose keys' coefficients changed (a nonzero in ``delta`` (K, r)), this
    rank's even share of them, ascending, into positions (>= r,), and their delta, transposed,
    into coefs (>= r, K); returns their number m. One numba call: after a pack's kernel sums
    every numpy step runs with cold caches (measured 61 us a pack in numpy, 5 us warm)."""
    K, r = delta.shape
    n = 0
    for k in range(r):
        for c in range(K):
            if delta[c, k] != 0.0:
                positions[n] = k
                n += 1
                break
    lo, hi = n * rank // size, n * (rank + 1) // size
    for i in range(hi - lo):
        positions[i] = positions[lo + i]
        for c in range(K):
            coefs[i, c] = delta[c, positions[i]]
    return hi - lo


class Correction:
    """This rank's share of ``sum_j delta_j (K(x_j, x_i) + offset)`` over pack k's changed rows
    j, for pack k+1's rows i, once pack k's replay gave delta: the changed rows split evenly
    over the ranks, stored as the table stores rows (``stored.append_positions``, so in its
    dtype) in a small compute of the same kernel (or kernel ``groups``, each column's correction
    with its group's kernel), whose partial sums with delta for coefficients are the correction
    (``KernelCompute.few_sums``: no BLAS for so few rows, no checks). Only the rows a pack
    changed cost anything: early in training most, later few."""

    def __init__(self, spec, n_features, sparse, dtype, work_bytes, groups=None):
        self.compute = KernelCompute(spec, n_features, sparse, dtype, work_bytes, groups)
        self._positions = self._coefs = np.empty((0, 0))

    def add(self, block, norms, delta, rank, size, next_block, next_norms, out):
        """out (K, r') += this rank's share of the correction; block, norms (r,) and delta (K, r):
        the pack just merged; next_block, next_norms (r',): the next pack's rows."""
        K, r = delta.shape
        if self._coefs.shape != (r, K):
            self._positions, self._coefs = np.empty(r, dtype=np.int64), np.empty((r, K))
        m = changed_share(delta, rank, size, self._positions, self._coefs)
        if m == 0:
            return
        rows = self.compute.stored
        rows.n = 0  # the previous pack's rows, overwritten
        source, target = rows.room_for(block)
        rows.n = append_positions(*source, self._positions[:m], norms, 0, *target)
        self.compute.few_sums(self._coefs[:m], next_block, next_norms, out)
