"""The kernel trainer's compute seam: the stored support-vector rows and every kernel operation.

``KernelCompute`` owns a rank's stored rows (features and norms, ``StoredRows``) for one
kernel and offers the named operations the trainer needs: ``store``, ``row_norms``,
``partial_sums`` (the stored rows against a block of rows, for one or K coefficient
columns) and ``pair_kernels`` (pairs of rows within a block). With ``KernelGroups`` the
columns come in runs of different kernels that share one reduction (a grid search's gammas):
each tile's reductions are taken once for all of them. A block of rows is a
``kernels.block.RowBlock`` with its norms (r,). The work is done by a backend module with the
numba cores' names, chosen here (CPU today, ``cpu.py``; a GPU backend would be a sibling
with the same functions); the thread and BLAS policy is ``threads.py``. Callers see arrays
and blocks, never the cores' CPU arguments (work items, tiles, column groups).
"""
import copy

import numpy as np

from . import cpu as BACKEND
from .spec import KernelSpec
from .stored import StoredRows
from .threads import single_threaded_blas

# Working memory for one kernel-sum pass: the dense transposed row block of the sparse
# path and the (tile, r) dot-product tile of the dense path stay under this many bytes.
DEFAULT_WORK_BYTES = 64 * 2**20
# Support vectors per GEMM tile on the dense path: small enough that the tile of dot
# products is still in cache when the fused kernel pass reads it.
MAX_TILE_ROWS = 512
# Pair kernels of a CSR block take the dense path when the block, densified, holds at most
# this many times its nonzeros.
DENSE_PAIRS_FILL = 4


class KernelGroups:
    """G kernels (``specs``, KernelSpecs) whose columns are consecutive runs of the
    coefficient columns: group g's are ``starts[g]`` to ``starts[g + 1] - 1`` (``starts``
    (G + 1,), from 0 to the number of columns). They must share the reduction (the dot
    product, or laplacian's L1 overlap) and the offset: then a tile's reductions serve
    every group, and only the formula and the weighted sums repeat."""

    def __init__(self, specs, starts):
        self.specs = tuple(specs)
        self.starts = np.ascontiguousarray(starts, dtype=np.int64)
        if not self.specs or len(self.starts) != len(self.specs) + 1 or self.starts[0] != 0 or \
                np.any(np.diff(self.starts) <= 0):
            raise ValueError(f"KernelGroups: {len(self.specs)} kernels need increasing column starts from 0, "
                             f"got {self.starts.tolist()}")
        first = self.specs[0]
        for spec in self.specs:
            if spec.uses_l1 != first.uses_l1 or spec.offset != first.offset:
                raise ValueError(f"KernelGroups: {spec.name} and {first.name} do not share a reduction and "
                                 "offset (dot-product kernels share one, laplacian kernels another)")

    @property
    def n_columns(self):
        return int(self.starts[-1])

    def core_arguments(self):
        """The grouped cores' trailing arguments: kinds, gammas, coef0s, degrees, starts, offset."""
        return (np.array([s.kind for s in self.specs], dtype=np.int64),
                np.array([float(s.gamma) for s in self.specs]), np.array([float(s.coef0) for s in self.specs]),
                np.array([int(s.degree) for s in self.specs], dtype=np.int64), self.starts,
                float(self.specs[0].offset))


def dense_row_norms(X, l1):
    """Squared L2 (or, with ``l1``, L1) norm of every row of a dense array, (n,) float64: each
    row's terms in float64 summed in a fixed order (``BACKEND.dense_row_norms``)."""
    X = np.asarray(X)
    if X.dtype == np.float16 or not X.flags.c_contiguous or X.ndim != 2:  # types and layouts numba does not take
        X = np.ascontiguousarray(X, dtype=np.float64).reshape(len(X), -1)
    return BACKEND.dense_row_norms(X, bool(l1))


def csr_row_norms(indptr, indices, values, l1):
    """``dense_row_norms`` of CSR rows."""
    return BACKEND.csr_row_norms(np.asarray(indptr, dtype=np.int64), values, bool(l1))


def row_norms(rows, spec):
    """The per-row norms ``spec``'s kernel needs, (n,) float64: squared L2, or L1 for the L1
    reductions (laplacian). ``rows``: a RowBlock, a dense array, a scipy CSR matrix or a CSR triple."""
    l1 = spec.uses_l1
    if hasattr(rows, "n_rows"):  # a RowBlock
        if rows.known_norms is not None and rows.known_norms[0] == l1:  # computed in delivery, in the same order
            return rows.known_norms[1]
        return dense_row_norms(rows.dense, l1) if rows.dense is not None else csr_row_norms(*rows.csr, l1)
    if isinstance(rows, tuple):
        return csr_row_norms(*rows, l1)
    if hasattr(rows, "indptr"):
        return csr_row_norms(rows.indptr, rows.indices, rows.data, l1)
    return dense_row_norms(rows, l1)


# ``partial_sums(between=...)`` calls back after each run of about BETWEEN_VALUES kernel values
# (whole tiles) until the callback says it is done, then runs the rest in one call: a
# pipelined pack's collectives are progressed while they are in flight and cost nothing once
# done. Two ranks' Iallreduce of a pack's buffers (50 to 80 kB) took 3 to 5 tests each with
# the mpich wheel, and each round waits for the other rank's next test, so the dense path's
# first BETWEEN_FINE_ROWS stored rows go in tiles of BETWEEN_TILE_ROWS, about 0.6 ms of sums
# at d = 784 and r = 100 on one core (128-row tiles measured 7 to 12% slower). The rest take
# the usual MAX_TILE_ROWS tiles: 256-row tiles cost 3 to 4% more than 512-row ones over a
# pass (BLAS packs the block's columns again for every tile), and the collectives are
# usually done within about five tests (the digits at p = 2; 2,048 fine rows cost 80 us a
# pass more than 1,024, 512 saved 30 us more). Which rows take which tile depends only on
# their number, so the sums' bits do not depend on when the collectives are done.
# Sparse rows of few nonzeros make a kernel value cheap: there a run is at least
# BETWEEN_WORK stored values times block rows (about 0.1 to 0.2 ms on one core), or the
# calls and tests cost more than they let MPI progress (ijcnn1, 13 values a row: runs of 128
# rows made a pass 22 to 41% slower than one call; 768-row runs, 7 to 15%).
BETWEEN_VALUES = 1 << 14
BETWEEN_WORK = 1 << 20
BETWEEN_TILE_ROWS = 256
BETWEEN_FINE_ROWS = 1024


def _runs(n, tile, r, between, fine_tile=None, values_per_row=None):
    """[a, b) runs of the n stored rows, with the rows per tile of each, that ``partial_sums``
    takes in one core call each: all of them (``tile``), or, with a ``between`` callback, runs
    of whole tiles (a core's unit of summation) worth about BETWEEN_VALUES kernel values for r
    block rows (and, given the stored rows' mean ``values_per_row``, BETWEEN_WORK values times
    block rows), calling ``between()`` after each until it returns True, then the rest at once.
    With ``fine_tile`` the first BETWEEN_FINE_ROWS rows (whole fine tiles) take tiles of
    ``fine_tile`` rows, the rest ``tile``. Which rows take which tile does not depend on
    when ``between`` returns True, so neither do the sums' bits."""
    if between is None:
        yield 0, n, tile
        return
    fine_tile = fine_tile or tile
    fine_end = min(n, fine_tile * max(1, BETWEEN_FINE_ROWS // fine_tile)) if fine_tile != tile else 0
    r = max(1, r)
    done, a = False, 0
    while a < n:
        t, end = (fine_tile, fine_end) if a < fine_end else (tile, n)
        tiles = max(1, BETWEEN_VALUES // (t * r),
                    0 if values_per_row is None else int(BETWEEN_WORK // (t * r * max(values_per_row, 1e-9))))
        b = end if done else min(end, a + t * tiles)
        yield a, b, t
        if not done and b < n and between():
            done = True
        a = b


class KernelCompute:
    """One kernel's compute on a rank: ``spec`` (a KernelSpec), the stored rows (``stored``:
    ``n_features``, dense or ``sparse``, in ``dtype``) and ``work_bytes`` of working memory
    per kernel-sum pass; with ``groups`` (``KernelGroups``, spec their first), one kernel per
    run of the coefficient columns."""

    on_device = False  # the work runs on the CPU (``array_compute.ArrayCompute`` is a device's)

    def __init__(self, spec, n_features, sparse, dtype=np.float64, work_bytes=DEFAULT_WORK_BYTES, groups=None):
        if not isinstance(spec, KernelSpec):
            raise TypeError(f"KernelCompute: spec must be a KernelSpec, got {type(spec).__name__}")
        self.spec = spec
        self._set_groups(groups)
        if self.groups is not None and self.groups.specs[0] != spec:
            raise ValueError("KernelCompute: spec must be the first of the kernel groups")
        self.stored = StoredRows(n_features, sparse, dtype)
        self.work_bytes = int(work_bytes)
        self._params = spec.params()
        self._work_arrays = {}

    def with_groups(self, groups):
        """A compute of the same stored rows (shared, not copied) whose coefficient columns are
        ``groups``' (``KernelGroups`` with this compute's kernels, or None for its first alone):
        partial sums over a subset of the columns, e.g. a grid's held-out ones."""
        twin = copy.copy(self)
        twin._set_groups(groups)
        twin._work_arrays = {}
        return twin

    def _set_groups(self, groups):
        """Several kernels over runs of the columns (``KernelGroups``; spec is the first), or
        None (one kernel, also for a single group), with the grouped cores' arguments."""
        self.groups = groups if groups is not None and len(groups.specs) > 1 else None
        self._group_arguments = None if self.groups is None else self.groups.core_arguments()

    def __getstate__(self):  # a pickled model carries no work arrays
        return {**self.__dict__, "_work_arrays": {}}

    def store(self, X, norms=None):
        """Append rows to the stored ones: X dense (k, d), scipy CSR or a CSR triple; their
        norms (k,), computed when None."""
        self.stored.append(X, self.row_norms(X) if norms is None else norms)

    def row_norms(self, rows):
        """``row_norms`` for this kernel: (n,) float64."""
        return row_norms(rows, self.spec)

    def prepare(self, block):
        """Build the block's columns (``RowBlock.columns``) that ``partial_sums`` and
        ``pair_kernels`` share, when they take them whole: apart, so that a caller can time
        this per-block work (which every rank repeats) apart from the products. Sparse blocks
        too wide for ``work_bytes`` are transposed a column group at a time inside
        ``partial_sums`` instead."""
        if block.dense is not None or self._group_columns(block) == block.n_rows:
            block.columns()

    def _group_columns(self, block):
        """The block's rows per column group of the sparse (and non-GEMM) kernel-sum pass: its
        dense transposed group, 8 bytes per value, stays within ``work_bytes``."""
        return max(1, min(block.n_rows, self.work_bytes // (8 * block.n_features)))

    # seconds this compute's device took to get ready before the first pack (``device.on_device``);
    # the CPU's numba kernels are readied apart (``packsvm.warmup``)
    warm_seconds = 0.0

    def host(self):
        """The compute a model keeps on the CPU: this one (a device's gives its CPU twin)."""
        return self

    def after_pack(self, table, ids, fold):
        """Told after each pack what changed in the table's coefficients (a device keeps a copy:
        ``array_compute``); the CPU reads the table's own."""

    def partial_sums(self, coef, block, block_norms, out, mirrored=False, kept=None, between=None, few=False):
        """out[k] += sum_j coef_j (K(sv_j, x_k) + offset) over the stored rows, for the block's rows;
        with K coefficient columns, out[c, k] += sum_j coef[j, c] (K(sv_j, x_k) + offset).
        ``mirrored``: coef is the table's (a device's copy may serve; the CPU ignores it).
        ``kept``: a key, the same for calls with the same coef (a device sends coef once per
        key and keeps it; the CPU ignores it).

        coef (n,) with out (r,), or coef (n, K) with out (K, r) (or (r,) when K is 1), n the
        stored rows; block: a RowBlock of r rows with block_norms (r,); out float64. The work is
        split into column groups (sparse path) or row tiles (dense path) so that working arrays
        stay under ``work_bytes``. ``between``: called after each run of stored rows worth about
        ``BETWEEN_VALUES`` kernel values (a pipelined pack tests its collectives there) until it
        returns True (``_runs``); the runs end on tile boundaries and ``out`` takes the tiles'
        sums in the same order either way, so the result is the same bits whenever it returns True
        (the dense path's first tiles are BETWEEN_TILE_ROWS then: the bits differ from a pass
        without ``between`` by rounding). ``few``:
        there are only a few stored rows, so dense rows take the reduction core (which skips
        zeros) instead of BLAS, whose fixed cost per call is that of thousands of rows.
        """
        stored, stored_norms, spec, work_bytes = self.stored.features, self.stored.norms, self.spec, self.work_bytes
        coef = np.asarray(coef)
        if coef.ndim not in (1, 2):
            raise ValueError(f"partial_sums: coef must be (n,) or (n, K), got shape {coef.shape}")
        n = coef.shape[0]
        if n != self.stored.n:
            raise ValueError(f"partial_sums: coef has {n} rows for {self.stored.n} stored rows")
        r = block.n_rows
        n_columns = 1 if coef.ndim == 1 else coef.shape[1]
        # the cores take coef (n, K) and out (K, r): 1-D arguments become views of that shape
        out2 = out[None, :] if out.ndim == 1 else out
        if out2.shape != (n_columns, r):
            raise ValueError(f"partial_sums: out has shape {out.shape}; coef {coef.shape} and {r} rows need "
                             f"({n_columns}, {r})" + (f" or ({r},)" if n_columns == 1 else ""))
        if n == 0 or n_columns == 0:
            return
        coef = np.ascontiguousarray(coef, dtype=np.float64).reshape(n, n_columns)
        groups = self._group_arguments
        if groups is not None and n_columns != self.groups.n_columns:
            raise ValueError(f"partial_sums: {n_columns} coefficient columns for kernel groups of "
                             f"{self.groups.n_columns}")
        if self.stored.sparse or not spec.facts.gemm or few:
            self._reduction_sums(coef, block, block_norms, out2, between)
            return
        # dense: dot products by BLAS GEMM on tiles of stored rows, kernel fused after
        XT = np.ascontiguousarray(block.columns(), dtype=stored.dtype)
        tile = max(1, min(MAX_TILE_ROWS, work_bytes // (8 * r)))
        fine_tile = min(tile, BETWEEN_TILE_ROWS)
        n_tiles = (n + fine_tile - 1) // fine_tile  # at most; each call takes the first of them
        dots = self._work("dots", (BACKEND.gemm_work_items(n_tiles), tile, r), stored.dtype)
        partial = self._work("partial", (n_tiles, n_columns, r), np.float64)
        values = None if groups is None else self._work("values", dots.shape, stored.dtype)
        with single_threaded_blas():
            for a, b, t in _runs(n, tile, r, between, fine_tile):
                if groups is None:
                    BACKEND.gemm_partial_sums(stored[a:b], stored_norms[a:b], coef[a:b], b - a, XT, block_norms,
                                              t, dots, partial, *self._params, out2)
                else:
                    BACKEND.gemm_group_sums(stored[a:b], stored_norms[a:b], coef[a:b], b - a, XT, block_norms, t,
                                            dots, values, partial, *groups, out2)

    def few_sums(self, coef, block, block_norms, out):
        """``partial_sums(coef, block, block_norms, out, few=True)`` without its checks and
        conversions, for a caller that passes coef (n, K) float64 C-contiguous (n the stored
        rows, at least one) and out (K, r) C-contiguous: the same cores and bits. The pipelined
        correction calls it each pack, right after the kernel sums have emptied the caches,
        when every Python step costs several microseconds."""
        self._reduction_sums(coef, block, block_norms, out, None)

    def _reduction_sums(self, coef, block, block_norms, out2, between):
        """``partial_sums``' reduction path (sparse rows, kernels without a GEMM, or ``few``):
        coef (n, K) float64 C-contiguous, out2 (K, r); ``between`` as there."""
        stored, stored_norms, sparse, groups = self.stored.features, self.stored.norms, self.stored.sparse, \
            self._group_arguments
        n, n_columns, r = coef.shape[0], coef.shape[1], block.n_rows
        # the reductions run in the stored rows' dtype: float32 storage computes in float32
        dtype = (stored[2] if sparse else stored).dtype
        cols = self._group_columns(block)
        for c0 in range(0, r, cols):
            c1 = min(r, c0 + cols)
            # the whole block is the pack's columns, which the pair kernels use too: built once
            XT = (block.columns() if c1 - c0 == r else block.transposed(c0, c1)).astype(dtype, copy=False)
            # one group (the usual pack) adds straight into out; column groups into a part each
            part = out2 if c1 - c0 == r and out2.flags.c_contiguous else np.zeros((n_columns, c1 - c0))
            for a, b, _ in _runs(n, BACKEND.SV_BLOCK, c1 - c0, between,
                                 values_per_row=stored[0][n] / n if sparse else stored.shape[1]):
                items = BACKEND.work_items(b - a)
                if sparse:
                    indptr, indices, values = stored
                    if groups is None:
                        BACKEND.csr_partial_sums(indptr[a:b + 1], indices, values, stored_norms[a:b],
                                                 coef[a:b], b - a, XT, block_norms[c0:c1], items, *self._params,
                                                 part)
                    else:
                        BACKEND.csr_group_sums(indptr[a:b + 1], indices, values, stored_norms[a:b], coef[a:b],
                                               b - a, XT, block_norms[c0:c1], items, *groups, part)
                elif groups is None:
                    BACKEND.dense_partial_sums(stored[a:b], stored_norms[a:b], coef[a:b], b - a, XT,
                                               block_norms[c0:c1], items, *self._params, part)
                else:
                    BACKEND.dense_group_sums(stored[a:b], stored_norms[a:b], coef[a:b], b - a, XT,
                                             block_norms[c0:c1], items, *groups, part)
            if part is not out2:
                out2[:, c0:c1] += part

    def _work(self, name, shape, dtype):
        """A work array of ``shape`` (a view of one kept for the next packs, reallocated only
        when it must grow, then with room to spare)."""
        array = self._work_arrays.get(name)
        if array is None or array.dtype != dtype or array.shape[1:] != shape[1:] or len(array) < shape[0]:
            array = np.empty((shape[0] + shape[0] // 2,) + tuple(shape[1:]), dtype=dtype)
            self._work_arrays[name] = array
        return array[:shape[0]]

    def pair_kernels(self, block, block_norms, left, right, out):
        """out[q] = K(row left[q], row right[q]) + offset for rows of the block; left, right (Q,)
        int64, out (Q,) float64; with kernel groups out (G, Q), out[g] with group g's kernel."""
        if out.ndim == 2:
            specs = (self.spec,) if self.groups is None else self.groups.specs
            if out.shape[0] != len(specs):
                raise ValueError(f"pair_kernels: out has {out.shape[0]} rows for {len(specs)} kernel groups")
            for spec, group_out in zip(specs, out):
                self._pair_kernels(block, block_norms, left, right, spec.params(), group_out)
        elif self.groups is not None:
            raise ValueError(f"pair_kernels: kernel groups need out (G, Q), got shape {out.shape}")
        else:
            self._pair_kernels(block, block_norms, left, right, self._params, out)

    def _pair_kernels(self, block, block_norms, left, right, params, out):
        """``pair_kernels`` of one kernel (its cores' ``params``) into out (Q,)."""
        # a CSR block dense enough takes the vectorised dense path too: it adds only exact zeros
        # where a row has no entry, so the values equal the sparse path's bit for bit
        if block.dense is not None or block.n_rows * block.n_features <= DENSE_PAIRS_FILL * len(block.csr[2]):
            XT = block.columns()
            X = block.dense if block.dense is not None else np.ascontiguousarray(XT.T)
            BACKEND.dense_pair_kernels(X, XT, block_norms, left, right, *params, out)
        else:
            BACKEND.csr_pair_kernels(*block.csr, block_norms, left, right, *params, out)
