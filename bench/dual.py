"""The dual optimizer against the SGD and the peers, at the same C and gamma, in one run.

Run from the repository root (data from ../shared/data by default):

    .venv/bin/python bench/dual.py                          # usps, a9a, ijcnn1 at their settings
    .venv/bin/python bench/dual.py --sets usps --seeds 0,1,2 --epochs 1,2,3,5
    .venv/bin/python bench/dual.py --sets mnist2 --epochs 100 --optimizers dual --tol 0.01   # a certified optimum
    .venv/bin/python bench/dual.py --sets usps --rows 3000 --C 100 --epochs 200 --optimizers dual   # large C
    .venv/bin/python bench/dual.py --sets a9a --C 128 --gamma 0.001953125 --rows 3000 --epochs 200 \
        --optimizers dual --sweeps 1,3,10,30 --skip-peers      # the passes over each pack's block

Each ppack run is its own `mpiexec -n RANKS` process (default 2 ranks) that trains with
`PackSVC` and reports its training seconds (``training_["seconds"]["total"]``, the dual's
certificate pass included) and test accuracy; with the dual also its epochs done, KKT gap,
its passes over each pack's block (``--sweeps``: the solver's ``DEFAULT_SWEEPS`` in that run),
certified relative duality gap and rows drawn per epoch. The peers train in this process
while no ppack run is going: LIBSVM (libsvm-official, one thread, `-m 1000`), and oneDAL's
SVC (scikit-learn-intelex, every core) where it is installed (`pip install
scikit-learn-intelex`; it is skipped, and said so, where not). Their seconds are `fit` alone.
Results go to bench/results/dual.json.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

# each set's data, C and gamma (LIBSVM's habits: the values its users pick for these sets)
SETS = {
    "usps": {"files": ("usps/usps_zip.bz2", "usps/usps_zip.t.bz2"), "C": 10.0, "gamma": 0.01},
    "a9a": {"files": ("a9a/a9a.bz2", "a9a/a9a.t.bz2"), "C": 1.0, "gamma": 0.05},
    "a9a-C10": {"files": ("a9a/a9a.bz2", "a9a/a9a.t.bz2"), "C": 10.0, "gamma": 0.05},
    "ijcnn1": {"files": ("ijcnn1/ijcnn1.tr.bz2", "ijcnn1/ijcnn1.t.bz2"), "C": 1.0, "gamma": 1.0},
    "mnist2": {"files": None, "C": 16.67, "gamma": 0.02},
    "mnist": {"files": None, "C": 16.67, "gamma": 0.02},
}


def load(name, data_dir):
    """(X, y, Xt, yt): dense float64 for MNIST (pixels / 255), CSR otherwise."""
    if name.startswith("mnist"):
        from ppack.data.mnist import read_split

        X, y = read_split(Path(data_dir) / "mnist", "train")
        Xt, yt = read_split(Path(data_dir) / "mnist", "test")
        X, Xt = X.reshape(len(X), -1) / 255.0, Xt.reshape(len(Xt), -1) / 255.0
        if name == "mnist2":
            y, yt = np.where(y == 2, 1.0, -1.0), np.where(yt == 2, 1.0, -1.0)
        return X, y.astype(float), Xt, yt.astype(float)
    from ppack.data.libsvm import read_libsvm

    train, test = SETS[name]["files"]
    X, y, _ = read_libsvm(Path(data_dir) / train)
    Xt, yt, _ = read_libsvm(Path(data_dir) / test, n_features=X.shape[1])
    if name == "usps":
        X, Xt = X.toarray(), Xt.toarray()
    return X, y, Xt, yt


def subsample(X, y, Xt, yt, rows):
    """The first ``rows`` of a seeded permutation of the training rows (all of them for None)."""
    if rows is None or rows >= X.shape[0]:
        return X, y, Xt, yt
    keep = np.sort(np.random.default_rng(0).permutation(X.shape[0])[:rows])
    return X[keep], y[keep], Xt, yt


def settings(args):
    """The set's C and gamma, C replaced by ``--C`` when given."""
    setting = dict(SETS[args.set])
    if args.C is not None:
        setting["C"] = args.C
    if args.gamma is not None:
        setting["gamma"] = args.gamma
    return setting


def worker(args):
    """One ppack fit on every rank of this mpiexec; rank 0 prints its figures as JSON."""
    from mpi4py import MPI

    from ppack import PackSVC
    from ppack.packsvm.dual import solver

    if args.sweep is not None:
        solver.DEFAULT_SWEEPS = args.sweep
    comm = MPI.COMM_WORLD
    X, y, Xt, yt = subsample(*load(args.set, args.data), args.rows)
    setting = settings(args)
    params = dict(C=setting["C"], gamma=setting["gamma"], optimizer=args.optimizer, epochs=args.epoch,
                  seed=args.seed, comm=comm)
    if args.tol is not None:
        params["tol"] = args.tol
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = PackSVC(**params).fit(X, y)
    accuracy = model.score(Xt, yt)
    if comm.Get_rank() == 0:
        info = model.training_
        out = {"set": args.set, "optimizer": model.optimizer_, "epochs_asked": args.epoch, "seed": args.seed,
               "ranks": comm.Get_size(), "seconds": info["seconds"]["total"], "accuracy": accuracy,
               "support_vectors": model.n_support_, "converged": bool(model.converged_),
               "warned": [str(w.message) for w in caught if issubclass(w.category, Warning)]}
        if model.optimizer_ == "dual":
            report = info["convergence"]
            out.update(sweeps=solver.DEFAULT_SWEEPS, epochs_done=report["epochs"], kkt_gap=report["kkt_gap"],
                       relative_duality_gap=report["relative_duality_gap"],
                       duality_gap_estimate=report["duality_gap_estimate"],
                       rows_drawn=report["history"]["rows_drawn"],
                       certificate_seconds=info["seconds"].get("certificate"))
        print("RESULT " + json.dumps(out), flush=True)


def run_ppack(args, name, optimizer, epoch, seed, sweeps=None):
    command = [str(ROOT / ".venv/bin/mpiexec"), "-n", str(args.ranks), sys.executable, __file__, "--worker",
               "--set", name, "--optimizer", optimizer, "--epoch", str(epoch), "--seed", str(seed),
               "--data", str(args.data)] + ([] if args.tol is None else ["--tol", str(args.tol)]) + \
        ([] if args.rows is None else ["--rows", str(args.rows)]) + ([] if args.C is None else ["--C", str(args.C)]) + \
        ([] if args.gamma is None else ["--gamma", str(args.gamma)]) + \
        ([] if sweeps is None else ["--sweep", str(sweeps)])
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"ppack run failed: {' '.join(command)}\n{done.stderr[-3000:]}")


def libsvm_peer(X, y, Xt, yt, C, gamma):
    from libsvm import svmutil

    from multiclass import one_thread

    problem = svmutil.svm_problem(y.tolist(), X)
    with one_thread():  # libsvm-official links OpenMP, which would take every core
        start = time.perf_counter()
        model = svmutil.svm_train(problem, f"-s 0 -t 2 -c {C} -g {gamma} -m 1000 -q")
        seconds = time.perf_counter() - start
    predicted, _, _ = svmutil.svm_predict(yt.tolist(), Xt, model, "-q")
    return {"seconds": seconds, "accuracy": float(np.mean(np.asarray(predicted) == yt)),
            "support_vectors": model.get_nr_sv(), "threads": 1}


def onedal_peer(X, y, Xt, yt, C, gamma):
    try:
        from sklearnex.svm import SVC
    except ImportError:
        return None
    start = time.perf_counter()
    model = SVC(C=C, gamma=gamma, cache_size=1000).fit(X, y)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "accuracy": float(model.score(Xt, yt)), "support_vectors": int(model.n_support_.sum()),
            "threads": os.cpu_count()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="usps,a9a,ijcnn1")
    parser.add_argument("--epochs", default="1,2,3,5", help="epochs (the dual's cap) of each ppack run")
    parser.add_argument("--optimizers", default="sgd,dual")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--tol", type=float, default=None)
    parser.add_argument("--skip-peers", action="store_true")
    parser.add_argument("--peers", default="libsvm,onedal", help="which peers run (without --skip-peers)")
    parser.add_argument("--rows", type=int, default=None, help="train on a seeded subsample of this many rows")
    parser.add_argument("--C", type=float, default=None, help="C in place of each set's own")
    parser.add_argument("--gamma", type=float, default=None, help="gamma in place of each set's own")
    parser.add_argument("--sweeps", default=None, help="the dual's passes over each pack's block, a list (default: "
                        "the solver's)")
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "dual.json"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--set", help=argparse.SUPPRESS)
    parser.add_argument("--optimizer", help=argparse.SUPPRESS)
    parser.add_argument("--epoch", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--sweep", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    results = {"date": time.strftime("%Y-%m-%d"), "ranks": args.ranks, "sets": {}}
    for name in args.sets.split(","):
        args.set = name
        setting = settings(args)
        entry = results["sets"][name] = {"C": setting["C"], "gamma": setting["gamma"], "rows": args.rows, "ppack": []}
        if not args.skip_peers:
            X, y, Xt, yt = subsample(*load(name, args.data), args.rows)
            peers = args.peers.split(",")
            if "libsvm" in peers:
                entry["libsvm"] = libsvm_peer(X, y, Xt, yt, setting["C"], setting["gamma"])
                print(name, "libsvm", entry["libsvm"], flush=True)
            if "onedal" in peers:
                entry["onedal"] = onedal_peer(X, y, Xt, yt, setting["C"], setting["gamma"])
                print(name, "onedal", entry["onedal"] or "not installed (pip install scikit-learn-intelex)",
                      flush=True)
        sweeps = [None] if args.sweeps is None else [int(s) for s in args.sweeps.split(",")]
        for optimizer in args.optimizers.split(","):
            for sweep in sweeps if optimizer == "dual" else [None]:
                for epoch in (float(e) for e in args.epochs.split(",")):
                    for seed in (int(s) for s in args.seeds.split(",")):
                        run = run_ppack(args, name, optimizer, epoch, seed, sweep)
                        entry["ppack"].append(run)
                        print(name, {k: v for k, v in run.items() if k not in ("rows_drawn", "warned")}, flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
