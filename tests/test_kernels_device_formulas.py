"""The device's kernel formulas (``kernels.device_formulas``): the numpy twins of the raw CUDA
kernels against the CPU kernels and the formulas' slow references, and the CUDA source
compiled by NVRTC where its library is installed (``pip install "ppack[cuda-check]"``: no GPU
needed), so that a source that does not compile fails here, not on the GPU."""
import ctypes
import glob
import os

import numpy as np
import pytest

from ppack.kernels.compute import KernelCompute
from ppack.kernels.device_formulas import COMPILE_OPTIONS, NumpyFormulas, cuda_source
from ppack.kernels.device_queue import DeviceQueue
from ppack.kernels.spec import KernelSpec
from ppack.packsvm.loop import upper_pairs

from helpers import make_problem
from naive import kernel_matrix

KERNELS = [("rbf", {}), ("laplacian", {}), ("linear", {}), ("poly", {"degree": 3, "coef0": 0.5}),
           ("sigmoid", {"coef0": -0.5}), ("rbf", {"offset": 1.0}), ("poly", {"degree": 1, "coef0": 0.2})]


def twin(name, params):
    spec = KernelSpec(name, gamma=0.05, **params)
    return spec, NumpyFormulas(spec, DeviceQueue(np), 1 << 20)


@pytest.mark.parametrize("name,params", KERNELS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_numpy_twins_give_the_kernel_values(name, params, dtype):
    """values (after a GEMM) or l1_values, and pair_values, against the formulas' references;
    each call counts one launch."""
    spec, formulas = twin(name, params)
    A, _ = make_problem(30, 9, seed=1)
    B, _ = make_problem(7, 9, seed=2)
    A, B = A.astype(dtype), B.astype(dtype)
    cpu = KernelCompute(spec, 9, False, dtype)
    norms_a, norms_b = cpu.row_norms(A), cpu.row_norms(B)
    out = np.empty((30, 7))
    if spec.uses_l1:
        formulas.l1_values(A, np.ascontiguousarray(B.T), out)
    else:
        formulas.values(A @ B.T, norms_a, norms_b, out)
    expected = kernel_matrix(A, B, name, gamma=0.05, **params)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * np.abs(expected).max())
    left, right = upper_pairs(7)
    pairs = np.empty(len(left))
    formulas.pair_values(np.ascontiguousarray(B.T), norms_b, left, right, pairs)
    whole = kernel_matrix(B, B, name, gamma=0.05, **params)
    np.testing.assert_allclose(pairs, whole[left, right], rtol=1e-12, atol=1e-12 * np.abs(whole).max())
    assert formulas.queue.counts["launches"] == 2


def test_the_numpy_twin_folds_and_sets_the_mirror_as_the_table_does():
    _, formulas = twin("rbf", {})
    coef = np.random.default_rng(0).normal(size=(50, 3))
    fold = np.array([[1.0, 0.0], [0.75, -3.0], [0.5, -5000.0]])  # untouched; folded; the exponent clamped
    expected = coef.copy()
    expected[:, 1] = np.ldexp(coef[:, 1] * 0.75, -3)
    expected[:, 2] = np.ldexp(coef[:, 2] * 0.5, -4000)
    formulas.fold_columns(coef, fold)
    np.testing.assert_array_equal(coef, expected)
    formulas.set_rows(coef, np.array([4, 0]), np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    assert coef[4].tolist() == [1.0, 2.0, 3.0] and coef[0].tolist() == [4.0, 5.0, 6.0]


def nvrtc_library():
    """NVRTC's shared library through ctypes (the nvidia-cuda-nvrtc wheel's, or the system's)."""
    candidates = []
    try:
        import nvidia.cuda_nvrtc

        for folder in nvidia.cuda_nvrtc.__path__:
            candidates += sorted(glob.glob(os.path.join(folder, "lib", "libnvrtc.so*")))
    except ImportError:
        pass
    candidates += ["libnvrtc.so"]
    for name in candidates:
        if "builtins" in name or ".alt." in name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    pytest.skip('NVRTC is not installed (pip install "ppack[cuda-check]")')


def nvrtc_compile(source, options=COMPILE_OPTIONS, arch="compute_80"):
    """Compile CUDA source to PTX with NVRTC; returns (ok, the compile log)."""
    lib = nvrtc_library()
    program = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(program), source.encode(), b"ppack.cu", 0, None, None) == 0
    try:
        argv = [o.encode() for o in (*options, f"--gpu-architecture={arch}")]
        status = lib.nvrtcCompileProgram(program, len(argv), (ctypes.c_char_p * len(argv))(*argv))
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(program, log)
        if status == 0:
            lib.nvrtcGetPTXSize(program, ctypes.byref(size))
            assert size.value > 0
        return status == 0, log.value.decode(errors="replace")
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))


def test_the_cuda_source_compiles_with_nvrtc():
    """Every raw kernel, for both dtypes, compiles for an A100-or-newer GPU, as CuPy will compile it;
    a source with an error does not (so this test can fail)."""
    ok, log = nvrtc_compile(cuda_source())
    assert ok, log
    for name in ("values_float", "values_double", "l1_values_float", "pair_values_double", "fold_columns",
                 "set_rows"):
        assert f'extern "C" __global__ void {name}(' in cuda_source()
    broken, log = nvrtc_compile(cuda_source().replace("fmax(na + nb", "fmax(na + nb_missing"))
    assert not broken and "nb_missing" in log
