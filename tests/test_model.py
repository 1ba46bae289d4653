"""Model files: kernel and linear round trips, clear errors for files that are not what they should be,
and atomic writes."""
import re

import h5py
import numpy as np
import pytest
import scipy.sparse as sp

from ppack.data.hdf5 import write_dataset
from ppack.errors import InputError
from ppack.kernels.spec import KernelSpec
from ppack.model.format import model_type
from ppack.model.kernel import KernelModelHeader, read_kernel_header, read_support_vectors, write_kernel_model
from ppack.model.linear import LinearModelFile, read_linear_model, save_linear_model

from helpers import make_problem


def kernel_model(path, sparse=False, X=None):
    """Write a small kernel model to ``path``; returns (header, keys, coef, X)."""
    if X is None:
        X, _ = make_problem(9, 5, sparse=sparse, seed=70)
    header = KernelModelHeader(KernelSpec("poly", 0.5, 2, 1.0, 1.0), 3.0, 0.01, 0.25, np.array([3.0, 7.0]), 5, 9,
                               "csr" if sparse else "dense", np.dtype(np.float64), {"iterations": 100, "ranks": 4})
    keys = np.arange(9, dtype=np.int64) * 11
    coef = np.linspace(-1.0, 1.0, 9)
    write_kernel_model(path, header, keys, coef, X)
    return header, keys, coef, X


def linear_model(path, w=None):
    """Write a small linear model to ``path``; returns the LinearModelFile."""
    model = LinearModelFile(np.array([0.5, -1.5, 2.0]) if w is None else w, -0.25, np.array([-1.0, 1.0]), "alm",
                            2.0, "l2", 1.5, True, "poly2", 2, {"rounds": 3})
    save_linear_model(path, model)
    return model


@pytest.mark.parametrize("sparse", [False, True])
def test_kernel_model_round_trip(tmp_path, sparse):
    """Every field comes back; a slice of the support vectors is the same slice of what was written."""
    path = tmp_path / "k.h5"
    header, keys, coef, X = kernel_model(path, sparse)
    assert model_type(path) == "kernel"
    got = read_kernel_header(path)
    assert got.spec == header.spec
    assert (got.C, got.sigma, got.scale, got.n_features, got.n_support, got.storage, got.dtype) == \
        (3.0, 0.01, 0.25, 5, 9, header.storage, np.dtype(np.float64))
    np.testing.assert_array_equal(got.classes, [3.0, 7.0])
    assert got.training == header.training
    dense = X.toarray() if sparse else X
    for start, stop in [(0, 9), (2, 5), (9, 9)]:
        k, c, Xs = read_support_vectors(path, got, start, stop)
        np.testing.assert_array_equal(k, keys[start:stop])
        np.testing.assert_array_equal(c, coef[start:stop])
        assert sp.issparse(Xs) == sparse
        np.testing.assert_array_equal(Xs.toarray() if sparse else Xs, dense[start:stop])


def test_linear_model_round_trip(tmp_path):
    """Every field of a linear model comes back."""
    path = tmp_path / "l.h5"
    model = linear_model(path)
    assert model_type(path) == "linear"
    got = read_linear_model(path)
    np.testing.assert_array_equal(got.w, model.w)
    np.testing.assert_array_equal(got.classes, model.classes)
    assert (got.b, got.solver, got.C, got.loss, got.p, got.bias, got.features, got.n_features, got.training) == \
        (-0.25, "alm", 2.0, "l2", 1.5, True, "poly2", 2, {"rounds": 3})


def _set_attr(name, value):
    def edit(f):
        f.attrs[name] = value
    return edit


def _del(name):
    def edit(f):
        del f[name]
    return edit


# (file kind, edit of a valid file, reader, message after "PATH: ")
BAD_MODELS = [
    ("kernel", _set_attr("format_version", 2), read_kernel_header,
     "attribute 'format_version': 2 is newer than this ppack reads (1)"),
    ("linear", _set_attr("format_version", 2), read_linear_model,
     "attribute 'format_version': 2 is newer than this ppack reads (1)"),
    ("kernel", _del("coef"), read_kernel_header, "missing dataset 'coef' of a ppack kernel model file"),
    ("kernel", _del("support_vectors"), read_kernel_header,
     "missing dataset 'support_vectors' of a ppack kernel model file"),
    ("linear", _del("w"), read_linear_model, "missing dataset 'w' of a ppack linear model file"),
    ("kernel", None, read_linear_model, "attribute 'model_type': expected 'linear', got 'kernel'"),
    ("linear", None, read_kernel_header, "attribute 'model_type': expected 'kernel', got 'linear'"),
    ("kernel", _set_attr("format", "other"), read_kernel_header,
     "attribute 'format': expected 'ppack-model', got 'other'"),
    ("kernel", _set_attr("n_support", 8), read_kernel_header,
     "'support_keys' and 'coef' must both have n_support = 8 entries, got 9 and 9"),
]


@pytest.mark.parametrize("kind,edit,reader,message", BAD_MODELS)
def test_bad_model_files_name_the_file_and_the_field(tmp_path, kind, edit, reader, message):
    """A damaged or mismatched model file gives an InputError naming the file and the field."""
    path = tmp_path / "m.h5"
    (kernel_model if kind == "kernel" else linear_model)(path)
    if edit is not None:
        with h5py.File(path, "r+") as f:
            edit(f)
    with pytest.raises(InputError, match=f"^{re.escape(str(path))}: {re.escape(message)}"):
        reader(path)


@pytest.mark.parametrize("reader", [read_kernel_header, read_linear_model, model_type])
def test_files_that_are_no_model_at_all(tmp_path, reader):
    """Missing files, text files and data files are refused by name, whatever reads them."""
    text = tmp_path / "train.txt"
    text.write_text("1 1:0.5\n")
    data = tmp_path / "data.h5"
    write_dataset(data, np.eye(3), np.array([1.0, -1.0, 1.0]))
    cases = [(tmp_path / "nope.h5", "No such file"), (text, "not an HDF5 model file"),
             (data, "attribute 'format': expected 'ppack-model', got 'ppack-data' (is this a data file rather "
                    "than a model?)")]
    for path, message in cases:
        with pytest.raises(InputError, match=f"^{re.escape(str(path))}: {re.escape(message)}"):
            reader(path)


def test_a_failed_write_leaves_no_temporary_file_and_keeps_the_old_model(tmp_path):
    """Writes are atomic: an error while writing leaves the old file as it was and nothing beside it."""
    path = tmp_path / "k.h5"
    with pytest.raises(TypeError):
        kernel_model(path, X=object())  # h5py cannot store the support vectors
    assert list(tmp_path.iterdir()) == []
    kernel_model(path)
    before = path.read_bytes()
    with pytest.raises(TypeError):
        kernel_model(path, X=object())
    with pytest.raises(ValueError):
        linear_model(path, w=np.array(["not", "numbers"]))
    assert [p.name for p in tmp_path.iterdir()] == ["k.h5"]
    assert path.read_bytes() == before
