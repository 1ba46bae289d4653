"""epsilon-SVR and one-class SVM beside LIBSVM (`-s 3`, `-s 2`): Friedman #1 and the MNIST digits (issue 26).

Run from the repository root (MNIST from ../shared/data by default):

    python bench/svr_oneclass.py                          # both experiments, full size
    python bench/svr_oneclass.py --quick                  # small sizes, a few minutes
    python bench/svr_oneclass.py --parts friedman --epochs 0.5,1,2
    python bench/svr_oneclass.py --skip-ppack             # LIBSVM's side alone

Friedman #1 (scikit-learn's ``make_friedman1``, noise 1.0): 50,000 training rows (seed 0) and
a separate test set of 10,000 (seed 1). C and gamma come from LIBSVM's own 5-fold
cross-validation (``svm_train -v 5``, the lowest mean squared error) over a grid, on the
first 5,000 training rows; epsilon 0.5. LIBSVM ``-s 3`` and ppack ``train --svm-type
epsilon_svr`` then train on the 50,000 rows at those C and gamma: test RMSE and training
seconds. The goal: ppack's RMSE within 5% of LIBSVM's in at most a third of its time.

One-class on MNIST (the official files, pixels / 255 as ``ppack data mnist`` stores them,
for both trainers): each digit's training rows alone (about 6,000), nu 0.1, gamma 0.02,
LIBSVM ``-s 2`` against ppack ``train --svm-type one_class``; each model scores the whole
test set and the ROC AUC of "this digit against the rest" is taken from the decision
values. The goal: the mean AUC over the ten digits within 0.01 of LIBSVM's.

ppack runs in process (PackSVR and PackOneClassSVM, what ``train --svm-type`` runs), one
process on every core, float64, the defaults otherwise (epoch sampling, step 0.5, averaged
iterate), at each ``--epochs`` value in turn (T = epochs x rows) until the goal's accuracy
is reached; its seconds are the training loop's (``training_["seconds"]["total"]``, the
``seconds.total`` of `train`'s metrics: no reading or numba compilation). LIBSVM
(``libsvm-official``) trains on one thread with a 1,000 MB cache. Times are the median of
``--repeats`` (3) trainings: LIBSVM's (``--libsvm-repeats`` to change its own), and ppack's
at the epochs that reach the goal (the smallest tried); the other ppack rows are one run. Results go to
bench/results/svr_oneclass.json; ``run`` is the report's section
(``python -m bench.report --only svr``).
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT)]

from multiclass import one_thread  # noqa: E402

FRIEDMAN = {"train": 50_000, "test": 10_000, "cv_rows": 5_000, "epsilon": 0.5, "noise": 1.0, "folds": 5}
# LIBSVM's cross-validation grid (grid.py's log2 steps, coarsened: each point is 5 trainings)
C_GRID = (1.0, 8.0, 64.0, 512.0)
GAMMA_GRID = (2.0 ** -5, 2.0 ** -3, 2.0 ** -1)
ONE_CLASS = {"nu": 0.1, "gamma": 0.02}
RMSE_GOAL = 1.05  # ppack's test RMSE at most this times LIBSVM's
TIME_GOAL = 1 / 3  # ... in at most this fraction of LIBSVM's training seconds
AUC_GOAL = 0.01  # ppack's mean AUC at most this below LIBSVM's
EPOCHS = (0.5, 1.0, 2.0, 4.0, 8.0)
QUICK = {"train": 2_000, "test": 1_000, "cv_rows": 500, "mnist_rows": 500, "mnist_test": 2_000,
         "C_grid": (1.0, 8.0), "gamma_grid": (2.0 ** -3, 2.0 ** -1)}


# -- data ------------------------------------------------------------------------------------
def friedman(n_train, n_test):
    """Friedman #1 (X (n, 10) in [0, 1], y), training rows from seed 0, test rows from seed 1."""
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n_train, noise=FRIEDMAN["noise"], random_state=0)
    Xt, yt = make_friedman1(n_test, noise=FRIEDMAN["noise"], random_state=1)
    return X, y, Xt, yt


def mnist(data_dir, max_rows=None, max_test=None):
    """MNIST as ppack's `data mnist` stores it: pixels / 255 (float64), digit labels; the
    first ``max_rows`` of each digit's training rows and the first ``max_test`` test rows if given."""
    from ppack.data.mnist import PIXEL_SCALE, read_split

    X, y = read_split(Path(data_dir) / "mnist", "train")
    Xt, yt = read_split(Path(data_dir) / "mnist", "test")
    if max_rows:
        keep = np.sort(np.concatenate([np.flatnonzero(y == d)[:max_rows] for d in range(10)]))
        X, y = X[keep], y[keep]
    if max_test:
        Xt, yt = Xt[:max_test], yt[:max_test]
    return X * PIXEL_SCALE, y.astype(np.float64), Xt * PIXEL_SCALE, yt.astype(np.float64)


def rmse(predicted, y):
    return float(np.sqrt(np.mean((np.asarray(predicted) - y) ** 2)))


def auc(scores, positive):
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(positive, scores))


# -- LIBSVM ----------------------------------------------------------------------------------

def libsvm_problem(X, y):
    from libsvm import svmutil

    return svmutil.svm_problem(np.asarray(y, dtype=np.float64).tolist(), np.ascontiguousarray(X).tolist())


def libsvm_cv(X, y, epsilon, c_grid, gamma_grid, folds):
    """LIBSVM's k-fold cross-validation MSE at every grid point: (best (C, gamma), rows, seconds)."""
    from libsvm import svmutil

    problem = libsvm_problem(X, y)
    rows, start = [], time.perf_counter()
    for C in c_grid:
        for gamma in gamma_grid:
            t = time.perf_counter()
            with one_thread():
                mse = svmutil.svm_train(problem, f"-s 3 -p {epsilon} -c {C} -g {gamma} -v {folds} -m 1000 -q")
            rows.append({"C": C, "gamma": gamma, "cv_mse": float(mse), "seconds": time.perf_counter() - t})
            print(f"  LIBSVM cv C {C:g} gamma {gamma:g}: MSE {mse:.4f} ({rows[-1]['seconds']:.1f} s)", flush=True)
    best = min(rows, key=lambda r: r["cv_mse"])
    return (best["C"], best["gamma"]), rows, time.perf_counter() - start


def libsvm_train(X, y, options, repeats):
    """LIBSVM trained ``repeats`` times: (the last model, every training's seconds)."""
    from libsvm import svmutil

    problem = libsvm_problem(X, y)
    seconds, model = [], None
    for _ in range(repeats):
        with one_thread():
            start = time.perf_counter()
            model = svmutil.svm_train(problem, options + " -m 1000 -q")
            seconds.append(time.perf_counter() - start)
    return model, seconds


def libsvm_decisions(model, X):
    """LIBSVM's decision values (n,) on the rows of X."""
    from libsvm import svmutil

    with one_thread():
        _, _, values = svmutil.svm_predict([0.0] * len(X), np.ascontiguousarray(X).tolist(), model, "-q")
    return np.asarray(values, dtype=np.float64)[:, 0]


# -- ppack -----------------------------------------------------------------------------------
def ppack_fit(estimator, X, y, Xt):
    """Fit a PackSVR or PackOneClassSVM (what `train --svm-type` runs): (test decision values
    (n,), {"seconds": training seconds (``training_["seconds"]["total"]``), "support_vectors", "rho"})."""
    estimator.fit(X, y)
    values = estimator.predict(Xt) if y is not None else estimator.decision_function(Xt)  # SVR: f(x) is the value
    return values, {"seconds": float(estimator.training_["seconds"]["total"]),
                                             "support_vectors": int(estimator.n_support_),
                                             "rho": float(estimator.rho_)}


def median(values):
    return float(np.median(values))


# -- Friedman #1 -----------------------------------------------------------------------------
def run_friedman(args):
    sizes = QUICK if args.quick else FRIEDMAN
    X, y, Xt, yt = friedman(sizes["train"], sizes["test"])
    eps = FRIEDMAN["epsilon"]
    print(f"Friedman #1: {len(y)} training rows, {len(yt)} test rows; LIBSVM cross-validation on "
          f"{sizes['cv_rows']} rows", flush=True)
    grids = (QUICK["C_grid"], QUICK["gamma_grid"]) if args.quick else (C_GRID, GAMMA_GRID)
    (C, gamma), grid, cv_seconds = libsvm_cv(X[:sizes["cv_rows"]], y[:sizes["cv_rows"]], eps, *grids,
                                             FRIEDMAN["folds"])
    result = {"n_train": len(y), "n_test": len(yt), "cv_rows": sizes["cv_rows"], "epsilon": eps,
              "noise": FRIEDMAN["noise"], "C": C, "gamma": gamma, "cv_grid": grid, "cv_seconds": cv_seconds,
              "target_std": float(np.std(yt))}
    model, seconds = libsvm_train(X, y, f"-s 3 -p {eps} -c {C} -g {gamma}", args.libsvm_repeats or args.repeats)
    result["libsvm"] = {"seconds": seconds, "median_seconds": median(seconds),
                        "test_rmse": rmse(libsvm_decisions(model, Xt), yt), "support_vectors": int(model.get_nr_sv()),
                        "rho": float(model.rho[0])}
    lib = result["libsvm"]
    print(f"  LIBSVM -s 3 C {C:g} gamma {gamma:g}: test RMSE {lib['test_rmse']:.4f}, {lib['median_seconds']:.2f} s "
          f"(median of {', '.join(f'{s:.2f}' for s in seconds)}), {lib['support_vectors']} support vectors", flush=True)
    if args.skip_ppack:
        return result
    from ppack import PackSVR

    def score(epochs):
        model = PackSVR(C=C, gamma=gamma, epsilon=eps, epochs=epochs, seed=0, dtype=args.dtype)
        values, fitted = ppack_fit(model, X, y, Xt)
        return {"epochs": epochs, "test_rmse": rmse(values, yt), **fitted}

    result["ppack"] = ppack_curve(score, lambda r: r["test_rmse"] <= RMSE_GOAL * lib["test_rmse"], args,
                                  "test RMSE {test_rmse:.4f}")
    result["goal"] = goal(result["ppack"], lib["median_seconds"], "test_rmse")
    return result


def ppack_curve(score, reaches, args, shown):
    """ppack at each epochs value until ``reaches`` holds (every value with ``args.all_epochs``),
    then the first run that reaches repeated (median of ``args.repeats``): {"runs": [...],
    "reached": that run, or None}."""
    runs, reached = [], None
    for epochs in args.epochs:
        run = score(epochs)
        run["seconds_each"] = [run["seconds"]]
        runs.append(run)
        print(f"  ppack E = {epochs:g}: {shown.format(**run)}, {run['seconds']:.2f} s", flush=True)
        if reached is None and reaches(run):
            reached = run
            if not args.all_epochs:
                break
    if reached is not None:
        for _ in range(args.repeats - 1):
            reached["seconds_each"].append(score(reached["epochs"])["seconds"])
        reached["seconds"] = median(reached["seconds_each"])
    return {"runs": runs, "reached": reached}


def goal(curve, libsvm_seconds, metric):
    reached = curve["reached"]
    if reached is None:
        return {"met": False, "epochs": None, "time_ratio": None}
    ratio = reached["seconds"] / libsvm_seconds
    return {"met": ratio <= TIME_GOAL if metric == "test_rmse" else True, "epochs": reached["epochs"],
            "time_ratio": ratio}


# -- one-class on MNIST ----------------------------------------------------------------------
def run_one_class(args):
    X, y, Xt, yt = mnist(args.data_dir, QUICK["mnist_rows"] if args.quick else None,
                         QUICK["mnist_test"] if args.quick else None)
    nu, gamma = ONE_CLASS["nu"], ONE_CLASS["gamma"]
    print(f"MNIST one-class: {len(y)} training rows (each digit alone), {len(yt)} test rows, nu {nu:g}, "
          f"gamma {gamma:g}", flush=True)
    result = {"n_train": len(y), "n_test": len(yt), "nu": nu, "gamma": gamma, "libsvm": []}
    for digit in range(10):
        rows = y == digit
        model, seconds = libsvm_train(X[rows], np.ones(rows.sum()), f"-s 2 -n {nu} -g {gamma}",
                                      args.libsvm_repeats or args.repeats)
        score = auc(libsvm_decisions(model, Xt), yt == digit)
        result["libsvm"].append({"digit": digit, "rows": int(rows.sum()), "seconds": seconds,
                                 "median_seconds": median(seconds), "auc": score,
                                 "support_vectors": int(model.get_nr_sv()), "rho": float(model.rho[0])})
        print(f"  LIBSVM -s 2 digit {digit}: AUC {score:.4f}, {median(seconds):.2f} s, "
              f"{model.get_nr_sv()} support vectors", flush=True)
    lib_auc = float(np.mean([r["auc"] for r in result["libsvm"]]))
    lib_seconds = float(sum(r["median_seconds"] for r in result["libsvm"]))
    result["libsvm_mean_auc"], result["libsvm_seconds"] = lib_auc, lib_seconds
    print(f"  LIBSVM: mean AUC {lib_auc:.4f}, {lib_seconds:.2f} s for the ten digits", flush=True)
    if args.skip_ppack:
        return result
    from ppack import PackOneClassSVM

    def score(epochs):
        per_digit = []
        for digit in range(10):
            model = PackOneClassSVM(nu=nu, gamma=gamma, epochs=epochs, seed=0, dtype=args.dtype)
            values, fitted = ppack_fit(model, X[y == digit], None, Xt)
            per_digit.append({"digit": digit, "auc": auc(values, yt == digit), **fitted})
        return {"epochs": epochs, "digits": per_digit, "mean_auc": float(np.mean([d["auc"] for d in per_digit])),
                "seconds": float(sum(d["seconds"] for d in per_digit))}

    result["ppack"] = ppack_curve(score, lambda r: r["mean_auc"] >= lib_auc - AUC_GOAL, args,
                                  "mean AUC {mean_auc:.4f}")
    result["goal"] = goal(result["ppack"], lib_seconds, "auc")
    return result


# -- output ----------------------------------------------------------------------------------
def markdown(results):
    """The results as the report's Markdown tables."""
    out = []
    f = results.get("friedman")
    if f:
        lib = f["libsvm"]
        out += [f"Friedman #1: {f['n_train']:,} training rows, {f['n_test']:,} test rows (target standard deviation "
                f"{f['target_std']:.2f}), epsilon {f['epsilon']:g}; C = {f['C']:g}, gamma = {f['gamma']:g} from "
                f"LIBSVM's {FRIEDMAN['folds']}-fold cross-validation on {f['cv_rows']:,} rows "
                f"({len(f['cv_grid'])} grid points, {f['cv_seconds']:.0f} s).", "",
                "| trainer | epochs | test RMSE | train s | support vectors |", "|---|---|---|---|---|",
                f"| LIBSVM -s 3 | | {lib['test_rmse']:.4f} | {lib['median_seconds']:.2f} | "
                f"{lib['support_vectors']:,} |"]
        for run in f.get("ppack", {}).get("runs", []):
            out.append(f"| ppack epsilon_svr | {run['epochs']:g} | {run['test_rmse']:.4f} | {run['seconds']:.2f}"
                       f"{'' if len(run['seconds_each']) > 1 else ' (one run)'} | {run['support_vectors']:,} |")
        out += ["", goal_text(f, "RMSE within 5% of LIBSVM's", TIME_GOAL), ""]
    o = results.get("one_class")
    if o:
        out += [f"One-class on MNIST: each digit's training rows alone, nu {o['nu']:g}, gamma {o['gamma']:g}; ROC AUC "
                f"of that digit against the rest on the {o['n_test']:,} test rows.", ""]
        runs = o.get("ppack", {}).get("runs", [])
        head = "| digit | LIBSVM AUC | LIBSVM s | LIBSVM SVs |" + "".join(
            f" ppack E = {r['epochs']:g} AUC | s | SVs |" for r in runs)
        out += [head, "|" + "---|" * (4 + 3 * len(runs))]
        for d, lib in enumerate(o["libsvm"]):
            out.append(f"| {d} | {lib['auc']:.4f} | {lib['median_seconds']:.2f} | {lib['support_vectors']:,} |"
                       + "".join(f" {r['digits'][d]['auc']:.4f} | {r['digits'][d]['seconds']:.2f} | "
                                 f"{r['digits'][d]['support_vectors']:,} |" for r in runs))
        out.append(f"| mean / total | {o['libsvm_mean_auc']:.4f} | {o['libsvm_seconds']:.2f} | |" + "".join(
            f" {r['mean_auc']:.4f} | {r['seconds']:.2f} | |" for r in runs))
        out += ["", goal_text(o, "mean AUC within 0.01 of LIBSVM's", None), ""]
    return "\n".join(out)


def goal_text(result, what, time_goal):
    if "goal" not in result:
        return "ppack not run."
    g = result["goal"]
    if g["epochs"] is None:
        last = result["ppack"]["runs"][-1]["epochs"]
        return f"**Goal ({what}): not reached** within {last:g} epochs."
    timing = f" in {g['time_ratio']:.2f} of LIBSVM's training time" if g["time_ratio"] is not None else ""
    verdict = "met" if g["met"] else f"accuracy reached, but not in {time_goal:.2f} of LIBSVM's time"
    return f"**Goal ({what}{', in at most a third of its time' if time_goal else ''}): {verdict}** at " \
           f"{g['epochs']:g} epochs{timing}."


def run(quick, figures, data_dir):
    """The report's section: {"markdown": its text, "data": every measurement}."""
    args = parse([*(["--quick"] if quick else []), "--data-dir", str(data_dir)])
    results, seconds = measure(args)
    text = f"""### 7. Regression and one-class beside LIBSVM

`bench/svr_oneclass.py` ({seconds / 60:.1f} minutes{', quick mode: small sizes' if quick else ''}): ppack's
PackSVR and PackOneClassSVM (what `train --svm-type` runs) on every core, float64, the
defaults otherwise, seconds of the training loop (median of 3 at the epochs that reach the
goal, one run otherwise); LIBSVM on one thread (median of 3).

{markdown(results)}"""
    return {"markdown": text, "data": results}


def measure(args):
    started = time.perf_counter()
    results = {}
    if "friedman" in args.parts:
        results["friedman"] = run_friedman(args)
    if "one_class" in args.parts:
        results["one_class"] = run_one_class(args)
    return results, time.perf_counter() - started


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", default="friedman,one_class", help="comma-separated: friedman, one_class")
    p.add_argument("--epochs", default=",".join(f"{e:g}" for e in EPOCHS),
                   help="ppack's epochs values, tried in order until the goal's accuracy is reached")
    p.add_argument("--repeats", type=int, default=3, help="trainings per timing (the median is reported)")
    p.add_argument("--libsvm-repeats", type=int, default=None,
                   help="LIBSVM's trainings per timing (default: --repeats)")
    p.add_argument("--all-epochs", action="store_true", help="run every --epochs value, not only up to the goal")
    p.add_argument("--quick", action="store_true", help="small sizes: a check of the script, not the result")
    p.add_argument("--skip-ppack", action="store_true", help="LIBSVM's side only")
    p.add_argument("--dtype", default="float64", help="ppack's dtype (float64, float32 or auto)")
    p.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    p.add_argument("--out", default=str(BENCH / "results" / "svr_oneclass.json"))
    args = p.parse_args(argv)
    args.parts = args.parts.split(",")
    args.epochs = [float(e) for e in args.epochs.split(",")]
    return args


def main():
    args = parse()
    results, seconds = measure(args)
    results["seconds"] = seconds
    print(markdown(results))
    print(f"whole run: {seconds / 60:.1f} minutes")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
