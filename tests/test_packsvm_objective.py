"""The primal objective of a trained model, read after training."""
import numpy as np
import pytest
from mpi4py import MPI

from ppack import PackSVC
from ppack.packsvm.objective import SAMPLE_ROWS, objective_rows

from helpers import make_multiclass, make_problem
from naive import kernel_matrix

SELF = MPI.COMM_SELF
WORLD = MPI.COMM_WORLD


def naive_objective(model, X, y, weights=None):
    """sigma/2 a'Ka + mean weighted hinge, per problem, from the model's coefficients (one rank)."""
    keys, coef = model.table_.keys, model.table_.coef * np.reshape(model.scale_, (1, -1))
    K = kernel_matrix(X[keys], X[keys], "rbf", model.spec_.gamma)
    norm = np.einsum("jc,jk,kc->c", coef, K, coef)
    f = kernel_matrix(X, X[keys], "rbf", model.spec_.gamma) @ coef
    values = model._class_values
    signs = np.where(y == values[1], 1.0, -1.0)[:, None] if f.shape[1] == 1 else \
        np.where(y[:, None] == values[None, :], 1.0, -1.0)
    hinge = np.maximum(0, 1 - signs * f) * (1.0 if weights is None else weights[:, None])
    return 0.5 * model.sigma_ * norm + hinge.mean(axis=0)


@pytest.mark.parametrize("average", [False, True])
@pytest.mark.parametrize("multiclass", [False, True])
def test_objective_is_the_primal_of_the_returned_model(multiclass, average):
    """The tracked norm (or, averaged, the norm from the support vectors' decision values) plus
    the hinge part equal the naive a'Ka + hinge."""
    X, y = make_multiclass(400, 5, seed=81) if multiclass else make_problem(400, 5, seed=81)
    weights = np.random.default_rng(2).uniform(0.5, 2.0, 400)
    model = PackSVC(gamma=0.3, C=5.0, epochs=1, dtype="float64", average=average, comm=SELF).fit(
        X, y, sample_weight=weights)
    got = model.training_["objective"]
    expected = naive_objective(model, X, y, weights)
    assert got["exact"] and got["rows"] == 400
    np.testing.assert_allclose(np.add(got["norm_term"], got["hinge_term"]), expected, rtol=1e-9)
    assert got["value"] == pytest.approx(expected.mean(), rel=1e-9)


@pytest.mark.mpi(min_size=2)
def test_objective_on_all_ranks_equals_one_rank():
    X, y = make_problem(300, 5, seed=82)
    params = {"gamma": 0.3, "C": 5.0, "epochs": 1, "dtype": "float64", "average": True}
    one = PackSVC(comm=SELF, **params).fit(X, y).training_["objective"]
    every = PackSVC(comm=WORLD, **params).fit(X, y).training_["objective"]
    assert every["value"] == pytest.approx(one["value"], rel=1e-9)


def test_large_sets_sample_a_fixed_set_of_rows_unless_exact_is_asked():
    sample = objective_rows(10 * SAMPLE_ROWS, seed=4)
    assert len(sample) == SAMPLE_ROWS and np.all(np.diff(sample) > 0)
    np.testing.assert_array_equal(sample, objective_rows(10 * SAMPLE_ROWS, seed=4))
    assert objective_rows(10 * SAMPLE_ROWS, seed=4, exact=True) is None  # every row, taken block by block
    assert objective_rows(SAMPLE_ROWS, seed=4) is None
