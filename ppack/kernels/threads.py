"""The thread policy of the numba cores and BLAS: each rank's share of its node's cores, and
BLAS single-threaded where the kernel sums call it from inside numba's parallel loops.

The CLI sets it (``configure_threads``, `--threads`), the estimators make sure of it
(``ensure_threads``), and the training loop holds BLAS at one thread around its packs
(``single_threaded_blas``). The linear solvers' numba loops run under the same count.
"""
import contextlib
import functools
import os

from ..mpi.comm import launcher_local_size, local_rank_count

_threads_configured = False


def ensure_threads(comm):
    """Collective: ``configure_threads(comm)`` unless this process has already done so or its
    numba thread count was set by hand. The estimators call it, so that a Python script under
    mpiexec gets the CLI's share of cores per rank (4 ranks on 2 cores each running every
    core's worth of numba threads measured 9 times slower). BLAS is left as it is: the
    kernel sums limit it themselves."""
    import numba

    if _threads_configured or numba.get_num_threads() != numba.config.NUMBA_NUM_THREADS:
        return
    configure_threads(comm, limit_blas=False)


def configure_threads(comm, threads=None, limit_blas=True):
    """Give each rank its share of this node's cores for numba and BLAS.

    With ``threads=None`` the count comes from ``NUMBA_NUM_THREADS`` or
    ``OMP_NUM_THREADS`` when the user set one (SLURM ``--cpus-per-task``), otherwise
    it is the cores this process may use divided by the ranks on this node, so that
    4 ranks on a 2-core laptop do not oversubscribe. The threads are numba's; BLAS is
    kept single-threaded, because the kernel sums call it from inside numba's parallel
    loops (two thread pools taking turns spin against each other; ``limit_blas=False``
    leaves it). The ranks on this node are the launcher's count (``launcher_local_size``)
    or, without one, those of ``comm`` (a collective). Returns the count.
    """
    import numba
    import scipy.linalg.cython_blas  # noqa: F401 - load the BLAS numba calls, so the limit reaches it
    from threadpoolctl import threadpool_limits

    if threads is None:
        for var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS"):
            if os.environ.get(var, "").isdigit() and int(os.environ[var]) > 0:
                threads = int(os.environ[var])
                break
    if threads is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        threads = max(1, (cores or 1) // (launcher_local_size() or local_rank_count(comm)))
    threads = max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS))
    numba.set_num_threads(threads)
    if limit_blas:
        threadpool_limits(1, user_api="blas")
    global _threads_configured
    _threads_configured = True
    return threads


@contextlib.contextmanager
def numba_threads(count):
    """Context: numba's threads on this rank are ``count`` (at most numba's maximum) inside it,
    and what they were after it; None leaves them as they are."""
    if count is None:
        yield
        return
    import numba

    before = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(count), numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        numba.set_num_threads(before)


@functools.lru_cache(maxsize=1)
def _blas_pools():
    """The loaded BLAS libraries' thread pools (found once: a lookup costs milliseconds,
    a limit through the cached controller about ten microseconds)."""
    import scipy.linalg.cython_blas  # noqa: F401 - the BLAS numba's np.dot calls
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


_blas_limited = 0  # depth of open single_threaded_blas contexts


@contextlib.contextmanager
def single_threaded_blas():
    """Context: BLAS single-threaded for a kernel-sum pass that calls it from numba's
    parallel loops, where BLAS's own threads would spin against numba's (dense data in a
    process that left BLAS at its default of every core ran 20 times slower). Nested
    contexts cost nothing: the training loop opens one around all its packs, so each
    pack's kernel sums skip the limit's tens of microseconds."""
    global _blas_limited
    if _blas_limited:
        yield
        return
    with _blas_pools().limit(limits=1, user_api="blas"):
        _blas_limited += 1
        try:
            yield
        finally:
            _blas_limited -= 1
