"""PackGridSearchCV and the grid pass (``packsvm/grid.py``): each column equals the single run
it stands for, the refit equals a separate fit, scikit-learn's interface, the refusals."""
import numpy as np
import pytest
from mpi4py import MPI
from sklearn.model_selection import GridSearchCV, KFold, ShuffleSplit
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ppack import PackSVC, PackSVR, PackOneClassSVM, PPackError
from ppack.model_selection import PackGridSearchCV
from ppack.packsvm.grid import train_grid

from helpers import make_multiclass, make_problem

SELF, WORLD = MPI.COMM_SELF, MPI.COMM_WORLD
COMMS = [pytest.param(SELF, id="1rank"), pytest.param(WORLD, id="all", marks=pytest.mark.mpi(min_size=2))]
PARAMS = {"kernel": "rbf", "gamma": 0.3, "epochs": 2, "pack": 20, "seed": 5, "dtype": "float64"}
Cs = [0.5, 4.0]


def problems():
    return [make_problem(150, 6, seed=1), make_multiclass(180, 6, seed=2)]


@pytest.mark.parametrize("comm", COMMS)
@pytest.mark.parametrize("which, average", [("binary", False), ("multiclass", True)])
def test_each_grid_column_equals_the_separate_fit_it_stands_for(comm, which, average):
    """Column (C, fold f) predicts fold f's rows as a PackSVC with the same seed and C fitted
    with sample_weight 0 on fold f; the refit column is a fit on every row."""
    X, y = problems()[0 if which == "binary" else 1]
    folds = np.arange(len(y)) % 3
    fit = train_grid(PackSVC(comm=comm, average=average, **PARAMS), X, y, Cs, folds, 3)
    for g, C in enumerate(Cs):
        for f in ([0, 2] if g == 0 else [1]):
            rows, decisions, labels = fit.held_out(g, f)
            separate = PackSVC(comm=comm, C=C, average=average, **PARAMS).fit(
                X, y, sample_weight=(folds != f).astype(float))
            np.testing.assert_allclose(decisions, separate.decision_function(X[rows]), rtol=0, atol=1e-9)
            assert np.array_equal(labels, y[rows])
    refit = fit.refit(1)
    separate = PackSVC(comm=comm, C=Cs[1], average=average, **PARAMS).fit(X, y)
    np.testing.assert_allclose(refit.decision_function(X), separate.decision_function(X), rtol=0, atol=1e-9)
    assert refit.n_support_ == separate.n_support_
    assert refit.C_ == separate.C_ and refit.sigma_ == separate.sigma_
    assert np.array_equal(refit.classes_, separate.classes_)


def test_svr_columns_and_class_weights_equal_their_separate_fits():
    X, y = make_problem(150, 5, seed=4)
    target = X[:, 0] - 0.5 * X[:, 1]
    folds = np.arange(150) % 3
    params = {k: v for k, v in PARAMS.items()}
    fit = train_grid(PackSVR(epsilon=0.05, comm=SELF, **params), X, target, Cs, folds, 3)
    rows, decisions, _ = fit.held_out(1, 2)
    separate = PackSVR(epsilon=0.05, C=Cs[1], comm=SELF, **params).fit(
        X, target, sample_weight=(folds != 2).astype(float))
    np.testing.assert_allclose(decisions, separate.predict(X[rows]), rtol=0, atol=1e-9)
    search = PackGridSearchCV(PackSVR(epsilon=0.05, comm=SELF, **params), {"C": Cs}, cv=3).fit(X, target)
    refit = PackSVR(epsilon=0.05, comm=SELF, **params, **search.best_params_).fit(X, target)
    np.testing.assert_allclose(search.predict(X), refit.predict(X), rtol=0, atol=1e-9)
    assert search.score(X, target) == pytest.approx(refit.score(X, target), abs=1e-12)
    fit = train_grid(PackSVC(class_weight="balanced", comm=SELF, **PARAMS), X, y, Cs, folds, 3)
    rows, decisions, _ = fit.held_out(0, 1)
    separate = PackSVC(class_weight="balanced", C=Cs[0], comm=SELF, **PARAMS).fit(
        X, y, sample_weight=(folds != 1).astype(float))
    np.testing.assert_allclose(decisions, separate.decision_function(X[rows]), rtol=0, atol=1e-9)


@pytest.mark.parametrize("comm", COMMS)
def test_search_has_gridsearchcvs_results_and_refits_the_best(comm):
    X, y = make_multiclass(180, 6, seed=2)
    estimator = PackSVC(comm=comm, **PARAMS)
    grid = {"C": Cs, "gamma": [0.1, 0.3]}
    ours = PackGridSearchCV(estimator, grid, cv=3).fit(X, y)
    theirs = GridSearchCV(estimator, grid, cv=3).fit(X, y)
    # how many held-out rows each score is from, and the convergence verdict on each grid point
    extra = set(ours.cv_results_) - set(theirs.cv_results_)
    assert set(theirs.cv_results_) <= set(ours.cv_results_)
    assert extra == {f"split{f}_scored_rows" for f in range(3)} | {"converged"}
    assert ours.cv_results_["converged"].tolist() == [True] * 4  # sigma T = epochs / C >= 0.5
    assert ours.cv_results_["params"] == theirs.cv_results_["params"]
    assert len(ours.grid_passes_) == 1  # both gammas, both C values and the folds in one pass
    scores = np.array([ours.cv_results_[f"split{f}_test_score"] for f in range(3)]).T
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"], scores.mean(axis=1))
    assert ours.best_index_ == int(np.argmax(ours.cv_results_["mean_test_score"]))
    assert ours.cv_results_["rank_test_score"][ours.best_index_] == 1
    assert ours.best_params_ == ours.cv_results_["params"][ours.best_index_]
    separate = PackSVC(comm=comm, **{**PARAMS, **ours.best_params_}).fit(X, y)
    np.testing.assert_allclose(ours.decision_function(X), separate.decision_function(X), rtol=0, atol=1e-9)
    assert ours.score(X, y) == separate.score(X, y)
    assert np.array_equal(ours.predict(X), separate.predict(X))
    # a fold's score is the accuracy of that fold's column on its held-out rows
    folds = np.zeros(len(y), dtype=int)
    from sklearn.model_selection import StratifiedKFold
    for f, (_, test) in enumerate(StratifiedKFold(3).split(X, y)):
        folds[test] = f
    column = PackSVC(comm=comm, **{**PARAMS, **ours.best_params_}).fit(
        X, y, sample_weight=(folds != 1).astype(float))
    assert ours.cv_results_["split1_test_score"][ours.best_index_] == column.score(X[folds == 1], y[folds == 1])


def test_scorers_splitters_and_a_pipeline():
    X, y = make_problem(150, 6, seed=1)
    estimator = PackSVC(comm=SELF, **PARAMS)
    search = PackGridSearchCV(estimator, {"C": Cs}, cv=KFold(3, shuffle=True, random_state=0),
                              scoring="roc_auc").fit(X, y)
    assert np.all((search.cv_results_["mean_test_score"] > 0.5) & (search.cv_results_["mean_test_score"] <= 1))
    splits = list(KFold(3).split(X))
    by_list = PackGridSearchCV(estimator, {"C": Cs}, cv=splits, scoring="accuracy").fit(X, y)
    by_int = PackGridSearchCV(estimator, {"C": Cs}, cv=KFold(3)).fit(X, y)
    np.testing.assert_array_equal(by_list.cv_results_["mean_test_score"], by_int.cv_results_["mean_test_score"])
    pipeline = make_pipeline(StandardScaler(), PackGridSearchCV(estimator, {"C": Cs}, cv=3)).fit(X, y)
    assert pipeline.score(X, y) > 0.8
    assert pipeline[-1].best_estimator_.n_features_in_ == 6


@pytest.mark.parametrize("change, pattern", [
    ({"probability": True}, "probability=True: a grid search does not calibrate"),
    ({"sigma": 0.01}, "sigma: a grid search sets each column's sigma from its C"),
])
def test_refusals_are_one_line(change, pattern):
    X, y = make_problem(60, 4, seed=1)
    with pytest.raises(PPackError, match=pattern) as error:
        PackGridSearchCV(PackSVC(comm=SELF, **{**PARAMS, **change}), {"C": Cs}, cv=3).fit(X, y)
    assert "\n" not in str(error.value)


def test_a_grid_that_would_not_fit_is_refused_before_training():
    X, y = make_multiclass(180, 6, seed=2)
    search = PackGridSearchCV(PackSVC(comm=SELF, **PARAMS), {"C": [0.1, 1, 10, 100]}, cv=5, memory_limit=100_000)
    with pytest.raises(PPackError, match=r"grid: 96 columns \(4 class columns x 4 grid points x 6 folds and refit\) "
                                         r"need .* per rank \(\d+ bytes per stored row") as error:
        search.fit(X, y)
    assert "\n" not in str(error.value)
    assert not hasattr(search, "cv_results_")


def test_other_refusals():
    X, y = make_problem(60, 4, seed=1)
    with pytest.raises(PPackError, match="needs predict_proba"):
        PackGridSearchCV(PackSVC(comm=SELF, **PARAMS), {"C": Cs}, cv=3, scoring="neg_log_loss").fit(X, y)
    with pytest.raises(PPackError, match="the test sets overlap"):
        PackGridSearchCV(PackSVC(comm=SELF, **PARAMS), {"C": Cs}, cv=ShuffleSplit(3, random_state=0)).fit(X, y)
    with pytest.raises(PPackError, match="scoring: PackOneClassSVM has no score of its own"):
        PackGridSearchCV(PackOneClassSVM(comm=SELF), {"nu": [0.1]}, cv=3).fit(X, y)
    with pytest.raises(PPackError, match="y: a one-class search trains without labels"):
        PackGridSearchCV(PackOneClassSVM(comm=SELF), {"nu": [0.1]}, cv=3, scoring="accuracy").fit(X)
    with pytest.raises(PPackError, match=r"nu: a grid needs values in \(0, 1\]"):
        PackGridSearchCV(PackOneClassSVM(comm=SELF), {"nu": [0.5, 2.0]}, cv=3, scoring="accuracy").fit(X, y)
    with pytest.raises(PPackError, match="scores: 'progressive' does not score one-class columns"):
        PackGridSearchCV(PackOneClassSVM(comm=SELF), {"nu": [0.1]}, cv=3, scoring="accuracy",
                         scores="progressive").fit(X, y)
    with pytest.raises(PPackError, match="return_train_score: only False"):
        PackGridSearchCV(PackSVC(comm=SELF, **PARAMS), {"C": Cs}, cv=3, return_train_score=True).fit(X, y)
    for n_jobs in (0, -2, 1.5, True):
        with pytest.raises(PPackError, match=r"n_jobs: None, -1 \(the rank's share"):
            PackGridSearchCV(PackSVC(comm=SELF, **PARAMS), {"C": Cs}, cv=3, n_jobs=n_jobs).fit(X, y)


def test_n_jobs_sets_the_passes_threads_and_not_the_results():
    """n_jobs = k runs the passes on k numba threads (restored afterwards); the scores do not
    depend on it (the cores' sums are the same whatever the thread count)."""
    import numba

    X, y = make_problem(150, 6, seed=1)
    seen = []

    def progress(state, stats, n_support, total):
        seen.append(numba.get_num_threads())
    before = numba.get_num_threads()
    one = PackGridSearchCV(PackSVC(comm=SELF, progress=progress, **PARAMS), {"C": Cs}, cv=3, n_jobs=1).fit(X, y)
    assert set(seen) == {1} and numba.get_num_threads() == before
    default = PackGridSearchCV(PackSVC(comm=SELF, **PARAMS), {"C": Cs}, cv=3, n_jobs=-1).fit(X, y)
    np.testing.assert_array_equal(one.cv_results_["mean_test_score"], default.cv_results_["mean_test_score"])
    np.testing.assert_array_equal(one.decision_function(X), default.decision_function(X))


def test_verbose_reports_the_memory_per_stored_row(capsys):
    X, y = make_problem(60, 4, seed=1)
    PackGridSearchCV(PackSVC(comm=SELF, average=True, **PARAMS), {"C": Cs}, cv=3, verbose=1).fit(X, y)
    err = capsys.readouterr().err
    # 2 C values x (3 folds + refit) = 8 columns, 24 bytes each with averaging
    assert "PackGridSearchCV: grid of 2 C values x 3 folds + the refit: 8 columns: 192 bytes per stored row" in err
    assert "20/120 it (17%)" in err  # the pass's progress as a fit shows it: its first pack of 2 epochs x 60 rows


# kernel settings whose kernels come from dot products: one pass, one GEMM (or reduction) per tile
DOT_SETTINGS = [{"gamma": 0.1}, {"kernel": "poly", "gamma": 0.2, "degree": 2, "coef0": 1.0},
                {"kernel": "sigmoid", "gamma": 0.05, "coef0": -0.5}, {"kernel": "linear"}, {"gamma": 0.6}]


@pytest.mark.parametrize("comm", COMMS)
@pytest.mark.parametrize("which, sparse, pipeline", [("binary", False, "off"), ("multiclass", True, "on"),
                                                     ("binary", True, "on"), ("multiclass", False, "off")])
def test_columns_of_several_kernel_settings_equal_their_separate_fits(comm, which, sparse, pipeline):
    """One pass over rbf (two gammas), poly, sigmoid and linear: column (setting, C, fold f)
    predicts fold f's rows, to rounding, as a PackSVC of that setting fitted with sample_weight
    0 on fold f (the table stores every setting's support vectors, so the sums' order differs)."""
    import scipy.sparse as sp
    X, y = (make_problem(120, 6, seed=1) if which == "binary" else make_multiclass(120, 6, seed=2))
    if sparse:
        X = sp.csr_matrix(np.where(np.abs(X) < 0.3, 0.0, X))
    folds = np.arange(len(y)) % 3
    params = {**PARAMS, "pipeline": pipeline}
    fit = train_grid(PackSVC(comm=comm, **params), X, y, Cs, folds, 3, kernels=DOT_SETTINGS)
    assert fit.table.n_columns == (1 if which == "binary" else 4) * len(DOT_SETTINGS) * len(Cs) * 4
    for s, setting in enumerate(DOT_SETTINGS):
        c, f = s % 2, s % 3
        g = s * len(Cs) + c
        assert fit.Cs[g] == Cs[c] and fit.settings[g] == setting
        rows, decisions, labels = fit.held_out(g, f)
        separate = PackSVC(comm=comm, C=Cs[c], **{**params, **setting}).fit(
            X, y, sample_weight=(folds != f).astype(float))
        np.testing.assert_allclose(decisions, separate.decision_function(X[rows]), rtol=1e-9, atol=1e-9)
        assert np.array_equal(labels, y[rows])
    refit = fit.refit(2 * len(Cs) + 1)  # sigmoid (not positive semi-definite: no projection), C = Cs[1]
    separate = PackSVC(comm=comm, C=Cs[1], **{**params, **DOT_SETTINGS[2]}).fit(X, y)
    np.testing.assert_allclose(refit.decision_function(X), separate.decision_function(X), rtol=1e-9, atol=1e-9)
    assert refit.spec_ == separate.spec_ and refit.kernel == "sigmoid" and refit.n_support_ == separate.n_support_


def test_laplacian_settings_share_a_pass_of_their_own():
    X, y = make_problem(120, 5, seed=3)
    folds = np.arange(len(y)) % 3
    settings = [{"kernel": "laplacian", "gamma": 0.2}, {"kernel": "laplacian", "gamma": 0.7}]
    fit = train_grid(PackSVC(comm=SELF, **PARAMS), X, y, Cs, folds, 3, kernels=settings)
    rows, decisions, _ = fit.held_out(3, 0)  # gamma 0.7, C = Cs[1]
    separate = PackSVC(comm=SELF, C=Cs[1], **{**PARAMS, **settings[1]}).fit(X, y,
                                                                            sample_weight=(folds != 0).astype(float))
    np.testing.assert_allclose(decisions, separate.decision_function(X[rows]), rtol=1e-9, atol=1e-9)
    with pytest.raises(PPackError, match="rbf and laplacian do not share a pass"):
        train_grid(PackSVC(comm=SELF, **PARAMS), X, y, Cs, folds, 3, kernels=[{}, settings[0]])
    with pytest.raises(PPackError, match="C: not a kernel parameter"):
        train_grid(PackSVC(comm=SELF, **PARAMS), X, y, Cs, folds, 3, kernels=[{"C": 1.0}])
    search = PackGridSearchCV(PackSVC(comm=SELF, **PARAMS), {"C": Cs, "kernel": ["rbf", "laplacian", "poly"],
                                                            "gamma": [0.2, 0.7]}, cv=3).fit(X, y)
    assert [len(p["kernels"]) for p in search.grid_passes_] == [4, 2]  # rbf and poly; laplacian
    from sklearn.model_selection import StratifiedKFold
    test = next(StratifiedKFold(3).split(X, y))[1]  # split 0's held-out rows
    weight = np.ones(len(y))
    weight[test] = 0.0
    column = PackSVC(comm=SELF, C=Cs[1], **{**PARAMS, **settings[1]}).fit(X, y, sample_weight=weight)
    assert search.cv_results_["split0_test_score"][search.cv_results_["params"].index(
        {"C": Cs[1], "gamma": 0.7, "kernel": "laplacian"})] == column.score(X[test], y[test])


def test_a_gpu_pass_over_several_kernel_settings_is_refused_in_one_line():
    X, y = make_problem(60, 4, seed=1)
    with pytest.raises(PPackError, match=r"device='gpu': a grid over 2 kernel settings in one pass runs its kernel "
                                         "sums on the CPU only"):
        train_grid(PackSVC(comm=SELF, device="gpu", **PARAMS), X, y, Cs, np.arange(60) % 3, 3,
                   kernels=[{"gamma": 0.1}, {"gamma": 0.2}])


def outliers(n_inliers=150, n_outliers=30, seed=6):
    """Gaussian inliers (+1) and wider, shifted outliers (-1), interleaved."""
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(size=(n_inliers, 4)), 3 * rng.normal(size=(n_outliers, 4)) + 2])
    y = np.r_[np.ones(n_inliers), -np.ones(n_outliers)]
    order = rng.permutation(len(y))
    return X[order], y[order]


@pytest.mark.parametrize("comm", COMMS)
@pytest.mark.parametrize("average", [False, True])
def test_one_class_columns_equal_the_separate_fits_they_stand_for(comm, average):
    """One-class column (nu, fold f) is a PackOneClassSVM fit with nu m_f / n (a fraction of the
    rows it trains on) and sample_weight 0 on fold f, its rho the nu-quantile that fit sets;
    the refit column is a fit with nu on every row. Two kernel settings, each with its own
    radius (rho's interval, the projection bound)."""
    X, y = outliers()
    n, F = len(y), 3
    folds = np.arange(n) % F
    nus, gammas = [0.1, 0.3], [0.3, 0.1]
    params = {**PARAMS, "epochs": 1, "average": average}
    weights = np.linspace(0.5, 1.5, n)
    fit = train_grid(PackOneClassSVM(comm=comm, **params), X, y, nus, folds, F, sample_weight=weights,
                     kernels=[{"gamma": gamma} for gamma in gammas])
    rhos = set()
    for g, (gamma, nu) in enumerate([(gamma, nu) for gamma in gammas for nu in nus]):
        for f in ([0, 2] if g % 2 == 0 else [1]):
            rows, decisions, labels = fit.held_out(g, f)
            separate = PackOneClassSVM(comm=comm, **{**params, "gamma": gamma},
                                       nu=nu * np.count_nonzero(folds != f) / n).fit(
                X, sample_weight=np.where(folds == f, 0.0, weights))
            np.testing.assert_allclose(decisions, separate.decision_function(X[rows]), rtol=0, atol=1e-9)
            assert np.array_equal(labels, y[rows])
            rhos.add(round(separate.rho_, 12))
        refit = fit.refit(g)
        separate = PackOneClassSVM(comm=comm, **{**params, "gamma": gamma}, nu=nu).fit(X, sample_weight=weights)
        np.testing.assert_allclose(refit.decision_function(X), separate.decision_function(X), rtol=0, atol=1e-9)
        assert refit.rho_ == pytest.approx(separate.rho_, abs=1e-12)
        assert (refit.nu, refit.sigma_, refit.C_, refit.n_support_) == (nu, separate.sigma_, separate.C_,
                                                                        separate.n_support_)
    assert len(rhos) > 1


def test_one_class_search_scores_held_out_rows_against_the_labels():
    X, y = outliers()
    estimator = PackOneClassSVM(comm=SELF, **{**PARAMS, "epochs": 1})
    grid = {"nu": [0.05, 0.2, 0.5], "gamma": [0.05, 0.3]}
    search = PackGridSearchCV(estimator, grid, cv=3, scoring="f1").fit(X, y)
    assert len(search.grid_passes_) == 1 and search.grid_passes_[0]["nu"] == [0.05, 0.2, 0.5]
    folds = np.zeros(len(y), dtype=int)
    for f, (_, test) in enumerate(KFold(3).split(X)):  # an outlier detector's cv=3: KFold, unshuffled
        folds[test] = f
    best = search.best_params_
    column = PackOneClassSVM(comm=SELF, **{**PARAMS, "epochs": 1, "gamma": best["gamma"]},
                             nu=best["nu"] * np.count_nonzero(folds != 2) / len(y)).fit(
        X, sample_weight=(folds != 2).astype(float))
    from sklearn.metrics import f1_score
    assert search.cv_results_["split2_test_score"][search.best_index_] == pytest.approx(
        f1_score(y[folds == 2], column.predict(X[folds == 2])), abs=1e-12)
    scores = search.cv_results_["mean_test_score"]
    assert scores.max() > scores.min()  # nu matters on data with 1 row in 6 an outlier
    separate = PackOneClassSVM(comm=SELF, **{**PARAMS, "epochs": 1, **best}).fit(X)
    np.testing.assert_array_equal(search.predict(X), separate.predict(X))
    np.testing.assert_allclose(search.score_samples(X), separate.score_samples(X), rtol=0, atol=1e-9)
    assert not hasattr(PackGridSearchCV(PackSVC(comm=SELF), {"C": Cs}), "score_samples")
    assert search.score(X, y) == pytest.approx(f1_score(y, separate.predict(X)), abs=1e-12)


@pytest.mark.parametrize("comm", COMMS)
@pytest.mark.parametrize("which, average", [("binary", True), ("multiclass", False)])
def test_validation_stops_each_column_where_its_separate_fit_stops(comm, which, average):
    """With validation, every column trains without the held-out rows (sigma and T from the
    rows trained on) and each grid point and fold's columns stop on their own patience: the
    stop iteration, the decision values and the refit's history are the separate fits'."""
    X, y = make_problem(240, 6, seed=1) if which == "binary" else make_multiclass(240, 6, seed=2)
    folds = np.arange(len(y)) % 3
    params = {**PARAMS, "epochs": 5, "validation": 0.2, "patience": 2, "validation_every": 2, "average": average}
    Cs3 = [0.5, 4.0, 50.0]
    fit = train_grid(PackSVC(comm=comm, **params), X, y, Cs3, folds, 3)
    stops = set()
    for g, C in enumerate(Cs3):
        for f in range(3):
            separate = PackSVC(comm=comm, C=C, **params).fit(X, y, sample_weight=(folds != f).astype(float))
            stop = fit.stops.iteration[(g * 4 + f) * fit.K]
            assert (stop if stop >= 0 else fit.T) == separate.training_["iterations_done"]
            stops.add(int(stop))
            rows, decisions, _ = fit.held_out(g, f)
            np.testing.assert_allclose(decisions, separate.decision_function(X[rows]), rtol=0, atol=1e-9)
        refit = fit.refit(g)
        separate = PackSVC(comm=comm, C=C, **params).fit(X, y)
        np.testing.assert_allclose(refit.decision_function(X), separate.decision_function(X), rtol=0, atol=1e-9)
        assert refit.training_["validation"]["history"] == separate.training_["validation"]["history"]
        assert refit.training_["held_out"] == separate.training_["held_out"]
        assert (refit.C_, refit.sigma_, refit.training_["iterations_done"], refit.training_["converged"]) == (
            separate.C_, separate.sigma_, separate.training_["iterations_done"], separate.training_["converged"])
    assert len(stops) > 1 and max(stops) < fit.T  # the columns stopped early, and not together


def test_grid_points_that_stop_short_say_so_in_cv_results():
    """A C so large that one epoch is far too few (sigma T = 1e-4) is marked not converged,
    as its separate fit would warn; the small C beside it is not."""
    X, y = make_problem(120, 5, seed=4)
    params = {**PARAMS, "epochs": 1}
    search = PackGridSearchCV(PackSVC(comm=SELF, **params), {"C": [1.0, 10000.0]}, cv=2, refit=False).fit(X, y)
    assert search.cv_results_["converged"].tolist() == [True, False]
