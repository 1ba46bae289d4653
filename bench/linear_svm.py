"""Every ppack linear solver next to LIBLINEAR: seconds, primal objective, test accuracy.

Run from the repository root (data from ../shared/data by default):

    .venv/bin/python bench/linear_svm.py                     # a9a w8a ijcnn1 usps
    .venv/bin/python bench/linear_svm.py --sets a9a --ranks 4

Single-block runs (one process) compare each solver with LIBLINEAR (liblinear-official,
-B 1, eps 0.001) at the same C on the same objective. usps has ten classes: it is run
one-vs-rest (ten binary problems; the objective column is their sum; accuracy is of the
argmax). "llsvm paper" is the harsh-shrinking algorithm run once, as in its paper
(full_passes=1; the default reruns it five times warm); stream caches 5000 rows.
With --ranks P the block-averaging section trains dcd on P ranks (mpiexec,
one-shot and iterative) and reports the gap to the single-block objective. Results go
to bench/results/ as JSON.
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
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = {
    "a9a": (["a9a/a9a.bz2"], "a9a/a9a.t.bz2", 123),
    "w8a": (["w8a/w8a.bz2"], "w8a/w8a.t.bz2", 300),
    "ijcnn1": (["ijcnn1/ijcnn1.tr.bz2", "ijcnn1/ijcnn1.val.bz2"], "ijcnn1/ijcnn1.t.bz2", 22),
    "usps": (["usps/usps_zip.bz2"], "usps/usps_zip.t.bz2", 256),
}
# (label, solver, loss, solver options)
RUNS = [
    ("dcd l1", "dcd", "l1", {}),
    ("dcd l2", "dcd", "l2", {}),
    ("llsvm paper", "llsvm", "l1", {"full_passes": 1}),
    ("llsvm l1", "llsvm", "l1", {}),
    ("stream l1", "stream", "l1", {"cache_rows": 5000}),
    ("alm p=1", "alm", "l1", {}),
    ("alm p=2", "alm", "l2", {}),
    ("pegasos", "pegasos", "l1", {}),
]


def load(data_dir, name):
    from ppack.data.libsvm import read_libsvm

    trains, test, d = DATA[name]
    parts = [read_libsvm(Path(data_dir) / t, n_features=d) for t in trains]
    X = sp.vstack([p[0] for p in parts]).tocsr()
    y = np.concatenate([p[1] for p in parts])
    Xt, yt, _ = read_libsvm(Path(data_dir) / test, n_features=d)
    return X, y, Xt, yt


def binary_tasks(y, yt):
    """(name, y in {-1,+1}, yt) for each task: one for two classes, one per class otherwise."""
    classes = np.unique(y)
    if len(classes) == 2:
        return [("", np.where(y == classes[1], 1.0, -1.0), np.where(yt == classes[1], 1.0, -1.0))], classes
    return [(f"{c:g}", np.where(y == c, 1.0, -1.0), np.where(yt == c, 1.0, -1.0)) for c in classes], classes


def run_ppack(solver, loss, options, X, y, Xt, C):
    from mpi4py import MPI

    from ppack.linear.estimator import BlockAveragedSVC
    from ppack.linear.problem import primal_objective

    start = time.perf_counter()
    model = BlockAveragedSVC(solver=solver, C=C, loss=loss, rounds=1, solver_options=options,
                             comm=MPI.COMM_SELF).fit(X, y)
    seconds = time.perf_counter() - start
    p = 2.0 if loss == "l2" else 1.0
    return seconds, primal_objective(X, y, model.w_, model.b_, C, p), model.decision_function(Xt)


def run_liblinear(loss, X, y, Xt, C):
    from liblinear.liblinearutil import parameter, problem, train

    from ppack.linear.problem import primal_objective

    start = time.perf_counter()
    model = train(problem(y, X), parameter(f"-s {3 if loss == 'l1' else 1} -c {C} -B 1 -e 0.001 -q"))
    seconds = time.perf_counter() - start
    d = X.shape[1]
    weights = np.array([model.w[i] for i in range(d + 1)])
    sign = 1.0 if model.get_labels()[0] == 1 else -1.0  # liblinear's w scores its first label
    w, b = sign * weights[:d], sign * weights[d]
    p = 2.0 if loss == "l2" else 1.0
    return seconds, primal_objective(X, y, w, b, C, p), np.asarray(Xt @ w).ravel() + b


def single_block(name, X, y, Xt, yt, C):
    tasks, classes = binary_tasks(y, yt)
    rows = []
    for label, solver, loss, options in [("LIBLINEAR l1", None, "l1", {}), ("LIBLINEAR l2", None, "l2", {})] + RUNS:
        total_seconds, objective, scores = 0.0, 0.0, []
        try:
            for _, yb, _ in tasks:
                if solver is None:
                    seconds, obj, dec = run_liblinear(loss, X, yb, Xt, C)
                else:
                    seconds, obj, dec = run_ppack(solver, loss, options, X, yb, Xt, C)
                total_seconds += seconds
                objective += obj
                scores.append(dec)
        except Exception as exc:  # noqa: BLE001 - a failing solver is reported, the bench goes on
            rows.append({"run": label, "error": f"{type(exc).__name__}: {exc}"})
            print(f"  {label:14s} failed: {exc}")
            continue
        if len(tasks) == 1:
            accuracy = float(np.mean(np.where(scores[0] >= 0, 1.0, -1.0) == tasks[0][2]))
        else:
            accuracy = float(np.mean(classes[np.argmax(np.column_stack(scores), axis=1)] == yt))
        rows.append({"run": label, "seconds": total_seconds, "objective": objective, "test_accuracy": accuracy})
    reference = {r["run"].split()[1]: r["objective"] for r in rows if r["run"].startswith("LIBLINEAR")}
    print(f"\n{name}: n = {X.shape[0]}, d = {X.shape[1]}, C = {C}" + (", one-vs-rest" if len(tasks) > 1 else ""))
    print(f"  {'run':14s} {'seconds':>8s} {'objective':>14s} {'vs LIBLINEAR':>13s} {'test acc':>9s}")
    for r in rows:
        if "error" in r:
            continue
        ref = reference["l2" if ("l2" in r["run"] or "p=2" in r["run"]) else "l1"]
        r["objective_ratio"] = r["objective"] / ref
        print(f"  {r['run']:14s} {r['seconds']:8.2f} {r['objective']:14.6g} {100 * (r['objective_ratio'] - 1):+12.2f}% "
              f"{100 * r['test_accuracy']:8.2f}%")
    return rows


def averaging(name, data_dir, ranks, C, solvers):
    """Each solver on ``ranks`` blocks through the CLI, one-shot and iterative."""
    from ppack.data.hdf5 import write_dataset

    X, y, Xt, yt = load(data_dir, name)
    if len(np.unique(y)) != 2:
        return []
    results = []
    with tempfile.TemporaryDirectory() as work:
        write_dataset(Path(work) / "train.h5", X, y)
        write_dataset(Path(work) / "test.h5", Xt, yt)
        for solver in solvers:
            for mode in ("oneshot", "iterative"):
                out = Path(work) / f"{solver}-{mode}.json"
                mpiexec = Path(sys.executable).parent / "mpiexec"
                subprocess.run([str(mpiexec) if mpiexec.exists() else "mpiexec", "-n", str(ranks), sys.executable,
                                "-m", "ppack", "train", "--solver", solver, "--data", str(Path(work) / "train.h5"),
                                "--test", str(Path(work) / "test.h5"), "--C", str(C), "--averaging", mode,
                                "--metrics-json", str(out), "--quiet"], check=True,
                               env=dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1"))
                results.append(json.loads(out.read_text()))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--sets", nargs="+", default=list(DATA), choices=list(DATA))
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--ranks", type=int, default=4, help="ranks for the block-averaging section (0: skip)")
    parser.add_argument("--averaging-solvers", nargs="+", default=["dcd", "llsvm", "stream", "alm", "pegasos"])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    results = {}
    for name in args.sets:
        X, y, Xt, yt = load(args.data_dir, name)
        results[name] = {"single_block": single_block(name, X, y, Xt, yt, args.C)}
        if args.ranks > 1:
            runs = averaging(name, args.data_dir, args.ranks, args.C, args.averaging_solvers)
            results[name]["averaging"] = runs
            optimum = next((r for r in results[name]["single_block"] if r["run"] == "LIBLINEAR l1"), None)
            for run in runs:
                gap = (f" ({100 * (run['primal_objective'] / optimum['objective'] - 1):+.2f}% vs the single-rank "
                       "optimum)") if optimum else ""
                print(f"  {run['solver']:8s} on {args.ranks} ranks, {run['mode']:9s}: {run['rounds']:2d} rounds, "
                      f"{run['seconds']['total']:6.2f} s, objective {run['primal_objective']:.6g}{gap}, "
                      f"test acc {100 * run['test_accuracy']:.2f}%")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"linear_svm-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
