"""Command line: ``python -m ppack {convert,train,predict}``; run it under mpiexec/srun.

Options are parsed and validated identically on every rank before the first collective.
A problem found on any rank ends every rank with status 1 and one message from rank 0;
an unexpected failure on one rank aborts the whole MPI job (never a hang).
"""
import argparse
import json
import os
import re
import time
from pathlib import Path

import numpy as np

from .errors import PPackError

OUTPUT_FORMATS = {".h5": "h5", ".hdf5": "h5", ".npy": "npy", ".txt": "txt", ".csv": "txt", ".tsv": "txt"}


class _Parser(argparse.ArgumentParser):
    """argparse that prints (usage, help, errors) on rank 0 only; every rank still exits."""

    rank = 0

    def _print_message(self, message, file=None):
        if _Parser.rank == 0:
            super()._print_message(message, file)


def build_parser():
    p = _Parser(prog="python -m ppack", description="P-packSVM: distributed kernel SVM training "
                "(run under mpiexec -n P or srun for P ranks).")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    c = sub.add_parser("convert", help="LIBSVM/SVMlight text (plain, .gz, .bz2, .xz) to ppack HDF5")
    c.add_argument("input", help="LIBSVM text file")
    c.add_argument("output", help="HDF5 file to write (.h5)")
    c.add_argument("--n-features", type=int, default=None,
                   help="number of features (default: the largest index in the file)")
    c.add_argument("--storage", choices=["auto", "dense", "csr"], default="auto",
                   help="auto: csr when fewer than 25%% of the entries are nonzero (default)")
    c.add_argument("--dtype", choices=["float32", "float64"], default="float64",
                   help="feature value type in the file (default float64)")
    c.add_argument("--quiet", action="store_true", help="print only errors")

    pl = sub.add_parser("plan", help="memory per rank and run time of a packsvm run, before running it")
    pl.add_argument("--data", required=True, help="training data, HDF5 or LIBSVM text")
    pl.add_argument("--ranks", type=int, required=True, help="number of MPI ranks of the planned run")
    pl.add_argument("--mem-per-rank", type=float, default=None, metavar="GIB",
                    help="memory each rank may use, GiB (default: this machine's memory over its ranks)")
    pl.add_argument("--allreduce-latency", type=float, default=50e-6, metavar="SECONDS",
                    help="assumed latency of one Allreduce at 2 ranks (default 50e-6; grows with log2(ranks))")
    pl.add_argument("--no-calibration", action="store_true", help="memory only, no calibration run")
    _add_training_options(pl)

    t = sub.add_parser("train", help="train a kernel SVM (P-packSVM) or a linear SVM (block averaging)")
    t.add_argument("--data", help="training data, HDF5 or LIBSVM text (default: the bundled a9a set)")
    t.add_argument("--test", help="test data to report accuracy on (default with the bundled set: a9a.t)")
    t.add_argument("--model", help="model file to write (.h5); without it no model is saved")
    t.add_argument("--solver", default="packsvm", choices=["packsvm", "dcd", "llsvm", "stream", "alm", "pegasos"],
                   help="packsvm: the kernel trainer (default); the others train a linear SVM on each "
                        "rank's block and average the models")
    _add_training_options(t)
    ck = t.add_argument_group("checkpoints (packsvm)")
    ck.add_argument("--checkpoint", help="state file: written atomically every --checkpoint-every, and on SIGTERM")
    ck.add_argument("--checkpoint-every", type=_every, default=None, metavar="N[s|p]",
                    help="seconds (600 or 600s) or packs (50p) between checkpoints (default: only on SIGTERM)")
    ck.add_argument("--resume", action="store_true",
                    help="continue from --checkpoint if it holds a complete checkpoint (else start afresh)")
    lin = t.add_argument_group("linear solvers (--solver other than packsvm)")
    lin.add_argument("--loss", choices=["l1", "l2"], default="l1", help="hinge (l1, default) or squared hinge (l2)")
    lin.add_argument("--p", type=float, default=None, help="alm only: loss power 1 <= p <= 2 (overrides --loss)")
    lin.add_argument("--averaging", choices=["iterative", "oneshot"], default="iterative",
                     help="iterative: rounds warm-started from the average (default); oneshot: average once")
    lin.add_argument("--rounds", type=int, default=100, help="most averaging rounds (default 100)")
    lin.add_argument("--rounds-tol", type=float, default=1e-3,
                     help="stop the rounds when the duality gap (dual solvers) or the change of the primal "
                          "objective (primal solvers) is at most this fraction of the objective (default 1e-3)")
    lin.add_argument("--features", default=None,
                     help="COFFIN feature map computed on demand: poly2, hash:BITS (e.g. hash:20), shifts:S "
                          "(virtual shifted images)")
    lin.add_argument("--no-bias", action="store_true", help="no bias term (default: a regularised bias, like -B 1)")
    lin.add_argument("--solver-option", action="append", default=[], metavar="NAME=VALUE",
                     help="extra solver option, e.g. tol=0.01, max_epochs=50, cache_rows=5000 (repeatable)")
    _add_common(t)

    inf = sub.add_parser("info", help="describe a data, model or checkpoint file")
    inf.add_argument("file", help="ppack HDF5 data, model or checkpoint file, or LIBSVM text")

    pr = sub.add_parser("predict", help="decision values and labels of a data set")
    pr.add_argument("--model", required=True, help="model file written by train")
    pr.add_argument("--data", required=True, help="data, HDF5 or LIBSVM text")
    pr.add_argument("--output", help="decisions file: .h5, .npy (columns decision, label), or .txt/.csv")
    _add_common(pr)
    return p


def _add_training_options(t):
    """The packsvm training options, shared by train and plan."""
    k = t.add_argument_group("kernel")
    k.add_argument("--kernel", choices=["rbf", "linear", "poly", "laplacian"], default="rbf")
    k.add_argument("--gamma", type=float, default=None, help="kernel width (default 1 / n_features)")
    k.add_argument("--degree", type=int, default=3, help="poly degree (default 3)")
    k.add_argument("--coef0", type=float, default=0.0, help="poly constant (default 0)")
    k.add_argument("--bias", action="store_true",
                   help="learn a bias term, regularised with w (kernel K + 1; paper section V)")
    reg = t.add_argument_group("regularisation (C = 1 / (n_samples * sigma))").add_mutually_exclusive_group()
    reg.add_argument("--C", type=float, default=None, help="SVM cost (default 1)")
    reg.add_argument("--sigma", type=float, default=None, help="regulariser weight of the primal objective")
    it = t.add_argument_group("iterations").add_mutually_exclusive_group()
    it.add_argument("--epochs", type=float, default=1.0, help="T = epochs * n_samples (default 1)")
    it.add_argument("--iterations", type=int, default=None, help="T, the number of SGD iterations")
    t.add_argument("--pack", type=int, default=100, help="r, iterations per pack (default 100)")
    t.add_argument("--tol", type=float, default=None,
                   help="stop before T when the mean hinge loss of the last --tol-window sampled rows "
                        "changes by at most this fraction from the window before (default: run T iterations)")
    t.add_argument("--tol-window", type=int, default=1000, help="rows per window of --tol (default 1000)")
    t.add_argument("--seed", type=int, default=0, help="seed of the shared sampling stream (default 0)")
    t.add_argument("--dtype", choices=["float32", "float64"], default="float64",
                   help="stored feature type; sums are float64 either way (default float64)")


def _every(text):
    """'600' or '600s' -> ('seconds', 600.0); '50p' or '50packs' -> ('packs', 50)."""
    match = re.fullmatch(r"(\d+(?:\.\d*)?)(s|p|packs)?", text.strip().lower())
    if match and float(match[1]) > 0:
        if match[2] in ("p", "packs") and match[1].isdigit():
            return "packs", int(match[1])
        if match[2] in (None, "s"):
            return "seconds", float(match[1])
    raise argparse.ArgumentTypeError(f"expected seconds (600, 600s) or packs (50p), got {text!r}")


def _add_common(p):
    p.add_argument("--metrics-json", help="write run metrics (times are the max over ranks) to this file")
    p.add_argument("--threads", type=int, default=None,
                   help="numba/BLAS threads per rank (default: NUMBA_NUM_THREADS or OMP_NUM_THREADS if "
                        "set, else this node's cores divided by its ranks)")
    p.add_argument("--quiet", action="store_true", help="print only errors")
    p.add_argument("--log-every", type=float, default=30.0,
                   help="seconds between progress lines when not on a terminal (default 30)")


def main(argv=None):
    from mpi4py import MPI

    from .comm import abort_on_exception

    comm = MPI.COMM_WORLD
    _Parser.rank = comm.Get_rank()
    args = build_parser().parse_args(argv)
    commands = {"convert": run_convert, "train": run_train, "predict": run_predict, "info": run_info,
                "plan": run_plan}
    abort_on_exception(comm, commands[args.command], comm, args)


class _Report:
    """Rank 0's console output."""

    def __init__(self, comm, quiet):
        self.on = comm.Get_rank() == 0 and not quiet

    def __call__(self, message):
        if self.on:
            print(message, flush=True)


def run_convert(comm, args):
    from .comm import run_collectively
    from .data.convert import convert

    if comm.Get_rank() == 0:
        start = time.perf_counter()
        header = run_collectively(comm, convert, args.input, args.output, n_features=args.n_features,
                                  storage=args.storage, dtype=np.dtype(args.dtype))
        _Report(comm, args.quiet)(f"wrote {args.output}: {header.n_samples} rows, {header.n_features} features, "
                                  f"{header.storage} storage, {time.perf_counter() - start:.2f} s")
    else:
        run_collectively(comm, lambda: None)


def run_plan(comm, args):
    from .comm import run_collectively
    from .plan import make_plan

    params = dict(kernel=args.kernel, gamma=args.gamma, degree=args.degree, coef0=args.coef0, C=args.C,
                  sigma=args.sigma, epochs=args.epochs, iterations=args.iterations, pack=args.pack, seed=args.seed,
                  dtype=args.dtype, bias=args.bias, tol=args.tol, tol_window=args.tol_window)
    mem = None if args.mem_per_rank is None else args.mem_per_rank * 2**30
    if comm.Get_rank() == 0:
        plan = run_collectively(comm, make_plan, args.data, args.ranks, params, mem, args.allreduce_latency,
                                not args.no_calibration)
        print("\n".join(plan.lines + plan.warnings))
    else:
        run_collectively(comm, lambda: None)


def run_info(comm, args):
    from .comm import run_collectively
    from .info import describe

    lines = run_collectively(comm, describe, args.file) if comm.Get_rank() == 0 else run_collectively(
        comm, lambda: None)
    if comm.Get_rank() == 0:
        print("\n".join(lines))


def _read(comm, path, dtype):
    """Collective: this rank's shard of ``path`` and the seconds it took."""
    from mpi4py import MPI

    from .data.shard import load_shard

    start = MPI.Wtime()
    shard = load_shard(comm, path, dtype=dtype)
    return shard, MPI.Wtime() - start


def _train_data(comm, args, say):
    """The training and test paths: the user's, or the bundled a9a set."""
    from .data.bundled import DEFAULT_TEST, DEFAULT_TRAIN, bundled_path

    if args.data is not None:
        return args.data, args.test
    say(f"no --data given: training on the bundled {DEFAULT_TRAIN} set (UCI Adult), testing on {DEFAULT_TEST}")
    return str(bundled_path(DEFAULT_TRAIN)), args.test or str(bundled_path(DEFAULT_TEST))


def run_train(comm, args):
    if args.solver != "packsvm":
        return run_train_linear(comm, args)
    from mpi4py import MPI

    from .comm import configure_threads, run_collectively
    from .estimator import PackSVC

    say = _Report(comm, args.quiet)
    threads = configure_threads(comm, args.threads)
    data, test = _train_data(comm, args, say)
    model = PackSVC(kernel=args.kernel, gamma=args.gamma, degree=args.degree, coef0=args.coef0, C=args.C,
                    sigma=args.sigma, epochs=args.epochs, iterations=args.iterations, pack=args.pack,
                    seed=args.seed, dtype=args.dtype, bias=args.bias, tol=args.tol, tol_window=args.tol_window,
                    comm=comm, progress=None if args.quiet or comm.Get_rank() else _progress(args.log_every))
    run_collectively(comm, model._check_params)
    shard, read_seconds = _read(comm, data, np.dtype(args.dtype))
    say(f"data {data}: {shard.n_samples} rows, {shard.n_features} features, "
        f"{'csr' if shard.sparse else 'dense'}; {comm.Get_size()} ranks x {threads} thread{'s' if threads > 1 else ''}")
    every = dict([args.checkpoint_every]) if args.checkpoint_every else {}
    if (args.checkpoint_every or args.resume) and not args.checkpoint:
        raise PPackError("--checkpoint-every and --resume need --checkpoint PATH", collective=True)
    stop = _stop_on_sigterm()
    model.fit(shard, checkpoint=args.checkpoint, checkpoint_every_seconds=every.get("seconds"),
              checkpoint_every_packs=every.get("packs"), resume=args.resume, should_stop=stop.is_set)
    if model.progress is not None:
        model.progress.close()
    if model.resumed_from_ is not None:
        say(f"resumed from {args.checkpoint} at iteration {model.resumed_from_}")
    if model.stopped_:
        say(f"stopped at iteration {model.training_['iterations_done']} of {model.training_['iterations']} "
            f"(SIGTERM); state saved to {args.checkpoint or 'nowhere (no --checkpoint)'}; "
            "run the same command with --resume to continue")
        return
    info = model.training_
    say(f"kernel {model.spec_.describe()}, C={model.C_:.6g} (sigma={model.sigma_:.6g}), "
        f"T={info['iterations']}, r={info['pack']}")
    say(f"trained in {info['seconds']['total']:.2f} s: {model.n_support_} support vectors, "
        f"{info['allreduce_calls']} Allreduce calls in {info['packs']} packs"
        + (f"; converged (--tol) after {info['iterations_done']} iterations" if info["converged"] else ""))
    metrics = {"command": "train", "ranks": comm.Get_size(), "threads_per_rank": threads,
               "train_data": data, "n_samples": shard.n_samples, "n_features": shard.n_features,
               "kernel": model.spec_.name, "gamma": model.spec_.gamma, "C": model.C_, "sigma": model.sigma_,
               "pack": info["pack"], "iterations": info["iterations"], "packs": info["packs"],
               "support_vectors": model.n_support_, "allreduce_calls": info["allreduce_calls"],
               "seconds": dict(info["seconds"], read=comm.allreduce(read_seconds, op=MPI.MAX))}
    if test is not None:
        test_shard, test_read = _read(comm, test, np.dtype(args.dtype))
        start = MPI.Wtime()
        decisions, labels = model.decision_function_shard(test_shard)
        metrics["seconds"]["read"] += comm.allreduce(test_read, op=MPI.MAX)
        metrics["seconds"]["evaluate"] = comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)
        accuracy = comm.bcast(_accuracy(model, decisions, labels), root=0)
        metrics.update(test_data=test, test_samples=test_shard.n_samples, test_accuracy=accuracy)
        if accuracy is not None:
            say(f"test accuracy {100 * accuracy:.2f}% on {test} ({test_shard.n_samples} rows), "
                f"evaluated in {metrics['seconds']['evaluate']:.2f} s")
    if args.model:
        model.save(args.model)
        say(f"model written to {args.model}")
    _write_metrics(comm, args.metrics_json, metrics)


def _solver_options(items):
    """NAME=VALUE strings to a dict of ints, floats or strings."""
    options = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise PPackError(f"--solver-option: expected NAME=VALUE, got {item!r}", collective=True)
        for kind in (int, float):
            try:
                options[name] = kind(value)
                break
            except ValueError:
                continue
        else:
            options[name] = value
    return options


def run_train_linear(comm, args):
    from mpi4py import MPI

    from .comm import configure_threads
    from .linear.estimator import BlockAveragedSVC

    say = _Report(comm, args.quiet)
    threads = configure_threads(comm, args.threads)
    data, test = _train_data(comm, args, say)
    model = BlockAveragedSVC(solver=args.solver, C=1.0 if args.C is None else args.C, loss=args.loss, p=args.p,
                             bias=not args.no_bias, averaging=args.averaging, rounds=args.rounds, tol=args.rounds_tol,
                             features=args.features, solver_options=_solver_options(args.solver_option), comm=comm)
    shard, read_seconds = _read(comm, data, np.float64)
    say(f"data {data}: {shard.n_samples} rows, {shard.n_features} features, "
        f"{'csr' if shard.sparse else 'dense'}; {comm.Get_size()} ranks x {threads} thread{'s' if threads > 1 else ''}")

    def show(report):
        gap = f", duality gap {report.gap:.6g}" if report.dual else ""
        say(f"  round {report.rounds}: primal objective {report.primal[-1]:.6g}{gap}")

    model.fit(shard, on_round=None if args.quiet else show)
    info = model.training_
    say(f"{args.solver} ({args.averaging} averaging over {comm.Get_size()} blocks): {info['rounds']} rounds in "
        f"{info['seconds']:.2f} s, primal objective {info['primal_objective']:.6g}")
    metrics = {"command": "train", "solver": args.solver, "ranks": comm.Get_size(), "threads_per_rank": threads,
               "train_data": data, "n_samples": shard.n_samples, "n_features": shard.n_features, "C": model.C,
               "loss": args.loss, "p": model._power(), "features": args.features, **{
                   k: info[k] for k in ("mode", "rounds", "primal_objective", "dual_objective", "duality_gap",
                                        "primal_by_round", "dual_by_round")},
               "seconds": {"total": info["seconds"], "read": comm.allreduce(read_seconds, op=MPI.MAX)}}
    if test is not None:
        test_shard, _ = _read(comm, test, np.float64)
        decisions, labels = model.decision_function_shard(test_shard)
        accuracy = comm.bcast(_accuracy(model, decisions, labels), root=0)
        metrics.update(test_data=test, test_samples=test_shard.n_samples, test_accuracy=accuracy)
        if accuracy is not None:
            say(f"test accuracy {100 * accuracy:.2f}% on {test} ({test_shard.n_samples} rows)")
    if args.model:
        model.save(args.model)
        say(f"model written to {args.model}")
    _write_metrics(comm, args.metrics_json, metrics)


def run_predict(comm, args):
    from mpi4py import MPI

    from .comm import configure_threads, run_collectively
    from .estimator import PackSVC
    from .linear.estimator import BlockAveragedSVC
    from .model import model_type

    say = _Report(comm, args.quiet)
    threads = configure_threads(comm, args.threads)
    if args.output and Path(args.output).suffix.lower() not in OUTPUT_FORMATS:
        raise PPackError(f"--output: unknown file type {Path(args.output).suffix!r}; expected one of "
                         f"{', '.join(OUTPUT_FORMATS)}", collective=True)
    start = MPI.Wtime()
    if run_collectively(comm, model_type, args.model) == "linear":
        model = BlockAveragedSVC.load(args.model, comm)
        described = f"a linear {model.solver} model"
        dtype = np.float64
    else:
        model = PackSVC.load(args.model, comm)
        described = f"{model.n_support_} support vectors"
        dtype = np.dtype(model.dtype)
    shard, _ = _read(comm, args.data, dtype)
    read_seconds = MPI.Wtime() - start  # model and data
    start = MPI.Wtime()
    decisions, labels = model.decision_function_shard(shard)
    seconds = {"read": comm.allreduce(read_seconds, op=MPI.MAX),
               "predict": comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)}
    accuracy = comm.bcast(_accuracy(model, decisions, labels), root=0)
    say(f"predicted {shard.n_samples} rows of {args.data} with {described} "
        f"on {comm.Get_size()} ranks x {threads} thread{'s' if threads > 1 else ''} in {seconds['predict']:.2f} s")
    if accuracy is not None:
        say(f"accuracy {100 * accuracy:.2f}%")
    if args.output:
        if comm.Get_rank() == 0:
            run_collectively(comm, write_decisions, args.output, decisions, model.labels_of(decisions))
        else:
            run_collectively(comm, lambda: None)
        say(f"decisions written to {args.output}")
    _write_metrics(comm, args.metrics_json, {
        "command": "predict", "ranks": comm.Get_size(), "threads_per_rank": threads, "data": args.data,
        "n_samples": shard.n_samples, "model": described, "seconds": seconds,
        "test_accuracy": accuracy})


def _stop_on_sigterm():
    """An event set by SIGTERM (what SLURM sends at the time limit): the solver then stops
    after its current pack on every rank and writes its checkpoint."""
    import signal
    import threading

    event = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: event.set())
    return event


def _accuracy(model, decisions, labels):
    """Rank 0: accuracy when every row has a label, else None."""
    if decisions is None or np.any(np.isnan(labels)):
        return None
    return float(np.mean(model.labels_of(decisions) == labels))


def write_decisions(path, decisions, labels):
    """Write decision values and predicted labels atomically; the format follows the suffix."""
    from .model import atomic_h5_write

    kind = OUTPUT_FORMATS[Path(path).suffix.lower()]
    if kind == "h5":
        def write(f):
            f.create_dataset("decision", data=decisions)
            f.create_dataset("label", data=labels)
        atomic_h5_write(path, write)
        return
    tmp = Path(path).with_name(f".{Path(path).name}.{os.getpid()}.tmp")
    try:
        table = np.column_stack([decisions, labels])
        if kind == "npy":
            with open(tmp, "wb") as f:
                np.save(f, table)
        else:
            sep = "," if Path(path).suffix.lower() == ".csv" else " "
            np.savetxt(tmp, table, fmt="%.17g", delimiter=sep, header=f"decision{sep}label", comments="")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _write_metrics(comm, path, metrics):
    from .comm import run_collectively

    if not path:
        return
    if comm.Get_rank() == 0:
        def write():
            tmp = Path(path).with_name(f".{Path(path).name}.{os.getpid()}.tmp")
            try:
                tmp.write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
                os.replace(tmp, path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        run_collectively(comm, write)
    else:
        run_collectively(comm, lambda: None)


def _progress(log_every):
    """Rank 0's progress callback for the solver: a bar on a terminal, log lines otherwise."""
    from .progress import Progress

    bar = Progress(log_every=log_every)

    def show(state, stats, n_support, total):
        bar.update(state.iteration, total, n_support, stats.hinge_moving_average)
    show.close = bar.close
    return show
