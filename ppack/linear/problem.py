"""Shared types and objectives of the linear solvers.

X is one block of rows: a scipy CSR matrix or a dense C-contiguous array (n, d), float64;
y (n,) holds labels in {-1, +1}. With a bias, the model is (w, b) and every row is read
as [x, 1]; b is regularised together with w. Under a feature map the rows are phi(x),
one per virtual row (n * n_virtual of them, each with its image's label).

Row weights c (n,) >= 0 (class weight times the row's own, LIBLINEAR's -wi) scale each
row's loss: the loss term is C sum_i c_i loss_i; a virtual row takes its image's weight.
In the dual they give every row its own box [0, C c_i] (hinge) or diagonal term
1/(2 C c_i) (squared hinge); a row of weight 0 has its dual fixed at 0.
"""
import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .features import predict_decision


@dataclass
class LinearSolution:
    """A solver's result on its block.

    w (d,) and b: the model; alpha (n,) the dual variables of the block's rows when the
    solver has a dual (else None); iterations: outer iterations (epochs) run; info:
    solver-specific facts worth reporting (active set size, cache evictions, ...).
    """

    w: np.ndarray
    b: float = 0.0
    alpha: np.ndarray = None
    iterations: int = 0
    info: dict = field(default_factory=dict)


def dual_box(C, loss):
    """(U, D): every dual variable lies in [0, U] and D is added to the diagonal of its
    quadratic term; hinge ("l1") C and 0, squared hinge ("l2") infinity and 1/(2C)."""
    return (C, 0.0) if loss == "l1" else (math.inf, 0.5 / C)


def dual_bounds(C, loss, weights, n_virtual=1):
    """(U, D) per dual, each (n * n_virtual,), for row weights (n,): hinge ("l1") C c_i and 0;
    squared hinge ("l2") infinity and 1/(2 C c_i), or 0 and 0 for a row of weight 0."""
    c = np.repeat(np.asarray(weights, dtype=np.float64), n_virtual)
    if loss == "l1":
        return C * c, np.zeros_like(c)
    positive = c > 0.0
    return (np.where(positive, math.inf, 0.0),
            np.where(positive, 0.5 / (C * np.where(positive, c, 1.0)), 0.0))


def margins(X, y, w, b=0.0):
    """y_i (w . x_i + b) for every row, (n,) float64."""
    return y * (np.asarray(X @ w).ravel() + b)


def loss_sum(X, y, w, b=0.0, p=1.0, feature_map=None, weights=None):
    """sum_i max(0, 1 - y_i (w . x_i + b))^p; with a feature map, the sum over every
    virtual row of max(0, 1 - y_i (w . phi(x_r) + b))^p, r = i * n_virtual + shift.
    weights (n,) or None: each row's term (each of its virtual rows') times its weight."""
    if feature_map is None:
        slack = np.maximum(0.0, 1.0 - margins(X, y, w, b))
    else:
        decisions = predict_decision(X, w, b, feature_map, virtual=True)
        slack = np.maximum(0.0, 1.0 - np.repeat(y, feature_map.n_virtual) * decisions)
    if weights is None:
        return float(np.sum(slack ** p))
    n_virtual = 1 if feature_map is None else feature_map.n_virtual
    return float(np.sum(np.repeat(weights, n_virtual) * slack ** p))


def primal_objective(X, y, w, b, C, p=1.0, feature_map=None, weights=None):
    """1/2 (||w||^2 + b^2) + C times ``loss_sum`` (over every virtual row with a feature map,
    weighted by ``weights`` (n,) when given)."""
    return 0.5 * (float(w @ w) + b * b) + C * loss_sum(X, y, w, b, p, feature_map, weights)


def dual_objective(X, y, alpha, C, loss="l1", bias=True, weights=None):
    """The dual objective D(alpha) to maximise; its maximum equals the primal minimum.

    l1: sum(alpha) - 1/2 ||sum_i alpha_i y_i x~_i||^2 with 0 <= alpha <= C;
    l2: the same minus sum(alpha^2) / (4 C), alpha >= 0. x~ = [x, 1] with a bias.
    With row weights c (n,): 0 <= alpha_i <= C c_i, and l2 subtracts sum(alpha_i^2 / (4 C c_i)).
    """
    w, b = weights_from_dual(X, y, alpha, bias)
    value = float(np.sum(alpha)) - 0.5 * (float(w @ w) + b * b)
    if loss == "l2":
        if weights is None:
            value -= float(alpha @ alpha) / (4.0 * C)
        else:
            value -= 0.5 * float(alpha @ (alpha * dual_bounds(C, loss, weights)[1]))
    return value


def weights_from_dual(X, y, alpha, bias=True):
    """(w, b) = sum_i alpha_i y_i x~_i."""
    coef = alpha * y
    w = np.asarray(X.T @ coef).ravel() if sp.issparse(X) else X.T @ coef
    return w.astype(np.float64), float(np.sum(coef)) if bias else 0.0
