"""Early stopping on held-out rows: ``--validation FRACTION`` and ``--patience``.

A seeded hash picks the held-out rows (``data.sampler.held_out``): the sampler never draws
them, and every ``every`` packs the model's accuracy on them is measured between packs (a
prediction pass over them: per block of rows one delivery and one sum to rank 0, then one
broadcast of the accuracy; counted in ``collectives``, none inside the pack's two
Allreduce calls). The score is the model's ``validation_score``: the accuracy for C-SVC, R^2
for epsilon-SVR (called "accuracy" below). Training stops when it has not improved for ``patience``
evaluations in a row; the model returned is the last one (the averaged iterate, with
``average=True``, is the one measured).

A grid pass (``grid.py``) measures each group of columns (a grid point and fold's K class
columns) as its separate fit measures its model, from one prediction pass over the held-out
rows with every column, and stops each group on its own patience (``ColumnValidation``).
The accuracy histories and patience counts are in the checkpoints (``as_dict``, ``restore``),
so a resumed run stops where the uninterrupted one does.
"""

import numpy as np

from ..data.sampler import held_out
from .averaging import averaged_coefficients, averaged_offset
from ..mpi.collectives import Collectives
from .predict import distributed_decisions


class Patience:
    """One model's accuracy ``history`` ((iteration, accuracy) pairs), its ``best`` and the
    evaluations ``since_best``; ``stopped`` once that reaches ``patience``."""

    def __init__(self, patience):
        self.patience = int(patience)
        self.history = []
        self.best, self.since_best = -np.inf, 0  # the first evaluation always improves
        self.stopped = False

    def add(self, iteration, accuracy):
        """Record an evaluation; True once the accuracy has not improved for ``patience`` in a row."""
        self.history.append((int(iteration), float(accuracy)))
        if accuracy > self.best:
            self.best, self.since_best = accuracy, 0
        else:
            self.since_best += 1
        self.stopped = self.since_best >= self.patience
        return self.stopped

    def as_dict(self):
        """What a checkpoint keeps (JSON)."""
        return {"history": self.history, "best": None if self.best == -np.inf else self.best,
                "since_best": self.since_best}

    def restore(self, saved):
        """Continue from ``as_dict``'s ``saved``."""
        self.history = [(int(i), float(a)) for i, a in saved["history"]]
        self.best = -np.inf if saved["best"] is None else float(saved["best"])
        self.since_best = int(saved["since_best"])
        self.stopped = self.since_best >= self.patience


class Validation:
    """The held-out rows of ``shard`` and the accuracy history; call it with (table, state).
    ``groups``: the columns each ``Patience`` track measures together (int arrays), or (None,):
    one track, every column (a run's model)."""

    def __init__(self, comm, model, shard, fraction, seed, every, patience, groups=(None,)):
        self.comm, self.model, self.shard = comm, model, shard
        self.every, self.patience = int(every), int(patience)
        self.holdout = (float(fraction), int(seed))
        step = 1 << 20  # ids tested a million at a time
        ids = [np.flatnonzero(held_out(np.arange(a, min(a + step, shard.n_samples)), *self.holdout)) + a
               for a in range(0, shard.n_samples, step)]
        self.ids = np.concatenate(ids).astype(np.int64)
        self.groups = list(groups)
        self.tracks = [Patience(patience) for _ in self.groups]
        self.collectives = Collectives(comm)  # counts the calls the evaluations make

    @property
    def track(self):
        return self.tracks[0]

    def as_dict(self):
        """What a checkpoint keeps (JSON): each track's history and patience count."""
        return {"tracks": [track.as_dict() for track in self.tracks]}

    def restore(self, saved):
        """Continue from ``as_dict``'s ``saved``; ValueError when it has another number of tracks."""
        if len(saved["tracks"]) != len(self.tracks):
            raise ValueError(f"{len(saved['tracks'])} validation tracks, this run has {len(self.tracks)}")
        for track, kept in zip(self.tracks, saved["tracks"]):
            track.restore(kept)

    def __call__(self, table, state):
        """Collective: measure the running tracks' accuracy now; True when training should stop."""
        model = self.model
        running = self._running()
        scale, coef, rho = state.scale, None, state.rho
        if table.averaged:  # the model being trained is the averaged iterate: measure that one
            scale, coef = np.ones_like(scale), averaged_coefficients(table, state)
            rho = averaged_offset(state, model.loss_)
        decisions, raw = distributed_decisions(self.comm, table, scale, self.shard, self.shard.n_features,
                                               ids=self.ids, collectives=self.collectives, coef=coef)
        accuracy = np.zeros(len(self.tracks))
        if self.comm.Get_rank() == 0:
            for i in running:
                columns = self.groups[i]
                group = decisions if columns is None else decisions[:, columns]
                if model.SVM_TYPE != "c_svc":
                    group = group - rho[0 if columns is None else columns]
                accuracy[i] = model.validation_score(group[:, 0] if group.ndim == 2 and group.shape[1] == 1
                                                     else group, raw)
        self.collectives.broadcast(accuracy)
        return self._after([i for i in running if self.tracks[i].add(state.iteration, accuracy[i])], state)

    def _running(self):
        """The tracks measured now: all of them."""
        return range(len(self.tracks))

    def _after(self, stopped, state):
        """Whether training stops, ``stopped`` the tracks whose patience ran out now: any."""
        return bool(stopped)

    def report(self, track=None):
        """The run's validation (JSON): ``track``'s (a ``Patience``; None: the run's own)."""
        track = self.track if track is None else track
        return {"fraction": self.holdout[0], "rows": len(self.ids), "every_packs": self.every,
                "patience": self.patience, f"best_{self.model.VALIDATION_METRIC}": track.best,
                "stopped_early": track.stopped, "history": track.history,
                "collectives": sum(self.collectives.calls.values())}


class ColumnValidation(Validation):
    """A grid pass's validation: each group of ``stops`` (a ``column_stops.ColumnStops``) that
    is still ``active`` ((Q,) bool, the run's ``Columns.active``) measured as its separate fit
    measures its model, and stopped there (``ColumnStops.stop``) once its accuracy has not
    improved for ``patience`` evaluations (``tracks``, one ``Patience`` per group). Called with
    (table, state) as ``Validation``: True when every column has stopped."""

    def __init__(self, comm, model, shard, fraction, seed, every, patience, stops, active):
        super().__init__(comm, model, shard, fraction, seed, every, patience, groups=stops.members)
        self.stops, self.active = stops, active

    def _running(self):
        """The groups not stopped yet (by tol or by their patience)."""
        return [i for i, columns in enumerate(self.groups) if self.active[columns[0]]]

    def _after(self, stopped, state):
        """Stop the ``stopped`` groups' columns; True when every column has stopped."""
        for i in stopped:
            self.stops.stop(self.groups[i], self.active, state.iteration, state.avg_weight)
        return not np.any(self.active)

