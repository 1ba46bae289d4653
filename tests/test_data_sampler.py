"""The shared stream of sampled row ids."""
import numpy as np

from ppack.data.sampler import RowSampler


def test_sampler_stream_is_independent_of_pack_size():
    a = RowSampler(1000, 5)
    b = RowSampler(1000, 5)
    drawn = np.concatenate([a.take(r) for r in [1, 7, 100, 8192, 3, 20000]])
    np.testing.assert_array_equal(drawn, b.take(len(drawn)))
    assert drawn.min() >= 0 and drawn.max() < 1000
