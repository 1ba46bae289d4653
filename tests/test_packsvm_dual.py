"""The dual coordinate optimizer: its packed steps against one coordinate at a time, its optimum
against L-BFGS-B on the box-constrained dual and LIBLINEAR's for the linear kernel, its
invariance to the pack size and the rank count, its certificate, and what it refuses."""
import warnings

import numpy as np
import pytest
from mpi4py import MPI

from ppack import PackSVC
from ppack.errors import PPackError
from ppack.packsvm.dual.coordinate import EPOCH_FIGURES, coordinate_steps
from ppack.packsvm.dual.fit import CERTIFIED_GAP, advice

from helpers import check_certificate, fails_with, make_multiclass, make_problem
from naive import box_dual_reference, dual_block_sweeps, dual_steps_one_at_a_time, kernel_matrix

WORLD = MPI.COMM_WORLD
DUAL = {"kernel": "rbf", "gamma": 0.2, "C": 1.0, "optimizer": "dual", "epochs": 1000, "tol": 1e-4, "dtype": "float64",
        "seed": 3, "comm": MPI.COMM_SELF}


def packed_steps(K, y, alpha, bounds, ids, sweeps=1, inner_tol=0.0, tracked=None):
    """One pack of rows ``ids`` through ``coordinate_steps``, no shrinking: the new alphas
    (``tracked``, a list, gets the tracked alpha' Q alpha and sum(alpha) changes)."""
    r = len(ids)
    predictions = (K[ids] @ (alpha * y))[None, :]
    pairs = K[np.ix_(ids, ids)][np.triu_indices(r)][None, :]
    delta, stepped, margin = np.empty((1, r)), np.empty((1, r)), np.empty((1, r))
    pg_old = np.array([[np.inf, -np.inf]])
    active = np.ones((1, r), dtype=np.uint8)
    w2, alpha_sum, figures = np.zeros(1), np.zeros(1), np.zeros((1, EPOCH_FIGURES))
    figures[:, 0], figures[:, 1] = -np.inf, np.inf
    coordinate_steps(predictions, pairs, (alpha * y)[ids][None, :], y[ids], bounds[ids], np.array([-1]),
                     np.array([-1]), np.full(r, -1), np.array([0]), np.ones(1), pg_old, active, w2, alpha_sum,
                     figures, delta, stepped, margin, sweeps, inner_tol)
    if tracked is not None:
        tracked += [w2[0], alpha_sum[0]]
    out = alpha.copy()
    out[ids] += delta[0] * y[ids]
    np.testing.assert_array_equal(stepped[0], (delta[0] != 0).astype(float))
    return out


def objectives(K, y, alpha, bounds):
    """(primal, dual) of the C-SVC problem at the model alpha y."""
    f = K @ (alpha * y)
    w2 = (alpha * y) @ f
    return 0.5 * w2 + bounds @ np.maximum(0.0, 1.0 - y * f), alpha.sum() - 0.5 * w2


def model_alpha(model, n, column=0):
    """alpha (n,) of a one-rank model's column, from its table (coefficients alpha y)."""
    coef = np.zeros(n)
    coef[model.table_.keys] = model.table_.coef[:, column]
    return coef


@pytest.mark.parametrize("r", [1, 7, 40])
def test_a_pack_of_steps_equals_the_steps_one_at_a_time(r):
    """Row k's margin in a pack is its partial sum plus the pack's earlier steps through the pair
    kernels: the alphas after the pack equal r steps taken one at a time from scratch."""
    X, y = make_problem(60, 5, seed=4)
    K = kernel_matrix(X, X, "rbf", 0.3)
    rng = np.random.default_rng(1)
    bounds = rng.uniform(0.5, 3.0, 60)
    alpha = np.where(rng.random(60) < 0.5, 0.0, rng.uniform(0, 1, 60) * bounds)
    alpha[:5] = bounds[:5]  # some start at the upper bound
    ids = rng.permutation(60)[:r]
    np.testing.assert_allclose(packed_steps(K, y, alpha, bounds, ids), dual_steps_one_at_a_time(K, y, alpha, bounds, ids),
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize("r, sweeps, inner_tol", [(7, 2, 0.0), (40, 5, 0.0), (40, 100, 1e-3)])
def test_a_packs_sweeps_equal_passes_one_at_a_time(r, sweeps, inner_tol):
    """Further sweeps over the pack through its pair kernels equal further passes over its rows
    one at a time from scratch, ending at the same pass, and track alpha' Q alpha and sum(alpha)."""
    X, y = make_problem(60, 5, seed=4)
    K = kernel_matrix(X, X, "rbf", 0.05)  # close to a constant: single steps crawl, the sweeps matter
    rng = np.random.default_rng(2)
    bounds = rng.uniform(5.0, 30.0, 60)
    alpha = np.where(rng.random(60) < 0.5, 0.0, rng.uniform(0, 1, 60) * bounds)
    ids = rng.permutation(60)[:r]
    tracked = []
    ours = packed_steps(K, y, alpha, bounds, ids, sweeps, inner_tol, tracked)
    np.testing.assert_allclose(ours, dual_block_sweeps(K, y, alpha, bounds, ids, sweeps, inner_tol), rtol=0, atol=1e-9)
    assert np.all(ours >= 0) and np.all(ours <= bounds)
    coef, before = ours * y, alpha * y
    assert tracked[0] == pytest.approx(coef @ K @ coef - before @ K @ before, rel=1e-9)
    assert tracked[1] == pytest.approx(ours.sum() - alpha.sum(), rel=1e-12)
    if sweeps > 2:  # the block's own subproblem gains from every further pass
        once = packed_steps(K, y, alpha, bounds, ids)
        Q = K * np.outer(y, y)
        assert ours.sum() - 0.5 * ours @ Q @ ours > once.sum() - 0.5 * once @ Q @ once


def test_the_advice_tells_a_gap_above_tol_from_one_awaiting_its_check():
    """Stopped by the cap, the warning says whether the KKT gap was above tol, or within it on the
    shrunk rows before the epoch over every row that confirms it."""
    report = {"converged": False, "relative_duality_gap": 0.02, "epochs": 3, "tol": 0.1}
    assert "0.5 above tol=0.1, relative duality gap 0.02" in advice({**report, "kkt_gap": 0.5})
    assert "0.05 within, on the shrunk rows" in advice({**report, "kkt_gap": 0.05})
    assert advice({**report, "converged": True, "kkt_gap": 0.05}) is None


def test_a_capped_run_certified_within_one_percent_has_converged():
    """At the cap, a column whose certified relative duality gap is at most CERTIFIED_GAP has
    converged (no warning) though its KKT gap is above tol; above it, the run warns."""
    X, y = make_problem(300, 5, seed=6)
    outcomes = set()
    for epochs in (3, 4):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = PackSVC(**{**DUAL, "epochs": epochs, "tol": 1e-3}).fit(X, y)
        report = model.training_["convergence"]
        assert report["kkt_gap"] > 1e-3
        certified = report["relative_duality_gap"] <= CERTIFIED_GAP
        assert model.converged_ == report["converged"] == certified
        assert any("the dual optimizer stopped at its cap" in str(w.message) for w in caught) != certified
        outcomes.add(certified)
    assert outcomes == {False, True}


def test_the_step_keeps_the_box_and_tracks_the_objective():
    """Every alpha stays in [0, C_i]; the tracked alpha' Q alpha and sum(alpha) equal a recount."""
    X, y = make_problem(50, 4, seed=5)
    K = kernel_matrix(X, X, "rbf", 0.5)
    bounds = np.full(50, 0.5)
    ids = np.arange(50)
    r = 50
    predictions, pairs = np.zeros((1, r)), K[np.triu_indices(r)][None, :]
    delta, stepped, margin = np.empty((1, r)), np.empty((1, r)), np.empty((1, r))
    w2, alpha_sum, figures = np.zeros(1), np.zeros(1), np.zeros((1, EPOCH_FIGURES))
    coordinate_steps(predictions, pairs, np.zeros((1, r)), y, bounds, np.array([-1]), np.array([-1]),
                     np.full(r, -1), np.array([0]), np.ones(1), np.array([[np.inf, -np.inf]]),
                     np.ones((1, r), dtype=np.uint8), w2, alpha_sum, figures, delta, stepped, margin, 1, 0.0)
    alpha = delta[0] * y[ids]
    assert alpha.min() >= 0.0 and alpha.max() <= 0.5
    assert np.count_nonzero(alpha == 0.5) > 0
    coef = alpha * y
    assert w2[0] == pytest.approx(coef @ K @ coef, rel=1e-12)
    assert alpha_sum[0] == pytest.approx(alpha.sum(), rel=1e-12)


def test_it_reaches_the_box_constrained_optimum_of_l_bfgs_b():
    """Converged, its primal is within 1% of the L-BFGS-B optimum's and its dual within 1e-6,
    and the certified relative gap is what P and D of the model give."""
    X, y = make_problem(200, 5, seed=6)
    model = PackSVC(**DUAL).fit(X, y)
    assert model.converged_
    K = kernel_matrix(X, X, "rbf", 0.2)
    bounds = np.full(200, 1.0)
    ours = model_alpha(model, 200) * y
    P, D = objectives(K, y, ours, bounds)
    P_ref, D_ref = objectives(K, y, box_dual_reference(K, y, bounds), bounds)
    assert abs(P - P_ref) <= 0.01 * P_ref
    assert D == pytest.approx(D_ref, rel=1e-6)
    report = model.training_["convergence"]
    check_certificate(report, P, D)
    assert report["kkt_gap"] <= 1e-4
    assert model.training_["optimizer"] == "dual" and model.n_iter_ == report["epochs"] < 1000
    np.testing.assert_array_equal(model.dual_coef_, model.table_.coef.T)
    # support vectors whose alpha returned to 0 left the table: what it holds is what LIBSVM counts
    assert np.all(model.table_.coef[:, 0] != 0) and model.n_support_ == np.count_nonzero(ours)


def test_class_and_sample_weights_scale_each_rows_box():
    """C_i = C times the row's class and sample weights; a row of weight 0 never gets an alpha."""
    X, y = make_problem(150, 5, seed=7)
    w = np.random.default_rng(2).uniform(0.2, 2.0, 150)
    w[:10] = 0.0
    model = PackSVC(class_weight={1.0: 2.0}, **DUAL).fit(X, y, sample_weight=w)
    bounds = 1.0 * w * np.where(y > 0, 2.0, 1.0)
    alpha = model_alpha(model, 150) * y
    assert np.all(alpha[:10] == 0.0) and np.all(alpha <= bounds + 1e-12) and np.all(alpha >= 0)
    K = kernel_matrix(X, X, "rbf", 0.2)
    D = objectives(K, y, alpha, bounds)[1]
    assert D == pytest.approx(objectives(K, y, box_dual_reference(K, y, bounds), bounds)[1], rel=1e-6)


def test_the_linear_kernel_matches_liblinears_dual_without_bias():
    """LIBLINEAR -s 3 -B -1 (L1-loss dual coordinate descent, no bias) at a tight -e: the same
    primal within 1%."""
    liblinear = pytest.importorskip("liblinear.liblinearutil")
    X, y = make_problem(300, 6, seed=8)
    model = PackSVC(**{**DUAL, "kernel": "linear", "C": 0.5, "tol": 1e-4, "epochs": 3000}).fit(X, y)
    assert model.converged_
    m = liblinear.train(y.tolist(), X.tolist(), "-s 3 -c 0.5 -B -1 -e 1e-6 -q")
    w = np.array([m.get_decfun_coef(j + 1) for j in range(6)])
    primal_ll = 0.5 * w @ w + 0.5 * np.maximum(0, 1 - y * (X @ w)).sum()
    assert model.training_["convergence"]["primal"][0] == pytest.approx(primal_ll, rel=1e-2)


def test_the_pack_size_does_not_change_the_optimum():
    """r = 1 against r = 100, float64, at convergence: the same coefficients to 1e-9."""
    X, y = make_problem(200, 5, seed=9)
    params = {**DUAL, "tol": 1e-11, "epochs": 3000}  # the alphas' error is about the KKT gap's
    one, packed = PackSVC(pack=1, **params).fit(X, y), PackSVC(pack=100, **params).fit(X, y)
    assert one.converged_ and packed.converged_
    np.testing.assert_allclose(model_alpha(one, 200), model_alpha(packed, 200), rtol=0, atol=1e-9)


def test_shrinking_draws_fewer_rows_and_the_check_brings_them_back():
    """Rows at a bound leave the draws; before stopping every row comes back for one epoch."""
    X, y = make_problem(400, 5, seed=10)
    model = PackSVC(**{**DUAL, "C": 20.0, "tol": 1e-2, "epochs": 3000}).fit(X, y)
    history = model.training_["convergence"]["history"]
    drawn = history["rows_drawn"]
    assert drawn[0] == 400 and min(drawn) < 200 and drawn[-1] == 400
    assert model.converged_ and model.training_["convergence"]["certified_kkt_gap"] <= 2e-2


def test_one_vs_rest_columns_are_their_binary_problems():
    """K classes train K dual problems on shared draws: each column's dual objective equals its
    own binary problem's optimum."""
    X, y = make_multiclass(240, 5, seed=11)
    model = PackSVC(**{**DUAL, "gamma": 0.5, "C": 2.0}).fit(X, y)
    assert model.converged_
    K = kernel_matrix(X, X, "rbf", 0.5)
    for c, label in enumerate(model.classes_):
        yc = np.where(y == label, 1.0, -1.0)
        alpha = model_alpha(model, 240, c) * yc
        bounds = np.full(240, 2.0)
        assert objectives(K, yc, alpha, bounds)[1] == pytest.approx(
            objectives(K, yc, box_dual_reference(K, yc, bounds), bounds)[1], rel=1e-5)
    assert model.score(X, y) > 0.9


def test_the_cap_ends_a_run_short_of_tol_with_a_warning():
    """At the epoch cap above tol: not converged, and the warning names the gap and the cap."""
    X, y = make_problem(300, 5, seed=12)
    with pytest.warns(Warning, match="cap of 2 epochs with a KKT gap"):
        model = PackSVC(**{**DUAL, "C": 100.0, "epochs": 2, "tol": 1e-4}).fit(X, y)
    assert not model.converged_ and model.n_iter_ == 2
    report = model.training_["convergence"]
    assert report["relative_duality_gap"] > 0 and report["kkt_gap"] > 1e-4


def test_converged_runs_are_silent():
    X, y = make_problem(200, 5, seed=13)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = PackSVC(**{**DUAL, "tol": 0.1}).fit(X, y)
    assert model.converged_


@pytest.mark.parametrize("option, value", [("step", 0.3), ("average", False), ("sampling", "uniform"),
                                           ("tol_window", 50), ("pipeline", "on"), ("placement", "cost"),
                                           ("validation", 0.2)])
def test_sgd_only_options_are_refused(option, value):
    X, y = make_problem(60, 4, seed=14)
    with pytest.raises(PPackError, match=f"{option}=.* is an SGD option and the optimizer is dual"):
        PackSVC(**{**DUAL, option: value}).fit(X, y)


def test_the_sigmoid_kernel_is_refused():
    X, y = make_problem(60, 4, seed=15)
    with pytest.raises(PPackError, match="not positive semi-definite"):
        PackSVC(**{**DUAL, "kernel": "sigmoid"}).fit(X, y)


def test_probabilities_and_the_calibration_slice_work_with_the_dual():
    """The calibration slice is never drawn (no alpha), and Platt's sigmoids fit on it."""
    X, y = make_problem(600, 5, seed=16)
    model = PackSVC(**{**DUAL, "probability": True, "tol": 0.01}).fit(X, y)
    held = model.held_out_["rows"]
    assert held >= 200
    proba = model.predict_proba(X[:20])
    assert proba.shape == (20, 2) and np.allclose(proba.sum(axis=1), 1.0)
    assert model.training_["convergence"]["history"]["rows_drawn"][0] == 600 - held


def test_auto_picks_by_the_sgd_bound():
    """optimizer="auto": the dual where C / epochs > 10, the SGD elsewhere."""
    X, y = make_problem(200, 5, seed=17)
    assert PackSVC(optimizer="auto", C=10.0, epochs=1, dtype="float64", comm=MPI.COMM_SELF).fit(X, y).optimizer_ == "sgd"
    with pytest.warns(Warning, match="cap of 2 epochs"):
        assert PackSVC(optimizer="auto", C=50.0, epochs=2, dtype="float64", comm=MPI.COMM_SELF).fit(X, y).optimizer_ == "dual"


@pytest.mark.mpi(min_size=2)
def test_the_rank_count_does_not_change_the_optimum():
    """p ranks against one, float64, at convergence: the same coefficients to 1e-9, and the
    support vectors spread over the ranks."""
    X, y = make_problem(300, 5, seed=18)
    params = {**DUAL, "tol": 1e-6, "epochs": 3000}
    many = PackSVC(**{**params, "comm": WORLD}).fit(X, y)
    one = PackSVC(**params).fit(X, y)
    coef = np.zeros(300)
    coef[many.table_.keys] = many.table_.coef[:, 0]
    coef = WORLD.allreduce(coef)
    assert many.converged_ and np.count_nonzero(WORLD.allgather(many.table_.n)) == WORLD.Get_size()
    np.testing.assert_allclose(coef, model_alpha(one, 300), rtol=0, atol=1e-9)
    assert many.training_["allreduce_calls"] >= 2 * many.training_["packs"]


def test_the_command_line_refuses_sgd_options_and_other_problems(capsys, tmp_path):
    from helpers import write_libsvm
    X, y = make_problem(80, 4, seed=19)
    path = tmp_path / "d.txt"
    write_libsvm(path, X, y, comm=MPI.COMM_SELF)
    fails_with(capsys, ["train", "--data", str(path), "--optimizer", "dual", "--step", "0.3"],
               "step=0.3 is an SGD option", comm=MPI.COMM_SELF)
    fails_with(capsys, ["train", "--data", str(path), "--svm-type", "one_class", "--optimizer", "dual"],
               "--optimizer", comm=MPI.COMM_SELF)
