"""Linear Pegasos (Shalev-Shwartz et al.): the linear case of the P-packSVM core.

Pegasos minimises sigma/2 ||w~||^2 + 1/n sum_i max(0, 1 - y_i w~ . phi~(x_i)) with
sigma = 1/(n C), which is the shared problem divided by n C (w~ = [w, b], phi~ = [phi, 1]).
Step t draws a row uniformly, then

    w~ <- (1 - 1/t) w~ + [y w~.phi~(x) < 1] y/(sigma t) phi~(x),
    w~ <- min(1, 1/sqrt(sigma ||w~||^2)) w~,

with w~ = s v (Figure 2 of the P-packSVM paper): scaling touches only s, the update only
the non-zeros of phi(x), and ||w~||^2 is carried along (recomputed every epoch against
drift). Only the hinge loss ("l1") is supported.

Row weights c_i (LIBLINEAR's -wi) scale row i's hinge loss: its step is c_i times larger
and the ball's squared radius is max_i c_i / sigma (as the kernel trainer's), which still
holds the optimum.

By default the result is the average of the iterates of the last half of the steps
(suffix averaging, which the last iterate of SGD lacks: it removes most of the step noise).
It costs no pass over w: with S the running sum of s over the averaged steps and U the sum
of every later addition delta to v weighted by the S before it, sum_t s_t v_t = S v - U.
"""
import math
import time

import numpy as np
import scipy.sparse as sp
from mpi4py import MPI

from ..data.delivery import deliver_rows
from ..data.sampler import RowSampler
from ..errors import PPackError
from ..jit import njit
from ..mpi.collectives import Collectives
from ..random_stream import below
from .checks import check_common, check_options, check_weights, open_block
from .dcd import MAX_ROWS
from .features import IDENTITY, _add, _dot, _row, _sqnorm, _sqnorms, as_feature_map, as_rows
from .problem import LinearSolution

_TINY_SCALE = 1e-9  # fold s into v below this, long before v could overflow


@njit(inline="always")
def _step(kind, params, idx, val, shift, yi, t, sq, v, vb, bias, sigma, s, norm, average_from, u, ub, total_s,
          count, ci, c_max):
    """Pegasos step t on the row (idx, val) with label yi, weight ci and ||phi(x)||^2 = sq.

    w~ = s [v, vb[0]], projected onto the ball ||w~||^2 <= c_max / sigma; returns (s, norm,
    total_s, count, projected) with the suffix-average accumulators u, ub, total_s, count
    updated (see the module docstring).
    """
    margin = yi * s * (_dot(kind, params, idx, val, v, shift) + vb[0] * bias)
    keep = 1.0 - 1.0 / t
    if keep == 0.0:  # step 1 forgets w~ entirely
        v[:] = 0.0
        vb[0] = 0.0
        s, norm = 1.0, 0.0
    else:
        s *= keep
        norm *= keep * keep
    if margin < 1.0 and ci != 0.0:
        eta = ci / (sigma * t)
        norm += 2.0 * eta * keep * margin + eta * eta * (sq + bias)
        _add(kind, params, idx, val, v, yi * eta / s, shift)
        vb[0] += yi * eta / s * bias
        if count > 0:
            _add(kind, params, idx, val, u, yi * eta / s * total_s, shift)
            ub[0] += yi * eta / s * bias * total_s
    projected = 0
    if norm * sigma > c_max:
        s /= math.sqrt(sigma * norm / c_max)
        norm = c_max / sigma
        projected = 1
    if t > average_from:
        total_s += s
        count += 1
    if s < _TINY_SCALE:
        v *= s
        vb[0] *= s
        total_s /= s  # the averaged steps' scales, in the new units of v
        s = 1.0
    return s, norm, total_s, count, projected


@njit(cache=True)
def _pegasos(indptr, indices, values, dense, y, kind, params, n_virtual, v, vb, bias, sqn, sigma, t0, epochs,
             rng, s, norm, average_from, u, ub, weights, c_max):
    """epochs * n_dual Pegasos steps numbered t0+1, t0+2, ... on w~ = s [v, vb[0]].

    sqn[r] = ||phi(x_r)||^2; weights (n,): the rows' loss weights, or empty (all 1), their
    largest c_max. Steps t > average_from are averaged: u (n_out,) and ub (1,)
    receive U (see the module docstring). Returns (s, ||w~||^2, projections, S, count).
    """
    n_dual = sqn.shape[0]
    weighted = weights.shape[0] > 0
    projections = 0
    total_s = 0.0
    count = 0
    t = t0
    for _ in range(epochs):
        for _ in range(n_dual):
            t += 1
            r = below(rng, n_dual)
            i, shift = (r, 0) if n_virtual == 1 else (r // n_virtual, r % n_virtual)
            idx, val = _row(i, indptr, indices, values, dense)
            ci = weights[i] if weighted else 1.0
            s, norm, total_s, count, projected = _step(kind, params, idx, val, shift, y[i], t, sqn[r], v, vb, bias,
                                                       sigma, s, norm, average_from, u, ub, total_s, count, ci, c_max)
            projections += projected
        norm = s * s * (np.dot(v, v) + vb[0] * vb[0])
    return s, norm, projections, total_s, count


def _largest(weights):
    """The largest row weight; 1 when every weight is 0 (no step adds anything then)."""
    c_max = float(weights.max(initial=0.0))
    return c_max if c_max > 0.0 else 1.0


def _check_loss(loss):
    if loss != "l1":
        raise PPackError(f"loss: pegasos optimises the hinge loss only; must be 'l1', got {loss!r}")


def _check(C, loss, bias, options):
    """The distributed mode's arguments (it reads a shard, not a block), checked: (C, bias,
    options normalised)."""
    C, loss, bias = check_common(C, loss, bias)
    _check_loss(loss)
    return C, bias, check_options("pegasos", **options)


def _epochs(options):
    """The epochs to run: ``epochs``, capped by ``max_epochs`` when given."""
    if options["max_epochs"] is None:
        return options["epochs"]
    return min(options["epochs"], options["max_epochs"])


def solve(X, y, C, *, loss="l1", bias=True, tol=None, max_epochs=None, seed=0, w0=None, b0=0.0, alpha0=None,
          epochs=200, t0=None, feature_map=None, average=True, pack=1000, weights=None, **unknown):
    """Pegasos on one block; returns a LinearSolution with alpha=None.

    X (n, d) CSR or dense, y (n,) in {-1, +1}; epochs * n steps (n counts virtual rows under
    a shifts map). tol is not used (Pegasos runs a fixed number of steps); max_epochs, when
    given, caps epochs. w0 (n_out,) / b0 warm-start w~; the steps are then numbered from
    t0 + 1 with t0 = n by default, so the first step keeps n/(n+1) of w0 (t0 = 0 would wipe
    it). feature_map: a FeatureMap (or name), applied on demand as in dcd. average: return
    the mean of the last half of the iterates (default) instead of the last one. pack (rows
    per delivery in ``solve_distributed``) has no effect on one block. weights (n,) >= 0 or
    None: each row's loss weight (its steps scaled by it).
    """
    X, y, C, loss, bias, options, fmap, w0, b0, weights = open_block(
        "pegasos", X, y, C, loss, bias,
        dict(tol=tol, max_epochs=max_epochs, seed=seed, epochs=epochs, t0=t0, average=average, pack=pack, **unknown),
        feature_map, w0, b0, weights)
    _check_loss(loss)
    n, d = X.shape
    if alpha0 is not None:
        raise PPackError(f"alpha0: must be None (pegasos has no dual variables), got {type(alpha0).__name__}")
    epochs, seed = _epochs(options), options["seed"]
    n_out, n_virtual, params = fmap.n_out(d), fmap.n_virtual, fmap.params(d)
    n_dual = n * n_virtual
    if n_dual > MAX_ROWS:
        raise PPackError(f"X: must have at most {MAX_ROWS} (virtual) rows per block, got {n_dual}")
    c_max = 1.0 if weights is None else _largest(weights)
    t0 = options["t0"]
    if t0 is None:
        t0 = 0 if w0 is None else n_dual

    indptr, indices, values, dense = as_rows(X)
    bias_value = 1.0 if bias else 0.0
    v = np.zeros(n_out) if w0 is None else w0
    vb = np.array([b0 if bias else 0.0])
    sqn = np.empty(n_dual)
    _sqnorms(indptr, indices, values, dense, fmap.kind, params, n_virtual, 0.0, sqn)
    sigma = 1.0 / (n_dual * C)
    norm = float(v @ v + vb[0] ** 2)
    rng = np.array([seed], dtype=np.uint64)

    steps = epochs * n_dual
    average_from = t0 + steps // 2 if options["average"] else t0 + steps
    u, ub = np.zeros(n_out), np.zeros(1)
    start = time.perf_counter()
    s, norm, projections, total_s, count = _pegasos(
        indptr, indices, values, dense, y, fmap.kind, params, n_virtual, v, vb, bias_value, sqn, sigma, t0, epochs,
        rng, 1.0, norm, average_from, u, ub, np.empty(0) if weights is None else weights, c_max)
    info = {"steps": steps, "t_end": t0 + steps, "sigma": sigma, "projections": int(projections),
            "averaged_steps": int(count), "seconds": time.perf_counter() - start, "feature_map": fmap.name}
    if count:
        return LinearSolution(w=(total_s * v - u) / count, b=float((total_s * vb[0] - ub[0]) / count), alpha=None,
                              iterations=epochs, info=info)
    return LinearSolution(w=s * v, b=float(s * vb[0]), alpha=None, iterations=epochs, info=info)


@njit(cache=True)
def _steps_in_order(indptr, indices, values, y, shifts, kind, params, v, vb, bias, sigma, t0, s, norm, average_from,
                    u, ub, total_s, count, weights, c_max):
    """Pegasos steps t0+1 .. t0+r on the r CSR rows in order (rows drawn by the caller).

    shifts (r,): each row's shift id under a shifts map (zeros otherwise); weights (r,) the
    rows' loss weights, or empty (all 1), c_max the data set's largest. Returns (s, norm,
    total_s, count).
    """
    weighted = weights.shape[0] > 0
    for k in range(y.shape[0]):
        idx, val = indices[indptr[k]:indptr[k + 1]], values[indptr[k]:indptr[k + 1]]
        if kind == IDENTITY:
            sq = float(np.dot(val, val))
        else:
            sq = _sqnorm(kind, params, idx, val, shifts[k])
        ci = weights[k] if weighted else 1.0
        s, norm, total_s, count, _ = _step(kind, params, idx, val, shifts[k], y[k], t0 + k + 1, sq, v, vb, bias,
                                           sigma, s, norm, average_from, u, ub, total_s, count, ci, c_max)
    return s, norm, total_s, count


def solve_distributed(comm, shard, labels, C, *, loss="l1", bias=True, tol=None, max_epochs=None, seed=0, epochs=200,
                      t0=None, average=True, pack=1000, feature_map=None, weights=None, **unknown):
    """Collective: Pegasos over the rows of all ranks' shards, every rank holding w.

    shard: this rank's ``Shard``; labels (its rows,) in {-1, +1}. A sampling stream
    shared by the ranks (seeded alike) draws global (virtual) row ids; each pack of
    ``pack`` rows is delivered to every rank with one Allreduce (as in the kernel
    trainer), and every rank applies the same steps, so the result does not depend on the
    number of ranks. Under a shifts map with V virtual rows per image, the stream draws
    from n * V ids; id delivers row id // V, moved by shift id % V. The options are those
    of ``solve`` (tol unused, max_epochs caps epochs, t0: steps numbered from t0 + 1,
    default 0); there is no warm start. weights (its rows,) or None: the rows' loss
    weights, delivered with them. Returns (w (n_out,), b, steps).
    """
    n, d = shard.n_samples, shard.n_features
    C, bias, options = _check(C, loss, bias, dict(tol=tol, max_epochs=max_epochs, seed=seed, epochs=epochs, t0=t0,
                                                   average=average, pack=pack, **unknown))
    fmap = as_feature_map(feature_map, d)
    n_out, n_virtual, params = fmap.n_out(d), fmap.n_virtual, fmap.params(d)
    n_dual = n * n_virtual
    t0 = options["t0"] or 0
    weights = check_weights(weights, shard.stop - shard.start)
    c_max = 1.0
    if weights is not None:
        c_max = _largest(np.array([comm.allreduce(float(weights.max(initial=0.0)), op=MPI.MAX)]))
    sigma = 1.0 / (n_dual * C)
    steps = _epochs(options) * n_dual
    sampler = RowSampler(n_dual, options["seed"])
    collectives = Collectives(comm)
    bias_value = 1.0 if bias else 0.0
    v, vb, u, ub = np.zeros(n_out), np.zeros(1), np.zeros(n_out), np.zeros(1)
    s, norm, total_s, count = 1.0, 0.0, 0.0, 0
    average_from = t0 + (steps // 2 if options["average"] else steps)
    t = 0
    while t < steps:
        r = min(options["pack"], steps - t)
        ids = sampler.take(r)
        if n_virtual == 1:
            rows, shifts = ids, np.zeros(r, dtype=np.int64)
        else:
            rows, shifts = ids // n_virtual, ids % n_virtual
        block = deliver_rows(collectives, shard, labels, rows, weights=weights)
        if block.csr is None:  # dense data: the same steps over the rows' nonzeros
            block_rows = sp.csr_matrix(block.dense)
            indptr, indices = block_rows.indptr.astype(np.int64), block_rows.indices
            values = block_rows.data.astype(np.float64)
        else:
            indptr, indices, values = block.csr[0], block.csr[1], block.csr[2].astype(np.float64)
        s, norm, total_s, count = _steps_in_order(indptr, indices, values, block.y, shifts, fmap.kind, params, v, vb,
                                                  bias_value, sigma, t0 + t, s, norm, average_from, u, ub, total_s,
                                                  count, np.empty(0) if weights is None else block.weight, c_max)
        t += r
    if count:
        return (total_s * v - u) / count, float((total_s * vb[0] - ub[0]) / count), steps
    return s * v, float(s * vb[0]), steps
