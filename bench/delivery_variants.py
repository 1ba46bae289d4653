"""A pack's delivery on one rank, as built and as it could be, timed with the caches emptied.

    .venv/bin/python bench/delivery_variants.py --data /tmp/serial-part/digits240k.h5

The delivery (``data.delivery.Delivery``) copies a pack's rows from the shard into collective
1's buffer, sums the buffer over the ranks, then converts the rows to the kernel's float type
with their norms and their columns (the transposed rows the kernel sums and pair kernels
read). This times, for dense rows, 100 rows drawn at random per call:

- ``as built``: ``Delivery.deliver`` on one rank (the copy, a one-rank Allreduce, the conversion);
- ``one rank, no buffer``: the rows gathered from the shard and converted in one compiled
  pass, with their norms and columns: what a one-rank run could skip;
- ``no columns``: the same without the columns: what the columns cost.

Each is timed ``--calls`` times after ``--stream-mb`` of memory was read (as a pack's kernel
sums read the stored rows), then as many times warm, for ``--rounds`` rounds, alternating.
The variants are checked to give the same bits as the delivery first. Results go to
bench/results/delivery_variants.json (or ``--out``).
"""
import argparse
import json
import os
from pathlib import Path

import numpy as np
from mpi4py import MPI

from ppack.data.delivery import Delivery
from ppack.data.shard import load_shard
from ppack.jit import njit
from ppack.kernels.block import RowBlock
from ppack.kernels.norms import dense_row_norm
from ppack.kernels.prefetch import prefetch_row
from ppack.mpi.collectives import Collectives

from call_arguments import call_times  # bench/, beside this script

ROOT = Path(__file__).resolve().parents[1]
R = 100


@njit(cache=True)
def _gather_scaled(X, ids, start, labels, scale, out, norms, columns, out_labels):
    """Rows ``ids`` of the shard X (n, d) as the delivery converts them, straight from the
    shard: out (r, >= d) = float64(X) * scale rounded to out's type, zeros past d; norms (r,)
    their squared L2 norms; columns (>= d, r) out's transpose, or (0, 0): none."""
    for k in range(ids.shape[0]):
        prefetch_row(X[ids[k] - start])
    sums = np.empty(8)
    for k in range(ids.shape[0]):
        row, row_out = X[ids[k] - start], out[k]
        for f in range(X.shape[1]):
            row_out[f] = np.float64(row[f]) * scale
        for f in range(X.shape[1], out.shape[1]):
            row_out[f] = 0.0
        norms[k] = dense_row_norm(row_out, False, sums)
        out_labels[k] = labels[ids[k] - start]
    for f in range(columns.shape[0]):
        for k in range(columns.shape[1]):
            columns[f, k] = out[k, f]


def variants(shard, dtype):
    """(name, a function of the ids returning a RowBlock with known norms) for each variant."""
    delivery = Delivery(shard, shard.y, norms_l1=False, dtype=dtype)
    collectives = Collectives(MPI.COMM_SELF)
    width = shard.n_features
    no_columns = np.empty((0, 0), dtype=dtype)

    def gathered(ids, with_columns):
        y, norms = np.empty(len(ids)), np.empty(len(ids))
        rows = np.empty((len(ids), width), dtype=dtype)
        columns = np.empty((width, len(ids)), dtype=dtype) if with_columns else no_columns
        _gather_scaled(shard.X, ids, shard.start, shard.y, shard.value_scale, rows, norms, columns, y)
        block = RowBlock(width, y, dense=rows, columns=columns if with_columns else None)
        block.known_norms = (False, norms)
        return block

    return [("as built", lambda ids: delivery.deliver(collectives, ids)),
            ("one rank, no buffer", lambda ids: gathered(ids, True)),
            ("no columns", lambda ids: gathered(ids, False))]


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
