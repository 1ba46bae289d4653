"""A grid pass with ``tol`` (``packsvm/column_stops.py``): each grid column stops on its own
convergence test, at the iteration its separate fit with the same tol stops, and equals that
fit (averaged model included); the pass ends when all have stopped or at T."""
import numpy as np
import pytest
from mpi4py import MPI

from ppack import PackSVC
from ppack.packsvm.grid import column_of, train_grid

from helpers import make_multiclass, make_problem

SELF, WORLD = MPI.COMM_SELF, MPI.COMM_WORLD
COMMS = [pytest.param(SELF, id="1rank"), pytest.param(WORLD, id="all", marks=pytest.mark.mpi(min_size=2))]
PARAMS = {"kernel": "rbf", "gamma": 0.3, "epochs": 3, "pack": 20, "seed": 5, "dtype": "float64", "tol": 0.1,
          "tol_window": 40}
Cs = [0.5, 4.0, 30.0]


@pytest.mark.parametrize("comm", COMMS)
@pytest.mark.parametrize("which", ["binary", "multiclass"])
def test_each_column_stops_where_its_separate_fit_does(comm, which):
    X, y = make_problem(150, 6, seed=1) if which == "binary" else make_multiclass(150, 6, seed=2)
    folds = np.arange(len(y)) % 3
    fit = train_grid(PackSVC(comm=comm, **PARAMS), X, y, Cs, folds, 3)
    T = 3 * len(y)
    K = fit.K
    stops = fit.stops.iteration.reshape(len(Cs), 4, K)
    assert np.all(stops == stops[:, :, :1])  # a grid point and fold's K class columns stop together
    ran = np.where(stops[:, :, 0] >= 0, stops[:, :, 0], T)
    assert len(np.unique(ran)) > 2 and ran.min() < T  # columns stop at different iterations
    assert fit.state.iteration == (T if np.any(stops < 0) else ran.max())  # the pass ends with the last column
    for g, f in [(0, 0), (1, 2), (2, 1), (1, 3)]:  # f = 3: the refit column
        weights = None if f == 3 else (folds != f).astype(float)
        separate = PackSVC(comm=comm, C=Cs[g], **PARAMS).fit(X, y, sample_weight=weights)
        assert separate.training_["iterations_done"] == ran[g, f]
        assert separate.training_["converged"] == (ran[g, f] < T)
        if f < 3:
            rows, decisions, _ = fit.held_out(g, f)
            np.testing.assert_allclose(decisions, separate.decision_function(X[rows]), rtol=0, atol=1e-9)
        else:
            refit = fit.refit(g)
            np.testing.assert_allclose(refit.decision_function(X), separate.decision_function(X), rtol=0, atol=1e-9)
            assert refit.training_["iterations_done"] == ran[g, f]
            assert refit.training_["converged"] == separate.training_["converged"]
    assert column_of(K, 3, 2, 3, K - 1) == fit.table.n_columns - 1


def test_search_with_tol_refits_the_separate_fit():
    """PackGridSearchCV accepts tol: its best estimator is the separate fit with the same tol."""
    from ppack.model_selection import PackGridSearchCV
    X, y = make_problem(150, 6, seed=1)
    search = PackGridSearchCV(PackSVC(comm=SELF, **PARAMS), {"C": Cs}, cv=3).fit(X, y)
    separate = PackSVC(comm=SELF, **{**PARAMS, **search.best_params_}).fit(X, y)
    np.testing.assert_allclose(search.decision_function(X), separate.decision_function(X), rtol=0, atol=1e-9)
    assert search.best_estimator_.training_["iterations_done"] == separate.training_["iterations_done"]
