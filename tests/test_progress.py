"""Rank 0's progress lines (``progress.Progress``) and their ETA (``eta.EtaEstimator``), on a
simulated run and a fake clock: no test here depends on how fast this machine is."""
import io
import math
import re

import pytest

import ppack.progress
from ppack.eta import EtaEstimator
from ppack.progress import Progress


class FakeClock:
    """``time`` for ppack.progress: ``monotonic()`` reads ``now``, which the test moves."""

    def __init__(self):
        self.now = 100.0

    def monotonic(self):
        return self.now


def simulated_run(a, b, n_of, total, pack):
    """(seconds at the end of each pack, iteration, support vectors): a run whose iteration
    costs a + b n seconds with n = n_of(iteration) support vectors."""
    seconds, packs = 0.0, []
    for iteration in range(pack, total + 1, pack):
        seconds += pack * (a + b * n_of(iteration - pack))
        packs.append((seconds, iteration, n_of(iteration)))
    return packs


def seconds_of(text):
    """'1h02m', '5m03s' or '42s' in seconds."""
    h, m, s = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text).groups()
    return 3600 * int(h or 0) + 60 * int(m or 0) + int(s or 0)


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(ppack.progress, "time", fake)
    return fake


def test_the_first_log_line_comes_at_the_first_update_then_every_log_every(clock):
    stream = io.StringIO()
    bar = Progress(stream, log_every=30.0, interactive=False)
    clock.now += 12.0  # reading the data and compiling: the first pack ends here
    bar.update(100, 10_000, 40, 0.9)
    assert stream.getvalue() == "  12s: 100/10000 it (1%), ? it/s, ETA ?, 40 SVs, hinge 0.9000\n"
    for k in range(2, 31):
        clock.now += 1.0
        bar.update(100 * k, 10_000, 40, 0.5)
    assert stream.getvalue().count("\n") == 1  # 29 s after the first line: none yet
    clock.now += 1.0
    bar.update(3100, 10_000, 40, 0.5)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and lines[1] == "  42s: 3100/10000 it (31%), 100 it/s, ETA 1m09s, 40 SVs, hinge 0.5000"


# (cost a, b per support vector, support vectors after i iterations, iterations, pack, log_every)
RUNS = {
    # support vectors growing all along: the cost per iteration rises tenfold
    "growing": (2e-4, 1e-7, lambda i: 100 + i // 50, 1_000_000, 1000, 30.0),
    # support vectors saturating at the rows (60,000) within the first epochs
    "saturating": (1e-5, 3e-9, lambda i: int(60000 * -math.expm1(-i / 40000)), 480_000, 100, 10.0),
}


@pytest.mark.parametrize("name", RUNS)
def test_the_eta_follows_the_cost_that_grows_with_the_support_vectors(name, clock):
    """From 15% to 80% of the run every line's ETA is within 10% of the time the run still
    takes. (The old estimate, the average rate since the start, fails both: at a quarter of
    the growing run it said 5m48s where 18m08s were left.)"""
    a, b, n_of, total, pack, log_every = RUNS[name]
    run = simulated_run(a, b, n_of, total, pack)
    stream = io.StringIO()
    bar = Progress(stream, log_every=log_every, interactive=False)
    start = clock.now
    checked = 0
    for seconds, iteration, n in run:
        clock.now = start + seconds
        before = stream.getvalue()
        bar.update(iteration, total, n, 0.5)
        if stream.getvalue() != before and 0.15 * total <= iteration <= 0.8 * total:
            eta = re.search(r"ETA (\S+),", stream.getvalue().splitlines()[-1])[1]
            assert seconds_of(eta) == pytest.approx(run[-1][0] - seconds, rel=0.10), (iteration, eta)
            checked += 1
    assert checked >= 5


def test_a_constant_cost_gives_the_plain_rate():
    estimate = EtaEstimator(stretch=0.5)
    for seconds, iteration, n in simulated_run(1e-5, 0.0, lambda i: 500 + i // 10, 200_000, 500):
        estimate.add(seconds, iteration, n)
        if iteration == 100_000:
            assert estimate.rate() == pytest.approx(1e5)
            assert estimate.remaining(200_000) == pytest.approx(1.0)
            assert estimate.cost()[1] == pytest.approx(0.0, abs=1e-15)


def test_nothing_is_estimated_before_a_stretch_is_seen():
    estimate = EtaEstimator(stretch=0.5)
    estimate.add(3.0, 1000, 10)
    estimate.add(3.2, 2000, 20)
    assert estimate.rate() is None and estimate.remaining(10_000) is None


@pytest.mark.parametrize("every", [0.0, 1e9])
def test_the_pack_loop_reports_the_first_and_last_pack_and_between_them_at_its_cadence(every, monkeypatch):
    """The packed solver calls its progress callback after the first pack, after the last, and
    between them at most every ``loop.PROGRESS_EVERY`` seconds (0: every pack)."""
    from mpi4py import MPI

    from ppack import PackSVC
    from ppack.packsvm import loop

    from helpers import make_problem

    monkeypatch.setattr(loop, "PROGRESS_EVERY", every)
    seen = []
    X, y = make_problem(200, 4, seed=7)
    PackSVC(iterations=600, pack=50, comm=MPI.COMM_SELF,
            progress=lambda state, stats, n_support, total: seen.append(state.iteration)).fit(X, y)
    assert seen == (list(range(50, 601, 50)) if every == 0.0 else [50, 600])
