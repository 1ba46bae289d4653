"""Shards: one rank's rows of a data set, read from a file or taken from memory."""
import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

from ppack import PackSVC
from ppack.data.hdf5 import read_rows, write_dataset
from ppack.data.shard import load_shard
from ppack.mpi.comm import polite_barrier

from helpers import make_problem

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
    polite_barrier(WORLD)
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


def pixel_problem(n=400, d=12, sparse=False, seed=27):
    """(values k/255 as float64, labels): pixel-like data, zeros in about half the entries."""
    rng = np.random.default_rng(seed)
    steps = rng.integers(0, 256, size=(n, d)) * (rng.random((n, d)) < 0.5)
    y = np.where(np.sin(steps[:, 0] / 40.0) + steps[:, 1] / 255.0 > 0.5, 1.0, -1.0)
    X = steps / 255.0
    return (sp.csr_matrix(X) if sparse else X), y, steps


@pytest.mark.parametrize("sparse", [False, True])
def test_uint8_shards_stay_uint8_and_read_as_scaled_floats(sparse, mpi_tmp_path):
    """A uint8 file's shard holds the stored bytes (an eighth of float64's), and its float rows are
    the stored steps times value_scale, rounded once to the compute type."""
    X, y, steps = pixel_problem(sparse=sparse)
    path = mpi_tmp_path / "pixels.h5"
    if WORLD.Get_rank() == 0:
        write_dataset(path, X, y, storage="csr" if sparse else "dense", dtype="uint8")
    polite_barrier(WORLD)
    shard = load_shard(WORLD, path, dtype=np.float32)
    assert shard.X.dtype == np.uint8 and shard.dtype == np.float32 and shard.value_scale == 1 / 255
    rows = shard.float_rows()
    rows = rows.toarray() if sparse else rows
    assert rows.dtype == np.float32
    np.testing.assert_array_equal(rows, (steps[shard.start:shard.stop] * (1 / 255)).astype(np.float32))
    float64 = load_shard(WORLD, path, dtype=np.float64)  # the same bytes held, computed in float64
    assert float64.X.dtype == np.uint8 and float64.dtype == np.float64
    if not sparse:
        assert shard.nbytes == (shard.stop - shard.start) * (X.shape[1] + 8)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("sparse", [False, True])
def test_uint8_files_train_the_model_of_their_float_values(sparse, mpi_tmp_path):
    """Training on a uint8 file gives the model of the same values stored as float32, bit for bit."""
    X, y, _ = pixel_problem(sparse=sparse)
    storage = "csr" if sparse else "dense"
    if WORLD.Get_rank() == 0:
        write_dataset(mpi_tmp_path / "u8.h5", X, y, storage=storage, dtype="uint8")
        values, _ = read_rows(mpi_tmp_path / "u8.h5", 0, len(y), dtype=np.float32)
        write_dataset(mpi_tmp_path / "f32.h5", values, y, storage=storage, dtype="float32")
    polite_barrier(WORLD)
    params = dict(PARAMS, gamma=2.0, dtype="float32")
    compact, floats = (load_shard(WORLD, mpi_tmp_path / name, dtype=np.float32) for name in ("u8.h5", "f32.h5"))
    assert compact.X.dtype == np.uint8 and floats.X.dtype == np.float32
    a = PackSVC(comm=WORLD, **params).fit(compact)
    b = PackSVC(comm=WORLD, **params).fit(floats)
    assert a.n_support_ == b.n_support_ > 0
    da, _ = a.decision_function_shard(compact)
    db, _ = b.decision_function_shard(floats)
    if WORLD.Get_rank() == 0:
        np.testing.assert_array_equal(da, db)
        assert np.mean(np.sign(da) == y) > 0.8
