"""The keyed splitmix64 stream against its Python-integer twins (tests/naive.py)."""
import numpy as np

from ppack.random_stream import below, below_by_remainder, fmix64, fmix64_array, hash_key, hash_key_int

from naive import MASK64, SplitMix64, fmix64_twin, hash_key_twin, splitmix_below

EDGES = [0, 1, 2, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1]


def test_finaliser_and_hash_match_the_twins_on_edges_and_random_keys():
    keys = EDGES + [int(k) for k in np.random.default_rng(0).integers(0, 2**63, size=200)]
    for z in keys:
        assert int(fmix64(np.uint64(z))) == fmix64_twin(z)
    array = np.array(keys, dtype=np.uint64).reshape(13, -1)[:, :16]
    assert fmix64_array(array).shape == array.shape
    np.testing.assert_array_equal(fmix64_array(array), [[fmix64_twin(int(z)) for z in row] for row in array])
    for key, seed in [(0, 0), (5, 7), (2**40 + 3, 2**63 - 1), (2**62, 12345)]:
        assert int(hash_key(key, seed)) == hash_key_int(key, seed) == hash_key_twin(key, seed)


def test_bounded_draws_follow_the_stream_of_the_twins():
    for seed in (0, 1, 2**63 + 5, MASK64):
        rng, twin = np.array([seed], dtype=np.uint64), SplitMix64(seed)
        draws = [int(below(rng, k)) for k in (1, 2, 7, 1000, 2**32)]
        assert draws == [twin.below(k) for k in (1, 2, 7, 1000, 2**32)]
        assert int(rng[0]) == twin.state
        rng, state = np.array([seed], dtype=np.uint64), [seed]
        draws = [int(below_by_remainder(rng, k)) for k in (1, 3, 10, 2**40 + 1)]
        assert draws == [splitmix_below(state, k) for k in (1, 3, 10, 2**40 + 1)]
        assert int(rng[0]) == state[0]
