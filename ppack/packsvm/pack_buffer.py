"""Collective 2's buffer: everything a pack sums across ranks, in one float64 Allreduce."""
import numpy as np

# the columns of ``PackBuffer.timings``: a rank's seconds from the end of the previous pack's
# collective 2 to the start of collective 1 (the replicated work: replay, table update,
# sampling, delivery), from the end of collective 1 to the start of collective 2 (its local
# work), and of that its partial sums (the work that grows with the rows it stores)
SERIAL, LOCAL, PARTIAL_SUMS = 0, 1, 2


class PackBuffer:
    """The layout of collective 2 for a pack of r rows, K binary problems and p ranks.

    In order: ``predictions`` (K, r), this rank's partial sums of the stored entries'
    kernel values; ``pairs`` (G r (r + 1) / 2), the pack's pair kernels, the upper triangle
    with its diagonal row by row, each rank filling its chunk, one triangle per kernel group
    (``groups`` G, ``compute.KernelGroups``; ``group_pairs`` (G, r (r + 1) / 2) views them);
    ``owner_flags`` (r), rank + 1
    where this rank holds the row's entry (so the sum names the owner), else 0; ``digests``
    (p), each rank's replica digest in its own slot; ``timings`` (p, 3), each rank's seconds
    in its own row (``SERIAL``, ``LOCAL``, ``PARTIAL_SUMS`` below); then two votes, rank 0's
    "checkpoint is due" and anyone's "stop". All views of one zeroed array, ``data``. A value
    in one rank's slot arrives exact on every rank: the others add zeros.
    """

    def __init__(self, columns, r, ranks, groups=1):
        self.r = r
        self.data = np.zeros(self.length(columns, r, ranks, groups))
        n_pred, n_pairs = columns * r, groups * (r * (r + 1) // 2)
        self.predictions = self.data[:n_pred].reshape(columns, r)
        self.pairs = self.data[n_pred:n_pred + n_pairs]
        self.group_pairs = self.pairs.reshape(groups, n_pairs // groups)
        self.owner_flags = self.data[n_pred + n_pairs:n_pred + n_pairs + r]
        start = n_pred + n_pairs + r
        self.digests = self.data[start:start + ranks]
        self.timings = self.data[start + ranks:start + 4 * ranks].reshape(ranks, 3)
        self._votes = self.data[-2:]
        self.pair_arguments = None  # this rank's share of the pairs, for the pack loop (``loop.pair_arguments``)

    @staticmethod
    def length(columns, r, ranks, groups=1):
        """Float64 entries of the buffer."""
        return columns * r + groups * (r * (r + 1) // 2) + r + 4 * ranks + 2

    def clear(self):
        """Zero the buffer for the next pack of the same size."""
        self.data[:] = 0.0

    def vote(self, checkpoint_due, stop):
        """This rank's two votes (booleans), before the sum."""
        self._votes[0] = 1.0 if checkpoint_due else 0.0
        self._votes[1] = 1.0 if stop else 0.0

    def owners(self):
        """After the sum: the rank that holds each row's entry, -1 where none does (int64 (r,))."""
        return np.rint(self.owner_flags).astype(np.int64) - 1

    @property
    def checkpoint_due(self):
        """After the sum: rank 0 voted for a checkpoint."""
        return self._votes[0] > 0

    @property
    def stop(self):
        """After the sum: some rank voted to stop."""
        return self._votes[1] > 0
