"""A validated kernel: its name, parameters and facts (``registry.KERNEL_TABLE``), and the
id and scalars the numba cores take."""
from dataclasses import dataclass

from ..errors import PPackError
from ..registry import KERNEL_FACTS, KERNELS, PACKSVM_PARAMS, positive


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
            positive().check("gamma", self.gamma)  # a number: the estimator resolves "scale" and "auto"
        PACKSVM_PARAMS["degree"].rule.check("degree", self.degree)
        if not self.offset >= 0:
            raise PPackError(f"kernel offset: must be >= 0, got {self.offset}")

    @property
    def kind(self):
        """Integer id used by the numba cores: the kernel's position in ``registry.KERNEL_TABLE``."""
        return KERNELS.index(self.name)

    @property
    def facts(self):
        """The kernel's entry of ``registry.KERNEL_TABLE``."""
        return KERNEL_FACTS[self.name]

    @property
    def uses_l1(self):
        """True when the per-row norm is the L1 norm (L1 reductions) instead of the squared L2 norm."""
        return self.facts.reduction == "l1"

    def params(self):
        """The numba cores' trailing scalar arguments."""
        return self.kind, float(self.gamma), float(self.coef0), int(self.degree), float(self.offset)

    def describe(self):
        return f"{self.name}: {self.facts.formula} (gamma={self.gamma}, degree={self.degree}, coef0={self.coef0})"
