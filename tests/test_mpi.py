"""Distributed behaviour on several ranks: run with ``mpiexec -n 4 python -m pytest --with-mpi``."""
import numpy as np
import pytest
from mpi4py import MPI

from ppack.data.hdf5 import write_dataset
from ppack.data.shard import load_shard
from ppack import PackSVC

from conftest import CountingComm, make_problem

WORLD = MPI.COMM_WORLD
SELF = MPI.COMM_SELF
PARAMS = {"kernel": "rbf", "gamma": 0.2, "C": 5.0, "iterations": 1500, "pack": 100, "seed": 11}


def shared_tmp(mpi_tmp_path):
    return mpi_tmp_path


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("sparse", [False, True])
def test_rank_count_does_not_change_the_model(sparse):
    """p-invariance: 1 rank and all ranks give the same support vectors and decisions.

    Tolerance: decision values within 1e-9 relative (float64 sums reduced in a different order).
    """
    X, y = make_problem(700, 9, sparse=sparse, seed=21)
    serial = PackSVC(comm=SELF, **PARAMS).fit(X, y)
    parallel = PackSVC(comm=WORLD, **PARAMS).fit(X, y)
    keys = np.sort(np.concatenate(WORLD.allgather(parallel.table_.keys)))
    np.testing.assert_array_equal(keys, np.sort(serial.table_.keys))
    assert parallel.n_support_ == serial.n_support_ == len(keys)
    np.testing.assert_allclose(parallel.decision_function(X), serial.decision_function(X), rtol=1e-9, atol=1e-9)


@pytest.mark.mpi(min_size=2)
def test_pack_size_does_not_change_the_distributed_model():
    X, y = make_problem(600, 7, sparse=True, seed=22)
    one = PackSVC(comm=WORLD, **dict(PARAMS, pack=1, iterations=400)).fit(X, y)
    hundred = PackSVC(comm=WORLD, **dict(PARAMS, pack=100, iterations=400)).fit(X, y)
    keys_one = np.sort(np.concatenate(WORLD.allgather(one.table_.keys)))
    keys_hundred = np.sort(np.concatenate(WORLD.allgather(hundred.table_.keys)))
    np.testing.assert_array_equal(keys_one, keys_hundred)
    np.testing.assert_allclose(hundred.decision_function(X), one.decision_function(X), rtol=1e-9, atol=1e-9)


@pytest.mark.mpi(min_size=2)
def test_support_vectors_spread_evenly_over_ranks():
    X, y = make_problem(800, 6, seed=23)
    model = PackSVC(comm=WORLD, **PARAMS).fit(X, y)
    sizes = WORLD.allgather(len(model.table_))
    assert max(sizes) - min(sizes) <= 1  # each new key goes to the least occupied rank
    keys = np.concatenate(WORLD.allgather(model.table_.keys))
    assert len(np.unique(keys)) == len(keys)  # a key lives on exactly one rank


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("sparse", [False, True])
def test_exactly_two_allreduce_calls_per_pack(sparse):
    """Runs of 3 and 8 packs differ by exactly 2 Allreduce calls per pack and nothing else."""
    X, y = make_problem(400, 8, sparse=sparse, seed=24)
    counts = []
    for packs in (3, 8):
        comm = CountingComm(WORLD)
        model = PackSVC(comm=comm, **dict(PARAMS, iterations=packs * 50, pack=50)).fit(X, y)
        assert model.training_["allreduce_calls"] == 2 * packs
        counts.append(comm.calls)
    extra = {name: counts[1][name] - counts[0][name] for name in counts[1] | counts[0]}
    assert {k: v for k, v in extra.items() if v} == {"Allreduce": 2 * 5}


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


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("sparse", [False, True])
def test_saved_model_predicts_the_same_on_one_and_all_ranks(sparse, mpi_tmp_path):
    X, y = make_problem(500, 10, sparse=sparse, seed=26)
    model = PackSVC(comm=WORLD, **PARAMS).fit(X, y)
    path = mpi_tmp_path / "model.h5"
    model.save(path)
    expected = model.decision_function(X)
    on_all = PackSVC.load(path, WORLD)
    np.testing.assert_allclose(on_all.decision_function(X), expected, rtol=1e-10, atol=1e-10)
    on_one = PackSVC.load(path, SELF)
    np.testing.assert_allclose(on_one.decision_function(X), expected, rtol=1e-10, atol=1e-10)
    assert on_one.n_support_ == model.n_support_ and len(on_one.table_) == model.n_support_
    np.testing.assert_array_equal(on_one.classes_, [-1.0, 1.0])


@pytest.mark.mpi(min_size=2)
def test_error_on_one_rank_is_raised_on_every_rank(mpi_tmp_path):
    """A NaN in one rank's rows stops every rank with the same message (no rank left waiting)."""
    X, y = make_problem(400, 5, seed=27)
    X[-1, 2] = np.nan  # the last rows belong to the last rank
    path = mpi_tmp_path / "nan.h5"
    if WORLD.Get_rank() == 0:
        import h5py

        with h5py.File(path, "w") as f:
            f.attrs.update(format="ppack-data", format_version=1, n_samples=400, n_features=5,
                           storage="dense", max_row_nnz=5)
            f["X"] = X
            f["y"] = y
    WORLD.Barrier()
    from ppack.errors import PPackError

    with pytest.raises(PPackError, match=r"nan\.h5: 'X'.*(NaN|nan)") as info:
        load_shard(WORLD, path)
    assert info.value.collective
