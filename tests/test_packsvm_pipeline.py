"""Pipelined packs (``packsvm/pipeline.py``): the pieces against slow references, the schedule
against the unpipelined one, resumes, and every way a run stops with no request in flight."""
import math

import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

import ppack.packsvm.loop as loop
from ppack import PackOneClassSVM, PackSVC, PackSVR
from ppack.errors import PPackError
from ppack.kernels.block import RowBlock
from ppack.kernels.compute import BETWEEN_FINE_ROWS, BETWEEN_VALUES, BETWEEN_WORK, KernelCompute, _runs
from ppack.kernels.spec import KernelSpec
from ppack.mpi.collectives import Collectives
from ppack.packsvm.columns import Columns
from ppack.packsvm.delay import Delay
from ppack.packsvm.pipeline import Correction, changed_share, fold_sums

from helpers import make_multiclass, make_problem
from naive import kernel_matrix

WORLD, SELF = MPI.COMM_WORLD, MPI.COMM_SELF
PARAMS = {"kernel": "rbf", "gamma": 0.2, "C": 5.0, "iterations": 1200, "pack": 50, "seed": 5, "dtype": "float64",
          "average": False}


# -- the pieces ------------------------------------------------------------------------
def test_fold_sums_scales_each_column_as_the_table_folds_its_coefficients():
    """Against math.ldexp column by column, the identity fold left alone, and an exponent
    whose power of two alone would overflow."""
    sums = np.array([[1.5, -2.0, 3.0], [1e-300, -4e-310, 2e-305], [7.0, 8.0, 9.0]])
    fold = np.array([[0.75, -3.0], [0.5, 1100.0], [1.0, 0.0]])
    expected = sums.copy()
    for c in range(2):
        expected[c] = [math.ldexp(v * fold[c, 0], int(fold[c, 1])) for v in sums[c]]
    fold_sums(sums, fold)
    np.testing.assert_array_equal(sums, expected)
    assert np.isfinite(sums[1]).all() and sums[1, 0] > 1e30


def test_the_ranks_shares_of_the_changed_rows_cover_them_once():
    delta = np.zeros((2, 10))
    delta[0, [1, 4, 7]] = 1.0
    delta[1, [4, 9]] = -2.0
    def share(delta, rank, size):
        positions, coefs = np.empty(10, dtype=np.int64), np.empty((10, 2))
        return positions[:changed_share(delta, rank, size, positions, coefs)]

    for size in (1, 2, 3, 7):
        shares = [share(delta, rank, size) for rank in range(size)]
        np.testing.assert_array_equal(np.concatenate(shares), [1, 4, 7, 9])
        assert max(map(len, shares)) - min(map(len, shares)) <= 1
    # the kernel also gathers the share's delta, transposed (numpy's twin), from a pack's narrower view
    wide = np.zeros((2, 12))
    wide[:, :10] = delta
    positions, coefs = np.full(12, -1), np.full((12, 2), np.nan)
    m = changed_share(wide[:, :10], 1, 2, positions, coefs)
    np.testing.assert_array_equal(positions[:m], [7, 9])
    np.testing.assert_array_equal(coefs[:m], delta[:, [7, 9]].T)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "poly"])
@pytest.mark.parametrize("sparse", [False, True])
def test_the_correction_is_the_changed_rows_kernel_sums(kernel, sparse):
    """Every rank's share of sum_j delta_j (K(x_j, x_i) + offset), summed over ranks, against
    the formulas on dense float64 copies; rows with delta 0 (unchanged) add nothing."""
    rng = np.random.default_rng(4)
    A, B = rng.normal(size=(12, 6)), rng.normal(size=(9, 6))
    A[rng.random(A.shape) < 0.4] = 0.0
    spec = KernelSpec(kernel, 0.3, 2, 0.5, 1.0)
    block, next_block = (RowBlock.from_rows(sp.csr_matrix(M) if sparse else M, np.zeros(len(M)), 6) for M in (A, B))
    compute = KernelCompute(spec, 6, sparse)
    norms, next_norms = compute.row_norms(block), compute.row_norms(next_block)
    delta = np.zeros((2, 12))
    delta[:, [0, 3, 4, 10]] = rng.normal(size=(2, 4))
    out = np.zeros((2, 9))
    correction = Correction(spec, 6, sparse, np.float64, 1 << 20)
    for rank in range(3):  # one compute for every pack: each overwrites the previous one's rows
        correction.add(block, norms, delta, rank, 3, next_block, next_norms, out)
    expected = delta @ (kernel_matrix(A, B, kernel, 0.3, 2, 0.5) + 1.0)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
@pytest.mark.parametrize("sparse", [False, True])
def test_partial_sums_tested_between_tiles_are_the_same_bits(kernel, sparse):
    """``between`` is called between runs of tiles until it returns True; the sums are the same
    bits whenever it does, and equal one pass's up to rounding (the dense path's tiles differ)."""
    rng = np.random.default_rng(5)
    stored, rows = rng.normal(size=(9000, 20)), rng.normal(size=(40, 20))
    if sparse:
        stored[rng.random(stored.shape) < 0.5] = 0.0
    compute = KernelCompute(KernelSpec(kernel, 0.1), 20, sparse)
    compute.store(sp.csr_matrix(stored) if sparse else stored)
    block = RowBlock.from_rows(rows, np.zeros(40), 20)
    norms, coef = compute.row_norms(block), rng.normal(size=(9000, 3))
    whole, tested, done_at_once = np.zeros((3, 40)), np.zeros((3, 40)), np.zeros((3, 40))
    compute.partial_sums(coef, block, norms, whole)
    calls = []
    compute.partial_sums(coef, block, norms, tested, between=lambda: calls.append(1))  # None: never done
    assert len(calls) >= 3
    compute.partial_sums(coef, block, norms, done_at_once, between=lambda: calls.append(2) or True)
    assert calls.count(2) == 1
    np.testing.assert_array_equal(done_at_once, tested)
    np.testing.assert_allclose(tested, whole, rtol=1e-12, atol=1e-12 * np.abs(whole).max())
    for done_at in range(2, calls.count(1) + 1):  # done inside the fine tiles, at their end, in the coarse ones
        later, count = np.zeros((3, 40)), iter(range(1, 10**6))
        compute.partial_sums(coef, block, norms, later, between=lambda: next(count) >= done_at)
        np.testing.assert_array_equal(later, tested)


def test_runs_take_fine_tiles_first_whenever_the_callback_is_done():
    """The rows' tiles depend only on their number: the first BETWEEN_FINE_ROWS in fine
    tiles, the rest in the usual ones, whether the callback is done at once, midway or never."""
    n, tile, fine = 5000, 512, 256
    never = list(_runs(n, tile, 100, lambda: False, fine))
    assert never[0][0] == 0 and never[-1][1] == n and all(b == c for (_, b, _), (c, _, _) in zip(never, never[1:]))
    assert {t for a, _, t in never if a < BETWEEN_FINE_ROWS} == {fine}
    assert {t for a, _, t in never if a >= BETWEEN_FINE_ROWS} == {tile}

    def tile_of_each_row(runs):
        return np.concatenate([np.full(b - a, t) for a, b, t in runs])

    for done_at in range(1, len(never) + 1):
        count = iter(range(1, 10**6))
        runs = list(_runs(n, tile, 100, lambda: next(count) >= done_at, fine))
        np.testing.assert_array_equal(tile_of_each_row(runs), tile_of_each_row(never))
        assert all(b - a == n - a or (b - a) % t == 0 for a, b, t in runs)  # whole tiles
    assert list(_runs(n, tile, 100, None, fine)) == [(0, n, tile)]


def test_runs_of_cheap_rows_are_longer():
    """Rows of few stored values (sparse) are tested between runs of about BETWEEN_WORK values
    times block rows, rows of many in runs of about BETWEEN_VALUES kernel values."""
    def lengths(values_per_row):
        return {b - a for a, b, _ in _runs(50_000, 64, 100, lambda: False, values_per_row=values_per_row)}

    cheap, dear = lengths(13), lengths(784)
    assert max(cheap) == 64 * (BETWEEN_WORK // (64 * 100 * 13))
    assert max(dear) == 64 * (BETWEEN_VALUES // (64 * 100)) < max(cheap)


# -- the schedule against the unpipelined one ----------------------------------------------
def fit_both(make, X, y, comm, **params):
    """The same estimator fitted unpipelined and pipelined on ``comm``."""
    return [make(comm=comm, pipeline=pipeline, **params).fit(X, y) for pipeline in ("off", "on")]


def decisions(model, X):
    """Decision values, or a regression's predictions."""
    return model.predict(X) if isinstance(model, PackSVR) else model.decision_function(X)


def assert_same_model(off, on, X, comm):
    """The same support-vector keys, coefficients within 1e-12 relative, decisions within 1e-9."""
    assert np.array_equal(np.sort(np.concatenate(comm.allgather(off.table_.keys))),
                          np.sort(np.concatenate(comm.allgather(on.table_.keys))))
    if comm.Get_size() == 1 or off.placement == "count":  # the same placement: each key on the same rank
        order_off, order_on = np.argsort(off.table_.keys), np.argsort(on.table_.keys)
        a, b = off.table_.coef[order_off], on.table_.coef[order_on]
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12 * np.abs(a).max())
    expected = decisions(off, X)
    np.testing.assert_allclose(decisions(on, X), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
    assert on.training_["allreduce_calls"] == off.training_["allreduce_calls"]


VARIANTS = {
    "binary": (PackSVC, {}),
    "binary csr": (PackSVC, {"sparse": True}),
    "laplacian": (PackSVC, {"kernel": "laplacian", "gamma": 0.1}),
    "averaged": (PackSVC, {"average": True}),
    "multiclass": (PackSVC, {"multiclass": True}),
    "multiclass averaged csr": (PackSVC, {"multiclass": True, "average": True, "sparse": True}),
    "svr": (PackSVR, {"epsilon": 0.1}),
    "one-class averaged": (PackOneClassSVM, {"nu": 0.2, "average": True}),
    "float32": (PackSVC, {"dtype": "float32"}),
}


def variant(name):
    make, extra = VARIANTS[name]
    extra = dict(extra)
    sparse, multiclass = extra.pop("sparse", False), extra.pop("multiclass", False)
    X, y = make_multiclass(400, 6, sparse=sparse, seed=8) if multiclass else make_problem(400, 6, sparse=sparse,
                                                                                        seed=8)
    if make is PackSVR:
        y = np.sin(3 * np.asarray((X[:, :1].toarray() if sparse else X[:, :1])).ravel())
    params = dict(PARAMS, **extra)
    if make is not PackSVC:
        params.pop("C")
    return make, X, y, params


@pytest.mark.parametrize("name", list(VARIANTS))
def test_pipelined_equals_unpipelined_on_one_rank(name):
    make, X, y, params = variant(name)
    off, on = fit_both(make, X, y, SELF, **params)
    if params["dtype"] == "float32":  # float32 kernel values: the tiles' sums round alike, the fold apart
        np.testing.assert_allclose(on.decision_function(X), off.decision_function(X), rtol=1e-6, atol=1e-6)
    else:
        assert_same_model(off, on, X, SELF)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("placement", ["count", "cost"])
@pytest.mark.parametrize("name", ["binary", "binary csr", "multiclass averaged csr", "svr", "one-class averaged"])
def test_pipelined_equals_unpipelined_on_all_ranks(name, placement):
    make, X, y, params = variant(name)
    off, on = fit_both(make, X, y, WORLD, placement=placement, **params)
    assert_same_model(off, on, X, WORLD)


@pytest.mark.mpi(min_size=2)
def test_pipelined_on_all_ranks_equals_one_rank_and_one_row_packs():
    """p-invariance and r-invariance of the pipelined schedule, to the unpipelined tests' 1e-9:
    all ranks with r = 50 against one rank with r = 1 (a correction every row)."""
    X, y = make_problem(300, 6, seed=9)
    params = dict(PARAMS, iterations=600)
    parallel = PackSVC(comm=WORLD, pipeline="on", **params).fit(X, y)
    serial = PackSVC(comm=SELF, pipeline="on", **dict(params, pack=1)).fit(X, y)
    keys = np.sort(np.concatenate(WORLD.allgather(parallel.table_.keys)))
    np.testing.assert_array_equal(keys, np.sort(serial.table_.keys))
    expected = serial.decision_function(X)
    np.testing.assert_allclose(parallel.decision_function(X), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())


def test_the_delay_changes_no_bit_of_the_model():
    X, y = make_problem(300, 6, seed=10)
    plain = PackSVC(comm=SELF, pipeline="on", **PARAMS).fit(X, y)
    delayed = PackSVC(comm=SELF, pipeline="on", **PARAMS).fit(X, y, delay=Delay.parse("mean=200us,seed=2"))
    np.testing.assert_array_equal(delayed.table_.coef, plain.table_.coef)


# -- resumes ----------------------------------------------------------------------------
@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("multiclass", [False, True])
def test_a_resumed_pipelined_run_equals_the_uninterrupted_one_bit_for_bit(multiclass, mpi_tmp_path):
    """Stopped after pack 7 with its checkpoint (the sums and ids delivered ahead kept), then
    resumed on the same ranks: the same model, bit for bit; resumed unpipelined, the packs
    delivered ahead run first and the model is the same up to rounding."""
    X, y = make_multiclass(400, 6, seed=11) if multiclass else make_problem(400, 6, seed=11)
    params = dict(PARAMS, average=True)
    full = PackSVC(comm=WORLD, pipeline="on", **params).fit(X, y)
    path = mpi_tmp_path / "state.h5"
    stopped = PackSVC(comm=WORLD, pipeline="on", **params).fit(X, y, checkpoint=path, stop_after_packs=7)
    assert stopped.stopped_
    resumed = PackSVC(comm=WORLD, pipeline="on", **params).fit(X, y, checkpoint=path, resume=True)
    assert resumed.resumed_from_ == 7 * params["pack"]
    np.testing.assert_array_equal(resumed.decision_function(X), full.decision_function(X))
    unpipelined = PackSVC(comm=WORLD, pipeline="off", **params).fit(X, y, checkpoint=path, resume=True)
    expected = full.decision_function(X)
    np.testing.assert_allclose(unpipelined.decision_function(X), expected, rtol=1e-9,
                               atol=1e-9 * np.abs(expected).max())


# -- every stop with nothing in flight ------------------------------------------------------
class TrackedCollectives(Collectives):
    """Collectives that keep the requests started and not yet waited for (``open``)."""

    open = []

    def start_sum(self, buf):
        request = super().start_sum(buf)
        TrackedCollectives.open.append(request)
        return request

    def wait(self, request):
        super().wait(request)
        TrackedCollectives.open = [q for q in TrackedCollectives.open if q is not request]

    @staticmethod
    def wait_all(requests):
        Collectives.wait_all(requests)
        TrackedCollectives.open = [q for q in TrackedCollectives.open if all(q is not r for r in requests)]


@pytest.fixture
def tracked(monkeypatch):
    TrackedCollectives.open = []
    monkeypatch.setattr(loop, "Collectives", TrackedCollectives)
    return TrackedCollectives


def diverging_problem():
    """A row whose linear kernel value overflows: the replay meets a non-finite value."""
    X, y = make_problem(60, 4, seed=10)
    X = np.hstack([X, np.zeros((60, 1))])
    X[17] = 0.0
    X[17, -1] = 1e200
    return X, y


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("stop", ["last pack", "tol", "validation", "stop request", "stop after packs",
                                  "non-finite", "an error in the sums"])
def test_every_stop_leaves_no_request_in_flight(stop, tracked, mpi_tmp_path, monkeypatch):
    X, y = make_problem(400, 6, seed=12)
    params, fit = dict(PARAMS), {}
    if stop == "tol":
        params.update(tol=0.5, tol_window=50, iterations=4000)
    elif stop == "validation":
        params.update(validation=0.2, validation_every=1, patience=1, iterations=4000)
    elif stop == "stop request":
        fit.update(checkpoint=mpi_tmp_path / "stop.h5", should_stop=lambda: True)
    elif stop == "stop after packs":
        fit.update(stop_after_packs=3)
    elif stop == "non-finite":
        X, y = diverging_problem()
        params.update(kernel="linear", C=1.0, iterations=400)
    elif stop == "an error in the sums":
        calls = []

        def failing(self, block, *args, **kwargs):
            if block.n_rows != params["pack"]:  # the warm-up's tiny blocks: as many calls as the node deals a rank
                return
            calls.append(1)
            if len(calls) == 4:
                raise MemoryError("no room for the sums")
        monkeypatch.setattr(KernelCompute, "pair_kernels", failing)
    model = PackSVC(comm=WORLD, pipeline="on", **params)
    if stop in ("non-finite", "an error in the sums"):
        with pytest.raises((PPackError, MemoryError)):
            model.fit(X, y, **fit)
    else:
        model.fit(X, y, **fit)
        assert model.training_["iterations_done"] < params["iterations"] or stop == "last pack"
    assert tracked.open == []


def test_the_update_flags_the_next_pack_after_its_merge():
    """``PackStep`` with a next pack (pipelined): its owner flags, taken in the same
    numba call after the merge, against numpy: rank + 1 where the next pack's key is in the
    table then (this pack's new entries included), else 0."""
    from ppack.data.delivery import deliver_rows
    from ppack.data.shard import Shard
    from ppack.packsvm.losses import Loss
    from ppack.packsvm.pack_buffer import PackBuffer
    from ppack.packsvm.pack_update import DONE, PackStep
    from ppack.packsvm.state import LossWindows, SolverState
    from ppack.packsvm.table import SupportVectorTable

    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(12, 5)), np.where(rng.random(12) < 0.5, -1.0, 1.0)
    shard = Shard.from_arrays(X, y)
    spec = KernelSpec("rbf", gamma=0.3)
    table = SupportVectorTable(KernelCompute(spec, 5, False))
    for rank in (1, 0):  # rank 1 flags nothing it does not store: its new rows go to the least occupied
        ids = np.array([0, 3, 5, 8])
        block = deliver_rows(Collectives(MPI.COMM_SELF), shard, shard.y, ids)
        norms = table.compute.row_norms(block)
        r = len(ids)
        buf = PackBuffer(1, r, 2)  # zero predictions: every row steps
        pairs = np.zeros(len(buf.pairs))
        left, right = loop.upper_pairs(r)
        table.compute.pair_kernels(block, norms, left, right, pairs)
        buf.pairs[:] = pairs
        state = SolverState(scale=np.ones(1), norm=np.zeros(1), occupancy=np.array([0, 5], dtype=np.int64),
                            loss_windows=LossWindows(10), avg_weight=None, rho=np.zeros(1), rho_sum=np.zeros(1),
                            row_seconds=np.zeros(2))
        next_ids = np.array([5, 1, 0, 11, 3, 7])
        next_flags = np.full(len(next_ids), -1.0)
        step = PackStep(rank, state, table, Columns.plain(1, 0.1, Loss(bound=math.inf)), Loss(), 1.0,
                        np.full(1, math.inf))
        status, *_ = step(buf, block, ids, norms, np.empty((1, r)), np.empty((1, r)), np.empty((1, 2)),
                          np.empty((1, 0)), np.empty(r), np.zeros((1, 2)), np.zeros(2), np.zeros(2),
                          np.empty((1, r)), next_ids, next_flags)
        assert status == DONE
        expected = np.where(np.isin(next_ids, table.keys), rank + 1.0, 0.0)
        np.testing.assert_array_equal(next_flags, expected)
        assert rank == 1 or 0 < next_flags.sum() < len(next_ids)  # rank 0 stored some of the pack, and flags them
    assert 0 < len(table.keys) and set(table.keys) <= {0, 3, 5, 8}
