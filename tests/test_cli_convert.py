"""`convert`: LIBSVM text to the ppack HDF5 layout, run on every rank of the test run (rank 0 converts)."""
import numpy as np
import pytest
from mpi4py import MPI

from ppack.cli import main
from ppack.data.hdf5 import read_header, read_rows

from conftest import fails_with, make_problem, write_libsvm

WORLD = MPI.COMM_WORLD


@pytest.mark.parametrize("storage,dtype", [("dense", "float32"), ("csr", "float64")])
def test_convert_writes_the_rows_in_the_storage_and_dtype_asked_for(storage, dtype, mpi_tmp_path, capsys):
    """The file holds the text's rows and labels, padded to --n-features, in --storage and --dtype."""
    X, y = make_problem(80, 5, sparse=True, seed=90)
    d = mpi_tmp_path
    write_libsvm(d / "train.txt", X, y)
    main(["convert", str(d / "train.txt"), str(d / "train.h5"), "--n-features", "7", "--storage", storage,
          "--dtype", dtype])
    out = capsys.readouterr().out
    if WORLD.Get_rank() == 0:
        assert f"wrote {d / 'train.h5'}: 80 rows, 7 features, {storage} storage" in out
        header = read_header(d / "train.h5")
        assert (header.n_samples, header.n_features, header.storage, header.dtype) == (80, 7, storage, dtype)
        Xr, yr = read_rows(d / "train.h5", 0, 80)
        expected = np.zeros((80, 7), dtype=dtype)
        expected[:, :5] = X.toarray()
        np.testing.assert_array_equal(Xr.toarray() if storage == "csr" else Xr, expected)
        np.testing.assert_array_equal(yr, y)
    WORLD.Barrier()


def test_convert_errors_end_every_rank_with_one_message(mpi_tmp_path, capsys):
    """A missing input, an output that is the input, or a bad line: status 1 and rank 0's message."""
    d = mpi_tmp_path
    if WORLD.Get_rank() == 0:
        (d / "bad.txt").write_text("1 1:0.5\n-1 2:x\n")
    WORLD.Barrier()
    fails_with(capsys, ["convert", str(d / "nope.txt"), str(d / "out.h5")], "nope.txt: No such file")
    fails_with(capsys, ["convert", str(d / "bad.txt"), str(d / "bad.txt")], "must differ from the input file")
    fails_with(capsys, ["convert", str(d / "bad.txt"), str(d / "out.h5")], "bad.txt: line 2")
    assert not (d / "out.h5").exists()
