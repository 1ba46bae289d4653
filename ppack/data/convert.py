"""Convert LIBSVM text (plain, gz, bz2 or xz) to the ppack HDF5 layout."""

import os

import numpy as np

from ..errors import InputError
from ..registry import STORAGES
from .hdf5 import write_dataset
from .libsvm import read_libsvm


def convert(src, dst, n_features=None, storage="auto", dtype=np.float64, compression="gzip"):
    """Read the LIBSVM file src and write it to dst in the ppack HDF5 layout.

    n_features: number of columns (None: the largest index in src); give it
    when a test file may not use the last feature of its training file.
    storage, dtype, compression: as for hdf5.write_dataset.
    Returns the H5Header of dst. The whole of src is held in memory as CSR
    while converting; dst is replaced atomically.
    """
    if storage not in ("auto",) + STORAGES:
        raise InputError(f"storage must be 'auto', 'dense' or 'csr', got {storage!r}")
    if os.path.abspath(os.fspath(src)) == os.path.abspath(os.fspath(dst)):
        raise InputError("the output file must differ from the input file", dst)
    X, y, info = read_libsvm(src, n_features=n_features, dtype=dtype)
    if info.n_features == 0:
        raise InputError("no line has a feature (index:value); pass n_features", src)
    return write_dataset(dst, X, y, storage=storage, dtype=dtype, compression=compression)
