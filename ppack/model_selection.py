"""PackGridSearchCV: scikit-learn's GridSearchCV for ppack's kernel estimators, with the
kernel settings, C values and folds of each pass trained as columns of one run
(``packsvm.grid``).

What shares a pass: every kernel setting (kernel, gamma, degree, coef0) whose kernel is
computed from dot products (rbf, poly, sigmoid, linear: one GEMM per tile for all of them),
every C value (nu for PackOneClassSVM) and every fold (plus the refit, one more column per grid point), for one setting
of the other parameters. laplacian settings share their L1 reductions in a pass of their own.
Any other parameter in the grid is one pass per value. Scores come from one predict pass over
the training rows after each training pass (the same grouped kernel sums), each row scored by
the columns that held it out, or, with ``scores="progressive"``, from the predictions the
held-out columns tested during training (``packsvm.progressive``: no second pass).
"""
import os
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from mpi4py import MPI
from scipy.stats import rankdata
from sklearn.base import (BaseEstimator, ClassifierMixin, MetaEstimatorMixin, OutlierMixin, RegressorMixin, clone,
                          is_classifier)
from sklearn.metrics import check_scoring
from sklearn.model_selection import ParameterGrid, check_cv
from sklearn.utils.metaestimators import available_if

from .errors import PPackError
from .kernels.threads import numba_threads
from .mpi.collectives import Collectives
from .progress import Console, pack_callback
from .packsvm.grid import KERNEL_PARAMS, grid_parameter, refuse_unsupported, train_grid
from .registry import KERNEL_FACTS

# the estimator's parameters a pass shares across its columns (C, or nu for one-class, and the kernel
# settings, grouped by the reduction their kernel needs: ``_reduction``); the others split passes
SHARED_IN_A_PASS = ("C", "nu") + KERNEL_PARAMS


class PackGridSearchCV(MetaEstimatorMixin, BaseEstimator):
    """Exhaustive search over a grid of parameters with cross-validation, as scikit-learn's
    GridSearchCV, for PackSVC, PackSVR and PackOneClassSVM, with each pass's C values (nu
    for one-class) and folds trained as columns of one run.

    Every kernel setting and C value of the grid and every fold, plus one refit column per
    grid point, train in one pass: columns = classes x grid points x (folds + 1) of one table,
    sharing every sampled row. The columns of one kernel setting (kernel, gamma, degree,
    coef0) share every kernel value; the settings share each tile's dot products (rbf, poly,
    sigmoid and linear: one GEMM for all), only the kernel formula and the coefficient
    products repeat per setting. laplacian settings share their L1 distances in a pass of
    their own. Column (grid point, fold f) is, to rounding, a fit with sample_weight 0 on
    fold f's rows and the same seed (sigma = 1 / (n C) with n all the rows, so C keeps its
    meaning); the refit column of the best grid point is ``best_estimator_``, a fit on all
    rows, without a second training pass. One-class columns search nu, a fraction of the
    rows trained on: a fold's column is a fit with nu m_f / n (m_f the rows outside the fold)
    and sample_weight 0 on the fold, its rho set after training as that fit sets it (the
    nu-quantile of its scores, one predict pass over every row per fold). Every other
    parameter's value takes a pass of its own. A pass's storage type is the strictest its
    kernel settings ask for (with dtype="auto", float64 if any setting's kernel needs it).
    With the estimator's ``tol`` or ``validation``, each grid point and fold's columns stop
    on their own convergence test or validation patience, where their separate fit with
    that tol or validation stops (``packsvm.column_stops``, ``packsvm.validation``); the
    pass ends when all have stopped.

    Parameters
    ----------
    estimator : PackSVC, PackSVR or PackOneClassSVM
        The estimator whose parameters are searched; its other parameters hold for every
        grid point.
    param_grid : dict or list of dict
        Parameter names to lists of values, as GridSearchCV's.
    cv : int, cross-validation splitter or iterable, default=5
        An int (StratifiedKFold for classifiers, KFold otherwise, unshuffled, as
        scikit-learn's ``check_cv``), a scikit-learn splitter, or an iterable of (train,
        test) index arrays. The test sets must be disjoint and each train set the rows
        outside its test set.
    scoring : str, callable or None, default=None
        None for the estimator's own score (accuracy, or R^2 for PackSVR), or one
        scikit-learn scorer that needs only ``predict`` or ``decision_function``.
        PackOneClassSVM has no score of its own: give one ("accuracy", "f1", ...), and
        labels y, +1 inlier and -1 outlier.
    refit : bool, default=True
        Keep the best grid point's refit column as ``best_estimator_``.
    memory_limit : int or None, default=None
        Bytes per rank a pass's table may take (None: the machine's memory over the ranks
        that share it); a grid that would not fit is refused in one line before training.
    verbose : int, default=0
        Above 0, rank 0 tells each pass and its memory per stored row, and shows its
        progress.
    scores : {"pass", "progressive"}, default="pass"
        "pass": after training, one predict pass over the training rows scores each row
        with the final columns that held it out. "progressive": each row sampled during
        training is scored by the decision values its held-out columns computed before the
        row's step, at its last sampling (no second pass: the scoring costs one gather).
        Rows never sampled (fewer iterations than rows) are left out
        (``split<i>_scored_rows`` counts the rest), and a row drawn early is judged by
        the early, unaveraged SGD iterate, so the estimate runs below the pass's, most for
        the grid points that converge slowest (large C): it favours small C.
    n_jobs : int or None, default=None
        The numba threads of each rank during the passes, where GridSearchCV's n_jobs is
        the fits run side by side: None or -1 for the rank's share of its node's cores (what
        every fit takes by default), k > 0 for k threads (at most numba's maximum). The
        ranks are mpiexec's.
    return_train_score : bool, default=False
        Only False: the columns' scores on their own training rows would take a predict
        pass over every row for every column; True is refused in one line.

    Attributes
    ----------
    cv_results_ : dict
        GridSearchCV's keys: ``mean_test_score``, ``std_test_score``, ``rank_test_score``,
        ``split<i>_test_score``, ``params``, ``param_<name>``, and the fit and score times
        (a pass's seconds spread evenly over its grid points, std 0); besides them,
        ``split<i>_scored_rows``: the held-out rows each score is from (all of the fold's
        with ``scores="pass"``, those sampled during training with "progressive"), and
        ``converged``: whether the grid point's columns showed no sign of stopping short
        (``packsvm.convergence``, on their sigma T and the pass's loss windows).
    best_index_ : int
        The best grid point's index in ``cv_results_``.
    best_params_ : dict
        The best grid point's parameters.
    best_score_ : float
        The best grid point's mean cross-validated score.
    best_estimator_ : PackSVC, PackSVR or PackOneClassSVM
        The best grid point's refit column, a fitted estimator.
    grid_passes_ : list of dict
        Each pass's parameters, seconds, memory line and the iteration it resumed from (None:
        it started afresh).

    Raises
    ------
    PPackError
        In one line, for what the columns cannot do: ``probability=True`` (the columns are
        not calibrated), sigma instead of C, a one-class search without scoring or labels, several scorers at
        once, a grid that would not fit in memory.

    Notes
    -----
    Under mpiexec every rank calls ``fit`` with the same data, as PackSVC's ``fit``; the
    folds are computed on rank 0 and broadcast, so every rank trains the same columns.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from ppack import PackSVC
    >>> from ppack.model_selection import PackGridSearchCV
    >>> X, y = load_iris(return_X_y=True)
    >>> search = PackGridSearchCV(PackSVC(epochs=2), {"C": [1, 10], "gamma": [0.1, 0.5]}, cv=3)
    >>> search.fit(X, y).best_params_ in search.cv_results_["params"]
    True
    """

    def __init__(self, estimator, param_grid, cv=5, scoring=None, refit=True, memory_limit=None, verbose=0,
                 scores="pass", n_jobs=None, return_train_score=False):
        self.estimator = estimator
        self.param_grid = param_grid
        self.cv = cv
        self.scoring = scoring
        self.refit = refit
        self.memory_limit = memory_limit
        self.verbose = verbose
        self.scores = scores
        self.n_jobs = n_jobs
        self.return_train_score = return_train_score

    @property
    def _estimator_type(self):
        return getattr(self.estimator, "_estimator_type", None)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        base = self.estimator.__sklearn_tags__()
        tags.estimator_type = base.estimator_type
        tags.classifier_tags = base.classifier_tags
        tags.regressor_tags = base.regressor_tags
        tags.input_tags.sparse = base.input_tags.sparse
        return tags

    def fit(self, X, y=None, groups=None, sample_weight=None, *, checkpoint: str | os.PathLike | None = None,
            checkpoint_every_seconds: float | None = None, checkpoint_every_packs: int | None = None,
            resume: bool = False) -> "PackGridSearchCV":
        """Search the grid on data every rank holds.

        Parameters
        ----------
        X : array or sparse matrix of shape (n_samples, n_features)
            The rows.
        y : array of shape (n_samples,)
            Their labels or targets.
        groups : array of shape (n_samples,) or None
            Group labels for a group splitter.
        sample_weight : array of shape (n_samples,) or None
            Weights on the rows' loss (a held-out row's is 0 for its fold).
        checkpoint : str, os.PathLike or None, default=None
            File for each pass's state, as PackSVC's ``fit`` writes it; the checkpoint names
            the grid (C values, kernel settings, folds), and holds each column's stop with
            ``tol``. With several passes, pass i (from 0) writes ``<stem>.pass<i><suffix>``.
        checkpoint_every_seconds : float or None, default=None
            Seconds between checkpoints.
        checkpoint_every_packs : int or None, default=None
            Packs between checkpoints.
        resume : bool, default=False
            Continue each pass from its checkpoint when it holds a complete one (a pass
            that had ended goes straight to its scores).

        Returns
        -------
        PackGridSearchCV
            This search, fitted.

        """
        estimator = self.estimator
        comm = estimator._comm()
        refuse_unsupported(estimator)
        name = grid_parameter(estimator)  # C, or nu for one-class
        default = 1.0 if estimator.get_params()[name] is None else estimator.get_params()[name]
        if name == "nu" and self.scoring is None:
            raise PPackError("scoring: PackOneClassSVM has no score of its own; give one, as 'accuracy' or 'f1' "
                             "against y's labels (+1 inlier, -1 outlier)")
        if name == "nu" and y is None:
            raise PPackError("y: a one-class search trains without labels but scores its held-out rows against "
                             "them; give y (+1 inlier, -1 outlier)")
        if not isinstance(self.refit, bool):
            raise PPackError(f"refit: True or False (one scorer), got {self.refit!r}")
        if isinstance(self.scoring, (list, tuple, set, dict)):
            raise PPackError("scoring: one scorer (a name or a callable); several at once are not supported yet")
        if self.return_train_score:
            raise PPackError("return_train_score: only False; the training rows' scores of every column would take "
                             "a predict pass over every row for every column")
        if self.n_jobs is not None and (not isinstance(self.n_jobs, (int, np.integer)) or isinstance(self.n_jobs, bool)
                                        or not (self.n_jobs == -1 or self.n_jobs > 0)):
            raise PPackError(f"n_jobs: None, -1 (the rank's share of its node's cores) or a positive count of "
                             f"threads, got {self.n_jobs!r}")
        scorer = None if self.scoring is None else check_scoring(estimator, scoring=self.scoring)
        n = X.shape[0]
        folds, n_splits = self._folds(comm, X, y, groups, n)
        candidates = list(ParameterGrid(self.param_grid))
        if not candidates:
            raise PPackError("param_grid: no grid points")
        # (the other parameters' setting, the kernels' reduction) -> [(candidate index, kernel setting, C)]
        passes = defaultdict(list)
        for index, params in enumerate(candidates):
            other = tuple(sorted((k, _hashable(v)) for k, v in params.items() if k not in SHARED_IN_A_PASS))
            setting = tuple(sorted((k, _hashable(v)) for k, v in params.items() if k in KERNEL_PARAMS))
            reduction = _reduction(params.get("kernel", estimator.get_params()["kernel"]))
            passes[other, reduction].append((index, setting, params.get(name, default)))
        scores = np.full((len(candidates), n_splits), np.nan)
        scored_rows = np.zeros((len(candidates), n_splits), dtype=np.int64)
        fit_time, score_time = np.zeros(len(candidates)), np.zeros(len(candidates))
        converged = np.zeros(len(candidates), dtype=bool)
        best = None  # (mean score, candidate index, its pass, its grid point)
        self.grid_passes_ = []
        with numba_threads(None if self.n_jobs == -1 else self.n_jobs):  # the passes' threads, restored after
            for (other, _), members in passes.items():
                template = clone(estimator).set_params(**{k: candidates[members[0][0]][k] for k, _ in other})
                settings = list(dict.fromkeys(setting for _, setting, _ in members))  # in the grid's order
                Cs = sorted({float(C) for _, _, C in members})
                console = Console(type(self).__name__, int(self.verbose), comm.Get_rank()) if self.verbose else None
                # the pass's progress as a fit shows it (unless the estimator has its own callback)
                bar = None if console is None or template.progress is not None else console.progress()
                if bar is not None:
                    template.set_params(progress=pack_callback(bar))
                try:
                    fit = train_grid(template, X, y, Cs, folds, n_splits, sample_weight=sample_weight,
                                     memory_limit=self.memory_limit, console=console, scores=self.scores,
                                     kernels=[dict(setting) for setting in settings],
                                     checkpoint=_pass_checkpoint(checkpoint, len(self.grid_passes_), len(passes)),
                                     checkpoint_every_seconds=checkpoint_every_seconds,
                                     checkpoint_every_packs=checkpoint_every_packs, resume=resume)
                finally:
                    if bar is not None:
                        bar.close()
                        template.set_params(progress=None)  # the refit models do not keep the bar
                for index, setting, C in members:
                    g = settings.index(setting) * len(Cs) + Cs.index(float(C))
                    for f in range(n_splits):
                        rows, decisions, labels = fit.held_out(g, f)
                        scores[index, f] = self._score(fit.template, scorer, decisions, labels, rows)
                        scored_rows[index, f] = len(rows)
                    converged[index] = fit.converged(g)
                    fit_time[index] = fit.seconds["train"] / len(members)
                    score_time[index] = fit.seconds["score"] / len(members)
                    mean = float(np.mean(scores[index]))
                    if best is None or mean > best[0] or (mean == best[0] and index < best[1]):
                        best = (mean, index, fit, g)
                self.grid_passes_.append({"params": dict(other), "kernels": [dict(setting) for setting in settings],
                                          name: Cs, "columns": fit.table.n_columns,
                                          "seconds": dict(fit.seconds), "memory": fit.memory.line(),
                                          "resumed_from": fit.resumed_from})
        self.cv_results_ = _results(candidates, scores, fit_time, score_time)
        self.cv_results_["converged"] = converged  # packsvm.convergence's verdict on its columns
        for f in range(n_splits):
            self.cv_results_[f"split{f}_scored_rows"] = scored_rows[:, f]
        self.best_index_ = int(np.argmin(self.cv_results_["rank_test_score"]))
        self.best_params_ = candidates[self.best_index_]
        self.best_score_ = float(self.cv_results_["mean_test_score"][self.best_index_])
        self.n_splits_ = n_splits
        self.scorer_ = scorer if scorer is not None else "score"
        self.multimetric_ = False
        if self.refit:
            start = MPI.Wtime()
            _, _, fit, g = best  # the pass of best_index_ (the first of the highest mean, as the ranks)
            self.best_estimator_ = fit.refit(g)
            self.refit_time_ = MPI.Wtime() - start
        return self

    def _folds(self, comm, X, y, groups, n):
        """(each row's fold (n,) int64, or -1 for a row in no test set; the number of splits):
        on rank 0 from ``cv``, broadcast. A splitter whose train sets are not the complements of
        disjoint test sets is refused in one line."""
        folds = np.full(n, -1, dtype=np.int64)
        header = np.zeros(2, dtype=np.int64)  # n_splits, and 0 or the split that breaks the rule + 1
        if comm.Get_rank() == 0:
            splitter = check_cv(self.cv, y, classifier=is_classifier(self.estimator))
            splits = list(splitter.split(X, y, groups))
            header[0] = len(splits)
            for f, (train, test) in enumerate(splits):
                test = np.asarray(test)
                if np.any(folds[test] >= 0) or len(train) + len(test) != n or \
                        np.intersect1d(train, test).size:
                    header[1] = f + 1
                    break
                folds[test] = f
        collectives = Collectives(comm)
        collectives.broadcast(header)
        if header[1]:
            raise PPackError(f"cv: split {header[1] - 1}'s train set is not the rows outside its test set, or the "
                             "test sets overlap; a grid pass trains each fold's columns on every row outside its "
                             "test set (KFold, StratifiedKFold, GroupKFold and the like)")
        if header[0] < 2:
            raise PPackError(f"cv: at least 2 splits, got {header[0]}")
        return collectives.broadcast(folds), int(header[0])

    @staticmethod
    def _score(template, scorer, decisions, labels, rows):
        """A fold's score of one grid point from its held-out decision values."""
        if scorer is None:
            return template.validation_score(decisions, labels)
        view = _HeldOut(template, decisions)
        try:
            return float(scorer(view, rows.reshape(-1, 1), labels))
        except AttributeError as error:
            if "predict_proba" in str(error):
                raise PPackError(f"scoring: {scorer} needs predict_proba, which grid columns do not give; use a "
                                 "scorer on predict or decision_function") from None
            raise

    # -- delegation to the best estimator ---------------------------------------------
    def _check_refit(self):
        if not self.refit:
            raise PPackError("this PackGridSearchCV was fitted with refit=False: no best_estimator_ to predict with")
        if not hasattr(self, "best_estimator_"):
            from sklearn.exceptions import NotFittedError
            raise NotFittedError("This PackGridSearchCV instance is not fitted yet. Call 'fit' first.")
        return self.best_estimator_

    def predict(self, X) -> np.ndarray:
        """Predict with the best estimator.

        Parameters
        ----------
        X : array or sparse matrix of shape (n_samples, n_features)
            The rows.

        Returns
        -------
        ndarray of shape (n_samples,)
            The best estimator's predictions.

        """
        return self._check_refit().predict(X)

    @available_if(lambda self: hasattr(self.estimator, "decision_function"))
    def decision_function(self, X) -> np.ndarray:
        """Decision values of the best estimator.

        Parameters
        ----------
        X : array or sparse matrix of shape (n_samples, n_features)
            The rows.

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
            The best estimator's decision values.

        """
        return self._check_refit().decision_function(X)

    @available_if(lambda self: hasattr(self.estimator, "score_samples"))
    def score_samples(self, X) -> np.ndarray:
        """The best estimator's raw scores (PackOneClassSVM's ``score_samples``) of the rows X
        (n_samples, n_features): (n_samples,), larger for more normal rows."""
        return self._check_refit().score_samples(X)

    def score(self, X, y=None) -> float:
        """The search's score (``scoring``, else the estimator's own) of the best estimator.

        Parameters
        ----------
        X : array or sparse matrix of shape (n_samples, n_features)
            The rows.
        y : array of shape (n_samples,)
            Their labels or targets.

        Returns
        -------
        float
            The score.

        """
        estimator = self._check_refit()
        if self.scoring is None:
            return estimator.score(X, y)
        return float(self.scorer_(estimator, X, y))

    @property
    def classes_(self):
        return self._check_refit().classes_

    @property
    def n_features_in_(self):
        return self._check_refit().n_features_in_


class _HeldOut:
    """What a scikit-learn scorer asks of an estimator, answered from a column's held-out
    decision values: X is the rows' positions (n, 1), ignored."""

    def __init__(self, template, decisions):
        self._template, self._decisions = template, decisions
        self.classes_ = getattr(template, "classes_", None)
        self._estimator_type = template.__sklearn_tags__().estimator_type

    def __sklearn_tags__(self):
        base = {"classifier": ClassifierMixin, "outlier_detector": OutlierMixin}.get(self._estimator_type,
                                                                                  RegressorMixin)
        return type("_Tagged", (base, BaseEstimator), {})().__sklearn_tags__()

    def decision_function(self, X):
        return self._decisions

    def predict(self, X):
        return self._template.labels_of(self._decisions)


def _reduction(kernel):
    """What a kernel's values are computed from ("dot" or "l1"): the settings of one reduction
    share a pass; a kernel name the estimator would refuse gets a pass of its own."""
    facts = KERNEL_FACTS.get(kernel) if isinstance(kernel, str) else None
    return facts.reduction if facts is not None else repr(kernel)


def _hashable(value):
    return tuple(value) if isinstance(value, list) else value


def _results(candidates, scores, fit_time, score_time):
    """GridSearchCV's cv_results_ for the candidates' (n_candidates, n_splits) scores."""
    results = {"mean_fit_time": fit_time, "std_fit_time": np.zeros(len(candidates)),
               "mean_score_time": score_time, "std_score_time": np.zeros(len(candidates))}
    names = sorted({name for params in candidates for name in params})
    for name in names:
        column = np.ma.MaskedArray(np.empty(len(candidates), dtype=object), mask=True)
        for k, params in enumerate(candidates):
            if name in params:
                column[k] = params[name]
        results[f"param_{name}"] = column
    results["params"] = candidates
    for f in range(scores.shape[1]):
        results[f"split{f}_test_score"] = scores[:, f]
    mean = scores.mean(axis=1)
    results["mean_test_score"] = mean
    results["std_test_score"] = scores.std(axis=1)
    finite = np.where(np.isnan(mean), -np.inf, mean)
    results["rank_test_score"] = np.asarray(rankdata(-finite, method="min"), dtype=np.int32)
    return results


def _pass_checkpoint(path, i, passes):
    """The checkpoint file of pass i of ``passes``: ``path`` itself for one pass, else
    ``<stem>.pass<i><suffix>`` beside it; None without a path."""
    if path is None or passes == 1:
        return path
    path = Path(path)
    return path.with_name(f"{path.stem}.pass{i}{path.suffix}")
