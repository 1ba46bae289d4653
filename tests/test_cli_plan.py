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


def test_plan_counts_compact_shards_as_stored_and_a_coefficient_per_class(mpi_tmp_path, capsys):
    """A uint8 file's shard costs a byte per value; K classes give each support vector K coefficients."""
    import re

    import numpy as np

    from ppack.data.hdf5 import write_dataset

    rng = np.random.default_rng(40)
    X = rng.integers(0, 256, size=(4000, 100)) / 255.0
    d = mpi_tmp_path
    if WORLD.Get_rank() == 0:
        write_dataset(d / "u8.h5", X, np.arange(4000) % 2, dtype="uint8")
        write_dataset(d / "f64.h5", X, np.arange(4000) % 2)
        write_dataset(d / "k10.h5", X, np.arange(4000) % 10)
    WORLD.Barrier()
    sizes = {}
    for name in ("u8", "f64", "k10"):
        main(["plan", "--data", str(d / f"{name}.h5"), "--ranks", "4", "--no-calibration"])
        out = capsys.readouterr().out
        if WORLD.Get_rank() == 0:
            units = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "B": 1}
            found = [re.search(rf"{what}\s+([\d.]+) (GiB|MiB|KiB|B)", out)
                     for what in ("data shard", "support vectors")]
            sizes[name] = [float(m[1]) * units[m[2]] for m in found]
    if WORLD.Get_rank() == 0:
        assert "10 classes (one-vs-rest in one pass)" in out
        assert 7 < sizes["f64"][0] / sizes["u8"][0] < 8.5  # 8 bytes against 1, plus the labels
        assert sizes["k10"][1] > sizes["f64"][1]  # nine more coefficients per support vector
