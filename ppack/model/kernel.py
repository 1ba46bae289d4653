"""Kernel model files: the support vectors, their coefficients, the kernel and the scale.

Layout (format "ppack-model", format_version 1, model_type "kernel"):
  root attributes  format, format_version, model_type, kernel (name), gamma, degree, coef0,
                   kernel_offset (1.0 when the bias term is on), C, sigma, scale,
                   n_features, n_support, storage ("dense" or "csr"), training (JSON text)
  classes          (K,) float64 (int64 for integer labels, or UTF-8 text): the label values,
                   sorted; for K = 2 the first is mapped to -1 and the second to +1
  support_keys     (n_support,) int64: training row ids of the support vectors
  coef             (n_support,) float64: beta_j; for K > 2 classes (n_support, K), one
                   column per one-vs-rest problem, and ``scale`` is then (K,)
  support_vectors  dense (n_support, n_features), or a group with data, indices
                   (int32, 0-based), indptr (int64, n_support + 1)
The decision value of x is  scale * sum_j coef_j * (K(sv_j, x) + kernel_offset) - rho, for
K > 2 one per class (column c with scale[c]); the predicted class has the largest.
Attributes ``svm_type`` ("c_svc", "epsilon_svr" or "one_class"; "c_svc" when absent, as in
files written before the other types) and ``rho`` (float64, LIBSVM's sign; 0 when absent, and
always 0 for c_svc). epsilon_svr: ``classes`` is empty, one coefficient column, and the
decision value is the regressed value; one_class: ``classes`` is [-1, +1] (outlier, inlier:
decision value >= 0 is an inlier), one coefficient column. Optional
attributes probability_a, probability_b ((1,) or (K,)): Platt's sigmoid per column,
p = 1 / (1 + exp(a f + b)); for K > 2 the class probabilities are p_c^tau normalised over
the K classes, tau the attribute probability_power (1 when absent; ``packsvm.probability``).
The entries are in no particular order (a distributed save stores them in rank order, each
rank's in its table's slot order); readers take any contiguous range.

A distributed save (``write_kernel_model_by_rank``) writes one file from every rank: rank 0
creates it with every dataset pre-sized, then each rank's slice is written, by parallel
HDF5 or by its node's leader (``collective_write``), so the peak memory of a rank is its
own support vectors plus one fixed-size piece; rank 0 additionally holds nothing but the
per-rank counts.
"""
import math
from dataclasses import dataclass

import h5py
import numpy as np
import scipy.sparse as sp

from ..atomic import atomic_h5_write
from ..collective_write import collective_h5_write
from ..errors import InputError
from ..kernels.spec import KernelSpec
from .format import header_attributes, open_model, read_classes, training_of, write_classes

DATASETS = ("classes", "support_keys", "coef", "support_vectors")
# the classes each svm_type's file holds: c_svc its labels (None: any), the others fixed ones
SVM_CLASSES = {"c_svc": None, "epsilon_svr": [], "one_class": [-1.0, 1.0]}


@dataclass
class KernelModelHeader:
    """Everything in a kernel model file but its support vectors."""

    spec: KernelSpec
    C: float
    sigma: float
    scale: object  # float, or (K,) for K > 2 classes
    classes: np.ndarray
    n_features: int
    n_support: int
    storage: str
    dtype: np.dtype
    training: dict
    probability: tuple = None  # Platt's (A, B), each (1,) or (K,), when fitted
    svm_type: str = "c_svc"
    rho: float = 0.0  # f(x) = scale * sum_j coef_j (K(sv_j, x) + kernel_offset) - rho
    probability_power: float = 1.0  # K > 2: the power of the sigmoids' normalisation

    @property
    def n_columns(self):
        """Coefficient columns: 1 for a binary model and for epsilon_svr and one_class, K for K > 2 classes."""
        return 1 if len(self.classes) <= 2 else len(self.classes)


def write_kernel_model(path, header, keys, coef, X):
    """Write a kernel model atomically (call on one rank): ``header`` a KernelModelHeader,
    keys/coef (n_support,), X the support vectors, dense (n_support, n_features) or scipy CSR."""

    def write(f):
        _write_header(f, header, len(keys))
        f.create_dataset("support_keys", data=keys)
        f.create_dataset("coef", data=coef)
        if sp.issparse(X):
            g = f.create_group("support_vectors")
            g.create_dataset("data", data=X.data)
            g.create_dataset("indices", data=X.indices.astype(np.int32))
            g.create_dataset("indptr", data=X.indptr.astype(np.int64))
        else:
            f.create_dataset("support_vectors", data=X)

    atomic_h5_write(path, write)


def write_kernel_model_by_rank(comm, path, header, n_support, nnz, own_parts):
    """Collective: write a kernel model atomically, each rank its own support vectors; returns
    the ``collective_write.WriteReport``.

    Rank 0 creates the file with every dataset sized for ``n_support`` entries (and ``nnz``
    stored values when ``header.storage`` is "csr"; features of ``header.dtype``); ``own_parts()``
    gives this rank's ``collective_write.Part``s: its contiguous slice of ``support_keys``,
    ``coef`` and ``support_vectors`` (see ``packsvm.table.shard_parts``). No rank holds more
    than its own support vectors and one piece of another's (``collective_write``).
    The entries are stored in rank order, not sorted by key (readers do not depend on it).
    """
    def create(f):
        _write_header(f, header, n_support)
        f.create_dataset("support_keys", shape=(n_support,), dtype=np.int64)
        f.create_dataset("coef", shape=(n_support,) if header.n_columns == 1 else (n_support, header.n_columns),
                         dtype=np.float64)
        if header.storage == "csr":
            g = f.create_group("support_vectors")
            g.create_dataset("data", shape=(nnz,), dtype=header.dtype)
            g.create_dataset("indices", shape=(nnz,), dtype=np.int32)
            g.create_dataset("indptr", shape=(n_support + 1,), dtype=np.int64)
        else:
            f.create_dataset("support_vectors", shape=(n_support, header.n_features), dtype=header.dtype)

    return collective_h5_write(comm, path, create, own_parts)


def _write_header(f, header, n_support):
    spec = header.spec
    f.attrs.update(header_attributes(
        "kernel", header.training, kernel=spec.name, gamma=spec.gamma, degree=spec.degree, coef0=spec.coef0,
        kernel_offset=spec.offset, C=header.C, sigma=header.sigma, scale=header.scale,
        n_features=header.n_features, n_support=n_support, storage=header.storage, svm_type=header.svm_type,
        rho=np.float64(header.rho)))
    if header.probability is not None:
        a, b = (np.asarray(v, dtype=np.float64) for v in header.probability)
        f.attrs["probability_a"], f.attrs["probability_b"] = a, b
        f.attrs["probability_power"] = float(header.probability_power)
    write_classes(f, header.classes)


def read_kernel_header(path):
    """Validate a kernel model file's layout and return its ``KernelModelHeader``."""
    path = str(path)
    with open_model(path, "kernel", DATASETS) as f:
        a = f.attrs
        n = len(f["coef"])
        if len(f["support_keys"]) != n or int(a["n_support"]) != n:
            raise InputError(f"'support_keys' and 'coef' must both have n_support = {int(a['n_support'])} "
                             f"entries, got {len(f['support_keys'])} and {n}", path)
        storage = str(a["storage"])
        dtype = f["support_vectors/data"].dtype if storage == "csr" else f["support_vectors"].dtype
        spec = KernelSpec(str(a["kernel"]), float(a["gamma"]), int(a["degree"]), float(a["coef0"]),
                          float(a["kernel_offset"]))
        classes = read_classes(f)
        scale = np.asarray(a["scale"], dtype=np.float64)
        svm_type = str(a.get("svm_type", "c_svc"))
        rho = float(a.get("rho", 0.0))
        if svm_type not in SVM_CLASSES:
            raise InputError(f"attribute 'svm_type': expected one of {', '.join(SVM_CLASSES)}, got {svm_type!r}", path)
        if not math.isfinite(rho) or (svm_type == "c_svc" and rho != 0.0):
            raise InputError(f"attribute 'rho': expected a finite number (0 for c_svc), got {rho!r}", path)
        columns = 1 if len(classes) <= 2 else len(classes)
        if SVM_CLASSES[svm_type] is not None:  # one column, fixed classes
            expected = SVM_CLASSES[svm_type]
            if classes.dtype.kind != "f" or classes.tolist() != expected or scale.size != 1 or f["coef"].ndim != 1:
                raise InputError(f"svm_type {svm_type}: expected 'classes' {expected}, one attribute 'scale' and "
                                 f"'coef' (n_support,), got classes {classes.tolist()[:4]}, {scale.size} scales and "
                                 f"coef of shape {f['coef'].shape}", path)
        elif len(classes) < 2 or scale.size != columns or f["coef"].shape[1:] != ((columns,) if columns > 1 else ()):
            raise InputError(f"'classes' ({len(classes)} values), attribute 'scale' ({scale.size} values) and "
                             f"'coef' (shape {f['coef'].shape}) disagree: expected 2 classes with one scale and "
                             "coef (n_support,), or K > 2 classes with K scales and coef (n_support, K)", path)
        probability = None
        if "probability_a" in a:
            probability = tuple(np.atleast_1d(a[name]).astype(np.float64)
                                for name in ("probability_a", "probability_b"))
            if any(len(v) != columns for v in probability):
                raise InputError(f"attributes 'probability_a' and 'probability_b': expected {columns} values each "
                                 f"(one sigmoid per coefficient column)", path)
        power = float(a.get("probability_power", 1.0))
        if not 0 < power < np.inf:
            raise InputError(f"attribute 'probability_power': expected a finite number > 0, got {power}", path)
        return KernelModelHeader(spec, float(a["C"]), float(a["sigma"]), float(scale) if columns == 1 else scale,
                                 classes, int(a["n_features"]), n, storage, dtype, training_of(f), probability,
                                 svm_type, rho, power if probability is not None else 1.0)


def read_support_vectors(path, header, start, stop):
    """Support vectors ``[start, stop)`` of a kernel model: ``(keys, coef, X)``, X dense or CSR."""
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
    return keys, coef, X
