"""A pack's sequential part in one numba call: after collective 2, every rank checks that the
replicas agree, accounts the ranks' timings (its waiting, the seconds per stored row),
replays the K problems' r updates, updates its table, advances the replicated scalars (the
offsets rho, the averages' weight, the loss's moving average and --tol windows) and takes
the digest of the state it ends with, which the next pack's collective 2 checks.

One call instead of several: once a pack's kernel sums have streamed the stored rows through
the caches, every Python statement and numba dispatch runs cold and costs microseconds, which
at many ranks is most of a pack. The parts stay where they are defined: ``replay.replay_all``,
``table.merge_pack``, ``stored.append_positions``, and ``state``'s windows and digest.
"""
import math

import numpy as np

from ..jit import njit
from ..kernels.stored import append_positions
from .averaging import weight_sum
from .key_slots import _flag_held
from .pack_buffer import LOCAL, PARTIAL_SUMS, SERIAL
from .replay import HINGE, replay_all, replay_work_arrays
from .state import CURVE_POINTS, LossWindows, _digest, add_jitter, add_to_windows, moving_average, windows_stable
from .table import merge_pack

# what ``PackStep`` returns first besides a failing problem's number (>= 0)
DONE, DISAGREE = -1, -2
_NO_IDS, _NO_FLAGS = np.empty(0, dtype=np.int64), np.empty(0)  # no next pack to flag
_NOT_TESTED = np.empty((0, 0))  # the replay's tested predictions are not kept
# a rank's seconds per stored row is measured once it stores this many rows: below, the
# partial sums' fixed costs (dispatch, the block's conversion) hide the per-row cost
MEASURED_FROM_ROWS = 64
NEVER = 2 ** 62  # the size of a window that never closes (a state without a loss curve keeps none)


class PackStep:
    """A run's pack step: after collective 2 (``buf``, a ``PackBuffer``) of the pack of rows
    ``ids`` (``block``, a RowBlock, with its norms), check the replicas' agreement, replay the
    K problems from ``state`` and write the pack into ``table``; then advance ``state`` past
    the pack. The run's arguments that stay put (the state's arrays, the columns, the loss)
    are gathered once, here, so that a pack passes only its own.

    columns: the run's ``columns.Columns`` (each column's sigma, class and held-out fold);
    max_weight (K,): each column's projection bound (inf: none); row_memory: the weight of a
    pack in ``state.row_seconds``' moving average (0: placement by count, nothing measured);
    ``stats``: its ``hinge_moving_average`` takes the mean loss's moving average with weight
    ``ema_weight`` (None: not kept); the state's loss windows and loss curve are kept (the
    convergence diagnostic reads them), the windows tested against ``tol`` when it is given
    (``converged`` below). ``state``'s arrays and ``columns`` must not be replaced
    during the run (they are updated in place).
    """

    def __init__(self, rank, state, table, columns, loss_rule, step, max_weight, row_memory=0.0, stats=None,
                 ema_weight=0.0, tol=None):
        averaged = state.avg_weight is not None
        if averaged != table.averaged:  # an averaged step writes average parts, which the table must have room for
            raise ValueError(f"PackStep: the state is {'' if averaged else 'not '}averaged, the table "
                             f"{'is' if table.averaged else 'is not'}: their averages must match")
        self.state, self.table, self.columns, self.stats = state, table, columns, stats
        windows = state.loss_windows
        curve = LossWindows(NEVER, keep=CURVE_POINTS) if state.loss_curve is None else state.loss_curve  # none kept
        self._run = (state.scale, state.norm, columns.sigma, max_weight, float(step), loss_rule.mode,
                     loss_rule.epsilon, columns.rho_step, columns.rho_low, columns.rho_high, columns.column_class,
                     columns.column_fold, columns.column_group, columns.active, rank, state.occupancy,
                     state.row_seconds, float(row_memory), state.rho, state.rho_sum, float(ema_weight), windows.size,
                     windows.values, tol is not None, 0.0 if tol is None else float(tol), curve.size, curve.values,
                     np.zeros(4) if stats is None else stats.local_work.figures)
        # per pack size, and the table's arrays while they do not grow (``__call__``)
        self._r = self._work = self._fixed_folds = self._entries = self._no_csr = self._store = None
        self._fits = -1  # entries the cached arrays hold: grown or looked up again past it

    def __call__(self, buf, block, ids, norms, coef, loss, fold, average, mean_loss, offsets, spent, waited, delta,
                 next_ids=_NO_IDS, next_flags=_NO_FLAGS, tested=_NOT_TESTED):
        """The step of one pack. The outputs, (K, r) coef and loss, (K, 2) fold, (K, r + 1) or
        (K, 0) average, (r,) mean_loss and (K, 2) offsets, are ``replay.replay_all``'s; spent
        (2,): this rank's seconds in this pack's collectives 1 and 2; waited (2,): this rank's
        seconds of waiting in them, added to (``account_timings``); delta (K, r) or (0, 0):
        ``table.merge_pack``'s. next_ids (r',) and next_flags (r',), or empty: the next pack's
        rows and its buffer's ``owner_flags``, flagged (``KeySlots.flag_held``) once this pack
        is merged, in the same call. tested (K, r), or empty: receives the predictions the
        replay tested (``replay.replay_all``'s).

        Past the pack (when it is done): the state's iteration, scale and norm, rho (the
        offsets' first column, unless the loss is the hinge's), averages' weight and rho_sum
        (averaged runs), the moving average, the loss windows and the loss curve.
        Returns (status, projections, work, digest, converged):
        status DONE, DISAGREE, or the number of a problem whose replay met a non-finite value
        (``work.info``, ``work.pred``: what ``replay.non_finite`` reports it from); digest:
        ``state.replica_digest`` of the state past the pack; converged: ``tol``'s test passed
        (the windows' last two means within ``tol``)."""
        state, table, stats = self.state, self.table, self.stats
        K, r = coef.shape
        if r != self._r:  # the run's first pack, or its last (shorter) one
            self._r, self._work = r, replay_work_arrays(K, r)
            # the rows' folds: when no column holds a fold out, the same r -1s for every pack
            self._fixed_folds = None if self.columns.folds is not None else self.columns.row_folds(ids, None)
        work, folds = self._work, self._fixed_folds
        if folds is None:
            folds = self.columns.row_folds(ids, work.row_fold)
        n = table.n  # entries, and stored rows: as many (``table.added`` counts both)
        if n + r <= self._fits:  # the same arrays take the pack as before: no call to look them up
            rows = (block.dense,) + self._no_csr
        else:
            entries, rows, store = table.room_for(block)
            self._entries, self._no_csr, self._store = entries[:-1], rows[1:], store[1:]
            self._fits = n + table.dense_room()
        t0, avg_weight = state.iteration, state.avg_weight
        averaged = avg_weight is not None
        status, projections, added, digest, avg_weight, moving, converged = _update_after_pack(
            buf.digests, buf.predictions, buf.group_pairs, buf.owner_flags, buf.timings, block.y,
            work.ones if block.weight is None else block.weight, ids, folds, t0,
            coef, loss, fold, average, mean_loss, tested, offsets, work.info, work.pred, work.sign,
            work.column_weight, spent, waited, next_ids, next_flags, avg_weight if averaged else 0.0,
            weight_sum(t0, r) if averaged else 0.0, math.nan if stats is None else stats.hinge_moving_average,
            *rows, norms, *self._run, *self._entries, n, delta, n, *self._store)
        table.added(added)
        if status == DONE:
            state.iteration = t0 + r
            if averaged:
                state.avg_weight = avg_weight
            if stats is not None:
                stats.hinge_moving_average = moving
        return status, projections, work, digest, converged


@njit(cache=True)
def _update_after_pack(digests, predictions, pairs, owner_flags, timings, labels, weight, ids, row_fold, t0, coef,
                       loss, fold, average, mean_loss, tested, offsets, info, pred, sign, column_weight, spent,
                       waited, next_ids, next_flags, avg_weight, weight_increment, moving, dense, indptr, indices,
                       values, norms, scale, norm, sigma, max_weight, step, mode, epsilon, rho_step, rho_low,
                       rho_high, column_class, column_fold, column_group, active, rank, occupancy, row_seconds,
                       row_memory, rho, rho_sum, ema_weight, window_size, windows, test_tol, tol, curve_size, curve,
                       local_work,
                       map_keys, map_slots, entry_keys, table_coef, table_avg, table_since, clock, n, delta, n_stored,
                       out_features, out_indptr, out_indices, out_values, out_norms):
    """Returns (status, projections, new entries, digest, averages' weight, moving average,
    converged). status DISAGREE: the ranks' ``digests`` (p,)
    differ (nothing else was done; this rank's local seconds, ``timings[rank, LOCAL]``, go into
    ``local_work``, a ``state.Jitter``'s figures, first); otherwise the timings are accounted (``account_timings``)
    and then: a problem's number: its replay met a non-finite value
    (``info`` (K, 4) says which, the table is untouched); DONE: the replay
    (``replay.replay_all``'s arguments, its folds then copied into ``fold`` (K, 2)) and the
    table update (``table.merge_pack``, then ``stored.append_positions`` of this rank's new
    rows, then the next pack's owner flags) are done, and the replicated scalars advanced:
    rho (K,) and rho_sum (K,) in place from ``offsets``, the averages' weight by
    ``weight_increment`` (when averaging: ``average`` has columns), the mean loss's ``moving`` average, and the loss
    ``windows`` (``state.LossWindows.values``, tested against ``tol`` when ``test_tol``) and loss
    ``curve`` (``state.SolverState.loss_curve``'s values); then their digest (the curve aside: it
    follows from the digested losses)."""
    add_jitter(local_work, timings[rank, LOCAL])
    if not all_equal(digests):
        return DISAGREE, 0, 0, 0.0, avg_weight, moving, False
    account_timings(timings, rank, occupancy, spent, waited, row_seconds, row_memory)
    failed, projections = replay_all(predictions, pairs, scale, norm, labels, t0, sigma, coef, loss, info, weight,
                                         max_weight, average, step, pred, sign, mean_loss, mode, epsilon, offsets,
                                         rho_step, rho_low, rho_high, column_class, row_fold, column_fold,
                                         column_weight, column_group, tested, active)
    if failed >= 0:
        return failed, projections, 0, 0.0, avg_weight, moving, False
    for c in range(fold.shape[0]):
        fold[c, 0], fold[c, 1] = info[c, 0], info[c, 1]
    positions = merge_pack(ids, owner_flags, coef, loss, average, fold, rank, occupancy, row_seconds, map_keys,
                           map_slots, entry_keys, table_coef, table_avg, table_since, clock, n, delta)
    added = append_positions(dense, indptr, indices, values, positions, norms, n_stored, out_features, out_indptr,
                             out_indices, out_values, out_norms)
    _flag_held(map_keys, next_ids, float(rank + 1), next_flags)
    # the replicated scalars past the pack (the hinge loss leaves rho, 0, and its sum alone)
    averaged = average.shape[1] > 0
    if mode != HINGE:
        for c in range(rho.shape[0]):
            rho[c] = offsets[c, 0]
            if averaged:
                rho_sum[c] += offsets[c, 1]
    if averaged:
        avg_weight += weight_increment
    moving = moving_average(moving, mean_loss, ema_weight)
    converged = False
    if add_to_windows(windows, window_size, mean_loss) and test_tol:
        converged = windows_stable(windows, tol)
    add_to_windows(curve, curve_size, mean_loss)
    digest = _digest(t0 + coef.shape[1], window_size, windows, avg_weight if averaged else math.nan, scale, norm,
                     rho, rho_sum, row_seconds, occupancy, coef.ravel(), loss.ravel())
    return DONE, projections, added, digest, avg_weight, moving, converged


@njit(cache=True)
def account_timings(timings, rank, occupancy, spent, waited, row_seconds, row_memory):
    """From every rank's ``timings`` (p, 3) of this pack (``pack_buffer``'s columns): add to
    ``waited`` (2,) how long this rank waited in collective 1 and in collective 2 for the last
    rank to arrive (at most the ``spent`` (2,) seconds it was in each), and, when ``row_memory``
    > 0, fold each rank's partial-sum seconds per
    stored row (``occupancy`` (p,) before the pack's new entries) into ``row_seconds`` (p,),
    a moving average with that weight (its first measurement taken as is).

    Each collective starts when its last rank arrives. Collective 2 (and the previous pack's,
    before collective 1) ends at nearly the same time on every rank, so rank k arrives at the
    next one after its own stretch of work: it waits (the longest stretch) - (its stretch).
    A rank held up on its way out of a collective (descheduled on a busy node) starts its
    stretch late, which this cannot see; the cap keeps its waiting within its time there.
    The same numbers reach every rank, so ``row_seconds`` stays identical everywhere.
    """
    serial_max, local_max = timings[0, SERIAL], timings[0, LOCAL]
    for k in range(1, timings.shape[0]):
        serial_max = max(serial_max, timings[k, SERIAL])
        local_max = max(local_max, timings[k, LOCAL])
    waited[0] += min(serial_max - timings[rank, SERIAL], spent[0])
    waited[1] += min(local_max - timings[rank, LOCAL], spent[1])
    if row_memory > 0.0:
        for k in range(timings.shape[0]):
            if occupancy[k] >= MEASURED_FROM_ROWS:
                seconds = timings[k, PARTIAL_SUMS] / occupancy[k]
                if seconds <= 0.0:  # below the clock's resolution: nothing learnt
                    continue
                if row_seconds[k] > 0.0:
                    seconds = (1.0 - row_memory) * row_seconds[k] + row_memory * seconds
                row_seconds[k] = seconds


@njit(cache=True)
def all_equal(values):
    """Whether every entry of ``values`` (n,) equals the first."""
    for value in values:
        if value != values[0]:
            return False
    return True
