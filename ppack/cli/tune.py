"""`tune --data D --C 0.1,1,10 --gamma 0.01,0.1 --folds 5`: a grid of C x gamma with
cross-validation, every gamma, C value and fold trained in one pass (``packsvm.grid``: the
gammas share each tile's dot products, or laplacian's L1 distances); with `--svm-type
one_class`, `--nu` values take C's place, scored by accuracy against the data's +1 / -1
labels. Prints the mean and std score per grid point, writes the best grid point's refit
model and the results."""
import json

import numpy as np
from mpi4py import MPI

from ..errors import PPackError
from ..mpi.comm import on_rank0
from .common import (Report, add_common, check_inputs, check_outputs, describe_run, rank_threads, read_shard,
                     scale_warning_said, warning_line)
from ..registry import PACKSVM_PARAMS
from .options import (add_checkpoint_options, add_grid_options, add_packsvm_options, checkpoint_every, comma_values,
                      refuse_checkpoint_options_without_a_path, svm_type_of)
from .stop import StopRequest, report_stop
from ..progress import Progress, pack_callback

DEFAULT_FOLDS = 5


def add_parser(sub):
    t = sub.add_parser("tune", help="cross-validated grid search over C and gamma, every gamma, C and fold in "
                                    "one pass")
    t.add_argument("--data", required=True, help="training data, HDF5 or LIBSVM text")
    add_grid_options(t, DEFAULT_FOLDS)
    t.add_argument("--scores", choices=("pass", "progressive"), default="pass",
                   help="how held-out rows are scored: 'pass', a predict pass after training with the final "
                        "columns; 'progressive', the decision values the held-out columns computed before each "
                        "row's last step during training (no second pass; rows never sampled are left out, early "
                        "rows are judged by an early model) (default pass)")
    t.add_argument("--model", help="write the best grid point's model, refit on every row, to this file (.h5)")
    t.add_argument("--results", help="write every grid point's scores to this JSON file")
    t.add_argument("--memory-limit", type=float, default=None, metavar="GIB",
                   help="memory a rank's table may take, GiB (default: this machine's memory over its ranks); "
                        "a grid that would not fit is refused before training")
    t.add_argument("--nu", type=comma_values, default=None, metavar="NU1,NU2,...",
                   help="--svm-type one_class: the nu values of the grid, in (0, 1], comma-separated (default: "
                        "0.5), in place of --C; held-out rows are scored by accuracy against the data's labels, "
                        "+1 (inlier) or -1 (outlier)")
    add_packsvm_options(t, skip=("C", "gamma", "sigma", "nu"))
    add_checkpoint_options(t, "checkpoints")
    add_common(t)


def run(comm, args):
    from ..packsvm.checkpoint import check_checkpoint_file
    from ..packsvm.grid import grid_parameter, train_grid
    from ..packsvm.offset_estimator import SVM_TYPE_CLASSES

    say = Report(comm, args.quiet)
    svm_type = svm_type_of(args)
    estimator = SVM_TYPE_CLASSES[svm_type]
    one_class = svm_type == "one_class"
    name = grid_parameter(estimator)  # what the grid points differ in besides gamma: C, or nu for one-class
    folds_k = DEFAULT_FOLDS if args.folds is None else args.folds
    if folds_k < 2:
        raise PPackError(f"--folds: at least 2, got {folds_k}", collective=True)
    Cs = (args.nu or [0.5]) if one_class else (args.C or [1.0])
    gammas = args.gamma or [None]
    params = {key: getattr(args, key) for key in [*PACKSVM_PARAMS, "epsilon"]
              if key not in ("C", "gamma", "sigma") and getattr(args, key, None) is not None}
    refuse_checkpoint_options_without_a_path(args)
    check_outputs(comm, {"--model": args.model, "--results": args.results, "--metrics-json": args.metrics_json,
                         "--checkpoint": args.checkpoint})
    if args.checkpoint:
        on_rank0(comm, check_checkpoint_file, args.checkpoint)
    threads = rank_threads(comm, args.threads)
    check_inputs(comm, {"--data": args.data}, data=("--data",))
    template = estimator(**params, comm=comm)
    shard, read_seconds = read_shard(comm, args.data, template.feature_dtype)
    say(describe_run(comm, args.data, shard, threads))
    n = shard.n_samples
    if n < folds_k:
        raise PPackError(f"--folds {folds_k}: the data has only {n} rows", collective=True)
    if one_class and comm.allreduce(int(np.count_nonzero(~np.isin(shard.y, (-1.0, 1.0)))), op=MPI.SUM):
        raise PPackError(f"--data {args.data}: --svm-type one_class scores the held-out rows by accuracy against "
                         "the labels, which must all be +1 (inlier) or -1 (outlier)", collective=True)
    folds = np.random.RandomState(template.seed_).permutation(n) % folds_k  # the same on every rank
    limit = None if args.memory_limit is None else args.memory_limit * 2**30
    rows, best = [], None
    start = MPI.Wtime()
    # every gamma and C value in one pass: the gammas share each tile's dot products
    progress = None if args.quiet or comm.Get_rank() else pack_callback(Progress(log_every=args.log_every))
    model = estimator(**params, comm=comm, progress=progress)
    stop = StopRequest().install()
    try:
        with scale_warning_said("tune", model):
            fit = train_grid(model, shard, None, Cs, folds, folds_k, memory_limit=limit, console=say,
                             scores=args.scores,
                             kernels=None if gammas == [None] else [{"gamma": gamma} for gamma in gammas],
                             checkpoint=args.checkpoint, **checkpoint_every(args), resume=bool(args.resume),
                             should_stop=stop.is_set)
    finally:
        stop.uninstall()
        if progress is not None:
            progress.close()
    if fit.resumed_from is not None:
        say(f"resumed from {args.checkpoint} at iteration {fit.resumed_from}")
    writes = fit.stats.checkpoint_writes
    if writes:
        say(f"{len(writes)} checkpoint(s) written to {args.checkpoint} in {fit.stats.seconds['checkpoint']:.2f} s")
    if fit.stopped:
        report_stop(comm, say, stop, args.checkpoint, fit.state.iteration, fit.T)
        return
    for g, C in enumerate(fit.Cs):
        splits, scored = [], []
        for f in range(folds_k):
            rows_f, decisions, labels = fit.held_out(g, f)
            splits.append(model.validation_score(decisions, labels))
            scored.append(int(len(rows_f)))
        row = {name: C, "gamma": float(fit.specs[g].gamma), "mean": float(np.mean(splits)),
               "std": float(np.std(splits)), "splits": splits, "scored_rows": scored, "converged": fit.converged(g)}
        rows.append(row)
        if best is None or row["mean"] > best[0]["mean"]:
            best = (row, fit, g)
    say(f"{len(gammas)} gamma values x {len(Cs)} {name} values: {fit.table.n_columns} columns trained in one pass in "
        f"{fit.seconds['train']:.2f} s, scored in {fit.seconds['score']:.2f} s")
    seconds = MPI.Wtime() - start
    metric = "R^2" if svm_type == "epsilon_svr" else "accuracy"
    say(f"{name:>10} {'gamma':>10} {'mean ' + metric:>14} {'std':>8} {'converged':>9}")
    for row in rows:
        mark = "  <- best" if row is best[0] else ""
        say(f"{row[name]:>10.6g} {row['gamma']:>10.6g} {row['mean']:>14.4f} {row['std']:>8.4f} "
            f"{'yes' if row['converged'] else 'no':>9}{mark}")
    short = sum(not row["converged"] for row in rows)
    if short:
        warning_line("tune", comm, f"{short} of {len(rows)} grid points stopped short of convergence (converged: "
                     f"no): their scores may be too low; give more --epochs (the larger {name}, the more it needs), "
                     "and scale the features")
    row, fit, g = best
    refit = fit.refit(g)
    if args.model:
        refit.save(args.model)
        say(f"best model ({name}={row[name]:.6g}, gamma={row['gamma']:.6g}, refit on every row) written to "
            f"{args.model}")
    results = {"command": "tune", "data": args.data, "ranks": comm.Get_size(), "folds": folds_k, "scores": args.scores,
               "svm_type": svm_type, "metric": metric, "grid": rows,
               "best": {k: row[k] for k in (name, "gamma", "mean", "std")},
               "seconds": {"read": read_seconds, "grid": comm.allreduce(seconds, op=MPI.MAX)}}
    for path in (args.results, args.metrics_json):
        if path:
            on_rank0(comm, _write_json, path, results)


def _write_json(path, results):
    from ..atomic import atomic_write

    atomic_write(path, lambda f: f.write(json.dumps(results, indent=2) + "\n"))
