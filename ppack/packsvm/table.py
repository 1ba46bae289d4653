"""One rank's shard of the distributed support-vector hash table: storage only.

Entries are (key = global row id, coefficient beta, feature vector, its kernel norm).
They live in contiguous growable arrays (dense rows, or CSR for sparse data) that
``kernels.ops`` evaluates in blocks, and a dict maps key -> slot for O(1) lookup.
Entries are never removed. The model is ``w = scale * sum_j beta_j phi(x_j)`` over the
entries of all shards.
"""
import numpy as np
import scipy.sparse as sp


class SupportVectorTable:
    """Support vectors of one rank: ``keys`` (n,), ``coef`` (n,), ``norms`` (n,), features.

    ``sparse`` tables keep features as CSR arrays ``indptr`` (n+1,), ``indices``,
    ``values``; dense tables as ``features`` (n, n_features). ``dtype`` is the feature
    storage type (float32 or float64); coefficients are float64. ``norms`` are the rows'
    norms as the kernel needs them (``kernels.ops.row_norms``), given on insertion.
    """

    def __init__(self, n_features, sparse, dtype=np.float64):
        self.n_features = int(n_features)
        self.sparse = bool(sparse)
        self.dtype = np.dtype(dtype)
        self.n = 0
        self._slots = {}
        cap = 64
        self._keys = np.empty(cap, dtype=np.int64)
        self._coef = np.empty(cap)
        self._norms = np.empty(cap)
        if self.sparse:
            self._indptr = np.zeros(cap + 1, dtype=np.int64)
            self._indices = np.empty(cap * 16, dtype=np.int32)
            self._values = np.empty(cap * 16, dtype=self.dtype)
        else:
            self._features = np.empty((cap, self.n_features), dtype=self.dtype)

    def __len__(self):
        return self.n

    # -- views of the live entries -------------------------------------------------
    @property
    def keys(self):
        return self._keys[:self.n]

    @property
    def coef(self):
        return self._coef[:self.n]

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
    def slot_of(self, key):
        """Slot of ``key`` in this shard, or -1."""
        return self._slots.get(int(key), -1)

    def add_to(self, slot, delta):
        self._coef[slot] += delta

    def insert_many(self, keys, coef, X, norms):
        """New entries: keys, coef and norms (k,), X dense (k, d) or scipy CSR with k rows."""
        k = len(keys)
        if self.sparse:
            indptr, indices, values = X.indptr, X.indices, X.data
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
        self._coef[sl] = coef
        self._norms[sl] = norms
        for i, key in enumerate(keys):
            if int(key) in self._slots:
                raise KeyError(f"key {int(key)} is already in the table")
            self._slots[int(key)] = self.n + i
        self.n += k

    def scale_coefficients(self, factor, exponent=0):
        """Multiply every coefficient by ``factor * 2**exponent`` (the exponent apart, so that a
        factor far below the float range, such as a pack's product of scale folds, is exact)."""
        coef = self._coef[:self.n]
        coef *= factor
        if exponent:
            coef[:] = np.ldexp(coef, int(min(max(exponent, -4000), 4000)))

    def _grow(self, n_entries, extra_nnz):
        cap = len(self._keys)
        if n_entries > cap:
            new = max(n_entries, 2 * cap)
            self._keys = _resized(self._keys, new)
            self._coef = _resized(self._coef, new)
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


def gathered(comm, table):
    """Collective: every rank's entries on rank 0 as ``(keys, coef, X, owner)`` in slot order
    per rank (X dense or scipy CSR; owner: the rank holding each entry); None elsewhere.

    Pickled objects through rank 0: a model or checkpoint must fit in rank 0's memory
    (the scale issue replaces this with parallel writes).
    """
    if table.sparse:
        indptr, indices, values = table.features
        local = (table.keys, table.coef, np.diff(indptr), indices, values)
    else:
        local = (table.keys, table.coef, table.features)
    parts = comm.gather(local, root=0)
    if comm.Get_rank() != 0:
        return None
    keys = np.concatenate([p[0] for p in parts])
    coef = np.concatenate([p[1] for p in parts])
    owner = np.concatenate([np.full(len(p[0]), rank, dtype=np.int32) for rank, p in enumerate(parts)])
    if table.sparse:
        counts = np.concatenate([p[2] for p in parts])
        X = sp.csr_matrix((np.concatenate([p[4] for p in parts]), np.concatenate([p[3] for p in parts]),
                           np.concatenate([[0], np.cumsum(counts)])), shape=(len(keys), table.n_features))
    else:
        X = np.concatenate([p[2] for p in parts]).reshape(len(keys), table.n_features)
    return keys, coef, X, owner
