"""`plan --data FILE --ranks P`: memory per rank and run time of a packsvm run, before running it."""
import json
from pathlib import Path

from ..errors import PPackError
from ..mpi.comm import on_rank0
from ..packsvm.comm_model import INFINIBAND_EDR
from .options import add_grid_options, add_packsvm_options, packsvm_params


def add_parser(sub):
    pl = sub.add_parser("plan", help="memory per rank and run time of a packsvm run, before running it")
    pl.add_argument("--data", required=True, help="training data, HDF5 or LIBSVM text")
    pl.add_argument("--ranks", type=int, required=True, help="number of MPI ranks of the planned run")
    pl.add_argument("--mem-per-rank", type=float, default=None, metavar="GIB",
                    help="memory each rank may use, GiB (default: this machine's memory over its ranks)")
    pl.add_argument("--rows", type=int, default=None, metavar="N",
                    help="plan for a data set of N rows like DATA's (e.g. the full set, from a sample of it)")
    pl.add_argument("--from-run", default=None, metavar="METRICS_JSON",
                    help="take the time per support vector, replay and growth from a real run's metrics "
                         "(train --metrics-json) instead of a calibration run here")
    pl.add_argument("--allreduce-latency", type=float, default=INFINIBAND_EDR.latency, metavar="SECONDS",
                    help="latency of one message (alpha) in the Allreduce model: recursive doubling, "
                         "Rabenseifner or ring, whichever is fastest (default 1e-6, a typical MPI latency "
                         "on InfiniBand EDR; about 50e-6 for MPI over Gigabit Ethernet)")
    pl.add_argument("--bandwidth", type=float, default=1 / INFINIBAND_EDR.seconds_per_byte, metavar="BYTES_PER_S",
                    help="link bandwidth in the Allreduce model, beta = 1 / BANDWIDTH (default 12.5e9, "
                         "InfiniBand EDR's 100 Gb/s)")
    pl.add_argument("--node-profile", default=None, metavar="PROFILE_JSON",
                    help="a node's measured parallel efficiency, jitter and collective seconds per rank count "
                         "(written by bench/node_scaling.py on that node): the time estimate uses them")
    pl.add_argument("--no-calibration", action="store_true", help="memory only, no calibration run")
    grid = pl.add_argument_group("a grid search (tune's): with --folds, plan its one pass; --C and --gamma take "
                                 "lists there, one value each without it")
    add_grid_options(grid, "none: one model")
    add_packsvm_options(pl, skip=("C", "gamma"))


def run(comm, args):
    from ..packsvm.plan import make_plan

    mem = None if args.mem_per_rank is None else args.mem_per_rank * 2**30
    for flag, given in (("--svm-type", args.svm_type not in (None, "c_svc")), ("--epsilon", args.epsilon is not None),
                        ("--nu", args.nu is not None)):
        if given:  # one column, as a binary run: plan that one
            raise PPackError(f"{flag}: plan models c_svc runs; an epsilon_svr or one_class run costs what a binary "
                             "c_svc run of the same rows does", collective=True)

    params, grid = packsvm_params(args), None
    if args.folds is not None:
        if args.folds < 2:
            raise PPackError(f"--folds: at least 2, got {args.folds}", collective=True)
        if args.sigma is not None:
            raise PPackError("--sigma: a grid search sets each column's sigma from its C; give --C values",
                             collective=True)
        params.pop("C", None)
        params.pop("gamma", None)
        grid = {"C": args.C or [1.0], "kernels": None if not args.gamma else [{"gamma": g} for g in args.gamma],
                "folds": args.folds}
    else:
        for flag, name in (("--C", "C"), ("--gamma", "gamma")):
            values = params.pop(name, None)
            if values is not None and len(values) > 1:
                raise PPackError(f"{flag}: several values plan a grid search; give --folds K too", collective=True)
            if values is not None:
                params[name] = values[0]

    def plan():
        run, profile = (None if path is None else _read_json(flag, path)
                        for flag, path in (("--from-run", args.from_run), ("--node-profile", args.node_profile)))
        result = make_plan(args.data, args.ranks, params, mem, args.allreduce_latency,
                           not args.no_calibration, args.rows, run, args.bandwidth, profile, grid)
        print("\n".join(result.lines + result.warnings), flush=True)

    on_rank0(comm, plan)


def _read_json(flag, path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise PPackError(f"{flag} {path}: cannot read a JSON file ({exc})") from None
