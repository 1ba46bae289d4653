"""The primal objective of a trained model, read after training (no work inside the packs).

P(w) = sigma/2 ||w||^2 + 1/m sum_i weight_i max(0, 1 - y_i <w, phi(x_i)>), per binary problem.
||w||^2 is the replicated norm the replay keeps exactly up to rounding (no kernel between
support vectors is needed for the returned iterate); an averaged model's is not tracked: it
is sum_j a_j f(x_j) over its support vectors, one prediction pass over them, taken only when
asked (``exact``), else reported as NaN. The hinge part is estimated on a fixed,
seeded sample of ``SAMPLE_ROWS`` rows by default, or taken over every row when asked (one
prediction pass over the training set: as costly as predicting it).
"""
import numpy as np

from ..mpi.collectives import Collectives
from .predict import distributed_decisions

SAMPLE_ROWS = 2_000


def objective_rows(n_samples, seed, exact=False):
    """Global ids (sorted int64) of the rows the hinge part is taken over."""
    if exact or n_samples <= SAMPLE_ROWS:
        return np.arange(n_samples, dtype=np.int64)
    chosen = np.random.default_rng([seed, 0x0B1EC71]).choice(n_samples, size=SAMPLE_ROWS, replace=False)
    return np.sort(chosen).astype(np.int64)


def support_vector_norms(comm, model, shard):
    """Collective: ||w||^2 per coefficient column, sum_j coef_j f(x_j), from the decision values
    f of the support vectors (their keys are training rows): (n_columns,) on every rank."""
    collectives = Collectives(comm)
    keys = np.unique(np.concatenate(comm.allgather(model.table_.keys)))
    decisions, _ = distributed_decisions(comm, model.table_, model.scale_, shard, model.n_features_in_, ids=keys)
    columns = model.table_.n_columns
    f = collectives.broadcast(decisions.reshape(len(keys), columns) if collectives.rank == 0
                              else np.empty((len(keys), columns)))
    own = f[np.searchsorted(keys, model.table_.keys)]
    local = np.sum(model.table_.coef * np.reshape(model.scale_, (1, -1)) * own, axis=0)
    return collectives.sum(np.ascontiguousarray(local, dtype=np.float64))


def primal_objective(comm, model, shard, norms, weights, ids):
    """Collective: the objective of ``model`` (a fitted PackSVC) on the rows ``ids`` of the
    training ``shard``, as a dict the same on every rank: ``value`` (the mean over the binary
    problems), ``norm_term`` and ``hinge_term`` (lists, one per problem), ``rows``, ``exact``.

    norms (n_columns,): ||w||^2 of each problem; weights: the shard rows' weights, or None."""
    collectives = Collectives(comm)
    if np.isnan(norms).any() and len(ids) == shard.n_samples:  # an averaged model, exact asked
        norms = support_vector_norms(comm, model, shard)
    decisions, raw = distributed_decisions(comm, model.table_, model.scale_, shard, model.n_features_in_, ids=ids)
    row_weights = None
    if weights is not None:  # the sampled rows' weights, from the ranks that hold them (one sum)
        row_weights = np.zeros(len(ids))
        mine = (ids >= shard.start) & (ids < shard.stop)
        row_weights[mine] = weights[ids[mine] - shard.start]
        collectives.sum(row_weights)
    result = None
    if collectives.rank == 0:
        values = model._class_values
        f = decisions.reshape(len(ids), -1)
        if f.shape[1] == 1:
            signs = np.where(raw == values[1], 1.0, -1.0)[:, None]
        else:
            signs = np.where(raw[:, None] == values[None, :], 1.0, -1.0)
        hinge = np.maximum(0.0, 1.0 - signs * f)
        if row_weights is not None:
            hinge *= row_weights[:, None]
        hinge_term = hinge.mean(axis=0)
        norm_term = 0.5 * model.sigma_ * np.asarray(norms, dtype=np.float64)
        known = not np.isnan(norm_term).any()  # an averaged model's norm is taken only when exact
        result = {"value": float(np.mean(norm_term + hinge_term)) if known else None,
                  "norm_term": norm_term.tolist() if known else None, "hinge_term": hinge_term.tolist(),
                  "rows": len(ids), "exact": len(ids) == shard.n_samples}
    return comm.bcast(result, root=0)
