"""The r sequential updates of a pack, replayed identically on every rank.

Figure 11 of the P-packSVM paper, with the step c / (sigma (t + c - 1)) for a constant
0 < c <= 1 (c = 1 is the paper's 1 / (sigma t)): w is scaled by a = 1 - c / (t + c - 1) =
(t - 1) / (t + c - 1) before the step, and with its known slips fixed:
- ||w||^2 (``norm``) is scaled by a^2 when w is scaled by a;
- the cross term of the norm update uses the prediction of the *scaled* w;
- at t = 1 (decided by the iteration number, never by the scale's value) the factor is 0:
  w is reset to 0, recorded as a fold by 0, and s restarts at 1;
- after a projection the remaining predictions of the pack are rescaled by the
  projection factor 1/sqrt(sigma * norm), not by a.

The scale is folded inside the pack: whenever s falls below ``FOLD_BELOW`` the pack's
coefficients added so far are multiplied by s, s restarts at 1, and the fold is recorded;
the caller multiplies the stored coefficients by the product of the pack's folds before
adding the pack's coefficients. With a tiny sigma nearly every early step projects, each
shrinking s by about sqrt(sigma) t, so s would underflow within one pack otherwise.

The loss is chosen by an integer ``mode`` (``losses.py`` says which bound and offset go with
each): HINGE (C-SVC), EPSILON_INSENSITIVE (epsilon-SVR: a step on row k when
|y_k - f_k| > epsilon, with the residual's sign) and ONE_CLASS (Schoelkopf's nu form: a step
when f_k < rho). The decision value is f = <w, phi(x)> - rho (LIBSVM's sign), with rho a
replicated scalar that the replay keeps beside s and norm: fixed (rho_step 0) or moved by
its own sub-gradient step rho_step * c / (t + c - 1) (unregularised, so not scaled by a),
then projected onto [rho_low, rho_high].
"""
import functools
import math
from types import SimpleNamespace

import numpy as np

from ..jit import njit

# s is folded when it ends an iteration below 2^-500 (about 3e-151). Why this is safe:
# an iteration starts with FOLD_BELOW <= s <= 1 and multiplies s by a = 1 - c / (t + c - 1)
# >= 1/2 (t >= 2, c <= 1), then by at most one projection factor 1/sqrt(sigma * norm) >=
# 1/sqrt(sigma * DBL_MAX), about 7e-155 for sigma <= 1 and a finite norm: s stays above
# 1e-305, a normal float (no underflow, no loss of digits). The coefficient eta / s is
# computed with s >= FOLD_BELOW / 2, and eta <= 1 / (sigma t) (c / (t + c - 1) <= 1 / t for
# c <= 1), so |eta / s| <= 2^501 / (sigma t), finite for sigma >= 1e-157; a smaller sigma
# overflows eta^2 K(x, x) in the norm first, which is reported as divergence.
FOLD_BELOW = 2.0 ** -500

# the losses (``mode``): hinge, epsilon-insensitive, one-class
HINGE, EPSILON_INSENSITIVE, ONE_CLASS = 0, 1, 2

# what turned non-finite, by the code ``replay_pack`` reports
NON_FINITE = {1: "the prediction <w, phi(x)>", 2: "the squared norm of w", 3: "the added coefficient",
              4: "the scale of w"}


class NonFinite(ArithmeticError):
    """The replay met a non-finite value: ``iteration`` (1-based), ``what`` it was, ``value``."""

    def __init__(self, iteration, what, value):
        super().__init__(f"{what} is {value} at iteration {iteration}")
        self.iteration, self.what, self.value = iteration, what, value


def replay_pack(y, pred, pair, t0, s, norm, sigma, coef_out, loss_out, fold_out=None, weight=None, max_weight=1.0,
                average_out=None, step=1.0, project=True, mode=HINGE, epsilon=0.0, offset=None, rho_step=0.0,
                rho_box=(-math.inf, math.inf)):
    """Run iterations t0+1 .. t0+r of Pegasos on w = s * v; return (s, norm, projections).

    y (r,) labels in {-1, +1}; pred (r,) the predictions <w_t0, phi(x_k)> on entry, used
    and updated in place (on exit pred[k] is the prediction iteration t0+k+1 tested);
    pair (r, r) the kernel values K(x_k, x_l); coef_out (r,) receives the coefficient
    added to v at iteration k (0 if none), in the units of the returned s; loss_out (r,)
    the hinge loss max(0, 1 - y y'), times the row's weight. weight (r,), if given: each
    row's weight on its hinge loss (class and sample weights; the step is scaled by it), and
    ``max_weight`` the largest weight of the data set, which widens the projection radius to
    sqrt(max_weight / sigma) (the optimum's norm bound). fold_out (2,), if given, receives the product of the
    pack's folds as (mantissa, exponent), the product being mantissa * 2^exponent (kept
    apart so that a product far below the float range stays exact): v on entry must be
    multiplied by it (``table.merge_pack``) before the pack's
    coefficients are added. Raises ``NonFinite`` on a non-finite prediction, norm,
    coefficient or scale; the outputs are then meaningless.

    average_out (r + 1,), if given, receives what the pack adds to the averaged iterate
    sum_t a_t w_t with a_t = t (t + 1) (t + 2) (``averaging.py``): [k] for k < r, the part of
    the coefficient added at iteration k, in true units (coefficient times scale); [r], the
    factor by which the coefficients v held on entry contribute (sum_t a_t s_t times the folds
    so far, in the units of v on entry). step: c of the step c / (sigma (t + c - 1)), 0 < c <= 1.
    project: False skips the projection (kernels that are not positive semi-definite, whose
    tracked "norm" beta' K beta can be negative and bounds nothing; w stays bounded by the
    steps' own shrinkage, each coefficient at most the row's draws times 1 / (sigma t)).

    mode: the loss (HINGE, EPSILON_INSENSITIVE with ``epsilon``, ONE_CLASS); y holds the
    regression targets for EPSILON_INSENSITIVE (ignored for ONE_CLASS), and ``max_weight`` is
    then sigma times the loss's squared projection radius (``losses.Loss.bound``).
    offset (2,), if given: [rho, anything] on entry; on exit [rho after the pack, sum_t a_t
    rho_t over the pack] (the second only when averaging). rho moves by rho_step c / (t + c - 1)
    times its sub-gradient (0: fixed), then is clipped to ``rho_box`` (low, high).
    """
    offset = np.zeros(2) if offset is None else offset
    info = np.zeros(4)
    if average_out is None:
        average_out = np.empty(0)
    weight = np.ones(len(y)) if weight is None else weight
    pairs = np.ascontiguousarray(pair[np.triu_indices(len(y))], dtype=np.float64)  # the triangle, row by row
    s, norm, projections = _replay(y, pred, pairs, t0, s, norm, sigma, coef_out, loss_out, info, weight,
                                   float(max_weight) if project else math.inf, average_out, float(step), int(mode),
                                   float(epsilon), offset, float(rho_step), float(rho_box[0]), float(rho_box[1]))
    if info[2] != 0.0:
        raise non_finite(info, t0, pred, norm, coef_out, s)
    if fold_out is not None:
        fold_out[0], fold_out[1] = info[0], info[1]
    return s, norm, projections


def non_finite(info, t0, pred, norm, coef, s):
    """The ``NonFinite`` that ``_replay``'s info (4,) reports, with the value that turned non-finite."""
    k, code = int(info[2]) - 1, int(info[3])
    value = {1: pred[k], 2: norm, 3: coef[k], 4: s}[code]
    return NonFinite(t0 + k + 1, NON_FINITE[code], value)


@njit(cache=True)
def _replay(y, pred, pairs, t0, s, norm, sigma, coef_out, loss_out, info, weight, max_weight, average_out, step,
            mode, epsilon, offset, rho_step, rho_low, rho_high):
    """The kernel of ``replay_pack``; pairs: the pack's pair kernels, the upper triangle with
    its diagonal row by row (r (r + 1) / 2); info (4,) receives the fold's mantissa and
    exponent, and (k + 1, code) of the first non-finite value (0, 0 if none); average_out:
    (r + 1,) or empty; offset (2,): rho in, then (rho, the pack's sum of a_t rho_t) out;
    rho_low, rho_high: the interval rho is kept in after each of its steps."""
    averaging = average_out.shape[0] > 0
    for k in range(average_out.shape[0]):
        average_out[k] = 0.0
    r = y.shape[0]
    projections = 0
    limit = max_weight / sigma  # the squared radius (1 / sigma without weights; inf: no projection)
    rho = offset[0]
    rho_sum = 0.0
    fold_m, fold_e = 1.0, 0.0
    folds = 1.0
    # averaging: a_t s_t of each iteration since the last fold (``_add_segment``)
    weighted_scale = np.empty(r if averaging else 0)
    segment = 0
    for k in range(r):
        coef_out[k] = 0.0
        loss_out[k] = 0.0
    row = 0  # where row k of the triangle starts: its diagonal entry
    for k in range(r):
        t = t0 + k + 1
        a = 1.0 - step / (t + step - 1.0)  # with c = 1 exactly the paper's 1 - 1/t
        yk = y[k]
        pk = pred[k]
        if not math.isfinite(pk):
            info[2], info[3] = k + 1, 1
            break
        sign = yk  # the direction of the step on phi(x_k)
        if mode == HINGE:
            loss = 1.0 - yk * pk
        elif mode == EPSILON_INSENSITIVE:
            residual = yk - (pk - rho)
            loss = abs(residual) - epsilon
            sign = 1.0 if residual > 0.0 else -1.0
        else:  # ONE_CLASS
            loss = rho - pk
            sign = 1.0
        loss_out[k] = weight[k] * loss if loss > 0.0 else 0.0
        s *= a
        norm *= a * a
        if t == 1:  # w_1 = 0 * w_0: a fold by 0 (v, all of it from before this pack, is dropped)
            fold_m, fold_e, folds = 0.0, 0.0, 0.0
            s = 1.0
        if loss > 0.0:
            eta = step * sign * weight[k] / (sigma * (t + step - 1.0))
            norm += 2.0 * eta * a * pk + eta * eta * pairs[row]
            coef_out[k] = eta / s
            if not math.isfinite(norm):
                info[2], info[3] = k + 1, 2
                break
            if not math.isfinite(coef_out[k]):
                info[2], info[3] = k + 1, 3
                break
            # scaled by a, then the step (two roundings, as apart); on slices, which vectorise
            later, kernels = pred[k + 1:r], pairs[row + 1:row + r - k]
            for j in range(later.shape[0]):
                later[j] = later[j] * a + eta * kernels[j]
            if norm > limit:
                f = 1.0 / math.sqrt(sigma * norm / max_weight)
                s *= f
                norm = limit
                projections += 1
                for j in range(later.shape[0]):
                    later[j] *= f
        else:
            later = pred[k + 1:r]
            for j in range(later.shape[0]):
                later[j] *= a
        if mode == EPSILON_INSENSITIVE and loss > 0.0:  # d loss / d rho = weight sign(residual)
            rho -= rho_step * step / (t + step - 1.0) * sign * weight[k]
        elif mode == ONE_CLASS:  # d/d rho of weight max(0, rho - f) - sigma rho
            rho -= rho_step * step / (t + step - 1.0) * ((weight[k] if loss > 0.0 else 0.0) - sigma)
        rho = min(max(rho, rho_low), rho_high)
        row += r - k
        if not (s > 0.0 and math.isfinite(s)):
            info[2], info[3] = k + 1, 4
            break
        if s < FOLD_BELOW:
            if averaging:  # the iterations before this one, in the units before the fold
                _add_segment(average_out, coef_out, weighted_scale, segment, k)
                segment = k
            for j in range(k + 1):
                coef_out[j] *= s
            m, e = math.frexp(fold_m * s)
            fold_m, fold_e = m, fold_e + e
            folds = math.ldexp(fold_m, int(fold_e))
            s = 1.0
        if averaging:  # w_t's weight in the average times s; coefficient j's true value is coef_out[j] * s
            w = float(t) * (t + 1.0) * (t + 2.0)
            weighted_scale[k] = w * s
            average_out[r] += w * s * folds  # folds: ldexp(fold_m, fold_e), kept as they change
            rho_sum += w * rho
    if averaging and info[2] == 0.0:
        _add_segment(average_out, coef_out, weighted_scale, segment, r)
    info[0], info[1] = fold_m, fold_e
    offset[0], offset[1] = rho, rho_sum
    return s, norm, projections


@njit(cache=True, inline="always")
def _add_segment(average_out, coef_out, weighted_scale, start, end):
    """Iterations start .. end - 1 (no fold between them, so each coefficient keeps its units):
    coefficient j, added at iteration j, gains coef_out[j] times the sum of a_t s_t over the
    iterations from max(j, start) to end - 1. O(end) instead of a pass per iteration."""
    total = 0.0
    for k in range(end - 1, start - 1, -1):  # suffix sums, in place
        total += weighted_scale[k]
        weighted_scale[k] = total
    for j in range(end):
        average_out[j] += coef_out[j] * weighted_scale[max(j, start)]


@functools.lru_cache(maxsize=4)
def replay_work_arrays(K, r):
    """Scratch arrays of ``replay_all`` for K problems and packs of r rows (info, pred, sign,
    unit weights ``ones``, a column's row weights ``column_weight`` and the rows' folds
    ``row_fold``), kept for the run's next packs (every entry is written before it is read)."""
    return SimpleNamespace(info=np.empty((K, 4)), pred=np.empty(r), sign=np.empty(r), ones=np.ones(r),
                           column_weight=np.empty(r), row_fold=np.full(r, -1, dtype=np.int64))


@njit(cache=True)
def replay_all(predictions, pairs, scale, norm, labels, t0, sigma, coef_out, loss_out, info, weight, max_weight,
               average, step, pred, sign, mean_loss, mode, epsilon, offsets, rho_step, rho_low, rho_high,
               column_class, row_fold, column_fold, column_weight, column_group, tested, active):
    """``replay_pack`` for the K binary problems (columns) of a pack in one numba call; returns
    (the first problem that met a non-finite value or -1, the projections of all of them).

    predictions (K, r): the summed partial predictions of the unscaled w_c (collective 2),
    read only; pairs (G, r (r + 1) / 2): the pack's pair kernels of each kernel group, the upper
    triangle row by row, column c's those of its group ``column_group[c]`` (column_group (K,));
    scale, norm (K,): each problem's s and ||w||^2, updated in place; labels (r,): the rows'
    +-1 labels, or their class codes 0..K-1; column_class (K,): which class column c trains
    one-vs-rest (its label is +1 where the code is column_class[c]), or -1: the labels are
    the +-1 themselves; sigma and max_weight (K,): each column's regularisation weight and
    projection bound (inf: no projection); row_fold (r,) the rows' cross-validation folds
    and column_fold (K,) the fold column c holds out (-1: none): a held-out row carries no
    loss for that column (weight 0, as a row of sample_weight 0), while its scale still
    decays. coef_out, loss_out (K, r), average (K, r + 1) or (K, 0) (not averaging):
    ``replay_pack``'s outputs, one row per problem; info (K, 4): each problem's ``_replay``
    info (``non_finite`` reads a failure from it, with ``pred``); weight (r,) and the
    scalars as ``replay_pack``'s (mode, epsilon: the regression and one-class losses, whose
    labels are the targets or ignored, have column_class -1); rho_step, rho_low, rho_high (K,):
    ``replay_pack``'s, one per column (a one-class grid's columns differ in nu and kernel);
    offsets (K, 2): each problem's ``replay_pack`` offset, updated in place. pred, sign and
    column_weight (r,) are work arrays (``replay_work_arrays``); mean_loss (r,) gets the
    losses' mean over the problems as numpy's ``loss.mean(axis=0)`` adds them. tested (K, r) or
    (K, 0): if not empty, receives each problem's ``pred`` on exit, the predictions
    <w, phi(x_k)> its iterations tested, before row k's step (``progressive.py`` scores
    held-out rows from them). active (K,) bool: a column that is not (stopped by its own
    convergence test, ``column_stops.py``) takes no step, no scale decay and no average
    increment: its coef, loss and average rows are 0, its fold (1, 0), its offset's sum 0."""
    K, r = predictions.shape
    projections = 0
    for c in range(K):
        info[c, :] = 0.0
        if not active[c]:  # frozen: the model it stopped at, unchanged
            info[c, 0] = 1.0
            offsets[c, 1] = 0.0
            for k in range(r):
                coef_out[c, k] = 0.0
                loss_out[c, k] = 0.0
            for k in range(average.shape[1]):
                average[c, k] = 0.0
            if tested.shape[1] > 0:
                for k in range(r):
                    tested[c, k] = scale[c] * predictions[c, k]
            continue
        code = column_class[c]
        for k in range(r):
            pred[k] = scale[c] * predictions[c, k]
            sign[k] = labels[k] if code < 0 else (1.0 if labels[k] == code else -1.0)
        held = column_fold[c]
        rows_weight = weight
        if held >= 0:
            for k in range(r):
                column_weight[k] = 0.0 if row_fold[k] == held else weight[k]
            rows_weight = column_weight
        scale[c], norm[c], done = _replay(sign, pred, pairs[column_group[c]], t0, scale[c], norm[c], sigma[c],
                                          coef_out[c], loss_out[c], info[c], rows_weight, max_weight[c], average[c],
                                          step, mode, epsilon, offsets[c], rho_step[c], rho_low[c], rho_high[c])
        projections += done
        if info[c, 2] != 0.0:
            return c, projections
        if tested.shape[1] > 0:
            for k in range(r):
                tested[c, k] = pred[k]
    for k in range(r):
        total = loss_out[0, k]
        for c in range(1, K):
            total += loss_out[c, k]
        mean_loss[k] = total / K
    return -1, projections
