"""Accuracy per second against LIBSVM: ppack's defaults and its variants, by epochs.

Run from the repository root:

    .venv/bin/python bench/accuracy.py                        # ijcnn1, a9a, w8a, MNIST 2-vs-rest
    .venv/bin/python bench/accuracy.py --sets ijcnn1 --epochs 1,3,5 --seeds 3 --skip-libsvm
    .venv/bin/python bench/accuracy.py --sets dense,sparse,imbalanced --epochs 1,5

For every set, at the same C and gamma: ppack (one process, every core, in-process
PackSVC) in each variant (``VARIANTS``: the defaults, the previous defaults, the last
iterate, the regularised bias, float32 or float64 storage) at each number of epochs, over ``--seeds`` seeds of the
sampling stream (the mean is printed, every seed saved); and LIBSVM (one thread) side by
side in the same run. ppack's seconds are its metrics' ``seconds.total``. Prints a table
per set and the gap to LIBSVM, and saves JSON to bench/results/.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mpi4py import MPI  # noqa: E402

from ppack import PackSVC  # noqa: E402
from ppack.data.libsvm import read_libsvm  # noqa: E402

from multiclass import load_mnist, run_libsvm  # noqa: E402

# name -> (train file, test file, C, gamma); LIBSVM text under --data-dir
SETS = {
    "ijcnn1": ("ijcnn1/ijcnn1.tr.bz2", "ijcnn1/ijcnn1.t.bz2", 1.0, 1.0),
    "a9a": ("a9a/a9a.bz2", "a9a/a9a.t.bz2", 0.307, 1.0),
    "w8a": ("w8a/w8a.bz2", "w8a/w8a.t.bz2", 2.01, 1.0),
    "mnist2": (None, None, 16.7, 0.02),  # MNIST, class 2 against the rest (official IDX files)
    # generated (see ``generated``): dense at high C, sparse, imbalanced
    "dense": (None, None, 10.0, 0.05),
    "sparse": (None, None, 1.0, 0.5),
    "imbalanced": (None, None, 1.0, 0.1),
}
VARIANTS = {"default": {},  # epoch sampling, step c = 0.5, averaged iterate, dtype auto
            "previous": {"sampling": "uniform", "step": 1.0},  # the paper's draws and step
            "last": {"average": False},  # the last iterate instead of the averaged one
            "bias": {"bias": True},  # the regularised bias (paper section V)
            "float32": {"dtype": "float32"},  # float32 storage and kernel values, whatever the data
            "float64": {"dtype": "float64"}}  # float64 storage and kernel values (the default before)


def generated(name, seed=0):
    """(X, y, Xt, yt) of a generated problem with a nonlinear boundary and 10% label noise:
    "dense" 10,000 x 20; "sparse" 20,000 x 2,000 at 1% nonzeros (CSR); "imbalanced" 10,000 x
    10 with 10% positives. The test set is 5,000 more rows of the same distribution."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    n, d = {"dense": (15000, 20), "sparse": (25000, 2000), "imbalanced": (15000, 10)}[name]
    if name == "sparse":
        X = sp.random(n, d, density=0.01, format="csr", random_state=seed, data_rvs=rng.random)
        informative = np.asarray(X[:, :50].sum(axis=1)).ravel() - np.asarray(X[:, 50:100].sum(axis=1)).ravel()
        score = np.sin(3 * informative) + informative
    else:
        X = rng.normal(size=(n, d))
        score = X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2]) + 0.5 * X[:, 3] ** 2
    threshold = np.quantile(score, 0.9) if name == "imbalanced" else np.median(score)
    y = np.where(score > threshold, 1.0, -1.0)
    flip = rng.random(n) < 0.1
    y[flip] = -y[flip]
    return X[:-5000], y[:-5000], X[-5000:], y[-5000:]


def load(name, data_dir):
    """(X, y, Xt, yt) of a set: CSR from LIBSVM text, dense MNIST with labels +-1, or generated."""
    if name in ("dense", "sparse", "imbalanced"):
        return generated(name)
    if name == "mnist2":
        X, y, Xt, yt = load_mnist(data_dir)
        return X, np.where(y == 2, 1.0, -1.0), Xt, np.where(yt == 2, 1.0, -1.0)
    train, test, _, _ = SETS[name]
    X, y, info = read_libsvm(Path(data_dir) / train)
    Xt, yt, _ = read_libsvm(Path(data_dir) / test, n_features=max(info.n_features, 1))
    if Xt.shape[1] > X.shape[1]:
        X.resize((X.shape[0], Xt.shape[1]))
    return X, y, Xt[:, :X.shape[1]], yt


def run_ppack(X, y, Xt, yt, C, gamma, epochs, variant, seeds):
    """ppack fits with seeds 0..seeds-1: mean training seconds, test accuracy and support
    vectors, and each seed's."""
    runs = []
    for seed in range(seeds):
        model = PackSVC(gamma=gamma, C=C, epochs=epochs, seed=seed, comm=MPI.COMM_SELF, **VARIANTS[variant]).fit(X, y)
        runs.append({"seconds": model.training_["seconds"]["total"], "test_accuracy": model.score(Xt, yt),
                     "support_vectors": model.n_support_, "dtype": model.dtype_})
    mean = {key: float(np.mean([run[key] for run in runs])) for key in ("seconds", "test_accuracy", "support_vectors")}
    return {**mean, "dtype": runs[0]["dtype"], "seeds": runs}


def libsvm_runs(X, y, Xt, yt, C, gamma, repeats):
    """LIBSVM trained ``repeats`` times: the median seconds, and every run's."""
    runs = [run_libsvm(X, y, Xt, yt, {"C": C, "gamma": gamma}) for _ in range(max(1, repeats))]
    return {**runs[0], "seconds": float(np.median([run["seconds"] for run in runs])),
            "all_seconds": [run["seconds"] for run in runs]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sets", default="ijcnn1,a9a,w8a,mnist2")
    p.add_argument("--epochs", default="1,3,5", help="comma-separated epochs values")
    p.add_argument("--variants", default="default,previous,last")
    p.add_argument("--seeds", type=int, default=3, help="seeds of the sampling stream per variant (default 3)")
    p.add_argument("--skip-libsvm", action="store_true")
    p.add_argument("--libsvm-repeats", type=int, default=1,
                   help="LIBSVM trainings per set; the median time is the yardstick (default 1)")
    p.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args()
    epochs = [float(e) for e in args.epochs.split(",")]
    results = {}
    for name in args.sets.split(","):
        _, _, C, gamma = SETS[name]
        X, y, Xt, yt = load(name, args.data_dir)
        rows = {}
        for variant in args.variants.split(","):
            for e in epochs:
                rows[f"{variant} E={e:g}"] = run_ppack(X, y, Xt, yt, C, gamma, e, variant, args.seeds)
        libsvm = None if args.skip_libsvm else libsvm_runs(X, y, Xt, yt, C, gamma, args.libsvm_repeats)
        results[name] = {"C": C, "gamma": gamma, "rows": X.shape[0], "seeds": args.seeds, "ppack": rows,
                         "libsvm": libsvm}
        print_set(name, results[name])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"accuracy-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"results: {path}")


def print_set(name, r):
    print(f"\n{name}: {r['rows']} rows, C = {r['C']:g}, gamma = {r['gamma']:g}; ppack: mean of {r['seeds']} seeds")
    print(f"  {'ppack':<24s} {'train s':>8s} {'test acc':>9s} {'SVs':>7s} {'dtype':>8s}")
    lib = r["libsvm"]
    for label, run in r["ppack"].items():
        gap = "" if lib is None else (f"   {100 * (run['test_accuracy'] - lib['test_accuracy']):+.2f} pts, "
                                      f"{run['seconds'] / lib['seconds']:.2f} of LIBSVM's time")
        print(f"  {label:<24s} {run['seconds']:8.2f} {100 * run['test_accuracy']:8.2f}% "
              f"{run['support_vectors']:7.0f} {run['dtype']:>8s}{gap}")
    if lib is not None:
        print(f"  {'LIBSVM (1 thread)':<24s} {lib['seconds']:8.2f} {100 * lib['test_accuracy']:8.2f}% "
              f"{lib['support_vectors']:7d}   (median of {', '.join(f'{s:.2f}' for s in lib['all_seconds'])} s)")


if __name__ == "__main__":
    main()
