"""Checkpoints of the packed solver: the full state, written atomically, read on any rank count.

One HDF5 file (format "ppack-checkpoint"): every rank's table shard (keys, coefficients,
feature vectors, and the rank that held each entry, in rank order and slot order within a
rank; ``rank_offsets`` (ranks + 1,) marks where each rank's entries start), the scalars of
the model (iteration, scale, norm, the offset rho and its averaging sum), the sampler's
exact position, the windows of the --tol test, the --validation histories and patience
counts (attribute ``validation``), the run statistics and the training parameters. A grid
pass's (``grid.py``) also holds each column's stop (attribute ``column_stops``) and, with
progressive scores, every row's record (dataset ``progressive``, in global row order), and
its parameters name the grid.

Writing goes into one temporary file beside the target (``collective_write``): rank 0
creates it with every dataset pre-sized, each rank's contiguous slice is written (by
parallel HDF5, or by its node's leader, the leaders taking turns), then the attribute
``complete`` is set (last, so a file without it is never trusted) and the file renamed into
place; an error on any rank is raised on every rank and leaves no file. Each rank reads
only its own rows. So the peak memory of a rank, writing or reading, is its own shard plus
one fixed-size piece; rank 0 additionally holds nothing but the per-rank counts. Resuming on the same number of ranks restores every entry to its rank and
slot, so the run continues exactly as if it had not stopped; on another number of ranks
the entries are dealt out evenly.
"""
import json
from pathlib import Path

import h5py
import numpy as np
import scipy.sparse as sp

from ..collective_write import Part, collective_h5_write
from ..data.sampler import sampler_from_state
from ..errors import InputError, given
from ..kernels.compute import DEFAULT_WORK_BYTES, KernelCompute
from ..mpi.comm import chunk, run_collectively
from .pipeline import Pending
from .state import LossWindows, SolverState, SolverStats
from .table import SupportVectorTable, shard_offsets, shard_parts

FORMAT = "ppack-checkpoint"
FORMAT_VERSION = 1


def run_identity(spec, sigma, pack, seed, n_samples, n_features, dtype, iterations, n_classes, average=False,
                 sampling="uniform", step=1.0, class_weight=None, row_weights=False, validation=None,
                 calibration=None, svm_type="c_svc", epsilon=None, grid=None, optimizer="sgd"):
    """The training parameters a checkpoint is made with, and that a resume must match (all
    but ``iterations``). A setting at the value earlier versions always used is left out, so
    that their checkpoints still resume: averaging off, uniform sampling, the step c = 1, no
    weights (``class_weight`` the resolved weights' repr, None without), no validation, no
    calibration slice (``calibration``: the hash threshold of its rows, see ``calibration.py``),
    c_svc (``epsilon`` only for epsilon_svr), the SGD (``optimizer``). ``grid``: a grid pass's
    columns (``grid.grid_identity``), None for one model."""
    params = {"kernel": spec.name, "gamma": spec.gamma, "degree": spec.degree, "coef0": spec.coef0,
              "offset": spec.offset, "sigma": sigma, "pack": int(pack), "seed": seed, "n_samples": n_samples,
              "n_features": n_features, "dtype": dtype, "iterations": iterations, "n_classes": n_classes}
    if average:  # an averaged run's checkpoints hold the averages too
        params["average"] = True
    if sampling != "uniform":
        params["sampling"] = sampling
    if float(step) != 1.0:
        params["step"] = float(step)
    if class_weight is not None:
        params.update(class_weight=class_weight, row_weights=bool(row_weights))
    if validation is not None:  # the held-out rows change the sampled stream
        params.update(validation=float(validation))
    if calibration is not None:
        params.update(calibration=float(calibration))
    if svm_type != "c_svc":
        params["svm_type"] = svm_type
        if epsilon is not None:
            params["epsilon"] = float(epsilon)
    if grid is not None:
        params["grid"] = grid
    if optimizer != "sgd":
        params["optimizer"] = optimizer
    return params


def write_checkpoint(comm, path, table, state, stats, sampler, params, pending=None, column_stops=None,
                     progressive=None, validation=None, dual=None):
    """Collective: write ``path`` atomically, each rank its own table shard (see
    ``collective_write``); returns the ``WriteReport``. ``pending``: a pipelined run's
    ``pipeline.Pending`` (the ids delivered ahead, replicated; each rank's sums of the first
    pack ahead, one row per rank), or None; ``column_stops``: a grid pass's
    ``column_stops.ColumnStops``, or None; ``progressive``: a grid pass's
    ``progressive.ProgressiveRecord`` (each rank writes its shard's rows of it), or None;
    ``validation``: the run's ``validation.Validation`` (its histories and patience), or None;
    ``dual``: the dual optimizer's (``dual.epochs.EpochState.as_dict()``, the draws' active sets
    (n_samples, K) uint8, replicated), its ``sampler`` then the ``dual.draws.DualDraws``."""
    offsets = shard_offsets(comm, table)
    entries, nonzeros = offsets
    n, nnz, size, rank = int(entries[-1]), int(nonzeros[-1]), comm.Get_size(), comm.Get_rank()

    def create(f):
        sampler_state, sampler_block = sampler.state()
        f.attrs.update(format=FORMAT, format_version=FORMAT_VERSION, ranks=size,
                       params=json.dumps(params, sort_keys=True), iteration=state.iteration,
                       scale=_scalars(state.scale), norm=_scalars(state.norm), rho=np.asarray(state.rho, np.float64),
                       rho_sum=np.asarray(state.rho_sum, np.float64), sampler=json.dumps(sampler_state),
                       row_seconds=np.zeros(size) if state.row_seconds is None else state.row_seconds,
                       stats=json.dumps(stats.as_dict()),
                       storage="csr" if table.sparse else "dense", n_features=table.n_features)
        f["sampler_block"] = sampler_block
        for name in ("loss_windows", "loss_curve"):  # the SGD's (the dual has none)
            if getattr(state, name) is not None:
                f.attrs[name] = json.dumps(getattr(state, name).as_dict())
        if state.stage_outputs is not None:  # rank 0's (this runs there)
            f["stage_outputs"] = state.stage_outputs
        if column_stops is not None:
            f.attrs["column_stops"] = json.dumps(column_stops.as_dict())
        if validation is not None:
            f.attrs["validation"] = json.dumps(validation.as_dict())
        if dual is not None:
            f.attrs["dual"] = json.dumps(dual[0])
            f["dual_active"] = dual[1]
        if progressive is not None:  # every row of the data set, in global row order
            f.create_dataset("progressive", shape=(len(progressive.folds), progressive.held.shape[1]),
                             dtype=np.float64)
        f["rank_offsets"] = entries
        f.create_dataset("owner", shape=(n,), dtype=np.int32)
        f.create_dataset("keys", shape=(n,), dtype=np.int64)
        f.create_dataset("coef", shape=(n,) if table.n_columns == 1 else (n, table.n_columns), dtype=np.float64)
        if table.averaged:  # the weighted sums of the averaged iterate (averaging.py), as the table keeps them
            f.attrs["avg_weight"] = state.avg_weight
            f.attrs["avg_clock"] = table.avg_clock
            f.create_dataset("avg", shape=(n, table.n_columns), dtype=np.float64)
            f.create_dataset("avg_since", shape=(n, table.n_columns), dtype=np.float64)
        if pending is not None:
            f.attrs["pending_sizes"] = np.array([len(ids) for ids in pending.ids], dtype=np.int64)
            f["pending_ids"] = np.concatenate(pending.ids) if pending.ids else np.empty(0, dtype=np.int64)
            if pending.sums is not None:
                f.create_dataset("pending_sums", shape=(size,) + pending.sums.shape, dtype=np.float64)
        if table.sparse:
            f.create_dataset("indptr", shape=(n + 1,), dtype=np.int64)
            f.create_dataset("indices", shape=(nnz,), dtype=np.int32)
            f.create_dataset("values", shape=(nnz,), dtype=table.dtype)
        else:
            f.create_dataset("features", shape=(n, table.n_features), dtype=table.dtype)

    def finish(f):
        f.attrs["complete"] = True

    def own_parts():
        parts = shard_parts(table, offsets, rank)
        if pending is not None and pending.sums is not None:
            parts.append(Part("pending_sums", rank, pending.sums[None]))
        if progressive is not None and len(progressive.held):
            parts.append(Part("progressive", progressive.start, progressive.held))
        if table.n:
            parts.append(Part("owner", int(entries[rank]), np.full(table.n, rank, dtype=np.int32)))
            if table.averaged:
                avg, since = table.lazy_avg
                parts += [Part("avg", int(entries[rank]), avg), Part("avg_since", int(entries[rank]), since)]
        return parts

    return collective_h5_write(comm, path, create, own_parts, finish)


def read_checkpoint(comm, path, params, spec, dtype, tol_window, work_bytes=DEFAULT_WORK_BYTES, groups=None,
                    column_stops=None, active=None, progressive=None, validation=None, dual=None):
    """Collective: ``(table, state, stats, sampler, pending)`` of this rank from a checkpoint;
    ``pending``, a ``pipeline.Pending`` for a pipelined run's checkpoint (its sums only when
    the run has the ranks the checkpoint was written by), else None. A grid pass's: ``groups``,
    its ``KernelGroups`` (or None); ``column_stops``, its ``ColumnStops`` (or None), restored in
    place when the checkpoint has them (else the test starts afresh, as the windows of one
    model's), and ``active``, its columns' (Q,) flags, where the stopped ones turn False;
    ``progressive``, its ``ProgressiveRecord`` (or None), whose shard rows are read in place.
    ``validation``: the run's ``validation.Validation`` (or None), its histories and patience
    restored in place when the checkpoint has them (older files: they start afresh).
    ``dual``: the dual optimizer's ``(draws, epochs)`` (``dual.solver.DualSolver.fresh_state``),
    restored in place; the returned sampler is then those draws.

    ``params`` must match the checkpoint's training parameters except ``iterations`` (a
    run may be continued longer). The --tol windows continue when ``tol_window`` is the
    checkpoint's, else they start afresh. Raises InputError naming the file and the mismatch.
    Each rank reads only its own rows.
    """
    def load():
        with h5py.File(path, "r") as f:
            a = f.attrs
            _check_header(path, a, params)
            n = len(f["keys"])
            size, rank = comm.Get_size(), comm.Get_rank()
            if int(a["ranks"]) == size:
                if "rank_offsets" in f:
                    offsets = f["rank_offsets"][()]
                    mine = np.arange(offsets[rank], offsets[rank + 1])
                    occupancy = np.diff(offsets)
                else:  # written before the rank offsets were stored
                    mine, occupancy = _rows_owned(f["owner"], rank, size)
            else:
                start, stop = chunk(n, rank, size)
                mine = np.arange(start, stop)
                occupancy = np.array([hi - lo for lo, hi in (chunk(n, k, size) for k in range(size))])
            n_features = int(a["n_features"])
            scale, norm = (np.atleast_1d(a[name]).astype(np.float64) for name in ("scale", "norm"))
            averaged = "avg" in f
            table = SupportVectorTable(KernelCompute(spec, n_features, a["storage"] == "csr", dtype, work_bytes,
                                                     groups), len(scale), averaged)
            if progressive is not None:
                if "progressive" not in f:
                    raise InputError("dataset 'progressive' is missing: a grid pass with progressive scores "
                                     "resumes only from its own checkpoint", path)
                progressive.held[:] = f["progressive"][progressive.start:progressive.stop]
            if column_stops is not None and "column_stops" in a:
                try:
                    column_stops.restore(json.loads(a["column_stops"]), active)
                except ValueError as error:
                    raise InputError(f"attribute 'column_stops': {error}", path) from None
            if validation is not None and "validation" in a:
                try:
                    validation.restore(json.loads(a["validation"]))
                except (ValueError, KeyError, TypeError) as error:
                    raise InputError(f"attribute 'validation': {error}", path) from None
            keys, coef, X = _read_rows(f, a["storage"] == "csr", n_features, mine)
            X = X.astype(dtype)
            avg = since = None
            if averaged:  # this rank's rows only (a contiguous range, as written)
                lo, hi = (int(mine[0]), int(mine[-1]) + 1) if len(mine) else (0, 0)
                avg = f["avg"][lo:hi][mine - lo]
                if "avg_since" in f:  # older files hold the averages up to date: since 0, clock 0
                    table.avg_clock[:] = a["avg_clock"]
                    since = f["avg_since"][lo:hi][mine - lo]
                else:
                    since = np.zeros_like(avg)
            table.insert_many(keys, coef, X, None, avg, since)
            windows = json.loads(a["loss_windows"]) if "loss_windows" in a else {}  # absent in older files
            if windows.get("size") != tol_window:
                windows = {"size": tol_window}
            state = SolverState(int(a["iteration"]), scale, norm, occupancy.astype(np.int64), LossWindows(**windows),
                                float(a["avg_weight"]) if averaged else None,
                                *(np.atleast_1d(a[name]).astype(np.float64) if name in a else np.zeros(len(scale))
                                  for name in ("rho", "rho_sum")))  # absent in older files: 0
            if "loss_curve" in a:  # absent in older files: the run's curve starts at the resume
                state.loss_curve = LossWindows(**json.loads(a["loss_curve"]))
            if "stage_outputs" in f and rank == 0:  # an epochs="auto" run's last judged stage
                state.stage_outputs = f["stage_outputs"][()]
            if int(a["ranks"]) == size and "row_seconds" in a:  # placement by cost goes on as measured
                state.row_seconds = np.asarray(a["row_seconds"], np.float64)
            saved_stats = json.loads(a["stats"])
            stats = SolverStats(saved_stats["packs"], saved_stats["allreduce_calls"], saved_stats["projections"],
                                saved_stats["hinge_moving_average"], saved_stats["seconds"],
                                gc_collections=saved_stats.get("gc_collections", 0))
            stats.bytes.update(saved_stats.get("bytes", {}))  # absent in older files: counted from here on
            if dual is not None:
                draws, epochs = dual
                try:
                    draws.resume(json.loads(a["sampler"]), f["sampler_block"][()], f["dual_active"][()])
                    epochs.restore(json.loads(a["dual"]))
                except (ValueError, KeyError) as error:
                    raise InputError(f"attribute 'dual': not this dual run's state ({error})", path) from None
                sampler = draws
            else:
                sampler = sampler_from_state(json.loads(a["sampler"]), f["sampler_block"][()])
            pending = None
            if "pending_sizes" in a:
                sizes = np.asarray(a["pending_sizes"], dtype=np.int64)
                ids = np.split(f["pending_ids"][()], np.cumsum(sizes)[:-1]) if len(sizes) else []
                sums = f["pending_sums"][rank] if "pending_sums" in f and int(a["ranks"]) == size else None
                pending = Pending(ids, sums)
            return table, state, stats, sampler, pending

    if not Path(path).exists():
        raise InputError("No such checkpoint file", path)
    return run_collectively(comm, load)


def _rows_owned(owner, rank, size, rows=1 << 20):
    """The entries ``owner`` (a dataset) gives ``rank`` (ascending) and every rank's count (size,),
    read ``rows`` at a time."""
    mine, occupancy = [], np.zeros(size, dtype=np.int64)
    for lo in range(0, len(owner), rows):
        block = owner[lo:lo + rows]
        mine.append(lo + np.flatnonzero(block == rank))
        occupancy += np.bincount(block, minlength=size)
    return (np.concatenate(mine) if mine else np.empty(0, dtype=np.int64)), occupancy


def _scalars(values):
    """A float for one problem (as binary checkpoints always held), else the array."""
    return float(values[0]) if len(values) == 1 else np.asarray(values)


def _read_rows(f, sparse, n_features, rows):
    """``(keys, coef, X)`` of the entries ``rows`` (ascending), read run by contiguous run."""
    runs = np.split(rows, np.flatnonzero(np.diff(rows) != 1) + 1) if len(rows) else []
    parts = [_read_range(f, sparse, n_features, int(run[0]), int(run[-1]) + 1) for run in runs]
    if not parts:
        parts = [_read_range(f, sparse, n_features, 0, 0)]
    keys = np.concatenate([p[0] for p in parts])
    coef = np.concatenate([p[1] for p in parts])
    X = sp.vstack([p[2] for p in parts], format="csr") if sparse else np.concatenate([p[2] for p in parts])
    return keys, coef, X


def _read_range(f, sparse, n_features, lo, hi):
    keys, coef = f["keys"][lo:hi], f["coef"][lo:hi]
    if sparse:
        indptr = f["indptr"][lo:hi + 1]
        a, b = int(indptr[0]), int(indptr[-1])
        X = sp.csr_matrix((f["values"][a:b], f["indices"][a:b], indptr - a), shape=(hi - lo, n_features))
    else:
        X = f["features"][lo:hi]
    return keys, coef, X


def check_checkpoint_file(path, params=None):
    """Whether ``path`` holds a checkpoint: False when there is no file; True for a complete
    ppack checkpoint (made with ``params``, when given, all but ``iterations``); anything
    else at that path raises InputError naming the file and what is wrong, so it is never
    overwritten or silently ignored."""
    if not Path(path).exists():
        return False
    try:
        with h5py.File(path, "r") as f:
            _check_header(path, f.attrs, params)
    except OSError as exc:
        raise InputError(f"not a readable HDF5 file ({exc}); {given('checkpoint')} must name a ppack checkpoint "
                         "or a file that does not exist yet", path) from None
    return True


def _check_header(path, attrs, params):
    if attrs.get("format") != FORMAT:
        raise InputError(f"attribute 'format': expected {FORMAT!r}, got {attrs.get('format')!r}; "
                         f"{given('checkpoint')} must name a ppack checkpoint or a file that does not exist yet", path)
    if not attrs.get("complete", False):
        raise InputError("attribute 'complete' is not set: the checkpoint was not written to the end", path)
    if params is None:
        return
    saved = json.loads(attrs["params"])
    saved.setdefault("n_classes", 2)  # binary checkpoints written before multiclass did not say
    was, now = saved.get("optimizer", "sgd"), params.get("optimizer", "sgd")
    if was != now:  # the two optimizers' states do not convert
        raise InputError(f"checkpoint was made by optimizer {was!r}, this run has optimizer {now!r}: resume with "
                         f"--optimizer {was} (or another {given('checkpoint')})", path)
    for name, value in params.items():
        was = saved.get(name)
        if name != "iterations" and was != value:
            if isinstance(was, dict) and isinstance(value, dict):  # a grid's: name the field that differs
                key = next(k for k in sorted(set(was) | set(value)) if was.get(k) != value.get(k))
                name, was, value = f"{name}.{key}", was.get(key), value.get(key)
            raise InputError(f"checkpoint was made with {name}={was!r}, this run has "
                             f"{name}={value!r}; resume with the same settings (or another "
                             f"{given('checkpoint')})", path)
