"""What every ppack model file shares: the format name and version, and a checked opener.

Root attributes ``format`` = "ppack-model", ``format_version`` and ``model_type``
("kernel" or "linear"; files without it are kernel models) head every model file;
``training`` (JSON text) says how it was trained. The layouts of each type are in
``kernel.py`` and ``linear.py``. A LIBSVM model file (text that starts with ``svm_type``,
see ``libsvm_file.py``) is recognised too: its type is "libsvm".
"""
import json
from pathlib import Path

import h5py
import numpy as np

from ..errors import InputError

FORMAT = "ppack-model"
FORMAT_VERSION = 1
LIBSVM_TYPE = "libsvm"
LIBSVM_MAGIC = b"svm_type"  # the first bytes of a model file LIBSVM's svm_save_model writes


def header_attributes(model_type, training, **attributes):
    """The shared root attributes of a model of ``model_type``, with the type's own ``attributes``."""
    return dict(format=FORMAT, format_version=FORMAT_VERSION, model_type=model_type,
                training=json.dumps(training, sort_keys=True), **attributes)


def write_classes(f, classes):
    """The dataset ``classes``: the label values, float64 (int64 for integer or bool labels),
    or UTF-8 text when they are not numbers."""
    classes = np.asarray(classes)
    if classes.dtype.kind in "biuf":
        f.create_dataset("classes", data=classes.astype(np.float64 if classes.dtype.kind == "f" else np.int64))
    else:
        f.create_dataset("classes", data=[str(c) for c in classes], dtype=h5py.string_dtype())


def read_classes(f):
    """The label values ``write_classes`` stored: float64 or int64 (K,), or str (K,)."""
    ds = f["classes"]
    if ds.dtype.kind in "biuf":
        return ds[()].astype(np.float64 if ds.dtype.kind == "f" else np.int64)
    return np.array(ds.asstr()[()], dtype=str)


def open_model(path, expected_type=None, datasets=()):
    """Open a model file read-only after checking its format (and its type and datasets when
    given); returns the h5py File. Raises InputError naming the file and the field."""
    path = str(path)
    if not Path(path).exists():
        raise InputError("No such file", path)
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise InputError(f"not an HDF5 model file ({exc})", path) from None
    try:
        a = f.attrs
        if a.get("format") != FORMAT:
            raise InputError(f"attribute 'format': expected {FORMAT!r}, got {a.get('format')!r} "
                             "(is this a data file rather than a model?)", path)
        if int(a.get("format_version", -1)) > FORMAT_VERSION:
            raise InputError(f"attribute 'format_version': {a['format_version']} is newer than "
                             f"this ppack reads ({FORMAT_VERSION})", path)
        kind = str(a.get("model_type", "kernel"))
        if expected_type is not None and kind != expected_type:
            raise InputError(f"attribute 'model_type': expected {expected_type!r}, got {kind!r}", path)
        for name in datasets:
            if name not in f:
                raise InputError(f"missing dataset {name!r} of a ppack {kind} model file", path)
    except BaseException:
        f.close()
        raise
    return f


def is_libsvm_model(path):
    """Whether ``path`` is a LIBSVM model file (text that starts with ``svm_type``)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(LIBSVM_MAGIC)) == LIBSVM_MAGIC
    except OSError:
        return False


def model_type(path):
    """"kernel" or "linear" (files without the attribute are kernel models), or "libsvm" for a
    LIBSVM model file."""
    if is_libsvm_model(path):
        return LIBSVM_TYPE
    with open_model(path) as f:
        return str(f.attrs.get("model_type", "kernel"))


def training_of(f):
    """The ``training`` record of an open model file, as a dict."""
    return json.loads(f.attrs["training"])
