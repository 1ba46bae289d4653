"""One-class SVM across nu at the default epochs, beside LIBSVM (scikit-learn's OneClassSVM):
the outlier fraction and the support vectors at small nu, the offset rho as the minimiser of
the objective for the returned w, and the interval the replay keeps rho in."""
import functools
import math

import numpy as np
import pytest
from mpi4py import MPI
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.preprocessing import StandardScaler
from sklearn.svm import OneClassSVM

from ppack import PackOneClassSVM
from ppack.packsvm.objective import nu_quantile
from ppack.packsvm.replay import ONE_CLASS, replay_pack

from naive import kernel_matrix

SELF = MPI.COMM_SELF
NUS = (0.01, 0.05, 0.1, 0.3, 0.5)
SETS = ("digits3", "cancer_benign", "blob")


def training_set(name):
    """X (m, d) of a one-class set: the threes of digits and breast cancer's benign rows,
    standardised over the whole set, or a 2-D Gaussian blob."""
    if name == "digits3":
        X, y = load_digits(return_X_y=True)
        return StandardScaler().fit_transform(X)[y == 3]
    if name == "cancer_benign":
        X, y = load_breast_cancer(return_X_y=True)
        return StandardScaler().fit_transform(X)[y == 1]
    return np.random.default_rng(0).normal(size=(300, 2))


def outlier_fraction(decisions, rho):
    """Rows below -1e-3 |rho|: LIBSVM puts many support vectors on the boundary at small nu,
    whose decision values round to either side of 0."""
    return float(np.mean(decisions < -1e-3 * abs(rho)))


@functools.lru_cache(maxsize=None)
def fitted_pair(name, nu):
    """(ppack's model, LIBSVM's model, X) on the set ``name`` at ``nu``, rbf with gamma 1 / n_features,
    ppack at its defaults (1 epoch) in float64, LIBSVM (scikit-learn's OneClassSVM) at its own."""
    X = training_set(name)
    gamma = 1.0 / X.shape[1]
    model = PackOneClassSVM(comm=SELF, gamma=gamma, nu=nu, dtype="float64").fit(X)
    return model, OneClassSVM(kernel="rbf", gamma=gamma, nu=nu).fit(X), X


@pytest.mark.parametrize("nu", NUS)
@pytest.mark.parametrize("name", SETS)
def test_support_vectors_reach_most_of_nu_m_at_every_nu(name, nu):
    model, _, X = fitted_pair(name, nu)
    assert model.n_support_ >= 0.8 * nu * X.shape[0]  # the optimum has at least nu m


# LIBSVM's optimum puts 23 of the 183 threes exactly on the boundary at nu 0.1 and only 7
# outside (3.8%); the objective's own rho for any w leaves ceil(nu m) - 1 = 18 rows (9.8%)
# below it, unless w is exact to 1e-3 on those 23 rows
BOUNDARY_HEAVY = {("digits3", 0.1)}


@pytest.mark.parametrize("nu", NUS)
@pytest.mark.parametrize("name", SETS)
def test_outlier_fraction_follows_libsvm_at_every_nu(name, nu, request):
    if (name, nu) in BOUNDARY_HEAVY:
        request.applymarker(pytest.mark.xfail(strict=True, reason="LIBSVM's boundary holds 23 of the 183 rows"))
    model, libsvm, X = fitted_pair(name, nu)
    ours = outlier_fraction(model.decision_function(X), model.offset_)
    theirs = outlier_fraction(libsvm.decision_function(X), libsvm.offset_[0])
    assert ours <= nu  # the nu-property: at most nu m rows outside
    assert abs(ours - theirs) <= 0.05, (ours, theirs)


def objective_in_rho(scores, weights, nu, rho):
    """1/m sum_i weights_i max(0, rho - scores_i) - nu rho."""
    return np.mean(weights * np.maximum(0.0, rho - scores)) - nu * rho


@pytest.mark.parametrize("weighted", [False, True])
def test_rho_minimises_the_objective_for_the_returned_w(weighted):
    X = training_set("blob")
    m = X.shape[0]
    weights = np.random.default_rng(1).uniform(0.2, 3.0, m) if weighted else np.ones(m)
    model = PackOneClassSVM(comm=SELF, gamma=0.5, nu=0.05, dtype="float64", objective=True).fit(
        X, sample_weight=weights if weighted else None)
    scores = model.score_samples(X)
    # the objective is piecewise linear in rho with kinks at the scores: its least value is at one
    best = min(objective_in_rho(scores, weights, 0.05, s) for s in scores)
    assert objective_in_rho(scores, weights, 0.05, model.offset_) <= best + 1e-15
    below, at_most = weights[scores < model.offset_].sum(), weights[scores <= model.offset_].sum()
    assert below < 0.05 * m <= at_most  # the nu-property, in weights
    # the reported objective is taken at this rho: nu/2 ||w||^2 + the loss part - nu rho
    coef = model.table_.coef[:, 0] * model.scale_
    rows = X[model.table_.keys]
    norm = coef @ kernel_matrix(rows, rows, "rbf", 0.5) @ coef
    want = 0.05 / 2 * norm + objective_in_rho(scores, weights, 0.05, model.offset_)
    assert model.training_["objective"]["value"] == pytest.approx(want, rel=1e-9)
    assert model.training_["rho_sgd"] != model.offset_


def test_nu_quantile_counts_weights_and_an_integer_nu_m():
    scores = np.array([0.5, 0.1, 0.4, 0.2, 0.3])
    assert nu_quantile(scores, None, 0.3, 5) == 0.2  # ceil(1.5) = 2nd smallest
    assert nu_quantile(scores, None, 0.4, 5) == 0.2  # nu m = 2: any rho in [0.2, 0.3] minimises, the least
    many = np.arange(25.0)
    assert 0.28 * 25 > 7.0 and nu_quantile(many, None, 0.28, 25) == 6.0  # 7.000000000000001 is 7
    weights = np.array([1.0, 0.5, 1.0, 0.5, 3.0])  # sorted by score: 0.5, 0.5, 3.0, 1.0, 1.0
    assert nu_quantile(scores, weights, 0.2, 5) == 0.2  # the first two weigh 1.0 = nu m
    assert nu_quantile(scores, weights, 0.21, 5) == 0.3
    assert nu_quantile(scores, weights * 0.1, 0.5, 5) == 0.5  # weights short of nu m: the largest score


def test_replay_keeps_rho_in_its_interval():
    """rho's step at t = 10 with nu = 0.1 and c = 1 is 10 / 10 times its sub-gradient: row 0
    (no step) lifts rho from 0.45 by 0.1 to the top 0.5, row 1 (stepped on) takes it 0.818
    down, to the bottom 0."""
    pair = np.array([[1.0, 0.2], [0.2, 1.0]])
    pred = np.array([0.6, 0.3])  # w_9's scores: row 0 above rho, row 1 below once rho is 0.5
    coef, loss, average = np.empty(2), np.empty(2), np.empty(3)
    offset = np.array([0.45, 0.0])
    replay_pack(np.ones(2), pred, pair, 9, 1.0, 0.5, 0.1, coef, loss, average_out=average, mode=ONE_CLASS,
                offset=offset, rho_step=10.0, rho_box=(0.0, 0.5), project=False)
    assert coef[0] == 0.0 and coef[1] != 0.0
    assert offset[0] == 0.0
    assert offset[1] == pytest.approx(10 * 11 * 12 * 0.5, rel=1e-15)  # a_10 rho_10 + a_11 rho_11
    unbounded = np.array([0.45, 0.0])
    replay_pack(np.ones(2), np.array([0.6, 0.3]), pair, 9, 1.0, 0.5, 0.1, np.empty(2), np.empty(2),
                average_out=np.empty(3), mode=ONE_CLASS, offset=unbounded, rho_step=10.0, project=False)
    assert unbounded[0] == pytest.approx(0.45 + 0.1 - 10 / 11 * 0.9, rel=1e-14)
    assert unbounded[1] == pytest.approx(10 * 11 * 12 * 0.55 + 11 * 12 * 13 * unbounded[0], rel=1e-14)


def test_small_nu_no_longer_collapses_to_one_support_vector():
    """The failure as filed: nu 0.05 on the threes, 1 support vector and no outlier, at 1, 5 and 20 epochs."""
    X = training_set("digits3")
    for epochs in (1, 5, 20):
        model = PackOneClassSVM(comm=SELF, gamma=1 / 64, nu=0.05, epochs=epochs, dtype="float64").fit(X)
        assert model.n_support_ >= 0.05 * X.shape[0]
        # at most ceil(nu m) - 1 rows below rho; fewer when some lie within 1e-3 |rho| of it
        outliers = outlier_fraction(model.decision_function(X), model.offset_) * 183
        assert 0.8 * 0.05 * 183 <= outliers <= math.ceil(0.05 * 183) - 1
