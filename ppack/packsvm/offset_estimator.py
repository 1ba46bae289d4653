"""PackSVR and PackOneClassSVM: the packed trainer's problems with an offset rho (``losses.py``).

Both train one coefficient column and decide by f(x) = scale * sum_j coef_j (K(sv_j, x) +
offset) - rho (LIBSVM's sign of rho); their model files say which problem (``svm_type``) and
hold rho. Everything else (packs, table, checkpoints, prediction) is PackSVC's.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from mpi4py import MPI

from ..base import available_if
from ..errors import PPackError
from ..kernels.compute import DEFAULT_WORK_BYTES
from ..mpi.collectives import Collectives
from ..registry import SVM_TYPE_PARAMS, VERBOSE, svm_type_params
from .estimator import SVM_TYPE_CLASSES, PackSVC
from .dual.regression import Regression
from .losses import largest_weight, one_class_loss, svr_loss
from .objective import nu_quantile, training_rows

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..data.shard import Shard

_R = {name: param.default for name, param in svm_type_params("epsilon_svr").items()}
_O = {name: param.default for name, param in svm_type_params("one_class").items()}


class _OffsetModel(PackSVC):
    """What PackSVR and PackOneClassSVM share: one column, the offset ``rho_`` (a float)
    subtracted from every decision value, no classes to encode."""

    MULTICLASS = False

    def _check_fitted(self):
        if not hasattr(self, "table_"):
            raise self.not_fitted_error(f"This {type(self).__name__} instance is not fitted yet. Call 'fit' "
                                        "with appropriate arguments before using this estimator.")

    def _decisions(self, shard):
        decisions, labels = super()._decisions(shard)
        return (None if decisions is None else decisions - self.rho_), labels

    def _decision_values(self, X):
        """Decision values (n_samples,) f(x) of data every rank holds; returned on every rank."""
        self._check_fitted()
        shard = self._as_shard(X)
        decisions, _ = self.decision_function_shard(shard)
        collectives = Collectives(self._comm())
        return collectives.broadcast(decisions if collectives.rank == 0 else np.empty(shard.n_samples))

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Collective: the prediction for each row of data every rank holds.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            The rows, the same on every rank.

        Returns
        -------
        numpy.ndarray
            (n_samples,): the regressed values (PackSVR), or +1 (inlier) and -1 (outlier) as
            integers (PackOneClassSVM).
        """
        return self.labels_of(self._decision_values(X))

    def _model_classes(self):
        return np.empty(0)


class PackSVR(_OffsetModel):
    """epsilon-SVR trained by P-packSVM: min sigma/2 ||w||^2 + 1/m sum_i weight_i max(0,
    ``|y_i - f(x_i)|`` - epsilon), f(x) = <w, phi(x)> - rho with rho = -mean(y) (``losses.svr_loss``).

    Parameters as PackSVC's (``registry.svm_type_params("epsilon_svr")``), with ``epsilon``
    (the tube's half width) and without class_weight, probability and bias. ``predict`` gives
    the regressed values, ``score`` R^2. Fitted attributes as PackSVC's, with ``rho_`` and no
    ``classes_``.
    """

    PARAMS = svm_type_params("epsilon_svr")
    SVM_TYPE = "epsilon_svr"
    VALIDATION_METRIC = "r2"

    def __init__(
        self,
        kernel: str = _R["kernel"],
        gamma: float | str = _R["gamma"],
        degree: int = _R["degree"],
        coef0: float = _R["coef0"],
        C: float | None = _R["C"],
        sigma: float | None = _R["sigma"],
        epsilon: float = _R["epsilon"],
        epochs: float | str = _R["epochs"],
        iterations: int | None = _R["iterations"],
        pack: int = _R["pack"],
        seed: int = _R["seed"],
        dtype: str = _R["dtype"],
        tol: float | None = _R["tol"],
        tol_window: int = _R["tol_window"],
        objective: bool = _R["objective"],
        sampling: str = _R["sampling"],
        placement: str = _R["placement"],
        pipeline: str = _R["pipeline"],
        device: str = _R["device"],
        step: float = _R["step"],
        average: bool = _R["average"],
        validation: float | None = _R["validation"],
        validation_every: int | None = _R["validation_every"],
        patience: int = _R["patience"],
        optimizer: str = _R["optimizer"],
        random_state: int | None = None,
        comm: MPI.Comm | None = None,
        work_bytes: int = DEFAULT_WORK_BYTES,
        progress: Callable | None = None,
        verbose: int = VERBOSE.default,
    ) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.C = C
        self.sigma = sigma
        self.epsilon = epsilon
        self.epochs = epochs
        self.iterations = iterations
        self.pack = pack
        self.seed = seed
        self.dtype = dtype
        self.tol = tol
        self.tol_window = tol_window
        self.objective = objective
        self.sampling = sampling
        self.placement = placement
        self.pipeline = pipeline
        self.device = device
        self.step = step
        self.average = average
        self.validation = validation
        self.validation_every = validation_every
        self.patience = patience
        self.optimizer = optimizer
        self.random_state = random_state
        self.comm = comm
        self.work_bytes = work_bytes
        self.progress = progress
        self.verbose = verbose

    @available_if(lambda self: False)
    def decision_function(self, X):
        """Not for a regressor (scikit-learn's rule): ``predict`` gives the decision values."""

    def _targets(self, shard):
        if self._label_names is not None:
            raise PPackError("y: Unknown label type: regression targets must be numbers, got text", collective=True)
        missing = self._comm().allreduce(int(np.count_nonzero(~np.isfinite(shard.y))))
        if missing:
            raise PPackError(f"{shard.path}: y: {missing} rows have no finite target (NaN or infinity); epsilon_svr "
                             "needs a finite target on every row", collective=True)
        return shard.y, shard.w, 0, 1

    def _loss(self, comm, shard, labels, weights):
        return svr_loss(comm, labels, float(self.epsilon), largest_weight(comm, weights))

    def _dual_problem(self, comm, labels):
        """Collective: the dual's targets, centred by their mean (rho = -mean(y), ``self.loss_.rho``),
        and its ``Regression``: the tube and the largest deviation from the mean (at least 1e-12)."""
        centred = labels + self.loss_.rho
        widest = comm.allreduce(float(np.abs(centred).max(initial=0.0)), op=MPI.MAX)
        return centred, Regression(float(self.epsilon), max(widest, 1e-12))

    def row_losses(self, f, y):
        """(1, n) the epsilon-insensitive losses for the raw values f = <w, phi(x)> (1, n) and
        targets y (n,)."""
        return np.maximum(0.0, np.abs(y - (f - self.rho_)) - float(self.epsilon))

    def labels_of(self, decisions):
        """The regressed values: the decision values themselves."""
        return np.asarray(decisions)

    def validation_score(self, decisions, targets):
        """R^2 of the decision values on held-out targets (--validation keeps the best)."""
        return r2_score(targets, decisions)

    def test_metrics(self, decisions, targets):
        """RMSE and R^2 on a test set's targets (None when a row has none)."""
        if np.any(np.isnan(targets)):
            return {"test_rmse": None, "test_r2": None}
        return {"test_rmse": float(np.sqrt(np.mean((targets - decisions) ** 2))),
                "test_r2": r2_score(targets, decisions)}

    def score(self, X: ArrayLike, y: ArrayLike) -> float:
        """Collective: R^2 of the predictions on data every rank holds.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            The rows, the same on every rank.
        y : array-like of shape (n_samples,)
            Their true targets.

        Returns
        -------
        float
            The coefficient of determination, 1 - residual sum of squares / total sum of squares.
        """
        return r2_score(np.asarray(y, dtype=np.float64), self.predict(X))

    @classmethod
    def _load_params(cls, header):
        return {**super()._load_params(header), "epsilon": header.training.get("epsilon", _R["epsilon"])}


class PackOneClassSVM(_OffsetModel):
    """One-class SVM (Schoelkopf's nu form) trained by P-packSVM: min nu/2 ||w||^2 + 1/m sum_i
    weight_i max(0, rho - <w, phi(x_i)>) - nu rho, so sigma = nu and C = 1 / (nu m); rho is
    learned beside w (``losses.one_class_loss``), and after training set to the rho that
    minimises the objective for the returned w (``objective.nu_quantile``). Labels are ignored.

    Parameters as PackSVC's (``registry.svm_type_params("one_class")``), with ``nu`` and without
    C, sigma, class_weight, probability, bias and validation. As scikit-learn's OneClassSVM:
    ``decision_function`` = ``score_samples`` - ``offset_`` with ``offset_`` = rho,
    ``predict`` +1 (inlier, decision >= 0) or -1 (outlier), ``fit_predict``.
    """

    PARAMS = svm_type_params("one_class")
    SVM_TYPE = "one_class"
    NEEDS_Y = False

    def __init__(
        self,
        kernel: str = _O["kernel"],
        gamma: float | str = _O["gamma"],
        degree: int = _O["degree"],
        coef0: float = _O["coef0"],
        nu: float = _O["nu"],
        epochs: float | str = _O["epochs"],
        iterations: int | None = _O["iterations"],
        pack: int = _O["pack"],
        seed: int = _O["seed"],
        dtype: str = _O["dtype"],
        tol: float | None = _O["tol"],
        tol_window: int = _O["tol_window"],
        objective: bool = _O["objective"],
        sampling: str = _O["sampling"],
        placement: str = _O["placement"],
        pipeline: str = _O["pipeline"],
        device: str = _O["device"],
        step: float = _O["step"],
        average: bool = _O["average"],
        random_state: int | None = None,
        comm: MPI.Comm | None = None,
        work_bytes: int = DEFAULT_WORK_BYTES,
        progress: Callable | None = None,
        verbose: int = VERBOSE.default,
    ) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.nu = nu
        self.epochs = epochs
        self.iterations = iterations
        self.pack = pack
        self.seed = seed
        self.dtype = dtype
        self.tol = tol
        self.tol_window = tol_window
        self.objective = objective
        self.sampling = sampling
        self.placement = placement
        self.pipeline = pipeline
        self.device = device
        self.step = step
        self.average = average
        self.random_state = random_state
        self.comm = comm
        self.work_bytes = work_bytes
        self.progress = progress
        self.verbose = verbose

    validation = None  # the trainer reads these; one-class has no held-out rows
    sigma = C = None

    def fit(self, X: ArrayLike | Shard, y: None = None, sample_weight: ArrayLike | None = None,
            **kwargs) -> PackOneClassSVM:
        """Collective: train on ``X``; labels, if given, are ignored.

        Parameters
        ----------
        X : Shard, array-like or scipy.sparse matrix of shape (n_samples, n_features)
            This rank's shard of a data file (``load_shard``), or rows every rank holds whole.
        y : None
            Ignored (scikit-learn's convention for outlier detectors).
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Weights on the rows' loss, with in-memory data.
        **kwargs
            Checkpoints and stopping, as ``PackSVC.fit`` takes them.

        Returns
        -------
        PackOneClassSVM
            The fitted estimator itself.
        """
        return super().fit(X, None, sample_weight, **kwargs)

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """Collective: the decision values of data every rank holds, >= 0 inside the boundary.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            The rows, the same on every rank.

        Returns
        -------
        numpy.ndarray
            (n_samples,) values ``score_samples(X) - offset_``, on every rank.
        """
        return self._decision_values(X)

    def fit_predict(self, X: ArrayLike | Shard, y: None = None, **kwargs) -> np.ndarray:
        """Collective: fit on ``X``, then predict its rows.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            The rows, the same on every rank.
        y : None
            Ignored.
        **kwargs
            Passed to ``fit``.

        Returns
        -------
        numpy.ndarray
            (n_samples,) +1 (inlier) or -1 (outlier), integers.
        """
        return self.fit(X, **kwargs).predict(X)

    def _targets(self, shard):
        return np.ones(len(shard.y)), shard.w, 1, 1

    def _sigma(self, m):
        return float(self.nu)

    def _loss(self, comm, shard, labels, weights):
        return one_class_loss(comm, shard, self.spec_, self.sigma_)

    def _offset_after_training(self, comm, shard, weights):
        """Collective: rho from one prediction pass over the training rows, the objective's
        minimiser for the returned w (``objective.nu_quantile``); ``training_["rho_sgd"]`` keeps
        the replay's. Returns the pass, which the objective reads too."""
        start = MPI.Wtime()
        passed = training_rows(comm, self.table_, self.scale_, shard, self.n_features_in_, weights)
        scores, _, row_weights = passed
        rho = None if scores is None else nu_quantile(scores[0], row_weights, self.sigma_, shard.n_samples)
        self.training_["rho_sgd"], self.rho_ = self.rho_, comm.bcast(rho, root=0)
        self.training_["seconds"]["offset"] = comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)
        return passed

    def row_losses(self, f, y):
        """(1, n) the losses max(0, rho - f) for the raw values f = <w, phi(x)> (1, n) (y ignored)."""
        return np.maximum(0.0, self.rho_ - f)

    def objective_offset_term(self):
        return -self.sigma_ * self.rho_

    @property
    def offset_(self):
        """rho: decision_function = score_samples - offset_ (scikit-learn's relation)."""
        self._check_fitted()
        return self.rho_

    def score_samples(self, X: ArrayLike) -> np.ndarray:
        """Collective: the raw scores <w, phi(x)> of data every rank holds.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            The rows, the same on every rank.

        Returns
        -------
        numpy.ndarray
            (n_samples,) scores, on every rank; larger is more normal.
        """
        return self._decision_values(X) + self.rho_

    def labels_of(self, decisions):
        """+1 (inlier) where the decision value is >= 0, else -1 (integers, as scikit-learn's)."""
        return np.where(np.asarray(decisions) >= 0, 1, -1)

    def validation_score(self, decisions, labels):
        """Accuracy of the +1 / -1 predictions against +1 / -1 labels (``tune`` scores a grid by it;
        --validation is refused: training has no labels)."""
        return float(np.mean(self.labels_of(decisions) == labels))

    def test_metrics(self, decisions, labels):
        """Accuracy of +1 / -1 against a test set's labels when they all are +1 / -1, else None."""
        if not np.all(np.isin(labels, (-1.0, 1.0))):
            return {"test_accuracy": None}
        return {"test_accuracy": self.validation_score(decisions, labels)}

    def _model_classes(self):
        return np.array([-1.0, 1.0])

    @classmethod
    def _load_params(cls, header):
        params = super()._load_params(header)
        params["nu"] = params.pop("sigma")
        return params


def r2_score(y, f):
    """The coefficient of determination 1 - sum (y - f)^2 / sum (y - mean y)^2 (scikit-learn's:
    1 for a perfect fit, 0 when the residuals' sum of squares equals the variance's, and for
    constant y, 1 if f fits it exactly else 0)."""
    y, f = np.asarray(y, dtype=np.float64), np.asarray(f, dtype=np.float64)
    residual = np.sum((y - f) ** 2)
    total = np.sum((y - np.mean(y)) ** 2)
    if total == 0.0:
        return 1.0 if residual == 0.0 else 0.0
    return float(1.0 - residual / total)


SVM_TYPE_CLASSES.update(epsilon_svr=PackSVR, one_class=PackOneClassSVM)
assert set(SVM_TYPE_CLASSES) == set(SVM_TYPE_PARAMS["svm_type"].rule.choices)
