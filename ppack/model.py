"""The self-describing, versioned HDF5 model files: kernel SVMs and linear SVMs.

Kernel model layout (format "ppack-model", format_version 1, model_type "kernel"):
  root attributes  format, format_version, model_type, kernel (name), gamma, degree, coef0,
                   kernel_offset (1.0 when the bias term is on), C, sigma, scale,
                   n_features, n_support, storage ("dense" or "csr"), training (JSON text)
  classes          (2,) float64: the original label values mapped to -1 and +1
  support_keys     (n_support,) int64: training row ids of the support vectors
  coef             (n_support,) float64: beta_j
  support_vectors  dense (n_support, n_features), or a group with data, indices
                   (int32, 0-based), indptr (int64, n_support + 1)
The decision value of x is  scale * sum_j coef_j * (K(sv_j, x) + kernel_offset).

Linear model layout (model_type "linear"):
  root attributes  format, format_version, model_type, solver, C, loss, p, bias,
                   features (feature map name, "identity" when none), n_features,
                   training (JSON text)
  classes          (2,) float64
  w                (n_weights,) float64 (n_features, or the feature map's output size)
  b                scalar float64
The decision value of x is  w . phi(x) + b.
"""
import json
import os
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np
import scipy.sparse as sp

from .comm import chunk, run_collectively
from .errors import InputError
from .kernels.spec import KernelSpec
from .table import SupportVectorTable

FORMAT = "ppack-model"
FORMAT_VERSION = 1


@dataclass
class ModelHeader:
    spec: KernelSpec
    C: float
    sigma: float
    scale: float
    classes: np.ndarray
    n_features: int
    n_support: int
    storage: str
    dtype: np.dtype
    training: dict


def atomic_h5_write(path, write):
    """Call ``write(h5file)`` on a temporary file beside ``path``, then rename it into place.

    On any error the temporary file is removed, so no half-written output is left.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with h5py.File(tmp, "w") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def save_model(comm, path, table, scale, spec, C, sigma, classes, training):
    """Collective: gather every rank's table shard on rank 0, which writes ``path`` atomically."""
    if table.sparse:
        indptr, indices, values = table.features
        local = (table.keys, table.coef, np.diff(indptr), indices, values)
    else:
        local = (table.keys, table.coef, table.features)
    parts = comm.gather(local, root=0)
    if comm.Get_rank() == 0:
        keys = np.concatenate([p[0] for p in parts])
        coef = np.concatenate([p[1] for p in parts])
        if table.sparse:
            counts = np.concatenate([p[2] for p in parts])
            X = sp.csr_matrix((np.concatenate([p[4] for p in parts]), np.concatenate([p[3] for p in parts]),
                               np.concatenate([[0], np.cumsum(counts)])), shape=(len(keys), table.n_features))
        else:
            X = np.concatenate([p[2] for p in parts]).reshape(len(keys), table.n_features)
        order = np.argsort(keys, kind="stable")
        keys, coef, X = keys[order], coef[order], X[order]

        def write(f):
            f.attrs.update(format=FORMAT, format_version=FORMAT_VERSION, model_type="kernel", kernel=spec.name,
                           gamma=spec.gamma, degree=spec.degree, coef0=spec.coef0,
                           kernel_offset=spec.offset, C=C, sigma=sigma, scale=scale,
                           n_features=table.n_features, n_support=len(keys),
                           storage="csr" if table.sparse else "dense",
                           training=json.dumps(training, sort_keys=True))
            f.create_dataset("classes", data=np.asarray(classes, dtype=np.float64))
            f.create_dataset("support_keys", data=keys)
            f.create_dataset("coef", data=coef)
            if table.sparse:
                g = f.create_group("support_vectors")
                g.create_dataset("data", data=X.data)
                g.create_dataset("indices", data=X.indices.astype(np.int32))
                g.create_dataset("indptr", data=X.indptr.astype(np.int64))
            else:
                f.create_dataset("support_vectors", data=X)

        run_collectively(comm, atomic_h5_write, path, write)
    else:
        run_collectively(comm, lambda: None)


def open_model(path):
    """Open a model file read-only after checking its format; returns the h5py File."""
    path = str(path)
    if not Path(path).exists():
        raise InputError("No such file", path)
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise InputError(f"not an HDF5 model file ({exc})", path) from None
    a = f.attrs
    if a.get("format") != FORMAT:
        f.close()
        raise InputError(f"attribute 'format': expected {FORMAT!r}, got {a.get('format')!r} "
                         "(is this a data file rather than a model?)", path)
    if int(a.get("format_version", -1)) > FORMAT_VERSION:
        f.close()
        raise InputError(f"attribute 'format_version': {a['format_version']} is newer than "
                         f"this ppack reads ({FORMAT_VERSION})", path)
    return f


def model_type(path):
    """"kernel" or "linear" (files without the attribute are kernel models)."""
    with open_model(path) as f:
        return str(f.attrs.get("model_type", "kernel"))


def read_model_header(path):
    """Validate a kernel model file's layout and return its ``ModelHeader``."""
    path = str(path)
    with open_model(path) as f:
        a = f.attrs
        if str(a.get("model_type", "kernel")) != "kernel":
            raise InputError(f"attribute 'model_type': expected 'kernel', got {a['model_type']!r}", path)
        for name in ("classes", "support_keys", "coef", "support_vectors"):
            if name not in f:
                raise InputError(f"missing dataset {name!r} of a ppack model file", path)
        n = len(f["coef"])
        if len(f["support_keys"]) != n or int(a["n_support"]) != n:
            raise InputError(f"'support_keys' and 'coef' must both have n_support = {int(a['n_support'])} "
                             f"entries, got {len(f['support_keys'])} and {n}", path)
        storage = str(a["storage"])
        dtype = f["support_vectors/data"].dtype if storage == "csr" else f["support_vectors"].dtype
        spec = KernelSpec(str(a["kernel"]), float(a["gamma"]), int(a["degree"]), float(a["coef0"]),
                          float(a["kernel_offset"]))
        return ModelHeader(spec, float(a["C"]), float(a["sigma"]), float(a["scale"]), f["classes"][()],
                           int(a["n_features"]), n, storage, dtype, json.loads(a["training"]))


def load_model_shard(comm, path, work_bytes=None):
    """Collective: the header, and this rank's slice of the support vectors as a table."""
    header = run_collectively(comm, read_model_header, path)
    table = run_collectively(comm, _read_table_slice, path, header, comm.Get_rank(), comm.Get_size(), work_bytes)
    return header, table


def _read_table_slice(path, header, rank, size, work_bytes):
    start, stop = chunk(header.n_support, rank, size)
    kwargs = {} if work_bytes is None else {"work_bytes": work_bytes}
    table = SupportVectorTable(header.n_features, header.storage == "csr", header.dtype, header.spec, **kwargs)
    with h5py.File(path, "r") as f:
        keys = f["support_keys"][start:stop]
        coef = f["coef"][start:stop]
        if header.storage == "csr":
            g = f["support_vectors"]
            indptr = g["indptr"][start:stop + 1]
            X = sp.csr_matrix((g["data"][indptr[0]:indptr[-1]], g["indices"][indptr[0]:indptr[-1]],
                               indptr - indptr[0]), shape=(stop - start, header.n_features))
        else:
            X = f["support_vectors"][start:stop]
    table.insert_many(keys, coef, X)
    return table


@dataclass
class LinearModelFile:
    w: np.ndarray
    b: float
    classes: np.ndarray
    solver: str
    C: float
    loss: str
    p: float
    bias: bool
    features: str
    n_features: int
    training: dict


def save_linear_model(path, model):
    """Write a ``LinearModelFile`` atomically (call on one rank)."""
    def write(f):
        f.attrs.update(format=FORMAT, format_version=FORMAT_VERSION, model_type="linear", solver=model.solver,
                       C=model.C, loss=model.loss, p=model.p, bias=model.bias, features=model.features,
                       n_features=model.n_features, training=json.dumps(model.training, sort_keys=True))
        f.create_dataset("classes", data=np.asarray(model.classes, dtype=np.float64))
        f.create_dataset("w", data=np.asarray(model.w, dtype=np.float64))
        f.create_dataset("b", data=float(model.b))

    atomic_h5_write(path, write)


def read_linear_model(path):
    """Validate and read a linear model file."""
    path = str(path)
    with open_model(path) as f:
        a = f.attrs
        if str(a.get("model_type", "kernel")) != "linear":
            raise InputError(f"attribute 'model_type': expected 'linear', got {a.get('model_type', 'kernel')!r}",
                             path)
        for name in ("classes", "w", "b"):
            if name not in f:
                raise InputError(f"missing dataset {name!r} of a ppack linear model file", path)
        return LinearModelFile(f["w"][()], float(f["b"][()]), f["classes"][()], str(a["solver"]), float(a["C"]),
                               str(a["loss"]), float(a["p"]), bool(a["bias"]), str(a["features"]),
                               int(a["n_features"]), json.loads(a["training"]))
