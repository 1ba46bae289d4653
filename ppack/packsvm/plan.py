"""``python -m ppack plan``: memory per rank and run time of a training run, before running it.

Memory is counted from the data file's header (no rows are read for HDF5): each rank's
data shard, its support-vector table at its worst case for T (every drawn row becomes a
support vector, so min(T, rows) entries spread evenly, arrays grown by doubling), and
the pack's working arrays. ``rows`` plans for a set of that many rows like the file's
(a sample of a larger set, or a generated one).

Time comes from measured rates: a short calibration run of the real solver on this
machine (one process, a sample of the rows), or the metrics file of a real run
(``from_run``: its kernel-sum, replay and delivery seconds, packs, ranks and support
vectors). Per pack, the kernel sums cost (support vectors / ranks) x the seconds per
support vector and row, with the table growing as measured (support vectors per
iteration); replay and delivery cost their measured time per pack whatever the rank count.
Communication on the cluster is modelled: each of the pack's two Allreduce calls costs what
``comm_model.allreduce_seconds`` gives for its bytes on that many ranks, with
``allreduce_latency`` the latency of one message (alpha) and ``bandwidth`` the link's bytes
per second (beta = 1 / bandwidth): the fastest of recursive doubling, Rabenseifner's
reduce-scatter + allgather and the ring; or, for rank counts a node profile measured, the
collectives' own seconds measured there.

Waiting for the slowest rank is modelled as what P ranks' jitter makes of it: each rank's
local work varies from pack to pack by a relative standard deviation J, and a collective
starts when the slowest arrives, about J x E[max of P standard normals] times the local
work after the typical rank. J is the run's own (``state.Jitter``, measured on its ranks), or
for the rank counts a node profile covers, the profile's (which then also holds the
persistent differences between cores). A node profile (``node_profile``, written by
``bench/node_scaling.py`` from a sweep of real runs on one node) also gives the partial
sums' parallel efficiency at each P (memory bandwidth shared by the node's cores); without
one it is taken as 1. Beyond the profile's largest P, its values there are used.
The schedule is ``--pipeline``'s (auto: pipelined above one rank, as train runs it).
Unpipelined (``--pipeline off``), a pack costs serial + local + W + C, with local the partial
sums and the rank's share of the pair kernels, C the two collectives' own seconds and
W = E[max of P normals] x J x local, the waiting for the slowest rank. Pipelined, the pack's
collectives are in flight while the next pack's sums are taken, and a rank may run one pack
ahead of the slowest, so a slow pack is partly made up by the next fast one: a pack costs
serial + correction / P + max(local + W_p, C), with
W_p = W / sqrt(2) / (1 + max(0, local - C) / (2 J local)): the slowest of P ranks' average
excess over two consecutive packs, less what the slack between the local work and the
collectives absorbs. The last factor is fitted to a simulation of the schedule's recurrence
t_i' = max(t_i + L_i, max_j t_j + C) + serial (a rank posts its collectives, works L_i, waits
until they end C after the last rank posted them): for J up to 0.5 and P up to 32 it is within
about 25% of the simulated waiting where local >= C, and misses up to 0.4 J local of it where C
is just above local.
Without jitter that is serial + max(local, C): the collectives are hidden under the local
work. The correction (a pipelined run's ``correction`` seconds, the next pack's sums fixed
for the rows this pack changed) is split over the ranks; runs that did not pipeline measured
none, and it is taken as 0.
That model assumes the collectives cost the rank nothing while in flight and that a rank's
jitter is independent from pack to pack. On a 16-core node neither held (within a node the
collectives are the ranks' own copies and sums, done in the tests between the sums' tiles,
and the waiting did not shrink): a node profile from a sweep that also ran pipelined
(``bench/node_scaling.py --pipeline on,off``) holds, at each P, the pipelined local work
(sums, pairs and correction) over the unpipelined and the pipelined median waiting over the
unpipelined, and plan takes those instead of W_p and the hidden collectives.
A grid pass (``grid``: ``tune``'s C values, kernel settings and folds) is one run of Q =
classes x grid points x (folds + 1) columns. Its table holds a coefficient per column (24
bytes with averaging, 8 without) for the union of every column's support vectors. Per kernel
value its pack pays the dot product (the GEMM, shared by every kernel setting), one formula
per kernel setting, and a multiply-add per column of that setting; its replay steps every
column. The calibration therefore runs the grid pass itself on a sample of the rows and
takes its rates as one model's: seconds per stored row and pack row, the serial part per
pack, and the union's growth; the collectives carry Q columns. The score pass after it
predicts every row with its fold's columns against the stored rows, which costs the rows x
the stored rows at the calibrated seconds per pair, split over the ranks.
Both figures are estimates: the report says which inputs and which schedule they rest on.
"""
from __future__ import annotations

import math
import os
import time
import warnings
from dataclasses import dataclass

import h5py
import numpy as np
from mpi4py import MPI
from scipy.special import ndtr

from ..data.hdf5 import COMPACT_DTYPES, is_hdf5, read_header
from ..data.libsvm import read_libsvm
from ..data.shard import load_shard
from ..errors import PPackError, given
from ..kernels.compute import DEFAULT_WORK_BYTES
from ..kernels.precision import read_dtype
from ..registry import PACKSVM_PARAMS
from .comm_model import INFINIBAND_EDR, best_algorithm, pack_bytes, pack_seconds
from .convergence import is_auto
from .dual import fit as dual_fit
from .estimator import PackSVC
from .grid import AVERAGED_COLUMN_BYTES, COLUMN_BYTES

# Python dict entry + key object per support vector (bytes), measured on CPython 3.11.
DICT_BYTES_PER_ENTRY = 100
CALIBRATION_ROWS = 20000


@dataclass
class Plan:
    """What ``make_plan`` finds: the lines ``plan`` prints, its warnings and the time estimate.

    Parameters
    ----------
    lines : list of str
        The report: the data, the memory per rank, then (with a calibration or a measured
        run) the time per pack and in all.
    warnings : list of str
        Each a line that starts with "WARNING:" (e.g. the memory may not fit).
    seconds : float or None, default=None
        The estimated training time in seconds, when there is one.

    Examples
    --------
    >>> from ppack.data.bundled import bundled_path
    >>> from ppack.packsvm.plan import make_plan
    >>> plan = make_plan(bundled_path("a9a"), ranks=4, params={}, mem_per_rank=2**32, calibrate=False)
    >>> plan.warnings, plan.seconds
    ([], None)
    """

    lines: list
    warnings: list
    seconds: float = None  # the time estimate, when there is one


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


@dataclass
class Rates:
    """Measured costs a time estimate scales: seconds per (support vector x row) of the
    kernel sums on one rank, seconds per pack of the serial part (replay, table update,
    delivery: repeated on every rank), support vectors per iteration, and where they come
    from; the pair kernels' seconds per pack on one rank (0 where they are counted in the
    kernel sums), the relative per-pack jitter of a rank's local work and the pipelined
    schedule's correction, seconds per pack on one rank (0 where the run did not pipeline)."""
    per_sv_row: float
    fixed_per_pack: float
    growth: float
    source: str
    pair_per_pack: float = 0.0
    jitter: float = 0.0
    correction_per_pack: float = 0.0


@dataclass
class NodeProfile:
    """What a sweep of real runs on one node measured at each rank count P (``bench/node_scaling.py``):
    the partial sums' parallel efficiency, the jitter that explains the waiting seen, and the
    pack's two collectives' own seconds, a + b x (the pack's bytes). ``at(P)`` gives them for
    any P (the largest measured P's beyond it, the nearest smaller one between; the
    collectives only where measured)."""
    name: str
    efficiency: dict
    jitter: dict
    collective_seconds: dict
    collective_seconds_per_byte: dict
    pipelined: dict = None  # {P: (local_factor, waiting_ratio)} where the sweep also ran pipelined

    @classmethod
    def from_dict(cls, data):
        try:
            ranks = {int(p): v for p, v in data["ranks"].items()}
            pipelined = {p: (float(v["pipelined"]["local_factor"]), float(v["pipelined"]["waiting_ratio"]))
                         for p, v in ranks.items() if "pipelined" in v}
            return cls(str(data.get("machine", "a node")), {p: float(v["efficiency"]) for p, v in ranks.items()},
                       {p: float(v["jitter"]) for p, v in ranks.items()},
                       {p: float(v["collective_seconds"]) for p, v in ranks.items()},
                       {p: float(v.get("collective_seconds_per_byte", 0.0)) for p, v in ranks.items()}, pipelined)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise PPackError(f"--node-profile: not a node profile (bench/node_scaling.py): missing or bad {exc}") \
                from None

    def pipelined_at(self, ranks):
        """(local_factor, waiting_ratio) the node measured pipelined at ``ranks`` (the nearest
        smaller measured P's, the largest beyond it), or None where it ran no pipelined sweep:
        a pipelined pack's local work (the sums, the pairs and the correction) over an
        unpipelined pack's, and its median waiting over the unpipelined median waiting."""
        known = [p for p in sorted(self.pipelined or {}) if p <= ranks]
        return self.pipelined[known[-1]] if known else None

    def at(self, ranks, pack_bytes):
        """(efficiency, jitter, the collectives' seconds per pack of ``pack_bytes`` or None) for ``ranks``."""
        known = [p for p in sorted(self.efficiency) if p <= ranks]
        if not known:
            return 1.0, None, None
        p = known[-1]
        collective = self.collective_seconds[p] + self.collective_seconds_per_byte[p] * pack_bytes
        return self.efficiency[p], self.jitter[p], collective if p == ranks else None


def expected_max_normal(p):
    """E[max of p independent standard normal draws] (0 for p = 1), by quadrature."""
    if p <= 1:
        return 0.0
    x = np.linspace(-9.0, 9.0, 7201)
    density = p * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi) * ndtr(x) ** (p - 1)
    return float(np.sum(x * density) * (x[1] - x[0]))


def make_plan(path: str | os.PathLike, ranks: int, params: dict, mem_per_rank: float | None = None,
              allreduce_latency: float = INFINIBAND_EDR.latency, calibrate: bool = True, rows: int | None = None,
              from_run: dict | None = None, bandwidth: float = 1 / INFINIBAND_EDR.seconds_per_byte,
              node_profile: dict | None = None, grid: dict | None = None) -> Plan:
    """A ``Plan`` for training ``PackSVC(**params)`` on ``path`` with ``ranks`` ranks (parameters
    not in ``params`` take their defaults); ``rows``: plan for that many rows like the file's;
    ``from_run``: a train metrics dict whose measured rates replace the calibration run;
    ``allreduce_latency`` (seconds per message) and ``bandwidth`` (bytes per second): the
    cluster's network, for the communication model (default: ``comm_model.INFINIBAND_EDR``);
    ``node_profile``: a node profile dict (``NodeProfile``), or None. The schedule is
    ``params["pipeline"]``'s, resolved as train resolves it (auto: pipelined above one rank).
    ``grid``: plan ``tune``'s grid pass instead of one model (the module docstring's "grid").

    Parameters
    ----------
    path : str or os.PathLike
        The training data, HDF5 or LIBSVM text.
    ranks : int
        The number of MPI ranks of the planned run.
    params : dict
        PackSVC's parameters by name; those left out take their defaults.
    mem_per_rank : float or None, default=None
        Bytes each rank may use (None: this machine's memory over its ranks).
    allreduce_latency : float, default=1e-6
        Seconds per message, in the Allreduce model.
    calibrate : bool, default=True
        Time a short run on this machine for the time estimate (False: memory only).
    rows : int or None, default=None
        Plan for this many rows like the file's.
    from_run : dict or None, default=None
        A train metrics dict whose measured rates replace the calibration run.
    bandwidth : float, default=12.5e9
        Link bandwidth in bytes per second, in the Allreduce model.
    node_profile : dict or None, default=None
        A node profile (``NodeProfile``) of measured waits at each rank count.
    grid : dict or None, default=None
        A grid pass: {"C": its C values, "kernels": its kernel settings (dicts of kernel
        parameters) or None for the estimator's, "folds": K}; None plans one model.

    Returns
    -------
    Plan
        The report lines, warnings and the time estimate.

    Raises
    ------
    PPackError
        For a parameter out of range or unreadable data.

    Examples
    --------
    >>> from ppack.data.bundled import bundled_path
    >>> from ppack.packsvm.plan import make_plan
    >>> plan = make_plan(bundled_path("a9a"), ranks=4, params={"pack": 100}, mem_per_rank=2**32, calibrate=False)
    >>> print(plan.lines[2])
      data shard            1.4 MiB  (8141 rows)
    """
    params = PackSVC(**params).validate_params()
    if ranks < 1:
        raise PPackError(f"--ranks: must be >= 1, got {ranks}")
    if rows is not None and rows < 1:
        raise PPackError(f"--rows: must be >= 1, got {rows}")
    dtype = read_dtype(params["dtype"])  # "auto" resolves when training starts: plan for float64
    item = np.dtype(dtype).itemsize
    n, d, per_row, sparse, longest, held, K = _header(str(path), dtype)
    scaled = rows is not None
    if scaled:
        n = int(rows)
    C = params["C"] if params["C"] is not None else 1.0 if params["sigma"] is None else 1.0 / (n * params["sigma"])
    largest_C = C if grid is None else max(grid["C"])
    dual = dual_fit.chosen_optimizer(params["optimizer"], largest_C, params["epochs"] if params["iterations"] is None
                                     else params["iterations"] / n) == "dual"
    if is_auto(params["epochs"], params["iterations"]) and not dual:
        raise PPackError(f"{given('epochs', 'auto')}: the run's length is decided while it trains (1 epoch, then "
                         "twice as many while it stops short); plan a number of epochs (1: the first stage)")
    columns = 1 if K <= 2 else K
    if grid is not None:
        points = len(grid["C"]) * len(grid.get("kernels") or [{}])
        columns *= points * (int(grid["folds"]) + 1)
    if dual:  # at most its cap of epochs, every row drawn in each
        T = dual_fit.epoch_cap(params["epochs"], params["iterations"], n) * n
    else:
        T = int(params["iterations"]) if params["iterations"] is not None else max(1, int(round(params["epochs"] * n)))
    r = int(params["pack"])
    rows = math.ceil(n / ranks)
    row_bytes = per_row * (item + 4) + 8 if sparse else d * item  # as the table holds a row
    shard = rows * ((per_row * (held + 4) + 8 if sparse else d * held) + 8)
    entries = math.ceil(min(T, n) / ranks)
    column_bytes = columns * (AVERAGED_COLUMN_BYTES if params["average"] and not dual else COLUMN_BYTES)
    table = entries * (2 * (row_bytes + 16 + column_bytes) + DICT_BYTES_PER_ENTRY)
    xt = d * r * 8 if sparse else 0
    work = min(DEFAULT_WORK_BYTES, xt) + r * (2 * longest + 2) * 8 * 2 + r * r * 8 * 2 + r * columns * 8 * 4
    # the dual's replicated draws: each row's active flag per column, its eligibility, an epoch's order twice
    shared = n * (columns + 1 + 2 * 8) if dual else 0
    process = _process_bytes(from_run)
    total = shard + table + work + shared + (process or 0)
    lines = [f"data {path}{' scaled' if scaled else ''}: {n} rows, {d} features, "
             f"{'csr' if sparse else 'dense'}, "
             f"{per_row:.1f} stored values per row, {K} classes"
             f"{' (one-vs-rest in one pass)' if K > 2 else ''}; "
             + (f"the dual optimizer, at most {T // n} epochs" if dual else f"T = {T}") + f", r = {r}, {ranks} ranks",
             *([] if grid is None else [
                 f"grid pass: {points} grid points x ({grid['folds']} folds + the refit) = {columns} columns, "
                 f"{column_bytes} bytes per stored row for them"]),
             f"memory per rank (worst case at T, {dtype}"
             f"{' (--dtype auto may choose float32: half the rows)' if params['dtype'] == 'auto' else ''}):",
             f"  data shard        {_size(shard)}  ({rows} rows)",
             f"  support vectors   {_size(table)}  (up to {entries} per rank)",
             f"  pack work arrays  {_size(work)}",
             *([f"  dual's draws      {_size(shared)}  (every row's active set, on every rank)"] if dual else [])]
    if process is not None:
        lines.append(f"  the process       {_size(process)}  (Python, numpy, numba, MPI, buffers: measured in the run)")
    lines.append(f"  total             {_size(total)}" + ("" if process is not None else
                                                           "  (plus the Python process itself; see --from-run)"))
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
    score_rate = None
    if from_run is not None:
        if grid is not None:
            raise PPackError("--from-run: a train run's rates are one model's; a grid pass is planned from a "
                             "calibration run of the grid here")
        rates = rates_of_run(from_run)
    elif calibrate and grid is not None:
        rates, score_rate = _calibrate_grid(path, params, grid, n, T, r)
    elif calibrate:
        rates = _calibrate(path, params, n, T, r)
    else:
        return Plan(lines, warnings)
    buffers = pack_bytes(r, d, longest, sparse, columns, ranks, held, dual)
    profile = None if node_profile is None else NodeProfile.from_dict(node_profile)
    pipelined = not dual and (params["pipeline"] == "on" or (params["pipeline"] == "auto" and ranks > 1))
    # the dual's table grows over its first epoch as measured and then holds about as many rows
    # (its support vectors come and go); the SGD's grows as measured up to every row
    table_rows = min(rates.growth * n, n) if dual else n
    time_lines, seconds = _time_lines(rates, table_rows, T, r, ranks, allreduce_latency, bandwidth, buffers, profile,
                                      pipelined)
    if dual:
        time_lines.append(f"  the dual: an upper bound, its cap of {T // n} epochs with every row drawn in each; its "
                          "stopping test (--tol) and shrinking end most runs sooner")
    if score_rate is not None:  # each row against the stored rows of its fold's columns, split over the ranks
        stored = min(rates.growth * T, table_rows)
        score = score_rate * n * stored / ranks
        time_lines.append(f"  score pass: {_seconds(score)} ({n} rows against about {stored:.0f} stored rows, "
                          f"{score_rate * 1e9:.2f} ns each, over {ranks} ranks); the pass in all "
                          f"{_seconds(seconds + score)}")
        seconds += score
    return Plan(lines + time_lines, warnings, seconds)


def _process_bytes(metrics):
    """A rank's memory besides its shard and table at the end of a measured run (the largest
    over its ranks), from train metrics; None without them."""
    try:
        memory = metrics["memory"]
        return max(p - s - t for p, s, t in zip(memory["peak_rss_bytes"]["after_training"], memory["shard_bytes"],
                                                 memory["table_bytes"]))
    except (KeyError, TypeError, ValueError):
        return None


def rates_of_run(metrics):
    """``Rates`` from a train metrics dict (``train --metrics-json``), with the table taken to
    grow linearly from 0 to its final size over the run's packs. Metrics that split the
    local work (partial sums, pair kernels, the serial part) give each its own rate; older
    ones give the kernel sums and the replay and delivery. A pipelined run's correction
    (part of its partial sums) is taken out of them and kept apart, per pack on one rank;
    runs without it (unpipelined, or older metrics) give 0."""
    try:
        seconds, packs, ranks = metrics["seconds"], int(metrics["packs"]), int(metrics["ranks"])
        r, T, n_sv, m = int(metrics["pack"]), int(metrics["iterations"]), int(metrics["support_vectors"]), \
            int(metrics["n_samples"])
        correction = float(seconds.get("correction", 0.0))
        if all(k in seconds for k in ("partial_sums", "pair_kernels", "serial")):
            kernel, pairs = float(seconds["partial_sums"]) - correction, float(seconds["pair_kernels"]) * ranks
            # the work a pipelined run did in the collectives' shadow besides the products (the packs
            # ahead's delivery) does not shrink with more ranks either: the model keeps it with the serial part
            fixed = float(seconds["serial"]) + float(seconds.get("shadow", 0.0))
        else:
            kernel, pairs = float(seconds["kernel_sums"]) - correction, 0.0
            fixed = float(seconds["sequential_updates"] + seconds["delivery"])
        jitter = metrics.get("over_ranks", {}).get("per_rank", {}).get("local_jitter")
        jitter = float(np.median(jitter)) if jitter else 0.0
    except (KeyError, TypeError, ValueError) as exc:
        raise PPackError(f"--from-run: not the metrics of a packsvm train run (train --metrics-json): "
                         f"missing or bad {exc}") from None
    if packs < 1 or T < 1:
        raise PPackError(f"--from-run: the run did no packs ({packs}); use a completed training run")
    growth = n_sv / T
    sv_rows = sum(min(growth * k * r, m) for k in range(1, packs + 1)) * r / ranks
    schedule = {"on": ", pipelined", "off": ", unpipelined"}.get(metrics.get("pipeline"), "")
    return Rates(kernel / max(sv_rows, 1.0), fixed / packs, growth,
                 f"measured in a run of {m} rows, T = {T}, {packs} packs on {ranks} ranks "
                 f"({metrics.get('threads_per_rank', '?')} thread(s) each{schedule})", pairs / packs, jitter,
                 correction * ranks / packs)


def _calibrate(path, params, n, T, r):
    """``Rates`` from a short single-process run on this machine."""
    X, y, m, sample = _calibration_sample(path, params, n, T, r)
    calibration = PackSVC(**sample)
    with warnings.catch_warnings():  # a timing run: whether it converged is no one's concern
        warnings.simplefilter("ignore", calibration.convergence_warning)
        calibration.fit(X, y)  # the first fit may compile; time a second one
        start = time.perf_counter()
        calibration.fit(X, y)
    info = calibration.training_
    # the dual's certificate is one pass at the end, not part of any pack
    seconds = time.perf_counter() - start - info["seconds"].get("certificate", 0.0)
    return _measured_rates(info["seconds"]["kernel_sums"], seconds, info["packs"], calibration.n_support_,
                           info["iterations"], m, r,
                           f"calibrated on {m} rows, {info['iterations']} iterations, one process on this machine")


def _calibrate_grid(path, params, grid, n, T, r):
    """(``Rates``, score seconds per scored row and stored row) from a short grid pass of
    ``grid`` on a sample of the rows, one process on this machine: the rates of the grid's
    pack (its GEMM, one formula per kernel setting and its columns' multiply-adds per kernel
    value, its replay of every column) as ``_calibrate``'s of one model's."""
    from .grid import train_grid

    X, y, m, sample = _calibration_sample(path, params, n, T, r)
    folds = np.random.RandomState(0).permutation(m) % int(grid["folds"])

    def grid_pass():
        return train_grid(PackSVC(**sample), X, y, grid["C"], folds, int(grid["folds"]), kernels=grid.get("kernels"))
    grid_pass()  # the first pass may compile; time a second one
    start = time.perf_counter()
    fit = grid_pass()
    seconds = time.perf_counter() - start - fit.seconds["score"]
    stored, iterations = len(fit.table), fit.state.iteration
    rates = _measured_rates(fit.stats.seconds["kernel_sums"], seconds, fit.stats.packs, stored, iterations, m, r,
                            f"calibrated on a grid pass of {m} rows, {iterations} iterations, "
                            f"{fit.table.n_columns} columns, one process on this machine")
    return rates, fit.seconds["score"] / max(1.0, m * stored)


def _calibration_sample(path, params, n, T, r):
    """(X, y, m, sample): the first m (at most CALIBRATION_ROWS) rows of ``path`` and PackSVC's
    parameters for a short run on them, of the same C as the planned run."""
    shard = load_shard(MPI.COMM_SELF, path, dtype=np.dtype(read_dtype(params["dtype"])))
    m = min(n, CALIBRATION_ROWS)
    sample = dict(params, comm=MPI.COMM_SELF, epochs=PACKSVM_PARAMS["epochs"].default,
                  iterations=min(T, max(20 * r, m // 2)))
    if sample.get("sigma") is not None:  # the same C as the full run: C = 1 / (n sigma)
        sample["C"], sample["sigma"] = 1.0 / (n * sample["sigma"]), None
    return shard.float_rows(0, m), shard.y[:m], m, sample


def _measured_rates(kernel, seconds, packs, stored, iterations, m, r, source):
    """``Rates`` of a timed calibration run: ``kernel`` of its ``seconds`` in the kernel sums over
    ``packs`` packs of r rows, its table grown to ``stored`` rows (taken as linear) in
    ``iterations`` on m rows."""
    sv_rows = sum(min(stored * k / packs, m) for k in range(1, packs + 1)) * r
    return Rates(kernel / max(sv_rows, 1.0), (seconds - kernel) / packs, stored / iterations, source)


def pipelined_waiting(local, collective, jitter, ranks):
    """Seconds a pipelined pack of ``local`` seconds of local work (the typical rank's) waits for
    the slowest of ``ranks`` ranks beyond that work, with per-pack relative ``jitter`` and
    ``collective`` seconds of the collectives' own: the module docstring's W_p."""
    spread = jitter * expected_max_normal(ranks) * local
    if spread <= 0.0:
        return 0.0
    return spread / math.sqrt(2.0) / (1.0 + max(0.0, local - collective) / (2.0 * jitter * local))


def _pack_seconds(rates, n, T, r, ranks, efficiency, jitter, collective, pipelined=False, measured=None):
    """(kernel sums, pair kernels, serial, correction, waiting, communication) seconds of a whole
    run on ``ranks`` ranks: the packs' partial sums as the table grows, over ``efficiency``; the
    serial part; ``collective`` seconds per pack. Unpipelined, the waiting is ``jitter`` x
    E[max of ranks normals] x the local work and the collectives add to it; ``pipelined``, the
    correction is split over the ranks, the waiting is ``pipelined_waiting`` and the
    communication only what of the collectives the local work and waiting do not hide. With
    ``measured`` (a node profile's ``(local_factor, waiting_ratio)``), pipelined takes what the
    node measured instead: the local work (correction included) times local_factor, the
    unpipelined waiting times waiting_ratio."""
    packs = math.ceil(T / r)
    spread = jitter * expected_max_normal(ranks)
    pairs = rates.pair_per_pack / ranks
    kernel = waiting = comm = extra = 0.0
    for k in range(1, packs + 1):
        sums = min(rates.growth * k * r, n) * r * rates.per_sv_row / ranks / efficiency
        kernel += sums
        if pipelined and measured is not None:
            local_factor, waiting_ratio = measured
            more = (local_factor - 1.0) * (sums + pairs)
            wait = waiting_ratio * spread * (sums + pairs)
            extra += more
            waiting += wait
            comm += max(0.0, collective - (sums + pairs + more + wait))
        elif pipelined:
            wait = pipelined_waiting(sums + pairs, collective, jitter, ranks)
            waiting += wait
            comm += max(0.0, collective - (sums + pairs + wait))
        else:
            waiting += spread * (sums + pairs)
            comm += collective
    if pipelined and measured is not None:
        correction = extra  # the node's measured extra local work stands for the correction and the rest
    else:
        correction = packs * rates.correction_per_pack / ranks if pipelined else 0.0
    return kernel, packs * pairs, packs * rates.fixed_per_pack, correction, waiting, comm


def _time_lines(rates, n, T, r, ranks, latency, bandwidth, buffers, profile=None, pipelined=False):
    """(lines, seconds): a run's time per pack and in total from measured ``rates``, ``pipelined``
    or not."""
    packs = math.ceil(T / r)
    per_byte = 1.0 / bandwidth
    efficiency, jitter, measured = (1.0, None, None) if profile is None else profile.at(ranks, sum(buffers))
    jitter_from = "the run's ranks" if jitter is None else profile.name
    jitter = rates.jitter if jitter is None else jitter
    if measured is not None:
        per_pack_comm, algorithms = measured, f"measured on {profile.name} at {ranks} ranks"
    else:
        per_pack_comm = pack_seconds(buffers, ranks, latency, per_byte)
        algorithms = (" and ".join(best_algorithm(b, ranks, latency, per_byte) for b in buffers) + f" on {ranks} ranks"
                      if ranks > 1 else "none on 1 rank")
        algorithms = f"Allreduce model: {latency * 1e6:g} us per message, {bandwidth / 1e9:g} GB/s; {algorithms}"
    schedule = "pipelined" if pipelined else "unpipelined (--pipeline off)"
    measured_pipeline = None if profile is None or not pipelined else profile.pipelined_at(ranks)
    if measured_pipeline is not None:
        schedule += (f" (as measured pipelined on {profile.name}: local work x {measured_pipeline[0]:.2f}, "
                     f"waiting x {measured_pipeline[1]:.2f} the unpipelined)")
    parts = _pack_seconds(rates, n, T, r, ranks, efficiency, jitter, per_pack_comm, pipelined, measured_pipeline)
    kernel_total, pair_total, fixed_total, correction_total, waiting_total, comm_total = parts
    estimate = sum(parts)
    one = sum(_pack_seconds(rates, n, T, r, 1, 1.0, 0.0, 0.0))
    last_pack_kernel = min(rates.growth * T, n) / ranks * r * rates.per_sv_row / efficiency
    lines = [f"time ({rates.source}):",
             f"  {rates.per_sv_row * 1e9:.2f} ns per support vector and row, {rates.fixed_per_pack * 1e3:.2f} ms "
             f"of replay and delivery per pack, {rates.growth:.3f} new support vectors per iteration "
             f"(about {min(rates.growth * T, n):.0f} at the end)",
             f"  per pack: kernel sums up to {_seconds(last_pack_kernel)} (the last pack), replay and delivery "
             f"{_seconds(rates.fixed_per_pack)}, communication {_seconds(per_pack_comm)} "
             f"(2 Allreduce of {buffers[0] / 1e3:.0f} + {buffers[1] / 1e3:.0f} kB)",
             f"  estimate {_seconds(estimate)} for {packs} packs, {schedule} = kernel sums "
             f"{_seconds(kernel_total + pair_total)} + replay and delivery {_seconds(fixed_total)} + "
             + (f"correction {_seconds(correction_total)} + " if pipelined else "")
             + f"waiting {_seconds(waiting_total)} + communication {_seconds(comm_total)}"
             + (f" (of {_seconds(packs * per_pack_comm)}: the rest hidden under the next pack's kernel sums)"
                if pipelined else "") + f" ({algorithms})"]
    if ranks > 1:
        lines.append(f"  parallel efficiency {one / (ranks * estimate):.0%} (speed-up {one / estimate:.1f}x over "
                     f"1 rank): partial sums at {efficiency:.0%} of ideal"
                     f"{'' if profile is None else ' (' + profile.name + ')'}, per-pack jitter {jitter:.1%} "
                     f"({jitter_from}), the serial part repeated on every rank")
    return lines, estimate


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
    if s < 0.1:
        return f"{s * 1e3:.2f} ms"
    return f"{s / 3600:.1f} h" if s >= 3600 else (f"{s / 60:.1f} min" if s >= 60 else f"{s:.1f} s")
