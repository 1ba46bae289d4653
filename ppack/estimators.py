"""The public estimators, as ``from ppack import PackSVC`` gives them: the trainers' classes
(``packsvm.estimator``, ``linear.estimator``) on scikit-learn's estimator bases when
scikit-learn is installed, and ``load_model``, which returns them.

With scikit-learn they are its estimators: ``BaseEstimator`` (get_params, set_params, clone,
repr) and ``ClassifierMixin`` (``RegressorMixin`` for PackSVR, ``OutlierMixin`` for
PackOneClassSVM), with its input check (``check_array``), ``NotFittedError``,
``DataConversionWarning`` and tags in place of the trainers' own. Without it a small stand-in
gives get_params and set_params. The trainers never import scikit-learn, so the command line,
which runs them directly, starts without it (and without ``scipy.stats``, which it imports).
"""
import inspect

from . import base
from .linear import estimator as linear
from .packsvm import estimator as packsvm
from .packsvm import offset_estimator as offset
from .packsvm import libsvm_offset

try:  # scikit-learn is optional
    from sklearn.base import BaseEstimator, ClassifierMixin, OutlierMixin, RegressorMixin
    from sklearn.exceptions import DataConversionWarning, NotFittedError
    from sklearn.utils.validation import check_array
except ImportError:  # tests/test_sklearn.py hides scikit-learn to run this
    BaseEstimator = None

if BaseEstimator is not None:
    class Estimator:
        """Before the trainer's class: scikit-learn's input check, error and warning types and
        tags in place of the trainer's own."""

        not_fitted_error = NotFittedError
        conversion_warning = DataConversionWarning

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


class PackSVC(Estimator, packsvm.PackSVC, *SKLEARN_BASES):
    __doc__ = packsvm.PackSVC.__doc__

    @classmethod
    def svm_type_classes(cls):
        return {"c_svc": PackSVC, "epsilon_svr": PackSVR, "one_class": PackOneClassSVM}


class PackSVR(Estimator, offset.PackSVR, *REGRESSOR_BASES):
    __doc__ = offset.PackSVR.__doc__
    svm_type_classes = PackSVC.svm_type_classes
    if not REGRESSOR_BASES:
        _estimator_type = "regressor"


class PackOneClassSVM(Estimator, offset.PackOneClassSVM, *OUTLIER_BASES):
    __doc__ = offset.PackOneClassSVM.__doc__
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
    __doc__ = linear.BlockAveragedSVC.__doc__


# the public class of each model type (registry.MODEL_TYPES holds the trainers')
ESTIMATORS = {"kernel": PackSVC, "libsvm": LibsvmSVC, "linear": BlockAveragedSVC}


def load_model(path, comm=None):
    """Collective: the fitted estimator stored in a model file, whatever trainer wrote it."""
    return base.load_model(path, comm, ESTIMATORS)
