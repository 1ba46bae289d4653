"""Where a rank's kernel work runs: ``cpu`` (numba, ``compute.KernelCompute``) or ``gpu`` (one
GPU per rank through CuPy, ``array_compute.ArrayCompute``).

CuPy is an optional extra (``pip install "ppack[gpu]"``), imported only here and only when a
run asks for the GPU: importing ppack and every CPU run never import it. A rank takes the
GPU numbered (its rank among its node's ranks) modulo (the GPUs it sees), so several ranks
may share one; ``CUDA_VISIBLE_DEVICES`` narrows what it sees, as CuPy reads it.
"""
from mpi4py import MPI

from ..errors import PPackError, given
from ..mpi.comm import run_collectively
from ..registry import COMPUTE_DEVICES


def _cupy_on_a_gpu(node_rank):
    """CuPy with this rank's GPU current, or a PPackError saying what is missing."""
    try:
        import cupy
    except ImportError:
        raise PPackError(f'{given("device", "gpu")}: CuPy is not installed; pip install "ppack[gpu]" (or '
                         f'cupy-cuda12x / cupy-cuda13x for your CUDA), or train with {given("device", "cpu")}') \
            from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CuPy raises its own CUDA errors here
        raise PPackError(f"{given('device', 'gpu')}: no GPU visible to CuPy ({exc}); check CUDA_VISIBLE_DEVICES "
                         f"and the driver, or train with {given('device', 'cpu')}") from None
    if count < 1:
        raise PPackError(f"{given('device', 'gpu')}: no GPU visible (CUDA_VISIBLE_DEVICES?); train with "
                         f"{given('device', 'cpu')}")
    cupy.cuda.Device(node_rank % count).use()
    return cupy


def gpu_array_module(comm):
    """Collective: the array module (CuPy) with this rank's GPU selected; every rank raises
    the same one-line PPackError when one cannot have it."""
    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank()) if comm.Get_size() > 1 else None
    node_rank = 0 if node is None else node.Get_rank()
    if node is not None:
        node.Free()
    return run_collectively(comm, _cupy_on_a_gpu, node_rank)


def on_device(compute, device, comm):
    """Collective: ``compute`` (a KernelCompute) as it runs on ``device``: itself for "cpu", an
    ``ArrayCompute`` on this rank's GPU sharing its stored rows for "gpu"."""
    if device == "cpu":
        return compute
    if device != "gpu":
        raise PPackError(f"{given('device')}: expected one of {', '.join(COMPUTE_DEVICES)}, got {device!r}")
    from .array_compute import ArrayCompute

    return ArrayCompute.beside(compute, gpu_array_module(comm))
