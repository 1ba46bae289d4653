"""plan's time model beyond the Allreduce: waiting from jitter, the partial sums' efficiency, a
node profile and the two schedules, pipelined or not (``packsvm.plan``)."""
import math

import numpy as np
import pytest

from ppack.errors import PPackError
from ppack.packsvm.plan import (NodeProfile, Rates, _pack_seconds, _time_lines, expected_max_normal,
                                pipelined_waiting, rates_of_run)


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
    kernel, pairs, serial, correction, waiting, comm = _pack_seconds(rates, 10**6, 1000, 100, 4, 0.8, 0.1, 0.001)
    sums = [50 * k * 100 * 1e-6 / 4 / 0.8 for k in range(1, 11)]
    assert kernel == pytest.approx(sum(sums))
    assert pairs == pytest.approx(10 * 0.005) and serial == pytest.approx(0.03) and comm == pytest.approx(0.01)
    assert correction == 0.0
    assert waiting == pytest.approx(0.1 * expected_max_normal(4) * (sum(sums) + 10 * 0.005))
    assert _pack_seconds(rates, 10**6, 1000, 100, 1, 1.0, 0.1, 0.0)[4] == 0.0  # one rank waits for nobody


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


def test_the_pipelined_schedule_hides_the_collectives_and_part_of_the_waiting():
    """Pipelined, a pack costs serial + max(local + W_p, C): never more than unpipelined's
    serial + local + W + C at the same inputs; without jitter, with local work above the
    collectives, exactly the unpipelined run without its communication."""
    rates = Rates(per_sv_row=1e-6, fixed_per_pack=0.003, growth=0.5, source="test", pair_per_pack=0.02)
    for jitter in (0.0, 0.05, 0.3):
        for collective in (0.0, 0.001, 0.01, 0.1):
            for ranks in (1, 2, 16):
                off = _pack_seconds(rates, 10**6, 1000, 100, ranks, 0.9, jitter, collective)
                on = _pack_seconds(rates, 10**6, 1000, 100, ranks, 0.9, jitter, collective, pipelined=True)
                assert sum(on) <= sum(off) + 1e-15
                assert on[:3] == off[:3] and on[4] <= off[4] / math.sqrt(2) + 1e-15
    # local work per pack >= 0.005 / 2 > C = 0.001: the collectives are all hidden
    off = _pack_seconds(rates, 10**6, 1000, 100, 2, 1.0, 0.0, 0.001)
    on = _pack_seconds(rates, 10**6, 1000, 100, 2, 1.0, 0.0, 0.001, pipelined=True)
    assert sum(on) == pytest.approx(sum(off) - off[5]) and on[5] == 0.0 and off[5] == pytest.approx(0.01)
    # collectives longer than the local work: they set the pace, and hide that much jitter
    on = _pack_seconds(rates, 10**6, 1000, 100, 2, 1.0, 0.0, 1.0, pipelined=True)
    assert sum(on) == pytest.approx(10 * (0.003 + 1.0))
    # the correction is split over the ranks
    rates.correction_per_pack = 0.004
    assert _pack_seconds(rates, 10**6, 1000, 100, 4, 1.0, 0.0, 0.0, pipelined=True)[3] == pytest.approx(0.01)
    assert _pack_seconds(rates, 10**6, 1000, 100, 4, 1.0, 0.0, 0.0)[3] == 0.0


def test_the_pipelined_waiting_matches_a_simulation_of_the_schedule():
    """W_p against the schedule's recurrence t_i' = max(t_i + L_i, max_j t_j + C) (a rank posts
    its collectives, computes, then waits for them; serial 0): within 25% of the waiting."""
    rng = np.random.default_rng(3)
    for ranks, jitter, collective in ((4, 0.2, 0.2), (8, 0.3, 0.9), (16, 0.1, 0.5)):
        t = np.zeros(ranks)
        packs = 1500
        for _ in range(packs):
            t = np.maximum(t + np.maximum(0.0, 1.0 + jitter * rng.standard_normal(ranks)), t.max() + collective)
        simulated = t.max() / packs - 1.0
        assert pipelined_waiting(1.0, collective, jitter, ranks) == pytest.approx(simulated, rel=0.25)
        assert simulated < jitter * expected_max_normal(ranks)  # less than unpipelined's waiting


def test_the_report_names_the_schedule():
    rates = Rates(per_sv_row=1e-6, fixed_per_pack=0.003, growth=0.5, source="test", jitter=0.1)
    buffers = (8000, 8000)
    on, on_seconds = _time_lines(rates, 10**6, 1000, 100, 4, 1e-6, 1e10, buffers, pipelined=True)
    off, off_seconds = _time_lines(rates, 10**6, 1000, 100, 4, 1e-6, 1e10, buffers)
    assert "packs, pipelined = kernel sums" in "\n".join(on) and "correction" in "\n".join(on)
    assert "packs, unpipelined (--pipeline off) = kernel sums" in "\n".join(off)
    assert on_seconds < off_seconds


def test_a_pipelined_run_gives_its_correction_apart_from_the_partial_sums():
    run = {"n_samples": 1000, "iterations": 1000, "pack": 100, "packs": 10, "ranks": 2, "support_vectors": 500,
           "pipeline": "on",
           "seconds": {"partial_sums": 0.6, "correction": 0.05, "pair_kernels": 0.01, "serial": 0.04,
                       "kernel_sums": 0.65, "sequential_updates": 0.01, "delivery": 0.01}}
    rates = rates_of_run(run)
    assert rates.per_sv_row == pytest.approx(0.55 / 137500)  # the partial sums less the correction
    assert rates.correction_per_pack == pytest.approx(0.05 * 2 / 10)  # per pack on one rank
    assert "pipelined" in rates.source
    del run["seconds"]["correction"]  # older metrics: none
    assert rates_of_run(run).correction_per_pack == 0.0


def test_a_node_that_measured_the_pipelined_schedule_gives_its_local_work_and_waiting():
    """A profile whose sweep also ran pipelined: plan's pipelined pack takes the measured local
    work factor (its extra shown as the correction) and waiting ratio instead of W_p and
    hidden collectives; a factor and ratio of 1 with no collectives is the unpipelined run."""
    profile = NodeProfile.from_dict({"machine": "node", "ranks": {
        "1": {"efficiency": 1.0, "jitter": 0.0, "collective_seconds": 1e-5},
        "4": {"efficiency": 0.9, "jitter": 0.2, "collective_seconds": 1e-4,
              "pipelined": {"local_factor": 1.2, "waiting_ratio": 0.5}}}})
    assert profile.pipelined_at(1) is None and profile.pipelined_at(4) == (1.2, 0.5)
    assert profile.pipelined_at(16) == (1.2, 0.5)  # beyond: the largest measured
    assert NodeProfile.from_dict({"ranks": {"2": {"efficiency": 1.0, "jitter": 0.1, "collective_seconds": 0.0}}}
                                 ).pipelined_at(2) is None  # an older profile: the model's W_p
    rates = Rates(per_sv_row=1e-6, fixed_per_pack=0.003, growth=0.5, source="test", pair_per_pack=0.02,
                  correction_per_pack=0.004)
    off = _pack_seconds(rates, 10**6, 1000, 100, 4, 0.9, 0.2, 0.0)
    same = _pack_seconds(rates, 10**6, 1000, 100, 4, 0.9, 0.2, 0.0, pipelined=True, measured=(1.0, 1.0))
    assert same == pytest.approx(off)
    on = _pack_seconds(rates, 10**6, 1000, 100, 4, 0.9, 0.2, 0.0, pipelined=True, measured=(1.2, 0.5))
    assert on[:3] == pytest.approx(off[:3]) and on[4] == pytest.approx(off[4] / 2)
    assert on[3] == pytest.approx(0.2 * (off[0] + off[1]))
    lines, _ = _time_lines(rates, 10**6, 1000, 100, 4, 1e-6, 1e10, (8000, 8000), profile, pipelined=True)
    assert "as measured pipelined on node: local work x 1.20, waiting x 0.50 the unpipelined" in "\n".join(lines)
