"""One HDF5 file written by every rank (ppack/collective_write.py): the same file for any
grouping of the ranks into nodes, one open per node, pieces of a bounded size, errors raised
on every rank with no file left; the node grouping (ppack/mpi/nodes.py)."""
import h5py
import numpy as np
import pytest
from mpi4py import MPI

import ppack.collective_write as collective_write
from ppack.collective_write import Part, collective_h5_write
from ppack.errors import PPackError
from ppack.mpi.comm import polite_barrier
from ppack.mpi.nodes import node_groups

WORLD = MPI.COMM_WORLD


def _rows(rank):
    """Rank k's rows: k + 1 rows of 3 float32 values, and as many int64 keys."""
    n = rank + 1
    return np.arange(10 * rank, 10 * rank + n, dtype=np.int64), \
        np.arange(3 * n, dtype=np.float32).reshape(n, 3) + 100 * rank


def _write(comm, path, **options):
    rank, size = comm.Get_rank(), comm.Get_size()
    total = size * (size + 1) // 2
    start = rank * (rank + 1) // 2

    def create(f):
        f.attrs["ranks"] = size
        f.create_dataset("keys", shape=(total,), dtype=np.int64)
        f.create_dataset("group/rows", shape=(total, 3), dtype=np.float32)

    def own_parts():
        keys, rows = _rows(rank)
        return [Part("keys", start, keys), Part("group/rows", start, rows)]

    return collective_h5_write(comm, path, create, own_parts, lambda f: f.attrs.update(complete=True), **options)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("ranks_per_node", [1, 2, None])
def test_every_grouping_writes_the_same_file_in_one_open_per_node(ranks_per_node, mpi_tmp_path):
    size = WORLD.Get_size()
    path = mpi_tmp_path / f"file{ranks_per_node}.h5"
    # pieces of 24 bytes: two rows of the float32 rows, three int64 keys: many messages per rank
    report = _write(WORLD, path, ranks_per_node=ranks_per_node, piece_bytes=24, parallel=False)
    with node_groups(WORLD, ranks_per_node) as groups:
        nodes = groups.count
    if ranks_per_node is not None:
        assert nodes == -(-size // ranks_per_node)
    assert report.method == "node leaders" and report.nodes == nodes and report.opens == nodes
    assert WORLD.allgather(vars(report)) == [vars(report)] * size
    with h5py.File(path, "r") as f:
        parts = [_rows(k) for k in range(size)]
        np.testing.assert_array_equal(f["keys"][()], np.concatenate([p[0] for p in parts]))
        np.testing.assert_array_equal(f["group/rows"][()], np.concatenate([p[1] for p in parts]))
        assert f.attrs["complete"] and f.attrs["ranks"] == size
    polite_barrier(WORLD)
    assert [p.name for p in mpi_tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


@pytest.mark.mpi(min_size=2)
def test_parallel_hdf5_writes_the_same_file_in_two_opens_where_h5py_has_it(mpi_tmp_path):
    """With h5py built for MPI every rank writes its rows at once; without, asking for it is one
    clear error on every rank and no file."""
    size = WORLD.Get_size()
    path = mpi_tmp_path / "parallel.h5"
    if not collective_write.parallel_hdf5():
        with pytest.raises(PPackError, match="parallel HDF5 writing asked for, but this h5py is built without MPI"):
            _write(WORLD, path, parallel=True)
        assert not path.exists()
        return
    report = _write(WORLD, path, parallel=True)
    assert report.method == "parallel" and report.opens == 2
    with h5py.File(path, "r") as f:
        parts = [_rows(k) for k in range(size)]
        np.testing.assert_array_equal(f["keys"][()], np.concatenate([p[0] for p in parts]))
        np.testing.assert_array_equal(f["group/rows"][()], np.concatenate([p[1] for p in parts]))
        assert f.attrs["complete"] and f.attrs["ranks"] == size


@pytest.mark.mpi(min_size=3)
@pytest.mark.parametrize("failing", ["write_part", "finish"])
def test_a_failure_on_a_later_node_leader_raises_everywhere_and_leaves_no_file(failing, mpi_tmp_path, monkeypatch):
    """Ranks in pairs: rank 2 leads the second node. Its write fails (after rank 0's node wrote),
    or the last leader's ``finish`` fails: every rank raises the error, no file is left."""
    folder = mpi_tmp_path / f"failing-{failing}"
    if WORLD.Get_rank() == 0:
        folder.mkdir()
    polite_barrier(WORLD)
    last_leader = 2 * ((WORLD.Get_size() - 1) // 2)
    if failing == "write_part" and WORLD.Get_rank() == 2:
        def broken(f, part):
            raise OSError("disk full on rank 2")
        monkeypatch.setattr(collective_write, "write_part", broken)
    expected = "disk full on rank 2" if failing == "write_part" else f"no finish on rank {last_leader}"

    def finish(f):
        if failing == "finish" and WORLD.Get_rank() == last_leader:
            raise OSError(f"no finish on rank {last_leader}")

    def create(f):
        f.create_dataset("keys", shape=(WORLD.Get_size(),), dtype=np.int64)

    with pytest.raises(OSError, match=expected):
        collective_h5_write(WORLD, folder / "out.h5", create, lambda: [Part("keys", WORLD.Get_rank(),
                                                                             np.array([WORLD.Get_rank()]))],
                            finish, ranks_per_node=2, parallel=False)
    polite_barrier(WORLD)
    assert list(folder.iterdir()) == []


@pytest.mark.mpi(min_size=2)
def test_a_bad_ranks_per_node_setting_is_one_error_on_every_rank(monkeypatch):
    monkeypatch.setenv("PPACK_RANKS_PER_NODE", "two")
    with pytest.raises(PPackError, match="PPACK_RANKS_PER_NODE: expected a positive number of ranks per node, "
                                         "got 'two'"):
        with node_groups(WORLD):
            pass
    monkeypatch.setenv("PPACK_RANKS_PER_NODE", "1")
    with node_groups(WORLD) as groups:
        assert groups.count == WORLD.Get_size() and groups.leader and groups.node.Get_size() == 1
