"""The compute seam on an array library's device (``kernels.array_compute``, the GPU path): the
same sums as the CPU kernels, what crosses the bus when, the device copy's growth, training and
prediction through it, the errors. Tests taking ``xp`` run with numpy standing in for CuPy and
again, marked ``gpu``, on CuPy where CuPy and a GPU are found (skipped elsewhere)."""
import pickle
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

from ppack import PackSVC
from ppack.errors import PPackError
from ppack.kernels import device as device_module
from ppack.kernels.array_compute import GROWTH_ROWS, ArrayCompute
from ppack.kernels.block import RowBlock
from ppack.kernels.compute import KernelCompute
from ppack.kernels.device import on_device
from ppack.kernels.spec import KernelSpec
from ppack.packsvm.loop import upper_pairs

from helpers import fails_with, make_multiclass, make_problem

KERNELS = [("rbf", {}), ("laplacian", {}), ("linear", {}), ("poly", {"degree": 3, "coef0": 0.5}),
           ("sigmoid", {"coef0": -0.5}), ("rbf", {"offset": 1.0})]
# against the CPU kernels: float64 to rounding; float32 storage within its dot products' bound
RTOL = {np.float64: 1e-12, np.float32: 1e-5}


def cupy_on_a_gpu():
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no GPU visible")
    except Exception as exc:  # noqa: BLE001 - CuPy's CUDA errors
        pytest.skip(f"no GPU visible ({exc})")
    return cupy


@pytest.fixture(params=["numpy", pytest.param("cupy", marks=pytest.mark.gpu)])
def xp(request):
    """The array module: numpy standing in for CuPy, or CuPy on a GPU."""
    return np if request.param == "numpy" else cupy_on_a_gpu()


def asnumpy(array):
    """A device array (or a numpy one) on the host."""
    return array.get() if hasattr(array, "get") else np.asarray(array)


def both_computes(name, params, dtype, xp=np, n_sv=300, d=20, work_bytes=1 << 16):
    """(cpu, device) computes of the same kernel holding the same n_sv stored rows."""
    spec = KernelSpec(name, gamma=0.05, **params)
    X, _ = make_problem(n_sv, d, seed=3)
    cpu = KernelCompute(spec, d, False, dtype, work_bytes)
    cpu.store(X.astype(dtype))
    return cpu, ArrayCompute.beside(cpu, xp)


def a_block(d=20, r=37, seed=4, dtype=np.float64):
    X, _ = make_problem(r, d, seed=seed)
    return RowBlock.from_rows(X.astype(dtype), np.zeros(r), d)


@pytest.mark.parametrize("name,params", KERNELS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n_columns", [None, 3])
def test_partial_sums_and_pair_kernels_match_the_cpu_kernels(xp, name, params, dtype, n_columns):
    cpu, device = both_computes(name, params, dtype, xp)
    block = a_block(dtype=dtype)
    norms = cpu.row_norms(block)
    rng = np.random.default_rng(2)
    coef = rng.normal(size=cpu.stored.n if n_columns is None else (cpu.stored.n, n_columns))
    start = rng.normal(size=(block.n_rows,) if n_columns is None else (n_columns, block.n_rows))
    expected, got = start.copy(), start.copy()
    cpu.partial_sums(coef, block, norms, expected)
    device.partial_sums(coef, block, norms, got)
    tol = RTOL[dtype]
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * np.abs(expected).max())
    left, right = upper_pairs(block.n_rows)
    pairs_cpu, pairs_device = np.empty(len(left)), np.empty(len(left))
    cpu.pair_kernels(block, norms, left, right, pairs_cpu)
    device.pair_kernels(block, norms, left[40:300], right[40:300], pairs_device[40:300])  # a rank's share
    np.testing.assert_allclose(pairs_device[40:300], pairs_cpu[40:300], rtol=tol, atol=tol * np.abs(pairs_cpu).max())


def test_only_the_new_rows_cross_and_the_device_copy_grows_by_doubling(xp):
    """Per pack: the rows stored since the last pack (each row once), the block's columns and
    norms, the coefficients; back: K x r sums. The copy keeps its rows when it grows."""
    cpu, device = both_computes("rbf", {}, np.float32, xp, n_sv=10)
    d, r, K = 20, 37, 2
    block = a_block(dtype=np.float32)
    norms = cpu.row_norms(block)
    row_bytes = d * 4 + 8
    stored = 10
    for pack, fresh in enumerate([0, 5, GROWTH_ROWS, 3]):
        new, _ = make_problem(fresh, d, seed=10 + pack) if fresh else (np.empty((0, d)), None)
        cpu.store(new.astype(np.float32))
        stored += fresh
        before = dict(device.sent)
        out = np.zeros((K, r))
        device.partial_sums(np.ones((stored, K)), block, norms, out)
        sent = {k: device.sent[k] - before.get(k, 0) for k in device.sent}
        assert sent["rows"] == (stored if pack == 0 else fresh) * row_bytes
        assert sent["block"] == d * r * 4 + r * 8 and sent["coef"] == stored * K * 8 and sent["sums"] == K * r * 8
        assert device._rows.shape[0] >= stored
        np.testing.assert_array_equal(asnumpy(device._rows[:stored]), cpu.stored.features)
        np.testing.assert_array_equal(asnumpy(device._norms[:stored]), cpu.stored.norms)
        expected = np.zeros((K, r))
        cpu.partial_sums(np.ones((stored, K)), block, norms, expected)
        np.testing.assert_allclose(out, expected, rtol=1e-5)
    assert device._rows.shape[0] == 2 * GROWTH_ROWS  # 1,018 rows, then 1,033: doubled once


def test_on_device_gives_a_warmed_array_compute_beside_the_stored_rows(monkeypatch, xp):
    on_xp(monkeypatch, xp)
    cpu, _ = both_computes("rbf", {}, np.float64)
    assert on_device(cpu, "cpu", MPI.COMM_SELF) is cpu
    device = on_device(cpu, "gpu", MPI.COMM_SELF)
    assert type(device) is ArrayCompute and device.xp is xp and device.stored is cpu.stored
    assert device.warm_seconds > 0.0 and device.host().stored is cpu.stored
    block = a_block()
    norms = cpu.row_norms(block)
    coef = np.random.default_rng(2).normal(size=cpu.stored.n)
    expected, got = np.zeros(block.n_rows), np.zeros(block.n_rows)
    cpu.partial_sums(coef, block, norms, expected)
    device.partial_sums(coef, block, norms, got)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
    with pytest.raises(PPackError, match="device: expected one of cpu, gpu, got 'tpu'"):
        on_device(cpu, "tpu", MPI.COMM_SELF)


def test_an_array_compute_pickles_its_array_module_by_name():
    """A module object does not pickle; the state names it and unpickling imports it again.
    The copy has no device arrays and computes the same sums."""
    with pytest.raises(TypeError, match="module"):
        pickle.dumps(np)
    cpu, device = both_computes("rbf", {}, np.float64)
    block = a_block()
    norms = cpu.row_norms(block)
    coef = np.random.default_rng(2).normal(size=cpu.stored.n)
    first, again = np.zeros(block.n_rows), np.zeros(block.n_rows)
    device.partial_sums(coef, block, norms, first)
    copy = pickle.loads(pickle.dumps(device))
    assert copy.xp is np and copy._rows is None and copy.stored.n == cpu.stored.n
    copy.partial_sums(coef, block, norms, again)
    np.testing.assert_array_equal(again, first)


def test_csr_rows_and_a_missing_cupy_are_one_line_errors(monkeypatch):
    with pytest.raises(PPackError, match="CSR data has no GPU path yet; give dense rows"):
        ArrayCompute(KernelSpec("rbf"), 5, True)
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy fails, as where it is not installed
    X, y = make_problem(60, 4)
    with pytest.raises(PPackError, match=r'device=.gpu.: CuPy is not installed; pip install "ppack\[gpu\]"') as info:
        PackSVC(device="gpu", iterations=200, comm=MPI.COMM_SELF).fit(X, y)
    assert "\n" not in str(info.value)
    with pytest.raises(PPackError, match="device=.gpu.: CSR data"):
        fitted_on_the_stand_in(monkeypatch, sp.csr_matrix(X), y)


def on_xp(monkeypatch, xp):
    """Make ``device="gpu"`` run on ``xp``: numpy standing in, or CuPy through the real probe;
    returns the communicators it was asked for on."""
    asked, real = [], device_module.gpu_array_module
    monkeypatch.setattr(device_module, "gpu_array_module",
                        lambda comm: asked.append(comm) or (np if xp is np else real(comm)))
    return asked


def fitted_on_the_stand_in(monkeypatch, X, y, comm=MPI.COMM_SELF, xp=np, **params):
    """PackSVC(device="gpu") on ``xp`` (numpy standing in for CuPy by default), asked for once per fit."""
    asked = on_xp(monkeypatch, xp)
    model = PackSVC(device="gpu", comm=comm, **params).fit(X, y)
    assert asked == [comm]
    return model


def watch_the_mirror(monkeypatch):
    """Wrap ArrayCompute.partial_sums: each call given the table's coefficients checks that the
    device's mirror equals them bit for bit; returns the record of (packs checked, coef bytes sent)."""
    record = {"checked": 0, "coef_bytes": 0, "whole": 0}
    real = ArrayCompute.launch

    def checked(self, coef, block, block_norms, out, *args, mirrored=False, **kwargs):
        if coef is not None and mirrored and self._coef is not None and self._coef_rows == len(coef):
            np.testing.assert_array_equal(asnumpy(self._coef[:len(coef)]), coef)
            record["checked"] += 1
        elif coef is not None and mirrored and len(coef):
            record["whole"] += 1
        before = self.sent["coef"]
        pending = real(self, coef, block, block_norms, out, *args, mirrored=mirrored, **kwargs)
        record["coef_bytes"] += self.sent["coef"] - before
        return pending
    monkeypatch.setattr(ArrayCompute, "launch", checked)
    return record


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("average", [True, False])
def test_training_on_the_device_gives_the_cpu_model(monkeypatch, xp, dtype, average):
    """Four-class one-vs-rest training through the device path: the same support vectors and
    decisions as on the CPU (float64 to rounding, float32 within its bound). The coefficients
    are sent whole once; after that the mirror, folded on the device and sent only the pack's
    rows, equals the table's bit for bit before every pack. The model keeps a CPU compute."""
    X, y = make_multiclass(n=400, d=8, seed=5)
    params = {"kernel": "rbf", "gamma": 0.3, "C": 5.0, "iterations": 1200, "pack": 100, "dtype": dtype,
              "average": average}
    cpu = PackSVC(comm=MPI.COMM_SELF, **params).fit(X, y)
    record = watch_the_mirror(monkeypatch)
    device = fitted_on_the_stand_in(monkeypatch, X, y, xp=xp, **params)
    packs, K = 12, 4
    assert record["whole"] == 1 and record["checked"] == packs - 2  # pack 1: an empty table
    assert record["coef_bytes"] <= 8 * K * (device.n_support_ + packs * 100)
    assert type(device.table_.compute) is KernelCompute
    np.testing.assert_array_equal(np.sort(device.table_.keys), np.sort(cpu.table_.keys))
    expected = cpu.decision_function(X)
    tol = 1e-9 if dtype == "float64" else 1e-5
    np.testing.assert_allclose(device.decision_function(X), expected, rtol=tol, atol=tol * np.abs(expected).max())


@pytest.mark.mpi(min_size=2)
def test_all_ranks_on_the_device_give_the_one_rank_model(monkeypatch):
    X, y = make_problem(500, 7, seed=8)
    params = {"kernel": "rbf", "gamma": 0.2, "C": 5.0, "iterations": 1000, "pack": 100, "dtype": "float64"}
    one = fitted_on_the_stand_in(monkeypatch, X, y, **params)
    every = fitted_on_the_stand_in(monkeypatch, X, y, comm=MPI.COMM_WORLD, **params)
    keys = np.sort(np.concatenate(MPI.COMM_WORLD.allgather(every.table_.keys)))
    np.testing.assert_array_equal(keys, np.sort(one.table_.keys))
    expected = one.decision_function(X)
    np.testing.assert_allclose(every.decision_function(X), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())


@pytest.mark.gpu
@pytest.mark.parametrize("name,params", KERNELS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("passes", ["fused", "unfused"])
def test_the_gpu_matches_the_cpu_kernels(name, params, dtype, passes):
    """At the bench's width: the sums (several tiles) and the pair kernels, queued together."""
    cupy = cupy_on_a_gpu()
    cpu, _ = both_computes(name, params, dtype, xp=cupy, n_sv=3000, d=784)
    device = ArrayCompute.beside(cpu, cupy, passes)
    block = a_block(d=784, r=100, dtype=dtype)
    norms = cpu.row_norms(block)
    coef = np.random.default_rng(2).normal(size=(cpu.stored.n, 10))
    expected, got = np.zeros((10, 100)), np.zeros((10, 100))
    left, right = upper_pairs(100)
    pairs, got_pairs = np.empty(len(left)), np.empty(len(left))
    cpu.partial_sums(coef, block, norms, expected)
    cpu.pair_kernels(block, norms, left, right, pairs)
    device.launch(coef, block, norms, got, left, right, got_pairs).finish()
    tol = RTOL[dtype]
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * np.abs(expected).max())
    np.testing.assert_allclose(got_pairs, pairs, rtol=tol, atol=tol * np.abs(pairs).max())
    assert device.queue.counts["syncs"] == 1


def test_predict_on_the_device_writes_the_cpu_decisions(monkeypatch, xp, tmp_path, capsys):
    """`predict --device gpu` (numpy standing in): the decisions of `predict` on the CPU, the
    coefficients sent once for all the blocks; a linear model is refused in one line."""
    from ppack.cli import main
    from ppack.data.hdf5 import write_dataset

    X, y = make_problem(3000, 6, seed=9)
    write_dataset(tmp_path / "d.h5", X, y)
    main(["train", "--data", str(tmp_path / "d.h5"), "--model", str(tmp_path / "m.h5"), "--iterations", "600",
          "--dtype", "float64", "--quiet"], comm=MPI.COMM_SELF)
    main(["predict", "--model", str(tmp_path / "m.h5"), "--data", str(tmp_path / "d.h5"), "--output",
          str(tmp_path / "cpu.npy"), "--quiet"], comm=MPI.COMM_SELF)
    record = watch_the_mirror(monkeypatch)
    on_xp(monkeypatch, xp)
    main(["predict", "--model", str(tmp_path / "m.h5"), "--data", str(tmp_path / "d.h5"), "--output",
          str(tmp_path / "gpu.npy"), "--device", "gpu", "--quiet"], comm=MPI.COMM_SELF)
    cpu, gpu = np.load(tmp_path / "cpu.npy"), np.load(tmp_path / "gpu.npy")
    np.testing.assert_allclose(gpu, cpu, rtol=1e-12, atol=1e-12 * np.abs(cpu).max())
    assert record["whole"] == 1 and record["checked"] >= 1  # 3,000 rows: two blocks or more
    main(["train", "--data", str(tmp_path / "d.h5"), "--model", str(tmp_path / "lin.h5"), "--solver", "dcd",
          "--quiet"], comm=MPI.COMM_SELF)
    fails_with(capsys, ["predict", "--model", str(tmp_path / "lin.h5"), "--data", str(tmp_path / "d.h5"),
                        "--device", "gpu", "--quiet"], "is a linear model; its predictions run on the CPU",
               comm=MPI.COMM_SELF)


def count_per_pack(monkeypatch):
    """Record each compute's queue counts between its consecutive ``launch`` calls (a pack's
    launch, its sync and the ``after_pack`` before the next): {compute: a Counter per pack}."""
    packs, last = {}, {}
    real = ArrayCompute.launch

    def counted(self, *args, **kwargs):
        if self in last:
            packs.setdefault(self, []).append(self.queue.counts - last[self])
        last[self] = self.queue.counts.copy()
        return real(self, *args, **kwargs)
    monkeypatch.setattr(ArrayCompute, "launch", counted)
    return packs


def test_a_pack_takes_two_uploads_one_download_one_sync_and_a_few_launches(monkeypatch):
    """The fixed cost of a pack on the device, counted by the stand-in's queue: the block (with
    the pack's new rows) in one copy, after_pack's fold and coefficients in one, the sums and
    pair kernels back in one, one sync; GEMM, formula and coefficient GEMM for the one tile,
    the pair kernel, the coefficients' kernel (and the fold's); the new rows copied into the
    device's store. (Before: about 27 launches, 8 small copies up, 2 down and 2 syncs.)"""
    packs = count_per_pack(monkeypatch)
    X, y = make_multiclass(n=400, d=8, seed=5)
    fitted_on_the_stand_in(monkeypatch, X, y, kernel="rbf", gamma=0.3, C=5.0, iterations=1200, pack=100,
                           dtype="float32", pipeline="off")
    packs = max(packs.values(), key=len)  # the training's compute (not the warm-up's twin)
    assert len(packs) == 11
    # pack 1: an empty table, pair kernels only; pack 2: the mirror starts (coefficients sent whole)
    # pack 1: an empty table, so the pair kernels only (their indices copied apart, kept for r);
    # pack 2: the mirror starts (the coefficients sent whole, one more copy up and one on the device)
    assert packs[0] == {"h2d": 1, "d2d": 2, "launches": 1, "d2h": 1, "syncs": 1}
    assert packs[1]["h2d"] == 3 and packs[1]["d2d"] == 3
    for counts in packs[1:]:
        assert counts["d2h"] == 1 and counts["syncs"] == 1, counts
        assert counts["launches"] in (5, 6), counts  # the fold's kernel only where a column's scale folded
    for counts in packs[2:]:
        assert counts["h2d"] == 2 and counts["d2d"] == 2, counts  # the new rows into the device's store


def test_a_pipelined_pack_queues_the_next_sums_before_its_replay(monkeypatch):
    """--pipeline on: pack k + 1's sums and pair kernels are launched before pack k's update
    reaches the device (after_pack) and waited for after it; the model is the CPU's."""
    from ppack.kernels.array_compute import PendingSums

    events = []
    launch, after, finish = ArrayCompute.launch, ArrayCompute.after_pack, PendingSums.finish
    monkeypatch.setattr(ArrayCompute, "launch", lambda self, *a, **k: events.append("launch") or launch(self, *a, **k))
    monkeypatch.setattr(ArrayCompute, "after_pack", lambda self, *a: events.append("update") or after(self, *a))
    monkeypatch.setattr(PendingSums, "finish", lambda self: (None if self.done else events.append("finish"),
                                                             finish(self)))
    X, y = make_problem(500, 7, seed=8)
    params = {"kernel": "rbf", "gamma": 0.2, "C": 5.0, "iterations": 1000, "pack": 100, "dtype": "float64",
              "pipeline": "on"}
    cpu = PackSVC(comm=MPI.COMM_SELF, **params).fit(X, y)
    device = fitted_on_the_stand_in(monkeypatch, X, y, **params)
    training = "".join({"launch": "L", "update": "U", "finish": "F"}[e] for e in events)
    # the warm-up's sums and pairs; the first pack alone (launched and waited for); then per pack:
    # the next one launched, this one's update, the next one waited for; the last has no next
    assert training == "LFLF" + "LF" + "LUF" * 9 + "U"
    expected = cpu.decision_function(X)
    np.testing.assert_allclose(device.decision_function(X), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())


def test_the_unfused_passes_stay_selectable_and_give_the_same_model(monkeypatch):
    """PPACK_DEVICE_PASSES=unfused: the earlier passes (to compare and fall back on), the same
    model as the fused ones; a value it does not know is one line naming the variable."""
    X, y = make_problem(300, 6, seed=4)
    params = {"kernel": "laplacian", "gamma": 0.2, "C": 5.0, "iterations": 600, "pack": 100, "dtype": "float64"}
    fused = fitted_on_the_stand_in(monkeypatch, X, y, **params)
    monkeypatch.setenv("PPACK_DEVICE_PASSES", "unfused")
    passes = []
    real = ArrayCompute.launch
    monkeypatch.setattr(ArrayCompute, "launch", lambda self, *a, **k: passes.append(self.passes) or real(self, *a, **k))
    unfused = fitted_on_the_stand_in(monkeypatch, X, y, **params)
    assert set(passes) == {"unfused"}
    expected = fused.decision_function(X)
    np.testing.assert_allclose(unfused.decision_function(X), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
    monkeypatch.setenv("PPACK_DEVICE_PASSES", "fast")
    with pytest.raises(PPackError, match=r"PPACK_DEVICE_PASSES='fast': expected one of fused, unfused"):
        fitted_on_the_stand_in(monkeypatch, X, y, **params)


def test_train_on_the_device_tests_there_with_the_cpu_accuracy(monkeypatch, xp, tmp_path):
    """`train --device gpu --test` (numpy standing in) evaluates the test set on the device
    too (asked for twice: training, then testing), with the CPU run's test accuracy."""
    import json

    from ppack.cli import main
    from ppack.data.hdf5 import write_dataset

    X, y = make_problem(2000, 6, seed=4)
    write_dataset(tmp_path / "d.h5", X[:1500], y[:1500])
    write_dataset(tmp_path / "t.h5", X[1500:], y[1500:])
    common = ["train", "--data", str(tmp_path / "d.h5"), "--test", str(tmp_path / "t.h5"), "--iterations", "600",
              "--dtype", "float64", "--quiet"]
    main(common + ["--metrics-json", str(tmp_path / "cpu.json")], comm=MPI.COMM_SELF)
    asked = on_xp(monkeypatch, xp)
    main(common + ["--device", "gpu", "--metrics-json", str(tmp_path / "gpu.json")], comm=MPI.COMM_SELF)
    assert len(asked) == 2
    cpu, gpu = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("cpu", "gpu"))
    assert gpu["test_accuracy"] == cpu["test_accuracy"] and 0.6 < cpu["test_accuracy"] <= 1.0
