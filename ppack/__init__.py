"""ppack: P-packSVM, distributed primal SGD training of kernel SVMs under MPI, and linear SVMs
under block averaging.

The public names are imported on first use, so ``import ppack`` and the command line start
fast: the estimators bring numba, h5py and, when installed, scikit-learn.
"""
from importlib import import_module

from .errors import InputError, PPackError

__all__ = ["PackSVC", "PackSVR", "PackOneClassSVM", "BlockAveragedSVC", "load_model", "Shard", "load_shard",
           "PPackError", "InputError", "FeatureScaleWarning", "__version__"]

_LAZY = {"PackSVC": ".estimators", "PackSVR": ".estimators", "PackOneClassSVM": ".estimators",
         "BlockAveragedSVC": ".estimators", "load_model": ".estimators",
         "Shard": ".data.shard", "load_shard": ".data.shard", "FeatureScaleWarning": ".base"}


def __getattr__(name):
    if name == "__version__":
        value = import_module(".version", __name__).version()
    elif name in _LAZY:
        value = getattr(import_module(_LAZY[name], __name__), name)
    else:
        raise AttributeError(f"module 'ppack' has no attribute {name!r}")
    globals()[name] = value  # the next look-up finds it directly
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | {"__version__"})
