"""One rank's shard of the support-vector hash table."""
import numpy as np
import pytest
import scipy.sparse as sp

from ppack.kernels.compute import KernelCompute
from ppack.kernels.spec import KernelSpec
from ppack.packsvm.table import SupportVectorTable

from helpers import make_problem


def test_table_lookup_growth_and_bulk_insert():
    spec = KernelSpec("rbf")
    X, _ = make_problem(300, 5, sparse=True, seed=6)
    table = SupportVectorTable(KernelCompute(spec, 5, True, np.float64))
    for j in range(200):  # grows past the initial capacity several times
        table.insert_many([10 * j], [float(j)], X[j])
        assert table.slots_of(np.array([10 * j])).tolist() == [j]
    table.insert_many(np.arange(5000, 5100), np.ones(100), X[200:300])
    assert len(table) == 300
    assert table.slots_of(np.array([10 * 123, 5050])).tolist() == [123, 250]
    assert table.holds(np.array([10 * 123, 7, 5050])).tolist() == [True, False, True]
    table.coef[table.slots_of(np.array([10 * 7]))] += 0.5
    assert table.coef.shape == (300, 1) and table.coef[7, 0] == 7.5
    indptr, indices, values = table.features
    rebuilt = sp.csr_matrix((values, indices, indptr), shape=(300, 5))
    np.testing.assert_array_equal(rebuilt.toarray(), X.toarray())
    np.testing.assert_allclose(table.norms, np.asarray(X.multiply(X).sum(axis=1)).ravel())
    with pytest.raises(KeyError):
        table.insert_many([10 * 7], [1.0], X[0])
    with pytest.raises(KeyError):  # a key twice in one insertion
        table.insert_many([9001, 9001], [1.0, 2.0], X[:2])
    assert len(table) == 300 and table.compute.stored.n == 300  # a refused insertion stores no rows


@pytest.mark.parametrize("occupancy", [[0], [3, 1, 1, 4], [2, 2, 2], [0, 5, 0, 9, 1]])
def test_new_entries_go_one_by_one_to_the_least_occupied_rank(occupancy):
    """The numba placement against a plain loop: argmin (lowest rank on ties), then count it in."""
    from ppack.packsvm.loop import least_occupied

    got_counts = np.array(occupancy, dtype=np.int64)
    got = least_occupied(got_counts, 11)
    counts, expected = list(occupancy), []
    for _ in range(11):
        owner = counts.index(min(counts))
        counts[owner] += 1
        expected.append(owner)
    assert got.tolist() == expected and got_counts.tolist() == counts
