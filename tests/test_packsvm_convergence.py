"""The convergence diagnostic (``packsvm.convergence``): its figures from what training has, its
verdict, and how a fit says it (``converged_``, ``n_iter_``, a ``ConvergenceWarning`` from rank 0
once, ``training_["convergence"]``)."""
import json
import math
import warnings

import numpy as np
import pytest
from mpi4py import MPI

from ppack.packsvm import convergence
from ppack.packsvm.state import LossWindows


def test_figures_from_the_windows_the_objective_and_sigma_t():
    windows = LossWindows(100, means=[0.5, 0.4])
    objective = {"hinge_term": [0.3, 0.5], "zero_term": [1.0, 1.0]}
    figures = convergence.figures("c_svc", np.array([1e-3, 1e-4]), 2000, windows, objective)
    assert figures["sigma_T"] == pytest.approx(0.2)  # the smallest column's sigma counts
    assert figures["loss_change"] == pytest.approx(-0.2)
    assert figures["window_means"] == [0.5, 0.4]
    assert figures["loss_ratio"] == pytest.approx(0.4)
    unknown = convergence.figures("c_svc", 1e-3, 10, LossWindows(100, means=[0.5]), None)
    assert unknown["loss_change"] is None and unknown["loss_ratio"] is None


def test_the_loss_curve_and_its_late_fall():
    assert [LossWindows.curve(t).size for t in (1200, 1201, 5, 0)] == [150, 151, 1, 1]  # 8 windows over T
    curve = LossWindows(10, means=[1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.2], keep=8)
    figures = convergence.figures("c_svc", 1.0, 80, LossWindows(100), None, curve)
    assert figures["loss_curve"] == [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.2]
    assert figures["late_fall"] == pytest.approx((0.55 - 0.3) / 0.55)  # third quarter's mean to the last's
    short = convergence.figures("c_svc", 1.0, 30, LossWindows(100), None, LossWindows(10, means=[1, 2, 3], keep=8))
    assert short["late_fall"] is None and convergence.figures("c_svc", 1.0, 30, LossWindows(100), None)["late_fall"] \
        is None


def test_the_verdict_names_what_it_saw_and_what_to_change():
    quiet = {"svm_type": "c_svc", "sigma_T": 10 * convergence.MIN_SIGMA_T, "loss_change": 0.0, "loss_ratio": 0.5}
    assert convergence.verdict(quiet) is None
    assert convergence.verdict({**quiet, "loss_change": None, "loss_ratio": None}) is None
    short = convergence.verdict({**quiet, "sigma_T": convergence.MIN_SIGMA_T / 2})
    assert "sigma T = epochs / C" in short and "more epochs" in short and "smaller C" in short
    assert "scale the features" in short
    falling = convergence.verdict({**quiet, "loss_change": -2 * convergence.MAX_LOSS_FALL})
    assert "still fell" in falling
    worse = convergence.verdict({**quiet, "loss_ratio": 2 * convergence.MAX_LOSS_RATIO["c_svc"]})
    assert "times the zero model's" in worse
    # a regression model worse than the constant one is wrong; a hinge loss above the zero
    # model's may still classify well
    between = {**quiet, "loss_ratio": 1.5}
    assert convergence.verdict(between) is None
    assert convergence.verdict({**between, "svm_type": "epsilon_svr"}) is not None


def diabetes():
    from sklearn.datasets import load_diabetes

    return load_diabetes(return_X_y=True)


def test_a_large_c_with_few_epochs_warns_and_more_epochs_do_not():
    """The issue's example: epsilon-SVR on scikit-learn's diabetes data at C = 10,000 and 5
    epochs did worse than predicting the mean and said nothing; 50 epochs reached LIBSVM."""
    pytest.importorskip("sklearn")
    from sklearn.exceptions import ConvergenceWarning

    from ppack import PackSVR

    X, y = diabetes()
    short = PackSVR(C=10000, gamma=0.1, epochs=5, comm=MPI.COMM_SELF)
    with pytest.warns(ConvergenceWarning, match="stopped short of convergence"):
        short.fit(X, y)
    assert short.converged_ is False and short.n_iter_ == short.training_["iterations_done"] == 5 * len(y)
    assert short.training_["convergence"]["advice"] is not None
    fine = PackSVR(C=1, gamma=0.1, epochs=5, comm=MPI.COMM_SELF)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        fine.fit(X, y)
    assert fine.converged_ is True and fine.training_["convergence"]["advice"] is None
    assert math.isfinite(fine.training_["convergence"]["sigma_T"])


@pytest.mark.mpi
def test_every_rank_reaches_the_verdict_and_rank_0_says_it_once(mpi_tmp_path, capsys):
    """``train`` on every rank (in process): one warning line on rank 0's stderr, none
    elsewhere, even with --quiet; the metrics JSON keeps the figures and the advice; the
    estimator gives every rank the same ``converged_`` and warns on rank 0 alone."""
    from ppack import PackSVR
    from ppack.cli import main

    from helpers import write_libsvm

    world = MPI.COMM_WORLD
    rng = np.random.default_rng(5)
    X = rng.uniform(size=(300, 4))
    y = 200.0 * X[:, 0] + 50.0 * np.sin(6.0 * X[:, 1])  # targets in the hundreds
    write_libsvm(mpi_tmp_path / "train.txt", X, y)
    metrics = mpi_tmp_path / "run.json"
    main(["train", "--data", str(mpi_tmp_path / "train.txt"), "--svm-type", "epsilon_svr", "--C", "10000",
          "--gamma", "1", "--epochs", "1", "--metrics-json", str(metrics), "--quiet"])
    lines = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    if world.Get_rank() == 0:
        assert len(lines) == 1 and lines[0].startswith("ppack train: warning: training stopped short")
        saved = json.loads(metrics.read_text())["convergence"]
        assert saved["converged"] is False and saved["advice"] in lines[0]
        assert saved["sigma_T"] == pytest.approx(1 / 10000)
    else:
        assert lines == []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = PackSVR(C=10000, gamma=1.0, epochs=1, comm=world).fit(X, y)
    said = [w for w in caught if issubclass(w.category, model.convergence_warning)]
    assert len(said) == (1 if world.Get_rank() == 0 else 0)
    assert world.allgather(model.converged_) == [False] * world.Get_size()
