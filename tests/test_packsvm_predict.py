"""distributed_decisions against the kernel matrix of the numpy twin (tests/naive.py), on 1 and all ranks."""
import numpy as np
import pytest
from mpi4py import MPI

from ppack.data.shard import Shard
from ppack.kernels.compute import KernelCompute
from ppack.kernels.spec import KernelSpec
from ppack.mpi.comm import chunk
from ppack.packsvm import predict
from ppack.packsvm.predict import distributed_decisions
from ppack.packsvm.table import SupportVectorTable

from helpers import make_problem
from naive import kernel_matrix

COMMS = [pytest.param(MPI.COMM_SELF, id="self"),
         pytest.param(MPI.COMM_WORLD, id="world", marks=pytest.mark.mpi(min_size=2))]
KERNELS = [("rbf", {}), ("poly", {"degree": 2, "coef0": 1.0, "offset": 1.0})]


@pytest.mark.parametrize("name,params", KERNELS)
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("comm", COMMS)
def test_decisions_are_scale_times_coef_times_kernel_matrix(comm, sparse, name, params, monkeypatch):
    """A hand-built table (each rank holding a slice of the support vectors) predicts, on rank 0,
    ``scale * coef @ (K(sv, X) + offset)`` for every row, over several blocks of rows."""
    monkeypatch.setattr(predict, "MIN_BLOCK_ROWS", 32)
    monkeypatch.setattr(predict, "MAX_BLOCK_ROWS", 32)  # 150 rows: five blocks, the last one partial
    spec = KernelSpec(name, gamma=0.3, **params)
    sv, _ = make_problem(25, 6, sparse=sparse, seed=60)
    X, y = make_problem(150, 6, sparse=sparse, seed=61)
    coef = np.random.default_rng(62).normal(size=25)
    scale = 0.75
    rank, size = comm.Get_rank(), comm.Get_size()
    lo, hi = chunk(25, rank, size)
    table = SupportVectorTable(KernelCompute(spec, 6, sparse, np.float64))
    table.insert_many(1000 + np.arange(lo, hi), coef[lo:hi], sv[lo:hi])
    shard = Shard.from_arrays(X, y, rank, size)
    decisions, labels = distributed_decisions(comm, table, scale, shard, 6)
    if rank == 0:
        expected = scale * coef @ kernel_matrix(sv, X, name, spec.gamma, spec.degree, spec.coef0, spec.offset)
        np.testing.assert_allclose(decisions, expected, rtol=1e-10, atol=1e-12 * np.abs(expected).max())
        np.testing.assert_array_equal(labels, y)
    else:
        assert decisions is None and labels is None
