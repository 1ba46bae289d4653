"""Slow, obviously correct numpy twins of ppack's numba kernels and of the solver."""
import numpy as np
import scipy.sparse as sp


def dense(X):
    return np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)


def kernel_matrix(A, B, name, gamma=1.0, degree=3, coef0=0.0, offset=0.0):
    """K (len(A), len(B)) straight from the formulas, on dense float64 copies."""
    A, B = dense(A), dense(B)
    if name == "rbf":
        K = np.exp(-gamma * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))
    elif name == "laplacian":
        K = np.exp(-gamma * np.abs(A[:, None, :] - B[None, :, :]).sum(-1))
    elif name == "linear":
        K = A @ B.T
    elif name == "poly":
        K = (gamma * (A @ B.T) + coef0) ** degree
    else:
        raise ValueError(name)
    return K + offset


def spack_reference(X, y, sigma, ids, name, gamma=1.0, degree=3, coef0=0.0, offset=0.0):
    """S-packSVM exactly as Figure 1 states it, with w kept as plain coefficients.

    No scale trick, no packing: w = sum_j alpha_j phi(x_j); every iteration predicts from
    scratch, scales, adds, then projects using ||w||^2 recomputed from the kernel matrix.
    Returns (alpha by row id, list of the predictions each iteration tested).
    """
    K = kernel_matrix(X, X, name, gamma, degree, coef0, offset)
    alpha = np.zeros(len(y))
    tested = []
    for t, i in enumerate(ids, start=1):
        prediction = alpha @ K[:, i]
        tested.append(prediction)
        alpha *= 1.0 - 1.0 / t
        if y[i] * prediction < 1:
            alpha[i] += y[i] / (sigma * t)
        norm = alpha @ K @ alpha
        if norm > 1.0 / sigma:
            alpha *= 1.0 / np.sqrt(sigma * norm)
    return {int(k): alpha[k] for k in np.flatnonzero(alpha)}, np.array(tested)
