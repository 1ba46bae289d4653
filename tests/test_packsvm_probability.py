"""Platt scaling on out-of-bag rows: the sigmoid fit, the rows it uses, the probabilities."""
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


def test_probabilities_are_sigmoids_normalised_over_the_classes():
    f = np.array([-2.0, 0.0, 3.0])
    binary = probabilities(f, np.array([-1.0]), np.array([0.5]))
    np.testing.assert_allclose(binary[:, 1], 1 / (1 + np.exp(-1.0 * f + 0.5)))
    np.testing.assert_allclose(binary.sum(axis=1), 1.0)
    D = np.array([[1.0, -1.0, 0.5], [-3.0, 2.0, 0.0]])
    P = probabilities(D, np.array([-2.0, -1.0, -3.0]), np.array([0.0, 0.1, -0.2]))
    raw = 1 / (1 + np.exp(D * np.array([-2.0, -1.0, -3.0]) + np.array([0.0, 0.1, -0.2])))
    np.testing.assert_allclose(P, raw / raw.sum(axis=1, keepdims=True))


@pytest.mark.parametrize("multiclass", [False, True])
def test_models_trained_with_probability_give_calibrated_class_probabilities(multiclass, mpi_tmp_path):
    """Probabilities sum to 1, pick classes about as well as the decision values (the per-class
    sigmoids may reorder close calls), are about as confident as they are right, and survive a
    save and a load on all ranks."""
    from ppack.base import load_model

    problem = make_multiclass if multiclass else make_problem
    X, y = problem(600, 6, seed=51)
    Xt, yt = problem(600, 6, seed=52)  # held out: confidence is compared with accuracy on unseen rows
    model = PackSVC(comm=WORLD, gamma=0.3, C=10.0, epochs=1.0, seed=2, probability=True, sampling="uniform").fit(X, y)
    assert model.training_["probability"]["fitted_on"] == "out-of-bag rows"
    assert 150 < model.training_["probability"]["rows"] < 300  # about exp(-1) of 600
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


def test_probabilities_of_a_model_trained_without_them_is_a_clear_error():
    X, y = make_problem(100, 4, seed=52)
    model = PackSVC(comm=SELF, iterations=100).fit(X, y)
    assert not hasattr(model, "predict_proba")  # scikit-learn's convention: absent without probability=True
    with pytest.raises(PPackError, match="probability=True"):
        model.probabilities_of(model.decision_function(X))
