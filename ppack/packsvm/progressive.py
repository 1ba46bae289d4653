"""The progressive estimate of a grid pass's cross-validated scores: each held-out row scored
by the prediction its columns' replay already tested, no second pass.

Every sampled row's decision values are computed before the row's step: the pack's summed
partial predictions plus the replay's in-pack terms, exactly what the replay compares with
the margin (``replay.replay_all``'s ``tested``). A column whose fold holds the row out
(weight 0) never trained on it, so that value is a genuine held-out prediction by the column
as it stood then. The row's **last** sampling is kept: the latest model, the least biased
(an earlier one is replaced, not averaged in). Still, the estimate judges each row by the SGD
iterate w_t at its last draw, not by the final model (nor by the averaged iterate, which the
model returns with ``average=True``), so rows drawn early are judged by an early model: the
estimate runs lower than the pass's, most for the grid points that converge slowest (large
C: small sigma, large steps), so it favours small C. Rows never sampled (T < n) have no
estimate and are left out of the scores.

Every rank replays the whole pack, so each rank records the rows of its own shard, and the
records are gathered once at the end (``collect``): nothing is added to the packs' collectives.
"""
import numpy as np

from ..mpi.collectives import Collectives


class ProgressiveRecord:
    """This rank's record: ``held`` (shard rows, G, K) the decision values of grid point g's
    K class columns that hold the row's fold out, at the row's last sampling (NaN: never
    sampled, or in no fold). ``held_columns`` (F, G * K): the columns that hold fold f out,
    in (g, k) order; ``folds`` (n_samples,): each global row's fold (-1: none);
    ``start``, ``stop``: the shard's rows."""

    def __init__(self, held_columns, folds, start, stop):
        self.held_columns = np.asarray(held_columns, dtype=np.int64)
        self.folds = np.asarray(folds, dtype=np.int64)
        self.start, self.stop = int(start), int(stop)
        self.held = np.full((self.stop - self.start, self.held_columns.shape[1]), np.nan)

    def record(self, ids, tested, rho):
        """After a pack's replay: its global row ids (r,), the predictions it tested (Q, r) and
        the columns' offsets rho (Q,) (decision = prediction - rho). A row drawn twice in the
        pack keeps its later test."""
        mine = np.flatnonzero((ids >= self.start) & (ids < self.stop))
        if not len(mine):
            return
        rows = ids[mine]
        _, last = np.unique(rows[::-1], return_index=True)  # each row's last place in the pack
        mine = mine[len(mine) - 1 - last]
        rows = ids[mine]
        folds = self.folds[rows]
        keep = folds >= 0
        mine, rows, folds = mine[keep], rows[keep], folds[keep]
        columns = self.held_columns[folds]  # (rows, G K)
        self.held[rows - self.start] = tested[columns, mine[:, None]] - rho[columns]

    def collect(self, comm, labels):
        """Collective: (every row's record (n_samples, G K), every row's raw label (n_samples,)) on
        every rank; ``labels``: this shard's raw labels."""
        collectives = Collectives(comm)
        n, width = len(self.folds), self.held.shape[1]
        ids = collectives.gather_to_root(np.arange(self.start, self.stop, dtype=np.int64))
        values = collectives.gather_to_root(self.held.ravel())
        raw = collectives.gather_to_root(np.asarray(labels, dtype=np.float64))
        held, all_labels = np.empty((n, width)), np.empty(n)
        if comm.Get_rank() == 0:
            held[ids] = values.reshape(-1, width)
            all_labels[ids] = raw
        return collectives.broadcast(held), collectives.broadcast(all_labels)
