"""deliver_rows: the rows of given global ids, from wherever they live, on every rank with one sum."""
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

from ppack.data.delivery import _buffer, buffer_bytes, deliver_rows, sections
from ppack.data.shard import Shard
from ppack.mpi.collectives import Collectives
from ppack.mpi.comm import chunk
from ppack.packsvm.comm_model import pack_bytes

from helpers import make_problem

COMMS = [pytest.param(MPI.COMM_SELF, id="self"),
         pytest.param(MPI.COMM_WORLD, id="world", marks=pytest.mark.mpi(min_size=2))]


def delivered(comm, sparse, dtype, n=90, d=7, r=40, n_features=None):
    """(block, X, y, ids, collectives): ``r`` random ids (repeats included) delivered from shards of X."""
    X, y = make_problem(n, d, sparse=sparse, seed=50)
    X = X.astype(dtype)
    shard = Shard.from_arrays(X, y, comm.Get_rank(), comm.Get_size())
    ids = np.random.default_rng(51).integers(0, n, size=r)  # the same on every rank
    collectives = Collectives(comm)
    block = deliver_rows(collectives, shard, shard.y, ids, n_features)
    return block, X, y, ids, collectives


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("comm", COMMS)
def test_every_rank_gets_exactly_the_rows_and_labels(comm, sparse, dtype):
    """The block is the data set's rows ``ids`` bit for bit, in the shard's dtype, after one ``sum``."""
    block, X, y, ids, collectives = delivered(comm, sparse, dtype)
    assert collectives.calls == Counter(sum=1)
    assert block.n_rows == len(ids) and block.n_features == X.shape[1]
    np.testing.assert_array_equal(block.y, y[ids])
    expected = X[ids]
    if sparse:
        assert block.dense is None
        indptr, indices, values = block.csr
        assert indices.dtype == np.int32 and values.dtype == dtype
        np.testing.assert_array_equal(indptr, expected.indptr)
        np.testing.assert_array_equal(indices, expected.indices)
        np.testing.assert_array_equal(values, expected.data)
    else:
        assert block.csr is None and block.dense.dtype == dtype
        np.testing.assert_array_equal(block.dense, expected)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("comm", COMMS)
def test_the_kept_buffer_carries_nothing_from_the_last_delivery(comm, sparse):
    """The copy kernels write every byte of the kept buffer (no zeroing pass): rows delivered
    after others of the same pack size, longer ones and from other ranks, arrive exactly,
    and with ``norms_l1`` the block carries the norms ``row_norms`` computes from its rows."""
    from ppack.kernels.compute import row_norms
    from ppack.kernels.spec import KernelSpec

    X, y = make_problem(90, 7, sparse=sparse, seed=53)
    shard = Shard.from_arrays(X, y, comm.Get_rank(), comm.Get_size())
    collectives = Collectives(comm)
    rng = np.random.default_rng(54)
    for l1 in (False, True, False):
        ids = rng.integers(0, 90, size=30)  # the same on every rank
        block = deliver_rows(collectives, shard, shard.y, ids, norms_l1=l1)
        np.testing.assert_array_equal(block.y, y[ids])
        got = sp.csr_matrix(block.csr[::-1], shape=(30, 7)).toarray() if sparse else block.dense
        np.testing.assert_array_equal(got, X[ids].toarray() if sparse else X[ids])
        delivered_norms = block.known_norms[1]
        block.known_norms = None
        np.testing.assert_array_equal(delivered_norms, row_norms(block, KernelSpec("laplacian" if l1 else "rbf")))


@pytest.mark.parametrize("sparse", [False, True])
def test_rows_are_padded_to_a_models_width(sparse):
    """With ``n_features`` wider than the data, the rows come padded with zero columns."""
    block, X, _, ids, _ = delivered(MPI.COMM_SELF, sparse, np.float64, n_features=10)
    assert block.n_features == 10
    taken = block.dense if block.dense is not None else \
        sp.csr_matrix(block.csr[::-1], shape=(block.n_rows, 10)).toarray()
    expected = np.zeros((len(ids), 10))
    expected[:, :X.shape[1]] = X.toarray()[ids] if sparse else X[ids]
    np.testing.assert_array_equal(taken, expected)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("rows", [[3, 0, 3], [], [5]])
def test_stored_rows_take_a_blocks_rows(rows, sparse):
    """``stored.append_positions`` copies the chosen rows of a block (repeats and none
    included) after the rows stored before, with their norms, into the room that
    ``StoredRows.room_for`` made."""
    from ppack.kernels.stored import StoredRows, append_positions

    block, X, _, ids, _ = delivered(MPI.COMM_SELF, sparse, np.float64)
    stored = StoredRows(X.shape[1], sparse)
    block_norms = np.arange(block.n_rows) + 0.5
    for positions in ([1], rows):
        block_arrays, store_arrays = stored.room_for(block)
        stored.n += append_positions(*block_arrays, np.array(positions, dtype=np.int64), block_norms, stored.n,
                                     *store_arrays)
    dense = X.toarray() if sparse else X
    expected = dense[ids][[1, *rows]]
    if sparse:
        got = sp.csr_matrix(stored.features[::-1], shape=(stored.n, X.shape[1]))
        assert got.has_sorted_indices and got.nnz == np.count_nonzero(expected)
        got = got.toarray()
    else:
        got = stored.features
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(stored.norms, block_norms[[1, *rows]])


@pytest.mark.parametrize("l1", [False, True])
def test_unpadding_gives_the_csr_rows_numpy_gives(l1):
    """The numba unpacking of padded rows against numpy's boolean mask, with an empty row,
    leftover values in the padding, a scale rounded once to float32, and the rows' norms
    as ``csr_row_norms`` gives them for the unpacked rows."""
    from ppack.data.delivery import _unpad_rows
    from ppack.kernels.compute import csr_row_norms

    nnz = np.array([2.0, 0.0, 3.0])
    idx = np.array([[1.0, 4.0, 9.0], [7.0, 7.0, 7.0], [0.0, 2.0, 5.0]])
    val = np.array([[0.5, -1.0, 8.0], [9.0, 9.0, 9.0], [1.0, 2.0, 3.0]])
    indptr, indices, values, norms = (np.empty(4, dtype=np.int64), np.empty(9, dtype=np.int32),
                                      np.empty(9, dtype=np.float32), np.empty(3))
    total = _unpad_rows(nnz, idx, val, 0.1, indptr, indices, values, l1, norms)
    keep = np.arange(3)[None, :] < nnz[:, None]
    assert total == 5
    np.testing.assert_array_equal(indptr, [0, 2, 2, 5])
    np.testing.assert_array_equal(indices[:total], idx[keep].astype(np.int32))
    np.testing.assert_array_equal(values[:total], (val[keep] * 0.1).astype(np.float32))
    np.testing.assert_array_equal(norms, csr_row_norms(indptr, indices[:total], values[:total], l1))


def stored_rows(stored, sparse, n=90, d=7, seed=52):
    """(X as stored (n, d), dense or CSR, y (n,), w (n,)): uint8 pixel-like values, or signed
    floats of the stored type; about 40% nonzero."""
    rng = np.random.default_rng(seed)
    keep = rng.random((n, d)) < 0.4
    if np.dtype(stored) == np.uint8:
        X = np.where(keep, rng.integers(1, 256, size=(n, d)), 0).astype(np.uint8)
    else:
        X = np.where(keep, rng.normal(size=(n, d)) * 10.0 ** rng.integers(-3, 4, size=(n, d)), 0.0).astype(stored)
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (sp.csr_matrix(X) if sparse else X), y, rng.random(n) + 0.5


def stored_shard(comm, X, y, w, scale, dtype):
    """This rank's ``Shard`` of X kept as stored (compact or float), with ``value_scale`` scale."""
    n, d = X.shape
    start, stop = chunk(n, comm.Get_rank(), comm.Get_size())
    longest = int(np.diff(X.indptr).max()) if sp.issparse(X) else d
    return Shard("<stored>", n, d, start, stop, X[start:stop], y[start:stop], longest, scale, dtype,
                 w[start:stop])


# (sparse, stored type, value_scale, dtype computed in); scipy.sparse holds no float16
STORED = [(sparse, *case) for sparse in (False, True)
          for case in ((np.uint8, 1 / 255, np.float32), (np.uint8, 1 / 255, np.float64), (np.uint8, 1.0, np.float64),
                       (np.float16, 0.5, np.float32), (np.float32, 1.0, np.float32), (np.float64, 1.0, np.float64),
                       (np.float64, 1.0, np.float32))
          if not (sparse and case[0] == np.float16)]


@pytest.mark.parametrize("sparse, stored, scale, dtype", STORED)
@pytest.mark.parametrize("comm", COMMS)
def test_stored_rows_arrive_as_the_owner_would_scale_them(comm, sparse, stored, scale, dtype):
    """Rows travel as stored; every rank's block holds float64(stored value) * value_scale rounded
    once to ``dtype`` (the owner's arithmetic), bit for bit, with the labels and weights, after one
    ``sum`` of exactly the bytes ``pack_bytes`` counts."""
    X, y, w = stored_rows(stored, sparse)
    shard = stored_shard(comm, X, y, w, scale, dtype)
    ids = np.random.default_rng(53).integers(0, X.shape[0], size=41)
    collectives = Collectives(comm)
    block = deliver_rows(collectives, shard, shard.y, ids, weights=shard.w)
    assert collectives.calls == Counter(sum=1)
    rows = X[ids]
    values = rows.data if sparse else rows
    expected = (values.astype(np.float64) * scale).astype(dtype)  # the straightforward reference
    np.testing.assert_array_equal(block.y, y[ids])
    np.testing.assert_array_equal(block.weight, w[ids])
    if sparse:
        indptr, indices, got = block.csr
        assert indices.dtype == np.int32 and got.dtype == dtype
        np.testing.assert_array_equal(indptr, rows.indptr)
        np.testing.assert_array_equal(indices, rows.indices)
    else:
        got = block.dense
        assert got.dtype == dtype and got.flags.c_contiguous
        columns = block.columns()  # made with the rows, in the delivery's compiled pass (float16 aside)
        assert columns.flags.c_contiguous and columns.tobytes() == np.ascontiguousarray(expected.T).tobytes()
    assert got.tobytes() == expected.tobytes()  # bit for bit
    assert collectives.last_bytes == pack_bytes(len(ids), X.shape[1], shard.max_row_nnz, sparse, 1, 1,
                                                np.dtype(stored).itemsize)[0] + 8 * len(ids)  # + the weights


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("stored", [np.uint8, np.float16, np.float32, np.float64])
def test_sections_are_aligned_and_tile_the_byte_buffer(stored, sparse):
    """Odd r and row lengths: every view starts at a multiple of its item size, right after
    the one before, and together they fill the buffer."""
    parts = sections(7, 5, 3, sparse, stored, weighted=True)
    assert [p[1].itemsize for p in parts] == sorted((p[1].itemsize for p in parts), reverse=True)
    buf, views = _buffer(7, 5, 3, sparse, np.dtype(stored), True)
    assert buf.dtype == np.uint8 and buf.nbytes == buffer_bytes(7, 5, 3, sparse, stored, weighted=True)
    at = 0
    for name, dtype, shape in parts:
        view = views[name]
        offset = view.__array_interface__["data"][0] - buf.__array_interface__["data"][0]
        assert view.dtype == dtype and view.shape == shape and np.shares_memory(view, buf)
        assert offset == at and offset % dtype.itemsize == 0 and view.flags.aligned
        at += view.nbytes
    assert at == buf.nbytes


def test_compact_rows_travel_in_a_sixth_of_the_float64_bytes():
    """100 uint8 rows of 784 features: 8 x 100 label bytes + 78,400 value bytes = 79,200 B,
    against 8 x (100 + 78,400) = 628,000 B as float64 (7.9 times more)."""
    sent = {}
    for stored, scale in ((np.uint8, 1 / 255), (np.float64, 1.0)):
        X, y, w = stored_rows(stored, False, n=150, d=784)
        shard = stored_shard(MPI.COMM_SELF, X, y, w, scale, np.float32)
        collectives = Collectives(MPI.COMM_SELF)
        deliver_rows(collectives, shard, shard.y, np.arange(100))
        sent[stored] = collectives.last_bytes
    assert sent == {np.uint8: 79200, np.float64: 628000}
    assert 6 * sent[np.uint8] <= sent[np.float64]


def test_sparse_rows_send_int32_indices_and_counts():
    """ijcnn1-like rows (22 features, the longest 13 nonzeros), r = 100, float64 values: labels
    800 B + counts 400 B + indices 100 x 13 x 4 = 5,200 B + values 10,400 B = 16,800 B (all
    float64 would be 8 x (100 + 100 + 2 x 1,300) = 22,400 B)."""
    rng = np.random.default_rng(54)
    X = np.zeros((150, 22))
    for row, count in enumerate([13] + list(rng.integers(1, 14, size=149))):
        X[row, rng.choice(22, size=count, replace=False)] = rng.normal(size=count)
    X, y = sp.csr_matrix(X), np.where(rng.random(150) < 0.5, -1.0, 1.0)
    w = np.ones(150)
    shard = stored_shard(MPI.COMM_SELF, X, y, w, 1.0, np.float64)
    assert shard.max_row_nnz == 13
    collectives = Collectives(MPI.COMM_SELF)
    deliver_rows(collectives, shard, shard.y, np.arange(100))
    assert collectives.last_bytes == 16800 == pack_bytes(100, 22, 13, True, 1, 4, 8)[0]


def test_copy_rows_of_strided_and_contiguous_shards_match_numpy():
    """Delivery's dense copy asks for every held row's cache lines before copying them
    (``kernels.prefetch``): a contiguous shard takes the hint, a strided one skips it; both
    copy exactly numpy's rows, zeros for rows held elsewhere."""
    from ppack.data.delivery import _copy_rows

    rng = np.random.default_rng(3)
    wide = rng.integers(0, 256, (50, 2 * 37), dtype=np.uint8)
    labels = rng.normal(size=50)
    none = np.empty(0)
    ids = np.array([7, 60, 0, 49, 7, -3, 20], dtype=np.int64) + 10  # this shard holds global rows 10..59
    for X in (wide[:, :37].copy(), wide[:, ::2]):
        out, out_labels = np.full((len(ids), 40), 255, dtype=np.uint8), np.full(len(ids), np.nan)
        _copy_rows(X, ids, 10, labels, none, out, out_labels, none)
        held = (ids >= 10) & (ids < 60)
        expected = np.zeros((len(ids), 40), dtype=np.uint8)
        expected[held, :37] = X[ids[held] - 10]
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(out_labels, np.where(held, labels[np.clip(ids - 10, 0, 49)], 0.0))


def same_block(a, b):
    """Two RowBlocks hold the same bytes: rows (or CSR arrays), columns, labels, weights, norms."""
    def arrays(block):
        rows = block.csr if block.csr is not None else (block.dense, block.columns())
        return [block.y, block.weight, *rows, *((block.known_norms[1],) if block.known_norms else ())]

    def same(x, y):
        return (x is None and y is None) or (x is not None and y is not None and x.dtype == y.dtype
                                             and x.shape == y.shape and x.tobytes() == y.tobytes())

    first, second = arrays(a), arrays(b)
    return (a.n_features == b.n_features and (a.known_norms is None) == (b.known_norms is None)
            and len(first) == len(second) and all(map(same, first, second)))


@pytest.mark.parametrize("norms_l1", [None, False, True])
@pytest.mark.parametrize("sparse, stored, scale, dtype", STORED)
def test_one_rank_takes_its_rows_straight_from_the_shard(sparse, stored, scale, dtype, norms_l1):
    """On one rank ``deliver`` converts the rows straight from the shard, without collective
    1's buffer: the same bits as through it (rows, columns, labels, weights, norms; padded to a
    wider model for dense rows), and the sum it did not need counted with the buffer's bytes."""
    from ppack.data.delivery import Delivery

    X, y, w = stored_rows(stored, sparse)
    shard = stored_shard(MPI.COMM_SELF, X, y, w, scale, dtype)
    ids = np.random.default_rng(55).integers(0, X.shape[0], size=41)
    for width, weights, labels in ((None, shard.w, shard.y), (X.shape[1] + 3, None, None)):
        delivery = Delivery(shard, labels, width, weights, norms_l1=norms_l1)
        buffered, direct = Collectives(MPI.COMM_SELF), Collectives(MPI.COMM_SELF)
        through = delivery.through_buffer(buffered, ids)
        block = delivery.deliver(direct, ids)
        assert same_block(block, through)
        assert direct.calls == buffered.calls == Counter(sum=1) and direct.last_bytes == buffered.last_bytes
        assert delivery.can_read_shard == (stored != np.float16)


@pytest.mark.parametrize("sparse", [False, True])
def test_rows_a_one_rank_shard_lacks_arrive_as_zeros(sparse):
    """Ids outside the shard (a caller's mistake on one rank) give zero rows and labels, as
    through the buffer, and nothing is read outside the shard's arrays."""
    from ppack.data.delivery import Delivery

    X, y, w = stored_rows(np.float64, sparse)
    shard = stored_shard(MPI.COMM_SELF, X, y, w, 1.0, np.float64)
    ids = np.array([3, -1, X.shape[0], 5, 10 ** 9])
    delivery = Delivery(shard, shard.y, weights=shard.w, norms_l1=False)
    block = delivery.deliver(Collectives(MPI.COMM_SELF), ids)
    assert same_block(block, delivery.through_buffer(Collectives(MPI.COMM_SELF), ids))
    np.testing.assert_array_equal(block.y, [y[3], 0.0, 0.0, y[5], 0.0])
