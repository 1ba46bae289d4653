"""Ranks grouped by node, for work done once per node (a file written by the node's leader).

A node is, by default, the ranks that share memory (``MPI_COMM_TYPE_SHARED``). The
environment variable ``PPACK_RANKS_PER_NODE=k`` groups ranks 0..k-1, k..2k-1, ... instead:
one machine then plays several nodes (the tests do), or a site picks smaller groups.
"""
import os
from contextlib import contextmanager

from mpi4py import MPI

from ..errors import PPackError
from .comm import run_collectively

RANKS_PER_NODE_VARIABLE = "PPACK_RANKS_PER_NODE"


class NodeGroups:
    """This rank's node and the node leaders.

    node: the communicator of this node's ranks, in world-rank order (its rank 0 is the
    node's leader); leaders: the communicator of the leaders, in world-rank order (so world
    rank 0 leads the first node), None on the other ranks; count: the number of nodes.
    """

    def __init__(self, node, leaders, count):
        self.node, self.leaders, self.count = node, leaders, count

    @property
    def leader(self):
        return self.node.Get_rank() == 0


def ranks_per_node_setting():
    """``PPACK_RANKS_PER_NODE`` as a positive int, or None when unset or empty."""
    text = os.environ.get(RANKS_PER_NODE_VARIABLE, "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise PPackError(f"environment variable {RANKS_PER_NODE_VARIABLE}: expected a positive number of ranks "
                         f"per node, got {text!r}")
    return int(text)


@contextmanager
def node_groups(comm, ranks_per_node=None):
    """Collective: the ``NodeGroups`` of ``comm``, freed on exit. ``ranks_per_node``: k ranks per
    group in rank order; None: ``PPACK_RANKS_PER_NODE``, else the shared-memory nodes."""
    rank = comm.Get_rank()
    if ranks_per_node is None:
        ranks_per_node = run_collectively(comm, ranks_per_node_setting)
    if ranks_per_node is None:
        node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
    else:
        node = comm.Split(rank // ranks_per_node, key=rank)
    leading = node.Get_rank() == 0
    leaders = comm.Split(0 if leading else MPI.UNDEFINED, key=rank)
    count = comm.allreduce(int(leading))
    try:
        yield NodeGroups(node, leaders if leading else None, count)
    finally:
        node.Free()
        if leading:
            leaders.Free()
