"""The shared stream of sampled row ids."""
import json

import numpy as np
import pytest

from ppack.data.sampler import EpochSampler, RowSampler, held_out, make_sampler, sampler_from_state


def test_sampler_stream_is_independent_of_pack_size():
    a = RowSampler(1000, 5)
    b = RowSampler(1000, 5)
    drawn = np.concatenate([a.take(r) for r in [1, 7, 100, 8192, 3, 20000]])
    np.testing.assert_array_equal(drawn, b.take(len(drawn)))
    assert drawn.min() >= 0 and drawn.max() < 1000


@pytest.mark.parametrize("n", [1, 2, 5, 1000, 70_001])
def test_epoch_sampler_visits_every_row_once_per_epoch_in_a_fresh_order(n):
    sampler = EpochSampler(n, 5)
    epochs = [sampler.take(n) for _ in range(3)]
    for ids in epochs:
        np.testing.assert_array_equal(np.sort(ids), np.arange(n))
    if n >= 1000:
        assert np.mean(epochs[0] == epochs[1]) < 0.01  # another order each epoch
        assert np.mean(epochs[0] == EpochSampler(n, 6).take(n)) < 0.01  # and for another seed
        # no trace of the identity order: consecutive ids are no more alike than random pairs
        assert abs(np.corrcoef(np.arange(n), epochs[0])[0, 1]) < 0.05


def test_epoch_sampler_stream_is_independent_of_pack_size_and_resumes_from_its_state():
    a = EpochSampler(3000, 9)
    drawn = np.concatenate([a.take(r) for r in [1, 7, 100, 8192, 3, 2000]])
    np.testing.assert_array_equal(drawn, EpochSampler(3000, 9).take(len(drawn)))
    b = EpochSampler(3000, 9)
    b.take(2999)  # one row short of the epoch's end: the state must carry it over
    state, block = b.state()
    resumed = sampler_from_state(json.loads(json.dumps(state)), block)
    np.testing.assert_array_equal(resumed.take(7000), EpochSampler(3000, 9).take(9999)[2999:])


def test_epoch_sampler_skips_held_out_rows_and_refuses_when_all_are():
    holdout = (0.2, 4)
    ids = EpochSampler(5000, 1, holdout).take(8000)
    kept = np.flatnonzero(~held_out(np.arange(5000), *holdout))
    np.testing.assert_array_equal(np.sort(ids[:len(kept)]), kept)  # the first epoch: each kept row once
    assert not held_out(ids, *holdout).any()
    seed = next(s for s in range(100) if held_out(np.arange(1), 0.5, s)[0])  # holds out the only row
    with pytest.raises(ValueError, match="every one of the 1 rows is held out"):
        EpochSampler(1, 0, (0.5, seed)).take(1)


def test_states_without_a_kind_are_the_uniform_stream():
    a = RowSampler(500, 2)
    a.take(300)
    state, block = a.state()
    assert "kind" not in state
    resumed = sampler_from_state(state, block)
    assert isinstance(resumed, RowSampler)
    np.testing.assert_array_equal(resumed.take(50), RowSampler(500, 2).take(350)[300:])
    assert isinstance(make_sampler("epochs", 10, 0), EpochSampler)
    with pytest.raises(ValueError, match="sampling"):
        make_sampler("shuffled", 10, 0)


def numpy_epoch_order(n, seed, epoch):
    """Epoch ``epoch``'s order of n rows written with numpy arrays from the sampler's
    definition: a four-round Feistel network on 2 * half bits (the smallest even number of
    bits that holds n), round keys fmix64(fmix64(seed) ^ fmix64(4 epoch + i)), cycle walking
    back into [0, n)."""
    from ppack.random_stream import fmix64_array

    half = (max(1, (n - 1).bit_length()) + 1) // 2
    seed_key = fmix64_array(np.array([seed], dtype=np.uint64))
    keys = fmix64_array(seed_key ^ fmix64_array(np.arange(4 * epoch, 4 * epoch + 4, dtype=np.uint64)))
    shift, mask = np.uint64(half), np.uint64((1 << half) - 1)

    def feistel(x):
        left, right = x >> shift, x & mask
        for key in keys:
            left, right = right, left ^ (fmix64_array(right ^ key) & mask)
        return (left << shift) | right

    ids = feistel(np.arange(n, dtype=np.uint64))
    out = ids >= np.uint64(n)
    while out.any():
        ids[out] = feistel(ids[out])
        out[out] = ids[out] >= np.uint64(n)
    return ids.astype(np.int64)


@pytest.mark.parametrize("n", [1, 2, 5, 1000, 49_990, 80_000])
def test_epoch_order_is_the_numpy_definitions(n):
    """The numba permutation (one pass per id) against the numpy one, over two epochs and seeds."""
    for seed, epoch in [(0, 0), (7, 3)]:
        got = EpochSampler(n, seed).permuted(np.arange(n, dtype=np.int64), epoch)
        np.testing.assert_array_equal(got, numpy_epoch_order(n, seed, epoch))
