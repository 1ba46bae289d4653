"""`convert INPUT OUTPUT.h5`: LIBSVM/SVMlight text to the ppack HDF5 layout (rank 0 converts)."""
import resource
import time

import numpy as np

from ..mpi.comm import on_rank0
from ..registry import STORAGES, STORED_DTYPES
from .common import Report, check_outputs


def add_parser(sub):
    c = sub.add_parser("convert", help="LIBSVM/SVMlight text (plain, .gz, .bz2, .xz) to ppack HDF5")
    c.add_argument("input", help="LIBSVM text file")
    c.add_argument("output", help="HDF5 file to write (.h5)")
    c.add_argument("--n-features", type=int, default=None,
                   help="number of features (default: the largest index in the file)")
    c.add_argument("--storage", choices=("auto",) + STORAGES, default="auto",
                   help="auto: csr when fewer than 25%% of the entries are nonzero (default)")
    c.add_argument("--dtype", choices=tuple(STORED_DTYPES), default="float64",
                   help="stored value type (default float64): float64 keeps every value exactly; float32 "
                        "halves the file (about 7 significant digits); float16 only when about 3 significant "
                        "digits and values up to 65504 are enough; uint8 for pixel-like data in steps of "
                        "--value-scale (0..255 steps)")
    c.add_argument("--value-scale", type=float, default=None,
                   help="stored value = value / VALUE_SCALE (default for uint8: 1/255 when every value is at "
                        "most 1, else 1; 1 for the float types)")
    c.add_argument("--compression", choices=("gzip", "lzf", "none"), default="gzip",
                   help="HDF5 compression of the datasets (default gzip; lzf is faster, none fastest to read)")
    c.add_argument("--quiet", action="store_true", help="print only errors")


def run(comm, args):
    from ..data.convert import convert

    check_outputs(comm, {"output": args.output})
    start = time.perf_counter()
    compression = None if args.compression == "none" else args.compression
    header = on_rank0(comm, convert, args.input, args.output, n_features=args.n_features, storage=args.storage,
                      dtype=np.dtype(args.dtype), compression=compression, value_scale=args.value_scale)
    if header is not None:  # rank 0
        scale = f", value_scale {header.value_scale:.9g}" if header.value_scale != 1.0 else ""
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        Report(comm, args.quiet)(f"wrote {args.output}: {header.n_samples} rows, {header.n_features} features, "
                                 f"{header.storage} storage, {header.dtype}{scale}, "
                                 f"{time.perf_counter() - start:.2f} s, peak memory {peak_mb:.0f} MB")
