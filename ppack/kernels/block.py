"""Row blocks: r rows that every rank holds (a pack's rows, or a block of rows to predict).

A block is dense ``X`` (r, d) or CSR ``(indptr, indices, values)``, with labels ``y``;
``delivery.deliver_rows`` builds one from rows spread over the ranks.
"""
import numpy as np
import scipy.sparse as sp

from ..jit import njit


class RowBlock:
    """r rows held by every rank: ``dense`` (r, d) or ``csr`` (indptr, indices, values).

    ``y`` (r,) labels (zeros for unlabeled data); ``weight`` (r,) the rows' weights, or None;
    ``columns`` (d, r): the dense rows' transpose (``columns()``) when the caller made it with them.
    """

    def __init__(self, n_features, y, dense=None, csr=None, weight=None, columns=None):
        self.n_features = n_features
        self.y = y
        self.weight = weight
        self.dense = dense
        self.csr = csr
        self.n_rows = len(y)
        self._last_transposed = None  # ((start, stop), XT): a pack's kernel sums and pair kernels share it
        self._columns = columns  # columns(): the same sharing
        self.known_norms = None  # (l1, norms (r,)) when delivery computed the rows' norms

    @classmethod
    def from_rows(cls, X, y, n_features):
        """Block from local rows: X dense (r, <=n_features) or scipy CSR; y (r,)."""
        if sp.issparse(X):
            X = sp.csr_matrix(X)
            return cls(n_features, y, csr=(X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data))
        X = np.asarray(X)
        if X.shape[1] < n_features:
            X = np.pad(X, ((0, 0), (0, n_features - X.shape[1])))
        return cls(n_features, y, dense=np.ascontiguousarray(X))

    def columns(self):
        """Every row as a column, (n_features, n_rows) contiguous in the rows' own dtype; kept
        for the pack (callers must not write to it)."""
        if self._columns is None:
            if self.dense is not None:
                self._columns = np.ascontiguousarray(self.dense.T)
            else:
                self._columns = self.transposed(0, self.n_rows).astype(self.csr[2].dtype, copy=False)
        return self._columns

    def transposed(self, start, stop):
        """Dense float64 array (n_features, stop - start): rows start..stop-1 as columns.
        The last one is kept and given again for the same rows: callers must not write to it."""
        if self._last_transposed is not None and self._last_transposed[0] == (start, stop):
            return self._last_transposed[1]
        XT = np.zeros((self.n_features, stop - start))
        if self.dense is not None:
            XT[:, :] = self.dense[start:stop].T
        else:
            _scatter_columns(*self.csr, start, stop, XT)
        self._last_transposed = ((start, stop), XT)
        return XT


@njit(cache=True)
def _scatter_columns(indptr, indices, values, start, stop, XT):
    """XT[f, k - start] = value of CSR row k at feature f, for rows start..stop-1 (XT zeroed)."""
    for k in range(start, stop):
        for e in range(indptr[k], indptr[k + 1]):
            XT[indices[e], k - start] = values[e]
