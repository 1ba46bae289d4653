"""The calibration slice: training rows ``--probability`` holds out for Platt's sigmoids.

Fitted on rows the training stepped on, the sigmoids are overconfident (by 3 to 8 points of
mean confidence over accuracy on the tests' problems), and after a whole epoch of the
default sampling no row is left unseen. So, without ``--validation`` (whose rows serve
instead), ``--probability`` holds out ``slice_rows(m)`` of the m rows: 5%, at least 200 (two
parameters per class fitted on fewer are noisy) and at most 50,000 (more would not move two
parameters, and cost a prediction pass). The rows are the ones with the smallest seeded hash
(``data.sampler.row_hashes``, the hash ``--validation`` uses): the sampler skips them as it
skips validation rows, by the hash alone, so no rank holds a list of them, and the choice
does not depend on the number of ranks.
"""
import numpy as np

from ..data.sampler import row_hashes
from ..errors import PPackError, given
from ..mpi.collectives import Collectives
from .probability import MIN_ROWS

SHARE = 0.05
MAX_ROWS = 50_000
BITS = 53  # row_hashes are below 2^53


def slice_rows(n_samples):
    """Rows the calibration slice holds out of ``n_samples``: 5%, at least 200, at most 50,000."""
    return int(min(max(round(SHARE * n_samples), MIN_ROWS), MAX_ROWS))


def check_room(n_samples):
    """Raise the one-line error for a data set too small to spare a calibration slice (the
    slice would be more than half the rows)."""
    if 2 * slice_rows(n_samples) > n_samples:
        raise PPackError(f"{given('probability', True)} holds out {slice_rows(n_samples)} calibration rows, more "
                         f"than half of the {n_samples} training rows: give {given('validation')} a fraction, or "
                         f"{given('calibration', 'training')} to fit the sigmoids on the training rows "
                         "(overconfident)")


def calibration_holdout(comm, start, stop, n_samples, seed):
    """Collective: ``((fraction, seed), rows)``: the ``holdout`` for ``data.sampler`` that holds out
    the ``slice_rows(n_samples)`` rows of smallest hash, and how many it holds (that many, or
    more only where two 53-bit hashes tie). [start, stop): this rank's rows.

    The threshold is found by bisection: each step counts the rows below a candidate, each
    rank its own (its rows' hashes sorted once), and sums the counts in one Allreduce of one
    number; 53 steps in all, the same on every rank."""
    wanted = slice_rows(n_samples)
    own = np.sort(row_hashes(np.arange(start, stop, dtype=np.int64), seed))
    collectives = Collectives(comm)
    count = np.zeros(1, dtype=np.int64)

    def below(threshold):  # rows of every rank whose hash is below threshold
        count[0] = np.searchsorted(own, np.uint64(threshold))
        return int(collectives.sum(count)[0])

    low, high = 0, 1 << BITS  # the smallest threshold with at least ``wanted`` rows below it
    while low < high:
        middle = (low + high) // 2
        if below(middle) >= wanted:
            high = middle
        else:
            low = middle + 1
    return (low * 2.0 ** -BITS, int(seed)), below(low)
