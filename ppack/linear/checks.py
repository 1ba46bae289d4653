"""Argument checks every linear solver shares, in one dialect: the registry's rules, PPackError.

A message names the argument, what it must be and what it got ("tol: must be a finite
number > 0, got -1.0"), whether the solver is called directly or through the estimator
and the CLI.
"""
import math
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ..errors import PPackError
from ..registry import LINEAR_PARAMS, check_solver_options
from .features import as_feature_map


class Opening(NamedTuple):
    """A linear solver's arguments for one block, checked (``open_block``), in the order a
    solver unpacks them: X canonical CSR or C-contiguous float64 (n, d); y (n,) in {-1, +1};
    C, loss, bias; the solver's options normalised; fmap the feature map; w0 (n_out,) or None
    and b0; weights (n,) or None."""

    X: object
    y: np.ndarray
    C: float
    loss: str
    bias: bool
    options: dict
    fmap: object
    w0: object
    b0: float
    weights: object



def open_block(solver, X, y, C, loss, bias, options, feature_map=None, w0=None, b0=0.0, weights=None):
    """The checks every linear solver opens with, in one order: the block (``check_block``),
    C, loss and bias, the solver's ``options`` (a dict, against the registry's entry), the
    feature map, the warm start and the row weights. Returns an ``Opening``."""
    X, y = check_block(X, y)
    C, loss, bias = check_common(C, loss, bias)
    options = check_options(solver, **options)
    fmap = as_feature_map(feature_map, X.shape[1])
    w0, b0 = check_start(w0, b0, bias, fmap.n_out(X.shape[1]))
    return Opening(X, y, C, loss, bias, options, fmap, w0, b0, check_weights(weights, X.shape[0]))


def check_options(solver, **values):
    """The solver's options (name=value), each checked against its ``registry.LINEAR_SOLVER_TABLE`` entry;
    returns them normalised. Unknown names are an error listing the known ones."""
    return check_solver_options(solver, values)


def check_common(C, loss, bias):
    """C (> 0), loss ("l1" or "l2") and bias (a bool), as every solver takes them."""
    return (LINEAR_PARAMS["C"].rule.check("C", C), LINEAR_PARAMS["loss"].rule.check("loss", loss),
            LINEAR_PARAMS["bias"].rule.check("bias", bias))


def check_block(X, y):
    """One block of rows: X as canonical CSR (float64, sorted int32 indices) or a
    C-contiguous float64 array (n, d); y (n,) as float64 labels in {-1, +1}."""
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        if not X.has_canonical_format or X.dtype != np.float64 or X.indices.dtype != np.int32:
            X = sp.csr_matrix((X.data.astype(np.float64), X.indices.astype(np.int32), X.indptr.astype(np.int64)),
                              shape=X.shape)
            X.sum_duplicates()
        values = X.data
    elif isinstance(X, np.ndarray):
        X = np.ascontiguousarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise PPackError(f"X: must be 2-dimensional (n_samples, n_features), got shape {X.shape}")
        values = X
    else:
        raise PPackError(f"X: must be a scipy sparse matrix or a 2-dimensional numpy array, got {type(X).__name__}")
    if not np.isfinite(values).all():
        raise PPackError("X: must be finite, found NaN or infinite values")
    y = np.ascontiguousarray(y, dtype=np.float64).ravel()
    if y.shape != (X.shape[0],):
        raise PPackError(f"y: must have shape ({X.shape[0]},), one label per row of X, got {y.shape}")
    bad = (y != 1.0) & (y != -1.0)
    if bad.any():
        r = int(np.argmax(bad))
        raise PPackError(f"y: labels must be -1 or +1, row {r} has {float(y[r])}")
    return X, y


def check_weights(weights, n):
    """Row weights on the loss: None, or a float64 copy of shape (n,), finite and >= 0."""
    if weights is None:
        return None
    weights = np.array(weights, dtype=np.float64).ravel()
    if weights.shape != (n,):
        raise PPackError(f"weights: must have shape ({n},), one weight per row of X, got {weights.shape}")
    if not np.all(np.isfinite(weights)) or weights.min(initial=0.0) < 0.0:
        bad = int(np.argmax(~np.isfinite(weights) | (weights < 0.0)))
        raise PPackError(f"weights: must be finite numbers >= 0, row {bad} has {float(weights[bad])}")
    return weights


def check_start(w0, b0, bias, n_out):
    """A warm start: w0 as a float64 copy of shape (n_out,) (or None) and b0 as a float."""
    if isinstance(b0, (bool, np.bool_)) or not isinstance(b0, (int, float, np.integer, np.floating)) \
            or not math.isfinite(b0):
        raise PPackError(f"b0: must be a finite number, got {b0!r}")
    if not bias and b0 != 0.0:
        raise PPackError(f"b0: must be 0 when bias=False, got {b0!r}")
    if w0 is not None:
        w0 = np.array(w0, dtype=np.float64)
        if w0.shape != (n_out,):
            raise PPackError(f"w0: must have shape ({n_out},), got {w0.shape}")
        if not np.all(np.isfinite(w0)):
            raise PPackError("w0: must be finite, got NaN or infinity")
    return w0, float(b0)


def check_alpha0(alpha0, n_dual, upper):
    """Warm-start duals: a float64 copy of shape (n_dual,) within [0, upper], or None.

    upper: one bound, or one per dual (n_dual,) under row weights. Values past a bound by
    rounding (1e-9 relative, e.g. after averaging) are clipped back.
    """
    if alpha0 is None:
        return None
    alpha = np.array(alpha0, dtype=np.float64).ravel()
    if alpha.shape != (n_dual,):
        raise PPackError(f"alpha0: must have shape ({n_dual},) (one dual per (virtual) row), got {alpha.shape}")
    if np.ndim(upper):
        slack = 1e-9 * np.where(np.isfinite(upper), upper, 1.0)
        if not np.all(np.isfinite(alpha)) or np.any(alpha < -slack) or np.any(alpha > upper + slack):
            raise PPackError(f"alpha0: must lie in [0, C * weight] row by row, got values in "
                             f"[{alpha.min(initial=0.0)}, {alpha.max(initial=0.0)}]")
        return np.clip(alpha, 0.0, upper, out=alpha)
    slack = 1e-9 * (upper if math.isfinite(upper) else 1.0)
    if not np.all(np.isfinite(alpha)) or alpha.min(initial=0.0) < -slack or alpha.max(initial=0.0) > upper + slack:
        raise PPackError(f"alpha0: must lie in [0, {upper}], got values in "
                         f"[{alpha.min(initial=0.0)}, {alpha.max(initial=0.0)}]")
    return np.clip(alpha, 0.0, upper, out=alpha)

