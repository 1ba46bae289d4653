"""LIBSVM reader, HDF5 layout, conversion and the bundled data set."""

import bz2
import gzip
import lzma
import os
import random
import re
from pathlib import Path

import h5py
import numpy as np
import pytest
import scipy.sparse as sp

from ppack.data import hdf5, libsvm
from ppack.data.bundled import DEFAULT_TEST, DEFAULT_TRAIN, bundled_names, bundled_path
from ppack.data.convert import convert
from ppack.data.hdf5 import H5Header, is_hdf5, read_header, read_rows, write_dataset
from ppack.data.libsvm import LibsvmInfo, read_libsvm
from ppack.errors import InputError

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


# --------------------------------------------------------- reference parser


def reference_parse(raw, n_features=None):
    """Slow, obviously-correct parse of LIBSVM bytes: (indptr, indices, values, y, info)."""
    indptr, indices, values, labels = [0], [], [], []
    max_idx = max_nnz = 0
    for line in raw.split(b"\n"):
        tokens = line.split(b"#", 1)[0].split()
        if not tokens:
            continue
        labels.append(float(tokens[0]))
        nnz = 0
        for tok in tokens[1:]:
            key, val = tok.split(b":", 1)
            if key == b"qid":
                continue
            indices.append(int(key) - 1)
            values.append(float(val))
            max_idx = max(max_idx, int(key))
            nnz += 1
        max_nnz = max(max_nnz, nnz)
        indptr.append(len(indices))
    info = LibsvmInfo(len(labels), n_features or max_idx, max_nnz)
    return np.array(indptr), np.array(indices), np.array(values), np.array(labels), info


def format_number(rng, v):
    """v written in one of the spellings found in LIBSVM files."""
    style = rng.randrange(9)
    if style == 0:
        s = repr(v)
    elif style == 1:
        s = "%g" % v
    elif style == 2:
        s = "%.6e" % v
    elif style == 3:
        s = "%.17E" % v
    elif style == 4:
        s = "%.25g" % v  # more digits than a double holds: exact path needed
    elif style == 5:
        s = "%.4f" % v
        s = s.replace("0.", ".", 1) if s.startswith("0.") else s  # ".5"
    elif style == 6:
        s = "%d." % round(v)  # "5."
    elif style == 7:
        s = str(round(v))
    else:
        s = "%.3e" % v
    if rng.random() < 0.1 and not s.startswith("-"):
        s = "+" + s
    return s


def random_value(rng):
    kind = rng.random()
    if kind < 0.05:
        return rng.choice([0.0, 1.0, -1.0, 1e-310, 1.7e308, -2.5e-300, 5e-324])
    return rng.gauss(0, 1) * 10 ** rng.uniform(-30, 30)


def random_libsvm(rng, n_rows, n_features, quirks=True):
    """Random LIBSVM bytes with formatting quirks (when quirks)."""
    lines = []
    for _ in range(n_rows):
        if quirks and rng.random() < 0.1:
            lines.append(rng.choice(["", "   ", "# a comment", "\t# indented comment", "#"]))
        label = rng.choice(["+1", "-1", "1", "1.0", "-1.0", "0", "3", "2.5e-1", "-7"])
        nnz = rng.randrange(0, min(10, n_features) + 1)
        idx = sorted(rng.sample(range(1, n_features + 1), nnz))
        seps = [" ", "\t", "  ", " \t "] if quirks else [" "]
        parts = [label]
        if quirks and rng.random() < 0.2:
            parts.append(f"qid:{rng.randrange(1, 50)}")
        parts += [f"{i}:{format_number(rng, random_value(rng))}" for i in idx]
        line = parts[0] + "".join(rng.choice(seps) + p for p in parts[1:])
        if quirks and rng.random() < 0.2:
            line = rng.choice(["", " ", "\t"]) + line + rng.choice(["", " ", "\t"])
        if quirks and rng.random() < 0.15:
            line += rng.choice([" # trailing comment 1:2", "#x", "  #"])
        lines.append(line)
    eol = "\r\n" if quirks and rng.random() < 0.5 else "\n"
    text = eol.join(lines)
    if not quirks or rng.random() < 0.5:
        text += eol
    return text.encode()


def assert_same(X, y, info, ref):
    indptr, indices, values, labels, ref_info = ref
    assert info == ref_info
    assert X.shape == (len(labels), ref_info.n_features)
    assert X.indices.dtype == np.int32
    np.testing.assert_array_equal(X.indptr, indptr)
    np.testing.assert_array_equal(X.indices, indices)
    # Bit-for-bit equality, so -0.0 vs 0.0 or one-ulp errors are caught.
    np.testing.assert_array_equal(X.data.view(np.int64), values.astype(np.float64).view(np.int64))
    np.testing.assert_array_equal(y.view(np.int64), labels.view(np.int64))


def write(path, raw):
    path.write_bytes(raw)
    return path


# ----------------------------------------------------------------- tokenizer


@pytest.mark.parametrize("seed", range(6))
def test_matches_reference_parser(tmp_path, seed):
    rng = random.Random(seed)
    raw = random_libsvm(rng, n_rows=rng.randrange(1, 300), n_features=rng.randrange(1, 40))
    path = write(tmp_path / "data.txt", raw)
    X, y, info = read_libsvm(path)
    assert_same(X, y, info, reference_parse(raw))


def test_small_chunks_and_long_lines(tmp_path, monkeypatch):
    """Chunk boundaries anywhere, lines longer than a chunk, and many slow tokens."""
    rng = random.Random(7)
    raw = random_libsvm(rng, n_rows=400, n_features=300)
    path = write(tmp_path / "data.txt", raw)
    ref = reference_parse(raw)
    for size in (1, 17, 64, 1000):
        monkeypatch.setattr(libsvm, "CHUNK_BYTES", size)
        assert_same(*read_libsvm(path), ref)


def test_floats_are_correctly_rounded(tmp_path):
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**63 - 1, size=3000, dtype=np.int64)
    doubles = bits.view(np.float64)
    doubles = doubles[np.isfinite(doubles)]
    texts = []
    for i, v in enumerate(doubles):
        fmt = ("%r", "%.17g", "%.16e", "%.15g", "%.20e")[i % 5]
        texts.append(repr(float(v)) if fmt == "%r" else fmt % v)
    # Short decimals that take the fast path, including the 2**53 edge.
    texts += ["%.*f" % (int(d), x) for d, x in zip(rng.integers(0, 8, 2000),
                                                   rng.normal(0, 1e3, 2000))]
    texts += ["9007199254740993", "9007199254740992e-22", "1e22", "1e23", "123456789e-22",
              "0.1", ".3", "5.", "-0", "-0.0e5", "1e-400", "2.2250738585072011e-308",
              "4.9406564584124654e-324", "1.7976931348623157e308"]
    raw = "".join(f"1 1:{t}\n" for t in texts).encode()
    X, _, _ = read_libsvm(write(tmp_path / "f.txt", raw))
    expected = np.array([float(t) for t in texts])
    np.testing.assert_array_equal(X.data.view(np.int64), expected.view(np.int64))


def test_labels_and_basic_forms(tmp_path):
    raw = (b"+1 1:1 3:-2.5E+01\r\n"
           b"-1\t2:1e-3  4:.5 # comment 9:9\r\n"
           b"\n"
           b"# only a comment\n"
           b"1.0 qid:3 1:5.\n"
           b"-1.0\n"
           b"0 4:0\n"
           b"3 2:7")
    X, y, info = read_libsvm(write(tmp_path / "f.txt", raw))
    assert info == LibsvmInfo(6, 4, 2)
    np.testing.assert_array_equal(y, [1, -1, 1, -1, 0, 3])
    expected = np.array([[1, 0, -25, 0], [0, 1e-3, 0, 0.5], [5, 0, 0, 0],
                         [0, 0, 0, 0], [0, 0, 0, 0], [0, 7, 0, 0]])
    np.testing.assert_array_equal(X.toarray(), expected)
    assert X.nnz == 7  # the explicit 4:0 is kept as a stored entry
    assert X.has_sorted_indices


@pytest.mark.parametrize("codec", ["gz", "bz2", "xz"])
def test_compressed_round_trip(tmp_path, codec):
    raw = random_libsvm(random.Random(3), n_rows=200, n_features=20)
    pack = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[codec]
    # A misleading suffix: the codec is chosen by magic bytes.
    path = write(tmp_path / "data.txt", pack(raw))
    X, y, info = read_libsvm(path)
    assert_same(X, y, info, reference_parse(raw))


def test_corrupt_compressed_file(tmp_path):
    path = write(tmp_path / "data.gz", gzip.compress(b"1 1:1\n" * 1000)[:-20])
    with pytest.raises(InputError, match="data.gz: cannot decompress gzip"):
        read_libsvm(path)


def test_row_ranges_concatenate_to_whole(tmp_path, monkeypatch):
    raw = random_libsvm(random.Random(5), n_rows=500, n_features=30)
    path = write(tmp_path / "data.txt", raw)
    X, y, info = read_libsvm(path, n_features=30)
    monkeypatch.setattr(libsvm, "CHUNK_BYTES", 256)
    n = info.n_samples
    cuts = [0, 0, 1, 77, 78, n // 2, n - 1, n, n + 10]
    parts = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        Xs, ys, info_s = read_libsvm(path, n_features=30, row_range=(lo, hi))
        assert info_s == info
        assert Xs.shape == (max(0, min(hi, n) - lo), 30)
        parts.append((Xs, ys))
    X_all = sp.vstack([p[0] for p in parts], format="csr")
    np.testing.assert_array_equal(X_all.toarray(), X.toarray())
    np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), y)


def test_n_features_given(tmp_path):
    path = write(tmp_path / "f.txt", b"1 2:1\n-1 3:1\n")
    X, _, info = read_libsvm(path, n_features=10)
    assert X.shape == (2, 10) and info.n_features == 10


BAD_LINES = [
    (b"1 1:1 abc", "expected 'index:value', got 'abc'"),
    (b"1 1:1 5", "expected 'index:value', got '5'"),
    (b"1 a:1", "expected a positive integer feature index (indices are 1-based), got 'a:1'"),
    (b"1 1.5:1", "expected a positive integer feature index (indices are 1-based), got '1.5:1'"),
    (b"1 -2:1", "expected a positive integer feature index (indices are 1-based), got '-2:1'"),
    (b"1 :1", "expected a positive integer feature index (indices are 1-based), got ':1'"),
    (b"1 0:1", "feature index 0 is invalid: indices are 1-based"),
    (b"1 99999999999:1", "feature index 99999999999 is too large (at most 2147483647)"),
    (b"1 2:nan", "non-finite value 'nan'"),
    (b"1 2:-inf", "non-finite value '-inf'"),
    (b"1 2:1e999", "non-finite value '1e999'"),
    (b"1 2:", "expected a number after ':', got '2:'"),
    (b"1 2:1x", "expected a number after ':', got '2:1x'"),
    (b"1 2:1e", "expected a number after ':', got '2:1e'"),
    (b"nan 1:1", "non-finite label 'nan'"),
    (b"inf 1:1", "non-finite label 'inf'"),
    (b"1e999 1:1", "non-finite label '1e999'"),
    (b"abc 1:1", "expected a numeric label, got 'abc'"),
    (b"1:1 2:1", "expected a numeric label, got '1:1'"),
    (b"1 3:1 3:2", "duplicate feature index 3"),
    (b"1 3:1 2:2", "feature indices must be strictly ascending: 2 follows 3"),
    (b"1 6:1", "feature index 6 exceeds n_features=5"),
]


@pytest.mark.parametrize("bad,message", BAD_LINES)
def test_errors_name_file_and_line(tmp_path, bad, message):
    # Blank and comment lines count in the line number; the bad line is line 5.
    raw = b"1 1:1\n\n# comment\n-1 2:0.5\r\n" + bad + b"\n1 1:1\n"
    path = write(tmp_path / "bad.txt", raw)
    with pytest.raises(InputError, match=f"bad.txt: line 5: {re.escape(message)}$"):
        read_libsvm(path, n_features=5)
    # Rows outside row_range are validated too: every rank sees the same error.
    with pytest.raises(InputError, match="line 5: "):
        read_libsvm(path, n_features=5, row_range=(0, 1))


def test_error_line_after_chunk_boundary(tmp_path, monkeypatch):
    raw = b"1 1:1\n" * 1000 + b"1 1:x\n"
    monkeypatch.setattr(libsvm, "CHUNK_BYTES", 100)
    with pytest.raises(InputError, match="line 1001: expected a number"):
        read_libsvm(write(tmp_path / "f.txt", raw))


def test_float32_overflow(tmp_path):
    path = write(tmp_path / "f.txt", b"1 1:1\n1 1:1e39\n")
    assert read_libsvm(path)[0].data[1] == 1e39
    with pytest.raises(InputError, match="line 2: value '1e39' does not fit the requested float32"):
        read_libsvm(path, dtype=np.float32)
    path = write(tmp_path / "g.txt", b"1 1:0.5\n1 1:3.4028235677973366e38\n")
    with pytest.raises(InputError, match="line 2: value '3.40282356.*' does not fit .*float32"):
        read_libsvm(path, dtype=np.float32)
    path = write(tmp_path / "h.txt", b"1 1:0.1 2:3.4028234663852886e38\n")
    X, _, _ = read_libsvm(path, dtype=np.float32)
    assert X.dtype == np.float32
    np.testing.assert_array_equal(X.data, np.array([0.1, 3.4028234663852886e38], np.float32))


@pytest.mark.parametrize("raw", [b"", b"\n\n  \n", b"# header only\n#\n"])
def test_no_data_lines(tmp_path, raw):
    with pytest.raises(InputError, match="empty.txt: no data lines"):
        read_libsvm(write(tmp_path / "empty.txt", raw))


def test_missing_file_and_bad_arguments(tmp_path):
    with pytest.raises(InputError, match="nope.txt: No such file"):
        read_libsvm(tmp_path / "nope.txt")
    path = write(tmp_path / "f.txt", b"1 1:1\n")
    with pytest.raises(InputError, match="row_range"):
        read_libsvm(path, row_range=(3, 1))
    with pytest.raises(InputError, match="dtype"):
        read_libsvm(path, dtype=np.int32)
    with pytest.raises(InputError, match="n_features"):
        read_libsvm(path, n_features=0)


def test_hdf5_given_to_text_reader(tmp_path):
    path = tmp_path / "d.h5"
    write_dataset(path, np.eye(3), np.ones(3))
    with pytest.raises(InputError, match="HDF5"):
        read_libsvm(path)


# ------------------------------------------------------------------- HDF5


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
    real = hdf5._dataset

    def failing(group, name, data, compression):
        if name == "y":
            raise RuntimeError("disk full")
        return real(group, name, data, compression)

    monkeypatch.setattr(hdf5, "_dataset", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        write_dataset(target, X * 2, y)
    assert [p.name for p in tmp_path.iterdir()] == ["d.h5"]
    assert target.read_bytes() == before
    monkeypatch.setattr(hdf5, "_dataset", real)
    os.remove(target)
    with pytest.raises(RuntimeError):
        monkeypatch.setattr(hdf5, "_dataset", failing)
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
    ("dense", _replace("X", np.ones((4, 3), np.int32)), "'X': expected 2-D float array"),
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


# ---------------------------------------------------------------- convert


def test_convert_compressed_text(tmp_path):
    raw = random_libsvm(random.Random(11), n_rows=120, n_features=15, quirks=True)
    src = write(tmp_path / "d.txt.xz", lzma.compress(raw))
    dst = tmp_path / "d.h5"
    header = convert(src, dst, n_features=20, storage="csr", dtype=np.float64)
    indptr, indices, values, labels, info = reference_parse(raw, n_features=20)
    assert header == H5Header(info.n_samples, 20, "csr", info.max_row_nnz, np.dtype(np.float64))
    X, y = read_rows(dst, 0, header.n_samples)
    np.testing.assert_array_equal(X.indptr, indptr)
    np.testing.assert_array_equal(X.data, values)
    np.testing.assert_array_equal(y, labels)
    dense = convert(src, tmp_path / "dense.h5", n_features=20, storage="dense")
    assert dense.storage == "dense" and dense.max_row_nnz == 20
    with pytest.raises(InputError, match="must differ"):
        convert(src, src)


# ---------------------------------------------------------------- bundled


def test_bundled_a9a():
    assert DEFAULT_TRAIN in bundled_names() and DEFAULT_TEST in bundled_names()
    counts = {DEFAULT_TRAIN: (32561, 451592, 24720, 7841), DEFAULT_TEST: (16281, 225731, 12435, 3846)}
    for name, (n, nnz, neg, pos) in counts.items():
        path = bundled_path(name)
        assert path.stat().st_size < 1 << 20
        header = read_header(path)
        assert header == H5Header(n, 123, "csr", 14, np.dtype(np.float32))
        X, y = read_rows(path, 0, n)
        assert X.nnz == nnz and np.all(X.data == 1)
        assert np.sum(y == -1) == neg and np.sum(y == 1) == pos
    with pytest.raises(InputError, match="no bundled data set 'iris'"):
        bundled_path("iris")


@pytest.mark.skipif(not (SHARED_DATA / "a9a").is_dir(),
                    reason="shared/data/a9a (the LIBSVM source files) is not beside the repository")
def test_bundled_a9a_matches_source():
    for name in (DEFAULT_TRAIN, DEFAULT_TEST):
        X_src, y_src, info = read_libsvm(SHARED_DATA / "a9a" / f"{name}.bz2", n_features=123,
                                         dtype=np.float32)
        X, y = read_rows(bundled_path(name), 0, info.n_samples)
        assert (X != X_src).nnz == 0
        np.testing.assert_array_equal(X.indices, X_src.indices)
        np.testing.assert_array_equal(y, y_src)
