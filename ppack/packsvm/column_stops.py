"""The convergence test (``tol``) per group of columns, for a grid pass: each grid column stops
on its own, as its separate fit would, and the pass ends when all have stopped or at T. The
validation's stop per group (``validation.ColumnValidation``) stops groups here too.

A group is the columns one separate fit trains (a grid point and fold's K class columns). Its
test is the separate fit's: the mean over its K columns of the rows' losses (summed in column
order, then divided by K, as the replay's mean), in windows of ``window`` sampled rows, stable
when two consecutive windows' means differ by at most ``tol`` relative. A group that passes
stops at the end of that pack: its columns turn inactive (``Columns.active``), so the replay
gives them no step, no scale decay and no average increment, and they keep the model their
separate fit stops with. Every rank sees the same losses, so all freeze alike.

The averaged model of a stopped column is its weighted sum over the iterations it ran, over
the sum of their weights ``avg_weight`` as it stood at the stop (``avg_weight``, per column).
"""
import numpy as np

from .state import LossWindows


class ColumnStops:
    """Per column (Q,): ``group`` (int64, the columns that stop together) and, once stopped,
    ``iteration`` (int64, -1 while running) and ``avg_weight`` (the averages' weight sum
    then, NaN while running); ``tol`` (None: no test, only the validation's stops) and
    ``window``: the test's, as ``PackedSolver``'s."""

    def __init__(self, group, tol, window):
        self.group = np.asarray(group, dtype=np.int64)
        self.tol, self.window = None if tol is None else float(tol), int(window)
        self.members = [np.flatnonzero(self.group == g) for g in np.unique(self.group)]
        self.windows = [LossWindows(self.window) for _ in self.members]
        self.iteration = np.full(len(self.group), -1, dtype=np.int64)
        self.avg_weight = np.full(len(self.group), np.nan)

    def after_pack(self, loss, active, iteration, avg_weight):
        """A pack's losses (Q, r) of every column; stops the groups whose test passes (their
        ``active`` entries set False), at ``iteration`` (after the pack) with the averages'
        ``avg_weight`` (None: not averaging). Returns True when every column has stopped (by
        this test or the validation's); always False without ``tol``."""
        if self.tol is None:
            return False
        for members, windows in zip(self.members, self.windows):
            if not active[members[0]]:
                continue
            total = loss[members[0]].copy()  # the replay's mean over the group's columns, in its order
            for c in members[1:]:
                total += loss[c]
            if windows.add(total / len(members)) and windows.stable(self.tol):
                self.stop(members, active, iteration, avg_weight)
        return not np.any(active)

    def stop(self, members, active, iteration, avg_weight):
        """Stop the columns ``members`` (int array) at ``iteration``, with the averages'
        ``avg_weight`` (None: not averaging): inactive in ``active`` from now on."""
        active[members] = False
        self.iteration[members] = iteration
        self.avg_weight[members] = np.nan if avg_weight is None else avg_weight

    def stopped(self, c):
        """Whether column c stopped before T."""
        return bool(self.iteration[c] >= 0)

    def as_dict(self):
        """What a checkpoint keeps (JSON): each column's stop and each group's windows."""
        return {"iteration": self.iteration.tolist(),
                "avg_weight": [None if np.isnan(w) else float(w) for w in self.avg_weight],
                "windows": [windows.as_dict() for windows in self.windows]}

    def restore(self, saved, active):
        """Continue from ``as_dict``'s ``saved``: the stopped columns turn inactive in ``active``
        (Q,) bool. The windows continue when their size is this test's, else start afresh (as
        the one-test run's do). ValueError when ``saved`` is for another number of columns."""
        iteration = np.asarray(saved["iteration"], dtype=np.int64)
        if iteration.shape != self.iteration.shape or len(saved["windows"]) != len(self.windows):
            raise ValueError(f"{len(iteration)} columns in {len(saved['windows'])} groups, this run has "
                             f"{len(self.iteration)} in {len(self.windows)}")
        self.iteration = iteration
        self.avg_weight = np.array([np.nan if w is None else w for w in saved["avg_weight"]], dtype=np.float64)
        self.windows = [LossWindows(**w) if w["size"] == self.window else LossWindows(self.window)
                        for w in saved["windows"]]
        active[self.iteration >= 0] = False
