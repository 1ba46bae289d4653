"""KernelSpec: kernel names and parameters are validated where they enter."""
import pytest

from ppack.kernels.spec import KernelSpec


def test_kernel_spec_rejects_bad_parameters():
    from ppack.errors import PPackError

    with pytest.raises(PPackError, match="unknown kernel 'precomputed'"):
        KernelSpec("precomputed")
    with pytest.raises(PPackError, match="gamma: must be a finite number > 0"):
        KernelSpec("rbf", gamma=-1.0)
    with pytest.raises(PPackError, match="degree: must be an integer >= 1"):
        KernelSpec("poly", degree=0)
