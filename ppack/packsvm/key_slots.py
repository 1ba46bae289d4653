"""The table's key -> slot map: open addressing in two numpy arrays, read and written by numba.

A pack looks up its r sampled keys and places its new entries in one numba call each, with
no Python work per key.
Keys are global row ids (>= 0); a free bucket holds -1. Buckets are a power of two, at most
half full; a key's first bucket is its ``fmix64`` hash, then linear probing.
"""
import numpy as np

from ..jit import njit
from ..random_stream import fmix64

EMPTY = -1
_SEED = np.uint64(0x5BD1E995)


class KeySlots:
    """Keys (int64 >= 0) -> slots (int64), for ``n`` keys."""

    def __init__(self, capacity=64):
        self.keys, self.slots = new_map(capacity)
        self.n = 0

    def lookup(self, keys):
        """Slots of ``keys`` (int64 array), -1 where a key is absent: int64 array."""
        out = np.empty(len(keys), dtype=np.int64)
        lookup(self.keys, self.slots, np.ascontiguousarray(keys, dtype=np.int64), out)
        return out

    def flag_held(self, keys, value, out):
        """out[i] = value where keys[i] (int64) is present, else 0 (out float64 (len(keys),))."""
        _flag_held(self.keys, keys, float(value), out)

    def add(self, keys, first_slot):
        """Map new ``keys`` (int64 array, none present, no repeats) to first_slot, first_slot + 1, ...
        Returns the position of the first key that is present or repeated, or -1 (nothing added then)."""
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        self.reserve(len(keys))
        bad = _add(self.keys, self.slots, keys, first_slot)
        if bad < 0:
            self.n += len(keys)
        return bad

    def reserve(self, extra):
        """Room for ``extra`` more keys (buckets at most half full after them)."""
        if 2 * (self.n + extra) > len(self.keys):
            self._rehash(self.n + extra)

    def remap(self, keys):
        """The map afresh: ``keys`` (int64 array, no repeats) at slots 0, 1, ... (after a table drops entries)."""
        self.__init__(max(64, len(keys)))
        self.add(np.ascontiguousarray(keys, dtype=np.int64), 0)

    def _rehash(self, n_keys):
        live = self.keys != EMPTY
        keys, slots = self.keys[live], self.slots[live]
        self.__init__(n_keys)
        put(self.keys, self.slots, keys, slots)
        self.n = len(keys)


@njit(cache=True, inline="always")
def _bucket(key, mask):
    return np.int64(fmix64(np.uint64(key) ^ _SEED) & np.uint64(mask))


@njit(cache=True, inline="always")
def _find(table_keys, key):
    """The bucket holding ``key``, or -1."""
    mask = table_keys.shape[0] - 1
    b = _bucket(key, mask)
    while table_keys[b] != EMPTY:
        if table_keys[b] == key:
            return b
        b = (b + 1) & mask
    return -1


@njit(cache=True)
def lookup(table_keys, table_slots, keys, out):
    """out[i] = the slot of keys[i], or -1 where absent (the arrays of a ``KeySlots``)."""
    for i in range(keys.shape[0]):
        b = _find(table_keys, keys[i])
        out[i] = table_slots[b] if b >= 0 else -1


@njit(cache=True)
def _add(table_keys, table_slots, keys, first_slot):
    """Check, then insert: the position of the first present or repeated key (nothing
    inserted), or -1 after inserting every key."""
    n = keys.shape[0]
    found = np.empty(n, dtype=np.int64)
    lookup(table_keys, table_slots, keys, found)
    for i in range(n):
        if found[i] >= 0:
            return i
    positions = np.arange(n)
    seen_keys, seen_slots = new_map(n)
    first_of = np.empty(1, dtype=np.int64)
    for i in range(n):  # a repeat among the new keys: the small map of them already has it
        lookup(seen_keys, seen_slots, keys[i:i + 1], first_of)
        if first_of[0] >= 0:
            return i
        put(seen_keys, seen_slots, keys[i:i + 1], positions[i:i + 1])
    put(table_keys, table_slots, keys, positions + first_slot)
    return -1


@njit(cache=True)
def new_map(n):
    """Empty key and slot arrays of a map for n keys (buckets: a power of two >= 2 n, >= 16)."""
    size = 16
    while size < 2 * n:
        size *= 2
    return np.full(size, EMPTY, dtype=np.int64), np.empty(size, dtype=np.int64)


@njit(cache=True)
def put(table_keys, table_slots, keys, slots):
    """Insert absent ``keys`` with their ``slots``."""
    mask = table_keys.shape[0] - 1
    for i in range(keys.shape[0]):
        b = _bucket(keys[i], mask)
        while table_keys[b] != EMPTY:
            b = (b + 1) & mask
        table_keys[b] = keys[i]
        table_slots[b] = slots[i]


@njit(cache=True)
def _flag_held(table_keys, keys, value, out):
    for i in range(keys.shape[0]):
        out[i] = value if _find(table_keys, keys[i]) >= 0 else 0.0
