"""ppack: P-packSVM, distributed primal SGD training of kernel SVMs under MPI."""
from .data.shard import Shard, load_shard
from .errors import InputError, PPackError
from .estimator import PackSVC

__version__ = "0.1.0"
__all__ = ["PackSVC", "Shard", "load_shard", "PPackError", "InputError", "__version__"]
