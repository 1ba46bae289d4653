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


def test_the_auto_stages_and_how_far_a_stage_moved():
    """epochs="auto"'s stages: 0.5, 1, 2, ..., 128 epochs of m rows, a resumed run's the first
    that reaches its iteration; a stage's outputs and their change since the stage before."""
    assert convergence.auto_iterations(400) == 200
    assert convergence.auto_iterations(400, 201) == convergence.auto_iterations(400, 400) == 400
    assert convergence.auto_iterations(400, 10 ** 9) == 128 * 400
    assert convergence.next_auto_iterations(200, 400) == 400 and convergence.next_auto_iterations(800, 400) == 1600
    assert convergence.next_auto_iterations(128 * 400, 400) is None
    f = np.array([[0.5, -1.0, 2.0, 0.0]])
    assert convergence.stage_outputs("c_svc", f, 0.0).tolist() == [True, False, True, False]
    assert convergence.stage_outputs("c_svc", np.array([[1.0, 0.0], [2.0, -1.0], [0.0, 3.0]]), 0.0).tolist() == [1, 2]
    assert convergence.stage_outputs("one_class", f, 1.0).tolist() == [False, False, True, False]
    assert convergence.stage_outputs("epsilon_svr", f, 1.0).tolist() == [-0.5, -2.0, 1.0, -1.0]
    before, after = np.array([True, False, True, False]), np.array([True, True, True, False])
    assert convergence.stage_change("c_svc", before, after, None) == 0.25
    y = np.array([1.0, 3.0, 1.0, 3.0])  # standard deviation 1
    assert convergence.stage_change("epsilon_svr", np.zeros(4), np.array([1.0, -1.0, 1.0, -1.0]), y) == 1.0
    line = convergence.stage_line("c_svc", {"epochs": 1.0, "advice": None, "change": 0.05}, 2.0)
    assert line == ("epochs auto: still moving after 1 epochs (5.0% of sampled training rows changed class since "
                    "the stage before); training on to 2")


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


def test_epochs_auto_trains_on_while_the_verdict_says_short():
    """epochs="auto": half an epoch, one, then twice the iterations while the diagnostic says the
    run stopped short or its predictions still move. The issue's diabetes case (C = 10,000; 5
    epochs did worse than predicting the mean) trains on to the cap, 128 epochs, and ends
    converged and better than the mean, each stage's verdict and change kept."""
    pytest.importorskip("sklearn")
    from sklearn.exceptions import ConvergenceWarning

    from ppack import PackSVR

    X, y = diabetes()
    auto = PackSVR(C=10000, gamma=0.1, epochs="auto", comm=MPI.COMM_SELF)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        auto.fit(X, y)
    stages = auto.training_["convergence"]["stages"]
    assert [stage["epochs"] for stage in stages] == [0.5] + [2.0 ** k for k in range(8)]
    assert all(stage["advice"] for stage in stages[:-1]) and stages[-1]["advice"] is None
    assert stages[0]["change"] is None and all(stage["change"] >= 0 for stage in stages[1:])
    assert auto.converged_ and auto.n_iter_ == auto.training_["iterations"] == 128 * len(y)
    assert np.sqrt(np.mean((auto.predict(X) - y) ** 2)) < 0.8 * np.std(y)


@pytest.mark.parametrize("C, epochs", [(1.0, 1.0), (300.0, 4.0)])
def test_epochs_auto_continues_as_one_longer_run_and_resumes_mid_stage(C, epochs, tmp_path):
    """Each stage continues the run where the last one left it (the same row stream, averages
    and offsets): on 400 rows, whole packs, auto's stages give the model of one run of as many
    epochs bit for bit (at C = 1 one epoch: the default's model); a run stopped in its third
    stage and resumed gives it too."""
    pytest.importorskip("sklearn")
    from ppack import PackSVR

    X, y = (part[:400] for part in diabetes())
    params = dict(C=C, gamma=0.1, comm=MPI.COMM_SELF)
    auto = PackSVR(epochs="auto", **params).fit(X, y)
    stages = [stage["epochs"] for stage in auto.training_["convergence"]["stages"]]
    assert stages == [0.5] + [2.0 ** k for k in range(int(np.log2(epochs)) + 1)]
    longer = PackSVR(epochs=epochs, **params).fit(X, y)
    assert np.array_equal(auto.predict(X), longer.predict(X)) and auto.rho_ == longer.rho_
    if epochs < 2:
        return
    packs = []
    stopped = PackSVR(epochs="auto", **params).fit(X, y, checkpoint=tmp_path / "auto.h5",
                                                     should_stop=lambda: packs.append(1) or len(packs) >= 6)
    assert stopped.stopped_ and 400 < stopped.n_iter_ < 800
    resumed = PackSVR(epochs="auto", **params).fit(X, y, checkpoint=tmp_path / "auto.h5", resume=True)
    assert resumed.resumed_from_ == stopped.n_iter_ and resumed.n_iter_ == 400 * epochs
    assert np.array_equal(resumed.predict(X), auto.predict(X)) and resumed.rho_ == auto.rho_
    # the stages judged after the resume, each compared with the stage before (the checkpoint's)
    after = [{k: stage[k] for k in ("epochs", "advice", "change")} for stage in
             resumed.training_["convergence"]["stages"]]
    assert after[0]["epochs"] == 2.0 and after[0]["change"] is not None
    assert after == [{k: stage[k] for k in ("epochs", "advice", "change")} for stage in
                     auto.training_["convergence"]["stages"][2:]]


def test_a_grid_pass_refuses_epochs_auto():
    """A grid pass trains every point for the same iterations: it refuses epochs auto in one
    line that says what to give (``plan`` does too: below)."""
    from ppack import PPackError, PackSVC
    from ppack.model_selection import PackGridSearchCV

    X, y = diabetes()
    labels = np.where(y > np.median(y), 1, -1)
    with pytest.raises(PPackError, match="epochs='auto'.*give a number of epochs"):
        PackGridSearchCV(PackSVC(epochs="auto", comm=MPI.COMM_SELF), {"C": [1, 10]}, cv=2).fit(X, labels)


@pytest.mark.mpi
def test_epochs_auto_on_every_rank_takes_the_same_stages(mpi_tmp_path, capsys):
    """``train --epochs auto`` over the ranks: every rank judges each stage alike and trains on
    together; rank 0 says each stage that trains on and then all of them in one line, and the
    metrics JSON keeps them. ``plan``,
    which predicts a run of known length, refuses it on every rank."""
    from ppack import PPackError
    from ppack.cli import main
    from ppack.packsvm.plan import make_plan

    from helpers import write_libsvm

    world = MPI.COMM_WORLD
    rng = np.random.default_rng(5)
    X = rng.uniform(size=(300, 4))
    y = 200.0 * X[:, 0] + 50.0 * np.sin(6.0 * X[:, 1])
    write_libsvm(mpi_tmp_path / "train.txt", X, y)
    metrics = mpi_tmp_path / "run.json"
    main(["train", "--data", str(mpi_tmp_path / "train.txt"), "--svm-type", "epsilon_svr", "--C", "1000",
          "--gamma", "1", "--epochs", "auto", "--metrics-json", str(metrics)])
    said = capsys.readouterr().out
    if world.Get_rank() == 0:
        saved = json.loads(metrics.read_text())
        stages = [stage["epochs"] for stage in saved["convergence"]["stages"]]
        assert len(stages) > 2 and stages == [0.5] + [2.0 ** k for k in range(len(stages) - 1)]
        assert saved["iterations"] == 300 * stages[-1]
        assert f"epochs auto: {stages[-1]:g} epochs, in {len(stages)} stage(s)" in said
        assert [line.split(";")[-1] for line in said.splitlines() if line.startswith("epochs auto: ") and
                "training on" in line] == [f" training on to {b:g}" for b in stages[1:]]
    else:
        assert "epochs auto" not in said
    with pytest.raises(PPackError, match="epochs='auto'.*plan a number of epochs"):
        make_plan(mpi_tmp_path / "train.txt", 2, {"epochs": "auto"})
