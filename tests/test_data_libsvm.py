"""The LIBSVM text reader against a slow reference parser: quirks, rounding, chunks, compression, errors."""
import bz2
import gzip
import lzma
import random
import re

import numpy as np
import pytest
import scipy.sparse as sp

from ppack.data import libsvm
from ppack.data.hdf5 import write_dataset
from ppack.data.libsvm import LibsvmInfo, read_libsvm
from ppack.errors import InputError

from helpers import random_libsvm, write
from naive import reference_parse


def assert_same(X, y, info, ref):
    """The reader's (X, y, info) equals the reference parse, bit for bit."""
    indptr, indices, values, labels, ref_info = ref
    assert info == ref_info
    assert X.shape == (len(labels), ref_info.n_features)
    assert X.indices.dtype == np.int32
    np.testing.assert_array_equal(X.indptr, indptr)
    np.testing.assert_array_equal(X.indices, indices)
    # Bit-for-bit equality, so -0.0 vs 0.0 or one-ulp errors are caught.
    np.testing.assert_array_equal(X.data.view(np.int64), values.astype(np.float64).view(np.int64))
    np.testing.assert_array_equal(y.view(np.int64), labels.view(np.int64))


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


def test_chunks_hold_every_row_once_with_its_line(tmp_path, monkeypatch):
    """iter_libsvm_chunks: consecutive chunks that concatenate to the reference parse, each row
    with its 1-based text line (blank and comment lines count)."""
    monkeypatch.setattr(libsvm, "CHUNK_BYTES", 64)
    raw = random_libsvm(random.Random(9), n_rows=300, n_features=20)
    indptr, indices, values, labels, info = reference_parse(raw)
    chunks = list(libsvm.iter_libsvm_chunks(write(tmp_path / "d.txt", raw)))
    assert len(chunks) > 20
    assert [c.first_row for c in chunks] == list(np.cumsum([0] + [c.n_rows for c in chunks[:-1]]))
    assert sum(c.n_rows for c in chunks) == info.n_samples
    assert max(c.max_index for c in chunks) == info.n_features
    assert max(c.max_row_nnz for c in chunks) == info.max_row_nnz
    np.testing.assert_array_equal(np.concatenate([c.labels for c in chunks]), labels)
    np.testing.assert_array_equal(np.concatenate([np.diff(c.indptr) for c in chunks]), np.diff(indptr))
    np.testing.assert_array_equal(np.concatenate([c.indices for c in chunks]), indices)
    np.testing.assert_array_equal(np.concatenate([c.values for c in chunks]), values)
    lines = [k + 1 for k, line in enumerate(raw.split(b"\n")) if line.split(b"#", 1)[0].split()]
    np.testing.assert_array_equal(np.concatenate([c.lines for c in chunks]), lines)
    for c in chunks:
        assert [c.line_of_pair(k) for k in range(len(c.values))] == list(np.repeat(c.lines, np.diff(c.indptr)))


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
              "4.9406564584124654e-324", "1.7976931348623157e308",
              # 19 significant digits above 2**63: the mantissa must not wrap around
              "9980257793744363520.", "9223372036854775808", "-9999999999999999999e-3", "0.9999999999999999999"]
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
