"""The ranks seen one by one: the waiting in each collective, the report over ranks, and
placement by measured cost (``pack_update.account_timings``, ``rank_report``, ``table.place_new``)."""
import time

import numpy as np
import pytest
from mpi4py import MPI

from ppack import PackSVC
from ppack.kernels.compute import KernelCompute
from ppack.packsvm.pack_update import MEASURED_FROM_ROWS, account_timings
from ppack.packsvm.rank_report import summarise

from helpers import make_problem

WORLD = MPI.COMM_WORLD
PARAMS = {"kernel": "rbf", "gamma": 0.2, "C": 5.0, "iterations": 2400, "pack": 100, "seed": 5, "dtype": "float64"}


def account_reference(timings, rank, occupancy, spent, row_seconds, memory):
    """account_timings in plain numpy: (waited (2,), row_seconds (p,))."""
    waited = np.minimum(timings[:, :2].max(axis=0) - timings[rank, :2], spent)
    updated = row_seconds.copy()
    if memory > 0:
        for k in range(len(occupancy)):
            if occupancy[k] < MEASURED_FROM_ROWS or timings[k, 2] <= 0:
                continue
            seconds = timings[k, 2] / occupancy[k]
            updated[k] = seconds if row_seconds[k] == 0 else (1 - memory) * row_seconds[k] + memory * seconds
    return waited, updated


@pytest.mark.parametrize("memory", [0.0, 0.05, 1.0])
def test_account_timings_matches_the_numpy_reference(memory):
    rng = np.random.default_rng(4)
    for p in (1, 3, 8):
        timings = rng.uniform(1e-5, 1e-3, size=(p, 3))
        timings[-1, 2] = 0.0  # below the clock's resolution: nothing learnt
        occupancy = rng.integers(0, 3 * MEASURED_FROM_ROWS, size=p)
        row_seconds = np.where(rng.random(p) < 0.5, 0.0, rng.uniform(1e-8, 1e-6, size=p))
        spent = rng.uniform(0.0, 1e-3, size=2)  # some below the estimate: the cap
        for rank in range(p):
            waited, got = np.array([0.25, 0.5]), row_seconds.copy()
            account_timings(timings, rank, occupancy, spent, waited, got, memory)
            expected_wait, expected = account_reference(timings, rank, occupancy, spent, row_seconds, memory)
            np.testing.assert_allclose(waited, [0.25, 0.5] + expected_wait, rtol=1e-15)
            np.testing.assert_array_equal(got, expected)
            assert waited.min() >= 0.25


def test_summarise_gives_min_median_max_per_phase():
    per_rank = [{"total": 3.0, "waiting": 0.5}, {"total": 1.0, "waiting": 0.0}, {"total": 2.0, "waiting": 0.25}]
    assert summarise(per_rank) == {"total": {"min": 1.0, "median": 2.0, "max": 3.0},
                                   "waiting": {"min": 0.0, "median": 0.25, "max": 0.5}}


@pytest.mark.mpi(min_size=2)
def test_the_report_over_ranks_adds_up():
    """Each rank's phases: waiting within its communication, serial what the products, the
    collectives and (pipelined) the shadow's other work leave; the summary is the per-rank lists' min, median and max; the support
    vectors per rank add up to the model's."""
    X, y = make_problem(800, 6, seed=23)
    model = PackSVC(comm=WORLD, pipeline="auto", **PARAMS).fit(X, y)
    report = model.training_["over_ranks"]
    per_rank, p = report["per_rank"]["seconds"], WORLD.Get_size()
    assert WORLD.allgather(report) == [report] * p  # the same on every rank
    mine = {phase: values[WORLD.Get_rank()] for phase, values in per_rank.items()}
    assert mine["total"] == pytest.approx(model.stats_.seconds["total"])
    assert 0.0 <= mine["waiting"] <= mine["communication"]
    assert mine["waiting"] == pytest.approx(mine["wait_collective1"] + mine["wait_collective2"])
    assert mine["collective_own"] == pytest.approx(mine["communication"] - mine["waiting"])
    assert mine["serial"] == pytest.approx(mine["total"] - mine["partial_sums"] - mine["pair_kernels"]
                                           - mine["communication"] - mine["shadow"])
    assert (mine["shadow"] > 0.0) == (p > 1)  # pipelined above one rank ("auto"): the packs ahead's delivery
    for phase, values in per_rank.items():
        assert len(values) == p
        assert report["seconds"][phase] == {"min": min(values), "median": float(np.median(values)),
                                            "max": max(values)}
    assert sum(report["per_rank"]["support_vectors"]) == model.n_support_
    assert report["per_rank"]["support_vectors"][WORLD.Get_rank()] == len(model.table_)
    assert max(per_rank["wait_collective2"]) > 0.0  # some rank arrived first


SLOW_RANK, SLOW_SECONDS_PER_ROW = 1, 20e-6


def slowed_partial_sums(monkeypatch):
    """On SLOW_RANK only: the partial sums take SLOW_SECONDS_PER_ROW longer per stored row, as on
    a slower core (sleeping, so the other ranks keep the processor)."""
    if WORLD.Get_rank() != SLOW_RANK:
        return
    real = KernelCompute.partial_sums

    def slow(self, coef, block, norms, out, **options):
        time.sleep(SLOW_SECONDS_PER_ROW * self.stored.n)
        return real(self, coef, block, norms, out, **options)
    monkeypatch.setattr(KernelCompute, "partial_sums", slow)


@pytest.mark.mpi(min_size=2)
def test_a_slow_rank_is_waited_for_and_placement_by_cost_gives_it_fewer_rows(monkeypatch):
    """One rank's partial sums take 20 us more per stored row (about 2 ms a pack at 100 rows).
    The others wait for it in collective 2, it does not; by count it holds as many support
    vectors as the others, by cost far fewer, and the model is the same within rounding."""
    X, y = make_problem(3000, 6, seed=31)
    params = dict(PARAMS, iterations=4000)
    slowed_partial_sums(monkeypatch)
    by_count = PackSVC(comm=WORLD, **params).fit(X, y)
    by_cost = PackSVC(comm=WORLD, placement="cost", **params).fit(X, y)
    rows = by_cost.training_["over_ranks"]["per_rank"]["support_vectors"]
    counted = by_count.training_["over_ranks"]["per_rank"]["support_vectors"]
    others = [n for k, n in enumerate(rows) if k != SLOW_RANK]
    assert max(counted) - min(counted) <= 1
    assert rows[SLOW_RANK] < 0.6 * np.median(others), rows
    waits = by_count.training_["over_ranks"]["per_rank"]["seconds"]["wait_collective2"]
    assert waits[SLOW_RANK] < min(w for k, w in enumerate(waits) if k != SLOW_RANK), waits
    np.testing.assert_array_equal(np.sort(np.concatenate(WORLD.allgather(by_cost.table_.keys))),
                                  np.sort(np.concatenate(WORLD.allgather(by_count.table_.keys))))
    expected = by_count.decision_function(X)
    np.testing.assert_allclose(by_cost.decision_function(X), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())


def test_jitter_is_the_spread_about_a_slow_trend():
    from ppack.packsvm.state import Jitter

    rng = np.random.default_rng(2)
    trend = np.linspace(1e-3, 3e-3, 20000)  # the table grows: the mean drifts
    noisy, smooth = Jitter(), Jitter()
    for t, noise in zip(trend, rng.normal(0.0, 1e-4, size=len(trend))):
        noisy.add(t + noise)
        smooth.add(t)
    assert noisy.relative() == pytest.approx(1e-4 / trend.mean(), rel=0.03)
    assert smooth.relative() < 1e-4
    assert Jitter().relative() == 0.0
