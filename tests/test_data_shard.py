"""Shards: one rank's rows of a data set, read from a file or taken from memory."""
import numpy as np
import pytest
from mpi4py import MPI

from ppack import PackSVC
from ppack.data.hdf5 import write_dataset
from ppack.data.shard import load_shard

from conftest import make_problem

WORLD = MPI.COMM_WORLD
PARAMS = {"kernel": "rbf", "gamma": 0.2, "C": 5.0, "iterations": 1500, "pack": 100, "seed": 11}


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("sparse", [False, True])
def test_file_shards_train_and_predict_like_in_memory_data(sparse, mpi_tmp_path):
    """HDF5 shards read per rank give the model of the same data held in memory."""
    X, y = make_problem(500, 10, sparse=sparse, seed=25)
    path = mpi_tmp_path / "train.h5"
    if WORLD.Get_rank() == 0:
        write_dataset(path, X, y, storage="csr" if sparse else "dense")
    WORLD.Barrier()
    shard = load_shard(WORLD, path)
    assert shard.sparse == sparse and shard.stop - shard.start < 500
    from_file = PackSVC(comm=WORLD, **PARAMS).fit(shard)
    in_memory = PackSVC(comm=WORLD, **PARAMS).fit(X, y)
    decisions, labels = from_file.decision_function_shard(shard)
    if WORLD.Get_rank() == 0:
        np.testing.assert_array_equal(labels, y)
        np.testing.assert_allclose(decisions, in_memory.decision_function(X), rtol=1e-12, atol=1e-12)
    else:
        assert decisions is None
        in_memory.decision_function(X)  # collective: every rank takes part
