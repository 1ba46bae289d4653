"""One rank's shard of the support-vector hash table."""
import numpy as np
import pytest
import scipy.sparse as sp

from ppack.kernels import ops
from ppack.kernels.spec import KernelSpec
from ppack.packsvm.table import SupportVectorTable

from conftest import make_problem


def test_table_lookup_growth_and_bulk_insert():
    spec = KernelSpec("rbf")
    X, _ = make_problem(300, 5, sparse=True, seed=6)
    table = SupportVectorTable(5, True, np.float64)
    for j in range(200):  # grows past the initial capacity several times
        table.insert_many([10 * j], [float(j)], X[j], ops.row_norms(X[j], spec))
        assert table.slot_of(10 * j) == j
    table.insert_many(np.arange(5000, 5100), np.ones(100), X[200:300], ops.row_norms(X[200:300], spec))
    assert len(table) == 300
    assert table.slot_of(10 * 123) == 123 and table.slot_of(5050) == 250 and table.slot_of(7) == -1
    table.add_to(table.slot_of(10 * 7), 0.5)
    assert table.coef.shape == (300, 1) and table.coef[7, 0] == 7.5
    indptr, indices, values = table.features
    rebuilt = sp.csr_matrix((values, indices, indptr), shape=(300, 5))
    np.testing.assert_array_equal(rebuilt.toarray(), X.toarray())
    np.testing.assert_allclose(table.norms, np.asarray(X.multiply(X).sum(axis=1)).ravel())
    with pytest.raises(KeyError):
        table.insert_many([10 * 7], [1.0], X[0], ops.row_norms(X[0], spec))
