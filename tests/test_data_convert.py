"""LIBSVM text (compressed) to the ppack HDF5 layout, streamed in two passes."""
import lzma
import random
import re

import numpy as np
import pytest
import scipy.sparse as sp

from ppack.data import libsvm
from ppack.data.convert import convert, scan
from ppack.data.hdf5 import H5Header, read_header, read_rows, read_stored_rows, write_dataset
from ppack.errors import InputError

from helpers import random_libsvm, write
from naive import reference_parse


def test_convert_compressed_text(tmp_path):
    raw = random_libsvm(random.Random(11), n_rows=120, n_features=15, quirks=True)
    src = write(tmp_path / "d.txt.xz", lzma.compress(raw))
    dst = tmp_path / "d.h5"
    header = convert(src, dst, n_features=20, storage="csr", dtype=np.float64)
    indptr, indices, values, labels, info = reference_parse(raw, n_features=20)
    assert header == H5Header(info.n_samples, 20, "csr", info.max_row_nnz, np.dtype(np.float64))
    X, y = read_rows(dst, 0, header.n_samples)
    np.testing.assert_array_equal(X.indptr, indptr)
    np.testing.assert_array_equal(X.indices, indices)
    np.testing.assert_array_equal(X.data, values)
    np.testing.assert_array_equal(y, labels)
    dense = convert(src, tmp_path / "dense.h5", n_features=20, storage="dense")
    assert dense.storage == "dense" and dense.max_row_nnz == 20
    Xd, yd = read_rows(tmp_path / "dense.h5", 0, header.n_samples)
    np.testing.assert_array_equal(Xd, sp.csr_matrix((values, indices, indptr), shape=(info.n_samples, 20)).toarray())
    np.testing.assert_array_equal(yd, labels)
    with pytest.raises(InputError, match="must differ"):
        convert(src, src)


def integer_values(raw, rng):
    """raw with every index:value's value replaced by an integer in 0..255 (any dtype holds them exactly)."""
    return re.sub(rb"(\d+):[^\s#]+", lambda m: m.group(1) + b":" + str(rng.randrange(256)).encode(), raw)


def assert_same_file(path, expected_path):
    """The two ppack files hold the same header, labels and stored values, exactly."""
    header, expected = read_header(path), read_header(expected_path)
    assert header == expected
    X, y, _ = read_stored_rows(path, 0, header.n_samples)
    Xe, ye, _ = read_stored_rows(expected_path, 0, header.n_samples)
    np.testing.assert_array_equal(y.view(np.int64), ye.view(np.int64))
    if sp.issparse(X):
        np.testing.assert_array_equal(X.indptr, Xe.indptr)
        np.testing.assert_array_equal(X.indices, Xe.indices)
        X, Xe = X.data, Xe.data
    assert X.dtype == Xe.dtype
    np.testing.assert_array_equal(X, Xe)  # exact; -0.0 equals 0.0 (the whole-file dense write loses the sign)


@pytest.mark.parametrize("storage", ["dense", "csr", "auto"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "uint8"])
def test_streaming_equals_whole_file_write(tmp_path, monkeypatch, storage, dtype):
    """With 64-byte chunks, the file equals write_dataset of the whole parsed text (float64: every
    double of the text; the compact types: integer values they hold exactly)."""
    rng = random.Random(f"{storage}{dtype}")
    raw = random_libsvm(rng, n_rows=150, n_features=25, quirks=True)
    if dtype != "float64":
        raw = integer_values(raw, rng)
    src = write(tmp_path / "d.txt", raw)
    indptr, indices, values, labels, info = reference_parse(raw, n_features=27)
    X = sp.csr_matrix((values, indices, indptr), shape=(info.n_samples, 27))
    expected = write_dataset(tmp_path / "whole.h5", X, labels, storage=storage, dtype=dtype)
    monkeypatch.setattr(libsvm, "CHUNK_BYTES", 64)
    header = convert(src, tmp_path / "streamed.h5", n_features=27, storage=storage, dtype=dtype)
    assert header == expected
    assert_same_file(tmp_path / "streamed.h5", tmp_path / "whole.h5")


def test_scan_counts_the_whole_text(tmp_path, monkeypatch):
    """Pass 1: rows, largest index, pairs, longest row, value range, over every chunk."""
    monkeypatch.setattr(libsvm, "CHUNK_BYTES", 64)
    raw = random_libsvm(random.Random(4), n_rows=200, n_features=30, quirks=True)
    sizes = scan(write(tmp_path / "d.txt", raw))
    indptr, _, values, _, info = reference_parse(raw)
    assert (sizes.n_samples, sizes.n_features, sizes.nnz, sizes.max_row_nnz) == (
        info.n_samples, info.n_features, len(values), info.max_row_nnz)
    assert (sizes.largest, sizes.smallest) == (values.max(), values.min())


@pytest.mark.parametrize("digits", [7, 8, 9])
def test_uint8_holds_steps_of_1_over_255_exactly(tmp_path, monkeypatch, digits):
    """Decimal text of k/255 (7-9 significant digits) is stored as k with value_scale 1/255
    and read back as float32(k/255), whatever the storage."""
    monkeypatch.setattr(libsvm, "CHUNK_BYTES", 64)
    rng = np.random.default_rng(digits)
    K = rng.integers(0, 256, size=(60, 9))
    K[rng.random(K.shape) < 0.5] = 0
    K[0, 0] = 255
    lines = [f"{r % 3} " + " ".join(f"{j + 1}:{k / 255:.{digits}g}" for j, k in enumerate(row) if k)
             for r, row in enumerate(K)]
    src = write(tmp_path / "pixels.txt", ("\n".join(lines) + "\n").encode())
    for storage in ("dense", "csr"):
        header = convert(src, tmp_path / "p.h5", n_features=9, storage=storage, dtype="uint8")
        assert (header.dtype, header.value_scale) == (np.uint8, 1 / 255)
        stored, _, _ = read_stored_rows(tmp_path / "p.h5", 0, 60)
        stored = stored.toarray() if storage == "csr" else stored
        np.testing.assert_array_equal(stored, K)
        X, _ = read_rows(tmp_path / "p.h5", 0, 60, dtype=np.float32)
        X = X.toarray() if storage == "csr" else X
        np.testing.assert_array_equal(X, (K / 255).astype(np.float32))


def test_uint8_holds_integers_0_to_255_with_scale_1(tmp_path):
    """Integer data up to 255 gets value_scale 1 and is stored unchanged."""
    K = np.arange(256).reshape(32, 8)
    src = write(tmp_path / "ints.txt", "".join(
        "1 " + " ".join(f"{j + 1}:{k}" for j, k in enumerate(row) if k) + "\n" for row in K).encode())
    header = convert(src, tmp_path / "i.h5", dtype="uint8")
    assert (header.storage, header.value_scale) == ("dense", 1.0)
    np.testing.assert_array_equal(read_stored_rows(tmp_path / "i.h5", 0, 32)[0], K)
    np.testing.assert_array_equal(read_rows(tmp_path / "i.h5", 0, 32)[0], K.astype(np.float32))


def test_uint8_with_a_given_value_scale(tmp_path):
    """value_scale 0.5 stores steps of 0.5 (up to 127.5) as their step number."""
    K = np.arange(256).reshape(32, 8)
    src = write(tmp_path / "halves.txt", "".join(
        "1 " + " ".join(f"{j + 1}:{k / 2}" for j, k in enumerate(row) if k) + "\n" for row in K).encode())
    header = convert(src, tmp_path / "h.h5", dtype="uint8", value_scale=0.5, storage="csr")
    assert header.value_scale == 0.5
    np.testing.assert_array_equal(read_stored_rows(tmp_path / "h.h5", 0, 32)[0].toarray(), K)
    np.testing.assert_array_equal(read_rows(tmp_path / "h.h5", 0, 32)[0].toarray(), K / 2)


UNFIT = [
    ("uint8", None, "0.5", "line 6: value 0.5 is not k * value_scale (0.00392156863)"),
    ("uint8", None, "-0.2", "line 6: value -0.2 is not k * value_scale"),
    ("uint8", 0.2, "51.2", "line 6: value 51.2 is not k * value_scale (0.2)"),  # step 256
    ("float16", None, "65520", "line 6: value 65520.0 does not fit float16"),
    ("float32", None, "1e39", "line 6: value 1e+39 does not fit float32"),
]


@pytest.mark.parametrize("storage", ["dense", "csr"])
@pytest.mark.parametrize("dtype,value_scale,bad,message", UNFIT)
def test_unfit_value_names_the_line_and_writes_nothing(tmp_path, monkeypatch, storage, dtype, value_scale, bad,
                                                       message):
    """A value the stored dtype cannot hold: InputError naming file and text line (comments count);
    no output file, and an existing one is left as it was."""
    monkeypatch.setattr(libsvm, "CHUNK_BYTES", 16)
    raw = f"1 1:1 3:0.2\n# comment\n\n-1 2:0.6\n1 1:0.4\n-1 1:0.2 2:{bad}\n1 3:1\n".encode()
    src = write(tmp_path / "bad.txt", raw)
    with pytest.raises(InputError, match=f"bad.txt: {re.escape(message)}"):
        convert(src, tmp_path / "new.h5", storage=storage, dtype=dtype, value_scale=value_scale)
    assert list(tmp_path.iterdir()) == [src]
    old = write(tmp_path / "old.h5", b"keep me")
    with pytest.raises(InputError, match="line 6"):
        convert(src, old, storage=storage, dtype=dtype, value_scale=value_scale)
    assert old.read_bytes() == b"keep me"
    assert sorted(tmp_path.iterdir()) == [src, old]


def test_bad_arguments(tmp_path):
    src = write(tmp_path / "d.txt", b"1 1:1\n")
    for kwargs, message in [({"dtype": "int32"}, "dtype must be one of"), ({"storage": "coo"}, "storage must be"),
                            ({"compression": "zip"}, "compression must be"),
                            ({"value_scale": 0.0}, "value_scale must be a positive"),
                            ({"value_scale": float("nan")}, "value_scale must be a positive")]:
        with pytest.raises(InputError, match=message):
            convert(src, tmp_path / "o.h5", **kwargs)
    with pytest.raises(InputError, match="no line has a feature"):
        convert(write(tmp_path / "labels.txt", b"1\n-1\n"), tmp_path / "o.h5")
    assert not (tmp_path / "o.h5").exists()
