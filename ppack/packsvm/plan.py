"""``python -m ppack plan``: memory per rank and run time of a training run, before running it.

Memory is counted from the data file's header (no rows are read for HDF5): each rank's
data shard, its support-vector table at its worst case for T (every drawn row becomes a
support vector, so min(T, rows) entries spread evenly, arrays grown by doubling), and
the pack's working arrays. Time comes from a short calibration run of the real solver on
this machine (one process, a sample of the rows), extrapolated with the measured growth
of the table: per pack, the kernel sums cost (support vectors / ranks) x the measured
seconds per support vector, plus the measured fixed cost of a pack. Communication at
scale is not measured here; the estimate adds a latency term per Allreduce that you can
set. Both figures are estimates: the report says which inputs they rest on.
"""
import math
import os
import time
from dataclasses import dataclass

import h5py
import numpy as np
from mpi4py import MPI

from ..data.hdf5 import COMPACT_DTYPES, is_hdf5, read_header
from ..data.libsvm import read_libsvm
from ..data.shard import load_shard
from ..errors import PPackError
from ..kernels.ops import DEFAULT_WORK_BYTES
from ..registry import PACKSVM_PARAMS
from .estimator import PackSVC

# Python dict entry + key object per support vector (bytes), measured on CPython 3.11.
DICT_BYTES_PER_ENTRY = 100
CALIBRATION_ROWS = 20000


@dataclass
class Plan:
    lines: list
    warnings: list


def _header(path, dtype):
    """(rows, features, stored values per row, sparse, longest row, bytes per stored value as a
    rank holds it, classes) without reading feature rows when possible (the labels are read)."""
    if is_hdf5(path):
        h = read_header(path, check_indices=False)
        held = (h.dtype if h.dtype in COMPACT_DTYPES else np.dtype(dtype)).itemsize
        with h5py.File(path, "r") as f:
            classes = len(np.unique(f["y"][()]))
            nnz = len(f["X/data"]) if h.storage == "csr" else None
        if h.storage == "csr":
            return h.n_samples, h.n_features, nnz / max(1, h.n_samples), True, h.max_row_nnz, held, classes
        return h.n_samples, h.n_features, h.n_features, False, h.n_features, held, classes
    X, y, info = read_libsvm(path)
    return (info.n_samples, info.n_features, X.nnz / max(1, info.n_samples), True, info.max_row_nnz,
            np.dtype(dtype).itemsize, len(np.unique(y)))


def make_plan(path, ranks, params, mem_per_rank=None, allreduce_latency=50e-6, calibrate=True):
    """A ``Plan`` for training PackSVC(**params) on ``path`` with ``ranks`` ranks (parameters
    not in ``params`` take their defaults)."""
    params = PackSVC(**params).validate_params()
    if ranks < 1:
        raise PPackError(f"--ranks: must be >= 1, got {ranks}")
    item = np.dtype(params["dtype"]).itemsize
    n, d, per_row, sparse, longest, held, K = _header(str(path), params["dtype"])
    columns = 1 if K <= 2 else K
    T = int(params["iterations"]) if params["iterations"] is not None else max(1, int(round(params["epochs"] * n)))
    r = int(params["pack"])
    rows = math.ceil(n / ranks)
    row_bytes = per_row * (item + 4) + 8 if sparse else d * item  # as the table holds a row
    shard = rows * ((per_row * (held + 4) + 8 if sparse else d * held) + 8)
    entries = math.ceil(min(T, n) / ranks)
    table = entries * (2 * (row_bytes + 16 + 8 * columns) + DICT_BYTES_PER_ENTRY)
    xt = d * r * 8 if sparse else 0
    work = min(DEFAULT_WORK_BYTES, xt) + r * (2 * longest + 2) * 8 * 2 + r * r * 8 * 2 + r * columns * 8 * 4
    total = shard + table + work
    lines = [f"data {path}: {n} rows, {d} features, {'csr' if sparse else 'dense'}, "
             f"{per_row:.1f} stored values per row, {K} classes"
             f"{' (one-vs-rest in one pass)' if K > 2 else ''}; T = {T}, r = {r}, {ranks} ranks",
             "memory per rank (worst case at T):",
             f"  data shard        {_size(shard)}  ({rows} rows)",
             f"  support vectors   {_size(table)}  (up to {entries} per rank)",
             f"  pack work arrays  {_size(work)}",
             f"  total             {_size(total)}"]
    warnings = []
    if mem_per_rank is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        mem_per_rank = _physical_memory() / max(1, min(ranks, cores or 1))
        lines.append(f"  available         {_size(mem_per_rank)} per rank (this machine's memory over "
                     f"{min(ranks, cores or 1)} ranks; set --mem-per-rank for the cluster's nodes)")
    else:
        lines.append(f"  available         {_size(mem_per_rank)} per rank (--mem-per-rank)")
    if total > 0.9 * mem_per_rank:
        warnings.append(f"WARNING: {_size(total)} per rank may not fit in {_size(mem_per_rank)}: use more ranks, "
                        "--dtype float32, or fewer iterations")
    if calibrate:
        lines += _time_estimate(path, params, n, T, r, ranks, allreduce_latency)
    return Plan(lines, warnings)


def _time_estimate(path, params, n, T, r, ranks, latency):
    """Lines estimating the run time from a short single-process run on this machine."""
    shard = load_shard(MPI.COMM_SELF, path, dtype=np.dtype(params["dtype"]))
    m = min(n, CALIBRATION_ROWS)
    X, y = shard.float_rows(0, m), shard.y[:m]
    sample = dict(params, comm=MPI.COMM_SELF, epochs=PACKSVM_PARAMS["epochs"].default,
                  iterations=min(T, max(20 * r, m // 2)))
    if sample.get("sigma") is not None:  # the same C as the full run: C = 1 / (n sigma)
        sample["C"], sample["sigma"] = 1.0 / (n * sample["sigma"]), None
    calibration = PackSVC(**sample)
    calibration.fit(X, y)  # the first fit may compile; time a second one
    start = time.perf_counter()
    calibration.fit(X, y)
    seconds = time.perf_counter() - start
    info = calibration.training_
    kernel = info["seconds"]["kernel_sums"]
    packs = info["packs"]
    sv_packs = sum(min(calibration.n_support_ * k / packs, m) for k in range(1, packs + 1))
    per_sv = kernel / max(sv_packs, 1.0)
    fixed = (seconds - kernel) / packs
    growth = calibration.n_support_ / info["iterations"]  # support vectors per iteration
    total_packs = math.ceil(T / r)
    kernel_total = sum(min(growth * k * r, n) for k in range(1, total_packs + 1)) * per_sv / ranks
    comm_total = total_packs * 2 * latency * max(1.0, math.log2(ranks))
    estimate = kernel_total + total_packs * fixed + comm_total
    return [f"time (calibrated on {m} rows, {info['iterations']} iterations on this machine):",
            f"  {per_sv * 1e9:.0f} ns per support vector per pack, {fixed * 1e3:.2f} ms fixed per pack, "
            f"{growth:.2f} new support vectors per iteration",
            f"  estimate {_seconds(estimate)} = kernel sums {_seconds(kernel_total)} + pack overhead "
            f"{_seconds(total_packs * fixed)} + communication {_seconds(comm_total)} "
            f"({latency * 1e6:.0f} us per Allreduce x log2(ranks))"]


def _physical_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return float("inf")


def _size(n):
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:7.1f} {unit}"
    return f"{n:7.0f} B  "


def _seconds(s):
    return f"{s / 3600:.1f} h" if s >= 3600 else (f"{s / 60:.1f} min" if s >= 60 else f"{s:.1f} s")
