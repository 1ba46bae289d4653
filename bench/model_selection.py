"""Model selection in one pass (issue 44): PackGridSearchCV against scikit-learn's GridSearchCV
over PackSVC, and LIBSVM's `svm-train -v 5`.

Run from the repository root (data from ../shared/data by default, ``--data-dir``):

    .venv/bin/python bench/model_selection.py                      # a9a 4 x 3 x 5 folds, then usps 3 x 3 x 3
    .venv/bin/python bench/model_selection.py --datasets usps --skip-libsvm
    .venv/bin/python bench/model_selection.py --max-train 4000     # a quick check

a9a (dense float32, 123 features): C in {0.1, 1, 10, 100} x gamma in {0.01, 0.05, 0.1} with
scikit-learn's 5 folds (StratifiedKFold(5), unshuffled, the same for both searches), at the
same epochs and seed. ppack's PackGridSearchCV trains the 3 gammas x 4 C values x (5 folds +
the refit) as 72 columns of one pass (the gammas share each tile's dot products); GridSearchCV
(n_jobs=1) fits 60 PackSVC models and refits the best. Reported: both searches' seconds, best
parameters and best cross-validated accuracy; the test accuracy of ppack's refit model and of a
separate PackSVC fit at those parameters. LIBSVM (libsvm-official, ``svm_train`` with ``-v 5 -m 1000``, one thread) is
timed at two grid points (``--libsvm-points``); the whole grid's LIBSVM time is estimated as
12 times their mean, and labelled an estimate (LIBSVM's time grows with C, so the estimate
depends on which points were timed). usps (10 classes, 256 features; or scikit-learn's
digits when usps is absent): C in {1, 10, 100} x gamma in {0.005, 0.01, 0.02} with 3 folds.

``usps-one-class`` (in ``--datasets``): a one-class grid, nu in {0.05, 0.1, 0.2} x gamma in
{0.005, 0.01, 0.02} with 3 folds (KFold, unshuffled), on usps's first digit as inliers (+1)
with one row in ten drawn (seeded) from the other digits as outliers (-1), the same for the
test set; both searches score by F1 of the inliers (``scoring="f1"``). GridSearchCV fits 27
PackOneClassSVM models on the training folds and refits the best; it has no speed goal.

``--scores``: how PackGridSearchCV scores the held-out rows, "pass" (a predict pass after
training) or "progressive" (the predictions tested during training, no second pass); "both"
runs the search twice and compares the progressive ranking of the grid points with the
pass's (best parameters, each point's CV accuracy, the Spearman correlation of the point
scores) and the seconds saved.

Prints and saves JSON under bench/results/. One process, one rank (the numba threads of the
machine); timings on a shared machine are noisy.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GRIDS = {
    "a9a": {"C": [0.1, 1.0, 10.0, 100.0], "gamma": [0.01, 0.05, 0.1], "folds": 5},
    "usps": {"C": [1.0, 10.0, 100.0], "gamma": [0.005, 0.01, 0.02], "folds": 3},
    "usps-one-class": {"nu": [0.05, 0.1, 0.2], "gamma": [0.005, 0.01, 0.02], "folds": 3},
}
GOALS = {"a9a": 12.0, "usps": 6.0}  # GridSearchCV seconds / PackGridSearchCV seconds
POINTS_GOAL = 0.3  # accuracy points


def load(name, data_dir, max_train=None):
    """(X, y, Xt, yt, what): dense float32 rows. usps falls back to scikit-learn's digits."""
    from ppack.data.libsvm import read_libsvm

    if name == "a9a":
        X, y, _ = read_libsvm(Path(data_dir) / "a9a" / "a9a.bz2", n_features=123)
        Xt, yt, _ = read_libsvm(Path(data_dir) / "a9a" / "a9a.t.bz2", n_features=123)
        what = "a9a"
    elif (Path(data_dir) / "usps" / "usps_zip.bz2").exists():
        X, y, _ = read_libsvm(Path(data_dir) / "usps" / "usps_zip.bz2", n_features=256)
        Xt, yt, _ = read_libsvm(Path(data_dir) / "usps" / "usps_zip.t.bz2", n_features=256)
        what = "usps"
    else:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        digits = load_digits()
        X, Xt, y, yt = train_test_split(digits.data / 16.0, digits.target.astype(float), test_size=0.3,
                                        random_state=0)
        what = "digits (usps absent)"
    dense = [np.asarray(M.toarray() if hasattr(M, "toarray") else M, dtype=np.float32) for M in (X, Xt)]
    X, Xt = dense
    if max_train:
        X, y = X[:max_train], y[:max_train]
    return X, np.asarray(y, dtype=np.float64), Xt, np.asarray(yt, dtype=np.float64), what


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def libsvm_cv(X, y, C, gamma, folds):
    """LIBSVM's cross-validated accuracy (%) and seconds at one grid point (`svm-train -v`),
    on one thread (``multiclass.one_thread``)."""
    import scipy.sparse as sp
    from libsvm import svmutil

    from multiclass import one_thread

    problem = sp.csr_matrix(X.astype(np.float64))
    with one_thread():
        return timed(lambda: svmutil.svm_train(y, problem, f"-c {C} -g {gamma} -v {folds} -m 1000 -q"))


def one_class_rows(X, y, seed):
    """The first class's rows as inliers (+1) and one row in ten of the others, drawn with
    ``seed``, as outliers (-1), in their original order."""
    inlier = y == np.min(y)
    others = np.flatnonzero(~inlier)
    drawn = np.random.default_rng(seed).choice(others, size=max(1, int(inlier.sum()) // 9), replace=False)
    rows = np.sort(np.concatenate([np.flatnonzero(inlier), drawn]))
    return X[rows], np.where(inlier[rows], 1.0, -1.0)


def run_one_class(name, args):
    """PackGridSearchCV against GridSearchCV over PackOneClassSVM (module docstring)."""
    from sklearn.metrics import f1_score
    from sklearn.model_selection import GridSearchCV, KFold

    from ppack import PackOneClassSVM
    from ppack.model_selection import PackGridSearchCV

    X, y, Xt, yt, what = load("usps", args.data_dir, args.max_train)
    X, y = one_class_rows(X, y, args.seed)
    Xt, yt = one_class_rows(Xt, yt, args.seed + 1)
    spec = GRIDS[name]
    grid = {"nu": spec["nu"], "gamma": spec["gamma"]}
    cv = KFold(spec["folds"])
    estimator = PackOneClassSVM(epochs=args.epochs, seed=args.seed, dtype="float32")
    result = {"data": f"{what}, first class against one in ten of the others", "rows": int(X.shape[0]),
              "outliers": int(np.sum(y < 0)), "test_rows": int(Xt.shape[0]), "grid": grid, "folds": spec["folds"],
              "epochs": args.epochs, "seed": args.seed, "scoring": "f1"}
    print(f"{result['data']}: {X.shape[0]} rows ({result['outliers']} outliers) x {X.shape[1]} features; grid "
          f"{len(spec['nu'])} nu x {len(spec['gamma'])} gamma x {spec['folds']} folds", flush=True)
    ours, seconds = timed(lambda: PackGridSearchCV(estimator, grid, cv=cv, scoring="f1").fit(X, y))
    result["ppack"] = {"seconds": seconds, "best_params": ours.best_params_, "best_cv_f1": ours.best_score_,
                       "refit_test_f1": float(f1_score(yt, ours.predict(Xt))),
                       "passes": [{"columns": p["columns"], "seconds": p["seconds"]} for p in ours.grid_passes_]}
    print(f"  ppack PackGridSearchCV: {seconds:.1f} s, best {ours.best_params_}, CV F1 {ours.best_score_:.4f}, "
          f"refit test F1 {result['ppack']['refit_test_f1']:.4f}", flush=True)
    separate = PackOneClassSVM(epochs=args.epochs, seed=args.seed, dtype="float32", **ours.best_params_).fit(X)
    result["separate_fit_test_f1"] = float(f1_score(yt, separate.predict(Xt)))
    if not args.skip_sklearn:
        theirs, seconds = timed(lambda: GridSearchCV(estimator, grid, cv=cv, scoring="f1", n_jobs=1).fit(X, y))
        result["sklearn_gridsearchcv"] = {"seconds": seconds, "best_params": theirs.best_params_,
                                          "best_cv_f1": theirs.best_score_,
                                          "refit_test_f1": float(f1_score(yt, theirs.predict(Xt)))}
        result["speedup"] = seconds / result["ppack"]["seconds"]
        print(f"  GridSearchCV over PackOneClassSVM (n_jobs=1): {seconds:.1f} s, best {theirs.best_params_}, CV F1 "
              f"{theirs.best_score_:.4f}; ppack {result['speedup']:.1f}x faster", flush=True)
    save(args, name, result)
    return result


def run(name, args):
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    from ppack import PackSVC
    from ppack.model_selection import PackGridSearchCV

    X, y, Xt, yt, what = load(name, args.data_dir, args.max_train)
    spec = GRIDS[name]
    if args.only_libsvm:
        return run_libsvm(name, args, X, y, spec, {"data": what})
    grid = {"C": spec["C"], "gamma": spec["gamma"]}
    cv = StratifiedKFold(spec["folds"])
    estimator = PackSVC(epochs=args.epochs, seed=args.seed, dtype="float32")
    result = {"data": what, "rows": int(X.shape[0]), "features": int(X.shape[1]), "test_rows": int(Xt.shape[0]),
              "classes": int(len(np.unique(y))), "grid": grid, "folds": spec["folds"], "epochs": args.epochs,
              "seed": args.seed}
    print(f"{what}: {X.shape[0]} rows x {X.shape[1]} features, {result['classes']} classes; grid "
          f"{len(spec['C'])} C x {len(spec['gamma'])} gamma x {spec['folds']} folds", flush=True)
    first = "pass" if args.scores == "both" else args.scores
    ours, seconds = timed(lambda: PackGridSearchCV(estimator, grid, cv=cv, verbose=1, scores=first).fit(X, y))
    passes = ours.grid_passes_
    result["ppack"] = {"scores": first, "seconds": seconds, "best_params": ours.best_params_,
                       "best_cv_accuracy": ours.best_score_,
                       "refit_test_accuracy": ours.score(Xt, yt),
                       "mean_test_score": ours.cv_results_["mean_test_score"].tolist(),
                       "passes": [{"params": p["params"], "kernels": p.get("kernels"), "columns": p["columns"],
                                   "seconds": p["seconds"], "memory": p["memory"]} for p in passes]}
    print(f"  ppack PackGridSearchCV: {seconds:.1f} s, best {ours.best_params_}, CV accuracy "
          f"{100 * ours.best_score_:.2f}%, refit test accuracy {100 * result['ppack']['refit_test_accuracy']:.2f}%",
          flush=True)
    for p in passes:
        print(f"    pass {p['params']} {p.get('kernels', '')}: {p['columns']} columns, "
              f"{p['seconds']['train']:.1f} s training + {p['seconds']['score']:.1f} s scoring; {p['memory']}",
              flush=True)
    if args.scores == "both":
        compare_progressive(estimator, grid, cv, X, y, ours, seconds, result)
    separate, fit_seconds = timed(lambda: PackSVC(epochs=args.epochs, seed=args.seed, dtype="float32",
                                                  **ours.best_params_).fit(X, y))
    result["separate_fit"] = {"params": ours.best_params_, "seconds": fit_seconds,
                              "test_accuracy": separate.score(Xt, yt)}
    print(f"  separate PackSVC fit at {ours.best_params_}: {fit_seconds:.1f} s, test accuracy "
          f"{100 * result['separate_fit']['test_accuracy']:.2f}%", flush=True)
    save(args, name, result)
    if not args.skip_sklearn:
        theirs, seconds = timed(lambda: GridSearchCV(estimator, grid, cv=cv, n_jobs=1).fit(X, y))
        result["sklearn_gridsearchcv"] = {"seconds": seconds, "best_params": theirs.best_params_,
                                          "best_cv_accuracy": theirs.best_score_,
                                          "refit_test_accuracy": theirs.score(Xt, yt),
                                          "mean_test_score": theirs.cv_results_["mean_test_score"].tolist()}
        speedup = seconds / result["ppack"]["seconds"]
        result["speedup"] = speedup
        result["cv_accuracy_points_below_gridsearchcv"] = 100 * (theirs.best_score_ - ours.best_score_)
        print(f"  GridSearchCV over PackSVC (n_jobs=1): {seconds:.1f} s, best {theirs.best_params_}, CV accuracy "
              f"{100 * theirs.best_score_:.2f}%; ppack {speedup:.1f}x faster (goal {GOALS[name]:.0f}x)", flush=True)
        save(args, name, result)
    result["refit_points_below_separate_fit"] = 100 * (result["separate_fit"]["test_accuracy"]
                                                       - result["ppack"]["refit_test_accuracy"])
    if name == "a9a" and not args.skip_libsvm:
        run_libsvm(name, args, X, y, spec, result)
    save(args, name, result)
    return result


def compare_progressive(estimator, grid, cv, X, y, passed, pass_seconds, result):
    """PackGridSearchCV with scores="progressive" against the pass's search ``passed``: best
    parameters, each grid point's CV accuracy, Spearman of the point scores, seconds."""
    from scipy.stats import spearmanr

    from ppack.model_selection import PackGridSearchCV

    ours, seconds = timed(lambda: PackGridSearchCV(estimator, grid, cv=cv, scores="progressive").fit(X, y))
    a, b = passed.cv_results_["mean_test_score"], ours.cv_results_["mean_test_score"]
    scored = int(sum(ours.cv_results_[f"split{f}_scored_rows"][0] for f in range(passed.n_splits_)))
    score_seconds = [p["seconds"]["score"] for p in ours.grid_passes_]
    train_seconds = [p["seconds"]["train"] for p in ours.grid_passes_]
    result["progressive"] = {
        "seconds": seconds, "pass_seconds": pass_seconds, "seconds_saved": pass_seconds - seconds,
        "score_seconds_per_pass": score_seconds, "train_seconds_per_pass": train_seconds,
        "pass_train_seconds_per_pass": [p["seconds"]["train"] for p in passed.grid_passes_],
        "pass_score_seconds_per_pass": [p["seconds"]["score"] for p in passed.grid_passes_],
        "best_params": ours.best_params_,
        "best_cv_accuracy": ours.best_score_, "same_best_params": ours.best_params_ == passed.best_params_,
        "mean_test_score": b.tolist(), "pass_mean_test_score": a.tolist(),
        "points_below_pass": (100 * (a - b)).tolist(), "spearman": float(spearmanr(a, b).statistic),
        "scored_rows": scored, "rows": int(X.shape[0])}
    print(f"  progressive scores: {seconds:.1f} s ({pass_seconds - seconds:.1f} s saved), best {ours.best_params_}, "
          f"CV accuracy {100 * ours.best_score_:.2f}% (pass: {passed.best_params_}, {100 * passed.best_score_:.2f}%); "
          f"Spearman of the {len(a)} point scores {result['progressive']['spearman']:.3f}; {scored} of "
          f"{X.shape[0]} rows scored; per pass "
          f"{', '.join(f'{t:.1f} s training + {z:.3f} s scoring' for t, z in zip(train_seconds, score_seconds))}",
          flush=True)
    for params, x, z in zip(passed.cv_results_["params"], a, b):
        print(f"    {params}: pass {100 * x:.2f}%, progressive {100 * z:.2f}% ({100 * (x - z):+.2f} points)",
              flush=True)


def run_libsvm(name, args, X, y, spec, result):
    """LIBSVM `svm-train -v` at ``--libsvm-points``, and the whole grid's estimated seconds, into ``result``."""
    timings = []
    for point in args.libsvm_points.split(","):
        C, gamma = (float(v) for v in point.split(":"))
        accuracy, seconds = libsvm_cv(X, y, C, gamma, spec["folds"])
        timings.append({"C": C, "gamma": gamma, "cv_accuracy_percent": accuracy, "seconds": seconds})
        print(f"  LIBSVM svm-train -v {spec['folds']} at C={C:g}, gamma={gamma:g}, one thread: {seconds:.1f} s, CV "
              f"accuracy {accuracy:.2f}%", flush=True)
    points = len(spec["C"]) * len(spec["gamma"])
    estimate = points * float(np.mean([t["seconds"] for t in timings]))
    result["libsvm"] = {"timed_points": timings, "whole_grid_seconds_estimate": estimate,
                        "estimate_note": f"{points} x the mean of the timed points (an estimate, not a run)"}
    print(f"  LIBSVM whole grid (ESTIMATE, {points} x the mean of the timed points): {estimate:.0f} s", flush=True)
    save(args, name, result)
    return result


def save(args, name, result):
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"model_selection-{name}-{args.stamp}.json").write_text(json.dumps(result, indent=2, default=str) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    p.add_argument("--datasets", default="a9a,usps", help="a9a, usps, usps-one-class (comma-separated)")
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-train", type=int, default=None, help="keep the first N training rows (a quick check)")
    p.add_argument("--skip-sklearn", action="store_true")
    p.add_argument("--scores", choices=("pass", "progressive", "both"), default="pass",
                   help="PackGridSearchCV's scores; both: the two compared")
    p.add_argument("--skip-libsvm", action="store_true")
    p.add_argument("--only-libsvm", action="store_true", help="time LIBSVM only (a9a)")
    p.add_argument("--libsvm-points", default="1:0.05,10:0.05", help="C:gamma,C:gamma timed with svm-train -v")
    args = p.parse_args()
    args.stamp = time.strftime("%Y%m%d-%H%M%S")
    for name in args.datasets.split(","):
        (run_one_class if name == "usps-one-class" else run)(name, args)


if __name__ == "__main__":
    main()
