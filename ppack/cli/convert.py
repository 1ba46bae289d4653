"""`convert INPUT OUTPUT.h5`: LIBSVM/SVMlight text to the ppack HDF5 layout (rank 0 converts)."""
import time

import numpy as np

from ..data.convert import convert
from ..mpi.comm import on_rank0
from ..registry import DTYPES, STORAGES
from .common import Report, check_outputs


def add_parser(sub):
    c = sub.add_parser("convert", help="LIBSVM/SVMlight text (plain, .gz, .bz2, .xz) to ppack HDF5")
    c.add_argument("input", help="LIBSVM text file")
    c.add_argument("output", help="HDF5 file to write (.h5)")
    c.add_argument("--n-features", type=int, default=None,
                   help="number of features (default: the largest index in the file)")
    c.add_argument("--storage", choices=("auto",) + STORAGES, default="auto",
                   help="auto: csr when fewer than 25%% of the entries are nonzero (default)")
    c.add_argument("--dtype", choices=tuple(DTYPES), default="float64",
                   help="feature value type in the file (default float64)")
    c.add_argument("--quiet", action="store_true", help="print only errors")


def run(comm, args):
    check_outputs(comm, {"output": args.output})
    start = time.perf_counter()
    header = on_rank0(comm, convert, args.input, args.output, n_features=args.n_features, storage=args.storage,
                      dtype=np.dtype(args.dtype))
    if header is not None:  # rank 0
        Report(comm, args.quiet)(f"wrote {args.output}: {header.n_samples} rows, {header.n_features} features, "
                                 f"{header.storage} storage, {time.perf_counter() - start:.2f} s")
