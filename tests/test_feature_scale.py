"""The feature-scale check (``packsvm.feature_scale``): its figures against a direct numpy
computation, its verdict, and how a fit says it (a ``FeatureScaleWarning`` from rank 0 once,
``training_["kernel_scale"]``, one ``ppack train: warning:`` line and the metrics JSON)."""
import json
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

from ppack.base import FeatureScaleWarning
from ppack.kernels.spec import KernelSpec
from ppack.packsvm import feature_scale

SELF = MPI.COMM_SELF


def direct(rows, kernel, gamma, coef0=0.0):
    """The kernel values of the distinct pairs, one pair at a time, and what the suggested
    gamma is 1 / the median of (squared distances, L1 distances, |<x, z>|)."""
    values, spreads = [], []
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            x, z = rows[i], rows[j]
            spread = {"rbf": np.sum((x - z) ** 2), "laplacian": np.sum(np.abs(x - z)),
                      "sigmoid": abs(np.dot(x, z))}[kernel]
            values.append(np.tanh(gamma * np.dot(x, z) + coef0) if kernel == "sigmoid" else np.exp(-gamma * spread))
            spreads.append(spread)
    return np.array(values), np.array(spreads)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "sigmoid"])
@pytest.mark.parametrize("sparse", [False, True])
def test_the_figures_are_the_mean_over_distinct_pairs(kernel, sparse):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(12, 5)) * (rng.uniform(size=(12, 5)) < 0.6)
    spec = KernelSpec(kernel, 0.3, coef0=0.5, offset=1.0)  # the offset (bias) is left out
    rows = sp.csr_matrix(X) if sparse else X
    found = feature_scale.kernel_figures(rows, spec)
    values, spreads = direct(X, kernel, 0.3, 0.5)
    assert found["rows"] == 12 and found["kernel"] == kernel and found["gamma"] == 0.3
    assert found["mean"] == pytest.approx(np.mean(np.abs(values)), rel=1e-12)
    assert found["suggested_gamma"] == pytest.approx(1 / np.median(spreads), rel=1e-12)


def test_kernels_without_a_floor_or_ceiling_are_not_judged():
    X = np.ones((4, 2)) * 1e4
    assert feature_scale.kernel_figures(X, KernelSpec("linear", 1.0)) is None
    assert feature_scale.kernel_figures(X, KernelSpec("poly", 1.0)) is None
    assert feature_scale.kernel_figures(X[:1], KernelSpec("rbf", 1.0)) is None


def test_the_sample_spreads_over_the_data_and_a_wide_sparse_laplacian_keeps_fewer_rows(monkeypatch):
    ids = feature_scale.sample_ids(10_000)
    assert len(ids) == feature_scale.SAMPLE_ROWS and ids[0] == 0 and ids[-1] == 9_999
    assert np.all(np.diff(ids) >= 39)
    assert list(feature_scale.sample_ids(5)) == [0, 1, 2, 3, 4]
    monkeypatch.setattr(feature_scale, "DENSE_VALUES", 40)
    rows = sp.random(30, 100, density=0.2, format="csr", random_state=0)
    assert feature_scale.kernel_figures(rows, KernelSpec("laplacian", 1.0))["rows"] < 30


def test_the_verdict_names_what_it_saw_and_what_to_change():
    base = {"kernel": "rbf", "gamma": 0.25, "coef0": 0.0, "rows": 256, "suggested_gamma": 1e-4}
    assert feature_scale.verdict({**base, "mean": 0.5}) is None
    vanishes = feature_scale.verdict({**base, "mean": 4.5e-5})
    assert "vanishes" in vanishes and "gamma=0.25" in vanishes and "4.5e-05" in vanishes
    assert "scale each feature" in vanishes and 'gamma="scale"' in vanishes and "about 0.0001" in vanishes
    saturates = feature_scale.verdict({**base, "kernel": "laplacian", "mean": 0.995, "suggested_gamma": None})
    assert "saturates" in saturates and "raise gamma" in saturates and "about" not in saturates
    assert feature_scale.verdict({**base, "kernel": "sigmoid", "mean": 1e-5}) is None
    assert "tanh" in feature_scale.verdict({**base, "kernel": "sigmoid", "mean": 0.999})


def unscaled(n=120, seed=0):
    """Two features in the thousands (gamma "auto" = 0.5 leaves every row alone) and their labels."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2)) * [1000.0, 3000.0]
    return X, np.where(X[:, 0] / 1000 + X[:, 1] / 3000 > 1, 1.0, -1.0)


def test_a_fit_on_unscaled_features_warns_and_on_scaled_ones_does_not():
    from ppack.packsvm.estimator import PackSVC

    X, y = unscaled()
    with pytest.warns(FeatureScaleWarning, match=r"rbf kernel vanishes between the rows at gamma=0\.5"):
        model = PackSVC(iterations=60, comm=SELF).fit(X, y)
    figures = model.training_["kernel_scale"]
    assert figures["mean"] < feature_scale.VANISHES and figures["advice"] is not None
    assert figures["mean"] == pytest.approx(np.mean(direct(X, "rbf", 0.5)[0]))  # 120 rows: all of them
    with warnings.catch_warnings():
        warnings.simplefilter("error", FeatureScaleWarning)
        scaled = PackSVC(iterations=60, comm=SELF).fit(X / [1000.0, 3000.0], y)
        poly = PackSVC(kernel="poly", iterations=60, comm=SELF).fit(X / [1000.0, 3000.0], y)
    assert scaled.training_["kernel_scale"]["advice"] is None
    assert poly.training_["kernel_scale"] is None
    with pytest.warns(FeatureScaleWarning, match="saturates"):  # features ~1e-3 at gamma 0.5
        PackSVC(iterations=60, comm=SELF).fit(X / 1e6, y)



def test_a_grid_names_its_settings_whose_kernel_vanishes():
    """A grid pass judges each kernel setting on one sample and says, once, before the pass,
    which settings' kernel vanishes; a grid whose settings all look fine says nothing."""
    from ppack import PackSVC
    from ppack.model_selection import PackGridSearchCV

    X, y = unscaled()
    X = X / [1000.0, 3000.0]  # scaled: gamma 0.5 is fine, 5e4 and 5e5 leave every row alone
    grid = {"gamma": [0.5, 5e4, 5e5], "C": [1.0]}
    with pytest.warns(FeatureScaleWarning, match=r"at 2 of the grid's 3 kernel settings \(gamma 5e\+04, 5e\+05\)"):
        PackGridSearchCV(PackSVC(iterations=60, comm=SELF), grid, cv=2).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FeatureScaleWarning)
        PackGridSearchCV(PackSVC(iterations=60, comm=SELF), {"gamma": [0.5, 2.0], "C": [1.0]}, cv=2).fit(X, y)


@pytest.mark.mpi
def test_tune_says_it_in_one_line_on_rank_0(mpi_tmp_path, capsys):
    from ppack.cli import main

    from helpers import write_libsvm

    X, y = unscaled()
    write_libsvm(mpi_tmp_path / "train.txt", X / [1000.0, 3000.0], y)
    main(["tune", "--data", str(mpi_tmp_path / "train.txt"), "--C", "1", "--gamma", "0.5,50000", "--folds", "2",
          "--iterations", "60", "--quiet"])
    lines = [line for line in capsys.readouterr().err.splitlines() if "kernel settings" in line]
    if MPI.COMM_WORLD.Get_rank() == 0:
        assert len(lines) == 1 and lines[0].startswith("ppack tune: warning: at 1 of the grid's 2 kernel settings "
                                                       "(gamma 5e+04): the rbf kernel vanishes")
    else:
        assert lines == []

@pytest.mark.mpi
def test_train_says_it_once_on_rank_0_and_every_rank_holds_the_same_figures(mpi_tmp_path, capsys):
    """``train`` on every rank (in process): one warning line on rank 0's stderr, none
    elsewhere, even with --quiet; the metrics JSON keeps the figures, which are those of one
    process (the sample does not depend on the ranks); the estimator warns on rank 0 alone."""
    from ppack.cli import main
    from ppack.packsvm.estimator import PackSVC

    from helpers import write_libsvm

    world = MPI.COMM_WORLD
    X, y = unscaled(n=300, seed=1)
    write_libsvm(mpi_tmp_path / "train.txt", X, y)
    metrics = mpi_tmp_path / "run.json"
    main(["train", "--data", str(mpi_tmp_path / "train.txt"), "--iterations", "60", "--metrics-json", str(metrics),
          "--quiet"])
    lines = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    alone = feature_scale.kernel_figures(X[feature_scale.sample_ids(len(X))], KernelSpec("rbf", 0.5))
    if world.Get_rank() == 0:
        assert len(lines) == 1 and lines[0].startswith("ppack train: warning: the rbf kernel vanishes")
        saved = json.loads(metrics.read_text())["kernel_scale"]
        assert saved["advice"] in lines[0] and saved["rows"] == feature_scale.SAMPLE_ROWS
        assert saved["mean"] == pytest.approx(alone["mean"], rel=1e-12)
    else:
        assert lines == []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = PackSVC(iterations=60, comm=world).fit(X, y)
    said = [w for w in caught if issubclass(w.category, FeatureScaleWarning)]
    assert len(said) == (1 if world.Get_rank() == 0 else 0)
    assert world.allgather(model.training_["kernel_scale"]["mean"]) == [model.training_["kernel_scale"]["mean"]] * \
        world.Get_size()
