"""The dual's r coordinate steps of a pack, replayed identically on every rank.

The C-SVC dual, hinge loss, no free bias: maximise sum(alpha) - 1/2 alpha' Q alpha with
0 <= alpha_i <= C_i, Q_ij = y_i y_j K(x_i, x_j). The model w = sum_i alpha_i y_i phi(x_i) is
the table's expansion, an entry's coefficient being alpha_i y_i (so alpha_i = y_i coef_i).

One step on row i (LIBLINEAR's dual coordinate descent with a kernel row in place of x,
Hsieh et al. 2008): G = y_i f(x_i) - 1 is the dual gradient, PG its projection on the box,
and alpha_i moves to clip(alpha_i - G / K_ii, 0, C_i). Within a pack, row k's margin is its
partial sum plus the pack's earlier steps l < k: sum_l dalpha_l y_l K(x_l, x_k), through the
pack's pair kernels, so r steps in a pack give the same alphas as r steps one at a time.

Sweeps: the pack's pair kernels hold its r x r block of Q, so once its r steps are taken,
further sweeps over the same rows cost r kernel values a step and no kernel sum: block
coordinate descent on the pack's subproblem, up to ``sweeps`` passes in all, until a pass's
largest projected gradient is at most ``inner_tol``. At large C and small gamma, where K is
close to a constant and single steps crawl along it, the pack's exact block moves many times
further per kernel sum (measured: ``bench/dual.py --sweeps``).

Shrinking (LIBLINEAR's): a row at a bound whose gradient points out of the box by more than
the last epoch's extreme projected gradients (``pg_old``) leaves the column's active set.
"""
import math

from ...jit import njit

# the columns of a column's epoch accumulators (``coordinate_steps``' ``epoch``)
# (FROZEN, the hinge losses of the rows shrunk at their upper bound, is kept until they come back)
PG_MAX, PG_MIN, HINGE, VISITED, FROZEN = 0, 1, 2, 3, 4
EPOCH_FIGURES = 5


@njit(cache=True)
def coordinate_steps(predictions, pairs, alphas, labels, weight, column_class, column_fold, row_fold, column_group,
                     cost, pg_old, active, w2, alpha_sum, epoch, delta, stepped, margin, sweeps, inner_tol):
    """The pack's r steps for each of the K columns, in place.

    predictions (K, r): the rows' summed partial margins on the model before the pack;
    pairs (G, r (r + 1) / 2): the pack's pair kernels per kernel group, the upper triangle
    with its diagonal row by row (the kernel's constant included); alphas (K, r): the
    holder's coefficient of each row (alpha y, 0 where no rank holds it); labels (r,) +-1,
    or class codes with ``column_class`` (K,) the class trained one-vs-rest (-1: as given);
    weight (r,) the rows' weights; column_fold (K,) the fold a column holds out (-1: none)
    and row_fold (r,) the rows'; column_group (K,) each column's kernel group; cost (K,)
    each column's C (a row's box is cost times its weight, 0 in a held-out fold); pg_old
    (K, 2) the shrinking thresholds (PGmax, PGmin of the epoch before; +inf, -inf: none);
    active (K, r) uint8: whether the row is in the column's active set, cleared where it
    shrinks; w2, alpha_sum (K,): alpha' Q alpha and sum(alpha), updated; epoch (K,
    EPOCH_FIGURES): the epoch's PG max and min, hinge losses before the steps (cost times
    weight times max(0, 1 - y f)), rows visited (not shrunk) and the losses of the rows shrunk
    at their upper bound, as last seen, added to. Outputs: delta (K, r), each
    row's coefficient change (dalpha y); stepped (K, r), 1.0 where it changed, else 0;
    margin (K, r) work array (the rows' margins as the steps meet them). sweeps: passes over
    the pack in all (the first one visits, shrinks and counts; the others only step the rows it
    left active), ending early after a pass whose largest |PG| is at most ``inner_tol``.
    """
    K, r = predictions.shape
    for c in range(K):
        code, held, pairs_c = column_class[c], column_fold[c], pairs[column_group[c]]
        margin[c] = predictions[c]
        delta[c] = 0.0
        stepped[c] = 0.0
        row = 0  # where row k of the triangle starts: its diagonal entry
        for k in range(r):
            start, row = row, row + r - k
            if active[c, k] == 0:
                continue
            y = labels[k] if code < 0 else (1.0 if labels[k] == code else -1.0)
            bound = 0.0 if held >= 0 and row_fold[k] == held else cost[c] * weight[k]
            if bound <= 0.0:  # no dual variable: never stepped, in no gap
                active[c, k] = 0
                continue
            f = margin[c, k]
            a = y * alphas[c, k]
            G = y * f - 1.0
            pg = G
            if a <= 0.0:
                if G > pg_old[c, 0]:
                    active[c, k] = 0
                    continue
                pg = min(G, 0.0)
            elif a >= bound:
                if G < pg_old[c, 1]:
                    active[c, k] = 0
                    epoch[c, FROZEN] -= bound * G  # it stays at its bound: its loss as last seen
                    continue
                pg = max(G, 0.0)
            epoch[c, PG_MAX] = max(epoch[c, PG_MAX], pg)
            epoch[c, PG_MIN] = min(epoch[c, PG_MIN], pg)
            epoch[c, VISITED] += 1.0
            if G < 0.0:  # the row's loss as the step meets it (the gap estimate's; 0 at the optimum's free rows)
                epoch[c, HINGE] -= bound * G
            qii = pairs_c[start]
            if abs(pg) > 1e-12:
                d = _step(a, G, qii, bound) - a
                if d != 0.0:
                    change = d * y
                    delta[c, k] = change
                    stepped[c, k] = 1.0
                    w2[c] += 2.0 * d * y * f + d * d * qii
                    alpha_sum[c] += d
                    for j in range(k + 1, r):
                        margin[c, j] += change * pairs_c[start + j - k]
        if sweeps > 1:
            _sweep_block(pairs_c, alphas[c], labels, weight, code, cost[c], active[c], w2, alpha_sum, c, delta[c],
                         stepped[c], margin[c], sweeps - 1, inner_tol)


@njit(cache=True)
def _step(a, G, qii, bound):
    """Row i's new alpha: the coordinate's exact step from a (gradient G, curvature qii), clipped
    to [0, bound]."""
    if qii > 0.0:
        return min(max(a - G / qii, 0.0), bound)
    return bound if G < 0.0 else 0.0  # a zero row: the dual is linear in alpha_i, its optimum at a bound


@njit(cache=True)
def _projected(G, a, bound):
    """Row i's projected gradient: G where alpha is free, its part into the box at a bound."""
    return min(G, 0.0) if a <= 0.0 else (max(G, 0.0) if a >= bound else G)


@njit(cache=True)
def pair_start(k, r):
    """Where row k of the pack's upper triangle (with its diagonal, row by row) starts."""
    return k * (2 * r - k + 1) // 2


@njit(cache=True)
def carry_back(pairs_c, delta_c, margin_c):
    """After a first pass, which carried each step only to the rows after it: every row's
    margin (r,) takes every step of the pack, its own included (pairs_c one kernel group's
    triangle, delta_c (r,) the coefficient changes)."""
    r = len(margin_c)
    for k in range(r):
        change = delta_c[k]
        if change != 0.0:
            for j in range(k + 1):
                margin_c[j] += change * pairs_c[pair_start(j, r) + k - j]


@njit(cache=True)
def spread_step(pairs_c, k, change, margin_c):
    """Row k's coefficient change ``change`` into every row's margin (r,) of the pack."""
    r = len(margin_c)
    for j in range(k):
        margin_c[j] += change * pairs_c[pair_start(j, r) + k - j]
    start = pair_start(k, r)
    for j in range(k, r):
        margin_c[j] += change * pairs_c[start + j - k]


@njit(cache=True)
def _sweep_block(pairs_c, alphas_c, labels, weight, code, cost_c, active_c, w2, alpha_sum, c, delta_c, stepped_c,
                 margin_c, sweeps, inner_tol):
    """Column c's further ``sweeps`` passes over the pack's active rows, after its first pass
    (``coordinate_steps``): the margins first take every step of the pack, then each step
    updates every row's margin. The first pass left active only rows with a dual variable (a
    box above 0) that did not shrink."""
    r = len(margin_c)
    carry_back(pairs_c, delta_c, margin_c)
    for _ in range(sweeps):
        largest = 0.0
        for k in range(r):
            if active_c[k] == 0:
                continue
            y = labels[k] if code < 0 else (1.0 if labels[k] == code else -1.0)
            bound = cost_c * weight[k]
            f = margin_c[k]
            a = y * (alphas_c[k] + delta_c[k])
            G = y * f - 1.0
            pg = _projected(G, a, bound)
            largest = max(largest, abs(pg))
            if abs(pg) <= 1e-12:
                continue
            qii = pairs_c[pair_start(k, r)]
            d = _step(a, G, qii, bound) - a
            if d != 0.0:
                delta_c[k] += d * y
                w2[c] += 2.0 * d * y * f + d * d * qii
                alpha_sum[c] += d
                spread_step(pairs_c, k, d * y, margin_c)
        if largest <= inner_tol:
            break
    for k in range(r):
        stepped_c[k] = 1.0 if delta_c[k] != 0.0 else 0.0


@njit(cache=True)
def certificate_sums(predictions, alphas, labels, weight, column_class, column_fold, row_fold, cost, sums):
    """One block of rows of the full pass into ``sums`` (K, 5): sum(alpha), sum alpha y f (so
    alpha' Q alpha), the hinge part sum C_i max(0, 1 - y f), and the projected gradients' max
    and min; predictions (K, n) the rows' margins, alphas (K, n) their coefficients (alpha y),
    the rest as ``coordinate_steps``'."""
    K, n = predictions.shape
    for c in range(K):
        code, held = column_class[c], column_fold[c]
        for k in range(n):
            bound = 0.0 if held >= 0 and row_fold[k] == held else cost[c] * weight[k]
            if bound <= 0.0:
                continue
            y = labels[k] if code < 0 else (1.0 if labels[k] == code else -1.0)
            f, a = predictions[c, k], y * alphas[c, k]
            sums[c, 0] += a
            sums[c, 1] += a * y * f
            G = y * f - 1.0
            if G < 0.0:
                sums[c, 2] -= bound * G
            pg = _projected(G, a, bound)
            sums[c, 3] = max(sums[c, 3], pg)
            sums[c, 4] = min(sums[c, 4], pg)


def relative_gap(primal, dual):
    """(P - D) / P, 0 where both are 0 (nothing to learn)."""
    if primal == 0.0:
        return 0.0 if dual == 0.0 else math.inf
    return (primal - dual) / abs(primal)
