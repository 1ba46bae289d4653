"""The convergence diagnostic, calibrated on data: when does a run stop short, and does ppack say so?

Run from the repository root (data from ../shared/data):

    .venv/bin/python bench/convergence.py                    # the whole table, then its rates
    .venv/bin/python bench/convergence.py --sets diabetes --Cs 1,10000 --rows 500
    .venv/bin/python bench/convergence.py --report-only      # the rates of the saved table

The table: six data sets, each subsampled to at most ``--rows`` training rows and
``--test-rows`` test rows (a9a, ijcnn1, usps and MNIST-2 (digits 0-4 against 5-9) from their
files; Friedman #1 and diabetes from scikit-learn, regression by PackSVR), the RBF kernel with
gamma "scale", C from 0.1 to 10^4 and epochs 0.5, 1, 2 and 5; every other option ppack's
default. The reference of a cell is the better of ppack at the same settings with 20 times the
epochs and LIBSVM (``libsvm-official``, one thread) at the same C, gamma (and epsilon). A cell
is *short* when its test accuracy is 2 or more points below its reference (its RMSE 20% or
more above), *close* when within 0.5 points (5%). The diagnostic (``packsvm.convergence``) must
warn on every short cell and stay silent on at least 90% of the close ones; the cells between
are counted apart. Each run's diagnostic figures (``training_["convergence"]``) are saved with
it, so that ``--report-only`` can weigh another rule without training again. Results go to
bench/results/convergence.json.

``--halfway`` weighs three figures that compare a run with its own first half (the same seed
and stream: a run of E / 2 epochs is the first half of a run of E) on the saved table's cells:
the share of 2,000 sampled training rows whose predicted class changed (for regression, the
RMS change of the predictions over the targets' standard deviation), the relative change of
the decision values on those rows, and the test figure's gain from E / 2 to E (what a held-out
split of the training rows would show). Each is tried beside the present verdict ("warn when it
warns, or when the figure is above t") at every threshold t the cells give; results go to
bench/results/convergence_halfway.json (``--halfway --report-only``: the rates again).

``--dual`` trains the saved table's classifier cells with ``optimizer="dual"`` (the cell's
epochs its cap) and counts the cells whose ``converged_`` is true among the short, close and
between ones; results go to bench/results/convergence_dual.json.

``--auto`` trains each (set, C) pair of the saved table with ``epochs="auto"`` and with 1 epoch
(the default), side by side, and counts the pairs each leaves short, close or between against
the reference of the pair's longest cell, with their seconds (each fit's wall time, the
stages' verdicts included); results go to bench/results/convergence_auto.json
(``--stage-change 0.02,0.3``: auto settling at other changes between stages, into
convergence_auto_0.02_0.3.json). Sets not in the table (``--sets w8a,splice,svmguide1,german.numer,
heart_scale``: its calibration left them out) get the same reference, measured then; give
``--auto-out`` to keep their results apart.
"""
import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from multiclass import load_usps, one_thread  # noqa: E402

SETS = ("a9a", "ijcnn1", "usps", "mnist2", "friedman1", "diabetes")
SPLIT_FILES = {"a9a": ("a9a/a9a.bz2", "a9a/a9a.t.bz2"), "ijcnn1": ("ijcnn1/ijcnn1.tr.bz2", "ijcnn1/ijcnn1.t.bz2"),
               "w8a": ("w8a/w8a.bz2", "w8a/w8a.t.bz2"),
               "splice": ("splice/splice_scale.bz2", "splice/splice_scale.t.bz2"),
               "svmguide1": ("svmguide1/svmguide1.bz2", "svmguide1/svmguide1.t.bz2")}
ONE_FILE = {"german.numer": "german.numer/german.numer_scale.bz2", "heart_scale": "heart_scale/heart_scale.bz2"}
REGRESSION = {"friedman1", "diabetes"}
CS = (0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0)
EPOCHS = (0.5, 1.0, 2.0, 5.0)
REFERENCE_TIMES = 20  # the reference run's epochs, in multiples of the cell's
SHORT = {"accuracy": 0.02, "rmse": 0.20}  # a cell this much worse than its reference must be warned of
CLOSE = {"accuracy": 0.005, "rmse": 0.05}  # ... and at least 90% of those this close must not be
RESULTS = ROOT / "bench" / "results" / "convergence.json"


def load(name, data_dir, rows, test_rows, seed=0):
    """(X, y, Xt, yt) of ``name``: at most ``rows`` training and ``test_rows`` test rows, drawn
    without replacement with ``seed``; dense float64."""
    from ppack.data.libsvm import read_libsvm

    rng = np.random.default_rng(seed)
    if name in SPLIT_FILES:
        train, test = SPLIT_FILES[name]
        X, y, info = read_libsvm(Path(data_dir) / train)
        Xt, yt, _ = read_libsvm(Path(data_dir) / test, n_features=info.n_features)
        X, Xt = X.toarray(), Xt.toarray()
    elif name in ONE_FILE:  # two thirds of the rows train
        X, y, _ = read_libsvm(Path(data_dir) / ONE_FILE[name])
        X, order, cut = X.toarray(), rng.permutation(len(y)), 2 * len(y) // 3
        return X[order[:cut]], y[order[:cut]], X[order[cut:]], y[order[cut:]]
    elif name == "usps":
        X, y, Xt, yt = load_usps(data_dir)
    elif name == "mnist2":
        from ppack.data.mnist import read_split

        (X, y), (Xt, yt) = read_split(Path(data_dir) / "mnist", "train"), read_split(Path(data_dir) / "mnist", "test")
        X, Xt = X.reshape(len(X), -1) / 255.0, Xt.reshape(len(Xt), -1) / 255.0
        y, yt = np.where(y < 5, -1.0, 1.0), np.where(yt < 5, -1.0, 1.0)
    elif name == "friedman1":
        from sklearn.datasets import make_friedman1

        X, y = make_friedman1(rows, noise=1.0, random_state=0)
        Xt, yt = make_friedman1(test_rows, noise=1.0, random_state=1)
    else:  # diabetes: 442 rows, two thirds to train
        from sklearn.datasets import load_diabetes

        X, y = load_diabetes(return_X_y=True)
        order = rng.permutation(len(y))
        cut = 2 * len(y) // 3
        return X[order[:cut]], y[order[:cut]], X[order[cut:]], y[order[cut:]]
    keep = rng.permutation(len(y))[:rows]
    keep_test = rng.permutation(len(yt))[:test_rows]
    return (np.asarray(X, np.float64)[keep], np.asarray(y, np.float64)[keep],
            np.asarray(Xt, np.float64)[keep_test], np.asarray(yt, np.float64)[keep_test])


def recorded(args):
    """The run's arguments as saved with its results: paths relative to the repository."""
    return {k: os.path.relpath(v, ROOT) if k in ("data_dir", "out") else v for k, v in vars(args).items()}


def scale_gamma(X):
    """scikit-learn's gamma "scale": 1 / (n_features * X.var())."""
    return 1.0 / (X.shape[1] * X.var())


def score(regression, predicted, yt):
    """Test accuracy, or RMSE for regression."""
    if regression:
        return float(np.sqrt(np.mean((predicted - yt) ** 2)))
    return float(np.mean(predicted == yt))


def fitted(regression, X, y, C, gamma, epochs, optimizer=None):
    """A ppack fit (one process, every core, seed 0; ``optimizer`` for a classifier, None: the
    default) and the warnings it gave."""
    from mpi4py import MPI

    from ppack import PackSVC, PackSVR

    chosen = {} if optimizer is None else {"optimizer": optimizer}
    model = (PackSVR if regression else PackSVC)(C=C, gamma=gamma, epochs=epochs, seed=0, comm=MPI.COMM_SELF, **chosen)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y)
    return model, caught


def run_ppack(regression, X, y, Xt, yt, C, gamma, epochs):
    """One ppack fit: its test figure, seconds and diagnostic."""
    model, caught = fitted(regression, X, y, C, gamma, epochs)
    info = model.training_
    return {"score": score(regression, model.predict(Xt), yt), "seconds": info["seconds"]["total"],
            "convergence": info.get("convergence"), "warned": any("converge" in str(w.message) for w in caught),
            "support_vectors": int(model.n_support_)}


def run_libsvm(regression, X, y, Xt, yt, C, gamma):
    """LIBSVM at the same settings (``-s 3 -p 0.1`` for regression: ppack's epsilon), one thread."""
    import scipy.sparse as sp
    from libsvm import svmutil

    options = f"-s {3 if regression else 0} -c {C} -g {gamma} -m 1000 -q" + (" -p 0.1" if regression else "")
    with one_thread():
        start = time.perf_counter()
        model = svmutil.svm_train(y, sp.csr_matrix(X), options)
        seconds = time.perf_counter() - start
    predicted, _, _ = svmutil.svm_predict(yt, sp.csr_matrix(Xt), model, "-q")
    return {"score": score(regression, np.asarray(predicted), yt), "seconds": seconds}


def gap(regression, value, reference):
    """How much worse ``value`` is than ``reference``: accuracy points (fraction), or RMSE relative."""
    return (value - reference) / reference if regression else reference - value


def classify(cell):
    """"short", "close" or "between" (see the module docstring)."""
    kind = "rmse" if cell["regression"] else "accuracy"
    worse = gap(cell["regression"], cell["ppack"]["score"], cell["reference"])
    return "short" if worse >= SHORT[kind] else "close" if worse <= CLOSE[kind] else "between"


def best(regression, *scores):
    return min(scores) if regression else max(scores)


def report(cells):
    """The table's rates: warned on every short cell? silent on how many close ones? The
    verdict is ``packsvm.convergence.verdict`` of each run's saved figures (the one the run
    gave, unless its thresholds changed since)."""
    from ppack.packsvm.convergence import verdict

    counts = {"short": [0, 0], "close": [0, 0], "between": [0, 0]}  # [warned, cells]
    print(f"{'set':10s} {'C':>8s} {'epochs':>6s} {'score':>9s} {'ref':>9s} {'class':>7s} warned  sigma_T   "
          f"change    ratio")
    for cell in cells:
        kind = classify(cell)
        # (a table saved before the figures named their problem: the set's)
        figures = {"svm_type": "epsilon_svr" if cell["regression"] else "c_svc", **cell["ppack"]["convergence"]}
        warned = verdict(figures) is not None
        counts[kind][0] += warned
        counts[kind][1] += 1
        numbers = " ".join(f"{value:8.3g}" if value is not None else f"{'-':>8s}"
                           for value in (figures["sigma_T"], figures["loss_change"], figures["loss_ratio"]))
        print(f"{cell['set']:10s} {cell['C']:8g} {cell['epochs']:6g} {cell['ppack']['score']:9.4f} "
              f"{cell['reference']:9.4f} {kind:>7s} {'yes' if warned else 'no':>6s} {numbers}")
    short, close = counts["short"], counts["close"]
    rates = {"short_warned": short[0] / max(1, short[1]), "short_cells": short[1],
             "close_silent": 1.0 - close[0] / max(1, close[1]), "close_cells": close[1],
             "between_warned": counts["between"][0], "between_cells": counts["between"][1]}
    print(f"\nwarned on {short[0]} of {short[1]} short cells ({rates['short_warned']:.0%}, goal 100%); silent on "
          f"{close[1] - close[0]} of {close[1]} close cells ({rates['close_silent']:.0%}, goal >= 90%); "
          f"warned on {counts['between'][0]} of {counts['between'][1]} between")
    return rates


def fit_predict(regression, X, y, C, gamma, epochs, rows):
    """A ppack fit at these settings (``fitted``): its predictions and decision values on
    ``rows`` (decision values None for regression)."""
    model, _ = fitted(regression, X, y, C, gamma, epochs)
    return [(model.predict(part), None if regression else model.decision_function(part)) for part in rows]


def halfway_figures(regression, X, y, Xt, yt, C, gamma, epochs, sample):
    """The three halfway figures of one cell (``--halfway``): a run of ``epochs`` against its
    first half, on the training rows ``sample`` and the test rows."""
    (p0, d0), (t0, _) = fit_predict(regression, X, y, C, gamma, epochs / 2, (X[sample], Xt))
    (p1, d1), (t1, _) = fit_predict(regression, X, y, C, gamma, epochs, (X[sample], Xt))
    if regression:
        change = float(np.sqrt(np.mean((p1 - p0) ** 2)) / np.std(y))
        flips = decision = change
    else:
        flips = float(np.mean(p0 != p1))
        decision = float(np.linalg.norm(d1 - d0) / max(np.linalg.norm(d1), 1e-12))
    gain = -gap(regression, score(regression, t1, yt), score(regression, t0, yt))
    return {"flips": flips, "decision_change": decision, "test_gain": gain, "score": score(regression, t1, yt)}


HALFWAY = ("flips", "decision_change", "test_gain")


def report_halfway(cells):
    """For each halfway figure, the rates over the table of "the verdict, or the figure above t"
    (t: one threshold for the classifiers' cells, one for the regressions', each tried at
    every value the cells give): the most short cells warned while silent on at least 90% of
    the close ones, and the close cells left silent once every short cell is warned."""
    from ppack.packsvm.convergence import verdict

    cells = [c for c in cells if classify(c) != "between"]
    warned = [verdict({"svm_type": "epsilon_svr" if c["regression"] else "c_svc", **c["ppack"]["convergence"]})
              is not None for c in cells]
    short = [classify(c) == "short" for c in cells]
    n_short, n_close = sum(short), len(short) - sum(short)
    results = {}
    for name in HALFWAY:
        values = [c["halfway"][name] for c in cells]
        options = {regression: sorted({v for v, c in zip(values, cells) if c["regression"] == regression}) + [np.inf]
                   for regression in (False, True)}
        rows = []
        for t_class in options[False]:
            for t_reg in options[True]:
                flags = [w or v > (t_reg if c["regression"] else t_class) for w, v, c in zip(warned, values, cells)]
                rows.append(((t_class, t_reg), sum(f for f, s in zip(flags, short) if s),
                             sum(not f for f, s in zip(flags, short) if not s)))
        best_row = max([row for row in rows if row[2] >= 0.9 * n_close], key=lambda row: (row[1], row[2]))
        every = max([row for row in rows if row[1] == n_short], key=lambda row: row[2])
        results[name] = {"short_cells": n_short, "close_cells": n_close,
                         "best_with_90pct_silent": {"thresholds": best_row[0], "short_warned": best_row[1],
                                                    "close_silent": best_row[2]},
                         "every_short_warned": {"thresholds": every[0], "short_warned": every[1],
                                                "close_silent": every[2]}}
        print(f"{name:16s} at t = {best_row[0][0]:.3g} (classifiers), {best_row[0][1]:.3g} (regressions): "
              f"{best_row[1]} of {n_short} short cells warned, {best_row[2]} of {n_close} close silent; "
              f"every short one warned at t = {every[0][0]:.3g}, {every[0][1]:.3g}: {every[2]} of {n_close} "
              "close silent")
    return results


def halfway(args):
    """``--halfway``: the halfway figures of the saved table's cells, then their rates."""
    out = Path(args.out).with_name("convergence_halfway.json")
    if args.report_only:
        report_halfway(json.loads(out.read_text())["cells"])
        return
    saved = json.loads(Path(args.out).read_text())["cells"]
    rng = np.random.default_rng(1)
    for name in args.sets.split(","):
        cells = [c for c in saved if c["set"] == name]
        if not cells:
            continue
        X, y, Xt, yt = load(name, args.data_dir, args.rows, args.test_rows)
        sample = rng.choice(len(y), min(2000, len(y)), replace=False)
        for cell in cells:
            cell["halfway"] = halfway_figures(cell["regression"], X, y, Xt, yt, cell["C"], cell["gamma"],
                                              cell["epochs"], sample)
            if cell["halfway"]["score"] != cell["ppack"]["score"]:
                raise SystemExit(f"{name} C={cell['C']:g} epochs={cell['epochs']:g}: the run scored "
                                 f"{cell['halfway']['score']} against the table's {cell['ppack']['score']}")
            print(f"{name} C={cell['C']:g} epochs={cell['epochs']:g} {classify(cell)}: " + ", ".join(
                f"{k} {v:.4g}" for k, v in cell["halfway"].items()), flush=True)
    cells = [c for c in saved if "halfway" in c]
    out.write_text(json.dumps({"args": recorded(args), "cells": cells}, indent=1))
    rates = report_halfway(cells)
    out.write_text(json.dumps({"args": recorded(args), "cells": cells, "rates": rates}, indent=1))


def auto_epochs(args):
    """``--auto``: epochs="auto" against 1 epoch (the default) on every (set, C) of the saved
    table, run side by side; each judged against the reference of the table's longest cell
    (the better of LIBSVM and ppack at 20 times its epochs)."""
    from ppack.packsvm import convergence

    out = Path(args.auto_out) if args.auto_out else Path(args.out).with_name(
        "convergence_auto.json" if args.stage_change is None else
        f"convergence_auto_{args.stage_change.replace(',', '_')}.json")
    if args.stage_change is not None:
        classes, rms = map(float, args.stage_change.split(","))
        convergence.MAX_STAGE_CHANGE.update(c_svc=classes, one_class=classes, epsilon_svr=rms)
    if args.report_only:
        report_auto(json.loads(out.read_text())["pairs"])
        return
    saved = json.loads(Path(args.out).read_text())["cells"]
    pairs = []
    for name in args.sets.split(","):
        cells = [c for c in saved if c["set"] == name]
        regression = name in REGRESSION
        X, y, Xt, yt = load(name, args.data_dir, args.rows, args.test_rows)
        gamma = cells[0]["gamma"] if cells else scale_gamma(X)
        fitted(regression, X, y, 1.0, gamma, 0.1)  # the numba kernels compiled or loaded first
        for C in sorted({c["C"] for c in cells}) if cells else map(float, args.Cs.split(",")):
            if cells:  # the table's reference of the pair's longest cell
                longest = max((c for c in cells if c["C"] == C), key=lambda c: c["epochs"])
                longer, libsvm = longest["longer"]["score"], longest["libsvm"]["score"]
            else:  # a set not in the table: the same reference, measured now
                longer = run_ppack(regression, X, y, Xt, yt, C, gamma, REFERENCE_TIMES * max(EPOCHS))["score"]
                libsvm = run_libsvm(regression, X, y, Xt, yt, C, gamma)["score"]
            pair = {"set": name, "regression": regression, "C": C, "reference": best(regression, longer, libsvm)}
            for epochs in (1.0, "auto"):
                start = time.perf_counter()
                model, caught = fitted(regression, X, y, C, gamma, epochs)
                stages = model.training_["convergence"].get("stages") or [{"epochs": epochs}]
                pair[str(epochs)] = {"score": score(regression, model.predict(Xt), yt),
                                     "seconds": time.perf_counter() - start, "epochs": stages[-1]["epochs"],
                                     "stages": len(stages), "converged": bool(model.converged_),
                                     "changes": [stage.get("change") for stage in stages]}
            pairs.append(pair)
            print(f"{name} C={C:g}: reference {pair['reference']:.4f}; 1 epoch {pair['1.0']['score']:.4f} in "
                  f"{pair['1.0']['seconds']:.2f} s; auto {pair['auto']['score']:.4f} at {pair['auto']['epochs']:g} "
                  f"epochs in {pair['auto']['seconds']:.2f} s", flush=True)
            out.write_text(json.dumps({"args": recorded(args), "pairs": pairs}, indent=1))
    summary = report_auto(pairs)
    out.write_text(json.dumps({"args": recorded(args), "pairs": pairs, "summary": summary}, indent=1))


def report_auto(pairs):
    """How many (set, C) pairs end short, close or between with 1 epoch and with auto, and what
    auto cost: its seconds over 1 epoch's, where it stopped at one epoch and overall."""
    summary = {}
    for epochs in ("1.0", "auto"):
        kinds = [classify({"regression": p["regression"], "ppack": p[epochs], "reference": p["reference"]})
                 for p in pairs]
        summary[epochs] = {kind: kinds.count(kind) for kind in ("short", "close", "between")}
        summary[epochs]["seconds"] = sum(p[epochs]["seconds"] for p in pairs)
    first = [p for p in pairs if p["auto"]["epochs"] == 1]
    summary["one_epoch_pairs"] = len(first)
    summary["one_epoch_same_score"] = sum(p["auto"]["score"] == p["1.0"]["score"] for p in first)
    summary["one_epoch_seconds"] = [sum(p[e]["seconds"] for p in first) for e in ("1.0", "auto")]
    for epochs, name in (("1.0", "1 epoch"), ("auto", "epochs auto")):
        counts = summary[epochs]
        print(f"{name:12s}: {counts['short']} short, {counts['between']} between, {counts['close']} close of "
              f"{len(pairs)} (set, C) pairs, {counts['seconds']:.1f} s")
    same, seconds = summary["one_epoch_same_score"], summary["one_epoch_seconds"]
    print(f"auto stopped at one epoch on {len(first)} pairs (the same test figure on {same}), in {seconds[1]:.1f} s "
          f"against {seconds[0]:.1f} s for 1 epoch")
    return summary


def dual_table(args):
    """``--dual``: the saved table's classifier cells trained by ``optimizer="dual"`` at the cell's
    epochs (its cap), each judged by ``converged_`` (the KKT test) against the cell's reference:
    how many short cells it calls converged (goal 0), and how many close ones (goal at least
    half). Results go to bench/results/convergence_dual.json."""
    out = Path(args.out).with_name("convergence_dual.json")
    if args.report_only:
        report_dual(json.loads(out.read_text())["cells"])
        return
    saved = [c for c in json.loads(Path(args.out).read_text())["cells"] if not c["regression"]]
    cells = []
    for name in args.sets.split(","):
        table = [c for c in saved if c["set"] == name]
        if not table:
            continue
        X, y, Xt, yt = load(name, args.data_dir, args.rows, args.test_rows)
        fitted(False, X, y, 1.0, table[0]["gamma"], 1, "dual")  # the numba kernels compiled or loaded first
        for cell in table:
            model, caught = fitted(False, X, y, cell["C"], cell["gamma"], cell["epochs"], "dual")
            report = model.training_["convergence"]
            dual = {"score": score(False, model.predict(Xt), yt), "seconds": model.training_["seconds"]["total"],
                    "converged": bool(model.converged_), "epochs": report["epochs"], "kkt_gap": report["kkt_gap"],
                    "relative_duality_gap": report["relative_duality_gap"],
                    "warned": any(issubclass(w.category, model.convergence_warning) for w in caught)}
            entry = {k: cell[k] for k in ("set", "regression", "rows", "gamma", "C", "epochs", "reference")}
            entry["ppack"], entry["sgd_score"] = dual, cell["ppack"]["score"]
            cells.append(entry)
            print(f"{name} C={cell['C']:g} epochs={cell['epochs']:g} {classify(entry)}: {dual}", flush=True)
    rates = report_dual(cells)
    out.write_text(json.dumps({"args": recorded(args), "cells": cells, "rates": rates}, indent=1))


def report_dual(cells):
    """The dual table's rates: ``converged_`` on the short cells (goal none) and the close ones."""
    counts = {kind: [0, 0] for kind in ("short", "close", "between")}  # [converged, cells]
    for cell in cells:
        kind = classify(cell)
        counts[kind][0] += cell["ppack"]["converged"]
        counts[kind][1] += 1
    rates = {f"{kind}_converged": done for kind, (done, _) in counts.items()}
    rates.update({f"{kind}_cells": n for kind, (_, n) in counts.items()})
    # optimizer="auto"'s rule weighed on the table: the dual against the table's SGD run at each C / epochs
    for bound, cells_at in (("C/epochs <= 10", [c for c in cells if c["C"] / c["epochs"] <= 10]),
                            ("C/epochs > 10", [c for c in cells if c["C"] / c["epochs"] > 10])):
        gains = [c["ppack"]["score"] - c["sgd_score"] for c in cells_at]
        better, worse = sum(g > 0.003 for g in gains), sum(g < -0.003 for g in gains)
        rates[bound] = {"cells": len(gains), "dual_better": better, "dual_worse": worse,
                        "median_gain": float(np.median(gains)) if gains else None}
        print(f"{bound}: the dual more than 0.3 points better on {better}, worse on {worse} of {len(gains)} cells "
              f"(median gain {rates[bound]['median_gain']})")
    print(f"\nconverged on {counts['short'][0]} of {counts['short'][1]} short cells (goal 0), on "
          f"{counts['close'][0]} of {counts['close'][1]} close cells (goal at least half), on "
          f"{counts['between'][0]} of {counts['between'][1]} between")
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--Cs", default=",".join(f"{c:g}" for c in CS))
    parser.add_argument("--epochs", default=",".join(f"{e:g}" for e in EPOCHS))
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--test-rows", type=int, default=2000)
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--halfway", action="store_true",
                        help="weigh the halfway figures on the saved table's cells (see above)")
    parser.add_argument("--auto", action="store_true",
                        help="epochs auto against 1 epoch on the saved table's (set, C) pairs (see above)")
    parser.add_argument("--auto-out", help="--auto: the results file (default: see above)")
    parser.add_argument("--stage-change", metavar="CLASSES,RMS",
                        help="--auto: settle a stage at these changes since the one before (default: "
                             "packsvm.convergence.MAX_STAGE_CHANGE's)")
    parser.add_argument("--dual", action="store_true",
                        help="the saved table's classifier cells under optimizer dual (see above)")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    if args.dual:
        dual_table(args)
        return
    if args.halfway:
        halfway(args)
        return
    if args.auto:
        auto_epochs(args)
        return
    if args.report_only:
        report(json.loads(Path(args.out).read_text())["cells"])
        return
    cells = []
    for name in args.sets.split(","):
        regression = name in REGRESSION
        X, y, Xt, yt = load(name, args.data_dir, args.rows, args.test_rows)
        gamma = scale_gamma(X)
        print(f"== {name}: {len(y)} rows, {X.shape[1]} features, gamma {gamma:.4g}", flush=True)
        for C in map(float, args.Cs.split(",")):
            libsvm = run_libsvm(regression, X, y, Xt, yt, C, gamma)
            for epochs in map(float, args.epochs.split(",")):
                cell = run_ppack(regression, X, y, Xt, yt, C, gamma, epochs)
                longer = run_ppack(regression, X, y, Xt, yt, C, gamma, REFERENCE_TIMES * epochs)
                cells.append({"set": name, "regression": regression, "rows": len(y), "gamma": gamma, "C": C,
                              "epochs": epochs, "ppack": cell, "longer": longer, "libsvm": libsvm,
                              "reference": best(regression, longer["score"], libsvm["score"])})
                print(f"{name} C={C:g} epochs={epochs:g}: {cell['score']:.4f} (x{REFERENCE_TIMES}: "
                      f"{longer['score']:.4f}, LIBSVM {libsvm['score']:.4f}) {classify(cells[-1])}"
                      f"{' warned' if cell['warned'] else ''} {cell['convergence']}", flush=True)
            Path(args.out).write_text(json.dumps({"args": recorded(args), "cells": cells}, indent=1))
    rates = report(cells)
    Path(args.out).write_text(json.dumps({"args": recorded(args), "cells": cells, "rates": rates}, indent=1))


if __name__ == "__main__":
    main()
