"""The ppack HDF5 data layout: round trips, slices, canonical CSR, atomic writes, bad layouts."""
import os

import h5py
import numpy as np
import pytest
import scipy.sparse as sp

from ppack.data import hdf5
from ppack.data.hdf5 import H5Header, is_hdf5, read_header, read_rows, write_dataset
from ppack.errors import InputError

from helpers import write


def random_matrix(seed, n=60, d=9, density=0.3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < density)
    y = rng.choice([-1.0, 1.0, 2.5], size=n)
    return X, y


@pytest.mark.parametrize("storage", ["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("compression", [None, "gzip", "lzf"])
def test_hdf5_round_trip(tmp_path, storage, dtype, compression):
    X, y = random_matrix(1)
    path = tmp_path / "d.h5"
    source = sp.csr_matrix(X) if storage == "csr" else X
    header = write_dataset(path, source, y, storage=storage, dtype=dtype, compression=compression)
    longest = int((X != 0).sum(axis=1).max()) if storage == "csr" else X.shape[1]
    expected = H5Header(60, 9, storage, longest, np.dtype(dtype))
    assert header == expected and read_header(path) == expected
    assert is_hdf5(path)
    Xr, yr = read_rows(path, 0, 60)
    np.testing.assert_array_equal(yr, y)
    assert Xr.dtype == dtype
    if storage == "dense":
        assert isinstance(Xr, np.ndarray) and Xr.flags.c_contiguous
    else:
        assert sp.isspmatrix_csr(Xr) and Xr.indices.dtype == np.int32
        Xr = Xr.toarray()
    np.testing.assert_array_equal(Xr, X.astype(dtype))


@pytest.mark.parametrize("storage", ["dense", "csr"])
def test_hdf5_slices(tmp_path, storage):
    X, y = random_matrix(2, n=101)
    path = tmp_path / "d.h5"
    write_dataset(path, X, y, storage=storage, compression="gzip")
    cuts = [0, 0, 1, 33, 34, 100, 101]
    blocks = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        Xs, ys = read_rows(path, lo, hi, dtype=np.float32)
        assert Xs.shape == (hi - lo, 9) and Xs.dtype == np.float32 and ys.shape == (hi - lo,)
        blocks.append(Xs.toarray() if sp.issparse(Xs) else Xs)
        np.testing.assert_array_equal(ys, y[lo:hi])
    np.testing.assert_array_equal(np.vstack(blocks), X.astype(np.float32))
    with pytest.raises(InputError, match=r"row range \[5, 102\)"):
        read_rows(path, 5, 102)


def test_auto_storage_and_canonical_csr(tmp_path):
    X, y = random_matrix(3, density=0.1)
    assert write_dataset(tmp_path / "a.h5", X, y).storage == "csr"
    assert write_dataset(tmp_path / "b.h5", np.ones((4, 3)), np.ones(4)).storage == "dense"
    # Unsorted and duplicate entries are summed and sorted; the caller's matrix is untouched.
    messy = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([2, 0, 2]), np.array([0, 3, 3])),
                          shape=(2, 4))
    before = messy.data.copy()
    write_dataset(tmp_path / "c.h5", messy, [1, -1], storage="csr", dtype=np.float32)
    Xr, _ = read_rows(tmp_path / "c.h5", 0, 2)
    np.testing.assert_array_equal(Xr.indices, [0, 2])
    np.testing.assert_array_equal(Xr.data, [2.0, 4.0])
    np.testing.assert_array_equal(messy.data, before)
    assert messy.data.dtype == np.float64


def test_write_rejects_bad_input_and_leaves_nothing(tmp_path):
    X, y = random_matrix(4)
    target = tmp_path / "d.h5"
    with pytest.raises(InputError, match=r"y must have shape \(60,\)"):
        write_dataset(target, X, y[:-1])
    with pytest.raises(InputError, match="NaN"):
        write_dataset(target, X, np.full(60, np.nan))
    with pytest.raises(InputError, match="storage"):
        write_dataset(target, X, y, storage="coo")
    with pytest.raises(InputError, match="compression"):
        write_dataset(target, X, y, compression="zstd")
    assert list(tmp_path.iterdir()) == []


def test_failed_write_keeps_old_file(tmp_path, monkeypatch):
    X, y = random_matrix(5)
    target = tmp_path / "d.h5"
    write_dataset(target, X, y)
    before = target.read_bytes()
    real = hdf5._chunked

    def failing(shape, dtype, compression):
        if np.dtype(dtype) != np.float64 or len(shape) == 2:  # X's datasets, created after y
            raise RuntimeError("disk full")
        return real(shape, dtype, compression)

    monkeypatch.setattr(hdf5, "_chunked", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        write_dataset(target, X * 2, y)
    assert [p.name for p in tmp_path.iterdir()] == ["d.h5"]
    assert target.read_bytes() == before
    monkeypatch.setattr(hdf5, "_chunked", real)
    os.remove(target)
    with pytest.raises(RuntimeError):
        monkeypatch.setattr(hdf5, "_chunked", failing)
        write_dataset(target, X, y)
    assert list(tmp_path.iterdir()) == []


def valid_file(tmp_path, storage):
    X = np.array([[1.0, 0, 2], [0, 0, 0], [0, 3, 0], [4, 5, 6]])
    path = tmp_path / f"{storage}.h5"
    write_dataset(path, X, [1, -1, 1, -1], storage=storage)
    return path


def _del(name):
    def edit(f):
        del f[name]
    return edit


def _set_attr(name, value):
    def edit(f):
        f.attrs[name] = value
    return edit


def _replace(name, data):
    def edit(f):
        del f[name]
        f[name] = data
    return edit


BAD_LAYOUTS = [
    ("csr", _del("X"), "'X': expected a group"),
    ("dense", _del("X"), "'X': expected a dataset .* found nothing"),
    ("csr", _del("y"), "'y': expected a dataset"),
    ("csr", _del("X/indices"), "'X/indices': expected a dataset"),
    ("csr", _set_attr("format", "other"), "'format': expected 'ppack-data', found 'other'"),
    ("csr", lambda f: f.attrs.__delitem__("format"), "missing root attribute 'format'"),
    ("csr", _set_attr("format_version", 2), "'format_version': expected 1, found 2"),
    ("csr", _set_attr("storage", "coo"), "'storage': expected 'dense' or 'csr'"),
    ("csr", _set_attr("n_samples", 0), "'n_samples': expected an integer >= 1"),
    ("csr", _replace("y", np.ones(5)), r"'y': expected shape \(4,\) \(n_samples\), found \(5,\)"),
    ("dense", _replace("X", np.ones((3, 3))),
     r"'X': expected shape \(4, 3\) \(n_samples, n_features\), found \(3, 3\)"),
    ("dense", _replace("X", np.ones((4, 3), np.int32)), "'X': expected 2-D array of float or uint8 values"),
    ("dense", _replace("X", np.ones((4, 3), np.uint16)), "'X': expected float64, float32, float16, uint8 values"),
    ("dense", lambda f: f["X"].attrs.__setitem__("value_scale", -1.0), "'X' attribute 'value_scale': expected"),
    ("csr", lambda f: f["X"].attrs.__setitem__("value_scale", "big"), "'X' attribute 'value_scale': expected"),
    ("dense", _set_attr("max_row_nnz", 2), "'max_row_nnz': expected 3"),
    ("csr", _replace("X/indptr", np.array([0, 2, 2, 3], np.int64)),
     r"'X/indptr': expected shape \(5,\) \(n_samples \+ 1\), found \(4,\)"),
    ("csr", _replace("X/indptr", np.array([0, 2, 1, 3, 6], np.int64)),
     "'X/indptr': must be non-decreasing, but row 1"),
    ("csr", _replace("X/indptr", np.array([0, 2, 2, 3, 5], np.int64)),
     "'X/indptr': expected first entry 0 and last 6"),
    ("csr", _replace("X/indices", np.array([0, 2, 1, 0, 1, 3], np.int32)),
     r"'X/indices': column 3 in row 3 is outside \[0, 3\)"),
    ("csr", _replace("X/indices", np.array([0, 2, 1, 1, 0, 2], np.int32)),
     "'X/indices': columns of row 3 are not strictly ascending"),
    ("csr", _replace("X/data", np.ones(5)), r"'X/indices': expected shape \(5,\)"),
    ("csr", _set_attr("max_row_nnz", 2), "'max_row_nnz': expected 3"),
]


@pytest.mark.parametrize("storage,edit,message", BAD_LAYOUTS)
def test_bad_layouts(tmp_path, storage, edit, message):
    path = valid_file(tmp_path, storage)
    with h5py.File(path, "r+") as f:
        edit(f)
    with pytest.raises(InputError, match=f"{storage}.h5: .*{message}"):
        read_header(path)


def test_read_rows_checks_its_slice(tmp_path):
    path = valid_file(tmp_path, "csr")
    with h5py.File(path, "r+") as f:
        _replace("X/indices", np.array([0, 2, 1, 0, 1, 3], np.int32))(f)
    read_rows(path, 0, 3)  # the bad column is in row 3 only
    with pytest.raises(InputError, match=r"column 3 in row 3 is outside \[0, 3\)"):
        read_rows(path, 2, 4)
    read_header(path, check_indices=False)


def test_missing_and_non_hdf5_files(tmp_path):
    with pytest.raises(InputError, match="nope.h5: No such file"):
        read_header(tmp_path / "nope.h5")
    text = write(tmp_path / "t.txt", b"1 1:1\n")
    assert not is_hdf5(text) and not is_hdf5(tmp_path / "nope.h5")
    with pytest.raises(InputError, match="t.txt: not an HDF5 file"):
        read_header(text)
    with pytest.raises(InputError, match="t.txt: not an HDF5 file"):
        read_rows(text, 0, 1)


def test_is_hdf5_with_user_block(tmp_path):
    path = tmp_path / "ub.h5"
    with h5py.File(path, "w", userblock_size=1024) as f:
        f["a"] = 1
    assert is_hdf5(path)
