"""One numba formula per kernel of ``registry.KERNEL_TABLE``, by kernel id (its position there).

A kernel value is ``values(kind, ...)`` of the rows' reduction z and their
norms (``Kernel.reduction`` says which); for the kernels whose table entry has ``exp``, the
formula is the exp's argument and the cores take the exp afterwards, over a whole block at
once (vectorised). The cores read the table's other facts per kind from ``L1_REDUCTION`` and
``EXP_TAIL``. Adding a kernel: one table entry, one branch here.
"""
import math

from ..jit import njit
from ..registry import KERNEL_TABLE

KIND = {k.name: kind for kind, k in enumerate(KERNEL_TABLE)}
RBF, LINEAR, POLY, LAPLACIAN, SIGMOID = (KIND[name] for name in ("rbf", "linear", "poly", "laplacian", "sigmoid"))
# per kind, for the numba cores
L1_REDUCTION = tuple(k.reduction == "l1" for k in KERNEL_TABLE)
EXP_TAIL = tuple(k.exp for k in KERNEL_TABLE)


@njit(inline="always")
def values(kind, z, norm_a, norms_b, gamma, coef0, degree):
    """z (n,) becomes the kernel values of one row (norm ``norm_a``) with n rows (norms
    ``norms_b`` (n,)) whose reductions with it z holds; for the ``EXP_TAIL`` kernels the
    (non-positive) arguments of the exp. One loop per kernel, so the branch on ``kind`` is
    taken once per row, not once per value."""
    n = z.shape[0]
    if kind == RBF:
        for k in range(n):
            z[k] = -gamma * max(norm_a + norms_b[k] - 2.0 * z[k], 0.0)
    elif kind == LAPLACIAN:
        for k in range(n):
            z[k] = -gamma * max(norm_a + norms_b[k] - z[k], 0.0)
    elif kind == POLY:
        for k in range(n):
            base = gamma * z[k] + coef0
            result = base
            for _ in range(degree - 1):
                result *= base
            z[k] = result
    elif kind == SIGMOID:
        for k in range(n):
            z[k] = math.tanh(gamma * z[k] + coef0)
    # LINEAR: the reduction is the value
