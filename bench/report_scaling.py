"""Report experiments 3 to 5: packing and ranks, kernel throughput, the communication model.

``bench/report.py`` calls ``run(quick, figures, data_dir)``; it returns the Markdown of the
three sections and the measured numbers. The measurements run in child processes of this
file (``python bench/report_scaling.py kernels|allreduce OUT.json [--quick]``), so that this
process never initialises MPI or numba's thread pool:

3. packing and ranks: ``python -m ppack train`` on a9a under ``mpiexec -n p`` (one thread per
   rank) for p = 1, 2, 4 and r = 1, 10, 100, 1000 at a fixed T; time per pack by phase from
   the metrics, speed-up and efficiency, bytes per collective from ``comm_model.pack_bytes``;
4. kernel throughput: ``KernelCompute.partial_sums`` (dense and CSR rows, float32 and float64) against
   numpy's GEMM of the same dtype measured in the same process;
5. communication model: Allreduce of 8 B to 1 MiB timed under ``mpiexec -n 2`` and ``-n 4``,
   alpha and beta fitted with ``comm_model.fit``, and the paper's CovType, CCAT and MNIST8m
   runs priced on 64 to 512 ranks with published interconnect figures and the fitted ones.
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from figures import pyplot

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ppack.packsvm import comm_model as cm  # noqa: E402 - after the path insert

RANKS = (1, 2, 4)
PACKS = (1, 10, 100, 1000)
A9A = {"file": "a9a/a9a.bz2", "n_features": 123, "sigma": 1e-4, "gamma": 1.0}  # the paper's Table III (adult)
KERNEL_D = (22, 54, 123, 300, 784)
KERNEL_R = (1, 10, 100, 256)
SPARSE_DENSITY = 0.1
PAPER_P = (64, 128, 256, 512)

# (quoted) the paper's runs: Table I (samples, features, processors, P-pack 1 seconds), Table II
# (T = n, seconds for p = 64, 128, 256, 512), Table III (r = 100); T of MNIST8m's P-pack 1 is m/8.
# Row sizes: CovType 54 dense features; CCAT 0.16% of 47,236 nonzero (about 76 per row; ppack pads
# sparse rows to the longest, which the paper does not give: the mean is a lower bound); MNIST8m
# 784 features sent dense. Values travel as ppack stores them: float64, and uint8 for MNIST8m
# (``ppack mnist8m`` files).
PAPER_RUNS = {
    "CovType": {"m": 522910, "d": 54, "sparse": False, "longest": 54, "value_bytes": 8, "T": 522910,
                "table1": (256, 321),
                "table2": {1: (1529, 1144, 1128, 1346), 10: (959, 544, 390, 389), 100: (924, 514, 316, 236)}},
    "CCAT": {"m": 781265, "d": 47236, "sparse": True, "longest": 76, "value_bytes": 8, "T": 781265,
             "table1": (256, 918),
             "table2": {1: (4793, 2928, 2570, 3282), 10: (3631, 1930, 1122, 1265), 100: (3307, 1552, 917, 761)}},
    "MNIST8m": {"m": 8000000, "d": 784, "sparse": False, "longest": 784, "value_bytes": 1, "T": 1000000,
                "table1": (512, 12880), "table2": {}},
}
PAPER_PACKING_GAIN = {"CovType": 5.7, "CCAT": 4.3}  # (quoted) r = 100 against r = 1 at 512 processors


def run(quick, figures, data_dir):
    """Experiments 3 to 5: {"markdown": the three sections, "data": what was measured}."""
    figures = Path(figures)
    figures.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    data = {"quick": bool(quick)}
    with tempfile.TemporaryDirectory() as work:
        data["packing"] = packing_experiment(quick, Path(data_dir), Path(work))
        data["allreduce"] = allreduce_experiment(quick, Path(work))
        data["kernels"] = child_json(["kernels"], quick, Path(work))
    data["communication"] = communication_model(data["allreduce"])
    data["seconds"] = time.perf_counter() - start
    markdown = "\n\n".join([packing_markdown(data["packing"], figures), kernels_markdown(data["kernels"], figures),
                            communication_markdown(data["allreduce"], data["communication"], figures)])
    return {"markdown": markdown, "data": data}


# ------------------------------------------------------------------------- processes

def child_env(threads=None):
    """This environment without an enclosing MPI job's variables, with the repository on the path."""
    prefixes = ("PMI", "PMIX", "MPI_", "MPIR", "HYDRA", "OMPI", "I_MPI")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if threads is not None:
        env["OMP_NUM_THREADS"] = env["NUMBA_NUM_THREADS"] = str(threads)
    return env


def mpiexec():
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else "mpiexec"


def child_json(args, quick, work, ranks=None):
    """Run this file's ``args`` measurement (under ``mpiexec -n ranks`` when given); its JSON."""
    out = work / f"{args[0]}-{ranks or 0}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), *args, str(out)] + (["--quick"] if quick else [])
    if ranks is not None:
        cmd = [mpiexec(), "-n", str(ranks)] + cmd
    subprocess.run(cmd, check=True, env=child_env(1 if ranks is not None else None), cwd=ROOT)
    return json.loads(out.read_text())


# ------------------------------------------------------- experiment 3: packing and ranks

def a9a_hdf5(data_dir, work):
    """(a9a converted to HDF5 by ``python -m ppack convert``, its longest row's nonzeros)."""
    text, h5 = work / "a9a.txt", work / "a9a.h5"
    subprocess.run(f"bzcat '{data_dir / A9A['file']}' > '{text}'", shell=True, check=True)
    longest = max(len(line.split()) - 1 for line in text.read_text().splitlines())
    subprocess.run([sys.executable, "-m", "ppack", "convert", str(text), str(h5), "--n-features",
                    str(A9A["n_features"]), "--quiet"], check=True, env=child_env(), cwd=ROOT)
    return h5, longest


def train_metrics(h5, ranks, r, T, work):
    """Metrics of ``python -m ppack train`` on ``ranks`` ranks x 1 thread, pack r, T iterations."""
    metrics = work / f"train-{ranks}-{r}.json"
    cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "ppack", "train", "--data", str(h5),
           "--iterations", str(T), "--pack", str(r), "--sigma", str(A9A["sigma"]), "--gamma", str(A9A["gamma"]),
           "--threads", "1", "--seed", "0", "--metrics-json", str(metrics), "--quiet"]
    subprocess.run(cmd, check=True, env=child_env(1), cwd=ROOT)
    return json.loads(metrics.read_text())


def packing_experiment(quick, data_dir, work):
    """Per (r, p): packs, Allreduce calls, seconds per pack of each phase, the total, and bytes."""
    T = 3000 if quick else 20000
    h5, longest = a9a_hdf5(data_dir, work)
    runs = []
    for r in PACKS:
        for p in RANKS:
            m = train_metrics(h5, p, r, T, work)
            s, packs = m["seconds"], m["packs"]
            runs.append({"r": r, "p": p, "packs": packs, "allreduce_calls": m["allreduce_calls"],
                         "support_vectors": m["support_vectors"], "total_s": s["total"],
                         "per_pack_s": {k: s[k] / packs for k in ("kernel_sums", "communication",
                                                                  "sequential_updates", "delivery")},
                         "bytes": cm.pack_bytes(r, A9A["n_features"], longest, True, 1, p, 8)})  # float64 file
    return {"T": T, "n_samples": m["n_samples"], "longest_row": longest, "cores": len(os.sched_getaffinity(0)),
            "runs": runs}


def _run(result, r, p):
    return next(x for x in result["runs"] if x["r"] == r and x["p"] == p)


def packing_markdown(result, figures):
    plot_phases(result, figures / "packing_phases.png")
    plot_speedup(result, figures / "packing_speedup.png")
    rows = ["| r | p | packs | Allreduce calls | kernel sums ms | communication ms | replay ms | delivery ms "
            "| train s | speed-up over p = 1 | efficiency |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for x in result["runs"]:
        t = x["per_pack_s"]
        speedup = _run(result, x["r"], 1)["total_s"] / x["total_s"]
        rows.append(f"| {x['r']} | {x['p']} | {x['packs']} | {x['allreduce_calls']} | {t['kernel_sums'] * 1e3:.3f} "
                    f"| {t['communication'] * 1e3:.3f} | {t['sequential_updates'] * 1e3:.3f} "
                    f"| {t['delivery'] * 1e3:.3f} | {x['total_s']:.2f} | {speedup:.2f} | {speedup / x['p']:.2f} |")
    gains = ["| p | " + " | ".join(f"r = {r}" for r in PACKS[1:]) + " |", "|---|" + "---|" * (len(PACKS) - 1)]
    for p in RANKS:
        base = _run(result, 1, p)["total_s"]
        gains.append(f"| {p} | " + " | ".join(f"{base / _run(result, r, p)['total_s']:.1f}x" for r in PACKS[1:])
                     + " |")
    sizes = ["| r | collective 1 (rows) | collective 2 at p = 1 / 2 / 4 |", "|---|---|---|"]
    for r in PACKS:
        second = " / ".join(f"{_run(result, r, p)['bytes'][1]:,}" for p in RANKS)
        sizes.append(f"| {r} | {_run(result, r, 1)['bytes'][0]:,} B | {second} B |")
    oversubscribed = max(RANKS) > result["cores"]
    return "\n".join([
        "### 3. Packing and ranks (the paper's Table II, Figures 9 and 10)",
        "",
        f"`python -m ppack train` on a9a ({result['n_samples']:,} rows, 123 features, CSR; sigma = 1e-4, "
        f"gamma = 1 as the paper's Table III sets adult) with T = {result['T']:,} iterations, seed 0, under "
        f"`mpiexec -n p` with one thread per rank (`--threads 1`, OMP_NUM_THREADS = NUMBA_NUM_THREADS = 1), "
        f"on this machine's {result['cores']} cores"
        + (f": p = 4 runs {max(RANKS)} ranks on {result['cores']} cores (oversubscribed), so its times show "
           "ranks waiting for a core, not what 4 cores would do." if oversubscribed else ".")
        + " Times per pack are the metrics' phase seconds (each the largest over the ranks) over the packs: "
        "kernel sums (partial sums, pair kernels, owner flags), communication (both Allreduce calls together, "
        "waiting for the slowest rank included), replay (the r sequential updates and the table update) and "
        "delivery (filling the rows' buffer). Train s is the metrics' `seconds.total` (compiling apart); "
        "speed-up and efficiency compare it with p = 1 at the same r.",
        "",
        *rows,
        "",
        "![Seconds per pack by phase, one panel per r, bars for p = 1, 2, 4](report/packing_phases.png)",
        "",
        "Packing gain, train seconds at r = 1 over those at r (the paper's r = 100 against r = 1: 5.7x CovType, "
        "4.3x CCAT at 512 processors (quoted)):",
        "",
        *gains,
        "",
        "![Speed-up and efficiency over p = 1 against p, one line per r; the r = 1 time over the r = 100 time "
        "against p](report/packing_speedup.png)",
        "",
        f"Bytes per collective (`comm_model.pack_bytes`): collective 1 carries the r rows' float64 labels, "
        f"int32 nonzero counts and indices and float64 values padded to a9a's longest row "
        f"({result['longest_row']} nonzeros); "
        "collective 2 the r partial sums, the r(r+1)/2 pair kernels, r owner slots, one digest slot per rank "
        "and two votes.",
        "",
        *sizes])


def plot_phases(result, path):
    plt = pyplot()
    if plt is None:
        return
    phases = [("kernel_sums", "kernel sums"), ("communication", "communication (2 Allreduce)"),
              ("sequential_updates", "replay"), ("delivery", "delivery")]
    fig, axes = plt.subplots(1, len(PACKS), figsize=(3.2 * len(PACKS), 3.8))
    for ax, r in zip(axes, PACKS):
        bottom = np.zeros(len(RANKS))
        for k, (key, label) in enumerate(phases):
            ms = np.array([_run(result, r, p)["per_pack_s"][key] * 1e3 for p in RANKS])
            ax.bar([str(p) for p in RANKS], ms, bottom=bottom, color=f"C{k}", label=label)
            bottom += ms
        ax.set_title(f"r = {r}")
        ax.set_xlabel("ranks p")
    axes[0].set_ylabel("ms per pack")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(phases), fontsize=8)
    fig.suptitle(f"a9a, T = {result['T']:,}: time per pack by phase", fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_speedup(result, path):
    plt = pyplot()
    if plt is None:
        return
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(12, 3.6))
    for r in PACKS:
        speedup = [_run(result, r, 1)["total_s"] / _run(result, r, p)["total_s"] for p in RANKS]
        a.plot(RANKS, speedup, "o-", label=f"r = {r}")
        b.plot(RANKS, [s / p for s, p in zip(speedup, RANKS)], "o-", label=f"r = {r}")
    a.plot(RANKS, RANKS, "k:", label="linear")
    gain = [_run(result, 1, p)["total_s"] / _run(result, 100, p)["total_s"] for p in RANKS]
    c.plot(RANKS, gain, "o-", color="C3")
    for ax, label in ((a, "speed-up over p = 1"), (b, "parallel efficiency"), (c, "train s at r = 1 / at r = 100")):
        ax.set_xlabel("ranks p")
        ax.set_ylabel(label)
        ax.set_title(label, fontsize=10)
        ax.set_xticks(RANKS)
    a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------- experiment 4: kernel throughput

def measure_kernels(quick):
    """Child process: GFLOP/s of the kernel-sum phase and of numpy's GEMM, one process, all cores."""
    from mpi4py import MPI

    from kernel_svm import blas_kernel
    from ppack.kernels.threads import configure_threads

    configure_threads(MPI.COMM_SELF)
    n_sv, budget = (4000, 0.03) if quick else (20000, 0.2)
    gemm = {np.dtype(t).name: gemm_rate(np.dtype(t), 1500 if quick else 3000, budget) for t in (np.float32, np.float64)}
    rates = []
    for sparse in (False, True):
        for dtype in (np.float32, np.float64):
            for d in KERNEL_D:
                for r in KERNEL_R:
                    gflops = kernel_sum_rate(d, n_sv, r, np.dtype(dtype), sparse, budget)
                    name = np.dtype(dtype).name
                    rates.append({"sparse": sparse, "dtype": name, "d": d, "r": r, "gflops": gflops,
                                  "ratio": gflops / gemm[name]})
    # ten digits: K = 10 coefficient columns on dense float32 rows of 784 features, r = 100
    ten = kernel_sum_rate(784, n_sv, 100, np.dtype(np.float32), False, budget, columns=10)
    tiles = tiled_gemm_rate(784, n_sv, 100, budget)
    ten = {"d": 784, "r": 100, "columns": 10, "gflops": ten, "ratio": ten / gemm["float32"],
           "tiles_gflops": tiles, "tiles_ratio": tiles / gemm["float32"]}
    return {"n_sv": n_sv, "density": SPARSE_DENSITY, "gemm_gflops": gemm, "rates": rates, "ten_classes": ten,
            "threads": int(os.environ.get("NUMBA_NUM_THREADS", 0)) or len(os.sched_getaffinity(0)),
            "blas": blas_kernel(), "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE")}


def best_seconds(fn, budget):
    """The fastest of calls of ``fn`` repeated for ``budget`` seconds (at least 3), after one warm-up."""
    fn()
    best, spent, calls = float("inf"), 0.0, 0
    while spent < budget or calls < 3:
        start = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
        best, spent, calls = min(best, elapsed), spent + elapsed, calls + 1
    return best


def gemm_rate(dtype, n, budget):
    """GFLOP/s of numpy's n x n GEMM in ``dtype`` on all cores: BLAS gets this process's cores
    for the measurement (``configure_threads`` holds it at one thread for the kernel sums)."""
    from threadpoolctl import threadpool_limits

    a, b = np.random.rand(n, n).astype(dtype), np.random.rand(n, n).astype(dtype)
    with threadpool_limits(limits=len(os.sched_getaffinity(0)), user_api="blas"):
        return 2 * n ** 3 / best_seconds(lambda: a @ b, budget) / 1e9


def tiled_gemm_rate(d, n_sv, r, budget):
    """GFLOP/s of the dense kernel sums' GEMM calls alone (float32): n_sv stored rows times a
    (d, r) block, tile by tile as ``gemm_partial_sums`` calls BLAS (the same tiles, threads and
    one-thread BLAS), with no kernel pass: the part of the kernel sums BLAS does."""
    from numba import get_num_threads, njit, prange

    from ppack.kernels.compute import MAX_TILE_ROWS
    from ppack.kernels.threads import single_threaded_blas

    @njit(parallel=True)
    def tiles(features, XT, tile, dots):
        n_tiles = (features.shape[0] + tile - 1) // tile
        for item in prange(dots.shape[0]):
            for b in range(item, n_tiles, dots.shape[0]):
                a1 = min(features.shape[0], (b + 1) * tile)
                np.dot(features[b * tile:a1], XT, dots[item, :a1 - b * tile])

    rng = np.random.default_rng(0)
    features = rng.random((n_sv, d)).astype(np.float32)
    XT = np.ascontiguousarray(rng.random((r, d)).astype(np.float32).T)
    dots = np.empty((get_num_threads(), MAX_TILE_ROWS, r), dtype=np.float32)
    with single_threaded_blas():
        seconds = best_seconds(lambda: tiles(features, XT, MAX_TILE_ROWS, dots), budget)
    return 2 * r * n_sv * d / seconds / 1e9


def kernel_sum_rate(d, n_sv, r, dtype, sparse, budget, columns=1):
    """GFLOP/s of one rank's rbf kernel sums: 2 r x (stored values) flops, n_sv rows stored in
    ``dtype``, dense or CSR with ``SPARSE_DENSITY`` of the entries nonzero; ``columns``
    coefficient columns (K classes one-vs-rest: their products are not counted)."""
    import scipy.sparse as sp

    from ppack.kernels.block import RowBlock
    from ppack.kernels.compute import KernelCompute
    from ppack.kernels.spec import KernelSpec

    rng = np.random.default_rng(0)
    spec = KernelSpec("rbf", gamma=1.0 / d)
    coef = rng.normal(size=n_sv if columns == 1 else (n_sv, columns))
    if sparse:
        X = sp.random(n_sv, d, density=SPARSE_DENSITY, format="csr", dtype=dtype, random_state=1)
        stored, values = (X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data), X.nnz
        rows = sp.random(r, d, density=SPARSE_DENSITY, format="csr", dtype=dtype, random_state=2)
    else:
        stored = rng.random((n_sv, d)).astype(dtype)
        values, rows = n_sv * d, rng.random((r, d)).astype(dtype)
    compute = KernelCompute(spec, d, sparse, dtype)
    compute.store(stored)
    block = RowBlock.from_rows(rows, np.zeros(r), d)
    block_norms = compute.row_norms(block)
    out = np.zeros(r if columns == 1 else (columns, r))
    seconds = best_seconds(lambda: compute.partial_sums(coef, block, block_norms, out), budget)
    return 2 * r * values / seconds / 1e9


def kernels_markdown(result, figures):
    plot_kernels(result, figures / "kernel_throughput.png")
    gemm = result["gemm_gflops"]
    lines = ["| rows | dtype | r | " + " | ".join(f"d = {d}" for d in KERNEL_D) + " |",
             "|---|---|---|" + "---|" * len(KERNEL_D)]
    for sparse in (False, True):
        for dtype in ("float32", "float64"):
            for r in KERNEL_R:
                cells = [next(x for x in result["rates"] if (x["sparse"], x["dtype"], x["d"], x["r"]) ==
                              (sparse, dtype, d, r)) for d in KERNEL_D]
                lines.append(f"| {'CSR' if sparse else 'dense'} | {dtype} | {r} | "
                             + " | ".join(f"{c['gflops']:.3g} ({c['ratio']:.2g})" for c in cells) + " |")
    coretype = result["openblas_coretype"]
    return "\n".join([
        "### 4. Kernel throughput",
        "",
        f"The kernel-sum phase (`ppack.kernels.compute.KernelCompute.partial_sums`, rbf, one coefficient column) of one process "
        f"on {result['threads']} thread(s) against {result['n_sv']:,} stored rows, for r rows at a time; dense "
        f"rows, or CSR rows with {SPARSE_DENSITY:.0%} of the entries nonzero (stored and drawn alike). "
        "GFLOP/s counts 2 r x (stored values) flops: 2 r n_sv d dense, 2 r nnz sparse (the sparse path "
        "touches only nonzeros). Each cell is the best of repeated calls, with its ratio to numpy's GEMM of "
        f"the same dtype measured in the same process: float32 {gemm['float32']:.1f} GFLOP/s, float64 "
        f"{gemm['float64']:.1f} GFLOP/s. BLAS (threadpoolctl): {result['blas']}; OPENBLAS_CORETYPE "
        + (f"= {coretype} (set in the environment)." if coretype else "not set (OpenBLAS chose the kernel)."),
        "",
        "GFLOP/s (ratio to GEMM):",
        "",
        *lines,
        "",
        *([] if "ten_classes" not in result else [
            f"Ten classes (K = 10 coefficient columns sharing each kernel value), dense float32, d = 784, "
            f"r = 100: {result['ten_classes']['gflops']:.3g} GFLOP/s counting 2 d flops per kernel value, "
            f"{result['ten_classes']['ratio']:.2f} of float32 GEMM."] + ([] if "tiles_ratio" not in
                                                                           result["ten_classes"] else [
            f"The same tiles' GEMM calls alone, with no kernel pass (as the kernel sums call BLAS: "
            f"tiles of stored rows streamed from memory against the block): "
            f"{result['ten_classes']['tiles_gflops']:.3g} GFLOP/s, {result['ten_classes']['tiles_ratio']:.2f} "
            f"of float32 GEMM."])),
        "",
        "![Kernel-sum GFLOP/s over GEMM GFLOP/s against d, one line per r and dtype; dense and CSR panels]"
        "(report/kernel_throughput.png)"])


def plot_kernels(result, path):
    plt = pyplot()
    if plt is None:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, sparse in zip(axes, (False, True)):
        for k, r in enumerate(KERNEL_R):
            for dtype, style in (("float32", "--"), ("float64", "-")):
                ratio = [next(x["ratio"] for x in result["rates"] if (x["sparse"], x["dtype"], x["d"], x["r"]) ==
                              (sparse, dtype, d, r)) for d in KERNEL_D]
                ax.plot(KERNEL_D, ratio, style, marker="o", color=f"C{k}", label=f"r = {r}, {dtype}")
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks(KERNEL_D)
        ax.set_xticklabels([str(d) for d in KERNEL_D])
        ax.set_xlabel("features d")
        ax.set_title(f"CSR rows, {SPARSE_DENSITY:.0%} nonzero" if sparse else "dense rows")
    axes[0].set_ylabel("kernel-sum GFLOP/s / GEMM GFLOP/s (same dtype)")
    axes[1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------- experiment 5: the communication model

def allreduce_sizes(quick):
    """Message sizes in bytes, 8 B to 1 MiB."""
    return [8 * 2 ** k for k in (range(0, 18, 2) if quick else range(18))] + ([2 ** 20] if quick else [])


def measure_allreduce(quick):
    """Child process under mpiexec: median seconds of one float64 Allreduce per message size, each
    call timed alone after a Barrier and taken as the largest over the ranks."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    repeats = 100 if quick else 400
    medians = []
    for nbytes in allreduce_sizes(quick):
        buf = np.ones(nbytes // 8)
        times = np.empty(repeats)
        for k in range(-10, repeats):  # 10 calls to warm up
            comm.Barrier()
            start = MPI.Wtime()
            comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
            if k >= 0:
                times[k] = MPI.Wtime() - start
        comm.Allreduce(MPI.IN_PLACE, times, op=MPI.MAX)
        medians.append({"bytes": nbytes, "seconds": float(np.median(times))})
    library = " ".join(MPI.Get_library_version().splitlines()[0].split())
    return {"ranks": comm.Get_size(), "repeats": repeats, "library": library,
            "samples": medians}


def allreduce_experiment(quick, work):
    return [child_json(["allreduce"], quick, work, ranks=p) for p in (2, 4)]


def communication_model(measured):
    """The fitted alpha and beta, and the paper's runs priced on ``PAPER_P`` ranks. Runs with more
    ranks than cores (the oversubscribed p = 4 of a 2-core machine) wait for time slices, not for
    messages: they are left out of the fit while a run that fits the cores remains."""
    cores = len(os.sched_getaffinity(0))
    fitted = [m for m in measured if m["ranks"] <= cores] or measured
    samples = [(m["ranks"], s["bytes"], s["seconds"]) for m in fitted for s in m["samples"]]
    alpha, beta = cm.fit(samples)
    ranks = " and ".join(f"-n {m['ranks']}" for m in fitted)
    local = cm.Interconnect("this machine (fitted, shared memory)", alpha, beta,
                            f"fitted to the Allreduce calls measured here under mpiexec {ranks}")
    networks = [*cm.INTERCONNECTS, local]
    predictions = {name: predict_run(run, networks) for name, run in PAPER_RUNS.items()}
    return {"alpha": alpha, "beta": beta, "fitted_ranks": [m["ranks"] for m in fitted], "cores": cores,
            "networks": [vars(n) for n in networks], "predictions": predictions}


def predict_run(run, networks):
    """Per network and r = 1, 10, 100: seconds of communication per pack and in total on each
    of ``PAPER_P`` ranks; and the paper-anchored r = 1 / r = 100 ratio (see the text)."""
    out = {}
    for net in networks:
        per_r = {}
        for r in (1, 10, 100):
            packs = math.ceil(run["T"] / r)
            per_pack = [cm.pack_seconds(cm.pack_bytes(r, run["d"], run["longest"], run["sparse"], 1, p,
                                                      run["value_bytes"]), p,
                                        net.latency, net.seconds_per_byte) for p in PAPER_P]
            per_r[r] = {"bytes": cm.pack_bytes(r, run["d"], run["longest"], run["sparse"], 1, PAPER_P[-1],
                                               run["value_bytes"]),
                        "per_pack_s": per_pack, "total_s": [packs * s for s in per_pack]}
        if run["table2"]:
            paper100 = run["table2"][100][-1]
            compute = paper100 - per_r[100]["total_s"][-1]  # the paper's r = 100 run less its modelled talk
            per_r["anchored_gain_512"] = (compute + per_r[1]["total_s"][-1]) / paper100
        out[net.name] = per_r
    return out


def implied_pack_cost(run):
    """Seconds per pack the paper's Table II implies at 512 processors: the r = 1 run's extra
    time over the r = 100 run's, per extra pack (compute taken as the same for both)."""
    t1, t100 = run["table2"][1][-1], run["table2"][100][-1]
    return (t1 - t100) / (run["T"] - math.ceil(run["T"] / 100))


def communication_markdown(measured, model, figures):
    plot_allreduce(measured, model, figures / "allreduce_model.png")
    plot_predictions(model, figures / "comm_prediction.png")
    alpha, beta = model["alpha"], model["beta"]
    fit_rows = ["| bytes | " + " | ".join(f"p = {m['ranks']} measured / model" for m in measured) + " |",
                "|---|" + "---|" * len(measured)]
    for k, s in enumerate(measured[0]["samples"]):
        cells = [f"{m['samples'][k]['seconds'] * 1e6:.2f} / "
                 f"{cm.allreduce_seconds(s['bytes'], m['ranks'], alpha, beta) * 1e6:.2f} us" for m in measured]
        fit_rows.append(f"| {s['bytes']:,} | " + " | ".join(cells) + " |")
    nets = model["networks"]
    pred = ["| data set | network | r | bytes per pack (2 calls, p = 512) | "
            + " | ".join(f"p = {p}: per pack / total comm" for p in PAPER_P) + " |",
            "|---|---|---|---|" + "---|" * len(PAPER_P)]
    for name, run in model["predictions"].items():
        for net in nets:
            for r in (1, 10, 100):
                x = run[net["name"]][r]
                pred.append(f"| {name} | {net['name']} | {r} | {x['bytes'][0]:,} + {x['bytes'][1]:,} | " + " | ".join(
                    f"{_us(a)} / {_s(b)}" for a, b in zip(x["per_pack_s"], x["total_s"])) + " |")
    paper = ["| data set | r | " + " | ".join(f"p = {p}" for p in PAPER_P) + " |", "|---|---|" + "---|" * len(PAPER_P)]
    for name, run in PAPER_RUNS.items():
        for r, times in run["table2"].items():
            paper.append(f"| {name} | {r} | " + " | ".join(f"{t:,} s" for t in times) + " |")
    table1 = "; ".join(f"{name} {run['table1'][1]:,} s on {run['table1'][0]} processors (T = {run['T']:,})"
                       for name, run in PAPER_RUNS.items())
    gains = ["| data set | paper (quoted): r = 1 / r = 100 time | implied cost per pack | "
             + " | ".join(f"{n['name']}: comm r = 1 / r = 100; anchored" for n in nets) + " |",
             "|---|---|---|" + "---|" * len(nets)]
    for name in PAPER_PACKING_GAIN:
        run = model["predictions"][name]
        cells = [f"{run[n['name']][1]['total_s'][-1] / run[n['name']][100]['total_s'][-1]:.0f}x; "
                 f"{run[n['name']]['anchored_gain_512']:.2f}x" for n in nets]
        gains.append(f"| {name} | {PAPER_PACKING_GAIN[name]}x | {implied_pack_cost(PAPER_RUNS[name]) * 1e3:.2f} ms | "
                     + " | ".join(cells) + " |")
    library = measured[0]["library"]
    return "\n".join([
        "### 5. Communication model",
        "",
        "`ppack/packsvm/comm_model.py` prices one Allreduce of n bytes on p ranks from a per-message latency "
        "alpha and a per-byte cost beta as the fastest of the algorithms in Thakur, Rabenseifner and Gropp "
        "(IJHPCA 19(1), 2005): recursive doubling log2(p) (alpha + n beta), Rabenseifner's reduce-scatter + "
        "allgather 2 log2(p) alpha + 2 (p-1)/p n beta, and the ring 2 (p-1) alpha + 2 (p-1)/p n beta, with a "
        "fold to the power of two below p (2 (alpha + n beta) more) for the first two. `python -m ppack plan` "
        "prices a pack's two calls with the same functions.",
        "",
        f"Measured: float64 Allreduce of 8 B to 1 MiB under `mpiexec -n 2` and `-n 4` on this one machine "
        f"({library}; shared-memory transport, no network), each call timed alone after a Barrier, the "
        f"largest over the ranks, median of {measured[0]['repeats']} calls. "
        + _oversubscription(measured, model)
        + f"Least squares on relative error over p = {' and '.join(map(str, model['fitted_ranks']))} gives "
        f"**alpha = {alpha * 1e6:.3f} us per message, beta = {beta * 1e9:.4f} ns per byte "
        f"({1 / beta / 1e9 if beta > 0 else float('inf'):.2f} GB/s)**.",
        "",
        *fit_rows,
        "",
        "![Measured Allreduce seconds against bytes on 2 and 4 ranks, with the fitted model]"
        "(report/allreduce_model.png)",
        "",
        "Networks: " + "; ".join(f"{n['name']}: alpha = {n['latency'] * 1e6:.3g} us, "
                                 f"{1 / n['seconds_per_byte'] / 1e9:.3g} GB/s, {n['source']}" for n in nets)
        + ". The paper does not name its cluster's network (144 machines of 8 cores; quoted).",
        "",
        "Predicted communication of the paper's runs (r = 100 as its Table III; r = 1 and 10 as its Table II; "
        "T = m for CovType and CCAT as Table II, T = m/8 for MNIST8m as Table I's P-pack 1): per pack and in "
        "total over the run's packs, from ppack's pack buffers (`comm_model.pack_bytes`: CovType 54 dense "
        "features; CCAT's sparse rows taken as 76 nonzeros, the paper's 0.16% of 47,236, though ppack pads to "
        "the longest row; MNIST8m 784 features sent dense, as uint8). One rank per processor; the model ignores that 8 "
        "ranks share a machine. Compute time on the cluster is not predicted.",
        "",
        *pred,
        "",
        "The paper's measured training times (quoted), Table II (T = n):",
        "",
        *paper,
        "",
        f"Table I (quoted, P-pack 1): {table1}.",
        "",
        "![Predicted communication seconds of the whole run against ranks for CovType, CCAT and MNIST8m, per "
        "network and r, with the paper's measured training times](report/comm_prediction.png)",
        "",
        "Packing gain at 512 processors. \"comm r = 1 / r = 100\" is the ratio of modelled communication alone; "
        "\"anchored\" adds the same compute to both: the paper's r = 100 time less its modelled communication, "
        "so it predicts the paper's ratio from its own r = 100 run and the network model. The implied cost per "
        "pack is (r = 1 time - r = 100 time) / (difference in packs) from the paper's Table II, the per-pack "
        "overhead its cluster must have had if compute did not depend on r.",
        "",
        *gains])


def _oversubscription(measured, model):
    """A sentence on the runs with more ranks than cores, or nothing."""
    over = [m["ranks"] for m in measured if m["ranks"] > model["cores"]]
    if not over:
        return ""
    return (f"p = {', '.join(map(str, over))} oversubscribes the {model['cores']} cores: its calls wait for "
            "the ranks to get a core (milliseconds of scheduling rather than microseconds of copying), so it "
            "is shown but left out of the fit. ")


def _us(seconds):
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def _s(seconds):
    return f"{seconds:.3g} s"


def plot_allreduce(measured, model, path):
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    sizes = np.array([s["bytes"] for s in measured[0]["samples"]])
    for k, m in enumerate(measured):
        ax.plot(sizes, [s["seconds"] * 1e6 for s in m["samples"]], "o", color=f"C{k}",
                label=f"measured, p = {m['ranks']}")
        ax.plot(sizes, [cm.allreduce_seconds(n, m["ranks"], model["alpha"], model["beta"]) * 1e6 for n in sizes], "-",
                color=f"C{k}", label=f"model, p = {m['ranks']}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("message bytes")
    ax.set_ylabel("seconds per Allreduce (us)")
    fitted = " and ".join(f"p = {p}" for p in model["fitted_ranks"])
    ax.set_title(f"fitted to {fitted}: alpha = {model['alpha'] * 1e6:.2f} us, beta = {model['beta'] * 1e9:.3f} ns/B",
                 fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_predictions(model, path):
    plt = pyplot()
    if plt is None:
        return
    fig, axes = plt.subplots(1, len(PAPER_RUNS), figsize=(4.2 * len(PAPER_RUNS), 4), sharey=True)
    styles = {1: ":", 10: "--", 100: "-"}
    for ax, (name, run) in zip(axes, PAPER_RUNS.items()):
        for k, net in enumerate(model["networks"]):
            for r in (1, 100):
                ax.plot(PAPER_P, model["predictions"][name][net["name"]][r]["total_s"], styles[r], color=f"C{k}",
                        label=f"{net['name']}, r = {r}")
        for r, marker in ((1, "x"), (100, "s")):
            if r in run["table2"]:
                ax.plot(PAPER_P, run["table2"][r], marker, color="k", label=f"paper's training time, r = {r}")
        p, seconds = run["table1"]
        ax.plot([p], [seconds], "D", color="0.4", label="paper's Table I training time")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.minorticks_off()
        ax.set_xticks(PAPER_P)
        ax.set_xticklabels([str(p) for p in PAPER_P])
        ax.set_xlabel("ranks p")
        ax.set_title(f"{name}, T = {run['T']:,}", fontsize=10)
    axes[0].set_ylabel("seconds")
    handles = {}
    for ax in axes:
        handles.update({label: h for h, label in zip(*ax.get_legend_handles_labels())})
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=3, fontsize=7)
    fig.suptitle("lines: modelled communication of the whole run; black: the paper's training times (quoted)",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    what, out = sys.argv[1], Path(sys.argv[2])
    quick = "--quick" in sys.argv[3:]
    result = measure_kernels(quick) if what == "kernels" else measure_allreduce(quick)
    from mpi4py import MPI

    if MPI.COMM_WORLD.Get_rank() == 0:
        out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
