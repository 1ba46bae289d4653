"""The packed trainer's three problems (``svm_type``) and what each needs beside the replay's
sub-gradient (``replay.py``): the projection radius and the offset rho of f = <w, phi(x)> - rho.

Every problem minimises sigma/2 ||w||^2 + 1/m sum_i weight_i loss_i (+ a term in rho), so the
step, the scale, the norm, the packing and the two Allreduce calls are C-SVC's:

- c_svc: loss max(0, 1 - y f), rho = 0. Radius sqrt(max_weight / sigma) (Pegasos' bound).
- epsilon_svr: loss max(0, |y - f| - epsilon), rho fixed at minus the targets' mean (see
  ``svr_loss`` for why and for the radius).
- one_class: Schoelkopf's nu problem, min 1/2 ||w||^2 + 1/(nu m) sum max(0, rho - <w, phi>) -
  rho, times nu: sigma = nu, so C = 1 / (nu m). rho is learned in the replay with w's own
  step c / (sigma (t + c - 1)) on its sub-gradient weight 1[f < rho] - sigma (projected SGD
  on the jointly convex objective), kept in the interval that holds the optimum's rho (see
  ``one_class_loss``); the model's rho is set after training (``objective.nu_quantile``).
"""
import math
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from ..kernels.precision import largest_norm
from .replay import EPSILON_INSENSITIVE, HINGE, ONE_CLASS

MODES = {"c_svc": HINGE, "epsilon_svr": EPSILON_INSENSITIVE, "one_class": ONE_CLASS}


@dataclass(frozen=True)
class Loss:
    """The replay's loss arguments: ``mode``, ``epsilon``, ``rho`` at t = 0, ``rho_step`` (0:
    rho stays), ``rho_low`` and ``rho_high``: the interval a learned rho is projected onto
    after each step, and ``bound``: sigma times the squared projection radius (the replay's
    ``max_weight``; inf: no projection)."""

    mode: int = HINGE
    epsilon: float = 0.0
    rho: float = 0.0
    rho_step: float = 0.0
    bound: float = 1.0
    rho_low: float = -math.inf
    rho_high: float = math.inf


def hinge_loss(max_weight):
    """C-SVC: ||w*||^2 <= max_weight / sigma (Pegasos' duality argument, with weights)."""
    return Loss(HINGE, bound=float(max_weight))


def svr_loss(comm, targets, epsilon, max_weight):
    """Collective: epsilon-SVR's Loss for the rows' ``targets`` (this rank's, (rows,)).

    The offset: rho = -mean(y), fixed, from one collective (an allgather of each rank's sum,
    count, largest and smallest target). Learning rho in the replay as well was measured on
    Friedman #1 (docs/guide/svm-types.md, "SVM types"): an unregularised scalar with a decaying step is a
    stochastic median estimate that the early, large steps throw far off, while the mean is
    exact from the first iteration and leaves w to model only the deviations.

    The radius, with b = mean(y): by duality (as Pegasos' bound), at the optimum
    sigma ||w*||^2 = -1/m sum_i [loss_i(w*) + loss_i^*(-alpha_i)] <= -1/m sum_i loss_i^*(-alpha_i)
    with |alpha_i| <= weight_i; the conjugate of weight max(0, |y - b - z| - epsilon) gives
    -loss^*(-a) = a (y - b) - epsilon |a| <= |a| (|y - b| - epsilon). So
    ||w*||^2 <= max_weight * max_i max(0, |y_i - b| - epsilon) / sigma: the hinge's bound with
    1 replaced by the largest target deviation beyond the tube.
    """
    y = np.asarray(targets, dtype=np.float64)
    parts = comm.allgather((math.fsum(y), len(y), float(y.max(initial=-math.inf)), float(y.min(initial=math.inf))))
    total = math.fsum(p[0] for p in parts)
    n = sum(p[1] for p in parts)
    mean = total / max(n, 1)
    widest = max(max(p[2] for p in parts) - mean, mean - min(p[3] for p in parts))
    return Loss(EPSILON_INSENSITIVE, float(epsilon), rho=-mean, bound=float(max_weight) * max(0.0, widest - epsilon))


def one_class_loss(comm, shard, spec, sigma):
    """Collective: the one-class Loss on ``shard`` with ``spec``, sigma = nu
    (``one_class_rule`` of ``one_class_radius2``).

    The radius: at the optimum w* = 1/(nu m) sum_i alpha_i weight_i phi(x_i) with alpha_i in
    [0, 1] and sum_i alpha_i weight_i = nu m (the conditions on w and on rho), a convex
    combination of the rows' images, so ||w*||^2 <= max_i K(x_i, x_i) <= R^2: 1 + offset for
    rbf and laplacian, from the largest row norm N for linear (N) and poly (max(|gamma N +
    coef0|, |coef0|)^degree, an upper bound); no projection for sigmoid (not positive
    semi-definite).

    rho's interval [0, R^2]: strong duality gives rho* = ||w*||^2 + 1/(nu m) sum_i weight_i
    xi_i >= 0, and rho* is a row's score <w*, phi(x_j)> <= ||w*|| sqrt(K(x_j, x_j)) <= R^2.
    Without it the early steps, 1 / (nu t) large, throw rho far below every score (about
    -30 at nu = 0.01), where it climbs back by only c / t an iteration and no row is stepped
    on: one support vector. Sigmoid keeps an unbounded rho (no duality argument).
    """
    return one_class_rule(one_class_radius2(comm, shard, spec), sigma)


def one_class_radius2(comm, shard, spec):
    """Collective: R^2 of ``one_class_loss`` on ``shard`` with ``spec`` (inf: no bound)."""
    facts = spec.facts
    if not facts.psd:
        radius2 = math.inf
    elif facts.exp:
        radius2 = 1.0 + spec.offset
    else:
        largest = largest_norm(comm, shard, spec)
        if spec.name == "poly":
            largest = max(abs(spec.gamma * largest + spec.coef0), abs(spec.coef0)) ** spec.degree
        radius2 = largest + spec.offset
    return radius2


def one_class_rule(radius2, sigma):
    """The one-class Loss for the squared radius ``radius2`` (``one_class_radius2``) and sigma = nu."""
    low, high = (0.0, radius2) if math.isfinite(radius2) else (-math.inf, math.inf)
    return Loss(ONE_CLASS, rho=0.0, rho_step=1.0 / sigma, bound=sigma * radius2, rho_low=low, rho_high=high)


def largest_weight(comm, weights):
    """Collective: the largest row weight of the data set (1 without weights)."""
    return 1.0 if weights is None else comm.allreduce(float(weights.max(initial=0.0)), op=MPI.MAX)
