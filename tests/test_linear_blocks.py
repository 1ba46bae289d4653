"""Random blocks (ppack.linear.blocks): rows of contiguous shards dealt out to the ranks."""
import numpy as np
import pytest
from mpi4py import MPI

from ppack.data.shard import Shard
from ppack.linear.blocks import random_blocks
from ppack.linear.estimator import BlockAveragedSVC
from ppack.linear.problem import primal_objective

from naive import averaging_problem

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
    single = BlockAveragedSVC("dcd", C=1.0, averaging="oneshot", solver_options={"tol": 1e-6}, comm=SELF).fit(X, y)
    optimum = primal_objective(X, y, single.w_, single.b_, 1.0)
    model = BlockAveragedSVC("dcd", C=1.0, rounds=60, rounds_tol=1e-6, comm=WORLD).fit(shard)
    assert model.report_.primal[-1] <= 1.01 * optimum
