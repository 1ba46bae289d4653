"""Where the kernel work runs (``kernels.device``), with a fake CuPy where only a GPU could show
it: the probe that finds a GPU that cannot compute before any pack, in one line with CuPy's
reason; the node-local rank that picks the GPU; CUPY_TF32 refused for float32 rows; the
device path's warm-up, counted as compile time."""
import importlib.abc
import sys
import time
import types

import numpy as np
import pytest
from mpi4py import MPI

from ppack import PackSVC
from ppack.errors import PPackError
from ppack.kernels import device as device_module
from ppack.kernels.array_compute import ArrayCompute
from ppack.kernels.compute import KernelCompute
from ppack.kernels.device import LOCAL_RANK_VARIABLES, gpu_array_module, local_rank, on_device
from ppack.kernels.spec import KernelSpec

from helpers import make_problem

# CuPy's import error, framed as CuPy frames it
FRAMED = ("\n================================================================\nFailed to import CuPy.\n\n"
          "If you installed CuPy via wheels (cupy-cudaXXX or cupy-rocm-X-X), make sure that the package matches "
          "with the version of CUDA or ROCm installed.\n\nOriginal error:\n  ImportError: libcuda.so.1: cannot "
          "open shared object file: No such file or directory\n"
          "================================================================\n")


class CUDARuntimeError(RuntimeError):
    """Named as CuPy's."""


class DeviceArray(np.ndarray):
    """numpy's array with CuPy's ``get``."""

    def get(self):
        return np.asarray(self)


class NoBlas(DeviceArray):
    """An array whose products fail as they do without cuBLAS's library."""

    def __matmul__(self, other):
        raise CUDARuntimeError("CUBLAS_STATUS_NOT_INITIALIZED: libcublas.so.12: cannot open shared object file")


def fake_cupy(count=2, fail=None, used=None):
    """A module standing in for CuPy: ``count`` GPUs; ``used`` records the GPU made current;
    ``fail``: "use" (an exclusive-process GPU taken), "gemm" (no cuBLAS), "compile" (no NVRTC),
    "values" (wrong values, as two CuPy packages side by side can give)."""
    cupy = types.ModuleType("cupy")

    class Device:
        def __init__(self, index):
            self.index = index

        def use(self):
            if fail == "use":
                raise CUDARuntimeError("cudaErrorDevicesUnavailable: CUDA-capable device(s) is/are busy or "
                                       "unavailable")
            if used is not None:
                used.append(self.index)

    def exp(x):
        if fail == "compile":
            raise RuntimeError("CompileException: libnvrtc.so.12: cannot open shared object file")
        return np.zeros_like(x) if fail == "values" else np.exp(x)

    cupy.asarray = lambda a: np.asarray(a).view(NoBlas if fail == "gemm" else DeviceArray)
    cupy.exp = exp
    cupy.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=lambda: count), Device=Device)
    cupy.__getattr__ = lambda name: getattr(np, name)  # the rest of the array module: numpy's
    return cupy


@pytest.fixture
def no_launcher(monkeypatch):
    for var in LOCAL_RANK_VARIABLES:
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize("fail,reason", [
    ("use", "cudaErrorDevicesUnavailable: CUDA-capable device"),
    ("gemm", "CUBLAS_STATUS_NOT_INITIALIZED: libcublas.so.12"),
    ("compile", "libnvrtc.so.12: cannot open"),
    ("values", r"a float32 product and exp gave \[\[0.0"),
])
def test_a_gpu_that_cannot_compute_is_a_one_line_error_with_cupys_reason(monkeypatch, no_launcher, fail, reason):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(fail=fail))
    with pytest.raises(PPackError, match=r"^device='gpu': GPU 0 \(of 2 visible\) cannot compute \(.*" + reason) \
            as info:
        gpu_array_module(MPI.COMM_SELF)
    assert "\n" not in str(info.value) and info.value.collective
    assert "NVRTC, cuBLAS" in str(info.value) and "exclusive-process" in str(info.value)


def test_training_meets_the_probes_error_before_any_pack(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(fail="compile"))
    packs = []
    X, y = make_problem(60, 4)
    with pytest.raises(PPackError, match="cannot compute .*libnvrtc"):
        PackSVC(device="gpu", iterations=200, comm=MPI.COMM_SELF, progress=lambda *a: packs.append(1)).fit(X, y)
    assert packs == []


def test_cupys_import_error_gives_its_original_reason_on_one_line(monkeypatch):
    class Broken(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "cupy":
                raise ImportError(FRAMED)

    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Broken(), *sys.meta_path])
    with pytest.raises(PPackError, match=r"^device='gpu': CuPy does not import \(ImportError: "
                                         r"libcuda.so.1: cannot open shared object file: No such file or "
                                         r"directory\); reinstall it") as info:
        gpu_array_module(MPI.COMM_SELF)
    assert "\n" not in str(info.value)


def test_a_gpu_that_computes_takes_the_whole_device_path(monkeypatch, no_launcher):
    """A working (fake) CuPy: probed, its GPU current, the device path warmed on it, and the
    model the numpy stand-in trains."""
    X, y = make_problem(200, 5, seed=7)
    params = {"gamma": 0.3, "C": 5.0, "iterations": 400, "pack": 50, "dtype": "float64", "device": "gpu",
              "comm": MPI.COMM_SELF}
    real = device_module.gpu_array_module
    monkeypatch.setattr(device_module, "gpu_array_module", lambda comm: np)
    expected = PackSVC(**params).fit(X, y).decision_function(X)
    monkeypatch.setattr(device_module, "gpu_array_module", real)
    used = []
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(used=used))
    model = PackSVC(**params).fit(X, y)
    assert used == [0] and model.training_["seconds"]["compile"] > 0.0
    np.testing.assert_array_equal(model.decision_function(X), expected)


@pytest.mark.parametrize("var", LOCAL_RANK_VARIABLES)
def test_the_launchers_local_rank_picks_the_gpu_of_a_one_rank_communicator(monkeypatch, no_launcher, var):
    """Four ranks on a node, each training on its own one-rank communicator: the launcher's
    local rank, not 0 for all, picks the GPU (modulo the GPUs seen)."""
    monkeypatch.setenv(var, "3")
    assert local_rank(MPI.COMM_SELF) == 3
    used = []
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(count=2, used=used))
    gpu_array_module(MPI.COMM_SELF)
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(count=4, used=used))
    gpu_array_module(MPI.COMM_SELF)
    assert used == [1, 3]


def test_without_a_launcher_a_lone_rank_takes_its_world_rank(monkeypatch, no_launcher):
    monkeypatch.setenv("SLURM_LOCALID", "")  # set but empty: ignored
    assert local_rank(MPI.COMM_SELF) == MPI.COMM_WORLD.Get_rank()


@pytest.mark.mpi(min_size=2)
def test_without_a_launcher_the_ranks_on_a_node_take_their_node_rank(monkeypatch, no_launcher):
    comm = MPI.COMM_WORLD
    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    expected = node.Get_rank()
    node.Free()
    assert local_rank(comm) == expected


def a_compute(kernel="rbf", dtype=np.float32, n=30, d=5):
    compute = KernelCompute(KernelSpec(kernel, 0.5), d, False, dtype)
    compute.store(make_problem(n, d, seed=1)[0].astype(dtype))
    return compute


@pytest.mark.parametrize("value", ["1", "2", "yes"])
def test_cupy_tf32_is_refused_for_float32_rows(monkeypatch, value):
    monkeypatch.setattr(device_module, "gpu_array_module", lambda comm: np)
    monkeypatch.setenv("CUPY_TF32", value)
    with pytest.raises(PPackError, match=rf"^device='gpu': CUPY_TF32={value} makes CuPy round float32 products "
                                         r"to TF32 .* float32 rbf kernel values; unset it") as info:
        on_device(a_compute(), "gpu", MPI.COMM_SELF)
    assert "\n" not in str(info.value)
    X, y = make_problem(60, 4)
    with pytest.raises(PPackError, match="CUPY_TF32"):
        PackSVC(device="gpu", dtype="float32", iterations=100, comm=MPI.COMM_SELF).fit(X, y)


def test_cupy_tf32_is_left_alone_where_it_cannot_touch_the_values(monkeypatch):
    """float64 rows, L1 kernels (no GEMM) and CUPY_TF32=0 or unset take the device."""
    monkeypatch.setattr(device_module, "gpu_array_module", lambda comm: np)
    monkeypatch.setenv("CUPY_TF32", "1")
    for compute in (a_compute(dtype=np.float64), a_compute("laplacian")):
        assert isinstance(on_device(compute, "gpu", MPI.COMM_SELF), ArrayCompute)
    for value in ("0", ""):
        monkeypatch.setenv("CUPY_TF32", value)
        assert isinstance(on_device(a_compute(), "gpu", MPI.COMM_SELF), ArrayCompute)


@pytest.mark.parametrize("kernel,dtype", [("rbf", np.float32), ("laplacian", np.float64)])
def test_on_device_runs_the_device_path_once_on_a_twin(monkeypatch, kernel, dtype):
    """One tiny partial_sums and pair_kernels of the run's kernel and dtype, on a twin: the
    compute returned has sent nothing and holds no device copy yet."""
    monkeypatch.setattr(device_module, "gpu_array_module", lambda comm: np)
    calls = []
    for name in ("partial_sums", "pair_kernels"):
        real = getattr(ArrayCompute, name)

        def counted(self, *args, _real=real, _name=name, **kwargs):
            calls.append((_name, self.spec.name, self.stored.dtype))
            return _real(self, *args, **kwargs)
        monkeypatch.setattr(ArrayCompute, name, counted)
    compute = a_compute(kernel, dtype)
    device = on_device(compute, "gpu", MPI.COMM_SELF)
    assert calls == [("partial_sums", kernel, dtype), ("pair_kernels", kernel, dtype)]
    assert device.warm_seconds > 0.0 and compute.warm_seconds == 0.0
    assert device.stored is compute.stored and sum(device.sent.values()) == 0 and device._rows is None


def test_the_warm_up_is_counted_as_compile_time(monkeypatch):
    """A device warm-up made to take 0.3 s: compile has it besides numba's (which
    on_kernels_ready reports alone); total leaves it out."""
    monkeypatch.setattr(device_module, "gpu_array_module", lambda comm: np)
    real, warmed = ArrayCompute.warm_up, []

    def slow(self):
        warmed.append(self)
        time.sleep(0.3)
        return real(self) + 0.3
    monkeypatch.setattr(ArrayCompute, "warm_up", slow)
    X, y = make_problem(150, 5, seed=42)
    numba_ready = []
    start = time.perf_counter()
    model = PackSVC(gamma=0.2, C=5.0, iterations=300, pack=50, device="gpu", comm=MPI.COMM_SELF).fit(
        X, y, on_kernels_ready=numba_ready.append)
    wall = time.perf_counter() - start
    seconds = model.training_["seconds"]
    assert len(warmed) == 1 and len(numba_ready) == 1
    assert seconds["compile"] >= numba_ready[0] + 0.3
    assert seconds["compile"] + seconds["total"] <= wall
