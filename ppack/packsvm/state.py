"""The packed solver's state besides the table, and its run statistics: what a checkpoint saves."""
import math
from dataclasses import dataclass, field

import numpy as np

from ..jit import njit
from ..random_stream import GOLDEN, float_bits, fmix64

# wall seconds by phase, on one rank: the pack's local work ("kernel_sums", of which
# "partial_sums" and "pair_kernels" are the parallel products), the two Allreduce calls
# ("communication": the time blocked in MPI; "in_collective1" and "in_collective2" split it by
# collective; of it, the time this rank waited in each for the last rank to arrive,
# "wait_collective1" and "wait_collective2": estimated from the ranks' timings when the
# collectives block, the time in Wait when pipelined), the local work done while the
# collectives were in flight ("hidden", pipelined only) and the correction of the sums taken
# before the previous pack's update ("correction", pipelined only, part of "partial_sums"),
# the replay and table update ("sequential_updates", and of it the one numba call of both,
# "replay_update", and the replica digest, "digest"), the rows' delivery apart from its
# Allreduce, the owner flags ("flags"), the block's norms and columns ("norms"), the same kind of
# work for the packs ahead done while the collectives were in flight ("shadow", pipelined only:
# their rows' gather and unpacking with norms, the block's columns; part of "hidden", not of the
# serial part, and not of "delivery" or "norms", which count the serial stretch's), the garbage
# collector's pauses, the whole run, and the checkpoints written during it (not part of
# "total"; a checkpoint holds those written before it)
PHASES = ("kernel_sums", "partial_sums", "pair_kernels", "communication", "in_collective1", "in_collective2",
          "wait_collective1", "wait_collective2", "hidden", "correction", "sequential_updates", "replay_update",
          "digest", "delivery", "flags", "norms", "shadow", "garbage_collection", "total", "checkpoint")
COLLECTIVES = ("collective1", "collective2")  # the pack's two Allreduce calls


class LossWindows:
    """Means of the hinge loss over consecutive windows of ``size`` sampled rows (the
    paper's section V stopping test): ``add`` a pack's losses, then ask ``stable``."""

    def __init__(self, size, total=0.0, count=0, means=()):
        self.size = int(size)
        self.total = float(total)
        self.count = int(count)
        self.means = list(means)

    def add(self, losses):
        """Add a pack's losses; True when a window was completed by them."""
        self.total += float(np.sum(losses))
        self.count += len(losses)
        if self.count < self.size:
            return False
        self.means.append(self.total / self.count)
        del self.means[:-2]  # the test compares the last two windows
        self.total, self.count = 0.0, 0
        return True

    def stable(self, tol):
        if len(self.means) < 2:
            return False
        old, new = self.means[-2:]
        return abs(new - old) <= tol * max(abs(old), 1e-12)

    def as_dict(self):
        return {"size": self.size, "total": self.total, "count": self.count, "means": self.means}


@dataclass
class SolverState:
    """Everything replicated on every rank that the run continues from: the model's
    scalars, one per binary problem (w_c = scale[c] * sum beta_c phi, norm[c] = ||w_c||^2,
    (n_columns,) each), the iteration, the support vectors each rank holds, and the
    windows of the --tol test. ``rho`` (n_columns,): the offset of f = <w, phi> - rho (0 for
    C-SVC; ``losses.py``), and ``rho_sum`` (n_columns,): sum_t a_t rho_t so far (averaged runs).
    ``row_seconds`` (p,): each rank's recent partial-sum seconds per stored row, which
    placement by cost reads (``table.place_new``; 0 until measured, and always under
    placement by count)."""

    iteration: int = 0
    scale: np.ndarray = field(default_factory=lambda: np.ones(1))
    norm: np.ndarray = field(default_factory=lambda: np.zeros(1))
    occupancy: np.ndarray = None
    loss_windows: LossWindows = None
    avg_weight: float = None  # averaged runs: sum of a_t so far (averaging.py)
    rho: np.ndarray = field(default_factory=lambda: np.zeros(1))
    rho_sum: np.ndarray = field(default_factory=lambda: np.zeros(1))
    row_seconds: np.ndarray = None


class Jitter:
    """The per-pack jitter of a stretch of work whose mean drifts slowly (the table grows):
    ``relative()`` = sqrt(mean of squared differences of consecutive packs / 2) / mean, the
    standard deviation of one pack's time about its trend, relative to the mean."""

    def __init__(self):
        self.count, self.total, self.squares, self.last = 0, 0.0, 0.0, None

    def add(self, seconds):
        if self.last is not None:
            self.squares += (seconds - self.last) ** 2
        self.count += 1
        self.total += seconds
        self.last = seconds

    def relative(self):
        if self.count < 2 or self.total <= 0.0:
            return 0.0
        return math.sqrt(self.squares / (2 * (self.count - 1))) / (self.total / self.count)


@dataclass
class SolverStats:
    packs: int = 0
    allreduce_calls: int = 0
    projections: int = 0
    hinge_moving_average: float = float("nan")
    seconds: dict = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))  # wall time, all runs
    bytes: dict = field(default_factory=lambda: dict.fromkeys(COLLECTIVES, 0))  # buffer bytes per rank, all runs
    converged: bool = False
    checkpoint_writes: list = field(default_factory=list)  # this run's WriteReports (not checkpointed)
    gc_collections: int = 0  # the garbage collector's runs during the packs, this rank
    local_work: Jitter = field(default_factory=Jitter)  # this run's local stretches (not checkpointed)

    def as_dict(self):
        return {"packs": self.packs, "allreduce_calls": self.allreduce_calls, "projections": self.projections,
                "hinge_moving_average": self.hinge_moving_average, "seconds": self.seconds, "bytes": self.bytes,
                "gc_collections": self.gc_collections}


def serial_seconds(seconds):
    """The part of a run that more ranks do not shrink, from one rank's ``seconds`` by phase:
    total - partial_sums - pair_kernels - communication - shadow (replay, table update, delivery,
    norms, flags, averaging, digest and every Python call; pipelined, the packs ahead's delivery
    and columns run in the collectives' shadow and count as "shadow", not here)."""
    return seconds["total"] - seconds["partial_sums"] - seconds["pair_kernels"] - seconds["communication"] - \
        seconds.get("shadow", 0.0)


def waiting_seconds(seconds):
    """The part of one rank's ``communication`` spent waiting for the last rank to arrive."""
    return seconds.get("wait_collective1", 0.0) + seconds.get("wait_collective2", 0.0)


DIGEST_BITS = 48  # < 53: the digest is a float64 holding an integer, summed exactly with zeros
_NOTHING = np.empty(0)
_NO_COUNTS = np.empty(0, dtype=np.int64)


def replica_digest(state, coef=_NOTHING, loss=_NOTHING):
    """A 48-bit integer digest (as a float64) of the bits of the state every rank replicates.

    Covers the iteration, scale, norm, the offset rho and its averaging sum, the occupancy counts,
    the seconds per row that placement by cost reads, the --tol windows' running
    total, count and means, the averaging weight, and the previous pack's replayed
    coefficients and hinge losses (``coef``, ``loss``, float64 arrays: every decision of the
    replay shows in them or in the scalars). O(r + p) per pack, one numba call; it does not
    cover the table's stored rows or coefficients, which each rank holds alone. Two ranks
    whose replicated state differs in one bit get different digests (up to a 2^-48 chance
    of collision).
    """
    windows = state.loss_windows
    if windows is None:
        size, count, total, means = -1, -1, math.nan, ()
    else:
        size, count, total, means = windows.size, windows.count, windows.total, windows.means
    # the windows' means: how many, and the last two (all that the --tol test reads)
    last = float(means[-1]) if means else math.nan
    before = float(means[-2]) if len(means) > 1 else math.nan
    avg_weight = math.nan if state.avg_weight is None else state.avg_weight
    occupancy = _NO_COUNTS if state.occupancy is None else state.occupancy
    row_seconds = _NOTHING if state.row_seconds is None else state.row_seconds
    return float(_digest(state.iteration, size, count, float(total), float(avg_weight), len(means), before, last,
                         _floats(state.scale), _floats(state.norm), _floats(state.rho), _floats(state.rho_sum),
                         row_seconds, occupancy, coef.reshape(-1), loss.reshape(-1)))


def _floats(values):
    """``values`` (a float or an array) as a 1-D float64 array, itself when it is one."""
    if isinstance(values, np.ndarray) and values.dtype == np.float64 and values.ndim == 1:
        return values
    return np.atleast_1d(np.asarray(values, dtype=np.float64))


@njit(cache=True)
def _digest(iteration, size, count, total, avg_weight, n_means, before, last, scale, norm, rho, rho_sum,
            row_seconds, occupancy, coef, loss):
    """The top ``DIGEST_BITS`` of a fmix64 chain over the scalars, then each array's length
    and entries (floats by their bits)."""
    h = _mix(np.uint64(DIGEST_BITS), np.uint64(iteration))
    h = _mix(_mix(h, np.uint64(size)), np.uint64(count))
    h = _mix(_mix(h, float_bits(total)), float_bits(avg_weight))
    h = _mix(_mix(_mix(h, np.uint64(n_means)), float_bits(before)), float_bits(last))
    for floats in (scale, norm, rho, rho_sum, row_seconds, coef, loss):
        h = _mix_floats(h, floats)
    h = _mix(h, np.uint64(occupancy.shape[0]))
    for count_k in occupancy:
        h = _mix(h, np.uint64(count_k))
    return h >> np.uint64(64 - DIGEST_BITS)


@njit(cache=True, inline="always")
def _mix_floats(h, floats):
    """h mixed with the array's length, then its entries' bits in four interleaved chains (entry
    i in chain i % 4, the last n % 4 entries in chain 0; four mixes run at once), then the
    four chains in order."""
    n = floats.shape[0]
    h = _mix(h, np.uint64(n))
    h0, h1, h2, h3 = h, _mix(h, np.uint64(1)), _mix(h, np.uint64(2)), _mix(h, np.uint64(3))
    i = 0
    while i + 4 <= n:
        h0 = _mix(h0, float_bits(floats[i]))
        h1 = _mix(h1, float_bits(floats[i + 1]))
        h2 = _mix(h2, float_bits(floats[i + 2]))
        h3 = _mix(h3, float_bits(floats[i + 3]))
        i += 4
    while i < n:
        h0 = _mix(h0, float_bits(floats[i]))
        i += 1
    return _mix(_mix(_mix(_mix(h, h0), h1), h2), h3)


@njit(cache=True, inline="always")
def _mix(h, word):
    return fmix64(h ^ (word + GOLDEN))


def moving_average(previous, values, weight):
    """Exponential moving average (weight per new value) continued over ``values`` (n,):
    (1 - weight)^n previous + weight sum_i (1 - weight)^(n-1-i) values_i (the mean of the
    values when previous is NaN); one numba call."""
    return float(_moving_average(float(previous), values, float(weight)))


@njit(cache=True)
def _moving_average(previous, values, weight):
    n = values.shape[0]
    if math.isnan(previous):
        return np.mean(values)
    total, factor = 0.0, 1.0
    for i in range(n - 1, -1, -1):
        total += factor * values[i]
        factor *= 1.0 - weight
    return factor * previous + weight * total
