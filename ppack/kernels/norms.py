"""The norm of one dense row as the kernels need it, in one fixed summation order.

Shared by the cores (``cpu.dense_row_norms``) and by delivery, which computes a pack's norms
while it converts the rows (the same bits either way).
"""
import numpy as np
from numba import njit


@njit(inline="always")
def dense_row_norm(row, l1, sums):
    """Squared L2 (or, with ``l1``, L1) norm of a dense row (d,) as float64, with no float64
    copy of it: the row's terms in float64, term f added to running sum f % 8 in feature
    order, the eight sums then added as ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)) (a
    fixed order that vectorises). sums: a work array (8,)."""
    d = row.shape[0]
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    f = 0
    while f + 8 <= d:
        s0 += _norm_term(row[f], l1)
        s1 += _norm_term(row[f + 1], l1)
        s2 += _norm_term(row[f + 2], l1)
        s3 += _norm_term(row[f + 3], l1)
        s4 += _norm_term(row[f + 4], l1)
        s5 += _norm_term(row[f + 5], l1)
        s6 += _norm_term(row[f + 6], l1)
        s7 += _norm_term(row[f + 7], l1)
        f += 8
    sums[0], sums[1], sums[2], sums[3], sums[4], sums[5], sums[6], sums[7] = s0, s1, s2, s3, s4, s5, s6, s7
    for j in range(d - f):
        sums[j] += _norm_term(row[f + j], l1)
    return ((sums[0] + sums[1]) + (sums[2] + sums[3])) + ((sums[4] + sums[5]) + (sums[6] + sums[7]))


@njit(inline="always")
def _norm_term(value, l1):
    x = np.float64(value)
    return abs(x) if l1 else x * x
