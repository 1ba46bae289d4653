"""Delays added to the ranks' local work each pack, off by default: a node's jitter, reproduced
on two cores, for tests and benchmarks (``train --delay SPEC``, ``PackSVC.fit(delay=...)``).

A real node's ranks do not finish a pack's partial sums together: a rank shares its core
with the operating system, loses its cache, waits on memory. Every rank then waits in the
collectives for the slowest, and the pipelined schedule (``pipeline.py``) hides part of that
waiting. A ``Delay`` makes the jitter on purpose, so both schedules can be compared on a
laptop: each pack, each chosen rank busy-waits (``spend``) for a drawn number of seconds.

The spec, comma-separated items (``Delay.parse``):

- ``mean=X``, required: seconds with a unit (``2ms``, ``500us``, ``0.002s``), or a percentage
  (``10%``) of the seconds the rank's own partial sums took that pack;
- ``uniform`` (default: a draw on [0, 2 mean]) or ``fixed`` (mean itself);
- ``ranks=all`` (default), ``ranks=one`` (one rank per pack, drawn from the seed: the same
  choice on every rank; ``Delay.for_ranks(size)`` tells it the ranks to choose from) or
  ``ranks=1+3`` (those ranks only);
- ``seed=N`` (default 0).

Example: ``mean=10%,uniform,ranks=one,seed=1``. Every draw is a hash of (seed, pack, rank)
(``random_stream.hash_key``): no state, the same numbers on every rank and from run to run,
nothing to checkpoint. The delay goes into the work that can overlap the collectives (the
partial sums), never into the serial part of a pack (the SGD update every rank replays), so
it stands for a slow rank, not for a slower algorithm.
"""
import math
import re
import time
from dataclasses import dataclass, replace

from ..random_stream import hash_key_int

FORM = ("mean=X[,uniform|fixed][,ranks=all|one|R+R...][,seed=N], X in seconds with a unit (2ms, 500us, "
        "0.002s) or a percentage of the rank's partial sums (10%)")
SHAPES = ("uniform", "fixed")
UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
_MEAN = re.compile(r"(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)(s|ms|us|%)")
# keys of the hashes, so that the delays' draws are not those of other streams under the same seed
_AMOUNT, _CHOICE = 0x44454C4159, 0x4F4E45  # "DELAY", "ONE"
_UNIT = 2.0 ** -53


@dataclass(frozen=True)
class Delay:
    """Parsed spec (``parse``); ``mean`` is seconds, or a fraction of the partial sums' seconds
    when ``relative``; ``ranks`` is "all", "one" or a tuple of ranks; ``size``: the number of
    ranks ``ranks=one`` chooses from (``for_ranks``)."""

    mean: float
    relative: bool = False
    shape: str = "uniform"
    ranks: object = "all"
    seed: int = 0
    size: int | None = None

    @classmethod
    def parse(cls, text):
        """A Delay from the spec (module docstring); ValueError with one line naming the problem
        and the expected form."""
        fields = {}
        for item in str(text).split(","):
            item = item.strip()
            key, sep, value = item.partition("=")
            key = key.strip().lower()
            name = key if sep else ("shape" if key in SHAPES else key)
            if name in fields:
                raise ValueError(f"{item!r} repeats {name}; expected {FORM}")
            if not sep and key in SHAPES:
                fields["shape"] = key
            elif sep and key == "mean":
                fields["mean"], fields["relative"] = _mean(value.strip())
            elif sep and key == "ranks":
                fields["ranks"] = _ranks(value.strip())
            elif sep and key == "seed":
                if not re.fullmatch(r"\d+", value.strip()) or int(value) >= 2**63:
                    raise ValueError(f"seed={value.strip()}: not an integer from 0 to 2^63 - 1; expected {FORM}")
                fields["seed"] = int(value)
            else:
                raise ValueError(f"{item!r}: not an item of a delay; expected {FORM}")
        if "mean" not in fields:
            raise ValueError(f"no mean in {text!r}; expected {FORM}")
        return cls(**fields)

    def for_ranks(self, size):
        """This delay on ``size`` ranks (``ranks=one`` draws among them); ValueError if it names a
        rank that is not among them."""
        if isinstance(self.ranks, tuple) and max(self.ranks) >= size:
            raise ValueError(f"delay ranks={'+'.join(map(str, self.ranks))}: rank {max(self.ranks)} is not among "
                             f"the ranks, 0 to {size - 1}")
        return replace(self, size=int(size))

    def seconds(self, pack, rank, work_seconds):
        """Seconds (>= 0) rank ``rank`` waits in pack ``pack`` (counted from 0 over the run),
        whose partial sums took ``work_seconds`` (read by a relative mean)."""
        if not self._chosen(pack, rank):
            return 0.0
        mean = self.mean * max(0.0, float(work_seconds)) if self.relative else self.mean
        if self.shape == "fixed":
            return mean
        draw = hash_key_int(rank, _key(pack, _key(_AMOUNT, self.seed)))
        return 2.0 * mean * (draw >> 11) * _UNIT

    def chosen_rank(self, pack):
        """``ranks=one``: the rank delayed in pack ``pack`` (the same on every rank)."""
        if self.size is None:
            raise ValueError("delay ranks=one: the number of ranks is not known (Delay.for_ranks(size))")
        draw = hash_key_int(pack, _key(_CHOICE, self.seed))
        return ((draw >> 32) * self.size) >> 32

    def _chosen(self, pack, rank):
        if self.ranks == "all":
            return True
        if self.ranks == "one":
            return rank == self.chosen_rank(pack)
        return rank in self.ranks

    def describe(self):
        """In words, e.g. "uniform, mean 10% of the sums, every rank, seed 1"."""
        mean = f"{100 * self.mean:g}% of the sums" if self.relative else _duration(self.mean)
        ranks = {"all": "every rank", "one": "one rank a pack"}.get(self.ranks) if isinstance(self.ranks, str) \
            else "rank" + ("s " if len(self.ranks) > 1 else " ") + "+".join(map(str, self.ranks))
        return f"{self.shape}, mean {mean}, {ranks}, seed {self.seed}"


def spend(seconds, between=None, every=1e-4):
    """Busy-wait ``seconds`` (``time.perf_counter``), calling ``between()`` (if given) first and
    then about every ``every`` seconds (e.g. to progress a collective in flight)."""
    clock = time.perf_counter
    now = clock()
    end = now + seconds
    due = now
    while now < end:
        if between is not None and now >= due:
            between()
            due = now + every
        now = clock()


def _key(key, seed):
    """``hash_key`` of ``key`` under ``seed``, cut to 63 bits: a seed of the next hash (numba
    takes a Python int as int64)."""
    return hash_key_int(key, seed) >> 1


def _mean(text):
    """(value, relative) of a mean: seconds, or a fraction with "%"."""
    match = _MEAN.fullmatch(text.lower())
    if not match or not math.isfinite(float(match[1])):
        raise ValueError(f"mean={text}: not seconds with a unit or a percentage; expected {FORM}")
    value, unit = float(match[1]), match[2]
    return (value / 100.0, True) if unit == "%" else (value * UNITS[unit], False)


def _ranks(text):
    if text.lower() in ("all", "one"):
        return text.lower()
    if not re.fullmatch(r"\d+(\+\d+)*", text):
        raise ValueError(f"ranks={text}: not all, one or ranks joined by +; expected {FORM}")
    return tuple(sorted({int(r) for r in text.split("+")}))


def _duration(seconds):
    if seconds >= 1.0 or seconds == 0.0:
        return f"{seconds:g} s"
    return f"{seconds * 1e3:g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:g} us"
