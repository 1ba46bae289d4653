"""BlockAveragedSVC: a linear SVM trained by any linear solver under block averaging.

Collective like PackSVC: every rank calls every method with the same arguments; data is
a ``Shard`` or an in-memory array / CSR matrix every rank holds whole. The averaged
model is the same on every rank; rank 0 writes it and reports.
"""
import importlib

import numpy as np
import scipy.sparse as sp
from mpi4py import MPI

from ..comm import run_collectively
from ..data.shard import Shard
from ..errors import PPackError
from ..estimator import find_classes
from ..model import LinearModelFile, read_linear_model, save_linear_model
from .averaging import MODES, AveragingReport, block_averaged
from .blocks import random_blocks
from .problem import loss_sum, margins

# name -> (module, how the iterative mode combines the blocks: "dual" (CoCoA rounds),
# "data-parallel" (sums every iteration) or "stochastic" (rows delivered to every rank))
SOLVERS = {"dcd": ("dcd", "dual"), "llsvm": ("llsvm", "dual"), "stream": ("stream", "dual"),
           "alm": ("alm", "data-parallel"), "pegasos": ("pegasos", "stochastic")}
LOSSES = ("l1", "l2")


def solver_function(name):
    """(solve, combination kind) of a solver name; raises PPackError naming the choices."""
    if name not in SOLVERS:
        raise PPackError(f"--solver: unknown solver {name!r}; expected one of packsvm, {', '.join(SOLVERS)}")
    module, kind = SOLVERS[name]
    return importlib.import_module(f"ppack.linear.{module}").solve, kind


class BlockAveragedSVC:
    """Linear SVM: ``solver`` on each rank's block, models averaged (see averaging.py).

    Parameters: solver, C, loss ("l1" hinge / "l2" squared hinge), p (alm: 1 <= p <= 2,
    overrides loss), bias, averaging ("iterative" or "oneshot"), rounds, tol (when rounds
    stop: relative duality gap, or relative change for primal solvers), features (COFFIN feature map, e.g. "poly2", "hash:20", "shifts:1"),
    solver_options (passed to the solver), shuffle (deal the rows out to the ranks at
    random before solving, so each block is a random sample even of a sorted file), seed.
    Fitted: ``w_``, ``b_``, ``classes_``, ``report_`` (objectives per round).
    """

    def __init__(self, solver="dcd", C=1.0, loss="l1", p=None, bias=True, averaging="iterative", rounds=100,
                 tol=1e-3, features=None, solver_options=None, shuffle=True, seed=0, comm=None):
        self.solver = solver
        self.C = C
        self.loss = loss
        self.p = p
        self.bias = bias
        self.averaging = averaging
        self.rounds = rounds
        self.tol = tol
        self.features = features
        self.solver_options = solver_options
        self.shuffle = shuffle
        self.seed = seed
        self.comm = comm

    def _comm(self):
        return MPI.COMM_WORLD if self.comm is None else self.comm

    def _check(self):
        solver_function(self.solver)
        if not (isinstance(self.C, (int, float)) and self.C > 0):
            raise PPackError(f"C: must be a number > 0, got {self.C!r}")
        if self.loss not in LOSSES:
            raise PPackError(f"--loss: expected one of {', '.join(LOSSES)}, got {self.loss!r}")
        if self.p is not None and not 1.0 <= self.p <= 2.0:
            raise PPackError(f"--p: must be in [1, 2], got {self.p}")
        if self.p is not None and self.solver != "alm":
            raise PPackError(f"--p: only the alm solver takes a loss power p, not {self.solver}")
        if self.averaging not in MODES:
            raise PPackError(f"--averaging: expected one of {', '.join(MODES)}, got {self.averaging!r}")
        if int(self.rounds) != self.rounds or self.rounds < 1:
            raise PPackError(f"--rounds: must be an integer >= 1, got {self.rounds}")
        self.feature_map_ = self._feature_map()

    def _feature_map(self):
        if self.features in (None, "identity"):
            return None
        from .features import FeatureMap

        try:
            return FeatureMap.parse(self.features)
        except ValueError as exc:
            raise PPackError(f"--features: {exc}") from None

    def _as_shard(self, X, y=None):
        if isinstance(X, Shard):
            return X
        comm = self._comm()
        X = sp.csr_matrix(X, dtype=np.float64) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
        return Shard.from_arrays(X, y, comm.Get_rank(), comm.Get_size())

    @staticmethod
    def _block(shard):
        X = shard.X
        if sp.issparse(X):
            X = sp.csr_matrix(X, dtype=np.float64)
            X.sort_indices()
            return X
        return np.ascontiguousarray(X, dtype=np.float64)

    def fit(self, X, y=None, on_round=None):
        comm = self._comm()
        run_collectively(comm, self._check)
        shard = self._as_shard(X, y)
        self.classes_ = find_classes(comm, shard)
        labels = np.where(shard.y == self.classes_[1], 1.0, -1.0)
        block = self._block(shard)
        if self.shuffle:
            block, labels = random_blocks(comm, block, labels, self.seed)
        solve, kind = solver_function(self.solver)
        options = dict(self.solver_options or {})
        if self.p is not None:
            options["p"] = self.p
        local_loss = None
        fmap = self.feature_map_
        if fmap is not None:
            from .features import predict_decision

            options["feature_map"] = fmap
            power = self._power()

            def local_loss(w, b):
                slack = np.maximum(0.0, 1.0 - labels * predict_decision(block, w, b, fmap))
                return float(np.sum(slack ** power))

        start = MPI.Wtime()
        if kind == "stochastic" and self.averaging == "iterative":
            self.w_, self.b_, self.report_ = run_collectively(comm, self._distributed_sgd, comm, shard, options,
                                                              on_round)
        else:
            self.w_, self.b_, self.report_ = run_collectively(
                comm, block_averaged, comm, solve, kind == "dual", block, labels, float(self.C), loss=self.loss,
                p=self.p, bias=self.bias, mode=self.averaging, rounds=int(self.rounds), tol=self.tol,
                solver_options=options, on_round=on_round, local_loss=local_loss,
                data_parallel=kind == "data-parallel")
        self.n_features_in_ = shard.n_features
        self.training_ = {"n_samples": shard.n_samples, "ranks": comm.Get_size(), "data": shard.path,
                          "seconds": comm.allreduce(MPI.Wtime() - start, op=MPI.MAX), **self.report_.as_dict()}
        return self

    def _distributed_sgd(self, comm, shard, options, on_round):
        """Pegasos over all ranks' rows at once (pegasos.solve_distributed): (w, b, report)."""
        from .pegasos import solve_distributed

        if self.feature_map_ is not None:
            raise PPackError("--features: the iterative mode of pegasos takes no feature map; "
                             "use --averaging oneshot")
        labels = np.where(shard.y == self.classes_[1], 1.0, -1.0)
        start = MPI.Wtime()
        w, b, steps = solve_distributed(comm, shard, labels, float(self.C), bias=self.bias, **options)
        report = AveragingReport("iterative", rounds=1, seconds=[comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)])
        local = loss_sum(self._block(shard), labels, w, b, 1.0)
        report.primal.append(0.5 * (float(w @ w) + b * b) + float(self.C) * comm.allreduce(local, op=MPI.SUM))
        if on_round is not None:
            on_round(report)
        return w, b, report

    def _power(self):
        return self.p if self.p is not None else (2.0 if self.loss == "l2" else 1.0)

    def decision_function_shard(self, shard):
        """Collective: ``(decisions, raw labels)`` of every row of the shard's data set, on rank 0."""
        comm = self._comm()
        if shard.n_features > self.n_features_in_:
            raise PPackError(f"{shard.path}: the data has {shard.n_features} features but the model "
                             f"was trained with {self.n_features_in_}; expected at most {self.n_features_in_}",
                             collective=True)
        block = self._block(shard)
        if shard.n_features < self.n_features_in_:
            block = (sp.csr_matrix((block.data, block.indices, block.indptr),
                                   shape=(block.shape[0], self.n_features_in_)) if sp.issparse(block)
                     else np.pad(block, ((0, 0), (0, self.n_features_in_ - block.shape[1]))))
        if self.feature_map_ is None:
            local = margins(block, np.ones(block.shape[0]), self.w_, self.b_)
        else:
            from .features import predict_decision

            local = predict_decision(block, self.w_, self.b_, self.feature_map_)
        parts = comm.gather((local, shard.y), root=0)
        if comm.Get_rank() != 0:
            return None, None
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def decision_function(self, X):
        decisions, _ = self.decision_function_shard(self._as_shard(X))
        return self._comm().bcast(decisions, root=0)

    def labels_of(self, decisions):
        return np.where(decisions >= 0, self.classes_[1], self.classes_[0])

    def predict(self, X):
        return self.labels_of(self.decision_function(X))

    def score(self, X, y):
        return float(np.mean(self.predict(X) == np.asarray(y)))

    def save(self, path):
        """Collective: rank 0 writes the model file atomically."""
        comm = self._comm()
        model = LinearModelFile(self.w_, self.b_, self.classes_, self.solver, float(self.C), self.loss,
                                self._power(), bool(self.bias), self.features or "identity",
                                self.n_features_in_, self.training_)
        if comm.Get_rank() == 0:
            run_collectively(comm, save_linear_model, path, model)
        else:
            run_collectively(comm, lambda: None)

    @classmethod
    def load(cls, path, comm=None):
        comm = MPI.COMM_WORLD if comm is None else comm
        m = run_collectively(comm, read_linear_model, path)
        model = cls(solver=m.solver, C=m.C, loss=m.loss, p=m.p if m.solver == "alm" else None, bias=m.bias,
                    features=None if m.features == "identity" else m.features, comm=comm)
        model.feature_map_ = model._feature_map()
        model.w_, model.b_, model.classes_ = m.w, m.b, m.classes
        model.n_features_in_, model.training_ = m.n_features, m.training
        return model
