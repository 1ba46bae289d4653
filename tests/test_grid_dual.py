"""A grid pass under the dual optimizer: each column is the dual problem of its separate fit
(C per column, the held-out fold without dual variables), stops by its own KKT gap, and at
convergence equals that separate dual fit; the refit model carries its columns' report."""
import numpy as np
import pytest
from mpi4py import MPI

from ppack import PackSVC
from ppack.errors import PPackError
from ppack.packsvm.grid import column_of, train_grid

from helpers import make_multiclass, make_problem

SELF, WORLD = MPI.COMM_SELF, MPI.COMM_WORLD
COMMS = [pytest.param(SELF, id="1rank"), pytest.param(WORLD, id="all", marks=pytest.mark.mpi(min_size=2))]
PARAMS = {"kernel": "rbf", "gamma": 0.3, "optimizer": "dual", "epochs": 1000, "tol": 1e-5, "pack": 20, "seed": 5,
          "dtype": "float64"}
Cs = [0.5, 2.0, 8.0]


@pytest.mark.parametrize("comm", COMMS)
@pytest.mark.parametrize("which", ["binary", "multiclass"])
def test_each_dual_column_is_its_separate_fit_at_convergence(comm, which):
    X, y = make_problem(120, 5, seed=1) if which == "binary" else make_multiclass(120, 5, seed=2)
    folds = np.arange(len(y)) % 3
    fit = train_grid(PackSVC(comm=comm, **PARAMS), X, y, Cs, folds, 3)
    assert fit.dual is not None and fit.dual.column_converged.all()
    assert all(fit.converged(g) for g in range(len(Cs)))
    for g, f in [(0, 0), (1, 2), (2, 1), (2, 3)]:  # f = 3: the refit column
        weights = None if f == 3 else (folds != f).astype(float)
        separate = PackSVC(comm=comm, C=Cs[g], **PARAMS).fit(X, y, sample_weight=weights)
        assert separate.converged_
        if f < 3:
            rows, decisions, _ = fit.held_out(g, f)
            np.testing.assert_allclose(decisions, separate.decision_function(X[rows]), rtol=0, atol=1e-5)
        else:
            refit = fit.refit(g)
            np.testing.assert_allclose(refit.decision_function(X), separate.decision_function(X), rtol=0, atol=1e-5)
            report = refit.training_["convergence"]
            assert refit.optimizer_ == "dual" and refit.converged_ and report["optimizer"] == "dual"
            assert len(report["primal"]) == fit.K
            # one problem: each run's dual is below the other's primal, and the primals differ by at most a gap
            theirs = separate.training_["convergence"]
            for P, D, P_sep, D_sep in zip(report["primal"], report["dual"], theirs["primal"], theirs["dual"]):
                assert D <= P_sep * (1 + 1e-12) and D_sep <= P * (1 + 1e-12)
                assert abs(P - P_sep) <= max(P - D, P_sep - D_sep) * (1 + 1e-9)
            assert report["relative_duality_gap"] < 1e-4
    assert column_of(fit.K, 3, 2, 3, fit.K - 1) == fit.table.n_columns - 1


def test_a_capped_dual_grid_tells_which_points_stopped_short():
    """At a cap of 1 epoch and C = 1000 no column of that grid point converges: converged(g) is
    False there, and its refit model's advice is a dual fit's warning."""
    X, y = make_problem(120, 5, seed=1)
    folds = np.arange(len(y)) % 2
    fit = train_grid(PackSVC(comm=SELF, **{**PARAMS, "epochs": 1, "tol": 0.1}), X, y, [0.01, 1000.0], folds, 2)
    assert not fit.converged(1)
    model = fit.refit(1)
    assert "the dual optimizer stopped at its cap of 1 epochs" in model.training_["convergence"]["advice"]
    assert not model.converged_ and model.n_iter_ == 1


def test_search_under_the_dual_refits_the_separate_fit():
    """PackGridSearchCV passes optimizer="dual" on: its best estimator is the separate dual fit."""
    from ppack.model_selection import PackGridSearchCV
    X, y = make_problem(120, 5, seed=1)
    search = PackGridSearchCV(PackSVC(comm=SELF, **PARAMS), {"C": Cs}, cv=3).fit(X, y)
    separate = PackSVC(comm=SELF, **{**PARAMS, **search.best_params_}).fit(X, y)
    assert search.best_estimator_.optimizer_ == "dual"
    np.testing.assert_allclose(search.decision_function(X), separate.decision_function(X), rtol=0, atol=1e-5)


def test_auto_takes_the_dual_for_a_grid_whose_largest_C_needs_it():
    X, y = make_problem(80, 5, seed=1)
    folds = np.arange(len(y)) % 2
    params = {**PARAMS, "optimizer": "auto", "epochs": 2, "tol": None}
    assert train_grid(PackSVC(comm=SELF, **params), X, y, [1.0, 100.0], folds, 2).dual is not None
    assert train_grid(PackSVC(comm=SELF, **params), X, y, [1.0, 10.0], folds, 2).dual is None


def test_a_dual_grid_refuses_what_it_does_not_do(tmp_path):
    X, y = make_problem(60, 5, seed=1)
    folds = np.arange(len(y)) % 2
    with pytest.raises(PPackError, match="scores='progressive'.*dual"):
        train_grid(PackSVC(comm=SELF, **PARAMS), X, y, Cs, folds, 2, scores="progressive")
    with pytest.raises(PPackError, match="validation=0.2 is an SGD option"):
        train_grid(PackSVC(comm=SELF, validation=0.2, **PARAMS), X, y, Cs, folds, 2)
    with pytest.raises(PPackError, match="a grid pass under the dual optimizer does not write checkpoints"):
        train_grid(PackSVC(comm=SELF, **PARAMS), X, y, Cs, folds, 2, checkpoint=tmp_path / "grid.h5")
