"""Stored rows: a rank's support-vector features and their kernel norms, in growable arrays.

Dense rows are one (n, d) array; sparse rows are CSR arrays ``indptr`` (n+1,), ``indices``,
``values``. Rows are only appended, never removed; the capacity doubles as it fills.
"""
import numpy as np

from ..jit import njit


def writable(state):
    """An unpickled object's ``__dict__`` (``state``) with its read-only arrays copied into
    memory. A model loaded with joblib's ``mmap_mode="r"`` holds read-only memory maps, which
    numba types apart from ordinary arrays: every kernel would compile a read-only twin (seconds
    each) before its first prediction."""
    return {name: np.array(value) if isinstance(value, np.ndarray) and not value.flags.writeable else value
            for name, value in state.items()}


class StoredRows:
    """``n`` rows of ``n_features`` features in ``dtype`` (float32 or float64), dense or CSR
    (``sparse``), with their norms (n,) float64 as the kernel needs them."""

    def __init__(self, n_features, sparse, dtype=np.float64):
        self.n_features = int(n_features)
        self.sparse = bool(sparse)
        self.dtype = np.dtype(dtype)
        self.n = 0
        cap = 64
        self._norms = np.empty(cap)
        if self.sparse:
            self._indptr = np.zeros(cap + 1, dtype=np.int64)
            self._indices = np.empty(cap * 16, dtype=np.int32)
            self._values = np.empty(cap * 16, dtype=self.dtype)
        else:
            self._features = np.empty((cap, self.n_features), dtype=self.dtype)

    def __setstate__(self, state):
        self.__dict__.update(writable(state))

    @property
    def nbytes(self):
        """Bytes allocated (capacity, not just the live rows)."""
        arrays = [self._norms] + ([self._indptr, self._indices, self._values] if self.sparse else [self._features])
        return int(sum(a.nbytes for a in arrays))

    @property
    def features(self):
        """Dense (n, n_features) features, or the CSR triple (indptr, indices, values)."""
        if self.sparse:
            end = self._indptr[self.n]
            return self._indptr[:self.n + 1], self._indices[:end], self._values[:end]
        return self._features[:self.n]

    @property
    def norms(self):
        """(n,) float64."""
        return self._norms[:self.n]

    @property
    def capacity(self):
        """Rows that fit before the arrays grow."""
        return len(self._norms)

    @property
    def nnz(self):
        """Stored values of a CSR store (0 when dense)."""
        return int(self._indptr[self.n]) if self.sparse else 0

    def room_for(self, block):
        """Room for every row of a RowBlock; returns the arguments ``append_positions`` takes
        before its positions (the block's dense (r, d) or (0, 0), indptr, indices, values) and
        after n (this store's features, indptr, indices, values, norms), the format not in use
        as empty arrays. The caller adds the rows it appended to ``n``."""
        if self.sparse:
            indptr, indices, values = block.csr
            self._grow(self.n + block.n_rows, len(values))
            return ((_NO_ROWS, indptr, indices, values),
                    (_NO_ROWS, self._indptr, self._indices, self._values, self._norms))
        self._grow(self.n + block.n_rows, 0)
        return ((block.dense, _NO_INDPTR, _NO_INDICES, _NO_VALUES),
                (self._features, _NO_INDPTR, _NO_INDICES, _NO_VALUES, self._norms))

    def widen(self, n_features):
        """Count ``n_features`` (>= today's) features: CSR rows are 0 on the new ones."""
        if not self.sparse or n_features < self.n_features:
            raise ValueError(f"widen: CSR rows only, to at least {self.n_features} features, got {n_features}")
        self.n_features = int(n_features)

    def append(self, X, norms):
        """Add k rows: X dense (k, d), scipy CSR or a CSR triple; norms (k,)."""
        k = len(norms)
        if self.sparse:
            indptr, indices, values = X if isinstance(X, tuple) else (X.indptr, X.indices, X.data)
            self._grow(self.n + k, len(indices))
            a = self._indptr[self.n]
            self._indices[a:a + len(indices)] = indices
            self._values[a:a + len(values)] = values
            self._indptr[self.n + 1:self.n + k + 1] = a + indptr[1:]
        else:
            self._grow(self.n + k, 0)
            self._features[self.n:self.n + k] = X
        self._norms[self.n:self.n + k] = norms
        self.n += k

    def keep(self, kept):
        """Keep only the rows ``kept`` (bool (n,)), in order, in place."""
        rows = np.flatnonzero(kept)
        k = len(rows)
        if self.sparse:
            starts, ends = self._indptr[rows], self._indptr[rows + 1]
            take = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends)]) if k else np.empty(0, np.int64)
            self._indices[:len(take)] = self._indices[take]
            self._values[:len(take)] = self._values[take]
            self._indptr[1:k + 1] = np.cumsum(ends - starts)
        else:
            self._features[:k] = self._features[rows]
        self._norms[:k] = self._norms[rows]
        self.n = k

    def _grow(self, n_rows, extra_nnz):
        cap = len(self._norms)
        if n_rows > cap:
            new = max(n_rows, 2 * cap)
            self._norms = resized(self._norms, new)
            if self.sparse:
                self._indptr = resized(self._indptr, new + 1)
            else:
                self._features = resized(self._features, new)
        if self.sparse:
            need = self._indptr[self.n] + extra_nnz
            if need > len(self._indices):
                new = max(need, 2 * len(self._indices))
                self._indices = resized(self._indices, new)
                self._values = resized(self._values, new)


def resized(array, n):
    """A copy of ``array`` with n entries along its first axis (the first ones kept)."""
    new = np.empty((n,) + array.shape[1:], dtype=array.dtype)
    m = min(n, len(array))
    new[:m] = array[:m]
    return new


_NO_ROWS = np.empty((0, 0))
_NO_INDPTR = np.empty(0, dtype=np.int64)
_NO_INDICES = np.empty(0, dtype=np.int32)
_NO_VALUES = np.empty(0)


@njit(cache=True)
def append_positions(dense, indptr, indices, values, positions, norms, n, out_features, out_indptr, out_indices,
                     out_values, out_norms):
    """Copy rows ``positions`` (int64 (k,)) of a block, dense (r, d) or (dense (0, 0)) CSR,
    with their norms (of the block's rows, (r,)), after the first n rows of a store's arrays
    (``StoredRows.room_for``). Returns k."""
    if out_features.shape[0] > 0:
        _append_dense(dense, positions, n, out_features)
    else:
        _append_csr(indptr, indices, values, positions, n, out_indptr, out_indices, out_values)
    for k in range(positions.shape[0]):
        out_norms[n + k] = norms[positions[k]]
    return positions.shape[0]


@njit(cache=True)
def _append_csr(indptr, indices, values, positions, n, out_indptr, out_indices, out_values):
    """Copy CSR rows ``positions`` after the first n rows of the out arrays (sized for them)."""
    at = out_indptr[n]
    for k in range(positions.shape[0]):
        for e in range(indptr[positions[k]], indptr[positions[k] + 1]):
            out_indices[at] = indices[e]
            out_values[at] = values[e]
            at += 1
        out_indptr[n + k + 1] = at


@njit(cache=True)
def _append_dense(rows, positions, n, out):
    """Copy rows ``positions`` of rows (r, d) after the first n rows of out (sized for them)."""
    for k in range(positions.shape[0]):
        for f in range(rows.shape[1]):
            out[n + k, f] = rows[positions[k], f]
