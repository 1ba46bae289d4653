"""Compile (or load from numba's on-disk cache) the kernels training and prediction call.

The numba functions carry ``cache=True``: the first process to compile one writes it to
the cache (``NUMBA_CACHE_DIR``, else ``__pycache__`` beside the module) and later ones
load it. ``warm_kernels`` runs every numba function of the pack loop and of prediction
once, on tiny inputs built by the same code paths as training (so the argument types and
array layouts are the run's, and no other specialisation is compiled later), before
training starts: its time is then reported apart from the training time. The node's first
ranks go first and fill the cache, each compiling a part (the kernel sums; the pack's step,
table and delivery; a grid's kernel groups) side by side; the node's other ranks wait,
asleep, and then every rank runs them all, loading what was written, instead of every rank
compiling the same functions at once.
"""
from dataclasses import replace

import numpy as np
import scipy.sparse as sp
from mpi4py import MPI

from ..data.delivery import Delivery
from ..data.sampler import make_sampler
from ..data.shard import Shard
from ..kernels.compute import KernelCompute
from ..mpi.collectives import Collectives
from ..mpi.comm import agree, polite_barrier
from .loop import upper_pairs
from .losses import Loss
from .pack_buffer import PackBuffer
from .pipeline import changed_share, fold_sums
from .columns import Columns
from .pack_update import PackStep, all_equal
from .state import LossWindows, SolverState, SolverStats, replica_digest
from .table import SupportVectorTable

# rows and features of the tiny problem the kernels are run on
_ROWS, _FEATURES = 4, 3
# ("training" or "prediction", dtype name, sparse): the kernels this process has run (``first_use``)
_USED = set()


def first_use(what, dtype, sparse):
    """Whether this process runs ``what``'s kernels ("training", which warms prediction's too,
    or "prediction") for rows of ``dtype``, dense or ``sparse``, for the first time: the time
    numba takes to compile them, or to load them from its cache. Marks them as run."""
    rows = (np.dtype(dtype).name, bool(sparse))
    first = (what, *rows) not in _USED
    _USED.update((kind, *rows) for kind in ((what, "prediction") if what == "training" else (what,)))
    return first


def warm_kernels(comm, spec, dtype, sparse, stored=None, groups=None, dual=False):
    """Collective: make every kernel training and prediction use ready; returns the seconds
    it took (the maximum over ranks).

    spec: the run's ``KernelSpec`` (its kind picks the partial-sum path); dtype: the type the
    features are computed in (float32 or float64); sparse: whether the data are CSR; stored:
    the rows' stored type (None: ``dtype``), in which delivery carries compact rows (uint8);
    groups: the ``KernelGroups`` of a grid pass over several kernels, whose cores are run too, or None;
    dual: the dual optimizer's steps too (``dual.solver``).
    On each node (``COMM_TYPE_SHARED``) with more than one rank, its first ranks compile the
    parts (``_parts``) into the cache, dealt out one each in turn; then every rank runs them
    all, loading from the cache (and compiling whatever a part left out, so the result is the
    same either way). An error on any rank is raised on every rank (see ``mpi.comm.agree``).
    """
    start = MPI.Wtime()
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    error = None
    try:
        one_rank = comm.Get_size() == 1  # the run's delivery takes its rows straight from the shard
        parts, rank, size = _parts(spec, dtype, sparse, stored, groups, one_rank, dual), node.Get_rank(), \
            node.Get_size()
        if size > 1:  # the parts side by side, then everything loaded from the cache
            for part in parts[rank::size]:
                error = error or _guarded(part)
            polite_barrier(node)
        error = error or _guarded(lambda: [part() for part in _parts(spec, dtype, sparse, stored, groups, one_rank,
                                                                      dual, True)])
    finally:
        node.Free()
    agree(comm, error)
    return comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)


def _parts(spec, dtype, sparse, stored, groups, one_rank, dual=False, whole=False):
    """The warm-up's parts that compile apart (the kernel sums; the rest of a pack, its
    delivery and a prediction; a grid's kernel groups; with ``dual`` the dual's steps), or
    with ``whole`` the whole warm-up as one part and the groups as another, as callables; ``one_rank``: the run's rows are
    delivered as one rank takes them (``_deliver``)."""
    parts = [lambda: _run_kernels(spec, dtype, sparse, stored, one_rank)] if whole else \
        [lambda: _run_sums(spec, dtype, sparse, one_rank),
         lambda: _run_kernels(spec, dtype, sparse, stored, one_rank, sums=False)]
    if groups is not None:
        parts.append(lambda: run_group_kernels(groups, dtype, sparse, one_rank))
    if dual:
        parts.append(lambda: _run_dual(spec, dtype, sparse))
    return parts


def _guarded(part):
    """Run ``part``; the exception it raised, or None."""
    try:
        part()
    except Exception as exc:  # noqa: BLE001 - raised on every rank by the caller
        return exc
    return None


def _tiny_shard(dtype, sparse):
    rng = np.random.default_rng(0)
    X = rng.uniform(0.1, 1.0, size=(_ROWS, _FEATURES)).astype(dtype)
    X[0, 1] = X[1, 2] = 0.0
    y = np.array([1.0, -1.0, 1.0, -1.0])
    return Shard.from_arrays(sp.csr_matrix(X) if sparse else X, y)


def _run_sums(spec, dtype, sparse, one_rank=True, groups=None):
    """The kernel sums of a pack (whole, between tiles, few rows) and its pair kernels, on a
    table of the tiny problem's rows, through training's code paths (the rows delivered as
    ``_deliver`` delivers them); with ``groups`` (a grid pass's ``KernelGroups``, spec their
    first), the grouped cores."""
    shard = _tiny_shard(dtype, sparse)
    ids = np.arange(_ROWS, dtype=np.int64)
    block = _deliver(Collectives(MPI.COMM_SELF), one_rank, shard, shard.y, ids, norms_l1=spec.uses_l1)
    compute = KernelCompute(spec, shard.n_features, shard.sparse, shard.dtype, groups=groups)
    compute.store(shard.X)
    norms = compute.row_norms(block)
    n_columns = 1 if groups is None else groups.n_columns
    coef = np.random.default_rng(0).normal(size=(_ROWS, n_columns))
    partial = np.zeros((n_columns, block.n_rows))
    compute.partial_sums(coef, block, norms, partial)
    compute.partial_sums(coef, block, norms, partial, between=lambda: True)
    compute.partial_sums(coef, block, norms, partial, few=True)
    left, right = upper_pairs(block.n_rows)
    compute.pair_kernels(block, norms, left, right,
                         np.zeros(len(left) if groups is None else (len(groups.specs), len(left))))


def _run_kernels(spec, dtype, sparse, stored=None, one_rank=True, sums=True):
    """One tiny pack and one prediction, on this rank alone, through training's code paths
    (without ``sums``, the kernel sums and pair kernels left out: ``_run_sums``' part), their
    rows delivered as one rank or as several take them (``one_rank``, ``_deliver``)."""
    shard = _tiny_shard(dtype, sparse)
    collectives = Collectives(MPI.COMM_SELF)
    ids = make_sampler("epochs", _ROWS, 0).take(_ROWS)  # the epoch permutation
    ids.sort()
    block = _deliver(collectives, one_rank, shard, shard.y, ids, norms_l1=spec.uses_l1)
    # averaged, as the step below is (its entries' average parts must have room)
    table = SupportVectorTable(KernelCompute(spec, shard.n_features, shard.sparse, shard.dtype), averaged=True)
    compute = table.compute
    norms = compute.row_norms(block)
    stepped = np.array([[1.0, 0.0, 1.0, 0.0]])  # rows 0 and 2 become entries, through the pack's table update
    table.apply_pack(ids, np.zeros(_ROWS), np.array([[0.5, 0.0, -0.25, 0.0]]), stepped, np.empty((0, 0)),
                     np.empty((0, 2)), 0, np.zeros(2, dtype=np.int64), block, norms)
    r = block.n_rows
    left, right = upper_pairs(r)
    pair_values = np.zeros(len(left))
    partial = np.zeros((1, r))  # the table's one coefficient column
    if sums:
        compute.pair_kernels(block, norms, left, right, pair_values)
        compute.partial_sums(table.coef, block, norms, partial)
        # a pipelined pack's: sums tested between tiles, then (after the fold) the correction (few rows, no BLAS)
        compute.partial_sums(table.coef, block, norms, partial, between=lambda: True)
        compute.partial_sums(table.coef, block, norms, partial, few=True)
    fold_sums(partial, np.array([[0.5, 1.0]]))
    delta = np.zeros((1, r + 1))  # a pack's changes: the pack's full width, and a last pack's narrower view
    for view in (delta, delta[:, :r]):
        changed_share(view, 0, 1, np.empty(r + 1, dtype=np.int64), np.empty((r + 1, 1)))
    buf = PackBuffer(1, r, 1)  # the pack loop's collective 2, as if summed
    buf.predictions[:] = partial
    buf.pairs[:] = pair_values
    keys = table.key_slots
    keys.flag_held(ids, 1, buf.owner_flags)  # rank 0 holds what it stored
    keys.reserve(len(keys.keys))  # a rehash, as a growing table makes
    state = SolverState(scale=np.ones(1), norm=np.zeros(1), occupancy=np.zeros(2, dtype=np.int64),
                        loss_windows=LossWindows(10), avg_weight=0.0, rho=np.zeros(1), rho_sum=np.zeros(1),
                        row_seconds=np.zeros(2), loss_curve=LossWindows.curve(8))
    coef, loss, fold, mean_loss = np.empty((1, r)), np.empty((1, r)), np.empty((1, 2)), np.empty(r)
    step = PackStep(0, state, table, Columns.plain(1, 1.0, Loss()), Loss(), 1.0, np.ones(1), 0.05, SolverStats(),
                    0.01, 1e-3)
    step(buf, block, ids, norms, coef, loss, fold, np.empty((1, r + 1)), mean_loss, np.zeros((1, 2)), np.zeros(2),
         np.zeros(2), np.empty((1, r)))
    replica_digest(state)  # a run's first digest, and the one checked before a checkpoint or the model
    all_equal(np.zeros(2))  # the replicas' agreement check
    # prediction: a block padded to the model's width, summed against the table
    block = _deliver(collectives, one_rank, shard, shard.y, ids, shard.n_features)
    norms = compute.row_norms(block)
    if sums:
        compute.partial_sums(table.coef, block, norms, np.zeros((1, r)))
    if stored is not None and np.dtype(stored) != shard.X.dtype:  # compact rows, delivered as stored
        X = shard.X
        rows = sp.csr_matrix((X.data.astype(stored), X.indices, X.indptr), shape=X.shape) if sparse \
            else X.astype(stored)
        compact = replace(shard, X=rows, value_scale=0.5)
        _deliver(collectives, one_rank, compact, compact.y, ids, compact.n_features, dtype=dtype)


def _deliver(collectives, one_rank, shard, labels, ids, n_features=None, dtype=None, norms_l1=None):
    """The rows ``ids`` of ``shard`` (this rank holds them all), delivered as a run of one rank
    takes them (``one_rank``: straight from the shard) or as a run of several does (through
    collective 1's buffer; ``_pad_rows`` for sparse rows): the kernels the run will call."""
    delivery = Delivery(shard, labels, n_features, dtype=dtype, norms_l1=norms_l1)
    return delivery.deliver(collectives, ids) if one_rank else delivery.through_buffer(collectives, ids)


def run_group_kernels(groups, dtype, sparse, one_rank=True):
    """The grouped partial sums (GEMM, between tiles, few rows) and per-group pair kernels of a
    grid pass over several kernels (``groups``, their columns as a run's), on a tiny problem
    (its rows delivered as ``_run_sums`` delivers them)."""
    _run_sums(groups.specs[0], dtype, sparse, one_rank, groups)



def _run_dual(spec, dtype, sparse):
    """The dual optimizer's numba steps and certificate sums, both problems' (C-SVC and
    epsilon-SVR), by one tiny run of ``dual.solver.DualSolver`` on this rank alone."""
    from .dual.regression import Regression
    from .dual.solver import DualSolver

    shard = _tiny_shard(dtype, sparse)
    for regression in (None, Regression(0.1, 1.0)):
        DualSolver(MPI.COMM_SELF, spec, np.ones(1), Columns.plain(1, 1.0, Loss()), 1, pack=_ROWS,
                   regression=regression).run(shard, shard.y)
