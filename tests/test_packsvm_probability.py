"""Platt scaling on held-out rows: the sigmoid fit, the calibration slice, the rows it uses, the probabilities."""
import numpy as np
import pytest
from mpi4py import MPI
from scipy.optimize import minimize

from ppack import PackSVC
from ppack.data.sampler import EpochSampler, RowSampler, held_out
from ppack.errors import PPackError
from ppack.packsvm.probability import MIN_ROWS, fit_rows, fit_sigmoid, probabilities

from helpers import make_multiclass, make_problem

SELF = MPI.COMM_SELF
WORLD = MPI.COMM_WORLD


def test_sigmoid_fit_is_the_maximum_likelihood_of_the_regularised_targets():
    """Newton's (A, B) equal a general-purpose minimiser's on Platt's objective."""
    rng = np.random.default_rng(5)
    f = rng.normal(size=400)
    positive = rng.random(400) < 1 / (1 + np.exp(-2.5 * f + 0.4))
    A, B = fit_sigmoid(f, positive)
    n_pos = positive.sum()
    t = np.where(positive, (n_pos + 1) / (n_pos + 2), 1 / (400 - n_pos + 2))

    def objective(ab):
        z = ab[0] * f + ab[1]
        return np.sum(t * np.logaddexp(0, z) + (1 - t) * np.logaddexp(0, -z))

    reference = minimize(objective, [0.0, 0.0], method="BFGS", options={"gtol": 1e-10}).x
    np.testing.assert_allclose([A, B], reference, rtol=1e-4, atol=1e-5)
    assert A < 0  # larger decision values are likelier positive


def test_fit_rows_are_the_rows_the_stream_never_drew():
    ids, fitted_on = fit_rows(SELF, 0, 1000, 1000, 7, 1500, "uniform")
    drawn = RowSampler(1000, 7).take(1500)
    assert fitted_on == "out-of-bag rows"
    np.testing.assert_array_equal(ids, np.setdiff1d(np.arange(1000), drawn))
    assert 0.15 < len(ids) / 1000 < 0.30  # about exp(-1.5)
    few, fitted_on = fit_rows(SELF, 0, 1000, 1000, 7, 20000, "uniform")  # nearly every row drawn: fall back to the training rows
    assert fitted_on == "training rows" and len(few) == 1000 > MIN_ROWS
    capped, _ = fit_rows(SELF, 0, 1000, 1000, 7, 100, "uniform", rows=50)
    assert len(capped) == 50 and np.all(np.diff(capped) > 0)
    assert set(capped) <= set(np.setdiff1d(np.arange(1000), RowSampler(1000, 7).take(100)))


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("iterations,rows", [(1500, 50), (1500, 10_000), (20000, 300)])
def test_fit_rows_on_every_rank_are_those_of_one_rank(iterations, rows):
    """Each rank flags only its own rows: the chosen ids (capped, all out-of-bag rows, or the
    training rows) are those one rank finds, on every rank."""
    from ppack.mpi.comm import chunk

    one = fit_rows(SELF, 0, 1000, 1000, 7, iterations, "uniform", rows=rows)
    start, stop = chunk(1000, WORLD.Get_rank(), WORLD.Get_size())
    every = fit_rows(WORLD, start, stop, 1000, 7, iterations, "uniform", rows=rows)
    assert every[1] == one[1]
    np.testing.assert_array_equal(every[0], one[0])


def test_distinct_positions_are_a_uniform_choice():
    from ppack.packsvm.probability import distinct_positions

    picks = np.concatenate([distinct_positions(20, 5, seed) for seed in range(4000)])
    assert all(len(set(distinct_positions(20, 5, s))) == 5 for s in range(50))
    counts = np.bincount(picks, minlength=20)  # each number chosen with chance 1/4: 1000 times of 4000
    assert counts.min() > 880 and counts.max() < 1120
    np.testing.assert_array_equal(distinct_positions(7, 7, 0), np.arange(7))


def test_fit_rows_of_epoch_sampling_are_the_rest_of_the_first_epoch_and_the_held_out_rows():
    ids, fitted_on = fit_rows(SELF, 0, 1000, 1000, 7, 600, "epochs")
    assert fitted_on == "out-of-bag rows"
    np.testing.assert_array_equal(ids, np.setdiff1d(np.arange(1000), EpochSampler(1000, 7).take(600)))
    _, fitted_on = fit_rows(SELF, 0, 1000, 1000, 7, 1000, "epochs")  # a whole epoch: every row was drawn
    assert fitted_on == "training rows"
    holdout = (0.3, 7)
    ids, fitted_on = fit_rows(SELF, 0, 1000, 1000, 7, 3000, "epochs", holdout)  # three epochs, but never the held-out rows
    assert fitted_on == "out-of-bag rows"
    np.testing.assert_array_equal(ids, np.flatnonzero(held_out(np.arange(1000), *holdout)))


def test_the_power_of_the_normalisation_maximises_the_likelihood():
    """fit_power's Newton steps in a bracket reach scipy's minimum of the negative log
    likelihood; rows all right by a wide margin drive it up until nothing changes."""
    from scipy.optimize import minimize_scalar

    from ppack.packsvm.probability import fit_power

    rng = np.random.default_rng(8)
    truth = rng.integers(0, 4, 300)
    D = rng.normal(size=(300, 4)) - 1.0
    D[np.arange(300), truth] += 1.5 + rng.normal(size=300)
    A, B = -np.array([1.0, 2.0, 1.5, 0.7]), np.array([0.3, -0.2, 0.0, 0.1])

    def nll(tau):
        P = probabilities(D, A, B, tau)
        return -np.mean(np.log(P[np.arange(300), truth]))

    tau = fit_power(D, A, B, truth)
    reference = minimize_scalar(nll, bounds=(1e-2, 1e2), method="bounded", options={"xatol": 1e-10}).x
    np.testing.assert_allclose(tau, reference, rtol=1e-5)
    assert nll(tau) <= nll(1.0) and tau != 1.0
    separated = np.full((50, 3), -20.0)
    separated[np.arange(50), np.arange(50) % 3] = 20.0
    sharp = fit_power(separated, -np.ones(3), np.zeros(3), np.arange(50) % 3)
    assert sharp > 1.0  # sharper, until the probabilities stop changing in float64
    np.testing.assert_allclose(probabilities(separated, -np.ones(3), np.zeros(3), sharp),
                               probabilities(separated, -np.ones(3), np.zeros(3), 100.0), rtol=0, atol=1e-15)


def test_probabilities_are_sigmoids_normalised_over_the_classes():
    f = np.array([-2.0, 0.0, 3.0])
    binary = probabilities(f, np.array([-1.0]), np.array([0.5]))
    np.testing.assert_allclose(binary[:, 1], 1 / (1 + np.exp(-1.0 * f + 0.5)))
    np.testing.assert_allclose(binary.sum(axis=1), 1.0)
    D = np.array([[1.0, -1.0, 0.5], [-3.0, 2.0, 0.0]])
    P = probabilities(D, np.array([-2.0, -1.0, -3.0]), np.array([0.0, 0.1, -0.2]))
    raw = 1 / (1 + np.exp(D * np.array([-2.0, -1.0, -3.0]) + np.array([0.0, 0.1, -0.2])))
    np.testing.assert_allclose(P, raw / raw.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(probabilities(D, np.array([-2.0, -1.0, -3.0]), np.array([0.0, 0.1, -0.2]), 2.5),
                               raw ** 2.5 / np.sum(raw ** 2.5, axis=1, keepdims=True))


@pytest.mark.parametrize("multiclass", [False, True])
def test_models_trained_with_probability_give_calibrated_class_probabilities(multiclass, mpi_tmp_path):
    """By default a calibration slice is held out of training (600 rows: 200 of them, the
    floor; an epoch is the 400 others, so C and T count those); the probabilities sum to 1,
    pick classes about as well as the decision values (the per-class sigmoids may reorder
    close calls), are about as confident as they are right, and survive a save and a load on
    all ranks."""
    from ppack.base import load_model

    problem = make_multiclass if multiclass else make_problem
    X, y = problem(600, 6, seed=51)
    Xt, yt = problem(600, 6, seed=52)  # held out: confidence is compared with accuracy on unseen rows
    model = PackSVC(comm=WORLD, gamma=0.3, C=10.0, epochs=1.0, seed=2, probability=True).fit(X, y)
    fit = model.training_["probability"]
    assert (fit["fitted_on"], fit["rows"]) == ("calibration rows", 200)
    assert (fit["power"] == 1.0) == (not multiclass)
    assert model.training_["held_out"] == {"rows": 200, "for": "calibration"}
    assert model.training_["iterations"] == 400
    np.testing.assert_allclose([model.C_, model.sigma_], [10.0, 1 / (400 * 10.0)], rtol=1e-12)
    P = model.predict_proba(Xt)
    assert P.shape == (600, len(model.classes_))
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    chosen = model.classes_[np.argmax(P, axis=1)]
    confidence, accuracy = P.max(axis=1).mean(), np.mean(chosen == yt)
    assert accuracy >= model.score(Xt, yt) - 0.03
    assert abs(confidence - accuracy) < 0.1, (confidence, accuracy)
    path = mpi_tmp_path / f"proba{multiclass}.h5"
    model.save(path)
    np.testing.assert_allclose(load_model(path, WORLD).predict_proba(Xt), P, rtol=1e-12, atol=1e-15)


def test_the_calibration_slice_is_never_stepped_on_and_training_rows_only_when_asked():
    """The slice's rows are those the sigmoids are fitted on, and the sampler never draws them
    (three epochs); ``calibration="training"`` keeps every row for training and, after a whole
    epoch, fits on the training rows, as it says."""
    from ppack.packsvm.calibration import calibration_holdout

    X, y = make_problem(1000, 4, seed=53)
    model = PackSVC(comm=SELF, epochs=3.0, seed=4, probability=True).fit(X, y)
    holdout, rows = calibration_holdout(SELF, 0, 1000, 1000, 4)
    assert rows == 200 and model.training_["iterations"] == 3 * 800
    sliced = np.flatnonzero(held_out(np.arange(1000), *holdout))
    assert len(sliced) == 200 and not np.isin(EpochSampler(1000, 4, holdout).take(3 * 800), sliced).any()
    ids, fitted_on = fit_rows(SELF, 0, 1000, 1000, 4, 3 * 800, "epochs", holdout, held_out_name="calibration rows")
    assert fitted_on == model.training_["probability"]["fitted_on"] == "calibration rows"
    np.testing.assert_array_equal(ids, sliced)
    every_row = PackSVC(comm=SELF, seed=4, probability=True, calibration="training").fit(X, y)
    assert every_row.training_["probability"] == {"fitted_on": "training rows", "rows": 1000, "power": 1.0}
    assert every_row.training_["held_out"] is None and every_row.training_["iterations"] == 1000


def test_probability_refuses_to_spend_more_than_half_the_rows_or_fit_on_too_few():
    X, y = make_problem(390, 4, seed=54)
    with pytest.raises(PPackError, match="holds out 200 calibration rows, more than half of the 390"):
        PackSVC(comm=SELF, probability=True).fit(X, y)
    assert PackSVC(comm=SELF, probability=True, calibration="training").fit(X, y).training_["held_out"] is None
    X, y = make_problem(1000, 4, seed=54)
    with pytest.raises(PPackError, match=r"validation=0.05 holds out \d+ rows, fewer than the 200"):
        PackSVC(comm=SELF, probability=True, validation=0.05).fit(X, y)
    model = PackSVC(comm=SELF, probability=True, validation=0.3).fit(X, y)  # the validation rows calibrate
    held = model.training_["held_out"]
    assert held["for"] == "validation" and held["rows"] >= 200
    assert model.training_["probability"] == {"fitted_on": "validation rows", "rows": held["rows"], "power": 1.0}
    assert model.training_["iterations"] == 1000 - held["rows"]


@pytest.mark.parametrize("n", [300, 4000, 10_000, 2_000_000])
def test_slice_rows_are_a_twentieth_between_200_and_50000(n):
    from ppack.packsvm.calibration import slice_rows

    assert slice_rows(n) == {300: 200, 4000: 200, 10_000: 500, 2_000_000: 50_000}[n]


@pytest.mark.mpi(min_size=2)
def test_the_calibration_slice_is_the_rows_of_smallest_hash_on_any_number_of_ranks():
    """Exactly slice_rows(m) rows, the ones a sort of every row's hash puts first (the numpy
    twin), whatever the number of ranks."""
    from ppack.data.sampler import row_hashes
    from ppack.mpi.comm import chunk
    from ppack.packsvm.calibration import calibration_holdout

    m, seed = 12_345, 9
    start, stop = chunk(m, WORLD.Get_rank(), WORLD.Get_size())
    holdout, rows = calibration_holdout(WORLD, start, stop, m, seed)
    assert (holdout, rows) == calibration_holdout(SELF, 0, m, m, seed)
    smallest = np.sort(np.argsort(row_hashes(np.arange(m), seed), kind="stable")[:617])  # 5% of 12,345
    assert rows == 617
    np.testing.assert_array_equal(np.flatnonzero(held_out(np.arange(m), *holdout)), smallest)


def test_probabilities_of_a_model_trained_without_them_is_a_clear_error():
    X, y = make_problem(100, 4, seed=52)
    model = PackSVC(comm=SELF, iterations=100).fit(X, y)
    assert not hasattr(model, "predict_proba")  # scikit-learn's convention: absent without probability=True
    with pytest.raises(PPackError, match="probability=True"):
        model.probabilities_of(model.decision_function(X))
