"""Collective 1: the rows of given global ids, delivered to every rank with one sum.

Rank k holds only its shard of the data. To work on rows drawn from anywhere, each rank
writes the rows it owns into one zeroed byte buffer and a single sum over the ranks gives
every rank every row. Every row has one owner and the other ranks add zero bytes, so the
bytes sum exactly (no carries) and each section can travel in its own type: labels (and
weights) float64, the rows' values as stored (uint8 stays uint8), sparse rows' nonzero
counts and indices int32. Sparse rows travel padded to the data set's longest row, so
nothing of size n_features is sent for sparse data. Sections, r rows, L the longest row:
``labels (r) [weights (r)] values (r, d)`` for dense rows, ``labels (r) [weights (r)]
counts (r) indices (r, L) values (r, L)`` for sparse ones, laid out by decreasing item
size so that every section is aligned. Compact rows are scaled by ``value_scale`` after
the sum. One rank, which holds every row, takes them straight from its shard instead, with
the same bits (``Delivery.from_shard``: no buffer, no copy, no sum). Used by the kernel
trainer's packs, its predictions and linear Pegasos.
"""
import functools
import math

import numpy as np

from ..jit import njit
from ..kernels.block import RowBlock
from ..kernels.norms import csr_row_norms, dense_row_norm
from ..kernels.prefetch import prefetch_row


@njit(cache=True)
def _pad_rows(indptr, indices, values, ids, start, labels, weights, nnz, idx, val, out_labels, out_weights):
    """Copy the CSR rows among global ``ids`` that this shard holds (its first row is global
    row ``start``) into their buffer slots (nnz, idx, val), with their labels and weights
    (empty arrays: none); every other byte of the slots is set to zero (no separate zeroing).
    The rows' bounds, then their entries, labels and weights, are asked for before the copy
    (``prefetch_row``), so that the random rows' loads overlap."""
    n_rows = indptr.shape[0] - 1
    _ask_for_csr_rows(indptr, indices, values, ids, start, labels, weights)
    for k in range(ids.shape[0]):
        row = ids[k] - start
        held = 0 <= row < n_rows
        a, b = (indptr[row], indptr[row + 1]) if held else (0, 0)
        nnz[k] = b - a
        for j in range(b - a):
            idx[k, j] = indices[a + j]
            val[k, j] = values[a + j]
        for j in range(b - a, idx.shape[1]):
            idx[k, j] = 0
            val[k, j] = 0
        _label_and_weight(labels, weights, row if held else -1, k, out_labels, out_weights)


@njit(cache=True)
def _copy_rows(X, ids, start, labels, weights, out, out_labels, out_weights):
    """``_pad_rows`` for dense rows X (n, d) into out (r, >= d); every held row's lines (and
    its label's and weight's) are asked for first (``prefetch_row``), so that their loads
    overlap."""
    _ask_for_rows(X, ids, start, labels, weights)
    for k in range(ids.shape[0]):
        row = ids[k] - start
        held = 0 <= row < X.shape[0]
        if held:
            for f in range(X.shape[1]):
                out[k, f] = X[row, f]
        for f in range(X.shape[1] if held else 0, out.shape[1]):
            out[k, f] = 0
        _label_and_weight(labels, weights, row if held else -1, k, out_labels, out_weights)


@njit(inline="always")
def _ask_for_rows(X, ids, start, labels, weights):
    """Ask for the lines of the dense rows ``ids`` this shard holds (its first row is global row
    ``start``), and their labels' and weights', before any is copied (``prefetch_row``)."""
    for k in range(ids.shape[0]):
        row = ids[k] - start
        if 0 <= row < X.shape[0]:
            prefetch_row(X[row])
            prefetch_row(labels[row:row + 1])
            prefetch_row(weights[row:row + 1])


@njit(inline="always")
def _ask_for_csr_rows(indptr, indices, values, ids, start, labels, weights):
    """``_ask_for_rows`` for CSR rows: their bounds first, then their entries, labels and weights."""
    n_rows = indptr.shape[0] - 1
    for k in range(ids.shape[0]):
        row = ids[k] - start
        if 0 <= row < n_rows:
            prefetch_row(indptr[row:row + 2])
    for k in range(ids.shape[0]):
        row = ids[k] - start
        if 0 <= row < n_rows:
            prefetch_row(indices[indptr[row]:indptr[row + 1]])
            prefetch_row(values[indptr[row]:indptr[row + 1]])
            prefetch_row(labels[row:row + 1])
            prefetch_row(weights[row:row + 1])


@njit(inline="always")
def _scaled_row(row, scale, row_out):
    """row_out[:len(row)] = float64(row) * scale, rounded once to row_out's type."""
    for f in range(row.shape[0]):
        row_out[f] = np.float64(row[f]) * scale


@njit(inline="always")
def _columns_of(out, columns):
    """columns (>= d, r) = out's transpose (out (r, d)), written after its rows; (0, 0): none."""
    for f in range(columns.shape[0]):
        for k in range(columns.shape[1]):
            columns[f, k] = out[k, f]


@njit(inline="always")
def _label_and_weight(labels, weights, row, k, out_labels, out_weights):
    """Row ``row``'s label and weight into slot k, zeros for row -1 (not held here)."""
    if out_labels.shape[0] > 0:
        out_labels[k] = labels[row] if row >= 0 and labels.shape[0] > 0 else 0.0
    if out_weights.shape[0] > 0:
        out_weights[k] = weights[row] if row >= 0 and weights.shape[0] > 0 else 0.0


@njit(cache=True)
def _gather_rows(X, ids, start, labels, weights, scale, out, l1, norms, columns, out_labels, out_weights):
    """One rank's pack straight from its shard, which holds every row: dense rows ``ids`` of X
    (n, d) into out (r, >= d) and columns (>= d, r; or (0, 0): none) with their norms (r,) (or
    empty: none), labels and weights, the same bits as ``_copy_rows`` into collective 1's
    buffer then ``_scaled`` out of it (a row the shard lacks arrives as zeros there too)."""
    _ask_for_rows(X, ids, start, labels, weights)
    sums = np.empty(8)
    for k in range(ids.shape[0]):
        row, row_out = ids[k] - start, out[k]
        held = 0 <= row < X.shape[0]
        if held:
            _scaled_row(X[row], scale, row_out)
        for f in range(X.shape[1] if held else 0, out.shape[1]):
            row_out[f] = 0.0 * scale  # as a zero of the buffer converts
        if norms.shape[0] > 0:
            norms[k] = dense_row_norm(row_out, l1, sums)
        _label_and_weight(labels, weights, row if held else -1, k, out_labels, out_weights)
    _columns_of(out, columns)


@njit(cache=True)
def _gather_csr(indptr, indices, values, ids, start, labels, weights, scale, out_indptr, out_indices, out_values,
                l1, norms, out_labels, out_weights):
    """``_gather_rows`` for the CSR rows of a shard: rows ``ids`` into out_indptr (r + 1,),
    out_indices and out_values (room for every nonzero), the same bits as ``_pad_rows`` then
    ``_unpad_rows``. Returns the number of nonzeros."""
    n_rows = indptr.shape[0] - 1
    _ask_for_csr_rows(indptr, indices, values, ids, start, labels, weights)
    r = ids.shape[0]
    out_indptr[0] = 0
    for k in range(r):
        row = ids[k] - start
        held = 0 <= row < n_rows
        a, b = (indptr[row], indptr[row + 1]) if held else (0, 0)
        at = out_indptr[k]
        out_indptr[k + 1] = at + (b - a)
        for j in range(b - a):
            out_indices[at + j] = np.int32(indices[a + j])
            out_values[at + j] = np.float64(values[a + j]) * scale
        _label_and_weight(labels, weights, row if held else -1, k, out_labels, out_weights)
    total = out_indptr[r]
    if norms.shape[0] > 0:
        computed = csr_row_norms(out_indptr, out_values[:total], l1)
        for k in range(r):
            norms[k] = computed[k]
    return total


@njit(cache=True)
def _unpad_rows(nnz, idx, val, scale, indptr, indices, values, l1, norms):
    """Padded rows (row k: the ``nnz[k]`` leading entries of ``idx[k]`` and ``val[k]``; (r,),
    (r, L), (r, L)) into the CSR arrays indptr (r + 1,), indices and values (room for every
    nonzero): values float64(val) * scale, rounded once to their dtype. norms (r,), or empty
    (none): the rows' L1 (``l1``) or squared L2 norms, as ``kernels.norms.csr_row_norms``
    sums them. Returns the number of nonzeros."""
    r = nnz.shape[0]
    indptr[0] = 0
    for k in range(r):
        indptr[k + 1] = indptr[k] + np.int64(nnz[k])
        a = indptr[k]
        for j in range(indptr[k + 1] - a):
            indices[a + j] = np.int32(idx[k, j])
            values[a + j] = np.float64(val[k, j]) * scale
    total = indptr[r]
    if norms.shape[0] > 0:
        computed = csr_row_norms(indptr, values[:total], l1)
        for k in range(r):  # an element loop: a slice assignment compiles numba's shape-mismatch message
            norms[k] = computed[k]
    return total


def sections(r, d, longest, sparse, stored, weighted=False):
    """Collective 1's sections for r rows, in buffer order: (name, dtype, shape) each.

    d: the rows' width; longest: the longest sparse row (L); stored: the values' dtype;
    weighted: whether row weights travel. Sorted by decreasing item size (stable), so each
    section starts at a multiple of its item size.
    """
    parts = [("labels", np.dtype(np.float64), (r,))]
    if weighted:
        parts.append(("weights", np.dtype(np.float64), (r,)))
    if sparse:
        parts += [("counts", np.dtype(np.int32), (r,)), ("indices", np.dtype(np.int32), (r, longest)),
                  ("values", np.dtype(stored), (r, longest))]
    else:
        parts.append(("values", np.dtype(stored), (r, d)))
    return sorted(parts, key=lambda part: -part[1].itemsize)


def buffer_bytes(r, d, longest, sparse, stored, weighted=False):
    """Bytes of collective 1's buffer for r rows (see ``sections``)."""
    return sum(dtype.itemsize * math.prod(shape) for _, dtype, shape in sections(r, d, longest, sparse, stored,
                                                                                  weighted))


def new_buffer(r, d, longest, sparse, stored, weighted):
    """One uint8 buffer holding the ``sections`` back to back, and a dict of their views. The
    copy kernels write every byte of it, and what callers return never aliases it."""
    parts = sections(r, d, longest, sparse, stored, weighted)
    sizes = [dtype.itemsize * math.prod(shape) for _, dtype, shape in parts]
    buf = np.zeros(sum(sizes), dtype=np.uint8)
    views, at = {}, 0
    for (name, dtype, shape), size in zip(parts, sizes):
        views[name] = buf[at:at + size].view(dtype).reshape(shape)
        at += size
    return buf, views


# one buffer per layout, kept for the next call (every pack of a run has one layout)
_buffer = functools.lru_cache(maxsize=8)(new_buffer)


def deliver_rows(collectives, shard, labels, ids, n_features=None, weights=None, dtype=None, norms_l1=None):
    """Collective: every rank gets the rows ``ids`` (global row numbers) of the data set.

    ``collectives``: a ``mpi.collectives.Collectives`` (one ``sum``); ``shard`` this
    rank's ``Shard``; ``labels`` its rows' labels (or None); ``n_features`` pads rows to a
    model's width; ``weights`` its rows' weights (or None), delivered as the block's ``weight``.
    Returns a ``RowBlock`` of feature values in the float ``dtype`` (default: the shard's):
    float64(stored value) * value_scale, rounded once to ``dtype`` (r rows at a time).
    ``norms_l1`` True or False: the block also carries its rows' L1 or squared L2 norms,
    computed as the rows are converted (``RowBlock.known_norms``).
    """
    return Delivery(shard, labels, n_features, weights, dtype, norms_l1).deliver(collectives, ids)


class Delivery:
    """``deliver_rows`` of one shard, labels, weights and width, for many calls (a run's
    packs): the buffer, its sections and the copy kernels' arguments are worked out once per
    number of rows, so that a pack's delivery is three calls (copy, sum, convert), or on one
    rank one (``from_shard``). ``start`` starts one without blocking, in a buffer of its own."""

    def __init__(self, shard, labels, n_features=None, weights=None, dtype=None, norms_l1=None):
        self.shard, self.labels, self.weights, self.norms_l1 = shard, labels, weights, norms_l1
        self.n_features = shard.n_features if n_features is None else n_features
        if not shard.sparse and shard.n_features > self.n_features:
            raise ValueError(f"deliver_rows: the shard's {shard.n_features} features do not fit {self.n_features}")
        self.dtype = shard.dtype if dtype is None else np.dtype(dtype)
        self.can_read_shard = shard.sparse or shard.X.dtype != np.float16  # ``from_shard`` takes these rows
        # the copy kernels' labels and weights: an empty array for none
        self.labels_in = _NONE if labels is None else labels
        self.weights_in = _NONE if weights is None else weights
        self._layouts = {}  # (r, in flight) -> _Layout
        self._buffer_bytes = {}  # r -> collective 1's bytes

    def deliver(self, collectives, ids):
        """Collective: the rows ``ids`` as a RowBlock (``deliver_rows``). One rank takes them
        straight from its shard (``from_shard``), with the same bits, and counts the sum it did not
        need (``Collectives.counted_sum``); several send them through collective 1's buffer."""
        if collectives.size == 1 and self.can_read_shard:
            block = self.from_shard(ids)
            collectives.counted_sum(self._bytes(len(ids)))
            return block
        return self.through_buffer(collectives, ids)

    def through_buffer(self, collectives, ids):
        """Collective: ``deliver`` through collective 1's buffer, whatever the number of ranks:
        this rank's rows copied into it, one sum, the rows converted out of it."""
        layout = self._layout(len(ids), False)
        layout.fill(ids)
        collectives.sum(layout.buf)  # each byte is written by one rank at most: the sum is exact
        return layout.unpack()

    def from_shard(self, ids):
        """The rows ``ids`` of a shard that holds them all, as ``through_buffer`` delivers them
        (``can_read_shard``: not float16 rows, which numba does not take)."""
        shard, r, dtype, norms_l1 = self.shard, len(ids), self.dtype, self.norms_l1
        labels, weights = self.labels_in, self.weights_in
        y, weight = np.empty(r), (np.empty(r) if self.weights is not None else None)
        out_weights = _NONE if weight is None else weight
        norms = np.empty(r if norms_l1 is not None else 0)
        if shard.sparse:
            X = shard.X
            capacity = r * shard.max_row_nnz
            indptr, indices, values = np.empty(r + 1, dtype=np.int64), np.empty(capacity, dtype=np.int32), \
                np.empty(capacity, dtype=dtype)
            total = _gather_csr(X.indptr, X.indices, X.data, ids, shard.start, labels, weights, shard.value_scale,
                                indptr, indices, values, bool(norms_l1), norms, y, out_weights)
            block = RowBlock(self.n_features, y, csr=(indptr, indices[:total], values[:total]), weight=weight)
        else:
            rows, columns = np.empty((r, self.n_features), dtype=dtype), np.empty((self.n_features, r), dtype=dtype)
            _gather_rows(shard.X, ids, shard.start, labels, weights, shard.value_scale, rows, bool(norms_l1), norms,
                         columns, y, out_weights)
            block = RowBlock(self.n_features, y, dense=rows, weight=weight, columns=columns)
        if norms_l1 is not None:
            block.known_norms = (bool(norms_l1), norms)
        return block

    def _bytes(self, r):
        """Collective 1's bytes for r rows (``buffer_bytes``), kept per r."""
        nbytes = self._buffer_bytes.get(r)
        if nbytes is None:
            shard = self.shard
            nbytes = self._buffer_bytes[r] = buffer_bytes(r, self.n_features, shard.max_row_nnz, shard.sparse,
                                                          shard.X.dtype, self.weights is not None)
        return nbytes

    def start(self, collectives, ids):
        """``deliver`` started without blocking (one ``Collectives.start_sum``) in this
        delivery's own buffer, which must not be started again before the rows are unpacked:
        returns a ``RowsInFlight``."""
        layout = self._layout(len(ids), True)
        layout.fill(ids)
        return RowsInFlight(collectives, collectives.start_sum(layout.buf), layout)

    def _layout(self, r, in_flight):
        layout = self._layouts.get((r, in_flight))
        if layout is None:
            shard = self.shard
            arguments = (r, self.n_features, shard.max_row_nnz, shard.sparse, shard.X.dtype,
                         self.weights is not None)
            buf, part = new_buffer(*arguments) if in_flight else _buffer(*arguments)
            layout = self._layouts[(r, in_flight)] = _Layout(self, buf, part)
        return layout


class _Layout:
    """One ``Delivery``'s buffer for r rows, with the arguments of its copy into the buffer
    (``fill``) and out of it (``unpack``)."""

    def __init__(self, delivery, buf, part):
        shard = delivery.shard
        self.buf, self.part, self.sparse = buf, part, shard.sparse
        self.n_features, self.dtype, self.scale = delivery.n_features, delivery.dtype, shard.value_scale
        self.norms_l1 = delivery.norms_l1
        values = part["values"]
        labels, weights = delivery.labels_in, delivery.weights_in
        out_weights = _NONE if delivery.weights is None else part["weights"]
        if shard.sparse:
            self.copy = _pad_rows
            self.before_ids = (shard.X.indptr, shard.X.indices, shard.X.data)
            self.after_ids = (shard.start, labels, weights, part["counts"], part["indices"], values, part["labels"],
                              out_weights)
        else:  # float16, a type numba does not take, is copied as its bits
            same_bits = np.uint16 if values.dtype == np.float16 else values.dtype
            self.copy = _copy_rows
            self.before_ids = (shard.X.view(same_bits),)
            self.after_ids = (shard.start, labels, weights, values.view(same_bits), part["labels"], out_weights)

    def fill(self, ids):
        """This rank's rows among ``ids`` into the buffer, zeros elsewhere."""
        self.copy(*self.before_ids, ids, *self.after_ids)

    def unpack(self):
        """The summed buffer as a RowBlock (new arrays: the buffer may be filled again after)."""
        part, dtype, scale, norms_l1 = self.part, self.dtype, self.scale, self.norms_l1
        values = part["values"]
        y = part["labels"].copy()
        weight = part["weights"].copy() if "weights" in part else None
        r = len(y)
        norms = np.empty(r if norms_l1 is not None else 0)
        if self.sparse:
            indptr, indices, floats = np.empty(r + 1, dtype=np.int64), np.empty(values.size, dtype=np.int32), \
                np.empty(values.size, dtype=dtype)
            total = _unpad_rows(part["counts"], part["indices"], values, scale, indptr, indices, floats,
                                bool(norms_l1), norms)
            block = RowBlock(self.n_features, y, csr=(indptr, indices[:total], floats[:total]), weight=weight)
        elif values.dtype == np.float16:  # a type numba does not take: the norms are left to the caller
            return RowBlock(self.n_features, y, dense=(values.astype(np.float64) * scale).astype(dtype),
                            weight=weight)
        else:  # with the rows' columns (``RowBlock.columns``), made while the rows are in the caches
            floats, columns = np.empty(values.shape, dtype=dtype), np.empty(values.shape[::-1], dtype=dtype)
            _scaled(values, scale, floats, bool(norms_l1), norms, columns)
            block = RowBlock(self.n_features, y, dense=floats, weight=weight, columns=columns)
        if norms_l1 is not None:
            block.known_norms = (bool(norms_l1), norms)
        return block


class RowsInFlight:
    """Collective 1 started without blocking (``Delivery.start``): ``request`` is in flight
    until ``finish`` waits for it and returns the RowBlock, as ``deliver_rows`` would (or
    ``wait``, then ``unpack`` later, before the buffer is filled again)."""

    def __init__(self, collectives, request, layout):
        self.collectives, self.request, self._layout = collectives, request, layout

    def finish(self):
        self.wait()
        return self.unpack()

    def wait(self):
        """Wait for the rows: they stay in the buffer until ``unpack``."""
        self.collectives.wait(self.request)

    def unpack(self):
        """The arrived rows as a RowBlock (new arrays: the buffer may be filled again after)."""
        return self._layout.unpack()


_NONE = np.empty(0)


@njit(cache=True)
def _scaled(values, scale, out, l1, norms, columns):
    """out = float64(values) * scale, rounded once to out's type, in one pass (the product is
    exact in float64 for scale 1); norms (r,) (or empty: none) receives each row's L1 (``l1``)
    or squared L2 norm of out's values, as ``kernels.norms.dense_row_norm`` sums them; columns
    (d, r) out's transpose, written after its rows."""
    sums = np.empty(8)
    for k in range(values.shape[0]):
        row_out = out[k]
        _scaled_row(values[k], scale, row_out)
        if norms.shape[0] > 0:
            norms[k] = dense_row_norm(row_out, l1, sums)
    _columns_of(out, columns)
