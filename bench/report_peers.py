"""The report's comparison with the alternatives: the paper's Table I analogue and accuracy against time.

Experiment 1: on each set, at the same C and gamma, ppack at T = m and T = 3m (one process
on every core, in-process PackSVC, defaults: epoch sampling, step 0.5, averaged iterate),
LIBSVM (libsvm-official, one thread), scikit-learn SVC, and the approximations people use
at scale: a Nystroem map and random Fourier features with 1,000 and 3,000 components
followed by LIBLINEAR
(``-s 3``: hinge loss, dual coordinate descent, ``-B 1``). Seconds are training only
(a map's fit and the transform of the training rows count; predicting the test set does not).

Experiment 2: test accuracy and the primal objective P(w) = sigma/2 ||w||^2 + mean hinge of
ppack as T grows, for ijcnn1, a9a and MNIST class 2 against the rest, with LIBSVM's point
(its optimal dual objective, which equals its primal at the optimum, scaled to this form;
LIBSVM also fits a bias, ppack does not) and the Nystroem models' points on the same axes.
"""
import os
import re
import tempfile
import time

import numpy as np
import scipy.sparse as sp

from accuracy import load as load_binary
from figures import pyplot
from multiclass import load_usps, one_thread, run_libsvm, run_sklearn

# name -> (C, gamma); the paper's Table III where it has the set (C = 1 / (m sigma))
SETS = {
    "a9a": (0.307, 1.0), "w8a": (2.01, 1.0), "splice": (1.0, 0.01), "ijcnn1": (1.0, 1.0),
    "usps": (10.0, 0.01), "mnist2": (16.7, 0.02),
}
LABELS = {"a9a": "a9a", "w8a": "w8a", "splice": "splice", "ijcnn1": "ijcnn1", "usps": "usps (10 classes)",
          "mnist2": "MNIST 2 vs rest"}
CURVE_SETS = ("ijcnn1", "a9a", "mnist2")
QUICK_ROWS = 3000
COMPONENTS = (1000, 3000)
QUICK_COMPONENTS = (300, 1000)
SLOW_PEERS_SKIPPED_FULL = {"w8a"}  # LIBSVM and SVC take about 30 min each on w8a here


def load(name, data_dir):
    """(X, y, Xt, yt) of a report set."""
    if name == "usps":
        return load_usps(data_dir)
    if name == "splice":
        from ppack.data.libsvm import read_libsvm

        X, y, _ = read_libsvm(data_dir / "splice" / "splice_scale.bz2", n_features=60)
        Xt, yt, _ = read_libsvm(data_dir / "splice" / "splice_scale.t.bz2", n_features=60)
        return X.toarray(), y, Xt.toarray(), yt
    return load_binary(name, data_dir)


def subsample(X, y, rows, seed=0):
    if rows is None or X.shape[0] <= rows:
        return X, y
    keep = np.sort(np.random.default_rng(seed).choice(X.shape[0], size=rows, replace=False))
    return X[keep], y[keep]


# ------------------------------------------------------------------ trainers

def run_ppack(X, y, Xt, yt, C, gamma, epochs, objective=False):
    from mpi4py import MPI

    from ppack import PackSVC

    model = PackSVC(C=C, gamma=gamma, epochs=epochs, comm=MPI.COMM_SELF, objective=objective, random_state=0)
    model.fit(X, y)
    out = {"seconds": model.training_["seconds"]["total"], "test_accuracy": float(model.score(Xt, yt)),
           "support_vectors": int(model.n_support_)}
    if objective:
        out["objective"] = model.training_["objective"]
    return out


def run_mapped(X, y, Xt, yt, C, gamma, kind, components):
    """A Nystroem or random Fourier feature map, then LIBLINEAR's hinge-loss dual solver."""
    from liblinear.liblinearutil import parameter, predict, problem, train
    from sklearn.kernel_approximation import Nystroem, RBFSampler

    n = min(components, X.shape[0]) if kind == "nystroem" else components
    mapping = (Nystroem(gamma=gamma, n_components=n, random_state=0) if kind == "nystroem"
               else RBFSampler(gamma=gamma, n_components=n, random_state=0))
    start = time.perf_counter()
    Z = mapping.fit_transform(X)
    model = train(problem(y, np.ascontiguousarray(Z)), parameter(f"-s 3 -c {C} -B 1 -q"))
    seconds = time.perf_counter() - start
    Zt = mapping.transform(Xt)
    labels, _, _ = predict(yt, np.ascontiguousarray(Zt), model, "-q")
    return {"seconds": seconds, "test_accuracy": float(np.mean(np.asarray(labels) == yt)), "components": n}


def libsvm_with_objective(X, y, Xt, yt, C, gamma):
    """LIBSVM on a binary set, plus its optimal objective in ppack's scale: LIBSVM minimises
    1/2 ||w||^2 + C sum hinge, i.e. C m times sigma/2 ||w||^2 + mean hinge (sigma = 1/(C m));
    it prints its dual objective obj = -(that optimum), read here from its output."""
    from libsvm import svmutil

    with tempfile.TemporaryFile(mode="w+") as log:
        saved = os.dup(1)
        os.dup2(log.fileno(), 1)
        try:
            with one_thread():
                start = time.perf_counter()
                model = svmutil.svm_train(y, sp.csr_matrix(X), f"-c {C} -g {gamma} -m 1000")
                seconds = time.perf_counter() - start
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        log.seek(0)
        found = re.findall(r"obj = (-?[\d.e+-]+)", log.read())
    labels, _, _ = svmutil.svm_predict(yt, sp.csr_matrix(Xt), model, "-q")
    return {"seconds": seconds, "test_accuracy": float(np.mean(np.asarray(labels) == yt)),
            "support_vectors": int(model.get_nr_sv()),
            "objective": -float(found[-1]) / (C * X.shape[0]) if found else None}


# ------------------------------------------------------------------ experiments

def table_one(data_dir, quick):
    """Experiment 1: every trainer on every set; {set: {trainer: result}}."""
    results = {}
    for name, (C, gamma) in SETS.items():
        X, y, Xt, yt = load(name, data_dir)
        if quick:
            X, y = subsample(X, y, QUICK_ROWS)
            Xt, yt = subsample(Xt, yt, QUICK_ROWS, seed=1)
        rows = {"rows": X.shape[0], "test_rows": Xt.shape[0], "features": X.shape[1], "C": C, "gamma": gamma}
        runs = {}
        for epochs in (1, 3):
            runs[f"ppack T = {epochs}m"] = run_ppack(X, y, Xt, yt, C, gamma, epochs)
        if quick or name not in SLOW_PEERS_SKIPPED_FULL:
            runs["LIBSVM"] = run_libsvm(X, y, Xt, yt, {"C": C, "gamma": gamma})
            runs["scikit-learn SVC"] = run_sklearn(X, y, Xt, yt, {"C": C, "gamma": gamma})
        dense = X.toarray() if sp.issparse(X) else X
        dense_t = Xt.toarray() if sp.issparse(Xt) else Xt
        for kind, label in (("nystroem", "Nystroem"), ("rff", "RFF")):
            for components in (QUICK_COMPONENTS if quick else COMPONENTS):
                runs[f"{label} {components} + LIBLINEAR"] = run_mapped(dense, y, dense_t, yt, C, gamma, kind,
                                                                       components)
        results[name] = {**rows, "runs": runs}
        print(f"  table I analogue: {name} done", flush=True)
    return results


def curves(data_dir, quick):
    """Experiment 2: ppack's accuracy and objective as T grows, LIBSVM's and Nystroem's points."""
    epochs = (0.5, 1, 2) if quick else (0.25, 0.5, 1, 2, 3, 5)
    results = {}
    for name in CURVE_SETS:
        C, gamma = SETS[name]
        X, y, Xt, yt = load(name, data_dir)
        if quick:
            X, y = subsample(X, y, QUICK_ROWS)
            Xt, yt = subsample(Xt, yt, QUICK_ROWS, seed=1)
        dense = X.toarray() if sp.issparse(X) else X
        dense_t = Xt.toarray() if sp.issparse(Xt) else Xt
        results[name] = {
            "ppack": {str(e): run_ppack(X, y, Xt, yt, C, gamma, e, objective=True) for e in epochs},
            "LIBSVM": libsvm_with_objective(X, y, Xt, yt, C, gamma),
            "Nystroem": {str(k): run_mapped(dense, y, dense_t, yt, C, gamma, "nystroem", k)
                         for k in (QUICK_COMPONENTS if quick else COMPONENTS)},
        }
        print(f"  accuracy against time: {name} done", flush=True)
    return results


# ------------------------------------------------------------------ figures and text

def plot_table_one(results, path):
    plt = pyplot()
    if plt is None:
        return False
    names = list(results)
    fig, axes = plt.subplots(1, 2, figsize=(15, 4.5))
    trainers = sorted({t for r in results.values() for t in r["runs"]}, key=lambda t: (not t.startswith("ppack"), t))
    width = 0.8 / len(trainers)
    for k, trainer in enumerate(trainers):
        xs = np.arange(len(names)) + k * width
        secs = [results[n]["runs"].get(trainer, {}).get("seconds", np.nan) for n in names]
        accs = [100 * results[n]["runs"].get(trainer, {}).get("test_accuracy", np.nan) for n in names]
        axes[0].bar(xs, secs, width, label=trainer)
        axes[1].bar(xs, accs, width, label=trainer)
    for ax, title in zip(axes, ("training seconds (log scale)", "test accuracy (%)")):
        ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2)
        ax.set_xticklabels([LABELS[n] for n in names], rotation=20)
        ax.set_title(title)
    axes[0].set_yscale("log")
    lows = [100 * min(r.get("test_accuracy", 1) for r in results[n]["runs"].values()) for n in names]
    axes[1].set_ylim(max(0, min(lows) - 5), 100)
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_curves(results, path):
    plt = pyplot()
    if plt is None:
        return False
    fig, axes = plt.subplots(2, len(results), figsize=(5 * len(results), 8), squeeze=False)
    for col, (name, r) in enumerate(results.items()):
        runs = list(r["ppack"].values())
        secs = [p["seconds"] for p in runs]
        ax = axes[0, col]
        ax.plot(secs, [100 * p["test_accuracy"] for p in runs], "o-", label="ppack (T = E m)")
        for e, p in r["ppack"].items():
            ax.annotate(f"E={e}", (p["seconds"], 100 * p["test_accuracy"]), fontsize=7)
        ax.plot([r["LIBSVM"]["seconds"]], [100 * r["LIBSVM"]["test_accuracy"]], "s", label="LIBSVM")
        for k, p in r["Nystroem"].items():
            ax.plot([p["seconds"]], [100 * p["test_accuracy"]], "^", label=f"Nystroem {k} + LIBLINEAR")
        ax.set_xscale("log")
        ax.set_title(f"{LABELS[name]}: test accuracy")
        ax.set_xlabel("training seconds")
        ax.legend(fontsize=7)
        ax = axes[1, col]
        ax.plot(secs, [p["objective"]["value"] for p in runs], "o-", label="ppack primal")
        if r["LIBSVM"]["objective"] is not None:
            ax.axhline(r["LIBSVM"]["objective"], color="C1", ls="--", label="LIBSVM optimum (with bias)")
        ax.set_xscale("log")
        ax.set_title(f"{LABELS[name]}: primal objective")
        ax.set_xlabel("training seconds")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def table_one_markdown(results, quick):
    lines = ["| data (rows, features; C, gamma) | trainer | train s | test accuracy | support vectors / components |",
             "|---|---|---|---|---|"]
    for name, r in results.items():
        head = f"{LABELS[name]} ({r['rows']}, {r['features']}; {r['C']:g}, {r['gamma']:g})"
        for trainer, run in r["runs"].items():
            size = run.get("support_vectors", run.get("components", ""))
            lines.append(f"| {head} | {trainer} | {run['seconds']:.2f} | {100 * run['test_accuracy']:.2f}% | {size} |")
            head = ""
        if name in SLOW_PEERS_SKIPPED_FULL and not quick:
            lines.append("| | LIBSVM, scikit-learn SVC | not run (about 30 min each on this machine) | | |")
    return "\n".join(lines)


def curves_markdown(results):
    lines = ["| data | trainer | train s | test accuracy | primal objective |", "|---|---|---|---|---|"]
    for name, r in results.items():
        head = LABELS[name]
        for e, p in r["ppack"].items():
            lines.append(f"| {head} | ppack E = {e} | {p['seconds']:.2f} | {100 * p['test_accuracy']:.2f}% | "
                         f"{p['objective']['value']:.5f} |")
            head = ""
        lib = r["LIBSVM"]
        objective = "" if lib["objective"] is None else f"{lib['objective']:.5f} (with its bias)"
        lines.append(f"| | LIBSVM | {lib['seconds']:.2f} | {100 * lib['test_accuracy']:.2f}% | {objective} |")
        for k, p in r["Nystroem"].items():
            lines.append(f"| | Nystroem {k} + LIBLINEAR | {p['seconds']:.2f} | {100 * p['test_accuracy']:.2f}% | |")
    return "\n".join(lines)


def run(quick, figures, data_dir):
    """Experiments 1 and 2: {"markdown": the sections' text, "data": every measurement}."""
    started = time.perf_counter()
    first = table_one(data_dir, quick)
    second = curves(data_dir, quick)
    plot_table_one(first, figures / "table1.png")
    plot_curves(second, figures / "accuracy_time.png")
    scope = (f"Quick mode: every training set cut to a random {QUICK_ROWS} rows and every test set to "
             f"{QUICK_ROWS}, and maps of {' and '.join(map(str, QUICK_COMPONENTS))} components, so the figures "
             "show the method, not the full-size result." if quick else "Full training and test sets.")
    components = " and ".join(f"{k:,}" for k in (QUICK_COMPONENTS if quick else COMPONENTS))
    markdown = f"""### 1. The paper's Table I, here, with the alternatives

{scope} Same C and gamma for every trainer (the paper's Table III where it has the set;
C = 1/(m sigma)). ppack: one process on every core, defaults (epoch sampling, step c = 0.5,
averaged iterate), seconds from its metrics' `seconds.total`; LIBSVM 3.x (`libsvm-official`, one thread, 1 GB cache);
scikit-learn `SVC`; Nystroem / random Fourier features (scikit-learn, {components}
components) followed by LIBLINEAR (`liblinear-official`, `-s 3 -B 1`), their seconds
including the map's fit and transform. usps has 10 classes: ppack trains them one-vs-rest in
one pass, LIBSVM and SVC one-vs-one, LIBLINEAR one-vs-rest.

{table_one_markdown(first, quick)}

![Training seconds and test accuracy of every trainer on every set](report/table1.png)

### 2. Accuracy and objective against time

ppack at T = E m for E in {', '.join(next(iter(second.values()))['ppack'])}, with the primal
objective sigma/2 ||w||^2 + mean hinge taken exactly (`objective=True`: the averaged model's
norm and the hinge over every training row). LIBSVM's line is its optimum of the same
objective with a bias term (its printed dual objective, scaled by 1/(C m)), so it is a lower
reference, not the same problem. Nystroem points: experiment 1's maps, fitted again here.

{curves_markdown(second)}

![Test accuracy and primal objective against training seconds](report/accuracy_time.png)
"""
    return {"markdown": markdown, "data": {"table_one": first, "curves": second,
                                           "seconds": time.perf_counter() - started}}
