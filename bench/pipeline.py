"""Pipelined packs against the unpipelined schedule and against an older checkout, at p = 2.

    .venv/bin/python bench/pipeline.py --compare-with /tmp/ppack-before    # a worktree of the commit before
    .venv/bin/python bench/pipeline.py --runs 3 --rows 240000

Workload: ten digits on --rows mnist8m-style rows (`data mnist8m` from ../shared/data/mnist),
gamma 0.02, sigma 1e-6, T = m/2, float32, one thread per rank, 2 ranks. Rounds alternate
the variants run by run (a shared machine drifts by 15% between minutes), and each
variant's best total of --runs is compared:

- `before`: the older checkout (--compare-with, run through PYTHONPATH), its own schedule;
- `off` and `on`: this checkout with --pipeline off and on;
- `off+delay` and `on+delay`: the same with --delay (default: every rank, uniform, mean
  10% of its own sums that pack, seeded), the node's jitter reproduced here;
- with `--placements count,cost`, each of them by both placements (`/cost` after the name:
  `--placement cost`, each rank's share of the stored rows set by its measured seconds per
  row), `before` included. Pipelining absorbs jitter from pack to pack; a rank that is
  steadily slower (a core shared with other work) still sets the pace, which placement by
  cost answers.

Per run it reads the metrics: total seconds, the seconds blocked in MPI (the collectives and
the waiting for the slowest rank, "in Wait"; an older checkout's `communication`), the
median rank's waiting, the local work hidden behind the collectives, and the serial part
per pack with its steps (delivery, owner flags, the block's norms and columns, replay and
table update with the digest, and the rest: Python and numba dispatch), the correction, and the
"shadow" work (pipelined: the packs ahead's delivery and columns, done while the collectives
are in flight, so not part of the serial part). Then
`plan --from-run` of one p = 1 run predicts the pipelined p = 2 run. Goals (the issue's)
are printed with the figures; everything goes to bench/results/pipeline.json.
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
# the serial part's steps a run measures apart (the rest is Python and numba dispatch)
SERIAL_STEPS = ("flags", "norms", "replay_update")
TRAIN = ["--gamma", "0.02", "--sigma", "1e-6", "--epochs", "0.5", "--dtype", "float32", "--threads", "1",
         "--seed", "0", "--quiet"]


def mpiexec():
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else "mpiexec"


def ppack(argv, ranks, work, checkout=None):
    """Run `python -m ppack ARGV` on ``ranks`` ranks from ``work`` (so that a checkout's own
    package on the current directory does not shadow PYTHONPATH's); its stdout."""
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1",
               PYTHONPATH=str(Path(checkout or ROOT).resolve()))
    cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "ppack", *map(str, argv)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work, timeout=3600)
    if done.returncode:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def prepare(args, work):
    """The digits' training and test files in ``work``."""
    data = Path(args.data_dir)
    train, test = work / f"m{args.rows}.h5", work / "mnist.t.h5"
    if not train.exists():
        ppack(["data", "mnist8m", train, "--rows", args.rows, "--source", data / "mnist", "--compression", "none"], 2,
              work)
    if not test.exists():
        ppack(["data", "mnist", work / "mnist.h5", test, "--source", data / "mnist"], 1, work)
    return train, test


def figures(metrics):
    """One run's figures: seconds, fractions of the total and microseconds per pack."""
    s, packs = metrics["seconds"], metrics["packs"]
    ranks = metrics["over_ranks"]["per_rank"]["seconds"]
    in_mpi = s.get("in_collective1", 0.0) + s.get("in_collective2", 0.0) or s["communication"]
    waiting = sorted(a + b for a, b in zip(ranks["wait_collective1"], ranks["wait_collective2"]))
    median_waiting = waiting[len(waiting) // 2] if len(waiting) % 2 else sum(waiting[len(waiting) // 2 - 1:][:2]) / 2
    serial = s.get("serial", s["total"] - s["partial_sums"] - s["pair_kernels"] - s["communication"])
    per_pack = 1e6 / packs
    return {"total": s["total"], "packs": packs, "test_accuracy": metrics.get("test_accuracy"),
            "in_wait_fraction": in_mpi / s["total"], "median_waiting_fraction": median_waiting / s["total"],
            "median_waiting_seconds": median_waiting, "hidden_seconds": s.get("hidden", 0.0),
            "us_per_pack": {"total": s["total"] * per_pack, "serial": serial * per_pack,
                            "in_wait": in_mpi * per_pack, "partial_sums": s["partial_sums"] * per_pack,
                            "pair_kernels": s["pair_kernels"] * per_pack, "delivery": s["delivery"] * per_pack,
                            "replay_and_update": s["sequential_updates"] * per_pack,
                            "correction": s.get("correction", 0.0) * per_pack,
                            "shadow": s.get("shadow", 0.0) * per_pack,
                            **{step: s.get(step, 0.0) * per_pack for step in SERIAL_STEPS},
                            "python": (serial - s["delivery"] - sum(s.get(step, 0.0) for step in SERIAL_STEPS))
                            * per_pack}}


def breakdown(run):
    """One run's serial part per pack by step, and the shadow work beside it (us), as a line."""
    us = run["us_per_pack"]
    steps = " + ".join(f"{step} {us[step]:.0f}" for step in ("delivery",) + SERIAL_STEPS + ("python",))
    return f"serial {us['serial']:.0f} us/pack = {steps}; shadow {us['shadow']:.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--work-dir", default="/tmp/ppack-pipeline")
    ap.add_argument("--rows", type=int, default=240000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--compare-with", default=None, metavar="CHECKOUT", help="an older checkout to run as 'before'")
    ap.add_argument("--delay", default="mean=10%,seed=1", help="--delay of the delayed runs")
    ap.add_argument("--placements", default="count", help="comma-separated: count, cost (each variant by each)")
    ap.add_argument("--results-dir", default=str(RESULTS))
    args = ap.parse_args()
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    train, test = prepare(args, work)
    base = ["train", "--data", train, "--test", test, *TRAIN]
    schedules = {"off": ["--pipeline", "off"], "on": ["--pipeline", "on"],
                 "off+delay": ["--pipeline", "off", "--delay", args.delay],
                 "on+delay": ["--pipeline", "on", "--delay", args.delay]}
    schedules = ({"before": []} if args.compare_with else {}) | schedules
    variants = {}
    for placement in args.placements.split(","):
        suffix, extra = ("", []) if placement == "count" else (f"/{placement}", ["--placement", placement])
        variants |= {name + suffix: options + extra for name, options in schedules.items()}
    order = list(variants)
    runs = {name: [] for name in order}
    for round_ in range(args.runs):
        for name in order:
            path = work / f"{name.replace('/', '-')}-{round_}.json"
            ppack(base + variants[name] + ["--metrics-json", path], 2, work,
                  args.compare_with if name.startswith("before") else None)
            runs[name].append(figures(json.loads(path.read_text())))
            print(f"round {round_ + 1} {name:9s} {runs[name][-1]['total']:7.2f} s, in Wait "
                  f"{100 * runs[name][-1]['in_wait_fraction']:.2f}%, {breakdown(runs[name][-1])}", flush=True)
    best = {name: min(runs[name], key=lambda f: f["total"]) for name in order}
    single = work / "p1.json"
    ppack(base + ["--metrics-json", single], 1, work)
    predicted = ppack(["plan", "--data", train, "--ranks", "2", "--pipeline", "on", "--from-run", single,
                       *TRAIN[:8]], 1, work)
    goals = {}
    for placement in args.placements.split(","):
        suffix = "" if placement == "count" else f"/{placement}"
        on, before = best["on" + suffix], [v for k, v in best.items() if k.startswith("before")]
        goals[placement] = {
            "in_wait_at_most_1pct": on["in_wait_fraction"] <= 0.01,
            # against the commit before's best by any placement measured
            "on_3pct_faster_than_before": (min(b["total"] for b in before) / on["total"] >= 1.03
                                           if before else None),
            "delayed_median_waiting_quarter": (best["on+delay" + suffix]["median_waiting_seconds"]
                                               <= 0.25 * best["off+delay" + suffix]["median_waiting_seconds"]),
            "delayed_on_within_1_12": best["on+delay" + suffix]["total"] <= 1.12 * on["total"],
        }
    result = {"rows": args.rows, "runs": runs, "best": best, "goals": goals, "plan_p2_pipelined": predicted,
              "p1_total": json.loads(single.read_text())["seconds"]["total"]}
    out = Path(args.results_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "pipeline.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({"best_totals": {k: round(v["total"], 2) for k, v in best.items()}, "goals": goals}, indent=1))
    print(predicted)


if __name__ == "__main__":
    main()
