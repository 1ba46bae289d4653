"""One rank's shard of the distributed support-vector hash table: storage only.

Entries are (key = global row id, coefficient beta, feature vector, its kernel norm).
They live in contiguous growable arrays (dense rows, or CSR for sparse data) that
``kernels.ops`` evaluates in blocks, and a dict maps key -> slot for O(1) lookup.
Entries are never removed. The model is ``w = scale * sum_j beta_j phi(x_j)`` over the
entries of all shards.
"""
import numpy as np


class SupportVectorTable:
    """Support vectors of one rank: ``keys`` (n,), ``coef`` (n, n_columns), ``norms`` (n,), features.

    ``sparse`` tables keep features as CSR arrays ``indptr`` (n+1,), ``indices``,
    ``values``; dense tables as ``features`` (n, n_features). ``dtype`` is the feature
    storage type (float32 or float64); coefficients are float64, one column per binary
    problem (1 for a binary model, K for K classes one-vs-rest, which share their support
    vectors: a row is an entry when any class gave it a coefficient). ``norms`` are the
    rows' norms as the kernel needs them (``kernels.ops.row_norms``), given on insertion.
    """

    def __init__(self, n_features, sparse, dtype=np.float64, n_columns=1, averaged=False):
        self.n_features = int(n_features)
        self.sparse = bool(sparse)
        self.dtype = np.dtype(dtype)
        self.n_columns = int(n_columns)
        self.averaged = bool(averaged)
        self.n = 0
        self._slots = {}
        cap = 64
        self._keys = np.empty(cap, dtype=np.int64)
        self._coef = np.empty((cap, self.n_columns))
        # averaged tables: the weighted sum of each coefficient so far (``averaging.py``)
        self._avg = np.empty((cap if averaged else 0, self.n_columns))
        self._norms = np.empty(cap)
        if self.sparse:
            self._indptr = np.zeros(cap + 1, dtype=np.int64)
            self._indices = np.empty(cap * 16, dtype=np.int32)
            self._values = np.empty(cap * 16, dtype=self.dtype)
        else:
            self._features = np.empty((cap, self.n_features), dtype=self.dtype)

    def __len__(self):
        return self.n

    @property
    def nbytes(self):
        """Bytes allocated for the entries (capacity, not just the live ones), the key map aside."""
        arrays = [self._keys, self._coef, self._norms, self._avg]
        arrays += [self._indptr, self._indices, self._values] if self.sparse else [self._features]
        return int(sum(a.nbytes for a in arrays))

    # -- views of the live entries -------------------------------------------------
    @property
    def keys(self):
        return self._keys[:self.n]

    @property
    def coef(self):
        """(n, n_columns)."""
        return self._coef[:self.n]

    @property
    def avg(self):
        """(n, n_columns) running weighted sums of the coefficients (averaged tables)."""
        return self._avg[:self.n]

    @property
    def norms(self):
        return self._norms[:self.n]

    @property
    def features(self):
        """Dense (n, n_features) features, or the CSR triple (indptr, indices, values)."""
        if self.sparse:
            end = self._indptr[self.n]
            return self._indptr[:self.n + 1], self._indices[:end], self._values[:end]
        return self._features[:self.n]

    # -- hash-table operations -----------------------------------------------------
    def slots_of(self, keys):
        """Slots of ``keys`` (int64 array), every one of which this shard holds: int64 array."""
        return np.fromiter(map(self._slots.__getitem__, keys.tolist()), dtype=np.int64, count=len(keys))

    def holds(self, keys):
        """Whether each of ``keys`` (int64 array) has an entry in this shard: bool array."""
        return np.fromiter(map(self._slots.__contains__, keys.tolist()), dtype=bool, count=len(keys))

    def insert_many(self, keys, coef, X, norms, avg=None):
        """New entries: keys and norms (k,), coef (k,) or (k, n_columns), X dense (k, d) or
        scipy CSR or a CSR triple with k rows; for averaged tables ``avg`` as coef (zeros if None)."""
        k = len(keys)
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
        sl = slice(self.n, self.n + k)
        self._keys[sl] = keys
        self._coef[sl] = np.reshape(coef, (k, self.n_columns))
        if self.averaged:
            self._avg[sl] = 0.0 if avg is None else np.reshape(avg, (k, self.n_columns))
        self._norms[sl] = norms
        keys = np.asarray(keys).tolist()
        if not self._slots.keys().isdisjoint(keys) or len(set(keys)) < k:
            raise KeyError(f"keys {sorted(self._slots.keys() & set(keys))} are already in the table, or some "
                           f"of the {k} new keys repeat")
        self._slots.update(zip(keys, range(self.n, self.n + k)))
        self.n += k

    def scale_coefficients(self, factor, exponent=0):
        """Multiply the coefficients by ``factor * 2**exponent`` (numbers, or one of each per
        column; the exponent apart, so that a factor far below the float range, such as a pack's
        product of scale folds, is exact)."""
        coef = self._coef[:self.n]
        coef *= factor
        exponent = np.clip(np.asarray(exponent), -4000, 4000).astype(np.int64)
        if np.any(exponent):
            coef[:] = np.ldexp(coef, exponent)

    def _grow(self, n_entries, extra_nnz):
        cap = len(self._keys)
        if n_entries > cap:
            new = max(n_entries, 2 * cap)
            self._keys = _resized(self._keys, new)
            self._coef = _resized(self._coef, new)
            if self.averaged:
                self._avg = _resized(self._avg, new)
            self._norms = _resized(self._norms, new)
            if self.sparse:
                self._indptr = _resized(self._indptr, new + 1)
            else:
                self._features = _resized(self._features, new)
        if self.sparse:
            need = self._indptr[self.n] + extra_nnz
            if need > len(self._indices):
                new = max(need, 2 * len(self._indices))
                self._indices = _resized(self._indices, new)
                self._values = _resized(self._values, new)


def _resized(array, n):
    new = np.empty((n,) + array.shape[1:], dtype=array.dtype)
    m = min(n, len(array))
    new[:m] = array[:m]
    return new


def shard_offsets(comm, table):
    """Collective: where every rank's shard lies in a file written rank by rank, in rank order.

    Returns ``(entries, nonzeros)``, each (size + 1,) int64: rank k's entries are rows
    ``entries[k]:entries[k + 1]`` and, for CSR tables, its stored values
    ``nonzeros[k]:nonzeros[k + 1]``. Only the two counts per rank cross ranks.
    """
    nnz = int(table.features[0][-1]) if table.sparse else 0
    counts = np.array(comm.allgather((table.n, nnz)), dtype=np.int64).reshape(-1, 2)
    offsets = np.zeros((len(counts) + 1, 2), dtype=np.int64)
    np.cumsum(counts, axis=0, out=offsets[1:])
    return offsets[:, 0], offsets[:, 1]


def write_shard(f, table, offsets, rank, keys="keys", coef="coef", dense="features",
                csr=("indptr", "indices", "values")):
    """Write this rank's entries into the pre-sized datasets of the open file ``f``: its rows
    ``offsets[0][rank]:offsets[0][rank + 1]`` (see ``shard_offsets``), the CSR ``indptr``
    shifted by the values written by the ranks before it."""
    entries, nonzeros = offsets
    lo, hi = int(entries[rank]), int(entries[rank + 1])
    if hi == lo:
        return
    f[keys][lo:hi] = table.keys
    f[coef][lo:hi] = table.coef if f[coef].ndim == 2 else table.coef[:, 0]
    if table.sparse:
        indptr, indices, values = table.features
        a, b = int(nonzeros[rank]), int(nonzeros[rank + 1])
        f[csr[0]][lo:hi + 1] = indptr + a
        if b > a:
            f[csr[1]][a:b] = indices
            f[csr[2]][a:b] = values
    else:
        f[dense][lo:hi] = table.features
