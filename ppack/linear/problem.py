"""Shared types and objectives of the linear solvers.

X is one block of rows: a scipy CSR matrix or a dense C-contiguous array (n, d), float64;
y (n,) holds labels in {-1, +1}. With a bias, the model is (w, b) and every row is read
as [x, 1]; b is regularised together with w. Under a feature map the rows are phi(x),
one per virtual row (n * n_virtual of them, each with its image's label).
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


def margins(X, y, w, b=0.0):
    """y_i (w . x_i + b) for every row, (n,) float64."""
    return y * (np.asarray(X @ w).ravel() + b)


def loss_sum(X, y, w, b=0.0, p=1.0, feature_map=None):
    """sum_i max(0, 1 - y_i (w . x_i + b))^p; with a feature map, the sum over every
    virtual row of max(0, 1 - y_i (w . phi(x_r) + b))^p, r = i * n_virtual + shift."""
    if feature_map is None:
        slack = np.maximum(0.0, 1.0 - margins(X, y, w, b))
    else:
        decisions = predict_decision(X, w, b, feature_map, virtual=True)
        slack = np.maximum(0.0, 1.0 - np.repeat(y, feature_map.n_virtual) * decisions)
    return float(np.sum(slack ** p))


def primal_objective(X, y, w, b, C, p=1.0, feature_map=None):
    """1/2 (||w||^2 + b^2) + C times ``loss_sum`` (over every virtual row with a feature map)."""
    return 0.5 * (float(w @ w) + b * b) + C * loss_sum(X, y, w, b, p, feature_map)


def dual_objective(X, y, alpha, C, loss="l1", bias=True):
    """The dual objective D(alpha) to maximise; its maximum equals the primal minimum.

    l1: sum(alpha) - 1/2 ||sum_i alpha_i y_i x~_i||^2 with 0 <= alpha <= C;
    l2: the same minus sum(alpha^2) / (4 C), alpha >= 0. x~ = [x, 1] with a bias.
    """
    w, b = weights_from_dual(X, y, alpha, bias)
    value = float(np.sum(alpha)) - 0.5 * (float(w @ w) + b * b)
    if loss == "l2":
        value -= float(alpha @ alpha) / (4.0 * C)
    return value


def weights_from_dual(X, y, alpha, bias=True):
    """(w, b) = sum_i alpha_i y_i x~_i."""
    coef = alpha * y
    w = np.asarray(X.T @ coef).ravel() if sp.issparse(X) else X.T @ coef
    return w.astype(np.float64), float(np.sum(coef)) if bias else 0.0
