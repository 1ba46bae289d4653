"""Where a rank's kernel work runs: ``cpu`` (numba, ``compute.KernelCompute``) or ``gpu`` (one
GPU per rank through CuPy, ``array_compute.ArrayCompute``).

CuPy is an optional extra (``pip install "ppack[gpu]"``), imported only here and only when a
run asks for the GPU: importing ppack and every CPU run never import it. A rank takes the
GPU numbered (its rank among its node's processes, ``local_rank``) modulo (the GPUs it sees),
so several ranks may share one; ``CUDA_VISIBLE_DEVICES`` narrows what it sees, as CuPy reads
it. Before any pack the GPU is probed (``probe``: a GEMM in each float type and an
elementwise kernel, brought back to the host), so a GPU that cannot compute is a one-line
error on every rank, and the device path is run once (``ArrayCompute.warm_up``), so CuPy's
kernel compiles and cuBLAS's start-up count as compile time, not as the first packs' work.
``PPACK_DEVICE_PASSES=unfused`` selects the device's earlier, unfused passes.
"""
import os

import numpy as np
from mpi4py import MPI

from ..errors import PPackError, given
from ..mpi.comm import run_collectively
from ..registry import COMPUTE_DEVICES

# The launcher's rank of this process among the job's processes on its node: Open MPI,
# SLURM's srun, MPICH's and Intel MPI's Hydra, MVAPICH2. Read without communication, so a
# model on a one-rank communicator under mpiexec takes its own GPU too.
LOCAL_RANK_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK")
# "unfused" selects the GPU path's earlier passes (``array_compute``: the formula as array
# operations) instead of the fused kernels: to compare the two, or to fall back on.
PASSES_VARIABLE = "PPACK_DEVICE_PASSES"
# Why a GPU may fail the probe, for the error message.
PROBE_HINTS = ("the CUDA libraries CuPy loads (NVRTC, cuBLAS) missing: pip install \"ppack[gpu]\" brings them; "
               "an exclusive-process GPU given to two ranks (nvidia-smi's compute mode); or two CuPy packages "
               "installed side by side (pip list | grep -i cupy)")


def local_rank(comm):
    """Collective where it must be: this process's rank among its node's processes, from the
    launcher's variables (the whole job's count, whatever ``comm`` is), else the rank among
    ``comm``'s ranks on this node (``COMM_TYPE_SHARED``), else the world rank (a lone rank
    under a launcher that sets none: right on one node)."""
    for var in LOCAL_RANK_VARIABLES:
        value = os.environ.get(var, "").strip()
        if value.isdigit():
            return int(value)
    if comm.Get_size() > 1:
        node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
        try:
            return node.Get_rank()
        finally:
            node.Free()
    return MPI.COMM_WORLD.Get_rank()


def one_line(exc):
    """An exception's type and message on one line; for CuPy's framed import errors, the
    original error it quotes (which names its own type)."""
    lines = [line.strip() for line in str(exc).splitlines()]
    lines = [line for line in lines if line and set(line) != {"="}]
    if "Original error:" in lines:
        return " ".join(lines[lines.index("Original error:") + 1:])
    return f"{type(exc).__name__}: {' '.join(lines)}" if lines else type(exc).__name__


def probe(cupy):
    """A float32 and a float64 GEMM (cuBLAS) and an elementwise kernel (compiled by NVRTC) on
    the current GPU, brought back to the host (``.get()``) and checked; raises what fails."""
    a = np.arange(6.0).reshape(2, 3) / 8.0
    expected = np.exp(-(a @ a.T))
    for dtype in (np.float32, np.float64):
        x = cupy.asarray(a.astype(dtype))
        got = cupy.exp(-(x @ x.T)).get()
        if not np.allclose(got, expected, rtol=1e-5):
            raise RuntimeError(f"a {np.dtype(dtype).name} product and exp gave {got.tolist()}, expected "
                               f"{expected.tolist()}")


def _cupy_on_a_gpu(node_rank):
    """CuPy with this rank's GPU current and probed, or a PPackError saying what is missing,
    with CuPy's own reason."""
    cpu = given("device", "cpu")
    try:
        import cupy
    except ImportError as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name == "cupy":
            raise PPackError(f'{given("device", "gpu")}: CuPy is not installed; pip install "ppack[gpu]" (or '
                             f'cupy-cuda12x / cupy-cuda13x for your CUDA), or train with {cpu}') from None
        raise PPackError(f"{given('device', 'gpu')}: CuPy does not import ({one_line(exc)}); reinstall it "
                         f'(pip install "ppack[gpu]"), or train with {cpu}') from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CuPy raises its own CUDA errors here
        raise PPackError(f"{given('device', 'gpu')}: no GPU visible to CuPy ({one_line(exc)}); check "
                         f"CUDA_VISIBLE_DEVICES and the driver, or train with {cpu}") from None
    if count < 1:
        raise PPackError(f"{given('device', 'gpu')}: no GPU visible (CUDA_VISIBLE_DEVICES?); train with {cpu}")
    index = node_rank % count
    try:
        cupy.cuda.Device(index).use()
        probe(cupy)
    except Exception as exc:  # noqa: BLE001 - CUDA, cuBLAS and NVRTC errors, or wrong values
        raise PPackError(f"{given('device', 'gpu')}: GPU {index} (of {count} visible) cannot compute "
                         f"({one_line(exc)}); check {PROBE_HINTS}; or train with {cpu}") from None
    return cupy


def gpu_array_module(comm):
    """Collective: the array module (CuPy) with this rank's GPU selected and probed; every
    rank raises the same one-line PPackError when one cannot have it."""
    return run_collectively(comm, _cupy_on_a_gpu, local_rank(comm))


def tf32_requested():
    """CUPY_TF32's value where it turns TF32 GEMMs on (CuPy: an integer above 0), else None."""
    value = os.environ.get("CUPY_TF32", "").strip()
    try:
        return value if int(value or "0") > 0 else None
    except ValueError:  # CuPy would fail on it at the first GEMM
        return value


def refuse_tf32(compute):
    """A PPackError when CUPY_TF32 would round the GEMM inputs of ``compute``'s float32 rows to
    TF32 (10-bit mantissa): squared distances, hence rbf values, lose most of their digits."""
    value = tf32_requested()
    if value is None or compute.stored.dtype != np.float32 or compute.spec.uses_l1:
        return
    raise PPackError(f"{given('device', 'gpu')}: CUPY_TF32={value} makes CuPy round float32 products to TF32 "
                     f"(10-bit mantissa), which ruins float32 {compute.spec.name} kernel values; unset it (or set "
                     "CUPY_TF32=0), or use float64 rows")


def device_passes():
    """The passes ``PPACK_DEVICE_PASSES`` asks for: "fused" (the default) or "unfused"."""
    from .array_compute import PASSES

    value = os.environ.get(PASSES_VARIABLE, "").strip() or PASSES[0]
    if value not in PASSES:
        raise PPackError(f"{PASSES_VARIABLE}={value!r}: expected one of {', '.join(PASSES)} (or unset: fused)")
    return value


def refuse_kernel_groups(device, n_kernels):
    """A one-line PPackError where ``n_kernels`` kernel groups (a grid pass's kernel settings)
    would run on a device other than the CPU: the grouped cores are the CPU's alone."""
    if device != "cpu" and n_kernels > 1:
        raise PPackError(f"{given('device', device)}: a grid over {n_kernels} kernel settings in one pass runs its "
                         "kernel sums on the CPU only; use device='cpu', or one kernel setting per pass",
                         collective=True)


def on_device(compute, device, comm):
    """Collective: ``compute`` (a KernelCompute) as it runs on ``device``: itself for "cpu", an
    ``ArrayCompute`` on this rank's GPU sharing its stored rows for "gpu", its device path
    run once (``warm_seconds``: the slowest rank's seconds, compile time)."""
    if device == "cpu":
        return compute
    if device != "gpu":
        raise PPackError(f"{given('device')}: expected one of {', '.join(COMPUTE_DEVICES)}, got {device!r}")
    refuse_kernel_groups(device, 1 if compute.groups is None else len(compute.groups.specs))
    from .array_compute import ArrayCompute

    run_collectively(comm, refuse_tf32, compute)
    passes = run_collectively(comm, device_passes)
    on_gpu = run_collectively(comm, ArrayCompute.beside, compute, gpu_array_module(comm), passes)
    on_gpu.warm_seconds = comm.allreduce(run_collectively(comm, on_gpu.warm_up), op=MPI.MAX)
    return on_gpu
