"""`predict --model MODEL.h5 --data DATA`: decision values and labels on all ranks, any model type."""
from pathlib import Path

import numpy as np
from mpi4py import MPI

from ..errors import PPackError
from ..mpi.comm import on_rank0
from ..kernels.device import on_device
from ..registry import COMPUTE_DEVICES, KERNEL_TABLE
from .common import (Report, add_common, check_inputs, check_outputs, describe_metrics, evaluate, peak_rss_bytes,
                     rank_threads, ranks_and_threads, read_shard, write_metrics)

OUTPUT_FORMATS = {".h5": "h5", ".hdf5": "h5", ".npy": "npy", ".txt": "txt", ".csv": "txt", ".tsv": "txt"}


def add_parser(sub):
    pr = sub.add_parser("predict", help="decision values and labels of a data set")
    pr.add_argument("--model", required=True,
                    help="model file written by train, or a LIBSVM model file "
                         "(binary c_svc, epsilon_svr or one_class; kernel_type " + ", ".join(k.libsvm_type for k in KERNEL_TABLE if k.libsvm_type) + ")")
    pr.add_argument("--data", required=True, help="data, HDF5 or LIBSVM text")
    pr.add_argument("--output", help="decisions file: .h5, .npy (columns decision, label), or .txt/.csv")
    pr.add_argument("--proba", action="store_true",
                    help="add class probabilities to --output (a kernel model trained with --probability)")
    pr.add_argument("--device", choices=COMPUTE_DEVICES, default="cpu",
                    help="where a kernel model's kernel sums run: cpu (default) or gpu, one GPU per rank (CuPy)")
    add_common(pr)


def run(comm, args):
    say = Report(comm, args.quiet)
    threads = rank_threads(comm, args.threads)
    if args.output and Path(args.output).suffix.lower() not in OUTPUT_FORMATS:
        raise PPackError(f"--output: unknown file type {Path(args.output).suffix!r}; expected one of "
                         f"{', '.join(OUTPUT_FORMATS)}", collective=True)
    check_outputs(comm, {"--output": args.output, "--metrics-json": args.metrics_json})
    check_inputs(comm, {"--model": args.model, "--data": args.data}, data=("--data",))
    model, model_seconds = _timed_load(comm, args.model)
    if args.proba and getattr(model, "probability_", None) is None:
        raise PPackError(f"--proba: {args.model} has no probability sigmoids; train it with --probability "
                         "(kernel models only)", collective=True)
    table = getattr(model, "table_", None)
    if args.device != "cpu":
        if table is None:
            raise PPackError(f"--device {args.device}: {args.model} is a linear model; its predictions run on the "
                             "CPU (leave out --device)", collective=True)
        table.compute = on_device(table.compute, args.device, comm)
    shard, data_seconds = read_shard(comm, args.data, model.feature_dtype)
    say("predicting: the numba kernels compile on this machine's first use (seconds), later runs load them "
        "from the cache")
    decisions, labels, test_metrics, seconds = evaluate(comm, model, shard)
    peaks = peak_rss_bytes(comm)
    described = model.summary()
    say(f"predicted {shard.n_samples} rows of {args.data} with {described} "
        f"on {ranks_and_threads(comm, threads)} in {seconds:.2f} s")
    described_metrics = describe_metrics(test_metrics)
    if described_metrics is not None:
        say(described_metrics)
    if args.output:
        def write():  # rank 0, which holds the decisions
            proba = model.probabilities_of(decisions) if args.proba else None
            write_decisions(args.output, decisions, model.labels_of(decisions), getattr(model, "classes_", None),
                            proba)
        on_rank0(comm, write)
        say(f"decisions written to {args.output}")
    write_metrics(comm, args.metrics_json, {
        "command": "predict", "ranks": comm.Get_size(), "threads_per_rank": threads, "data": args.data,
        "n_samples": shard.n_samples, "model": described,
        "seconds": {"load_model": model_seconds, "read": data_seconds, "predict": seconds}, **test_metrics,
        "memory": {"peak_rss_bytes": peaks}})


def _timed_load(comm, path):
    """Collective: the model file's estimator, as its trainer's class, and the seconds it took."""
    from ..base import load_model
    from ..linear import estimator as linear  # noqa: F401 - importing the trainers registers their
    from ..packsvm import libsvm_offset  # noqa: F401 - model types (and svm types), which load_model reads

    start = MPI.Wtime()
    model = load_model(path, comm)
    return model, comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)


def write_decisions(path, decisions, labels, classes=None, proba=None):
    """Write decision values and predicted labels atomically; the format follows the suffix.

    decisions (n,) for a binary model or (n, K) for K classes (the model's class order);
    labels (n,). ``.h5``: datasets ``decision`` and ``label``; ``.npy``: (n, 2) or (n, K + 1),
    the decision values then the label; text: a header line and the same columns. Labels
    that are not numbers go to ``.h5`` (as text) and text files only. ``classes`` names the
    text columns (decision_<class>). ``proba`` (n, K), if given: the class probabilities,
    dataset ``proba`` in .h5, K more columns (proba_<class>) after the label elsewhere.
    """
    import h5py

    from ..atomic import atomic_h5_write, atomic_write

    suffix = Path(path).suffix.lower()
    kind = OUTPUT_FORMATS[suffix]
    decisions = np.asarray(decisions)
    columns = decisions.reshape(len(decisions), -1)
    numeric = np.asarray(labels).dtype.kind in "biuf"
    extra = [] if proba is None else [proba]
    if classes is None:
        classes = range(columns.shape[1] if proba is None else proba.shape[1])
    names_of = [f"{c:g}" if isinstance(c, (float, np.floating)) else str(c) for c in classes]
    if kind == "h5":
        def write_h5(f):
            f.create_dataset("decision", data=decisions)
            if proba is not None:
                f.create_dataset("proba", data=proba)
            if numeric:
                f.create_dataset("label", data=labels)
            else:
                f.create_dataset("label", data=[str(v) for v in labels], dtype=h5py.string_dtype())
        atomic_h5_write(path, write_h5)
    elif kind == "npy":
        if not numeric:
            raise PPackError(f"--output {path}: the labels are text; write .h5 or a text file instead of .npy")
        atomic_write(path, lambda f: np.save(f, np.column_stack([columns, labels, *extra])), mode="wb")
    else:
        sep = "," if suffix == ".csv" else " "
        names = (["decision"] if decisions.ndim == 1 else [f"decision_{c}" for c in names_of]) + ["label"]
        names += [] if proba is None else [f"proba_{c}" for c in names_of]
        table = np.column_stack([columns, labels, *extra]) if numeric else np.column_stack(
            [np.char.mod("%.17g", columns), np.asarray(labels, dtype=str), *(np.char.mod("%.17g", p) for p in extra)])
        atomic_write(path, lambda f: np.savetxt(f, table, fmt="%.17g" if numeric else "%s", delimiter=sep,
                                                header=sep.join(names), comments=""))
