"""LIBSVM text (compressed) to the ppack HDF5 layout."""
import lzma
import random

import numpy as np
import pytest

from ppack.data.convert import convert
from ppack.data.hdf5 import H5Header, read_rows
from ppack.errors import InputError

from conftest import random_libsvm, write
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
    np.testing.assert_array_equal(X.data, values)
    np.testing.assert_array_equal(y, labels)
    dense = convert(src, tmp_path / "dense.h5", n_features=20, storage="dense")
    assert dense.storage == "dense" and dense.max_row_nnz == 20
    with pytest.raises(InputError, match="must differ"):
        convert(src, src)
