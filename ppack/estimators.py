"""The public estimators, as ``from ppack import PackSVC`` gives them: the trainers' classes
(``packsvm.estimator``, ``linear.estimator``) on scikit-learn's estimator bases when
scikit-learn is installed, and ``load_model``, which returns them.

With scikit-learn they are its estimators: ``BaseEstimator`` (get_params, set_params, clone,
repr) and ``ClassifierMixin`` (``RegressorMixin`` for PackSVR, ``OutlierMixin`` for
PackOneClassSVM), with its input check (``check_array``), ``NotFittedError``,
``DataConversionWarning``, ``ConvergenceWarning`` and tags in place of the trainers' own.
Without it a small stand-in gives get_params and set_params. The trainers never import
scikit-learn, so the command line, which runs them directly, starts without it (and without
``scipy.stats``, which it imports).
"""
from __future__ import annotations

import inspect
import os

from mpi4py import MPI

from . import base
from .kernels.compute import DEFAULT_WORK_BYTES
from .linear import estimator as linear
from .packsvm import estimator as packsvm
from .packsvm import offset_estimator as offset
from .packsvm import libsvm_offset
from .registry import LINEAR_PARAMS, PACKSVM_PARAMS, VERBOSE, numpydoc_parameters, svm_type_params

try:  # scikit-learn is optional
    from sklearn.base import BaseEstimator, ClassifierMixin, OutlierMixin, RegressorMixin
    from sklearn.exceptions import ConvergenceWarning, DataConversionWarning, NotFittedError
    from sklearn.utils.validation import check_array
except ImportError:  # tests/test_sklearn.py hides scikit-learn to run this
    BaseEstimator = None

if BaseEstimator is not None:
    class Estimator:
        """Before the trainer's class: scikit-learn's input check, error and warning types and
        tags in place of the trainer's own."""

        not_fitted_error = NotFittedError
        conversion_warning = DataConversionWarning
        convergence_warning = ConvergenceWarning

        def _checked_array(self, X):
            return check_array(X, accept_sparse="csr", dtype=self.feature_dtype, input_name="X")

        def __sklearn_tags__(self):
            tags = super().__sklearn_tags__()
            tags.input_tags.sparse = True  # CSR rows are trained on as they are
            if tags.classifier_tags is not None:
                tags.classifier_tags.multi_class = self.MULTICLASS
            return tags

    # after the trainer's class, so that its methods (score, ...) come first
    SKLEARN_BASES = (ClassifierMixin, BaseEstimator)
    REGRESSOR_BASES = (RegressorMixin, BaseEstimator)
    OUTLIER_BASES = (OutlierMixin, BaseEstimator)
else:
    class Estimator:
        """Without scikit-learn: get_params / set_params from the constructor's arguments, as its."""

        _estimator_type = "classifier"

        def get_params(self, deep=True):
            names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
            return {name: getattr(self, name) for name in names}

        def set_params(self, **params):
            for name, value in params.items():
                setattr(self, name, value)
            return self

    SKLEARN_BASES = REGRESSOR_BASES = OUTLIER_BASES = ()


# The constructor parameters the registry does not hold (they are not the command line's).
_RUN_PARAMETERS = {
    "random_state": ("int, numpy.random.RandomState, numpy.random.Generator or None, default=None",
                     "scikit-learn's name for the seed: when given, it is used instead of ``seed``"),
    "comm": ("mpi4py.MPI.Comm or None, default=None",
             "the ranks that train and predict together, every method being collective over them; None is "
             "``MPI.COMM_WORLD``, and ``MPI.COMM_SELF`` keeps each process to itself (e.g. in a grid search)"),
    "work_bytes": (f"int, default={DEFAULT_WORK_BYTES}", "working memory of a rank's kernel sums, in bytes"),
    "progress": ("callable or None, default=None",
                 "called on rank 0 after every pack with the solver's state, its statistics, the number of "
                 "support vectors and T, instead of the ``verbose`` progress lines"),
}
_LINEAR_OTHERS = {
    "solver_options": ("dict or None, default=None",
                       "the solver's own options by name (its entry of ``registry.LINEAR_SOLVER_TABLE``, the "
                       "command line's ``--solver-option NAME=VALUE``), e.g. ``{'tol': 0.01}``"),
    **{name: _RUN_PARAMETERS[name] for name in ("random_state", "comm")},
}


def _public_doc(trainer, table, others, examples):
    """The public class's docstring: the trainer's first paragraph, a Parameters section drawn
    from the registry (``others`` for the rest), the trainer's remaining text as Notes, and
    ``examples`` (run as doctests by tests/test_docstring_examples.py)."""
    summary, _, rest = trainer.__doc__.partition("\n\n")
    names = [name for name in inspect.signature(trainer.__init__).parameters if name != "self"]
    parts = [inspect.cleandoc(summary), numpydoc_parameters(names, {**table, "verbose": VERBOSE}, others)]
    if rest.strip():
        parts.append("Notes\n-----\n" + inspect.cleandoc(rest))
    parts.append("Examples\n--------\n" + inspect.cleandoc(examples))
    return "\n\n".join(parts)


class PackSVC(Estimator, packsvm.PackSVC, *SKLEARN_BASES):
    __doc__ = _public_doc(packsvm.PackSVC, PACKSVM_PARAMS, _RUN_PARAMETERS, """
        Under ``mpiexec -n P`` every rank runs these lines and holds the whole of ``X``; each
        rank trains on its slice.

        >>> import numpy as np
        >>> from ppack import PackSVC
        >>> X = np.array([[0.0, 0.0], [0.2, 0.1], [1.0, 1.0], [0.9, 1.1]])
        >>> y = np.array([0, 0, 1, 1])
        >>> model = PackSVC(gamma=1.0, C=10.0, epochs=50).fit(X, y)
        >>> model.predict([[0.1, 0.0], [1.0, 0.9]])
        array([0, 1])
        >>> model.score(X, y)
        1.0
        """)

    @classmethod
    def svm_type_classes(cls):
        return {"c_svc": PackSVC, "epsilon_svr": PackSVR, "one_class": PackOneClassSVM}


class PackSVR(Estimator, offset.PackSVR, *REGRESSOR_BASES):
    __doc__ = _public_doc(offset.PackSVR, svm_type_params("epsilon_svr"), _RUN_PARAMETERS, """
        >>> import numpy as np
        >>> from ppack import PackSVR
        >>> X = np.linspace(0.0, 3.0, 30).reshape(-1, 1)
        >>> model = PackSVR(gamma=1.0, C=10.0, epsilon=0.05, epochs=100).fit(X, np.sin(X).ravel())
        >>> model.predict([[0.5], [1.5]]).round(1)
        array([0.5, 1. ])
        """)
    svm_type_classes = PackSVC.svm_type_classes
    if not REGRESSOR_BASES:
        _estimator_type = "regressor"


class PackOneClassSVM(Estimator, offset.PackOneClassSVM, *OUTLIER_BASES):
    __doc__ = _public_doc(offset.PackOneClassSVM, svm_type_params("one_class"), _RUN_PARAMETERS, """
        >>> import numpy as np
        >>> from ppack import PackOneClassSVM
        >>> X = np.random.default_rng(0).normal(size=(200, 2))
        >>> model = PackOneClassSVM(gamma=0.5, nu=0.1, epochs=5).fit(X)
        >>> model.predict([[0.0, 0.0], [4.0, 4.0]])
        array([ 1, -1])
        """)
    svm_type_classes = PackSVC.svm_type_classes
    if not OUTLIER_BASES:
        _estimator_type = "outlier_detector"


class LibsvmSVC(packsvm.LibsvmSVC, PackSVC):
    __doc__ = packsvm.LibsvmSVC.__doc__

    @classmethod
    def libsvm_type_classes(cls):
        return {"c_svc": LibsvmSVC, "epsilon_svr": LibsvmSVR, "one_class": LibsvmOneClassSVM}


class LibsvmSVR(libsvm_offset.LibsvmSVR, PackSVR):
    __doc__ = libsvm_offset.LibsvmSVR.__doc__


class LibsvmOneClassSVM(libsvm_offset.LibsvmOneClassSVM, PackOneClassSVM):
    __doc__ = libsvm_offset.LibsvmOneClassSVM.__doc__


class BlockAveragedSVC(Estimator, linear.BlockAveragedSVC, *SKLEARN_BASES):
    __doc__ = _public_doc(linear.BlockAveragedSVC, LINEAR_PARAMS, _LINEAR_OTHERS, """
        >>> import numpy as np
        >>> from ppack import BlockAveragedSVC
        >>> X = np.array([[0.0, 0.0], [0.2, 0.1], [1.0, 1.0], [0.9, 1.1]])
        >>> model = BlockAveragedSVC(solver="dcd", C=10.0).fit(X, [0, 0, 1, 1])
        >>> model.predict([[0.1, 0.0], [1.0, 0.9]])
        array([0, 1])
        """)


# the public class of each model type (registry.MODEL_TYPES holds the trainers')
ESTIMATORS = {"kernel": PackSVC, "libsvm": LibsvmSVC, "linear": BlockAveragedSVC}


def load_model(path: str | os.PathLike, comm: MPI.Comm | None = None) -> PackSVC | BlockAveragedSVC:
    """Collective: the fitted estimator stored in a model file, whatever trainer wrote it.

    Parameters
    ----------
    path : str or os.PathLike
        A model file written by ``save`` (or ``train --model``), or a LIBSVM model file.
    comm : mpi4py.MPI.Comm or None, default=None
        The ranks that load it (each keeps a slice of the support vectors); None is
        ``MPI.COMM_WORLD``.

    Returns
    -------
    PackSVC, PackSVR, PackOneClassSVM or BlockAveragedSVC
        The fitted estimator of the file's model type and SVM type (a LIBSVM model file gives
        the subclass of PackSVC, PackSVR or PackOneClassSVM that reads it).

    Raises
    ------
    PPackError
        On every rank, when the file is missing or is not a model file (the message names the
        file and what was expected).

    Examples
    --------
    >>> import numpy as np
    >>> from ppack import PackSVC, load_model
    >>> X = np.array([[0.0, 0.0], [0.2, 0.1], [1.0, 1.0], [0.9, 1.1]])
    >>> PackSVC(gamma=1.0, C=10.0, epochs=50).fit(X, [0, 0, 1, 1]).save("model.h5")
    >>> model = load_model("model.h5")
    >>> type(model).__name__, model.predict([[1.0, 0.9]])
    ('PackSVC', array([1]))
    """
    return base.load_model(path, comm, ESTIMATORS)
