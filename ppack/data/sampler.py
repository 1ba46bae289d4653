"""The shared stream of sampled row ids.

Every rank seeds the same generator, so every rank draws the same ids without talking.
Ids are drawn in fixed-size blocks and handed out r at a time, so the sequence does not
depend on the pack size r: r = 1 and r = 100 see the same rows in the same order.
"""
import numpy as np

BLOCK = 8192


def held_out(ids, fraction, seed):
    """Whether each row id (int64 array) is in the held-out validation set: a seeded hash of the
    id below ``fraction``, so every rank decides alike without a list of ids."""
    x = ids.astype(np.uint64) + np.uint64((int(seed) * 0x9E3779B97F4A7C15) & (2**64 - 1))
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) * 2.0 ** -53 < fraction


class RowSampler:
    """Uniform draws with replacement from ``range(n_samples)``, skipping the rows ``held_out``
    by ``holdout = (fraction, seed)`` when given (the stream stays the same for every r)."""

    def __init__(self, n_samples, seed, holdout=None):
        self.n_samples = int(n_samples)
        self.holdout = holdout
        self._rng = np.random.Generator(np.random.PCG64(seed))
        self._block = np.empty(0, dtype=np.int64)
        self._pos = 0

    def take(self, r):
        """The next ``r`` ids, int64 array (r,)."""
        out = np.empty(r, dtype=np.int64)
        filled = 0
        while filled < r:
            if self._pos == len(self._block):
                self._block = self._rng.integers(0, self.n_samples, size=BLOCK, dtype=np.int64)
                if self.holdout is not None:
                    self._block = self._block[~held_out(self._block, *self.holdout)]
                self._pos = 0
            k = min(r - filled, len(self._block) - self._pos)
            out[filled:filled + k] = self._block[self._pos:self._pos + k]
            filled += k
            self._pos += k
        return out

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
