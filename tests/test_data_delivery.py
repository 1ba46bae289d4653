"""deliver_rows: the rows of given global ids, from wherever they live, on every rank with one sum."""
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

from ppack.data.delivery import deliver_rows
from ppack.data.shard import Shard
from ppack.mpi.collectives import Collectives

from helpers import make_problem

COMMS = [pytest.param(MPI.COMM_SELF, id="self"),
         pytest.param(MPI.COMM_WORLD, id="world", marks=pytest.mark.mpi(min_size=2))]


def delivered(comm, sparse, dtype, n=90, d=7, r=40, n_features=None):
    """(block, X, y, ids, collectives): ``r`` random ids (repeats included) delivered from shards of X."""
    X, y = make_problem(n, d, sparse=sparse, seed=50)
    X = X.astype(dtype)
    shard = Shard.from_arrays(X, y, comm.Get_rank(), comm.Get_size())
    ids = np.random.default_rng(51).integers(0, n, size=r)  # the same on every rank
    collectives = Collectives(comm)
    block = deliver_rows(collectives, shard, shard.y, ids, n_features)
    return block, X, y, ids, collectives


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("comm", COMMS)
def test_every_rank_gets_exactly_the_rows_and_labels(comm, sparse, dtype):
    """The block is the data set's rows ``ids`` bit for bit, in the shard's dtype, after one ``sum``."""
    block, X, y, ids, collectives = delivered(comm, sparse, dtype)
    assert collectives.calls == Counter(sum=1)
    assert block.n_rows == len(ids) and block.n_features == X.shape[1]
    np.testing.assert_array_equal(block.y, y[ids])
    expected = X[ids]
    if sparse:
        assert block.dense is None
        indptr, indices, values = block.csr
        assert indices.dtype == np.int32 and values.dtype == dtype
        np.testing.assert_array_equal(indptr, expected.indptr)
        np.testing.assert_array_equal(indices, expected.indices)
        np.testing.assert_array_equal(values, expected.data)
    else:
        assert block.csr is None and block.dense.dtype == dtype
        np.testing.assert_array_equal(block.dense, expected)


@pytest.mark.parametrize("sparse", [False, True])
def test_rows_are_padded_to_a_models_width(sparse):
    """With ``n_features`` wider than the data, the rows come padded with zero columns."""
    block, X, _, ids, _ = delivered(MPI.COMM_SELF, sparse, np.float64, n_features=10)
    assert block.n_features == 10
    taken = block.take(list(range(block.n_rows)))
    if isinstance(taken, tuple):  # a CSR triple
        taken = sp.csr_matrix(taken[::-1], shape=(block.n_rows, 10)).toarray()
    expected = np.zeros((len(ids), 10))
    expected[:, :X.shape[1]] = X.toarray()[ids] if sparse else X[ids]
    np.testing.assert_array_equal(taken, expected)


@pytest.mark.parametrize("rows", [[3, 0, 3], [], [5]])
def test_take_of_a_sparse_block_gives_the_rows_as_csr(rows):
    """``take`` builds the CSR triple of the chosen rows (repeats and none included) with numpy alone."""
    block, X, _, ids, _ = delivered(MPI.COMM_SELF, True, np.float64)
    indptr, indices, values = block.take(rows)
    expected = sp.csr_matrix(X)[ids][rows] if rows else sp.csr_matrix((0, X.shape[1]))
    np.testing.assert_array_equal(indptr, expected.indptr)
    np.testing.assert_array_equal(indices, expected.indices)
    np.testing.assert_array_equal(values, expected.data)


def test_unpadding_gives_the_csr_rows_numpy_gives():
    """The numba unpacking of padded rows against numpy's boolean mask, with an empty row and
    leftover values in the padding."""
    from ppack.data.delivery import _unpad_rows

    nnz = np.array([2.0, 0.0, 3.0])
    idx = np.array([[1.0, 4.0, 9.0], [7.0, 7.0, 7.0], [0.0, 2.0, 5.0]])
    val = np.array([[0.5, -1.0, 8.0], [9.0, 9.0, 9.0], [1.0, 2.0, 3.0]])
    indptr, indices, values = _unpad_rows(nnz, idx, val)
    keep = np.arange(3)[None, :] < nnz[:, None]
    np.testing.assert_array_equal(indptr, [0, 2, 2, 5])
    assert indptr.dtype == np.int64 and indices.dtype == np.int32
    np.testing.assert_array_equal(indices, idx[keep].astype(np.int32))
    np.testing.assert_array_equal(values, val[keep])
