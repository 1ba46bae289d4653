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


def test_info_describes_a_grid_checkpoint(tmp_path, capsys):
    """A grid pass's checkpoint: its grid points, folds, columns (those stopped by tol) and
    kernels, apart from the run's line."""
    import numpy as np

    from ppack import PackSVC
    from ppack.packsvm.grid import train_grid

    X, y = make_problem(150, 6, seed=1)
    train_grid(PackSVC(comm=MPI.COMM_SELF, gamma=0.3, epochs=3, pack=20, seed=5, tol=0.1, tol_window=40), X, y,
               [0.5, 4.0, 30.0], np.arange(150) % 3, 3, kernels=[{"gamma": 0.3}, {"kernel": "linear"}],
               checkpoint=tmp_path / "g.h5", stop_after_packs=15)
    main(["info", str(tmp_path / "g.h5")], comm=MPI.COMM_SELF)
    lines = capsys.readouterr().out.splitlines()
    assert "grid=" not in lines[2]  # the run's line leaves the grid to the lines below
    stopped = int(lines[3].split("columns (")[1].split(" stopped")[0])
    assert lines[3] == (f"  grid pass: 3 C values x 2 kernel settings = 6 grid points, 3 folds + the refit, 1 class "
                        f"column(s) each: 24 columns ({stopped} stopped by tol or validation), pass scores") \
        and stopped > 0
    assert lines[4] == "  C: 0.5, 4, 30"
    assert lines[5].startswith("  kernel: rbf") and lines[6].startswith("  kernel: linear")


def test_info_describes_a_one_class_grid_and_validation_in_checkpoints(tmp_path, capsys):
    """A one-class grid's checkpoint names its nu values; a checkpoint with validation tells
    its evaluations so far."""
    import numpy as np

    from ppack import PackOneClassSVM, PackSVC
    from ppack.packsvm.grid import train_grid

    X, y = make_problem(150, 6, seed=1)
    train_grid(PackOneClassSVM(comm=MPI.COMM_SELF, gamma=0.3, epochs=3, pack=20, seed=5), X, y, [0.1, 0.3],
               np.arange(150) % 3, 3, checkpoint=tmp_path / "g.h5", stop_after_packs=5)
    main(["info", str(tmp_path / "g.h5")], comm=MPI.COMM_SELF)
    lines = capsys.readouterr().out.splitlines()
    assert lines[3].startswith("  grid pass: 2 nu values x 1 kernel settings = 2 grid points, 3 folds + the refit")
    assert lines[4] == "  nu: 0.1, 0.3"
    PackSVC(comm=MPI.COMM_SELF, gamma=0.3, epochs=20, pack=20, validation=0.2, validation_every=2).fit(
        X, y, checkpoint=tmp_path / "v.h5", stop_after_packs=7)
    main(["info", str(tmp_path / "v.h5")], comm=MPI.COMM_SELF)
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("  validation: 3 evaluation(s) so far, best 0.") and "patience used" in line


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
