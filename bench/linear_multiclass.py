"""Ten classes: every ppack linear solver one-vs-rest next to LIBLINEAR on usps and MNIST.

Run from the repository root (data from ../shared/data by default):

    .venv/bin/python bench/linear_multiclass.py                  # usps and mnist, 3 repeats
    .venv/bin/python bench/linear_multiclass.py --sets usps --repeats 1

Features are scaled to [0, 1] (usps's LIBSVM file holds [-1, 1]: x -> (x + 1) / 2; MNIST's
pixels / 255). ppack trains the ten classes one-vs-rest in one fit (``BlockAveragedSVC`` on
one rank, one round: the block is the whole problem, so each class stops on the solver's
own rule, as LIBLINEAR does); LIBLINEAR (liblinear-official) trains one-vs-rest too, with
``-B 1`` (the bias as ppack's default regularised one) at the same C and its default
stopping tolerance (0.1 for its dual solvers, ppack's dcd default too). dcd ``--loss l1``
faces ``-s 3`` and ``--loss l2`` faces ``-s 1``; the other solvers run with their defaults,
but alm stops after 100 iterations and pegasos runs 20 epochs (their defaults, 1000 and 200,
take about ten times longer on MNIST: over 15 minutes a repeat on 2 cores).
Training seconds and test accuracy are the medians of ``--repeats`` runs, every run of a
repeat side by side before the next repeat (ppack's runs are seeded: their accuracy is the
same every time; LIBLINEAR's permutations are not, so its accuracy varies by a few rows);
test accuracy is of the argmax of the ten decision values. Results
go to bench/results/linear_multiclass-*.json.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# set: its C
SETS = {"usps": 1.0, "mnist": 0.1}
# (label, solver or None for LIBLINEAR, loss, solver options, the LIBLINEAR run it faces)
RUNS = [
    ("LIBLINEAR -s 3", None, "l1", {}, None),
    ("LIBLINEAR -s 1", None, "l2", {}, None),
    ("dcd l1", "dcd", "l1", {}, "LIBLINEAR -s 3"),
    ("dcd l2", "dcd", "l2", {}, "LIBLINEAR -s 1"),
    ("llsvm l1", "llsvm", "l1", {}, "LIBLINEAR -s 3"),
    ("stream l1", "stream", "l1", {}, "LIBLINEAR -s 3"),
    ("alm p=1", "alm", "l1", {"max_epochs": 100}, "LIBLINEAR -s 3"),
    ("pegasos", "pegasos", "l1", {"epochs": 20}, "LIBLINEAR -s 3"),
]
GOAL_POINTS = 0.3  # dcd's test accuracy within this many points of LIBLINEAR's


def load(data_dir, name, rows=None):
    """(X, y, Xt, yt): CSR float64 features in [0, 1] and float labels; ``rows`` keeps the
    first rows of each split (for a quick look)."""
    data_dir = Path(data_dir)
    if name == "usps":
        from ppack.data.libsvm import read_libsvm

        splits = []
        for file in ("usps/usps_zip.bz2", "usps/usps_zip.t.bz2"):
            X, y, _ = read_libsvm(data_dir / file, n_features=256)
            splits += [sp.csr_matrix((X.toarray() + 1.0) / 2.0), y]  # [-1, 1] -> [0, 1]; omitted zeros are 0.5
    else:
        from ppack.data.mnist import read_split

        splits = []
        for split in ("train", "test"):
            images, labels = read_split(data_dir / "mnist", split)
            splits += [sp.csr_matrix(images.astype(np.float64) / 255.0), labels.astype(np.float64)]
    if rows:
        splits = [part[:rows] for part in splits]
    return tuple(splits)


def run_liblinear(loss, X, y, Xt, yt, C):
    """LIBLINEAR one-vs-rest (-s 3 or -s 1, -B 1): (seconds, test accuracy)."""
    from liblinear.liblinearutil import parameter, predict, problem, train

    start = time.perf_counter()
    model = train(problem(y, X), parameter(f"-s {3 if loss == 'l1' else 1} -c {C} -B 1 -q"))
    seconds = time.perf_counter() - start
    labels, _, _ = predict(yt, Xt, model, "-q")
    return seconds, float(np.mean(np.asarray(labels) == yt))


def run_ppack(solver, loss, options, X, y, Xt, yt, C):
    """ppack's one-vs-rest fit on one rank: (seconds, test accuracy)."""
    from mpi4py import MPI

    from ppack.linear.estimator import BlockAveragedSVC

    start = time.perf_counter()
    model = BlockAveragedSVC(solver=solver, C=C, loss=loss, rounds=1, solver_options=options,
                             comm=MPI.COMM_SELF).fit(X, y)
    seconds = time.perf_counter() - start
    return seconds, float(model.score(Xt, yt))


def compile_once(X, y):
    """Every solver once on a few rows, so that no timed run includes numba's compilation."""
    from mpi4py import MPI

    from ppack.linear.estimator import BlockAveragedSVC

    for _, solver, loss, options, _ in RUNS:
        if solver is not None:
            BlockAveragedSVC(solver=solver, loss=loss, rounds=1, solver_options={**options, "max_epochs": 2},
                             comm=MPI.COMM_SELF).fit(X[:200], y[:200])


def bench_set(name, data_dir, C, repeats, rows=None):
    X, y, Xt, yt = load(data_dir, name, rows)
    compile_once(X, y)
    seconds = {label: [] for label, *_ in RUNS}
    accuracy = {}
    for _ in range(repeats):
        for label, solver, loss, options, _ in RUNS:
            if solver is None:
                s, a = run_liblinear(loss, X, y, Xt, yt, C)
            else:
                s, a = run_ppack(solver, loss, options, X, y, Xt, yt, C)
            seconds[label].append(s)
            accuracy.setdefault(label, []).append(a)
            print(f"  {name} {label}: {s:.2f} s, {100 * a:.2f}%", flush=True)
    median = {label: float(np.median(values)) for label, values in accuracy.items()}
    rows_out = []
    for label, solver, loss, options, faces in RUNS:
        row = {"run": label, "solver": solver or "liblinear", "loss": loss, "options": options,
               "seconds": seconds[label], "median_seconds": float(np.median(seconds[label])),
               "test_accuracy": median[label], "accuracies": accuracy[label], "faces": faces}
        if faces is not None:
            row["points_vs_liblinear"] = 100 * (median[label] - median[faces])
        rows_out.append(row)
    return {"set": name, "C": C, "n": X.shape[0], "d": X.shape[1], "test_rows": Xt.shape[0],
            "classes": int(len(np.unique(y))), "repeats": repeats, "runs": rows_out}


def print_table(result):
    print(f"\n{result['set']}: n = {result['n']}, d = {result['d']}, {result['classes']} classes one-vs-rest, "
          f"C = {result['C']:g}, test rows {result['test_rows']}, median of {result['repeats']}")
    print(f"  {'run':16s} {'train s':>8s} {'test acc':>9s} {'vs LIBLINEAR':>13s}")
    for r in result["runs"]:
        versus = "" if r["faces"] is None else f"{r['points_vs_liblinear']:+.2f} pts"
        print(f"  {r['run']:16s} {r['median_seconds']:8.2f} {100 * r['test_accuracy']:8.2f}% {versus:>13s}")
    for r in result["runs"]:
        if r["solver"] == "dcd":
            ok = abs(r["points_vs_liblinear"]) <= GOAL_POINTS
            print(f"  {r['run']} vs {r['faces']}: {r['points_vs_liblinear']:+.2f} points "
                  f"({'within' if ok else 'NOT within'} {GOAL_POINTS})")


def save(results, out):
    """Write the results as bench/results/linear_multiclass-<time>.json (or under ``out``); returns the path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"linear_multiclass-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    parser.add_argument("--C", type=float, default=None, help="one C for every set (default: usps 1, mnist 0.1)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", type=int, default=None, help="first rows of each split only (a quick look)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    results = []
    for name in args.sets:
        result = bench_set(name, args.data_dir, args.C or SETS[name], args.repeats, args.rows)
        print_table(result)
        results.append(result)
    print(f"\nresults: {save(results, args.out)}")


if __name__ == "__main__":
    main()
