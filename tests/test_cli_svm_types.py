"""`train --svm-type epsilon_svr|one_class`, `predict` and `info` with their models, on every
rank: the model file's svm_type and rho, the (n, 2) decisions, the test metrics, and a one-line
error for each option a type does not read."""
import json

import h5py
import numpy as np
import pytest
from mpi4py import MPI

from ppack.base import load_model
from ppack.cli import main
from ppack.cli.info import describe
from ppack.model.kernel import read_kernel_header
from ppack.mpi.comm import polite_barrier

from helpers import fails_with, write_libsvm

WORLD = MPI.COMM_WORLD
FAST = ["--iterations", "400", "--pack", "50", "--gamma", "0.3", "--dtype", "float64", "--quiet"]


def regression_rows(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = 20.0 + 3.0 * np.sin(X[:, 0]) + X[:, 1] + 0.1 * rng.normal(size=n)
    return X, np.array([float(f"{v:g}") for v in y])  # as LIBSVM text holds them (write_libsvm)


@pytest.mark.parametrize("optimizer", ["sgd", "dual"])
def test_epsilon_svr_trains_predicts_and_describes_its_model(optimizer, mpi_tmp_path):
    d = mpi_tmp_path
    X, y = regression_rows()
    write_libsvm(d / "reg.txt", X, y)
    main(["train", "--svm-type", "epsilon_svr", "--epsilon", "0.2", "--C", "10", "--data", str(d / "reg.txt"),
          "--test", str(d / "reg.txt"), "--model", str(d / "svr.h5"), "--metrics-json", str(d / "t.json"), *FAST,
          "--optimizer", optimizer])
    main(["predict", "--model", str(d / "svr.h5"), "--data", str(d / "reg.txt"), "--output", str(d / "o.npy"),
          "--metrics-json", str(d / "p.json"), "--quiet"])
    if WORLD.Get_rank() == 0:
        out = np.load(d / "o.npy")
        assert out.shape == (len(y), 2) and np.array_equal(out[:, 0], out[:, 1])  # decision = regressed value
        rmse = np.sqrt(np.mean((out[:, 1] - y) ** 2))
        r2 = 1 - np.sum((out[:, 1] - y) ** 2) / np.sum((y - y.mean()) ** 2)
        for name in ("t.json", "p.json"):
            metrics = json.loads((d / name).read_text())
            assert metrics["test_rmse"] == pytest.approx(rmse, rel=1e-9)
            assert metrics["test_r2"] == pytest.approx(r2, rel=1e-9) and r2 > 0.5
            assert "test_accuracy" not in metrics
        trained = json.loads((d / "t.json").read_text())
        assert trained["optimizer"] == optimizer
        if optimizer == "dual":
            assert 0.0 <= trained["convergence"]["relative_duality_gap"] < 1.0
        header = read_kernel_header(d / "svr.h5")
        assert header.svm_type == "epsilon_svr" and header.classes.size == 0
        assert header.rho == pytest.approx(-y.mean(), rel=1e-12)
        model = load_model(d / "svr.h5", MPI.COMM_SELF)
        assert type(model).__name__ == "PackSVR" and model.epsilon == 0.2
        np.testing.assert_allclose(model.predict(X), out[:, 1], rtol=1e-12)
        text = "\n".join(describe(d / "svr.h5"))
        assert "svm_type epsilon_svr, epsilon=0.2, rho=" in text and "regression" in text
    polite_barrier(WORLD)


def test_one_class_ignores_labels_and_reports_accuracy_on_plus_minus_one_labels(mpi_tmp_path):
    d = mpi_tmp_path
    rng = np.random.default_rng(1)
    X = rng.normal(size=(150, 3))
    labels = np.where(np.linalg.norm(X, axis=1) < 2.2, 1.0, -1.0)
    write_libsvm(d / "pm.txt", X, labels)
    write_libsvm(d / "digits.txt", X, np.arange(150) % 7)
    main(["train", "--svm-type", "one_class", "--nu", "0.2", "--data", str(d / "digits.txt"),
          "--model", str(d / "oc.h5"), *FAST])
    main(["predict", "--model", str(d / "oc.h5"), "--data", str(d / "pm.txt"), "--output", str(d / "o.npy"),
          "--metrics-json", str(d / "p.json"), "--quiet"])
    main(["predict", "--model", str(d / "oc.h5"), "--data", str(d / "digits.txt"), "--metrics-json",
          str(d / "q.json"), "--quiet"])
    if WORLD.Get_rank() == 0:
        out = np.load(d / "o.npy")
        assert out.shape == (150, 2) and np.array_equal(out[:, 1], np.where(out[:, 0] >= 0, 1.0, -1.0))
        assert json.loads((d / "p.json").read_text())["test_accuracy"] == pytest.approx(np.mean(out[:, 1] == labels))
        assert json.loads((d / "q.json").read_text())["test_accuracy"] is None  # labels other than +-1
        with h5py.File(d / "oc.h5", "r") as f:
            assert f.attrs["svm_type"] == "one_class" and f.attrs["rho"] > 0
            assert f["classes"][()].tolist() == [-1.0, 1.0]
        assert 0.05 < np.mean(out[:, 1] < 0) < 0.4  # about nu of the rows outside
        assert "svm_type one_class, nu=0.2, rho=" in "\n".join(describe(d / "oc.h5"))
    polite_barrier(WORLD)


def test_a_model_file_without_svm_type_reads_as_c_svc_and_a_bad_one_is_refused(mpi_tmp_path, capsys):
    d = mpi_tmp_path
    X, y = regression_rows(80, seed=2)
    write_libsvm(d / "bin.txt", X, np.where(y > 20, 2.0, 0.0))
    main(["train", "--data", str(d / "bin.txt"), "--model", str(d / "c.h5"), *FAST])
    if WORLD.Get_rank() == 0:
        expected = load_model(d / "c.h5", MPI.COMM_SELF).decision_function(X)
        with h5py.File(d / "c.h5", "a") as f:
            assert f.attrs["svm_type"] == "c_svc" and f.attrs["rho"] == 0.0
            del f.attrs["svm_type"], f.attrs["rho"]  # as files written before
        old = load_model(d / "c.h5", MPI.COMM_SELF)
        assert type(old).__name__ == "PackSVC" and old.rho_ == 0.0
        np.testing.assert_array_equal(old.decision_function(X), expected)
        with h5py.File(d / "c.h5", "a") as f:
            f.attrs["svm_type"] = "one_class"
    polite_barrier(WORLD)
    fails_with(capsys, ["predict", "--model", str(d / "c.h5"), "--data", str(d / "bin.txt")],
               "svm_type one_class: expected 'classes' [-1.0, 1.0], one attribute 'scale' and 'coef' (n_support,)")
    if WORLD.Get_rank() == 0:
        with h5py.File(d / "c.h5", "a") as f:
            f.attrs["svm_type"] = "nu_svr"
    polite_barrier(WORLD)
    fails_with(capsys, ["predict", "--model", str(d / "c.h5"), "--data", str(d / "bin.txt")],
               "attribute 'svm_type': expected one of c_svc, epsilon_svr, one_class, got 'nu_svr'")


BAD_OPTIONS = [
    (["--svm-type", "one_class", "--C", "2"], "--C: does not apply to --svm-type one_class (one_class's "
                                              "regularisation is 1 / (nu n_samples): give --nu)"),
    (["--svm-type", "one_class", "--sigma", "0.1"], "--sigma: does not apply to --svm-type one_class"),
    (["--svm-type", "one_class", "--validation", "0.1"], "--validation: does not apply to --svm-type one_class"),
    (["--svm-type", "one_class", "--epsilon", "0.5"], "--epsilon: does not apply to --svm-type one_class"),
    (["--svm-type", "one_class", "--bias"], "--bias: does not apply to --svm-type one_class"),
    (["--svm-type", "epsilon_svr", "--class-weight", "balanced"],
     "--class-weight: does not apply to --svm-type epsilon_svr (regression has no classes)"),
    (["--svm-type", "epsilon_svr", "--probability"], "--probability: does not apply to --svm-type epsilon_svr"),
    (["--svm-type", "epsilon_svr", "--nu", "0.3"], "--nu: does not apply to --svm-type epsilon_svr"),
    (["--epsilon", "0.3"], "--epsilon: does not apply to --svm-type c_svc (only epsilon_svr has a tube)"),
    (["--nu", "0.3"], "--nu: does not apply to --svm-type c_svc"),
    (["--svm-type", "epsilon_svr", "--epsilon", "-0.5"], "epsilon: must be a finite number >= 0, got -0.5"),
    (["--svm-type", "one_class", "--nu", "0"], "nu: must be a finite number > 0 and <= 1, got 0.0"),
    (["--svm-type", "one_class", "--nu", "1.5"], "nu: must be a finite number > 0 and <= 1, got 1.5"),
    (["--solver", "dcd", "--svm-type", "epsilon_svr"], "--svm-type: applies to the kernel trainer"),
]


@pytest.mark.parametrize("options,message", BAD_OPTIONS)
def test_options_a_type_does_not_read_are_refused_in_one_line(options, message, mpi_tmp_path, capsys):
    X, y = regression_rows(40, seed=3)
    write_libsvm(mpi_tmp_path / "reg.txt", X, y)
    fails_with(capsys, ["train", "--data", str(mpi_tmp_path / "reg.txt"), "--model", str(mpi_tmp_path / "m.h5"),
                        *options], message)
    assert not (mpi_tmp_path / "m.h5").exists()


def test_plan_refuses_the_other_svm_types(mpi_tmp_path, capsys):
    X, y = regression_rows(40, seed=5)
    write_libsvm(mpi_tmp_path / "reg.txt", X, y)
    fails_with(capsys, ["plan", "--data", str(mpi_tmp_path / "reg.txt"), "--ranks", "2", "--svm-type", "one_class"],
               "--svm-type: plan models c_svc runs")
