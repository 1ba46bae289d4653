"""Command line: ``python -m ppack {convert,data,train,tune,predict,info,plan,export}``; run it under mpiexec/srun.

One module per command, each with ``add_parser(subparsers)`` and ``run(comm, args)``.
Options are parsed and validated identically on every rank before the first collective.
A problem found on any rank ends every rank with status 1 and one message from rank 0;
an unexpected failure on one rank aborts the whole MPI job (never a hang).

Building the parser loads only the registry: each command imports the machinery it runs
(data readers, trainers, numba, h5py) inside its functions, so `--help` starts fast. The
commands use the trainers' own classes, never the public estimators (``ppack.estimators``),
so no command imports scikit-learn (tests/test_startup.py holds this).
"""
import os
import sys

from . import convert, data, export, info, plan, predict, train, tune
from .common import Parser, Version

COMMANDS = {"convert": convert, "data": data, "plan": plan, "train": train, "tune": tune, "info": info,
            "predict": predict, "export": export}


def build_parser():
    p = Parser(prog="python -m ppack", description="P-packSVM: distributed kernel SVM training "
               "(run under mpiexec -n P or srun for P ranks).")
    p.add_argument("--version", action=Version)
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS.values():
        command.add_parser(sub)
    return p


def main(argv=None, comm=None):
    """Run one command; ``argv`` defaults to the process's arguments, ``comm`` (the ranks
    that run it) to every rank of the job."""
    from mpi4py import MPI

    from ..errors import naming_flags
    from ..mpi.comm import BROKEN_PIPE_STATUS, abort_on_exception
    from .options import PARAMETER_FLAGS

    comm = MPI.COMM_WORLD if comm is None else comm
    Parser.rank = comm.Get_rank()
    try:
        args = build_parser().parse_args(argv)
        with naming_flags(PARAMETER_FLAGS):  # errors from the trainers name the flags, not the Python parameters
            abort_on_exception(comm, COMMANDS[args.command].run, comm, args)
    except BrokenPipeError:
        # stdout's reader left (`info m.h5 | head -3`): exit quietly, as command-line tools do;
        # stdout goes to devnull so that flushing it at exit raises nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(BROKEN_PIPE_STATUS)
