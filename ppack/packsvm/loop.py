"""P-packSVM: primal SGD for kernel SVMs with r iterations packed into two Allreduce calls.

Per pack (``run``): collective 1 delivers the pack's r rows (drawn from the shared stream)
to every rank; each rank computes, against its own support vectors, the r partial
predictions and its share of the pair kernel matrix; collective 2 sums them with the "I
hold key k" flags; every rank takes the pack's step (one numba call, ``pack_update``): it
replays the r sequential updates (``replay``) and updates the table: first the stored
coefficients are multiplied by the product of the pack's scale folds, then the pack's
coefficients are added: existing keys in place, new keys placed by count (the least
occupied rank, lowest on ties) or by measured cost (``table.place_new``), which every rank
computes alike from the replicated occupancy counts and seconds per row. The next pack's
rows are drawn before the step, which flags those this rank holds, advances the replicated
scalars and digests them. A non-finite value in the replay stops every rank alike.

Pipelined (``pipeline`` "on", or "auto" above one rank; ``pipeline.py``): pack k's collective 2
starts without blocking; while it is in flight pack k+1's rows are unpacked, pack k+2's are
gathered and their collective 1 started, and pack k+1's sums and pair kernels are taken
(``_sums_and_pairs``, testing the requests between tiles); after pack k's replay and update
those sums are folded and corrected by pack k's change.
On a device (``--device gpu``) pack k + 1's sums and pair kernels are queued there instead
(``ArrayCompute.launch``) and waited for only when the fold needs them, so the device computes
them while the CPU waits for the collectives and replays pack k.
The packs delivered ahead are ``pipeline.PackAhead``s; nothing is in flight between packs.

Waiting: collective 2 also carries each rank's seconds of work before each collective
(``PackBuffer.timings``), so every rank learns how long it waited in each for the last rank
to arrive (``pack_update.account_timings``), and placement by cost learns each rank's
seconds per stored row; both exactly, at no extra call.

Agreement check: the replicated state (scale, norm, iteration, the replay's decisions) is
the same on every rank only if MPI's Allreduce gives bit-identical sums on every rank, which
MPI only recommends. So collective 2 also carries, in one slot per rank, each rank's
``state.replica_digest`` of the replicated state at the end of the previous pack (an
integer below 2^48 held in a float64, so adding the other ranks' zeros is exact); every
rank compares the p slots and, if they differ, all raise the same ``PPackError`` together.
The state a checkpoint or the model is written from, that of the pack just done, is checked
first by one more collective (``_verify_replicas``: a two-number Allreduce), so a
disagreement born in the last pack is caught before anything leaves the ranks.
"""
import math
import time
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from mpi4py import MPI

from ..data.delivery import Delivery
from ..errors import PPackError
from ..data.sampler import make_sampler
from ..kernels.compute import DEFAULT_WORK_BYTES, KernelCompute
from ..kernels.device import on_device
from ..kernels.threads import single_threaded_blas
from ..mpi.collectives import Collectives
from ..registry import PIPELINES, PLACEMENTS
from .checkpoint import write_checkpoint
from .columns import Columns
from .losses import Loss
from .gc_clock import GcClock
from .delay import spend
from .pack_buffer import LOCAL, PARTIAL_SUMS, SERIAL, PackBuffer
from .pack_update import DISAGREE, DONE, PackStep, all_equal
from .pipeline import Correction, PackAhead, Pending, fold_sums
from .replay import non_finite
from .state import PHASES, LossWindows, SolverState, SolverStats, replica_digest
from .table import SupportVectorTable

# placement by cost: the weight of a pack's measurement in each rank's seconds per stored
# row (a moving average over about the last 1 / ROW_MEMORY = 20 packs)
ROW_MEMORY = 0.05
# seconds between calls of the progress callback (a terminal's bar redraws every 0.2 s at most)
PROGRESS_EVERY = 0.1


@dataclass
class Checkpointing:
    """Where and how often the solver saves its state (see ``checkpoint.py``).

    every_seconds: rank 0's clock decides, the decision travels in the pack's second
    Allreduce; every_packs: counted alike on every rank. ``params`` identify the run.
    """

    path: str
    every_seconds: float = None
    every_packs: int = None
    params: dict = field(default_factory=dict)


class PackedSolver:
    """Trains on a ``Shard``; every rank calls ``run`` together.

    ``n_columns`` binary problems train side by side on the same packs: 1 (labels in
    {-1, +1}), or K one-vs-rest problems of K classes (labels are class codes 0..K-1), which
    share every delivered row, kernel value and table entry; each keeps its own scale,
    norm and projections. Still two Allreduce calls per pack: the second carries the K x r
    partial predictions. ``validation``: a ``validation.Validation`` (held-out rows the
    sampler skips, measured between packs every ``validation.every`` packs), or None;
    ``holdout``: (fraction, seed) of rows the sampler skips (``data.sampler.held_out``),
    by default the validation's.

    ``loss``: a ``losses.Loss`` (C-SVC's hinge by default, radius from ``max_weight``): the
    epsilon-SVR and one-class problems train one column, their labels the targets or ignored.

    comm: the communicator; spec: a ``KernelSpec``; sigma: regularisation weight
    (C = 1 / (n_samples * sigma)); iterations: T; pack: r; seed: the shared RNG seed.
    ``placement``: "count" (new support vectors to the least occupied rank: the same model
    bit for bit from run to run) or "cost" (to the rank whose stored rows would take the
    least measured time: faster ranks hold more; the placement, so the model's last bits,
    then vary from run to run). ``device``: where the kernel sums run, "cpu" or "gpu"
    (``kernels.device.on_device``); the table keeps a CPU compute after the run.
    ``pipeline``: "on", "off" or "auto" (on above one rank): the schedule (module docstring);
    ``delay``: a ``delay.Delay`` added to each pack's sums on the ranks it names, or None.
    ``progressive``: a ``progressive.ProgressiveRecord`` that each pack's tested predictions
    go into (a grid pass's progressive scores), or None. ``column_stops``: a
    ``column_stops.ColumnStops`` that replaces the ``tol`` test below by one per group of
    columns (a grid pass: each column stops as its separate fit would), or None.
    ``progress(state, stats, table_size, total)`` is called on rank 0 after the first pack,
    then after a pack at most every ``PROGRESS_EVERY`` seconds, and after the last (no
    communication involved). ``tol``: the paper's convergence test (section V): stop when
    the mean hinge loss of the last ``tol_window`` sampled rows differs from that of the
    window before by at most ``tol`` relative (every rank sees the same losses, so all
    stop together). When ``should_stop()`` turns true on
    any rank (a SIGTERM handler sets it), every rank stops after the current pack, writing
    a checkpoint first when ``checkpointing`` is set.
    """

    def __init__(self, comm, spec, sigma, iterations, pack=100, seed=0,
                 work_bytes=DEFAULT_WORK_BYTES, progress=None, should_stop=None, tol=None, tol_window=1000,
                 n_columns=1, max_weight=1.0, validation=None, average=False, step=1.0, sampling="uniform",
                 holdout=None, loss=None, placement="count", device="cpu", pipeline="off", delay=None, columns=None,
                 progressive=None, column_stops=None):
        if pipeline not in PIPELINES:
            raise ValueError(f"pipeline must be one of {PIPELINES}, got {pipeline!r}")
        # pipelined packs (``pipeline.py``): the next pack's sums run while this pack's collectives
        # are in flight; "auto" pipelines above one rank (one rank has nothing to wait for)
        self.pipelined = pipeline == "on" or (pipeline == "auto" and comm.Get_size() > 1)
        self.delay = delay  # a ``delay.Delay`` added to every pack's local work (tests, benchmarks), or None
        if placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
        self.placement = placement
        self.device = device
        self.device_seconds = 0.0  # the device's warm-up in the last run (``on_device``)
        self._outputs = {}  # the replay's output arrays per pack size (``_replay_outputs``)
        self.comm = comm
        self.loss = Loss(bound=float(max_weight)) if loss is None else loss
        self.step = float(step)
        self.sampling = sampling
        self.average = bool(average)
        self.validation = validation
        self.holdout = validation.holdout if holdout is None and validation is not None else holdout
        self.max_weight = float(max_weight)
        self.n_columns = int(n_columns)
        self.spec = spec
        self.sigma = float(sigma)
        # each column's sigma, bound, class and held-out fold (``columns.py``): a grid search's,
        # or the ordinary run's n_columns problems with this sigma and the loss's bound
        self.columns = Columns.plain(self.n_columns, self.sigma, self.loss) if columns is None else columns
        if self.columns.n_columns != self.n_columns:
            raise ValueError(f"columns: {self.columns.n_columns} columns for a run of {self.n_columns}")
        self.iterations = int(iterations)
        self.pack = int(pack)
        self.seed = seed
        self.work_bytes = work_bytes
        self.progress = progress
        self.tol = tol
        self.tol_window = int(tol_window)
        self.should_stop = should_stop or (lambda: False)
        # a grid pass's ``progressive.ProgressiveRecord``: the held-out rows' tested predictions, or None
        self.progressive = progressive
        # a grid pass's ``column_stops.ColumnStops``: the tol test per group of columns, or None
        self.column_stops = column_stops

    def run(self, shard, labels, checkpointing=None, resume=None, stop_after_packs=None, weights=None):
        """Train; returns ``(table, state, stats, stopped)``.

        labels: (shard rows,) in {-1, +1} for one column, class codes 0..K-1 for K;
        checkpointing: a ``Checkpointing`` or None;
        resume: ``(table, state, stats, sampler)`` from ``checkpoint.read_checkpoint``;
        stop_after_packs: stop (as if asked to) after this many packs of this call; weights:
        (shard rows,) weights on the rows' hinge loss, or None (the constructor's ``max_weight``
        is then their largest over all ranks).
        ``stopped`` is True when the run ended early on request. The row stream is left in
        ``self.sampler``: after a run that did all its iterations it stands after the last row
        trained on, and ``resume=(table, state, stats, self.sampler)`` with more iterations
        continues the run as one longer run would.
        """
        with single_threaded_blas(), GcClock() as gc_clock:  # once for all the packs' kernel sums
            table, state, stats, stopped = self._run_packs(shard, labels, checkpointing, resume, stop_after_packs,
                                                           weights, gc_clock)
        table.compute = table.compute.host()  # back from a device: the model computes on the CPU
        return table, state, stats, stopped

    def _run_packs(self, shard, labels, checkpointing, resume, stop_after_packs, weights, gc_clock):
        comm = self.comm
        rank, size = comm.Get_rank(), comm.Get_size()
        Q = self.n_columns
        if resume is None:
            table = SupportVectorTable(KernelCompute(self.spec, shard.n_features, shard.sparse, shard.dtype,
                                                     self.work_bytes, self.columns.kernel_groups()), Q,
                                       averaged=self.average)
            state = SolverState(scale=np.ones(Q), norm=np.zeros(Q), occupancy=np.zeros(size, dtype=np.int64),
                                loss_windows=LossWindows(self.tol_window),
                                avg_weight=0.0 if self.average else None, rho=np.full(Q, self.loss.rho),
                                rho_sum=np.zeros(Q), row_seconds=np.zeros(size),
                                loss_curve=LossWindows.curve(self.iterations))
            stats = SolverStats()
            sampler = make_sampler(self.sampling, shard.n_samples, self.seed, self.holdout)
            pending = None
        else:
            table, state, stats, sampler, pending = resume if len(resume) == 5 else (*resume, None)
        self.sampler = sampler  # where the run leaves the row stream: a longer run resumes from it
        if state.loss_curve is None:  # a checkpoint from before the curve: it starts here
            state.loss_curve = LossWindows.curve(self.iterations - state.iteration)
        # the step updates these in place (``pack_update``): arrays of their own, one entry per column
        state.rho = np.array(state.rho, dtype=np.float64, ndmin=1)
        state.rho_sum = np.array(state.rho_sum, dtype=np.float64, ndmin=1)
        if self.placement == "count" or state.row_seconds is None or len(state.row_seconds) != size:
            state.row_seconds = np.zeros(size)  # measured afresh (and never under placement by count)
        row_memory = ROW_MEMORY if self.placement == "cost" else 0.0
        table.compute = compute = on_device(table.compute, self.device, comm)
        self.device_seconds = compute.warm_seconds  # compile time, reported beside numba's (not a pack's)
        seconds, sent = stats.seconds, stats.bytes
        for phase in PHASES:  # a checkpoint of an older version may lack some
            seconds.setdefault(phase, 0.0)
        run_start, total_before = MPI.Wtime(), seconds["total"]  # a resumed run adds to its past
        gc_before, collections_before = seconds["garbage_collection"], stats.gc_collections
        # the waiting in collectives 1 and 2 so far (pack_update.account_timings adds each pack's)
        waited = np.array([seconds["wait_collective1"], seconds["wait_collective2"]])
        spent = np.zeros(2)  # this pack's seconds in collectives 1 and 2
        unused_waiting = np.zeros(2)  # a pipelined pack measures its waiting in Wait, not from the timings
        collective2_end = run_start  # of the previous pack; the first pack counts from here
        checkpoint_before = seconds["checkpoint"]  # checkpoint time is kept out of "total"

        def close_seconds():
            """The run's totals so far into ``seconds`` and ``stats`` (kept out of the packs' serial
            stretch: at a progress report, a checkpoint and the end)."""
            seconds["total"] = total_before + MPI.Wtime() - run_start - (seconds["checkpoint"] - checkpoint_before)
            seconds["wait_collective1"], seconds["wait_collective2"] = waited
            seconds["garbage_collection"] = gc_before + gc_clock.seconds
            stats.gc_collections = collections_before + gc_clock.collections

        collectives = Collectives(comm)
        calls_before = stats.allreduce_calls
        ema_weight = 1.0 / min(1000, max(1, self.iterations))
        last_checkpoint = time.monotonic()
        packs_this_run = 0
        next_report = -math.inf  # the first pack reports its progress
        digest = replica_digest(state)  # of the state this run starts from; then of each pack's end
        offsets = np.empty((Q, 2))  # [rho, the pack's sum of a_t rho_t] per problem (the replay's)
        offsets[:, 0] = state.rho

        # the replay's projection radius, per column
        max_weight = self.columns.max_weight(self.spec)
        limit = self.iterations
        pipelined = self.pipelined
        delivery = Delivery(shard, labels, weights=weights, norms_l1=self.spec.uses_l1)  # collective 1's rows
        step = PackStep(rank, state, table, self.columns, self.loss, self.step, max_weight, row_memory, stats,
                        ema_weight, self.tol if self.column_stops is None else None)  # what follows collective 2
        if pipelined:  # the packs delivered ahead (``pipeline.PackAhead``) and their sums' fix
            ahead, drawn = self._packs_ahead(collectives, delivery, sampler, state, table, limit, pending, stats)
            in_flight = None
            correction = Correction(self.spec, shard.n_features, shard.sparse, compute.stored.dtype, self.work_bytes,
                                    self.columns.kernel_groups())
            spare = None  # a finished pack's PackBuffer, for the next pack delivered ahead
            test = lambda: Collectives.test(in_flight)  # noqa: E731 (the sums' callback between tiles)
        else:
            queued = [] if pending is None else list(pending.ids)
            # the next pack's rows, drawn before this pack's step, which flags them in its buffer
            next_ids, next_buf, spare = None, None, None
        delta = np.empty((Q, self.pack) if pipelined else (0, 0))  # merge_pack's changes per key (pipelined)
        while state.iteration < limit:
            if pipelined:
                current = ahead.pop(0)
                if current.arrival is not None:  # its rows arrived with nothing to hide their unpacking behind
                    seconds["delivery"] += self._unpack(current, compute)
                r, ids, block, norms = current.r, current.ids, current.block, current.norms
                if not current.ready:  # the first pack of a run: nothing was in flight to hide its sums behind
                    self._sums_and_pairs(compute, table, current, stats, None, stats.packs)
                buf, flagged = current.buf, current.flagged
                coef, loss, fold, mean_loss, average, tested = self._replay_outputs(Q, r)
                t1 = MPI.Wtime()
                serial = t1 - collective2_end
            else:
                if next_ids is None:  # the run's first pack
                    ids = self._draw(queued, sampler, min(self.pack, limit - state.iteration))
                    buf, flagged = self._pack_buffer(ids, spare), False
                else:  # drawn, and flagged, by the previous pack's step
                    ids, buf, spare, flagged = next_ids, next_buf, buf, True
                r = len(ids)
                t0 = MPI.Wtime()
                block = delivery.deliver(collectives, ids)  # collective 1
                count_collective1(stats, collectives)
                collective1_end = collectives.last_start + collectives.last_seconds
                spent[0] = collectives.last_seconds
                serial = collectives.last_start - collective2_end
                t1 = MPI.Wtime()
                seconds["delivery"] += t1 - t0 - collectives.last_seconds

                # local work: partial predictions, this rank's share of the pair kernels, key flags
                left, right, my_pairs = buf.pair_arguments
                coef, loss, fold, mean_loss, average, tested = self._replay_outputs(Q, r)
            buf.digests[rank] = digest
            if not flagged:  # the previous pack's step took them, but for a run's first
                flags_start = MPI.Wtime()
                table.key_slots.flag_held(ids, rank + 1, buf.owner_flags)  # before the kernel sums empty the caches
                seconds["flags"] += MPI.Wtime() - flags_start
            if not pipelined:
                norms_start = MPI.Wtime()
                norms = compute.row_norms(block)
                compute.prepare(block)  # the block's columns: serial work, timed apart from the products
                sums_start = MPI.Wtime()
                seconds["norms"] += sums_start - norms_start
                if compute.on_device:  # the sums and the pair kernels queued together: one sync
                    compute.launch(table.coef, block, norms, buf.predictions, left, right, my_pairs,
                                   mirrored=True).finish()
                else:
                    compute.partial_sums(table.coef, block, norms, buf.predictions, mirrored=True)
                if self.delay is not None:
                    spend(self.delay.seconds(stats.packs, rank, MPI.Wtime() - sums_start))
                pairs_start = MPI.Wtime()
                if not compute.on_device:
                    compute.pair_kernels(block, norms, left, right, my_pairs)
                seconds["partial_sums"] += pairs_start - sums_start
                seconds["pair_kernels"] += MPI.Wtime() - pairs_start
            # two control votes ride along: rank 0's "checkpoint is due" clock, anyone's stop
            due = checkpointing is not None and checkpointing.every_seconds is not None and \
                time.monotonic() - last_checkpoint >= checkpointing.every_seconds
            packs_this_run += 1
            buf.vote(checkpoint_due=rank == 0 and due,
                     stop=self.should_stop() or packs_this_run == stop_after_packs)
            timings = buf.timings[rank]
            if pipelined:
                timings[SERIAL], timings[PARTIAL_SUMS] = serial, current.sums_seconds
                timings[LOCAL] = current.local_seconds  # the step adds it to stats.local_work
                # collective 2, then pack k + 2's collective 1; pack k + 1's sums while they are in flight
                requests = [collectives.start_sum(buf.data)]
                shadow_start = MPI.Wtime()
                start_seconds = collectives.last_seconds  # in the calls that start the collectives
                sent["collective2"] += collectives.last_bytes
                in_flight = requests
                following = ahead[0] if ahead else None
                flight, flight_start = None, 0.0
                products = seconds["partial_sums"] + seconds["pair_kernels"]
                try:
                    if following is not None:  # its rows arrived last pack: out of the delivery buffer first
                        self._unpack(following, compute)
                    if drawn < limit:  # pack k + 2's rows gathered while collective 2 is in flight
                        ids_after = sampler.take(min(self.pack, limit - drawn))
                        drawn += len(ids_after)
                        flight = delivery.start(collectives, ids_after)
                        start_seconds += collectives.last_seconds
                        flight_start = collectives.last_seconds
                        sent["collective1"] += collectives.last_bytes
                        requests.append(flight.request)
                    if following is not None:
                        if spare is not None and spare.r == following.r:  # the buffer of the pack before
                            spare.clear()
                            following.buf = spare
                        spare = None
                        self._sums_and_pairs(compute, table, following, stats, test, stats.packs + 1)
                    hidden = MPI.Wtime() - shadow_start - flight_start
                    seconds["hidden"] += hidden
                    # the shadow's work besides the products (delivery, columns, tests): not serial
                    seconds["shadow"] += hidden - (seconds["partial_sums"] + seconds["pair_kernels"] - products)
                    collectives.wait(requests[0])
                    spent[1] = collectives.last_seconds
                    if flight is not None:  # its rows stay in the delivery buffer until the next pack's shadow
                        flight.wait()
                        spent[0] = collectives.last_seconds
                        ahead.append(PackAhead(ids_after, None, None, arrival=flight))
                    else:
                        spent[0] = 0.0
                except BaseException:
                    collectives.wait_all(requests)  # no request left behind, whatever stopped the sums
                    raise
                in_flight = None
                np.add(waited, spent, out=waited)
                seconds["in_collective1"] += spent[0]
                seconds["in_collective2"] += spent[1] + start_seconds
                seconds["communication"] += spent[0] + spent[1] + start_seconds
                collective2_end = MPI.Wtime()
            else:
                seconds["kernel_sums"] += MPI.Wtime() - t1
                timings[SERIAL], timings[PARTIAL_SUMS] = serial, pairs_start - sums_start
                timings[LOCAL] = MPI.Wtime() - collective1_end  # the step adds it to stats.local_work

                collectives.sum(buf.data)  # collective 2
                collective2_end = collectives.last_start + collectives.last_seconds
                spent[1] = collectives.last_seconds
                seconds["communication"] += collectives.last_seconds
                seconds["in_collective2"] += collectives.last_seconds
                sent["collective2"] += collectives.last_bytes
            stats.allreduce_calls = calls_before + collectives.calls["sum"]
            t3 = MPI.Wtime()

            # agreement check, the r sequential updates of each problem (identical on every rank),
            # then the averages' increments, the scale folds, the pack's coefficients and this
            # rank's new rows into the table: one numba call
            if pipelined:
                following = ahead[0] if ahead and ahead[0].ready else None
                flag_next = (following.ids, following.buf.owner_flags) if following is not None else ()
            else:  # the next pack's rows, drawn now so that the step flags them
                next_r = min(self.pack, limit - state.iteration - r)
                next_ids = self._draw(queued, sampler, next_r) if next_r > 0 else None
                next_buf = self._pack_buffer(next_ids, spare) if next_ids is not None else None
                flag_next = (next_ids, next_buf.owner_flags) if next_ids is not None else ()
            status, projections, work, digest, window_stable = step(
                buf, block, ids, norms, coef, loss, fold, average, mean_loss, offsets, spent,
                unused_waiting if pipelined else waited, delta[:, :r] if pipelined else delta, *flag_next, tested=tested)
            seconds["replay_update"] += MPI.Wtime() - t3
            if status != DONE:
                self._raise_failed(status, buf.digests, work, state, coef, stats.packs)
            if self.progressive is not None:
                self.progressive.record(ids, tested, offsets[:, 0])
            compute.after_pack(table, ids, fold)
            if pipelined:
                if following is not None:
                    following.flagged = True  # the owner flags of pack k + 1, after this pack's merge
                if ahead:  # pack k + 1's sums were taken before this pack's update: fold them, add the change
                    following = ahead[0]
                    if following.queued is not None:  # a device's, queued before this pack's replay
                        self._finish_queued(following, seconds)
                    t4 = MPI.Wtime()
                    fold_sums(following.buf.predictions, fold)
                    correction.add(block, norms, delta[:, :r], rank, size, following.block, following.norms,
                                   following.buf.predictions)
                    t5 = MPI.Wtime()
                    for phase in ("correction", "partial_sums", "kernel_sums"):
                        seconds[phase] += t5 - t4
                spare = buf
            stats.projections += projections
            stats.packs += 1
            seconds["sequential_updates"] += MPI.Wtime() - t3

            if self.column_stops is not None:
                if self.column_stops.after_pack(loss, self.columns.active, state.iteration, state.avg_weight):
                    stats.converged = True
                    limit = state.iteration
            elif window_stable:  # the --tol test, on the mean loss over classes (mean_loss)
                stats.converged = True
                limit = state.iteration
            if self.validation is not None and stats.packs % self.validation.every == 0 and \
                    state.iteration < limit and self.validation(table, state):
                limit = state.iteration  # validation accuracy stopped improving (see validation.py)
            if self.progress is not None and rank == 0 and (MPI.Wtime() >= next_report or state.iteration >= limit):
                close_seconds()
                self.progress(state, stats, int(state.occupancy.sum()), limit)
                next_report = MPI.Wtime() + PROGRESS_EVERY
            stop = buf.stop
            if checkpointing is not None and (stop or buf.checkpoint_due or (
                    checkpointing.every_packs and stats.packs % checkpointing.every_packs == 0)):
                close_seconds()
                start = MPI.Wtime()
                self._verify_replicas(collectives, digest, state.iteration, stats.packs)
                if pipelined:
                    pending = Pending([pack.ids for pack in ahead], ahead[0].buf.predictions if ahead else None)
                else:  # the sampler stands after the next pack's rows
                    pending = Pending([next_ids]) if next_ids is not None else None
                stats.checkpoint_writes.append(write_checkpoint(comm, checkpointing.path, table, state, stats, sampler,
                                                                checkpointing.params, pending, self.column_stops,
                                                                self.progressive, self.validation))
                seconds["checkpoint"] += MPI.Wtime() - start
                last_checkpoint = time.monotonic()
                collective2_end = MPI.Wtime()  # the next pack's serial stretch starts after the write
            if stop and state.iteration < limit:
                close_seconds()
                return table, state, stats, True
        close_seconds()
        self._verify_replicas(collectives, digest, state.iteration, stats.packs)  # the model's state
        return table, state, stats, False

    @staticmethod
    def _draw(queued, sampler, r):
        """The next pack's r row ids (fewer where a checkpoint's pack ahead is shorter): a pack a
        checkpoint had drawn ahead (``queued``, its sampler standing after them), else the sampler's."""
        return queued.pop(0)[:r] if queued else sampler.take(r)

    def _pack_buffer(self, ids, spare):
        """A zeroed collective 2 buffer for the pack of rows ``ids``: ``spare`` (a finished pack's)
        when it has their size, else a new one; with its ``pair_arguments`` for this rank."""
        if spare is not None and spare.r == len(ids):
            spare.clear()
            return spare
        buf = PackBuffer(self.n_columns, len(ids), self.comm.Get_size(), self.columns.n_groups)
        buf.pair_arguments = pair_arguments(buf, self.comm.Get_rank(), self.comm.Get_size())
        return buf

    def _replay_outputs(self, Q, r):
        """The replay's output arrays for K = Q problems and r rows: coef, loss (K, r), fold
        (K, 2), mean_loss (r,), average (K, r + 1), or (K, 0) when not averaging, and tested
        (K, r), or (0, 0) without a progressive record; kept per r."""
        outputs = self._outputs.get(r)
        if outputs is None:
            outputs = self._outputs[r] = (np.empty((Q, r)), np.empty((Q, r)), np.empty((Q, 2)), np.empty(r),
                                          np.empty((Q, r + 1) if self.average else (Q, 0)),
                                          np.empty((Q, r) if self.progressive is not None else (0, 0)))
        return outputs

    def _packs_ahead(self, collectives, delivery, sampler, state, table, limit, pending, stats):
        """A pipelined run's first two packs, delivered (blocking): those a checkpoint had delivered
        ahead (``pending``, with this rank's sums of the first when the run has the ranks it had),
        then fresh draws. Returns (the ``PackAhead``s, the iteration their last row reaches)."""
        ahead, drawn = [], state.iteration
        for ids in ([] if pending is None else pending.ids):
            ids = ids[:max(0, limit - drawn)]  # a run resumed with fewer iterations drops what it does not reach
            if len(ids):
                ahead.append(PackAhead(ids, None, None))
                drawn += len(ids)
        while len(ahead) < 2 and drawn < limit:
            ahead.append(PackAhead(sampler.take(min(self.pack, limit - drawn)), None, None))
            drawn += ahead[-1].r
        for pack in ahead:
            pack.block = delivery.deliver(collectives, pack.ids)
            pack.norms = table.compute.row_norms(pack.block)
            count_collective1(stats, collectives)
        if ahead and pending is not None and pending.sums is not None and pending.sums.shape == (self.n_columns,
                                                                                                 ahead[0].r):
            first = ahead[0]
            first.buf = PackBuffer(self.n_columns, first.r, self.comm.Get_size(), self.columns.n_groups)
            first.buf.predictions[:] = pending.sums
            self._sums_and_pairs(table.compute, table, first, stats, None, stats.packs, sums=False)
        return ahead, drawn

    @staticmethod
    def _unpack(pack, compute):
        """A ``PackAhead`` whose rows have arrived in the delivery buffer (``arrival``): its block
        and norms taken out of it (else nothing). Returns the seconds it took."""
        if pack.arrival is None:
            return 0.0
        start = MPI.Wtime()
        pack.block = pack.arrival.unpack()
        pack.norms = compute.row_norms(pack.block)
        pack.arrival = None
        return MPI.Wtime() - start

    def _sums_and_pairs(self, compute, table, pack, stats, between, index, sums=True):
        """Fill a ``PackAhead``'s collective 2 buffer (made here if it has none) with this rank's
        partial sums on the table as it stands (unless ``sums`` is False: they are there) and
        its share of the pair kernels, then the ``delay`` of pack number ``index``, if any;
        ``between`` is called between the sums' tiles. The sums are then ready but for a fold
        and correction (``pipeline``)."""
        rank, size = self.comm.Get_rank(), self.comm.Get_size()
        if pack.buf is None:
            pack.buf = PackBuffer(self.n_columns, pack.r, size, self.columns.n_groups)
        seconds = stats.seconds
        start = MPI.Wtime()
        compute.prepare(pack.block)
        sums_start = MPI.Wtime()
        if between is None:  # in the shadow of collectives (``between``), it counts as "shadow" work
            seconds["norms"] += sums_start - start
        left, right, mine = pair_arguments(pack.buf, rank, size)
        queued = sums and compute.on_device
        if queued:  # queued on the device with the pair kernels; waited for when the fold needs them
            pack.queued = compute.launch(table.coef, pack.block, pack.norms, pack.buf.predictions, left, right,
                                         mine, mirrored=True)
            if between is None:  # nothing to hide them behind (a run's first pack)
                self._finish_queued(pack, seconds)
        elif sums:
            compute.partial_sums(table.coef, pack.block, pack.norms, pack.buf.predictions, mirrored=True,
                                 between=between)
        if sums and self.delay is not None:
            spend(self.delay.seconds(index, rank, MPI.Wtime() - sums_start), between)
        pairs_start = MPI.Wtime()
        if not queued:
            compute.pair_kernels(pack.block, pack.norms, left, right, mine)
        end = MPI.Wtime()
        pack.sums_seconds = pairs_start - sums_start
        pack.local_seconds = end - start
        seconds["partial_sums"] += pack.sums_seconds
        seconds["pair_kernels"] += end - pairs_start
        seconds["kernel_sums"] += end - start
        pack.ready = True

    @staticmethod
    def _finish_queued(pack, seconds):
        """Wait for a ``PackAhead``'s sums and pair kernels queued on a device (``ArrayCompute.launch``),
        its wait counted as its partial sums' time."""
        start = MPI.Wtime()
        pack.queued.finish()
        pack.queued = None
        waited = MPI.Wtime() - start
        pack.sums_seconds += waited
        pack.local_seconds += waited
        for phase in ("partial_sums", "kernel_sums"):
            seconds[phase] += waited

    def _raise_failed(self, status, digests, work, state, coef, packs):
        """Raise, on every rank alike, what the pack step (``PackStep``) met: the ranks' disagreement
        (``_check_agreement``) or a non-finite value in the replay of problem ``status``
        (``work``: the replay's work arrays)."""
        if status == DISAGREE:
            self._check_agreement(digests, state.iteration, packs)
        c = status
        exc = non_finite(work.info[c], state.iteration, work.pred, state.norm[c], coef[c], state.scale[c])
        raise PPackError(self._divergence_message(exc, c if self.n_columns > 1 else None),
                         collective=True) from None

    def _divergence_message(self, exc, problem=None):
        where = "" if problem is None else f" in the one-vs-rest problem of class number {problem}"
        sigma = self.columns.sigma[problem or 0]
        return (f"training diverged at iteration {exc.iteration}{where} (sigma={sigma:g}, pack={self.pack}): "
                f"{exc.what} is {exc.value}; each step adds c/(sigma (t + c - 1)) times a kernel row, and with "
                f"this sigma or these kernel values the numbers leave the float range: use a larger sigma (a "
                f"smaller C), or scale the features (or gamma) so that kernel values stay moderate")

    @classmethod
    def _verify_replicas(cls, collectives, digest, iteration, packs):
        """Collective: raise on every rank alike when the ranks' digests of the state they are
        about to write differ (one Allreduce of (digest, -digest) for their max and min; the
        digests are gathered only to name the groups in the error)."""
        bounds = collectives.max(np.array([digest, -digest]))
        if bounds[0] != -bounds[1]:
            cls._check_agreement(np.array(collectives.comm.allgather(digest)), iteration, packs)

    @staticmethod
    def _check_agreement(digests, iteration, packs):
        """Raise on every rank alike when the ranks' digests (one slot each, summed exactly) differ."""
        if all_equal(digests):
            return
        groups = {}
        for k, value in enumerate(digests):
            groups.setdefault(value, []).append(k)
        ranks = "; ".join("ranks " + ", ".join(map(str, g)) if len(g) > 1 else f"rank {g[0]}"
                          for g in groups.values())
        raise PPackError(
            f"ranks disagree on the replicated state after iteration {iteration} (pack {packs}; groups that "
            f"agree: {ranks}): MPI's Allreduce did not give bit-identical sums on every rank, so the ranks' "
            f"copies of the model drifted apart; make the MPI library's reductions reproducible (with Intel "
            f"MPI set I_MPI_CBWR=1; with other MPI libraries choose an Allreduce algorithm whose summation "
            f"order is the same on every rank)", collective=True)


def count_collective1(stats, collectives):
    """A blocking collective 1 (``Delivery.deliver``, the last call of ``collectives``) into the
    run's seconds and bytes."""
    for phase in ("communication", "in_collective1"):
        stats.seconds[phase] += collectives.last_seconds
    stats.bytes["collective1"] += collectives.last_bytes


def pair_arguments(buf, rank, size):
    """This rank's pairs of a PackBuffer's pack: (left rows, right rows, their slots in ``buf.pairs``:
    (m,), or (G, m) for G kernel groups)."""
    left, right = upper_pairs(buf.r)
    lo, hi = pair_share(buf.r, rank, size)
    return left[lo:hi], right[lo:hi], buf.pairs[lo:hi] if len(buf.group_pairs) == 1 else buf.group_pairs[:, lo:hi]


@lru_cache(maxsize=4)
def upper_pairs(r):
    """Row and column of every entry of the upper triangle (diagonal included) of an r x r matrix."""
    return np.triu_indices(r)


# The pair kernels cost about RUN_COST pairs per row of the triangle besides one per pair (a
# run of pairs sharing a left row is one pass over the features: 3.1 us + 0.063 us per pair
# at d = 784 in float32, 3.7 + 0.075 in float64, measured on a 2-core Zen machine).
RUN_COST = 24


@lru_cache(maxsize=64)
def pair_share(r, rank, size):
    """[lo, hi): the upper triangle's pairs (``upper_pairs`` order) this rank computes, cut so
    that every rank gets the same cost, counted as one per pair plus RUN_COST per row started
    (equal counts of pairs would give the last ranks, whose rows are short, the most work).
    Every pair's value is the same whichever rank computes it."""
    left, _ = upper_pairs(r)
    cost = np.ones(len(left))
    cost[np.flatnonzero(np.diff(left, prepend=-1))] += RUN_COST
    ends = np.searchsorted(np.cumsum(cost), cost.sum() * np.arange(1, size) / size, side="right")
    bounds = np.concatenate([[0], ends, [len(left)]])
    return int(bounds[rank]), int(bounds[rank + 1])
