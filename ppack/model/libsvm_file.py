"""LIBSVM model files: the text LIBSVM's ``svm_save_model`` writes, read and written for binary
C-SVC, epsilon-SVR and one-class models.

Layout: header lines ``field value ...`` up to a line ``SV``, then one line per support
vector, ``sv_coef index:value ...`` (1-based ascending indices, zeros omitted). The fields
this module reads and writes: ``svm_type`` (c_svc, epsilon_svr or one_class),
``kernel_type`` (each kernel's ``libsvm_type`` in ``registry.KERNEL_TABLE``: linear,
polynomial, rbf, sigmoid), the kernel parameters its formula reads (``degree``, ``gamma``,
``coef0``, in LIBSVM's order), ``nr_class 2``, ``total_sv``, ``rho``; for c_svc also
``label`` (two integers), optional ``probA`` and ``probB`` (Platt's sigmoid), and ``nr_sv``
(support vectors of each label; the lines hold the first label's first). LIBSVM's decision
value is ``sum_j sv_coef_j K(sv_j, x) - rho``: for c_svc positive for the first label of
the ``label`` line; for epsilon_svr the regressed value; for one_class positive for an
inlier (prediction +1, else -1). An epsilon_svr or one_class file has no ``label`` or
``nr_sv``; its optional ``probA`` (epsilon_svr's Laplace scale) and ``prob_density_marks``
(one_class) are LIBSVM's ``-b 1`` outputs, which ppack skips.

A ppack kernel model's decision value is ``scale * sum_j coef_j (K(sv_j, x) + offset) - rho``
(rho 0 for c_svc), for c_svc positive for ``classes[1]``; ``export_libsvm`` writes it as
sv_coef = scale * coef (entries with a zero coefficient left out), LIBSVM's rho = rho -
scale * offset * sum(coef), and for c_svc the label line ``classes[1] classes[0]``. A
K-class one-vs-rest model becomes K binary files, file k "classes[k] against the rest"
with the labels ``classes[k] REST``, where REST is -1, or one less than the smallest class
when -1 is a class (LIBSVM labels are integers).
"""
import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..atomic import atomic_write
from ..data.libsvm import CHUNK_BYTES, _chunks, _Parser
from ..errors import InputError, PPackError
from ..kernels.spec import KernelSpec
from ..registry import KERNEL_FACTS, KERNEL_TABLE
from .format import LIBSVM_MAGIC
from .kernel import read_kernel_header, read_support_vectors

# LIBSVM's kernel_type -> ppack's kernel name (LIBSVM's precomputed has none; ppack's
# laplacian has no LIBSVM kernel type)
KERNEL_NAMES = {k.libsvm_type: k.name for k in KERNEL_TABLE if k.libsvm_type is not None}
LIBSVM_KERNEL_TYPES = {ppack: libsvm for libsvm, ppack in KERNEL_NAMES.items()}
# the kernel parameters as LIBSVM's svm_save_model writes them (those the formula reads)
LIBSVM_PARAM_ORDER = ("degree", "gamma", "coef0")
SVM_TYPES = ("c_svc", "nu_svc", "one_class", "epsilon_svr", "nu_svr")
READ_TYPES = ("c_svc", "epsilon_svr", "one_class")  # the types ppack reads and writes
MAX_HEADER_LINES = 64  # a file without "SV" in its first lines is not a LIBSVM model
SLICE_BYTES = 8 << 20  # support vectors read from a ppack model at once (dense bytes)
_INT32 = 2**31 - 1


@dataclass(frozen=True)
class LibsvmModelHeader:
    """The header of a LIBSVM model file (binary c_svc, epsilon_svr or one_class) and where
    its support vectors start."""

    spec: KernelSpec  # ppack's kernel (offset 0)
    rho: float
    labels: tuple  # c_svc: (first, second), the decision value is positive for the first; else None
    nr_sv: tuple  # c_svc: support vectors of each label; else (total_sv,)
    total_sv: int
    probability: tuple  # c_svc: Platt's (A (1,), B (1,)), or None
    sv_offset: int  # byte offset of the first line after "SV"
    sv_line: int  # its 1-based line number
    svm_type: str = "c_svc"

    def describe(self):
        spec = self.spec
        params = ", ".join(f"{name}={getattr(spec, name):g}" for name in LIBSVM_PARAM_ORDER
                           if name in spec.facts.params)
        kernel = LIBSVM_KERNEL_TYPES[spec.name] + (f" ({params})" if params else "")
        if self.svm_type != "c_svc":
            return f"{self.svm_type}, kernel {kernel}; {self.total_sv} support vectors, rho {self.rho:.17g}"
        return (f"c_svc, kernel {kernel}; labels {self.labels[0]} (decision > 0), {self.labels[1]}; "
                f"{self.total_sv} support vectors ({self.nr_sv[0]}, {self.nr_sv[1]}), rho {self.rho:.17g}"
                f"{', probability sigmoid' if self.probability is not None else ''}")


# ---------------------------------------------------------------- reading


def read_libsvm_model_header(path):
    """The header of a LIBSVM model file, checked: c_svc, epsilon_svr or one_class, nr_class 2,
    a kernel ppack has (linear, polynomial, rbf or sigmoid). Raises InputError naming the
    file and the field (or line)."""
    path = str(path)
    fields, sv_offset, sv_line = _header_fields(path)

    def value(name, kind=str, count=1, needed_by=None):
        if name not in fields:
            raise InputError(f"field '{name}': missing{f' (the {needed_by} needs it)' if needed_by else ''}", path)
        line, values = fields[name]
        if len(values) != count:
            raise InputError(f"line {line}: field '{name}': expected {count} value{'s' if count > 1 else ''}, "
                             f"got {len(values)}", path)
        try:
            out = [kind(v) for v in values]
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise InputError(f"line {line}: field '{name}': expected {what}, got {' '.join(values)!r}", path) from None
        if kind is float and not all(math.isfinite(v) for v in out):
            raise InputError(f"line {line}: field '{name}': expected finite numbers, got {' '.join(values)!r}", path)
        return out[0] if count == 1 else tuple(out)

    svm_type = value("svm_type")
    if svm_type not in READ_TYPES:
        known = "a LIBSVM type" if svm_type in SVM_TYPES else "not a LIBSVM type"
        raise InputError(f"field 'svm_type': {svm_type} ({known}); ppack reads {', '.join(READ_TYPES)} models only",
                         path)
    nr_class = value("nr_class", int)
    if nr_class != 2:
        raise InputError(f"field 'nr_class': {nr_class} classes; ppack reads binary models (nr_class 2) only "
                         "(export the classes one against the rest, or predict with LIBSVM)", path)
    kernel_type = value("kernel_type")
    if kernel_type not in KERNEL_NAMES:
        raise InputError(f"field 'kernel_type': {kernel_type} has no ppack kernel; expected one of "
                         f"{', '.join(KERNEL_NAMES)}", path)
    name = KERNEL_NAMES[kernel_type]
    params = {"gamma": 1.0, "degree": 3, "coef0": 0.0}
    for param in KERNEL_FACTS[name].params:
        params[param] = value(param, int if param == "degree" else float, needed_by=f"{kernel_type} kernel")
    try:
        spec = KernelSpec(name, params["gamma"], params["degree"], params["coef0"], 0.0)
    except PPackError as exc:
        raise InputError(f"field {exc}", path) from None
    total_sv = value("total_sv", int)
    if svm_type != "c_svc":
        if total_sv < 0:
            raise InputError(f"field 'total_sv': expected a count >= 0, got {total_sv}", path)
        return LibsvmModelHeader(spec, value("rho", float), None, (total_sv,), total_sv, None, sv_offset, sv_line,
                                 svm_type)
    labels = value("label", int, 2)
    nr_sv = value("nr_sv", int, 2)
    rho = value("rho", float)
    if total_sv < 0 or min(nr_sv) < 0 or sum(nr_sv) != total_sv:
        raise InputError(f"fields 'nr_sv' ({nr_sv[0]} {nr_sv[1]}) and 'total_sv' ({total_sv}) disagree: expected "
                         "two counts >= 0 that add up to total_sv", path)
    if labels[0] == labels[1]:
        raise InputError(f"field 'label': the two labels are the same ({labels[0]})", path)
    probability = None
    if "probA" in fields or "probB" in fields:
        probability = (np.array([value("probA", float)]), np.array([value("probB", float)]))
    return LibsvmModelHeader(spec, rho, labels, nr_sv, total_sv, probability, sv_offset, sv_line)


def _header_fields(path):
    """{field: (line, values)} of the header, the byte offset and line number after "SV"."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise InputError("No such file", path) from None
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror or exc}", path) from None
    fields = {}
    with f:
        if f.read(len(LIBSVM_MAGIC)) != LIBSVM_MAGIC:
            raise InputError("not a LIBSVM model file (it does not start with 'svm_type')", path)
        f.seek(0)
        for number in range(1, MAX_HEADER_LINES + 1):
            raw = f.readline()
            if not raw:
                raise InputError(f"line {number}: the file ends before the line 'SV' that ends the header", path)
            try:
                tokens = raw.decode("ascii").split()
            except UnicodeDecodeError:
                raise InputError(f"line {number}: not text (expected a header field of a LIBSVM model)", path) \
                    from None
            if not tokens:
                continue
            if tokens == ["SV"]:
                return fields, f.tell(), number + 1
            if tokens[0] in fields:
                raise InputError(f"line {number}: field '{tokens[0]}' given twice", path)
            fields[tokens[0]] = (number, tokens[1:])
    raise InputError(f"no line 'SV' ending the header in its first {MAX_HEADER_LINES} lines", path)


def read_libsvm_model_rows(path, header, start, stop):
    """Support vectors ``[start, stop)`` of a LIBSVM model file: ``(coef (k,), X, width)``, X a
    CSR matrix with 0-based columns, width the largest 1-based index on the lines parsed (0 if
    none). The lines up to ``stop`` are parsed, in chunks of text (so a few past it may be too;
    all of them when ``stop`` is total_sv, which checks their count). Raises InputError naming
    the file and the line."""
    path = str(path)
    parser = _Parser(path, None, start, stop, float(np.finfo(np.float64).max))
    parser.line = header.sv_line
    coefs, indptrs, indices, values = [], [np.zeros(1, np.int64)], [], []
    width, nnz = 0, 0
    read_all = stop >= header.total_sv
    with open(path, "rb") as f:
        f.seek(header.sv_offset)
        for data, length in _chunks(f, CHUNK_BYTES):
            chunk = parser.feed(data, length)
            width = max(width, chunk.max_index)
            if len(chunk.labels):
                coefs.append(chunk.labels)
                indptrs.append(chunk.indptr[1:] + nnz)
                indices.append(chunk.indices)
                values.append(chunk.values)
                nnz += len(chunk.indices)
            if parser.row >= stop and not read_all:
                break
    if parser.row < stop or (read_all and parser.row != header.total_sv):
        raise InputError(f"field 'total_sv': {header.total_sv} support vectors, but the file has "
                         f"{'at least ' if not read_all else ''}{parser.row} lines after 'SV'", path)
    coef = np.concatenate(coefs) if coefs else np.zeros(0)
    X = sp.csr_matrix((np.concatenate(values) if values else np.zeros(0),
                       np.concatenate(indices) if indices else np.zeros(0, np.int32), np.concatenate(indptrs)),
                      shape=(len(coef), max(1, width)))
    return coef, X, width


# ---------------------------------------------------------------- writing


def class_model_path(out_path, label):
    """The file of class ``label`` of a one-vs-rest export to ``out_path``: OUT.<label>.model
    (a final ".model" of ``out_path`` is dropped first)."""
    out_path = Path(out_path)
    stem = out_path.name[:-len(".model")] if out_path.name.endswith(".model") else out_path.name
    return out_path.with_name(f"{stem}.{_label_text(label)}.model")


def rest_label(classes):
    """The label of "the rest" in the files of a one-vs-rest export: -1, or when -1 is a class
    one less than the smallest class."""
    classes = [int(c) for c in classes]
    return -1 if -1 not in classes else min(classes) - 1


def export_plan(model_path, out_path):
    """Check that a ppack kernel model can be written as LIBSVM files; returns
    ``(header, [(path, first label, second label), ...])``: one file for a binary, regression
    or one-class model (labels None for the last two), one per class for one-vs-rest. Raises
    InputError naming the file and the field."""
    model_path = str(model_path)
    header = read_kernel_header(model_path)
    if header.spec.name not in LIBSVM_KERNEL_TYPES:
        raise InputError(f"attribute 'kernel': {header.spec.name} has no LIBSVM kernel type; LIBSVM model files "
                         f"take {', '.join(sorted(LIBSVM_KERNEL_TYPES))} models", model_path)
    if header.svm_type != "c_svc":
        return header, [(Path(out_path), None, None)]
    classes = header.classes
    if classes.dtype.kind not in "biuf" or not np.all(np.isfinite(classes)) or \
            np.any(classes != np.round(classes)) or np.any(np.abs(classes) > _INT32 - 1):
        shown = ", ".join(_label_text(c) for c in classes[:6]) + (" ..." if len(classes) > 6 else "")
        raise InputError(f"'classes': LIBSVM model files take integer labels; this model's are {shown}", model_path)
    labels = [int(c) for c in classes]
    if len(labels) == 2:
        return header, [(Path(out_path), labels[1], labels[0])]
    rest = rest_label(labels)
    return header, [(class_model_path(out_path, c), c, rest) for c in labels]


def export_libsvm(model_path, out_path, rows_per_slice=None):
    """Write a ppack kernel model (any kernel with a LIBSVM kernel type) as LIBSVM model files (see the module
    docstring): ``out_path`` for a binary model, ``class_model_path(out_path, c)`` for each
    class c of a one-vs-rest model. The support vectors are read ``rows_per_slice`` at a time
    (default: about SLICE_BYTES of dense rows); each file appears whole or not at all, and on
    an error none is left. Returns ``[(path, total_sv), ...]``."""
    model_path = str(model_path)
    header, outputs = export_plan(model_path, out_path)
    for path, _, _ in outputs:
        if path.resolve() == Path(model_path).resolve():
            raise InputError(f"the output {path} would replace the model file it is written from", model_path)
    svm_type, K = header.svm_type, header.n_columns
    scales = np.atleast_1d(np.asarray(header.scale, dtype=np.float64))
    step = rows_per_slice or max(1, min(1 << 16, SLICE_BYTES // (8 * max(1, header.n_features))))
    sums = [[] for _ in range(K)]  # each column's coefficients summed exactly (see _add_exactly)
    counts = np.zeros((K, 2), dtype=np.int64)  # positive, negative sv_coef of each column
    written = []
    try:
        with tempfile.TemporaryDirectory(prefix=".ppack-export-", dir=outputs[0][0].parent) as tmp:
            parts = [(Path(tmp) / f"{k}.pos", Path(tmp) / f"{k}.neg") for k in range(K)]
            for a in range(0, header.n_support, step):
                _, coef, X = read_support_vectors(model_path, header, a, min(a + step, header.n_support))
                coef = coef.reshape(len(coef), K)
                rows = _feature_text(X)
                for k in range(K):
                    sv_coef = scales[k] * coef[:, k]
                    _add_exactly(sums[k], coef[:, k].tolist())
                    for side, chosen in enumerate((sv_coef > 0, sv_coef < 0)):
                        picked = np.flatnonzero(chosen)
                        counts[k, side] += len(picked)
                        if len(picked):
                            with open(parts[k][side], "a") as f:
                                f.writelines(f"{sv_coef[i]:.17g}{rows[i]}\n" for i in picked.tolist())
            for k, (path, first, second) in enumerate(outputs):
                rho = header.rho - scales[k] * header.spec.offset * math.fsum(sums[k]) + 0.0  # + 0.0: no "-0"
                probability = None if header.probability is None or svm_type != "c_svc" else \
                    tuple(v[k] for v in header.probability)
                text = _header_text(svm_type, header.spec, rho, (first, second), tuple(counts[k]), probability)
                atomic_write(path, lambda f, text=text, k=k: _write_model(f, text, parts[k]))
                written.append((path, int(counts[k].sum())))
    except BaseException:
        for path, _ in written:
            path.unlink(missing_ok=True)
        raise
    return written


def _add_exactly(partials, values):
    """Add ``values`` to the exact sum held as non-overlapping ``partials`` (Shewchuk's
    algorithm, as in math.fsum), so that math.fsum(partials) is the correctly rounded sum of
    everything added, however the values came in slices."""
    for x in values:
        i = 0
        for y in partials:
            if abs(x) < abs(y):
                x, y = y, x
            high = x + y
            low = y - (high - x)
            if low:
                partials[i] = low
                i += 1
            x = high
        partials[i:] = [x]


def _write_model(f, header_text, parts):
    f.write(header_text)
    for part in parts:
        if part.exists():
            with open(part) as src:
                shutil.copyfileobj(src, f)


def _header_text(svm_type, spec, rho, labels, nr_sv, probability):
    lines = [f"svm_type {svm_type}", f"kernel_type {LIBSVM_KERNEL_TYPES[spec.name]}"]
    lines += [f"degree {int(spec.degree)}" if name == "degree" else f"{name} {float(getattr(spec, name)):.17g}"
              for name in LIBSVM_PARAM_ORDER if name in spec.facts.params]
    lines += ["nr_class 2", f"total_sv {sum(nr_sv)}", f"rho {rho:.17g}"]
    if svm_type == "c_svc":
        lines.append(f"label {labels[0]} {labels[1]}")
        if probability is not None:
            lines += [f"probA {float(probability[0]):.17g}", f"probB {float(probability[1]):.17g}"]
        lines.append(f"nr_sv {nr_sv[0]} {nr_sv[1]}")
    lines.append("SV")
    return "\n".join(lines) + "\n"


def _feature_text(X):
    """Each row's " index:value" pairs (1-based, zeros omitted, %.17g), one string per row."""
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        X.sort_indices()
        indptr, indices, data = X.indptr, X.indices, X.data
        rows = []
        for r in range(X.shape[0]):
            a, b = indptr[r], indptr[r + 1]
            values = data[a:b]
            keep = values != 0
            rows.append(_pairs(indices[a:b][keep], values[keep]))
        return rows
    rows = []
    for row in np.asarray(X):
        columns = np.flatnonzero(row)
        rows.append(_pairs(columns, row[columns]))
    return rows


def _pairs(columns, values):
    return "".join(f" {j + 1}:{v:.17g}" for j, v in zip(columns.tolist(), values.astype(np.float64).tolist()))


def _label_text(label):
    return f"{label:g}" if isinstance(label, (float, np.floating, int, np.integer)) else str(label)
