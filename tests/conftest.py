"""How the suite runs under ``mpiexec -n P python -m pytest --with-mpi``, and the shared fixtures.

One rule says where a test runs: on every rank if and only if it is marked ``mpi`` or uses
an MPI fixture (``mpi_tmp_path``, ``mpi_tmpdir``, ``mpi_file_name``); every other test runs
on world rank 0 alone, with all of the node's cores for numba and BLAS, while the other
ranks sleep in a polite barrier until the next all-rank test. An all-rank test gets each
rank's share of the cores, as ``train`` gives it. During a rank-0 test ``MPI.COMM_WORLD``
is a guard: a collective on it fails at once, saying to mark the test ``mpi``, instead of
waiting forever for ranks that are not there.

Tests marked ``second_tier`` (real SLURM jobs, mnist8m generation and training, many-rank
runs, the linear solvers against LIBLINEAR on the larger real sets, each solver keeping a9a's
in the fast tier) are deselected by default (``addopts`` in pyproject.toml); ``-m second_tier``
runs them.
"""

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI
from threadpoolctl import threadpool_limits

from ppack.kernels.threads import configure_threads
from ppack.mpi.comm import polite_barrier

from helpers import NODE_CORES, TEST_DATA

WORLD = MPI.COMM_WORLD
MPI_FIXTURES = frozenset({"mpi_tmp_path", "mpi_tmpdir", "mpi_file_name"})
# each rank's share of the node's cores, for all-rank tests (a collective, at import on every rank)
RANK_SHARE = configure_threads(WORLD)


def runs_on_every_rank(item):
    """The rule: marked ``mpi`` or using an MPI fixture."""
    return item.get_closest_marker("mpi") is not None or not MPI_FIXTURES.isdisjoint(item.fixturenames)


def pytest_configure(config):
    config.addinivalue_line("markers", "second_tier: long test (a real job, a larger real set), run by "
                                       "`pytest -m second_tier` (the CI's second tier), not by the README's "
                                       "test command")
    config.addinivalue_line("markers", "job: starts its own ppack job (mpiexec or python -m ppack); such "
                                       "tests run after the other rank-0 tests, on a warm numba cache")
    config.addinivalue_line("markers", "gpu: runs the GPU kernels through CuPy; skipped where CuPy or a GPU is "
                                       "missing (run them there with `pytest -m gpu`)")


def pytest_sessionstart(session):
    """Under MPI, ranks 1.. compile numba kernels into the cache while rank 0 runs its tests
    (compiling is single-threaded, and they would otherwise sleep until the all-rank tests):
    the kernel trainer's kernels, the grid's kernel groups and every linear solver, each part
    in the order rank 0's tests need it, the parts dealt out over as many of ranks 1.. as the
    node has cores besides rank 0's (on 2 cores, rank 1 takes them all in turn: more compiling
    ranks than cores only slow rank 0's tests). Rank 0 loads what they wrote, or compiles it
    itself if it gets there first; either way the results are the same."""
    size, rank = WORLD.Get_size(), WORLD.Get_rank()
    compilers = min(size - 1, max(1, NODE_CORES - 1))  # a core each besides rank 0's: none oversubscribed
    if size > 1 and 0 < rank <= compilers:
        for i, part in enumerate(COMPILE_AHEAD):
            if 1 + i % compilers == rank:
                part()


def _kernel_trainer():
    from ppack.kernels.spec import KernelSpec
    from ppack.packsvm.warmup import warm_kernels

    for kernel in ("rbf", "laplacian"):
        for dtype in (np.float32, np.float64):
            for sparse in (True, False):
                if (kernel, dtype, sparse) != ("rbf", np.float64, False):  # rank 0's first tests compile that one
                    warm_kernels(MPI.COMM_SELF, KernelSpec(kernel, 0.5), dtype, sparse)


def _kernel_groups():
    from ppack.kernels.compute import KernelGroups
    from ppack.kernels.spec import KernelSpec
    from ppack.packsvm.warmup import run_group_kernels

    dot = KernelGroups([KernelSpec("rbf", 0.5), KernelSpec("poly", 0.5)], [0, 2, 4])
    for dtype in (np.float64, np.float32):
        for sparse in (False, True):
            run_group_kernels(dot, dtype, sparse)


def _linear_solvers():
    from ppack import BlockAveragedSVC
    from ppack.registry import LINEAR_SOLVERS

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 5))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    for solver in sorted(LINEAR_SOLVERS):
        for rows in (X, sp.csr_matrix(X)):
            BlockAveragedSVC(solver, comm=MPI.COMM_SELF).fit(rows, y)


COMPILE_AHEAD = (_kernel_trainer, _kernel_groups, _linear_solvers)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Under MPI, rank 0 runs its own tests first (those that start jobs last), then the
    all-rank tests, which are all that the other ranks keep (in the same order). So the
    numba kernels compile into the cache once, on rank 0, instead of on every rank at once
    in the first all-rank test that needs them, and the other ranks sleep through one stretch."""
    if WORLD.Get_size() == 1:
        return
    rank0_tests = [item for item in items if not runs_on_every_rank(item)]
    every_rank_tests = [item for item in items if runs_on_every_rank(item)]
    if WORLD.Get_rank() == 0:
        jobs_last = sorted(rank0_tests, key=lambda item: item.get_closest_marker("job") is not None)
        items[:] = jobs_last + every_rank_tests
    elif rank0_tests:
        config.hook.pytest_deselected(items=rank0_tests)
        items[:] = every_rank_tests


class RankZeroWorld:
    """``MPI.COMM_WORLD`` on rank 0 while a rank-0 test runs: rank and size answer, and
    anything else (a collective, a split, a duplicate) fails the test with what to do."""

    ANSWERS = frozenset({"Get_rank", "Get_size", "rank", "size", "Get_name", "name"})

    def __init__(self, nodeid):
        self._nodeid = nodeid

    def __getattr__(self, name):
        if name in self.ANSWERS:
            return getattr(WORLD, name)
        pytest.fail(f"{self._nodeid} runs on rank 0 alone but called COMM_WORLD.{name}, which the other "
                    f"ranks never join: mark it @pytest.mark.mpi (or use mpi_tmp_path) to run it on every "
                    f"rank, or pass comm=MPI.COMM_SELF", pytrace=False)


def _use_threads(every_rank):
    """numba and BLAS threads: each rank's share in an all-rank test, the node's cores in a
    rank-0 test. Set before every test, since a test may change them (configure_threads)."""
    count = RANK_SHARE if every_rank else min(NODE_CORES, numba.config.NUMBA_NUM_THREADS)
    numba.set_num_threads(count)
    threadpool_limits(1 if every_rank else count, user_api="blas")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    several = WORLD.Get_size() > 1
    every = several and runs_on_every_rank(item)
    if every:
        polite_barrier(WORLD)  # the other ranks slept here while rank 0 ran the tests before
    _use_threads(every)
    if several and not every:
        MPI.COMM_WORLD = RankZeroWorld(item.nodeid)
    try:
        yield
    finally:
        MPI.COMM_WORLD = WORLD


def pytest_sessionfinish(session, exitstatus):
    if WORLD.Get_size() > 1:
        polite_barrier(WORLD)  # ranks 1.. wait, sleeping, for rank 0's last tests


# ---------------------------------------------------------------- real data

# the three LIBSVM benchmark sets in tests/data: training files, test file, features
BENCHMARK_SETS = {"a9a": (["a9a/a9a.bz2"], "a9a/a9a.t.bz2", 123),
                  "w8a": (["w8a/w8a.bz2"], "w8a/w8a.t.bz2", 300),
                  "ijcnn1": (["ijcnn1/ijcnn1.tr.xz", "ijcnn1/ijcnn1.val.xz"], "ijcnn1/ijcnn1.t.xz", 22)}


@pytest.fixture(scope="session")
def benchmark_data():
    """``get(name) -> (X, y, X_test, y_test)`` (CSR, float64 labels) of a9a, w8a or ijcnn1
    from tests/data, each parsed once per session."""
    from ppack.data.libsvm import read_libsvm

    cache = {}

    def get(name):
        if name not in cache:
            train, test, d = BENCHMARK_SETS[name]
            parts = [read_libsvm(TEST_DATA / f, n_features=d)[:2] for f in train]
            X = sp.vstack([p[0] for p in parts]).tocsr()
            y = np.concatenate([p[1] for p in parts])
            X_test, y_test, _ = read_libsvm(TEST_DATA / test, n_features=d)
            cache[name] = (X, y, X_test, y_test)
        return cache[name]

    return get
