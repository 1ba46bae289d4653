"""mnist8m-style data sets of any size, generated in parallel into the ppack HDF5 layout.

Row i of an N-row set is MNIST training digit ``i mod 60000``: unchanged for the first
60,000 rows (the originals, as in mnist8m), deformed with the fields of row id i
(``deform.deformed``) after that. A row depends only on (seed, i), so any number of ranks
writes the same file. Pixels are stored as uint8 with ``value_scale`` 1/255 (values in
[0, 1]); labels are the digits 0..9.

Ranks generate in rounds: in each round every rank makes its slice of the next block of
rows and rank 0 gathers the block and writes it, so rank 0 holds at most ``ROUND_BYTES``
of rows whatever N is, and every other rank one slice.
"""
from pathlib import Path

import h5py
import numpy as np

from ..atomic import temporary_path
from ..errors import InputError
from ..mpi.collectives import Collectives
from ..mpi.comm import agree, chunk, on_rank0, run_collectively
from .deform import deformed
from .hdf5 import create_layout, write_dataset
from .mnist import PIXEL_SCALE, SIDE, read_split

ROUND_BYTES = 32 * 2**20
MAX_ROWS_PER_RANK = 4096
ROW_BYTES = SIDE * SIDE
DEFORM_BATCH = 512


def generated_rows(images, labels, seed, start, stop):
    """Rows ``[start, stop)`` of the set made from ``images`` (n, 784) uint8 and ``labels`` (n,):
    (X (stop - start, 784) uint8, y (stop - start,) float64)."""
    ids = np.arange(start, stop, dtype=np.int64)
    source = ids % len(images)
    X = images[source]
    for b0 in range(0, len(ids), DEFORM_BATCH):  # the fields take 12.5 kB a row: a batch at a time
        batch = slice(b0, b0 + DEFORM_BATCH)
        fresh = np.flatnonzero(ids[batch] >= len(images)) + b0
        if len(fresh):
            X[fresh] = deformed(X[fresh], seed, ids[fresh])
    return X, labels[source].astype(np.float64)


def rows_per_rank(size):
    """Rows each rank makes per round: rank 0 then gathers at most ROUND_BYTES."""
    return max(1, min(MAX_ROWS_PER_RANK, ROUND_BYTES // (size * ROW_BYTES)))


def write_originals(train_path, test_path, source, compression="gzip"):
    """Write the MNIST training and test splits of ``source`` as two data files (uint8 pixels
    with value_scale 1/255, labels 0..9). Returns the rows of each: (train, test)."""
    rows = []
    for split, out in (("train", train_path), ("test", test_path)):
        images, labels = read_split(source, split)
        write_dataset(out, images * PIXEL_SCALE, labels, storage="dense", dtype=np.uint8,
                      compression=compression, value_scale=PIXEL_SCALE)
        rows.append(len(images))
    return tuple(rows)


def write_mnist8m(comm, source, path, n_rows, seed=0, compression="gzip", on_round=None):
    """Collective: write an ``n_rows``-row mnist8m-style set to ``path`` (atomically) from the
    MNIST training files in the folder ``source``. ``on_round(rows_done)`` is called on
    rank 0 after each round. Returns (rows written, of which originals)."""
    if isinstance(n_rows, bool) or not isinstance(n_rows, (int, np.integer)) or n_rows < 1:
        raise InputError(f"--rows: expected a whole number >= 1, got {n_rows!r}", collective=True)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**63:
        raise InputError(f"--seed: expected a whole number in 0..2^63-1, got {seed!r}", collective=True)
    images, labels = run_collectively(comm, read_split, source, "train")
    rank, size = comm.Get_rank(), comm.Get_size()
    per_round = rows_per_rank(size) * size
    collectives = Collectives(comm)
    path = Path(path)
    tmp = temporary_path(path)
    opened = []  # rank 0: the open temporary file

    def create():
        opened.append(h5py.File(tmp, "w"))
        return create_layout(opened[0], n_rows, ROW_BYTES, "dense", np.uint8, value_scale=PIXEL_SCALE,
                             compression=compression)

    def finish():
        opened.pop().close()
        tmp.replace(path)

    try:
        datasets = on_rank0(comm, create)
        for r0 in range(0, n_rows, per_round):
            r1 = min(n_rows, r0 + per_round)
            lo, hi = chunk(r1 - r0, rank, size)
            X, y = generated_rows(images, labels, seed, r0 + lo, r0 + hi)
            block_X = collectives.gather_to_root(X.ravel())
            block_y = collectives.gather_to_root(y)
            error = None
            if rank == 0:
                try:
                    datasets["X"][r0:r1] = block_X.reshape(r1 - r0, ROW_BYTES)
                    datasets["y"][r0:r1] = block_y
                    if on_round is not None:
                        on_round(r1)
                except Exception as exc:  # noqa: BLE001 - raised on every rank by agree
                    error = exc
            agree(comm, error)
        on_rank0(comm, finish)
    except BaseException:
        if rank == 0:
            for f in opened:
                f.close()
            tmp.unlink(missing_ok=True)
        raise
    return n_rows, min(n_rows, len(images))
