"""BlockAveragedSVC: a linear SVM trained by any linear solver under block averaging.

Collective like PackSVC: every rank calls every method with the same arguments; data is
a ``Shard`` or an in-memory array / CSR matrix every rank holds whole. The averaged
model is the same on every rank; rank 0 writes it and reports.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable

import numpy as np
import scipy.sparse as sp
from mpi4py import MPI

from ..base import BaseSVC
from ..data.hdf5 import as_float
from ..errors import PPackError, given
from ..model.linear import LinearModelFile, read_linear_model, save_linear_model
from ..mpi.collectives import Collectives
from ..mpi.comm import on_rank0, run_collectively
from ..registry import LINEAR_PARAMS, LINEAR_SOLVER_ENTRIES, VERBOSE, check_solver_options, register_model_type
from . import alm, dcd, llsvm, pegasos, stream
from .averaging import AveragingReport, block_averaged, classes_dict
from .blocks import random_blocks
from .features import FeatureMap, predict_decision
from .pegasos import solve_distributed
from .problem import loss_sum, margins

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..data.shard import Shard

PREDICT_ROWS = 8192  # rows converted to float64 at a time when predicting
_D = {name: param.default for name, param in LINEAR_PARAMS.items()}


# each linear solver's ``solve`` (one block), by its name in ``registry.LINEAR_SOLVER_TABLE``
SOLVE = {"dcd": dcd.solve, "llsvm": llsvm.solve, "stream": stream.solve, "alm": alm.solve, "pegasos": pegasos.solve}


class BlockAveragedSVC(BaseSVC):
    """Linear SVM: ``solver`` on each rank's block, models averaged (see averaging.py).

    Parameters (checked against ``registry.LINEAR_PARAMS``, as the CLI's): solver, C,
    loss ("l1" hinge / "l2" squared hinge), p (alm: 1 <= p <= 2, overrides loss), bias,
    averaging ("iterative" or "oneshot"), rounds, rounds_tol (when rounds stop: relative duality
    gap, or relative change for primal solvers), features (COFFIN feature map, e.g.
    "poly2", "hash:20", "shifts:1"), solver_options (checked against
    the solver's ``registry.LINEAR_SOLVER_TABLE`` entry, passed to the solver), shuffle (deal the rows out to the
    ranks at random before solving, so each block is a random sample even of a sorted
    file), seed, class_weight (None, "balanced" or {label: weight}: weights on each class's
    loss, times the rows' own weights: a Shard's ``w`` or fit's ``sample_weight``), comm,
    verbose (1 or more: rank 0 tells each round's objective and a summary on stderr).

    K > 2 classes train one-vs-rest: the rows are dealt out once, then every class k solves
    "k against the rest" (+1 for its rows, -1 for the others) on the same blocks, with the
    same row weights, averaged per class. Each class's solver starts its random stream
    afresh from the seed and stops on its own gap, so class k's weights are those of the
    binary run "k against the rest" with the same seed, whatever the other classes.
    Fitted: ``classes_``; ``w_`` (width,) and ``b_`` (a float) for two classes, ``w_``
    (width, K) and ``b_`` (K,) for K > 2 (width: n_features or the feature map's output
    size); ``report_`` (objectives per round: one AveragingReport, or a list of K, one per
    class in ``classes_`` order).
    """

    PARAMS = LINEAR_PARAMS
    MULTICLASS = True

    def __init__(
        self,
        solver: str = _D["solver"],
        C: float = _D["C"],
        loss: str = _D["loss"],
        p: float | None = _D["p"],
        bias: bool = _D["bias"],
        averaging: str = _D["averaging"],
        rounds: int = _D["rounds"],
        rounds_tol: float = _D["rounds_tol"],
        features: str | None = _D["features"],
        solver_options: dict | None = None,
        shuffle: bool = _D["shuffle"],
        seed: int = _D["seed"],
        class_weight: dict | str | None = _D["class_weight"],
        random_state: int | None = None,
        comm: MPI.Comm | None = None,
        verbose: int = VERBOSE.default,
    ) -> None:
        self.solver = solver
        self.class_weight = class_weight
        self.C = C
        self.loss = loss
        self.p = p
        self.bias = bias
        self.averaging = averaging
        self.rounds = rounds
        self.rounds_tol = rounds_tol
        self.features = features
        self.solver_options = solver_options
        self.shuffle = shuffle
        self.seed = seed
        self.random_state = random_state
        self.comm = comm
        self.verbose = verbose

    def validate_params(self):
        """The registry's checks, plus what depends on the solver: p only for alm, the
        feature map's syntax, and the solver's own options."""
        values = super().validate_params()
        if values["p"] is not None and values["solver"] != "alm":
            raise PPackError(f"p: only the alm solver takes a loss power p, not {values['solver']}")
        if values["loss"] != "l1" and values["solver"] == "pegasos":
            raise PPackError(f"loss: pegasos optimises the hinge loss only; must be 'l1', got {values['loss']!r}")
        self.feature_map_ = self._feature_map()  # every linear solver reads rows through one
        self.options_ = check_solver_options(values["solver"], dict(self.solver_options or {}))
        return values

    def _feature_map(self):
        if self.features in (None, "identity"):
            return None
        try:
            return FeatureMap.parse(self.features)
        except ValueError as exc:
            raise PPackError(f"features: {exc}") from None

    @staticmethod
    def _block(shard, start=0, stop=None):
        """Local rows [start, stop) as float64 feature values (the linear solvers' type)."""
        X = as_float(shard.X[start:stop], np.dtype(np.float64), shard.value_scale)
        if sp.issparse(X):
            X.sort_indices()
        return X

    def fit(self, X: ArrayLike | Shard, y: ArrayLike | None = None, sample_weight: ArrayLike | None = None,
            on_round: Callable | None = None) -> BlockAveragedSVC:
        """Collective: train on ``X`` with labels ``y``.

        Parameters
        ----------
        X : Shard, array-like or scipy.sparse matrix of shape (n_samples, n_features)
            This rank's shard of a data file (``load_shard``), or rows every rank holds whole.
        y : array-like of shape (n_samples,) or None, default=None
            The labels of in-memory rows; a Shard carries its own.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Weights on the rows' loss, with in-memory data (a Shard carries its own ``w``).
        on_round : callable or None, default=None
            ``on_round(report)`` runs on every rank after each averaging round (for K > 2
            classes, ``report.label`` names the class being trained against the rest).

        Returns
        -------
        BlockAveragedSVC
            The fitted estimator itself.

        Raises
        ------
        PPackError
            On every rank, for a parameter out of its range or bad data.
        """
        comm = self._comm()
        values = run_collectively(comm, self.validate_params)
        console = self._console()
        if on_round is None and console.on:
            on_round = lambda report: console(report.describe())  # noqa: E731
        shard = self._as_shard(X, y, sample_weight, fitting=True)
        labels = self._fit_classes(shard)
        weights = self._row_weights(shard, values["class_weight"])
        kind = LINEAR_SOLVER_ENTRIES[self.solver].combination
        distributed_sgd = kind == "stochastic" and self.averaging == "iterative"
        block, block_labels, block_weights = self._block(shard), labels, weights
        if self.shuffle and not distributed_sgd:  # the distributed mode samples from every rank's rows
            block, block_labels, *moved = random_blocks(comm, block, labels, self.seed_, weights)
            block_weights = moved[0] if moved else None
        options = dict(self.options_)
        if self.p is not None:
            options["p"] = self.p
        start = MPI.Wtime()
        K = len(self.classes_)
        if K == 2:
            self.w_, self.b_, self.report_ = self._fit_binary(comm, kind, shard, block, block_labels, block_weights,
                                                              options, on_round)
        else:  # one-vs-rest: the blocks are shared, each class solves its own problem on them
            columns = []
            for k in range(K):
                def tagged(report, label=self.classes_[k]):
                    report.label = label
                    on_round(report)
                columns.append(self._fit_binary(comm, kind, shard, block, np.where(block_labels == k, 1.0, -1.0),
                                                block_weights, options, None if on_round is None else tagged))
            self.w_ = np.column_stack([w for w, _, _ in columns])
            self.b_ = np.array([b for _, b, _ in columns])
            self.report_ = [report for _, _, report in columns]
        self.n_features_in_ = shard.n_features
        summary = self.report_.as_dict() if K == 2 else classes_dict(self.report_, self.classes_)
        self.training_ = {"n_samples": shard.n_samples, "ranks": comm.Get_size(), "data": shard.path,
                          "seconds": comm.allreduce(MPI.Wtime() - start, op=MPI.MAX), **summary}
        rounds = summary["rounds"]
        console(f"trained in {self.training_['seconds']:.2f} s: {rounds} averaging round{'s' * (rounds != 1)}, "
                f"primal objective {summary['primal_objective']:.6g}")
        reports = [self.report_] if K == 2 else self.report_
        self.n_iter_ = max(report.rounds for report in reports)
        self.converged_ = bool(summary["converged"])
        self.training_["advice"] = None if self.converged_ else self._advice()
        self._warn(comm, self.convergence_warning, self.training_["advice"])
        return self

    def _advice(self):
        """What to change when the run stopped on its iteration limit (one line)."""
        if self.averaging == "iterative" and LINEAR_SOLVER_ENTRIES[self.solver].combination == "dual":
            return (f"the averaging rounds stopped at their limit ({given('rounds', int(self.rounds))}) before the "
                    f"duality gap fell to {given('rounds_tol', self.rounds_tol)} of the objective: give more rounds "
                    "or a larger tolerance, or scale the features")
        return ("the solver stopped at its iteration limit before its tolerance: raise max_epochs (a solver option) "
                "or the rounds, or scale the features")

    def _fit_binary(self, comm, kind, shard, block, labels, weights, options, on_round):
        """Collective: ``(w, b, report)`` of one two-class problem. kind: the solver's
        combination (``registry.LINEAR_SOLVER_ENTRIES``); block, labels (in {-1, +1}) and
        weights (or None): this rank's rows, dealt out unless the distributed SGD runs (it
        samples the shard's own rows)."""
        if kind == "stochastic" and self.averaging == "iterative":
            return run_collectively(comm, self._distributed_sgd, comm, shard, block, labels, options, on_round,
                                    weights)
        return run_collectively(
            comm, block_averaged, comm, SOLVE[self.solver], kind == "dual", block, labels, float(self.C),
            loss=self.loss, p=self.p, bias=self.bias, mode=self.averaging, rounds=int(self.rounds), tol=self.rounds_tol,
            solver_options=options, on_round=on_round, feature_map=self.feature_map_,
            data_parallel=kind == "data-parallel", weights=weights)

    def _distributed_sgd(self, comm, shard, block, labels, options, on_round, weights=None):
        """Pegasos over all ranks' rows at once (pegasos.solve_distributed): (w, b, report).

        block, labels, weights: this rank's rows (as ``_block``), their labels in {-1, +1}
        and their loss weights (or None)."""
        start = MPI.Wtime()
        extra = {} if weights is None else {"weights": weights}
        w, b, steps = solve_distributed(comm, shard, labels, float(self.C), bias=self.bias,
                                        feature_map=self.feature_map_, **options, **extra)
        # a fixed number of steps, no tolerance to miss: not judged
        report = AveragingReport("iterative", rounds=1, seconds=[comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)],
                                 converged=True)
        local = loss_sum(block, labels, w, b, 1.0, self.feature_map_, weights)
        report.primal.append(0.5 * (float(w @ w) + b * b) + float(self.C) * comm.allreduce(local, op=MPI.SUM))
        if on_round is not None:
            on_round(report)
        return w, b, report

    def summary(self):
        return f"a linear {self.solver} model"

    @property
    def power(self):
        """The loss power p: 1 (hinge), 2 (squared hinge) or alm's p."""
        return self.p if self.p is not None else (2.0 if self.loss == "l2" else 1.0)

    def _decisions(self, shard):
        """Decision values of every row of the shard's data set, (n,) or (n, K) for K > 2
        classes, and its raw labels, on rank 0."""
        columns = 1 if np.ndim(self.w_) == 1 else self.w_.shape[1]
        local = np.empty((shard.stop - shard.start, columns))
        for start in range(0, len(local), PREDICT_ROWS):  # tile by tile: no float64 copy of the shard
            block = self._block(shard, start, start + PREDICT_ROWS)
            if shard.n_features < self.n_features_in_:
                block = (sp.csr_matrix((block.data, block.indices, block.indptr),
                                       shape=(block.shape[0], self.n_features_in_)) if sp.issparse(block)
                         else np.pad(block, ((0, 0), (0, self.n_features_in_ - block.shape[1]))))
            local[start:start + PREDICT_ROWS] = self._block_decisions(block)
        collectives = Collectives(self._comm())
        decisions = collectives.gather_to_root(local.ravel())
        if decisions is not None:
            decisions = decisions.reshape(-1, columns) if columns > 1 else decisions
        return decisions, collectives.gather_to_root(shard.y)

    def _block_decisions(self, block):
        """w . phi(x) + b of a block's rows, (rows, 1) or (rows, K), column by column."""
        W = self.w_.reshape(len(self.w_), -1)
        B = np.atleast_1d(self.b_)
        out = np.empty((block.shape[0], W.shape[1]))
        for k in range(W.shape[1]):
            if self.feature_map_ is None:
                out[:, k] = margins(block, np.ones(block.shape[0]), W[:, k], B[k])
            else:
                out[:, k] = predict_decision(block, W[:, k], B[k], self.feature_map_)
        return out

    def save(self, path: str | os.PathLike) -> None:
        """Collective: rank 0 writes the model file; it appears whole or not at all.

        Parameters
        ----------
        path : str or os.PathLike
            The model file to write (HDF5, ``.h5``); ``load_model`` reads it back.
        """
        model = LinearModelFile(self.w_, self.b_, self.classes_, self.solver, float(self.C), self.loss,
                                self.power, bool(self.bias), self.features or "identity",
                                self.n_features_in_, self.training_)
        on_rank0(self._comm(), save_linear_model, path, model)

    @classmethod
    def load(cls, path: str | os.PathLike, comm: MPI.Comm | None = None) -> BlockAveragedSVC:
        """Collective: a fitted estimator from a linear model file.

        Parameters
        ----------
        path : str or os.PathLike
            A linear model file written by ``save``.
        comm : mpi4py.MPI.Comm or None, default=None
            The ranks that load it (each holds the whole model); None is ``MPI.COMM_WORLD``.

        Returns
        -------
        BlockAveragedSVC
            The fitted estimator.
        """
        comm = MPI.COMM_WORLD if comm is None else comm
        m = run_collectively(comm, read_linear_model, path)
        model = cls(solver=m.solver, C=m.C, loss=m.loss, p=m.p if m.solver == "alm" else None, bias=m.bias,
                    features=None if m.features == "identity" else m.features, comm=comm)
        model.feature_map_ = model._feature_map()
        model.w_, model.b_, model.classes_ = m.w, m.b, m.classes
        model.n_features_in_, model.training_ = m.n_features, m.training
        return model


register_model_type("linear", BlockAveragedSVC)
