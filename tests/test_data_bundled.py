"""The bundled a9a data set: its counts, and its LIBSVM source files (tests/data/a9a)."""
import numpy as np
import pytest

from ppack.data.bundled import DEFAULT_TEST, DEFAULT_TRAIN, bundled_names, bundled_path
from ppack.data.hdf5 import H5Header, read_header, read_rows
from ppack.errors import InputError


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


def test_bundled_a9a_matches_source(benchmark_data):
    """Row for row against the LIBSVM source files it was converted from."""
    X_train, y_train, X_test, y_test = benchmark_data("a9a")
    for name, X_src, y_src in ((DEFAULT_TRAIN, X_train, y_train), (DEFAULT_TEST, X_test, y_test)):
        X, y = read_rows(bundled_path(name), 0, X_src.shape[0])
        assert X.dtype == np.float32 and (X != X_src).nnz == 0
        np.testing.assert_array_equal(X.indices, X_src.indices)
        np.testing.assert_array_equal(y, y_src)
