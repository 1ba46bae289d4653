"""Slow, obviously correct numpy twins of ppack's numba kernels, of the solver and of the LIBSVM reader."""
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
    elif name == "sigmoid":
        K = np.tanh(gamma * (A @ B.T) + coef0)
    else:
        raise ValueError(name)
    return K + offset


def kernel_sums(A, B, coef, name, gamma=1.0, degree=3, coef0=0.0, offset=0.0):
    """sum_j coef[j, c] (K(A_j, B_k) + offset): (K, len(B)) for coef (len(A), K), (len(B),) for coef (len(A),)."""
    return np.asarray(coef, dtype=np.float64).T @ kernel_matrix(A, B, name, gamma, degree, coef0, offset)


def spack_reference(X, y, sigma, ids, name, gamma=1.0, degree=3, coef0=0.0, offset=0.0, weights=None,
                    average=False, step=1.0, project=True):
    """S-packSVM exactly as Figure 1 states it, with w kept as plain coefficients.

    No scale trick, no packing: w = sum_j alpha_j phi(x_j); every iteration predicts from
    scratch, scales, adds, then projects using ||w||^2 recomputed from the kernel matrix.
    ``weights`` (n,): row weights on the hinge loss: the step is weights[i] times larger and
    the ball's squared radius is max(weights) / sigma. ``average``: return the averaged
    iterate sum_t a_t alpha_t / sum_t a_t, a_t = t (t + 1) (t + 2), instead of the last.
    ``step``: c of the step c / (sigma (t + c - 1)) (1: Figure 1's 1 / (sigma t)).
    ``project``: False leaves the projection out (kernels that are not positive semi-definite).
    Returns (alpha by row id, list of the predictions each iteration tested).
    """
    weights = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)
    radius2 = weights.max() / sigma
    K = kernel_matrix(X, X, name, gamma, degree, coef0, offset)
    alpha = np.zeros(len(y))
    averaged, total = np.zeros(len(y)), 0.0
    tested = []
    for t, i in enumerate(ids, start=1):
        prediction = alpha @ K[:, i]
        tested.append(prediction)
        alpha *= 1.0 - step / (t + step - 1.0)
        if y[i] * prediction < 1:
            alpha[i] += step * weights[i] * y[i] / (sigma * (t + step - 1.0))
        norm = alpha @ K @ alpha
        if project and norm > radius2:
            alpha *= np.sqrt(radius2 / norm)
        averaged += t * (t + 1.0) * (t + 2.0) * alpha
        total += t * (t + 1.0) * (t + 2.0)
    if average:
        alpha = averaged / total
    return {int(k): alpha[k] for k in np.flatnonzero(alpha)}, np.array(tested)


def offset_reference(X, y, sigma, ids, svm_type, name="rbf", gamma=1.0, epsilon=0.1, rho=0.0, rho_step=0.0,
                     radius2=np.inf, weights=None, average=False, step=1.0, rho_box=(-np.inf, np.inf)):
    """epsilon-SVR or one-class SGD with w kept as plain coefficients, as ``spack_reference``.

    Every iteration predicts p = <w, phi(x_i)> from scratch and tests the loss on f = p - rho:
    epsilon_svr steps when |y_i - f| > epsilon, by sign(y_i - f) weight_i / (sigma t) on w and
    rho_step / t times -sign(y_i - f) weight_i on rho; one_class steps when p < rho, by
    weight_i / (sigma t) on w, and moves rho by -rho_step / t (weight_i 1[p < rho] - sigma)
    (t: t + c - 1 with the step c); rho is then clipped to ``rho_box`` (low, high). Then w is
    projected onto the ball of squared radius ``radius2`` by ||w||^2 recomputed from the
    kernel matrix. Returns (alpha by row id, rho), the averaged ones (a_t = t (t + 1) (t + 2))
    with ``average``.
    """
    n = X.shape[0]
    weights = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    K = kernel_matrix(X, X, name, gamma)
    alpha = np.zeros(n)
    averaged, rho_sum, total = np.zeros(n), 0.0, 0.0
    for t, i in enumerate(ids, start=1):
        prediction = alpha @ K[:, i]
        eta = step / (sigma * (t + step - 1.0))
        kappa = rho_step * step / (t + step - 1.0)
        alpha *= 1.0 - step / (t + step - 1.0)
        if svm_type == "epsilon_svr":
            residual = y[i] - (prediction - rho)
            if abs(residual) > epsilon:
                sign = 1.0 if residual > 0 else -1.0
                alpha[i] += eta * sign * weights[i]
                rho -= kappa * sign * weights[i]
        else:
            stepped = prediction < rho
            if stepped:
                alpha[i] += eta * weights[i]
            rho -= kappa * ((weights[i] if stepped else 0.0) - sigma)
        rho = min(max(rho, rho_box[0]), rho_box[1])
        norm = alpha @ K @ alpha
        if norm > radius2:
            alpha *= np.sqrt(radius2 / norm)
        a = t * (t + 1.0) * (t + 2.0)
        averaged += a * alpha
        rho_sum += a * rho
        total += a
    if average:
        alpha, rho = averaged / total, rho_sum / total
    return {int(k): alpha[k] for k in np.flatnonzero(alpha)}, rho


def reference_parse(raw, n_features=None):
    """Slow, obviously-correct parse of LIBSVM bytes: (indptr, indices, values, y, info)."""
    from ppack.data.libsvm import LibsvmInfo

    indptr, indices, values, labels = [0], [], [], []
    max_idx = max_nnz = 0
    for line in raw.split(b"\n"):
        tokens = line.split(b"#", 1)[0].split()
        if not tokens:
            continue
        labels.append(float(tokens[0]))
        nnz = 0
        for tok in tokens[1:]:
            key, val = tok.split(b":", 1)
            if key == b"qid":
                continue
            indices.append(int(key) - 1)
            values.append(float(val))
            max_idx = max(max_idx, int(key))
            nnz += 1
        max_nnz = max(max_nnz, nnz)
        indptr.append(len(indices))
    info = LibsvmInfo(len(labels), n_features or max_idx, max_nnz)
    return np.array(indptr), np.array(indices), np.array(values), np.array(labels), info


# ---- linear solvers: dcd, pegasos, alm, feature maps
# Twins of ppack.linear's numba loops (features._dots/_adds, dcd._dcd, pegasos._pegasos and
# _steps_in_order) and of ALM's Algorithm 2, on explicit dense rows, and the small
# problems they are checked on.

MASK64 = (1 << 64) - 1


def tiny_problem(n=40, d=7, seed=0, density=0.5):
    """A small sparse problem with a nonlinear (product) label rule: X (n, d) CSR, y (n,)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < density)
    X[:, 0] = rng.normal(size=n)
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * X[:, 2] + 0.2 * rng.normal(size=n) > 0, 1.0, -1.0)
    return sp.csr_matrix(X), y


def tiny_images(n=5, side=4, seed=1):
    """n sparse side x side images (n, side, side) and alternating labels (n,)."""
    rng = np.random.default_rng(seed)
    images = rng.normal(size=(n, side, side)) * (rng.random((n, side, side)) < 0.6)
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    return images, y


def tiny_image_rows(n=30, side=4, seed=1):
    """``tiny_images`` as CSR rows (n, side * side), pixels row-major."""
    images, y = tiny_images(n, side, seed)
    return sp.csr_matrix(images.reshape(n, side * side)), y


def product_problem(n=100, d=6, seed=0):
    """A sparse problem with a product label rule, which poly2 features can separate."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.6)
    X[:, 0] = rng.normal(size=n)
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * X[:, 2] + 0.2 * rng.normal(size=n) > 0, 1.0, -1.0)
    return sp.csr_matrix(X), y


def alm_problem(n=300, d=8, seed=0, sparse=False):
    """A noisy, nearly linearly separable problem: X (n, d), y (n,) in {-1, +1}."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if sparse:
        X[rng.random((n, d)) > 0.5] = 0.0
    y = np.where(X @ rng.normal(size=d) + 0.3 + 0.8 * rng.normal(size=n) > 0, 1.0, -1.0)
    return (sp.csr_matrix(X) if sparse else X), y


def averaging_problem(n=400, d=15, seed=0):
    """A sparse linear problem with label noise: X (n, d) CSR, y (n,)."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.4, random_state=seed, format="csr")
    w = rng.normal(size=d)
    y = np.where(X @ w + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def fmix64_twin(z):
    """The splitmix64 finaliser on a Python int in [0, 2^64)."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def hash_key_twin(key, seed):
    """random_stream.hash_key in Python integers: the 64-bit hash of a feature key."""
    return fmix64_twin((key + (seed + 1) * 0x9E3779B97F4A7C15) & MASK64)


class SplitMix64:
    """The splitmix64 stream the solvers shuffle and sample with, in Python integers."""

    def __init__(self, seed):
        self.state = seed

    def below(self, k):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        z ^= z >> 31
        return ((z >> 32) * k) >> 32


def shifted_image(image, dr, dc):
    """image moved by (dr, dc) pixels, zero-filled: out[r + dr, c + dc] = image[r, c]."""
    h, w = image.shape
    out = np.zeros_like(image)
    out[max(dr, 0):h + min(dr, 0), max(dc, 0):w + min(dc, 0)] = image[max(-dr, 0):h - max(dr, 0),
                                                                      max(-dc, 0):w - max(dc, 0)]
    return out


def explicit_shifts(images, s):
    """The (2s+1)^2 virtual rows of every image (n, h, w) in the documented shift-id order, (n V, h w)."""
    side = 2 * s + 1
    V = side * side
    rows = []
    for image in images:
        for k in range(V):
            dr, dc = divmod((k + V // 2) % V, side)
            rows.append(shifted_image(image, dr - s, dc - s).ravel())
    return np.array(rows)


def poly_features(X, degree):
    """Phi_p(X) of the COFFIN paper (Sonnenburg and Franc, Sec. 2.1.2) for p = ``degree``: one
    column per multi-index u with |u| = p, sqrt(p! / prod_i u_i!) x^u, so that
    Phi_p(x) . Phi_p(z) = (x . z)^p. Returns (columns (n, count), the multi-indices as tuples of
    the features they multiply, j <= k, ordered by k then j)."""
    import itertools
    from math import factorial, prod

    X = dense(X)
    d = X.shape[1]
    indices = sorted(itertools.combinations_with_replacement(range(d), degree), key=lambda u: u[::-1])
    columns = np.zeros((X.shape[0], len(indices)))
    for col, u in enumerate(indices):
        counts = [u.count(i) for i in set(u)]
        columns[:, col] = np.sqrt(factorial(degree) / prod(factorial(c) for c in counts)) * np.prod(X[:, list(u)], 1)
    return columns, indices


def explicit_features(X, spec):
    """phi(X), (n * n_virtual, n_out) dense, for a feature map spec ("identity", "poly2",
    "hash:B[:SEED]", "shifts:S[:HxW]"), written from the COFFIN paper's definitions without
    the package: poly2 is (Phi_1(x), Phi_2(x)) (``poly_features``), so phi(x) . phi(z) =
    x.z + (x.z)^2; hash:B folds those features into 2^B buckets, bucket b = the sum of the
    features whose key hashes to b (Sec. 2.1.1), each with the sign of its hash's top bit;
    shifts:S gives each image (2S+1)^2 virtual examples (Sec. 2.2), the image moved by -S..S
    pixels each way. What the paper leaves open is features.py's documented layout: the
    multi-index (j, k) at d + k(k+1)/2 + j, key 2j for feature j and 2(k(k+1)/2 + j) + 1 for
    (j, k), the splitmix64 key hash (``hash_key_twin``) and the shift-id order."""
    import math

    X = dense(X)
    n, d = X.shape
    name, *args = spec.split(":")
    if name == "identity":
        return X.copy()
    if name == "shifts":
        height, width = map(int, args[1].split("x")) if len(args) > 1 else (math.isqrt(d), math.isqrt(d))
        assert height * width == d, spec
        return explicit_shifts(X.reshape(n, height, width), int(args[0]))
    quadratic, pairs = poly_features(X, 2)
    poly = np.hstack([X, quadratic])
    if name == "poly2":
        return poly
    assert name == "hash", spec
    bits, seed = int(args[0]), int(args[1]) if len(args) > 1 else 0
    keys = [2 * j for j in range(d)] + [2 * (k * (k + 1) // 2 + j) + 1 for j, k in pairs]
    hashed = np.zeros((n, 1 << bits))
    for col, key in enumerate(keys):
        h = hash_key_twin(key, seed)
        hashed[:, h & ((1 << bits) - 1)] += (1.0 if h >> 63 == 0 else -1.0) * poly[:, col]
    return hashed


def dots_twin(X, spec, w):
    """features._dots: w . phi(x_r) for every (virtual) row, (n * n_virtual,)."""
    return explicit_features(X, spec) @ w


def adds_twin(X, spec, coef):
    """features._adds: sum_r coef[r] phi(x_r), (n_out,)."""
    return explicit_features(X, spec).T @ coef


def with_bias_column(Phi, bias=True):
    """Dense [phi(X), 1] (or phi(X) without a bias)."""
    Phi = dense(Phi)
    return np.hstack([Phi, np.ones((Phi.shape[0], 1))]) if bias else Phi


def dcd_twin(Z, y, C, loss, tol, max_epochs, seed, weights=None):
    """LIBLINEAR's dual coordinate descent with shrinking, on explicit dense rows Z (n, D).

    weights (n,) or None: row weights, U_i = C weights_i (l1) or D_ii = 1/(2 C weights_i)
    (l2); a row of weight 0 keeps alpha_i = 0 and is passed over.
    Returns (alpha (n,), w~ (D,), epochs).
    """
    n = Z.shape[0]
    if weights is None:
        upper, diag = (C, 0.0) if loss == "l1" else (np.inf, 0.5 / C)
        uppers, diags = np.full(n, upper), np.full(n, diag)
    else:
        c = np.asarray(weights, dtype=np.float64)
        if loss == "l1":
            uppers, diags = C * c, np.zeros(n)
        else:
            uppers = np.where(c > 0, np.inf, 0.0)
            diags = np.array([0.5 / (C * ci) if ci > 0 else 0.0 for ci in c])
    alpha, w = np.zeros(n), np.zeros(Z.shape[1])
    qd = np.einsum("ij,ij->i", Z, Z) + diags
    index = list(range(n))
    active = n
    pg_max_old, pg_min_old = np.inf, -np.inf
    rng = SplitMix64(seed)
    epochs = 0
    while epochs < max_epochs:
        for s in range(active - 1):
            j = s + rng.below(active - s)
            index[s], index[j] = index[j], index[s]
        pg_max, pg_min = -np.inf, np.inf
        s = 0
        while s < active:
            i = index[s]
            upper, diag = uppers[i], diags[i]
            if upper == 0.0:
                s += 1
                continue
            G = y[i] * float(Z[i] @ w) - 1.0 + diag * alpha[i]
            pg = G
            if alpha[i] == 0.0:
                if G > pg_max_old:
                    active -= 1
                    index[s], index[active] = index[active], index[s]
                    continue
                pg = min(G, 0.0)
            elif alpha[i] == upper:
                if G < pg_min_old:
                    active -= 1
                    index[s], index[active] = index[active], index[s]
                    continue
                pg = max(G, 0.0)
            pg_max, pg_min = max(pg_max, pg), min(pg_min, pg)
            if abs(pg) > 1e-12:
                new = min(max(alpha[i] - G / qd[i], 0.0), upper)
                w += (new - alpha[i]) * y[i] * Z[i]
                alpha[i] = new
            s += 1
        epochs += 1
        if pg_max - pg_min <= tol:
            if active == n:
                break
            active = n
            pg_max_old, pg_min_old = np.inf, -np.inf
            continue
        pg_max_old = pg_max if pg_max > 0 else np.inf
        pg_min_old = pg_min if pg_min < 0 else -np.inf
    return alpha, w, epochs


def pegasos_twin(Z, y, C, epochs, seed, average=False, ids=None, t0=0, w0=None, weights=None):
    """Pegasos exactly as Figure 1 states it, on explicit dense rows Z (n, D): w~ (D,).

    ||w~|| is recomputed at every step; step t draws the solvers' splitmix64 stream (or
    takes ``ids``, epochs * n row ids); the steps are numbered t0 + 1, ...; with
    ``average`` the result is the plain mean of the iterates of the last half of the steps.
    ``weights`` (n,): row weights on the hinge loss: row r's step is weights[r] times
    larger and the ball's squared radius is max(weights) / sigma.
    """
    n = Z.shape[0]
    steps = epochs * n
    sigma = 1.0 / (n * C)
    c = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    radius2 = (1.0 if weights is None else c.max()) / sigma
    w = np.zeros(Z.shape[1]) if w0 is None else np.array(w0, dtype=np.float64)
    total, count = np.zeros(Z.shape[1]), 0
    if ids is None:
        rng = SplitMix64(seed)
        ids = [rng.below(n) for _ in range(steps)]
    for t, r in enumerate(ids, start=t0 + 1):
        margin = y[r] * float(Z[r] @ w)
        w *= 1.0 - 1.0 / t
        if margin < 1.0:
            w += c[r] * y[r] / (sigma * t) * Z[r]
        norm = float(w @ w)
        if norm > radius2:
            w = w / np.sqrt(sigma * norm) if weights is None else w * np.sqrt(radius2 / norm)
        if average and t > t0 + steps // 2:
            total += w
            count += 1
    return total / count if average else w


def alm_row_objective(e, t, y, gamma, p):
    """F_i(e_i) of ALM's Eq. 10, elementwise: gamma (y e)_+^p + (e - t)^2 / 2."""
    return gamma * np.maximum(y * e, 0.0) ** p + 0.5 * (e - t) ** 2


def alm_algorithm2_twin(X, y, C, p, iterations, mu0, rho, mu_max, regb=True):
    """ALM's Algorithm 2 written out literally on dense X (n, d): (w (d,), b, lambda (n,), mu).

    X w recomputed every time, e by a bounded scalar minimiser per row, the step by the
    first (unsimplified) form of Eq. 18.
    """
    import scipy.optimize as so

    n, d = X.shape
    w, b, lam, mu = np.zeros(d), 0.0, np.zeros(n), mu0
    for _ in range(iterations):
        t = y - X @ w - b - lam / mu
        e = np.empty(n)
        for i in range(n):
            lo, hi = min(t[i], 0.0) - 1.0, max(t[i], 0.0) + 1.0
            e[i] = so.minimize_scalar(lambda v: alm_row_objective(v, t[i], y[i], C / mu, p), bounds=(lo, hi),
                                      method="bounded", options={"xatol": 1e-13}).x
        z = y - e - lam / mu
        res = X @ w + b - z
        wg = X.T @ res + w / mu
        bg = res.sum() + (b / mu if regb else 0.0)
        q = X @ wg + bg
        reg_wg = wg @ w + (bg * b if regb else 0.0)
        reg_gg = wg @ wg + (bg * bg if regb else 0.0)
        s = (q @ res + reg_wg / mu) / (q @ q + reg_gg / mu)
        w, b = w - s * wg, b - s * bg
        lam = lam + mu * (X @ w + b - y + e)
        mu = min(rho * mu, mu_max)
    return w, b, lam, mu


def alm_reference_optimum(X, y, C, p, bias=True, regb=True, weights=None):
    """The minimum of the Lp-loss objective on dense X (n, d), independently of ALM:
    L-BFGS for p > 1, the slack QP (SLSQP) for p = 1. ``weights`` (n,): row weights on the
    loss (C sum_i weights_i loss_i)."""
    import scipy.optimize as so

    n, d = X.shape
    cw = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    nb = 1 if bias else 0

    def split(v):
        return v[:d], (v[d] if bias else 0.0)

    def reg(v):
        w, b = split(v)
        return 0.5 * (w @ w + (b * b if regb else 0.0))

    if p > 1:
        def f(v):
            w, b = split(v)
            slack = np.maximum(0.0, 1.0 - y * (X @ w + b))
            g = -C * p * cw * y * slack ** (p - 1)
            gw = w + X.T @ g
            grad = np.concatenate([gw, [g.sum() + (b if regb else 0.0)]]) if bias else gw
            return reg(v) + C * np.sum(cw * slack ** p), grad

        r = so.minimize(f, np.zeros(d + nb), jac=True, method="L-BFGS-B",
                        options={"gtol": 1e-11, "ftol": 1e-15, "maxiter": 20000})
        return r.fun
    A = np.hstack([y[:, None] * X, y[:, None] * np.ones((n, nb)), np.eye(n)])  # y(Xw+b) + xi >= 1
    cons = [{"type": "ineq", "fun": lambda v: A @ v - 1.0, "jac": lambda v: A}]
    bounds = [(None, None)] * (d + nb) + [(0.0, None)] * n

    def fun(v):
        return reg(v[:d + nb]) + C * cw @ v[d + nb:]

    def jac(v):
        return np.concatenate([v[:d], [v[d] if regb else 0.0] if bias else [], C * cw])

    r = so.minimize(fun, np.concatenate([np.zeros(d + nb), np.ones(n)]), jac=jac, bounds=bounds,
                    constraints=cons, method="SLSQP", options={"ftol": 1e-13, "maxiter": 1000})
    return r.fun


# ---- linear solvers: llsvm and stream
# Twins on explicit rows: under a feature map a test passes phi(x) (explicit_features), one
# row per (virtual) row, so the maps' on-demand DOT, ADD and norms are checked as well.


def llsvm_sweep(Z, labels, rows, order, alpha, w, tau, diag, upper):
    """One pass of LLSVM's coordinate step (Algorithm 1) over the block rows ``order``.

    Block row k is the dense row Z[k] with label labels[k] and dual alpha[rows[k]]; w
    (n_out + 1,) ends with the weight of the constant feature tau. alpha and w are
    updated in place; returns (max, min) of the projected gradients.
    """
    pgs = []
    for k in order:
        x, yk, i = Z[k], labels[k], rows[k]
        g = 1.0 - yk * (w[:-1] @ x + w[-1] * tau) - diag * alpha[i]
        pgs.append(max(g, 0.0) if alpha[i] <= 0 else min(g, 0.0) if alpha[i] >= upper else g)
        q = x @ x + tau * tau + diag
        new = min(upper, max(0.0, alpha[i] + g / q)) if q > 0 else upper
        w[:-1] += (new - alpha[i]) * yk * x
        w[-1] += (new - alpha[i]) * yk * tau
        alpha[i] = new
    return max(pgs), min(pgs)


_M64 = (1 << 64) - 1


def splitmix_below(state, k):
    """splitmix64 on a Python int (state: a one-item list, advanced), reduced mod k."""
    z = (state[0] + 0x9E3779B97F4A7C15) & _M64
    state[0] = z
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return (z ^ (z >> 31)) % k


class StreamCacheTwin:
    """StreamSVM's cache, reader (Algorithm 1) and trainer (Algorithm 2) on Python lists.

    A slot holds (virtual row id, phi(x) as a dense row, y, stored entries); the bytes are
    counted as the solver counts them: entry_bytes per stored entry plus meta_bytes a slot.
    """

    def __init__(self, omega, entry_bytes, meta_bytes, seed_reader, seed_trainer):
        self.omega, self.entry_bytes, self.meta_bytes = omega, entry_bytes, meta_bytes
        self.act = []  # active slots, in the order the solver keeps them
        self.free = list(range(omega - 1, -1, -1))
        self.rows = {}
        self.rng_reader, self.rng_trainer = [seed_reader], [seed_trainer]
        self.counts = dict(read=0, skipped=0, evict_reader=0, evict_trainer=0, updates=0,
                           peak_rows=0, peak_bytes=0)
        self.eps, self.eps_new, self.m_plus, self.m_minus, self.t = 9.0, 0.0, -np.inf, np.inf, 0

    def bytes(self):
        return sum(nnz * self.entry_bytes + self.meta_bytes for _, _, _, nnz in self.rows.values())

    def evict(self, s):
        p = self.act.index(s)
        self.act[p] = self.act[-1]
        self.act.pop()
        self.free.append(s)
        del self.rows[s]

    def cached(self):
        return {row for row, _, _, _ in self.rows.values()}

    def insert(self, Phi, nnz, yc, first, n_virtual=1):
        """Rows first, first + 1, ... of a chunk: Phi (len(yc) * n_virtual, n_out) holds their
        virtual rows in order, nnz (len(yc),) the entries each row stores in a slot."""
        Phi = dense(Phi)
        for r in range(len(yc)):
            for shift in range(n_virtual):
                i = (first + r) * n_virtual + shift
                self.counts["read"] += 1
                if i in self.cached():
                    self.counts["skipped"] += 1
                    continue
                if len(self.act) == self.omega:
                    self.evict(self.act[splitmix_below(self.rng_reader, self.omega)])
                    self.counts["evict_reader"] += 1
                s = self.free.pop()
                self.rows[s] = (i, Phi[r * n_virtual + shift].copy(), yc[r], nnz[r])
                self.act.append(s)
                self.counts["peak_rows"] = max(self.counts["peak_rows"], len(self.act))
                self.counts["peak_bytes"] = max(self.counts["peak_bytes"], self.bytes())

    def train(self, alpha, w, bias, upper, diag, n_outer, n_steps):
        """Up to n_steps trainer steps; alpha (one per virtual row) and w (n_out + 1,) in place."""
        d = len(w) - 1
        for _ in range(n_steps):
            if not self.act:
                break
            if len(self.act) > 0.9 * self.omega:
                self.eps *= 0.9
            s = self.act[splitmix_below(self.rng_trainer, len(self.act))]
            i, x, yi, _ = self.rows[s]
            a = alpha[i]
            g = yi * (x @ w[:d] + bias * w[d]) - 1.0 + diag * a
            if (a == 0 and g > self.eps) or (a == upper and g < -self.eps):
                self.evict(s)
                self.counts["evict_trainer"] += 1
                pg = 0.0
            else:
                pg = min(g, 0.0) if a == 0 else max(g, 0.0) if a == upper else g
                self.eps_new = max(self.eps_new, abs(pg))
                if pg != 0:
                    qbar = x @ x + bias * bias + diag
                    if qbar > 0:
                        new = min(max(a - g / qbar, 0.0), upper)
                    else:
                        new = upper if g < 0 else 0.0
                    alpha[i] = new
                    w[:d] += (new - a) * yi * x
                    w[d] += (new - a) * yi * bias
            self.m_plus, self.m_minus = max(self.m_plus, pg), min(self.m_minus, pg)
            self.counts["updates"] += 1
            self.t += 1
            if self.t == n_outer:
                self.eps, self.eps_new, self.t = self.eps_new, 0.0, 0


def primal_twin(Phi, y, w, b, C, p=1.0, weights=None):
    """The linear SVM primal on explicit rows: (||w||^2 + b^2) / 2 + C sum_i c_i max(0, 1 - y_i (phi_i . w + b))^p."""
    c = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=np.float64)
    slack = np.maximum(0.0, 1.0 - y * (dense(Phi) @ w + b))
    return 0.5 * (w @ w + b * b) + C * np.sum(c * slack ** p)


def liblinear_optimum(Phi, y, C, loss="l1", tol=1e-8):
    """LIBLINEAR's dual coordinate descent (-s 3 for the hinge loss, -s 1 for its square;
    -B 1, a regularised bias as ppack's) on explicit rows: (primal objective, w, b). Its
    iteration limit can stop the hinge loss short (2e-4 above the minimum on
    ``averaging_problem(800)``): for tight checks use ``alm_reference_optimum``."""
    from liblinear.liblinearutil import train

    y = np.asarray(y, dtype=np.float64)
    model = train(y, sp.csr_matrix(Phi), f"-s {3 if loss == 'l1' else 1} -c {C!r} -B 1 -e {tol!r} -q")
    w, b = model.get_decfun()
    w, b = np.asarray(w, dtype=np.float64), float(b)
    if model.get_labels()[0] != 1:  # LIBLINEAR's decision values favour its first label
        w, b = -w, -b
    return primal_twin(Phi, y, w, b, C, 1.0 if loss == "l1" else 2.0), w, b


_WEIGHTED_OPTIMA = {}


def weighted_problem(spec, loss, C=0.5):
    """A weighted linear problem and its optimum: (X, y, weights, feature map, p, optimum).

    300 rows of ``product_problem`` with row weights in [0, 3), every ninth 0; the optimum is
    the weighted primal's minimum on the explicit rows phi(X), by scipy (``alm_reference_optimum``,
    independent of the package; ``spec``: a feature map, ``loss``: "l1" or "l2", p its power)."""
    from ppack.linear.features import FeatureMap

    X, y = product_problem(n=300, d=6, seed=4)
    weights = np.random.default_rng(7).uniform(0.0, 3.0, 300)
    weights[::9] = 0.0
    p = 1.0 if loss == "l1" else 2.0
    if (spec, loss, C) not in _WEIGHTED_OPTIMA:
        _WEIGHTED_OPTIMA[spec, loss, C] = alm_reference_optimum(explicit_features(X, spec), y, C, p, weights=weights)
    return X, y, weights, FeatureMap.parse(spec), p, _WEIGHTED_OPTIMA[spec, loss, C]


def bilinear_resample(images, fields, side=28):
    """``deform.resample``'s twin: each output pixel (i, j) straight from the bilinear formula
    at (i + fields[b, 0, i, j], j + fields[b, 1, i, j]), zero outside, rounded half to even."""
    images = np.asarray(images, dtype=np.float64).reshape(len(images), side, side)
    out = np.zeros(images.shape)
    for b in range(len(images)):
        for i in range(side):
            for j in range(side):
                y, x = i + fields[b, 0, i, j], j + fields[b, 1, i, j]
                y0, x0 = int(np.floor(y)), int(np.floor(x))
                total = 0.0
                for yy, wy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
                    for xx, wx in ((x0, 1 - (x - x0)), (x0 + 1, x - x0)):
                        if 0 <= yy < side and 0 <= xx < side:
                            total += wy * wx * images[b, yy, xx]
                out[b, i, j] = total
    return np.clip(np.rint(out), 0, 255).astype(np.uint8).reshape(len(images), side * side)


def dual_steps_one_at_a_time(K, y, alpha, bounds, order):
    """Dual coordinate steps on the rows ``order`` in turn, from scratch (the full kernel matrix K)."""
    alpha = alpha.copy()
    for i in order:
        G = y[i] * (K[i] @ (alpha * y)) - 1.0
        pg = min(G, 0.0) if alpha[i] <= 0 else (max(G, 0.0) if alpha[i] >= bounds[i] else G)
        if abs(pg) > 1e-12:
            alpha[i] = min(max(alpha[i] - G / K[i, i], 0.0), bounds[i])
    return alpha


def box_dual_reference(K, y, bounds):
    """The dual's optimum by L-BFGS-B on the box: alpha (n,)."""
    from scipy.optimize import minimize

    Q = K * np.outer(y, y)
    res = minimize(lambda a: (0.5 * a @ Q @ a - a.sum(), Q @ a - 1.0), np.zeros(len(y)), jac=True,
                   method="L-BFGS-B", bounds=list(zip(np.zeros(len(y)), bounds)),
                   options={"maxiter": 20000, "ftol": 1e-15, "gtol": 1e-11})
    return res.x


def regression_steps_one_at_a_time(K, y, beta, bounds, epsilon, order):
    """epsilon-SVR's dual coordinate steps (Newton with the soft threshold, then the box) on the
    rows ``order`` in turn, from scratch (the full kernel matrix K, targets y): beta (n,)."""
    beta = beta.copy()
    for i in order:
        G = K[i] @ beta - y[i]
        gp, gn, b = G + epsilon, G - epsilon, beta[i]
        new = b - gp / K[i, i] if gp < K[i, i] * b else (b - gn / K[i, i] if gn > K[i, i] * b else 0.0)
        new = min(max(new, -bounds[i]), bounds[i])
        if abs(new - b) > 1e-12:
            beta[i] = new
    return beta


def regression_dual_reference(K, y, bounds, epsilon):
    """epsilon-SVR's dual optimum by L-BFGS-B, beta = a - b with a and b in [0, C_i]: beta (n,)."""
    from scipy.optimize import minimize

    n = len(y)

    def objective(v):
        beta = v[:n] - v[n:]
        g = K @ beta - y
        return 0.5 * beta @ K @ beta - y @ beta + epsilon * v.sum(), np.concatenate([g + epsilon, -g + epsilon])

    box = list(zip(np.zeros(n), bounds)) * 2
    res = minimize(objective, np.zeros(2 * n), jac=True, method="L-BFGS-B", bounds=box,
                   options={"maxiter": 20000, "ftol": 1e-15, "gtol": 1e-11})
    return res.x[:n] - res.x[n:]


def dual_block_sweeps(K, y, alpha, bounds, ids, sweeps, inner_tol):
    """A pack's steps on the rows ``ids`` and up to ``sweeps`` - 1 further passes over them
    (one at a time, from scratch), ending after a further pass whose largest |PG| was at most
    ``inner_tol``: alpha (n,)."""
    alpha = dual_steps_one_at_a_time(K, y, alpha, bounds, ids)
    for _ in range(sweeps - 1):
        largest = 0.0
        for i in ids:
            G = y[i] * (K[i] @ (alpha * y)) - 1.0
            pg = min(G, 0.0) if alpha[i] <= 0 else (max(G, 0.0) if alpha[i] >= bounds[i] else G)
            largest = max(largest, abs(pg))
            if abs(pg) > 1e-12:
                alpha[i] = min(max(alpha[i] - G / K[i, i], 0.0), bounds[i])
        if largest <= inner_tol:
            break
    return alpha


def regression_block_sweeps(K, y, beta, bounds, epsilon, ids, sweeps, inner_tol):
    """epsilon-SVR's pack on the rows ``ids`` and up to ``sweeps`` - 1 further passes over them
    (one at a time, from scratch), ending after a further pass whose largest |PG| was at most
    ``inner_tol``: beta (n,)."""
    beta = regression_steps_one_at_a_time(K, y, beta, bounds, epsilon, ids)
    for _ in range(sweeps - 1):
        largest = 0.0
        for i in ids:
            G = K[i] @ beta - y[i]
            gp, gn, b = G + epsilon, G - epsilon, beta[i]
            if b == 0:
                pg = gp if gp < 0 else (gn if gn > 0 else 0.0)
            elif b >= bounds[i]:
                pg = max(gp, 0.0)
            elif b <= -bounds[i]:
                pg = min(gn, 0.0)
            else:
                pg = gp if b > 0 else gn
            largest = max(largest, abs(pg))
            if abs(pg) > 1e-12:
                beta = regression_steps_one_at_a_time(K, y, beta, bounds, epsilon, [i])
        if largest <= inner_tol:
            break
    return beta
