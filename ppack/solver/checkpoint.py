"""Checkpoints of the packed solver: the full state, written atomically, read on any rank count.

One HDF5 file (format "ppack-checkpoint"): every rank's table shard (keys, coefficients,
feature vectors, and the rank that held each entry, in slot order), the scalars of the
model (iteration, scale, norm), the sampler's exact position, the run statistics and the
training parameters. Rank 0 writes it to a temporary file beside the target and renames
it into place; the attribute ``complete`` is set last, so a file without it is never
trusted. Resuming on the same number of ranks restores every entry to its rank and slot,
so the run continues exactly as if it had not stopped; on another number of ranks the
entries are dealt out evenly.
"""
import json
from pathlib import Path

import h5py
import numpy as np
import scipy.sparse as sp

from ..comm import chunk, run_collectively
from ..errors import InputError
from ..model import atomic_h5_write
from ..table import SupportVectorTable
from .sampler import RowSampler

FORMAT = "ppack-checkpoint"
FORMAT_VERSION = 1


def write_checkpoint(comm, path, table, state, stats, sampler, params):
    """Collective: gather the table shards on rank 0, which writes ``path`` atomically."""
    if table.sparse:
        indptr, indices, values = table.features
        features = (np.diff(indptr), indices, values)
    else:
        features = (table.features,)
    parts = comm.gather((table.keys, table.coef, features), root=0)
    if comm.Get_rank() != 0:
        run_collectively(comm, lambda: None)
        return
    sampler_state, sampler_block = sampler.state()

    def write(f):
        f.attrs.update(format=FORMAT, format_version=FORMAT_VERSION, ranks=comm.Get_size(),
                       params=json.dumps(params, sort_keys=True), iteration=state.iteration,
                       scale=state.scale, norm=state.norm, sampler=json.dumps(sampler_state),
                       stats=json.dumps({"packs": stats.packs, "allreduce_calls": stats.allreduce_calls,
                                         "projections": stats.projections,
                                         "hinge_moving_average": stats.hinge_moving_average,
                                         "seconds": stats.seconds}),
                       storage="csr" if table.sparse else "dense", n_features=table.n_features)
        f["sampler_block"] = sampler_block
        f["keys"] = np.concatenate([p[0] for p in parts])
        f["coef"] = np.concatenate([p[1] for p in parts])
        f["owner"] = np.concatenate([np.full(len(p[0]), rank, dtype=np.int32) for rank, p in enumerate(parts)])
        if table.sparse:
            counts = np.concatenate([p[2][0] for p in parts])
            f["indptr"] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            f["indices"] = np.concatenate([p[2][1] for p in parts]).astype(np.int32)
            f["values"] = np.concatenate([p[2][2] for p in parts])
        else:
            f["features"] = np.concatenate([p[2][0] for p in parts]).reshape(-1, table.n_features)
        f.attrs["complete"] = True

    run_collectively(comm, atomic_h5_write, path, write)


def read_checkpoint(comm, path, params, spec, dtype, work_bytes):
    """Collective: ``(table, state, stats, sampler)`` of this rank from a checkpoint.

    ``params`` must match the checkpoint's training parameters except ``iterations`` (a
    run may be continued longer). Raises InputError naming the file and the mismatch.
    """
    from .packed import SolverState, SolverStats

    def load():
        with h5py.File(path, "r") as f:
            a = f.attrs
            if a.get("format") != FORMAT or not a.get("complete", False):
                raise InputError("not a complete ppack checkpoint (attribute 'format' or 'complete')", path)
            saved = json.loads(a["params"])
            for name, value in params.items():
                if name != "iterations" and saved.get(name) != value:
                    raise InputError(f"checkpoint was made with {name}={saved.get(name)!r}, this run has "
                                     f"{name}={value!r}; resume with the same settings", path)
            owner = f["owner"][()]
            same_layout = int(a["ranks"]) == comm.Get_size()
            rank = comm.Get_rank()
            if same_layout:
                mine = np.flatnonzero(owner == rank)
            else:
                start, stop = chunk(len(owner), rank, comm.Get_size())
                mine = np.arange(start, stop)
            table = SupportVectorTable(int(a["n_features"]), a["storage"] == "csr", dtype, spec, work_bytes)
            if a["storage"] == "csr":
                X = sp.csr_matrix((f["values"][()], f["indices"][()], f["indptr"][()]),
                                  shape=(len(owner), int(a["n_features"])))[mine]
            else:
                X = f["features"][()][mine]
            table.insert_many(f["keys"][()][mine], f["coef"][()][mine], X)
            if same_layout:
                occupancy = np.bincount(owner, minlength=comm.Get_size())
            else:
                spans = (chunk(len(owner), k, comm.Get_size()) for k in range(comm.Get_size()))
                occupancy = np.array([stop - start for start, stop in spans])
            state = SolverState(int(a["iteration"]), float(a["scale"]), float(a["norm"]),
                                occupancy.astype(np.int64))
            saved_stats = json.loads(a["stats"])
            stats = SolverStats(saved_stats["packs"], saved_stats["allreduce_calls"], saved_stats["projections"],
                                saved_stats["hinge_moving_average"], saved_stats["seconds"])
            sampler = RowSampler.from_state(json.loads(a["sampler"]), f["sampler_block"][()])
            return table, state, stats, sampler

    if not Path(path).exists():
        raise InputError("No such checkpoint file", path)
    return run_collectively(comm, load)


def checkpoint_exists(path):
    """True when ``path`` is a complete checkpoint file."""
    try:
        with h5py.File(path, "r") as f:
            return f.attrs.get("format") == FORMAT and bool(f.attrs.get("complete", False))
    except OSError:
        return False
