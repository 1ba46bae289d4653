"""The keyed random stream every sampler, feature map and solver draws from: splitmix64.

One finaliser, ``fmix64`` (a bijective 64-bit mix), written once in numba and used in
three ways: keyed hashes (``hash_key``: a key and a seed to 64 bits, for validation rows,
epoch permutations and hashed features), a sequential stream (``next_draw`` advances a
uint64 state by the golden-ratio increment and mixes it), and bounded draws from that
stream. Everything is wrapping uint64 arithmetic, so the numbers are the same on every
rank and machine.
"""
import numpy as np
from llvmlite import ir as llvm_ir
from numba import types
from numba.extending import intrinsic

from .jit import njit

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S27, _S30, _S31, _S32 = np.uint64(27), np.uint64(30), np.uint64(31), np.uint64(32)
_ONE = np.uint64(1)
MASK64 = (1 << 64) - 1


@njit(cache=True, inline="always")
def fmix64(z):
    """The splitmix64 finaliser of one uint64."""
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return z ^ (z >> _S31)


@njit(cache=True)
def fmix64_array(x):
    """``fmix64`` of each entry of a uint64 array: a new array of the same shape."""
    out = np.empty_like(x)
    flat, flat_out = x.reshape(-1), out.reshape(-1)
    for i in range(flat.shape[0]):
        flat_out[i] = fmix64(flat[i])
    return out


@njit(cache=True, inline="always")
def hash_key(key, seed):
    """A 64-bit hash (uint64) of an integer ``key`` under ``seed``."""
    return fmix64(np.uint64(key) + (np.uint64(seed) + _ONE) * GOLDEN)


def hash_key_int(key, seed):
    """``hash_key`` from Python, as a Python int."""
    return int(hash_key(key & MASK64, seed & MASK64))


@njit(cache=True, inline="always")
def next_draw(rng):
    """The stream's next 64 bits; rng: uint64 (1,), the state, advanced."""
    rng[0] += GOLDEN
    return fmix64(rng[0])


@njit(cache=True, inline="always")
def below(rng, k):
    """A draw in [0, k), k <= 2^32: the top 32 bits times k, shifted down 32 (Lemire's
    multiply-shift, no division)."""
    return np.int64(((next_draw(rng) >> _S32) * np.uint64(k)) >> _S32)


@njit(cache=True, inline="always")
def below_by_remainder(rng, k):
    """A draw in [0, k): the 64 bits modulo k (StreamSVM's cache draws, whose models depend
    on these numbers)."""
    return np.int64(next_draw(rng) % np.uint64(k))


@intrinsic
def float_bits(typingctx, x):
    """The 64 bits of a float64, as a uint64 (to hash a float exactly)."""
    if x != types.float64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm_ir.IntType(64))
    return types.uint64(types.float64), codegen
