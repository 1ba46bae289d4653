"""Linear Pegasos (ppack.linear.pegasos) against Figure 1 of the paper, on one block and in
its distributed form, through the COFFIN feature maps, and against LIBLINEAR's optimum."""
import time

import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

from ppack.data.sampler import RowSampler
from ppack.data.shard import Shard
from ppack.errors import PPackError
from ppack.linear import pegasos
from ppack.linear.features import FeatureMap
from ppack.linear.problem import primal_objective

from naive import alm_reference_optimum, explicit_features, explicit_shifts, pegasos_twin, tiny_images, tiny_problem, with_bias_column

WORLD = MPI.COMM_WORLD


def mapped_problem(spec, n=6):
    """(X, y, explicit rows phi(X) with virtual rows, their labels) for a map spec."""
    fmap = FeatureMap.parse(spec)
    if fmap.n_virtual > 1:
        images, y = tiny_images(n, side=4)
        X = sp.csr_matrix(images.reshape(n, -1))
        return X, y, explicit_shifts(images, fmap.radius), np.repeat(y, fmap.n_virtual)
    X, y = tiny_problem(30, 6, seed=12)
    return X, y, explicit_features(X, spec), y


# ---------------------------------------------------------------- one block


@pytest.mark.parametrize("average", [False, True])
@pytest.mark.parametrize("spec", ["identity", "poly2", "shifts:1"])
def test_pegasos_equals_figure_1_twin(spec, average):
    X, y, Phi, labels = mapped_problem(spec)
    sol = pegasos.solve(X, y, 5.0, epochs=7, seed=5, feature_map=spec, average=average)
    w = pegasos_twin(with_bias_column(Phi), labels, 5.0, 7, 5, average)
    assert sol.alpha is None and sol.info["projections"] > 0
    np.testing.assert_allclose(np.append(sol.w, sol.b), w, rtol=1e-9, atol=1e-10)


def test_pegasos_warm_start_continues_the_step_count():
    X, y = tiny_problem(30, 6, seed=13)
    sol = pegasos.solve(X, y, 1.0, epochs=2, seed=1, w0=np.full(6, 0.1), b0=0.2, average=False)
    # the twin, started from w0 at t0 = n: steps n+1 .. 3n with the same draws
    w = pegasos_twin(with_bias_column(X), y, 1.0, 2, 1, w0=np.append(np.full(6, 0.1), 0.2), t0=30)
    np.testing.assert_allclose(np.append(sol.w, sol.b), w, rtol=1e-9, atol=1e-12)


def test_argument_errors_name_the_parameter():
    X, y = tiny_problem(10, 3)
    cases = [({"loss": "l2"}, r"loss: pegasos optimises the hinge loss only; must be 'l1', got 'l2'"),
             ({"alpha0": np.zeros(10)}, r"alpha0: must be None \(pegasos has no dual variables\), got ndarray"),
             ({"epochs": 0}, r"epochs: must be an integer >= 1, got 0"),
             ({"tol": -1.0}, r"tol: must be a finite number >= 0 or None, got -1.0"),
             ({"t0": -1}, r"t0: must be an integer >= 0 and <= 4611686018427387904 or None, got -1"),
             ({"average": "sometimes"}, r"average: must be True or False, got 'sometimes'"),
             ({"w0": np.zeros(2)}, r"w0: must have shape \(3,\), got \(2,\)"),
             ({"foo": 1}, r"solver option foo: not an option of the pegasos solver; expected one of tol, "
                          r"max_epochs, seed, epochs, t0, average, pack")]
    for extra, message in cases:
        with pytest.raises(PPackError, match=message):
            pegasos.solve(X, y, 1.0, **extra)
    # the options of the distributed mode, accepted on one block: tol unused, max_epochs caps
    capped = pegasos.solve(X, y, 1.0, tol=0.1, epochs=9, max_epochs=2, pack=5, seed=3)
    assert capped.iterations == 2
    np.testing.assert_array_equal(capped.w, pegasos.solve(X, y, 1.0, epochs=2, seed=3).w)


# ---------------------------------------------------------------- distributed form


def distributed(comm, X, y, **options):
    """pegasos.solve_distributed on this rank's shard of (X, y), held whole by every rank."""
    shard = Shard.from_arrays(X, y, comm.Get_rank(), comm.Get_size())
    return pegasos.solve_distributed(comm, shard, shard.y, 2.0, **options)


@pytest.mark.mpi
@pytest.mark.parametrize("spec", ["poly2", "hash:4", "shifts:1"])
def test_distributed_mode_through_a_map_follows_the_expanded_rows(spec):
    """On every rank count (1 serially, all under MPI): the map's steps are those on phi(X)."""
    X, y, Phi, labels = mapped_problem(spec)
    options = {"epochs": 4, "seed": 7, "pack": 13}
    w, b, steps = distributed(WORLD, X, y, feature_map=spec, **options)
    w_expanded, b_expanded, steps_expanded = distributed(WORLD, sp.csr_matrix(Phi), labels, **options)
    assert steps == steps_expanded == 4 * len(labels)
    # the same rows and steps; sums of the map's features run in another order
    np.testing.assert_allclose(w, w_expanded, rtol=1e-9, atol=1e-11)
    assert b == pytest.approx(b_expanded, rel=1e-9, abs=1e-11)
    dense_w, dense_b, _ = distributed(WORLD, X.toarray(), y, feature_map=spec, **options)
    np.testing.assert_allclose(dense_w, w, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("average", [False, True])
def test_distributed_shifts_equal_figure_1_on_the_shared_stream(average):
    """Virtual id r of the stream (n * V ids) is image r // V moved by shift r % V."""
    X, y, Phi, labels = mapped_problem("shifts:1", n=5)
    w, b, steps = distributed(MPI.COMM_SELF, X, y, feature_map="shifts:1", epochs=3, seed=4, pack=10, t0=6,
                              average=average)
    ids = RowSampler(len(labels), 4).take(steps)
    twin = pegasos_twin(with_bias_column(Phi), labels, 2.0, 3, None, average, ids=ids, t0=6)
    np.testing.assert_allclose(np.append(w, b), twin, rtol=1e-9, atol=1e-11)


def test_distributed_mode_takes_the_registry_options():
    X, y = tiny_problem(30, 6, seed=14)
    w, b, steps = distributed(MPI.COMM_SELF, X, y, tol=0.1, epochs=9, max_epochs=2, seed=1, t0=None, average=True,
                              pack=7)
    assert steps == 2 * 30
    twin = pegasos_twin(with_bias_column(X), y, 2.0, 2, None, True, ids=RowSampler(30, 1).take(60))
    np.testing.assert_allclose(np.append(w, b), twin, rtol=1e-9, atol=1e-11)
    with pytest.raises(PPackError, match="solver option shrinking: not an option of the pegasos solver"):
        distributed(MPI.COMM_SELF, X, y, shrinking=True)
    with pytest.raises(PPackError, match="pack: must be an integer >= 1, got 0"):
        distributed(MPI.COMM_SELF, X, y, pack=0)


# ---------------------------------------------------------------- benchmark data


def test_pegasos_approaches_the_liblinear_objective_on_a9a(benchmark_data):
    liblinear = pytest.importorskip("liblinear.liblinearutil", reason="liblinear-official is not installed")
    X, y, T, yt = benchmark_data("a9a")
    model = liblinear.train(liblinear.problem(y, X), liblinear.parameter("-s 3 -B 1 -c 1 -e 0.001 -q"))
    wl, bl = model.get_decfun()
    sign = 1.0 if model.get_labels()[0] == 1 else -1.0  # LIBLINEAR scores its first label
    target = primal_objective(X, y, sign * np.array(wl), sign * bl, 1.0)
    start = time.perf_counter()
    sol = pegasos.solve(X, y, 1.0, epochs=100, seed=0)
    seconds = time.perf_counter() - start
    ours = primal_objective(X, y, sol.w, sol.b, 1.0)
    accuracy = 100.0 * np.mean(np.where(T @ sol.w + sol.b >= 0, 1.0, -1.0) == yt)
    print(f"a9a pegasos 100 epochs: P={ours:.3f} vs liblinear {target:.3f} (+{100 * (ours / target - 1):.2f}%), "
          f"acc={accuracy:.2f}%, {seconds:.2f}s")
    assert target <= ours <= 1.03 * target


# ---------------------------------------------------------------- row weights


def row_weights(n, seed=3):
    weights = np.random.default_rng(seed).uniform(0.2, 4.0, n)
    weights[::5] = 0.0
    return weights


@pytest.mark.parametrize("average", [False, True])
@pytest.mark.parametrize("spec", ["identity", "poly2", "shifts:1"])
def test_weighted_pegasos_equals_weighted_twin(spec, average):
    """Step of row i scaled by its weight, ball of squared radius max(weights) / sigma."""
    X, y, Phi, labels = mapped_problem(spec)
    weights = row_weights(len(y))
    V = len(labels) // len(y)
    sol = pegasos.solve(X, y, 5.0, epochs=7, seed=5, feature_map=spec, average=average, weights=weights)
    w = pegasos_twin(with_bias_column(Phi), labels, 5.0, 7, 5, average, weights=np.repeat(weights, V))
    assert sol.info["projections"] > 0
    np.testing.assert_allclose(np.append(sol.w, sol.b), w, rtol=1e-9, atol=1e-10)
    unweighted = pegasos_twin(with_bias_column(Phi), labels, 5.0, 7, 5, average)
    assert np.max(np.abs(unweighted - w)) > 1e-2


def test_weighted_pegasos_approaches_the_weighted_optimum_and_unit_weights_change_nothing():
    X, y = tiny_problem(60, 6, seed=13)
    weights = row_weights(60, seed=4)
    optimum = alm_reference_optimum(X.toarray(), y, 1.0, 1.0, weights=weights)  # scipy's
    sol = pegasos.solve(X, y, 1.0, epochs=2000, seed=1, weights=weights)
    assert primal_objective(X, y, sol.w, sol.b, 1.0, weights=weights) <= 1.01 * optimum
    plain = pegasos.solve(X, y, 1.0, epochs=50, seed=1)
    ones = pegasos.solve(X, y, 1.0, epochs=50, seed=1, weights=np.ones(60))
    np.testing.assert_array_equal(ones.w, plain.w)


@pytest.mark.mpi
@pytest.mark.parametrize("average", [False, True])
def test_weighted_distributed_mode_equals_the_twin_on_the_shared_stream(average):
    """Every rank count (1 serially, all under MPI): each delivered row brings its weight."""
    X, y = tiny_problem(30, 6, seed=14)
    weights = np.random.default_rng(5).uniform(0.2, 4.0, 30)  # a Shard's weights are > 0
    shard = Shard.from_arrays(X, y, WORLD.Get_rank(), WORLD.Get_size(), w=weights)
    w, b, steps = pegasos.solve_distributed(WORLD, shard, shard.y, 2.0, epochs=5, seed=3, pack=11, average=average,
                                            weights=shard.w)
    ids = RowSampler(30, 3).take(steps)
    twin = pegasos_twin(with_bias_column(X), y, 2.0, 5, None, average, ids=ids, weights=weights)
    np.testing.assert_allclose(np.append(w, b), twin, rtol=1e-9, atol=1e-11)
