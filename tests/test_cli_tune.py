"""`tune`: a C x gamma grid with cross-validation on every rank's shard, the table of scores,
the best grid point's refit model (equal to `train` at those parameters) and the results."""
import json

import numpy as np
import pytest
from mpi4py import MPI

from ppack.base import load_model
from ppack.cli import main
from ppack.mpi.comm import polite_barrier

from helpers import fails_with, make_problem, write_libsvm

WORLD = MPI.COMM_WORLD
OPTIONS = ["--epochs", "2", "--pack", "20", "--seed", "4", "--dtype", "float64", "--quiet"]


@pytest.mark.mpi(min_size=2)
def test_tune_writes_the_scores_and_the_refit_best_model(mpi_tmp_path, capsys):
    d = mpi_tmp_path
    X, y = make_problem(160, 6, seed=3)
    write_libsvm(d / "train.txt", X, y, comm=WORLD)
    main(["tune", "--data", str(d / "train.txt"), "--C", "0.5,4", "--gamma", "0.1,0.4", "--folds", "3",
          "--model", str(d / "best.h5"), "--results", str(d / "cv.json"), *OPTIONS])
    results = json.loads((d / "cv.json").read_text())
    assert results["ranks"] == WORLD.Get_size() and results["folds"] == 3
    assert [(row["C"], row["gamma"]) for row in results["grid"]] == [(0.5, 0.1), (4.0, 0.1), (0.5, 0.4), (4.0, 0.4)]
    for row in results["grid"]:
        assert len(row["splits"]) == 3 and row["mean"] == pytest.approx(np.mean(row["splits"]))
        assert row["converged"] is True  # sigma T = epochs / C >= 0.5
    best = max(results["grid"], key=lambda row: row["mean"])
    assert results["best"]["C"] == best["C"] and results["best"]["gamma"] == best["gamma"]
    main(["train", "--data", str(d / "train.txt"), "--C", str(best["C"]), "--gamma", str(best["gamma"]),
          "--model", str(d / "separate.h5"), *OPTIONS])
    tuned, separate = load_model(d / "best.h5", comm=WORLD), load_model(d / "separate.h5", comm=WORLD)
    np.testing.assert_allclose(tuned.decision_function(X), separate.decision_function(X), rtol=0, atol=1e-9)
    assert tuned.n_support_ == separate.n_support_
    polite_barrier(WORLD)


@pytest.mark.mpi(min_size=2)
def test_tune_refusals_are_one_line_on_every_rank(mpi_tmp_path, capsys):
    d = mpi_tmp_path
    X, y = make_problem(60, 4, seed=3)
    write_libsvm(d / "train.txt", X, y, comm=WORLD)
    base = ["tune", "--data", str(d / "train.txt"), "--C", "1,10", "--model", str(d / "m.h5"), *OPTIONS]
    fails_with(capsys, base + ["--memory-limit", "1e-6"], "grid: 12 columns (1 class columns x 2 grid points x 6 "
                                                          "folds and refit) need")
    fails_with(capsys, base + ["--folds", "1"], "--folds: at least 2, got 1")
    fails_with(capsys, base + ["--svm-type", "one_class"], "--C: does not apply to --svm-type one_class")
    fails_with(capsys, base[:3] + base[5:] + ["--nu", "0.2"], "--nu: does not apply to --svm-type c_svc")
    values = np.where(y > 0, 2.0, -1.0)  # not +-1: a one-class grid cannot score them
    write_libsvm(d / "twos.txt", X, values, comm=WORLD)
    fails_with(capsys, ["tune", "--data", str(d / "twos.txt"), "--svm-type", "one_class", "--nu", "0.2",
                        "--model", str(d / "m.h5"), *OPTIONS], "must all be +1 (inlier) or -1 (outlier)")
    assert not (d / "m.h5").exists()


@pytest.mark.mpi(min_size=2)
def test_tune_one_class_searches_nu_and_refits_the_best(mpi_tmp_path):
    """--svm-type one_class: nu values in C's place, each scored by accuracy against the
    data's +1 / -1 labels; the best's model equals `train` at its nu and gamma."""
    d = mpi_tmp_path
    rng = np.random.default_rng(7)
    X = np.vstack([rng.normal(size=(120, 4)), 3 * rng.normal(size=(24, 4)) + 2])
    y = np.r_[np.ones(120), -np.ones(24)]
    write_libsvm(d / "train.txt", X, y, comm=WORLD)
    main(["tune", "--data", str(d / "train.txt"), "--svm-type", "one_class", "--nu", "0.05,0.3", "--gamma",
          "0.1,0.5", "--folds", "3", "--model", str(d / "best.h5"), "--results", str(d / "cv.json"), *OPTIONS])
    results = json.loads((d / "cv.json").read_text())
    assert results["svm_type"] == "one_class" and results["metric"] == "accuracy"
    assert [(row["nu"], row["gamma"]) for row in results["grid"]] == [(0.05, 0.1), (0.3, 0.1), (0.05, 0.5),
                                                                      (0.3, 0.5)]
    best = results["best"]
    assert 0.5 < best["mean"] <= 1.0 and best["mean"] == max(row["mean"] for row in results["grid"])
    main(["train", "--data", str(d / "train.txt"), "--svm-type", "one_class", "--nu", str(best["nu"]), "--gamma",
          str(best["gamma"]), "--model", str(d / "separate.h5"), *OPTIONS])
    tuned, separate = load_model(d / "best.h5", comm=WORLD), load_model(d / "separate.h5", comm=WORLD)
    np.testing.assert_allclose(tuned.decision_function(X), separate.decision_function(X), rtol=0, atol=1e-9)
    assert tuned.rho_ == pytest.approx(separate.rho_, abs=1e-12)
    polite_barrier(WORLD)


@pytest.mark.mpi(min_size=2)
def test_tune_progressive_scores_and_tol_per_column(mpi_tmp_path):
    """`--scores progressive` scores the rows from training (the same as PackGridSearchCV's on
    one rank with these folds), and `--tol` is taken: each column stops on its own."""
    from ppack import PackSVC
    from ppack.packsvm.grid import train_grid
    d = mpi_tmp_path
    X, y = make_problem(160, 6, seed=3)
    write_libsvm(d / "train.txt", X, y, comm=WORLD)
    main(["tune", "--data", str(d / "train.txt"), "--C", "0.5,4", "--folds", "3", "--scores", "progressive",
          "--tol", "0.1", "--tol-window", "40", "--results", str(d / "cv.json"), *OPTIONS])
    results = json.loads((d / "cv.json").read_text())
    assert results["scores"] == "progressive"
    folds = np.random.RandomState(4).permutation(160) % 3
    fit = train_grid(PackSVC(epochs=2, pack=20, seed=4, dtype="float64", tol=0.1, tol_window=40, comm=MPI.COMM_SELF),
                     X, y, [0.5, 4.0], folds, 3, scores="progressive")
    for g, row in enumerate(results["grid"]):
        for f in range(3):
            rows, decisions, labels = fit.held_out(g, f)
            assert row["scored_rows"][f] == len(rows)
            assert row["splits"][f] == fit.template.validation_score(decisions, labels)


class _StopAfter:
    """A StopRequest that a SIGTERM reached after ``calls`` of its ``is_set``, on every rank."""

    calls = 6

    def __init__(self):
        self.count, self.signal_name = 0, None

    def install(self):
        return self

    def uninstall(self):
        pass

    def is_set(self):
        self.count += 1
        if self.count > self.calls:
            self.signal_name = "SIGTERM"
        return self.signal_name is not None


@pytest.mark.mpi(min_size=2)
def test_tune_stopped_by_sigterm_resumes_to_the_same_scores(mpi_tmp_path, monkeypatch, capsys):
    import ppack.cli.tune as tune
    d = mpi_tmp_path
    X, y = make_problem(160, 6, seed=3)
    write_libsvm(d / "train.txt", X, y, comm=WORLD)
    base = ["tune", "--data", str(d / "train.txt"), "--C", "0.5,4", "--gamma", "0.1,0.4", "--folds", "3",
            "--epochs", "2", "--pack", "20", "--seed", "4", "--dtype", "float64"]
    main(base + ["--results", str(d / "full.json"), "--quiet"])
    with monkeypatch.context() as patch:
        patch.setattr(tune, "StopRequest", _StopAfter)
        main(base + ["--checkpoint", str(d / "grid.h5"), "--results", str(d / "stopped.json")])
    out = capsys.readouterr().out
    if WORLD.Get_rank() == 0:
        assert f"stopped at iteration 140 of 320 (SIGTERM); state saved to {d / 'grid.h5'}" in out
    assert not (d / "stopped.json").exists()  # no scores from a stopped pass
    main(base + ["--checkpoint", str(d / "grid.h5"), "--resume", "--results", str(d / "resumed.json")])
    if WORLD.Get_rank() == 0:
        assert f"resumed from {d / 'grid.h5'} at iteration 140" in capsys.readouterr().out
    full, resumed = (json.loads((d / name).read_text()) for name in ("full.json", "resumed.json"))
    assert [row["splits"] for row in resumed["grid"]] == [row["splits"] for row in full["grid"]]
    fails_with(capsys, base + ["--resume"], "--checkpoint-every and --resume need --checkpoint PATH")
    polite_barrier(WORLD)


def test_tune_under_the_dual_refits_the_separate_dual_fit(mpi_tmp_path):
    """`tune --optimizer dual`: each grid point judged by its columns' KKT gaps, the best one's
    model the separate `train --optimizer dual` at convergence."""
    d = mpi_tmp_path
    X, y = make_problem(120, 6, seed=3)
    write_libsvm(d / "train.txt", X, y, comm=WORLD)
    dual = ["--optimizer", "dual", "--epochs", "1000", "--tol", "1e-5", "--dtype", "float64", "--seed", "4"]
    main(["tune", "--data", str(d / "train.txt"), "--C", "0.5,4", "--gamma", "0.2", "--folds", "2",
          "--model", str(d / "best.h5"), "--results", str(d / "cv.json"), *dual])
    results = json.loads((d / "cv.json").read_text())
    assert all(row["converged"] is True for row in results["grid"])
    main(["train", "--data", str(d / "train.txt"), "--C", str(results["best"]["C"]), "--gamma", "0.2",
          "--model", str(d / "separate.h5"), *dual])
    tuned, separate = load_model(d / "best.h5", comm=WORLD), load_model(d / "separate.h5", comm=WORLD)
    np.testing.assert_allclose(tuned.decision_function(X), separate.decision_function(X), rtol=0, atol=1e-5)
    polite_barrier(WORLD)
