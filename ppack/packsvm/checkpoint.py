"""Checkpoints of the packed solver: the full state, written atomically, read on any rank count.

One HDF5 file (format "ppack-checkpoint"): every rank's table shard (keys, coefficients,
feature vectors, and the rank that held each entry, in slot order), the scalars of the
model (iteration, scale, norm), the sampler's exact position, the windows of the --tol
test, the run statistics and the training parameters. Rank 0 writes it to a temporary
file beside the target and renames it into place; the attribute ``complete`` is set
last, so a file without it is never trusted. Resuming on the same number of ranks
restores every entry to its rank and slot, so the run continues exactly as if it had not
stopped; on another number of ranks the entries are dealt out evenly.
"""
import json
from pathlib import Path

import h5py
import numpy as np
import scipy.sparse as sp

from ..atomic import atomic_h5_write
from ..data.sampler import RowSampler
from ..errors import InputError
from ..kernels.ops import row_norms
from ..mpi.comm import chunk, on_rank0, run_collectively
from .state import LossWindows, SolverState, SolverStats
from .table import SupportVectorTable, gathered

FORMAT = "ppack-checkpoint"
FORMAT_VERSION = 1


def write_checkpoint(comm, path, table, state, stats, sampler, params):
    """Collective: gather the table shards on rank 0, which writes ``path`` atomically."""
    entries = gathered(comm, table)

    def write(f):
        keys, coef, X, owner = entries
        sampler_state, sampler_block = sampler.state()
        f.attrs.update(format=FORMAT, format_version=FORMAT_VERSION, ranks=comm.Get_size(),
                       params=json.dumps(params, sort_keys=True), iteration=state.iteration,
                       scale=state.scale, norm=state.norm, sampler=json.dumps(sampler_state),
                       loss_windows=json.dumps(state.loss_windows.as_dict()),
                       stats=json.dumps(stats.as_dict()),
                       storage="csr" if table.sparse else "dense", n_features=table.n_features)
        f["sampler_block"] = sampler_block
        f["keys"] = keys
        f["coef"] = coef
        f["owner"] = owner
        if table.sparse:
            f["indptr"] = X.indptr.astype(np.int64)
            f["indices"] = X.indices.astype(np.int32)
            f["values"] = X.data
        else:
            f["features"] = X
        f.attrs["complete"] = True

    on_rank0(comm, atomic_h5_write, path, write)


def read_checkpoint(comm, path, params, spec, dtype, tol_window):
    """Collective: ``(table, state, stats, sampler)`` of this rank from a checkpoint.

    ``params`` must match the checkpoint's training parameters except ``iterations`` (a
    run may be continued longer). The --tol windows continue when ``tol_window`` is the
    checkpoint's, else they start afresh. Raises InputError naming the file and the mismatch.
    """
    def load():
        with h5py.File(path, "r") as f:
            a = f.attrs
            _check_header(path, a, params)
            owner = f["owner"][()]
            size, rank = comm.Get_size(), comm.Get_rank()
            same_layout = int(a["ranks"]) == size
            if same_layout:
                mine = np.flatnonzero(owner == rank)
                occupancy = np.bincount(owner, minlength=size)
            else:
                start, stop = chunk(len(owner), rank, size)
                mine = np.arange(start, stop)
                occupancy = np.array([hi - lo for lo, hi in (chunk(len(owner), k, size) for k in range(size))])
            n_features = int(a["n_features"])
            table = SupportVectorTable(n_features, a["storage"] == "csr", dtype)
            if a["storage"] == "csr":
                X = sp.csr_matrix((f["values"][()], f["indices"][()], f["indptr"][()]),
                                  shape=(len(owner), n_features))[mine]
            else:
                X = f["features"][()][mine]
            X = X.astype(dtype)
            table.insert_many(f["keys"][()][mine], f["coef"][()][mine], X, row_norms(X, spec))
            windows = json.loads(a["loss_windows"]) if "loss_windows" in a else {}  # absent in older files
            if windows.get("size") != tol_window:
                windows = {"size": tol_window}
            state = SolverState(int(a["iteration"]), float(a["scale"]), float(a["norm"]),
                                occupancy.astype(np.int64), LossWindows(**windows))
            saved_stats = json.loads(a["stats"])
            stats = SolverStats(saved_stats["packs"], saved_stats["allreduce_calls"], saved_stats["projections"],
                                saved_stats["hinge_moving_average"], saved_stats["seconds"])
            sampler = RowSampler.from_state(json.loads(a["sampler"]), f["sampler_block"][()])
            return table, state, stats, sampler

    if not Path(path).exists():
        raise InputError("No such checkpoint file", path)
    return run_collectively(comm, load)


def check_checkpoint_file(path, params=None):
    """Whether ``path`` holds a checkpoint: False when there is no file; True for a complete
    ppack checkpoint (made with ``params``, when given, all but ``iterations``); anything
    else at that path raises InputError naming the file and what is wrong, so it is never
    overwritten or silently ignored."""
    if not Path(path).exists():
        return False
    try:
        with h5py.File(path, "r") as f:
            _check_header(path, f.attrs, params)
    except OSError as exc:
        raise InputError(f"not a readable HDF5 file ({exc}); --checkpoint must name a ppack checkpoint "
                         "or a file that does not exist yet", path) from None
    return True


def _check_header(path, attrs, params):
    if attrs.get("format") != FORMAT:
        raise InputError(f"attribute 'format': expected {FORMAT!r}, got {attrs.get('format')!r}; --checkpoint must "
                         "name a ppack checkpoint or a file that does not exist yet", path)
    if not attrs.get("complete", False):
        raise InputError("attribute 'complete' is not set: the checkpoint was not written to the end", path)
    if params is None:
        return
    saved = json.loads(attrs["params"])
    for name, value in params.items():
        if name != "iterations" and saved.get(name) != value:
            raise InputError(f"checkpoint was made with {name}={saved.get(name)!r}, this run has "
                             f"{name}={value!r}; resume with the same settings (or another --checkpoint)", path)
