"""Kernel functions: the name registry and the numba partial-kernel-sum cores."""
from .spec import KERNELS, KernelSpec

__all__ = ["KERNELS", "KernelSpec"]
