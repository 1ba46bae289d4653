"""The serial stretch's calls in the real pack loop, timed one by one, against an older checkout.

    .venv/bin/python bench/step_calls.py --data /tmp/serial-part/digits240k.h5 --compare-with ../old-checkout

Runs `train` (p = 1, one thread, the compiled pack step's workload: ten digits, gamma 0.02,
sigma 1e-6, T = m/2, float32, unpipelined) in a fresh process per run, alternating between
the checkouts (PYTHONPATH), with a timer around each call the loop makes into the serial
stretch: the pack's step (`PackStep.__call__` as `pack_step`, and its numba call
`step_numba_call`; in checkouts before it, `update_after_pack`), and where a checkout has them
as calls of their own, the replicas' digest (`replica_digest`), the loss's moving average
(`moving_average`) and the owner flags (`KeySlots.flag_held`), and the rows' delivery
(`Delivery.deliver` as `deliver`, or `deliver_rows`). Prints each call's median and mean microseconds per pack (a run's
first-pack digest and flags aside) and saves them to bench/results/step_calls.json. The
whole-run serial part is `bench/serial_part.py`'s; this one shows what the step costs
against the calls it replaced, which the whole run's 10 to 20% drift from run to run hides.
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ["--gamma", "0.02", "--sigma", "1e-6", "--epochs", "0.5", "--dtype", "float32", "--threads", "1",
         "--seed", "0", "--pipeline", "off", "--quiet"]
CALLS = ("update_after_pack", "replica_digest", "moving_average", "flag_held", "deliver_rows", "pack_step",
         "step_numba_call", "deliver")

# run inside the child: the loop's calls wrapped with timers, then `python -m ppack train ...`
CHILD = """import json, runpy, sys, time
import ppack.packsvm.loop as loop
from ppack.packsvm.key_slots import KeySlots
out, log = sys.argv[1], {}
def timed(name, fn):
    def call(*a, **k):
        t = time.perf_counter()
        result = fn(*a, **k)
        log.setdefault(name, []).append(time.perf_counter() - t)
        return result
    return call
for name in ("update_after_pack", "replica_digest", "moving_average", "deliver_rows"):
    if hasattr(loop, name):
        setattr(loop, name, timed(name, getattr(loop, name)))
KeySlots.flag_held = timed("flag_held", KeySlots.flag_held)
try:  # the step as one object (its numba call, and the Python around it), and the delivery's
    import ppack.packsvm.pack_update as pack_update
    from ppack.data.delivery import Delivery
    pack_update.PackStep.__call__ = timed("pack_step", pack_update.PackStep.__call__)
    pack_update._update_after_pack = timed("step_numba_call", pack_update._update_after_pack)
    Delivery.deliver = timed("deliver", Delivery.deliver)
except (ImportError, AttributeError):
    pass
sys.argv = ["ppack"] + sys.argv[2:]
try:
    runpy.run_module("ppack", run_name="__main__")
except SystemExit as stop:
    if stop.code:
        raise
open(out, "w").write(json.dumps(log))
"""


def run(data, checkout, out):
    """One training run of ``checkout`` (PYTHONPATH); returns {call: seconds per call}."""
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1", PYTHONPATH=str(Path(checkout).resolve()))
    subprocess.run([sys.executable, "-c", CHILD, str(out), "train", "--data", str(data), *TRAIN], check=True, env=env,
                   cwd=out.parent)
    return json.loads(out.read_text())


def summary(log, packs):
    """Median and mean microseconds of each call made about once a pack (a run's first-pack
    digest or flags, made once, aside)."""
    return {name: {"median_us": float(np.median(v) * 1e6), "mean_us": float(np.mean(v) * 1e6), "calls": len(v)}
            for name, v in log.items() if len(v) >= packs // 2}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="the digits' training file (bench/serial_part.py makes it)")
    parser.add_argument("--compare-with", metavar="DIR", help="an older checkout, run alternately with this one")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "step_calls.json"))
    args = parser.parse_args()
    versions = {"now": ROOT} | ({"before": Path(args.compare_with)} if args.compare_with else {})
    work = Path(args.out).parent
    work.mkdir(parents=True, exist_ok=True)
    results = {name: [] for name in versions}
    for round_ in range(args.runs):
        for name in sorted(versions):  # "before" first
            log = run(args.data, versions[name], work / f"step_calls-{name}.tmp.json")
            packs = len(log.get("update_after_pack", log.get("pack_step", [])))
            results[name].append(summary(log, packs))
            step_calls = [c for c in CALLS[:4] + ("pack_step",) if c in results[name][-1]]
            print(f"round {round_ + 1} {name:6s} " + "  ".join(
                f"{c} {results[name][-1][c]['median_us']:.1f}" for c in CALLS if c in results[name][-1]) +
                f"  (medians, us; the step and the calls it replaced: "
                f"{sum(results[name][-1][c]['median_us'] for c in step_calls):.1f})", flush=True)
            (work / f"step_calls-{name}.tmp.json").unlink()
    Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
