"""Block averaging: every rank solves on its own block of rows; the models are averaged.

Two modes:

- ``oneshot``: each rank solves its block alone, with C scaled by the number of blocks
  so that each block's problem keeps the full problem's balance of loss against
  regulariser; the weight vectors are averaged once (one Allreduce).
- ``iterative``: rounds warm-started from the average. For solvers with a dual (their
  solution carries ``alpha``) a round is the averaging variant of CoCoA: each block
  starts from the shared (w, b) and its own alpha, and the average of the changes is
  applied, which keeps w = sum_i alpha_i y_i x_i and converges to the optimum of the
  whole problem. A data-parallel solver (alm) combines the blocks at every one of its
  iterations instead (its gradient and step are sums over rows), which gives the
  single-rank result exactly. (Pegasos, a stochastic method, has its own exact
  distributed form: ``pegasos.solve_distributed``.)

After every round the primal objective of the averaged model over the whole data set
(and the dual objective, hence the duality gap, when the solver has a dual) is computed
with one Allreduce, so a user sees what averaging costs against a single-rank solve.
Under a feature map both sum over the same rows: every virtual row of every image.
Row weights (each rank's, for its block's rows) go to the solver and weight both.
"""
from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from ..mpi.collectives import Collectives
from .problem import dual_bounds, loss_sum

MODES = ("oneshot", "iterative")


@dataclass
class AveragingReport:
    """Per-round objectives of the averaged model on the whole data set; ``label``: the
    class trained against the rest when there are K > 2 classes (else None); ``converged``:
    the run met its tolerance (the rounds' ``tol``, or the solver's own in one run) before
    its iteration limit."""

    mode: str
    rounds: int = 0
    primal: list = field(default_factory=list)
    dual: list = field(default_factory=list)
    seconds: list = field(default_factory=list)
    label: object = None
    converged: bool = False

    @property
    def gap(self):
        return self.primal[-1] - self.dual[-1] if self.dual else None

    def describe(self):
        """The latest round in words: its primal objective (and duality gap), after the class
        trained against the rest when there is one."""
        gap = f", duality gap {self.gap:.6g}" if self.dual else ""
        label = f"{self.label:g}" if isinstance(self.label, (float, np.floating)) else str(self.label)
        against = "" if self.label is None else f"class {label} against the rest, "
        return f"{against}round {self.rounds}: primal objective {self.primal[-1]:.6g}{gap}"

    def as_dict(self):
        return {"mode": self.mode, "rounds": self.rounds, "converged": self.converged,
                "primal_objective": self.primal[-1],
                "dual_objective": self.dual[-1] if self.dual else None, "duality_gap": self.gap,
                "primal_by_round": self.primal, "dual_by_round": self.dual, "seconds_by_round": self.seconds}


def classes_dict(reports, classes):
    """The reports of K one-vs-rest problems (one per class, in ``classes`` order) as one
    record: rounds, objectives and gap summed over the classes (the K problems are
    independent, so the sums are the objectives and gap of the whole one-vs-rest problem),
    the per-round lists per class, and each class's own summary under ``per_class``."""
    duals = all(r.dual for r in reports)
    return {"mode": reports[0].mode, "rounds": sum(r.rounds for r in reports),
            "converged": all(r.converged for r in reports),
            "primal_objective": sum(r.primal[-1] for r in reports),
            "dual_objective": sum(r.dual[-1] for r in reports) if duals else None,
            "duality_gap": sum(r.gap for r in reports) if duals else None,
            "primal_by_round": [r.primal for r in reports], "dual_by_round": [r.dual for r in reports],
            "seconds_by_round": [r.seconds for r in reports],
            "per_class": [{"class": _plain(c), "rounds": r.rounds, "converged": r.converged,
                           "primal_objective": r.primal[-1], "duality_gap": r.gap}
                          for c, r in zip(classes, reports)]}


def _met_tolerance(sol):
    """Whether a solver's run met its tolerance before its iteration limit: its own
    ``converged`` (true for solvers without one, as Pegasos' fixed steps), or true where the
    limit is its usual stop (``tolerance_reachable`` False: alm with p = 1)."""
    return bool(sol.info.get("converged", True)) or not sol.info.get("tolerance_reachable", True)


def _plain(label):
    """A class label as JSON takes it: a float or a string."""
    return float(label) if isinstance(label, (int, float, np.integer, np.floating)) else str(label)


def block_averaged(comm, solve, has_dual, X, y, C, *, loss="l1", p=None, bias=True, mode="iterative",
                   rounds=100, tol=1e-3, solver_options=None, on_round=None, feature_map=None,
                   data_parallel=False, weights=None):
    """Collective: the block-averaged model ``(w, b, report)`` of every rank's block (X, y).

    ``solve`` is a solver's ``solve`` function and ``has_dual`` whether its solutions carry
    alpha, ``data_parallel`` whether it takes ``comm`` and runs on the union of the blocks
    (then the iterative mode is one such run). ``rounds`` and ``tol`` bound the iterative
    mode of the others: with a dual, rounds stop when
    the duality gap is at most ``tol`` times the primal objective (so the model is that
    close to the optimum); without one, when the primal objective changes by at most
    ``tol`` relative between rounds. ``feature_map`` (a FeatureMap or None) goes to the
    solver, and the primal objective's loss then sums over every virtual row, as the dual
    does. ``on_round(report)`` runs on every rank after each round. ``weights`` (this
    block's rows,) or None: the rows' loss weights, given to the solver and to the objectives.
    """
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    size = comm.Get_size()
    power = p if p is not None else (2.0 if loss == "l2" else 1.0)
    cocoa = has_dual and mode == "iterative"
    block_C = C if cocoa else C * size
    report = AveragingReport(mode)
    solver_options = dict(solver_options or {})
    if feature_map is not None:
        solver_options["feature_map"] = feature_map
    if weights is not None:
        solver_options["weights"] = weights
    if data_parallel and mode == "iterative":
        start = MPI.Wtime()
        sol = solve(X, y, C, loss=loss, bias=bias, comm=comm, **solver_options)
        report.rounds = sol.iterations
        report.converged = _met_tolerance(sol)  # the same on every rank: one run
        report.seconds.append(comm.allreduce(MPI.Wtime() - start, op=MPI.MAX))
        block_loss = loss_sum(X, y, sol.w, sol.b, power, feature_map, weights)
        report.primal.append(0.5 * (float(sol.w @ sol.w) + sol.b ** 2) + C * comm.allreduce(block_loss, op=MPI.SUM))
        if on_round is not None:
            on_round(report)
        return sol.w, sol.b, report
    collectives = Collectives(comm)
    w = b = alpha = None
    for _ in range(1 if mode == "oneshot" else rounds):
        start = MPI.Wtime()
        warm = {} if w is None else {"w0": w.copy(), "b0": b}
        if cocoa and alpha is not None:
            warm["alpha0"] = alpha.copy()
        sol = solve(X, y, block_C, loss=loss, bias=bias, **warm, **solver_options)
        if cocoa:
            if w is None:
                w, b, alpha = np.zeros_like(sol.w), 0.0, np.zeros_like(sol.alpha)
            w, b, alpha = _average_changes(collectives, sol, w, b, alpha)
        else:
            w, b = _average(collectives, sol.w, sol.b)
        report.rounds += 1
        report.seconds.append(comm.allreduce(MPI.Wtime() - start, op=MPI.MAX))
        block_loss = loss_sum(X, y, w, b, power, feature_map, weights)
        report.primal.append(0.5 * (float(w @ w) + b * b) + C * comm.allreduce(block_loss, op=MPI.SUM))
        if cocoa and weights is None:
            sums = comm.allreduce(np.array([alpha.sum(), alpha @ alpha]), op=MPI.SUM)
            dual = sums[0] - 0.5 * (float(w @ w) + b * b) - (sums[1] / (4 * C) if loss == "l2" else 0.0)
            report.dual.append(float(dual))
        elif cocoa:  # l2: sum_r alpha_r^2 D_r / 2 with D_r = 1/(2 C c_r)
            diags = dual_bounds(C, loss, weights, 1 if feature_map is None else feature_map.n_virtual)[1]
            sums = comm.allreduce(np.array([alpha.sum(), 0.5 * float(alpha @ (alpha * diags))]), op=MPI.SUM)
            dual = sums[0] - 0.5 * (float(w @ w) + b * b) - sums[1]
            report.dual.append(float(dual))
        if on_round is not None:
            on_round(report)
        if mode == "oneshot":  # each block's solver, within its own limit
            report.converged = bool(comm.allreduce(int(_met_tolerance(sol)), op=MPI.MIN))
        elif cocoa and report.gap <= tol * abs(report.primal[-1]) or not cocoa and len(report.primal) > 1 and \
                abs(report.primal[-2] - report.primal[-1]) <= tol * abs(report.primal[-1]):
            report.converged = True
            break
    return w, b, report


def _average(collectives, w, b):
    """The mean of every rank's (w, b)."""
    buf = collectives.sum(np.append(w, b).astype(np.float64))
    buf /= collectives.size
    return buf[:-1], float(buf[-1])


def _average_changes(collectives, sol, w, b, alpha):
    """CoCoA averaging step: apply 1/size of every block's change to (w, b) and alpha."""
    delta_w, delta_b = _average(collectives, sol.w - w, sol.b - b)
    return w + delta_w, b + delta_b, alpha + (sol.alpha - alpha) / collectives.size
