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
    from ppack.packsvm.table import least_occupied

    got_counts = np.array(occupancy, dtype=np.int64)
    got = least_occupied(got_counts, 11)
    counts, expected = list(occupancy), []
    for _ in range(11):
        owner = counts.index(min(counts))
        counts[owner] += 1
        expected.append(owner)
    assert got.tolist() == expected and got_counts.tolist() == counts


def test_key_slots_map_like_a_dict_through_growth():
    """The numba open-addressing map against a dict: keys of every size, absent keys, many
    rehashes, and refused insertions (present or repeated keys) that change nothing."""
    from ppack.packsvm.key_slots import KeySlots

    rng = np.random.default_rng(3)
    keys = np.unique(np.concatenate([rng.integers(0, 2**62, 3000), np.arange(500), [2**63 - 1]]))
    keys = rng.permutation(keys)
    slots, reference = KeySlots(), {}
    for start in range(0, len(keys), 97):  # batches, as packs add them
        batch = keys[start:start + 97]
        assert slots.add(batch, len(reference)) == -1
        reference.update(zip(batch.tolist(), range(len(reference), len(reference) + len(batch))))
    assert slots.n == len(reference) and len(slots.keys) >= 2 * len(reference)
    probe = np.concatenate([keys, rng.integers(0, 2**62, 500)])
    expected = [reference.get(k, -1) for k in probe.tolist()]
    assert slots.lookup(probe).tolist() == expected
    before = slots.keys.copy()
    assert slots.add(np.array([2**61 + 5, int(keys[10])]), 0) == 1  # present
    assert slots.add(np.array([7 * 10**15, 3 * 10**15, 7 * 10**15]), 0) == 2  # repeated
    assert np.array_equal(slots.keys, before) and slots.n == len(reference)
