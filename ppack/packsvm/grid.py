"""A grid of kernel settings and C values times the folds of a cross-validation, trained in
one pass as columns of one table (``columns.py``), then scored on each column's held-out rows
and split into the refit model of any grid point. No scikit-learn here:
``ppack.model_selection`` (the GridSearchCV face) and ``python -m ppack tune`` both run it.

Grid points are (kernel setting, C) pairs, the settings outermost: point g = s * (C values) +
c. Columns = classes x grid points x (folds + 1), grid point g's block contiguous, in it fold
f's K class columns (f = n_folds: the refit, no fold held out). Every column shares every
sampled row and delivered block; the columns of one kernel setting share every kernel value,
and the settings, one kernel group each (``kernels.compute.KernelGroups``), share each tile's
dot products (rbf, poly, sigmoid, linear: one GEMM for all) or L1 reductions (laplacian
settings among themselves): only the formula and the weighted sums repeat per setting.
Column (g, f) has sigma = 1 / (n C_g) (n all the rows, as a PackSVC fit with sample_weight 0
on fold f has: C keeps its meaning), its setting's kernel and weight 0 on fold f's rows. So
each column is, to rounding, that separate fit, and the refit column is a fit on every row.

One-class grids (PackOneClassSVM) search nu where the others search C (``grid_parameter``):
nu is a fraction of the rows trained on, so column (g, f) has sigma = nu_g m_f / n, m_f the
rows outside fold f: the optimum of a fit on those rows alone with nu_g, and, to rounding, a
PackOneClassSVM fit with that sigma as nu and sample_weight 0 on fold f. Each column keeps
its own rho rule (step 1 / sigma, the interval of its kernel's radius), and its rho is set
after training as that fit sets it: the nu-quantile of its scores over every row (one more
predict pass per fold, over all rows instead of the fold's).

Scores: ``scores="pass"``, one predict pass over the training rows at the end, each row scored
by the final columns that held it out; or ``"progressive"`` (``progressive.py``), each
sampled row scored by the prediction its held-out columns tested during training, at its
last sampling: no second pass, but rows never sampled are left out and early rows are judged
by an early model.

Memory: each stored row keeps 8 bytes a column (its coefficient), 24 with averaging (and the
average's sum and clock), besides its features: ``grid_memory`` estimates a rank's table at T
and ``train_grid`` refuses, in one line and before training, a grid that would not fit.
"""
import copy
import hashlib
import math
import os
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from mpi4py import MPI

from ..errors import PPackError, given
from ..kernels.compute import KernelCompute, KernelGroups
from ..kernels.device import refuse_kernel_groups
from ..kernels.precision import resolve_dtype
from ..kernels.spec import KernelSpec
from ..kernels.threads import ensure_threads
from ..mpi.collectives import Collectives
from ..mpi.comm import on_rank0, run_collectively
from ..registry import DTYPES
from . import convergence, feature_scale
from .averaging import averaged_offset
from .checkpoint import check_checkpoint_file, read_checkpoint, run_identity
from .column_stops import ColumnStops
from .columns import Columns
from .dual import fit as dual_fit
from .dual.solver import DualSolver
from .estimator import resolve_gamma
from .loop import Checkpointing, PackedSolver
from .losses import one_class_radius2, one_class_rule
from .objective import nu_quantile, training_rows
from .predict import distributed_decisions
from .progressive import ProgressiveRecord
from .state import SolverState
from .table import SupportVectorTable
from .validation import ColumnValidation
from .warmup import warm_kernels

# bytes a stored row keeps per column: its coefficient; with averaging also the average's sum and clock
COLUMN_BYTES, AVERAGED_COLUMN_BYTES = 8, 24
# besides its features and columns: the key, the norm, the key map's slot (about)
ROW_OVERHEAD_BYTES = 32
# how a grid pass's held-out rows are scored (``GridFit``)
SCORES = ("pass", "progressive")
# the estimator's parameters a pass's kernel settings set (each setting one kernel group)
KERNEL_PARAMS = ("kernel", "gamma", "degree", "coef0")


@dataclass
class GridMemory:
    """A rank's worst-case table for a grid (at T, every sampled row stored): ``columns``,
    ``bytes_per_row`` (features + columns + overhead), of which ``column_bytes_per_row``,
    ``rows`` per rank and ``total`` bytes; ``limit``: what the rank may use."""

    columns: int
    bytes_per_row: int
    column_bytes_per_row: int
    rows: int
    total: int
    limit: float

    def line(self):
        return (f"{self.columns} columns: {self.column_bytes_per_row} bytes per stored row for the columns, "
                f"{self.bytes_per_row} with its features; up to {self.rows} stored rows per rank: "
                f"{_size(self.total)} per rank (limit {_size(self.limit)})")


def grid_memory(shard, n_columns, averaged, iterations, ranks, limit=None, collectives=None):
    """The ``GridMemory`` of ``n_columns`` columns on ``shard``'s data at T = ``iterations``
    on ``ranks`` ranks; limit: bytes per rank (None: this machine's memory over the ranks
    that share its cores). With ``collectives`` (collective), the widest rank's stored row
    and the smallest limit, so that every rank decides alike."""
    item = np.dtype(shard.dtype).itemsize
    if shard.sparse:
        per_row = shard.X.nnz / max(1, shard.X.shape[0])
        feature_bytes = int(math.ceil(per_row * (item + 4))) + 8
    else:
        feature_bytes = shard.n_features * item
    column_bytes = n_columns * (AVERAGED_COLUMN_BYTES if averaged else COLUMN_BYTES)
    per_row = feature_bytes + column_bytes + ROW_OVERHEAD_BYTES
    rows = math.ceil(min(iterations, shard.n_samples) / ranks)
    if limit is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        try:
            physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            physical = math.inf
        limit = 0.8 * physical / max(1, min(ranks, cores))
    if collectives is not None:
        agreed = collectives.max(np.array([float(per_row), -float(limit)]))
        per_row, limit = int(agreed[0]), -agreed[1]
    return GridMemory(n_columns, per_row, column_bytes, rows, rows * per_row, float(limit))


def column_of(K, n_folds, g, f, k=0):
    """The column of grid point g, fold f (n_folds: the refit) and class column k."""
    return (g * (n_folds + 1) + f) * K + k


def grid_parameter(estimator):
    """The parameter a pass's grid points differ in besides the kernel: "nu" for one-class, else "C"."""
    return "nu" if getattr(estimator, "SVM_TYPE", None) == "one_class" else "C"


def refuse_unsupported(estimator):
    """A one-line PPackError for what a grid pass does not do (yet)."""
    name = type(estimator).__name__
    if getattr(estimator, "SVM_TYPE", None) not in ("c_svc", "epsilon_svr", "one_class"):
        raise PPackError(f"{name}: a grid search trains PackSVC, PackSVR and PackOneClassSVM columns in one pass; "
                         f"{name} is not supported", collective=True)
    if getattr(estimator, "probability", False):
        raise PPackError(f"{given('probability', True)}: a grid search does not calibrate its columns; search "
                         "with probability=False, then fit the best parameters with probability=True", collective=True)
    if getattr(estimator, "sigma", None) is not None:
        raise PPackError("sigma: a grid search sets each column's sigma from its C; give C values, not sigma",
                         collective=True)


class GridFit:
    """A trained grid pass (``train_grid``): ``held`` (n_samples, G, K) each row's decision
    values from the columns that held it out (NaN for a row no fold holds out, and with
    ``scores`` "progressive" for a row never sampled), ``labels`` (n_samples,) the raw
    labels, on every rank; ``refit(g)`` the fitted estimator of grid point g; per grid point
    (G,) its ``Cs`` (C, or nu for one-class: ``grid_parameter``), ``settings`` (the kernel
    parameters it sets, a dict) and ``specs`` (its KernelSpec); ``seconds``: {"train",
    "score"}; ``memory``: the ``GridMemory``; ``stops``: the ``ColumnStops`` of a run with
    ``tol`` or validation (each column's stop), or None; ``avg_weight`` (Q,): each column's
    averages' weight sum (where it stopped, or at the end); ``resumed_from``: the iteration
    the pass resumed from a checkpoint at (None: afresh); ``stopped``: whether it stopped
    early on request (then it is not scored); ``sigma`` and ``losses`` (Q,): each column's
    sigma and ``losses.Loss``; ``validation``: the pass's ``validation.ColumnValidation``, or
    None."""

    def __init__(self, template, Cs, settings, specs, n_folds, folds, shard, weights, table, state, stats, sigma,
                 losses, T, seed, compile_seconds, memory, stops=None, resumed_from=None, stopped=False,
                 validation=None):
        self.template, self.Cs, self.n_folds, self.folds = template, list(Cs), int(n_folds), folds
        self.settings, self.specs = list(settings), list(specs)
        self.shard, self.weights, self.table, self.state, self.stats = shard, weights, table, state, stats
        self.sigma, self.losses = sigma, list(losses)
        self.T, self.seed, self.compile_seconds, self.memory = T, seed, compile_seconds, memory
        self.resumed_from, self.stopped, self.validation = resumed_from, stopped, validation
        self.K = table.n_columns // (len(self.Cs) * (self.n_folds + 1))
        self.seconds = {"train": stats.seconds["total"], "score": 0.0}
        self.scores = "pass"
        self.stops = stops
        self.dual = None  # a dual pass's ``DualSolver`` (its columns' convergence)
        if table.averaged:
            self.avg_weight = np.full(table.n_columns, state.avg_weight)
            if stops is not None:
                stopped = stops.iteration >= 0
                self.avg_weight[stopped] = stops.avg_weight[stopped]

    def converged(self, g):
        """Whether grid point g's columns (its folds' and its refit column) show no sign of
        stopping short (``convergence.verdict``): a column stopped by its own test is taken as
        converged; the others are judged on their sigma T and the pass's loss windows (shared
        by every column; no per-column objective is taken)."""
        K, F = self.K, self.n_folds
        if self.dual is not None:  # the dual's own test, column by column
            return bool(self.dual.column_converged[column_of(K, F, g, 0):column_of(K, F, g + 1, 0)].all())
        for f in range(F + 1):
            first = column_of(K, F, g, f)
            if self.stops is not None and self.stops.stopped(first):
                continue
            figures = convergence.figures(self.template.SVM_TYPE, self.sigma[first:first + K], self.state.iteration,
                                          self.state.loss_windows, None)
            if convergence.verdict(figures) is not None:
                return False
        return True

    def score_pass(self):
        """Collective: one predict pass over the training rows, each row with the columns that
        hold it out (fold f's rows with the G x K columns of fold f, so a row's kernel values
        feed G K multiply-adds, not all Q); sets ``held`` and ``labels`` (every rank; NaN for a
        row no fold holds out). One-class columns first set their rho from every row
        (``_one_class_scores``)."""
        comm = self.template._comm()
        start = MPI.Wtime()
        table, state = self.table, self.state
        if table.averaged:  # each column's average over the iterations it ran (``column_stops``)
            coef, scale = table.avg / self.avg_weight, np.ones(table.n_columns)
            rho = averaged_offset(state, self.losses[-1])
        else:
            coef, scale, rho = table.coef, state.scale, state.rho.copy()
        n, G, K, F = self.shard.n_samples, len(self.Cs), self.K, self.n_folds
        held = np.full((n, G, K), np.nan)
        labels = np.full(n, np.nan)
        # the pass's kernel groups over a fold's columns: each setting's G / S grid points x K
        groups = table.compute.groups
        S = 1 if groups is None else len(groups.specs)
        compute = table.compute.with_groups(None if groups is None else
                                            KernelGroups(groups.specs, np.arange(S + 1) * (G // S) * K))
        for f in range(F):
            rows = np.flatnonzero(self.folds == f)
            cols = np.concatenate([np.arange(column_of(K, F, g, f), column_of(K, F, g, f) + K) for g in range(G)])
            fold_coef = coef[:, cols]
            # only the stored rows with a coefficient in these columns: fold f's own rows, and rows
            # stored for other columns alone, would add exact zeros after costing their dot products
            keep = np.any(fold_coef != 0.0, axis=1)
            fold_columns = _FoldColumns(_kept_rows(compute, table, keep), len(cols), table.dtype)
            if self.template.SVM_TYPE == "one_class":
                decisions, fold_labels, rho[cols] = self._one_class_scores(
                    comm, fold_columns, scale[cols], np.ascontiguousarray(fold_coef[keep]), f, cols, rows)
            else:
                decisions, fold_labels = distributed_decisions(comm, fold_columns, scale[cols], self.shard,
                                                               self.shard.n_features, ids=rows,
                                                               coef=np.ascontiguousarray(fold_coef[keep]))
            if comm.Get_rank() == 0:
                held[rows] = (decisions.reshape(len(rows), len(cols)) - rho[None, cols]).reshape(len(rows), G, K)
                labels[rows] = fold_labels
        collectives = Collectives(comm)
        self.held = collectives.broadcast(held)
        self.labels = collectives.broadcast(labels)
        self.seconds["score"] = comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)

    def _one_class_scores(self, comm, fold_columns, scale, coef, f, cols, rows):
        """Collective: (the raw scores of fold f's rows (rows, columns) under its columns ``cols``
        and their labels, on rank 0 (None elsewhere); each column's rho (columns,), on every
        rank), rho as the column's separate fit sets it: the nu-quantile (sigma) of its scores
        over every row, the fold's rows weighing 0 (``objective.nu_quantile``)."""
        scores, labels, weights = training_rows(comm, fold_columns, scale, self.shard, self.shard.n_features,
                                                self.weights, coef=coef)
        rho = np.zeros(len(cols))
        if comm.Get_rank() == 0:
            weights = np.ones(len(labels)) if weights is None else weights.copy()
            weights[self.folds == f] = 0.0
            rho[:] = [nu_quantile(scores[j], weights, self.sigma[q], len(labels)) for j, q in enumerate(cols)]
        Collectives(comm).broadcast(rho)
        if comm.Get_rank() != 0:
            return None, None, rho
        return np.ascontiguousarray(scores[:, rows].T), labels[rows], rho

    def progressive_scores(self, record):
        """Collective: ``held`` and ``labels`` (every rank) from a ``ProgressiveRecord`` of the
        training, without a predict pass (``progressive.py``)."""
        comm = self.template._comm()
        start = MPI.Wtime()
        held, self.labels = record.collect(comm, self.shard.y)
        self.held = held.reshape(self.shard.n_samples, len(self.Cs), self.K)
        self.scores = "progressive"
        self.seconds["score"] = comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)

    def held_out(self, g, f):
        """(rows of fold f, their decision values (rows,) or (rows, K), their raw labels) for grid
        point g; with progressive scores, only the rows sampled during training."""
        rows = np.flatnonzero(self.folds == f)
        if self.scores == "progressive":
            rows = rows[~np.isnan(self.held[rows, g, 0])]
        values = self.held[rows, g, :]
        return rows, values[:, 0] if self.K == 1 else values, self.labels[rows]

    def refit(self, g):
        """Collective: a fitted estimator of the template's class with C (or nu) = Cs[g] and grid
        point g's kernel setting, from its refit column: a fit on every row with the same seed,
        without a second training pass (one-class sets its rho with a predict pass, as a fit does)."""
        comm = self.template._comm()
        table, state, K, F = self.table, self.state, self.K, self.n_folds
        first = column_of(K, F, g, F)
        cols = slice(first, first + K)
        coef = table.coef[:, cols]
        avg = table.avg[:, cols] if table.averaged else None
        keep = np.any(coef != 0.0, axis=1) if avg is None else np.any((coef != 0.0) | (avg != 0.0), axis=1)
        compute = table.compute
        sub = SupportVectorTable(KernelCompute(self.specs[g], table.n_features, table.sparse, table.dtype,
                                               compute.work_bytes), K, averaged=table.averaged)
        sub.insert_many(table.keys[keep], coef[keep], _stored_rows(table, keep), norms=table.norms[keep],
                        avg=None if avg is None else avg[keep])
        occupancy = np.array(comm.allgather(int(np.count_nonzero(keep))), dtype=np.int64)
        stopped = self.stops is not None and self.stops.stopped(first)
        track = None if self.validation is None else self.validation.tracks[first // K]
        stats = copy.copy(self.stats)
        # the separate fit's: it stopped where this column did, converged (tol) unless its validation stopped it
        stats.converged = stopped and not (track is not None and track.stopped)
        sub_state = SolverState(iteration=int(self.stops.iteration[first]) if stopped else state.iteration,
                                scale=state.scale[cols].copy(),
                                norm=state.norm[cols].copy(), occupancy=occupancy, loss_windows=state.loss_windows,
                                avg_weight=float(self.avg_weight[first]) if table.averaged else None,
                                rho=state.rho[cols].copy(),
                                rho_sum=state.rho_sum[cols].copy(), row_seconds=state.row_seconds)
        model = copy.copy(self.template)
        for name, value in self.settings[g].items():
            setattr(model, name, value)
        model.spec_ = self.specs[g]
        name = grid_parameter(model)
        setattr(model, name, self.Cs[g])
        model.table_ = sub
        model.sigma_ = float(self.sigma[first])
        trained = self.shard.n_samples - (0 if self.validation is None else len(self.validation.ids))
        model.C_ = 1.0 / (trained * model.sigma_)  # as a fit computes it
        model.loss_ = self.losses[first]
        model.stopped_ = False
        model.resumed_from_ = None
        model.optimizer_ = "sgd" if self.dual is None else "dual"
        if self.dual is not None:  # its columns' own convergence report, as a dual fit has it
            model._dual_report = self.dual.report_of(np.arange(first, first + K))
            stats.converged = model._dual_report["converged"]
        model._finish(comm, self.shard, sub_state, stats, self.weights, None, self.seed, self.T,
                      self.compile_seconds)
        if self.dual is not None:
            model.n_iter_ = model._dual_report["epochs"]
            model.dual_coef_ = sub.coef.T.copy()
        if track is not None:
            model.training_["validation"] = self.validation.report(track)
        model.training_["grid"] = {"columns": table.n_columns, "grid_points": len(self.Cs), "folds": F,
                                   name: [float(C) for C in self.Cs], "refit_of": g,
                                   "kernels": [spec.describe() for spec in self.specs]}
        return model


def _kept_rows(compute, table, keep):
    """A compute like ``compute`` (kernels and groups) holding only the stored rows where
    ``keep`` (n,) bool is True, in their order (all of them: ``compute`` itself)."""
    if keep.all():
        return compute
    kept = KernelCompute(compute.spec, table.n_features, table.sparse, table.dtype, compute.work_bytes,
                         compute.groups)
    if keep.any():
        kept.store(_stored_rows(table, keep), table.norms[keep])
    return kept


def _stored_rows(table, keep):
    """The table's stored rows where ``keep`` (n,) bool is True: dense (k, d) or scipy CSR."""
    if table.sparse:
        indptr, indices, values = table.features
        return sp.csr_matrix((values, indices, indptr), shape=(len(table), table.n_features))[keep]
    return table.features[keep]


@dataclass
class _FoldColumns:
    """What a predict pass (``predict.distributed_decisions``) reads of a table, for a subset of
    its columns: the ``compute`` of its stored rows (with the subset's kernel groups), the
    number of columns and the rows' dtype."""

    compute: object
    n_columns: int
    dtype: object


def train_grid(estimator, X, y, Cs, folds, n_folds, sample_weight=None, memory_limit=None, console=None,
               kernels=None, scores="pass", checkpoint=None, checkpoint_every_seconds=None, checkpoint_every_packs=None,
               resume=False, should_stop=None, stop_after_packs=None):
    """Collective: train ``estimator``'s settings at every kernel setting of ``kernels`` and
    every C of ``Cs`` on every fold of ``folds`` ((n_samples,) int: each row's fold
    0..n_folds-1, or -1 for a row no fold holds out; the same on every rank) and on all rows,
    in one pass; returns the scored ``GridFit``. kernels: a list of dicts of kernel parameters
    (kernel, gamma, degree, coef0) each setting gives the estimator, None: its own; they must
    share a reduction (the dot-product kernels rbf, poly, sigmoid and linear, or laplacian
    alone). X, y, sample_weight: as ``PackSVC.fit`` takes them (a Shard, or data every rank
    holds). ``estimator`` becomes the template of the refit models (its fitted state is the
    pass's data, not a model). memory_limit: bytes per rank the table may take (None:
    ``grid_memory``'s). console: a callable for the memory line (verbose), or None. scores:
    "pass" (a predict pass after training) or "progressive" (the rows' tests during training).

    checkpoint, checkpoint_every_seconds, checkpoint_every_packs, resume, should_stop: as
    ``PackSVC.fit`` takes them; the checkpoint names the grid (``grid_identity``) and holds each
    column's stop (tol). stop_after_packs: stop after this many packs (as if asked to). A pass
    that stops early returns its ``GridFit`` unscored, with ``stopped`` True (its state is in
    the checkpoint, when there is one)."""
    est = estimator
    refuse_unsupported(est)
    if scores not in SCORES:
        raise PPackError(f"scores: one of {', '.join(SCORES)}, got {scores!r}", collective=True)
    one_class, name = est.SVM_TYPE == "one_class", grid_parameter(est)
    if one_class and scores == "progressive":
        raise PPackError("scores: 'progressive' does not score one-class columns, whose rho is set after "
                         "training from every row; use scores='pass'", collective=True)
    Cs = [float(C) for C in Cs]
    if not Cs or any(not (C > 0 and math.isfinite(C)) for C in Cs) or (one_class and max(Cs) > 1):
        expected = "values in (0, 1]" if one_class else "positive finite values"
        raise PPackError(f"{name}: a grid needs {expected}, got {Cs}", collective=True)
    settings = [{}] if not kernels else [dict(setting) for setting in kernels]
    for setting in settings:
        unknown = sorted(set(setting) - set(KERNEL_PARAMS))
        if unknown:
            raise PPackError(f"{unknown[0]}: not a kernel parameter; a pass's kernel settings set only "
                             f"{', '.join(KERNEL_PARAMS)}", collective=True)
    comm = est._comm()
    ensure_threads(comm)
    est.__dict__.pop("dtype_", None)
    shard = run_collectively(comm, est._validated_shard, X, y, sample_weight)
    specs = [_kernel_spec(est, setting, comm, shard) for setting in settings]
    if any(spec.uses_l1 != specs[0].uses_l1 for spec in specs):
        raise PPackError(f"kernel: {specs[0].name} and laplacian do not share a pass (laplacian's L1 distances are "
                         "not dot products); one pass for the dot-product kernels, one for laplacian",
                         collective=True)
    refuse_kernel_groups(est.device, len(specs))  # before any training work: the pass would meet it in the loop
    # the strictest of the settings' types: float32 only where every setting's kernels allow it
    resolved = [resolve_dtype(comm, est.dtype, shard, spec) for spec in specs]
    dtype = "float64" if any(name == "float64" for name, _ in resolved) else resolved[0][0]
    bounds = [bound for _, bound in resolved if bound is not None]
    est.dtype_, est.float32_error_bound_ = dtype, max(bounds) if bounds and dtype == "float32" else None
    shard = shard.computed_in(DTYPES[est.dtype_])
    kernel_scale = feature_scale.figures(comm, shard, specs)  # said now, before the pass
    est._warn(comm, est.feature_scale_warning, feature_scale.advice(kernel_scale))
    folds = np.asarray(folds, dtype=np.int64)
    if folds.shape != (shard.n_samples,):
        raise PPackError(f"cv: {folds.shape[0]} fold labels for {shard.n_samples} rows", collective=True)
    labels, weights, n_classes, K = est._targets(shard)
    seed = est.seed_
    S, F = len(specs), int(n_folds)
    G = S * len(Cs)  # grid points: (kernel setting, C), the settings outermost
    Q = K * G * (F + 1)
    # one optimizer for the pass: auto judges the grid's largest C
    dual = not one_class and dual_fit.chosen_optimizer(
        getattr(est, "optimizer", "sgd"), max(Cs),
        est.epochs if est.iterations is None else est.iterations / shard.n_samples) == "dual"
    if dual:
        run_collectively(comm, dual_fit.refuse_sgd_options, est, checkpoint, est.SVM_TYPE)
    # tol and validation: each grid point and fold's K columns stop together, as their separate fit
    stops = None if est.tol is None and est.validation is None else ColumnStops(np.arange(Q) // K, est.tol,
                                                                                 est.tol_window)
    validation, est.held_out_ = None, None
    if est.validation is not None:  # the held-out rows no column trains on, as each separate fit's
        every = est.validation_every or max(1, shard.n_samples // (10 * int(est.pack)))
        validation = ColumnValidation(comm, est, shard, est.validation, seed, every, est.patience, stops,
                                      np.ones(Q, dtype=np.bool_))
        est.held_out_ = {"holdout": validation.holdout, "rows": len(validation.ids), "for": "validation"}
    m = shard.n_samples - (0 if validation is None else len(validation.ids))  # the rows trained on
    if dual:  # its epochs a cap; its table may come to hold every row
        T = dual_fit.epoch_cap(est.epochs, est.iterations, m) * m
    elif convergence.is_auto(est.epochs, est.iterations):
        raise PPackError(f"{given('epochs', 'auto')}: a grid pass trains every grid point for the same number of "
                         "iterations; give a number of epochs (auto is for one model's fit or train)")
    else:
        T = int(est.iterations) if est.iterations is not None else max(1, int(round(est.epochs * m)))
    memory = grid_memory(shard, Q, est.average and not dual, T, comm.Get_size(), memory_limit, Collectives(comm))
    if console is not None:
        settings_x = f"{S} kernel settings x " if S > 1 else ""
        console(f"grid of {settings_x}{len(Cs)} C values x {F} folds + the refit: {memory.line()}")
    if memory.total > memory.limit:
        raise PPackError(f"grid: {Q} columns ({K} class columns x {G} grid points x {F + 1} folds and refit) need "
                         f"{_size(memory.total).strip()} per rank ({memory.bytes_per_row} bytes per stored row, up "
                         f"to {memory.rows} rows), more than the {_size(memory.limit).strip()} available: use fewer "
                         "kernel settings, C values or folds, more ranks, or average=False (8 bytes a column "
                         "instead of 24)", collective=True)
    sigma, losses = _column_rules(est, comm, shard, labels, weights, specs, Cs, folds, F, K, m)
    est.loss_ = losses[-1]
    column_class = np.empty(Q, dtype=np.int64)
    column_fold = np.empty(Q, dtype=np.int64)
    column_group = np.empty(Q, dtype=np.int64)
    point_Cs = [C for _ in specs for C in Cs]
    for g in range(G):
        for f in range(F + 1):
            for k in range(K):
                q = column_of(K, F, g, f, k)
                column_class[q] = -1 if K == 1 else k
                column_fold[q] = f if f < F else -1
                column_group[q] = g // len(Cs)
    columns = Columns(sigma, [loss.bound for loss in losses], column_class, column_fold, folds,
                      kernels=tuple(specs) if S > 1 else None, column_group=column_group,
                      rho_step=[loss.rho_step for loss in losses], rho_low=[loss.rho_low for loss in losses],
                      rho_high=[loss.rho_high for loss in losses])
    if validation is not None:
        validation.active = columns.active  # the columns it stops
    if dual:
        return _train_dual_grid(est, comm, shard, labels, weights, specs, settings, Cs, point_Cs, sigma, losses,
                                columns, folds, F, T, seed, memory, scores, should_stop, stop_after_packs)
    record = None
    if scores == "progressive":  # the columns holding fold f out, in (g, k) order
        held_columns = [[column_of(K, F, g, f, k) for g in range(G) for k in range(K)] for f in range(F)]
        record = ProgressiveRecord(held_columns, folds, shard.start, shard.stop)
    params = run_identity(specs[0], float(sigma[0]), est.pack, seed, shard.n_samples, shard.n_features, est.dtype_, T,
                          n_classes,
                          average=est.average, sampling=est.sampling, step=est.step,
                          class_weight=None if weights is None else repr(est.class_weight_),
                          row_weights=shard.w is not None, svm_type=est.SVM_TYPE,
                          validation=None if validation is None else float(est.validation),
                          epsilon=getattr(est, "epsilon", None),
                          grid=grid_identity(Cs, specs, folds, F, K, scores, name))
    checkpointing = None if checkpoint is None else Checkpointing(
        str(checkpoint), checkpoint_every_seconds, checkpoint_every_packs, params)
    # any other file there is refused, resuming or not (a checkpoint of this very grid is overwritten afresh)
    exists = checkpoint is not None and comm.bcast(on_rank0(comm, check_checkpoint_file, checkpoint, params))
    previous = None
    if resume and exists:
        previous = read_checkpoint(comm, checkpoint, params, specs[0], DTYPES[est.dtype_], est.tol_window,
                                   est.work_bytes, columns.kernel_groups(), stops, columns.active, record,
                                   validation)
    solver = PackedSolver(comm, specs[0], sigma[0], T, est.pack, seed, est.work_bytes, est.progress, tol=None,
                          should_stop=should_stop,
                          tol_window=est.tol_window, n_columns=Q, average=est.average, step=est.step,
                          sampling=est.sampling, loss=est.loss_, placement=est.placement, device=est.device,
                          pipeline=est.pipeline, columns=columns, progressive=record, column_stops=stops,
                          validation=validation)
    compile_seconds = warm_kernels(comm, specs[0], shard.dtype, shard.sparse, shard.X.dtype,
                                   groups=columns.kernel_groups())
    resumed_from = None if previous is None else previous[1].iteration
    table, state, stats, stopped = solver.run(shard, labels, checkpointing, previous, stop_after_packs, weights)
    fit = GridFit(est, point_Cs, [setting for setting in settings for _ in Cs], [spec for spec in specs for _ in Cs],
                  F, folds, shard, weights, table, state, stats, sigma, losses, T, seed,
                  compile_seconds + solver.device_seconds, memory, stops, resumed_from, stopped, validation)
    if stopped:
        return fit
    if record is None:
        fit.score_pass()
    else:
        fit.progressive_scores(record)
    return fit


def _train_dual_grid(est, comm, shard, labels, weights, specs, settings, Cs, point_Cs, sigma, losses, columns, folds,
                     F, T, seed, memory, scores, should_stop, stop_after_packs):
    """Collective: ``train_grid``'s pass by the dual optimizer (``dual.solver``): column q's C is
    1 / (m sigma_q), fold f's rows have no dual variable in fold f's columns, each column stops
    by its own KKT gap; returns the scored ``GridFit`` (``dual`` its solver)."""
    if scores != "pass":
        raise PPackError(f"scores={scores!r}: the dual optimizer's grid is scored by a pass (its rows' margins "
                         "during training are not a held-out model's tests); use scores='pass'", collective=True)
    m = shard.n_samples
    solver = DualSolver(comm, specs[0], 1.0 / (m * sigma), columns, T // m, est.pack, seed,
                        dual_fit.DEFAULT_TOL if est.tol is None else est.tol, work_bytes=est.work_bytes,
                        should_stop=should_stop)
    compile_seconds = warm_kernels(comm, specs[0], shard.dtype, shard.sparse, shard.X.dtype,
                                   groups=columns.kernel_groups(), dual=True)
    table, state, stats, stopped = solver.run(shard, labels, weights, stop_after_packs)
    fit = GridFit(est, point_Cs, [setting for setting in settings for _ in Cs], [spec for spec in specs for _ in Cs],
                  F, folds, shard, weights, table, state, stats, sigma, losses, T, seed, compile_seconds, memory,
                  stopped=stopped)
    fit.dual = solver
    if not stopped:
        fit.score_pass()
    return fit


def grid_identity(Cs, specs, folds, n_folds, K, scores="pass", name="C"):
    """What a grid pass's checkpoint must match besides one model's parameters: the grid
    points' C values (Cs; nu values under ``name`` "nu") and kernels (specs, each KernelSpec),
    the folds ((n_samples,) int, by their SHA-1), the columns (K class columns each) and how
    the rows are scored (a progressive record must have run from the start)."""
    return {name: [float(C) for C in Cs], "kernels": [spec.describe() for spec in specs], "folds": int(n_folds),
            "fold_sha1": hashlib.sha1(np.ascontiguousarray(folds, dtype=np.int64).tobytes()).hexdigest(),
            "class_columns": int(K), "scores": scores}


def _column_rules(est, comm, shard, labels, weights, specs, Cs, folds, F, K, m):
    """Collective: each column's sigma (Q,) and ``losses.Loss`` (a list of Q), in ``column_of``'s
    order, grid points (setting, C or nu) with the settings outermost. C-SVC and SVR: sigma = 1 /
    (m C), m the rows trained on (all but a validation's), the loss of the rows a fold trains
    on, as a fit with sample_weight 0 on the fold gets it. One-class (no validation): sigma =
    nu m_f / m (the module docstring), and the rule of its sigma and its setting's kernel radius."""
    local = shard.start + np.arange(shard.stop - shard.start)
    if est.SVM_TYPE == "one_class":
        outside = [m - int(np.count_nonzero(folds == f)) for f in range(F)]
        radii = [one_class_radius2(comm, shard, spec) for spec in specs]
        sigma = [nu if f == F else nu * outside[f] / m for _ in specs for nu in Cs for f in range(F + 1)]
        losses = [one_class_rule(radii[q // (len(Cs) * (F + 1))], s) for q, s in enumerate(sigma)]
    else:
        fold_losses = []
        for f in range(F + 1):
            fold_weights = weights
            if f < F:
                fold_weights = np.ones(len(local)) if weights is None else weights.copy()
                fold_weights[folds[local] == f] = 0.0
            fold_losses.append(est._loss(comm, shard, labels, fold_weights))
        sigma = [1.0 / (m * C) for _ in specs for C in Cs for _ in range(F + 1)]
        losses = [fold_losses[q % (F + 1)] for q in range(len(sigma))]
    # K class columns each
    return np.repeat(np.array(sigma), K), [loss for loss in losses for _ in range(K)]


def _kernel_spec(estimator, setting, comm, shard):
    """Collective: the KernelSpec of ``estimator`` with the kernel parameters ``setting`` (a
    dict), its gamma resolved on ``shard`` as a fit resolves it."""
    if not setting:
        return estimator.spec_
    model = copy.copy(estimator)
    for name, value in setting.items():  # set_params needs scikit-learn, which the command line does without
        setattr(model, name, value)
    p = run_collectively(comm, model.validate_params)
    return KernelSpec(p["kernel"], resolve_gamma(comm, p["gamma"], shard), p["degree"], p["coef0"],
                      estimator.spec_.offset)


def _size(n):
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"
