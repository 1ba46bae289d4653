"""Dual coordinate descent for L1- and L2-loss linear SVMs (Hsieh et al. 2008, LIBLINEAR).

The dual: min_alpha 1/2 alpha' Q~ alpha - sum(alpha), 0 <= alpha_i <= U, with
Q~_ij = y_i y_j phi~(x_i) . phi~(x_j) + D_ii [i = j], phi~(x) = [phi(x), 1] with a bias;
l1: U = C, D_ii = 0; l2: U = inf, D_ii = 1/(2C); with row weights c_i, U_i = C c_i (l1) and
D_ii = 1/(2 C c_i) (l2), as LIBLINEAR's -wi. Each epoch visits the active rows in a
random order and solves each one-variable problem exactly, keeping (w, b) =
sum_i alpha_i y_i phi~(x_i) up to date. Shrinking follows LIBLINEAR: a row at a bound whose
gradient points outside by more than last epoch's largest projected gradient is dropped;
when the projected-gradient gap of the active rows falls below tol, every row is brought
back and the run stops only if the gap of a full epoch is below tol.

Rows are read through a COFFIN feature map (features.py): with ``shifts`` every image
yields (2s+1)^2 virtual rows, each with its own dual variable.
"""
import time

import numpy as np

from ..errors import PPackError
from ..jit import njit
from ..random_stream import below
from .checks import check_alpha0, open_block
from .features import _add, _dot, _row, _sqnorms, as_rows
from .problem import LinearSolution, dual_bounds, dual_box

MAX_ROWS = 2**32  # random_stream.below draws from 32-bit ranges


@njit(cache=True)
def _accumulate(indptr, indices, values, dense, y, kind, params, n_virtual, alpha, w, wb, bias):
    """(w, wb[0]) += sum_r alpha_r y_r phi~(x_r)."""
    for r in range(alpha.shape[0]):
        if alpha[r] != 0.0:
            i = r // n_virtual
            idx, val = _row(i, indptr, indices, values, dense)
            _add(kind, params, idx, val, w, alpha[r] * y[i], r % n_virtual)
            wb[0] += alpha[r] * y[i] * bias


@njit(cache=True)
def _dcd(indptr, indices, values, dense, y, kind, params, n_virtual, alpha, w, wb, bias, qd, diag, upper,
         tol, max_epochs, rng, shrinking, uppers, diags):
    """LIBLINEAR's dual coordinate descent on alpha, (w, wb[0]) updated in place.

    uppers, diags: each dual's U and D under row weights (n_dual,), or empty: upper and
    diag for every dual. A dual with U = 0 (a row of weight 0) stays 0 and is not counted.

    Returns (epochs, projected-gradient gap of the last epoch, rows active in it, fewest
    rows active in any epoch, converged).
    """
    n_dual = alpha.shape[0]
    weighted = uppers.shape[0] > 0
    index = np.arange(n_dual)
    active = fewest = n_dual
    pg_max_old, pg_min_old = np.inf, -np.inf
    epochs, gap = 0, np.inf
    while epochs < max_epochs:
        for s in range(active - 1):
            j = s + below(rng, active - s)
            index[s], index[j] = index[j], index[s]
        pg_max, pg_min = -np.inf, np.inf
        s = 0
        while s < active:
            r = index[s]
            u, dg = upper, diag
            if weighted:
                u, dg = uppers[r], diags[r]
                if u == 0.0:
                    s += 1
                    continue
            i, shift = (r, 0) if n_virtual == 1 else (r // n_virtual, r % n_virtual)
            idx, val = _row(i, indptr, indices, values, dense)
            a = alpha[r]
            G = y[i] * (_dot(kind, params, idx, val, w, shift) + wb[0] * bias) - 1.0 + dg * a
            pg = 0.0
            if a == 0.0:
                if shrinking and G > pg_max_old:
                    active -= 1
                    index[s], index[active] = index[active], index[s]
                    continue
                if G < 0.0:
                    pg = G
            elif a == u:
                if shrinking and G < pg_min_old:
                    active -= 1
                    index[s], index[active] = index[active], index[s]
                    continue
                if G > 0.0:
                    pg = G
            else:
                pg = G
            pg_max = max(pg_max, pg)
            pg_min = min(pg_min, pg)
            if abs(pg) > 1e-12:
                if qd[r] > 0.0:
                    new = min(max(a - G / qd[r], 0.0), u)
                else:  # phi~(x) = 0 and D_ii = 0: the dual is linear in alpha_r
                    new = u if G < 0.0 else 0.0
                step = (new - a) * y[i]
                alpha[r] = new
                _add(kind, params, idx, val, w, step, shift)
                wb[0] += step * bias
            s += 1
        epochs += 1
        gap = pg_max - pg_min
        fewest = min(fewest, active)
        if gap <= tol:
            if active == n_dual:
                return epochs, gap, active, fewest, True
            active = n_dual
            pg_max_old, pg_min_old = np.inf, -np.inf
            continue
        pg_max_old = pg_max if pg_max > 0.0 else np.inf
        pg_min_old = pg_min if pg_min < 0.0 else -np.inf
    return epochs, gap, active, fewest, False


# ---------------------------------------------------------------- solver


def solve(X, y, C, *, loss="l1", bias=True, tol=0.1, max_epochs=1000, seed=0, w0=None, b0=0.0, alpha0=None,
          feature_map=None, shrinking=True, weights=None, **unknown):
    """Dual coordinate descent on one block; returns a LinearSolution.

    X (n, d) CSR or dense, y (n,) in {-1, +1}; weights (n,) >= 0 or None: each row's loss
    weight (U_i = C weights_i, or D_ii = 1/(2 C weights_i) for l2). tol: stop when the projected-gradient gap
    max PG - min PG of a full epoch is <= tol (LIBLINEAR's eps). alpha0 (n * n_virtual,):
    warm-start duals; w0 (n_out,) / b0: warm-start model, used as given (it may hold other
    blocks' contributions, CoCoA style), else (w, b) = sum_i alpha0_i y_i phi~(x_i).
    feature_map: a FeatureMap (or its name); phi(X) is never built. alpha of the result
    has one entry per (virtual) row; info holds pg_gap (of the last epoch), active_size (rows
    in the last epoch), min_active_size (fewest rows left by shrinking), support_vectors,
    converged (a full epoch ended with gap <= tol) and seconds (solver loop only). Bad
    arguments and unknown options raise PPackError naming them.
    """
    X, y, C, loss, bias, options, fmap, w0, b0, weights = open_block(
        "dcd", X, y, C, loss, bias, dict(tol=tol, max_epochs=max_epochs, seed=seed, shrinking=shrinking, **unknown),
        feature_map, w0, b0, weights)
    n, d = X.shape
    n_out, n_virtual, params = fmap.n_out(d), fmap.n_virtual, fmap.params(d)
    upper, diag = dual_box(C, loss)
    n_dual = n * n_virtual
    if n_dual > MAX_ROWS:
        raise PPackError(f"X: must have at most {MAX_ROWS} (virtual) rows per block, got {n_dual}")
    uppers = diags = np.empty(0)
    if weights is not None:
        uppers, diags = dual_bounds(C, loss, weights, n_virtual)
    alpha = check_alpha0(alpha0, n_dual, upper if weights is None else uppers)
    if alpha is None:
        alpha = np.zeros(n_dual)

    indptr, indices, values, dense = as_rows(X)
    bias_value = 1.0 if bias else 0.0
    wb = np.array([b0])
    if w0 is None:
        w = np.zeros(n_out)
        wb[0] = 0.0
        _accumulate(indptr, indices, values, dense, y, fmap.kind, params, n_virtual, alpha, w, wb, bias_value)
    else:
        w = w0
    qd = np.empty(n_dual)
    if weights is None:
        _sqnorms(indptr, indices, values, dense, fmap.kind, params, n_virtual, bias_value + diag, qd)
    else:
        _sqnorms(indptr, indices, values, dense, fmap.kind, params, n_virtual, bias_value, qd)
        qd += diags
    rng = np.array([options["seed"]], dtype=np.uint64)

    start = time.perf_counter()
    epochs, gap, active, fewest, converged = _dcd(indptr, indices, values, dense, y, fmap.kind, params, n_virtual,
                                                  alpha, w, wb, bias_value, qd, diag, upper, options["tol"],
                                                  options["max_epochs"], rng, options["shrinking"], uppers,
                                                  diags)
    info = {"pg_gap": float(gap), "active_size": int(active), "min_active_size": int(fewest), "n_dual": n_dual,
            "support_vectors": int(np.count_nonzero(alpha)), "converged": bool(converged),
            "seconds": time.perf_counter() - start, "feature_map": fmap.name}
    return LinearSolution(w=w, b=float(wb[0]), alpha=alpha, iterations=int(epochs), info=info)
