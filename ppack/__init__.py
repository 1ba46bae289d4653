"""ppack: P-packSVM, distributed primal SGD training of kernel SVMs under MPI, and linear SVMs
under block averaging."""
from .base import load_model
from .data.shard import Shard, load_shard
from .errors import InputError, PPackError
from .linear.estimator import BlockAveragedSVC
from .packsvm.estimator import PackSVC

__version__ = "0.1.0"
__all__ = ["PackSVC", "BlockAveragedSVC", "load_model", "Shard", "load_shard", "PPackError", "InputError",
           "__version__"]
