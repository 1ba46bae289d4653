"""How the ranks' time was spent, rank by rank: where some wait for others.

Every rank measures its own phases (``state.PHASES``); the run's ``seconds`` keep the
slowest rank's. This report adds, per phase, the minimum, median and maximum over ranks
and each rank's own figures, with the derived parts that show the waiting: ``serial`` (what
more ranks do not shrink), ``waiting`` (in the two collectives, for the last rank to
arrive) and ``collective_own`` (communication less that waiting: the collectives' own cost);
per rank also ``local_jitter``, the relative per-pack jitter of its local work
(``state.Jitter``), which the slowest of p ranks turns into waiting.
"""
import numpy as np

from .state import serial_seconds, waiting_seconds


def rank_phases(seconds):
    """One rank's phase seconds with the derived ones added (a new dict)."""
    phases = {k: float(v) for k, v in seconds.items()}
    phases["serial"] = serial_seconds(seconds)
    phases["waiting"] = waiting_seconds(seconds)
    phases["collective_own"] = seconds["communication"] - phases["waiting"]
    return phases


def summarise(per_rank):
    """{phase: {"min", "median", "max"}} over the ranks' phase dicts (a list)."""
    summary = {}
    for phase in per_rank[0]:
        values = [ranked[phase] for ranked in per_rank]
        summary[phase] = {"min": float(np.min(values)), "median": float(np.median(values)),
                          "max": float(np.max(values))}
    return summary


def over_ranks(comm, stats, occupancy):
    """Collective: the report, the same on every rank: "seconds" {phase: {min, median, max}},
    "per_rank" {"seconds": {phase: (p,) list}, "support_vectors": (p,), "gc_collections": (p,),
    "local_jitter": (p,)}."""
    per_rank = comm.allgather(rank_phases(stats.seconds))
    collections, jitter = zip(*comm.allgather((int(stats.gc_collections), stats.local_work.relative())))
    return {"seconds": summarise(per_rank),
            "per_rank": {"seconds": {phase: [ranked[phase] for ranked in per_rank] for phase in per_rank[0]},
                         "support_vectors": [int(n) for n in occupancy], "gc_collections": list(collections),
                         "local_jitter": list(jitter)}}
