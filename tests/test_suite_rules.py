"""The suite's own rule (tests/conftest.py): a test runs on every rank if and only if it is
marked ``mpi`` or uses an MPI fixture; every other test runs on rank 0 alone, with the
node's cores, and may not enter a collective on ``COMM_WORLD``."""
import os

import numba
import numpy as np
import pytest
from mpi4py import MPI

from ppack import PackSVC

from helpers import NODE_CORES, make_problem


def test_a_rank0_test_runs_alone_with_the_node_cores():
    assert MPI.COMM_SELF.Get_rank() == 0 and MPI.COMM_WORLD.Get_rank() == 0  # never on another rank
    assert numba.get_num_threads() == min(NODE_CORES, numba.config.NUMBA_NUM_THREADS)


def test_a_rank0_test_that_enters_a_world_collective_fails_at_once():
    if MPI.COMM_WORLD.Get_size() == 1:  # one rank: nobody to wait for, so no guard
        total = np.ones(1)
        MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, total)
        assert total[0] == 1.0
        return
    with pytest.raises(pytest.fail.Exception, match=r"runs on rank 0 alone but called COMM_WORLD\.Allreduce.*"
                                                    r"mark it @pytest\.mark\.mpi"):
        MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, np.zeros(1))
    X, y = make_problem(60, 4)
    with pytest.raises(pytest.fail.Exception, match="mark it @pytest.mark.mpi"):
        PackSVC(iterations=100).fit(X, y)  # the default communicator is COMM_WORLD
    assert MPI.COMM_WORLD.Get_size() > 1  # size and rank still answer


@pytest.mark.mpi
def test_an_all_rank_test_runs_everywhere_with_each_rank_share():
    world = MPI.COMM_WORLD
    assert world.allgather(world.Get_rank()) == list(range(world.Get_size()))
    if not any(os.environ.get(var) for var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS")):  # else set by hand
        local = int(os.environ.get("MPI_LOCALNRANKS", world.Get_size()))
        assert numba.get_num_threads() == max(1, min(NODE_CORES // local, numba.config.NUMBA_NUM_THREADS))
