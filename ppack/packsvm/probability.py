"""Probabilities from decision values: Platt scaling per class, fitted on held-out rows.

Rows the sampling stream never drew were never stepped on nor tested: their decision values
are honest held-out values. They are the calibration slice (``calibration.py``, the default
of ``--probability``) or the ``--validation`` rows, plus any out-of-bag rows (with
``sampling="uniform"`` about exp(-T/m) of the rows; with "epochs", the rest of an unfinished
first epoch). Every rank replays the shared sampling stream to find its own. Up to
``MAX_ROWS`` of them (an even, seeded choice) are evaluated, and for each class c a sigmoid
P(c | f) = 1 / (1 + exp(A_c f_c + B_c)) is fitted to them by Platt's method in the form of
Lin, Weng and Lin (2007): Newton steps with backtracking on the regularised targets
(N+ + 1) / (N+ + 2) and 1 / (N- + 2). Only when asked (``--calibration training``, for sets
too small to spare rows) and with fewer than ``MIN_ROWS`` out-of-bag rows are the sigmoids
fitted on the training rows, which is biased toward overconfidence (by 3 to 8 points of mean
confidence over accuracy on the tests' problems; taking each support vector's own term out
of its decision value overcorrected, to 14 to 30 points under); ``fitted_on`` says which.
For K > 2 classes the K one-vs-rest sigmoids are raised to one fitted power (``fit_power``)
and normalised to sum to 1.
"""
import numpy as np

from ..data.sampler import make_sampler
from ..mpi.collectives import Collectives

MAX_ROWS = 100_000  # rows evaluated for the fit: two parameters per class need few
MIN_ROWS = 200


def fit_rows(comm, start, stop, n_samples, seed, iterations, sampling="uniform", holdout=None, rows=MAX_ROWS,
             held_out_name="out-of-bag rows"):
    """Collective: global ids (sorted int64, the same on every rank) of the rows to fit the
    sigmoids on, and what they are: ``(ids, held_out_name)`` (rows the stream never drew: the
    ``holdout``'s rows and any out-of-bag ones) or, with fewer than ``MIN_ROWS`` of those,
    ``(ids, "training rows")``. [start, stop): this rank's rows; sampling, holdout: the
    training's stream (``data.sampler.make_sampler``).

    Every rank replays the stream but flags only its own rows, and of the N candidate rows
    (in row order, rank by rank) the ones at ``rows`` distinct positions drawn by Floyd's
    algorithm (seeded) are taken, each by the rank that holds it; they reach every rank in
    one sum. So a rank holds its own rows' flags and the (at most ``rows``) chosen ids, never
    a flag per training row; the choice does not depend on the number of ranks."""
    drawn = np.zeros(stop - start, dtype=bool)
    sampler = make_sampler(sampling, n_samples, seed, holdout)
    for done in range(0, iterations, 1 << 20):
        ids = sampler.take(min(1 << 20, iterations - done))
        drawn[ids[(ids >= start) & (ids < stop)] - start] = True
    own = np.flatnonzero(~drawn) + start
    counts = comm.allgather(len(own))
    fitted_on = held_out_name
    if sum(counts) < MIN_ROWS:
        own, fitted_on = np.arange(start, stop, dtype=np.int64), "training rows"
        counts = comm.allgather(len(own))
    positions = distinct_positions(sum(counts), min(rows, sum(counts)), seed)
    before = sum(counts[:comm.Get_rank()])
    lo, hi = np.searchsorted(positions, [before, before + len(own)])
    chosen = np.zeros(len(positions), dtype=np.int64)
    chosen[lo:hi] = own[positions[lo:hi] - before]
    return Collectives(comm).sum(chosen), fitted_on  # each slot written by one rank: exact


def distinct_positions(n, k, seed):
    """k distinct numbers of range(n), sorted (int64): all of them when k == n, else a uniform
    seeded choice by Floyd's algorithm, which holds only the k chosen, whatever n."""
    if k >= n:
        return np.arange(n, dtype=np.int64)
    draws = np.random.default_rng(seed).integers(0, np.arange(n - k, n) + 1)  # the j-th in [0, n - k + j]
    chosen = set()
    for j, t in zip(range(n - k, n), draws.tolist()):
        chosen.add(j if t in chosen else t)
    return np.array(sorted(chosen), dtype=np.int64)


def fit_sigmoid(decisions, positive):
    """Platt's (A, B) for decision values (n,) and booleans ``positive`` (n,): the sigmoid
    1 / (1 + exp(A f + B)) maximising the likelihood of the regularised targets."""
    f = np.asarray(decisions, dtype=np.float64)
    n_pos = int(np.count_nonzero(positive))
    n_neg = len(f) - n_pos
    target = np.where(positive, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
    A, B = 0.0, np.log((n_neg + 1.0) / (n_pos + 1.0))
    sigma, min_step, eps = 1e-12, 1e-10, 1e-5

    def objective(A, B):
        z = f * A + B
        return np.sum(np.where(z >= 0, target * z + np.log1p(np.exp(-z)), (target - 1) * z + np.log1p(np.exp(z))))

    value = objective(A, B)
    for _ in range(100):
        z = f * A + B
        p = np.where(z >= 0, np.exp(-z) / (1 + np.exp(-z)), 1 / (1 + np.exp(z)))  # P(positive)
        q = 1 - p
        d2 = p * q
        h11, h22, h21 = sigma + np.sum(f * f * d2), sigma + np.sum(d2), np.sum(f * d2)
        d1 = target - p
        g1, g2 = np.sum(f * d1), np.sum(d1)
        if abs(g1) < eps and abs(g2) < eps:
            break
        det = h11 * h22 - h21 * h21
        dA, dB = -(h22 * g1 - h21 * g2) / det, -(-h21 * g1 + h11 * g2) / det
        gd = g1 * dA + g2 * dB
        step = 1.0
        while step >= min_step:
            new = objective(A + step * dA, B + step * dB)
            if new < value + 1e-4 * step * gd:
                A, B, value = A + step * dA, B + step * dB, new
                break
            step /= 2
        else:
            break  # no decrease along the Newton direction: as good as it gets
    return float(A), float(B)


def probabilities(decisions, A, B, power=1.0):
    """Class probabilities from decision values: (n,) binary decisions give (n, 2) [P(negative),
    P(positive)]; (n, K) give (n, K): the K sigmoids p_c, each raised to ``power``, normalised
    to sum to 1 (``fit_power``; 1 is the plain normalisation). A, B (1,) or (K,)."""
    decisions = np.asarray(decisions, dtype=np.float64)
    z = decisions.reshape(len(decisions), -1) * np.asarray(A) + np.asarray(B)
    if decisions.ndim == 1:
        p = np.where(z >= 0, np.exp(-z) / (1 + np.exp(-z)), 1 / (1 + np.exp(z)))
        return np.column_stack([1 - p[:, 0], p[:, 0]])
    return _normalised(power * -np.logaddexp(0.0, z))  # log p_c = -log(1 + exp(z_c))


def _normalised(logits):
    """Softmax of (n, K) logits, row by row."""
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def fit_power(decisions, A, B, truth, low=1e-2, high=1e2):
    """The power tau in [low, high] that maximises the likelihood of the true classes ``truth``
    ((n,) column indices) under ``probabilities(decisions, A, B, tau)`` for K > 2 classes.

    Each one-vs-rest sigmoid is fitted alone; normalising them spreads the rest's mass over
    the top class (underconfident by 5 points on usps' held-out rows), which one power
    corrects. The negative log likelihood mean(log sum_c p_c^tau - tau log p_truth) is convex
    in tau (a log-sum-exp of functions linear in tau): Newton steps, kept inside the bounds
    (reached when every row is right by a wide margin, where the likelihood keeps rising).
    The slope's sign narrows a bracket around the optimum; a Newton step that leaves it is
    replaced by the bracket's midpoint."""
    logp = -np.logaddexp(0.0, np.asarray(decisions, dtype=np.float64) * np.asarray(A) + np.asarray(B))
    own = logp[np.arange(len(truth)), truth]
    tau = 1.0
    for _ in range(200):
        q = _normalised(tau * logp)
        mean = np.sum(q * logp, axis=1)
        slope = np.mean(mean - own)  # d/dtau of the negative log likelihood
        curvature = np.mean(np.sum(q * logp * logp, axis=1) - mean * mean)
        if slope < 0:
            low = tau
        else:
            high = tau
        new = tau - slope / curvature if curvature > 0 else np.inf
        if not low < new < high:
            new = 0.5 * (low + high)
        if abs(new - tau) <= 1e-9 * tau:
            break
        tau = new
    return float(tau)
