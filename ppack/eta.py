"""The time left of a training run, from its recent pace and the growth of its support vectors.

An iteration's cost grows with the stored support vectors n (every kernel sum runs over
them): seconds per iteration s ~ a + b n, fitted by weighted least squares to the recent
stretches of the run, whose weights fade with time. The seconds left over iterations i..T
are the integral of a + b n(j), n extrapolated from its recent growth g per iteration: at
that rate, (T - i)(a + b n) + b g (T - i)^2 / 2; or, where g falls as n grows (new support
vectors run out as the rows do), approaching the n at which the fitted line g = c (L - n)
reaches zero: n(j) = L - (L - n) exp(-c (j - i)).
"""
import math

# a fit needs the recent stretches' support vectors to spread by this fraction of their mean
MIN_SPREAD = 0.05


class EtaEstimator:
    """Call ``add(seconds, iteration, support_vectors)`` after every pack (``seconds`` from one
    clock, any origin); ``rate()`` is the recent iterations per second and ``remaining(total)``
    the seconds left, both None until a stretch of ``stretch`` seconds has been seen. Weights
    fade over ``memory`` times the seconds seen (at least 4 stretches)."""

    def __init__(self, stretch=0.5, memory=0.25):
        self.stretch = float(stretch)
        self.memory = float(memory)
        self.first = None  # the first call's seconds
        self.origin = None  # (seconds, iteration, support vectors) where the open stretch began
        self.latest = None  # the last call's (seconds, iteration, support vectors)
        self.fitted = None  # the last stretch's end: the sums below are faded to it
        # faded sums over the stretches, of weight w (their seconds), mean support vectors n,
        # seconds per iteration s and new support vectors per iteration g: w, w n, w n^2, w s,
        # w n s, w g, w n g; and the stretches' seconds, iterations and new support vectors
        self.w = self.wn = self.wnn = self.ws = self.wns = self.wg = self.wng = 0.0
        self.seconds = self.iterations = self.grown = 0.0

    def add(self, seconds, iteration, support_vectors):
        point = (float(seconds), int(iteration), int(support_vectors))
        self.latest = point
        if self.origin is None:
            self.first, self.origin = point[0], point
            return
        t0, i0, n0 = self.origin
        t, i, n = point
        if t - t0 < self.stretch or i <= i0:
            return
        if self.fitted is not None:
            fade = math.exp(-(t - self.fitted) / max(4 * self.stretch, self.memory * (t - self.first)))
            for name in ("w", "wn", "wnn", "ws", "wns", "wg", "wng", "seconds", "iterations", "grown"):
                setattr(self, name, getattr(self, name) * fade)
        dt, di = t - t0, i - i0
        mean_n, s, g = (n0 + n) / 2, dt / di, (n - n0) / di
        self.w += dt
        self.wn += dt * mean_n
        self.wnn += dt * mean_n * mean_n
        self.ws += dt * s
        self.wns += dt * mean_n * s
        self.wg += dt * g
        self.wng += dt * mean_n * g
        self.seconds += dt
        self.iterations += di
        self.grown += n - n0
        self.fitted, self.origin = t, point

    def rate(self):
        """Iterations per second over the recent stretches, or None."""
        return self.iterations / self.seconds if self.seconds > 0 else None

    def cost(self):
        """``(a, b)``: seconds per iteration a + b n, or None before the first stretch. Where the
        recent support vectors hardly spread or the cost does not grow with them, b = 0."""
        if self.w <= 0:
            return None
        mean_n, mean_s = self.wn / self.w, self.ws / self.w
        spread = self.wnn / self.w - mean_n * mean_n
        covariance = self.wns / self.w - mean_n * mean_s
        if spread <= (MIN_SPREAD * mean_n) ** 2 or covariance <= 0:
            return mean_s, 0.0
        b = covariance / spread
        a = mean_s - b * mean_n
        if a < 0:  # a fixed cost below zero: the line through the origin instead
            return 0.0, self.wns / self.wnn
        return a, b

    def growth(self):
        """``(g, limit)``: support vectors per iteration lately, and the n their growth
        approaches where it clearly falls as n grows (the fitted line's zero; else None)."""
        g = max(self.grown / self.iterations, 0.0) if self.iterations > 0 else 0.0
        mean_n, mean_g = self.wn / self.w, self.wg / self.w
        spread = self.wnn / self.w - mean_n * mean_n
        covariance = self.wng / self.w - mean_n * mean_g
        if spread <= (MIN_SPREAD * mean_n) ** 2 or covariance >= 0 or mean_g <= 0:
            return g, None
        slope = covariance / spread
        return g, mean_n - mean_g / slope

    def remaining(self, total):
        """Seconds left to iteration ``total`` from the last call's, or None."""
        cost = self.cost()
        if cost is None:
            return None
        a, b = cost
        _, i, n = self.latest
        left = max(total - i, 0)
        g, limit = self.growth()
        if limit is None:
            return left * (a + b * n) + b * g * left * left / 2
        if limit <= n or g <= 0:
            return left * (a + b * n)
        c = g / (limit - n)  # the exponential's rate that starts at the recent growth
        return left * (a + b * limit) - b * (limit - n) * -math.expm1(-c * left) / c
