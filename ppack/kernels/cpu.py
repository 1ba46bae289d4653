"""Numba cores: partial kernel sums of a support-vector shard against a block of rows.

The sums are taken for K coefficient columns at once (K binary problems sharing their
support vectors, e.g. one-vs-rest classes): ``out[c, k] += sum_j coef[j, c] (K(sv_j, x_k)
+ offset)`` with coef (n_sv, K) and out (K, r). Each kernel value is evaluated once and
used for all K columns; K = 1 is the binary case.

A kernel value is ``formulas.value`` of the two rows' reduction and their norms: the
reduction is the dot product, or the L1 overlap ``sum |a_f| + |b_f| - |a_f - b_f|`` for the
kernels whose table entry says "l1" (``L1_REDUCTION``), the norm the squared L2 norm or the
L1 norm respectively. Both reductions vanish where either row is zero, so sparse rows only
visit their nonzeros.

The block of r rows is given transposed and dense, ``XT`` of shape (n_features, r):
one support vector's nonzero (f, v) then updates all r reductions with one contiguous,
vectorised pass over ``XT[f]``. Reductions, kernel values and the coefficient-weighted
sums are fused per block of support vectors, so no (n_sv, r) kernel matrix is ever
formed: a block's (m, r) kernel values times its (m, K) coefficients is added to the
block's own (K, r) partial sums. Blocks run in parallel and their partial sums are added
in a fixed order, so the result does not depend on the number of threads.

Layer 1 (``compute.KernelCompute``, the seam the trainer calls) validates and allocates;
the ``@njit`` functions here allocate only per block of support vectors, never per row,
and raise nothing. The parallel cores allow fused multiply-add contraction (and nothing
else of fast-math): it is what lets LLVM vectorise the exp polynomial.

The work of one block (its reductions, kernel values and weighted sums, and the final sum of
the blocks) is done by compiled functions of their own, called from the parallel loops, not
inlined into them: numba's parallel pass then transforms a short loop body, and each helper
compiles once per type for every core that calls it. That cut the first compile of the
cores by a third to two fifths here (a grid's four kernel-group variants 40.6 s -> 24.1 s of
one core) at the same speed. The helpers carry the cores' contraction flag, so the sums are
the same bits as when they were inlined.
"""
import math

import numpy as np
from llvmlite import ir as llvm_ir
from numba import get_num_threads, prange, types
from numba.extending import intrinsic, overload

from ..jit import njit
from . import formulas
from .formulas import EXP_TAIL, L1_REDUCTION
from .norms import csr_row_norms, dense_row_norm  # noqa: F401 (csr_row_norms: a backend function)

# Support vectors per parallel work item; fixed so results are thread-count independent.
SV_BLOCK = 64

# exp(x) for x <= 0 as 2^n * e^rr, |rr| <= ln2/2: Cody-Waite reduction with a shifter
# constant so the loop vectorises (libm's scalar exp does not). t = x*log2e + shift holds
# n plus the exponent bias in its low mantissa bits; shifting t's bits left past the
# mantissa puts that in the exponent field, which is 2^n (``_pow2_from_shifted``).
_LOG2E = 1.4426950408889634
_SHIFT = 6755399441055744.0 + 1023.0  # 1.5 * 2^52, plus the exponent bias
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_EXP_MIN = -700.0  # exp(-700) ~ 1e-304: below this a kernel value is zero in practice
# e^rr on |rr| <= ln2/2, highest power first: the degree-11 polynomial interpolating exp at
# the 12 Chebyshev nodes of that interval (solved in 80-bit precision, rounded to float64).
# It is as accurate as the degree-13 Taylor polynomial (1.3e-16 relative, float64 evaluation
# included) with two multiply-adds fewer.
_EXP_POLY = (2.5110377643799345e-08, 2.763268771706936e-07, 2.755723912698018e-06, 2.4801485339499982e-05,
             0.0001984126989339729, 0.0013888888952463562, 0.008333333333316892, 0.04166666666648746,
             0.1666666666666669, 0.5000000000000019, 1.0, 1.0)
# The float32 twin, for blocks of float32 reductions (float32 storage): shifter 1.5 * 2^23
# plus the bias 127, ln2 split so that m * _LN2_HI32 is exact, and the degree-7 Taylor
# polynomial (7.4e-8 relative, about one float32 ulp). Below _EXP_MIN32 the result would
# leave the normal float32 range: it is 0 there.
_LOG2E32 = np.float32(_LOG2E)
_SHIFT32 = np.float32(12582912.0 + 127.0)
_LN2_HI32 = np.float32(0.693359375)
_LN2_LO32 = np.float32(-2.12194440e-4)
_EXP_MIN32 = np.float32(-86.0)
_EXP_POLY32 = tuple(np.float32(1.0 / math.factorial(i)) for i in range(7, -1, -1))


@intrinsic
def _pow2_from_shifted(typingctx, t):
    """2^n for a float ``t`` whose low mantissa bits hold n plus the exponent bias: t's bits
    shifted left past the mantissa (52 bits for float64, 23 for float32)."""
    width, mantissa = (32, 23) if t == types.float32 else (64, 52)

    def codegen(context, builder, signature, args):
        bits = builder.bitcast(args[0], llvm_ir.IntType(width))
        bits = builder.shl(bits, llvm_ir.Constant(llvm_ir.IntType(width), mantissa))
        return builder.bitcast(bits, args[0].type)
    return t(t), codegen


@njit(inline="always")
def _horner(coefs, x):
    """The polynomial with coefficients ``coefs`` (highest power first) at x."""
    p = coefs[0]
    for i in range(1, len(coefs)):
        p = p * x + coefs[i]
    return p


@njit(inline="always")
def _exp_nonpositive(x):
    """Overwrite ``x`` (1-D, all <= 0) with exp(x)."""
    for k in range(x.shape[0]):
        v = max(x[k], _EXP_MIN)
        t = v * _LOG2E + _SHIFT
        m = t - _SHIFT
        x[k] = _horner(_EXP_POLY, (v - m * _LN2_HI) - m * _LN2_LO) * _pow2_from_shifted(t)


@njit(inline="always")
def _exp_nonpositive32(x):
    """Overwrite ``x`` (1-D float32, all <= 0) with exp(x) to float32 accuracy."""
    for k in range(x.shape[0]):
        v = max(np.float32(x[k]), _EXP_MIN32)
        t = v * _LOG2E32 + _SHIFT32
        m = t - _SHIFT32
        e = _horner(_EXP_POLY32, (v - m * _LN2_HI32) - m * _LN2_LO32) * _pow2_from_shifted(t)
        x[k] = e if v > _EXP_MIN32 else np.float32(0.0)


def _exp_block(x):
    """Overwrite ``x`` (1-D, all <= 0) with exp(x) in its own precision (picked at compile time)."""


@overload(_exp_block, inline="always")
def _exp_block_typed(x):
    if x.dtype == types.float32:
        return lambda x: _exp_nonpositive32(x)
    return lambda x: _exp_nonpositive(x)


@njit(cache=True, fastmath={"contract"})
def exp_nonpositive_inplace(x):
    """Overwrite a 1-D float64 (or float32) array whose entries are all <= 0 with its exp,
    compiled as the parallel cores are (the pair kernels call it on their arguments)."""
    _exp_block(x)


def exp_nonpositive(x):
    """exp of a 1-D array whose entries are all <= 0, as a new array (test hook for the fast exps)."""
    out = np.array(x, copy=True)
    exp_nonpositive_inplace(out)
    return out


@njit(cache=True, fastmath={"contract"})
def _accumulate_block(Z, m, norms, coef, j0, x_norm, kind, gamma, coef0, degree, offset, acc):
    """acc[c, k] += sum_i coef[j0+i, c] * (K + offset) for the reductions Z[i, k] of m support vectors.

    acc (K, r), coef (n_sv, K). Z (SV_BLOCK, r) is overwritten with the kernel values
    (``formulas.values``); an exp kernel's exp runs over the block as one flat array, so it
    vectorises over m * r values instead of r at a time. A float32 Z (float32 storage) gets
    the kernel values in float32, eight to a vector; the formula itself is evaluated in
    float64 from the float64 norms either way.
    """
    r = Z.shape[1]
    for i in range(m):
        formulas.values(kind, Z[i], norms[j0 + i], x_norm, gamma, coef0, degree)
    if EXP_TAIL[kind]:
        flat = Z.reshape(Z.shape[0] * r)[:m * r]
        _exp_block(flat)
    _weighted_rows(Z, m, coef, j0, offset, acc)


@njit(inline="always")
def _weighted_rows(Z, m, coef, j0, offset, acc):
    """acc[c, k] += sum_i coef[j0+i, c] * (Z[i, k] + offset), i in order for every (c, k).

    Each acc[c, k] gets the same operations in the same order whatever K is. For K > 1
    columns go in pairs, so a kernel row is loaded once per two accumulator rows; the
    inner loops run over r, contiguous.
    """
    r = Z.shape[1]
    K = acc.shape[0]
    if K == 1:
        a = acc[0]
        for i in range(m):
            w = coef[j0 + i, 0]
            for k in range(r):
                a[k] += w * (Z[i, k] + offset)
    else:
        for i in range(m):
            z = Z[i]
            for c in range(0, K - 1, 2):
                w0, w1 = coef[j0 + i, c], coef[j0 + i, c + 1]
                a0, a1 = acc[c], acc[c + 1]
                for k in range(r):
                    v = z[k] + offset
                    a0[k] += w0 * v
                    a1[k] += w1 * v
            if K % 2 == 1:
                w = coef[j0 + i, K - 1]
                a = acc[K - 1]
                for k in range(r):
                    a[k] += w * (z[k] + offset)


@njit(cache=True)
def dense_row_norms(X, l1):
    """Squared L2 (or, with ``l1``, L1) norm of every row of a dense (n, d) array, (n,)
    float64, with no float64 copy of the rows, in ``norms.dense_row_norm``'s fixed order."""
    n = X.shape[0]
    out = np.empty(n)
    sums = np.empty(8)
    for i in range(n):
        out[i] = dense_row_norm(X[i], l1, sums)
    return out


def gemm_work_items(n_tiles):
    """Parallel work items of ``gemm_partial_sums`` for ``n_tiles`` tiles: one per numba thread
    (each keeps one GEMM output tile; the result does not depend on this count)."""
    return max(1, min(n_tiles, get_num_threads()))


def work_items(n_sv):
    """Parallel work items for ``n_sv`` support vectors: a few per numba thread.

    Each block of SV_BLOCK support vectors keeps its own partial sums, so the result does
    not depend on this count (nor on the number of threads).
    """
    n_blocks = (n_sv + SV_BLOCK - 1) // SV_BLOCK
    return max(1, min(n_blocks, 4 * get_num_threads()))


@njit(cache=True, fastmath={"contract"})
def _sum_rows(partial, out):
    """out (K, r) += the blocks' partial sums ``partial`` (n_blocks, K, r), added in block
    order (a fixed order, unlike a reduction)."""
    for b in range(partial.shape[0]):
        for c in range(partial.shape[1]):
            o = out[c]
            p = partial[b, c]
            for k in range(partial.shape[2]):
                o[k] += p[k]


@njit(inline="always")
def _reduce_entry(l1, v, xt_row, z):
    """Add one support-vector nonzero ``v`` (at feature f, with ``xt_row = XT[f]``) to ``z``:
    its product with each block row's value, or with ``l1`` its L1 overlap."""
    r = z.shape[0]
    if l1:
        av = abs(v)
        for k in range(r):
            xb = xt_row[k]
            z[k] += av + abs(xb) - abs(v - xb)
    else:
        for k in range(r):
            z[k] += v * xt_row[k]


@njit(cache=True, fastmath={"contract"})
def _csr_reductions(indptr, indices, values, j0, m, XT, l1, Z):
    """Z[i] (rows 0..m-1, zeroed first) = the reductions of CSR support vector j0 + i with every
    block row (``XT`` (n_features, r): the block's columns)."""
    r = XT.shape[1]
    Z[:] = 0.0
    for i in range(m):
        z = Z[i]
        e, end = indptr[j0 + i], indptr[j0 + i + 1]
        if not l1:
            # four nonzeros per pass: one load and store of z per four multiply-adds
            while e + 4 <= end:
                f0, f1, f2, f3 = indices[e], indices[e + 1], indices[e + 2], indices[e + 3]
                v0, v1, v2, v3 = values[e], values[e + 1], values[e + 2], values[e + 3]
                for k in range(r):
                    z[k] += v0 * XT[f0, k] + v1 * XT[f1, k] + v2 * XT[f2, k] + v3 * XT[f3, k]
                e += 4
        for e in range(e, end):
            _reduce_entry(l1, values[e], XT[indices[e]], z)


@njit(cache=True, fastmath={"contract"})
def _dense_reductions(features, j0, m, XT, l1, Z):
    """``_csr_reductions`` for dense support vectors ``features`` (n_sv, n_features), skipping zeros."""
    Z[:] = 0.0
    for i in range(m):
        for f in range(features.shape[1]):
            v = features[j0 + i, f]
            if v != 0.0:
                _reduce_entry(l1, v, XT[f], Z[i])


@njit(parallel=True, cache=True, fastmath={"contract"})
def csr_partial_sums(indptr, indices, values, norms, coef, n_sv, XT, x_norm, n_chunks,
                     kind, gamma, coef0, degree, offset, out):
    """out[c, k] += sum_j coef[j, c] * (K(sv_j, x_k) + offset) for CSR support vectors.

    indptr (n_sv+1,), indices/values (nnz,): the support vectors; norms (n_sv,);
    coef (n_sv, K) float64; XT (n_features, r): the block rows, transposed and dense, in
    the dtype of ``values``: float32 storage takes its reductions and kernel values in
    float32; x_norm (r,); n_chunks: parallel work items (``work_items``); out (K, r) float64.
    """
    r = XT.shape[1]
    l1 = L1_REDUCTION[kind]
    n_blocks = (n_sv + SV_BLOCK - 1) // SV_BLOCK
    partial = np.zeros((n_blocks, coef.shape[1], r))
    for c in prange(n_chunks):
        Z = np.empty((SV_BLOCK, r), dtype=XT.dtype)
        for b in range(c * n_blocks // n_chunks, (c + 1) * n_blocks // n_chunks):
            j0 = b * SV_BLOCK
            m = min(n_sv, j0 + SV_BLOCK) - j0
            _csr_reductions(indptr, indices, values, j0, m, XT, l1, Z)
            _accumulate_block(Z, m, norms, coef, j0, x_norm, kind, gamma, coef0, degree, offset,
                              partial[b])
    _sum_rows(partial, out)


@njit(parallel=True, cache=True, fastmath={"contract"})
def dense_partial_sums(features, norms, coef, n_sv, XT, x_norm, n_chunks,
                       kind, gamma, coef0, degree, offset, out):
    """As ``csr_partial_sums`` for dense support vectors ``features`` (n_sv, n_features).

    Used for the kernels without a GEMM form (L1 reductions) and as the numba twin of the GEMM path.
    """
    r = XT.shape[1]
    l1 = L1_REDUCTION[kind]
    n_blocks = (n_sv + SV_BLOCK - 1) // SV_BLOCK
    partial = np.zeros((n_blocks, coef.shape[1], r))
    for c in prange(n_chunks):
        Z = np.empty((SV_BLOCK, r), dtype=XT.dtype)
        for b in range(c * n_blocks // n_chunks, (c + 1) * n_blocks // n_chunks):
            j0 = b * SV_BLOCK
            m = min(n_sv, j0 + SV_BLOCK) - j0
            _dense_reductions(features, j0, m, XT, l1, Z)
            _accumulate_block(Z, m, norms, coef, j0, x_norm, kind, gamma, coef0, degree, offset,
                              partial[b])
    _sum_rows(partial, out)


@njit(parallel=True, cache=True, fastmath={"contract"})
def gemm_partial_sums(features, norms, coef, n_sv, XT, x_norm, tile, dots, partial,
                      kind, gamma, coef0, degree, offset, out):
    """As ``csr_partial_sums`` for dense support vectors, with the dot products from BLAS.

    features (n_sv, d) and XT (d, r) share a dtype; tiles of ``tile`` support vectors are
    multiplied by XT (one single-threaded GEMM call each, small enough to stay in cache),
    the kernel and the K weighted sums fused over each. Work arrays, reused from pack to
    pack: dots (items, tile, r) in the rows' dtype, one GEMM output per parallel work item
    (item i takes tiles i, i + items, ...), and partial (>= tiles, K, r) float64, each tile's
    sums, added in tile order (so the result does not depend on the items or threads). Keep
    BLAS itself single-threaded while this runs: the parallelism is here.

    Accuracy with float32 storage (this core's GEMM and the other cores' reductions alike):
    the dot products accumulate in float32 (a float64 GEMM on widened tiles measured about
    1.8x slower at d = 784; float32 sparse reductions and exp about 1.8x faster than
    float64 on ijcnn1), and the kernel values are float32 (a further relative 1e-7 from
    the float32 exp and its rounding). With u = 2^-24 and
    g_d = d u / (1 - d u), in any summation order the dot product of two stored rows has

        |fl32(x.z) - x.z| <= g_d * sum_f |x_f z_f| <= g_d * ||x|| ||z||,

    x and z being the float32 values themselves (the norms are float64 and exact to
    float64 rounding). rbf's distance ||x||^2 + ||z||^2 - 2 x.z is then off by at most
    delta = 2 g_d sum_f |x_f z_f| (the clamp at 0 only shrinks the error), so each
    kernel value satisfies |K_hat - K| <= K (exp(gamma delta) - 1): a relative error
    that does not shrink as x approaches z, because the distance cancels while the dot
    product does not. Linear and poly kernels inherit the absolute g_d sum_f |x_f z_f|
    (times gamma and the polynomial's derivative for poly). For d = 784 and values in
    [0, 1], g_d ~ 4.7e-5 and sum_f |x_f z_f| <= 784: with gamma * delta >~ 1 (large
    gamma, dense rows with large norms) float32 kernel sums can be wrong at order one;
    store float64 there. Blocked BLAS sums usually stay far inside the bound (100 to 300
    times in tests/test_kernels_compute.py's near-rows case).
    """
    n_tiles = (n_sv + tile - 1) // tile
    items = dots.shape[0]
    for item in prange(items):
        for b in range(item, n_tiles, items):
            a0 = b * tile
            a1 = min(n_sv, a0 + tile)
            G = dots[item, :a1 - a0]
            np.dot(features[a0:a1], XT, G)
            sums = partial[b]
            for c in range(sums.shape[0]):
                for k in range(sums.shape[1]):
                    sums[c, k] = 0.0
            # the whole tile at once: the exp then runs over (a1 - a0) * r contiguous values
            _accumulate_block(G, a1 - a0, norms, coef, a0, x_norm, kind, gamma, coef0, degree, offset, sums)
    _sum_rows(partial[:n_tiles], out)


# Kernel groups (``compute.KernelGroups``): G kernels that share one reduction (the dot
# product, or laplacian's L1 overlap) and the offset, each with its own run of the K columns.
# The cores below take a block's reductions once, then per group the formula on a copy and the
# weighted sums into that group's columns, in the one-kernel cores' tile and block order, so the
# sums are deterministic and equal a one-kernel call's to rounding. A group of many columns (a
# grid's training pass: tens to hundreds) takes its weighted sums as one BLAS GEMM over the
# tile; a narrow one (a grid's score pass: a fold's few columns per setting) runs NARROW_ROWS
# rows at a time through a fused loop, whose values stay in cache (measured here at d = 123:
# 4 columns a group over 532 rows, 36 ms a pass with the GEMM against 24 to 27 ms; at 24
# columns the GEMM stays faster, 10 to 13 ms against 12 to 15).
NARROW_GROUP, NARROW_ROWS = 8, 32


@njit(cache=True, fastmath={"contract"})
def _accumulate_groups(Z, W, picked_norms, picked_rows, m, norms, coef, j0, x_norm, kinds, gammas, coef0s, degrees,
                       starts, offset, acc):
    """For every group g: acc[c, k] for the columns c of starts[g] to starts[g + 1] - 1 +=
    sum_i coef[j0+i, c] (K_g + offset), over the rows i of Z (m of them) with a nonzero
    coefficient in those columns, copied in order into W (as Z), their norms into picked_norms
    and positions into picked_rows (>= m,). A row whose coefficients are all zero there would
    add exact zeros: skipping it, a grid's rows held out of a fold, or stored for another
    setting's columns only, cost nothing. The kernel values are ``formulas.values`` as in
    ``_accumulate_block``; the weighted sums of a wide group are one BLAS GEMM (coefficients
    (columns, picked) times values (picked, r)), of a narrow one ``_weighted_picked``."""
    r = Z.shape[1]
    for g in range(kinds.shape[0]):
        c0, c1 = starts[g], starts[g + 1]
        narrow = c1 - c0 <= NARROW_GROUP
        step = NARROW_ROWS if narrow else max(1, m)
        for i0 in range(0, m, step):
            picked = 0
            for i in range(i0, min(m, i0 + step)):
                for c in range(c0, c1):
                    if coef[j0 + i, c] != 0.0:
                        for k in range(r):
                            W[picked, k] = Z[i, k]
                        picked_norms[picked] = norms[j0 + i]
                        picked_rows[picked] = j0 + i
                        picked += 1
                        break
            if picked == 0:
                continue
            kind = kinds[g]
            for i in range(picked):
                formulas.values(kind, W[i], picked_norms[i], x_norm, gammas[g], coef0s[g], degrees[g])
            if EXP_TAIL[kind]:
                _exp_block(W.reshape(W.shape[0] * r)[:picked * r])
            if narrow:
                _weighted_picked(W, picked, picked_rows, coef, c0, c1, offset, acc)
                continue
            values = np.empty((picked, r))
            for i in range(picked):
                for k in range(r):
                    values[i, k] = W[i, k] + offset
            weights = np.empty((c1 - c0, picked))
            for c in range(c0, c1):
                for i in range(picked):
                    weights[c - c0, i] = coef[picked_rows[i], c]
            sums = np.dot(weights, values)
            for c in range(c0, c1):
                a, t = acc[c], sums[c - c0]
                for k in range(r):
                    a[k] += t[k]


@njit(inline="always")
def _weighted_picked(W, picked, picked_rows, coef, c0, c1, offset, acc):
    """acc[c, k] += coef[picked_rows[i], c] * (W[i, k] + offset) over the picked rows i in
    order, for the columns c0 to c1 - 1 (a zero coefficient adds nothing and is skipped)."""
    r = W.shape[1]
    for i in range(picked):
        z = W[i]
        for c in range(c0, c1):
            w = coef[picked_rows[i], c]
            if w != 0.0:
                a = acc[c]
                for k in range(r):
                    a[k] += w * (z[k] + offset)


@njit(parallel=True, cache=True, fastmath={"contract"})
def csr_group_sums(indptr, indices, values, norms, coef, n_sv, XT, x_norm, n_chunks,
                   kinds, gammas, coef0s, degrees, starts, offset, out):
    """``csr_partial_sums`` for kernel groups: kinds, degrees (G,) int64, gammas, coef0s (G,),
    starts (G + 1,) int64 the groups' first columns (and the end); every kind has the reduction
    of kinds[0]."""
    r = XT.shape[1]
    l1 = L1_REDUCTION[kinds[0]]
    n_blocks = (n_sv + SV_BLOCK - 1) // SV_BLOCK
    partial = np.zeros((n_blocks, coef.shape[1], r))
    for c in prange(n_chunks):
        Z = np.empty((SV_BLOCK, r), dtype=XT.dtype)
        W = np.empty((SV_BLOCK, r), dtype=XT.dtype)
        picked_norms = np.empty(SV_BLOCK)
        picked_rows = np.empty(SV_BLOCK, dtype=np.int64)
        for b in range(c * n_blocks // n_chunks, (c + 1) * n_blocks // n_chunks):
            j0 = b * SV_BLOCK
            m = min(n_sv, j0 + SV_BLOCK) - j0
            _csr_reductions(indptr, indices, values, j0, m, XT, l1, Z)
            _accumulate_groups(Z, W, picked_norms, picked_rows, m, norms, coef, j0, x_norm, kinds, gammas, coef0s,
                               degrees, starts, offset, partial[b])
    _sum_rows(partial, out)


@njit(parallel=True, cache=True, fastmath={"contract"})
def dense_group_sums(features, norms, coef, n_sv, XT, x_norm, n_chunks,
                     kinds, gammas, coef0s, degrees, starts, offset, out):
    """``dense_partial_sums`` for kernel groups (``csr_group_sums``' group arguments)."""
    r = XT.shape[1]
    l1 = L1_REDUCTION[kinds[0]]
    n_blocks = (n_sv + SV_BLOCK - 1) // SV_BLOCK
    partial = np.zeros((n_blocks, coef.shape[1], r))
    for c in prange(n_chunks):
        Z = np.empty((SV_BLOCK, r), dtype=XT.dtype)
        W = np.empty((SV_BLOCK, r), dtype=XT.dtype)
        picked_norms = np.empty(SV_BLOCK)
        picked_rows = np.empty(SV_BLOCK, dtype=np.int64)
        for b in range(c * n_blocks // n_chunks, (c + 1) * n_blocks // n_chunks):
            j0 = b * SV_BLOCK
            m = min(n_sv, j0 + SV_BLOCK) - j0
            _dense_reductions(features, j0, m, XT, l1, Z)
            _accumulate_groups(Z, W, picked_norms, picked_rows, m, norms, coef, j0, x_norm, kinds, gammas, coef0s,
                               degrees, starts, offset, partial[b])
    _sum_rows(partial, out)


@njit(parallel=True, cache=True, fastmath={"contract"})
def gemm_group_sums(features, norms, coef, n_sv, XT, x_norm, tile, dots, kernel_values, partial,
                    kinds, gammas, coef0s, degrees, starts, offset, out):
    """``gemm_partial_sums`` for kernel groups of dot-product kernels: one GEMM per tile for all
    of them; kernel_values: a work array shaped as dots, each group's copy of its tile."""
    n_tiles = (n_sv + tile - 1) // tile
    items = dots.shape[0]
    for item in prange(items):
        picked_norms = np.empty(tile)
        picked_rows = np.empty(tile, dtype=np.int64)
        for b in range(item, n_tiles, items):
            a0 = b * tile
            a1 = min(n_sv, a0 + tile)
            G = dots[item, :a1 - a0]
            np.dot(features[a0:a1], XT, G)
            sums = partial[b]
            for c in range(sums.shape[0]):
                for k in range(sums.shape[1]):
                    sums[c, k] = 0.0
            _accumulate_groups(G, kernel_values[item], picked_norms, picked_rows, a1 - a0, norms, coef, a0, x_norm,
                               kinds, gammas, coef0s, degrees, starts, offset, sums)
    _sum_rows(partial[:n_tiles], out)


@njit(inline="always")
def _finish_pairs(kind, offset, out):
    """out (``formulas.values`` of every pair) becomes the kernel values plus ``offset``: an exp
    kernel's exp is taken of all of them at once, vectorised."""
    if EXP_TAIL[kind]:
        exp_nonpositive_inplace(out)
    if offset != 0.0:
        for q in range(out.shape[0]):
            out[q] += offset


@njit(cache=True)
def csr_pair_kernels(indptr, indices, values, norms, left, right,
                     kind, gamma, coef0, degree, offset, out):
    """out[q] = K(row left[q], row right[q]) + offset for rows of a small CSR block."""
    l1 = L1_REDUCTION[kind]
    for q in range(left.shape[0]):
        a, b = left[q], right[q]
        ia, ea = indptr[a], indptr[a + 1]
        ib, eb = indptr[b], indptr[b + 1]
        z = 0.0
        while ia < ea and ib < eb:  # merge the two sorted index lists
            fa, fb = indices[ia], indices[ib]
            if fa == fb:
                va, vb = values[ia], values[ib]
                if l1:
                    z += abs(va) + abs(vb) - abs(va - vb)
                else:
                    z += va * vb
                ia += 1
                ib += 1
            elif fa < fb:
                ia += 1
            else:
                ib += 1
        out[q] = z
        formulas.values(kind, out[q:q + 1], norms[a], norms[b:b + 1], gamma, coef0, degree)
    _finish_pairs(kind, offset, out)


@njit(cache=True)
def dense_pair_kernels(X, XT, norms, left, right, kind, gamma, coef0, degree, offset, out):
    """out[q] = K(X[left[q]], X[right[q]]) + offset for rows of a small dense block X (r, d).

    XT (d, r): X transposed, contiguous. For each run of equal ``left`` (the upper
    triangle's order) the reductions against every ``right`` of the run are accumulated
    together, one feature at a time, vectorised over the right rows; each pair still sums
    its features in order 0..d-1 with separate multiplies and adds, so a pair's value does
    not depend on which pairs it was computed with (nor on how ranks split the pairs).
    """
    d = X.shape[1]
    n = left.shape[0]
    l1 = L1_REDUCTION[kind]
    acc = np.empty(X.shape[0])
    q0 = 0
    while q0 < n:
        a = left[q0]
        q1 = q0
        lo = hi = right[q0]
        while q1 < n and left[q1] == a:
            lo, hi = min(lo, right[q1]), max(hi, right[q1])
            q1 += 1
        z = acc[lo:hi + 1]  # z[k] is the reduction of row a with row lo + k
        z[:] = 0.0
        m = z.shape[0]
        for f in range(d):
            va = X[a, f]
            if va == 0.0:  # adds exactly zero to every z[k] (z starts at +0.0): skipped, the same bits
                continue
            xt = XT[f, lo:hi + 1]
            if l1:
                for k in range(m):  # indices from range(m) are known >= 0: the loop vectorises
                    z[k] += abs(va) + abs(xt[k]) - abs(va - xt[k])
            else:
                for k in range(m):
                    z[k] += va * xt[k]
        formulas.values(kind, z, norms[a], norms[lo:hi + 1], gamma, coef0, degree)
        for q in range(q0, q1):
            out[q] = z[right[q] - lo]
        q0 = q1
    _finish_pairs(kind, offset, out)


