"""COFFIN feature maps: phi(x) computed on demand inside the solvers' DOT and ADD.

A linear solver touches an example only through DOT (w . phi(x_i)) and ADD
(w += a phi(x_i)), so a feature map never needs phi(X) stored: both operations walk the
non-zeros of x and compute the features of phi(x) as they go (Sonnenburg and Franc,
COFFIN). w is dense, of size ``n_out(d)``. The maps:

- ``identity``: phi(x) = x.
- ``poly2``: the original features followed by all products x_j x_k, j <= k, the product
  scaled by sqrt(2) when j < k, so phi(x) . phi(z) = x.z + (x.z)^2. Feature (j, k) sits
  at d + k(k+1)/2 + j; size d + d(d+1)/2.
- ``hash:b``: the poly2 features hashed into 2^b buckets with a random sign. Feature j
  has key 2j, feature (j, k) key 2(k(k+1)/2 + j) + 1 (independent of d); the key's 64-bit
  hash picks the bucket (its low b bits) and the sign (its top bit). Colliding features add.
- ``shifts:s``: virtual examples for images. A row is an H x W image (row-major pixels,
  H*W = d; square by default) and yields V = (2s+1)^2 virtual rows, the image moved by
  (dr, dc) in -s..s pixels, zero-filled. Virtual row id = original id * V + shift id, and
  shift id k moves by (dr, dc) = divmod((k + V//2) mod V, 2s+1) - (s, s), so k = 0 is the
  original image. Prediction uses shift 0.

For numba, a map is an integer kind and an int64 parameter array (``FeatureMap.params``);
``_dot``, ``_add`` and ``_sqnorm`` take (kind, params, one row's indices and values) and,
for virtual examples, the shift id. They are compiled functions of their own, not inlined
into each solver's loop: each then compiles once per type for every solver (the five solvers'
first compile, dense and CSR with each map, took 10 s of one core against 19 s inlined), and a
call per row costs nothing measurable beside the row's own work.
"""
import math

import numpy as np
import scipy.sparse as sp

from ..errors import PPackError
from ..jit import njit
from ..random_stream import hash_key, hash_key_int

IDENTITY, POLY2, HASH, SHIFTS = 0, 1, 2, 3
_NAMES = {IDENTITY: "identity", POLY2: "poly2", HASH: "hash", SHIFTS: "shifts"}

_SQRT2 = math.sqrt(2.0)
_S63 = np.uint64(63)
_ONE = np.uint64(1)

MAX_EXPAND_ENTRIES = 5_000_000
SPEC_SYNTAX = "identity, poly2, hash:BITS[:SEED] or shifts:S[:HxW]"


# ---------------------------------------------------------------- hashing


@njit(cache=True, inline="always")
def _bucket_sign(key, params):
    """(bucket, +-1.0) of a poly2 feature key under hash params [bits, seed]."""
    h = hash_key(key, params[1])
    mask = (_ONE << np.uint64(params[0])) - _ONE
    sign = 1.0 if (h >> _S63) == np.uint64(0) else -1.0
    return np.int64(h & mask), sign


# ---------------------------------------------------------------- shifts


@njit(cache=True, inline="always")
def _shift_of(params, shift):
    """(dr, dc) of a shift id under shift params [s, H, W]."""
    s = params[0]
    side = 2 * s + 1
    u = (shift + side * side // 2) % (side * side)
    return u // side - s, u % side - s


@njit(cache=True, inline="always")
def _moved(pixel, dr, dc, params):
    """Index of ``pixel`` moved by (dr, dc), or -1 when it leaves the image."""
    height, width = params[1], params[2]
    r = pixel // width + dr
    c = pixel % width + dc
    if r < 0 or r >= height or c < 0 or c >= width:
        return -1
    return r * width + c


# ---------------------------------------------------------------- DOT, ADD, squared norm


@njit(cache=True)
def _dot(kind, params, indices, values, w, shift=0):
    """w . phi(x) for the row (indices, values); shift: virtual-row shift id."""
    m = indices.shape[0]
    r = 0.0
    if kind == IDENTITY:
        for a in range(m):
            r += w[indices[a]] * values[a]
    elif kind == POLY2:
        d = params[0]
        for a in range(m):
            j = np.int64(indices[a])
            xa = values[a]
            r += w[j] * xa
            r += w[d + j * (j + 1) // 2 + j] * xa * xa
            xs = _SQRT2 * xa
            for c in range(a + 1, m):
                k = np.int64(indices[c])
                r += w[d + k * (k + 1) // 2 + j] * xs * values[c]
    elif kind == HASH:
        for a in range(m):
            j = np.int64(indices[a])
            xa = values[a]
            bucket, sign = _bucket_sign(2 * j, params)
            r += sign * w[bucket] * xa
            bucket, sign = _bucket_sign(2 * (j * (j + 1) // 2 + j) + 1, params)
            r += sign * w[bucket] * xa * xa
            xs = _SQRT2 * xa
            for c in range(a + 1, m):
                k = np.int64(indices[c])
                bucket, sign = _bucket_sign(2 * (k * (k + 1) // 2 + j) + 1, params)
                r += sign * w[bucket] * xs * values[c]
    else:
        dr, dc = _shift_of(params, shift)
        for a in range(m):
            q = _moved(np.int64(indices[a]), dr, dc, params)
            if q >= 0:
                r += w[q] * values[a]
    return r


@njit(cache=True)
def _add(kind, params, indices, values, w, scale, shift=0):
    """w += scale * phi(x) for the row (indices, values); shift: virtual-row shift id."""
    m = indices.shape[0]
    if kind == IDENTITY:
        for a in range(m):
            w[indices[a]] += scale * values[a]
    elif kind == POLY2:
        d = params[0]
        for a in range(m):
            j = np.int64(indices[a])
            xa = scale * values[a]
            w[j] += xa
            w[d + j * (j + 1) // 2 + j] += xa * values[a]
            xs = _SQRT2 * xa
            for c in range(a + 1, m):
                k = np.int64(indices[c])
                w[d + k * (k + 1) // 2 + j] += xs * values[c]
    elif kind == HASH:
        for a in range(m):
            j = np.int64(indices[a])
            xa = scale * values[a]
            bucket, sign = _bucket_sign(2 * j, params)
            w[bucket] += sign * xa
            bucket, sign = _bucket_sign(2 * (j * (j + 1) // 2 + j) + 1, params)
            w[bucket] += sign * xa * values[a]
            xs = _SQRT2 * xa
            for c in range(a + 1, m):
                k = np.int64(indices[c])
                bucket, sign = _bucket_sign(2 * (k * (k + 1) // 2 + j) + 1, params)
                w[bucket] += sign * xs * values[c]
    else:
        dr, dc = _shift_of(params, shift)
        for a in range(m):
            q = _moved(np.int64(indices[a]), dr, dc, params)
            if q >= 0:
                w[q] += scale * values[a]


@njit(cache=True)
def _sqnorm(kind, params, indices, values, shift=0):
    """||phi(x)||^2 of the row (indices, values); shift: virtual-row shift id."""
    m = indices.shape[0]
    r = 0.0
    if kind == IDENTITY or kind == POLY2:
        for a in range(m):
            r += values[a] * values[a]
        if kind == POLY2:
            r += r * r  # ||x||^2 + (x.x)^2, the poly2 kernel of x with itself
    elif kind == HASH:
        # colliding features add inside a bucket, so gather (bucket, signed value) and sum runs
        buckets = np.empty(m + m * (m + 1) // 2, dtype=np.int64)
        signed = np.empty(buckets.shape[0])
        n = 0
        for a in range(m):
            j = np.int64(indices[a])
            xa = values[a]
            bucket, sign = _bucket_sign(2 * j, params)
            buckets[n] = bucket
            signed[n] = sign * xa
            n += 1
            for c in range(a, m):
                k = np.int64(indices[c])
                bucket, sign = _bucket_sign(2 * (k * (k + 1) // 2 + j) + 1, params)
                buckets[n] = bucket
                signed[n] = sign * xa * values[c] * (1.0 if c == a else _SQRT2)
                n += 1
        order = np.argsort(buckets)
        run = 0.0
        for t in range(n):
            run += signed[order[t]]
            if t == n - 1 or buckets[order[t + 1]] != buckets[order[t]]:
                r += run * run
                run = 0.0
    else:
        dr, dc = _shift_of(params, shift)
        for a in range(m):
            if _moved(np.int64(indices[a]), dr, dc, params) >= 0:
                r += values[a] * values[a]
    return r


# ---------------------------------------------------------------- rows of a block


@njit(cache=True, inline="always")
def _row(i, indptr, indices, values, dense):
    """(indices, values) views of row i; a dense block shares one index array 0..d-1."""
    if dense:
        return indices, values[indptr[i]:indptr[i + 1]]
    return indices[indptr[i]:indptr[i + 1]], values[indptr[i]:indptr[i + 1]]


def as_rows(X):
    """(indptr int64, indices int32, values float64, dense) arrays that ``_row`` reads.

    CSR is used as is when canonical (sorted, no duplicates), else copied and fixed; a
    dense block is read through a view of its values, never copied when C-contiguous.
    """
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        if not X.has_canonical_format:
            X = X.copy()
            X.sum_duplicates()
        return (X.indptr.astype(np.int64), X.indices.astype(np.int32, copy=False),
                X.data.astype(np.float64, copy=False), False)
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise PPackError(f"X: must be a 2-d array (n, d), got {X.ndim} dimensions")
    n, d = X.shape
    return np.arange(n + 1, dtype=np.int64) * d, np.arange(d, dtype=np.int32), X.reshape(-1), True


@njit(cache=True)
def _sqnorms(indptr, indices, values, dense, kind, params, n_virtual, extra, out):
    """out[r] = ||phi(x_r)||^2 + extra for every (virtual) row r = i * n_virtual + shift."""
    for r in range(out.shape[0]):
        idx, val = _row(r // n_virtual, indptr, indices, values, dense)
        out[r] = _sqnorm(kind, params, idx, val, r % n_virtual) + extra


@njit(cache=True)
def _dots(indptr, indices, values, dense, kind, params, n_virtual, w, out):
    """out[r] = w . phi(x_r) for every (virtual) row r = i * n_virtual + shift."""
    for r in range(out.shape[0]):
        idx, val = _row(r // n_virtual, indptr, indices, values, dense)
        out[r] = _dot(kind, params, idx, val, w, r % n_virtual)


@njit(cache=True)
def _adds(indptr, indices, values, dense, kind, params, n_virtual, coef, out):
    """out += sum_r coef[r] phi(x_r) over every (virtual) row r = i * n_virtual + shift."""
    for r in range(coef.shape[0]):
        if coef[r] != 0.0:
            idx, val = _row(r // n_virtual, indptr, indices, values, dense)
            _add(kind, params, idx, val, out, coef[r], r % n_virtual)


def predict_decision(X, w, b=0.0, feature_map=None, virtual=False):
    """Decision values w . phi(x_i) + b through the same map: (n,) float64 for shift 0, or
    with ``virtual`` (n * n_virtual,) for every virtual row, ordered i * n_virtual + shift."""
    fmap = feature_map if feature_map is not None else FeatureMap("identity")
    d = X.shape[1]
    w = np.ascontiguousarray(w, dtype=np.float64)
    if w.shape != (fmap.n_out(d),):
        raise PPackError(f"w: must have shape ({fmap.n_out(d)},) for {fmap.name} on {d} features, "
                         f"got {w.shape}")
    n_virtual = fmap.n_virtual if virtual else 1
    indptr, indices, values, dense = as_rows(X)
    out = np.empty(X.shape[0] * n_virtual)
    _dots(indptr, indices, values, dense, fmap.kind, fmap.params(d), n_virtual, w, out)
    out += float(b)
    return out


class MappedRows:
    """phi(x_r) of every (virtual) row r = i * n_virtual + shift of a block, as a matrix
    (n * n_virtual, n_out) that is multiplied by but never built."""

    def __init__(self, X, feature_map):
        n, d = X.shape
        self.rows = as_rows(X)
        self.kind, self.params, self.n_virtual = feature_map.kind, feature_map.params(d), feature_map.n_virtual
        self.shape = (n * self.n_virtual, feature_map.n_out(d))

    def matvec(self, w):
        """phi(X) w, (n * n_virtual,)."""
        out = np.empty(self.shape[0])
        _dots(*self.rows, self.kind, self.params, self.n_virtual, np.ascontiguousarray(w, dtype=np.float64), out)
        return out

    def rmatvec(self, coef):
        """phi(X)^T coef, (n_out,)."""
        out = np.zeros(self.shape[1])
        _adds(*self.rows, self.kind, self.params, self.n_virtual, np.ascontiguousarray(coef, dtype=np.float64), out)
        return out


def as_feature_map(feature_map, d):
    """A solver's ``feature_map`` argument (a FeatureMap, a map name, or None for identity)
    as a FeatureMap that fits inputs of d features."""
    if feature_map is None:
        return FeatureMap("identity")
    if isinstance(feature_map, str):
        try:
            feature_map = FeatureMap.parse(feature_map)
        except ValueError as exc:
            # the syntax message says no more than this one; a bad part (hash bits ...) is worth adding
            detail = "" if str(exc).startswith("feature map: expected") else f" ({exc})"
            raise PPackError(f"feature_map: must be a FeatureMap, None or a map name ({SPEC_SYNTAX}), "
                             f"got {feature_map!r}{detail}") from None
    elif not isinstance(feature_map, FeatureMap):
        raise PPackError(f"feature_map: must be a FeatureMap, None or a map name ({SPEC_SYNTAX}), "
                         f"got {feature_map!r}")
    try:
        feature_map.params(d)
    except ValueError as exc:
        raise PPackError(f"feature_map: must fit X's {d} features, got {feature_map.name} ({exc})") from None
    return feature_map


# ---------------------------------------------------------------- the Python face


class FeatureMap:
    """A COFFIN feature map: ``FeatureMap("poly2")``, ``FeatureMap("hash", bits=20)``,
    ``FeatureMap("shifts", radius=1, shape=(16, 16))`` or ``FeatureMap.parse(spec)``."""

    def __init__(self, name, *, bits=None, seed=0, radius=None, shape=None):
        kinds = {v: k for k, v in _NAMES.items()}
        if name not in kinds:
            raise PPackError(f"feature map: must be one of {', '.join(kinds)}, got {name!r}")
        self.kind = kinds[name]
        self.bits = self.radius = self.shape = None
        self.seed = int(seed)
        if self.kind == HASH:
            if not isinstance(bits, (int, np.integer)) or not 1 <= bits <= 40:
                raise PPackError(f"hash bits: must be an integer in [1, 40], got {bits!r}")
            if not 0 <= self.seed < 2**62:
                raise PPackError(f"hash seed: must be an integer in [0, 2^62), got {seed!r}")
            self.bits = int(bits)
        if self.kind == SHIFTS:
            if not isinstance(radius, (int, np.integer)) or not 0 <= radius <= 64:
                raise PPackError(f"shifts radius s: must be an integer in [0, 64], got {radius!r}")
            self.radius = int(radius)
            if shape is not None:
                shape = tuple(int(v) for v in shape)
                if len(shape) != 2 or min(shape) < 1:
                    raise PPackError(f"shifts shape: must be (height, width), both >= 1, got {shape!r}")
            self.shape = shape

    @classmethod
    def parse(cls, spec):
        """"identity", "poly2", "hash:B[:SEED]" or "shifts:S[:HxW]"."""
        parts = str(spec).split(":")
        try:
            if parts[0] in ("identity", "poly2") and len(parts) == 1:
                return cls(parts[0])
            if parts[0] == "hash" and len(parts) in (2, 3):
                return cls("hash", bits=int(parts[1]), seed=int(parts[2]) if len(parts) == 3 else 0)
            if parts[0] == "shifts" and len(parts) in (2, 3):
                shape = tuple(int(v) for v in parts[2].split("x")) if len(parts) == 3 else None
                return cls("shifts", radius=int(parts[1]), shape=shape)
        except ValueError as exc:
            if "invalid literal" not in str(exc):
                raise
        raise PPackError(f"feature map: expected {SPEC_SYNTAX}, got {spec!r}")

    @property
    def name(self):
        if self.kind == HASH:
            return f"hash:{self.bits}" + (f":{self.seed}" if self.seed else "")
        if self.kind == SHIFTS:
            return f"shifts:{self.radius}" + (f":{self.shape[0]}x{self.shape[1]}" if self.shape else "")
        return _NAMES[self.kind]

    def __repr__(self):
        return f"FeatureMap.parse({self.name!r})"

    @property
    def n_virtual(self):
        """Virtual rows per original row: (2s+1)^2 for shifts, else 1."""
        return (2 * self.radius + 1) ** 2 if self.kind == SHIFTS else 1

    def image_shape(self, d):
        """(H, W) of a shifts map on d features (square when not given)."""
        shape = self.shape
        if shape is None:
            side = math.isqrt(d)
            if side * side != d:
                raise PPackError(f"shifts: {d} features are not a square image; give shape as shifts:S:HxW")
            shape = (side, side)
        if shape[0] * shape[1] != d:
            raise PPackError(f"shifts shape: must hold the {d} features (H*W = {d}), got "
                             f"{shape[0]}x{shape[1]}")
        return shape

    def n_out(self, d):
        """Size of w for inputs of d features."""
        if self.kind == POLY2:
            return d + d * (d + 1) // 2
        if self.kind == HASH:
            return 1 << self.bits
        return d

    def params(self, d):
        """The int64 parameter array the numba functions read, for inputs of d features."""
        if self.kind == HASH:
            return np.array([self.bits, self.seed], dtype=np.int64)
        if self.kind == SHIFTS:
            return np.array([self.radius, *self.image_shape(d)], dtype=np.int64)
        return np.array([d], dtype=np.int64)

    def expand(self, X, max_entries=MAX_EXPAND_ENTRIES):
        """phi(X) as CSR, (n * n_virtual, n_out(d)), in plain Python: a reference for tests.

        Refuses outputs of more than ``max_entries`` stored values; solvers never call it.
        """
        X = sp.csr_matrix(X, dtype=np.float64)
        X.sum_duplicates()
        n, d = X.shape
        m = np.diff(X.indptr)
        size = int(np.sum(m + m * (m + 1) // 2)) if self.kind in (POLY2, HASH) else X.nnz * self.n_virtual
        if size > max_entries:
            raise PPackError(f"max_entries: must be at least the {size} values phi(X) would hold, got {max_entries}")
        rows, cols, vals = [], [], []
        out_row = 0
        for i in range(n):
            js = X.indices[X.indptr[i]:X.indptr[i + 1]].tolist()
            xs = X.data[X.indptr[i]:X.indptr[i + 1]].tolist()
            for shift in range(self.n_virtual):
                for col, val in self._features(js, xs, d, shift):
                    rows.append(out_row)
                    cols.append(col)
                    vals.append(val)
                out_row += 1
        # coo -> csr adds colliding hash buckets
        return sp.coo_matrix((vals, (rows, cols)), shape=(out_row, self.n_out(d))).tocsr()

    def _features(self, js, xs, d, shift):
        """(column, value) pairs of phi(x) for one row given as index and value lists."""
        if self.kind == IDENTITY:
            return list(zip(js, xs))
        if self.kind == SHIFTS:
            height, width = self.image_shape(d)
            side = 2 * self.radius + 1
            dr, dc = divmod((shift + side * side // 2) % (side * side), side)
            dr, dc = dr - self.radius, dc - self.radius
            out = []
            for j, x in zip(js, xs):
                r, c = divmod(j, width)
                if 0 <= r + dr < height and 0 <= c + dc < width:
                    out.append(((r + dr) * width + c + dc, x))
            return out
        explicit = [(j, x, 2 * j) for j, x in zip(js, xs)]
        for a, (j, xj) in enumerate(zip(js, xs)):
            for k, xk in zip(js[a:], xs[a:]):
                scale = 1.0 if k == j else math.sqrt(2.0)
                explicit.append((d + k * (k + 1) // 2 + j, scale * xj * xk, 2 * (k * (k + 1) // 2 + j) + 1))
        if self.kind == POLY2:
            return [(col, val) for col, val, _ in explicit]
        out = []
        for _, val, key in explicit:
            h = hash_key_int(key, self.seed)
            out.append((h & ((1 << self.bits) - 1), val if h >> 63 == 0 else -val))
        return out
