"""RowBlock: the rows every rank holds."""
import numpy as np

from ppack.data.block import RowBlock

from conftest import make_problem


def test_block_transposed_is_dense_transpose():
    X, _ = make_problem(10, 7, sparse=True, seed=5)
    block = RowBlock.from_rows(X, np.zeros(10), 9)  # padded to 9 features
    XT = block.transposed(2, 8)
    expected = np.zeros((9, 6))
    expected[:7] = X.toarray()[2:8].T
    np.testing.assert_array_equal(XT, expected)
