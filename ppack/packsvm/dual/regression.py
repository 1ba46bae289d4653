"""epsilon-SVR's dual coordinate steps (LIBLINEAR's ``-s 13``, Ho and Lin 2012, with a kernel row
in place of x), replayed identically on every rank like the C-SVC's (``coordinate.py``).

The dual: minimise 1/2 beta' K beta - sum y_i beta_i + epsilon sum |beta_i| with -C_i <= beta_i
<= C_i, on targets y centred by their mean (the model's rho is -mean(y), as the SGD's). The
model's coefficients are the betas themselves. On row i, with G = f(x_i) - y_i, the gradient is
G + epsilon where beta_i > 0 and G - epsilon where beta_i < 0; at beta_i = 0 any value between
is a subgradient. The step is Newton's with the soft threshold: beta_i - (G + epsilon) / K_ii
where that stays positive, beta_i - (G - epsilon) / K_ii where that stays negative, else 0;
then clipped to the box.

The projected gradient, in the C-SVC's sense (zero at the optimum, PG max - PG min its KKT
gap): G + epsilon or G - epsilon on a free beta; at 0 the one of them that points out of
[0-, 0+] (else 0); at a bound the part that points into the box. Shrinking is the C-SVC's,
sign for sign: a beta at 0 inside the tube by more than the last epoch's extremes, or at a
bound pushed outwards by more, leaves the active set. Further sweeps over each pack's block
are the C-SVC's too (``coordinate.py``).
"""
from dataclasses import dataclass

from ...jit import njit
from .coordinate import FROZEN, HINGE, PG_MAX, PG_MIN, VISITED, pair_start, carry_back, spread_step


@dataclass(frozen=True)
class Regression:
    """What the dual needs of epsilon-SVR: ``epsilon``, the tube's half width, and ``unit``, the
    largest target deviation from the mean: the KKT gap is measured in it, so that ``tol``
    means the same whatever the targets' scale."""

    epsilon: float
    unit: float


@njit(cache=True)
def regression_steps(predictions, pairs, betas, targets, weight, epsilon, column_fold, row_fold, column_group,
                     cost, pg_old, active, w2, linear_sum, epoch, delta, stepped, margin, sweeps, inner_tol):
    """The pack's r steps for each of the K columns, in place: as ``coordinate.coordinate_steps``,
    with ``betas`` (K, r) the holders' coefficients (beta itself), ``targets`` (r,) centred,
    ``epsilon`` the tube, ``linear_sum`` (K,) sum(y beta) - epsilon sum |beta| (the dual's
    linear part) in place of sum(alpha); ``epoch``'s loss figures are the epsilon-insensitive
    losses C_i max(0, ``|y - f|`` - epsilon); ``delta`` (K, r) the betas' changes; ``sweeps``
    and ``inner_tol`` as the C-SVC's."""
    K, r = predictions.shape
    for c in range(K):
        held, pairs_c = column_fold[c], pairs[column_group[c]]
        margin[c] = predictions[c]
        delta[c] = 0.0
        stepped[c] = 0.0
        row = 0  # where row k of the triangle starts: its diagonal entry
        for k in range(r):
            start, row = row, row + r - k
            if active[c, k] == 0:
                continue
            bound = 0.0 if held >= 0 and row_fold[k] == held else cost[c] * weight[k]
            if bound <= 0.0:  # no dual variable: never stepped, in no gap
                active[c, k] = 0
                continue
            f, y, b = margin[c, k], targets[k], betas[c, k]
            gp, gn = f - y + epsilon, f - y - epsilon
            if b == 0.0:
                if gp < 0.0:
                    pg = gp
                elif gn > 0.0:
                    pg = gn
                elif gp > pg_old[c, 0] and gn < pg_old[c, 1]:
                    active[c, k] = 0
                    continue
                else:
                    pg = 0.0
            elif b >= bound:
                if gp < pg_old[c, 1]:
                    active[c, k] = 0
                    epoch[c, FROZEN] -= bound * gp  # above the tube at its bound: its loss as last seen
                    continue
                pg = max(gp, 0.0)
            elif b <= -bound:
                if gn > pg_old[c, 0]:
                    active[c, k] = 0
                    epoch[c, FROZEN] += bound * gn
                    continue
                pg = min(gn, 0.0)
            else:
                pg = gp if b > 0.0 else gn
            epoch[c, PG_MAX] = max(epoch[c, PG_MAX], pg)
            epoch[c, PG_MIN] = min(epoch[c, PG_MIN], pg)
            epoch[c, VISITED] += 1.0
            epoch[c, HINGE] += bound * max(0.0, abs(y - f) - epsilon)
            kii = pairs_c[start]
            new = _step(gp, gn, b, bound, kii)
            d = new - b
            if abs(d) > 1e-12:
                delta[c, k] = d
                stepped[c, k] = 1.0
                w2[c] += 2.0 * d * f + d * d * kii
                linear_sum[c] += y * d - epsilon * (abs(new) - abs(b))
                for j in range(k + 1, r):
                    margin[c, j] += d * pairs_c[start + j - k]
        if sweeps > 1:
            _sweep_block(pairs_c, betas[c], targets, weight, epsilon, cost[c], active[c], w2, linear_sum, c,
                         delta[c], stepped[c], margin[c], sweeps - 1, inner_tol)


@njit(cache=True)
def _step(gp, gn, b, bound, kii):
    """Row i's new beta: Newton's step with the soft threshold (gp, gn: G + epsilon, G - epsilon),
    clipped to [-bound, bound]."""
    if kii > 0.0:
        if gp < kii * b:
            new = b - gp / kii
        elif gn > kii * b:
            new = b - gn / kii
        else:
            new = 0.0
    else:  # a zero row: the objective is linear in beta_i, its optimum at a bound or 0
        new = bound if gp < 0.0 else (-bound if gn > 0.0 else 0.0)
    return min(max(new, -bound), bound)


@njit(cache=True)
def _projected(gp, gn, b, bound):
    """Row i's projected gradient at beta b (gp, gn: G + epsilon, G - epsilon)."""
    if b == 0.0:
        return gp if gp < 0.0 else (gn if gn > 0.0 else 0.0)
    if b >= bound:
        return max(gp, 0.0)
    if b <= -bound:
        return min(gn, 0.0)
    return gp if b > 0.0 else gn


@njit(cache=True)
def _sweep_block(pairs_c, betas_c, targets, weight, epsilon, cost_c, active_c, w2, linear_sum, c, delta_c, stepped_c,
                 margin_c, sweeps, inner_tol):
    """Column c's further passes over the pack's active rows, as ``coordinate._sweep_block``."""
    r = len(margin_c)
    carry_back(pairs_c, delta_c, margin_c)
    for _ in range(sweeps):
        largest = 0.0
        for k in range(r):
            if active_c[k] == 0:
                continue
            f, y, b, bound = margin_c[k], targets[k], betas_c[k] + delta_c[k], cost_c * weight[k]
            gp, gn = f - y + epsilon, f - y - epsilon
            pg = _projected(gp, gn, b, bound)
            largest = max(largest, abs(pg))
            if abs(pg) <= 1e-12:
                continue
            kii = pairs_c[pair_start(k, r)]
            new = _step(gp, gn, b, bound, kii)
            d = new - b
            if d != 0.0:
                delta_c[k] += d
                w2[c] += 2.0 * d * f + d * d * kii
                linear_sum[c] += y * d - epsilon * (abs(new) - abs(b))
                spread_step(pairs_c, k, d, margin_c)
        if largest <= inner_tol:
            break
    for k in range(r):
        stepped_c[k] = 1.0 if delta_c[k] != 0.0 else 0.0


@njit(cache=True)
def regression_certificate_sums(predictions, betas, targets, weight, epsilon, column_fold, row_fold, cost, sums):
    """One block of rows of the full pass into ``sums`` (K, 5), as ``coordinate.certificate_sums``:
    the dual's linear part sum(y beta) - epsilon sum |beta|, sum beta f (so beta' K beta), the
    losses sum C_i max(0, ``|y - f|`` - epsilon), and the projected gradients' max and min."""
    K, n = predictions.shape
    for c in range(K):
        held = column_fold[c]
        for k in range(n):
            bound = 0.0 if held >= 0 and row_fold[k] == held else cost[c] * weight[k]
            if bound <= 0.0:
                continue
            f, y, b = predictions[c, k], targets[k], betas[c, k]
            sums[c, 0] += y * b - epsilon * abs(b)
            sums[c, 1] += b * f
            sums[c, 2] += bound * max(0.0, abs(y - f) - epsilon)
            pg = _projected(f - y + epsilon, f - y - epsilon, b, bound)
            sums[c, 3] = max(sums[c, 3], pg)
            sums[c, 4] = min(sums[c, 4], pg)
