"""The defects only a real GPU can show, each checked in one call that prints PASS or FAIL
with its reason (never a traceback) and writes its JSON: `bench/device.sh` runs them.

    python3 bench/device_checks.py probe       # (1) a GPU that cannot compute: one line at start
    python3 bench/device_checks.py first-use   # (2) first-use costs are compile time, not packs'
    mpirun -n 2 python3 bench/device_checks.py local-ids   # (5) two ranks: distinct local ids
    python3 bench/device_checks.py tf32        # (6) CUPY_TF32=1 refused for float32 rows
    python3 bench/device_checks.py fused       # the fused and unfused passes against the CPU kernels

`--stand-in numpy` runs each check with numpy in place of CuPy (a dry run of the script on a
machine without a GPU: what it prints is not a GPU's result and says so). `--out DIR`: where
the JSON goes (check_<name>.json).
"""
import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NUMBERS = {"probe": 1, "first-use": 2, "local-ids": 5, "tf32": 6, "fused": "passes"}
# the fused check's kernels, and its tolerance per dtype: the largest difference from the CPU's
# sums and pair kernels, relative to the largest CPU value (float32 storage: the dot products'
# bound, as in tests/test_kernels_array_compute.py)
FUSED_KERNELS = [("rbf", {}), ("laplacian", {}), ("linear", {}), ("poly", {"degree": 3, "coef0": 0.5}),
                 ("sigmoid", {"coef0": -0.5}), ("rbf", {"offset": 1.0})]
FUSED_TOLERANCE = {"float64": 1e-12, "float32": 1e-5}


def array_module(stand_in):
    """(the array module training gets, a label): CuPy on this rank's GPU through ppack's own
    selection, or numpy standing in."""
    from mpi4py import MPI

    from ppack.kernels import device

    if stand_in:
        return np, "numpy stand-in (not a GPU)"
    xp = device.gpu_array_module(MPI.COMM_SELF)
    name = xp.cuda.runtime.getDeviceProperties(xp.cuda.Device().id)["name"]
    return xp, name.decode() if isinstance(name, bytes) else name


@contextlib.contextmanager
def standing_in(stand_in):
    """With ``stand_in``, ppack's GPU selection hands out numpy (as the tests do)."""
    from ppack.kernels import device

    if not stand_in:
        yield
        return
    real = device.gpu_array_module
    device.gpu_array_module = lambda comm: np
    try:
        yield
    finally:
        device.gpu_array_module = real


def digits_like(n, d=784, seed=0):
    """(X (n, d) float32 pixel-like rows, y (n,) two classes from a smooth rule)."""
    rng = np.random.default_rng(seed)
    X = (rng.integers(0, 256, size=(n, d)) / 255).astype(np.float32)
    X[rng.random(X.shape) > 0.19] = 0.0
    y = np.where(X[:, : d // 2].sum(axis=1) > X[:, d // 2:].sum(axis=1), 1.0, -1.0)
    return X, y


def one_line_failure(argv, env=None, patch_cupy=False):
    """Run `python -m ppack ARGV` in a child (CuPy made unable to compute with ``patch_cupy``):
    (exit status, stderr lines, whether a traceback showed)."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import runpy; sys.argv = ['ppack'] + sys.argv[2:]; "
            + ("import device_checks; device_checks.break_cupy(); " if patch_cupy else "")
            + "runpy.run_module('ppack', run_name='__main__')")
    child_env = dict(os.environ, **(env or {}))
    child_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "bench"), child_env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", code, str(ROOT), *map(str, argv)], capture_output=True, text=True,
                          timeout=120, env=child_env)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return done.returncode, lines, "Traceback" in done.stderr


def break_cupy():
    """Make CuPy's device work fail as a GPU that cannot compute does (its import and device
    count still work): every way in of the arrays and the kernels raises."""
    import cupy

    def fails(*args, **kwargs):
        raise RuntimeError("simulated: CUDA_ERROR_NO_BINARY_FOR_GPU (the GPU cannot run CuPy's kernels)")
    for name in ("asarray", "array", "ascontiguousarray", "exp", "matmul", "dot", "ones", "zeros", "empty",
                 "arange", "full"):
        setattr(cupy, name, fails)


def small_data_file(folder, n=600, d=20):
    from ppack.data.hdf5 import write_dataset

    X, y = digits_like(n, d, seed=3)
    path = Path(folder) / "small.h5"
    write_dataset(path, X.astype(np.float64), y, storage="dense")  # the GPU path takes dense rows only
    return path


def check_probe(args):
    """(1): the GPU computes through ppack's probe; a GPU whose kernels fail and one not
    visible are each one line at start (exit status, no traceback, no pack)."""
    from ppack.kernels import device

    facts, reasons = {}, []
    if not hasattr(device, "probe"):
        reasons.append("ppack.kernels.device has no probe()")
    with tempfile.TemporaryDirectory() as folder:
        data = small_data_file(folder)
        cases = {"no GPU visible": ({"CUDA_VISIBLE_DEVICES": ""}, False)}
        if not args.stand_in:
            cases["a GPU that cannot compute"] = ({}, True)
            try:
                _, facts["device"] = array_module(False)
            except Exception as exc:  # noqa: BLE001 - what the probe says about this GPU
                reasons.append(f"the real GPU failed ppack's selection: {' '.join(str(exc).split())[:300]}")
        for number, (case, (env, patch)) in enumerate(cases.items()):
            model = Path(folder) / f"m{number}.h5"
            train = ["train", "--data", data, "--model", model, "--device", "gpu", "--iterations", "400", "--quiet"]
            status, lines, traced = one_line_failure(train, env, patch)
            facts[case] = {"status": status, "stderr": lines[-3:], "traceback": traced}
            # one line: the error; any other stderr lines must be a library's warnings
            others = [line for line in lines[:-1] if "warn" not in line.lower()]
            if status == 0 or traced or not lines or "error" not in lines[-1].lower() or "gpu" not in lines[-1].lower() \
                    or others:
                reasons.append(f"{case}: status {status}, {len(lines)} stderr lines"
                               f"{', a traceback' if traced else ''}: {(lines or [''])[-1][:200]}")
            if model.exists():
                reasons.append(f"{case}: a model was written (training ran)")
    return reasons, facts


def check_first_use(args):
    """(2): on a run of a few dozen packs, the device's seconds in packs 1 and 2 against the
    median of packs 5 and later; the warm-up's seconds are the run's compile time."""
    from ppack import PackSVC
    from ppack.kernels.array_compute import ArrayCompute

    X, y = digits_like(args.rows, seed=1)
    calls, ends = [], []
    real = ArrayCompute.launch  # every device pass: partial_sums and pair_kernels go through it

    def timed(self, *a, **k):
        """The launch's seconds to queue plus its finish's (which waits for the device)."""
        start = time.perf_counter()
        pending = real(self, *a, **k)
        queued, finish = time.perf_counter() - start, pending.finish

        def timed_finish():
            wait = time.perf_counter()
            finish()
            calls.append((id(self), start, queued + time.perf_counter() - wait))
        pending.finish = timed_finish
        return pending

    def progress(*_):
        ends.append(time.perf_counter())
    ArrayCompute.launch = timed
    try:
        with standing_in(args.stand_in):
            model = PackSVC(kernel="rbf", gamma=0.02, C=10.0, dtype="float32", pack=100, iterations=100 * args.packs,
                            device="gpu", progress=progress).fit(X, y)
    finally:
        ArrayCompute.launch = real
    trainer = calls[-1][0]  # the warm-up runs in a twin compute: its calls are not the packs'
    per_pack = np.zeros(len(ends))
    for who, start, seconds in calls:
        if who == trainer:
            per_pack[min(np.searchsorted(ends, start), len(ends) - 1)] += seconds
    compile_seconds = model.training_["seconds"].get("compile")
    later = float(np.median(per_pack[4:]))
    facts = {"packs": len(ends), "device_seconds_per_pack": per_pack.tolist(), "compile_seconds": compile_seconds,
             "first_two": per_pack[:2].tolist(), "median_from_pack_5": later}
    reasons = []
    if len(ends) < 8:
        reasons.append(f"only {len(ends)} packs")
    elif per_pack[:2].max() > 3 * later + 0.002:
        reasons.append(f"packs 1-2 took {1e3 * per_pack[:2].max():.1f} ms on the device against "
                       f"{1e3 * later:.1f} ms for later packs: first-use costs landed in the packs")
    if not hasattr(ArrayCompute, "warm_up"):
        reasons.append("ArrayCompute has no warm_up()")
    return reasons, facts


def check_local_ids(args):
    """(5), under an MPI launcher with two ranks or more on one node: each rank's local rank
    (from ppack's own reading) and the GPU it selects, on a one-rank communicator as a model
    fitted with comm=COMM_SELF does."""
    from mpi4py import MPI

    from ppack.kernels import device

    comm = MPI.COMM_WORLD
    mine = {"rank": comm.Get_rank()}
    try:
        mine["local_rank"] = device.local_rank(MPI.COMM_SELF)
    except Exception as exc:  # noqa: BLE001 - absent or failing: reported, not raised
        mine["error"] = f"local_rank: {type(exc).__name__}: {exc}"
    if not args.stand_in and "error" not in mine:
        try:
            xp = device.gpu_array_module(MPI.COMM_SELF)
            mine["gpu"], mine["gpus_visible"] = int(xp.cuda.Device().id), int(xp.cuda.runtime.getDeviceCount())
        except Exception as exc:  # noqa: BLE001
            mine["error"] = f"gpu_array_module: {' '.join(str(exc).split())[:300]}"
    everyone = comm.gather(mine, root=0)
    if comm.Get_rank():
        return None, None
    reasons = [f"rank {r['rank']}: {r['error']}" for r in everyone if "error" in r]
    if len(everyone) < 2:
        reasons.append("run me on two ranks or more (mpirun -n 2)")
    if not reasons:
        local = [r["local_rank"] for r in everyone]
        if len(set(local)) != len(local):
            reasons.append(f"local ranks {local} are not distinct")
        for r in everyone:
            if "gpu" in r and r["gpu"] != r["local_rank"] % r["gpus_visible"]:
                reasons.append(f"rank {r['rank']}: GPU {r['gpu']}, expected local rank {r['local_rank']} modulo "
                               f"{r['gpus_visible']} GPUs")
    return reasons, {"ranks": everyone}


def check_tf32(args):
    """(6): CUPY_TF32=1 refuses float32 rbf training on the device in one PPackError before
    any pack; float64 rows are not refused."""
    from ppack import PackSVC
    from ppack.errors import PPackError

    X, y = digits_like(400, d=30, seed=2)
    facts, reasons = {}, []
    os.environ["CUPY_TF32"] = "1"
    with standing_in(args.stand_in):
        for dtype in ("float32", "float64"):
            try:
                PackSVC(kernel="rbf", gamma=0.05, dtype=dtype, iterations=300, device="gpu").fit(X, y)
                facts[dtype] = "trained"
            except PPackError as exc:
                facts[dtype] = str(exc)
    if facts["float32"] == "trained" or "TF32" not in facts["float32"]:
        reasons.append(f"float32 with CUPY_TF32=1: {facts['float32'][:200]}")
    if facts["float64"] != "trained":
        reasons.append(f"float64 refused too: {facts['float64'][:200]}")
    return reasons, facts


def check_fused(args):
    """The fused pass (one formula kernel per tile, the L1 kernel, the pair kernel) and the
    unfused one against the CPU kernels: --rows stored rows of 784 pixel-like features, a
    block of 100, K = 10, every kernel, float32 and float64; the largest relative difference."""
    from ppack.kernels.array_compute import ArrayCompute
    from ppack.kernels.block import RowBlock
    from ppack.kernels.compute import KernelCompute
    from ppack.kernels.spec import KernelSpec
    from ppack.packsvm.loop import upper_pairs

    xp, name = array_module(args.stand_in)
    n, d, r, K = args.rows, 784, 100, 10
    X, _ = digits_like(n + r, d, seed=4)
    rng = np.random.default_rng(5)
    coef = rng.normal(size=(n, K))
    left, right = upper_pairs(r)
    facts, reasons, worst = {"device": name, "rows": n}, [], (0.0, "")
    for kernel, params in FUSED_KERNELS:
        spec = KernelSpec(kernel, gamma=0.02 if kernel != "laplacian" else 0.002, **params)
        for dtype in ("float32", "float64"):
            cpu = KernelCompute(spec, d, False, np.dtype(dtype))
            cpu.store(X[:n].astype(dtype))
            block = RowBlock.from_rows(X[n:].astype(dtype), np.zeros(r), d)
            norms = cpu.row_norms(block)
            expected, pairs = np.zeros((K, r)), np.empty(len(left))
            cpu.partial_sums(coef, block, norms, expected)
            cpu.pair_kernels(block, norms, left, right, pairs)
            label = f"{kernel}{'+offset' if params.get('offset') else ''} {dtype}"
            for passes in ("fused", "unfused"):
                device = ArrayCompute.beside(cpu, xp, passes)
                got, got_pairs = np.zeros((K, r)), np.empty(len(left))
                start = time.perf_counter()
                device.launch(coef, block, norms, got, left, right, got_pairs, mirrored=True).finish()
                sums_diff = float(np.abs(got - expected).max() / max(np.abs(expected).max(), 1e-300))
                pairs_diff = float(np.abs(got_pairs - pairs).max() / max(np.abs(pairs).max(), 1e-300))
                facts[f"{label} {passes}"] = {"sums": sums_diff, "pairs": pairs_diff,
                                              "first_call_seconds": time.perf_counter() - start}
                diff = max(sums_diff, pairs_diff)
                if not diff <= FUSED_TOLERANCE[dtype]:
                    reasons.append(f"{label} {passes}: max relative difference {diff:.3g} (sums {sums_diff:.3g}, "
                                   f"pairs {pairs_diff:.3g}) > {FUSED_TOLERANCE[dtype]:g}")
                if passes == "fused" and diff / FUSED_TOLERANCE[dtype] >= worst[0]:
                    worst = (diff / FUSED_TOLERANCE[dtype], f"{label}: {diff:.3g}")
    facts["summary"] = f"fused vs CPU, worst against its dtype's tolerance: {worst[1]} ({n} stored rows)"
    return reasons, facts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("check", choices=list(NUMBERS))
    ap.add_argument("--stand-in", choices=["numpy"], default=None, help="numpy in place of CuPy (a dry run)")
    ap.add_argument("--out", default=".", help="folder for check_<name>.json")
    ap.add_argument("--rows", type=int, default=6000, help="first-use: training rows (784 features); fused: "
                    "stored rows")
    ap.add_argument("--packs", type=int, default=30, help="first-use: packs of 100")
    args = ap.parse_args()
    check = {"probe": check_probe, "first-use": check_first_use, "local-ids": check_local_ids,
             "tf32": check_tf32, "fused": check_fused}[args.check]
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            reasons, facts = check(args)
    except Exception as exc:  # noqa: BLE001 - a check that breaks is a FAIL with its reason
        reasons, facts = [f"the check broke: {type(exc).__name__}: {exc}"], {"traceback": traceback.format_exc()}
    if reasons is None:  # a rank other than 0
        return
    verdict = "FAIL" if reasons else "PASS"
    where = " (numpy stand-in, not a GPU result)" if args.stand_in else ""
    summary = facts.get("summary", "") if isinstance(facts, dict) else ""
    print(f"{verdict} ({NUMBERS[args.check]}) {args.check}{where}" + (": " + "; ".join(reasons) if reasons else "")
          + (f" [{summary}]" if summary else ""), flush=True)
    result = {"check": args.check, "defect": NUMBERS[args.check], "verdict": verdict, "reasons": reasons,
              "stand_in": args.stand_in, "seconds": time.perf_counter() - start, "facts": facts}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / f"check_{args.check}.json").write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
