"""`convert`: LIBSVM text to the ppack HDF5 layout, run on every rank of the test run (rank 0 converts)."""
import re

import h5py
import numpy as np
import pytest
from mpi4py import MPI

from ppack.cli import main
from ppack.data.hdf5 import read_header, read_rows
from ppack.mpi.comm import polite_barrier

from helpers import fails_with, make_problem, write_libsvm

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
    polite_barrier(WORLD)


def test_convert_errors_end_every_rank_with_one_message(mpi_tmp_path, capsys):
    """A missing input, an output that is the input, or a bad line: status 1 and rank 0's message."""
    d = mpi_tmp_path
    if WORLD.Get_rank() == 0:
        (d / "bad.txt").write_text("1 1:0.5\n-1 2:x\n")
    polite_barrier(WORLD)
    fails_with(capsys, ["convert", str(d / "nope.txt"), str(d / "out.h5")], "nope.txt: No such file")
    fails_with(capsys, ["convert", str(d / "bad.txt"), str(d / "bad.txt")], "must differ from the input file")
    fails_with(capsys, ["convert", str(d / "bad.txt"), str(d / "out.h5")], "bad.txt: line 2")
    assert not (d / "out.h5").exists()


def test_convert_uint8_with_value_scale_and_compression(mpi_tmp_path, capsys):
    """--dtype uint8 stores pixel steps of 1/255 (the default scale) or of --value-scale; --compression
    none/lzf; the report names dtype, value_scale, seconds and peak memory."""
    d = mpi_tmp_path
    K = np.arange(240).reshape(30, 8) % 256
    write_libsvm(d / "pixels.txt", K / 255, np.ones(30), precision=9)
    main(["convert", str(d / "pixels.txt"), str(d / "p.h5"), "--dtype", "uint8", "--compression", "none"])
    out = capsys.readouterr().out
    write_libsvm(d / "halves.txt", K / 2, np.ones(30))
    main(["convert", str(d / "halves.txt"), str(d / "h.h5"), "--dtype", "uint8", "--value-scale", "0.5",
          "--storage", "csr", "--compression", "lzf", "--quiet"])
    if WORLD.Get_rank() == 0:
        assert re.search(r"30 rows, 8 features, dense storage, uint8, value_scale 0.00392156863, "
                         r"[\d.]+ s, peak memory \d+ MB", out), out
        assert read_header(d / "p.h5").value_scale == 1 / 255
        np.testing.assert_array_equal(read_rows(d / "p.h5", 0, 30)[0], (K / 255).astype(np.float32))
        Xh, _ = read_rows(d / "h.h5", 0, 30)
        np.testing.assert_array_equal(Xh.toarray(), K / 2)
        with h5py.File(d / "p.h5") as f, h5py.File(d / "h.h5") as g:
            assert (f["X"].compression, g["X/data"].compression) == (None, "lzf")
    assert capsys.readouterr().out == ""  # --quiet
    polite_barrier(WORLD)


def test_convert_unfit_values_end_every_rank_with_one_message(mpi_tmp_path, capsys):
    """A negative value for uint8, a value beyond float16, a bad --value-scale: status 1, the
    line named, no output file."""
    d = mpi_tmp_path
    if WORLD.Get_rank() == 0:
        (d / "neg.txt").write_text("1 1:0.5\n# c\n-1 2:-0.25\n")
        (d / "big.txt").write_text("1 1:0.5\n-1 2:70000\n")
    polite_barrier(WORLD)
    out = str(d / "out.h5")
    fails_with(capsys, ["convert", str(d / "neg.txt"), out, "--dtype", "uint8", "--value-scale", "0.25"],
               "neg.txt: line 3: value -0.25 is not k * value_scale (0.25)")
    fails_with(capsys, ["convert", str(d / "big.txt"), out, "--dtype", "float16"],
               "big.txt: line 2: value 70000.0 does not fit float16")
    fails_with(capsys, ["convert", str(d / "big.txt"), out, "--value-scale", "-1"],
               "value_scale must be a positive number")
    assert not (d / "out.h5").exists()
