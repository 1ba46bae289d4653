"""Inexact SVM-ALM: an augmented-Lagrangian primal solver for the Lp-loss SVM.

Nie, Huang, Wang, Huang, "New primal SVM solver with linear computational cost for big
data classifications", ICML 2014, Algorithm 2. With e_i = y_i - (w . x_i + b) the slack
is max(0, 1 - y_i (w . x_i + b)) = (y_i e_i)_+, and the problem

    min_{w,b}  1/2 ||w||^2 [+ 1/2 b^2]  +  C sum_i (y_i e_i)_+^p   s.t.  X w + 1 b - y + e = 0

is solved by alternating, once per iteration:

1. e: the exact minimiser of the augmented Lagrangian, row by row (Eq. 10): closed form
   for p = 1 (Eq. 12) and p = 2 (Eq. 13), bisection on Eq. 11 otherwise;
2. (w, b): ONE gradient step with the optimal step size on the regularised least squares
   G(w, b) = mu^-1 (||w||^2 [+ b^2]) + ||X w + 1 b - z||^2, z = y - e - lambda / mu
   (Eq. 14, 16-18);
3. lambda += mu (X w + 1 b - y + e) (Eq. 9), then mu = min(rho mu, mu_max).

The bracketed b^2 terms are this package's shared problem (``regularize_bias=True``, the
same objective as ``liblinear -B 1``); ``regularize_bias=False`` is the paper's problem,
where b is free. The work per iteration is three matrix-vector products (X^T r, X w_g and
X^T v for the stopping test); X w is carried along, not recomputed. Under a COFFIN
feature map the products walk the rows through the map (``features.MappedRows``).

At a fixed point, w = -X^T lambda and lambda_i = -C p y_i (y_i e_i)_+^(p-1), so
alpha = -y * lambda is the dual solution; it is reported as ``info["lambda"]`` and a
warm start's ``alpha0`` is read back the same way.

Row weights c_i (LIBLINEAR's -wi) make the loss term C sum_i c_i (y_i e_i)_+^p: the
e-update's gamma = C / mu becomes C c_i / mu row by row, and the gradient's loss part is
weighted alike; the constraint and the (w, b) step are unchanged.
"""
import math

import numpy as np

from ..errors import PPackError
from ..mpi.collectives import Collectives
from ..registry import LINEAR_PARAMS
from .checks import open_block
from .features import IDENTITY, MappedRows
from .problem import LinearSolution


def solve(X, y, C, *, loss="l1", bias=True, tol=1e-3, max_epochs=1000, seed=0, w0=None,
          b0=0.0, alpha0=None, p=None, mu0=None, rho=1.01, mu_max=1e5,
          regularize_bias=True, bisect_tol=1e-12, feature_map=None, comm=None, weights=None, **unknown):
    """Minimise 1/2 (||w||^2 + b^2) + C sum_i max(0, 1 - y_i (w . x_i + b))^p by inexact ALM.

    With ``comm`` (an MPI communicator) every rank passes its own block of rows and the
    method runs on their union: e and lambda are per row, so they stay local, and each
    iteration sums the blocks' contributions to the gradient and to the step (Eq. 16-18)
    with Allreduce; every rank ends with the same (w, b), that of a single-rank run.

    X: CSR matrix or dense array (n, d); y (n,) in {-1, +1}. ``loss`` "l1" means p = 1 and
    "l2" p = 2; ``p`` in [1, 2] overrides it. Stops when the (sub)gradient norm of the
    objective is at most tol * max(min(n_pos, n_neg), 1) / n times its norm at w = 0,
    b = 0 (LIBLINEAR's primal rule; its default 0.01 stopped 1.4% above the optimum on
    w8a with p = 2, hence 1e-3), or after ``max_epochs`` iterations (each reads X three
    times). For p = 1 the subgradient need not shrink near the optimum and max_epochs is
    the usual stop. ``seed`` is accepted for the common interface; the method is
    deterministic.

    feature_map: a FeatureMap (or its name) whose rows phi(x) replace X's, computed on
    demand (features.py); then d is the map's output size, and under shifts every image
    gives n_virtual rows, so n below counts virtual rows (e and lambda have one entry each).

    Warm start: w0 (d,) and b0 are the starting point (default zeros; the paper starts
    from w = 1); alpha0 (n,) sets lambda = -y * alpha0 (default 0): the dual estimate
    -y * info["lambda"] of an earlier run (>= 0 up to round-off at convergence).
    Options: mu0 (default 0.1 C), rho >= 1 and mu_max >= mu0 give the penalty schedule
    mu_{k+1} = min(rho mu_k, mu_max); regularize_bias=False drops b^2 / 2 (the paper's
    problem); bisect_tol bounds the width of the final bisection bracket of each e_i.
    Bad arguments and unknown options raise PPackError naming them. weights (n,) >= 0 or
    None: each row's loss weight (a virtual row takes its image's).

    Returns LinearSolution(w (d,), b, alpha=None, iterations, info) with info holding
    lambda (n,), mu, p, grad_norm, grad_tol, converged, objective, residual
    (||X w + 1 b - y + e||).
    """
    X, y, C, loss, bias, options, fmap, w0, b, c = open_block(
        "alm", X, y, C, loss, bias,
        dict(tol=tol, max_epochs=max_epochs, seed=seed, mu0=mu0, rho=rho, mu_max=mu_max,
             regularize_bias=regularize_bias, bisect_tol=bisect_tol, **unknown),
        feature_map, w0, b0, weights)
    p = LINEAR_PARAMS["p"].rule.check("p", p)
    p = (1.0 if loss == "l1" else 2.0) if p is None else p
    tol, max_epochs, rho, mu_max = options["tol"], options["max_epochs"], options["rho"], options["mu_max"]
    mu0 = 0.1 * C if options["mu0"] is None else options["mu0"]
    if mu_max < mu0:
        raise PPackError(f"mu_max: must be >= mu0 = {mu0!r}, got {mu_max!r}")
    bisect_tol = options["bisect_tol"]
    if fmap.kind != IDENTITY:  # the identity keeps scipy's and BLAS's products
        X, y = MappedRows(X, fmap), np.repeat(y, fmap.n_virtual)
        c = None if c is None else np.repeat(c, fmap.n_virtual)
    n, d = X.shape
    w = np.zeros(d) if w0 is None else w0
    lam = _multipliers(alpha0, y)
    regb = options["regularize_bias"] and bias
    collectives = None if comm is None else Collectives(comm)

    Xw = _matvec(X, w)
    zero = np.zeros(d)
    g0 = _gradient_norm(X, y, zero, 0.0, np.zeros(n), C, p, bias, regb, collectives, c)
    n_total, n_pos = _sum(collectives, np.array([n, np.count_nonzero(y > 0)], dtype=np.float64))
    grad_tol = tol * max(min(n_pos, n_total - n_pos), 1) / n_total * g0

    mu = mu0
    iterations = 0
    converged = False
    e = None
    for _ in range(max_epochs):
        gnorm = _gradient_norm(X, y, w, b, Xw, C, p, bias, regb, collectives, c)
        if gnorm <= grad_tol:
            converged = True
            break
        t = y - Xw - b - lam / mu
        e = e_update(t, y, C / mu if c is None else (C / mu) * c, p, bisect_tol)
        # residual of the least-squares problem (14): X w + 1 b - z = e - t
        wg, bg, Xwg, step = gradient_step(X, w, b, e - t, mu, bias, regb, collectives)
        w -= step * wg
        b -= step * bg
        Xw -= step * Xwg
        lam += mu * (Xw + b - y + e)
        mu = min(rho * mu, mu_max)
        iterations += 1
    Xw = _matvec(X, w)  # exact, for the report: the loop carried X w by updates
    if not converged:
        gnorm = _gradient_norm(X, y, w, b, Xw, C, p, bias, regb, collectives, c)
        converged = gnorm <= grad_tol
    slack = np.maximum(0.0, 1.0 - y * (Xw + b))
    row_loss = slack ** p if c is None else c * slack ** p
    loss, squared_residual = _sum(collectives, np.array([np.sum(row_loss), 0.0 if e is None else
                                                  float(np.sum((Xw + b - y + e) ** 2))]))
    objective = 0.5 * (float(w @ w) + (b * b if regb else 0.0)) + C * float(loss)
    residual = math.sqrt(squared_residual) if e is not None else float("nan")
    info = {"lambda": lam, "mu": mu, "p": p, "grad_norm": gnorm, "grad_tol": grad_tol,
            "converged": converged, "objective": objective, "residual": residual,
            # p = 1: the subgradient need not shrink, so max_epochs is the usual stop, not a shortfall
            "tolerance_reachable": p > 1.0}
    return LinearSolution(w=w, b=float(b), alpha=None, iterations=iterations, info=info)


def e_update(t, y, gamma, p, bisect_tol=1e-12):
    """argmin_e gamma (y_i e_i)_+^p + 1/2 (e_i - t_i)^2 for every row (Eq. 10), (n,).

    gamma: one number, or one per row (n,) under row weights.

    With u = y_i e_i and s = y_i t_i this is min_u gamma u_+^p + 1/2 (u - s)^2: u = s when
    s <= 0, otherwise the root in (0, s] of p gamma u^(p-1) + u - s (Eq. 11), in closed
    form for p = 1 (Eq. 12) and p = 2 (Eq. 13), by bisection (bracket width at most
    bisect_tol) for other p.
    """
    s = y * t
    u = s.copy()
    pos = s > 0
    if np.ndim(gamma):
        gamma = gamma[pos]
    if p == 1.0:
        u[pos] = np.maximum(s[pos] - gamma, 0.0)
    elif p == 2.0:
        u[pos] = s[pos] / (1.0 + 2.0 * gamma)
    else:
        u[pos] = _bisect_slack(s[pos], gamma, p, bisect_tol)
    return y * u


def _bisect_slack(s, gamma, p, width):
    """Root of p gamma u^(p-1) + u - s on (0, s] for every s > 0, within width / 2."""
    if s.size == 0:
        return s
    # The left side increases in u, is < 0 at u = 0 and > 0 at u = s; every bracket
    # [lo, lo + half] halves in step, so its width is s / 2^k after k steps.
    pg, q = p * gamma, p - 1.0
    steps = max(1, math.ceil(math.log2(float(s.max()) / width)))
    lo = np.zeros_like(s)
    half = s.copy()
    mid = np.empty_like(s)
    f = np.empty_like(s)
    below = np.empty(s.shape, dtype=bool)
    for _ in range(steps):
        half *= 0.5
        np.add(lo, half, out=mid)
        np.log(mid, out=f)  # mid^q as exp(q log mid): about twice as fast as np.power
        f *= q
        np.exp(f, out=f)
        f *= pg
        f += mid
        np.less_equal(f, s, out=below)
        np.copyto(lo, mid, where=below)
    return lo + 0.5 * half


def gradient_step(X, w, b, r, mu, bias=True, regularize_bias=True, collectives=None):
    """One gradient step of G(w, b) = mu^-1 (||w||^2 [+ b^2]) + ||r||^2 (Eq. 14, 16-18).

    r (n,) = X w + 1 b - z is G's residual at (w, b). Returns (w_g (d,), b_g, X w_g (n,),
    s): the half-gradient (Eq. 16) and the step s minimising G(w - s w_g, b - s b_g)
    (Eq. 18 in its simplified form). The caller moves w, b and X w by -s times them.
    With ``collectives`` the rows are spread over their ranks and the sums over rows are reduced.
    """
    sums = _sum(collectives, np.append(_rmatvec(X, r), np.sum(r)))
    wg = sums[:-1] + w / mu
    bg = 0.0
    if bias:
        bg = float(sums[-1]) + (b / mu if regularize_bias else 0.0)
    Xwg = _matvec(X, wg)
    q = Xwg + bg
    wgwg = float(wg @ wg)
    num = wgwg + bg * bg
    den = float(_sum(collectives, np.array([q @ q]))[0]) + (num if regularize_bias else wgwg) / mu
    step = num / den if den > 0.0 else 0.0
    return wg, bg, Xwg, step


def objective_gradient(X, y, w, b, Xw, C, p, bias=True, regularize_bias=True, collectives=None, weights=None):
    """(g_w (d,), g_b): the gradient of the objective at (w, b); Xw (n,) = X w; weights (n,)
    or None: the rows' loss weights.

    For p = 1 the hinge has no derivative at margin 1; this is the subgradient that
    takes it as 0 there (slack derivative -1 where the margin is < 1, else 0).
    """
    margin = y * (Xw + b)
    if p == 1.0:
        v = np.where(margin < 1.0, -C * y, 0.0)
    else:
        v = -C * p * y * np.maximum(0.0, 1.0 - margin) ** (p - 1.0)
    if weights is not None:
        v = v * weights
    sums = _sum(collectives, np.append(_rmatvec(X, v), np.sum(v)))
    gw = w + sums[:-1]
    gb = (float(sums[-1]) + (b if regularize_bias else 0.0)) if bias else 0.0
    return gw, gb


def _gradient_norm(X, y, w, b, Xw, C, p, bias, regb, collectives=None, weights=None):
    gw, gb = objective_gradient(X, y, w, b, Xw, C, p, bias, regb, collectives, weights)
    return math.sqrt(float(gw @ gw) + gb * gb)


def _sum(collectives, values):
    """values (float64 array) summed over the ranks of ``collectives`` (unchanged without them)."""
    values = np.asarray(values, dtype=np.float64)
    if collectives is None or collectives.size == 1:
        return values
    return collectives.sum(values.copy())


def _matvec(X, v):
    """X v, (n,): X a matrix or ``MappedRows``."""
    return X.matvec(v) if isinstance(X, MappedRows) else np.asarray(X @ v).ravel()


def _rmatvec(X, v):
    """X^T v, (d,): X a matrix or ``MappedRows``."""
    return X.rmatvec(v) if isinstance(X, MappedRows) else np.asarray(X.T @ v).ravel()


# ------------------------------------------------------------------ validation


def _multipliers(alpha0, y):
    """lambda (n,) = -y * alpha0 (zeros without alpha0).

    alpha0 is an earlier run's -y * lambda, which leaves the dual box by the last step's
    size until the run converges, so only its shape and finiteness are checked.
    """
    if alpha0 is None:
        return np.zeros(y.shape[0])
    alpha = np.array(alpha0, dtype=np.float64)
    if alpha.shape != y.shape:
        raise PPackError(f"alpha0: must have shape {y.shape} (one multiplier per (virtual) row), got {alpha.shape}")
    if not np.all(np.isfinite(alpha)):
        raise PPackError(f"alpha0: must be finite, got {alpha[~np.isfinite(alpha)][0]!r}")
    return -y * alpha
