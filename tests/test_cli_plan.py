"""`plan`: memory per rank and a calibrated time estimate, before a run."""
from mpi4py import MPI

from ppack.cli import main
from ppack.mpi.comm import polite_barrier

from helpers import fails_with, make_problem, write_libsvm

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
    polite_barrier(WORLD)
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


def test_plan_scales_a_measured_run_to_more_rows_and_ranks(mpi_tmp_path, capsys):
    """--rows and --from-run: the kernel sums of the planned run follow from the measured
    seconds per support vector and row, with the table growing as it did in the run."""
    import json

    import numpy as np
    import pytest

    from ppack.data.hdf5 import write_dataset
    from ppack.errors import PPackError
    from ppack.packsvm.plan import make_plan, rates_of_run

    d = mpi_tmp_path
    if WORLD.Get_rank() == 0:
        write_dataset(d / "small.h5", np.random.default_rng(0).random((500, 20)), np.arange(500) % 2)
    polite_barrier(WORLD)
    # 10 packs of 100 on 2 ranks, 500 support vectors at the end: growth 0.5 per iteration;
    # per rank sum over packs of (support vectors x rows) = 0.5 * 100 * 55 * 100 / 2 = 137,500
    run = {"n_samples": 1000, "iterations": 1000, "pack": 100, "packs": 10, "ranks": 2, "support_vectors": 500,
           "seconds": {"kernel_sums": 0.55, "sequential_updates": 0.08, "delivery": 0.02},
           "memory": {"peak_rss_bytes": {"after_training": [300e6, 310e6]}, "shard_bytes": [50e6, 50e6],
                      "table_bytes": [10e6, 10e6]}}
    rates = rates_of_run(run)
    assert rates.per_sv_row == pytest.approx(0.55 / 137500) and rates.growth == 0.5
    assert rates.fixed_per_pack == pytest.approx(0.01)
    # 10,000 rows, T = m: 100 packs on 4 ranks: 0.5 * 100 * 5050 * 100 * 4e-6 / 4 = 25.25 s of kernel sums
    plan = make_plan(d / "small.h5", 4, {"epochs": 1.0}, mem_per_rank=2**30, rows=10000, from_run=run,
                     allreduce_latency=0.0, bandwidth=float("inf"))
    text = "\n".join(plan.lines)
    assert "scaled: 10000 rows" in text and "(2500 rows)" in text
    import re

    assert float(re.search(r"kernel sums ([\d.]+) s \+", text)[1]) == pytest.approx(25.25, abs=0.051)
    assert "replay and delivery 1.0 s" in text
    assert "the process" in text and "238.4 MiB" in text  # 310e6 - 50e6 - 10e6 bytes
    with pytest.raises(PPackError, match="--from-run: not the metrics of a packsvm train run"):
        rates_of_run({"seconds": {}})
    main(["plan", "--data", str(d / "small.h5"), "--ranks", "8", "--rows", "20000", "--no-calibration"])
    if WORLD.Get_rank() == 0:
        assert "scaled: 20000 rows" in capsys.readouterr().out
        (d / "run.json").write_text(json.dumps(run))
    polite_barrier(WORLD)
    main(["plan", "--data", str(d / "small.h5"), "--ranks", "8", "--from-run", str(d / "run.json")])
    if WORLD.Get_rank() == 0:
        assert "measured in a run of 1000 rows" in capsys.readouterr().out
    polite_barrier(WORLD)


def test_plan_predicts_a_pipelined_run_from_an_unpipelined_one_rank_run(mpi_tmp_path, capsys):
    """--pipeline: auto plans the pipelined schedule above one rank (as train runs it), off the
    unpipelined one; a one-rank run (never pipelined) predicts both, the pipelined one no slower."""
    import json
    import re

    import numpy as np

    from ppack.data.hdf5 import write_dataset

    d = mpi_tmp_path
    run = {"n_samples": 1000, "iterations": 1000, "pack": 100, "packs": 10, "ranks": 1, "support_vectors": 500,
           "pipeline": "off",
           "seconds": {"partial_sums": 0.5, "pair_kernels": 0.02, "serial": 0.04, "correction": 0.0,
                       "kernel_sums": 0.52, "sequential_updates": 0.02, "delivery": 0.01},
           "over_ranks": {"per_rank": {"local_jitter": [0.1]}}}
    if WORLD.Get_rank() == 0:
        write_dataset(d / "small.h5", np.random.default_rng(0).random((1000, 20)), np.arange(1000) % 2)
        (d / "one.json").write_text(json.dumps(run))
    polite_barrier(WORLD)
    estimates = {}
    for schedule in ("auto", "on", "off"):
        main(["plan", "--data", str(d / "small.h5"), "--ranks", "2", "--from-run", str(d / "one.json"),
              "--iterations", "1000", "--pipeline", schedule])
        out = capsys.readouterr().out
        if WORLD.Get_rank() == 0:
            line = [x for x in out.splitlines() if x.strip().startswith("estimate ")][0]
            assert ("unpipelined (--pipeline off)" in line) == (schedule == "off")
            assert ("pipelined =" in line) == (schedule != "off")
            value, unit = re.search(r"estimate ([\d.]+) (ms|s)", line).groups()
            estimates[schedule] = float(value) * (1e-3 if unit == "ms" else 1.0)
    if WORLD.Get_rank() == 0:
        assert estimates["auto"] == estimates["on"] <= estimates["off"]
    polite_barrier(WORLD)


def test_plan_of_a_grid_pass_counts_its_columns_and_calibrates_the_grid(mpi_tmp_path, capsys):
    """--folds plans tune's one pass: Q = grid points x (folds + 1) columns per stored row, a
    calibration run of the grid itself, and its score pass; the refusals are one line."""
    import re

    X, y = make_problem(1500, 20, seed=40)
    d = mpi_tmp_path
    write_libsvm(d / "train.txt", X, y)
    base = ["plan", "--data", str(d / "train.txt"), "--ranks", "2", "--mem-per-rank", "100", "--pack", "50"]
    main(base + ["--no-calibration", "--no-average"])
    one = capsys.readouterr().out
    main(base + ["--C", "1,10", "--gamma", "0.1,0.2,0.4", "--folds", "3"])
    grid = capsys.readouterr().out
    if WORLD.Get_rank() == 0:
        assert "grid pass: 6 grid points x (3 folds + the refit) = 24 columns, 576 bytes per stored row" in grid
        assert "calibrated on a grid pass of 1500 rows" in grid and "24 columns" in grid
        score = re.search(r"score pass: [\d.]+ m?s \(1500 rows against about \d+ stored rows", grid)
        assert score is not None and "the pass in all" in grid

        def table(out):
            value, unit = re.search(r"support vectors\s+([\d.]+) (MiB|KiB)", out).groups()
            return float(value) * (1024 if unit == "MiB" else 1)
        # 750 entries per rank, each counted twice (growth by doubling): 24 averaged columns (576
        # bytes) against one plain one (8); the grid's figure is printed in MiB to 0.1 (51 KiB)
        assert abs(table(grid) - table(one) - 2 * 750 * (576 - 8) / 1024) < 52
    fails_with(capsys, base + ["--C", "1,10"], "--C: several values plan a grid search; give --folds K too")
    fails_with(capsys, base + ["--sigma", "0.01", "--folds", "3"], "--sigma: a grid search sets each column's sigma")
    fails_with(capsys, base + ["--folds", "1"], "--folds: at least 2, got 1")
    if WORLD.Get_rank() == 0:
        (d / "run.json").write_text("{}")
    polite_barrier(WORLD)
    fails_with(capsys, base + ["--folds", "3", "--from-run", str(d / "run.json")],
               "--from-run: a train run's rates are one model's; a grid pass is planned from a calibration run")


def test_plan_of_the_dual_counts_every_row_its_draws_and_its_larger_collective(mpi_tmp_path, capsys):
    """Under the dual the table may hold every row (at most its cap of epochs, each drawing
    every row), every rank holds the draws' active sets, and collective 2 carries the
    holders' alphas: the bytes ``pack_bytes`` counts are the ``DualBuffer``'s."""
    import numpy as np

    from ppack.packsvm.comm_model import pack_bytes
    from ppack.packsvm.dual.solver import DualBuffer

    X, y = make_problem(2000, 30, seed=39)
    d = mpi_tmp_path
    write_libsvm(d / "train.txt", X, y)
    main(["plan", "--data", str(d / "train.txt"), "--ranks", "4", "--mem-per-rank", "100", "--optimizer", "dual",
          "--epochs", "auto", "--pack", "50"])
    out = capsys.readouterr().out
    if WORLD.Get_rank() == 0:
        assert "the dual optimizer, at most 100 epochs" in out and "(up to 500 per rank)" in out
        assert "dual's draws" in out and "an upper bound, its cap of 100 epochs" in out
    for columns, r, ranks in [(1, 50, 4), (10, 100, 3)]:
        assert pack_bytes(r, 30, 30, False, columns, ranks, dual=True)[1] == DualBuffer(columns, r, ranks).data.nbytes
    assert np.all(pack_bytes(50, 30, 30, False, 1, 4)[1] < pack_bytes(50, 30, 30, False, 1, 4, dual=True)[1])
    polite_barrier(WORLD)
