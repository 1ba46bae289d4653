"""The garbage collector's pauses, timed: how often and how long it stopped this rank.

A pause on one rank holds every rank at the next collective, so the pack loop counts them
(``PackedSolver``'s "garbage_collection" seconds and ``gc_collections``).
"""
import gc
import time


class GcClock:
    """While entered: ``collections`` (count) and ``seconds`` (wall) of the collector's runs."""

    def __init__(self):
        self.collections = 0
        self.seconds = 0.0
        self._started = None

    def _callback(self, phase, info):
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.seconds += time.perf_counter() - self._started
            self.collections += 1
            self._started = None

    def __enter__(self):
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc):
        gc.callbacks.remove(self._callback)
        return False
