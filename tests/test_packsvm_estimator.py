"""PackSVC: learning, label values, saving and loading on any number of ranks."""
import numpy as np
import pytest
from mpi4py import MPI

from ppack import PackSVC

from conftest import fitted, make_problem

WORLD = MPI.COMM_WORLD
SELF = MPI.COMM_SELF
PARAMS = {"kernel": "rbf", "gamma": 0.2, "C": 5.0, "iterations": 1500, "pack": 100, "seed": 11}


def test_model_learns_a_nonlinear_problem():
    X, y = make_problem(1500, 6, seed=8)
    Xt, yt = make_problem(500, 6, seed=9)
    model = fitted(X, y, C=10.0, gamma=0.5, epochs=3, iterations=None)
    assert model.score(Xt, yt) > 0.85
    linear = fitted(X, y, kernel="linear", C=10.0, epochs=3, iterations=None)
    assert linear.score(Xt, yt) < 0.7  # the problem really is nonlinear


def test_any_two_label_values_map_to_the_classes():
    X, y = make_problem(300, 6, seed=10, labels=(3.0, 7.0))
    model = fitted(X, y)
    np.testing.assert_array_equal(model.classes_, [3.0, 7.0])
    assert set(np.unique(model.predict(X))) <= {3.0, 7.0}
    assert model.score(X, y) > 0.7


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("sparse", [False, True])
def test_saved_model_predicts_the_same_on_one_and_all_ranks(sparse, mpi_tmp_path):
    X, y = make_problem(500, 10, sparse=sparse, seed=26)
    model = PackSVC(comm=WORLD, **PARAMS).fit(X, y)
    path = mpi_tmp_path / "model.h5"
    model.save(path)
    expected = model.decision_function(X)
    on_all = PackSVC.load(path, WORLD)
    np.testing.assert_allclose(on_all.decision_function(X), expected, rtol=1e-10, atol=1e-10)
    on_one = PackSVC.load(path, SELF)
    np.testing.assert_allclose(on_one.decision_function(X), expected, rtol=1e-10, atol=1e-10)
    assert on_one.n_support_ == model.n_support_ and len(on_one.table_) == model.n_support_
    np.testing.assert_array_equal(on_one.classes_, [-1.0, 1.0])
