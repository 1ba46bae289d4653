"""Dual coordinate descent for L1- and L2-loss linear SVMs (Hsieh et al. 2008, LIBLINEAR).

The dual: min_alpha 1/2 alpha' Q~ alpha - sum(alpha), 0 <= alpha_i <= U, with
Q~_ij = y_i y_j phi~(x_i) . phi~(x_j) + D_ii [i = j], phi~(x) = [phi(x), 1] with a bias;
l1: U = C, D_ii = 0; l2: U = inf, D_ii = 1/(2C). Each epoch visits the active rows in a
random order and solves each one-variable problem exactly, keeping (w, b) =
sum_i alpha_i y_i phi~(x_i) up to date. Shrinking follows LIBLINEAR: a row at a bound whose
gradient points outside by more than last epoch's largest projected gradient is dropped;
when the projected-gradient gap of the active rows falls below tol, every row is brought
back and the run stops only if the gap of a full epoch is below tol.

Rows are read through a COFFIN feature map (features.py): with ``shifts`` every image
yields (2s+1)^2 virtual rows, each with its own dual variable.
"""
import math
import time

import numpy as np
import scipy.sparse as sp
from numba import njit

from .features import _GOLDEN, FeatureMap, _add, _dot, _fmix64, _row, _sqnorms, as_rows
from .problem import LinearSolution

LOSSES = ("l1", "l2")
MAX_ROWS = 2**32  # _rand_below draws from 32-bit ranges
_S32 = np.uint64(32)


@njit(cache=True, inline="always")
def _rand_below(rng, k):
    """A pseudo-random integer in [0, k), k <= 2^32, from the splitmix64 stream in rng (uint64 (1,)).

    The top 32 bits times k, shifted down 32 (Lemire's multiply-shift): no division.
    """
    rng[0] += _GOLDEN
    return np.int64(((_fmix64(rng[0]) >> _S32) * np.uint64(k)) >> _S32)


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
         tol, max_epochs, rng, shrinking):
    """LIBLINEAR's dual coordinate descent on alpha, (w, wb[0]) updated in place.

    Returns (epochs, projected-gradient gap of the last epoch, rows active in it, fewest
    rows active in any epoch, converged).
    """
    n_dual = alpha.shape[0]
    index = np.arange(n_dual)
    active = fewest = n_dual
    pg_max_old, pg_min_old = np.inf, -np.inf
    epochs, gap = 0, np.inf
    while epochs < max_epochs:
        for s in range(active - 1):
            j = s + _rand_below(rng, active - s)
            index[s], index[j] = index[j], index[s]
        pg_max, pg_min = -np.inf, np.inf
        s = 0
        while s < active:
            r = index[s]
            i, shift = (r, 0) if n_virtual == 1 else (r // n_virtual, r % n_virtual)
            idx, val = _row(i, indptr, indices, values, dense)
            a = alpha[r]
            G = y[i] * (_dot(kind, params, idx, val, w, shift) + wb[0] * bias) - 1.0 + diag * a
            pg = 0.0
            if a == 0.0:
                if shrinking and G > pg_max_old:
                    active -= 1
                    index[s], index[active] = index[active], index[s]
                    continue
                if G < 0.0:
                    pg = G
            elif a == upper:
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
                    new = min(max(a - G / qd[r], 0.0), upper)
                else:  # phi~(x) = 0 and D_ii = 0: the dual is linear in alpha_r
                    new = upper if G < 0.0 else 0.0
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


# ---------------------------------------------------------------- argument checks


def check_block(X, y):
    """Validate one block: X CSR or dense 2-d (n, d), y (n,) in {-1, +1}; returns y as float64."""
    if not (sp.issparse(X) or isinstance(X, np.ndarray)) or len(X.shape) != 2:
        raise ValueError(f"X: expected a scipy CSR matrix or a 2-d numpy array (n, d), got {type(X).__name__}")
    y = np.ascontiguousarray(y, dtype=np.float64)
    if y.shape != (X.shape[0],):
        raise ValueError(f"y: expected shape ({X.shape[0]},) to match X, got {y.shape}")
    if not np.all((y == 1.0) | (y == -1.0)):
        raise ValueError(f"y: labels must be -1 or +1, got values {np.unique(y)[:5].tolist()}")
    return y


def check_number(name, value, low, high=math.inf, integer=False, low_open=False):
    """value as float (or int); raise ValueError naming the parameter and its allowed range."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if ok and integer:
        ok = float(value).is_integer()
    if ok:
        ok = (value > low if low_open else value >= low) and value <= high and math.isfinite(value)
    if not ok:
        kind = "an integer" if integer else "a finite number"
        bound = f"> {low}" if low_open else f">= {low}"
        bound += f" and <= {high}" if math.isfinite(high) else ""
        raise ValueError(f"{name}: must be {kind} {bound}, got {value!r}")
    return int(value) if integer else float(value)


def check_common(C, loss, bias, seed, feature_map, d):
    """Validate the arguments every solver shares; returns (C, seed, FeatureMap)."""
    C = check_number("C", C, 0.0, low_open=True)
    if loss not in LOSSES:
        raise ValueError(f"loss: expected one of {', '.join(LOSSES)}, got {loss!r}")
    if not isinstance(bias, (bool, np.bool_)):
        raise ValueError(f"bias: expected True or False, got {bias!r}")
    seed = check_number("seed", seed, 0, 2**63 - 1, integer=True)
    if feature_map is None:
        feature_map = FeatureMap("identity")
    elif isinstance(feature_map, str):
        feature_map = FeatureMap.parse(feature_map)
    elif not isinstance(feature_map, FeatureMap):
        raise ValueError(f"feature_map: expected a FeatureMap, a map name or None, got {feature_map!r}")
    feature_map.params(d)  # raises when the map does not fit d features
    return C, seed, feature_map


def check_start(w0, b0, bias, n_out):
    """w0 as a float64 copy of shape (n_out,) (or None) and b0 as float."""
    b0 = check_number("b0", b0, -math.inf)
    if not bias and b0 != 0.0:
        raise ValueError(f"b0: must be 0 when bias=False, got {b0}")
    if w0 is not None:
        w0 = np.array(w0, dtype=np.float64)
        if w0.shape != (n_out,):
            raise ValueError(f"w0: expected shape ({n_out},), got {w0.shape}")
        if not np.all(np.isfinite(w0)):
            raise ValueError("w0: must be finite, got NaN or infinity")
    return w0, b0


# ---------------------------------------------------------------- solver


def solve(X, y, C, *, loss="l1", bias=True, tol=0.1, max_epochs=1000, seed=0, w0=None, b0=0.0, alpha0=None,
          feature_map=None, shrinking=True):
    """Dual coordinate descent on one block; returns a LinearSolution.

    X (n, d) CSR or dense, y (n,) in {-1, +1}. tol: stop when the projected-gradient gap
    max PG - min PG of a full epoch is <= tol (LIBLINEAR's eps). alpha0 (n * n_virtual,):
    warm-start duals; w0 (n_out,) / b0: warm-start model, used as given (it may hold other
    blocks' contributions, CoCoA style), else (w, b) = sum_i alpha0_i y_i phi~(x_i).
    feature_map: a FeatureMap (or its name); phi(X) is never built. alpha of the result
    has one entry per (virtual) row; info holds pg_gap (of the last epoch), active_size (rows
    in the last epoch), min_active_size (fewest rows left by shrinking), support_vectors,
    converged (a full epoch ended with gap <= tol) and seconds (solver loop only).
    """
    y = check_block(X, y)
    n, d = X.shape
    C, seed, fmap = check_common(C, loss, bias, seed, feature_map, d)
    tol = check_number("tol", tol, 0.0, low_open=True)
    max_epochs = check_number("max_epochs", max_epochs, 1, integer=True)
    if not isinstance(shrinking, (bool, np.bool_)):
        raise ValueError(f"shrinking: expected True or False, got {shrinking!r}")
    n_out, n_virtual, params = fmap.n_out(d), fmap.n_virtual, fmap.params(d)
    w0, b0 = check_start(w0, b0, bias, n_out)
    upper, diag = (C, 0.0) if loss == "l1" else (math.inf, 0.5 / C)
    n_dual = n * n_virtual
    if n_dual > MAX_ROWS:
        raise ValueError(f"X: at most {MAX_ROWS} (virtual) rows per block, got {n_dual}")
    if alpha0 is None:
        alpha = np.zeros(n_dual)
    else:
        alpha = np.array(alpha0, dtype=np.float64)
        if alpha.shape != (n_dual,):
            raise ValueError(f"alpha0: expected shape ({n_dual},) (rows x virtual rows), got {alpha.shape}")
        slack = 1e-9 * C
        if not np.all(np.isfinite(alpha)) or alpha.min(initial=0.0) < -slack or alpha.max(initial=0.0) > upper + slack:
            raise ValueError(f"alpha0: values must lie in [0, {upper}], got range "
                             f"[{alpha.min(initial=0.0)}, {alpha.max(initial=0.0)}]")
        np.clip(alpha, 0.0, upper, out=alpha)  # rounding from averaging may step past a bound

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
    _sqnorms(indptr, indices, values, dense, fmap.kind, params, n_virtual, bias_value + diag, qd)
    rng = np.array([seed], dtype=np.uint64)

    start = time.perf_counter()
    epochs, gap, active, fewest, converged = _dcd(indptr, indices, values, dense, y, fmap.kind, params, n_virtual,
                                                  alpha, w, wb, bias_value, qd, diag, upper, tol, max_epochs, rng,
                                                  bool(shrinking))
    info = {"pg_gap": float(gap), "active_size": int(active), "min_active_size": int(fewest), "n_dual": n_dual,
            "support_vectors": int(np.count_nonzero(alpha)), "converged": bool(converged),
            "seconds": time.perf_counter() - start, "feature_map": fmap.name}
    return LinearSolution(w=w, b=float(wb[0]), alpha=alpha, iterations=int(epochs), info=info)
