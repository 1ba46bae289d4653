"""plan's time model beyond the Allreduce: waiting from jitter, the partial sums' efficiency and a
node profile (``packsvm.plan``)."""
import math

import numpy as np
import pytest

from ppack.errors import PPackError
from ppack.packsvm.plan import NodeProfile, Rates, _pack_seconds, expected_max_normal, rates_of_run


def test_expected_max_of_normals():
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-6)
    draws = np.random.default_rng(0).standard_normal((200000, 16)).max(axis=1).mean()
    assert expected_max_normal(16) == pytest.approx(draws, abs=0.01)  # 1.766


def test_a_run_splits_into_partial_sums_pairs_serial_and_waiting():
    """A table growing 0.5 per iteration, T = 1000, r = 100: per pack k the partial sums cost
    50 k x 100 x 1e-6 / (P efficiency), the pairs 0.02 / P, the serial part 0.003; the waiting is
    J E[max of P normals] times the local work."""
    rates = Rates(per_sv_row=1e-6, fixed_per_pack=0.003, growth=0.5, source="test", pair_per_pack=0.02, jitter=0.1)
    kernel, pairs, serial, waiting, comm = _pack_seconds(rates, 10**6, 1000, 100, 4, 0.8, 0.1, 0.001)
    sums = [50 * k * 100 * 1e-6 / 4 / 0.8 for k in range(1, 11)]
    assert kernel == pytest.approx(sum(sums))
    assert pairs == pytest.approx(10 * 0.005) and serial == pytest.approx(0.03) and comm == pytest.approx(0.01)
    assert waiting == pytest.approx(0.1 * expected_max_normal(4) * (sum(sums) + 10 * 0.005))
    assert _pack_seconds(rates, 10**6, 1000, 100, 1, 1.0, 0.1, 0.0)[3] == 0.0  # one rank waits for nobody


def test_the_split_and_the_jitter_come_from_the_run():
    run = {"n_samples": 1000, "iterations": 1000, "pack": 100, "packs": 10, "ranks": 2, "support_vectors": 500,
           "seconds": {"partial_sums": 0.55, "pair_kernels": 0.01, "serial": 0.04, "kernel_sums": 0.6,
                       "sequential_updates": 0.01, "delivery": 0.01},
           "over_ranks": {"per_rank": {"local_jitter": [0.02, 0.04]}}}
    rates = rates_of_run(run)
    assert rates.per_sv_row == pytest.approx(0.55 / 137500)  # as kernel_sums was: 0.5 x 100 x 55 x 100 / 2
    assert rates.pair_per_pack == pytest.approx(0.002) and rates.fixed_per_pack == pytest.approx(0.004)
    assert rates.jitter == pytest.approx(0.03)


def test_a_node_profile_gives_each_rank_count_its_own_figures():
    profile = NodeProfile.from_dict({"machine": "node", "ranks": {
        "1": {"efficiency": 1.0, "jitter": 0.0, "collective_seconds": 1e-5},
        "16": {"efficiency": 0.7, "jitter": 0.2, "collective_seconds": 1e-4, "collective_seconds_per_byte": 1e-9}}})
    assert profile.at(16, 1000) == (0.7, 0.2, pytest.approx(1e-4 + 1e-6))
    assert profile.at(8, 1000) == (1.0, 0.0, None)  # between: the nearest smaller; collectives only where measured
    assert profile.at(512, 1000) == (0.7, 0.2, None)  # beyond: the largest measured
    with pytest.raises(PPackError, match="--node-profile: not a node profile"):
        NodeProfile.from_dict({"ranks": {"2": {"efficiency": 1.0}}})
