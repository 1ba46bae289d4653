"""A pack's delivery on one rank, through collective 1's buffer and straight from the shard,
timed with the caches emptied.

    .venv/bin/python bench/delivery_variants.py --data /tmp/serial-part/digits240k.h5

The delivery (``data.delivery.Delivery``) of a run on several ranks copies a pack's rows from
the shard into collective 1's buffer, sums the buffer over the ranks, then converts the rows
to the kernel's float type with their norms and their columns (the transposed rows the kernel
sums and pair kernels read); one rank takes them straight from its shard instead. This times,
on one rank, for dense rows, 100 rows drawn at random per call:

- ``through the buffer``: ``Delivery.through_buffer`` (the copy and the conversion; a sum over
  one rank makes no MPI call);
- ``from the shard``: ``Delivery.from_shard``, as a one-rank run delivers (one compiled pass);
- ``no columns``: the same without the columns: what the columns cost.

Each is timed ``--calls`` times after ``--stream-mb`` of memory was read (as a pack's kernel
sums read the stored rows), then as many times warm, for ``--rounds`` rounds, alternating.
The variants are checked to give the same bits first. Results go to
bench/results/delivery_variants.json (or ``--out``).
"""
import argparse
import json
import os
from pathlib import Path

import numpy as np
from mpi4py import MPI

from ppack.data.delivery import Delivery, _gather_rows
from ppack.data.shard import load_shard
from ppack.kernels.block import RowBlock
from ppack.mpi.collectives import Collectives

from call_arguments import call_times  # bench/, beside this script

ROOT = Path(__file__).resolve().parents[1]
R = 100


def variants(shard, dtype):
    """(name, a function of the ids returning a RowBlock with known norms) for each variant."""
    delivery = Delivery(shard, shard.y, norms_l1=False, dtype=dtype)
    collectives = Collectives(MPI.COMM_SELF)
    width = shard.n_features
    no_weights, no_columns = np.empty(0), np.empty((0, 0), dtype=dtype)

    def without_columns(ids):  # from_shard's kernel with no room for the columns
        y, norms, rows = np.empty(len(ids)), np.empty(len(ids)), np.empty((len(ids), width), dtype=dtype)
        _gather_rows(shard.X, ids, shard.start, shard.y, no_weights, shard.value_scale, rows, False, norms,
                     no_columns, y, no_weights)
        block = RowBlock(width, y, dense=rows)
        block.known_norms = (False, norms)
        return block

    return [("through the buffer", lambda ids: delivery.through_buffer(collectives, ids)),
            ("from the shard", delivery.from_shard),
            ("no columns", without_columns)]


def check_same(built, other, name):
    """The variant's rows, norms, labels (and columns) equal the delivery's, bit for bit."""
    same = (np.array_equal(built.dense.view(np.uint8), other.dense.view(np.uint8))
            and np.array_equal(built.known_norms[1].view(np.uint64), other.known_norms[1].view(np.uint64))
            and np.array_equal(built.y, other.y))
    if other._columns is not None:
        same = same and np.array_equal(built.columns().view(np.uint8), other.columns().view(np.uint8))
    if not same:
        raise SystemExit(f"delivery_variants: {name!r} does not give the delivery's bits")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="an HDF5 file of dense rows (ppack data's output)")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--stream-mb", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "delivery_variants.json"))
    args = parser.parse_args()
    shard = load_shard(MPI.COMM_SELF, args.data, dtype=np.dtype(args.dtype))
    if shard.sparse:
        raise SystemExit(f"delivery_variants: {args.data} holds sparse rows; this times dense ones")
    rng = np.random.default_rng(0)
    draws = [np.sort(rng.choice(shard.n_samples, R, replace=False)) for _ in range(64)]
    stream = np.ones(max(1, args.stream_mb) << 17)  # float64: 8 bytes each
    found = variants(shard, np.dtype(args.dtype))
    built = found[0][1](draws[0])
    for name, deliver in found[1:]:
        check_same(built, deliver(draws[0]), name)
    times = {name: {"cold": [], "warm": []} for name, _ in found}
    for _ in range(args.rounds):
        for name, deliver in found:
            turn = iter(range(1 << 62))
            call = lambda: deliver(draws[next(turn) % len(draws)])  # noqa: E731
            times[name]["cold"].append(call_times(call, stream.sum if args.stream_mb else None, args.calls))
            times[name]["warm"].append(call_times(call, None, args.calls))
    summary = {}
    for name, kinds in times.items():
        summary[name] = {}
        for kind, rounds in kinds.items():
            medians = [float(np.median(t)) for t in rounds]
            means = [float(t.mean()) for t in rounds]
            summary[name][kind] = {"median_us": medians, "mean_us": means}
            print(f"{name:20s} {kind}: median {', '.join(f'{m:.1f}' for m in medians)} us, "
                  f"mean {', '.join(f'{m:.1f}' for m in means)} us")
    out = {"data": Path(args.data).name, "rows": shard.n_samples, "features": shard.n_features,
           "stored": str(shard.X.dtype), "dtype": args.dtype, "r": R, "calls": args.calls,
           "stream_mb": args.stream_mb, "rounds": args.rounds, "cores": os.cpu_count(), "variants": summary}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
