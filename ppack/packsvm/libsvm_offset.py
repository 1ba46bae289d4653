"""epsilon-SVR and one-class models read from LIBSVM model files (``model.libsvm_file``): PackSVR
and PackOneClassSVM for predictions, with LIBSVM's rho as ``rho_`` (see ``estimator.LibsvmModel``)."""
from .estimator import LIBSVM_TYPE_CLASSES, LibsvmModel
from .offset_estimator import PackOneClassSVM, PackSVR


class LibsvmSVR(LibsvmModel, PackSVR):
    """An epsilon-SVR model read from a LIBSVM model file: the decision value is the regressed value."""

    def _set_libsvm_fields(self, header):
        self.rho_ = header.rho


class LibsvmOneClassSVM(LibsvmModel, PackOneClassSVM):
    """A one-class model read from a LIBSVM model file: +1 (inlier) where the decision value is > 0."""

    def _set_libsvm_fields(self, header):
        self.rho_ = header.rho


LIBSVM_TYPE_CLASSES.update(epsilon_svr=LibsvmSVR, one_class=LibsvmOneClassSVM)
