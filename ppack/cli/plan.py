"""`plan --data FILE --ranks P`: memory per rank and run time of a packsvm run, before running it."""
from ..mpi.comm import on_rank0
from ..packsvm.plan import make_plan
from .options import add_packsvm_options, packsvm_params


def add_parser(sub):
    pl = sub.add_parser("plan", help="memory per rank and run time of a packsvm run, before running it")
    pl.add_argument("--data", required=True, help="training data, HDF5 or LIBSVM text")
    pl.add_argument("--ranks", type=int, required=True, help="number of MPI ranks of the planned run")
    pl.add_argument("--mem-per-rank", type=float, default=None, metavar="GIB",
                    help="memory each rank may use, GiB (default: this machine's memory over its ranks)")
    pl.add_argument("--allreduce-latency", type=float, default=50e-6, metavar="SECONDS",
                    help="assumed latency of one Allreduce at 2 ranks (default 50e-6; grows with log2(ranks))")
    pl.add_argument("--no-calibration", action="store_true", help="memory only, no calibration run")
    add_packsvm_options(pl)


def run(comm, args):
    mem = None if args.mem_per_rank is None else args.mem_per_rank * 2**30

    def plan():
        result = make_plan(args.data, args.ranks, packsvm_params(args), mem, args.allreduce_latency,
                           not args.no_calibration)
        print("\n".join(result.lines + result.warnings), flush=True)

    on_rank0(comm, plan)
