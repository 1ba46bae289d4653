"""One HDF5 file written by every rank together, atomically, in few sequential file opens.

Each rank contributes ``Part``s: rows of pre-sized datasets (its own support vectors, say).
The file is written beside the target and renamed into place at the end; an error on any
rank is raised on every rank (``mpi.comm.agree``) and the temporary file is removed, so no
half-written output is left, and no rank is left waiting.

Two ways, the same file either way (readers cannot tell them apart):
- "parallel" where h5py is built with parallel HDF5 (``h5py.get_config().mpi``): rank 0
  creates the file (every dataset pre-sized), then all ranks open it at once with the MPI-IO
  driver and write their own parts: 2 sequential opens, whatever the ranks.
- "node leaders" otherwise: the ranks are grouped by node (``mpi.nodes``); the leaders take
  turns, a token passed by blocking receives from one to the next. The first leader (rank 0)
  creates the file; each leader, in its turn, opens it, writes its own parts, then its node's
  other ranks' parts, which they send it one by one in pieces of at most ``PIECE_BYTES`` (or
  one row, if longer); the last one calls ``finish``. One open per node.
So a rank holds its own parts plus one piece, and the sequential opens are at most the nodes
plus one. ``WriteReport`` says which way ran and how many opens it took.
"""
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import h5py
import numpy as np
from mpi4py import MPI

from .atomic import temporary_path
from .errors import PPackError
from .mpi.comm import agree
from .mpi.nodes import node_groups

PIECE_BYTES = 4 << 20  # a node leader's receive buffer
_TURN, _HEADERS, _PIECE = 7301, 7303, 7304  # message tags


class Part(NamedTuple):
    """Rows ``start:start + len(data)`` of the dataset ``name`` (a path in the file)."""

    name: str
    start: int
    data: np.ndarray


@dataclass
class WriteReport:
    """How a collective write went: ``method`` ("parallel" or "node leaders"), ``opens`` (the
    file opens made one after another, counted as they happened) and ``nodes`` (the node
    groups; None for "parallel", which does not group)."""

    method: str
    opens: int
    nodes: int = None


def parallel_hdf5():
    """Whether h5py is built with parallel HDF5 (and so can open a file on every rank at once)."""
    return bool(h5py.get_config().mpi)


def collective_h5_write(comm, path, create, own_parts, finish=None, ranks_per_node=None, piece_bytes=PIECE_BYTES,
                        parallel=None):
    """Collective: write ``path`` atomically; returns a ``WriteReport`` (the same on every rank).

    create(f): called once, on rank 0, on the new file: attributes and every dataset
    pre-sized; own_parts(): this rank's ``Part``s (a list); finish(f): called once, after every part is
    written (the last thing before the rename, such as a "complete" attribute).
    ranks_per_node: the node grouping (see ``mpi.nodes.node_groups``); parallel: the
    parallel way, by default where h5py has it.
    """
    rank = comm.Get_rank()
    path = Path(path)
    tmp = Path(comm.bcast(str(temporary_path(path)) if rank == 0 else None, root=0))
    parallel = parallel_hdf5() if parallel is None else parallel
    if parallel and not parallel_hdf5():
        raise PPackError(f"{path}: parallel HDF5 writing asked for, but this h5py is built without MPI "
                         "(h5py.get_config().mpi is False)", collective=True)
    parts = []

    def collect():
        parts.extend(own_parts())

    agree(comm, _attempt(collect))
    try:
        if parallel:
            report = _write_in_parallel(comm, tmp, create, parts, finish)
        else:
            report = _write_by_node_leaders(comm, tmp, create, parts, finish, ranks_per_node, piece_bytes)
        agree(comm, _attempt(lambda: os.replace(tmp, path)) if rank == 0 else None)
        return report
    except BaseException:
        if rank == 0:
            tmp.unlink(missing_ok=True)
        raise


def _attempt(func):
    """The exception ``func()`` raises, or None."""
    try:
        func()
    except Exception as exc:  # noqa: BLE001 - re-raised on every rank by agree
        return exc
    return None


def write_part(f, part):
    """Write one ``Part`` into the open file ``f`` (nothing for no rows)."""
    if len(part.data):
        f[part.name][part.start:part.start + len(part.data)] = part.data


# -- node leaders --------------------------------------------------------------------
def _write_by_node_leaders(comm, tmp, create, parts, finish, ranks_per_node, piece_bytes):
    with node_groups(comm, ranks_per_node) as groups:
        opens, error = 0, None
        if groups.leader:
            opens, error = _leader_turn(groups, tmp, create, parts, finish, piece_bytes)
        else:
            _member_turn(groups.node, parts, piece_bytes)
        agree(comm, error)
        return WriteReport("node leaders", comm.allreduce(opens), groups.count)


def _leader_turn(groups, tmp, create, parts, finish, piece_bytes):
    """Wait for the previous leader's token, write this node's parts, pass the token on.
    Returns ``(opens, error)``. The node's other ranks' pieces are received whatever happens
    (and dropped after an error, here or at an earlier leader), so that no one waits forever."""
    leaders, node = groups.leaders, groups.node
    turn, last = leaders.Get_rank(), leaders.Get_rank() == leaders.Get_size() - 1
    healthy = np.ones(1, dtype=np.int64)  # the token: 1 while every leader before wrote without error
    if turn > 0:
        leaders.Recv(healthy, source=turn - 1, tag=_TURN)
    opens, error, f = 0, None, None
    if healthy[0]:
        try:
            f = h5py.File(tmp, "w" if turn == 0 else "r+")
            opens = 1
            if turn == 0:
                create(f)
            for part in parts:
                write_part(f, part)
        except Exception as exc:  # noqa: BLE001 - re-raised on every rank by agree
            error = exc
    buffer = np.empty(piece_bytes if node.Get_size() > 1 else 0, dtype=np.uint8)
    for member in range(1, node.Get_size()):
        for name, start, shape, dtype in node.recv(source=member, tag=_HEADERS):
            size = int(np.prod(shape)) * np.dtype(dtype).itemsize
            if size > buffer.size:  # a row longer than a piece
                buffer = np.empty(size, dtype=np.uint8)
            node.Recv([buffer[:size], size, MPI.BYTE], source=member, tag=_PIECE)
            if f is not None and error is None:
                data = buffer[:size].view(dtype).reshape(shape)
                error = _attempt(lambda: write_part(f, Part(name, start, data)))
    if f is not None:
        if last and error is None and finish is not None:
            error = _attempt(lambda: finish(f))
        closing = _attempt(f.close)
        error = error or closing
    if not last:
        leaders.Send(np.array([healthy[0] and error is None], dtype=np.int64), dest=turn + 1, tag=_TURN)
    return opens, error


def _member_turn(node, parts, piece_bytes):
    """Send this rank's parts to the node's leader, in pieces (each waits until the leader,
    in its turn, receives it, unless MPI buffers so small a message)."""
    pieces = list(_pieces(parts, piece_bytes))
    node.send([(p.name, p.start, p.data.shape, p.data.dtype.str) for p in pieces], dest=0, tag=_HEADERS)
    for piece in pieces:
        data = np.ascontiguousarray(piece.data)
        node.Send([data.reshape(-1).view(np.uint8), data.nbytes, MPI.BYTE], dest=0, tag=_PIECE)


def _pieces(parts, piece_bytes):
    """The parts cut along their rows into pieces of at most ``piece_bytes`` (at least one row)."""
    for part in parts:
        row_bytes = max(1, part.data[:1].nbytes) if len(part.data) else 1
        rows = max(1, piece_bytes // row_bytes)
        for a in range(0, len(part.data), rows):
            yield Part(part.name, part.start + a, part.data[a:a + rows])


# -- parallel HDF5 ---------------------------------------------------------------------
def _write_in_parallel(comm, tmp, create, parts, finish):
    """Rank 0 creates the file; then every rank opens it at once (MPI-IO) and writes its parts.
    Every rank opens every dataset, in the same order (parallel HDF5's metadata calls are
    collective), writes its own rows independently; all check for errors before the
    collective close."""
    rank = comm.Get_rank()

    def created():
        with h5py.File(tmp, "w") as f:
            create(f)

    agree(comm, _attempt(created) if rank == 0 else None)
    mpio = comm.Dup()  # an mpi4py communicator, even where ``comm`` wraps one (tests count calls)
    try:
        _write_parts_together(comm, mpio, tmp, parts, finish)
    finally:
        mpio.Free()
    return WriteReport("parallel", 2)


def _write_parts_together(comm, mpio, tmp, parts, finish):
    with h5py.File(tmp, "r+", driver="mpio", comm=mpio) as f:
        names = []
        f.visititems(lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None)
        for name in sorted(names):
            f[name]  # opened on every rank alike
        agree(comm, _attempt(lambda: [write_part(f, part) for part in parts]))
        if finish is not None:
            finish(f)  # collective: the same attributes on every rank
