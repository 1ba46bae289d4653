"""The ppack HDF5 data layout: one file per data set, read by row ranges.

Layout (format_version 1)::

    /                     root attributes:
        format            "ppack-data"
        format_version    1
        n_samples         number of rows
        n_features        number of columns
        storage           "dense" or "csr"
        max_row_nnz       most stored entries in one row (n_features if dense)
    /y                    float64 (n_samples,): the labels as in the source
    /w                    optional float (n_samples,) >= 0: each row's weight on its loss
    /X                    storage "dense": dataset float64, float32, float16 or
                          uint8 of shape (n_samples, n_features), chunked by rows
    /X/data               storage "csr": float64, float32, float16 or uint8 (nnz,)
    /X/indices            int32 (nnz,), 0-based columns, strictly ascending
                          within each row
    /X/indptr             int64 (n_samples + 1,): row r is entries
                          indptr[r]:indptr[r+1]; indptr[0] = 0, indptr[-1] = nnz

A feature's value is the stored value times ``value_scale``, a float attribute
of ``X`` (the dataset when dense, the group when csr; 1 when absent). uint8
storage with value_scale 1/255 holds MNIST-style [0, 1] data in steps of 1/255
exactly, in an eighth of float64's bytes.

Datasets may be gzip- or lzf-compressed (with the shuffle filter). Files are
written atomically: to a hidden temporary file in the target directory, then
renamed over the target.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import h5py
import numpy as np
import scipy.sparse as sp

from ..atomic import atomic_h5_write
from ..errors import InputError
from ..registry import STORAGES, STORED_DTYPES

FORMAT = "ppack-data"
FORMAT_VERSION = 1
DENSITY_CUTOFF = 0.25  # "auto" storage: csr below this fraction of nonzeros

_MAGIC = b"\x89HDF\r\n\x1a\n"
_CHUNK_BYTES = 1 << 20  # target size of one HDF5 chunk
_CHECK_BLOCK = 1 << 22  # stored entries validated per block in read_header
_FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
COMPACT_DTYPES = (np.dtype(np.float16), np.dtype(np.uint8))  # read as float32, tile by tile
GRID_TOLERANCE = 1e-3  # uint8: how far (in steps) a value may sit from k * value_scale


@dataclass(frozen=True)
class H5Header:
    """What a reader needs to know before reading rows."""

    n_samples: int
    n_features: int
    storage: str  # "dense" or "csr"
    max_row_nnz: int
    dtype: np.dtype  # dtype of the stored X values
    value_scale: float = 1.0  # feature value = stored value * value_scale

    @property
    def float_dtype(self):
        """The float type rows are read in by default: float32 for compact storage."""
        return np.dtype(np.float32) if self.dtype in COMPACT_DTYPES else self.dtype


def is_hdf5(path):
    """True when path is a readable file with the HDF5 signature.

    The signature sits at offset 0, or after a user block at 512, 1024, ...
    """
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            offset = 0
            while offset + len(_MAGIC) <= size:
                f.seek(offset)
                if f.read(len(_MAGIC)) == _MAGIC:
                    return True
                offset = 512 if offset == 0 else offset * 2
    except OSError:
        return False
    return False


# ------------------------------------------------------------------ writing


def _float_dtype(dtype):
    dtype = np.dtype(dtype)
    if dtype not in _FLOAT_DTYPES:
        raise InputError(f"dtype must be float32 or float64, got {dtype}")
    return dtype


def stored_dtype(dtype):
    """The numpy dtype for a storage type name or dtype; raises InputError for others."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        dtype = None
    if dtype not in [np.dtype(t) for t in STORED_DTYPES.values()]:
        raise InputError(f"dtype must be one of {', '.join(STORED_DTYPES)}, got {dtype}")
    return dtype


def default_value_scale(dtype, largest):
    """value_scale for uint8 storage of values up to ``largest``: 1/255 for [0, 1] data, else 1."""
    if np.dtype(dtype) == np.uint8 and largest <= 1.0:
        return 1.0 / 255.0
    return 1.0


def quantize(values, dtype, value_scale=1.0):
    """``values / value_scale`` in the stored ``dtype`` (any shape).

    Returns (stored, first_bad): first_bad is the flat position of the first value the
    dtype cannot hold (None when all fit): a non-finite value, beyond the range of
    float32 or float16, or for uint8 not ``k * value_scale`` for an integer k in 0..255
    (within GRID_TOLERANCE of a step, so decimal text of the exact value is accepted).
    """
    dtype = np.dtype(dtype)
    scaled = values if value_scale == 1.0 else np.asarray(values, np.float64) / value_scale
    if dtype == np.uint8:
        steps = np.rint(scaled)
        fit = (steps >= 0) & (steps <= 255) & (np.abs(scaled - steps) <= GRID_TOLERANCE)
        stored = steps.astype(np.uint8) if fit.all() else None
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            stored = np.asarray(scaled).astype(dtype)
        fit = np.isfinite(stored)
    if fit.all():
        return stored, None
    return None, int(np.flatnonzero(~fit.ravel())[0])


def why_unfit(value, dtype, value_scale=1.0):
    """Words for why ``value`` cannot be stored as ``dtype`` (see quantize)."""
    dtype = np.dtype(dtype)
    if not np.isfinite(value):
        return f"value {value} is not finite"
    if dtype == np.uint8:
        return (f"value {value!r} is not k * value_scale ({value_scale:.9g}) for an integer k in 0..255; "
                "choose another --value-scale or a float dtype")
    return f"value {value!r} does not fit {dtype} (largest {float(np.finfo(dtype).max):.6g})"


def _check_compression(compression):
    if compression is None or compression in ("gzip", "lzf"):
        return compression
    if isinstance(compression, int) and not isinstance(compression, bool) and 0 <= compression <= 9:
        return compression  # h5py reads an int as a gzip level
    raise InputError(f"compression must be None, 'gzip', 'lzf' or a gzip level 0-9, "
                     f"got {compression!r}")


def _prepare(X, y):
    """Validate X and y; returns (X as canonical CSR or C-contiguous ndarray, y float64)."""
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        if not X.has_canonical_format:  # unsorted or duplicate entries
            X = X.copy()
            X.sum_duplicates()
    else:
        X = np.ascontiguousarray(X)
        if X.dtype.kind not in "fiu":
            X = X.astype(np.float64)
        if X.ndim != 2:
            raise InputError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
    n, d = X.shape
    if n < 1 or d < 1:
        raise InputError(f"X must have at least one row and one column, got shape {X.shape}")
    if d > np.iinfo(np.int32).max:
        raise InputError(f"n_features={d} does not fit int32 column indices")
    y = np.asarray(y, dtype=np.float64)
    if y.shape != (n,):
        raise InputError(f"y must have shape ({n},) to match X's rows, got {y.shape}")
    if not np.isfinite(y).all():
        raise InputError("y contains NaN or infinite labels")
    return X, y


def _chunked(shape, dtype, compression):
    """create_dataset options: chunks of about _CHUNK_BYTES whole rows, and the filters."""
    if not shape[0]:  # empty datasets cannot be chunked, hence cannot be compressed
        return {}
    row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * np.dtype(dtype).itemsize
    rows = max(1, min(shape[0], _CHUNK_BYTES // max(1, row_bytes)))
    opts = {"chunks": (rows,) + tuple(shape[1:])}
    if compression is not None:
        opts.update(compression=compression, shuffle=True)
    return opts


def create_layout(f, n, d, storage, dtype, nnz=0, max_row_nnz=None, value_scale=1.0, compression=None):
    """Write the root attributes into the open HDF5 file ``f`` and create the empty,
    pre-sized datasets of the layout; returns them by name: "y" and "X" (dense) or
    "data", "indices", "indptr" (csr), for the caller to fill by row ranges.

    nnz: stored entries (csr); max_row_nnz: the longest row (csr; n_features when dense).
    """
    dtype = stored_dtype(dtype)
    compression = _check_compression(compression)
    f.attrs["format"] = FORMAT
    f.attrs["format_version"] = FORMAT_VERSION
    f.attrs["n_samples"] = n
    f.attrs["n_features"] = d
    f.attrs["storage"] = storage
    f.attrs["max_row_nnz"] = d if storage == "dense" else max_row_nnz

    def empty(group, name, shape, kind):
        return group.create_dataset(name, shape=shape, dtype=kind, track_times=False,
                                    **_chunked(shape, kind, compression))

    out = {"y": empty(f, "y", (n,), np.float64)}
    if storage == "csr":
        group = f.create_group("X")
        group.attrs["value_scale"] = float(value_scale)
        out.update(data=empty(group, "data", (nnz,), dtype), indices=empty(group, "indices", (nnz,), np.int32),
                   indptr=empty(group, "indptr", (n + 1,), np.int64))
    else:
        out["X"] = empty(f, "X", (n, d), dtype)
        out["X"].attrs["value_scale"] = float(value_scale)
    return out


def write_dataset(path: str | os.PathLike, X, y, storage: str = "auto", dtype=np.float64,
                  compression: str | int | None = None, value_scale: float | None = None, w=None) -> H5Header:
    """Write X and y to path in the ppack layout.

    An existing file at path is replaced only once the new one is complete. Not collective:
    under MPI one rank calls it.

    Parameters
    ----------
    path : str or os.PathLike
        The HDF5 file to write.
    X : numpy.ndarray or scipy.sparse matrix of shape (n_samples, n_features)
        The rows.
    y : array-like of shape (n_samples,)
        Their labels.
    storage : {'auto', 'dense', 'csr'}, default='auto'
        'auto' is csr when under 25% of X is nonzero.
    dtype : numpy.dtype, type or str, default=numpy.float64
        float64, float32, float16 or uint8 for the stored X values.
    compression : {'gzip', 'lzf'}, int or None, default=None
        The HDF5 filter, or a gzip level 0-9.
    value_scale : float or None, default=None
        Stored value = X / value_scale (None: 1/255 for uint8 when X lies in [0, 1], else 1).
    w : array-like of shape (n_samples,) or None, default=None
        Row weights >= 0 on the rows' loss.

    Returns
    -------
    H5Header
        The written file's sizes, storage and stored type.

    Raises
    ------
    InputError
        For a bad storage, type or compression, or a value the dtype cannot hold (naming its row).

    Examples
    --------
    >>> import numpy as np
    >>> from ppack.data.hdf5 import write_dataset
    >>> header = write_dataset("tiny.h5", np.eye(8), np.tile([1, -1], 4))
    >>> header.n_samples, header.storage
    (8, 'csr')
    """
    dtype = stored_dtype(dtype)
    compression = _check_compression(compression)
    if storage not in ("auto",) + STORAGES:
        raise InputError(f"storage must be 'auto', 'dense' or 'csr', got {storage!r}")
    X, y = _prepare(X, y)
    n, d = X.shape
    if storage == "auto":
        nnz = X.nnz if sp.issparse(X) else np.count_nonzero(X)
        storage = "csr" if nnz < DENSITY_CUTOFF * n * d else "dense"
    if storage == "csr":
        X = sp.csr_matrix(X) if not sp.issparse(X) else X
        max_row_nnz = int(np.diff(X.indptr).max())
        values = X.data
    else:
        X = X.toarray() if sp.issparse(X) else X
        max_row_nnz = d
        values = X
    if value_scale is None:
        value_scale = default_value_scale(dtype, float(values.max()) if values.size else 0.0)
    weights = None if w is None else np.asarray(w, dtype=np.float64)
    if weights is not None and (weights.shape != (n,) or not (np.isfinite(weights).all() and (weights >= 0).all())):
        raise InputError(f"w must hold {n} finite weights >= 0 (one per row), got shape {weights.shape}")
    stored, bad = quantize(values, dtype, value_scale)
    if bad is not None:
        row = bad // d if storage == "dense" else int(np.searchsorted(X.indptr, bad, side="right")) - 1
        raise InputError(f"X: row {row}: {why_unfit(values.ravel()[bad], dtype, value_scale)}")

    def write(f):
        ds = create_layout(f, n, d, storage, dtype, values.size, max_row_nnz, value_scale, compression)
        ds["y"][...] = y
        if storage == "csr":
            if values.size:
                ds["data"][...] = stored
                ds["indices"][...] = X.indices
            ds["indptr"][...] = X.indptr
        else:
            ds["X"][...] = stored
        if weights is not None:
            f.create_dataset("w", data=weights)

    atomic_h5_write(os.fspath(path), write)
    return H5Header(n, d, storage, max_row_nnz, dtype, float(value_scale))


# ------------------------------------------------------------------ reading


def _open(path):
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputError("No such file", path)
    if os.path.isdir(path):
        raise InputError("is a directory, expected a ppack HDF5 file", path)
    if not is_hdf5(path):
        raise InputError("not an HDF5 file (LIBSVM text must first be converted "
                         "to the ppack HDF5 layout)", path)
    try:
        return h5py.File(path, "r")
    except OSError as e:
        raise InputError(f"cannot open HDF5 file: {e}", path) from None


def _attr(f, path, name, expected):
    if name not in f.attrs:
        raise InputError(f"missing root attribute '{name}' (expected {expected})", path)
    value = f.attrs[name]
    if isinstance(value, np.generic):  # so messages show 2, not np.int64(2)
        value = value.item()
    return value.decode() if isinstance(value, bytes) else value


def _int_attr(f, path, name, low):
    value = _attr(f, path, name, f"an integer >= {low}")
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
        raise InputError(f"root attribute '{name}': expected an integer >= {low}, "
                         f"found {value!r}", path)
    return int(value)


def _get_dataset(f, path, name, ndim, kinds, what):
    obj = f.get(name)
    if not isinstance(obj, h5py.Dataset):
        found = "nothing" if obj is None else "a group"
        raise InputError(f"'{name}': expected a dataset ({what}), found {found}", path)
    if obj.ndim != ndim or obj.dtype.kind not in kinds:
        raise InputError(f"'{name}': expected {what}, found {obj.dtype} of shape {obj.shape}",
                         path)
    return obj


def _expect_shape(ds, path, expected, meaning):
    if ds.shape != expected:
        raise InputError(f"'{ds.name.lstrip('/')}': expected shape {expected} "
                         f"({meaning}), found {ds.shape}", path)


def _layout(f, path):
    """Check the attributes and dataset shapes (no data read); returns
    (H5Header, datasets dict)."""
    fmt = _attr(f, path, "format", f"'{FORMAT}'")
    if fmt != FORMAT:
        raise InputError(f"root attribute 'format': expected '{FORMAT}', found {fmt!r}", path)
    version = _attr(f, path, "format_version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise InputError(f"root attribute 'format_version': expected {FORMAT_VERSION}, "
                         f"found {version!r}", path)
    n = _int_attr(f, path, "n_samples", 1)
    d = _int_attr(f, path, "n_features", 1)
    max_row_nnz = _int_attr(f, path, "max_row_nnz", 0)
    storage = _attr(f, path, "storage", "'dense' or 'csr'")
    if storage not in STORAGES:
        raise InputError(f"root attribute 'storage': expected 'dense' or 'csr', "
                         f"found {storage!r}", path)

    y = _get_dataset(f, path, "y", 1, "f", "1-D float labels")
    _expect_shape(y, path, (n,), "n_samples")
    ds = {"y": y}
    if storage == "dense":
        X = _get_dataset(f, path, "X", 2, "fu", "2-D array of float or uint8 values")
        _expect_shape(X, path, (n, d), "n_samples, n_features")
        if max_row_nnz != d:
            raise InputError(f"root attribute 'max_row_nnz': expected {d} (n_features) for "
                             f"dense storage, found {max_row_nnz}", path)
        ds["X"] = X
    else:
        if not isinstance(f.get("X"), h5py.Group):
            raise InputError("'X': expected a group with data, indices and indptr "
                             "for csr storage", path)
        data = _get_dataset(f, path, "X/data", 1, "fu", "1-D float or uint8 values")
        indices = _get_dataset(f, path, "X/indices", 1, "iu", "1-D integer column indices")
        indptr = _get_dataset(f, path, "X/indptr", 1, "iu", "1-D integer row pointers")
        _expect_shape(indices, path, data.shape, "same length as X/data")
        _expect_shape(indptr, path, (n + 1,), "n_samples + 1")
        ds.update(data=data, indices=indices, indptr=indptr)
        X = data
    if X.dtype.name not in STORED_DTYPES:
        raise InputError(f"'{X.name.lstrip('/')}': expected {', '.join(STORED_DTYPES)} values, "
                         f"found {X.dtype}", path)
    holder = f["X"]
    scale = holder.attrs.get("value_scale", 1.0)
    if not (np.ndim(scale) == 0 and np.asarray(scale).dtype.kind in "fiu" and np.isfinite(scale) and scale > 0):
        raise InputError(f"'X' attribute 'value_scale': expected a positive finite number, found {scale!r}", path)
    return H5Header(n, d, storage, max_row_nnz, X.dtype, float(scale)), ds


def _check_indptr(indptr, path, nnz, first_row=0):
    """indptr: int64 row pointers of rows first_row... into a span of nnz entries."""
    steps = np.diff(indptr)
    if steps.size and steps.min() < 0:
        r = first_row + int(np.argmax(steps < 0))
        raise InputError(f"'X/indptr': must be non-decreasing, but row {r} ends at "
                         f"{indptr[r - first_row + 1]} before it starts at "
                         f"{indptr[r - first_row]}", path)
    if indptr[0] < 0 or indptr[-1] > nnz:
        raise InputError(f"'X/indptr': entries must lie in [0, {nnz}] (len of X/data), "
                         f"found {indptr[0]}..{indptr[-1]}", path)
    return steps


def _check_indices(indices, local_indptr, path, n_features, first_row):
    """Check column indices of consecutive rows: range and strict ascent.

    indices: the rows' entries; local_indptr: their row pointers, starting at 0.
    """
    if not indices.size:
        return
    lo, hi = indices.min(), indices.max()
    if lo < 0 or hi >= n_features:
        bad = int(np.argmax((indices < 0) | (indices >= n_features)))
        r = first_row + int(np.searchsorted(local_indptr, bad, side="right")) - 1
        raise InputError(f"'X/indices': column {indices[bad]} in row {r} is outside "
                         f"[0, {n_features}) (n_features)", path)
    falls = np.diff(indices) <= 0
    # A drop between the last entry of a row and the first of the next is fine.
    ends = local_indptr[1:-1] - 1
    falls[ends[(ends >= 0) & (ends < falls.size)]] = False
    if falls.any():
        bad = int(np.argmax(falls)) + 1
        r = first_row + int(np.searchsorted(local_indptr, bad, side="right")) - 1
        raise InputError(f"'X/indices': columns of row {r} are not strictly ascending "
                         f"({indices[bad - 1]} then {indices[bad]})", path)


def read_header(path, check_indices=True):
    """Validate the layout of the ppack HDF5 file at path; returns H5Header.

    Reads the attributes, the shapes, y and X/indptr (one value per row). With
    check_indices (csr storage only) the column indices are also streamed in
    blocks and checked for range and ascending order; read_rows checks its own
    slice regardless, so callers that read every row may skip this.
    """
    with _open(path) as f:
        header, ds = _layout(f, path)
        if header.storage == "csr":
            indptr = ds["indptr"][...].astype(np.int64)
            nnz = ds["data"].shape[0]
            if indptr[0] != 0 or indptr[-1] != nnz:
                raise InputError(f"'X/indptr': expected first entry 0 and last {nnz} "
                                 f"(len of X/data), found {indptr[0]} and {indptr[-1]}", path)
            steps = _check_indptr(indptr, path, nnz)
            longest = int(steps.max())
            if header.max_row_nnz != longest:
                raise InputError(f"root attribute 'max_row_nnz': expected {longest} "
                                 f"(longest row in X/indptr), found {header.max_row_nnz}", path)
            if check_indices:
                row = 0
                while row < header.n_samples:
                    # Rows up to ~_CHECK_BLOCK entries, at least one row.
                    end = int(np.searchsorted(indptr, indptr[row] + _CHECK_BLOCK, side="right")) - 1
                    end = min(max(end, row + 1), header.n_samples)
                    span = ds["indices"][indptr[row]:indptr[end]]
                    _check_indices(span, indptr[row:end + 1] - indptr[row], path,
                                   header.n_features, row)
                    row = end
    return header


def peek_header(path):
    """The H5Header from the attributes and dataset shapes alone (no rows read): a cheap
    check of a file that is read later."""
    with _open(path) as f:
        return _layout(f, path)[0]


def read_rows(path, start, stop, dtype=None):
    """Read rows [start, stop) of a ppack HDF5 file; only those rows are read.

    Returns (X_local, y_local): X_local is a C-contiguous ndarray of shape
    (stop - start, n_features) for dense storage or a scipy CSR matrix of that
    shape (int32 indices) for csr storage, holding the feature values (stored
    values times value_scale); y_local float64 (stop - start,).
    dtype: float32/float64 for X_local, None for the header's float_dtype.
    """
    X, y, header = read_stored_rows(path, start, stop)
    dtype = header.float_dtype if dtype is None else _float_dtype(dtype)
    return as_float(X, dtype, header.value_scale), y


def as_float(X, dtype, value_scale=1.0):
    """Stored rows (dense array or CSR) as feature values of the float ``dtype``.

    The product with value_scale is taken in float64 and then rounded once, so every
    reader of a file gets the same values.
    """
    values = X.data if sp.issparse(X) else X
    if value_scale == 1.0:
        values = values.astype(dtype, copy=False)
    else:
        values = (values * np.float64(value_scale)).astype(dtype, copy=False)
    if sp.issparse(X):
        X = sp.csr_matrix((values, X.indices, X.indptr), shape=X.shape)
        X.has_sorted_indices = True
        return X
    return np.ascontiguousarray(values)


def read_weights(path, start, stop):
    """Rows [start, stop) of the optional dataset ``w`` (float64), or None when the file has none."""
    with _open(path) as f:
        header, _ = _layout(f, path)
        ds = f.get("w")
        if ds is None:
            return None
        if not isinstance(ds, h5py.Dataset) or ds.shape != (header.n_samples,) or ds.dtype.kind not in "fiu":
            raise InputError(f"'w': expected a 1-D dataset of {header.n_samples} numbers (n_samples row weights)",
                             path)
        w = ds[start:stop].astype(np.float64)
    if not (np.isfinite(w).all() and (w >= 0).all()):
        r = start + int(np.flatnonzero(~(np.isfinite(w) & (w >= 0)))[0])
        raise InputError(f"'w': the weight of row {r} is {w[r - start]}; expected a finite number >= 0", path)
    return w


def read_stored_rows(path, start, stop):
    """Rows [start, stop) as stored (any stored dtype, not scaled): (X_local, y_local, H5Header)."""
    start, stop = int(start), int(stop)
    with _open(path) as f:
        header, ds = _layout(f, path)
        if not 0 <= start <= stop <= header.n_samples:
            raise InputError(f"row range [{start}, {stop}) is not within "
                             f"[0, {header.n_samples}]", path)
        y = ds["y"][start:stop].astype(np.float64, copy=False)
        if not np.isfinite(y).all():
            r = start + int(np.argmax(~np.isfinite(y)))
            raise InputError(f"'y': label of row {r} is {y[r - start]}", path)
        if header.storage == "dense":
            X = np.ascontiguousarray(ds["X"][start:stop])
            values = X
        else:
            nnz = ds["data"].shape[0]
            indptr = ds["indptr"][start:stop + 1].astype(np.int64)
            _check_indptr(indptr, path, nnz, first_row=start)
            lo, hi = int(indptr[0]), int(indptr[-1])
            indptr -= lo
            indices = ds["indices"][lo:hi]
            _check_indices(indices, indptr, path, header.n_features, start)
            values = ds["data"][lo:hi]
            X = sp.csr_matrix((values, indices.astype(np.int32, copy=False), indptr),
                              shape=(stop - start, header.n_features))
            X.has_sorted_indices = True
        if values.dtype.kind == "f" and not np.isfinite(values).all():
            raise InputError(f"'X': rows [{start}, {stop}) contain NaN or infinite values", path)
    return X, y, header
