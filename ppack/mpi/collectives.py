"""Every buffer collective of ppack, in one object: timed, counted, one place to change.

Hot data crosses ranks only here, as preallocated numpy buffers with explicit dtypes
(capitalised mpi4py calls); pickled, lowercase calls carry small control data
elsewhere. A node-aware reduction, another communicator layout or a fault-tolerant
collective is a change to this class only.
"""
from collections import Counter

import numpy as np
from mpi4py import MPI


class Collectives:
    """Buffer collectives over ``comm``. ``calls`` counts each operation by name ("sum", "max",
    "broadcast", "sum_to_root", "gather_to_root", "exchange"), ``seconds`` their total
    wall time, ``last_seconds`` the most recent one's, ``last_start`` its start (``MPI.Wtime``)
    and ``last_bytes`` the bytes of the buffer this rank passed to it."""

    def __init__(self, comm):
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.calls = Counter()
        self.seconds = 0.0
        self.last_seconds = 0.0
        self.last_start = 0.0
        self.last_bytes = 0

    def _timed(self, name, start, nbytes):
        self.last_start = start
        self.last_seconds = MPI.Wtime() - start
        self.seconds += self.last_seconds
        self.last_bytes = nbytes
        self.calls[name] += 1

    def sum(self, buf):
        """Sum the contiguous array ``buf`` over all ranks, in place (one Allreduce). Integer
        sums are exact: a byte buffer (uint8) in which each byte is nonzero on one rank at most
        arrives as written, whatever the bytes encode. Over one rank the sum is ``buf`` itself:
        no MPI call is made, and the sum is counted all the same (``counted_sum``)."""
        start = MPI.Wtime()
        if self.size > 1:
            self.comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        self._timed("sum", start, buf.nbytes)
        return buf

    def counted_sum(self, nbytes):
        """Count a sum over one rank of a buffer of ``nbytes`` that the caller never made
        (``Delivery`` takes a one-rank pack's rows straight from the shard): as ``sum``
        counts one, taking no time. One rank only."""
        if self.size != 1:
            raise ValueError(f"counted_sum: a sum over {self.size} ranks must be made, not counted")
        self._timed("sum", MPI.Wtime(), int(nbytes))

    def start_sum(self, buf):
        """Start summing ``buf`` over all ranks in place (one Iallreduce, counted as a "sum"):
        returns the MPI request, to be passed to ``test`` and ``wait``. ``buf`` must not be
        read or written until ``wait`` returns. Over one rank nothing is started (the request
        is MPI's null request, done already)."""
        start = MPI.Wtime()
        request = self.comm.Iallreduce(MPI.IN_PLACE, buf, op=MPI.SUM) if self.size > 1 else MPI.Request()
        self._timed("sum", start, buf.nbytes)
        return request

    @staticmethod
    def test(requests, polls=16):
        """Let MPI progress ``requests`` (a list) without blocking; True when all are done. Up to
        ``polls`` tests in a row: most steps of a non-blocking Allreduce are local and take one
        test each (two ranks' pair of a pack's Iallreduce calls needed 9 tests one at a time, 0.5
        ms apart, and at most one round of 10 in a row, with the mpich wheel); a test with nothing
        to do costs about a microsecond."""
        for _ in range(polls):
            if MPI.Request.Testall(requests):
                return True
        return False

    @staticmethod
    def wait_all(requests):
        """Block until every request in ``requests`` is done (after an error: none is left behind)."""
        MPI.Request.Waitall(requests)

    def wait(self, request):
        """Block until ``request`` is done; ``last_seconds`` is the time spent waiting."""
        start = MPI.Wtime()
        request.Wait()
        self.last_start = start
        self.last_seconds = MPI.Wtime() - start
        self.seconds += self.last_seconds

    def max(self, buf):
        """The elementwise maximum of ``buf`` over all ranks, in place (one Allreduce)."""
        start = MPI.Wtime()
        self.comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.MAX)
        self._timed("max", start, buf.nbytes)
        return buf

    def broadcast(self, buf, root=0):
        """``root``'s contiguous array ``buf`` on every rank, in place (one Bcast); the other
        ranks pass an array of the same shape and dtype to receive it."""
        start = MPI.Wtime()
        self.comm.Bcast(buf, root=root)
        self._timed("broadcast", start, buf.nbytes)
        return buf

    def sum_to_root(self, buf, root=0):
        """The sum of ``buf`` over all ranks on ``root`` (a new array), None elsewhere (one Reduce)."""
        start = MPI.Wtime()
        total = np.empty_like(buf) if self.rank == root else None
        self.comm.Reduce(buf, total, op=MPI.SUM, root=root)
        self._timed("sum_to_root", start, buf.nbytes)
        return total

    def gather_to_root(self, local, root=0):
        """The 1-D arrays ``local`` of every rank, concatenated in rank order on ``root``
        (None elsewhere); every rank passes the same dtype (one Gather of the lengths, one Gatherv)."""
        start = MPI.Wtime()
        local = np.ascontiguousarray(local)
        counts = np.empty(self.size, dtype=np.int64) if self.rank == root else None
        self.comm.Gather(np.array([local.size], dtype=np.int64), counts, root=root)
        out = None
        if self.rank == root:
            out = np.empty(int(counts.sum()), dtype=local.dtype)
            self.comm.Gatherv(local, (out, counts), root=root)
        else:
            self.comm.Gatherv(local, None, root=root)
        self._timed("gather_to_root", start, local.nbytes)
        return out

    def exchange(self, parts):
        """All-to-all: ``parts[k]`` (a 1-D array, one dtype for all) goes to rank k; returns
        the arrays received, one per source rank in rank order (one Alltoall of the
        lengths, one Alltoallv)."""
        start = MPI.Wtime()
        dtype = parts[0].dtype
        send_counts = np.array([len(p) for p in parts], dtype=np.int64)
        recv_counts = np.empty(self.size, dtype=np.int64)
        self.comm.Alltoall(send_counts, recv_counts)
        send = np.ascontiguousarray(np.concatenate(parts).astype(dtype, copy=False))
        recv = np.empty(int(recv_counts.sum()), dtype=dtype)
        self.comm.Alltoallv((send, send_counts), (recv, recv_counts))
        self._timed("exchange", start, send.nbytes)
        return np.split(recv, np.cumsum(recv_counts)[:-1])
