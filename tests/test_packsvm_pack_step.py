"""The pack step's replicated scalars (``pack_update.PackStep``), each against a slow
reference: numpy's sum, the --tol windows, the loss's moving average, and the digest of the
state the step ends with against ``replica_digest`` of that state."""
import math

import numpy as np
import pytest
from mpi4py import MPI

from ppack.data.delivery import deliver_rows
from ppack.data.shard import Shard
from ppack.kernels.compute import KernelCompute
from ppack.kernels.spec import KernelSpec
from ppack.mpi.collectives import Collectives
from ppack.packsvm.averaging import weight_sum
from ppack.packsvm.columns import Columns
from ppack.packsvm.loop import upper_pairs
from ppack.packsvm.losses import Loss, one_class_rule
from ppack.packsvm.pack_buffer import PackBuffer
from ppack.packsvm.pack_update import DONE, PackStep
from ppack.packsvm.state import LossWindows, SolverState, SolverStats, moving_average, numpy_sum, replica_digest
from ppack.packsvm.table import SupportVectorTable


class ReferenceWindows:
    """The --tol windows in plain Python: the sums by ``np.sum``, every mean kept."""

    def __init__(self, size):
        self.size, self.total, self.count, self.means = size, 0.0, 0, []

    def add(self, losses):
        self.total += float(np.sum(losses))
        self.count += len(losses)
        if self.count < self.size:
            return False
        self.means.append(self.total / self.count)
        self.total, self.count = 0.0, 0
        return True

    def stable(self, tol):
        return len(self.means) > 1 and abs(self.means[-1] - self.means[-2]) <= tol * max(abs(self.means[-2]), 1e-12)


def reference_moving_average(previous, values, weight):
    if math.isnan(previous):
        return float(np.mean(values))
    total, factor = 0.0, 1.0
    for value in values[::-1]:
        total += factor * value
        factor *= 1.0 - weight
    return factor * previous + weight * total


@pytest.mark.parametrize("n", [*range(0, 300, 7), 127, 128, 129, 136, 255, 256, 257, 1000, 1001, 4097, 100003])
def test_numpy_sum_is_np_sum_bit_for_bit(n):
    rng = np.random.default_rng(n)
    for _ in range(5):
        values = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)
        assert numpy_sum(values) == np.sum(values)  # exact: the --tol windows' sums, as before


@pytest.mark.parametrize("keep", [2, 8])
def test_loss_windows_close_and_compare_as_the_reference_does(keep):
    rng = np.random.default_rng(4)
    for size, r in ((500, 100), (450, 100), (30, 7), (1, 3)):
        windows, reference = LossWindows(size, keep=keep), ReferenceWindows(size)
        for _ in range(40):
            losses = np.abs(rng.normal(size=r)) * 0.1
            assert windows.add(losses) == reference.add(losses)
            assert (windows.total, windows.count, windows.means) == (reference.total, reference.count,
                                                                     reference.means[-keep:])
            for tol in (0.0, 0.05, 0.5):
                assert windows.stable(tol) == reference.stable(tol)
        again = LossWindows(**windows.as_dict())  # a checkpoint's round trip
        assert again.as_dict() == windows.as_dict() and np.array_equal(again.values, windows.values, equal_nan=True)


def test_moving_average_is_the_reference_s():
    rng = np.random.default_rng(5)
    values = np.abs(rng.normal(size=100))
    for previous in (math.nan, 0.3):
        for weight in (1e-3, 0.01, 0.5):
            assert moving_average(previous, values, weight) == reference_moving_average(previous, values, weight)


def one_pack(loss_rule, average, tol, seed=3):
    """One pack of 8 rows into an empty table (every row steps), through ``PackStep``
    with the loop's bookkeeping; returns the state, stats and what the step returned, beside
    the state and stats before it and the replay's outputs."""
    rng = np.random.default_rng(seed)
    X, y = rng.normal(size=(16, 5)), np.where(rng.random(16) < 0.5, -1.0, 1.0)
    shard = Shard.from_arrays(X, y)
    table = SupportVectorTable(KernelCompute(KernelSpec("rbf", gamma=0.3), 5, False), averaged=average)
    ids = np.array([0, 3, 5, 8, 9, 11, 12, 15])
    block = deliver_rows(Collectives(MPI.COMM_SELF), shard, shard.y, ids)
    norms = table.compute.row_norms(block)
    r = len(ids)
    buf = PackBuffer(1, r, 1)
    left, right = upper_pairs(r)
    table.compute.pair_kernels(block, norms, left, right, buf.pairs)
    windows = LossWindows(12, total=0.125, count=4, means=[0.75])
    state = SolverState(iteration=40, scale=np.ones(1), norm=np.zeros(1), occupancy=np.zeros(1, dtype=np.int64),
                        loss_windows=windows, avg_weight=123.5 if average else None, rho=np.full(1, 0.25),
                        rho_sum=np.full(1, 2.0), row_seconds=np.zeros(1))
    stats = SolverStats(hinge_moving_average=0.5)
    before = (state.iteration, state.avg_weight, state.rho.copy(), state.rho_sum.copy(), windows.as_dict(),
              stats.hinge_moving_average)
    coef, loss, fold, mean_loss = np.empty((1, r)), np.empty((1, r)), np.empty((1, 2)), np.empty(r)
    offsets = np.array([[state.rho[0], 0.0]])
    step = PackStep(0, state, table, Columns.plain(1, 0.1, loss_rule), loss_rule, 1.0, np.full(1, loss_rule.bound),
                    stats=stats, ema_weight=0.01, tol=tol)
    status, _, _, digest, converged = step(buf, block, ids, norms, coef, loss, fold,
                                           np.empty((1, r + 1) if average else (1, 0)), mean_loss, offsets,
                                           np.zeros(2), np.zeros(2), np.empty((0, 0)))
    assert status == DONE
    return state, stats, digest, converged, before, coef, loss, mean_loss, offsets


@pytest.mark.parametrize("average", [False, True])
@pytest.mark.parametrize("one_class", [False, True])
def test_the_step_advances_the_replicated_scalars_and_digests_the_state_it_ends_with(average, one_class):
    loss_rule = one_class_rule(2.0, 0.1) if one_class else Loss(bound=1.0)
    for tol in (None, 0.5):
        state, stats, digest, converged, before, coef, loss, mean_loss, offsets = one_pack(loss_rule, average, tol)
        iteration, avg_weight, rho, rho_sum, windows, moving = before
        assert state.iteration == iteration + 8
        if average:
            assert state.avg_weight == avg_weight + weight_sum(iteration, 8)
        else:
            assert state.avg_weight is None
        if one_class:  # rho moves, and its averaging sum with it
            assert state.rho[0] == offsets[0, 0] and state.rho[0] != rho[0]
            assert state.rho_sum[0] == (rho_sum[0] + offsets[0, 1] if average else rho_sum[0])
        else:  # the hinge loss leaves both alone
            assert state.rho[0] == rho[0] and state.rho_sum[0] == rho_sum[0]
        assert stats.hinge_moving_average == reference_moving_average(moving, mean_loss, 0.01)
        reference = ReferenceWindows(windows["size"])
        reference.total, reference.count, reference.means = windows["total"], windows["count"], windows["means"]
        # kept in every run (the convergence diagnostic reads them), tested only with tol
        assert reference.add(mean_loss)  # the pack closes a window
        assert state.loss_windows.as_dict() == {**windows, "total": 0.0, "count": 0, "means": reference.means}
        assert converged == (tol is not None and reference.stable(tol))
        assert digest == replica_digest(state, coef.ravel(), loss.ravel())


@pytest.mark.parametrize("average", [False, True])
def test_the_step_refuses_a_table_whose_averages_do_not_match_the_state(average):
    """An averaged step writes each new entry's average part: a table without room for them
    would be written past its end (the warm-up's pack once was)."""
    table = SupportVectorTable(KernelCompute(KernelSpec("rbf", gamma=0.3), 5, False), averaged=not average)
    state = SolverState(scale=np.ones(1), norm=np.zeros(1), occupancy=np.zeros(1, dtype=np.int64),
                        loss_windows=LossWindows(12), avg_weight=0.0 if average else None, rho=np.zeros(1),
                        rho_sum=np.zeros(1), row_seconds=np.zeros(1))
    with pytest.raises(ValueError, match="averages"):
        PackStep(0, state, table, Columns.plain(1, 0.1, Loss()), Loss(), 1.0, np.ones(1))
