"""A validated kernel: its name (from the registry) turned into the id the numba cores take.

Every kernel is a function of one pairwise "reduction" of two rows (their dot product,
or for laplacian their L1 overlap) and of a per-row norm, so the numba cores only see an
integer kernel id and three floats.
"""
from dataclasses import dataclass

from ..errors import PPackError
from ..registry import KERNELS, PACKSVM_PARAMS

# The numba cores' integer id of each kernel name (in the registry's order).
RBF, LINEAR, POLY, LAPLACIAN = range(4)
KERNEL_IDS = dict(zip(KERNELS, (RBF, LINEAR, POLY, LAPLACIAN)))
FORMULAS = {
    "rbf": "exp(-gamma * ||x - z||^2)",
    "linear": "<x, z>",
    "poly": "(gamma * <x, z> + coef0)^degree",
    "laplacian": "exp(-gamma * ||x - z||_1)",
}


@dataclass(frozen=True)
class KernelSpec:
    """A validated kernel: ``name`` with ``gamma``, ``degree`` and ``coef0``.

    ``offset`` is added to every kernel value; 1.0 gives the bias term of the paper's
    section V (b regularised together with w, as an extra constant feature).
    """

    name: str = "rbf"
    gamma: float = 1.0
    degree: int = 3
    coef0: float = 0.0
    offset: float = 0.0

    def __post_init__(self):
        if self.name not in KERNELS:
            raise PPackError(f"kernel: unknown kernel {self.name!r}; expected one of {', '.join(KERNELS)}")
        if self.name != "linear":
            PACKSVM_PARAMS["gamma"].rule.check("gamma", self.gamma)
        PACKSVM_PARAMS["degree"].rule.check("degree", self.degree)
        if not self.offset >= 0:
            raise PPackError(f"kernel offset: must be >= 0, got {self.offset}")

    @property
    def kind(self):
        """Integer id used by the numba cores."""
        return KERNEL_IDS[self.name]

    @property
    def uses_l1(self):
        """True when the per-row norm is the L1 norm (laplacian) instead of the squared L2 norm."""
        return self.kind == LAPLACIAN

    def params(self):
        """The numba cores' trailing scalar arguments."""
        return self.kind, float(self.gamma), float(self.coef0), int(self.degree), float(self.offset)

    def describe(self):
        return f"{self.name}: {FORMULAS[self.name]} (gamma={self.gamma}, degree={self.degree}, coef0={self.coef0})"
