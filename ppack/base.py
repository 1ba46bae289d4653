"""The estimator base: communicator, array-or-shard input, labels, predict and score, loading.

Every method of an estimator is collective over its ``comm``: all ranks call it with the
same arguments. Data is either a ``Shard`` (each rank holds its rows; see
``data.shard.load_shard``) or an in-memory array / CSR matrix that every rank holds
whole (each then keeps its slice). A trainer subclass supplies ``PARAMS`` (its table in
``registry``), ``fit``, ``_decisions(shard)``, ``save`` and ``load``, and registers its
model type, so ``load_model`` reads any model file without this module knowing the
trainers.

Nothing here imports scikit-learn, so the command line starts without it: the public
estimators (``ppack.estimators``) put the trainers on scikit-learn's bases and swap in
its input check, error and warning types.
"""
from __future__ import annotations

import warnings
from types import MethodType
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from mpi4py import MPI

from .data.shard import Shard
from .errors import PPackError
from .mpi.comm import run_collectively
from .model.format import model_type
from .mpi.collectives import Collectives
from .progress import Console
from .registry import EXCLUSIVE, MODEL_TYPES, VERBOSE, check_params

if TYPE_CHECKING:
    import os

    from numpy.typing import ArrayLike


class NotFittedError(PPackError, AttributeError):
    """A method that needs a fitted model was called before fit."""


class DataConversionWarning(UserWarning):
    """Input data was converted (a column-vector y flattened)."""


class ConvergenceWarning(UserWarning):
    """Training stopped short of the optimum (``packsvm.convergence``): the model may be poor."""


class FeatureScaleWarning(UserWarning):
    """The kernel vanishes or saturates between the training rows at the chosen gamma
    (``packsvm.feature_scale``): scale the features, or change gamma."""


class available_if:
    """Decorator: the method exists only where ``check(self)`` holds (``hasattr`` is False
    elsewhere), as scikit-learn's ``available_if``; ``why`` ends the AttributeError's message."""

    def __init__(self, check, why=None):
        self.check = check
        self.why = why

    def __call__(self, method):
        self.method = method
        return self

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.method
        if not self.check(obj):
            message = f"{type(obj).__name__!r} object has no attribute {self.method.__name__!r}"
            raise AttributeError(message if self.why is None else f"{message}: {self.why}")
        return MethodType(self.method, obj)


class BaseSVC:
    """Shared behaviour of PackSVC and BlockAveragedSVC (see the module docstring).

    Fitted attributes every trainer sets: ``classes_`` (the label values, sorted: for two,
    the negative then the positive label) and ``n_features_in_``.
    """

    PARAMS = {}
    MULTICLASS = False  # whether fit takes more than two classes (one-vs-rest)
    NEEDS_Y = True  # whether fit needs labels (one-class does not)
    # the types raised and warned with; the public estimators give scikit-learn's
    not_fitted_error = NotFittedError
    conversion_warning = DataConversionWarning
    convergence_warning = ConvergenceWarning
    feature_scale_warning = FeatureScaleWarning
    _label_names = None  # the labels given to fit, when they are not numbers (strings)
    _label_dtype = None  # the numeric type of the labels given to fit, which classes_ keeps

    def _warn(self, comm, category, advice):
        """Rank 0 warns once with ``category`` (``convergence_warning``: training stopped short;
        ``feature_scale_warning``: the kernel vanishes or saturates between the rows) when
        ``advice``, what was seen and what to change, is not None. The warning carries the
        advice alone as its ``advice`` (the command line says it as a line of its own)."""
        if advice is not None and comm.Get_rank() == 0:
            warning = category(f"{type(self).__name__}: {advice}")
            warning.advice = advice
            warnings.warn(warning, stacklevel=3)

    def validate_params(self):
        """Check every parameter against the registry's table; returns them normalised.

        Raises PPackError naming the parameter, the allowed values and the value given.
        """
        values = check_params({name: getattr(self, name) for name in self.PARAMS}, self.PARAMS)
        for pair in EXCLUSIVE:
            if all(name in values and values[name] != self.PARAMS[name].default for name in pair):
                raise PPackError(f"{pair[0]} and {pair[1]}: give one or the other, not both")
        verbose = getattr(self, "verbose", 0)
        VERBOSE.rule.check("verbose", int(verbose) if isinstance(verbose, (bool, np.bool_)) else verbose)
        return values

    @property
    def seed_(self):
        """The seed in use: ``random_state`` (scikit-learn's name) when given, else ``seed``.
        An int, or a numpy RandomState/Generator, which gives one."""
        state = getattr(self, "random_state", None)
        if state is None:
            return int(self.seed)
        if isinstance(state, (int, np.integer)) and not isinstance(state, bool):
            return int(state)
        if isinstance(state, np.random.RandomState):
            return int(state.randint(0, 2**31 - 1))
        if isinstance(state, np.random.Generator):
            return int(state.integers(0, 2**31 - 1))
        raise PPackError(f"random_state: must be None, an int or a numpy RandomState/Generator, got {state!r}")

    def _comm(self):
        return MPI.COMM_WORLD if self.comm is None else self.comm

    def _console(self):
        """The ``verbose`` lines' ``progress.Console`` (rank 0's stderr)."""
        return Console(type(self).__name__, getattr(self, "verbose", 0), self._comm().Get_rank())

    @property
    def feature_dtype(self):
        """The feature type data is read and stored in."""
        return np.float64

    def summary(self):
        """A few words on the fitted model, for reports."""
        raise NotImplementedError

    def _as_shard(self, X, y=None, sample_weight=None, fitting=False):
        """This rank's Shard of ``X`` (a Shard, or data every rank holds whole, with its labels
        ``y`` and optional ``sample_weight`` (n,)). In-memory data is checked as scikit-learn
        checks it (2-D, finite, numeric, as many labels as rows; the same messages); when not
        ``fitting``, its width must be the model's."""
        if fitting:  # a file's labels are float64, whatever the previous fit's were
            self._label_names = self._label_dtype = None
        if isinstance(X, Shard):
            if sample_weight is not None:
                raise PPackError("sample_weight: a Shard carries its row weights (the file's 'w' dataset); "
                                 "pass sample_weight with in-memory data only")
            return X
        name = type(self).__name__
        if fitting and y is None and self.NEEDS_Y:
            raise PPackError(f"{name} requires y to be passed, but the target y is None")
        try:
            X = self._checked_array(X)
            if y is not None:
                y = _checked_labels(y, X.shape[0], self.conversion_warning)
        except PPackError:
            raise
        except ValueError as exc:
            raise PPackError(str(exc)) from None
        if not fitting and X.shape[1] != self.n_features_in_:
            raise PPackError(f"X has {X.shape[1]} features, but {name} is expecting {self.n_features_in_} "
                             "features as input")
        if y is not None:
            self._label_dtype = y.dtype if y.dtype.kind in "biuf" else None
            if y.dtype.kind not in "biuf":  # strings or objects: train on their codes, keep the names
                self._label_names, y = np.unique(y, return_inverse=True)
                y = y.astype(np.float64)
        comm = self._comm()
        return Shard.from_arrays(X, y, comm.Get_rank(), comm.Get_size(), w=sample_weight)

    def _check_fitted(self):
        if not hasattr(self, "classes_"):
            raise self.not_fitted_error(f"This {type(self).__name__} instance is not fitted yet. Call 'fit' "
                                        "with appropriate arguments before using this estimator.")

    def _checked_array(self, X):
        """X as an array or CSR matrix of the feature type, 2-D and finite (raises PPackError)."""
        dtype = self.feature_dtype
        X = sp.csr_matrix(X, dtype=dtype) if sp.issparse(X) else np.asarray(X, dtype=dtype)
        if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
            raise PPackError(f"X: expected a 2-D array with at least one row and column, got shape {X.shape}")
        if not np.isfinite(X.data if sp.issparse(X) else X).all():
            raise PPackError("Input X contains NaN or infinity")
        return X

    def _fit_classes(self, shard):
        """Collective: set ``classes_`` from the whole data set; returns the shard's labels: in
        {-1, +1} for two classes, else class codes 0..K-1 (floats) in the order of ``classes_``."""
        values = find_classes(self._comm(), shard, MAX_CLASSES if self.MULTICLASS else 2)
        self._class_values = values
        names = self._label_names
        if names is not None and len(names) == len(values):
            self.classes_ = names[values.astype(np.int64)]
        else:  # in y's own type: integer labels give integer classes and predictions
            self.classes_ = values if self._label_dtype is None else values.astype(self._label_dtype, copy=False)
        if len(values) == 2:
            return np.where(shard.y == values[1], 1.0, -1.0)
        return np.searchsorted(values, shard.y).astype(np.float64)

    def _row_weights(self, shard, class_weight):
        """Collective: the weights of the shard's rows on their loss, (rows,) float64: the class's
        weight (``class_weight`` normalised by the registry: None, 'balanced' or {label: weight})
        times the row's own (``shard.w``); None when every weight is 1. Call after _fit_classes."""
        comm = self._comm()
        weights = None if shard.w is None else shard.w.copy()
        if class_weight is not None:
            index = np.searchsorted(self._class_values, shard.y)
            K = len(self.classes_)
            if class_weight == "balanced":
                counts = comm.allreduce(np.bincount(index, minlength=K))
                per_class = shard.n_samples / (K * np.maximum(counts, 1))
            else:
                known = {c: k for k, c in enumerate(self.classes_.tolist())}
                per_class = np.ones(K)
                for label, weight in class_weight.items():
                    if label not in known:
                        shown = ", ".join(map(str, self.classes_.tolist()[:10]))
                        raise PPackError(f"class_weight: {label!r} is not a class of the data (classes: {shown})",
                                         collective=True)
                    per_class[known[label]] = weight
            weights = per_class[index] if weights is None else weights * per_class[index]
        return weights

    def test_metrics(self, decisions, labels):
        """Rank 0: the test metrics of decision values against a test set's labels (n,):
        {"test_accuracy": the fraction predicted right, or None when a row has no label}."""
        if np.any(np.isnan(labels)):
            return {"test_accuracy": None}
        return {"test_accuracy": float(np.mean(self.labels_of(decisions) == labels))}

    def labels_of(self, decisions):
        """Original label values for decision values: (n,) positive class where >= 0, or (n, K)
        the class of the largest value (one-vs-rest)."""
        decisions = np.asarray(decisions)
        if decisions.ndim == 2:
            return np.asarray(self.classes_)[np.argmax(decisions, axis=1)]
        return np.where(decisions >= 0, self.classes_[1], self.classes_[0])

    def decision_function_shard(self, shard: Shard) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Collective: the decision values and raw labels of every row of a data set held in shards.

        Parameters
        ----------
        shard : Shard
            This rank's rows (``load_shard``). The data has the model's width; LIBSVM text may
            be narrower (its last features absent, taken for zeros), as LIBSVM reads it.

        Returns
        -------
        decisions : numpy.ndarray or None
            On rank 0, (n_samples,) decision values, or (n_samples, K) for K > 2 classes
            (one-vs-rest); None on the other ranks.
        labels : numpy.ndarray or None
            On rank 0, the data set's (n_samples,) labels as stored (NaN where a row has
            none); None on the other ranks.

        Raises
        ------
        PPackError
            On every rank, when the data is wider than the model (or narrower, except LIBSVM text).
        """
        d, m = shard.n_features, self.n_features_in_
        if d > m or (d < m and not shard.text):
            expected = f"at most {m}" if shard.text else f"{m} (only LIBSVM text may leave out the last features)"
            raise PPackError(f"{shard.path}: the data has {d} features but the model was trained with {m}; "
                             f"expected {expected}", collective=True)
        return self._decisions(shard)

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """Collective: the decision values of data every rank holds.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            The rows, the same on every rank.

        Returns
        -------
        numpy.ndarray
            (n_samples,) for two classes (positive: the second of ``classes_``), (n_samples, K)
            for K > 2, on every rank.
        """
        self._check_fitted()
        shard = self._as_shard(X)
        decisions, _ = self.decision_function_shard(shard)
        collectives = Collectives(self._comm())
        shape = (shard.n_samples,) if len(self.classes_) == 2 else (shard.n_samples, len(self.classes_))
        return collectives.broadcast(decisions if collectives.rank == 0 else np.empty(shape))

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Collective: the predicted class of each row of data every rank holds.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            The rows, the same on every rank.

        Returns
        -------
        numpy.ndarray
            (n_samples,) labels from ``classes_``, in the type of the labels given to ``fit``.
        """
        return self.labels_of(self.decision_function(X))

    def score(self, X: ArrayLike, y: ArrayLike) -> float:
        """Collective: the accuracy of the predictions on data every rank holds.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            The rows, the same on every rank.
        y : array-like of shape (n_samples,)
            Their true labels.

        Returns
        -------
        float
            The fraction of rows predicted right.
        """
        return float(np.mean(self.predict(X) == np.asarray(y)))


def _checked_labels(y, n, warning):
    """y as a 1-D array of n labels (a column vector is flattened with a ``warning``, as
    scikit-learn does)."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        warnings.warn("A column-vector y was passed when a 1d array was expected; it is flattened",
                      warning, stacklevel=4)
        y = y.ravel()
    if y.ndim != 1:
        raise PPackError(f"y: expected a 1-D array of labels, got shape {y.shape}")
    if len(y) != n:
        raise PPackError(f"Found input variables with inconsistent numbers of samples: [{n}, {len(y)}]")
    return y


MAX_CLASSES = 1000  # more distinct labels than this are taken for regression targets, not classes


def find_classes(comm, shard, max_classes=2):
    """Collective: the distinct label values (sorted) of the whole data set: 2 to ``max_classes``."""
    local = np.unique(shard.y)
    values = np.unique(np.concatenate(comm.allgather(local)))
    if np.any(np.isnan(values)):
        raise PPackError(f"{shard.path}: y: training data needs a label on every row", collective=True)
    if len(values) > 2 and not np.all(values == np.round(values)):
        shown = ", ".join(f"{v:g}" for v in values[:5])
        raise PPackError(f"{shard.path}: y: Unknown label type: continuous ({len(values)} distinct values, "
                         f"not all integers: {shown} ...); classifiers need class labels, not regression "
                         "targets (epsilon-SVR regresses them: train --svm-type epsilon_svr, or PackSVR)",
                         collective=True)
    if not 2 <= len(values) <= max_classes:
        shown = ", ".join(f"{v:g}" for v in values[:10]) + (" ..." if len(values) > 10 else "")
        what = "one class" if len(values) < 2 else f"{len(values)} classes"
        expected = ("exactly two label values" if max_classes == 2 else
                    f"2 to {max_classes} classes (are these regression targets?)")
        raise PPackError(f"{shard.path}: y: found {what} ({shown}); expected {expected}", collective=True)
    return values


def load_model(path, comm=None, estimators=MODEL_TYPES):
    """Collective: the fitted estimator stored in a model file, whatever trainer wrote it, as the
    class ``estimators`` gives its model type (default: the trainer's own class, as registered;
    ``ppack.load_model`` gives the public classes)."""
    comm = MPI.COMM_WORLD if comm is None else comm
    kind = run_collectively(comm, model_type, path)
    if kind not in estimators:
        raise PPackError(f"{path}: attribute 'model_type': expected one of {', '.join(estimators)}, got {kind!r}",
                         collective=True)
    return estimators[kind].load(path, comm)
