"""Whether a compiled pack loop can make its own collectives: MPI_Allreduce called from numba.

    .venv/bin/mpiexec -n 2 .venv/bin/python bench/mpi_from_numba.py
    .venv/bin/mpiexec -n 2 .venv/bin/python bench/mpi_from_numba.py --calls 1000 --stream-mb 64

A pack loop compiled whole would leave Python only at the events (a checkpoint, a progress
report, the end), so it must call the two Allreduce calls of a pack itself. This calls the MPI
library that mpi4py loaded (found in the process's memory map, Linux) from numba, through a
symbol registered with llvmlite, on a pack's two buffers: collective 1's bytes (the digits'
100 rows of 784 uint8 with labels) and collective 2's float64 sums (ten columns, the pair
kernels of 100 rows). It checks every sum, whether a second process loads the compiled code
from numba's cache, and times one call from numba against mpi4py's from Python, warm (back to
back) and cold (after a pass over ``--stream-mb`` of memory, as a pack's collectives run after
its kernel sums have emptied the caches): median microseconds a call. The handles are the
MPI library's own (``MPI._handleof``), passed as pointer-sized integers, which fits both MPICH
(ints) and Open MPI (pointers). Results go to bench/results/mpi_from_numba.json (rank 0).
"""
import argparse
import ctypes
import json
import re
import time
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
from mpi4py import MPI
from numba import njit, types

ROOT = Path(__file__).resolve().parents[1]


def mpi_library():
    """The MPI library mpi4py loaded (its path in this process's memory map)."""
    paths = sorted(set(re.findall(r"\S*libmpi[^/\s]*\.so[.\d]*", Path("/proc/self/maps").read_text())))
    if not paths:
        raise SystemExit("no libmpi in this process's memory map")
    return ctypes.CDLL(paths[0])


llvm.add_symbol("MPI_Allreduce", ctypes.cast(mpi_library().MPI_Allreduce, ctypes.c_void_p).value)
# int MPI_Allreduce(const void *send, void *recv, int count, MPI_Datatype, MPI_Op, MPI_Comm)
_allreduce = types.ExternalFunction("MPI_Allreduce", types.int32(types.intp, types.intp, types.int32, types.intp,
                                                                 types.intp, types.intp))
IN_PLACE = -1  # MPI_IN_PLACE in MPICH and Open MPI: (void *) -1 (the exact sums below check it)


@njit(cache=True)
def sum_in_place(buf, datatype, op, comm):
    """One MPI_Allreduce(MPI_IN_PLACE, buf, ...) of a contiguous array: MPI's error code."""
    return _allreduce(IN_PLACE, buf.ctypes.data, buf.size, datatype, op, comm)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--stream-mb", type=int, default=64)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "mpi_from_numba.json"))
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    handles = {"comm": MPI._handleof(comm), "sum": MPI._handleof(MPI.SUM),
               "byte": MPI._handleof(MPI.UNSIGNED_CHAR), "double": MPI._handleof(MPI.DOUBLE)}
    buffers = {"collective 1 (uint8)": (np.zeros(100 * 785, dtype=np.uint8), handles["byte"]),
               "collective 2 (float64)": (np.zeros(10 * 100 + 100 * 101 // 2 + 100 + 3 * size + size), handles["double"])}

    start = time.perf_counter()
    for buf, datatype in buffers.values():
        sum_in_place(buf, datatype, handles["sum"], handles["comm"])
    first_call = time.perf_counter() - start
    hits = sum(sum_in_place.stats.cache_hits.values())

    for buf, datatype in buffers.values():  # each rank writes its own entries: the sums are exact
        buf[:] = 0
        buf[rank::size] = rank + 1
        assert sum_in_place(buf, datatype, handles["sum"], handles["comm"]) == 0
        expected = np.zeros_like(buf)
        for k in range(size):
            expected[k::size] = k + 1
        assert np.array_equal(buf, expected), "a sum from numba differs from the expected"

    stream = np.ones(args.stream_mb * 2 ** 20 // 8)
    results = {}
    for name, (buf, datatype) in buffers.items():
        for cold in (False, True):
            for caller in ("numba", "mpi4py"):
                times = []
                for _ in range(args.calls):
                    if cold:
                        stream.sum()
                    comm.Barrier()
                    t = time.perf_counter()
                    if caller == "numba":
                        sum_in_place(buf, datatype, handles["sum"], handles["comm"])
                    else:
                        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
                    times.append(time.perf_counter() - t)
                us = float(np.median(times) * 1e6)
                results[f"{name}, {'cold' if cold else 'warm'}, {caller}"] = us
                if rank == 0:
                    print(f"{name:24s} {'cold' if cold else 'warm'}  {caller:6s} {us:7.1f} us a call", flush=True)
    if rank == 0:
        print(f"first call (compile, or load from numba's cache) {first_call:.2f} s; cache hits {hits}; sums exact")
        Path(args.out).write_text(json.dumps({
            "ranks": size, "mpi": MPI.Get_library_version().splitlines()[0], "calls": args.calls,
            "stream_mb": args.stream_mb, "first_call_seconds": first_call, "cache_hits": hits,
            "median_us": results}, indent=1))


if __name__ == "__main__":
    main()
