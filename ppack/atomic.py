"""Output files appear whole or not at all: write beside the target, then rename over it."""
import os
import time
from pathlib import Path

import h5py
import numpy as np

from .mpi.comm import agree


def atomic_write(path, write, mode="w"):
    """Call ``write(file)`` on a temporary file beside ``path``, then rename it into place.

    ``mode`` is "w" (text), "wb" (bytes) or "h5" (an h5py File). On any error the
    temporary file is removed, so no half-written output is left.
    """
    path = Path(path)
    tmp = temporary_path(path)
    try:
        if mode == "h5":
            with h5py.File(tmp, "w") as f:
                write(f)
        else:
            with open(tmp, mode) as f:
                write(f)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_h5_write(path, write):
    """``atomic_write`` for an HDF5 file: ``write`` receives the open h5py File."""
    atomic_write(path, write, mode="h5")


def collective_h5_write(comm, path, create, write_own, finish=None, poll=0.01):
    """Collective: one HDF5 file written rank by rank, atomically.

    Rank 0 creates the temporary file beside ``path`` and calls ``create(f)`` (every
    dataset pre-sized), then the ranks take turns in rank order, each calling
    ``write_own(f)`` on the file opened "r+" to fill its own slice (a token passes from
    rank k-1 to rank k, so only one rank has the file open and each holds only its own
    data), then rank 0 calls ``finish(f)`` and renames the file into place. An error on
    any rank is raised on every rank (see ``mpi.comm.agree``) and the temporary file is
    removed, so no half-written output is left.
    """
    rank, size = comm.Get_rank(), comm.Get_size()
    path = Path(path)
    tmp = Path(comm.bcast(str(temporary_path(path)) if rank == 0 else None, root=0))

    def attempt(func):
        try:
            func()
        except Exception as exc:  # noqa: BLE001 - re-raised on every rank by agree
            return exc
        return None

    def created():
        with h5py.File(tmp, "w") as f:
            create(f)

    def own():
        with h5py.File(tmp, "r+") as f:
            write_own(f)

    def finished():
        if finish is not None:
            with h5py.File(tmp, "r+") as f:
                finish(f)
        os.replace(tmp, path)

    try:
        agree(comm, attempt(created) if rank == 0 else None)
        # Turns: rank k waits for rank k-1's token (1: all went well so far), writes, passes it on.
        token = np.ones(1, dtype=np.int64)
        if rank > 0:
            request = comm.Irecv(token, source=rank - 1, tag=_TURN_TAG)
            while not request.Test():
                time.sleep(poll)
        error = attempt(own) if token[0] == 1 else None
        if rank + 1 < size:
            comm.Send(np.array([1 if token[0] == 1 and error is None else 0], dtype=np.int64),
                      dest=rank + 1, tag=_TURN_TAG)
        agree(comm, error)
        agree(comm, attempt(finished) if rank == 0 else None)
    except BaseException:
        if rank == 0:
            tmp.unlink(missing_ok=True)
        raise


_TURN_TAG = 7301


def temporary_path(path):
    """A hidden file name beside ``path`` for writing it before the rename."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")
