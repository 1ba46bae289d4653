"""The device's kernel formulas (``kernels.device_formulas``): the numpy twins of the raw CUDA
kernels against the CPU kernels and the formulas' slow references, and the CUDA source
compiled by NVRTC where its library is installed (``pip install "ppack[cuda-check]"``: no GPU
needed), so that a source that does not compile fails here, not on the GPU."""
import ctypes
import glob
import os
import re
import sys
import types

import numpy as np
import pytest

from ppack.kernels.compute import KernelCompute
from ppack.kernels.device_formulas import COMPILE_OPTIONS, NumpyFormulas, cuda_source
from ppack.kernels.device_queue import DeviceQueue
from ppack.kernels.spec import KernelSpec
from ppack.packsvm.loop import upper_pairs
from ppack.registry import KERNELS as KERNELS_BY_KIND

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
    """Every raw kernel, for both dtypes, compiles for an A100 and an H100 with CuPy's options;
    a source with an error does not (so this test can fail)."""
    for arch in ("compute_80", "compute_90"):  # A100, H100
        ok, log = nvrtc_compile(cuda_source(), arch=arch)
        assert ok, log
    for name in ("values_float", "values_double", "l1_values_float", "pair_values_double", "fold_columns",
                 "set_rows"):
        assert f'extern "C" __global__ void {name}(' in cuda_source()
    broken, log = nvrtc_compile(cuda_source().replace("fmax(na + nb", "fmax(na + nb_missing"))
    assert not broken and "nb_missing" in log


# --- the CuPy side, with a fake CuPy: every launch's arguments against the CUDA signatures

C_ARRAY_TYPES = {"float": np.float32, "double": np.float64, "long long": np.int64}
C_SCALAR_TYPES = {"long long": np.int64, "int": np.int32, "double": np.float64}


def signatures(source):
    """{kernel name: [(C type, is a pointer), ...]} of the source's extern "C" kernels."""
    found = {}
    for name, params in re.findall(r'extern "C" __global__ void (\w+)\(([^)]*)\)', source):
        found[name] = [(re.sub(r"\bconst\b|\*|\b\w+$", "", p.strip()).strip(), "*" in p) for p in params.split(",")]
    return found


class FakeDeviceArray(np.ndarray):
    """numpy's array with CuPy's ``data.ptr``."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data)


def run_like_cuda(name, args):
    """What kernel ``name`` computes, by its numpy twin, from the launch's arguments."""
    def spec_of(kind, gamma, coef0, degree, offset):
        return KernelSpec(KERNELS_BY_KIND[int(kind)], gamma=float(gamma) or 1.0, degree=int(degree),
                          coef0=float(coef0), offset=float(offset))
    plain = [np.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    if name.startswith("values_"):
        dots, na, nb, a, b, *params, out = plain
        assert dots.size == a * b and out.size == a * b and na.size >= a and nb.size >= b
        NumpyFormulas(spec_of(*params), DeviceQueue(np), 0).values(dots.reshape(a, b), na[:a], nb[:b],
                                                                   out.reshape(a, b))
    elif name.startswith("l1_values_"):
        rows, columns, a, b, d, *params, out = plain
        assert rows.size == a * d and columns.size == d * b and out.size == a * b
        NumpyFormulas(spec_of(*params), DeviceQueue(np), 0).l1_values(rows.reshape(a, d), columns.reshape(d, b),
                                                                      out.reshape(a, b))
    elif name.startswith("pair_values_"):
        columns, d, r, norms, left, right, q, l1, *params, out = plain
        spec = spec_of(*params)
        assert columns.size == d * r and norms.size == r and left.size == q == right.size == out.size
        assert bool(l1) == spec.uses_l1
        NumpyFormulas(spec, DeviceQueue(np), 0).pair_values(columns.reshape(d, r), norms, left, right, out)
    elif name == "fold_columns":
        coef, n, K, fold = plain
        assert coef.size == n * K and fold.size == 2 * K
        NumpyFormulas(None, DeviceQueue(np), 0).fold_columns(coef.reshape(n, K), fold.reshape(K, 2))
    elif name == "set_rows":
        coef, K, slots, m, values = plain
        assert slots.size == m and values.size == m * K and coef.shape[1] == K and slots.max() < coef.shape[0]
        NumpyFormulas(None, DeviceQueue(np), 0).set_rows(coef, slots, values.reshape(m, K))
    else:
        raise AssertionError(f"no kernel {name}")


def fake_cupy(launched):
    """A CuPy of numpy arrays whose raw kernels check each launch against the CUDA source's
    signature (argument count, C types, contiguous arrays of the right dtype), then compute
    the twin's values; copies by pointer, as cudaMemcpyAsync does."""
    def module(code, options):
        found = signatures(code)
        assert "--fmad=false" in options

        def get_function(name):
            def launch(grid, block, args):
                expected = found[name]
                assert len(args) == len(expected), (name, len(args), len(expected))
                for arg, (ctype, pointer) in zip(args, expected):
                    if pointer:
                        assert isinstance(arg, FakeDeviceArray) and arg.flags.c_contiguous, (name, ctype)
                        assert arg.dtype == C_ARRAY_TYPES[ctype], (name, ctype, arg.dtype)
                    else:
                        assert type(arg) is C_SCALAR_TYPES[ctype], (name, ctype, type(arg))
                assert len(grid) == 1 and 1 <= grid[0] <= 65536 and block == (256,)
                launched.append(name)
                run_like_cuda(name, args)
            return launch
        return types.SimpleNamespace(get_function=get_function)

    def device(array):
        return np.asarray(array).view(FakeDeviceArray)

    runtime = types.SimpleNamespace(memcpyHostToDevice=1, memcpyDeviceToHost=2,
                                    memcpyAsync=lambda dst, src, n, kind, stream: ctypes.memmove(dst, src, n))
    stream = types.SimpleNamespace(use=lambda: None, synchronize=lambda: launched.append("sync"), ptr=0)
    cupy = types.ModuleType("cupy")
    cupy.RawModule = lambda code, options: module(code, options)
    cupy.cuda = types.SimpleNamespace(runtime=runtime, Stream=lambda non_blocking: stream)
    cupy.empty = lambda shape, dtype: device(np.empty(shape, dtype=dtype))
    cupy.asarray = lambda a: device(np.array(a))
    cupy.matmul = lambda a, b, out: out.__setitem__(Ellipsis, a @ b)  # as the stand-in's queue multiplies
    return cupy


@pytest.mark.parametrize("name,params", KERNELS[:5])
def test_cupys_launches_match_the_cuda_signatures_and_train_the_stand_ins_model(monkeypatch, name, params):
    """Training through the CuPy side of the device path (raw kernels, the stream, pinned
    buffers, pointer copies) on a fake CuPy that checks every launch against the CUDA
    source: the stand-in's model, bit for bit, pipelined and not."""
    from mpi4py import MPI

    from ppack import PackSVC
    from ppack.kernels import device as device_module

    launched = []
    cupy = fake_cupy(launched)
    monkeypatch.setitem(sys.modules, "cupyx", types.SimpleNamespace(
        empty_pinned=lambda n, dtype: np.empty(n, dtype=dtype)))
    X, y = make_problem(300, 6, seed=4)
    for pipeline in ("off", "on"):
        fit = dict(kernel=name, gamma=0.2, C=5.0, iterations=500, pack=100, dtype="float32", pipeline=pipeline,
                   comm=MPI.COMM_SELF, device="gpu", **params)
        monkeypatch.setattr(device_module, "gpu_array_module", lambda comm: np)
        expected = PackSVC(**fit).fit(X, y).decision_function(X)
        monkeypatch.setattr(device_module, "gpu_array_module", lambda comm: cupy)
        got = PackSVC(**fit).fit(X, y).decision_function(X)
        np.testing.assert_array_equal(got, expected)
    kernels = set(launched) - {"sync"}
    assert {"set_rows", "pair_values_float"} <= kernels
    assert ("l1_values_float" if name == "laplacian" else "values_float") in kernels
    # a scale fold (rare in training): the mirror folded on the device as the table folds
    from ppack.kernels.array_compute import ArrayCompute
    from ppack.kernels.block import RowBlock

    spec = KernelSpec(name, gamma=0.2, **params)
    cpu = KernelCompute(spec, 6, False, np.float64)
    cpu.store(X[:50])
    device = ArrayCompute.beside(cpu, cupy)
    coef = np.random.default_rng(1).normal(size=(50, 3))
    block = RowBlock.from_rows(X[50:60], np.zeros(10), 6)
    device.partial_sums(coef, block, cpu.row_norms(block), np.zeros((3, 10)), mirrored=True)
    fold = np.array([[0.5, -2.0], [1.0, 0.0], [0.75, 3.0]])
    table = types.SimpleNamespace(n=50, coef=coef.copy(), key_slots=types.SimpleNamespace(lookup=lambda ids: ids))
    for c in (0, 2):
        table.coef[:, c] = np.ldexp(coef[:, c] * fold[c, 0], int(fold[c, 1]))
    table.coef[7] = [1.0, 2.0, 3.0]
    device.after_pack(table, np.array([7]), fold)
    assert launched[-2:] == ["fold_columns", "set_rows"]
    np.testing.assert_array_equal(np.asarray(device._coef[:50]), table.coef)
