"""One rank's shard of the support-vector hash table."""
import numpy as np
import pytest
import scipy.sparse as sp

from ppack.kernels.block import RowBlock
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


@pytest.mark.parametrize("sparse", [False, True])
def test_dropping_zero_entries_keeps_the_others_rows_keys_and_order(sparse):
    """Entries whose coefficients are 0 in every column leave; the rest keep their rows, norms and
    lookups, in order, and new entries go after them."""
    X, _ = make_problem(40, 5, sparse=sparse, seed=8)
    table = SupportVectorTable(KernelCompute(KernelSpec("rbf"), 5, sparse, np.float64), 2)
    coef = np.random.default_rng(1).normal(size=(40, 2))
    coef[::3] = 0.0
    coef[1, 0] = 0.0  # zero in one column only: stays
    table.insert_many(np.arange(100, 140), coef, X)
    assert table.drop_zeros() == 14
    kept = np.any(coef != 0, axis=1)
    np.testing.assert_array_equal(table.keys, np.arange(100, 140)[kept])
    np.testing.assert_array_equal(table.coef, coef[kept])
    expected = X[kept].toarray() if sparse else X[kept]
    if sparse:
        indptr, indices, values = table.features
        rows = sp.csr_matrix((values, indices, indptr), shape=(26, 5)).toarray()
    else:
        rows = table.features
    np.testing.assert_array_equal(rows, expected)
    np.testing.assert_allclose(table.norms, (expected ** 2).sum(axis=1))
    assert table.slots_of(np.array([100, 101, 102, 103])).tolist() == [-1, 0, 1, -1]
    table.insert_many([500], [[1.0, 2.0]], X[:1])
    assert table.slots_of(np.array([500])).tolist() == [26] and table.drop_zeros() == 0


@pytest.mark.parametrize("occupancy", [[0], [3, 1, 1, 4], [2, 2, 2], [0, 5, 0, 9, 1]])
@pytest.mark.parametrize("measured", [False, True])
def test_new_entries_go_one_by_one_to_the_least_occupied_rank(occupancy, measured):
    """The numba placement by count against a plain loop: argmin (lowest rank on ties), then count
    it in; also while some rank's seconds per row is unmeasured (0)."""
    from ppack.packsvm.table import place_new

    row_seconds = np.zeros(len(occupancy))
    if measured and len(occupancy) > 1:
        row_seconds[1:] = 1e-6  # rank 0 unmeasured: still by count
    got_counts = np.array(occupancy, dtype=np.int64)
    got = place_new(got_counts, row_seconds, 11)
    counts, expected = list(occupancy), []
    for _ in range(11):
        owner = counts.index(min(counts))
        counts[owner] += 1
        expected.append(owner)
    assert got.tolist() == expected and got_counts.tolist() == counts


@pytest.mark.parametrize("occupancy,row_seconds", [([0, 0], [1e-6, 1e-6]), ([10, 10, 10, 10], [1.0, 2.0, 1.0, 0.5]),
                                                   ([40, 3, 7], [2e-7, 3e-6, 1.1e-6]), ([5], [1e-9])])
def test_placement_by_cost_fills_the_rank_whose_rows_take_least_time(occupancy, row_seconds):
    """By cost against a plain loop: each new entry to argmin (occupancy + 1) * seconds per row
    (lowest rank on ties), counted in; a rank twice as fast ends with about twice the rows."""
    from ppack.packsvm.table import place_new

    got_counts = np.array(occupancy, dtype=np.int64)
    got = place_new(got_counts, np.array(row_seconds), 200)
    counts, expected = list(occupancy), []
    for _ in range(200):
        cost = [(c + 1) * s for c, s in zip(counts, row_seconds)]
        owner = cost.index(min(cost))
        counts[owner] += 1
        expected.append(owner)
    assert got.tolist() == expected and got_counts.tolist() == counts
    times = np.array(counts) * np.array(row_seconds)
    assert times.max() - times.min() <= max(row_seconds) * 1.0001  # balanced to one row's time


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


@pytest.mark.parametrize("K", [1, 3])
def test_lazy_averages_equal_the_eager_update_through_settles_and_folds(K):
    """``apply_pack`` keeps the averages lazily (a clock of the packs' increments, settled into
    an entry when it is touched, into all of them on a fold or when the increments fall far
    below the clock): held to an eager reference that adds every pack's increment times the
    coefficient to every entry, over packs whose increments grow, then collapse by 1e-40 (which
    forces settles), with scale folds and repeated keys."""
    rng = np.random.default_rng(8)
    d, r, packs = 3, 20, 60
    table = SupportVectorTable(KernelCompute(KernelSpec("rbf"), d, False, np.float64), K, averaged=True)
    occupancy = np.zeros(1, dtype=np.int64)
    ref_coef, ref_avg = {}, {}
    increment = 1.0
    for p in range(packs):
        ids = rng.integers(0, 150, r).astype(np.int64)
        block_rows = rng.normal(size=(r, d))
        block = RowBlock(d, np.ones(r), dense=block_rows)
        coef = rng.normal(size=(K, r))
        loss = np.where(rng.random((K, r)) < 0.4, 1.0, 0.0)
        coef[loss == 0] = 0.0
        increment *= 1e-40 if p == 30 else 1.5
        average = increment * np.concatenate([rng.random((K, r)), np.ones((K, 1))], axis=1)
        fold = np.column_stack([np.where(np.arange(K) == p % K, 0.75, 1.0), np.where(np.arange(K) == p % K, -3.0, 0.0)]) \
            if p % 7 == 6 else np.empty((0, 2))
        flags = table.holds(ids).astype(np.float64)  # rank 0 + 1 where held
        for key in ref_coef:  # the eager reference
            ref_avg[key] = ref_avg[key] + ref_coef[key] * average[:, r]
        if fold.shape[0]:
            for key in ref_coef:
                ref_coef[key] = ref_coef[key] * fold[:, 0] * 2.0 ** fold[:, 1]
        for k in range(r):
            if loss[:, k].max() > 0:
                key = int(ids[k])
                ref_coef[key] = ref_coef.get(key, np.zeros(K)) + coef[:, k]
                ref_avg[key] = ref_avg.get(key, np.zeros(K)) + average[:, k]
        table.apply_pack(ids, flags, coef, loss, average, fold, 0, occupancy, block, np.ones(r))
    keys = sorted(ref_coef)
    assert sorted(table.keys.tolist()) == keys
    slots = table.slots_of(np.array(keys))
    expected_avg = np.array([ref_avg[k] for k in keys])
    np.testing.assert_allclose(table.coef[slots], np.array([ref_coef[k] for k in keys]), rtol=1e-12, atol=0)
    np.testing.assert_allclose(table.avg[slots], expected_avg, rtol=1e-10, atol=0)
    assert table.avg_clock.max() < increment * 1e4  # settled after the collapse: the clock restarted
