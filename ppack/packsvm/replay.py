"""The r sequential updates of a pack, replayed identically on every rank.

Figure 11 of the P-packSVM paper, with its known slips fixed:
- ||w||^2 (``norm``) is scaled by (1 - 1/t)^2 when w is scaled by (1 - 1/t);
- the cross term of the norm update uses the prediction of the *scaled* w;
- at t = 1 the factor is 0: w is reset to 0 (then s restarts at 1, never divided by 0);
- after a projection the remaining predictions of the pack are rescaled by the
  projection factor 1/sqrt(sigma * norm), not by (1 - 1/t).
"""
import math

from numba import njit


@njit(cache=True)
def replay_pack(y, pred, pair, t0, s, norm, sigma, coef_out, loss_out):
    """Run iterations t0+1 .. t0+r of Pegasos on w = s * v; return (s, norm, projections).

    y (r,) labels in {-1, +1}; pred (r,) the predictions <w_t0, phi(x_k)> on entry, used
    and updated in place (on exit pred[k] is the prediction iteration t0+k+1 tested);
    pair (r, r) the kernel values K(x_k, x_l); coef_out (r,) receives the coefficient
    added to v at iteration k (0 if none); loss_out (r,) the hinge loss max(0, 1 - y y').
    """
    r = y.shape[0]
    projections = 0
    limit = 1.0 / sigma
    for k in range(r):
        t = t0 + k + 1
        a = 1.0 - 1.0 / t
        yk = y[k]
        pk = pred[k]
        loss = 1.0 - yk * pk
        loss_out[k] = loss if loss > 0.0 else 0.0
        coef_out[k] = 0.0
        s *= a
        norm *= a * a
        for l in range(k + 1, r):
            pred[l] *= a
        if loss > 0.0:
            eta = yk / (sigma * t)
            if s == 0.0:  # t == 1: w is zero, restart the scale
                s = 1.0
            norm += 2.0 * eta * a * pk + eta * eta * pair[k, k]
            coef_out[k] = eta / s
            for l in range(k + 1, r):
                pred[l] += eta * pair[k, l]
            if norm > limit:
                f = 1.0 / math.sqrt(sigma * norm)
                s *= f
                norm = limit
                projections += 1
                for l in range(k + 1, r):
                    pred[l] *= f
    return s, norm, projections
