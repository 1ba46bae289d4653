"""The headline: ten digits on mnist8m-style rows as T grows, and `plan`'s 512-rank extrapolation.

    .venv/bin/python bench/headline.py --data m1m.h5 --test mnist.t.h5      # files from `ppack data`
    .venv/bin/python bench/headline.py --rows 1000000                       # generates them first

For T = m/8, m/4, m/2 and m, `train` (all ten digits one-vs-rest in one pass, gamma 0.02,
sigma 1e-6, r = 100, --dtype float32, the defaults otherwise) runs on --ranks ranks with the
original MNIST test set; each run's time, accuracy, support vectors and time per pack by
phase are printed, then `plan --rows 8100000 --ranks 512 --from-run` extrapolates the full
mnist8m run at the same T / m from the run's measured rates. Results go to
bench/results/headline.json.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FRACTIONS = (0.125, 0.25, 0.5, 1.0)


def mpiexec():
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else "mpiexec"


def ppack(*args, ranks=None):
    cmd = [sys.executable, "-m", "ppack", *map(str, args)]
    if ranks is not None:
        cmd = [mpiexec(), "-n", str(ranks), *cmd]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout


def run_curve(data, test, ranks, fractions=FRACTIONS):
    """Train at each T / m of ``fractions`` on ``ranks`` ranks and extrapolate each run with
    `plan`: a list of dicts (time, accuracy, support vectors, us per pack by phase, plan's text)."""
    results = []
    with tempfile.TemporaryDirectory() as work:
        for fraction in fractions:
            metrics = os.path.join(work, f"metrics-{fraction}.json")
            ppack("train", "--data", data, "--test", test, "--gamma", 0.02, "--sigma", 1e-6, "--epochs", fraction,
                  "--dtype", "float32", "--metrics-json", metrics, "--quiet", ranks=ranks)
            m = json.loads(Path(metrics).read_text())
            plan = ppack("plan", "--data", data, "--rows", 8_100_000, "--ranks", 512, "--from-run", metrics,
                         "--gamma", 0.02, "--sigma", 1e-6, "--epochs", fraction, "--dtype", "float32")
            s, packs = m["seconds"], m["packs"]
            per_pack = {k: 1e6 * s[k] / packs for k in ("total", "partial_sums", "pair_kernels", "communication",
                                                         "delivery", "sequential_updates", "kernel_sums", "serial")}
            row = {"T_over_m": fraction, "iterations": m["iterations"], "seconds": s["total"],
                   "startup_seconds": s.get("startup"), "test_accuracy": m["test_accuracy"],
                   "support_vectors": m["support_vectors"], "us_per_pack": per_pack, "bytes": m["bytes"],
                   "plan_512": plan, "plan_estimate": plan_estimate(plan)}
            results.append(row)
            print(f"T = m x {fraction:g}: {s['total']:.1f} s, test accuracy {100 * m['test_accuracy']:.2f}%, "
                  f"{m['support_vectors']:,} support vectors; per pack (us): "
                  + ", ".join(f"{k} {v:.0f}" for k, v in per_pack.items()), flush=True)
            print(plan, flush=True)
    return results


def plan_estimate(plan):
    """The estimate line of `plan`'s output ("estimate 1.9 min for 81000 packs = ..."), stripped."""
    return next((line.strip() for line in plan.splitlines() if line.strip().startswith("estimate")), "")


def make_data(rows, source, work, ranks):
    """(training file, test file) written to ``work``: ``rows`` mnist8m-style rows and the MNIST test set."""
    data, test = os.path.join(work, "mnist8m.h5"), os.path.join(work, "mnist.t.h5")
    ppack("data", "mnist8m", data, "--rows", rows, "--source", source, "--quiet", ranks=ranks)
    ppack("data", "mnist", os.path.join(work, "mnist.h5"), test, "--source", source, "--quiet")
    return data, test


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", help="mnist8m-style training file (default: generate --rows rows)")
    p.add_argument("--test", help="the original MNIST test set as a ppack file (default: write it)")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--fractions", default=",".join(map(str, FRACTIONS)), help="T / m values")
    p.add_argument("--source", default=str(ROOT.parent / "shared" / "data" / "mnist"))
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as work:
        data, test = args.data, args.test
        if data is None or test is None:
            made = make_data(args.rows, args.source, work, args.ranks)
            data, test = data or made[0], test or made[1]
        results = run_curve(data, test, args.ranks, [float(f) for f in args.fractions.split(",")])
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "headline.json").write_text(json.dumps({"ranks": args.ranks, "runs": results}, indent=1))


if __name__ == "__main__":
    main()
