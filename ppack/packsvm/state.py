"""The packed solver's state besides the table, and its run statistics: what a checkpoint saves."""
import functools
import hashlib
from dataclasses import dataclass, field

import numpy as np

PHASES = ("kernel_sums", "communication", "sequential_updates", "delivery", "total")
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
    windows of the --tol test."""

    iteration: int = 0
    scale: np.ndarray = field(default_factory=lambda: np.ones(1))
    norm: np.ndarray = field(default_factory=lambda: np.zeros(1))
    occupancy: np.ndarray = None
    loss_windows: LossWindows = None
    avg_weight: float = None  # averaged runs: sum of a_t so far (averaging.py)


@dataclass
class SolverStats:
    packs: int = 0
    allreduce_calls: int = 0
    projections: int = 0
    hinge_moving_average: float = float("nan")
    seconds: dict = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))  # wall time, all runs
    bytes: dict = field(default_factory=lambda: dict.fromkeys(COLLECTIVES, 0))  # buffer bytes per rank, all runs
    converged: bool = False

    def as_dict(self):
        return {"packs": self.packs, "allreduce_calls": self.allreduce_calls, "projections": self.projections,
                "hinge_moving_average": self.hinge_moving_average, "seconds": self.seconds, "bytes": self.bytes}


DIGEST_BITS = 48  # < 53: the digest is a float64 holding an integer, summed exactly with zeros


def replica_digest(state, coef=(), loss=()):
    """A 48-bit integer digest (as a float64) of the bytes of the state every rank replicates.

    Covers the iteration, scale, norm, the occupancy counts, the --tol windows' running
    total, count and means, and the previous pack's r replayed coefficients and hinge
    losses (``coef``, ``loss``: every decision of the replay shows in them or in the
    scalars). O(r + p) per pack; it does not cover the table's stored rows or coefficients,
    which each rank holds alone. Two ranks whose replicated state differs in one bit get
    different digests (up to a 2^-48 chance of collision).
    """
    h = hashlib.blake2b(digest_size=DIGEST_BITS // 8)
    h.update(np.array([state.iteration], dtype=np.int64).tobytes())
    h.update(np.concatenate([np.atleast_1d(state.scale), np.atleast_1d(state.norm)]).astype(np.float64).tobytes())
    if state.occupancy is not None:
        h.update(np.ascontiguousarray(state.occupancy, dtype=np.int64).tobytes())
    windows = state.loss_windows
    if windows is not None:
        h.update(np.array([windows.size, windows.count, len(windows.means)], dtype=np.int64).tobytes())
        h.update(np.array([windows.total, *windows.means], dtype=np.float64).tobytes())
    if state.avg_weight is not None:
        h.update(np.array([state.avg_weight], dtype=np.float64).tobytes())
    h.update(np.array([len(coef), len(loss)], dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(coef, dtype=np.float64).tobytes())
    h.update(np.ascontiguousarray(loss, dtype=np.float64).tobytes())
    return float(int.from_bytes(h.digest(), "little"))


def moving_average(previous, values, weight):
    """Exponential moving average (weight per new value) continued over ``values``."""
    if np.isnan(previous):
        return float(np.mean(values))
    decay = _decay_powers(len(values), weight)
    return float((1.0 - weight) ** len(values) * previous + weight * decay @ values)


@functools.lru_cache(maxsize=8)
def _decay_powers(n, weight):
    """(1 - weight) ** [n-1, ..., 1, 0], computed once per pack size (read-only)."""
    decay = (1.0 - weight) ** np.arange(n - 1, -1, -1)
    decay.flags.writeable = False
    return decay
