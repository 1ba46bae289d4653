"""The kernel sums on a GPU (`--device gpu`) beside the node's CPU ranks, and ten digits trained
on one GPU. Prepared for a node with a GPU and CuPy; `--stand-in numpy` runs the same code
with numpy in place of CuPy (on the CPU: a check of the script, never a GPU figure).

Run from the repository root, with the MNIST IDX files in DATA/mnist (`bench/device.sh` runs
these on the GPU node with `.device/` as DATA). Open MPI run as root needs
--allow-run-as-root, and --oversubscribe where the ranks outnumber the cores:

    L="mpirun --allow-run-as-root --oversubscribe --bind-to core"
    python3 bench/gpu.py sums                     # partial sums per pack against stored rows
    python3 bench/gpu.py sums --cpu-ranks 16 --launcher "$L"
    python3 bench/gpu.py train --rows 1000000 --launcher "$L" --data-dir DATA   # ten digits, T = m, one GPU
    python3 bench/gpu.py train --rows 8100000 --gen-ranks 16 --launcher "$L" --data-dir DATA

`sums`: d = 784 float32 rows (pixel-like values in [0, 1]), r = 100, K = 10 coefficient
columns; for each stored-row count the median seconds per pack over --packs packs of
`ArrayCompute.partial_sums` (the coefficients mirrored, so a pack sends the block and gets
the sums back, as in training), fused and (--passes fused,unfused) unfused; the whole pack
(after_pack, the sums and 5,050 pair kernels, one sync) with the queue's launches, copies and
syncs per pack; and, with --cpu-ranks P, `KernelCompute.partial_sums` on P CPU ranks each
holding a P-th of the rows (the slowest rank's time per pack). First, the fixed cost of a
pack: the whole pack at --fixed-rows (100) stored rows.
`train`: `data mnist8m --rows N` (on --gen-ranks ranks) and the MNIST test set, then `train
--device gpu` on one rank with gamma 0.02, sigma 1e-6, T = m, float32; prints and saves its
time, accuracy, support vectors and time per pack by phase. Results: bench/results/gpu_*.json
and gpu_sums.png (or --results-dir).
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from ppack.kernels.array_compute import ArrayCompute  # noqa: E402
from ppack.kernels.block import RowBlock  # noqa: E402
from ppack.kernels.compute import KernelCompute  # noqa: E402
from ppack.kernels.spec import KernelSpec  # noqa: E402

RESULTS = ROOT / "bench" / "results"
D, R, K = 784, 100, 10


def array_module(stand_in):
    if stand_in == "numpy":
        return np, "numpy stand-in on the CPU (not a GPU figure)"
    import cupy

    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    return cupy, (name.decode() if isinstance(name, bytes) else name)


def pixel_rows(n, seed):
    """(n, D) float32 rows like scaled pixels: about 19% nonzero, values k / 255."""
    rng = np.random.default_rng(seed)
    rows = np.zeros((n, D), dtype=np.float32)
    for a0 in range(0, n, 65536):
        part = rng.integers(0, 256, size=(min(n, a0 + 65536) - a0, D)).astype(np.float32) / 255
        part[rng.random(part.shape) > 0.19] = 0.0
        rows[a0:a0 + len(part)] = part
    return rows


def time_packs(compute, n, packs, seed=1):
    """Median seconds per pack of ``compute.partial_sums`` over ``packs`` packs (after one untimed)."""
    rng = np.random.default_rng(seed)
    coef = rng.normal(size=(n, K))
    block = RowBlock.from_rows(pixel_rows(R, seed + 7), np.zeros(R), D)
    norms = compute.row_norms(block)
    out = np.zeros((K, R))
    compute.partial_sums(coef, block, norms, out, mirrored=True)
    seconds = []
    for _ in range(packs):
        start = time.perf_counter()
        compute.partial_sums(coef, block, norms, out, mirrored=True)  # the sums come back: synchronised
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds))


def time_whole_packs(compute, n, packs, seed=1):
    """A device's whole pack as training runs it, after one untimed: ``after_pack`` (every
    column's scale folded, the r rows' coefficients set), then the sums and this rank's pair
    kernels (all r(r+1)/2 of them) queued and waited for (one sync). Returns (median seconds
    per pack, median seconds the host took to queue it, the queue's counts per pack)."""
    rng = np.random.default_rng(seed)
    coef = rng.normal(size=(n, K))
    block = RowBlock.from_rows(pixel_rows(R, seed + 7), np.zeros(R), D)
    norms = compute.row_norms(block)
    left, right = np.triu_indices(R)
    out, pairs = np.zeros((K, R)), np.empty(len(left))
    table = SimpleNamespace(n=n, coef=coef, key_slots=SimpleNamespace(lookup=lambda ids: ids))
    ids = np.arange(min(R, n), dtype=np.int64)
    fold = np.column_stack([np.full(K, 0.999), np.zeros(K)])
    compute.launch(coef, block, norms, out, left, right, pairs, mirrored=True).finish()
    seconds, queued = [], []
    before = compute.queue.counts.copy()
    for _ in range(packs):
        start = time.perf_counter()
        compute.after_pack(table, ids, fold)
        pending = compute.launch(coef, block, norms, out, left, right, pairs, mirrored=True)
        queued.append(time.perf_counter() - start)
        pending.finish()
        seconds.append(time.perf_counter() - start)
    counts = {k: v / packs for k, v in (compute.queue.counts - before).items()}
    return float(np.median(seconds)), float(np.median(queued)), counts


def stored_compute(n, seed=0, device=None, passes="fused"):
    spec = KernelSpec("rbf", gamma=0.02)
    compute = KernelCompute(spec, D, False, np.float32)
    compute.store(pixel_rows(n, seed))
    return compute if device is None else ArrayCompute.beside(compute, device, passes)


def sums(args):
    """Per stored-row count: the partial sums per pack, fused and unfused; the whole pack
    (fused: after_pack, sums, pair kernels, one sync) and what it queued; the fixed cost of a
    pack (the whole pack at --fixed-rows stored rows, where the products cost next to nothing)."""
    xp, device_name = array_module(args.stand_in)
    result = {"device": device_name, "d": D, "r": R, "K": K, "rows": {}}
    fixed, fixed_queued, fixed_counts = time_whole_packs(stored_compute(args.fixed_rows, device=xp), args.fixed_rows,
                                                        args.packs)
    result["fixed_cost"] = {"rows": args.fixed_rows, "seconds_per_pack": fixed, "host_seconds_to_queue": fixed_queued,
                            "per_pack": fixed_counts}
    print(f"fixed cost of a pack ({args.fixed_rows} stored rows, after_pack + sums + {R * (R + 1) // 2} pair kernels):"
          f" {1e6 * fixed:.0f} us ({1e6 * fixed_queued:.0f} us to queue it); per pack {fixed_counts}", flush=True)
    save("gpu_sums.json", result)
    for n in args.stored:
        host = stored_compute(n)  # the rows made once; each pass's device copy in turn
        compute = ArrayCompute.beside(host, xp)
        entry = {"gpu_seconds_per_pack": time_packs(compute, n, args.packs)}
        entry["whole_pack_seconds"], entry["whole_pack_queue_seconds"], entry["per_pack"] = time_whole_packs(
            compute, n, args.packs)
        del compute
        if "unfused" in args.passes:
            entry["unfused_seconds_per_pack"] = time_packs(ArrayCompute.beside(host, xp, "unfused"), n, args.packs)
        del host
        if args.cpu_ranks:
            entry["cpu_seconds_per_pack"] = cpu_ranks(args, n)
            entry["cpu_ranks"] = args.cpu_ranks
        result["rows"][n] = entry
        unfused = (f", unfused {1e6 * entry['unfused_seconds_per_pack']:9.0f} us" if "unfused_seconds_per_pack" in entry
                   else "")
        cpu = f", {args.cpu_ranks} CPU ranks {1e6 * entry['cpu_seconds_per_pack']:9.0f} us" if args.cpu_ranks else ""
        print(f"{n:9d} stored rows: {device_name} fused {1e6 * entry['gpu_seconds_per_pack']:9.0f} us per pack"
              f"{unfused}, whole pack {1e6 * entry['whole_pack_seconds']:9.0f} us{cpu}", flush=True)
        save("gpu_sums.json", result)  # after each size: a run cut off keeps the sizes done
    plot_sums(result)


def cpu_ranks(args, n):
    """The slowest of ``args.cpu_ranks`` CPU ranks' median seconds per pack, each holding n / P rows."""
    cmd = launcher(args) + ["-n", str(args.cpu_ranks), sys.executable, __file__, "cpu-share", "--rows", str(n),
                            "--packs", str(args.packs)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, env=child_env())
    # Open MPI's mpirun may add terminal escape codes around the ranks' output
    plain = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout).split()
    return float(plain[-1])


def cpu_share(args):
    """Under MPI: this rank's share of the rows, timed with the others (one numba thread each)."""
    from mpi4py import MPI

    from ppack.kernels.threads import configure_threads

    comm = MPI.COMM_WORLD
    configure_threads(comm, threads=1)
    n = args.rows // comm.Get_size() + (comm.Get_rank() < args.rows % comm.Get_size())
    seconds = time_packs(stored_compute(n, seed=comm.Get_rank()), n, args.packs)
    slowest = comm.allreduce(seconds, op=MPI.MAX)
    if comm.Get_rank() == 0:
        print(slowest)


def train(args):
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    data = work / f"m{args.rows}.h5"
    source = Path(args.data_dir) / "mnist"
    if not data.exists():
        ppack(args, args.gen_ranks, ["data", "mnist8m", data, "--rows", args.rows, "--source", source,
                                     "--compression", "none"])
    test = work / "mnist.t.h5"
    if not test.exists():
        ppack(args, 1, ["data", "mnist", work / "mnist.h5", test, "--source", source])
    metrics = work / f"train-{args.rows}-{args.device}.json"
    start = time.perf_counter()
    ppack(args, 1, ["train", "--data", data, "--test", test, "--gamma", "0.02", "--sigma", "1e-6", "--epochs", "1",
                    "--dtype", "float32", "--device", args.device, "--metrics-json", metrics, "--quiet"])
    m = json.loads(metrics.read_text())
    n = m["packs"]
    summary = {"rows": args.rows, "device": args.device, "wall": time.perf_counter() - start,
               "train_seconds": m["seconds"]["total"], "accuracy": m["test_accuracy"],
               "support_vectors": m["support_vectors"],
               "per_pack_us": {k: 1e6 * m["seconds"][k] / n for k in ("partial_sums", "pair_kernels", "communication",
                                                                      "sequential_updates", "delivery", "serial")}}
    print(json.dumps(summary, indent=1))
    save(f"gpu_train_{args.rows}_{args.device}.json", summary)


def launcher(args):
    if args.launcher:
        return shlex.split(args.launcher)
    beside = Path(sys.executable).parent / "mpiexec"
    return [str(beside) if beside.exists() else "mpiexec"]


def child_env():
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def ppack(args, ranks, argv):
    cmd = launcher(args) + ["-n", str(ranks), sys.executable, "-m", "ppack", *map(str, argv)]
    subprocess.run(cmd, check=True, env=child_env())


def save(name, result):
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / name).write_text(json.dumps(result, indent=1))


def plot_sums(result):
    from figures import pyplot

    plt = pyplot()
    if plt is None:
        return
    rows = sorted(int(n) for n in result["rows"])
    fig, ax = plt.subplots(figsize=(6, 4.2))
    ax.plot(rows, [1e3 * result["rows"][n]["gpu_seconds_per_pack"] for n in rows], "o-",
            label=f"{result['device']}, fused")
    if all("unfused_seconds_per_pack" in result["rows"][n] for n in rows):
        ax.plot(rows, [1e3 * result["rows"][n]["unfused_seconds_per_pack"] for n in rows], "^--",
                label=f"{result['device']}, unfused")
    if all("cpu_seconds_per_pack" in result["rows"][n] for n in rows):
        ax.plot(rows, [1e3 * result["rows"][n]["cpu_seconds_per_pack"] for n in rows], "s-",
                label=f"{result['rows'][rows[0]]['cpu_ranks']} CPU ranks")
    ax.set(xscale="log", yscale="log", xlabel="stored support vectors", ylabel="partial sums per pack (ms)",
           title=f"d = {D}, r = {R}, K = {K}, float32")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "gpu_sums.png", dpi=110)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["sums", "train", "cpu-share"])
    ap.add_argument("--stand-in", choices=["numpy"], default=None, help="numpy in place of CuPy (a dry run)")
    ap.add_argument("--stored", type=int, nargs="+", default=[20000, 60000, 300000, 1000000])
    ap.add_argument("--packs", type=int, default=20)
    ap.add_argument("--cpu-ranks", type=int, default=0, help="also time the sums on this many CPU ranks")
    ap.add_argument("--passes", default="fused,unfused", help="sums: fused, or fused,unfused (both timed)")
    ap.add_argument("--fixed-rows", type=int, default=100, help="sums: stored rows of the fixed-cost pack")
    ap.add_argument("--rows", type=int, default=1000000, help="train: mnist8m-style rows; cpu-share: stored rows")
    ap.add_argument("--device", default="gpu", choices=["cpu", "gpu"], help="train: where the kernel sums run")
    ap.add_argument("--gen-ranks", type=int, default=1, help="train: ranks that generate the data")
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"), help="folder with mnist/")
    ap.add_argument("--work-dir", default="/tmp/ppack-gpu")
    ap.add_argument("--launcher", default=None, help='MPI launcher and options (default: mpiexec beside python)')
    ap.add_argument("--results-dir", default=str(RESULTS), help="where the JSON and the figure go")
    return ap.parse_args()


def main():
    global RESULTS
    args = parse_args()
    RESULTS = Path(args.results_dir)
    {"sums": sums, "train": train, "cpu-share": cpu_share}[args.what](args)


if __name__ == "__main__":
    main()
