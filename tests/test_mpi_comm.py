"""MPI helpers: partition math, errors agreed on by every rank, a failing rank ending the whole job.

The distributed tests run with ``mpiexec -n 4 python -m pytest --with-mpi``.
"""
import os
import subprocess
import sys

import numpy as np
import pytest
from mpi4py import MPI

from ppack.data.shard import load_shard
from ppack.mpi.comm import chunk, chunk_starts, owners_of

from helpers import clean_mpi_env, make_problem, mpiexec

WORLD = MPI.COMM_WORLD


def test_chunk_partition_is_exact_and_balanced():
    for n in [0, 1, 7, 100, 101]:
        for size in [1, 2, 3, 4, 7]:
            spans = [chunk(n, k, size) for k in range(size)]
            assert spans[0][0] == 0 and spans[-1][1] == n
            assert all(spans[k][1] == spans[k + 1][0] for k in range(size - 1))
            lengths = [b - a for a, b in spans]
            assert max(lengths) - min(lengths) <= 1
            if n:
                rows = np.arange(n)
                owners = owners_of(rows, chunk_starts(n, size))
                assert all(spans[o][0] <= i < spans[o][1] for i, o in zip(rows, owners))


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


FAILING_RANK_SCRIPT = """
import sys
from mpi4py import MPI
sys.path.insert(0, {tests!r})
from helpers import make_problem
from ppack.mpi.comm import abort_on_exception
from ppack import PackSVC

comm = MPI.COMM_WORLD


def train():
    X, y = make_problem(2000, 10, seed=37)
    packs = [0]

    def should_stop():  # polled once per pack on every rank
        packs[0] += 1
        if comm.Get_rank() == 2 and packs[0] == 30:
            raise RuntimeError("simulated failure on rank 2 in the middle of training")
        return False

    PackSVC(comm=comm, iterations=10**7, pack=20).fit(X, y, should_stop=should_stop)


abort_on_exception(comm, train)
"""


@pytest.mark.job
@pytest.mark.second_tier  # starts its own jobs: the CI's second tier keeps the first under 4 minutes
@pytest.mark.second_tier  # a real four-rank job
def test_a_rank_failing_mid_training_ends_the_whole_job(tmp_path):
    """The other ranks are inside a collective when rank 2 raises: the job must still end, fast."""
    import subprocess
    import sys
    from pathlib import Path

    from helpers import clean_mpi_env, mpiexec

    script = tmp_path / "fail.py"
    script.write_text(FAILING_RANK_SCRIPT.format(tests=str(Path(__file__).parent)))
    # a hang raises TimeoutExpired (about 4 s measured on 2 cores; the bound is 45 times that)
    job = subprocess.run([mpiexec(), "-n", "4", sys.executable, str(script)], env=clean_mpi_env(),
                         capture_output=True, text=True, timeout=180)
    assert job.returncode != 0
    assert "rank 2 failed" in job.stderr and "simulated failure on rank 2" in job.stderr


THREADS_SCRIPT = """
import sys
import numba
import numpy as np
from mpi4py import MPI
from ppack import PackSVC
if sys.argv[1] == "by-hand":
    numba.set_num_threads(1)
rng = np.random.default_rng(0)
X = rng.normal(size=(120, 4))
PackSVC(gamma=0.5, iterations=100, pack=20, comm=MPI.COMM_SELF).fit(X, np.sign(X[:, 0] + 0.1))
counts = MPI.COMM_WORLD.gather(numba.get_num_threads())  # one printer: the launcher may interleave ranks' output
if MPI.COMM_WORLD.Get_rank() == 0:
    print("\\n".join(f"threads {rank} {count}" for rank, count in enumerate(counts)), flush=True)
"""


@pytest.mark.job
@pytest.mark.second_tier  # starts its own jobs: the CI's second tier keeps the first under 4 minutes
@pytest.mark.parametrize("how,ranks", [("auto", 2), ("by-hand", 1)])
def test_a_python_script_under_mpiexec_gets_its_share_of_the_cores(how, ranks, tmp_path):
    """PackSVC.fit gives each rank of a job cores // ranks-on-this-node numba threads, as `train`
    does, even on COMM_SELF (the launcher's count); a count set by hand is left alone."""
    script = tmp_path / "threads.py"
    script.write_text(THREADS_SCRIPT)
    env = {k: v for k, v in clean_mpi_env().items() if k not in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS")}
    job = subprocess.run([mpiexec(), "-n", str(ranks), sys.executable, str(script), how], env=env,
                         capture_output=True, text=True, timeout=300)
    assert job.returncode == 0, job.stderr
    counts = [int(line.split()[2]) for line in job.stdout.splitlines() if line.startswith("threads")]
    # by hand: 1 thread on the one rank, where the share would be every core
    expected = 1 if how == "by-hand" else max(1, len(os.sched_getaffinity(0)) // ranks)
    assert counts == [expected] * ranks, job.stdout
