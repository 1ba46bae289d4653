"""The primal objective of a trained model, read after training (no work inside the packs).

P(w) = sigma/2 ||w||^2 + 1/m sum_i weight_i max(0, 1 - y_i <w, phi(x_i)>), per binary problem;
for epsilon-SVR and one-class the model's own loss (``row_losses``) takes the hinge's place, and
one-class adds its -sigma rho (``objective_offset_term``).
||w||^2 is the replicated norm the replay keeps exactly up to rounding (no kernel between
support vectors is needed for the returned iterate); an averaged model's is not tracked: it
is sum_j a_j f(x_j) over its support vectors, one prediction pass over them, taken only when
asked (``exact``), else reported as NaN. The hinge part is estimated on a fixed,
seeded sample of ``SAMPLE_ROWS`` rows by default, or taken over every row when asked (one
prediction pass over the training set: as costly as predicting it).

One-class sets its rho after training to the rho that minimises the objective for the
returned w (``nu_quantile``, from one prediction pass over the training rows, ``training_rows``,
which the objective's loss part then reads instead of a pass of its own). With w fixed,
the objective's part in rho, 1/m sum_i weight_i max(0, rho - s_i) - nu rho for the scores
s_i = <w, phi(x_i)>, is convex and piecewise linear, with right derivative
1/m sum_{s_i <= rho} weight_i - nu. Its smallest minimiser is the smallest score at which the
weights of the rows scoring at most it reach nu m: without weights, the ceil(nu m)-th
smallest score. Fewer than nu m rows then score below rho and at least nu m at or below it,
as the dual's conditions give at the optimum (outliers <= nu m <= support vectors). The
replay's own rho follows the scores of the iterates w_t, and an averaged model's is the
a_t-weighted mean of those, which is not the quantile of the averaged w's scores (measured:
54% of the threes of scikit-learn's digits below it at nu 0.5, 36% of breast cancer's benign
rows at nu 0.3; ``bench/one_class_nu.py``).
"""
import numpy as np

from ..mpi.collectives import Collectives
from .predict import block_rows, decision_blocks
from .table import shard_offsets

SAMPLE_ROWS = 2_000


def objective_rows(n_samples, seed, exact=False):
    """Global ids (sorted int64) of the rows the hinge part is taken over; None for every row."""
    if exact or n_samples <= SAMPLE_ROWS:
        return None
    chosen = np.random.default_rng([seed, 0x0B1EC71]).choice(n_samples, size=SAMPLE_ROWS, replace=False)
    return np.sort(chosen).astype(np.int64)


def support_vector_norms(comm, model, shard):
    """Collective: ||w||^2 per coefficient column, sum_j coef_j f(x_j), from the decision values
    f of the support vectors (their keys are training rows): (n_columns,) on every rank.

    The support vectors are taken in rank order, a block of ``predict.block_rows`` at a time:
    the block's keys (each from the rank that holds it, one sum), its decision values on
    every rank, each rank's share of the sum from its own entries. So a rank holds one
    block's keys and values, never all of them."""
    collectives = Collectives(comm)
    table, rank = model.table_, comm.Get_rank()
    entries, _ = shard_offsets(comm, table)
    first, end = int(entries[rank]), int(entries[rank + 1])  # this rank's entries in the order
    scale = np.reshape(model.scale_, (-1, 1))
    local = np.zeros(table.n_columns)
    rows = block_rows(model.n_features_in_)
    for b0 in range(0, int(entries[-1]), rows):
        keys = np.zeros(min(rows, int(entries[-1]) - b0), dtype=np.int64)
        lo, hi = max(first, b0), min(end, b0 + len(keys))  # this rank's entries in the block
        if hi > lo:
            keys[lo - b0:hi - b0] = table.keys[lo - first:hi - first]
        collectives.sum(keys)  # each slot written by one rank: exact
        for _, _, f in decision_blocks(comm, table, model.scale_, shard, model.n_features_in_, keys, collectives,
                                       everywhere=True):
            if hi > lo:
                local += np.sum(table.coef[lo - first:hi - first].T * scale * f[:, lo - b0:hi - b0], axis=1)
    return collectives.sum(np.ascontiguousarray(local, dtype=np.float64))


def primal_objective(comm, model, shard, norms, weights, ids, passed=None, kept=None):
    """Collective: the objective of ``model`` (a fitted PackSVC) on the rows ``ids`` (None: every
    row) of the training ``shard``, as a dict the same on every rank: ``value`` (the mean over the
    binary problems), ``norm_term`` and ``hinge_term`` (lists, one per problem), ``zero_term`` (the
    zero model's hinge term: w = 0, the model's rho), ``rows``, ``exact``.

    norms (n_columns,): ||w||^2 of each problem; weights: the shard rows' weights, or None.
    The rows are taken a block at a time (``predict.decision_blocks``): rank 0 adds up each
    block's hinge losses, holding one block. ``passed``, if given: a pass over every training
    row already made (``training_rows``), which the hinge part is taken from instead. ``kept``,
    if given (a list): rank 0 appends the rows' decision values and labels, (f (K, n), y (n,)),
    block by block."""
    exact = ids is None
    if np.isnan(norms).any() and exact:  # an averaged model, exact asked
        norms = support_vector_norms(comm, model, shard)
    hinge_sum = np.zeros(model.table_.n_columns)
    zero_sum = np.zeros(model.table_.n_columns)  # the zero model's loss on the same rows
    if passed is None:
        blocks = ((f, block.y, block.weight) for _, block, f in decision_blocks(
            comm, model.table_, model.scale_, shard, model.n_features_in_, ids, weights=weights))
    else:  # rank 0 holds the pass's rows
        f, y, w = passed
        chosen = slice(None) if exact else ids
        blocks = [] if f is None else [(f[:, chosen], y[chosen], None if w is None else w[chosen])]
    for f, y, w in blocks:
        if f is not None:  # rank 0
            if kept is not None:
                kept.append((f, y))
            hinge, zero = model.row_losses(f, y), model.row_losses(np.zeros_like(f), y)
            if weights is not None:
                hinge *= w[None, :]
                zero *= w[None, :]
            hinge_sum += hinge.sum(axis=1)
            zero_sum += zero.sum(axis=1)
    result = None
    if comm.Get_rank() == 0:
        rows = shard.n_samples if exact else len(ids)
        hinge_term = hinge_sum / rows
        norm_term = 0.5 * model.sigma_ * np.asarray(norms, dtype=np.float64)
        known = not np.isnan(norm_term).any()  # an averaged model's norm is taken only when exact
        offset_term = model.objective_offset_term()
        result = {"value": float(np.mean(norm_term + hinge_term) + offset_term) if known else None,
                  "norm_term": norm_term.tolist() if known else None, "hinge_term": hinge_term.tolist(),
                  "zero_term": (zero_sum / rows).tolist(),
                  "rows": rows, "exact": exact}
    return comm.bcast(result, root=0)


def nu_quantile(scores, weights, nu, m):
    """The smallest minimiser over rho of 1/m sum_i weights_i max(0, rho - scores_i) - nu rho.

    scores (n,) and weights (n,) (None: all 1) of the training rows, m their count. The largest
    score when the weights add up to less than nu m (the objective then falls without bound
    as rho grows).
    """
    scores = np.asarray(scores, dtype=np.float64)
    order = np.argsort(scores, kind="stable")
    reached = np.cumsum(np.ones(len(scores)) if weights is None else np.asarray(weights, np.float64)[order])
    # 1e-12: nu m that rounds just above an integer k must still give the k-th score
    k = int(np.searchsorted(reached, nu * m * (1.0 - 1e-12), side="left"))
    return float(scores[order[min(k, len(scores) - 1)]])


def training_rows(comm, table, scale, shard, n_features, weights, coef=None):
    """Collective: one prediction pass over every training row of ``shard`` under ``table``
    (a model's, or a grid fold's columns) with each column's ``scale``: (raw decision values
    <w, phi(x_i)> (n_columns, n_samples), labels (n_samples,), row weights (n_samples,) or
    None) on rank 0, (None, None, None) elsewhere. coef: as ``predict.decision_blocks``'s."""
    root = comm.Get_rank() == 0
    n = shard.n_samples
    f = np.empty((table.n_columns, n)) if root else None
    y = np.empty(n) if root else None
    w = np.empty(n) if root and weights is not None else None
    for b0, block, part in decision_blocks(comm, table, scale, shard, n_features, weights=weights, coef=coef):
        if root:
            b1 = b0 + len(block.y)
            f[:, b0:b1], y[b0:b1] = part, block.y
            if w is not None:
                w[b0:b1] = block.weight
    return f, y, w
