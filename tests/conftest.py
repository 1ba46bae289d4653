"""Shared fixtures: small synthetic problems, the shared benchmark data, MPI helpers."""
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
WORLD = MPI.COMM_WORLD


def make_problem(n=400, d=12, sparse=False, seed=0, labels=(-1.0, 1.0)):
    """A two-class problem that needs a nonlinear kernel: X (n, d), y (n,) with ``labels``.

    Sparse problems keep the three informative columns and about 20% of the others.
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if sparse:
        X[:, 3:][rng.random((n, d - 3)) > 0.2] = 0.0
    score = X[:, 0] * X[:, 1] + 0.5 * np.sin(2 * X[:, 2]) + 0.1 * rng.normal(size=n)
    y = np.where(score > 0, labels[1], labels[0])
    return (sp.csr_matrix(X) if sparse else X), y


class CountingComm:
    """A communicator proxy that counts every collective and point-to-point call by name."""

    COUNTED = {
        "Allreduce", "allreduce", "Reduce", "reduce", "Bcast", "bcast", "Gather", "gather",
        "Gatherv", "Allgather", "allgather", "Allgatherv", "Scatter", "scatter", "Scatterv",
        "Alltoall", "alltoall", "Alltoallv", "Barrier", "barrier", "Scan", "scan", "Exscan",
        "exscan", "Reduce_scatter", "Iallreduce", "Ibarrier", "Ibcast", "Send", "send", "Recv",
        "recv", "Isend", "isend", "Irecv", "irecv", "Sendrecv", "sendrecv",
    }

    def __init__(self, comm):
        self._comm = comm
        self.calls = Counter()

    def __getattr__(self, name):
        attr = getattr(self._comm, name)
        if name not in self.COUNTED:
            return attr

        def counted(*args, **kwargs):
            self.calls[name] += 1
            return attr(*args, **kwargs)

        return counted


def polite_barrier(comm, poll=0.02):
    """A barrier that sleeps while waiting, so idle ranks leave the cores to others."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(poll)


@pytest.fixture
def rank0_only():
    """For serial tests that are heavy or launch their own ``mpiexec``: run them once.

    Under ``mpiexec -n 4 pytest --with-mpi`` world rank 0 runs the test while the other
    ranks wait (sleeping, not spinning, so rank 0 gets the cores), then report it as run
    on rank 0. In a plain serial pytest run the test simply runs.
    """
    if WORLD.Get_size() > 1 and WORLD.Get_rank() != 0:
        polite_barrier(WORLD)
        pytest.skip("serial test run once, on MPI world rank 0")
    yield
    if WORLD.Get_size() > 1:
        polite_barrier(WORLD)


def clean_mpi_env():
    """The environment without the variables of the MPI job we may be running inside."""
    prefixes = ("PMI", "PMIX", "MPI_", "MPIR", "HYDRA", "OMPI", "I_MPI")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = env["NUMBA_NUM_THREADS"] = "1"
    return env


def mpiexec():
    """The mpiexec that belongs to this Python environment, else the one on PATH."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else "mpiexec"


def run_ppack(args, ranks=4, timeout=240, cwd=None):
    """Run ``python -m ppack ARGS`` on ``ranks`` ranks; returns the CompletedProcess."""
    cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "ppack", *map(str, args)]
    return subprocess.run(cmd, env=clean_mpi_env(), capture_output=True, text=True, timeout=timeout, cwd=cwd)
