"""Cost model of one Allreduce: seconds for n bytes on p ranks from a per-message latency
alpha and a per-byte cost beta (Hockney's model), for the algorithms MPICH chooses from
(R. Thakur, R. Rabenseifner and W. Gropp, "Optimization of Collective Communication
Operations in MPICH", Int. J. High Performance Computing Applications 19(1), 2005, 49-66):

    recursive doubling   log2(p) alpha + log2(p) n beta
    Rabenseifner         2 log2(p) alpha + 2 (p-1)/p n beta   (reduce-scatter by recursive
                         halving, then allgather by recursive doubling)
    ring                 2 (p-1) alpha + 2 (p-1)/p n beta     (reduce-scatter and allgather
                         around a ring)

for p a power of two. For other p, recursive doubling and Rabenseifner first fold the
p - p' extra ranks into p' = 2^floor(log2 p) ranks and hand them the result at the end,
one step of alpha + n beta each (the paper's section 4.4); the ring works on any p.
The model takes the fastest algorithm, as a tuned MPI library picks by message size, and
one rank costs 0 s. The local reduction (the paper's gamma term) is not separate: ``fit``
folds it into beta. Neither network contention nor waiting for the slowest rank is modelled.

``plan`` prices a pack's two Allreduce calls with ``pack_seconds``; the benchmark report
fits alpha and beta to Allreduce calls measured on one machine (``fit``) and sets them
beside a cluster interconnect's published figures (``INTERCONNECTS``).
"""
import math
from dataclasses import dataclass

import numpy as np

from .pack_buffer import PackBuffer


@dataclass(frozen=True)
class Interconnect:
    """A network's per-message latency (s) and per-byte cost (s/B), and where they come from."""
    name: str
    latency: float
    seconds_per_byte: float
    source: str


# Link rates are the standards' data rates; MPI latencies are typical measured values, not specs.
INFINIBAND_EDR = Interconnect(
    "InfiniBand EDR 4x", 1.0e-6, 1 / 12.5e9,
    "(quoted) EDR 4x link: 100 Gb/s data rate = 12.5 GB/s (InfiniBand Trade Association roadmap); "
    "MPI small-message latency about 1 us is a typical measured value, not a specification")
GIGABIT_ETHERNET = Interconnect(
    "Gigabit Ethernet (TCP)", 50e-6, 1 / 125e6,
    "(quoted) IEEE 802.3ab: 1 Gb/s = 125 MB/s; MPI-over-TCP latency of about 50 us is a typical "
    "measured value, not a specification")
INTERCONNECTS = (INFINIBAND_EDR, GIGABIT_ETHERNET)


def _fold(ranks):
    """(p', extra steps): the power of two p' <= p the halving/doubling algorithms run on, and
    the fold and unfold steps (2, or 0 when p is a power of two) that bring p down to it."""
    lower = 1 << (int(ranks).bit_length() - 1)
    return lower, (0 if lower == ranks else 2)


def terms(algorithm, nbytes, ranks):
    """(messages, bytes) on the critical path of one Allreduce: its seconds are
    messages x alpha + bytes x beta."""
    if ranks <= 1:
        return 0.0, 0.0
    if algorithm == "ring":
        return 2.0 * (ranks - 1), 2.0 * (ranks - 1) / ranks * nbytes
    lower, extra = _fold(ranks)
    steps = math.log2(lower)
    if algorithm == "recursive doubling":
        return steps + extra, (steps + extra) * nbytes
    if algorithm == "rabenseifner":
        return 2.0 * steps + extra, (2.0 * (lower - 1) / lower + extra) * nbytes
    raise ValueError(f"unknown Allreduce algorithm {algorithm!r}")


ALGORITHMS = ("recursive doubling", "rabenseifner", "ring")


def algorithm_seconds(algorithm, nbytes, ranks, latency, seconds_per_byte):
    """Seconds of one Allreduce of ``nbytes`` on ``ranks`` ranks by ``algorithm``."""
    messages, volume = terms(algorithm, nbytes, ranks)
    return messages * latency + volume * seconds_per_byte


def best_algorithm(nbytes, ranks, latency, seconds_per_byte):
    """The fastest of ``ALGORITHMS`` for this message (the first of equals)."""
    return min(ALGORITHMS, key=lambda a: algorithm_seconds(a, nbytes, ranks, latency, seconds_per_byte))


def allreduce_seconds(nbytes, ranks, latency, seconds_per_byte):
    """Seconds of one Allreduce of ``nbytes`` on ``ranks`` ranks: the fastest algorithm's."""
    return min(algorithm_seconds(a, nbytes, ranks, latency, seconds_per_byte) for a in ALGORITHMS)


def pack_bytes(r, d, longest, sparse, columns, ranks, value_bytes=8, dual=False):
    """Bytes of a pack's two Allreduce buffers, as ``loop.PackedSolver`` builds them: collective
    1 (``data.delivery``) the r drawn rows' float64 labels and their values as stored,
    ``value_bytes`` each (sparse rows as int32 nonzero counts, then int32 indices and values
    padded to the longest row); collective 2 the float64 ``PackBuffer`` (``columns`` = K problems),
    or with ``dual`` the dual's ``dual.solver.DualBuffer`` (margins and the holders' alphas per
    column, the pair kernels, owner flags, digests and the two votes)."""
    rows = r * (4 + longest * (4 + value_bytes)) if sparse else r * d * value_bytes
    if dual:
        return 8 * r + rows, 8 * (2 * columns * r + r * (r + 1) // 2 + r + ranks + 2)
    return 8 * r + rows, 8 * PackBuffer.length(columns, r, ranks)


def pack_seconds(pack_bytes, ranks, latency, seconds_per_byte):
    """Seconds of a pack's Allreduce calls, one per entry of ``pack_bytes``."""
    return sum(allreduce_seconds(b, ranks, latency, seconds_per_byte) for b in pack_bytes)


def fit(measurements, rounds=20):
    """(alpha, beta) >= 0 fitted to measured Allreduce calls ``(ranks, nbytes, seconds)``.

    Least squares on relative errors (each sample divided by its measured seconds, so that
    8-byte and megabyte calls count alike) under this model: with every sample's algorithm
    fixed the model is linear in (alpha, beta); start from recursive doubling, refit with
    each sample's fastest algorithm under the last fit, until the choice is stable.
    """
    from scipy.optimize import nnls  # not at the top: the CLI reads this module to build its parser

    samples = [(int(p), float(n), float(s)) for p, n, s in measurements if p > 1 and s > 0]
    if not samples:
        raise ValueError("fit: no measurement on more than one rank")
    chosen = ["recursive doubling"] * len(samples)
    alpha = beta = 0.0
    for _ in range(rounds):
        A = np.array([terms(a, n, p) for a, (p, n, _) in zip(chosen, samples)])
        seconds = np.array([s for _, _, s in samples])
        (alpha, beta), _ = nnls(A / seconds[:, None], np.ones(len(samples)))
        again = [best_algorithm(n, p, alpha, beta) for p, n, _ in samples]
        if again == chosen:
            break
        chosen = again
    return float(alpha), float(beta)
