"""Convert LIBSVM text (plain, gz, bz2 or xz) to the ppack HDF5 layout, in two streaming passes.

Pass 1 parses the text chunk by chunk for the sizes (rows, columns, stored entries,
longest row) and the largest value; pass 2 parses it again and fills the pre-sized
datasets chunk by chunk. Memory is bounded by one chunk of text and its rows, whatever
the size of the file.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from ..atomic import atomic_h5_write
from ..errors import InputError
from ..registry import STORAGES
from .hdf5 import (DENSITY_CUTOFF, H5Header, create_layout, default_value_scale, quantize, stored_dtype,
                   why_unfit)
from .libsvm import iter_libsvm_chunks

DENSE_BLOCK_BYTES = 32 << 20  # largest dense block of rows built at once, in the stored dtype
COMPRESSIONS = ("gzip", "lzf", None)


@dataclass(frozen=True)
class TextSizes:
    """What pass 1 learns about the whole text."""

    n_samples: int
    n_features: int  # as given, else the largest index
    nnz: int  # index:value pairs in all rows
    max_row_nnz: int  # most pairs on one row
    largest: float  # largest value (0 when there are no pairs)
    smallest: float  # smallest value (0 when there are no pairs)


def scan(src, n_features=None):
    """Pass 1: parse src without keeping rows; returns its TextSizes."""
    n = nnz = max_idx = max_nnz = 0
    largest, smallest = -math.inf, math.inf
    for chunk in iter_libsvm_chunks(src, n_features):
        n += chunk.n_rows
        nnz += len(chunk.values)
        max_idx = max(max_idx, chunk.max_index)
        max_nnz = max(max_nnz, chunk.max_row_nnz)
        if len(chunk.values):
            largest = max(largest, float(chunk.values.max()))
            smallest = min(smallest, float(chunk.values.min()))
    if not nnz:
        largest = smallest = 0.0
    return TextSizes(n, n_features if n_features is not None else max_idx, nnz, max_nnz, largest, smallest)


def convert(src: str | os.PathLike, dst: str | os.PathLike, n_features: int | None = None, storage: str = "auto",
            dtype=np.float64, compression: str | None = "gzip", value_scale: float | None = None) -> H5Header:
    """Read the LIBSVM file src and write it to dst in the ppack HDF5 layout.

    src is read twice, one chunk at a time; dst is replaced atomically (a failure leaves no
    file and an existing dst untouched). Not collective: under MPI one rank calls it.

    Parameters
    ----------
    src : str or os.PathLike
        LIBSVM / SVMlight text, plain or compressed (gz, bz2, xz).
    dst : str or os.PathLike
        The HDF5 file to write.
    n_features : int or None, default=None
        Number of columns (None: the largest index in src); give it when a test file may not
        use the last feature of its training file.
    storage : {'auto', 'dense', 'csr'}, default='auto'
        'auto' is csr when under DENSITY_CUTOFF of the entries are stored.
    dtype : numpy.dtype, type or str, default=numpy.float64
        float64, float32, float16 or uint8 for the stored values.
    compression : {'gzip', 'lzf'} or None, default='gzip'
        The HDF5 filter of the datasets.
    value_scale : float or None, default=None
        Stored value = value / value_scale (None: 1/255 for uint8 when every value is at most
        1, else 1).

    Returns
    -------
    H5Header
        The written file's sizes, storage and stored type.

    Raises
    ------
    InputError
        For a malformed line, or a value the dtype cannot hold (the message names the line).

    Examples
    --------
    >>> from pathlib import Path
    >>> from ppack.data.convert import convert
    >>> _ = Path("small.txt").write_text("+1 1:0.5 3:1\\n-1 2:0.25\\n")
    >>> header = convert("small.txt", "small.h5")
    >>> header.n_samples, header.n_features, header.storage
    (2, 3, 'dense')
    """
    if storage not in ("auto",) + STORAGES:
        raise InputError(f"storage must be 'auto', 'dense' or 'csr', got {storage!r}")
    dtype = stored_dtype(dtype)
    if compression not in COMPRESSIONS:
        raise InputError(f"compression must be 'gzip', 'lzf' or None, got {compression!r}")
    if value_scale is not None and not (math.isfinite(value_scale) and value_scale > 0):
        raise InputError(f"value_scale must be a positive number, got {value_scale!r}")
    if os.path.abspath(os.fspath(src)) == os.path.abspath(os.fspath(dst)):
        raise InputError("the output file must differ from the input file", dst)
    sizes = scan(src, n_features)
    if sizes.n_features == 0:
        raise InputError("no line has a feature (index:value); pass n_features", src)
    n, d = sizes.n_samples, sizes.n_features
    if storage == "auto":
        storage = "csr" if sizes.nnz < DENSITY_CUTOFF * n * d else "dense"
    if value_scale is None:
        value_scale = default_value_scale(dtype, sizes.largest)
    value_scale = float(value_scale)
    max_row_nnz = sizes.max_row_nnz if storage == "csr" else d

    def write(f):
        ds = create_layout(f, n, d, storage, dtype, sizes.nnz, max_row_nnz, value_scale, compression)
        if storage == "csr":
            ds["indptr"][0] = 0
        pos = 0  # pairs written so far
        for chunk in iter_libsvm_chunks(src, d):
            rows = slice(chunk.first_row, chunk.first_row + len(chunk.labels))
            if rows.stop > n:
                raise InputError("the file changed while it was converted", src)
            if not len(chunk.labels):
                continue
            ds["y"][rows] = chunk.labels
            stored = _quantized(chunk, dtype, value_scale, src)
            if storage == "csr":
                if len(stored):
                    ds["data"][pos:pos + len(stored)] = stored
                    ds["indices"][pos:pos + len(stored)] = chunk.indices
                ds["indptr"][rows.start + 1:rows.stop + 1] = chunk.indptr[1:] + pos
                pos += len(stored)
            else:
                _write_dense(ds["X"], chunk, stored, d)
            del chunk, stored  # free them before the next chunk is parsed

    atomic_h5_write(os.fspath(dst), write)
    return H5Header(n, d, storage, max_row_nnz, dtype, value_scale)


def _quantized(chunk, dtype, value_scale, src):
    """The chunk's values in the stored dtype; InputError naming the line of the first that does not fit."""
    stored, bad = quantize(chunk.values, dtype, value_scale)
    if bad is not None:
        why = why_unfit(float(chunk.values[bad]), dtype, value_scale)
        raise InputError(f"line {chunk.line_of_pair(bad)}: {why}", src)
    return stored


def _write_dense(X, chunk, stored, d):
    """Write the chunk's rows to the dense dataset X, in blocks of at most DENSE_BLOCK_BYTES."""
    step = max(1, DENSE_BLOCK_BYTES // (d * stored.dtype.itemsize))
    for lo in range(0, len(chunk.labels), step):
        hi = min(lo + step, len(chunk.labels))
        a, b = chunk.indptr[lo], chunk.indptr[hi]
        block = np.zeros((hi - lo, d), stored.dtype)
        rows = np.repeat(np.arange(hi - lo), np.diff(chunk.indptr[lo:hi + 1]))
        block[rows, chunk.indices[a:b]] = stored[a:b]
        X[chunk.first_row + lo:chunk.first_row + hi] = block
