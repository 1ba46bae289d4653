"""The shared stream of sampled row ids.

Every rank seeds the same generator, so every rank draws the same ids without talking.
Ids are made in fixed-size blocks and handed out r at a time, so the sequence does not
depend on the pack size r: r = 1 and r = 100 see the same rows in the same order.

Two streams: ``EpochSampler`` (the kernel trainer's default) visits every row once per
epoch in a fresh random order; ``RowSampler`` draws independently with replacement (the
paper's sampling), which leaves about exp(-T/m) of the rows never drawn.
"""
import numpy as np

from ..jit import njit
from ..random_stream import GOLDEN, MASK64, fmix64, fmix64_array
from ..registry import SAMPLINGS

BLOCK = 8192


def held_out(ids, fraction, seed):
    """Whether each row id (int64 array) is held out (validation or calibration rows): a seeded
    hash of the id below ``fraction``, so every rank decides alike without a list of ids."""
    return row_hashes(ids, seed).astype(np.float64) * 2.0 ** -53 < fraction


def row_hashes(ids, seed):
    """The seeded 53-bit hash (uint64) of each row id that ``held_out`` compares with
    ``fraction * 2^53``: exactly, since both sides are integers below 2^53 in a float64."""
    x = fmix64_array(ids.astype(np.uint64) + np.uint64((int(seed) * int(GOLDEN)) & MASK64))
    return x >> np.uint64(11)


def make_sampler(sampling, n_samples, seed, holdout=None):
    """The stream ``sampling`` names ("epochs" or "uniform"; see ``SAMPLINGS``)."""
    if sampling not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {SAMPLINGS}, got {sampling!r}")
    return (EpochSampler if sampling == "epochs" else RowSampler)(n_samples, seed, holdout)


def sampler_from_state(state, block):
    """The stream a checkpoint's ``state()`` describes (states without a kind are uniform)."""
    return (EpochSampler if state.get("kind") == "epochs" else RowSampler).from_state(state, block)


class _BlockStream:
    """Ids handed out r at a time from blocks that ``_refill`` makes (``_block``, ``_pos``)."""

    def take(self, r):
        """The next ``r`` ids, int64 array (r,)."""
        if self._pos + r <= len(self._block):  # the usual pack: one slice of the current block
            self._pos += r
            return self._block[self._pos - r:self._pos].copy()
        out = np.empty(r, dtype=np.int64)
        filled = 0
        while filled < r:
            if self._pos == len(self._block):
                self._refill()
                continue
            k = min(r - filled, len(self._block) - self._pos)
            out[filled:filled + k] = self._block[self._pos:self._pos + k]
            filled += k
            self._pos += k
        return out


class RowSampler(_BlockStream):
    """Uniform draws with replacement from ``range(n_samples)``, skipping the rows ``held_out``
    by ``holdout = (fraction, seed)`` when given (the stream stays the same for every r)."""

    def __init__(self, n_samples, seed, holdout=None):
        self.n_samples = int(n_samples)
        self.holdout = holdout
        self._rng = np.random.Generator(np.random.PCG64(seed))
        self._block = np.empty(0, dtype=np.int64)
        self._pos = 0

    def _refill(self):
        self._block = self._rng.integers(0, self.n_samples, size=BLOCK, dtype=np.int64)
        if self.holdout is not None:
            self._block = self._block[~held_out(self._block, *self.holdout)]
        self._pos = 0

    def state(self):
        """Everything needed to continue the stream exactly: a dict of JSON-able values and the
        current block of ids (int64 array)."""
        return {"n_samples": self.n_samples, "position": self._pos, "holdout": self.holdout,
                "bit_generator": self._rng.bit_generator.state}, self._block.copy()

    @classmethod
    def from_state(cls, state, block):
        holdout = state.get("holdout")
        sampler = cls(state["n_samples"], 0, None if holdout is None else tuple(holdout))
        sampler._rng.bit_generator.state = state["bit_generator"]
        sampler._block = np.asarray(block, dtype=np.int64).copy()
        sampler._pos = int(state["position"])
        return sampler


class EpochSampler(_BlockStream):
    """Every epoch visits each row of ``range(n_samples)`` once, in a fresh random order,
    skipping the rows ``held_out`` by ``holdout = (fraction, seed)`` when given.

    Epoch e's order is a keyed pseudo-random permutation of the row ids, computed on the fly
    in O(1) memory (no list of n ids on any rank): a four-round Feistel network on the
    smallest even number of bits that holds n, with cycle walking back into range, keyed by
    (seed, e). Positions are mapped BLOCK at a time, so the stream does not depend on r.
    """

    def __init__(self, n_samples, seed, holdout=None):
        if int(n_samples) < 1:
            raise ValueError(f"EpochSampler needs at least one row, got n_samples={n_samples}")
        self.n_samples = int(n_samples)
        self.seed = int(seed)
        self.holdout = holdout
        self.epoch = 0
        self._next = 0  # the epoch's next position to map into a block
        self._block = np.empty(0, dtype=np.int64)
        self._pos = 0
        self._gave_any = False  # whether this epoch has yielded an id (all held out: an error)
        bits = max(1, (self.n_samples - 1).bit_length())
        self._half = (bits + 1) // 2

    def _keys(self, epoch):
        """The four round keys (uint64) of epoch ``epoch``'s permutation."""
        seed_key = fmix64_array(np.array([self.seed & MASK64], dtype=np.uint64))
        return list(fmix64_array(seed_key ^ fmix64_array(np.arange(4 * epoch, 4 * epoch + 4, dtype=np.uint64))))

    def permuted(self, positions, epoch):
        """Row ids (int64) at ``positions`` (int64 array in [0, n)) of epoch ``epoch``'s order."""
        keys = np.array(self._keys(epoch), dtype=np.uint64)
        out = np.empty(len(positions), dtype=np.int64)
        _feistel_ids(np.ascontiguousarray(positions, dtype=np.int64), keys, np.uint64(self._half), self.n_samples,
                     out)
        return out

    def _refill(self):
        if self._next >= self.n_samples:
            if not self._gave_any:
                raise ValueError(f"every one of the {self.n_samples} rows is held out: nothing to sample")
            self.epoch, self._next, self._gave_any = self.epoch + 1, 0, False
        stop = min(self.n_samples, self._next + BLOCK)
        block = self.permuted(np.arange(self._next, stop, dtype=np.int64), self.epoch)
        if self.holdout is not None:
            block = block[~held_out(block, *self.holdout)]
        self._block, self._pos, self._next = block, 0, stop
        self._gave_any = self._gave_any or len(block) > 0

    def state(self):
        """Everything needed to continue the stream exactly: a dict of JSON-able values and the
        current block of ids (int64 array)."""
        return {"kind": "epochs", "n_samples": self.n_samples, "seed": self.seed, "holdout": self.holdout,
                "epoch": self.epoch, "next": self._next, "position": self._pos,
                "gave_any": self._gave_any}, self._block.copy()

    @classmethod
    def from_state(cls, state, block):
        holdout = state.get("holdout")
        sampler = cls(state["n_samples"], state["seed"], None if holdout is None else tuple(holdout))
        sampler.epoch, sampler._next = int(state["epoch"]), int(state["next"])
        sampler._gave_any = bool(state["gave_any"])
        sampler._block = np.asarray(block, dtype=np.int64).copy()
        sampler._pos = int(state["position"])
        return sampler


@njit(cache=True)
def _feistel(x, keys, half, mask):
    """The four-round Feistel permutation of [0, 4^half) under ``keys`` (4,) uint64, at x."""
    left, right = x >> half, x & mask
    for key in keys:
        left, right = right, left ^ (fmix64(right ^ key) & mask)
    return (left << half) | right


@njit(cache=True)
def _feistel_ids(positions, keys, half, n, out):
    """out[i]: the permutation of [0, 4^half) applied to positions[i], again while the result
    is not below n (cycle walking: a permutation of [0, n))."""
    mask = (np.uint64(1) << half) - np.uint64(1)
    for i in range(positions.shape[0]):
        x = _feistel(np.uint64(positions[i]), keys, half, mask)
        while x >= np.uint64(n):
            x = _feistel(x, keys, half, mask)
        out[i] = np.int64(x)
