"""One rank's slice of a data set: rows ``[start, stop)`` of X and y, and the global facts.

``load_shard`` is collective: every rank reads only its own rows (HDF5 slices; LIBSVM
text is scanned by every rank, which keeps only its rows), and a problem on any rank
(missing file, bad layout, NaN in X) stops every rank with the same message.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from .hdf5 import COMPACT_DTYPES, as_float, is_hdf5, read_header, read_rows, read_stored_rows, read_weights
from .libsvm import read_libsvm
from ..mpi.comm import chunk, run_collectively


@dataclass
class Shard:
    """Rows [start, stop) of a data set with ``n_samples`` rows and ``n_features`` columns.

    X: dense (stop-start, n_features) array or scipy CSR matrix, as stored: float, or compact
    (uint8, float16) with feature value = stored value * ``value_scale``; y: (stop-start,)
    float64 raw labels (NaN when the file has none); ``max_row_nnz``: the longest row of the
    whole data set (n_features when dense). ``dtype``: the float type rows are computed in
    (X's own type unless X is compact); compact rows are converted a few at a time
    (``float_rows``), never the whole shard. ``w``: (stop-start,) row weights > 0, or None.
    ``text``: read from LIBSVM text, whose rows may leave out the last features (its width is
    the highest index found), so a model may be wider than it.

    Parameters
    ----------
    path : str
        The file the rows come from (``"<array>"`` for in-memory data).
    n_samples : int
        Rows of the whole data set.
    n_features : int
        Columns of the whole data set.
    start : int
        The first of this rank's rows.
    stop : int
        One past the last of this rank's rows.
    X : numpy.ndarray or scipy.sparse.csr_matrix
        This rank's rows, (stop - start, n_features), as stored.
    y : numpy.ndarray
        This rank's (stop - start,) labels, float64 (NaN when the file has none).
    max_row_nnz : int
        Stored entries of the longest row of the whole data set (n_features when dense).
    value_scale : float, default=1.0
        Feature value = stored value * value_scale (compact storage: uint8, float16).
    dtype : numpy.dtype or None, default=None
        The float type rows are computed in; None is X's own type.
    w : numpy.ndarray or None, default=None
        This rank's (stop - start,) row weights > 0, or None.
    text : bool, default=False
        Read from LIBSVM text.

    Examples
    --------
    >>> import numpy as np
    >>> from ppack import Shard
    >>> shard = Shard.from_arrays(np.eye(4), [1, -1, 1, -1], rank=1, size=2)
    >>> shard.n_samples, shard.start, shard.stop, shard.X.shape
    (4, 2, 4, (2, 4))
    """

    path: str
    n_samples: int
    n_features: int
    start: int
    stop: int
    X: object
    y: np.ndarray
    max_row_nnz: int
    value_scale: float = 1.0
    dtype: np.dtype = None
    w: np.ndarray = None
    text: bool = False

    def __post_init__(self):
        if self.dtype is None:
            self.dtype = self.X.dtype
        self.dtype = np.dtype(self.dtype)

    @property
    def sparse(self):
        return sp.issparse(self.X)

    @property
    def nbytes(self):
        """Bytes this rank holds for X and y."""
        X = self.X
        held = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes if self.sparse else X.nbytes
        return int(held + self.y.nbytes)

    def computed_in(self, dtype):
        """This shard with rows computed in the float ``dtype``: float X converted (the
        original is not kept), compact X kept as stored."""
        dtype = np.dtype(dtype)
        if dtype == self.dtype:
            return self
        X = self.X
        if X.dtype not in COMPACT_DTYPES:
            X = sp.csr_matrix((X.data.astype(dtype), X.indices, X.indptr), shape=X.shape) if self.sparse \
                else X.astype(dtype)
        return replace(self, X=X, dtype=dtype)

    def float_rows(self, start=0, stop=None):
        """Local rows [start, stop) as feature values of ``dtype`` (dense array or CSR)."""
        return as_float(self.X[start:stop], self.dtype, self.value_scale)

    @classmethod
    def from_arrays(cls, X, y, rank: int = 0, size: int = 1, path: str = "<array>", w=None) -> Shard:
        """The rank's shard of in-memory data that every rank holds whole.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            Every row of the data set.
        y : array-like of shape (n_samples,) or None
            Their labels, or None (NaN labels).
        rank : int, default=0
            The rank whose shard this is.
        size : int, default=1
            The number of ranks the rows are shared among (in contiguous, near-equal slices).
        path : str, default="<array>"
            What error messages call the data.
        w : array-like of shape (n_samples,) or None, default=None
            Row weights >= 0, not all zero.

        Returns
        -------
        Shard
            Rows ``[start, stop)`` of the rank's slice.
        """
        n = X.shape[0]
        start, stop = chunk(n, rank, size)
        y = np.full(n, np.nan) if y is None else np.asarray(y, dtype=np.float64)
        if sp.issparse(X):
            X = sp.csr_matrix(X)
            X.sort_indices()
            longest = int(np.diff(X.indptr).max()) if n else 0
            local = X[start:stop]
        else:
            X = np.asarray(X)
            if X.dtype not in (np.float32, np.float64):
                X = X.astype(np.float64)
            longest = X.shape[1]
            local = np.ascontiguousarray(X[start:stop])
        if w is not None:
            w = np.asarray(w, dtype=np.float64)
            if w.shape != (n,) or not (np.isfinite(w).all() and (w >= 0).all()):
                raise InputError(f"sample_weight: expected {n} finite weights >= 0 (one per row), got "
                                 f"shape {w.shape}")
            if not w.any():
                raise InputError("sample_weight: Sample weights must contain at least one non-zero number")
            w = w[start:stop].copy()
        return cls(path, n, X.shape[1], start, stop, local, y[start:stop].copy(), max(longest, 1), w=w)


def load_shard(comm, path: str | os.PathLike, dtype=np.float64, n_features: int | None = None) -> Shard:
    """Collective: this rank's shard of the HDF5 or LIBSVM-text file ``path``.

    Every rank reads only its own rows (HDF5 slices; LIBSVM text is scanned by every rank,
    which keeps only its rows).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        The ranks that share the rows, in contiguous, near-equal slices.
    path : str or os.PathLike
        A ppack HDF5 data file (``convert``) or a LIBSVM text file.
    dtype : numpy.dtype or type, default=numpy.float64
        The float type of the rows (compact HDF5 storage keeps its own, converted when read).
    n_features : int or None, default=None
        The data's width when the file's is smaller (LIBSVM text without the last features).

    Returns
    -------
    Shard
        This rank's rows and the data set's sizes.

    Raises
    ------
    InputError
        On every rank, for a missing file, a bad layout or a NaN in X (the message names the file).

    Examples
    --------
    >>> from mpi4py import MPI
    >>> from ppack import load_shard
    >>> from ppack.data.bundled import bundled_path
    >>> shard = load_shard(MPI.COMM_WORLD, bundled_path("a9a"))
    >>> shard.n_samples, shard.n_features, shard.sparse
    (32561, 123, True)
    """
    shard = run_collectively(comm, _read_shard, path, comm.Get_rank(), comm.Get_size(), dtype, n_features)
    run_collectively(comm, check_finite, shard)
    return shard


def _read_shard(path, rank, size, dtype, n_features):
    path = str(path)
    if not Path(path).exists():
        raise InputError("No such file", path)
    if is_hdf5(path):
        header = read_header(path, check_indices=False)  # read_rows checks its own slice
        header_d = max(header.n_features, n_features or 0)
        start, stop = chunk(header.n_samples, rank, size)
        if header.dtype in COMPACT_DTYPES:  # kept as stored: rows per rank cost the file's bytes
            X, y, _ = read_stored_rows(path, start, stop)
        else:
            X, y = read_rows(path, start, stop, dtype=dtype)
        if sp.issparse(X):
            X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(stop - start, header_d))
        elif header_d > X.shape[1]:
            X = np.pad(X, ((0, 0), (0, header_d - X.shape[1])))
        longest = header.max_row_nnz if header.storage == "csr" else header_d
        scale = header.value_scale if header.dtype in COMPACT_DTYPES else 1.0
        return Shard(path, header.n_samples, header_d, start, stop, X, y, max(int(longest), 1), scale, dtype,
                     read_weights(path, start, stop))
    # LIBSVM text: a first scan counts the rows, a second keeps this rank's rows
    _, _, info = read_libsvm(path, n_features=n_features, row_range=(0, 0), dtype=dtype)
    start, stop = chunk(info.n_samples, rank, size)
    X, y, info = read_libsvm(path, n_features=info.n_features, row_range=(start, stop), dtype=dtype)
    return Shard(path, info.n_samples, info.n_features, start, stop, X, y, max(info.max_row_nnz, 1), text=True)


CHECK_ROWS = 4096  # rows tested for NaN at a time: no shard-sized temporary


def check_finite(shard):
    """Raise InputError if the shard's X or y holds NaN or infinity (names the global row)."""
    values = shard.X.data if shard.sparse else shard.X
    if values.dtype.kind == "f":  # integer storage (uint8) cannot hold either
        for start in range(0, shard.stop - shard.start, CHECK_ROWS):
            rows = shard.X[start:start + CHECK_ROWS]
            if shard.sparse:
                bad = np.flatnonzero(~np.isfinite(rows.data))
                if bad.size:
                    row = start + int(np.searchsorted(rows.indptr, bad[0], side="right") - 1)
                    break
            elif not np.isfinite(rows).all():
                row = start + int(np.flatnonzero(~np.all(np.isfinite(rows), axis=1))[0])
                break
        else:
            row = None
        if row is not None:
            raise InputError(f"X: row {shard.start + row} holds NaN or infinity; expected finite features",
                             shard.path)
    if np.any(np.isinf(shard.y)) or (np.any(np.isnan(shard.y)) and not np.all(np.isnan(shard.y))):
        row = int(np.flatnonzero(~np.isfinite(shard.y))[0])
        raise InputError(f"y: row {shard.start + row} holds NaN or infinity; expected a finite label",
                         shard.path)


def value_variance(comm, shard):
    """Collective: the variance of every value of the whole data set's X (n_samples *
    n_features values, a sparse matrix's zeros included), as numpy's ``X.var()``: two passes
    over the rows, each summed in float64 on every rank and over the ranks."""
    count = shard.n_samples * shard.n_features
    total = 0.0
    for values, _ in _value_chunks(shard):
        total += float(np.sum(values, dtype=np.float64))
    mean = comm.allreduce(total) / count
    squares = 0.0
    for values, zeros in _value_chunks(shard):
        deviations = values.astype(np.float64) - mean
        squares += float(np.dot(deviations, deviations)) + zeros * mean * mean
    return comm.allreduce(squares) / count


def _value_chunks(shard):
    """The shard's feature values, CHECK_ROWS rows at a time: (values (k,), how many zeros a
    sparse chunk leaves out)."""
    for start in range(0, shard.stop - shard.start, CHECK_ROWS):
        rows = shard.float_rows(start, start + CHECK_ROWS)
        if sp.issparse(rows):
            yield rows.data, rows.shape[0] * shard.n_features - rows.nnz
        else:
            yield rows.ravel(), 0
