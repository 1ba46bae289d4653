"""The dual's epoch bookkeeping, replicated on every rank: the figures each epoch adds up, the
shrinking thresholds and LIBLINEAR's stopping test after it, and what a checkpoint keeps of them."""
import math

import numpy as np

from .coordinate import EPOCH_FIGURES, FROZEN, HINGE, PG_MAX, PG_MIN, VISITED, relative_gap


class EpochState:
    """Per column (K of them): ``alpha_sum`` (K,) the dual's linear part, sum(alpha) (epsilon-SVR's
    sum(y beta) - epsilon sum |beta|); ``figures`` (K, EPOCH_FIGURES)
    this epoch's (``coordinate.coordinate_steps``' ``epoch``); ``pg_old`` (K, 2) the shrinking
    thresholds; ``converged`` (K,) bool, the column has stopped; ``fresh`` (K,) bool, its active
    set held every row when this epoch began. ``history``: per epoch the rows drawn, and each
    column's KKT gap and estimated relative duality gap (lists of K). ``unit``: what the KKT
    gap is measured in (1 for C-SVC; epsilon-SVR's, ``regression.Regression.unit``)."""

    def __init__(self, n_columns, unit=1.0):
        Q = int(n_columns)
        self.unit = float(unit)
        self.alpha_sum = np.zeros(Q)
        self.figures = np.zeros((Q, EPOCH_FIGURES))
        self.pg_old = np.empty((Q, 2))
        self.pg_old[:, 0], self.pg_old[:, 1] = math.inf, -math.inf
        self.converged = np.zeros(Q, dtype=bool)
        self.fresh = np.ones(Q, dtype=bool)
        self.history = {"kkt_gap": [], "rows_drawn": [], "duality_gap_estimate": []}

    def begin(self, drawn):
        """A new epoch of ``drawn`` rows: its figures from zero (the frozen rows' losses kept)."""
        self.history["rows_drawn"].append(int(drawn))
        self.figures[:, :FROZEN] = 0.0
        self.figures[:, PG_MAX], self.figures[:, PG_MIN] = -math.inf, math.inf

    def end(self, w2, tol, shrinking, draws):
        """After an epoch (``w2`` (K,) alpha' Q alpha): its KKT gaps and estimated gaps into
        ``history``, then per column LIBLINEAR's test. At most ``tol`` over an epoch that began
        with every row (``fresh``), the column stops (``draws.freeze``); at most ``tol`` on a
        shrunk set, every row comes back (``draws.restore``); otherwise, with ``shrinking``, the
        epoch's PG extremes are the next thresholds. Returns the epoch's KKT gaps (K,)."""
        figures = self.figures
        kkt = np.where(figures[:, VISITED] > 0, figures[:, PG_MAX] - figures[:, PG_MIN], 0.0) / self.unit
        kkt[self.converged] = 0.0
        primal = 0.5 * w2 + figures[:, HINGE] + figures[:, FROZEN]
        self.history["kkt_gap"].append(kkt.tolist())
        self.history["duality_gap_estimate"].append(
            [relative_gap(p, d) for p, d in zip(primal, self.alpha_sum - 0.5 * w2)])
        for c in np.flatnonzero(~self.converged):
            if kkt[c] <= tol:
                if self.fresh[c]:
                    self.converged[c] = True
                    draws.freeze(c)
                else:  # every row back for one more epoch before it may stop
                    draws.restore(c)
                    self.pg_old[c] = math.inf, -math.inf
                    figures[c, FROZEN] = 0.0
                    self.fresh[c] = True
            elif shrinking:
                self.pg_old[c, 0] = figures[c, PG_MAX] if figures[c, PG_MAX] > 0 else math.inf
                self.pg_old[c, 1] = figures[c, PG_MIN] if figures[c, PG_MIN] < 0 else -math.inf
                self.fresh[c] = self.fresh[c] and bool(np.isinf(self.pg_old[c]).all())
        return kkt

    def as_dict(self):
        """A JSON-able copy (a checkpoint's attribute "dual")."""
        return {"alpha_sum": self.alpha_sum.tolist(), "figures": self.figures.tolist(),
                "pg_old": self.pg_old.tolist(), "converged": self.converged.tolist(), "fresh": self.fresh.tolist(),
                "history": self.history}

    def restore(self, saved):
        """Back to ``as_dict``'s ``saved``, in place; ValueError where it has other columns."""
        if len(saved["alpha_sum"]) != len(self.alpha_sum):
            raise ValueError(f"{len(saved['alpha_sum'])} columns, this run has {len(self.alpha_sum)}")
        self.alpha_sum[:] = saved["alpha_sum"]
        self.figures[:] = saved["figures"]
        self.pg_old[:] = saved["pg_old"]
        self.converged[:] = saved["converged"]
        self.fresh[:] = saved["fresh"]
        self.history = {name: list(values) for name, values in saved["history"].items()}
