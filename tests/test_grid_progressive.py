"""A grid pass's progressive scores (``packsvm/progressive.py``): each sampled held-out row's
record equals the prediction a plain S-packSVM with that column's C and weights tested at the
row's last draw; the same on 1 and all ranks, pipelined or not; rows never drawn are left out."""
import numpy as np
import pytest
from mpi4py import MPI

from ppack import PackSVC, PackSVR, PPackError
from ppack.data.sampler import make_sampler
from ppack.model_selection import PackGridSearchCV
from ppack.packsvm.grid import train_grid

from helpers import make_multiclass, make_problem
from naive import spack_reference

SELF, WORLD = MPI.COMM_SELF, MPI.COMM_WORLD
COMMS = [pytest.param(SELF, id="1rank"), pytest.param(WORLD, id="all", marks=pytest.mark.mpi(min_size=2))]
PARAMS = {"kernel": "rbf", "gamma": 0.3, "pack": 20, "seed": 5, "dtype": "float64", "average": False,
          "sampling": "uniform", "step": 0.5}
Cs = [0.5, 4.0]


def last_tests(ids, tested, n):
    """Each row's prediction at its last draw (NaN: never drawn): the slow reference's record."""
    out = np.full(n, np.nan)
    for t, i in enumerate(ids):
        out[i] = tested[t]
    return out


@pytest.mark.parametrize("comm", COMMS)
@pytest.mark.parametrize("pipeline", ["off", "on"])
def test_progressive_record_equals_the_reference_runs_tests(comm, pipeline):
    """Binary, T < n (some rows never drawn): every held-out row's record is the prediction the
    reference fit of its column (sample_weight 0 on its fold) tested at the row's last draw."""
    X, y = make_problem(150, 6, seed=1)
    n, T = len(y), 130
    folds = np.arange(n) % 3
    fit = train_grid(PackSVC(comm=comm, iterations=T, pipeline=pipeline, **PARAMS), X, y, Cs, folds, 3,
                     scores="progressive")
    sampler = make_sampler("uniform", n, PARAMS["seed"])
    ids = np.concatenate([sampler.take(min(PARAMS["pack"], T - t)) for t in range(0, T, PARAMS["pack"])])
    assert len(np.unique(ids)) < T  # rows drawn twice: the last draw's test is kept
    drawn = np.zeros(n, dtype=bool)
    drawn[ids] = True
    assert 0 < np.count_nonzero(~drawn) < n  # the case of rows left out is exercised
    for g, C in enumerate(Cs):
        for f in range(3):
            weights = (folds != f).astype(float)
            _, tested = spack_reference(X, y, 1.0 / (n * C), ids, "rbf", PARAMS["gamma"], weights=weights,
                                         step=PARAMS["step"])
            expected = last_tests(ids, tested, n)
            rows, decisions, labels = fit.held_out(g, f)
            assert np.array_equal(rows, np.flatnonzero((folds == f) & drawn))
            np.testing.assert_allclose(decisions, expected[rows], rtol=1e-9, atol=1e-12)
            assert np.array_equal(labels, y[rows])
    assert np.all(np.isnan(fit.held[~drawn]))


@pytest.mark.parametrize("comm", COMMS)
def test_progressive_multiclass_and_svr_match_pipelined_and_over_ranks(comm):
    """Multiclass (K columns per grid point) and epsilon-SVR (its decision values minus a fixed rho):
    pipelined and unpipelined records agree to rounding, and so do 1 and all ranks."""
    X, y = make_multiclass(120, 5, seed=2)
    folds = np.arange(len(y)) % 3
    target = X[:, 0] - 0.5 * X[:, 1]
    runs = {}
    for name, make, labels in (("svc", lambda **kw: PackSVC(epochs=1.5, **PARAMS, **kw), y),
                               ("svr", lambda **kw: PackSVR(epsilon=0.05, epochs=1.5, **PARAMS, **kw), target)):
        for ranks in [SELF] + ([comm] if comm is not SELF else []):
            for pipeline in ("off", "on"):
                fit = train_grid(make(comm=ranks, pipeline=pipeline), X, labels, Cs, folds, 3, scores="progressive")
                runs[name, ranks.Get_size(), pipeline] = fit.held
    for name in ("svc", "svr"):
        first = runs[name, 1, "off"]
        assert np.count_nonzero(~np.isnan(first)) > 0
        for key, held in runs.items():
            if key[0] == name:
                np.testing.assert_allclose(held, first, rtol=1e-9, atol=1e-12, err_msg=str(key))


@pytest.mark.parametrize("comm", COMMS)
def test_search_with_progressive_scores(comm):
    """PackGridSearchCV(scores="progressive"): each split's score is the estimator's score of
    the recorded rows, and split<i>_scored_rows counts them (the pass counts the whole fold)."""
    X, y = make_problem(150, 6, seed=1)
    estimator = PackSVC(comm=comm, iterations=130, **PARAMS)
    search = PackGridSearchCV(estimator, {"C": Cs}, cv=3, scores="progressive").fit(X, y)
    passed = PackGridSearchCV(estimator, {"C": Cs}, cv=3).fit(X, y)
    from sklearn.model_selection import StratifiedKFold
    folds = np.zeros(len(y), dtype=np.int64)
    for f, (_, test) in enumerate(StratifiedKFold(3).split(X, y)):
        folds[test] = f
    fit = train_grid(PackSVC(comm=comm, iterations=130, **PARAMS), X, y, Cs, folds, 3, scores="progressive")
    for g in range(len(Cs)):
        for f in range(3):
            rows, decisions, labels = fit.held_out(g, f)
            assert search.cv_results_[f"split{f}_test_score"][g] == fit.template.validation_score(decisions, labels)
            assert search.cv_results_[f"split{f}_scored_rows"][g] == len(rows) < np.count_nonzero(folds == f)
            assert passed.cv_results_[f"split{f}_scored_rows"][g] == np.count_nonzero(folds == f)
    assert search.best_estimator_.score(X, y) == passed.best_estimator_.score(X, y) or \
        search.best_index_ != passed.best_index_
    with pytest.raises(PPackError, match="^scores: one of pass, progressive, got 'later'$"):
        PackGridSearchCV(estimator, {"C": Cs}, cv=3, scores="later").fit(X, y)
