"""What a small call costs right after a pack's kernel sums have emptied the caches.

    .venv/bin/python bench/cold_calls.py                 # 1,200 calls of each, 64 MB streamed before each
    .venv/bin/python bench/cold_calls.py --calls 300 --stream-mb 0   # the same calls, warm

A pack's serial stretch is many small steps (a draw of the next rows, a buffer zeroed, a
compiled call, a few numpy calls), each run after the sums have streamed the stored rows
through the caches. This times such steps, one per call, with ``--stream-mb`` of memory read
just before each (as the sums read the stored rows), and reports the median, the mean and
the share of calls over five times the median: the serial part is a mean, so rare slow calls
count. It also times a busy loop of clock reads for ``--gap-seconds`` and counts the gaps over
50 and 200 us (time the process was not running: the system's, or a virtual machine's host's).
Run it on a machine before reading its serial part: a machine whose cold calls cost a few
microseconds more per step has a floor under the serial part that no reordering removes.
Results go to bench/results/cold_calls.json (or ``--out``).
"""
import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from ppack.data.sampler import make_sampler
from ppack.jit import njit

from call_arguments import call_times  # bench/, beside this script

ROOT = Path(__file__).resolve().parents[1]


@njit(cache=True)
def _touch(a, b, c, d, e, f, g, h):
    """A compiled call of eight array arguments that does almost nothing."""
    return a[0] + b[0] + c[0] + d[0] + e[0] + f[0] + g[0] + h[0]


def steps():
    """(name, a function of no arguments) for each kind of step timed."""
    block = np.arange(8192, dtype=np.int64)
    sampler = make_sampler("epochs", 240_000, 0)
    buffer = np.zeros(6_300)  # a collective 2 buffer of 10 columns and 100 rows, float64
    arrays = [np.ones(16) for _ in range(8)]
    position = [0]

    def slice_copy():
        position[0] = (position[0] + 100) % 8000
        block[position[0]:position[0] + 100].copy()

    def empty_pair():  # a delivered block's rows and their columns, 100 rows of 784 float32
        np.empty((100, 784), dtype=np.float32), np.empty((784, 100), dtype=np.float32)

    return [("slice and copy of 100 int64", slice_copy),
            ("sampler.take(100)", lambda: sampler.take(100)),
            ("zero a 50 kB buffer", lambda: buffer.fill(0.0)),
            ("two 313 kB np.empty", empty_pair),
            ("numba call, 8 arrays", lambda: _touch(*arrays))]


def gaps(seconds):
    """Counts of clock-read gaps over 50 and 200 us in a busy loop of ``seconds``, and the time lost in them."""
    over50 = over200 = 0
    lost = 0.0
    start = last = time.perf_counter()
    while last - start < seconds:
        now = time.perf_counter()
        gap = now - last
        if gap > 50e-6:
            over50 += 1
            lost += gap
            over200 += gap > 200e-6
        last = now
    return {"seconds": seconds, "over_50us": over50, "over_200us": over200, "lost_seconds": lost}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1200)
    parser.add_argument("--stream-mb", type=float, default=64.0, help="memory read before each call (0: none)")
    parser.add_argument("--gap-seconds", type=float, default=5.0)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "cold_calls.json"))
    args = parser.parse_args()
    stream = np.ones(int(args.stream_mb * 2 ** 20) // 8) if args.stream_mb > 0 else None
    rows = []
    for name, step in steps():
        step()  # compiled or warmed once
        us = call_times(step, None if stream is None else stream.sum, args.calls)
        median = float(np.median(us))
        slow = us > 5 * median
        rows.append({"step": name, "median_us": median, "mean_us": float(us.mean()),
                     "p90_us": float(np.percentile(us, 90)), "slow_share": float(slow.mean()),
                     "slow_mean_us": float(us[slow].mean()) if slow.any() else 0.0})
        print(f"{name:30s} median {median:7.1f}  mean {us.mean():7.1f}  p90 {rows[-1]['p90_us']:7.1f} us; "
              f"{100 * slow.mean():4.1f}% of calls over 5x the median (their mean {rows[-1]['slow_mean_us']:.0f} us)")
    lost = gaps(args.gap_seconds)
    print(f"busy loop of {lost['seconds']:.0f} s: {lost['over_50us']} gaps over 50 us, {lost['over_200us']} over "
          f"200 us, {1e3 * lost['lost_seconds']:.1f} ms lost in them")
    result = {"processor": platform.processor(), "cores": os.cpu_count(), "calls": args.calls,
              "stream_mb": args.stream_mb, "steps": rows, "gaps": lost,
              "median_of_medians_us": statistics.median(row["median_us"] for row in rows)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
