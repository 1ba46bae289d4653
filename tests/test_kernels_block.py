"""RowBlock: the rows every rank holds."""
import numpy as np

from ppack.kernels.block import RowBlock

from helpers import make_problem


def test_block_transposed_is_dense_transpose():
    X, _ = make_problem(10, 7, sparse=True, seed=5)
    block = RowBlock.from_rows(X, np.zeros(10), 9)  # padded to 9 features
    XT = block.transposed(2, 8)
    expected = np.zeros((9, 6))
    expected[:7] = X.toarray()[2:8].T
    np.testing.assert_array_equal(XT, expected)


def test_transposed_of_csr_rows_with_an_empty_row_matches_numpy():
    """The numba scatter behind ``transposed`` against numpy's dense transpose, float32 values."""
    dense = np.array([[0.0, 1.5, 0.0, -2.0], [0.0, 0.0, 0.0, 0.0], [3.0, 0.0, 0.25, 0.0]], dtype=np.float32)
    import scipy.sparse as sp

    block = RowBlock.from_rows(sp.csr_matrix(dense), np.zeros(3), 5)
    XT = block.transposed(0, 3)
    assert XT.dtype == np.float64
    expected = np.zeros((5, 3))
    expected[:4] = dense.T
    np.testing.assert_array_equal(XT, expected)
    np.testing.assert_array_equal(block.transposed(1, 3), expected[:, 1:])
