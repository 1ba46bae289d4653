"""Random blocks (ppack.linear.blocks): rows of contiguous shards dealt out to the ranks."""
import numpy as np
import pytest
from mpi4py import MPI

from ppack.data.shard import Shard
from ppack.linear.blocks import random_blocks
from ppack.linear.estimator import BlockAveragedSVC

from naive import averaging_problem, liblinear_optimum

WORLD = MPI.COMM_WORLD
SELF = MPI.COMM_SELF


@pytest.mark.mpi(min_size=2)
def test_rows_of_a_sorted_file_are_dealt_out_at_random():
    """Contiguous shards of a label-sorted data set hold one class each; the blocks must not."""
    X, y = averaging_problem(n=800, seed=6)
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]
    shard = Shard.from_arrays(X, y, WORLD.Get_rank(), WORLD.Get_size())
    X_block, y_block = random_blocks(WORLD, shard.X, shard.y, seed=1)
    assert len(np.unique(y_block)) == 2
    assert WORLD.allreduce(X_block.shape[0]) == 800
    assert WORLD.allreduce(float(X_block.sum())) == pytest.approx(float(X.sum()))
    optimum, _, _ = liblinear_optimum(X, y, 1.0)  # LIBLINEAR on the whole data
    model = BlockAveragedSVC("dcd", C=1.0, rounds=60, rounds_tol=1e-6, comm=WORLD).fit(shard)
    assert model.report_.primal[-1] <= 1.01 * optimum


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("sparse", [True, False])
def test_weights_travel_with_their_rows(sparse):
    """A row's weight is a function of its contents here: after the deal every weight still
    matches its row, and every weight arrives once."""
    X, y = averaging_problem(n=600, seed=7)
    X = X if sparse else X.toarray()
    weights = 1.0 + np.asarray(X.sum(axis=1)).ravel() ** 2 + np.arange(600) * 1e-3
    shard = Shard.from_arrays(X, y, WORLD.Get_rank(), WORLD.Get_size(), w=weights)
    X_block, y_block, w_block = random_blocks(WORLD, shard.X, shard.y, seed=2, weights=shard.w)
    X_again, y_again = random_blocks(WORLD, shard.X, shard.y, seed=2)
    assert (X_again != X_block).sum() == 0 if sparse else np.array_equal(X_again, X_block)
    np.testing.assert_array_equal(y_again, y_block)
    row_of = {float(w): i for i, w in enumerate(weights)}
    rows = np.array([row_of[float(w)] for w in w_block], dtype=np.int64)
    block = X_block.toarray() if sparse else X_block
    np.testing.assert_array_equal(block, X[rows].toarray() if sparse else X[rows])
    np.testing.assert_array_equal(y_block, y[rows])
    everything = np.sort(np.concatenate(WORLD.allgather(rows)))
    np.testing.assert_array_equal(everything, np.arange(600))
    if WORLD.Get_size() > 1:
        assert not np.array_equal(rows, np.arange(shard.start, shard.stop))
