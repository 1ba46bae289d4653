"""The shared stream of sampled row ids.

Every rank seeds the same generator, so every rank draws the same ids without talking.
Ids are drawn in fixed-size blocks and handed out r at a time, so the sequence does not
depend on the pack size r: r = 1 and r = 100 see the same rows in the same order.
"""
import numpy as np

BLOCK = 8192


class RowSampler:
    """Uniform draws with replacement from ``range(n_samples)``."""

    def __init__(self, n_samples, seed):
        self.n_samples = int(n_samples)
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
                self._pos = 0
            k = min(r - filled, len(self._block) - self._pos)
            out[filled:filled + k] = self._block[self._pos:self._pos + k]
            filled += k
            self._pos += k
        return out

    def state(self):
        """Everything needed to continue the stream exactly: a dict of JSON-able values and the
        current block of ids (int64 array)."""
        return {"n_samples": self.n_samples, "position": self._pos,
                "bit_generator": self._rng.bit_generator.state}, self._block.copy()

    @classmethod
    def from_state(cls, state, block):
        sampler = cls(state["n_samples"], 0)
        sampler._rng.bit_generator.state = state["bit_generator"]
        sampler._block = np.asarray(block, dtype=np.int64).copy()
        sampler._pos = int(state["position"])
        return sampler
