"""`info`: what a data, model or checkpoint file (or LIBSVM text) holds."""
import pytest
from mpi4py import MPI

from ppack.cli import main

from helpers import TRAIN, fails_with, make_problem, run_ppack, write_libsvm

WORLD = MPI.COMM_WORLD


def test_info_describes_data_model_and_checkpoint(mpi_tmp_path, capsys):
    X, y = make_problem(300, 6, sparse=True, seed=38)
    d = mpi_tmp_path
    write_libsvm(d / "train.txt", X, y)
    main(["convert", str(d / "train.txt"), str(d / "train.h5"), "--storage", "csr", "--quiet"])
    main(["train", "--data", str(d / "train.h5"), "--model", str(d / "m.h5"), "--checkpoint", str(d / "c.h5"),
          "--checkpoint-every", "3p", *TRAIN])
    capsys.readouterr()
    for name, expected in [("train.txt", "LIBSVM text"), ("train.h5", "rows 300, features 6, storage csr"),
                           ("m.h5", "ppack kernel model"), ("c.h5", "ppack checkpoint")]:
        main(["info", str(d / name)])
        out = capsys.readouterr().out
        if WORLD.Get_rank() == 0:
            assert expected in out, out
    fails_with(capsys, ["info", str(d / "missing.h5")], "missing.h5: No such file")


@pytest.mark.job
def test_a_truncated_file_is_one_line(tmp_path):
    """A data set or model cut short: one line naming the file, status 1, as train and predict
    say it (no traceback, no MPI abort)."""
    from ppack.data.hdf5 import write_dataset

    write_dataset(tmp_path / "whole.h5", *make_problem(300, 6, seed=39))
    (tmp_path / "cut.h5").write_bytes((tmp_path / "whole.h5").read_bytes()[:3000])
    done = run_ppack(["info", tmp_path / "cut.h5"], ranks=2)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ppack: error: {tmp_path / 'cut.h5'}: cannot open HDF5 file: "), \
        done.stderr


@pytest.mark.job
@pytest.mark.parametrize("ranks", [None, 2])
def test_output_into_a_closed_pipe_exits_quietly(ranks, tmp_path):
    """`info FILE | head -3` once head has left, run alone or under mpiexec: status 141 (a
    shell's 128 + SIGPIPE; under mpiexec, mpiexec's own process meets the closed pipe and
    dies of SIGPIPE) and nothing on stderr. (`--help` is quiet already: argparse ignores the
    failed write.)"""
    import os
    import signal
    import subprocess
    import sys

    from ppack.data.hdf5 import write_dataset

    from helpers import clean_mpi_env, mpiexec

    write_dataset(tmp_path / "d.h5", *make_problem(50, 4, seed=40))
    launcher = [] if ranks is None else [mpiexec(), "-n", str(ranks)]
    read, write = os.pipe()
    os.close(read)  # the reader has left before the first line
    try:
        done = subprocess.run([*launcher, sys.executable, "-m", "ppack", "info", str(tmp_path / "d.h5")],
                              stdout=write, stderr=subprocess.PIPE, text=True, env=clean_mpi_env(), timeout=120)
    finally:
        os.close(write)
    assert done.returncode in (141, -signal.SIGPIPE) and done.stderr == "", (done.returncode, done.stderr)
