"""PackSVC: the scikit-learn-style face of the P-packSVM trainer.

Every method is collective over ``comm``: all ranks call it with the same arguments.
Data is either a ``Shard`` (each rank holds its rows; see ``data.shard.load_shard``) or
an in-memory array / CSR matrix that every rank holds whole (each then keeps its slice).
"""
import numpy as np
import scipy.sparse as sp
from mpi4py import MPI

from .comm import run_collectively
from .data.shard import Shard
from .errors import PPackError
from .kernels.spec import KernelSpec
from .model import load_model_shard, save_model
from .predict import distributed_decisions
from .solver.checkpoint import checkpoint_exists, read_checkpoint
from .solver.packed import Checkpointing, PackedSolver
from .table import DEFAULT_WORK_BYTES

DTYPES = {"float32": np.float32, "float64": np.float64}


class PackSVC:
    """Binary kernel SVM trained by P-packSVM on ``comm``'s ranks.

    Parameters mirror the CLI: kernel, gamma (None: 1 / n_features), degree, coef0,
    C or sigma (tied by C = 1 / (n_samples * sigma)), epochs or iterations (T), pack (r),
    seed, dtype of stored features, bias (adds a regularised bias term: K + 1), tol and
    tol_window (stop early when the windowed mean hinge loss is stable; paper section V).
    Fitted attributes: ``classes_`` (negative, positive label), ``table_`` (this rank's
    support vectors), ``scale_``, ``sigma_``, ``C_``, ``n_features_in_``, ``stats_``.
    """

    def __init__(self, kernel="rbf", gamma=None, degree=3, coef0=0.0, C=None, sigma=None,
                 epochs=1.0, iterations=None, pack=100, seed=0, dtype="float64", bias=False,
                 tol=None, tol_window=1000, comm=None, work_bytes=DEFAULT_WORK_BYTES, progress=None):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.C = C
        self.sigma = sigma
        self.epochs = epochs
        self.iterations = iterations
        self.pack = pack
        self.seed = seed
        self.dtype = dtype
        self.bias = bias
        self.tol = tol
        self.tol_window = tol_window
        self.comm = comm
        self.work_bytes = work_bytes
        self.progress = progress

    # -- validation ------------------------------------------------------------------
    def _check_params(self):
        def positive(name, value, kind=float):
            if value is not None and not (isinstance(value, (int, float, np.number)) and value > 0
                                          and np.isfinite(value) and kind(value) == value):
                what = "an integer >= 1" if kind is int else "a finite number > 0"
                raise PPackError(f"{name}: must be {what}, got {value!r}")

        if self.C is not None and self.sigma is not None:
            raise PPackError("C and sigma: give one or the other (C = 1 / (n_samples * sigma)), not both")
        positive("C", self.C)
        positive("sigma", self.sigma)
        positive("gamma", self.gamma)
        positive("epochs", self.epochs)
        positive("iterations", self.iterations, int)
        positive("pack", self.pack, int)
        positive("tol", self.tol)
        positive("tol_window", self.tol_window, int)
        if self.dtype not in DTYPES:
            raise PPackError(f"dtype: expected one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise PPackError(f"seed: must be an integer >= 0, got {self.seed!r}")

    def _validated_shard(self, X, y):
        """Check the parameters and build the kernel spec and the shard (raises the same on every rank)."""
        self._check_params()
        shard = self._as_shard(X, y)
        gamma = 1.0 / shard.n_features if self.gamma is None else float(self.gamma)
        self.spec_ = KernelSpec(self.kernel, gamma, int(self.degree), float(self.coef0),
                                1.0 if self.bias else 0.0)
        return shard

    def _comm(self):
        return MPI.COMM_WORLD if self.comm is None else self.comm

    def _as_shard(self, X, y=None):
        if isinstance(X, Shard):
            return X
        comm = self._comm()
        if sp.issparse(X):
            X = sp.csr_matrix(X, dtype=DTYPES[self.dtype])
        else:
            X = np.asarray(X, dtype=DTYPES[self.dtype])
            if X.ndim != 2:
                raise PPackError(f"X: expected a 2-D array (n_samples, n_features), got shape {X.shape}")
        return Shard.from_arrays(X, y, comm.Get_rank(), comm.Get_size())

    # -- training --------------------------------------------------------------------
    def fit(self, X, y=None, checkpoint=None, checkpoint_every_seconds=None, checkpoint_every_packs=None,
            resume=False, should_stop=None, stop_after_packs=None):
        """Train on ``X`` (a Shard, or data every rank holds) with labels ``y``.

        checkpoint: file for the solver's state, written every ``checkpoint_every_seconds``
        (rank 0's clock) and/or ``checkpoint_every_packs``, and when the run is stopped;
        resume: continue from ``checkpoint`` if it holds a complete checkpoint;
        should_stop: a callable polled once per pack (on any rank) that stops the run;
        stop_after_packs: stop after this many packs (tests). ``stopped_`` tells whether the
        run ended early; the fitted state is then the checkpointed one.
        """
        comm = self._comm()
        shard = run_collectively(comm, self._validated_shard, X, y)
        self.classes_ = find_classes(comm, shard)
        labels = np.where(shard.y == self.classes_[1], 1.0, -1.0)
        m, d = shard.n_samples, shard.n_features
        if self.sigma is not None:
            self.sigma_ = float(self.sigma)
        else:
            self.sigma_ = 1.0 / (m * (1.0 if self.C is None else float(self.C)))
        self.C_ = 1.0 / (m * self.sigma_)
        T = int(self.iterations) if self.iterations is not None else max(1, int(round(self.epochs * m)))
        solver = PackedSolver(comm, self.spec_, self.sigma_, T, self.pack, self.seed,
                              self.work_bytes, self.progress, should_stop=should_stop, tol=self.tol,
                              tol_window=self.tol_window)
        params = {"kernel": self.spec_.name, "gamma": self.spec_.gamma, "degree": self.spec_.degree,
                  "coef0": self.spec_.coef0, "offset": self.spec_.offset, "sigma": self.sigma_,
                  "pack": int(self.pack), "seed": int(self.seed), "n_samples": m, "n_features": d,
                  "dtype": self.dtype, "iterations": T}
        checkpointing = None if checkpoint is None else Checkpointing(
            str(checkpoint), checkpoint_every_seconds, checkpoint_every_packs, params)
        previous = None
        if resume and checkpoint is not None and comm.bcast(checkpoint_exists(checkpoint), root=0):
            previous = read_checkpoint(comm, checkpoint, params, self.spec_, DTYPES[self.dtype], self.work_bytes)
        self.resumed_from_ = None if previous is None else previous[1].iteration
        self.table_, state, stats, self.stopped_ = solver.run(shard, labels, checkpointing, previous,
                                                              stop_after_packs)
        seconds = dict(stats.seconds)
        self.scale_ = state.scale
        self.n_features_in_ = d
        self.n_support_ = int(state.occupancy.sum())
        self.stats_ = stats
        self.training_ = {
            "n_samples": m, "iterations": T, "iterations_done": state.iteration, "pack": int(self.pack),
            "ranks": comm.Get_size(),
            "seed": int(self.seed), "packs": stats.packs, "projections": stats.projections,
            "converged": stats.converged,
            "allreduce_calls": stats.allreduce_calls, "dtype": self.dtype,
            "hinge_moving_average": stats.hinge_moving_average, "data": shard.path,
            "seconds": {k: comm.allreduce(v, op=MPI.MAX) for k, v in seconds.items()},
        }
        return self

    # -- prediction ------------------------------------------------------------------
    def decision_function_shard(self, shard):
        """Collective: ``(decisions, raw labels)`` for every row of the shard's data set, on rank 0."""
        if shard.n_features > self.n_features_in_:
            raise PPackError(f"{shard.path}: the data has {shard.n_features} features but the model "
                             f"was trained with {self.n_features_in_}; expected at most {self.n_features_in_}",
                             collective=True)
        return distributed_decisions(self._comm(), self.table_, self.scale_, self.spec_, shard,
                                     self.n_features_in_)

    def decision_function(self, X):
        """Decision values (n_samples,) of data every rank holds; returned on every rank."""
        decisions, _ = self.decision_function_shard(self._as_shard(X))
        return self._comm().bcast(decisions, root=0)

    def predict(self, X):
        return self.labels_of(self.decision_function(X))

    def labels_of(self, decisions):
        """Original label values for decision values (positive class where >= 0)."""
        return np.where(decisions >= 0, self.classes_[1], self.classes_[0])

    def score(self, X, y):
        """Accuracy on data every rank holds."""
        return float(np.mean(self.predict(X) == np.asarray(y)))

    # -- model file ------------------------------------------------------------------
    def save(self, path):
        """Collective: write the model file (rank 0 writes; atomic)."""
        save_model(self._comm(), path, self.table_, self.scale_, self.spec_, self.C_, self.sigma_,
                   self.classes_, self.training_)

    @classmethod
    def load(cls, path, comm=None, work_bytes=DEFAULT_WORK_BYTES):
        """Collective: a fitted PackSVC from a model file; each rank loads a slice of it."""
        comm = MPI.COMM_WORLD if comm is None else comm
        header, table = load_model_shard(comm, path, work_bytes)
        spec = header.spec
        model = cls(kernel=spec.name, gamma=spec.gamma, degree=spec.degree, coef0=spec.coef0,
                    sigma=header.sigma, bias=spec.offset > 0, comm=comm, work_bytes=work_bytes,
                    dtype="float32" if header.dtype == np.float32 else "float64")
        model.spec_, model.table_, model.scale_ = spec, table, header.scale
        model.sigma_, model.C_, model.classes_ = header.sigma, header.C, header.classes
        model.n_features_in_, model.n_support_ = header.n_features, header.n_support
        model.training_ = header.training
        return model


def find_classes(comm, shard):
    """Collective: the two distinct label values (sorted) of the whole data set."""
    local = np.unique(shard.y)
    values = np.unique(np.concatenate(comm.allgather(local)))
    if np.any(np.isnan(values)):
        raise PPackError(f"{shard.path}: y: training data needs a label on every row", collective=True)
    if len(values) != 2:
        shown = ", ".join(f"{v:g}" for v in values[:10]) + (" ..." if len(values) > 10 else "")
        what = "a single class" if len(values) < 2 else f"{len(values)} classes"
        raise PPackError(f"{shard.path}: y: found {what} ({shown}); expected exactly two label values "
                         "(multiclass training is not supported yet)", collective=True)
    return values
