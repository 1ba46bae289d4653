"""The dual coordinate optimizer on P-packSVM's packing: r coordinate steps in two Allreduce calls.

Per pack (``DualSolver.run``): collective 1 delivers the pack's r rows (drawn alike on every
rank, ``draws.DualDraws``); each rank computes, against its own support vectors, the rows'
partial margins and its share of the pair kernels, and writes the coefficient (alpha y) of
each drawn row it holds; collective 2 sums them with the "I hold key k" flags, the ranks'
digests and the stop vote. Every rank then replays the r coordinate steps alike
(``coordinate.coordinate_steps``) and merges the pack into the table as the SGD does
(``table.merge_pack``: coefficients added in place, new keys placed by count).

Why the alphas travel in collective 2 instead of living on every rank: a replicated alpha
costs n x K float64 on every rank (650 MB at 8.1M rows and ten classes), the very memory
ppack exists to spread; the holder's coefficient already is alpha y, and sending it costs
r x K float64 a pack, as much as the margins (a few percent of the pair kernels' r (r + 1) / 2
at one column, double the margins' share for a grid's many columns).

Epochs, shrinking and stopping follow LIBLINEAR's dual coordinate descent: after each epoch a
column whose projected gradients' spread (the KKT gap, PG max - PG min over its active
rows) is at most ``tol`` either stops (its active set held every row) or takes every row
back for one more check. The run ends when every column has stopped or after ``max_epochs``.
A full pass then certifies each column's relative duality gap (``certify``); a column the
cap stopped has converged too where that gap is at most ``fit.CERTIFIED_GAP``.

Checkpoints are written between packs, as the SGD's (``checkpoint.write_checkpoint``): the
table and state, the draws' position and active sets, and the epoch's figures
(``epochs.EpochState``), so a resumed run goes on within the epoch it stopped in, bit for bit.
"""
import math
import time

import numpy as np
from mpi4py import MPI

from ...data.delivery import Delivery
from ...errors import PPackError
from ...kernels.compute import DEFAULT_WORK_BYTES, KernelCompute
from ...kernels.threads import single_threaded_blas
from ...mpi.collectives import Collectives
from ..checkpoint import write_checkpoint
from ..loop import PackedSolver, count_collective1, pair_arguments
from ..pack_update import all_equal
from ..predict import block_rows
from ..state import PHASES, SolverState, SolverStats, replica_digest
from ..table import SupportVectorTable
from .coordinate import certificate_sums, coordinate_steps, relative_gap
from .draws import DualDraws
from .epochs import EpochState
from .fit import CERTIFIED_GAP
from .regression import regression_certificate_sums, regression_steps

_NO_AVERAGE, _NO_FOLD = np.empty((0, 0)), np.empty((0, 2))
# the passes over each pack's block (``coordinate.coordinate_steps``' sweeps), the further ones
# ending once a pass's largest |PG| is at most INNER_TOL times the run's tol
DEFAULT_SWEEPS = 30
INNER_TOL = 0.1


class DualBuffer:
    """Collective 2 of a dual pack of r rows, K columns, G kernel groups and p ranks, views of
    one zeroed float64 array ``data``: ``predictions`` (K, r) partial margins, ``pairs`` (G r (r +
    1) / 2) with ``group_pairs`` (G, ...) (none when ``pairs`` is False: the certificate's
    pass), ``alphas`` (K, r) the holders' coefficients, ``owner_flags`` (r) rank + 1 of the
    holder, ``digests`` (p) one slot per rank, the checkpoint vote and the stop vote."""

    def __init__(self, columns, r, ranks, groups=1, pairs=True):
        self.r = r
        tri = groups * (r * (r + 1) // 2) if pairs else 0
        self.data = np.zeros(2 * columns * r + tri + r + ranks + 2)
        n_pred = columns * r
        self.predictions = self.data[:n_pred].reshape(columns, r)
        self.pairs = self.data[n_pred:n_pred + tri]
        self.group_pairs = self.pairs.reshape(groups, tri // groups)
        start = n_pred + tri
        self.alphas = self.data[start:start + n_pred].reshape(columns, r)
        self.owner_flags = self.data[start + n_pred:start + n_pred + r]
        self.digests = self.data[start + n_pred + r:start + n_pred + r + ranks]
        self.pair_arguments = None

    @property
    def stop(self):
        return self.data[-1] > 0

    @property
    def checkpoint_due(self):
        return self.data[-2] > 0

    def vote(self, stop, checkpoint_due=False):
        self.data[-1] = 1.0 if stop else 0.0
        self.data[-2] = 1.0 if checkpoint_due else 0.0


class DualSolver:
    """Trains the C-SVC dual (or epsilon-SVR's) on a ``Shard``; every rank calls ``run`` together.

    comm: the communicator; spec: a ``KernelSpec`` (positive semi-definite: its diagonal is
    the step's curvature); cost (K,): each column's C; columns: the run's ``columns.Columns``
    (classes, folds, kernel groups); max_epochs: the cap (the stopping test ends the run
    earlier); pack: r; seed: the draws' seed; tol: the KKT gap each column stops at;
    shrinking: LIBLINEAR's; holdout: (fraction, seed) of rows never drawn, or None;
    progress(figures) is called on rank 0 after each epoch with the epoch's report; should_stop
    as the SGD's (every rank stops after the current pack); regression: a
    ``regression.Regression`` for epsilon-SVR's dual (the labels then centred targets), or None;
    sweeps: the passes over each pack's block (None: ``DEFAULT_SWEEPS``).
    """

    def __init__(self, comm, spec, cost, columns, max_epochs, pack=100, seed=0, tol=0.1, shrinking=True,
                 work_bytes=DEFAULT_WORK_BYTES, progress=None, should_stop=None, holdout=None, regression=None,
                 sweeps=None):
        for kernel in (spec,) if columns.kernels is None else columns.kernels:
            if not kernel.facts.psd:
                raise PPackError(f"optimizer dual: the {kernel.name} kernel is not positive semi-definite, so the "
                                 f"dual's coordinate step has no curvature to divide by; use optimizer sgd")
        self.comm, self.spec, self.columns = comm, spec, columns
        self.cost = np.ascontiguousarray(cost, dtype=np.float64)
        self.n_columns = columns.n_columns
        self.max_epochs = max_epochs
        self.pack, self.seed, self.tol, self.shrinking = int(pack), seed, float(tol), bool(shrinking)
        self.work_bytes, self.progress = work_bytes, progress
        self.should_stop = should_stop or (lambda: False)
        self.holdout = holdout
        # the problem's numba steps and certificate sums, and the argument that tells its rows'
        # targets (C-SVC: each column's class; epsilon-SVR: the tube), chosen once
        if regression is None:
            self._steps, self._sums, self._problem, self.unit = \
                coordinate_steps, certificate_sums, columns.column_class, 1.0
        else:
            self._steps, self._sums, self._problem, self.unit = \
                regression_steps, regression_certificate_sums, float(regression.epsilon), float(regression.unit)
        self.sweeps = DEFAULT_SWEEPS if sweeps is None else int(sweeps)
        self._sweep_args = (self.sweeps, INNER_TOL * self.tol * self.unit)  # the KKT gap is in units of ``unit``
        self.device_seconds = 0.0

    def fresh_state(self, n_samples):
        """(draws, epochs): a run's ``draws.DualDraws`` and ``epochs.EpochState`` before its first
        pack, for a checkpoint to restore (``checkpoint.read_checkpoint``'s ``dual``)."""
        return DualDraws(n_samples, self.n_columns, self.seed, self.holdout), EpochState(self.n_columns, self.unit)

    def run(self, shard, labels, weights=None, stop_after_packs=None, checkpointing=None, resume=None):
        """Train; returns ``(table, state, stats, stopped)`` as ``loop.PackedSolver.run``: the table's
        coefficients are alpha y (scale 1, rho 0), ``state.norm`` is alpha' Q alpha per column and
        ``state.iteration`` counts the coordinate steps drawn. ``self.report`` then holds the run's
        convergence figures over every column, ``report_of(columns)`` those of some, and
        ``column_converged`` (K,) which columns met ``tol`` or were certified within
        ``fit.CERTIFIED_GAP`` of their optimum. checkpointing: a ``loop.Checkpointing``
        or None; resume: ``(table, state, stats, draws, epochs)`` of a checkpoint (its draws and
        epochs those of ``fresh_state``, restored), the run going on within the epoch it stopped in."""
        with single_threaded_blas():
            return self._run(shard, labels, weights, stop_after_packs, checkpointing, resume)

    def _run(self, shard, labels, weights, stop_after_packs, checkpointing, resume):
        comm, Q = self.comm, self.n_columns
        rank, size = comm.Get_rank(), comm.Get_size()
        if resume is None:
            table = SupportVectorTable(KernelCompute(self.spec, shard.n_features, shard.sparse, shard.dtype,
                                                     self.work_bytes, self.columns.kernel_groups()), Q)
            state = SolverState(scale=np.ones(Q), norm=np.zeros(Q), occupancy=np.zeros(size, dtype=np.int64),
                                rho=np.zeros(Q), rho_sum=np.zeros(Q), row_seconds=np.zeros(size))
            stats = SolverStats()
            draws, epochs = self.fresh_state(shard.n_samples)
        else:
            table, state, stats, draws, epochs = resume
        seconds = stats.seconds
        for phase in PHASES:
            seconds.setdefault(phase, 0.0)
        start, total_before, checkpoint_before = MPI.Wtime(), seconds.get("total", 0.0), seconds["checkpoint"]
        calls_before = stats.allreduce_calls
        collectives = Collectives(comm)
        delivery = Delivery(shard, labels, weights=weights, norms_l1=self.spec.uses_l1)
        compute = table.compute
        columns = self.columns
        figures = epochs.figures
        digest = replica_digest(state)
        buffers, work = {}, {}
        packs_this_run, stopped = 0, False
        last_checkpoint = time.monotonic()
        ones = np.ones(self.pack)
        within = resume is not None  # a resumed run goes on with the epoch its checkpoint stopped in
        while within or (draws.epoch < self.max_epochs and not epochs.converged.all() and not stopped):
            if not within:
                epochs.begin(draws.begin_epoch())
            within = False
            while True:
                ids = draws.next_pack(self.pack)
                if ids is None:
                    break
                r = len(ids)
                buf = buffers.get(r)
                if buf is None:
                    buf = buffers[r] = DualBuffer(Q, r, size, columns.n_groups)
                    buf.pair_arguments = pair_arguments(buf, rank, size)
                    work[r] = (np.empty((Q, r)), np.empty((Q, r)), np.empty((Q, r)), np.empty((Q, r), dtype=np.uint8),
                               np.empty(r, dtype=np.int64))
                else:
                    buf.data[:] = 0.0
                delta, stepped, margin, active, folds = work[r]
                t0 = MPI.Wtime()
                block = delivery.deliver(collectives, ids)  # collective 1
                count_collective1(stats, collectives)
                t1 = MPI.Wtime()
                seconds["delivery"] += t1 - t0 - collectives.last_seconds
                norms = compute.row_norms(block)
                compute.prepare(block)
                self._holder_entries(table, ids, rank, buf)
                t2 = MPI.Wtime()
                seconds["norms"] += t2 - t1
                compute.partial_sums(table.coef, block, norms, buf.predictions, mirrored=True)
                t3 = MPI.Wtime()
                left, right, mine = buf.pair_arguments
                compute.pair_kernels(block, norms, left, right, mine)
                t4 = MPI.Wtime()
                seconds["partial_sums"] += t3 - t2
                seconds["pair_kernels"] += t4 - t3
                seconds["kernel_sums"] += t4 - t1
                buf.digests[rank] = digest
                packs_this_run += 1
                # two votes ride along: rank 0's "a checkpoint is due" clock, anyone's stop
                due = checkpointing is not None and checkpointing.every_seconds is not None and \
                    time.monotonic() - last_checkpoint >= checkpointing.every_seconds
                buf.vote(self.should_stop() or packs_this_run == stop_after_packs, rank == 0 and due)
                collectives.sum(buf.data)  # collective 2
                for phase in ("communication", "in_collective2"):
                    seconds[phase] += collectives.last_seconds
                stats.bytes["collective2"] += collectives.last_bytes
                t5 = MPI.Wtime()
                if not all_equal(buf.digests):
                    PackedSolver._check_agreement(buf.digests, state.iteration, stats.packs)
                active[:] = draws.active[ids].T
                weight = ones[:r] if block.weight is None else block.weight
                self._steps(buf.predictions, buf.group_pairs, buf.alphas, block.y, weight, self._problem,
                            columns.column_fold, columns.row_folds(ids, folds), columns.column_group, self.cost,
                            epochs.pg_old, active, state.norm, epochs.alpha_sum, figures, delta, stepped, margin,
                            *self._sweep_args)
                draws.active[ids] = active.T
                table.apply_pack(ids, buf.owner_flags, delta, stepped, _NO_AVERAGE, _NO_FOLD, rank, state.occupancy,
                                 block, norms)
                state.iteration += r
                stats.packs += 1
                digest = replica_digest(state, delta, figures)
                seconds["sequential_updates"] += MPI.Wtime() - t5
                stopped = buf.stop
                if checkpointing is not None and (stopped or buf.checkpoint_due or (
                        checkpointing.every_packs and stats.packs % checkpointing.every_packs == 0)):
                    seconds["total"] = total_before + MPI.Wtime() - start - (seconds["checkpoint"] - checkpoint_before)
                    stats.allreduce_calls = calls_before + collectives.calls["sum"]
                    t6 = MPI.Wtime()
                    stats.checkpoint_writes.append(write_checkpoint(
                        comm, checkpointing.path, table, state, stats, draws, checkpointing.params,
                        dual=(epochs.as_dict(), draws.active)))
                    seconds["checkpoint"] += MPI.Wtime() - t6
                    last_checkpoint = time.monotonic()
                if stopped:
                    break
            if stopped:
                break
            table.drop_zeros()  # support vectors back at alpha = 0 in every column leave the table
            state.occupancy[:] = comm.allgather(table.n) if size > 1 else table.n
            kkt = epochs.end(state.norm, self.tol, self.shrinking, draws)
            if self.progress is not None and rank == 0:
                self.progress({"epoch": draws.epoch, "kkt_gap": float(kkt.max()),
                               "rows_drawn": epochs.history["rows_drawn"][-1],
                               "duality_gap_estimate": max(epochs.history["duality_gap_estimate"][-1]),
                               "support_vectors": int(state.occupancy.sum())})
        seconds["total"] = total_before + MPI.Wtime() - start - (seconds["checkpoint"] - checkpoint_before)
        certificate = None
        self.column_converged = epochs.converged.copy()
        if not stopped:
            certify_start = MPI.Wtime()
            certificate = self.certify(collectives, delivery, table, shard, draws)
            seconds["total"] += MPI.Wtime() - certify_start
            seconds["certificate"] = MPI.Wtime() - certify_start
            self.column_converged |= np.asarray(certificate["relative_duality_gap"]) <= CERTIFIED_GAP
        stats.converged = bool(self.column_converged.all())
        stats.allreduce_calls = calls_before + collectives.calls["sum"]
        self._figures = (draws.epoch, epochs.history, certificate)
        self.report = self.report_of(np.arange(Q))
        return table, state, stats, stopped

    def report_of(self, columns):
        """The convergence report (``convergence_report``) of the columns ``columns`` (indices) of
        the run just made: a grid point's refit column, or every column."""
        epochs, history, certificate = self._figures
        return convergence_report(self.tol, epochs, self.column_converged[columns], history, certificate, columns)

    @staticmethod
    def _holder_entries(table, ids, rank, buf):
        """Into ``buf``: the coefficients of the rows ``ids`` this rank holds (alpha y) and their
        owner flags (rank + 1), 0 elsewhere; one lookup of the keys for both."""
        slots = table.key_slots.lookup(ids)
        held = slots >= 0
        if held.any():
            buf.alphas[:, held] = table.coef[slots[held]].T
            buf.owner_flags[held] = rank + 1

    def certify(self, collectives, delivery, table, shard, draws):
        """Collective: one pass over every eligible row, in blocks: each column's primal P = 1/2
        alpha' Q alpha + sum C_i max(0, 1 - y f), dual D = sum(alpha) - 1/2 alpha' Q alpha, their
        relative gap and the KKT gap over every row (epsilon-SVR's: P = 1/2 beta' K beta + sum C_i
        max(0, |y - f| - epsilon), D = sum(y beta) - epsilon sum |beta| - 1/2 beta' K beta).
        Returns a dict of (K,) lists."""
        Q, rank, size = self.n_columns, self.comm.Get_rank(), self.comm.Get_size()
        compute, columns = table.compute, self.columns
        rows = block_rows(shard.n_features)
        sums = np.zeros((Q, 5))
        sums[:, 3], sums[:, 4] = -math.inf, math.inf
        eligible = np.flatnonzero(draws.eligible).astype(np.int64)
        for b0 in range(0, len(eligible), rows):
            ids = eligible[b0:b0 + rows]
            buf = DualBuffer(Q, len(ids), size, columns.n_groups, pairs=False)
            block = delivery.deliver(collectives, ids)
            compute.partial_sums(table.coef, block, compute.row_norms(block), buf.predictions, mirrored=True)
            self._holder_entries(table, ids, rank, buf)
            collectives.sum(buf.data)
            weight = np.ones(len(ids)) if block.weight is None else block.weight
            self._sums(buf.predictions, buf.alphas, block.y, weight, self._problem, columns.column_fold,
                       columns.row_folds(ids, np.empty(len(ids), dtype=np.int64)), self.cost, sums)
        w2 = sums[:, 1]
        primal, dual = 0.5 * w2 + sums[:, 2], sums[:, 0] - 0.5 * w2
        return {"primal": primal.tolist(), "dual": dual.tolist(),
                "relative_duality_gap": [relative_gap(p, d) for p, d in zip(primal, dual)],
                "kkt_gap": (np.where(np.isfinite(sums[:, 3]), sums[:, 3] - sums[:, 4], 0.0) / self.unit).tolist()}


def convergence_report(tol, epochs, converged, history, certificate, columns):
    """The dual's ``training_["convergence"]`` over the columns ``columns`` (indices; ``converged``
    theirs): the stopping test's figures and the certificate's, each the largest over them
    (``primal`` and ``dual`` per column); ``history`` per epoch."""
    def largest(values):
        return float(np.max(np.asarray(values)[columns]))

    kkt, estimate = history["kkt_gap"], history["duality_gap_estimate"]
    report = {"optimizer": "dual", "tol": tol, "certified_gap": CERTIFIED_GAP, "epochs": int(epochs),
              "converged": bool(converged.all()),
              "columns_converged": int(converged.sum()),
              "kkt_gap": largest(kkt[-1]) if kkt else None,
              "duality_gap_estimate": largest(estimate[-1]) if estimate else None,
              "relative_duality_gap": None, "primal": None, "dual": None,
              "history": {"rows_drawn": list(history["rows_drawn"]), "kkt_gap": [largest(k) for k in kkt],
                          "duality_gap_estimate": [largest(e) for e in estimate]}}
    if certificate is not None:
        report["relative_duality_gap"] = largest(certificate["relative_duality_gap"])
        report["primal"] = [certificate["primal"][c] for c in columns]
        report["dual"] = [certificate["dual"][c] for c in columns]
        report["certified_kkt_gap"] = largest(certificate["kkt_gap"])
    return report
