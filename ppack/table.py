"""One rank's shard of the distributed support-vector hash table.

Entries are (key = global row id, coefficient beta, feature vector). They live in
contiguous growable arrays (dense rows, or CSR for sparse data) fit for blocked kernel
evaluation, and a dict maps key -> slot for O(1) lookup. Entries are never removed.
The model is ``w = scale * sum_j beta_j phi(x_j)`` over the entries of all shards.
"""
import numpy as np

from .kernels.spec import LAPLACIAN
from .kernels.sums import csr_partial_sums, dense_partial_sums, gemm_partial_sums, work_items
from .rows import row_norms_csr, row_norms_dense

# Working memory for one kernel-sum pass: the dense transposed row block of the sparse
# path and the (tile, r) dot-product tile of the dense path stay under this many bytes.
DEFAULT_WORK_BYTES = 64 * 2**20
# Support vectors per GEMM tile on the dense path: small enough that the tile of dot
# products is still in cache when the fused kernel pass reads it.
MAX_TILE_ROWS = 512


class SupportVectorTable:
    """Support vectors of one rank: ``keys`` (n,), ``coef`` (n,), ``norms`` (n,), features.

    ``sparse`` tables keep features as CSR arrays ``indptr`` (n+1,), ``indices``,
    ``values``; dense tables as ``features`` (n, n_features). ``dtype`` is the feature
    storage type (float32 or float64); coefficients and sums are float64.
    """

    def __init__(self, n_features, sparse, dtype=np.float64, spec=None, work_bytes=DEFAULT_WORK_BYTES):
        self.n_features = int(n_features)
        self.sparse = bool(sparse)
        self.dtype = np.dtype(dtype)
        self.spec = spec
        self.work_bytes = int(work_bytes)
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

    def insert(self, key, coef, row):
        """New entry; ``row`` is a dense (n_features,) vector or ``(indices, values)``."""
        key = int(key)
        if key in self._slots:
            raise KeyError(f"key {key} is already in the table")
        self._grow(self.n + 1, 0 if not self.sparse else len(row[0]))
        slot = self.n
        self._keys[slot] = key
        self._coef[slot] = coef
        l1 = self.spec is not None and self.spec.uses_l1
        if self.sparse:
            indices, values = row
            a = self._indptr[slot]
            self._indices[a:a + len(indices)] = indices
            self._values[a:a + len(values)] = values
            self._indptr[slot + 1] = a + len(indices)
            vals = np.asarray(values, dtype=np.float64)
            self._norms[slot] = np.abs(vals).sum() if l1 else vals @ vals
        else:
            self._features[slot] = row
            self._norms[slot] = row_norms_dense(self._features[slot:slot + 1], l1)[0]
        self._slots[key] = slot
        self.n += 1
        return slot

    def insert_many(self, keys, coef, X):
        """Bulk insert (loading a model): X dense (k, d) or scipy CSR with k rows."""
        l1 = self.spec is not None and self.spec.uses_l1
        k = len(keys)
        if self.sparse:
            indptr, indices, values = X.indptr, X.indices, X.data
            self._grow(self.n + k, len(indices))
            a = self._indptr[self.n]
            self._indices[a:a + len(indices)] = indices
            self._values[a:a + len(values)] = values
            self._indptr[self.n + 1:self.n + k + 1] = a + indptr[1:]
            norms = row_norms_csr(indptr, indices, values, l1)
        else:
            self._grow(self.n + k, 0)
            self._features[self.n:self.n + k] = X
            norms = row_norms_dense(X, l1)
        sl = slice(self.n, self.n + k)
        self._keys[sl] = keys
        self._coef[sl] = coef
        self._norms[sl] = norms
        for i, key in enumerate(keys):
            if int(key) in self._slots:
                raise KeyError(f"key {int(key)} is already in the table")
            self._slots[int(key)] = self.n + i
        self.n += k

    def scale_coefficients(self, factor):
        self._coef[:self.n] *= factor

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

    # -- kernel sums -----------------------------------------------------------------
    def partial_sums(self, block, out):
        """out[k] += sum_j coef_j (K(sv_j, x_k) + offset) over this shard, for the block's rows.

        ``block`` is a ``RowBlock`` (r rows); ``out`` (r,) float64. The work is split into
        column groups (sparse path) or support-vector tiles (dense path) so that the
        working arrays stay under ``work_bytes``.
        """
        if self.n == 0:
            return
        spec = self.spec
        r = block.n_rows
        if self.sparse or spec.kind == LAPLACIAN:
            cols = max(1, min(r, self.work_bytes // (8 * self.n_features)))
            for c0 in range(0, r, cols):
                c1 = min(r, c0 + cols)
                XT = block.transposed(c0, c1)
                part = np.zeros(c1 - c0)
                if self.sparse:
                    csr_partial_sums(*self.features, self.norms, self.coef, self.n, XT,
                                     block.norms[c0:c1], work_items(self.n), *spec.params(), part)
                else:
                    dense_partial_sums(self.features, self.norms, self.coef, self.n, XT,
                                       block.norms[c0:c1], work_items(self.n), *spec.params(), part)
                out[c0:c1] += part
            return
        # dense: dot products by BLAS GEMM on tiles of support vectors, kernel fused after
        X = block.dense if block.dense is not None else block.transposed(0, r).T
        XT = np.ascontiguousarray(X.T, dtype=self.dtype)
        tile = max(1, min(MAX_TILE_ROWS, self.work_bytes // (8 * r)))
        gemm_partial_sums(self.features, self.norms, self.coef, self.n, XT, block.norms, tile,
                          *spec.params(), out)


def _resized(array, n):
    new = np.empty((n,) + array.shape[1:], dtype=array.dtype)
    m = min(n, len(array))
    new[:m] = array[:m]
    return new
