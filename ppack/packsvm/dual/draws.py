"""The dual's shared draws: each epoch visits the rows still active in some column, in a fresh
random order, and its packs end at the epoch's end (shrinking decides the next epoch's rows
from this epoch's steps, so no pack spans two epochs and no pack holds a row twice).

The order is ``EpochSampler``'s keyed permutation of epoch e, filtered by the active sets,
which every rank holds alike (``active``: (n_samples, K) uint8, replicated), so every rank
draws the same rows without talking.
"""
import numpy as np

from ...data.sampler import EpochSampler, held_out


class DualDraws:
    """Packs of at most r row ids for the dual, epoch by epoch (``next_pack``).

    n_samples: the data set's rows; K: columns; holdout: (fraction, seed) of rows never drawn
    (validation or calibration), or None. ``active`` (n_samples, K) uint8: the rows' active
    sets, which the steps clear as rows shrink (``coordinate.coordinate_steps``) and
    ``restore`` sets again."""

    def __init__(self, n_samples, n_columns, seed, holdout=None):
        self.n_samples = int(n_samples)
        self.order = EpochSampler(n_samples, seed)
        self.eligible = np.ones(self.n_samples, dtype=bool)
        if holdout is not None:
            self.eligible &= ~held_out(np.arange(self.n_samples, dtype=np.int64), *holdout)
        if not self.eligible.any():
            raise ValueError(f"every one of the {self.n_samples} rows is held out: nothing to train on")
        self.active = np.zeros((self.n_samples, int(n_columns)), dtype=np.uint8)
        self.active[self.eligible] = 1
        self.epoch = 0  # epochs begun
        self._ids = np.empty(0, dtype=np.int64)
        self._pos = 0

    def begin_epoch(self):
        """Start the next epoch: its order over the rows active in some column. Returns their number."""
        ids = self.order.permuted(np.arange(self.n_samples, dtype=np.int64), self.epoch)
        self._ids = ids[self.active[ids].any(axis=1)]
        self._pos = 0
        self.epoch += 1
        return len(self._ids)

    def next_pack(self, r):
        """The epoch's next at most r ids (int64), or None at its end."""
        if self._pos >= len(self._ids):
            return None
        ids = self._ids[self._pos:self._pos + r]
        self._pos += len(ids)
        return ids

    def state(self):
        """(dict, ids): the position a checkpoint keeps (epochs begun, place in this epoch, the
        order's seed) and this epoch's order (int64); the active sets are ``active`` itself."""
        return {"kind": "dual_draws", "epoch": self.epoch, "pos": self._pos, "n_samples": self.n_samples,
                "seed": self.order.seed}, self._ids

    def resume(self, state, ids, active):
        """Stand where ``state`` and ``ids`` (``state()``'s) and ``active`` (a checkpoint's active
        sets) say; ValueError where they are another run's."""
        if state.get("kind") != "dual_draws" or state["n_samples"] != self.n_samples or \
                state["seed"] != self.order.seed or active.shape != self.active.shape:
            raise ValueError(f"the draws of another run ({state.get('kind')}, {state.get('n_samples')} rows, "
                             f"active sets {active.shape}); this run has {self.n_samples} rows and "
                             f"{self.active.shape[1]} columns")
        self.epoch, self._pos = int(state["epoch"]), int(state["pos"])
        self._ids = np.asarray(ids, dtype=np.int64)
        self.active[:] = active

    def restore(self, c):
        """Every eligible row back into column c's active set (LIBLINEAR's check before it stops)."""
        self.active[self.eligible, c] = 1

    def freeze(self, c):
        """Column c has converged: none of its rows is drawn for it again."""
        self.active[:, c] = 0
