"""`plan`: memory per rank and a calibrated time estimate, before a run."""
from mpi4py import MPI

from ppack.cli import main

from conftest import make_problem, write_libsvm

WORLD = MPI.COMM_WORLD


def test_plan_reports_memory_and_warns_before_a_run_that_would_not_fit(mpi_tmp_path, capsys):
    X, y = make_problem(2000, 30, seed=39)
    d = mpi_tmp_path
    write_libsvm(d / "train.txt", X, y)
    main(["plan", "--data", str(d / "train.txt"), "--ranks", "4", "--mem-per-rank", "100", "--iterations", "3000"])
    out = capsys.readouterr().out
    if WORLD.Get_rank() == 0:
        assert "data shard" in out and "support vectors" in out and "(up to 500 per rank)" in out
        assert "estimate" in out and "WARNING" not in out
    main(["plan", "--data", str(d / "train.txt"), "--ranks", "4", "--mem-per-rank", "0.0001", "--no-calibration"])
    out = capsys.readouterr().out
    if WORLD.Get_rank() == 0:
        assert "WARNING" in out and "may not fit" in out and "estimate" not in out
