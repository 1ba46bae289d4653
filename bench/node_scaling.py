"""Strong scaling on one node: p = 1, 2, 4, ... up to its cores, one thread per rank, on two
workloads, with each schedule (pipelined or not), beside what `plan` predicts from the p = 1 run.

Run from the repository root (the data from ../shared/data by default):

    .venv/bin/python bench/node_scaling.py                       # this machine's cores
    python3 bench/node_scaling.py --launcher "mpirun --bind-to core" --work-dir /tmp/ns

Workloads: ten digits on --rows mnist8m-style rows (`data mnist8m`, generated here on all the
cores; tested on the MNIST test set), gamma 0.02, sigma 1e-6, T = m/2, float32; and ijcnn1
(tr, 35,000 rows; tested on t), gamma 1, C 1, T = 2m. Each runs with `--placement count` and,
with --placements, `cost`; each p > 1 with every schedule of `--pipeline` (default `on,off`:
train's `--pipeline on` and `off`), p = 1 once, unpipelined (train never pipelines one rank by
default), and that run is both schedules' p = 1. `--delay SPEC` goes to every train run
(`packsvm/delay.py`: e.g. `mean=10%,seed=1`, a node's jitter made on purpose). Every run's
metrics JSON is kept; each result entry records its schedule ("pipeline"). From the digits'
unpipelined count runs (the waiting there is the blocking collectives'; a pipelined run's is
its time in Wait) it writes a node profile (`plan --node-profile`): at each p the partial sums' parallel
efficiency (p = 1's seconds over p times the median rank's), the jitter that explains the
waiting seen (median waiting / (median local work x E[max of p standard normals])) and the
collectives' own seconds per pack as a + b x bytes (a line through both workloads'
buffers), and, where the digits also ran pipelined by count, the pipelined local work and
median waiting over the unpipelined ones (which `plan --pipeline on` then takes). `plan
--from-run` of each workload's p = 1 run then predicts every p and schedule
(`plan --pipeline` of that schedule), with and without the profile: for the digits the profile
comes from the same runs (a consistency check), for ijcnn1 it is a prediction. Results:
bench/results/node_scaling.json (runs[workload][placement][schedule][p]), node_profile.json and
node_scaling.png (speed-up with the ideal line, a line per placement and schedule, and plan's
prediction per schedule); `--figure-only` redraws the figure from the JSON (an older JSON
without schedules reads as unpipelined).
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from ppack.packsvm.plan import expected_max_normal  # noqa: E402

RESULTS = ROOT / "bench" / "results"
SCHEDULES = ("on", "off")  # train's --pipeline values this sweep compares
SCHEDULE_NAMES = {"on": "pipelined", "off": "unpipelined"}
WORKLOADS = {
    "digits": {"train": ["--gamma", "0.02", "--sigma", "1e-6", "--epochs", "0.5", "--dtype", "float32"]},
    "ijcnn1": {"train": ["--gamma", "1", "--C", "1", "--epochs", "2"]},
}


def launcher(args):
    if args.launcher:
        return shlex.split(args.launcher)
    beside = Path(sys.executable).parent / "mpiexec"
    return [str(beside) if beside.exists() else "mpiexec"]


def ppack(args, ranks, argv, timeout=900):
    """Run `python -m ppack ARGV` on ``ranks`` ranks; its stdout. Fails loudly with the output."""
    cmd = launcher(args) + ["-n", str(ranks), sys.executable, "-m", "ppack", *map(str, argv)]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if done.returncode:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def prepare(args, work, cores):
    """The data files of both workloads: {name: (train, test)}."""
    work.mkdir(parents=True, exist_ok=True)
    data = Path(args.data_dir)
    files = {"digits": (work / f"m{args.rows}.h5", work / "mnist.t.h5"), "ijcnn1": (work / "ij.h5", work / "ij.t.h5")}
    if not files["digits"][0].exists():
        ppack(args, cores, ["data", "mnist8m", files["digits"][0], "--rows", args.rows, "--source", data / "mnist",
                            "--compression", "none"])
    if not files["digits"][1].exists():
        ppack(args, 1, ["data", "mnist", work / "mnist.h5", files["digits"][1], "--source", data / "mnist"])
    if not files["ijcnn1"][0].exists():
        ppack(args, 1, ["convert", data / "ijcnn1" / "ijcnn1.tr.bz2", files["ijcnn1"][0]])
    if not files["ijcnn1"][1].exists():
        ppack(args, 1, ["convert", data / "ijcnn1" / "ijcnn1.t.bz2", files["ijcnn1"][1], "--n-features", "22"])
    return files


def rank_counts(cores):
    counts = [1]
    while counts[-1] * 2 <= cores:
        counts.append(counts[-1] * 2)
    return counts + ([cores] if counts[-1] != cores else [])


def per_pack(metrics):
    """Per-pack microseconds of a run: the slowest rank's phases and the median rank's waiting."""
    s, n, over = metrics["seconds"], metrics["packs"], metrics["over_ranks"]["seconds"]
    us = {k: 1e6 * s[k] / n for k in ("total", "partial_sums", "pair_kernels", "communication", "serial")}
    us.update({k: 1e6 * s.get(k, 0.0) / n for k in ("hidden", "correction")})  # pipelined runs' (0 before)
    us.update({f"{k}_median": 1e6 * over[k]["median"] / n
               for k in ("partial_sums", "kernel_sums", "waiting", "collective_own", "serial", "communication")})
    us["waiting_max"] = 1e6 * over["waiting"]["max"] / n
    return us


def node_profile(runs, machine, other=None, pipelined=None):
    """The profile `plan --node-profile` reads, from one workload's unpipelined count-placement
    runs {p: metrics}; with ``pipelined`` (the same workload's pipelined runs {p: metrics}),
    at each p both ran, the pipelined local work (sums, pairs and correction, median rank)
    over the unpipelined and the pipelined median waiting over the unpipelined.
    The collectives' own seconds per pack are a line a + b x (bytes per pack) through this
    workload's and ``other``'s runs (another workload's {p: metrics}, other buffer sizes), or
    this workload's seconds alone (b = 0) without it."""
    one = runs[1]["over_ranks"]["seconds"]["partial_sums"]["median"]
    ranks = {}
    for p, m in sorted(runs.items()):
        us = per_pack(m)
        spread = expected_max_normal(p)
        points = [(sum(r["bytes"].values()) / r["packs"], 1e-6 * per_pack(r)["collective_own_median"])
                  for r in (m, (other or {}).get(p)) if r is not None]
        (b0, s0), (b1, s1) = points[0], points[-1]
        slope = (s1 - s0) / (b1 - b0) if b1 != b0 and s1 >= s0 else 0.0
        ranks[str(p)] = {
            "efficiency": one / (p * m["over_ranks"]["seconds"]["partial_sums"]["median"]),
            "jitter": us["waiting_median"] / (us["kernel_sums_median"] * spread) if spread > 0 else 0.0,
            "collective_seconds": s0 - slope * b0 if slope else float(np.mean([s for _, s in points])),
            "collective_seconds_per_byte": slope}
        on = (pipelined or {}).get(p)
        if on is not None and p > 1:
            local = lambda m: sum(m["over_ranks"]["seconds"][k]["median"] for k in ("kernel_sums", "correction")
                                  if k in m["over_ranks"]["seconds"])
            waited = m["over_ranks"]["seconds"]["waiting"]["median"]
            ranks[str(p)]["pipelined"] = {
                "local_factor": local(on) / local(m),
                "waiting_ratio": on["over_ranks"]["seconds"]["waiting"]["median"] / waited if waited > 0 else 1.0}
    return {"machine": machine, "ranks": ranks}


def predicted(args, data, metrics_path, p, profile_path, params, schedule="off"):
    """plan's estimate (seconds) of the run on p ranks with ``schedule`` (--pipeline on or off)
    from a p = 1 run's metrics."""
    argv = ["plan", "--data", data, "--ranks", p, "--from-run", metrics_path, *params, "--pipeline", schedule]
    if profile_path is not None:
        argv += ["--node-profile", profile_path]
    out = ppack(args, 1, argv)
    estimate = [line for line in out.splitlines() if line.strip().startswith("estimate ")][0]
    value, unit = estimate.split()[1:3]
    return float(value) * {"ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}[unit]


def machine_name():
    try:
        model = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")][0]
    except (OSError, IndexError):
        model = "unknown CPU"
    return f"{model}, {len(os.sched_getaffinity(0))} cores"


def sweep(args):
    cores = args.cores or len(os.sched_getaffinity(0))
    work = Path(args.work_dir)
    files = prepare(args, work, cores)
    machine = machine_name()
    result = {"machine": machine, "cores": cores, "launcher": " ".join(launcher(args)), "schedules": args.pipeline,
              "delay": args.delay, "runs": {}}
    delay = [] if args.delay is None else ["--delay", args.delay]
    for name in args.workloads:
        train, test = files[name]
        for placement in args.placements:
            by_schedule = result["runs"].setdefault(name, {}).setdefault(placement, {})
            for p in rank_counts(cores):
                # p = 1 once, unpipelined: both schedules' p = 1
                for schedule in (["off"] if p == 1 else args.pipeline):
                    path = work / f"{name}-{placement}-{schedule}-p{p}.json"
                    start = time.perf_counter()
                    ppack(args, p, ["train", "--data", train, "--test", test, *WORKLOADS[name]["train"],
                                    "--threads", "1", "--placement", placement, "--pipeline", schedule, *delay,
                                    "--metrics-json", path, "--quiet"])
                    m = json.loads(path.read_text())
                    run = {"metrics": str(path), "pipeline": m.get("pipeline", schedule),
                           "seconds": m["seconds"]["total"], "accuracy": m.get("test_accuracy"),
                           "support_vectors": m["support_vectors"], "per_pack_us": per_pack(m),
                           "support_vectors_per_rank": m["over_ranks"]["per_rank"]["support_vectors"],
                           "wall": time.perf_counter() - start}
                    if p == 1:
                        run["note"] = "both schedules' p = 1 (one rank runs unpipelined)"
                    for label in (args.pipeline if p == 1 else [schedule]):
                        by_schedule.setdefault(label, {})[p] = run
                    show(name, placement, "both" if p == 1 else schedule, p, run)
    profile_path = None
    if "digits" in result["runs"] and "off" in args.pipeline:
        measured = {name: {p: json.loads(Path(r["metrics"]).read_text())
                           for p, r in runs["count"]["off"].items()} for name, runs in result["runs"].items()}
        on_runs = result["runs"]["digits"]["count"].get("on", {})
        pipelined = {p: json.loads(Path(r["metrics"]).read_text()) for p, r in on_runs.items() if p > 1}
        profile = node_profile(measured["digits"], machine, measured.get("ijcnn1"), pipelined)
        profile_path = RESULTS / "node_profile.json"
        profile_path.write_text(json.dumps(profile, indent=1))
        result["profile"] = profile
    elif "digits" in result["runs"]:
        print("no node profile: it is measured from unpipelined runs (--pipeline with off)", flush=True)
    for name, by_placement in result["runs"].items():
        train, _ = files[name]
        for schedule, runs in by_placement["count"].items():
            one = runs[1]["metrics"]
            for p, run in runs.items():
                if p == 1 and "plan_seconds" in run:  # the other schedule's already
                    continue
                plan_schedule = "off" if p == 1 else schedule
                key = "" if p == 1 else f"_{schedule}"  # p = 1's entry is shared by both schedules
                run["plan_seconds" + key] = predicted(args, train, one, p, profile_path, WORKLOADS[name]["train"],
                                                      plan_schedule)
                run["plan_seconds_no_profile" + key] = predicted(args, train, one, p, None,
                                                                 WORKLOADS[name]["train"], plan_schedule)
    return result


def planned(run, schedule, profile=True):
    """plan's prediction for ``run`` with ``schedule`` (with the node profile or without)."""
    key = "plan_seconds" if profile else "plan_seconds_no_profile"
    return run.get(f"{key}_{schedule}", run.get(key))


def show(name, placement, schedule, p, run):
    us = run["per_pack_us"]
    print(f"{name:7s} {placement:5s} {schedule:4s} p={p:3d} {run['seconds']:8.2f} s acc {run['accuracy'] or 0:.4f} | "
          f"per pack us: partial {us['partial_sums']:7.0f} pair {us['pair_kernels']:5.0f} comm "
          f"{us['communication']:5.0f} (waiting median {us['waiting_median']:5.0f}, max {us['waiting_max']:5.0f}) "
          f"hidden {us.get('hidden', 0.0):6.0f} serial {us['serial']:4.0f}", flush=True)


def report(result):
    for name, by_placement in result["runs"].items():
        print(f"\n{name}: speed-up over p = 1 (count placement's p = 1, unpipelined), with plan's prediction "
              "for the same schedule")
        for schedule, count_runs in by_placement["count"].items():
            base = count_runs[1]["seconds"]
            for p in sorted(count_runs):
                count = count_runs[p]
                cost = by_placement.get("cost", {}).get(schedule, {}).get(p)
                us = count["per_pack_us"]
                share = 100 * us["communication_median"] / us["total"]  # the waiting is part of it
                line = (f"  {SCHEDULE_NAMES.get(schedule, schedule):11s} p={p:3d} count "
                        f"{base / count['seconds']:5.2f}x" +
                        (f"  cost {base / cost['seconds']:5.2f}x" if cost else "") +
                        f"  plan {base / planned(count, schedule):5.2f}x"
                        f" (no profile {base / planned(count, schedule, False):5.2f}x)"
                        f"  waiting + communication {share:4.1f}% of a pack (median rank)")
                print(line)


def plot(result, path):
    from figures import pyplot

    plt = pyplot()
    if plt is None:
        return
    names = list(result["runs"])
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4.2), squeeze=False)
    colours = {"on": "C0", "off": "C1"}
    for ax, name in zip(axes[0], names):
        by_placement = result["runs"][name]
        schedules = list(by_placement["count"])
        ps = sorted(int(p) for p in by_placement["count"][schedules[0]])
        base = by_placement["count"][schedules[0]][ps[0]]["seconds"]
        ax.plot(ps, ps, "k:", label="ideal")
        for schedule in schedules:
            label, colour = SCHEDULE_NAMES.get(schedule, schedule), colours.get(schedule)
            for placement, style in (("count", "o-"), ("cost", "s-")):
                runs = by_placement.get(placement, {}).get(schedule)
                if runs:
                    ax.plot(ps, [base / runs[p]["seconds"] for p in ps], style, color=colour,
                            label=f"measured, {label}, --placement {placement}")
            runs = by_placement["count"][schedule]
            if all(planned(runs[p], schedule) for p in ps):
                ax.plot(ps, [base / planned(runs[p], schedule) for p in ps], "x--", color=colour,
                        label=f"plan, {label}, node profile")
                ax.plot(ps, [base / planned(runs[p], schedule, False) for p in ps], "+:", color=colour,
                        label=f"plan, {label}, run only")
        ax.set(xlabel="ranks (one core each)", ylabel="speed-up over 1 rank", title=name, xscale="log", yscale="log")
        ax.set_xticks(ps, [str(p) for p in ps])
        ax.legend(fontsize=7)
    fig.suptitle(result["machine"] + ("" if not result.get("delay") else f"; --delay {result['delay']}"), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"figure: {path}")


def schedules(text):
    """--pipeline's comma-separated schedules, each on or off, in the order given."""
    chosen = [s.strip() for s in text.split(",") if s.strip()]
    wrong = [s for s in chosen if s not in SCHEDULES]
    if not chosen or wrong or len(set(chosen)) != len(chosen):
        raise argparse.ArgumentTypeError(f"a comma-separated list of on and off, each once, got {text!r}")
    return chosen


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"),
                    help="folder with mnist/ (the IDX files) and ijcnn1/ (ijcnn1.tr.bz2, ijcnn1.t.bz2)")
    ap.add_argument("--work-dir", default="/tmp/ppack-node-scaling", help="generated data and metrics files")
    ap.add_argument("--rows", type=int, default=240000, help="mnist8m-style rows of the digits workload")
    ap.add_argument("--cores", type=int, default=None, help="largest p (default: the cores this process may use)")
    ap.add_argument("--launcher", default=None,
                    help='MPI launcher and its options, e.g. "mpirun --bind-to core" (default: mpiexec beside python)')
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    ap.add_argument("--placements", nargs="+", default=["count", "cost"], choices=["count", "cost"])
    ap.add_argument("--pipeline", type=schedules, default=list(SCHEDULES), metavar="on,off",
                    help="train's schedules to run each p > 1 with (default on,off; p = 1 runs once, off)")
    ap.add_argument("--delay", default=None, metavar="SPEC",
                    help="train --delay SPEC for every run: drawn delays of the ranks' partial sums, e.g. "
                         "mean=10%%,seed=1 (ppack/packsvm/delay.py)")
    ap.add_argument("--figure-only", default=None, metavar="RESULTS_JSON", help="redraw the figure from a results file")
    ap.add_argument("--results-dir", default=str(RESULTS), help="where the JSON and the figure go")
    return ap.parse_args()


def main():
    global RESULTS
    args = parse_args()
    RESULTS = Path(args.results_dir)
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.figure_only:
        result = json.loads(Path(args.figure_only).read_text())
        for by_placement in result["runs"].values():
            for placement, runs in by_placement.items():
                if all(key.isdigit() for key in runs):  # written before the schedules: unpipelined
                    runs = {"off": runs}
                by_placement[placement] = {schedule: {int(p): r for p, r in by_p.items()}
                                           for schedule, by_p in runs.items()}
    else:
        if "count" not in args.placements:
            raise SystemExit("--placements must include count (the baseline and plan's p = 1 run)")
        result = sweep(args)
        (RESULTS / "node_scaling.json").write_text(json.dumps(result, indent=1))
    report(result)
    plot(result, RESULTS / "node_scaling.png")


if __name__ == "__main__":
    main()
