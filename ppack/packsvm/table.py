"""One rank's shard of the distributed support-vector hash table: keys and coefficients.

Entries are (key = global row id, coefficient beta); their feature vectors and norms are
the stored rows of the table's ``kernels.compute.KernelCompute``, in the same order.
``key_slots.KeySlots`` maps key -> slot (a numba hash map). Entries are never removed. The model is ``w =
scale * sum_j beta_j phi(x_j)`` over the entries of all shards.
"""
import numpy as np

from ..collective_write import Part
from ..kernels.stored import resized
from .key_slots import KeySlots


class SupportVectorTable:
    """Support vectors of one rank: ``keys`` (n,), ``coef`` (n, n_columns), and through
    ``compute`` (a KernelCompute, which owns them) their features and ``norms`` (n,).

    Coefficients are float64, one column per binary problem (1 for a binary model, K for K
    classes one-vs-rest, which share their support vectors: a row is an entry when any class
    gave it a coefficient). ``averaged`` tables also keep ``avg``, the weighted sum of each
    coefficient so far (``averaging.py``).
    """

    def __init__(self, compute, n_columns=1, averaged=False):
        self.compute = compute
        self.n_columns = int(n_columns)
        self.averaged = bool(averaged)
        self.n = 0
        self.key_slots = KeySlots()
        cap = 64
        self._keys = np.empty(cap, dtype=np.int64)
        self._coef = np.empty((cap, self.n_columns))
        self._avg = np.empty((cap if averaged else 0, self.n_columns))

    def __len__(self):
        return self.n

    @property
    def nbytes(self):
        """Bytes allocated for the entries and their rows (capacity, not just the live ones), the key map aside."""
        return int(self._keys.nbytes + self._coef.nbytes + self._avg.nbytes + self.compute.stored.nbytes)

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
        return self.compute.stored.norms

    @property
    def features(self):
        """Dense (n, n_features) features, or the CSR triple (indptr, indices, values)."""
        return self.compute.stored.features

    @property
    def sparse(self):
        return self.compute.stored.sparse

    @property
    def dtype(self):
        """The feature storage type (float32 or float64)."""
        return self.compute.stored.dtype

    @property
    def n_features(self):
        return self.compute.stored.n_features

    # -- hash-table operations -----------------------------------------------------
    def slots_of(self, keys):
        """Slots of ``keys`` (int64 array), -1 for a key this shard does not hold: int64 array."""
        return self.key_slots.lookup(keys)

    def holds(self, keys):
        """Whether each of ``keys`` (int64 array) has an entry in this shard: bool array."""
        return self.key_slots.lookup(keys) >= 0

    def insert_many(self, keys, coef, X, norms=None, avg=None):
        """New entries: keys (k,), coef (k,) or (k, n_columns), X dense (k, d) or scipy CSR or a
        CSR triple with k rows and their norms (k,) (computed when None); for averaged tables
        ``avg`` as coef (zeros if None)."""
        self._insert(keys, coef, avg, lambda: self.compute.store(X, norms))

    def insert_block_rows(self, keys, coef, block, positions, norms, avg=None):
        """``insert_many`` of rows ``positions`` (int64 (k,)) of a RowBlock, with their norms (k,)."""
        self._insert(keys, coef, avg, lambda: self.compute.store_rows(block, positions, norms))

    def _insert(self, keys, coef, avg, store_rows):
        keys = np.asarray(keys, dtype=np.int64).reshape(-1)
        k = len(keys)
        bad = self.key_slots.add(keys, self.n)
        if bad >= 0:
            raise KeyError(f"key {int(keys[bad])} is already in the table or repeats among the {k} new keys")
        store_rows()
        if self.n + k > len(self._keys):
            new = max(self.n + k, 2 * len(self._keys))
            self._keys, self._coef = resized(self._keys, new), resized(self._coef, new)
            if self.averaged:
                self._avg = resized(self._avg, new)
        sl = slice(self.n, self.n + k)
        self._keys[sl] = keys
        self._coef[sl] = np.reshape(coef, (k, self.n_columns))
        if self.averaged:
            self._avg[sl] = 0.0 if avg is None else np.reshape(avg, (k, self.n_columns))
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


def shard_offsets(comm, table):
    """Collective: where every rank's shard lies in a file that holds the shards in rank order.

    Returns ``(entries, nonzeros)``, each (size + 1,) int64: rank k's entries are rows
    ``entries[k]:entries[k + 1]`` and, for CSR tables, its stored values
    ``nonzeros[k]:nonzeros[k + 1]``. Only the two counts per rank cross ranks.
    """
    nnz = table.compute.stored.nnz
    counts = np.array(comm.allgather((table.n, nnz)), dtype=np.int64).reshape(-1, 2)
    offsets = np.zeros((len(counts) + 1, 2), dtype=np.int64)
    np.cumsum(counts, axis=0, out=offsets[1:])
    return offsets[:, 0], offsets[:, 1]


def shard_parts(table, offsets, rank, keys="keys", coef="coef", dense="features",
                csr=("indptr", "indices", "values")):
    """This rank's entries as ``collective_write.Part``s of the pre-sized datasets named by
    ``keys``, ``coef``, ``dense`` or ``csr``: its rows ``offsets[0][rank]:offsets[0][rank + 1]``
    (see ``shard_offsets``), the CSR ``indptr`` shifted by the values of the ranks before it;
    one column of coefficients is stored 1-D. Views of the table, but for the shifted indptr."""
    entries, nonzeros = offsets
    lo = int(entries[rank])
    if table.n == 0:
        return []
    parts = [Part(keys, lo, table.keys), Part(coef, lo, table.coef if table.n_columns > 1 else table.coef[:, 0])]
    if table.sparse:
        indptr, indices, values = table.features
        a = int(nonzeros[rank])
        parts += [Part(csr[0], lo, indptr + a), Part(csr[1], a, indices), Part(csr[2], a, values)]
    else:
        parts.append(Part(dense, lo, table.features))
    return parts
