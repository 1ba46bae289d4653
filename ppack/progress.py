"""What rank 0 tells the user while it works, without any communication: the progress of a
long training run (``Progress``) and an estimator's verbose lines (``Console``).

Progress on a terminal: one status line redrawn in place (bar, iterations, recent rate, ETA
from ``eta.EtaEstimator``, support vectors, moving hinge loss). Elsewhere (SLURM logs, pipes,
notebooks): a plain line at the first update, then every ``log_every`` seconds. The command
line (`train`) and the estimators' ``verbose`` share it.
"""
import sys
import time

from .eta import EtaEstimator

BAR_WIDTH = 24


class Progress:
    """Call ``update(iteration, total, support_vectors, hinge)`` often; ``close()`` at the end."""

    def __init__(self, stream=None, log_every=30.0, interactive=None):
        self.stream = sys.stderr if stream is None else stream
        self.interactive = self.stream.isatty() if interactive is None else interactive
        self.interval = 0.2 if self.interactive else float(log_every)
        self.start = time.monotonic()
        self.last = None  # the first update shows at once (a log's first line came after log_every)
        self.estimate = EtaEstimator()
        self.drawn = False

    def update(self, iteration, total, support_vectors, hinge):
        now = time.monotonic()
        self.estimate.add(now, iteration, support_vectors)
        if self.last is not None and now - self.last < self.interval:
            return
        self.last = now
        elapsed = now - self.start
        rate, eta = self.estimate.rate(), self.estimate.remaining(total)
        status = (f"{iteration}/{total} it ({100 * iteration / total:.0f}%), {_si(rate)} it/s, "
                  f"ETA {_duration(eta)}, {support_vectors} SVs, hinge {hinge:.4f}")
        if self.interactive:
            filled = int(BAR_WIDTH * iteration / total)
            self.stream.write(f"\r[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {status}\033[K")
            self.drawn = True
        else:
            self.stream.write(f"  {_duration(elapsed)}: {status}\n")
        self.stream.flush()

    def close(self):
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def pack_callback(bar):
    """The packed solver's progress callback (called after every pack with the solver's state,
    its statistics, the support-vector count and T) that updates ``bar`` (a ``Progress``);
    its ``close`` is the bar's."""
    def show(state, stats, n_support, total):
        bar.update(state.iteration, total, n_support, stats.hinge_moving_average)
    show.close = bar.close
    return show


class Console:
    """An estimator's ``verbose`` output: lines on rank 0's stderr, each after the estimator's
    name; nothing at verbose 0 or on the other ranks. ``on`` tells whether it prints."""

    def __init__(self, name, verbose, rank, stream=None):
        self.name = name
        self.verbose = int(verbose)
        self.on = self.verbose >= 1 and rank == 0
        self.stream = sys.stderr if stream is None else stream

    def __call__(self, message):
        if self.on:
            self.stream.write(f"{self.name}: {message}\n")
            self.stream.flush()

    def progress(self):
        """A ``Progress`` on the stream, or None when silent: a line every 10 s at verbose 1,
        every second from verbose 2 (a bar redrawn in place on a terminal)."""
        if not self.on:
            return None
        return Progress(self.stream, log_every=10.0 if self.verbose == 1 else 1.0)


def _si(value):
    if value is None:
        return "?"
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.1f}{unit}"
    return f"{value:.0f}"


def _duration(seconds):
    if seconds is None or seconds == float("inf"):
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else (f"{minutes}m{secs:02d}s" if minutes else f"{secs}s")
