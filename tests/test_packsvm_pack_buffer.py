"""Collective 2's layout: the views tile the one buffer in the stated order."""
import numpy as np
import pytest

from ppack.packsvm.comm_model import pack_bytes
from ppack.packsvm.pack_buffer import PackBuffer


@pytest.mark.parametrize("columns, r, ranks", [(1, 1, 1), (1, 100, 4), (10, 7, 3)])
def test_views_tile_the_buffer_in_order(columns, r, ranks):
    buf = PackBuffer(columns, r, ranks)
    parts = [buf.predictions, buf.pairs, buf.owner_flags, buf.digests, buf.timings]
    sizes = [columns * r, r * (r + 1) // 2, r, ranks, 3 * ranks]
    assert [p.size for p in parts] == sizes and buf.predictions.shape == (columns, r)
    assert buf.timings.shape == (ranks, 3) and buf.timings.flags.c_contiguous
    assert buf.data.size == PackBuffer.length(columns, r, ranks) == sum(sizes) + 2
    for k, part in enumerate(parts):  # each a view starting where the one before ends
        assert np.shares_memory(part, buf.data)
        start = (part.__array_interface__["data"][0] - buf.data.__array_interface__["data"][0]) // 8
        assert start == sum(sizes[:k])
    for k, part in enumerate(parts):
        part[...] = k + 1
    buf.vote(checkpoint_due=True, stop=False)
    np.testing.assert_array_equal(buf.data, np.repeat([1, 2, 3, 4, 5, 1, 0], sizes + [1, 1]))
    assert pack_bytes(r, 5, 0, False, columns, ranks)[1] == 8 * buf.data.size


def test_owners_and_votes_after_the_sum():
    summed = PackBuffer(1, 4, 3)
    summed.owner_flags[:] = [0, 1, 3, 2]  # no owner, rank 0, rank 2, rank 1
    assert summed.owners().tolist() == [-1, 0, 2, 1]
    assert not summed.checkpoint_due and not summed.stop
    summed.vote(checkpoint_due=False, stop=True)
    assert summed.stop and not summed.checkpoint_due
