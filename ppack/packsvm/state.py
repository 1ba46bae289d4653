"""The packed solver's state besides the table, and its run statistics: what a checkpoint saves."""
import math
from dataclasses import dataclass, field

import numpy as np

from ..jit import njit
from ..kernels.norms import pairwise_sum
from ..random_stream import GOLDEN, float_bits, fmix64

# wall seconds by phase, on one rank: the pack's local work ("kernel_sums", of which
# "partial_sums" and "pair_kernels" are the parallel products), the two Allreduce calls
# ("communication": the time blocked in MPI; "in_collective1" and "in_collective2" split it by
# collective; of it, the time this rank waited in each for the last rank to arrive,
# "wait_collective1" and "wait_collective2": estimated from the ranks' timings when the
# collectives block, the time in Wait when pipelined), the local work done while the
# collectives were in flight ("hidden", pipelined only) and the correction of the sums taken
# before the previous pack's update ("correction", pipelined only, part of "partial_sums"),
# the replay and table update ("sequential_updates", and of it the one numba call of both with
# the replicated scalars and their digest, "replay_update"), the rows' delivery apart from its
# Allreduce, the owner flags ("flags"), the block's norms and columns ("norms"), the same kind of
# work for the packs ahead done while the collectives were in flight ("shadow", pipelined only:
# their rows' gather and unpacking with norms, the block's columns; part of "hidden", not of the
# serial part, and not of "delivery" or "norms", which count the serial stretch's), the garbage
# collector's pauses, the whole run, and the checkpoints written during it (not part of
# "total"; a checkpoint holds those written before it)
PHASES = ("kernel_sums", "partial_sums", "pair_kernels", "communication", "in_collective1", "in_collective2",
          "wait_collective1", "wait_collective2", "hidden", "correction", "sequential_updates", "replay_update",
          "delivery", "flags", "norms", "shadow", "garbage_collection", "total", "checkpoint")
COLLECTIVES = ("collective1", "collective2")  # the pack's two Allreduce calls


class LossWindows:
    """Means of the hinge loss over consecutive windows of ``size`` sampled rows: ``add`` a
    pack's losses, then ask ``stable`` (the paper's section V stopping test, on the last two
    windows) or read ``means``. A run keeps two: the --tol test's windows of ``tol_window`` rows
    (the last two means), and its loss curve (``curve``: eight windows over the whole run).

    Kept in ``values`` (3 + keep,) float64, which the compiled pack step updates in place
    (``add_to_windows``): the open window's running total and row count, how many windows
    have closed (at most ``keep`` counted), and the means of the last ``keep`` (NaN where none)."""

    def __init__(self, size, total=0.0, count=0, means=(), keep=2):
        self.size = int(size)
        means = [float(m) for m in means][-keep:]
        self.values = np.array([float(total), float(count), len(means), *([math.nan] * (keep - len(means))), *means])

    @classmethod
    def curve(cls, iterations):
        """The loss curve of a run of ``iterations`` sampled rows: CURVE_POINTS windows of equal size."""
        return cls(max(1, -(-int(iterations) // CURVE_POINTS)), keep=CURVE_POINTS)

    @property
    def keep(self):
        return len(self.values) - LAST_MEANS

    @property
    def total(self):
        return float(self.values[TOTAL])

    @property
    def count(self):
        return int(self.values[COUNT])

    @property
    def means(self):
        """The last (at most ``keep``) windows' means, oldest first."""
        n = int(self.values[N_MEANS])
        return [float(m) for m in self.values[len(self.values) - n:]]

    def add(self, losses):
        """Add a pack's losses (r,) float64; True when a window was completed by them."""
        return add_to_windows(self.values, self.size, losses)

    def stable(self, tol):
        return windows_stable(self.values, tol)

    def as_dict(self):
        return {"size": self.size, "total": self.total, "count": self.count, "means": self.means, "keep": self.keep}


# the entries of ``LossWindows.values``: BEFORE and LAST, the last two means, where keep is 2
TOTAL, COUNT, N_MEANS, BEFORE, LAST = range(5)
LAST_MEANS = 3  # the first of the means
CURVE_POINTS = 8  # windows in a run's loss curve


@njit(cache=True)
def add_to_windows(values, size, losses):
    """``LossWindows.add`` on its ``values`` (3 + keep,) and ``size``: the losses' sum (numpy's
    ``np.sum``, bit for bit) into the open window; when it holds ``size`` rows or more, its
    mean closes it (the older means move down one place). Returns True when a window closed."""
    values[TOTAL] += numpy_sum(losses)
    values[COUNT] += losses.shape[0]
    if values[COUNT] < size:
        return False
    last = values.shape[0] - 1
    for i in range(LAST_MEANS, last):
        values[i] = values[i + 1]
    values[last] = values[TOTAL] / values[COUNT]
    values[N_MEANS] = min(values[N_MEANS] + 1.0, float(last + 1 - LAST_MEANS))
    values[TOTAL] = 0.0
    values[COUNT] = 0.0
    return True


@njit(cache=True)
def windows_stable(values, tol):
    """Whether the last two windows' means differ by at most ``tol`` relative to the older."""
    if values[N_MEANS] < 2.0:
        return False
    old, new = values[values.shape[0] - 2], values[values.shape[0] - 1]
    return abs(new - old) <= tol * max(abs(old), 1e-12)


@njit(cache=True)
def numpy_sum(values):
    """``np.sum`` of a contiguous float64 array (n,), bit for bit: 0.0 plus numpy's pairwise sum."""
    return 0.0 + pairwise_sum(values, 0, values.shape[0])


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
    loss_curve: LossWindows = None  # the mean loss over the run, in CURVE_POINTS windows (``LossWindows.curve``)
    # epochs="auto": on rank 0, the last judged stage's predictions on the objective's sample rows
    # (``convergence.stage_outputs``), which the next stage's are compared with; None elsewhere
    stage_outputs: np.ndarray = None


class Jitter:
    """The per-pack jitter of a stretch of work whose mean drifts slowly (the table grows):
    ``relative()`` = sqrt(mean of squared differences of consecutive packs / 2) / mean, the
    standard deviation of one pack's time about its trend, relative to the mean. Its figures
    (count, total, sum of squared differences, last) are one array, which the pack step adds
    to (``add_jitter``)."""

    def __init__(self):
        self.figures = np.zeros(4)

    def add(self, seconds):
        add_jitter(self.figures, seconds)

    def relative(self):
        count, total, squares, _ = self.figures
        if count < 2 or total <= 0.0:
            return 0.0
        return math.sqrt(squares / (2 * (count - 1))) / (total / count)


@njit(cache=True)
def add_jitter(figures, seconds):
    """One stretch's ``seconds`` into a ``Jitter``'s figures (4,)."""
    if figures[0] > 0:
        figures[2] += (seconds - figures[3]) ** 2
    figures[0] += 1
    figures[1] += seconds
    figures[3] = seconds


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
# the digest's windows where a state has none
NO_WINDOWS = LossWindows(-1, total=math.nan, count=-1)


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
    windows = NO_WINDOWS if state.loss_windows is None else state.loss_windows
    avg_weight = math.nan if state.avg_weight is None else state.avg_weight
    occupancy = _NO_COUNTS if state.occupancy is None else state.occupancy
    row_seconds = _NOTHING if state.row_seconds is None else state.row_seconds
    return float(_digest(state.iteration, windows.size, windows.values, float(avg_weight), _floats(state.scale),
                         _floats(state.norm), _floats(state.rho), _floats(state.rho_sum), row_seconds, occupancy,
                         coef.reshape(-1), loss.reshape(-1)))


def _floats(values):
    """``values`` (a float or an array) as a 1-D float64 array, itself when it is one."""
    if isinstance(values, np.ndarray) and values.dtype == np.float64 and values.ndim == 1:
        return values
    return np.atleast_1d(np.asarray(values, dtype=np.float64))


@njit(cache=True)
def _digest(iteration, size, windows, avg_weight, scale, norm, rho, rho_sum, row_seconds, occupancy, coef, loss):
    """The top ``DIGEST_BITS`` of a fmix64 chain over the scalars (``windows``: the loss
    windows' ``values``), then each array's length and entries (floats by their bits);
    a float64 holding an integer below 2^48."""
    h = _mix(np.uint64(DIGEST_BITS), np.uint64(iteration))
    h = _mix(_mix(h, np.uint64(size)), np.uint64(np.int64(windows[COUNT])))
    h = _mix(_mix(h, float_bits(windows[TOTAL])), float_bits(avg_weight))
    h = _mix(_mix(_mix(h, np.uint64(np.int64(windows[N_MEANS]))), float_bits(windows[BEFORE])),
             float_bits(windows[LAST]))
    for floats in (scale, norm, rho, rho_sum, row_seconds, coef, loss):
        h = _mix_floats(h, floats)
    h = _mix(h, np.uint64(occupancy.shape[0]))
    for count_k in occupancy:
        h = _mix(h, np.uint64(count_k))
    return np.float64(h >> np.uint64(64 - DIGEST_BITS))


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


@njit(cache=True)
def moving_average(previous, values, weight):
    """Exponential moving average (weight per new value) continued over ``values`` (n,):
    (1 - weight)^n previous + weight sum_i (1 - weight)^(n-1-i) values_i (the mean of the
    values when previous is NaN)."""
    n = values.shape[0]
    if math.isnan(previous):
        return np.mean(values)
    total, factor = 0.0, 1.0
    for i in range(n - 1, -1, -1):
        total += factor * values[i]
        factor *= 1.0 - weight
    return factor * previous + weight * total
