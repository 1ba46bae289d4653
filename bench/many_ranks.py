"""The whole path on many ranks: checkpoints, SIGTERM and resume, save, load, predict, ten classes.

    .venv/bin/python -m bench.many_ranks                       # p = 1, 4, 16, 32
    .venv/bin/python -m bench.many_ranks --ranks 1,4 --rows-per-rank 50

Real `python -m ppack` jobs under mpiexec (oversubscribed where p exceeds the cores: the
counts and the agreement are what this measures; the times are only reported). Ten
well-separated classes in 10 dense features, ``rows_per_rank * max(ranks)`` training rows:
1. an endless run on the second-largest p, with a checkpoint every 4 packs, stopped by
   SIGTERM once the first checkpoint exists; T = where it stopped + 20 packs;
2. that checkpoint resumed on the largest p to T (another rank count), the model saved;
3. a fresh run to T on each p, checkpoints every 4 packs, the model saved;
4. a run on the smallest p > 1 on its first ``rows_per_rank * p`` rows: the same rows per
   rank as the largest p's run, for the memory figure;
5. `predict` on the largest p with the resumed model (load and predict on p ranks).
Every run groups its ranks into min(p, 4) node groups (PPACK_RANKS_PER_NODE). The figures
per p: sequential file opens per checkpoint and per save (as counted by ppack), node
groups, seconds per checkpoint and per save, the largest rank's peak memory, and the
largest difference of the float64 decision values (on 500 test rows) from the 1-rank run's.
Saved to bench/results/many_ranks.json (or --out).
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

import h5py
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = ["--gamma", "0.5", "--C", "10", "--pack", "50", "--seed", "3", "--dtype", "float64", "--quiet"]
CHECKPOINT_EVERY = "4p"
ENDLESS = str(10 ** 12)


def mpiexec():
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else "mpiexec"


def job_env(ranks):
    """A clean environment for a job of ``ranks`` ranks: one thread each, min(ranks, 4) node groups."""
    prefixes = ("PMI", "PMIX", "MPI_", "MPIR", "HYDRA", "OMPI", "I_MPI")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = env["NUMBA_NUM_THREADS"] = "1"
    env["PPACK_RANKS_PER_NODE"] = str(-(-ranks // min(ranks, 4)))
    return env


def ppack(ranks, args, timeout=900):
    """Run ``python -m ppack ARGS`` on ``ranks`` ranks; raises with its output if it fails."""
    cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "ppack", *map(str, args)]
    start = time.monotonic()
    done = subprocess.run(cmd, env=job_env(ranks), capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return time.monotonic() - start


def make_data(folder, rows, seed=0):
    """Ten classes in 10 dense features (class c at 2.5 e_c, noise 0.6), written as ppack HDF5;
    the first ``n`` rows of it for each n in ``rows``; and 500 test rows. Returns the paths."""
    from ppack.data.hdf5 import write_dataset

    rng = np.random.default_rng(seed)
    n = max(rows)
    labels = rng.integers(10, size=n + 500)
    X = rng.normal(scale=0.6, size=(n + 500, 10))
    X[np.arange(n + 500), labels] += 2.5
    paths = {}
    for k in sorted(set(rows)):
        paths[k] = folder / f"train{k}.h5"
        write_dataset(paths[k], X[:k], labels[:k].astype(float), storage="dense")
    write_dataset(folder / "test.h5", X[n:], labels[n:].astype(float), storage="dense")
    return paths, folder / "test.h5"


def stop_by_sigterm(ranks, data, checkpoint, timeout=600):
    """An endless run on ``ranks`` ranks, SIGTERM to its last rank once the first checkpoint
    exists; returns the iteration it stopped at."""
    args = ["train", "--data", data, "--iterations", ENDLESS, "--checkpoint", checkpoint,
            "--checkpoint-every", CHECKPOINT_EVERY, *SETTINGS[:-1]]  # not --quiet: it says where it stopped
    cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "ppack", *map(str, args)]
    job = subprocess.Popen(cmd, env=job_env(ranks), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + timeout
        while not checkpoint.exists() and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if not checkpoint.exists() or job.poll() is not None:
            raise RuntimeError(f"no checkpoint from the endless run within {timeout} s: {job.communicate()}")
        found = subprocess.run(["pgrep", "-f", "--", f"-m ppack train .*{checkpoint}"], capture_output=True,
                               text=True).stdout
        pids = [int(pid) for pid in found.split() if int(pid) != job.pid]
        os.kill(pids[-1], signal.SIGTERM)
        out, err = job.communicate(timeout=timeout)
    finally:
        if job.poll() is None:
            job.kill()
    if job.returncode != 0 or "stopped at iteration" not in out:
        raise RuntimeError(f"the endless run did not stop cleanly ({job.returncode}):\n{out}\n{err}")
    with h5py.File(checkpoint, "r") as f:
        return int(f.attrs["iteration"])


def train(ranks, data, T, folder, name, resume_from=None):
    """One training job to T with periodic checkpoints and a saved model; its figures."""
    checkpoint = resume_from or folder / f"{name}.ck.h5"
    args = ["train", "--data", data, "--iterations", T, "--checkpoint", checkpoint, "--checkpoint-every",
            CHECKPOINT_EVERY, "--model", folder / f"{name}.h5", "--metrics-json", folder / f"{name}.json",
            *SETTINGS, *(["--resume"] if resume_from else [])]
    wall = ppack(ranks, args)
    metrics = json.loads((folder / f"{name}.json").read_text())
    writes, seconds = metrics["file_writes"], metrics["seconds"]
    return {"ranks": ranks, "rows": metrics["n_samples"], "model": str(folder / f"{name}.h5"), "wall_seconds": wall,
            "nodes": writes["save"]["nodes"], "method": writes["save"]["method"],
            "opens_per_checkpoint": writes["checkpoint"]["sequential_opens"],
            "checkpoints": writes["checkpoint"]["written"], "opens_per_save": writes["save"]["sequential_opens"],
            "seconds_per_checkpoint": seconds["checkpoint"] / writes["checkpoint"]["written"],
            "seconds_save": seconds["save"], "seconds_train": seconds["total"],
            "peak_rss_bytes": max(metrics["memory"]["peak_rss_bytes"]["after_save"]),
            "support_vectors": metrics["support_vectors"], "features": metrics["n_features"],
            "pack": metrics["pack"], "packs": metrics["packs"], "bytes_per_rank": metrics["bytes"]}


def decisions_of(model, test):
    """The float64 decision values (500, 10) of a model file, on this process alone."""
    from mpi4py import MPI

    from ppack import PackSVC
    from ppack.data.hdf5 import read_rows

    with h5py.File(test, "r") as f:
        n = int(f.attrs["n_samples"])
    X = read_rows(test, 0, n, dtype=np.float64)[0]
    return PackSVC.load(model, comm=MPI.COMM_SELF).decision_function(X)


def run(folder, ranks=(1, 4, 16, 32), rows_per_rank=100):
    """Every step above in ``folder``; returns the figures (a dict)."""
    ranks = sorted(ranks)
    largest, stopper = ranks[-1], ranks[-2] if len(ranks) > 1 else ranks[-1]
    small = min([p for p in ranks if p > 1] or [largest])
    data, test = make_data(folder, [rows_per_rank * largest, rows_per_rank * small])
    full = data[rows_per_rank * largest]
    stopped_at = stop_by_sigterm(stopper, full, folder / "stopped.ck.h5")
    T = stopped_at + 20 * 50
    runs = [train(p, full, T, folder, f"p{p}") for p in ranks]
    resumed = train(largest, full, T, folder, "resumed", resume_from=folder / "stopped.ck.h5")
    same_rows = train(small, data[rows_per_rank * small], T, folder, f"p{small}_same_rows_per_rank")
    ppack(largest, ["predict", "--model", resumed["model"], "--data", test, "--output", folder / "predicted.npy",
                    "--quiet"])
    reference = decisions_of(runs[0]["model"], test)
    for run_ in runs + [resumed]:
        run_["max_decision_difference"] = float(np.max(np.abs(decisions_of(run_["model"], test) - reference)))
    predicted = np.load(folder / "predicted.npy")[:, :10]
    for run_ in runs + [resumed, same_rows]:
        del run_["model"]  # a temporary path
    largest_run = runs[-1]
    return {"T": T, "stopped_at": stopped_at, "stopped_on": stopper, "resumed_on": largest,
            "reference_ranks": ranks[0], "rows_per_rank": rows_per_rank, "runs": runs, "resumed": resumed,
            "predict_max_decision_difference": float(np.max(np.abs(predicted - reference))),
            "same_rows_per_rank": {"small": same_rows, "large": largest_run,
                                   "peak_ratio": largest_run["peak_rss_bytes"] / same_rows["peak_rss_bytes"]}}


def show(result):
    print(f"T = {result['T']} (the endless run on {result['stopped_on']} ranks stopped at {result['stopped_at']}, "
          f"resumed on {result['resumed_on']}); {result['rows_per_rank']} rows per rank at p = "
          f"{result['runs'][-1]['ranks']}")
    print("| p | node groups | opens per checkpoint | opens per save | s per checkpoint | s save | peak per rank | "
          "max decision difference from p = 1 |")
    print("|---|---|---|---|---|---|---|---|")
    for r in result["runs"] + [dict(result["resumed"], ranks=f"{result['resumed']['ranks']} (resumed)")]:
        print(f"| {r['ranks']} | {r['nodes']} | {r['opens_per_checkpoint']} | {r['opens_per_save']} | "
              f"{r['seconds_per_checkpoint']:.3f} | {r['seconds_save']:.3f} | {r['peak_rss_bytes'] / 2**20:.0f} MiB | "
              f"{r['max_decision_difference']:.2e} |")
    same = result["same_rows_per_rank"]
    print(f"predict on {result['resumed_on']} ranks, resumed model: max difference "
          f"{result['predict_max_decision_difference']:.2e}")
    print(f"same rows per rank: peak {same['large']['peak_rss_bytes'] / 2**20:.0f} MiB at p = {same['large']['ranks']} "
          f"against {same['small']['peak_rss_bytes'] / 2**20:.0f} MiB at p = {same['small']['ranks']} "
          f"(ratio {same['peak_ratio']:.3f})")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", default="1,4,16,32", help="rank counts, comma-separated (default 1,4,16,32)")
    parser.add_argument("--rows-per-rank", type=int, default=100)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "many_ranks.json"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        result = run(Path(folder), [int(p) for p in args.ranks.split(",")], args.rows_per_rank)
    show(result)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"saved {out}")
    return result


if __name__ == "__main__":
    main()
