"""Scale benchmark: a generated MNIST-sized dense problem through convert, train, save, load.

Run from the repository root:

    .venv/bin/python bench/scale.py                          # 1,000,000 rows x 784, 4 ranks
    .venv/bin/python bench/scale.py --rows 20000 --ranks 2   # a quick run (a minute or two)

It writes a two-class problem of pixel-like features (integers 0..255 written as k/255,
zeros left out, as in the scaled MNIST LIBSVM files; the class boundary is nonlinear) as
LIBSVM text, converts it with `python -m ppack convert` (uint8 storage by default), trains
the rbf kernel SVM with T = rows / 8 on --ranks MPI ranks with a model file (no --test, so
that the after-save peak is the save's alone), and predicts the test set from the model file
(load time, accuracy; predict's seconds include any numba compiling it does). It reports the
peak resident memory of every phase (per rank, from the metrics files, and of the whole
process tree from wait4), against the shard's and the support-vector table's bytes, the
seconds of each phase, and extrapolates the memory per rank to 8.1M rows on 512 ranks.
Results go to bench/results/ as JSON and PNG; the generated files go to --work-dir, where
the .h5 files and the model stay; the text files are deleted unless --keep.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from statistics import NormalDist

import numpy as np

from figures import pyplot

ROOT = Path(__file__).resolve().parents[1]

LATENT = 6  # dimensions of the latent variable that the pixels and the label depend on
PIXEL_NOISE = 0.3  # independent noise of each pixel, relative to its latent signal
BRIGHTNESS = 1.5  # latent units from the first gray level to a saturated (255) pixel
LABEL_NOISE = 0.05  # fraction of labels flipped
BLOCK_ROWS = 4096  # rows generated and written at a time
MB = 1e6


# ---------------------------------------------------------------------------- generation

class Problem:
    """The generating model: pixels = clip(255 * (A z + noise - t) / BRIGHTNESS, 0, 255) of a
    latent z ~ N(0, I), and a label y = sign(f(z)) with f nonlinear (a checkerboard in two
    latent directions plus a quadratic term in a third), some labels flipped.

    Each pixel is nonzero with probability ``density``; the pixel map is smooth in z, so an
    rbf kernel on the pixels sees the latent distances, while the label is no linear
    function of the pixels.
    """

    def __init__(self, n_features, density, seed):
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((LATENT, n_features))
        self.A = (a / np.linalg.norm(a, axis=0)).astype(np.float32)  # each pixel's signal ~ N(0, 1)
        spread = math.sqrt(1 + PIXEL_NOISE ** 2)
        self.threshold = np.float32(NormalDist().inv_cdf(1 - density) * spread)
        self.n_features = n_features

    def sample(self, rng, n):
        """(pixels (n, d) uint8, labels (n,) of +1/-1) for n new rows."""
        z = rng.standard_normal((n, LATENT), dtype=np.float32)
        signal = z @ self.A + PIXEL_NOISE * rng.standard_normal((n, self.n_features), dtype=np.float32)
        pixels = np.clip(np.rint((signal - self.threshold) * (255 / BRIGHTNESS)), 0, 255).astype(np.uint8)
        f = np.sin(1.5 * z[:, 0]) * np.sin(1.5 * z[:, 1]) + 0.5 * (z[:, 2] ** 2 - 1)
        y = np.where(f > 0, 1, -1)
        flip = rng.random(n) < LABEL_NOISE
        y[flip] = -y[flip]
        return pixels, y


class TokenTable:
    """Every LIBSVM token the text needs, as bytes in one buffer: ' j:v' for feature j and
    gray level k = 1..255 (v = k/255 with 8 significant digits, so storing k is lossless),
    the two labels and the newline. A block of rows becomes text by one gather."""

    def __init__(self, n_features):
        values = ["%.8g" % (k / 255) for k in range(1, 256)]
        tokens = [f" {j + 1}:{v}" for j in range(n_features) for v in values]
        tokens += ["+1", "-1", "\n"]
        encoded = [t.encode() for t in tokens]
        self.lengths = np.array([len(t) for t in encoded], dtype=np.int32)
        self.starts = (np.cumsum(self.lengths) - self.lengths).astype(np.int32)
        self.buffer = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        self.plus, self.minus, self.newline = len(tokens) - 3, len(tokens) - 2, len(tokens) - 1

    def text(self, pixels, y):
        """The LIBSVM lines of a block of rows, as a uint8 array."""
        n = len(pixels)
        rows, cols = np.nonzero(pixels)  # row by row, columns ascending
        counts = np.bincount(rows, minlength=n)
        ends = np.cumsum(counts)
        line = 2 * np.arange(n)
        # the token sequence: row i is its label, its nonzero pixels, a newline
        seq = np.empty(len(rows) + 2 * n, dtype=np.int32)
        seq[ends - counts + line] = np.where(y > 0, self.plus, self.minus)
        seq[np.arange(len(rows)) + 2 * rows + 1] = cols * 255 + pixels[rows, cols].astype(np.int32) - 1
        seq[ends + line + 1] = self.newline
        # byte t of token s comes from buffer[starts[s] + t]: one gather for the whole block
        lengths = self.lengths[seq]
        out_starts = (np.cumsum(lengths) - lengths).astype(np.int32)
        gather = np.repeat(self.starts[seq] - out_starts, lengths) + np.arange(lengths.sum(), dtype=np.int32)
        return self.buffer[gather]


def generate(path, problem, table, n, seed):
    """Write n rows of the problem as LIBSVM text to path, BLOCK_ROWS at a time; returns
    (seconds, CPU seconds, bytes, fraction of nonzero pixels)."""
    rng = np.random.default_rng(seed)
    start, cpu = time.perf_counter(), time.process_time()
    nonzero = 0
    with open(path, "wb") as f:
        for first in range(0, n, BLOCK_ROWS):
            pixels, y = problem.sample(rng, min(BLOCK_ROWS, n - first))
            nonzero += np.count_nonzero(pixels)
            table.text(pixels, y).tofile(f)
    return (time.perf_counter() - start, time.process_time() - cpu, os.path.getsize(path),
            nonzero / (n * problem.n_features))


def suggested_gamma(problem, seed, n=2000):
    """4 / (d * mean squared feature) on a sample: the rbf width of the pixels' scale (the
    factor 4 gave the best test accuracy at 20,000 rows, T = rows / 8)."""
    pixels, _ = problem.sample(np.random.default_rng(seed), n)
    return 4.0 / (problem.n_features * float(np.mean((pixels / 255.0) ** 2)))


# ---------------------------------------------------------------------------- ppack commands

def mpiexec():
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else "mpiexec"


def run_measured(cmd):
    """Run cmd; (seconds, peak resident bytes of the largest process in its tree) from wait4."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return time.perf_counter() - start, usage.ru_maxrss * 1024  # ru_maxrss is in KiB on Linux


def convert(text, h5, args):
    """`ppack convert` of text to h5: {'seconds', 'peak_rss_bytes', 'h5_bytes'}."""
    cmd = [sys.executable, "-m", "ppack", "convert", str(text), str(h5), "--n-features", str(args.features),
           "--storage", "dense", "--dtype", args.dtype, "--quiet"]
    seconds, peak = run_measured(cmd)
    return {"seconds": seconds, "peak_rss_bytes": peak, "h5_bytes": os.path.getsize(h5)}


def train(work, args, T, gamma):
    """`ppack train` on --ranks ranks with a model file: its metrics JSON plus the wall
    seconds and the largest process peak of the mpiexec call. No --test: train would read
    and evaluate it before saving, inside the after-save peak; predict measures accuracy."""
    metrics = work / "train.json"
    cmd = [mpiexec(), "-n", str(args.ranks), sys.executable, "-m", "ppack", "train",
           "--data", str(work / "train.h5"), "--model", str(work / "model.h5"),
           "--iterations", str(T), "--gamma", repr(gamma), "--sigma", repr(args.sigma), "--pack", str(args.pack),
           "--dtype", "float32", "--seed", str(args.seed), "--metrics-json", str(metrics), "--log-every", "60"]
    seconds, peak = run_measured(cmd)
    return {"wall_seconds": seconds, "largest_process_peak_rss_bytes": peak, **json.loads(metrics.read_text())}


def predict(work, args):
    """`ppack predict` of the test set from the model file, on --ranks ranks."""
    metrics = work / "predict.json"
    cmd = [mpiexec(), "-n", str(args.ranks), sys.executable, "-m", "ppack", "predict",
           "--model", str(work / "model.h5"), "--data", str(work / "test.h5"), "--metrics-json", str(metrics)]
    seconds, peak = run_measured(cmd)
    return {"wall_seconds": seconds, "largest_process_peak_rss_bytes": peak, **json.loads(metrics.read_text())}


def field(metrics, *keys):
    """metrics[k1][k2]...; None where the metrics file has no such entry."""
    for key in keys:
        if not isinstance(metrics, dict) or key not in metrics:
            return None
        metrics = metrics[key]
    return metrics


# ---------------------------------------------------------------------------- summary

def summarize(args, T, gamma, gen, conv, trained, predicted):
    """The benchmark's figures, flat; None where a metrics file lacks them."""
    peaks = {phase: field(trained, "memory", "peak_rss_bytes", phase)
             for phase in ("after_read", "after_training", "after_save")}
    shard, table = field(trained, "memory", "shard_bytes"), field(trained, "memory", "table_bytes")
    return {
        "rows": args.rows, "features": args.features, "ranks": args.ranks, "iterations": T, "pack": args.pack,
        "dtype": args.dtype, "gamma": gamma, "sigma": args.sigma, "C": field(trained, "C"),
        "text_bytes": gen["bytes"], "density": gen["density"], "generate_seconds": gen["seconds"],
        "generate_cpu_seconds": gen["cpu_seconds"],
        "h5_bytes": conv["h5_bytes"], "convert_seconds": conv["seconds"],
        "convert_peak_rss_bytes": conv["peak_rss_bytes"],
        "peak_rss_bytes": peaks, "shard_bytes": shard, "table_bytes": table,
        "train_largest_process_peak_rss_bytes": trained["largest_process_peak_rss_bytes"],
        "train_wall_seconds": trained["wall_seconds"], "train_seconds": field(trained, "seconds", "total"),
        "compile_seconds": field(trained, "seconds", "compile"), "read_seconds": field(trained, "seconds", "read"),
        "save_seconds": field(trained, "seconds", "save"),
        "load_seconds": field(predicted, "seconds", "load_model"),
        "predict_seconds": field(predicted, "seconds", "predict"),
        "predict_wall_seconds": predicted["wall_seconds"],
        "predict_largest_process_peak_rss_bytes": predicted["largest_process_peak_rss_bytes"],
        "test_accuracy": field(predicted, "test_accuracy"),
        "support_vectors": field(trained, "support_vectors"),
    }


def overheads(s, pack):
    """Per-process memory besides the data and the table, max over ranks: (the after-read
    peak minus the shard: Python, MPI, h5py and read buffers; the training peak minus shard,
    table and pack buffers: the same plus the numba kernels and training temporaries)."""
    peaks, shard, table = s["peak_rss_bytes"], s["shard_bytes"], s["table_bytes"]
    after_read = max(p - b for p, b in zip(peaks["after_read"], shard)) if peaks["after_read"] and shard else None
    at_training = max(p - b - t for p, b, t in zip(peaks["after_training"], shard, table)) - pack \
        if peaks["after_training"] and shard and table else None
    return after_read, at_training


def extrapolate(s, rows=8_100_000, ranks=512):
    """Memory per rank for `rows` rows on `ranks` ranks with T = rows / 8, from this run's
    measurements: per-process overhead + shard + support-vector table + pack buffers.
    A dict of the terms in bytes (None where a measurement is missing) and their sources."""
    d, r = s["features"], s["pack"]
    rows_here = math.ceil(s["rows"] / s["ranks"])
    entries_there = math.ceil(min(rows // 8, rows) / ranks)
    out = {"rows": rows, "ranks": ranks, "iterations": rows // 8, "rows_per_rank": math.ceil(rows / ranks),
           "support_vectors_per_rank": entries_there}
    if s["shard_bytes"]:
        out["shard_bytes_per_row"] = max(s["shard_bytes"]) / rows_here
        out["shard_source"] = "measured shard bytes / rows per rank"
    else:
        out["shard_bytes_per_row"] = d * np.dtype(s["dtype"]).itemsize + 8
        out["shard_source"] = f"{d} x {s['dtype']} + an 8-byte label per row (no shard_bytes in the metrics)"
    out["shard"] = out["shard_bytes_per_row"] * out["rows_per_rank"]
    if s["table_bytes"] and s["support_vectors"]:
        out["table_bytes_per_entry"] = sum(s["table_bytes"]) / s["support_vectors"]
        out["table_source"] = (f"measured table bytes / support vectors: {d} x 4 (float32 row) + "
                               f"{out['table_bytes_per_entry'] - 4 * d:.0f} bookkeeping and growth slack")
    else:
        out["table_bytes_per_entry"] = 4 * d + 8 + 8 + 8
        out["table_source"] = f"{d} x 4 (float32 row) + key, coefficient and norm (no table_bytes in the metrics)"
    out["table"] = out["table_bytes_per_entry"] * entries_there
    out["pack"] = 2 * r * (2 * d + 2) * 8 + 2 * r * r * 8  # the pack's rows and pair kernels, as `ppack plan` counts
    out["overhead_after_read"], out["overhead_at_training"] = overheads(s, out["pack"])
    out["overhead"] = out["overhead_at_training"] if out["overhead_at_training"] is not None \
        else out["overhead_after_read"]
    out["total"] = None if out["overhead"] is None else out["overhead"] + out["shard"] + out["table"] + out["pack"]
    return out


def _mb(n):
    return "n/a" if n is None else f"{n / MB:.1f}"


def _s(x, digits=2):
    return "n/a" if x is None else f"{x:.{digits}f}"


def _per_rank(values):
    """'max MB (rank values ...)' of a per-rank list of bytes."""
    if not values:
        return "n/a"
    return f"{max(values) / MB:.1f} max  (" + ", ".join(f"{v / MB:.1f}" for v in values) + ")"


def print_summary(s):
    peaks = s["peak_rss_bytes"]
    accuracy = s["test_accuracy"]
    save = peaks["after_save"], peaks["after_training"]
    raised = "n/a" if not all(save) else \
        (f"yes, +{(save[0][0] - save[1][0]) / MB:.1f} MB" if save[0][0] > save[1][0] else "no")
    rows = [
        ("rows x features, ranks", f"{s['rows']} x {s['features']}, {s['ranks']} ranks"),
        ("T (iterations), pack r", f"{s['iterations']}, {s['pack']}"),
        ("gamma, sigma, C", f"{s['gamma']:.4g}, {s['sigma']:.3g}, {_s(s['C'], 4)}"),
        ("text file GB", f"{s['text_bytes'] / 1e9:.3f}  ({100 * s['density']:.1f}% nonzero pixels)"),
        ("generate s (CPU)", f"{_s(s['generate_seconds'], 1)}  ({_s(s['generate_cpu_seconds'], 1)})"),
        (f"convert s ({s['dtype']})", _s(s["convert_seconds"], 1)),
        ("convert peak RSS MB", _mb(s["convert_peak_rss_bytes"])),
        ("h5 file MB", _mb(s["h5_bytes"])),
        ("peak RSS MB after read", _per_rank(peaks["after_read"])),
        ("peak RSS MB after training", _per_rank(peaks["after_training"])),
        ("peak RSS MB after save", _per_rank(peaks["after_save"])),
        ("rank 0 raised by saving", raised),
        ("largest process MB (wait4)", _mb(s["train_largest_process_peak_rss_bytes"])),
        ("shard MB per rank", _per_rank(s["shard_bytes"])),
        ("table MB per rank", _per_rank(s["table_bytes"])),
        ("train s (compile apart)", f"{_s(s['train_seconds'])}  (compile {_s(s['compile_seconds'])}, "
                                    f"read {_s(s['read_seconds'])})"),
        ("train wall s (mpiexec)", _s(s["train_wall_seconds"])),
        ("save s", _s(s["save_seconds"])),
        ("load s", _s(s["load_seconds"])),
        ("predict s (wall)", f"{_s(s['predict_seconds'])}  ({_s(s['predict_wall_seconds'])})"),
        ("test accuracy", "n/a" if accuracy is None else f"{100 * accuracy:.2f}%"),
        ("support vectors", str(s["support_vectors"])),
    ]
    print("\nscale benchmark")
    for name, value in rows:
        print(f"  {name:28s} {value}")


def print_extrapolation(e):
    print(f"\nEXTRAPOLATION (not measured) to {e['rows']} rows x 784 on {e['ranks']} ranks, "
          f"T = {e['iterations']}: memory per rank =")
    print(f"  per-process overhead  {_mb(e['overhead']):>9s} MB  (max over ranks of the training peak minus shard, "
          f"table and pack buffers: Python, MPI, numba; {_mb(e['overhead_after_read'])} MB of it before training)")
    print(f"+ data shard            {_mb(e['shard']):>9s} MB  ({e['rows_per_rank']} rows x "
          f"{e['shard_bytes_per_row']:.1f} B; {e['shard_source']})")
    print(f"+ support vectors       {_mb(e['table']):>9s} MB  (at most T / ranks = {e['support_vectors_per_rank']} "
          f"x {e['table_bytes_per_entry']:.0f} B; {e['table_source']})")
    print(f"+ pack buffers          {_mb(e['pack']):>9s} MB  (2 r (2d + 2) x 8 B + 2 r^2 x 8 B)")
    print(f"= total                 {_mb(e['total']):>9s} MB per rank")
    print("  The overhead is this machine's, at this run's rank count; MPI's share may grow with 512 ranks.")


def plot(s, e, path):
    plt = pyplot()
    if plt is None:
        return
    peaks = s["peak_rss_bytes"]
    phases = [p for p in ("after_read", "after_training", "after_save") if peaks[p]]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    labels = ["convert"] + [p.replace("_", " ") for p in phases]
    left.bar(labels, [s["convert_peak_rss_bytes"] / MB] + [max(peaks[p]) / MB for p in phases])
    if s["shard_bytes"]:
        left.axhline(max(s["shard_bytes"]) / MB, color="k", linestyle="--", linewidth=1, label="shard")
    if s["shard_bytes"] and s["table_bytes"]:
        left.axhline((max(s["shard_bytes"]) + max(s["table_bytes"])) / MB, color="C3", linestyle=":",
                     linewidth=1, label="shard + table")
        left.legend()
    left.set_ylabel("peak resident MB (max over ranks)")
    left.set_title(f"{s['rows']} x {s['features']}, {s['ranks']} ranks, T = {s['iterations']}")
    terms = [t for t in ("overhead", "shard", "table", "pack") if e[t] is not None]
    bottom = 0.0
    for term in terms:
        right.bar(["per rank"], [e[term] / MB], bottom=bottom, label=term)
        bottom += e[term] / MB
    right.set_ylabel("MB (extrapolated)")
    right.set_title(f"extrapolation: {e['rows']} rows on {e['ranks']} ranks")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"figure: {path}")


# ---------------------------------------------------------------------------- main

def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="training rows (default 1,000,000)")
    parser.add_argument("--test-rows", type=int, default=10_000)
    parser.add_argument("--features", type=int, default=784)
    parser.add_argument("--density", type=float, default=0.25, help="fraction of nonzero pixels (default 0.25)")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--dtype", default="uint8", help="convert's --dtype, the stored type (default uint8)")
    parser.add_argument("--gamma", type=float, default=None,
                        help="rbf width (default 1 / (features x mean squared feature) of the generated pixels)")
    parser.add_argument("--sigma", type=float, default=None,
                        help="regulariser, C = 1 / (rows sigma) (default 20 / rows: 2.5 / T, the best of a sweep "
                             "at 20,000 rows)")
    parser.add_argument("--pack", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--work-dir", default=None, help="generated files (default: OUT/scale-work)")
    parser.add_argument("--keep", action="store_true", help="keep the generated text files")
    parser.add_argument("--generate-only", action="store_true", help="only generate (and time) the text files")
    return parser.parse_args()


def generate_files(args, work):
    """The training and test text files; the training file's generation figures."""
    problem = Problem(args.features, args.density, args.seed)
    table = TokenTable(args.features)
    gen = dict(zip(("seconds", "cpu_seconds", "bytes", "density"),
                   generate(work / "train.txt", problem, table, args.rows, args.seed + 1)))
    print(f"generated {args.rows} rows ({gen['bytes'] / 1e9:.3f} GB, {100 * gen['density']:.1f}% nonzero) "
          f"in {gen['seconds']:.1f} s, {gen['cpu_seconds']:.1f} s CPU ({gen['bytes'] / 1e6 / gen['seconds']:.0f} MB/s)")
    generate(work / "test.txt", problem, table, args.test_rows, args.seed + 2)
    return problem, gen


def main():
    args = parse_args()
    out = Path(args.out)
    work = Path(args.work_dir) if args.work_dir else out / "scale-work"
    work.mkdir(parents=True, exist_ok=True)
    texts = [work / "train.txt", work / "test.txt"]
    try:
        problem, gen = generate_files(args, work)
        if args.generate_only:
            return
        conv = convert(texts[0], work / "train.h5", args)
        print(f"converted in {conv['seconds']:.1f} s, peak {conv['peak_rss_bytes'] / MB:.0f} MB")
        convert(texts[1], work / "test.h5", args)
    finally:
        if not args.keep:
            for text in texts:
                text.unlink(missing_ok=True)
    T = max(1, args.rows // 8)
    gamma = args.gamma or suggested_gamma(problem, args.seed + 3)
    args.sigma = args.sigma or 20.0 / args.rows
    print(f"training: T = {T}, gamma = {gamma:.4g}, sigma = {args.sigma:g}, {args.ranks} ranks")
    trained = train(work, args, T, gamma)
    predicted = predict(work, args)
    summary = summarize(args, T, gamma, gen, conv, trained, predicted)
    estimate = extrapolate(summary)
    print_summary(summary)
    print_extrapolation(estimate)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    results = {"summary": summary, "extrapolation": estimate, "train_metrics": trained, "predict_metrics": predicted}
    (out / f"scale-{stamp}.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"results: {out / f'scale-{stamp}.json'}")
    plot(summary, estimate, out / f"scale-{stamp}.png")


if __name__ == "__main__":
    main()
