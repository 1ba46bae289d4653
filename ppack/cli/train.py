"""`train`: the kernel trainer (P-packSVM, the default) or a linear solver under block averaging."""
import argparse
import warnings

import numpy as np
from mpi4py import MPI

from ..errors import PPackError
from ..kernels.device import on_device
from ..mpi.comm import on_rank0, run_collectively
from ..packsvm.convergence import stage_line
from ..registry import KERNEL_SOLVER, SOLVERS
from .common import (Report, add_common, check_inputs, check_outputs, describe_metrics, describe_run, evaluate,
                     peak_rss_bytes, process_age_seconds, rank_threads, read_shard, scale_warning_said, training_data,
                     warning_line, write_metrics)
from .options import (add_checkpoint_options, add_linear_options, add_packsvm_options, checkpoint_every,
                      linear_params, packsvm_params, refuse_checkpoint_options_without_a_path,
                      refuse_other_trainers_options, svm_type_of)
from ..progress import Progress, pack_callback
from .stop import StopRequest, report_stop


def add_parser(sub):
    t = sub.add_parser("train", help="train a kernel SVM (P-packSVM) or a linear SVM (block averaging)")
    t.add_argument("--data", help="training data, HDF5 or LIBSVM text (default: the bundled a9a set)")
    t.add_argument("--test", help="test data to report accuracy on (default with the bundled set: a9a.t)")
    t.add_argument("--model", help="model file to write (.h5); without it no model is saved")
    t.add_argument("--solver", default=KERNEL_SOLVER, choices=SOLVERS,
                   help="packsvm: the kernel trainer (default); the others train a linear SVM on each "
                        "rank's block and average the models")
    add_packsvm_options(t)
    add_checkpoint_options(t)
    t.add_argument_group("testing (packsvm)").add_argument(
        "--delay", type=_delay, default=None, metavar="SPEC",
        help="for tests and benchmarks, off by default: each pack, delay the ranks' partial sums by a drawn "
             "busy-wait, a node's jitter on a few cores: mean=X (2ms, 500us, 0.002s, or 10%% of the rank's "
             "sums), then optionally uniform (on [0, 2 mean], the default) or fixed, ranks=all (default), one "
             "(one drawn rank a pack) or 1+3, seed=N (default 0); e.g. mean=10%%,ranks=one")
    add_linear_options(t)
    add_common(t)


def _delay(text):
    """--delay SPEC -> a ``packsvm.delay.Delay``."""
    from ..packsvm.delay import Delay

    try:
        return Delay.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def run(comm, args):
    from ..linear.estimator import BlockAveragedSVC
    from ..packsvm.checkpoint import check_checkpoint_file
    from ..packsvm.offset_estimator import SVM_TYPE_CLASSES

    refuse_other_trainers_options(args)
    say = Report(comm, args.quiet)
    kernel = args.solver == KERNEL_SOLVER
    if kernel:
        refuse_checkpoint_options_without_a_path(args)
        estimator = SVM_TYPE_CLASSES[svm_type_of(args)]
        progress = None if args.quiet or comm.Get_rank() else pack_callback(Progress(log_every=args.log_every))
        model = estimator(**packsvm_params(args), comm=comm, progress=progress)
    else:
        model = BlockAveragedSVC(**linear_params(args), comm=comm)
    run_collectively(comm, model.validate_params)
    check_outputs(comm, {"--model": args.model, "--metrics-json": args.metrics_json, "--checkpoint": args.checkpoint})
    if args.checkpoint:
        on_rank0(comm, check_checkpoint_file, args.checkpoint)
    threads = rank_threads(comm, args.threads)
    data, test = training_data(args, say)
    widths = check_inputs(comm, {"--data": data, "--test": test}, data=("--data", "--test"))
    shard, read_seconds = read_shard(comm, data, model.feature_dtype)
    if widths.get("--test", shard.n_features) != shard.n_features:
        raise PPackError(f"--test {test}: the data has {widths['--test']} features but the training data "
                         f"{data} has {shard.n_features}; expected {shard.n_features}", collective=True)
    say(describe_run(comm, data, shard, threads))
    peaks = {"after_read": peak_rss_bytes(comm)}
    metrics = (_fit_packsvm if kernel else _fit_linear)(args, model, shard, say, read_seconds)
    if metrics is None:  # stopped by SIGTERM, state checkpointed
        return
    peaks["after_training"] = peak_rss_bytes(comm)
    metrics = {"command": "train", "ranks": comm.Get_size(), "threads_per_rank": threads, "train_data": data,
               "n_samples": shard.n_samples, "n_features": shard.n_features, **metrics,
               "memory": {"peak_rss_bytes": peaks, "shard_bytes": comm.gather(shard.nbytes, root=0)}}
    if kernel:
        metrics["memory"]["table_bytes"] = comm.gather(model.table_.nbytes, root=0)
    metrics["seconds"]["read"] = read_seconds
    _evaluate_and_save(comm, args, model, test, metrics, say)


def _fit_packsvm(args, model, shard, say, read_seconds):
    """Train the kernel model; its metrics, or None when SIGTERM stopped the run (SIGINT
    stops it too, then exits with status 130)."""
    stop = StopRequest().install()
    ready = {}

    def kernels_ready(seconds):  # the packs start next: how long the process took to get here
        ready["age"], ready["compile"] = process_age_seconds(), seconds
        say(f"numba kernels ready in {seconds:.1f} s (compiled once per node, or loaded from the cache)")

    def stage_done(stage, epochs):  # --epochs auto trains on
        say(stage_line(model.SVM_TYPE, stage, epochs))

    try:
        with scale_warning_said("train", model), warnings.catch_warnings():  # convergence: said below
            warnings.simplefilter("ignore", model.convergence_warning)
            model.fit(shard, checkpoint=args.checkpoint, **checkpoint_every(args), resume=bool(args.resume),
                      should_stop=stop.is_set, delay=args.delay, on_kernels_ready=kernels_ready,
                      on_stage=stage_done)
    finally:
        stop.uninstall()
    if model.progress is not None:
        model.progress.close()
    if model.resumed_from_ is not None:
        say(f"resumed from {args.checkpoint} at iteration {model.resumed_from_}")
    info = model.training_
    checkpoints = info.get("checkpoints")
    if checkpoints is not None:
        say(f"{checkpoints['written']} checkpoint(s) written to {args.checkpoint} in "
            f"{info['seconds']['checkpoint']:.2f} s, {describe_write(checkpoints)}")
    if model.stopped_:
        report_stop(model._comm(), say, stop, args.checkpoint, info["iterations_done"], info["iterations"])
        return None
    problem = "" if model.SVM_TYPE == "c_svc" else f"{model.SVM_TYPE} (rho={model.rho_:.6g}), "
    say(f"{problem}kernel {model.spec_.describe()}, C={model.C_:.6g} (sigma={model.sigma_:.6g}), "
        f"T={info['iterations']}, r={info['pack']}, {describe_dtype(model)}")
    stages = info["convergence"].get("stages")
    if stages is not None:
        say(f"epochs auto: {stages[-1]['epochs']:g} epochs, in {len(stages)} stage(s) of "
            + ", ".join(f"{stage['epochs']:g}" for stage in stages) + " epochs")
    say(f"trained in {info['seconds']['total']:.2f} s: {model.n_support_} support vectors, "
        f"{info['allreduce_calls']} Allreduce calls in {info['packs']} packs"
        + (f"; converged (--tol) after {info['iterations_done']} iterations" if info["converged"] else ""))
    warning_line("train", model._comm(), info["convergence"]["advice"])
    if info["ranks"] > 1:
        say(describe_waiting(info))
    validation = info.get("validation")
    if validation is not None:
        ending = (f"stopped after {validation['patience']} evaluations without improvement"
                  if validation["stopped_early"] else "ran to T")
        best = (f"accuracy {100 * validation['best_accuracy']:.2f}%" if "best_accuracy" in validation else
                f"R^2 {validation['best_r2']:.4f}")
        say(f"validation: best {best} on {validation['rows']} held-out "
            f"rows over {len(validation['history'])} evaluations; {ending}")
    probability = info.get("probability")
    if probability is not None:
        say(f"probabilities: Platt sigmoids fitted on {probability['rows']} {probability['fitted_on']}"
            + (" (overconfident: --calibration training)" if probability["fitted_on"] == "training rows" else ""))
    objective = info.get("objective")
    if objective is not None:
        rows = "over every row" if objective["exact"] else f"estimated on {objective['rows']} rows"
        if objective["value"] is None:
            say(f"hinge part of the objective {np.mean(objective['hinge_term']):.6g}, {rows} (the averaged "
                "model's norm is computed with --objective)")
        else:
            say(f"primal objective {objective['value']:.6g} (sigma/2 ||w||^2 {np.mean(objective['norm_term']):.6g} "
                f"+ hinge {np.mean(objective['hinge_term']):.6g}, the hinge {rows})")
    return {"svm_type": model.SVM_TYPE, "rho": model.rho_, **_problem_settings(model),
            "kernel": model.spec_.name, "gamma": model.spec_.gamma, "C": model.C_, "sigma": model.sigma_,
            "optimizer": info["optimizer"], "objective": objective, "convergence": info["convergence"],
            "kernel_scale": info["kernel_scale"],
            "validation": validation,
            "probability": probability,
            "held_out": info["held_out"],
            "pack": info["pack"], "iterations": info["iterations"], "packs": info["packs"],
            "sampling": info["sampling"], "step": info["step"], "average": info["average"],
            "placement": model.placement, "pipeline": model.pipeline,
            "delay": None if args.delay is None else args.delay.describe(), "over_ranks": info["over_ranks"],
            "dtype": info["dtype"], "float32_error_bound": info["float32_error_bound"],
            "support_vectors": model.n_support_, "allreduce_calls": info["allreduce_calls"],
            "seconds": {**info["seconds"], "startup": _startup_seconds(model._comm(), ready.get("age"), read_seconds,
                                                                    ready.get("compile", 0.0))},
            "bytes": dict(info["bytes"]), "file_writes": {"checkpoint": checkpoints}}


def _problem_settings(model):
    """epsilon (epsilon_svr) or nu (one_class), for the metrics."""
    return {name: float(getattr(model, name)) for name in ("epsilon", "nu") if hasattr(model, name)}


def describe_waiting(info):
    """Where the ranks' time went, in words: the waiting in the collectives and the spread of
    the partial sums over ranks (``rank_report``)."""
    over, total = info["over_ranks"]["seconds"], info["seconds"]["total"]
    waiting, sums = over["waiting"], over["partial_sums"]
    rows = info["over_ranks"]["per_rank"]["support_vectors"]
    share = {k: 100 * waiting[k] / total if total > 0 else 0.0 for k in waiting}
    return (f"ranks waited for the last to arrive {share['median']:.1f}% of the run (median rank; "
            f"{share['min']:.1f}% to {share['max']:.1f}%); their partial sums took {sums['min']:.2f} to "
            f"{sums['max']:.2f} s for {min(rows)} to {max(rows)} support vectors")


def describe_write(report):
    """How a collective file write went, in words (a ``WriteReport``'s fields, as a dict)."""
    way = "by parallel HDF5" if report["method"] == "parallel" else f"by the leaders of {report['nodes']} node(s)"
    return f"{way}, {report['sequential_opens']} sequential file open(s)"


def _startup_seconds(comm, age, read_seconds, compile_seconds):
    """Collective: process start to the first pack, minus reading the data and compiling the
    kernels (the slowest rank's), or None where the process start is unknown."""
    startup = None if age is None else age - read_seconds - compile_seconds
    startups = comm.allgather(startup)
    return None if None in startups else max(startups)


def describe_dtype(model):
    """The float type a kernel run computed in, and why, in words."""
    bound = model.float32_error_bound_
    worst = "" if bound is None else f"; a float32 kernel value is off by at most {bound:.2g} (relative)"
    chosen = " (auto)" if model.dtype == "auto" else ""
    return f"computed in {model.dtype_}{chosen}{worst}"


def _fit_linear(args, model, shard, say, read_seconds=None):
    """Train the linear model; its metrics."""
    with warnings.catch_warnings():  # said below as one line of its own
        warnings.simplefilter("ignore", model.convergence_warning)
        model.fit(shard, on_round=None if args.quiet else lambda report: say(f"  {report.describe()}"))
    info = model.training_
    warning_line("train", model._comm(), info["advice"])
    K = len(model.classes_)
    classes = "" if K == 2 else f", {K} classes one-vs-rest (rounds and objective summed over the classes)"
    say(f"{model.solver} ({model.averaging} averaging over {info['ranks']} blocks{classes}): {info['rounds']} rounds "
        f"in {info['seconds']:.2f} s, primal objective {info['primal_objective']:.6g}")
    return {"solver": model.solver, "C": model.C, "loss": model.loss, "p": model.power, "features": model.features,
            **{k: info[k] for k in ("mode", "rounds", "converged", "advice", "primal_objective", "dual_objective",
                                    "duality_gap", "primal_by_round", "dual_by_round")},
            **({} if K == 2 else {"per_class": info["per_class"]}), "seconds": {"total": info["seconds"]}}


def _evaluate_and_save(comm, args, model, test, metrics, say):
    """The model file, then the test accuracy (with a test set) and the metrics file of a
    finished run: a test set that fails to read leaves the trained model written."""
    if args.model:
        start = MPI.Wtime()
        model.save(args.model)
        metrics["seconds"]["save"] = comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)
        metrics["memory"]["peak_rss_bytes"]["after_save"] = peak_rss_bytes(comm)
        written = getattr(model, "save_report_", None)  # kernel models are written by every rank
        if written is not None:
            metrics.setdefault("file_writes", {})["save"] = {"method": written.method, "nodes": written.nodes,
                                                             "sequential_opens": written.opens}
        how = "" if written is None else ", " + describe_write(metrics["file_writes"]["save"])
        say(f"model written to {args.model} in {metrics['seconds']['save']:.2f} s{how}")
    if test is not None:
        test_shard, test_read = read_shard(comm, test, model.feature_dtype)
        table, device = getattr(model, "table_", None), getattr(args, "device", None) or "cpu"
        host = None if table is None else table.compute
        if table is not None and device != "cpu":  # a model trained on GPUs is tested there too
            table.compute = on_device(host, device, comm)
        try:
            _, _, test_metrics, seconds = evaluate(comm, model, test_shard)
        finally:
            if host is not None:
                table.compute = host
        metrics["seconds"]["read"] += test_read
        metrics["seconds"]["evaluate"] = seconds
        metrics.update(test_data=test, test_samples=test_shard.n_samples, **test_metrics)
        described = describe_metrics(test_metrics)
        if described is not None:
            say(f"test {described} on {test} ({test_shard.n_samples} rows), evaluated in {seconds:.2f} s")
    if comm.Get_rank() == 0:
        peaks = metrics["memory"]["peak_rss_bytes"]
        say("peak memory per rank (max over ranks): " + ", ".join(
            f"{phase.replace('_', ' ')} {max(values) / 2**20:.0f} MB" for phase, values in peaks.items()))
    write_metrics(comm, args.metrics_json, metrics)

