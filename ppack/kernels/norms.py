"""Row norms as the kernels need them, each in one fixed summation order.

Shared by the cores (``cpu.dense_row_norms``, ``cpu.csr_row_norms``) and by delivery, which
computes a pack's norms while it converts the rows (the same bits either way).
"""
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from ..jit import njit

LANES = 8  # the running sums of a dense row's norm


@njit(inline="always")
def dense_row_norm(row, l1, sums):
    """Squared L2 (or, with ``l1``, L1) norm of a dense row (d,) as float64, with no float64
    copy of it: the row's terms in float64, term f added to running sum f % 8 in feature
    order, the eight sums then added as ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)) (a
    fixed order that vectorises). sums: a work array (8,)."""
    d = row.shape[0]
    lanes = _lane_sums(row, l1)
    for j in range(LANES):
        sums[j] = lanes[j]
    f = d - d % LANES
    for j in range(d - f):
        sums[j] += _norm_term(row[f + j], l1)
    return ((sums[0] + sums[1]) + (sums[2] + sums[3])) + ((sums[4] + sums[5]) + (sums[6] + sums[7]))


def _lane_sums(row, l1):
    """The eight running sums of ``dense_row_norm`` over the row's whole groups of eight
    features (a tuple of 8 float64)."""


@overload(_lane_sums)
def _lane_sums_overload(row, l1):
    if row.layout == "C" and row.dtype in (types.float32, types.float64):
        return lambda row, l1: _lane_sums_simd(row, l1)  # noqa: E731

    def scalar(row, l1):
        s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
        f = 0
        while f + LANES <= row.shape[0]:
            s0 += _norm_term(row[f], l1)
            s1 += _norm_term(row[f + 1], l1)
            s2 += _norm_term(row[f + 2], l1)
            s3 += _norm_term(row[f + 3], l1)
            s4 += _norm_term(row[f + 4], l1)
            s5 += _norm_term(row[f + 5], l1)
            s6 += _norm_term(row[f + 6], l1)
            s7 += _norm_term(row[f + 7], l1)
            f += LANES
        return s0, s1, s2, s3, s4, s5, s6, s7
    return scalar


@intrinsic
def _lane_sums_simd(typingctx, row, l1):
    """``_lane_sums`` of a contiguous float row, the eight running sums held in one vector of
    eight float64: each lane takes the same float64 conversion, product (or magnitude) and
    sum, in the same order, as its scalar twin, so the bits are the same. Written out because
    numba leaves LLVM's SLP vectoriser off (it miscompiled), and LLVM keeps the eight scalar
    sums scalar without it: 35 of a pack's 49 us of conversion with norms at d = 784."""
    if not (isinstance(row, types.Array) and row.ndim == 1 and row.layout == "C"
            and row.dtype in (types.float32, types.float64) and isinstance(l1, types.Boolean)):
        return None
    lanes_type = types.UniTuple(types.float64, LANES)

    def codegen(context, builder, signature, args):
        row_value, l1_value = args
        array = context.make_array(row)(context, builder, row_value)
        item = context.get_data_type(row.dtype)
        vector = ir.VectorType(ir.DoubleType(), LANES)
        n = builder.extract_value(array.shape, 0)
        groups = builder.sdiv(n, ir.Constant(n.type, LANES))
        total = cgutils.alloca_once_value(builder, ir.Constant(vector, [0.0] * LANES))
        fabs = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vector, [vector]),
                                              f"llvm.fabs.v{LANES}f64")
        with cgutils.for_range(builder, groups) as loop:
            at = builder.gep(array.data, [builder.mul(loop.index, ir.Constant(n.type, LANES))])
            x = builder.load(builder.bitcast(at, ir.VectorType(item, LANES).as_pointer()),
                             align=row.dtype.bitwidth // 8)
            if row.dtype == types.float32:
                x = builder.fpext(x, vector)
            term = builder.select(l1_value, builder.call(fabs, [x]), builder.fmul(x, x))
            builder.store(builder.fadd(builder.load(total), term), total)
        sums = builder.load(total)
        return cgutils.pack_array(builder, [builder.extract_element(sums, ir.Constant(ir.IntType(32), j))
                                            for j in range(LANES)])
    return lanes_type(row, l1), codegen


@njit(inline="always")
def _norm_term(value, l1):
    x = np.float64(value)
    return abs(x) if l1 else x * x


@njit(cache=True)
def pairwise_sum(v, a, n):
    """v[a:a+n] (float64) summed in numpy's pairwise order: a stretch of more than 128 terms is
    halved (the first half a multiple of 8), one of at most 128 is added in eight running sums
    (one by one below 8). Without recursion (numba cannot always reload a cached function that
    calls itself: the process crashed): the halves are walked depth first on a stack."""
    if n <= 128:
        return _block_sum(v, a, n)
    # a stretch on the stack: its start and length, and, once its first half is summed, that sum
    starts, lengths = np.empty(64, dtype=np.int64), np.empty(64, dtype=np.int64)
    firsts, first_done = np.empty(64), np.zeros(64, dtype=np.bool_)
    starts[0], lengths[0], top = a, n, 0
    while True:
        if lengths[top] > 128:  # descend into its first half
            half = lengths[top] // 2
            half -= half % 8
            starts[top + 1], lengths[top + 1], first_done[top + 1] = starts[top], half, False
            top += 1
            continue
        total = _block_sum(v, starts[top], lengths[top])
        while True:  # hand the sum up: a first half waits for its second, a second completes its stretch
            top -= 1
            if top < 0:
                return total
            if first_done[top]:
                total = firsts[top] + total
                continue
            firsts[top], first_done[top] = total, True
            half = lengths[top] // 2
            half -= half % 8
            starts[top + 1], lengths[top + 1], first_done[top + 1] = starts[top] + half, lengths[top] - half, False
            top += 1
            break


@njit(cache=True, inline="always")
def _block_sum(v, a, n):
    """numpy's sum of v[a:a+n], n <= 128: one by one below 8 terms, else in eight running sums."""
    if n < 8:
        total = 0.0
        for i in range(a, a + n):
            total += v[i]
        return total
    r0, r1, r2, r3 = v[a], v[a + 1], v[a + 2], v[a + 3]
    r4, r5, r6, r7 = v[a + 4], v[a + 5], v[a + 6], v[a + 7]
    i = 8
    while i < n - n % 8:
        r0 += v[a + i]
        r1 += v[a + i + 1]
        r2 += v[a + i + 2]
        r3 += v[a + i + 3]
        r4 += v[a + i + 4]
        r5 += v[a + i + 5]
        r6 += v[a + i + 6]
        r7 += v[a + i + 7]
        i += 8
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(i, n):
        total += v[a + i]
    return total


@njit(cache=True)
def csr_row_norms(indptr, values, l1):
    """Squared L2 (or, with ``l1``, L1) norm of every CSR row, (n,) float64: each row's terms
    summed as ``np.add.reduceat`` sums them (its first term, plus the rest pairwise), so the
    norms are numpy's bit for bit."""
    n = indptr.shape[0] - 1
    terms = np.empty(values.shape[0])
    for e in range(values.shape[0]):
        x = np.float64(values[e])
        terms[e] = abs(x) if l1 else x * x
    out = np.zeros(n)
    for k in range(n):
        a, b = indptr[k], indptr[k + 1]
        if b > a:
            out[k] = terms[a] + pairwise_sum(terms, a + 1, b - a - 1)
    return out
