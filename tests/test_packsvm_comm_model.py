"""The Allreduce cost model: its formulas, the fit of alpha and beta, and plan's use of it."""
import re

import numpy as np
import pytest
from mpi4py import MPI

from ppack.packsvm import comm_model as cm

WORLD = MPI.COMM_WORLD
ALPHA, BETA = 1e-6, 1e-9  # 1 us per message, 1 GB/s


def seconds(algorithm, n, p):
    return cm.algorithm_seconds(algorithm, n, p, ALPHA, BETA)


def test_one_rank_costs_nothing():
    for algorithm in cm.ALGORITHMS:
        assert seconds(algorithm, 1e6, 1) == 0.0
    assert cm.allreduce_seconds(1e6, 1, ALPHA, BETA) == 0.0


def test_two_ranks_one_exchange_by_recursive_doubling():
    n = 1000
    assert seconds("recursive doubling", n, 2) == pytest.approx(ALPHA + n * BETA)
    assert seconds("rabenseifner", n, 2) == pytest.approx(2 * ALPHA + n * BETA)  # 2 log2(2) alpha + 2 (1/2) n beta
    assert seconds("ring", n, 2) == pytest.approx(2 * ALPHA + n * BETA)  # 2 (p-1) alpha + 2 (p-1)/p n beta
    assert cm.allreduce_seconds(n, 2, ALPHA, BETA) == pytest.approx(ALPHA + n * BETA)


def test_power_of_two_ranks_small_messages_double_large_ones_halve():
    # p = 8: recursive doubling 3 (alpha + n beta); Rabenseifner 6 alpha + 1.75 n beta; ring 14 alpha + 1.75 n beta
    small, large = 8, 1e6
    assert seconds("recursive doubling", small, 8) == pytest.approx(3 * (ALPHA + small * BETA))
    assert seconds("rabenseifner", large, 8) == pytest.approx(6 * ALPHA + 1.75 * large * BETA)
    assert seconds("ring", large, 8) == pytest.approx(14 * ALPHA + 1.75 * large * BETA)
    assert cm.best_algorithm(small, 8, ALPHA, BETA) == "recursive doubling"
    assert cm.best_algorithm(large, 8, ALPHA, BETA) == "rabenseifner"
    # 3 (a + n b) = 6 a + 1.75 n b where n b = 3 a / 1.25: 2,400 bytes here
    assert cm.best_algorithm(2300, 8, ALPHA, BETA) == "recursive doubling"
    assert cm.best_algorithm(2500, 8, ALPHA, BETA) == "rabenseifner"


def test_other_rank_counts_fold_into_the_power_of_two_below():
    # p = 6 runs on p' = 4 plus a fold and an unfold step (alpha + n beta each); the ring needs no fold
    n = 1e6
    assert seconds("recursive doubling", n, 6) == pytest.approx(4 * (ALPHA + n * BETA))
    assert seconds("rabenseifner", n, 6) == pytest.approx(6 * ALPHA + 3.5 * n * BETA)  # 2*2 + 2; 2*3/4 + 2
    assert seconds("ring", n, 6) == pytest.approx(10 * ALPHA + 2 * 5 / 6 * n * BETA)
    assert cm.allreduce_seconds(n, 6, ALPHA, BETA) == pytest.approx(seconds("ring", n, 6))
    assert cm.allreduce_seconds(8, 3, ALPHA, BETA) == pytest.approx(3 * (ALPHA + 8 * BETA))  # 1 step + 2
    with pytest.raises(ValueError, match="unknown"):
        cm.terms("tree", 8, 4)


def test_pack_seconds_adds_the_calls():
    assert cm.pack_seconds([8, 1e5], 4, ALPHA, BETA) == pytest.approx(
        cm.allreduce_seconds(8, 4, ALPHA, BETA) + cm.allreduce_seconds(1e5, 4, ALPHA, BETA))


def test_fit_recovers_alpha_and_beta():
    rng = np.random.default_rng(0)
    alpha, beta = 0.7e-6, 0.25e-9
    samples = [(p, n, cm.allreduce_seconds(n, p, alpha, beta) * (1 + 0.01 * rng.standard_normal()))
               for p in (2, 4) for n in 8 * 4 ** np.arange(10)]
    fitted = cm.fit(samples)
    assert fitted[0] == pytest.approx(alpha, rel=0.03) and fitted[1] == pytest.approx(beta, rel=0.03)
    exact = cm.fit([(p, n, cm.allreduce_seconds(n, p, alpha, beta)) for p, n, _ in samples])
    assert exact == pytest.approx((alpha, beta), rel=1e-6)
    with pytest.raises(ValueError, match="no measurement"):
        cm.fit([(1, 8, 1e-6)])


def test_plans_communication_is_the_models(mpi_tmp_path):
    """plan prices the pack's two buffers with the model: a 500 x 20 dense file, r = 100, 4 ranks,
    alpha = 1 ms, 1 MB/s (beta = 1 us per byte): buffers 8 (100 + 100 x 20) = 16,800 B and
    8 (100 + 5050 + 100 + 4 x 4 + 2) = 42,144 B; on 4 ranks Rabenseifner (4 alpha + 1.5 n beta) beats
    recursive doubling (2 alpha + 2 n beta) for both: 4 + 25.2 = 29.2 ms and 4 + 63.216 = 67.216 ms,
    96.416 ms per pack."""
    from ppack.data.hdf5 import write_dataset
    from ppack.packsvm.plan import make_plan

    if WORLD.Get_rank() == 0:
        write_dataset(mpi_tmp_path / "small.h5", np.random.default_rng(0).random((500, 20)), np.arange(500) % 2)
    WORLD.Barrier()
    assert cm.pack_bytes(100, 20, 20, False, 1, 4) == (16800, 42144)
    run = {"n_samples": 500, "iterations": 500, "pack": 100, "packs": 5, "ranks": 1, "support_vectors": 200,
           "seconds": {"kernel_sums": 0.01, "sequential_updates": 0.01, "delivery": 0.0}}
    plan = make_plan(mpi_tmp_path / "small.h5", 4, {"epochs": 1.0}, mem_per_rank=2**30, from_run=run,
                     allreduce_latency=1e-3, bandwidth=1e6)
    text = "\n".join(plan.lines)
    per_pack = float(re.search(r"communication ([\d.]+) ms \(2 Allreduce", text)[1]) * 1e-3
    assert per_pack == pytest.approx(cm.pack_seconds((16800, 42144), 4, 1e-3, 1e-6), abs=5e-6)
    assert per_pack == pytest.approx(0.096416, abs=5e-6)
    assert "rabenseifner and rabenseifner on 4 ranks" in text
    WORLD.Barrier()


def test_pack_bytes_count_values_as_stored_and_indices_as_int32():
    """Collective 1 of r = 100 rows: MNIST-like dense rows of 784 uint8 values, 8 x 100 label
    bytes + 78,400 value bytes = 79,200 B (as float64 values: 800 + 627,200 = 628,000 B, 7.9
    times more); ijcnn1-like sparse rows (22 features, the longest 13), float64 values: labels
    800 + int32 counts 400 + int32 indices 100 x 13 x 4 = 5,200 + values 10,400 = 16,800 B
    (11,600 B with float32 values). Collective 2 does not depend on how rows are stored."""
    second = cm.pack_bytes(100, 784, 784, False, 1, 4)[1]
    assert cm.pack_bytes(100, 784, 784, False, 1, 4, 1) == (79200, second)
    assert cm.pack_bytes(100, 784, 784, False, 1, 4, 8) == (628000, second)
    assert cm.pack_bytes(100, 22, 13, True, 1, 4, 8)[0] == 16800
    assert cm.pack_bytes(100, 22, 13, True, 1, 4, 4)[0] == 11600


def test_plan_prices_a_compact_files_rows_as_stored(mpi_tmp_path):
    """The 500 x 20 rows of the test above stored as uint8: collective 1 is 8 x 100 + 100 x 20 =
    2,800 B; with alpha = 1 ms and 1 MB/s on 4 ranks, recursive doubling's 2 + 2 x 2.8 = 7.6 ms
    (Rabenseifner: 4 + 1.5 x 2.8 = 8.2 ms) and collective 2's 67.216 ms make 74.816 ms per pack."""
    from ppack.data.hdf5 import write_dataset
    from ppack.packsvm.plan import make_plan

    if WORLD.Get_rank() == 0:
        X = np.random.default_rng(0).integers(0, 256, size=(500, 20)) / 255.0
        write_dataset(mpi_tmp_path / "small_u8.h5", X, np.arange(500) % 2, dtype="uint8")
    WORLD.Barrier()
    run = {"n_samples": 500, "iterations": 500, "pack": 100, "packs": 5, "ranks": 1, "support_vectors": 200,
           "seconds": {"kernel_sums": 0.01, "sequential_updates": 0.01, "delivery": 0.0}}
    plan = make_plan(mpi_tmp_path / "small_u8.h5", 4, {"epochs": 1.0}, mem_per_rank=2**30, from_run=run,
                     allreduce_latency=1e-3, bandwidth=1e6)
    text = "\n".join(plan.lines)
    assert "(2 Allreduce of 3 + 42 kB)" in text
    per_pack = float(re.search(r"communication ([\d.]+) ms \(2 Allreduce", text)[1]) * 1e-3
    assert per_pack == pytest.approx(cm.pack_seconds((2800, 42144), 4, 1e-3, 1e-6), abs=5e-6)
    assert per_pack == pytest.approx(0.074816, abs=5e-6)
    assert "recursive doubling and rabenseifner on 4 ranks" in text
    WORLD.Barrier()
