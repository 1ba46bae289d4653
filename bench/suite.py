"""Where ppack stands: the trainers users pick, side by side, at tuned settings, in one run.

Run from the repository root (data from ../shared/data; `pip install -e ".[mpi,bench]"`):

    .venv/bin/python bench/suite.py --quick      # four sets on 10,000 training rows, single runs
    .venv/bin/python bench/suite.py              # every set, full size, peers capped at 30 minutes
    .venv/bin/python bench/suite.py --tune --sets a9a,usps   # choose those sets' C and gamma again

Settings: each set's C and gamma come from one 5-fold cross-validated grid on a seeded
subsample of at most 10,000 training rows (``--tune``: oneDAL's SVC where installed, else
LIBSVM, over a coarse version of LIBSVM's grid.py ranges, ``GRID``), recorded in
bench/suite_settings.json with the cross-validated accuracy; the mnist8m-style digits take
MNIST's. Every trainer gets the set's C and gamma and reads the same HDF5 files, made once
in ``--work-dir``.

Trainers, each in a process of its own, so that its whole-process seconds (start, read,
train, predict) and its peak resident memory (the largest process of the run: ppack's
largest rank) are its own:
- oneDAL's SVC (scikit-learn-intelex) on every core, one-vs-one, with its bias, tol 1e-3;
- LIBSVM (libsvm-official) and scikit-learn's SVC, one thread, one-vs-one, bias, -e 0.001;
- Nystroem (1,000 components) with LIBLINEAR (-s 3 -B 1), one thread, one-vs-rest;
- ppack, one rank per core, one thread each, one-vs-rest, no bias: the SGD at 1, 2, 4, ...
  epochs until it reaches the best peer's accuracy minus 0.1 points (at most ``MAX_EPOCHS``),
  and the dual (``--optimizer dual --epochs auto``: KKT gap 0.1, a cap of 100 epochs).
A trainer whose first run takes under a minute runs three times (medians reported); one
that has not finished in ``--cap`` minutes is reported as not finished. Results go to
bench/results/suite.json (``--quick``: suite_quick.json); ``markdown`` renders its table.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT), str(BENCH)]

SETTINGS = BENCH / "suite_settings.json"
# name -> how its files are made: LIBSVM text (train, test), MNIST (digit: that one against the
# rest), or mnist8m-style digits of that many rows (settings: MNIST's)
SETS = {
    "a9a": {"text": ("a9a/a9a.bz2", "a9a/a9a.t.bz2")},
    "w8a": {"text": ("w8a/w8a.bz2", "w8a/w8a.t.bz2")},
    "ijcnn1": {"text": ("ijcnn1/ijcnn1.tr.bz2", "ijcnn1/ijcnn1.t.bz2")},
    "usps": {"text": ("usps/usps_zip.bz2", "usps/usps_zip.t.bz2")},
    "mnist": {"mnist": None},
    "mnist2": {"mnist": 2},
    "digits240k": {"digits": 240_000},
    "digits1m": {"digits": 1_000_000},
}
QUICK_SETS, QUICK_ROWS = ("a9a", "ijcnn1", "usps", "mnist2"), 10_000
# a coarse version of LIBSVM's grid.py ranges (log2 C from -5 to 15, log2 gamma from 3 to -15,
# here by 4): C's top value, 2^15, is left out, where the SMO fits of noisy sets take longest
GRID = {"C": [2.0 ** k for k in range(-5, 12, 4)], "gamma": [2.0 ** k for k in range(3, -14, -4)]}
TUNE_ROWS, FOLDS = 10_000, 5
PEERS = ("onedal", "libsvm", "sklearn_svc", "nystroem_liblinear")
MAX_EPOCHS = 16
REPEAT_UNDER = 60.0  # seconds: a trainer this quick runs three times
NYSTROEM_COMPONENTS = 1000
# the Nystroem peer maps and predicts its test rows this many at a time
PREDICT_ROWS = 10000
PEER_NAMES = {"onedal": "oneDAL SVC", "libsvm": "LIBSVM", "sklearn_svc": "scikit-learn SVC",
              "nystroem_liblinear": f"Nystroem {NYSTROEM_COMPONENTS} + LIBLINEAR"}


def cores():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def mpiexec():
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else "mpiexec"


def read_arrays(path):
    """(X, y) of a ppack HDF5 file: CSR or dense float64, as the file stores them."""
    from mpi4py import MPI

    from ppack.data.shard import load_shard

    shard = load_shard(MPI.COMM_SELF, str(path))
    return shard.float_rows(0, shard.n_samples), np.asarray(shard.y, dtype=np.float64)


def prepare(name, data_dir, work, rows=None):
    """(train, test) HDF5 paths of ``name`` in ``work``, made once (``rows``: a seeded subsample
    of the training rows)."""
    from ppack.data.hdf5 import write_dataset

    tag = f"{name}-{rows}" if rows else name
    train, test = work / f"{tag}.train.h5", work / f"{tag}.test.h5"
    if train.exists() and test.exists():
        return train, test
    spec = SETS[name]
    if "digits" in spec:
        subprocess.run([sys.executable, "-m", "ppack", "data", "mnist8m", str(train), "--rows",
                        str(rows or spec["digits"]), "--source", str(data_dir / "mnist"), "--quiet"], check=True)
        _, (Xt, yt) = mnist_split(data_dir, None)
        write_dataset(test, Xt, yt, dtype=np.uint8)
        return train, test
    if "text" in spec:
        from ppack.data.libsvm import read_libsvm

        X, y, info = read_libsvm(data_dir / spec["text"][0])
        Xt, yt, _ = read_libsvm(data_dir / spec["text"][1], n_features=info.n_features)
        Xt = Xt[:, :X.shape[1]]
    else:
        (X, y), (Xt, yt) = mnist_split(data_dir, spec["mnist"])
    if rows is not None and rows < X.shape[0]:
        keep = np.sort(np.random.default_rng(0).choice(X.shape[0], rows, replace=False))
        X, y = X[keep], y[keep]
    write_dataset(train, X, y)
    write_dataset(test, Xt, yt)
    return train, test


def mnist_split(data_dir, digit):
    """((X, y), (Xt, yt)) of MNIST, pixels / 255; labels +-1 for ``digit`` against the rest."""
    from ppack.data.mnist import read_split

    out = []
    for part in ("train", "test"):
        X, y = read_split(data_dir / "mnist", part)
        X = X.reshape(len(X), -1) / 255.0
        out.append((X, (np.where(y == digit, 1.0, -1.0) if digit is not None else y.astype(np.float64))))
    return out


def worker(args):
    """One peer's fit and test in this process: prints its JSON (train seconds, accuracy, support vectors)."""
    X, y = read_arrays(args.train)
    Xt, yt = read_arrays(args.test)
    C, gamma = args.C, args.gamma
    from multiclass import one_thread

    start = time.perf_counter()
    if args.worker == "onedal":
        from sklearnex.svm import SVC

        model = SVC(C=C, gamma=gamma, cache_size=1000).fit(X, y)
        seconds = time.perf_counter() - start
        accuracy, count = float(np.mean(model.predict(Xt) == yt)), int(model.support_.size)
    elif args.worker == "sklearn_svc":
        from sklearn.svm import SVC

        with one_thread():
            model = SVC(C=C, gamma=gamma, cache_size=1000).fit(X, y)
            seconds = time.perf_counter() - start
            accuracy, count = float(np.mean(model.predict(Xt) == yt)), int(model.support_.size)
    elif args.worker == "libsvm":
        import scipy.sparse as sp
        from libsvm import svmutil

        with one_thread():
            model = svmutil.svm_train(y, sp.csr_matrix(X), f"-c {C} -g {gamma} -m 1000 -q")
            seconds = time.perf_counter() - start
            predicted, _, _ = svmutil.svm_predict(yt, sp.csr_matrix(Xt), model, "-q")
        accuracy, count = float(np.mean(np.asarray(predicted) == yt)), int(model.get_nr_sv())
    else:  # nystroem_liblinear
        import scipy.sparse as sp
        from liblinear import liblinearutil
        from sklearn.kernel_approximation import Nystroem

        with one_thread():
            mapping = Nystroem(gamma=gamma, n_components=min(NYSTROEM_COMPONENTS, X.shape[0]), random_state=0)
            Z = mapping.fit_transform(X)
            model = liblinearutil.train(y, sp.csr_matrix(Z), f"-s 3 -B 1 -c {C} -q")
            seconds = time.perf_counter() - start
            # the test rows mapped and predicted a block at a time, as a user predicting many rows
            # would: the whole mapped test set of ijcnn1 (91,701 x 1,000 dense, then CSR, then
            # LIBLINEAR's nodes) took 3.9 GiB and most of the process's seconds
            predicted = np.concatenate([liblinearutil.predict(yt[a:a + PREDICT_ROWS],
                                                              sp.csr_matrix(mapping.transform(Xt[a:a + PREDICT_ROWS])),
                                                              model, "-q")[0] for a in range(0, len(yt), PREDICT_ROWS)])
        accuracy, count = float(np.mean(predicted == yt)), mapping.n_components
    print(json.dumps({"train_seconds": seconds, "accuracy": accuracy, "support_vectors": count}))


# runs the command after it and prints, last on stderr, the peak resident KiB of the largest
# process among its descendants (Linux's ru_maxrss of the waited-for children)
PEAK_OF = ("import resource, subprocess, sys; code = subprocess.call(sys.argv[1:]); "
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(code)")


def measured(command, cap_minutes, env=None):
    """(stdout, whole-process seconds, peak resident MiB of its largest process), or None past the cap."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", PEAK_OF, *command], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        out, err = process.communicate(timeout=60 * cap_minutes)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the command and every process it started
        process.communicate()
        return None
    seconds = time.perf_counter() - start
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{err[-3000:]}")
    peak = int(err.strip().splitlines()[-1]) / 1024
    return out, seconds, peak


def run_peer(name, train, test, setting, cap, once_only=False):
    command = [sys.executable, str(Path(__file__)), "--worker", name, "--train", str(train), "--test", str(test),
               "--C", repr(setting["C"]), "--gamma", repr(setting["gamma"])]
    return repeated(lambda: _peer_once(command, cap), once_only)


def _peer_once(command, cap):
    got = measured(command, cap)
    if got is None:
        return None
    out, seconds, peak = got
    result = json.loads(out.strip().splitlines()[-1])
    return {**result, "process_seconds": seconds, "peak_mib": peak}


def run_ppack(train, test, setting, cap, work, optimizer, epochs, once_only=False):
    metrics = work / "metrics.json"
    command = [mpiexec(), "-n", str(cores()), sys.executable, "-m", "ppack", "train", "--data", str(train),
               "--test", str(test), "--C", repr(setting["C"]), "--gamma", repr(setting["gamma"]),
               "--epochs", str(epochs), "--optimizer", optimizer, "--threads", "1", "--seed", "0",
               "--metrics-json", str(metrics), "--quiet"]

    def once():
        got = measured(command, cap, env=dict(os.environ, OMP_NUM_THREADS="1"))
        if got is None:
            return None
        _, seconds, peak = got
        m = json.loads(metrics.read_text())
        result = {"train_seconds": m["seconds"]["total"], "accuracy": m["test_accuracy"],
                  "support_vectors": m["support_vectors"], "process_seconds": seconds, "peak_mib": peak,
                  "epochs": m["convergence"].get("epochs", epochs) if optimizer == "dual" else epochs}
        if optimizer == "dual":
            result["relative_duality_gap"] = m["convergence"]["relative_duality_gap"]
            result["converged"] = m["convergence"]["converged"]
        return result
    return repeated(once, once_only)


def repeated(once, once_only=False):
    """``once()``'s result; three times and the medians where the first took under a minute (unless
    ``once_only``: the quick suite's single runs)."""
    first = once()
    if first is None:
        return {"not_finished": True}
    if once_only or first["process_seconds"] >= REPEAT_UNDER:
        return {**first, "runs": 1}
    runs = [first, once(), once()]
    if any(run is None for run in runs):
        return {**first, "runs": 1}
    median = {k: float(np.median([run[k] for run in runs])) for k in ("train_seconds", "process_seconds", "peak_mib")}
    return {**first, **median, "runs": 3}


def tune(names, data_dir, work):
    """Each set's C and gamma by 5-fold cross-validation on at most TUNE_ROWS rows, into SETTINGS."""
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    try:
        from sklearnex.svm import SVC
        by = "oneDAL SVC (scikit-learn-intelex)"
    except ImportError:
        from sklearn.svm import SVC
        by = "scikit-learn SVC (LIBSVM)"
    settings = json.loads(SETTINGS.read_text()) if SETTINGS.exists() else {}
    for name in names:
        if "digits" in SETS[name]:
            continue  # MNIST's
        train, _ = prepare(name, data_dir, work, TUNE_ROWS)
        X, y = read_arrays(train)
        if hasattr(X, "toarray"):  # oneDAL's sparse SMO had not finished w8a's grid after 50 minutes here
            X = X.toarray()
        start = time.perf_counter()
        search = GridSearchCV(SVC(cache_size=1000), {"C": GRID["C"], "gamma": GRID["gamma"]},
                              cv=StratifiedKFold(FOLDS, shuffle=True, random_state=0)).fit(X, y)
        settings[name] = {"C": search.best_params_["C"], "gamma": search.best_params_["gamma"],
                          "cv_accuracy": float(search.best_score_), "rows": int(X.shape[0]), "folds": FOLDS,
                          "grid": GRID, "by": by, "date": time.strftime("%Y-%m-%d"),
                          "minutes": (time.perf_counter() - start) / 60}
        print(name, settings[name], flush=True)
        SETTINGS.write_text(json.dumps(settings, indent=1) + "\n")


def setting_of(name, settings):
    return settings[name if "digits" not in SETS[name] else "mnist"]


def run_suite(names, data_dir, work, quick, cap):
    settings = json.loads(SETTINGS.read_text())
    results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "quick": quick, "cores": cores(),
               "cap_minutes": cap, "versions": versions(), "sets": {}}
    for name in names:
        setting = setting_of(name, settings)
        train, test = prepare(name, data_dir, work, QUICK_ROWS if quick else None)
        entry = results["sets"][name] = {"C": setting["C"], "gamma": setting["gamma"], "peers": {}, "ppack": {}}
        for peer in PEERS:
            entry["peers"][peer] = run_peer(peer, train, test, setting, cap, quick)
            print(name, peer, entry["peers"][peer], flush=True)
        finished = [p["accuracy"] for p in entry["peers"].values() if "accuracy" in p]
        target = max(finished) - 0.001 if finished else None
        entry["target"] = target
        sgd = entry["ppack"]["sgd"] = []
        epochs = 1
        while epochs <= MAX_EPOCHS:
            run = run_ppack(train, test, setting, cap, work, "sgd", epochs, quick)
            sgd.append(run)
            print(name, "ppack sgd", run, flush=True)
            if "accuracy" not in run or target is None or run["accuracy"] >= target:
                break
            epochs *= 2
        entry["ppack"]["dual"] = run_ppack(train, test, setting, cap, work, "dual", "auto", quick)
        print(name, "ppack dual", entry["ppack"]["dual"], flush=True)
        reached = [run["epochs"] for run in sgd if target is not None and run.get("accuracy", 0) >= target]
        entry["ppack"]["sgd_epochs_to_target"] = reached[0] if reached else None
    return results


def versions():
    from importlib import metadata

    out = {}
    for name in ("ppack", "numpy", "numba", "mpi4py", "mpich", "scikit-learn", "scikit-learn-intelex",
                 "libsvm-official", "liblinear-official"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def cell(run, key, fmt):
    if run is None or run.get("not_finished"):
        return "not finished in the cap"
    return fmt.format(run[key])


def markdown(results):
    """The suite's table (Markdown) from its results."""
    lines = ["| set (C, gamma) | trainer | test accuracy | train s | whole process s | peak MiB | support vectors |",
             "|---|---|---|---|---|---|---|"]
    for name, entry in results["sets"].items():
        label = f"{name} ({entry['C']:g}, {entry['gamma']:g})"
        rows = [(PEER_NAMES[p], run) for p, run in entry["peers"].items()]
        rows += [(f"ppack SGD, {run['epochs']} epoch{'s' if run['epochs'] != 1 else ''}", run)
                 for run in entry["ppack"]["sgd"] if "epochs" in run]
        dual = entry["ppack"]["dual"]
        rows.append((f"ppack dual, {dual.get('epochs', '?')} epochs", dual))
        for i, (trainer, run) in enumerate(rows):
            lines.append(f"| {label if i == 0 else ''} | {trainer} | {cell(run, 'accuracy', '{:.2%}')} | "
                         f"{cell(run, 'train_seconds', '{:.2f}')} | {cell(run, 'process_seconds', '{:.2f}')} | "
                         f"{cell(run, 'peak_mib', '{:.0f}')} | {cell(run, 'support_vectors', '{}')} |")
    return "\n".join(lines)


def run(quick, figures, data_dir):
    """The report's part (``bench/report.py``): the suite, run now, its table and how it was run."""
    names = list(QUICK_SETS if quick else SETS)
    with tempfile.TemporaryDirectory() as work:
        results = run_suite(names, Path(data_dir), Path(work), quick, 30.0)
    return render(results)


def render(results):
    """The report's part from a suite run's ``results`` (its JSON, as ``run_suite`` writes it)."""
    names, quick = list(results["sets"]), results["quick"]
    settings = json.loads(SETTINGS.read_text())
    tuned = "; ".join(f"{name} C = {settings[name]['C']:g}, gamma = {settings[name]['gamma']:g} "
                      f"(CV {settings[name]['cv_accuracy']:.2%})" for name in names if name in settings)
    text = "\n".join([
        "### Where ppack stands: the trainers users pick, at tuned settings", "",
        f"Run of {results['date']} on {results['cores']} cores ("
        + ", ".join(f"{k} {v}" for k, v in results["versions"].items() if v) + "). "
        f"{'Quick mode: at most ' + str(QUICK_ROWS) + ' training rows per set, the full test sets. ' if quick else ''}"
        "Each set's C and gamma come from one 5-fold cross-validated grid on at most "
        f"{TUNE_ROWS} of its training rows (`bench/suite.py --tune`, {settings[names[0]]['by']} over C in "
        "2^-5..2^11 and gamma in 2^3..2^-13, by factors of 16), the same for every trainer: " + tuned + ".",
        f"Threads: oneDAL every core ({results['cores']}), LIBSVM, scikit-learn's SVC and LIBLINEAR one, ppack one "
        "rank per core with one thread each. Bias: the SMO peers and LIBLINEAR (-B 1) fit one; ppack none. "
        "Multiclass: the SMO peers one-vs-one, LIBLINEAR and ppack one-vs-rest. Tolerances: the SMO peers 1e-3, "
        "LIBLINEAR its default, ppack's SGD its epochs, its dual a KKT gap of 0.1. Every trainer reads the same "
        "HDF5 files (dense or CSR as the data are); whole-process seconds include start, read, train and predict; "
        "peak memory is the largest process's resident peak. " + repeats(results), "",
        markdown(results), "", "ppack against the best peer (its accuracy minus 0.1 points the target):", "",
        standing(results), ""])
    return {"markdown": text, "data": results}


def repeats(results):
    """How many runs each figure is (the runs recorded in ``results``), in a sentence."""
    runs = [run.get("runs", 1) for entry in results["sets"].values()
            for run in [*entry["peers"].values(), *entry["ppack"]["sgd"], entry["ppack"]["dual"]] if "runs" in run]
    if runs and max(runs) == 1:
        return "Each figure is a single run."
    return "A trainer whose first run took under a minute ran three times: its seconds and memory are the medians."


def standing(results):
    """Per set: the best peer, ppack's SGD at the fewest epochs that reached the target, the dual,
    and each one's training seconds as a multiple of oneDAL's (Markdown)."""
    lines = ["| set | best peer | target | ppack SGD: epochs, accuracy, train s (x oneDAL) | "
             "ppack dual: epochs, accuracy, gap, train s (x oneDAL) |", "|---|---|---|---|---|"]
    for name, entry in results["sets"].items():
        finished = {p: run for p, run in entry["peers"].items() if "accuracy" in run}
        if not finished:
            lines.append(f"| {name} | no peer finished | | | |")
            continue
        best = max(finished, key=lambda p: finished[p]["accuracy"])
        onedal = finished.get("onedal", {}).get("train_seconds")

        def versus(run):
            return f" (x{run['train_seconds'] / onedal:.2f})" if onedal else ""
        reached = [run for run in entry["ppack"]["sgd"] if run.get("accuracy", 0) >= entry["target"]]
        sgd = reached[0] if reached else (entry["ppack"]["sgd"][-1] if entry["ppack"]["sgd"] else None)
        sgd_cell = "not run" if not sgd or "accuracy" not in sgd else (
            f"{sgd['epochs']}, {sgd['accuracy']:.2%}, {sgd['train_seconds']:.2f}{versus(sgd)}"
            + ("" if reached else ": short of the target"))
        dual = entry["ppack"]["dual"]
        dual_cell = "not finished in the cap" if "accuracy" not in dual else (
            f"{dual['epochs']}, {dual['accuracy']:.2%}, {dual['relative_duality_gap']:.3g}, "
            f"{dual['train_seconds']:.2f}{versus(dual)}")
        lines.append(f"| {name} | {finished[best]['accuracy']:.2%} ({PEER_NAMES[best]}) | {entry['target']:.2%} | "
                     f"{sgd_cell} | {dual_cell} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{', '.join(QUICK_SETS)} on {QUICK_ROWS} training rows")
    parser.add_argument("--sets", default=None, help="comma-separated sets (default: all, or the quick ones)")
    parser.add_argument("--tune", action="store_true", help="choose the sets' C and gamma again (see above)")
    parser.add_argument("--cap", type=float, default=30.0, help="minutes a trainer may take (default 30)")
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--work-dir", default=None,
                        help="where the HDF5 files are made and kept for the next run (default: a temporary folder)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--worker", choices=PEERS, help=argparse.SUPPRESS)
    parser.add_argument("--train", help=argparse.SUPPRESS)
    parser.add_argument("--test", help=argparse.SUPPRESS)
    parser.add_argument("--C", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--gamma", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    names = args.sets.split(",") if args.sets else list(QUICK_SETS if args.quick else SETS)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(args.work_dir or scratch)
        work.mkdir(parents=True, exist_ok=True)
        if args.tune:
            return tune(names, Path(args.data_dir), work)
        results = run_suite(names, Path(args.data_dir), work, args.quick, args.cap)
    out = Path(args.out) if args.out else BENCH / "results" / ("suite_quick.json" if args.quick else "suite.json")
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(markdown(results))
    print("wrote", out)


if __name__ == "__main__":
    main()
