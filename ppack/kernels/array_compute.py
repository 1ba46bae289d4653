"""The kernel trainer's compute seam on an array library's device: the GPU path (CuPy), or
numpy standing in for it in the tests.

``ArrayCompute`` does what ``compute.KernelCompute`` does, with the same arguments, through
an array module ``xp`` with numpy's interface. The rank's stored rows stay where the table
keeps them (``StoredRows``, on the host: the table update, checkpoints and model files read
them there); the device holds a copy of the rows and their norms, which grows by doubling
and receives only the rows stored since the last pack (at most r a pack). It also mirrors
the table's coefficients: after each pack (``after_pack``) it applies the pack's scale folds
itself, with the operations the table used (so the copy stays bit-identical), and receives
the coefficients of the pack's rows this rank holds (at most r x K).

A pack's work (``launch``): its new rows, the block's columns and norms (and the pair
indices, the first time for a given r) go to the device in one copy from a pinned buffer;
per tile of stored rows one GEMM of dot products in the rows' dtype (float32 products in
float32), one pass of the kernel formula in float64 (``device_formulas``: L1 kernels take
their distances and formula in one kernel instead of the GEMM), one GEMM of the coefficient
products; one kernel for the pair kernels; then one copy back of the (K, r) sums and the
pair kernels together and one sync (``PendingSums.finish``, which a pipelined pack delays
until the fold needs the sums, so the device works while the CPU replays). The sums agree
with the CPU kernels within the float32 bound (``cpu.gemm_partial_sums``), or to float64
rounding. ``passes="unfused"`` keeps the earlier path (the formula as about seven array
operations, the L1 distances by broadcasting, the pairs from a GEMM of the block), to
compare with and to fall back on. Dense rows only.
"""
import importlib
import time
from collections import Counter

import numpy as np

from ..errors import PPackError, given
from .block import RowBlock
from .compute import DEFAULT_WORK_BYTES, KernelCompute
from .device_formulas import CudaFormulas, NumpyFormulas
from .device_queue import DeviceQueue, Download, Upload

GROWTH_ROWS = 1024  # the device copy's first capacity, in rows
WARM_ROWS = 4  # rows of the warm-up's tiny block
PASSES = ("fused", "unfused")


class ArrayCompute(KernelCompute):
    """``KernelCompute`` on the device of array module ``xp``; ``sent`` counts the bytes each
    kind of transfer moved ("rows", "block", "index", "coef" to the device; "sums", "pairs"
    back); ``passes``: "fused" or "unfused" (module docstring)."""

    on_device = True

    def __init__(self, spec, n_features, sparse, dtype=np.float64, work_bytes=DEFAULT_WORK_BYTES, xp=np,
                 passes="fused"):
        if passes not in PASSES:
            raise PPackError(f"device passes: expected one of {', '.join(PASSES)}, got {passes!r}")
        if sparse:
            raise PPackError(f"{given('device', 'gpu')}: CSR data has no GPU path yet; give dense rows (convert a "
                             f"file with --storage dense, if it fits) or train with {given('device', 'cpu')}")
        super().__init__(spec, n_features, sparse, dtype, work_bytes)
        self.xp = xp
        self.sent = Counter()
        self._rows = self._norms = None
        self._on_device = 0
        self._coef = None  # the table's coefficients, mirrored (``after_pack``); None: not mirrored
        self._coef_rows = 0
        self._kept = None  # (key, coefficients on the device): others than the table's, sent once per key
        self.passes = passes
        self._queue = None  # the device's queue, formulas, buffers and pair indices, made on first use

    @property
    def queue(self):
        """The ``DeviceQueue`` (its ``counts``: launches, copies, syncs)."""
        if self._queue is None:
            cuda = hasattr(self.xp, "RawModule")  # else numpy, or a module standing in with numpy's functions
            self._queue = DeviceQueue(self.xp if cuda else np)
            self._formulas = (CudaFormulas(self.xp, self.spec, self._queue) if cuda else
                              NumpyFormulas(self.spec, self._queue, self.work_bytes))
            self._uploads = {"block": Upload(self._queue), "coef": Upload(self._queue)}
            self._download = Download(self._queue)
            self._work_dev = {}
            self._pair_index = None  # (left, right) on the host and on the device, kept while they recur
        return self._queue

    @classmethod
    def beside(cls, compute, xp, passes="fused"):
        """An ArrayCompute sharing ``compute``'s stored rows (a KernelCompute's, already holding rows)."""
        device = cls(compute.spec, compute.stored.n_features, compute.stored.sparse, compute.stored.dtype,
                     compute.work_bytes, xp, passes)
        device.stored = compute.stored
        return device

    def host(self):
        """A KernelCompute of the CPU sharing these stored rows (what a model keeps after training)."""
        compute = KernelCompute(self.spec, self.stored.n_features, self.stored.sparse, self.stored.dtype,
                                self.work_bytes)
        compute.stored = self.stored
        return compute

    def __getstate__(self):  # no device arrays; the array module (which does not pickle) by its name
        state = {k: v for k, v in super().__getstate__().items()
                 if k not in ("_formulas", "_uploads", "_download", "_work_dev", "_pair_index")}
        return {**state, "xp": self.xp.__name__, "_rows": None, "_norms": None, "_on_device": 0, "_coef": None,
                "_coef_rows": 0, "_kept": None, "_queue": None}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.xp = importlib.import_module(state["xp"])

    def warm_up(self):
        """Run ``partial_sums`` and ``pair_kernels`` once on WARM_ROWS rows of this kernel, dtype
        and width, in a throwaway twin (this compute's rows, mirror and counts are untouched):
        the array library's first-use costs (CuPy compiles its elementwise kernels with NVRTC,
        cuBLAS starts) are paid here, not in the first packs. Returns the seconds it took."""
        start = time.perf_counter()
        d, dtype = self.stored.n_features, self.stored.dtype
        rows = np.random.default_rng(0).uniform(0.1, 1.0, size=(WARM_ROWS, d)).astype(dtype)
        twin = ArrayCompute(self.spec, d, False, dtype, self.work_bytes, self.xp, self.passes)
        twin.store(rows)
        block = RowBlock.from_rows(rows, np.zeros(WARM_ROWS), d)
        norms = twin.row_norms(block)
        twin.partial_sums(np.ones((WARM_ROWS, 1)), block, norms, np.zeros((1, WARM_ROWS)))
        left, right = np.triu_indices(WARM_ROWS, 1)
        twin.pair_kernels(block, norms, left, right, np.empty(len(left)))
        return time.perf_counter() - start

    def _room_for_rows(self, n):
        """Grow the device copy of the rows and norms (doubling, from GROWTH_ROWS) to hold n rows."""
        capacity = 0 if self._rows is None else self._rows.shape[0]
        if n <= capacity:
            return
        grown = max(n, 2 * capacity, GROWTH_ROWS)
        rows = self.queue.empty((grown, self.stored.n_features), self.stored.dtype)
        norms = self.queue.empty(grown, np.float64)
        if self._on_device:
            self.queue.d2d(rows[:self._on_device], self._rows[:self._on_device])
            self.queue.d2d(norms[:self._on_device], self._norms[:self._on_device])
        self._rows, self._norms = rows, norms

    def _device_work(self, name, shape, dtype):
        """A device work array of ``shape``, kept for the next packs (reallocated when it must grow)."""
        array = self._work_dev.get(name)
        if array is None or array.dtype != dtype or array.shape[1:] != shape[1:] or array.shape[0] < shape[0]:
            array = self._work_dev[name] = self.queue.empty(shape, dtype)
        return array[:shape[0]]

    def _values(self, dots, norms_a, norms_b):
        """Kernel values (a, b) float64 (offset added) from the reductions ``dots`` (a, b) of rows
        with norms (a,) and (b,) (for L1 kernels the reductions are the L1 distances)."""
        xp, spec = self.xp, self.spec
        gamma, coef0 = spec.gamma, spec.coef0
        z = dots.astype(np.float64)
        if spec.name == "rbf":
            z = xp.exp(-gamma * xp.maximum(norms_a[:, None] + norms_b[None, :] - 2.0 * z, 0.0))
        elif spec.name == "laplacian":
            z = xp.exp(-gamma * z)
        elif spec.name == "poly":
            z = (gamma * z + coef0) ** spec.degree
        elif spec.name == "sigmoid":
            z = xp.tanh(gamma * z + coef0)
        elif spec.name != "linear":
            raise PPackError(f"{given('device', 'gpu')}: no array formula for the {spec.name} kernel")
        return z + spec.offset if spec.offset else z

    def _reductions(self, rows, columns):
        """(a, b): rows (a, d) against columns (d, b): dot products (one GEMM), or for L1 kernels the
        L1 distances, a few rows at a time within the work memory."""
        if not self.spec.uses_l1:
            return rows @ columns
        xp = self.xp
        out = xp.empty((rows.shape[0], columns.shape[1]), dtype=np.float64)
        step = max(1, self.work_bytes // (8 * columns.size))
        for a0 in range(0, rows.shape[0], step):
            block = rows[a0:a0 + step, :, None].astype(np.float64) - columns[None, :, :]
            out[a0:a0 + step] = xp.abs(block).sum(axis=1)
        return out

    def after_pack(self, table, ids, fold):
        """Keep the coefficient mirror equal to ``table.coef`` after a pack of keys ``ids`` (r,)
        whose scale folds were ``fold`` (K, 2): mantissa and exponent per column, or (0, 2).
        The fold, the slots and the pack's coefficients go in one copy; two kernels apply them."""
        if self._coef is None:
            return
        if self.passes == "unfused":
            return self._after_pack_unfused(table, ids, fold)
        old = self._coef_rows
        folds = fold.shape[0] > 0 and bool(((fold[:, 0] != 1.0) | (fold[:, 1] != 0.0)).any())
        slots = table.key_slots.lookup(ids)
        slots = np.unique(slots[slots >= 0])  # the pack's rows this rank holds: touched or new
        if table.n > self._coef.shape[0]:
            grown = self.queue.empty((max(table.n, 2 * self._coef.shape[0]), self._coef.shape[1]), np.float64)
            self.queue.d2d(grown[:old], self._coef[:old])
            self._coef = grown
        parts = [np.ascontiguousarray(fold, dtype=np.float64)] if folds and old else []
        if len(slots):
            values = np.ascontiguousarray(table.coef[slots], dtype=np.float64)
            self.sent["coef"] += values.nbytes
            parts += [slots.astype(np.int64), values]
        if parts:  # no empty part goes: a zero-size view of the device buffer is not worth the doubt
            sent = self._uploads["coef"].put(parts)
            if folds and old:  # as table.merge_pack folds the entries it held
                self._formulas.fold_columns(self._coef[:old], sent[0])
            if len(slots):
                self._formulas.set_rows(self._coef, sent[-2], sent[-1])
        self._coef_rows = table.n

    def _after_pack_unfused(self, table, ids, fold):
        xp, old = self.xp, self._coef_rows
        for c in range(fold.shape[0]):
            if fold[c, 0] != 1.0 or fold[c, 1] != 0.0:  # as table.merge_pack folds the entries it held
                exponent = int(min(max(fold[c, 1], -4000.0), 4000.0))
                self._coef[:old, c] = xp.ldexp(self._coef[:old, c] * fold[c, 0], exponent)
        if table.n > self._coef.shape[0]:
            grown = xp.empty((max(table.n, 2 * self._coef.shape[0]), self._coef.shape[1]))
            grown[:old] = self._coef[:old]
            self._coef = grown
        slots = table.key_slots.lookup(ids)
        slots = np.unique(slots[slots >= 0])
        if len(slots):
            values = np.ascontiguousarray(table.coef[slots], dtype=np.float64)
            self.sent["coef"] += values.nbytes
            self._coef[xp.asarray(slots)] = xp.asarray(values)
        self._coef_rows = table.n

    def _coefficients(self, coef, mirrored, kept=None):
        """coef (n, K) on the device: the mirror, when the caller passes the table's coefficients
        (``mirrored``) and the mirror holds them; the copy kept under key ``kept`` (sent on the
        key's first call: the mirror is the table's and must not serve them); else sent whole
        (and mirrored from then on, when ``mirrored``)."""
        n = coef.shape[0]
        if kept is not None and not mirrored:
            if self._kept is None or self._kept[0] is not kept or self._kept[1].shape != coef.shape:
                self.sent["coef"] += 8 * coef.size
                self._kept = (kept, self.queue.to_device(coef, np.float64))
            return self._kept[1]
        if mirrored and self._coef is not None and self._coef_rows == n:
            return self._coef[:n]
        self.sent["coef"] += 8 * coef.size
        whole = self.queue.to_device(coef, np.float64)
        if mirrored:
            self._coef = self.queue.empty((max(n, GROWTH_ROWS), coef.shape[1]), np.float64)
            self.queue.d2d(self._coef[:n], whole)
            self._coef_rows = n
        return whole

    def partial_sums(self, coef, block, block_norms, out, mirrored=False, kept=None, between=None, few=False):
        """``KernelCompute.partial_sums`` on the device (same arguments and result; ``few`` is the
        CPU's); ``mirrored``: coef is the table's, kept on the device by ``after_pack``;
        ``kept``: a key for coef, sent once per key; ``between``: called after each tile is queued."""
        self.launch(coef, block, block_norms, out, mirrored=mirrored, kept=kept, between=between).finish()

    def pair_kernels(self, block, block_norms, left, right, out):
        """``KernelCompute.pair_kernels`` on the device: out[q] = K(row left[q], row right[q]) + offset."""
        if len(left):
            self.launch(None, block, block_norms, None, left, right, out).finish()

    def launch(self, coef, block, block_norms, out, left=None, right=None, pairs_out=None, mirrored=False,
               kept=None, between=None):
        """Queue a pack's partial sums (as ``partial_sums``; coef None: none) and pair kernels
        (left, right (Q,) int64 into pairs_out (Q,), as ``pair_kernels``; None: none) on the
        device; returns the ``PendingSums`` whose ``finish`` waits for them and adds the sums
        to ``out`` and writes the pair kernels."""
        n, r = self.stored.n, block.n_rows
        n_columns = 0
        if coef is not None:
            coef = np.asarray(coef)
            n_columns = 1 if coef.ndim == 1 else coef.shape[1]
            out2 = out[None, :] if out.ndim == 1 else out
            if coef.shape[0] != n or out2.shape != (n_columns, r):
                raise ValueError(f"partial_sums: coef {coef.shape} and out {out.shape} for {n} stored rows and "
                                 f"{r} block rows")
            if n == 0:
                n_columns = 0
        n_pairs = 0 if left is None else len(left)
        if n_columns == 0 and n_pairs == 0:
            return PendingSums(self.queue, None, 0, None, None)
        queue, dtype = self.queue, self.stored.dtype
        columns = np.ascontiguousarray(block.columns(), dtype=dtype)
        norms = np.ascontiguousarray(block_norms, dtype=np.float64)
        parts = [columns, norms]
        self.sent["block"] += columns.nbytes + norms.nbytes
        fresh = slice(self._on_device, n) if n_columns and n > self._on_device else None
        if fresh is not None:
            parts += [self.stored.features[fresh], self.stored.norms[fresh]]
            self.sent["rows"] += parts[2].nbytes + parts[3].nbytes
        index = self._pair_index
        new_index = n_pairs and self.passes == "fused" and not (
            index is not None and np.array_equal(index[0], left) and np.array_equal(index[1], right))
        if new_index:
            parts += [np.ascontiguousarray(left, dtype=np.int64), np.ascontiguousarray(right, dtype=np.int64)]
            self.sent["index"] += parts[-1].nbytes + parts[-2].nbytes
        sent = self._uploads["block"].put(parts)
        columns_d, norms_d = sent[:2]
        if fresh is not None:
            self._room_for_rows(n)
            queue.d2d(self._rows[fresh], sent[2])
            queue.d2d(self._norms[fresh], sent[3])
            self._on_device = n
        if new_index:  # kept apart from the upload's buffer, which the next pack overwrites
            kept_left, kept_right = queue.empty(n_pairs, np.int64), queue.empty(n_pairs, np.int64)
            queue.d2d(kept_left, sent[-2])
            queue.d2d(kept_right, sent[-1])
            self._pair_index = (np.array(left), np.array(right), kept_left, kept_right)
        results = self._download.buffer(n_columns * r + n_pairs)
        if n_columns:
            coefs = self._coefficients(coef.reshape(n, n_columns), mirrored, kept)
            self._sums(coefs, columns_d, norms_d, results[:n_columns * r].reshape(n_columns, r), between)
        if n_pairs:
            self._pairs(columns_d, norms_d, left, right, results[n_columns * r:])
        host = self._download.fetch(n_columns * r + n_pairs)
        self.sent["sums"] += 8 * n_columns * r
        self.sent["pairs"] += 8 * n_pairs
        return PendingSums(queue, host, n_columns, out2 if n_columns else None, pairs_out if n_pairs else None)

    def _sums(self, coefs, columns, norms_b, sums, between):
        """Queue sums (K, r) = the coefficients (n, K) times the kernel values of the n stored
        rows against the block's columns (d, r) with norms (r,), tile by tile."""
        n, r = self.stored.n, columns.shape[1]
        queue, formulas, fused = self.queue, self._formulas, self.passes == "fused"
        tile = min(n, max(1, self.work_bytes // (8 * r * (2 + (columns.shape[0] if self.spec.uses_l1 and not fused
                                                                else 0)))))
        values = self._device_work("values", (tile, r), np.float64)
        dots = self._device_work("dots", (tile, r), self.stored.dtype) if fused and not self.spec.uses_l1 else None
        part = self._device_work("part", sums.shape, np.float64) if n > tile else None
        for a0 in range(0, n, tile):
            a1 = min(n, a0 + tile)
            rows, tile_values = self._rows[a0:a1], values[:a1 - a0]
            if not fused:
                tile_values[...] = self._values(self._reductions(rows, columns), self._norms[a0:a1], norms_b)
            elif self.spec.uses_l1:
                formulas.l1_values(rows, columns, tile_values)
            else:
                queue.gemm(rows, columns, dots[:a1 - a0])
                formulas.values(dots[:a1 - a0], self._norms[a0:a1], norms_b, tile_values)
            if a0 == 0:
                queue.gemm(coefs[a0:a1].T, tile_values, sums)
            else:
                queue.gemm(coefs[a0:a1].T, tile_values, part)
                queue.add(sums, part)
            if between is not None:
                between()

    def _pairs(self, columns, norms, left, right, out):
        """Queue out (Q,) = the kernel values of the block's row pairs (left, right)."""
        if self.passes == "fused":
            self._formulas.pair_values(columns, norms, self._pair_index[2], self._pair_index[3], out)
            return
        lo, hi = int(min(left.min(), right.min())), int(max(left.max(), right.max())) + 1
        rows = columns[:, lo:hi].T
        values = self._values(self._reductions(rows, columns[:, lo:hi]), norms[lo:hi], norms[lo:hi])
        out[...] = values[self.xp.asarray(left - lo), self.xp.asarray(right - lo)]


class PendingSums:
    """A pack's sums and pair kernels queued on the device (``ArrayCompute.launch``): ``finish``
    waits for them (the pack's one sync), adds the (K, r) sums to ``out`` and writes the pair
    kernels to ``pairs_out``; ``waited``: its seconds waiting."""

    def __init__(self, queue, host, n_columns, out, pairs_out):
        self.queue, self.host, self.n_columns, self.out, self.pairs_out = queue, host, n_columns, out, pairs_out
        self.done = host is None
        self.waited = 0.0

    def finish(self):
        if self.done:
            return
        start = time.perf_counter()
        self.queue.sync()
        self.waited = time.perf_counter() - start
        n_sums = 0
        if self.out is not None:
            n_sums = self.out.size
            self.out += self.host[:n_sums].reshape(self.out.shape)
        if self.pairs_out is not None:
            self.pairs_out[:] = self.host[n_sums:n_sums + len(self.pairs_out)]
        self.done = True
