"""LLSVM: dual coordinate ascent with harsh shrinking and an on-disk active set.

Alrajeh, Takeda and Niranjan, "Memory-efficient large-scale linear support vector
machine" (Algorithm 2):

1. One pass of dual coordinate ascent over all rows (Algorithm 1's update, step
   1 / (x~_i . x~_i)). A row whose alpha ends the update at a bound (alpha = 0, or
   alpha = U with U = C for the hinge loss) is dropped for good; the others, the
   active set, are appended to a binary file.
2. Outer iterations over the file: the records whose alpha is still strictly inside
   (0, U) are read, at most ``max_block_rows`` at a time (so the number of blocks
   follows the active set size), each block gets ``inner_iterations`` shuffled sweeps
   (the paper's N) and is then dropped from memory. A row that reaches a bound is
   not read again, so the active set only shrinks. The outer loop stops when the
   spread of projected gradients met in the active set, max - min over the rows read
   in an outer iteration (each at its first visit), is below ``tol``.

Two options go beyond the paper; their defaults follow it. ``reshrink=False`` reads
every record in each outer iteration; ``full_passes`` > 1 runs the whole algorithm again
from a new pass over all rows, warm-started where the previous run ended, so that rows
dropped too early (at alpha = 0 while w was still far from the optimum) come back.

Bias. The paper appends a constant feature tau to every row, x~ = [x, tau], and solves
the SVM without bias in that space (tau = R = max_i ||x_i|| in its experiments). With
w~ = [w, w_tau] the decision is w . x + tau w_tau, so this module returns b = tau w_tau;
the problem solved is then min 1/2 (||w||^2 + b^2 / tau^2) + C sum loss, which is the
shared problem (and ``liblinear -B 1``) only for tau = 1. Hence ``tau=1.0`` is the
default; ``tau="radius"`` gives the paper's choice R for this block of rows.

Loss. "l1" (hinge) as in the paper; "l2" (squared hinge) is the usual extension of the
same dual: U = inf and alpha_i^2 / (4 C) subtracted, i.e. D_ii = 1 / (2 C) added to
x~_i . x~_i; only alpha = 0 is a bound then.

Row weights. ``weights`` c_i (LIBLINEAR's -wi) scale each row's loss: the box becomes
[0, C c_i] (l1) and the diagonal term 1/(2 C c_i) (l2); a row of weight 0 keeps alpha = 0
and is never visited. The active-set file's records are unchanged: a record's bounds are
read from its dual index.

Feature maps. Rows are read through a COFFIN feature map (features.py): the sweeps'
dot and add steps compute phi(x) on demand, w has ``n_out(d)`` entries plus the tau
weight. With ``shifts`` every image yields V virtual rows, each with its own dual
variable (dual index = row * V + shift id); a record of the active-set file holds the
original row, and the sweep takes the shift from the dual index it belongs to.

Record layout (native byte order, no padding): label float64, nnz int32, indices
int32[nnz], values float64[nnz]: 12 + 12 nnz bytes. The file lives in ``workdir``
(default: the system temporary directory) and is removed when ``solve`` returns or
raises.
"""
import math
import os
import tempfile
import time

import numpy as np
import scipy.sparse as sp

from ..jit import njit
from .checks import check_alpha0, open_block
from .features import IDENTITY, MappedRows, _add, _dot, _row, _sqnorms, as_rows
from .problem import LinearSolution, dual_bounds, dual_box

HEADER_BYTES = 12  # label float64 + nnz int32
PAIR_BYTES = 12  # index int32 + value float64
WRITE_CHUNK_ROWS = 16384  # rows serialised per write of the first pass


# ---------------------------------------------------------------- numba cores


@njit(inline="always")
def _coordinate_step(old, margin, qii, diag, upper):
    """Algorithm 1's update of one dual variable: (new alpha, projected gradient).

    margin = y_i w . x~_i at the current w; qii = ||x~_i||^2 + diag.
    """
    g = 1.0 - margin - diag * old  # dual gradient (ascent direction)
    pg = g
    if old <= 0.0:
        pg = max(g, 0.0)
    elif old >= upper:
        pg = min(g, 0.0)
    if qii > 0.0:
        return min(upper, max(0.0, old + g / qii)), pg
    return upper, pg  # an all-zero row without bias: g = 1, the dual is linear in alpha_i


@njit(cache=True)
def _dense_dot(values, a, b, w, dot, qii):
    """(dot + w . x, qii + x . x) for the dense row x = values[a:b] (columns 0 .. b - a - 1)."""
    row = values[a:b]
    for j in range(b - a):
        v = row[j]
        dot += w[j] * v
        qii += v * v
    return dot, qii


@njit(cache=True)
def _mapped_dot(kind, params, indptr, indices, values, dense, i, w, shift):
    """w . phi(x_i) for row i of a block (CSR or dense, as ``as_rows`` gives it)."""
    idx, val = _row(i, indptr, indices, values, dense)
    return _dot(kind, params, idx, val, w, shift)


@njit(cache=True)
def _mapped_add(kind, params, indptr, indices, values, dense, i, w, scale, shift):
    """w += scale * phi(x_i) for row i of a block."""
    idx, val = _row(i, indptr, indices, values, dense)
    _add(kind, params, idx, val, w, scale, shift)


@njit(cache=True)
def _sweep(indptr, indices, values, dense, labels, rows, stride, order, kind, params, n_virtual,
           alpha, w, qd, tau, diag, upper, uppers, diags):
    """One pass of Algorithm 1's update over the block rows ``order``.

    Block row k is the (virtual) row with dual alpha[rows[k]] and shift id rows[k] % n_virtual;
    its values are data row k // stride of the block (CSR or dense, as ``as_rows`` gives it),
    its label labels[k // stride]. w has n_out + 1 entries, the last the weight of the
    constant feature tau (tau = 0: no bias). qd (one per dual) holds ||phi(x)||^2 + tau^2 +
    diag under a map; the identity sums it on the fly. uppers, diags (n_dual,): each dual's
    U and D under row weights, or empty (upper and diag for all); a dual with U = 0 is
    skipped. Updates alpha and w in place; returns (max, min) of the projected gradients seen.
    """
    d = w.shape[0] - 1
    weighted = uppers.shape[0] > 0
    pg_max = -np.inf
    pg_min = np.inf
    for t in range(order.shape[0]):
        k = order[t]
        r = rows[k]
        u, dg = upper, diag
        if weighted:
            u, dg = uppers[r], diags[r]
            if u == 0.0:
                continue
        i = k if stride == 1 else k // stride
        yk = labels[i]
        a = indptr[i]
        b = indptr[i + 1]
        # Only the sparse identity loop is inline: row views or a dense branch in this loop
        # slow it down measurably, calls do not.
        if kind != IDENTITY:
            dot = w[d] * tau + _mapped_dot(kind, params, indptr, indices, values, dense, i, w, r % n_virtual)
            qii = qd[r]
        elif dense:
            dot, qii = _dense_dot(values, a, b, w, w[d] * tau, tau * tau + dg)
        else:
            dot = w[d] * tau
            qii = tau * tau + dg
            for p in range(a, b):
                v = values[p]
                dot += w[indices[p]] * v
                qii += v * v
        old = alpha[r]
        new, pg = _coordinate_step(old, yk * dot, qii, dg, u)
        pg_max = max(pg_max, pg)
        pg_min = min(pg_min, pg)
        delta = new - old
        if delta != 0.0:
            alpha[r] = new
            s = delta * yk
            if kind != IDENTITY:
                _mapped_add(kind, params, indptr, indices, values, dense, i, w, s, r % n_virtual)
            elif dense:
                for p in range(a, b):
                    w[p - a] += s * values[p]
            else:
                for p in range(a, b):
                    w[indices[p]] += s * values[p]
            w[d] += s * tau
    return pg_max, pg_min


@njit(inline="always")
def _put_bytes(dst, pos, src):
    """dst[pos:pos + len(src)] = src (uint8 arrays), element by element: a slice assignment
    compiles numba's shape-mismatch message (string formatting, seconds of compilation)."""
    for b in range(src.shape[0]):
        dst[pos + b] = src[b]


@njit(cache=True)
def _pack_csr(indptr, indices, data, labels, rows, out):
    """Serialise CSR rows ``rows`` (with labels[rows]) into the byte buffer ``out``."""
    label = np.empty(1, np.float64)
    count = np.empty(1, np.int32)
    pos = 0
    for k in range(rows.shape[0]):
        i = rows[k]
        a = indptr[i]
        nnz = indptr[i + 1] - a
        label[0] = labels[i]
        count[0] = nnz
        _put_bytes(out, pos, label.view(np.uint8))
        _put_bytes(out, pos + 8, count.view(np.uint8))
        pos += HEADER_BYTES
        _put_bytes(out, pos, indices[a:a + nnz].view(np.uint8))
        pos += 4 * nnz
        _put_bytes(out, pos, data[a:a + nnz].view(np.uint8))
        pos += 8 * nnz


@njit(cache=True)
def _pack_dense(X, labels, rows, out):
    """Serialise the nonzeros of dense rows ``rows`` into the byte buffer ``out``."""
    d = X.shape[1]
    label = np.empty(1, np.float64)
    count = np.empty(1, np.int32)
    idx = np.empty(d, np.int32)
    val = np.empty(d, np.float64)
    pos = 0
    for k in range(rows.shape[0]):
        i = rows[k]
        nnz = 0
        for j in range(d):
            if X[i, j] != 0.0:
                idx[nnz] = j
                val[nnz] = X[i, j]
                nnz += 1
        label[0] = labels[i]
        count[0] = nnz
        _put_bytes(out, pos, label.view(np.uint8))
        _put_bytes(out, pos + 8, count.view(np.uint8))
        pos += HEADER_BYTES
        _put_bytes(out, pos, idx[:nnz].view(np.uint8))
        pos += 4 * nnz
        _put_bytes(out, pos, val[:nnz].view(np.uint8))
        pos += 8 * nnz


@njit(cache=True)
def _unpack(buf, labels, indptr, indices, data):
    """Parse len(labels) consecutive records of ``buf`` into a CSR block (preallocated)."""
    count = np.empty(1, np.int32)
    pos = 0
    nz = 0
    indptr[0] = 0
    for k in range(labels.shape[0]):
        _put_bytes(labels[k:k + 1].view(np.uint8), 0, buf[pos:pos + 8])
        _put_bytes(count.view(np.uint8), 0, buf[pos + 8:pos + 12])
        nnz = count[0]
        pos += HEADER_BYTES
        _put_bytes(indices[nz:nz + nnz].view(np.uint8), 0, buf[pos:pos + 4 * nnz])
        pos += 4 * nnz
        _put_bytes(data[nz:nz + nnz].view(np.uint8), 0, buf[pos:pos + 8 * nnz])
        pos += 8 * nnz
        nz += nnz
        indptr[k + 1] = nz


# ---------------------------------------------------------------- the active-set file


def _write_rows(f, X, y, rows):
    """Append rows ``rows`` of X (CSR or dense) as records; returns their nnz counts."""
    if sp.issparse(X):
        nnz = (X.indptr[rows + 1] - X.indptr[rows]).astype(np.int64)
    else:
        nnz = np.count_nonzero(X[rows], axis=1).astype(np.int64)
    out = np.empty(int(HEADER_BYTES * rows.size + PAIR_BYTES * nnz.sum()), np.uint8)
    if sp.issparse(X):
        _pack_csr(X.indptr, X.indices, X.data, y, rows, out)
    else:
        _pack_dense(X, y, rows, out)
    f.write(memoryview(out))
    return nnz


def _write_active_set(f, X, y, kept):
    """Overwrite the file with rows ``kept``; returns the records' byte offsets (len + 1,)."""
    f.seek(0)
    f.truncate()
    offsets = np.zeros(kept.size + 1, np.int64)
    for s in range(0, kept.size, WRITE_CHUNK_ROWS):
        nnz = _write_rows(f, X, y, kept[s:s + WRITE_CHUNK_ROWS])
        offsets[s + 1:s + 1 + nnz.size] = HEADER_BYTES + PAIR_BYTES * nnz
    f.flush()
    return np.cumsum(offsets, out=offsets)


def _load_block(f, offsets, ids):
    """Read records ``ids`` (ascending) of the file; returns (labels, indptr, indices, data).

    offsets (records + 1,) are the records' byte offsets. Runs of consecutive records
    are read with one call each, straight into the block's byte buffer, so nothing but
    the requested records is held.
    """
    starts = offsets[ids]
    ends = offsets[ids + 1]
    buf = np.empty(int(np.sum(ends - starts)), np.uint8)
    view = memoryview(buf)
    cuts = np.flatnonzero(np.diff(ids) != 1) + 1
    pos = 0
    for first, last in zip(np.r_[0, cuts], np.r_[cuts, ids.size]):
        size = int(ends[last - 1] - starts[first])
        f.seek(int(starts[first]))
        if f.readinto(view[pos:pos + size]) != size:
            raise OSError(f"active-set file ended early: record at byte {starts[first]} is cut short")
        pos += size
    m = ids.size
    nnz = (buf.size - HEADER_BYTES * m) // PAIR_BYTES
    labels = np.empty(m, np.float64)
    indptr = np.empty(m + 1, np.int64)
    indices = np.empty(nnz, np.int32)
    data = np.empty(nnz, np.float64)
    _unpack(buf, labels, indptr, indices, data)
    return labels, indptr, indices, data


# ---------------------------------------------------------------- validation


def _row_radius(X):
    sq = np.asarray(X.multiply(X).sum(axis=1)).ravel() if sp.issparse(X) else np.einsum("ij,ij->i", X, X)
    return float(np.sqrt(sq.max())) if sq.size else 0.0


# ---------------------------------------------------------------- the solver


def _block_phase(f, offsets, kept, sweep_args, rng, tol, max_outer, inner_iterations,
                 max_block_rows, reshrink, info):
    """Algorithm 2, lines 9-21: outer iterations over the active-set file.

    kept: the dual index of every record; sweep_args: ``_sweep``'s arguments from kind on.
    Runs at most ``max_outer`` outer iterations; returns how many it ran and records
    the active set sizes, blocks and the last gap in ``info``.
    """
    alpha, upper, uppers = sweep_args[3], sweep_args[8], sweep_args[9]
    bound = uppers[kept] if uppers.size else upper
    block_rows = max_block_rows or max(kept.size, 1)
    outer = 0
    while outer < max_outer:
        if reshrink:
            ids = np.flatnonzero((alpha[kept] > 0.0) & (alpha[kept] < bound))
        else:
            ids = np.arange(kept.size)
        info["active_history"].append(int(ids.size))
        if ids.size == 0:
            info["gap"] = 0.0
            return outer, True
        outer += 1
        pg_max, pg_min = -np.inf, np.inf
        blocks = 0
        for s in range(0, ids.size, block_rows):
            block = ids[s:s + block_rows]
            labels, indptr, indices, data = _load_block(f, offsets, block)
            rows = kept[block]
            blocks += 1
            info["rows_loaded"] += labels.size
            info["max_rows_loaded"] = max(info["max_rows_loaded"], labels.size)
            for sweep in range(inner_iterations):
                hi, lo = _sweep(indptr, indices, data, False, labels, rows, 1, rng.permutation(block.size),
                                *sweep_args)
                if sweep == 0:
                    pg_max, pg_min = max(pg_max, hi), min(pg_min, lo)
            del labels, indptr, indices, data  # the paper's "remove all data points from memory"
        info["blocks_history"].append(blocks)
        info["gap"] = float(pg_max - pg_min)
        if info["gap"] < tol:
            return outer, True
    return outer, False


def solve(X, y, C, *, loss="l1", bias=True, tol=0.1, max_epochs=1000, seed=0, w0=None, b0=0.0,
          alpha0=None, feature_map=None, inner_iterations=10, max_block_rows=None, workdir=None, tau=1.0,
          shuffle_first_pass=True, reshrink=True, full_passes=5, weights=None, **options):
    """Train on one block of rows with LLSVM (harsh shrinking + block optimisation).

    X (n, d) CSR or dense, y (n,) in {-1, +1}; weights (n,) >= 0 or None: each row's loss
    weight (box [0, C weights_i], or D_ii = 1/(2 C weights_i) for l2). ``max_epochs`` bounds the outer
    iterations over the active set that follow a pass over all rows; ``iterations``
    counts both kinds of pass. ``tol`` bounds the projected-gradient spread (LIBLINEAR's
    dual criterion) over the active set.
    feature_map: a FeatureMap or its name (None: the identity), applied on demand; with
    V virtual rows per row (shifts) there are n * V duals, one per (virtual) row.
    Warm start: alpha0 (n * V,) the previous duals; w0 (n_out,), b0 the model to update
    in place of sum_r alpha_r y_r phi~(x_r) (it may contain other blocks'
    contributions); without w0 the model is rebuilt from alpha0.

    Options: ``inner_iterations`` sweeps per loaded block (the paper's N);
    ``max_block_rows`` most rows loaded at once (None: the whole active set);
    ``workdir`` folder of the active-set file; ``tau`` value of the constant bias
    feature, a number or "radius" (the largest ||phi(x)||; see the module docstring);
    ``shuffle_first_pass`` visit rows in random order in the pass over all rows (False:
    row order, as the paper reads its file); ``reshrink`` skip file rows that reached a
    bound (the paper; False reads every record each outer iteration). ``full_passes``
    (default 5; the paper runs 1, which leaves the objective 2-24% above the optimum on
    a9a, w8a and ijcnn1): how many times the whole algorithm runs, each from a new pass
    over all rows that starts where the previous run ended, so rows dropped too early
    come back; it stops early once such a pass finds the projected-gradient spread over
    all rows below ``tol``. Any other keyword is an error that lists the options.
    """
    started = time.perf_counter()
    X, y, C, loss, bias, opts, fmap, w0, b0, weights = open_block(
        "llsvm", X, y, C, loss, bias,
        dict(tol=tol, max_epochs=max_epochs, seed=seed, inner_iterations=inner_iterations,
             max_block_rows=max_block_rows, workdir=workdir, tau=tau, shuffle_first_pass=shuffle_first_pass,
             reshrink=reshrink, full_passes=full_passes, **options),
        feature_map, w0, b0, weights)
    tol = opts["tol"]
    n, d = X.shape
    kind, params, n_virtual, n_out = fmap.kind, fmap.params(d), fmap.n_virtual, fmap.n_out(d)
    n_dual = n * n_virtual
    upper, diag = dual_box(C, loss)
    uppers = diags = np.empty(0)
    if weights is not None:
        uppers, diags = dual_bounds(C, loss, weights, n_virtual)
    bound = upper if weights is None else uppers  # every dual's U
    alpha = check_alpha0(alpha0, n_dual, bound)
    if alpha is None:
        alpha = np.zeros(n_dual)

    indptr, indices, values, dense = as_rows(X)
    # ||phi(x_r)||^2 + tau^2 + diag per dual once tau is known; the identity sweep sums it on the fly
    qd = np.empty(0 if kind == IDENTITY else n_dual)
    if kind != IDENTITY:
        _sqnorms(indptr, indices, values, dense, kind, params, n_virtual, 0.0, qd)
    tau = opts["tau"]
    if tau == "radius":
        radius = _row_radius(X) if kind == IDENTITY else float(np.sqrt(qd.max(initial=0.0)))
        tau = radius if radius > 0.0 else 1.0
    if not bias:
        tau = 0.0
    if weights is None:
        qd += tau * tau + diag
    elif kind != IDENTITY:
        qd += tau * tau
        qd += diags

    w = np.zeros(n_out + 1)
    if w0 is not None:
        w[:n_out] = w0
        w[n_out] = b0 / tau if bias else 0.0
    elif alpha0 is not None:
        coef = alpha * (y if n_virtual == 1 else np.repeat(y, n_virtual))
        w[:n_out] = X.T @ coef if kind == IDENTITY else MappedRows(X, fmap).rmatvec(coef)
        w[n_out] = tau * coef.sum()

    rng = np.random.default_rng(opts["seed"])
    sweep_args = (kind, params, n_virtual, alpha, w, qd, tau, diag, upper, uppers, diags)
    all_rows = np.arange(n_dual)
    info = {"tau": tau, "feature_map": fmap.name, "n_dual": n_dual, "active_first_pass": [], "active_history": [],
            "blocks_history": [], "max_rows_loaded": 0, "rows_loaded": 0, "file_bytes": [], "gap": math.nan,
            "full_gap": [], "converged": False}
    epochs = 0
    fd, path = tempfile.mkstemp(prefix="llsvm-", suffix=".bin", dir=opts["workdir"])
    try:
        with os.fdopen(fd, "w+b") as f:
            for full in range(opts["full_passes"]):
                order = rng.permutation(n_dual) if opts["shuffle_first_pass"] else all_rows
                hi, lo = _sweep(indptr, indices, values, dense, y, all_rows, n_virtual, order, *sweep_args)
                epochs += 1
                info["full_gap"].append(float(hi - lo) if n_dual else 0.0)
                if full > 0 and info["full_gap"][-1] < tol:
                    info["converged"] = True
                    break
                # The paper's harsh rule: keep exactly the duals strictly inside (0, U).
                kept = np.flatnonzero((alpha > 0.0) & (alpha < bound))
                info["active_first_pass"].append(int(kept.size))
                offsets = _write_active_set(f, X, y, kept // n_virtual)  # a record holds the original row
                info["file_bytes"].append(int(offsets[-1]))
                outer, info["converged"] = _block_phase(
                    f, offsets, kept, sweep_args, rng, tol, opts["max_epochs"], opts["inner_iterations"],
                    opts["max_block_rows"], opts["reshrink"], info)
                epochs += outer
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    info["active_final"] = int(np.count_nonzero((alpha > 0.0) & (alpha < bound)))
    info["seconds"] = time.perf_counter() - started
    b = tau * float(w[n_out]) if bias else 0.0
    return LinearSolution(w=w[:n_out].copy(), b=b, alpha=alpha, iterations=epochs, info=info)
