"""ppack against LIBSVM on the paper's Table III problems, plus the kernel-sum rate.

Run from the repository root (the data sets are read from ../shared/data by default):

    .venv/bin/python bench/kernel_svm.py                 # a9a and w8a, ppack and LIBSVM
    .venv/bin/python bench/kernel_svm.py --sets a9a --skip-libsvm

For each data set it converts the LIBSVM files to ppack HDF5 once, trains ppack with
every split of this machine's cores into ranks x threads (mpiexec), trains LIBSVM
(libsvm-official) with the same C and gamma, and prints test accuracy, training
seconds and support vectors side by side. A separate micro-benchmark times the
kernel-sum phase on dense data (r = 100; float64 rows, or float32 with --dtype float32)
and reports its GFLOP/s next to a numpy float64 GEMM measured in the same run, with the
BLAS library and kernel threadpoolctl reports. Results go to bench/results/ as JSON and PNG.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from figures import pyplot
from multiclass import one_thread

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The paper's Table III: sigma and the rbf width; C = 1 / (m sigma).
PROBLEMS = {
    "a9a": {"train": "a9a/a9a.bz2", "test": "a9a/a9a.t.bz2", "n_features": 123, "sigma": 1e-4, "gamma": 1.0},
    "w8a": {"train": "w8a/w8a.bz2", "test": "w8a/w8a.t.bz2", "n_features": 300, "sigma": 1e-5, "gamma": 1.0},
}


def core_splits():
    cores = len(os.sched_getaffinity(0))
    return [(ranks, cores // ranks) for ranks in range(1, cores + 1) if cores % ranks == 0]


def mpiexec():
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else "mpiexec"


def run_ppack(train, test, problem, ranks, threads, workdir, seed):
    metrics = Path(workdir) / f"metrics-{ranks}x{threads}.json"
    cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "ppack", "train", "--data", train, "--test", test,
           "--sigma", str(problem["sigma"]), "--gamma", str(problem["gamma"]), "--threads", str(threads),
           "--seed", str(seed), "--metrics-json", str(metrics), "--quiet"]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), NUMBA_NUM_THREADS=str(threads))
    subprocess.run(cmd, check=True, env=env)
    return json.loads(metrics.read_text())


def run_libsvm(train_txt, test_txt, C, gamma):
    from libsvm.svmutil import svm_predict, svm_read_problem, svm_train

    y, x = svm_read_problem(train_txt)
    yt, xt = svm_read_problem(test_txt)
    with one_thread():
        start = time.perf_counter()
        model = svm_train(y, x, f"-c {C} -g {gamma} -m 1000 -q")
        seconds = time.perf_counter() - start
    _, (accuracy, _, _), _ = svm_predict(yt, xt, model, "-q")
    return {"seconds": seconds, "test_accuracy": accuracy / 100.0, "support_vectors": model.get_nr_sv()}


def gemm_rate(n=3000, repeats=3):
    """Best-of float64 GEMM GFLOP/s of numpy's BLAS on all cores."""
    a, b = np.random.rand(n, n), np.random.rand(n, n)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n ** 3 / best / 1e9


def blas_kernel():
    """numpy's BLAS library and the kernel (architecture) it runs, as threadpoolctl reports them."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown (threadpoolctl not installed)"
    blas = [info for info in threadpool_info() if info.get("user_api") == "blas"]
    return ", ".join(f"{b.get('internal_api')} {b.get('version')} {b.get('architecture', '?')}" for b in blas) \
        or "none found"


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def kernel_sum_rate(d, n_sv=20000, r=100, dtype=np.float64, repeats=5):
    """GFLOP/s of one rank's rbf kernel-sum phase on dense data: 2 r n_sv d flops per pack."""
    from mpi4py import MPI

    from ppack.kernels.block import RowBlock
    from ppack.kernels.compute import KernelCompute
    from ppack.kernels.spec import KernelSpec
    from ppack.kernels.threads import configure_threads

    configure_threads(MPI.COMM_SELF)
    rng = np.random.default_rng(0)
    spec = KernelSpec("rbf", gamma=1.0 / d)
    coef = rng.normal(size=n_sv)
    compute = KernelCompute(spec, d, False, dtype)
    compute.store(rng.random((n_sv, d)).astype(dtype))
    block = RowBlock.from_rows(rng.random((r, d)).astype(dtype), np.zeros(r), d)
    block_norms = compute.row_norms(block)
    out = np.zeros(r)

    def kernel_sums():
        compute.partial_sums(coef, block, block_norms, out)

    kernel_sums()
    best = min(_timed(kernel_sums) for _ in range(repeats))
    return 2 * r * n_sv * d / best / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--sets", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    parser.add_argument("--skip-libsvm", action="store_true")
    parser.add_argument("--kernel-sums-only", action="store_true", help="only the kernel-sum rate against GEMM")
    parser.add_argument("--dtype", default="float64", choices=["float64", "float32"],
                        help="storage dtype of the kernel-sum micro-benchmark's rows")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()

    from ppack.data.convert import convert

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {"machine_cores": len(os.sched_getaffinity(0)), "problems": {}, "kernel_sums": []}
    with tempfile.TemporaryDirectory() as work:
        for name in [] if args.kernel_sums_only else args.sets:
            problem = PROBLEMS[name]
            files = {}
            for split in ("train", "test"):
                source = Path(args.data_dir) / problem[split]
                text = Path(work) / f"{name}.{split}.txt"
                subprocess.run(f"bzcat '{source}' > '{text}'", shell=True, check=True)
                files[split] = str(Path(work) / f"{name}.{split}.h5")
                convert(str(text), files[split], n_features=problem["n_features"])
                files[split + "_txt"] = str(text)
            from ppack.data.hdf5 import read_header

            m = read_header(files["train"]).n_samples
            C = 1.0 / (m * problem["sigma"])
            rows = []
            for ranks, threads in core_splits():
                metrics = run_ppack(files["train"], files["test"], problem, ranks, threads, work, args.seed)
                rows.append({"solver": "ppack", "config": f"{ranks} ranks x {threads} threads",
                             "seconds": metrics["seconds"]["total"], "test_accuracy": metrics["test_accuracy"],
                             "support_vectors": metrics["support_vectors"], "phases": metrics["seconds"]})
            if not args.skip_libsvm:
                rows.append({"solver": "LIBSVM", "config": "1 thread",
                             **run_libsvm(files["train_txt"], files["test_txt"], C, problem["gamma"])})
            results["problems"][name] = {"C": C, "gamma": problem["gamma"], "sigma": problem["sigma"],
                                         "n_samples": m, "runs": rows}
            print_problem(name, results["problems"][name])

    gemm = gemm_rate()
    results["kernel_sums_dtype"] = args.dtype
    print(f"\nkernel-sum phase, dense rbf, {args.dtype} rows, r = 100, 20000 support vectors, one process on all "
          f"cores; numpy float64 GEMM here: {gemm:.1f} GFLOP/s")
    for d in (100, 128, 256, 784):
        rate = kernel_sum_rate(d, dtype=np.dtype(args.dtype))
        results["kernel_sums"].append({"d": d, "gflops": rate, "gemm_gflops": gemm, "ratio": rate / gemm})
        print(f"  d = {d:4d}: {rate:6.1f} GFLOP/s = {rate / gemm:.2f} x GEMM")
    # after the runs: numba's GEMM goes through scipy's BLAS, loaded by then
    results["blas"] = blas_kernel()
    print(f"  BLAS loaded: {results['blas']}")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (out / f"kernel_svm-{stamp}.json").write_text(json.dumps(results, indent=2) + "\n")
    plot(results, out / f"kernel_svm-{stamp}.png")


def print_problem(name, result):
    print(f"\n{name}: n = {result['n_samples']}, C = {result['C']:.6g}, gamma = {result['gamma']}")
    print(f"  {'solver':8s} {'config':22s} {'train s':>9s} {'test acc':>9s} {'SVs':>7s}")
    libsvm = next((r for r in result["runs"] if r["solver"] == "LIBSVM"), None)
    for run in result["runs"]:
        ratio = f"  ({libsvm['seconds'] / run['seconds']:.0f}x faster than LIBSVM)" \
            if libsvm and run is not libsvm else ""
        print(f"  {run['solver']:8s} {run['config']:22s} {run['seconds']:9.2f} {100 * run['test_accuracy']:8.2f}% "
              f"{run['support_vectors']:7d}{ratio}")


def plot(results, path):
    plt = pyplot()
    if plt is None:
        return
    names = list(results["problems"])
    fig, axes = plt.subplots(1, len(names) + 1, figsize=(5 * (len(names) + 1), 4))
    axes = np.atleast_1d(axes)
    for ax, name in zip(axes, names):
        runs = results["problems"][name]["runs"]
        labels = [f"{r['solver']}\n{r['config']}" for r in runs]
        ax.bar(labels, [r["seconds"] for r in runs], color=["C0" if r["solver"] == "ppack" else "C1" for r in runs])
        ax.set_yscale("log")
        ax.set_ylabel("training seconds (log)")
        ax.set_title(f"{name}: " + ", ".join(f"{100 * r['test_accuracy']:.1f}%" for r in runs))
        ax.tick_params(axis="x", labelsize=7)
    ks = results["kernel_sums"]
    axes[-1].bar([str(k["d"]) for k in ks], [k["ratio"] for k in ks])
    axes[-1].axhline(0.5, color="k", linestyle="--", linewidth=1)
    axes[-1].set_xlabel("features d (dense)")
    axes[-1].set_ylabel("kernel-sum GFLOP/s / GEMM GFLOP/s")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"figure: {path}")


if __name__ == "__main__":
    main()
