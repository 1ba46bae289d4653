"""MPI helpers: pure partition math, collective error agreement, thread budgets.

Every distributed function in ppack takes a communicator argument; nothing reaches for
``COMM_WORLD`` except the CLI entry point and the estimators' default. Bulk arrays cross
ranks only through ``collectives.Collectives``; the helpers here move small control data.
"""
import os
import sys
import time
import traceback

import numpy as np

from ..errors import PPackError

# Seconds a failing rank waits, after printing its traceback, before it aborts the job.
ABORT_GRACE_SECONDS = 0.5
# The status of a command whose output's reader left: a shell's 128 + SIGPIPE.
BROKEN_PIPE_STATUS = 141


def chunk(n, rank, size):
    """Rows ``[start, stop)`` owned by ``rank`` of ``size`` when ``n`` rows are split evenly.

    The first ``n % size`` ranks get one extra row. Pure: no MPI needed.
    """
    if size < 1 or not 0 <= rank < size:
        raise ValueError(f"rank {rank} out of range for size {size}")
    base, extra = divmod(n, size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def chunk_starts(n, size):
    """Start row of every rank plus ``n`` at the end; int64 array of length ``size + 1``."""
    return np.array([chunk(n, k, size)[0] for k in range(size)] + [n], dtype=np.int64)


def owners_of(rows, starts):
    """Rank owning each global row id, given ``chunk_starts`` of the partition."""
    return np.searchsorted(starts, rows, side="right") - 1


def agree(comm, local_error):
    """Collective: raise the first rank's error on every rank if any rank has one.

    ``local_error`` is None or an exception instance. All ranks call this at the same
    point, so a data problem found on one rank stops every rank cleanly, with the same
    message, instead of leaving the others blocked in the next collective.
    """
    errors = comm.allgather(None if local_error is None else (type(local_error), str(local_error)))
    for item in errors:
        if item is not None:
            kind, message = item
            if issubclass(kind, PPackError):
                raise PPackError(message, collective=True)
            try:  # the same type where it takes a message (TypeError, ValueError, ...)
                error = kind(message)
            except Exception:  # noqa: BLE001 - a type that needs other arguments
                error = RuntimeError(message)
            error.collective = True
            raise error


def run_collectively(comm, func, *args, **kwargs):
    """Call ``func`` on every rank; if it raises on any rank, raise on all (see ``agree``)."""
    result, error = None, None
    try:
        result = func(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the error is re-raised on every rank
        error = exc
    agree(comm, error)
    return result


def on_rank0(comm, func, *args, **kwargs):
    """Collective: ``func`` runs on rank 0 only (writing a file, printing a report); an
    error there is raised on every rank (see ``agree``). Returns rank 0's result on rank 0."""
    if comm.Get_rank() == 0:
        return run_collectively(comm, func, *args, **kwargs)
    return run_collectively(comm, lambda: None)


def polite_barrier(comm, poll=0.01):
    """Collective: a barrier that sleeps while it waits, so waiting ranks leave the cores to
    the ranks still working (a plain ``Barrier`` may spin at full speed)."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(poll)


def local_rank_count(comm):
    """Number of ranks of ``comm`` that share this node."""
    from mpi4py import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_size()
    finally:
        node.Free()


# The launcher's count of this job's processes on this node: MPICH's and Intel MPI's Hydra,
# Open MPI. Read without communication, so a model on COMM_SELF under mpiexec sees it too.
LOCAL_SIZE_VARIABLES = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE")


def launcher_local_size():
    """This node's process count as the MPI launcher set it, or None."""
    for var in LOCAL_SIZE_VARIABLES:
        value = os.environ.get(var, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return None




def abort_on_exception(comm, func, *args, **kwargs):
    """Run ``func``; a user error exits every rank with status 1, anything else aborts the job
    (a BrokenPipeError that every rank raised is raised again, for the caller to exit quietly).

    An error raised on every rank at once (see ``agree``) is printed by rank 0 and all
    ranks exit 1. Any other exception may be local to one rank while the others wait in
    a collective, so that rank prints it and calls ``comm.Abort(1)``, which ends the
    whole job instead of hanging.
    """
    try:
        return func(*args, **kwargs)
    except PPackError as exc:
        if getattr(exc, "collective", False) or comm.Get_size() == 1:
            if comm.Get_rank() == 0:
                print(f"ppack: error: {exc}", file=sys.stderr, flush=True)
            sys.exit(1)
        print(f"ppack: error on rank {comm.Get_rank()}: {exc}", file=sys.stderr, flush=True)
        time.sleep(ABORT_GRACE_SECONDS)
        comm.Abort(1)
    except KeyboardInterrupt:
        comm.Abort(130)
    except BrokenPipeError as exc:
        # stdout's reader left (`info m.h5 | head -3`): the caller exits quietly where every
        # rank knows it; one rank alone would leave the others waiting, so it ends the job
        if getattr(exc, "collective", False) or comm.Get_size() == 1:
            raise
        comm.Abort(BROKEN_PIPE_STATUS)
    except SystemExit:
        raise
    except BaseException:  # noqa: BLE001
        # one write, then a moment for mpiexec to forward it before Abort tears the job down
        sys.stderr.write(f"ppack: rank {comm.Get_rank()} failed:\n{traceback.format_exc()}")
        sys.stderr.flush()
        time.sleep(ABORT_GRACE_SECONDS)
        comm.Abort(1)
