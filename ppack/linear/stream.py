"""StreamSVM: dual coordinate descent on a bounded cache of rows fed by a reader thread.

Matsushima, Vishwanathan and Smola, "Linear Support Vector Machines via Dual Cached
Loops" (KDD 2012), Algorithms 1 and 2. A reader thread streams the block's rows, pass
after pass, into a cache of at most Omega rows; when the cache is full it replaces a
random cached row. The trainer (the calling thread) picks random cached rows and does
exact dual coordinate updates on them, evicting rows that look uninformative under the
paper's adaptive epsilon rule. The shared state (the active set and its slots) is only
touched under one lock, which the trainer takes once per batch of steps and the reader
once per chunk; the reader's I/O runs outside it. Both stop when the projected-gradient
gap M+ - M- over the updates of one reader pass falls to tol, or after max_epochs
passes or max_updates updates.

Dual variables are kept for every row of the block (n floats plus one cached flag byte
per row); the rows themselves are only ever held in the cache and in the reader's
current chunk, so solve_file works on files much larger than the cache.

Departures from the paper's pseudo-code, each for a stated reason:

- epsilon is the largest |projected gradient| of the last n steps (equation 9); the
  pseudo-code's epsilon_new tracks |gradient| and is never reset, which contradicts (9).
- The reader skips a row that is still cached (A := A u {i} is a set union), so a row
  never occupies two slots.
- The two threads keep a fixed pace of updates_per_row (kappa, default 8) trainer steps
  per row read in the pass: the trainer pauses once it has made kappa steps per row
  read so far, and the reader inserts a chunk (and ends a pass) only once the trainer
  has caught up. The paper's convergence sketch assumes the trainer makes at most
  kappa updates per row read; its disk reader was slow, while an in-memory source is
  fast enough to replace rows before the trainer sees them. Too many steps per row
  over-solve each chunk: on ijcnn1 (C = 1, 10% cache, in memory) kappa = 4, 8, 16
  reached tol 0.1 in 26, 24, 23 passes, while kappa = 64 was still 1.5% above the
  optimal objective after 40. updates_per_row=0 lets both threads run free, as in the
  paper's implementation. With kappa > 0 the threads take turns at fixed points, so a
  run is reproducible for a given seed.
- L2 loss is the same update with U = inf and D_ii = 1/(2C) (LIBLINEAR's dual), and a
  bias is an extra constant feature 1 whose weight is regularised (liblinear -B 1).
- Row weights c_i (LIBLINEAR's -wi) give each dual its own U_i = C c_i (l1) or
  D_ii = 1/(2 C c_i) (l2); a cached row of weight 0 (U_i = 0) is evicted when drawn.

Rows are read through a COFFIN feature map (features.py): the trainer's dot, add and the
squared norms compute phi(x) on demand from a slot's stored row, and w has ``n_out(d)``
entries plus b. With ``shifts`` each image yields V virtual rows (virtual row id = row *
V + shift id), each with its own dual variable: the reader inserts the V virtual rows of
every row it reads, a slot holds one virtual row (a copy of the original row), and the
cached flags and "rows read" count virtual rows.
"""

import math
import threading
import time

import numpy as np
import scipy.sparse as sp

from ..data.hdf5 import read_header, read_rows
from ..errors import InputError, PPackError
from ..jit import njit
from ..random_stream import below_by_remainder
from .checks import check_alpha0, check_common, check_options, check_start, check_weights, open_block
from .features import IDENTITY, MappedRows, _add, _dot, _sqnorm, as_feature_map
from .problem import LinearSolution, dual_bounds, dual_box, weights_from_dual

BETA = 0.9  # epsilon shrink factor while the cache is nearly full
FULL_FRACTION = 0.9  # "the RAM is deemed full" above this fraction of Omega
EPSILON0 = 9.0  # the paper's initial epsilon
DEFAULT_CACHE_BYTES = 256 << 20
DEFAULT_BATCH = 4096  # trainer steps per lock acquisition
DEFAULT_UPDATES_PER_ROW = 8.0  # kappa: trainer steps per row read (see the module notes)
_WAIT_S = 0.05  # condition waits wake up this often to re-check the stop flag

# Rows of slot_int (int64, (3, Omega)) and slot_f (float64, (2, Omega)).
ROW, NNZ, POS = 0, 1, 2
Y, QD = 0, 1
# Entries of ctr (int64).
N_ACT, N_FREE, T_OUTER, UPDATES, PASS_UPDATES = 0, 1, 2, 3, 4
EVICT_TRAINER, EVICT_READER, ROWS_READ, ROWS_SKIPPED = 5, 6, 7, 8
PEAK_ROWS, CUR_BYTES, PEAK_BYTES = 9, 10, 11
N_CTR = 12
# Entries of fstate (float64).
EPS, EPS_NEW, M_PLUS, M_MINUS = 0, 1, 2, 3



# ------------------------------------------------------------------ numba cores


@njit(cache=True, nogil=True)
def _evict(s, slot_int, act, free, in_cache, ctr, entry_bytes, meta_bytes):
    """Take slot s out of the active set (swap with the last) and onto the free stack."""
    p = slot_int[POS, s]
    last = act[ctr[N_ACT] - 1]
    act[p] = last
    slot_int[POS, last] = p
    ctr[N_ACT] -= 1
    slot_int[POS, s] = -1
    free[ctr[N_FREE]] = s
    ctr[N_FREE] += 1
    in_cache[slot_int[ROW, s]] = 0
    ctr[CUR_BYTES] -= slot_int[NNZ, s] * entry_bytes + meta_bytes


# The map's reads of a slot are calls: row views inside _train_batch's loop slow down its
# identity path measurably, calls do not.


@njit(cache=True, nogil=True)
def _slot_row(vals, cols, dense_cols, s, k):
    """(indices, values) of the row stored in slot s, k entries."""
    if cols.shape[1] == 0:
        return dense_cols, vals[s, :k]
    return cols[s, :k], vals[s, :k]


@njit(cache=True, nogil=True)
def _slot_dot(kind, params, vals, cols, dense_cols, s, k, w, shift):
    """w . phi(x) for the row stored in slot s."""
    idx, val = _slot_row(vals, cols, dense_cols, s, k)
    return _dot(kind, params, idx, val, w, shift)


@njit(cache=True, nogil=True)
def _slot_add(kind, params, vals, cols, dense_cols, s, k, w, scale, shift):
    """w += scale * phi(x) for the row stored in slot s."""
    idx, val = _slot_row(vals, cols, dense_cols, s, k)
    _add(kind, params, idx, val, w, scale, shift)


@njit(cache=True, nogil=True)
def _slot_sqnorm(kind, params, vals, cols, dense_cols, s, k, shift):
    """||phi(x)||^2 for the row stored in slot s."""
    idx, val = _slot_row(vals, cols, dense_cols, s, k)
    return _sqnorm(kind, params, idx, val, shift)


@njit(cache=True, nogil=True)
def _insert_rows(data, indices, indptr, block, ys, first, bias, kind, params, n_virtual,
                 vals, cols, dense_cols, slot_int, slot_f, act, free, in_cache, ctr, rng, meta_bytes):
    """Algorithm 1's inner loop over rows first .. first + len(ys) - 1 of the block.

    The chunk is CSR (data, indices, indptr) when cols has columns, else the dense
    (rows, d) array block; dense_cols (0 .. width - 1) indexes a dense slot for the map.
    Each row yields its n_virtual virtual rows, one slot each. A virtual row still
    cached is skipped; when the cache is full a random cached one is replaced.
    """
    omega = act.shape[0]
    dense = cols.shape[1] == 0
    entry_bytes = 8 if dense else 12
    for r in range(ys.shape[0]):
        for shift in range(n_virtual):
            i = (first + r) * n_virtual + shift
            ctr[ROWS_READ] += 1
            if in_cache[i]:
                ctr[ROWS_SKIPPED] += 1
                continue
            if ctr[N_ACT] == omega:
                _evict(act[below_by_remainder(rng, omega)], slot_int, act, free, in_cache, ctr,
                       entry_bytes, meta_bytes)
                ctr[EVICT_READER] += 1
            ctr[N_FREE] -= 1
            s = free[ctr[N_FREE]]
            q = bias * bias
            if dense:
                k = vals.shape[1]
                for j in range(k):
                    v = block[r, j]
                    vals[s, j] = v
                    q += v * v
            else:
                k = 0
                for p in range(indptr[r], indptr[r + 1]):
                    v = data[p]
                    vals[s, k] = v
                    cols[s, k] = indices[p]
                    q += v * v
                    k += 1
            if kind != IDENTITY:
                q = _slot_sqnorm(kind, params, vals, cols, dense_cols, s, k, shift) + bias * bias
            slot_int[ROW, s] = i
            slot_int[NNZ, s] = k
            slot_f[Y, s] = ys[r]
            slot_f[QD, s] = q
            slot_int[POS, s] = ctr[N_ACT]
            act[ctr[N_ACT]] = s
            ctr[N_ACT] += 1
            in_cache[i] = 1
            ctr[CUR_BYTES] += k * entry_bytes + meta_bytes
            ctr[PEAK_ROWS] = max(ctr[PEAK_ROWS], ctr[N_ACT])
            ctr[PEAK_BYTES] = max(ctr[PEAK_BYTES], ctr[CUR_BYTES])


@njit(cache=True, nogil=True)
def _train_batch(vals, cols, dense_cols, slot_int, slot_f, act, free, in_cache, alpha, w, bias,
                 kind, params, n_virtual, upper, diag, n_outer, n_steps, fstate, ctr, rng, meta_bytes,
                 uppers, diags):
    """Up to n_steps of Algorithm 2 on the cached rows; stops early if the cache empties.

    w (n_out + 1,) holds the weights with b last; a slot's (virtual) row is read through
    the map (kind, params) with shift id row % n_virtual. upper is C (l1) or inf (l2),
    diag is 0 (l1) or 1/(2C) (l2). A step that evicts its row counts as a step with
    projected gradient 0, as in the paper's loop. uppers, diags (n_dual,): each dual's U and
    D under row weights, or empty (upper and diag for all). Returns the number of steps made.
    """
    weighted = uppers.shape[0] > 0
    omega = act.shape[0]
    dense = cols.shape[1] == 0
    entry_bytes = 8 if dense else 12
    d = w.shape[0] - 1
    done = 0
    while done < n_steps and ctr[N_ACT] > 0:
        if ctr[N_ACT] > FULL_FRACTION * omega:
            fstate[EPS] *= BETA
        s = act[below_by_remainder(rng, ctr[N_ACT])]
        i = slot_int[ROW, s]
        yi = slot_f[Y, s]
        k = slot_int[NNZ, s]
        dot = bias * w[d]
        if kind != IDENTITY:
            dot += _slot_dot(kind, params, vals, cols, dense_cols, s, k, w, i % n_virtual)
        elif dense:
            for j in range(k):
                dot += vals[s, j] * w[j]
        else:
            for j in range(k):
                dot += vals[s, j] * w[cols[s, j]]
        a = alpha[i]
        u, dg = upper, diag
        if weighted:
            u, dg = uppers[i], diags[i]
        g = yi * dot - 1.0 + dg * a
        eps = fstate[EPS]
        if (a == 0.0 and g > eps) or (a == u and g < -eps) or u == 0.0:
            _evict(s, slot_int, act, free, in_cache, ctr, entry_bytes, meta_bytes)
            ctr[EVICT_TRAINER] += 1
            pg = 0.0
        else:
            if a == 0.0:
                pg = min(g, 0.0)
            elif a == u:
                pg = max(g, 0.0)
            else:
                pg = g
            fstate[EPS_NEW] = max(fstate[EPS_NEW], abs(pg))
            if pg != 0.0:
                qbar = slot_f[QD, s] + dg
                if qbar > 0.0:
                    new = min(max(a - g / qbar, 0.0), u)
                else:  # a zero row without bias under l1: D is linear in alpha_i
                    new = u if g < 0.0 else 0.0
                step = (new - a) * yi
                alpha[i] = new
                if kind != IDENTITY:
                    _slot_add(kind, params, vals, cols, dense_cols, s, k, w, step, i % n_virtual)
                elif dense:
                    for j in range(k):
                        w[j] += step * vals[s, j]
                else:
                    for j in range(k):
                        w[cols[s, j]] += step * vals[s, j]
                w[d] += step * bias
        fstate[M_PLUS] = max(fstate[M_PLUS], pg)
        fstate[M_MINUS] = min(fstate[M_MINUS], pg)
        ctr[UPDATES] += 1
        ctr[PASS_UPDATES] += 1
        ctr[T_OUTER] += 1
        if ctr[T_OUTER] >= n_outer:
            fstate[EPS] = fstate[EPS_NEW]
            fstate[EPS_NEW] = 0.0
            ctr[T_OUTER] = 0
        done += 1
    return done


# ------------------------------------------------------------------ cache


class _Cache:
    """Omega fixed-width slots: one (virtual) row each, plus the active set and the free stack.

    vals (Omega, width) float64; cols (Omega, width) int32 for CSR rows, (Omega, 0)
    for dense rows, whose columns are dense_cols (width,) = 0 .. width - 1; slot_int
    (3, Omega): (virtual) row, nnz, position in act; slot_f (2, Omega): y,
    phi(x).phi(x) (+1 with a bias); act (Omega,): active slots first; free (Omega,): a
    stack; in_cache: a flag per (virtual) row of the block.
    """

    META_BYTES = 3 * 8 + 2 * 8 + 8 + 8  # slot_int, slot_f, act, free entries

    @staticmethod
    def slot_bytes(width, dense):
        return width * (8 if dense else 12) + _Cache.META_BYTES

    def __init__(self, omega, width, dense, n):
        self.omega = omega
        self.vals = np.zeros((omega, width))
        self.cols = np.zeros((omega, 0 if dense else width), dtype=np.int32)
        self.dense_cols = np.arange(width if dense else 0, dtype=np.int32)
        self.slot_int = np.full((3, omega), -1, dtype=np.int64)
        self.slot_f = np.zeros((2, omega))
        self.act = np.zeros(omega, dtype=np.int64)
        self.free = np.arange(omega - 1, -1, -1, dtype=np.int64)  # slot 0 popped first
        self.in_cache = np.zeros(n, dtype=np.uint8)
        self.ctr = np.zeros(N_CTR, dtype=np.int64)
        self.ctr[N_FREE] = omega

    @property
    def nbytes(self):
        return sum(a.nbytes for a in (self.vals, self.cols, self.slot_int, self.slot_f,
                                      self.act, self.free))


# ------------------------------------------------------------------ sources


class _ArraySource:
    """Chunks of an in-memory block: canonical CSR or C-contiguous dense, float64."""

    def __init__(self, X, y):
        self.X, self.y = X, y
        self.n, self.d = X.shape
        self.dense = not sp.issparse(X)
        self.width = self.d if self.dense else max(1, int(np.diff(X.indptr).max()))

    def read(self, start, stop):
        y = self.y[start:stop]
        if self.dense:
            return None, None, None, self.X[start:stop], y
        lo, hi = self.X.indptr[start], self.X.indptr[stop]
        indptr = self.X.indptr[start:stop + 1].astype(np.int64) - lo
        return self.X.data[lo:hi], self.X.indices[lo:hi], indptr, None, y


class _FileSource:
    """Chunks of rows [first, first + n) of a ppack HDF5 file, read with read_rows."""

    def __init__(self, path, row_range):
        self.path = path
        header = read_header(path, check_indices=False)
        first, stop = _check_row_range(row_range, header.n_samples)
        self.first, self.n, self.d = first, stop - first, header.n_features
        self.dense = header.storage == "dense"
        self.width = max(header.max_row_nnz, 1) if not self.dense else self.d

    def read(self, start, stop):
        X, y = read_rows(self.path, self.first + start, self.first + stop, dtype=np.float64)
        bad = (y != 1.0) & (y != -1.0)
        if bad.any():
            r = self.first + start + int(np.argmax(bad))
            raise InputError(f"labels must be -1 or +1 for the stream solver, "
                             f"row {r} has {float(y[r - self.first - start])}", path=self.path)
        if self.dense:
            return None, None, None, X, y
        return X.data, X.indices, X.indptr, None, y


# ------------------------------------------------------------------ the two threads


class _Run:
    """Shared state of one solve: the cache, alpha and w, the lock and the stop flag."""

    def __init__(self, source, fmap, C, loss, bias, tol, max_epochs, seed, w, alpha, omega,
                 chunk_rows, batch_updates, max_updates, updates_per_row, weights=None):
        self.source = source
        self.n = source.n
        self.kind, self.params, self.n_virtual = fmap.kind, fmap.params(source.d), fmap.n_virtual
        self.n_dual = self.n * self.n_virtual
        self.tol, self.max_epochs = tol, max_epochs
        self.upper, self.diag = dual_box(C, loss)
        self.uppers = self.diags = np.empty(0)
        if weights is not None:
            self.uppers, self.diags = dual_bounds(C, loss, weights, self.n_virtual)
        self.bias = 1.0 if bias else 0.0
        self.w, self.alpha = w, alpha
        self.cache = _Cache(omega, source.width, source.dense, self.n_dual)
        self.chunk_rows, self.batch_updates = chunk_rows, batch_updates
        self.max_updates, self.updates_per_row = max_updates, updates_per_row
        reader_state, trainer_state = np.random.SeedSequence(seed).generate_state(2, np.uint64)
        self.reader_rng = np.array([reader_state], dtype=np.uint64)
        self.trainer_rng = np.array([trainer_state], dtype=np.uint64)
        self.fstate = np.array([EPSILON0, 0.0, -math.inf, math.inf])
        self.cond = threading.Condition(threading.Lock())
        self.stop = False
        self.stop_reason = None
        self.error = None
        self.passes = 0
        self.pass_rows = 0  # (virtual) rows of the current pass handed to the cache
        self.gaps = []
        self._empty = np.empty(0)
        self._empty_i = np.empty(0, dtype=np.int32)
        self._empty_p = np.zeros(1, dtype=np.int64)
        self._empty_2d = np.empty((0, 0))

    def _halt(self, reason):
        """Set the stop flag (the first reason wins); call with the lock held."""
        if not self.stop:
            self.stop, self.stop_reason = True, reason
        self.cond.notify_all()

    # -------------------------------------------------------------- reader

    def _wait_for_trainer(self):
        """Block until the trainer has made kappa steps per row of the pass so far, the
        cache is empty (the trainer cannot step) or the run stops; lock held."""
        c = self.cache
        while (not self.stop and c.ctr[N_ACT] > 0
               and c.ctr[PASS_UPDATES] < self.updates_per_row * self.pass_rows):
            self.cond.wait(_WAIT_S)

    def reader(self):
        """Algorithm 1: pass after pass over the block, chunk by chunk."""
        c = self.cache
        try:
            for k in range(1, self.max_epochs + 1):
                for start in range(0, self.n, self.chunk_rows):
                    if self.stop:
                        return
                    stop = min(start + self.chunk_rows, self.n)
                    # Read while the trainer works through the previous chunk.
                    data, indices, indptr, block, ys = self.source.read(start, stop)
                    if block is None:  # one numba specialisation for every source
                        block = self._empty_2d
                        indices = indices.astype(np.int32, copy=False)
                        indptr = indptr.astype(np.int64, copy=False)
                    else:
                        data, indices, indptr = self._empty, self._empty_i, self._empty_p
                    with self.cond:
                        self._wait_for_trainer()
                        if self.stop:
                            return
                        _insert_rows(data, indices, indptr, block, ys, start, self.bias, self.kind,
                                     self.params, self.n_virtual, c.vals, c.cols, c.dense_cols,
                                     c.slot_int, c.slot_f, c.act, c.free, c.in_cache, c.ctr,
                                     self.reader_rng, c.META_BYTES)
                        self.pass_rows = stop * self.n_virtual
                        self.cond.notify_all()
                with self.cond:
                    self._wait_for_trainer()
                    if self.stop:
                        return
                    self._end_pass(k)
        except BaseException as e:  # handed to the caller by solve
            with self.cond:
                self.error = e
                self._halt("error")

    def _end_pass(self, k):
        """The stopping test (10) over the steps of the pass just read; lock held."""
        f, c = self.fstate, self.cache
        gap = f[M_PLUS] - f[M_MINUS] if c.ctr[PASS_UPDATES] > 0 else math.inf
        self.passes = k
        self.gaps.append(float(gap))
        f[M_PLUS], f[M_MINUS] = -math.inf, math.inf
        c.ctr[PASS_UPDATES] = 0
        self.pass_rows = 0
        if gap <= self.tol:
            self._halt("tol")
        elif k == self.max_epochs:
            self._halt("max_epochs")

    # -------------------------------------------------------------- trainer

    def _quota(self):
        """Steps the trainer may make before the reader hands it more rows."""
        if self.updates_per_row == 0:
            return self.batch_updates
        allowed = math.ceil(self.updates_per_row * self.pass_rows)
        return min(self.batch_updates, allowed - int(self.cache.ctr[PASS_UPDATES]))

    def trainer(self):
        """Algorithm 2 in batches of at most batch_updates steps per lock acquisition."""
        c = self.cache
        while True:
            with self.cond:
                while not self.stop and (c.ctr[N_ACT] == 0 or self._quota() <= 0):
                    self.cond.wait(_WAIT_S)  # Algorithm 2's "while |A| = 0 do sleep"
                if self.stop:
                    return
                steps = self._quota()
                if self.max_updates is not None:
                    steps = min(steps, self.max_updates - int(c.ctr[UPDATES]))
                _train_batch(c.vals, c.cols, c.dense_cols, c.slot_int, c.slot_f, c.act, c.free,
                             c.in_cache, self.alpha, self.w, self.bias, self.kind, self.params,
                             self.n_virtual, self.upper, self.diag, self.n_dual, steps, self.fstate,
                             c.ctr, self.trainer_rng, c.META_BYTES, self.uppers, self.diags)
                if self.max_updates is not None and c.ctr[UPDATES] >= self.max_updates:
                    self._halt("max_updates")
                self.cond.notify_all()
            # Let a reader waiting for the lock in before the next batch takes it again.
            time.sleep(0)

    def run(self):
        """Start the reader thread, train in this thread, join; re-raise a reader error."""
        thread = threading.Thread(target=self.reader, name="ppack-stream-reader", daemon=True)
        thread.start()
        try:
            self.trainer()
        finally:
            with self.cond:
                self._halt("error")  # no-op when already stopped
            while thread.is_alive():
                thread.join(_WAIT_S)
        if self.error is not None:
            raise self.error

    def info(self, seconds):
        c = self.cache
        ctr = {name: int(c.ctr[i]) for name, i in (
            ("updates", UPDATES), ("evicted_by_trainer", EVICT_TRAINER),
            ("evicted_by_reader", EVICT_READER), ("rows_read", ROWS_READ),
            ("rows_skipped_cached", ROWS_SKIPPED), ("peak_cache_rows", PEAK_ROWS),
            ("peak_cache_bytes", PEAK_BYTES), ("final_cache_rows", N_ACT))}
        return dict(
            passes=self.passes, stop=self.stop_reason,
            gap=self.gaps[-1] if self.gaps else math.inf, gap_history=self.gaps,
            epsilon=float(self.fstate[EPS]), cache_rows=c.omega,
            cache_slot_bytes=_Cache.slot_bytes(self.source.width, self.source.dense),
            cache_bytes_allocated=c.nbytes, row_state_bytes=self.alpha.nbytes + c.in_cache.nbytes,
            chunk_rows=self.chunk_rows, batch_updates=self.batch_updates, time_s=seconds,
            **ctr)


# ------------------------------------------------------------------ validation


def _check_row_range(row_range, n_samples):
    """(start, stop) of the rows to read, default all n_samples."""
    if row_range is None:
        return 0, n_samples
    try:
        start, stop = row_range
        ok = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (start, stop)) \
            and 0 <= start < stop <= n_samples
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise PPackError(f"row_range: must be a pair (start, stop) with 0 <= start < stop <= {n_samples} "
                         f"(n_samples), got {row_range!r}")
    return int(start), int(stop)


def _cache_rows(cache_rows, cache_bytes, n, width, dense):
    """Omega: the most (virtual) rows both bounds allow, at most n."""
    slot = _Cache.slot_bytes(width, dense)
    if cache_bytes is not None and cache_bytes < slot:
        raise PPackError(f"cache_bytes: must be an integer >= {slot} (one cache slot) or None, got {cache_bytes!r}")
    if cache_bytes is None and cache_rows is None:
        cache_bytes = DEFAULT_CACHE_BYTES
    omega = n
    if cache_rows is not None:
        omega = min(omega, cache_rows)
    if cache_bytes is not None:
        omega = min(omega, cache_bytes // slot)
    return max(omega, 1)


def _solve_source(source, fmap, C, loss, bias, w0, b0, alpha0, opts, rebuild=None, weights=None):
    """Check the warm start against the source's shape, run, and collect the solution.

    rebuild: the in-memory block (X, y), from which w = sum_r alpha0_r y_r phi~(x_r) is
    computed when alpha0 comes without w0. weights (source rows,) or None: row weights.
    """
    d, n_virtual = source.d, fmap.n_virtual
    n_out, n_dual = fmap.n_out(d), source.n * n_virtual
    w0, b0 = check_start(w0, b0, bias, n_out)
    weights = check_weights(weights, source.n)
    bound = dual_box(C, loss)[0] if weights is None else dual_bounds(C, loss, weights, n_virtual)[0]
    alpha = check_alpha0(alpha0, n_dual, bound)
    w = np.zeros(n_out + 1)
    if w0 is not None:
        w[:n_out] = w0
    w[n_out] = b0
    if alpha is None:
        alpha = np.zeros(n_dual)
    elif w0 is None:
        X, y = rebuild
        if fmap.kind == IDENTITY:
            w[:d], w[d] = weights_from_dual(X, y, alpha, bias)
        else:
            coef = alpha * np.repeat(y, n_virtual)
            w[:n_out] = MappedRows(X, fmap).rmatvec(coef)
            w[n_out] = coef.sum() if bias else 0.0
    omega = _cache_rows(opts["cache_rows"], opts["cache_bytes"], n_dual, source.width, source.dense)
    chunk_rows = opts["chunk_rows"]
    if chunk_rows is None:  # a chunk adds at most a quarter of the cache for Omega >= 1024
        chunk_rows = max(1, max(256, min(4096, omega // 4)) // n_virtual)
    chunk_rows = min(chunk_rows, source.n)
    run = _Run(source, fmap, C, loss, bias, opts["tol"], opts["max_epochs"], opts["seed"], w, alpha, omega,
               chunk_rows, opts["batch_updates"], opts["max_updates"], opts["updates_per_row"], weights)
    t0 = time.perf_counter()
    run.run()
    info = run.info(time.perf_counter() - t0)
    info.update(feature_map=fmap.name, n_dual=n_dual)
    b = float(w[n_out]) if bias else 0.0
    return LinearSolution(w[:n_out].copy(), b, alpha, run.passes, info)


# ------------------------------------------------------------------ public


def solve(X, y, C, *, loss="l1", bias=True, tol=1e-3, max_epochs=100, seed=0, w0=None,
          b0=0.0, alpha0=None, feature_map=None, cache_rows=None, cache_bytes=None, chunk_rows=None,
          batch_updates=DEFAULT_BATCH, max_updates=None,
          updates_per_row=DEFAULT_UPDATES_PER_ROW, weights=None, **options):
    """StreamSVM on an in-memory block: X (n rows by d features, CSR or dense), y (n,) +-1.

    weights (n,) >= 0 or None: each row's loss weight (U_i = C weights_i, or D_ii =
    1/(2 C weights_i) for l2).

    The reader streams X's rows into a cache of at most Omega rows: Omega is the most
    that cache_rows and cache_bytes (counted over the slot arrays, see info) allow; with
    neither given, cache_bytes is 256 MiB. tol: stop when M+ - M- over one pass is at
    most tol. max_epochs: most reader passes. max_updates: most trainer steps (None:
    no limit). chunk_rows: rows the reader takes per read (default Omega/4 within
    [256, 4096], divided by V under shifts). batch_updates: most trainer steps per lock
    acquisition. updates_per_row: trainer steps per (virtual) row read that the two
    threads keep pace at (0: both run free; see the module notes). Any other keyword is
    an error that lists the options.

    feature_map: a FeatureMap or its name (None: the identity), applied on demand; with
    V virtual rows per row (shifts) there are n * V duals and the cache bounds count
    virtual rows. A warm start (w0 (n_out,), b0, alpha0 (n * V,)) is used as given: w0
    may hold other blocks' contributions, and the updates are applied to it
    incrementally. alpha0 without w0 starts from w = sum_r alpha0_r y_r phi(x_r).
    Returns a LinearSolution; info reports the passes, updates, gaps, evictions and the
    peak cached rows and bytes.
    """
    X, y, C, loss, bias, opts, fmap, w0, b0, weights = open_block(
        "stream", X, y, C, loss, bias,
        dict(tol=tol, max_epochs=max_epochs, seed=seed, cache_rows=cache_rows, cache_bytes=cache_bytes,
             chunk_rows=chunk_rows, batch_updates=batch_updates, max_updates=max_updates,
             updates_per_row=updates_per_row, **options),
        feature_map, w0, b0, weights)
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise PPackError(f"X: must have at least one row and one column, got shape {X.shape}")
    return _solve_source(_ArraySource(X, y), fmap, C, loss, bias, w0, b0, alpha0, opts, rebuild=(X, y),
                         weights=weights)


def solve_file(path, C, *, row_range=None, loss="l1", bias=True, tol=1e-3, max_epochs=100,
               seed=0, w0=None, b0=0.0, alpha0=None, feature_map=None, cache_rows=None, cache_bytes=None,
               chunk_rows=None, batch_updates=DEFAULT_BATCH, max_updates=None,
               updates_per_row=DEFAULT_UPDATES_PER_ROW, weights=None, **options):
    """StreamSVM on rows [start, stop) of a ppack HDF5 file, streamed in chunks.

    weights (stop - start,) or None: the range's row weights, as in solve.

    row_range: (start, stop), default all rows; the block is never loaded whole: memory
    is the cache, one chunk, and alpha plus a flag byte per (virtual) row. Labels must
    be +-1 (a row with another label raises InputError when the reader reaches it).
    alpha0 requires w0, since w cannot be rebuilt without a pass over the file. Other
    arguments as in solve.
    """
    opts = check_options("stream", tol=tol, max_epochs=max_epochs, seed=seed, cache_rows=cache_rows,
                         cache_bytes=cache_bytes, chunk_rows=chunk_rows, batch_updates=batch_updates,
                         max_updates=max_updates, updates_per_row=updates_per_row, **options)
    C, loss, bias = check_common(C, loss, bias)
    if alpha0 is not None and w0 is None:
        raise PPackError("alpha0: must come with the matching w0 (and b0) in solve_file, since "
                         "w = sum_r alpha0_r y_r phi(x_r) is not rebuilt from the file; got no w0")
    source = _FileSource(path, row_range)
    fmap = as_feature_map(feature_map, source.d)
    return _solve_source(source, fmap, C, loss, bias, w0, b0, alpha0, opts, weights=weights)
