"""Early stopping on held-out rows: ``--validation FRACTION`` and ``--patience``.

A seeded hash picks the held-out rows (``data.sampler.held_out``): the sampler never draws
them, and every ``every`` packs the model's accuracy on them is measured between packs (a
prediction pass over them: per block of rows one delivery and one sum to rank 0, then one
broadcast of the accuracy; counted in ``collectives``, none inside the pack's two
Allreduce calls). The score is the model's ``validation_score``: the accuracy for C-SVC, R^2
for epsilon-SVR (called "accuracy" below). Training stops when it has not improved for ``patience``
evaluations in a row; the model returned is the last one (the averaged iterate, with
``average=True``, is the one measured).
"""

import numpy as np

from ..data.sampler import held_out
from .averaging import averaged_coefficients, averaged_offset
from ..mpi.collectives import Collectives
from .predict import distributed_decisions


class Validation:
    """The held-out rows of ``shard`` and the accuracy history; call it with (table, state)."""

    def __init__(self, comm, model, shard, fraction, seed, every, patience):
        self.comm, self.model, self.shard = comm, model, shard
        self.every, self.patience = int(every), int(patience)
        self.holdout = (float(fraction), int(seed))
        step = 1 << 20  # ids tested a million at a time
        ids = [np.flatnonzero(held_out(np.arange(a, min(a + step, shard.n_samples)), *self.holdout)) + a
               for a in range(0, shard.n_samples, step)]
        self.ids = np.concatenate(ids).astype(np.int64)
        self.history = []  # (iteration, accuracy)
        self.best, self.since_best = -np.inf, 0  # the first evaluation always improves
        self.collectives = Collectives(comm)  # counts the calls the evaluations make
        self.stopped = False

    def __call__(self, table, state):
        """Collective: measure the accuracy now; True when training should stop."""
        model = self.model
        scale, coef, rho = state.scale, None, state.rho
        if table.averaged:  # the model being trained is the averaged iterate: measure that one
            scale, coef = np.ones_like(scale), averaged_coefficients(table, state)
            rho = averaged_offset(state, model.loss_)
        decisions, raw = distributed_decisions(self.comm, table, scale, self.shard, self.shard.n_features,
                                               ids=self.ids, collectives=self.collectives, coef=coef)
        accuracy = np.zeros(1)
        if self.comm.Get_rank() == 0:
            if model.SVM_TYPE != "c_svc":
                decisions = decisions - rho[0]
            accuracy[0] = model.validation_score(decisions, raw)
        accuracy = float(self.collectives.broadcast(accuracy)[0])
        self.history.append((int(state.iteration), accuracy))
        if accuracy > self.best:
            self.best, self.since_best = accuracy, 0
        else:
            self.since_best += 1
        self.stopped = self.since_best >= self.patience
        return self.stopped

    def report(self):
        return {"fraction": self.holdout[0], "rows": len(self.ids), "every_packs": self.every,
                "patience": self.patience, f"best_{self.model.VALIDATION_METRIC}": self.best, "stopped_early": self.stopped,
                "history": self.history, "collectives": sum(self.collectives.calls.values())}

