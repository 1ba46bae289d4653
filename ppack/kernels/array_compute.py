"""The kernel trainer's compute seam on an array library's device: the GPU path (CuPy), or
numpy standing in for it in the tests.

``ArrayCompute`` does what ``compute.KernelCompute`` does, with the same arguments, through
an array module ``xp`` with numpy's interface. The rank's stored rows stay where the table
keeps them (``StoredRows``, on the host: the table update, checkpoints and model files read
them there); the device holds a copy of the rows and their norms, which grows by doubling
and receives only the rows stored since the last pack (at most r a pack). It also mirrors
the table's coefficients: after each pack (``after_pack``) it applies the pack's scale folds
itself, with the operations the table used (so the copy stays bit-identical), and receives
the coefficients of the pack's rows this rank holds (at most r x K). Per pack, then, the
new rows, the block's columns and norms and those coefficients go to the device and the
(K, r) sums come back. The dot products are one GEMM per tile of stored rows in the rows'
dtype (float32 products in float32); the kernel formula and the coefficient products
follow in float64, so the sums agree with the CPU kernels within the float32 bound
(``cpu.gemm_partial_sums``), or to float64 rounding. Dense rows only.
"""
import importlib
import time
from collections import Counter

import numpy as np

from ..errors import PPackError, given
from .block import RowBlock
from .compute import DEFAULT_WORK_BYTES, KernelCompute

GROWTH_ROWS = 1024  # the device copy's first capacity, in rows
WARM_ROWS = 4  # rows of the warm-up's tiny block


class ArrayCompute(KernelCompute):
    """``KernelCompute`` on the device of array module ``xp``; ``sent`` counts the bytes each
    kind of transfer moved ("rows", "block", "coef" to the device; "sums", "pairs" back)."""

    on_device = True

    def __init__(self, spec, n_features, sparse, dtype=np.float64, work_bytes=DEFAULT_WORK_BYTES, xp=np):
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
        self._block = None  # (block, norms, their device copies) partial_sums sent, for pair_kernels
        self._kept = None  # (key, coefficients on the device): others than the table's, sent once per key

    @classmethod
    def beside(cls, compute, xp):
        """An ArrayCompute sharing ``compute``'s stored rows (a KernelCompute's, already holding rows)."""
        device = cls(compute.spec, compute.stored.n_features, compute.stored.sparse, compute.stored.dtype,
                     compute.work_bytes, xp)
        device.stored = compute.stored
        return device

    def host(self):
        """A KernelCompute of the CPU sharing these stored rows (what a model keeps after training)."""
        compute = KernelCompute(self.spec, self.stored.n_features, self.stored.sparse, self.stored.dtype,
                                self.work_bytes)
        compute.stored = self.stored
        return compute

    def __getstate__(self):  # no device arrays; the array module (which does not pickle) by its name
        return {**super().__getstate__(), "xp": self.xp.__name__, "_rows": None, "_norms": None, "_on_device": 0, "_coef": None,
                "_coef_rows": 0, "_block": None, "_kept": None}

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
        twin = ArrayCompute(self.spec, d, False, dtype, self.work_bytes, self.xp)
        twin.store(rows)
        block = RowBlock.from_rows(rows, np.zeros(WARM_ROWS), d)
        norms = twin.row_norms(block)
        twin.partial_sums(np.ones((WARM_ROWS, 1)), block, norms, np.zeros((1, WARM_ROWS)))
        left, right = np.triu_indices(WARM_ROWS, 1)
        twin.pair_kernels(block, norms, left, right, np.empty(len(left)))
        return time.perf_counter() - start

    def _to_device(self, kind, array, dtype=None):
        array = np.ascontiguousarray(array, dtype=dtype)
        self.sent[kind] += array.nbytes
        return self.xp.asarray(array)

    def _sync_rows(self):
        """Bring the device copy up to the stored rows: copy the rows stored since the last call,
        growing the copy (doubling, from GROWTH_ROWS) when they do not fit."""
        n, xp = self.stored.n, self.xp
        capacity = 0 if self._rows is None else self._rows.shape[0]
        if n > capacity:
            grown = max(n, 2 * capacity, GROWTH_ROWS)
            rows = xp.empty((grown, self.stored.n_features), dtype=self.stored.dtype)
            norms = xp.empty(grown, dtype=np.float64)
            if self._on_device:
                rows[:self._on_device] = self._rows[:self._on_device]
                norms[:self._on_device] = self._norms[:self._on_device]
            self._rows, self._norms = rows, norms
        if n > self._on_device:
            fresh = slice(self._on_device, n)
            self._rows[fresh] = self._to_device("rows", self.stored.features[fresh])
            self._norms[fresh] = self._to_device("rows", self.stored.norms[fresh])
            self._on_device = n

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
        whose scale folds were ``fold`` (K, 2): mantissa and exponent per column, or (0, 2)."""
        if self._coef is None:
            return
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
        slots = np.unique(slots[slots >= 0])  # the pack's rows this rank holds: touched or new
        if len(slots):
            self._coef[xp.asarray(slots)] = self._to_device("coef", table.coef[slots])
        self._coef_rows = table.n

    def _coefficients(self, coef, mirrored, kept=None):
        """coef (n, K) on the device: the mirror, when the caller passes the table's coefficients
        (``mirrored``) and the mirror holds them; the copy kept under key ``kept`` (sent on the
        key's first call: the mirror is the table's and must not serve them); else sent whole
        (and mirrored from then on, when ``mirrored``)."""
        n = coef.shape[0]
        if kept is not None and not mirrored:
            if self._kept is None or self._kept[0] is not kept or self._kept[1].shape != coef.shape:
                self._kept = (kept, self._to_device("coef", coef, np.float64))
            return self._kept[1]
        if mirrored and self._coef is not None and self._coef_rows == n:
            return self._coef[:n]
        whole = self._to_device("coef", coef, np.float64)
        if mirrored:
            self._coef = self.xp.empty((max(n, GROWTH_ROWS), coef.shape[1]))
            self._coef[:n] = whole
            self._coef_rows = n
        return whole

    def partial_sums(self, coef, block, block_norms, out, mirrored=False, kept=None, between=None):
        """``KernelCompute.partial_sums`` on the device (same arguments and result); ``mirrored``:
        coef is the table's, kept on the device by ``after_pack``; ``kept``: a key for coef, sent
        once per key; ``between``: called after each tile is queued."""
        coef = np.asarray(coef)
        n, r = self.stored.n, block.n_rows
        n_columns = 1 if coef.ndim == 1 else coef.shape[1]
        out2 = out[None, :] if out.ndim == 1 else out
        if coef.shape[0] != n or out2.shape != (n_columns, r):
            raise ValueError(f"partial_sums: coef {coef.shape} and out {out.shape} for {n} stored rows and {r} "
                             "block rows")
        if n == 0 or n_columns == 0:
            return
        self._sync_rows()
        columns, norms_b = self._block_on_device(block, block_norms)
        self._block = (block, block_norms, columns, norms_b)  # for this pack's pair kernels
        coefs = self._coefficients(coef.reshape(n, n_columns), mirrored, kept)
        tile = max(1, self.work_bytes // (8 * r * (2 + (block.n_features if self.spec.uses_l1 else 0))))
        sums = self.xp.zeros((n_columns, r))
        for a0 in range(0, n, tile):
            a1 = min(n, a0 + tile)
            values = self._values(self._reductions(self._rows[a0:a1], columns), self._norms[a0:a1], norms_b)
            sums += coefs[a0:a1].T @ values
            if between is not None:
                between()
        result = self._to_host(sums)
        self.sent["sums"] += result.nbytes
        out2 += result

    def pair_kernels(self, block, block_norms, left, right, out):
        """``KernelCompute.pair_kernels`` on the device: out[q] = K(row left[q], row right[q]) + offset."""
        if len(left) == 0:
            return
        kept, self._block = self._block, None  # the block partial_sums sent, if it is this one
        if kept is not None and kept[0] is block and kept[1] is block_norms:
            columns, norms = kept[2:]
        else:
            columns, norms = self._block_on_device(block, block_norms)
        lo, hi = int(min(left.min(), right.min())), int(max(left.max(), right.max())) + 1
        rows = columns[:, lo:hi].T
        values = self._values(self._reductions(rows, columns[:, lo:hi]), norms[lo:hi], norms[lo:hi])
        picked = values[self.xp.asarray(left - lo), self.xp.asarray(right - lo)]
        result = self._to_host(picked)
        self.sent["pairs"] += result.nbytes
        out[:] = result

    def _block_on_device(self, block, block_norms):
        """The block's columns (d, r) and norms (r,) sent to the device."""
        return (self._to_device("block", block.columns(), self.stored.dtype),
                self._to_device("block", block_norms, np.float64))

    def _to_host(self, array):
        return array.get() if hasattr(array, "get") else np.asarray(array)
