"""`export --libsvm` and `predict` of LIBSVM model files: LIBSVM's own svm_predict and ppack agree
on labels and decision values, both ways, on every rank count; errors end every rank with one message."""
import numpy as np
import pytest
from libsvm import svmutil
from mpi4py import MPI

from ppack import load_model
from ppack.cli import main
from ppack.errors import PPackError
from ppack.mpi.comm import polite_barrier

from helpers import fails_with, make_multiclass, make_problem, write_libsvm

WORLD = MPI.COMM_WORLD
# float64: LIBSVM computes in float64, so the decision values agree to float64 rounding
FAST = ["--iterations", "500", "--pack", "50", "--seed", "4", "--dtype", "float64", "--quiet"]
KERNEL_OPTIONS = {"rbf": ["--gamma", "0.2", "--C", "5"], "linear": ["--C", "1"],
                  "poly": ["--gamma", "0.2", "--degree", "3", "--coef0", "1", "--C", "1"],
                  "sigmoid": ["--gamma", "0.1", "--coef0", "-0.5", "--C", "1"]}


def libsvm_predict(model_path, data_path, options="-q"):
    """LIBSVM's labels and decision values (or probabilities, with -b 1) of a LIBSVM model file."""
    y, x = svmutil.svm_read_problem(str(data_path))
    labels, _, values = svmutil.svm_predict(y, x, svmutil.svm_load_model(str(model_path)), options)
    return np.asarray(labels), np.asarray(values)


def assert_decisions_close(actual, expected):
    np.testing.assert_allclose(actual, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())


@pytest.mark.parametrize("kernel, sparse, labels, bias", [
    ("rbf", False, (0, 1), False), ("rbf", True, (3, 7), True),
    ("linear", False, (3, 7), True), ("linear", True, (0, 1), False),
    ("poly", False, (0, 1), True), ("poly", True, (3, 7), False),
    ("sigmoid", False, (3, 7), False),
])
def test_exported_model_predicts_like_ppack_in_libsvm(kernel, sparse, labels, bias, mpi_tmp_path, capsys):
    X, y = make_problem(300, 8, sparse=sparse, seed=51, labels=labels)
    Xt, yt = make_problem(120, 8, sparse=sparse, seed=52, labels=labels)
    d = mpi_tmp_path
    write_libsvm(d / "train.txt", X, y)
    write_libsvm(d / "test.txt", Xt, yt)
    data = str(d / "train.txt")
    if not sparse:
        main(["convert", data, str(d / "train.h5"), "--storage", "dense", "--quiet"])
        data = str(d / "train.h5")
    main(["train", "--data", data, "--model", str(d / "m.h5"), "--kernel", kernel, *KERNEL_OPTIONS[kernel],
          *FAST, *(["--bias"] if bias else [])])
    main(["export", "--libsvm", str(d / "m.h5"), str(d / "m.model")])
    main(["predict", "--model", str(d / "m.h5"), "--data", str(d / "test.txt"), "--output", str(d / "p.npy"),
          "--quiet"])
    # the exported file read back by ppack predicts the same on every rank count
    main(["predict", "--model", str(d / "m.model"), "--data", str(d / "test.txt"), "--output", str(d / "q.npy"),
          "--quiet"])
    out = capsys.readouterr().out
    if WORLD.Get_rank() == 0:
        assert f"wrote {d / 'm.model'}: LIBSVM model" in out
        ours = np.load(d / "p.npy")
        predicted, values = libsvm_predict(d / "m.model", d / "test.txt")
        np.testing.assert_array_equal(predicted, ours[:, 1])
        assert_decisions_close(values[:, 0], ours[:, 0])
        again = np.load(d / "q.npy")
        np.testing.assert_array_equal(again[:, 1], ours[:, 1])
        assert_decisions_close(again[:, 0], ours[:, 0])
        header = (d / "m.model").read_text().split("\nSV\n")[0].splitlines()
        assert header[:2] == ["svm_type c_svc", f"kernel_type {'polynomial' if kernel == 'poly' else kernel}"]
        assert f"label {labels[1]} {labels[0]}" in header
        if not bias:
            assert "rho 0" in header
    polite_barrier(WORLD)


def test_multiclass_export_writes_one_file_per_class_against_the_rest(mpi_tmp_path, capsys):
    X, y = make_multiclass(300, 6, seed=53)  # classes 3, 5, 7, 11
    d = mpi_tmp_path
    write_libsvm(d / "train.txt", X, y)
    main(["train", "--data", str(d / "train.txt"), "--model", str(d / "m.h5"), "--gamma", "0.3", "--C", "10",
          "--bias", *FAST])
    main(["export", "--libsvm", str(d / "m.h5"), str(d / "ovr.model")])
    main(["predict", "--model", str(d / "m.h5"), "--data", str(d / "train.txt"), "--output", str(d / "p.npy"),
          "--quiet"])
    if WORLD.Get_rank() == 0:
        ours = np.load(d / "p.npy")
        assert not (d / "ovr.model").exists()
        for k, label in enumerate([3, 5, 7, 11]):
            path = d / f"ovr.{label}.model"
            predicted, values = libsvm_predict(path, d / "train.txt")
            assert_decisions_close(values[:, 0], ours[:, k])
            np.testing.assert_array_equal(predicted, np.where(ours[:, k] > 0, label, -1))
            assert f"label {label} -1\n" in path.read_text()
    polite_barrier(WORLD)


def test_exported_probabilities_match_libsvm_b1(mpi_tmp_path, capsys):
    X, y = make_problem(400, 6, seed=54, labels=(0, 1))
    d = mpi_tmp_path
    write_libsvm(d / "train.txt", X, y)
    main(["train", "--data", str(d / "train.txt"), "--model", str(d / "m.h5"), "--gamma", "0.2", "--C", "5",
          "--probability", *FAST])
    main(["export", "--libsvm", str(d / "m.h5"), str(d / "m.model")])
    for model, output in (("m.h5", "p.h5"), ("m.model", "q.h5")):
        main(["predict", "--model", str(d / model), "--data", str(d / "train.txt"), "--output", str(d / output),
              "--proba", "--quiet"])
    if WORLD.Get_rank() == 0:
        import h5py

        with h5py.File(d / "p.h5", "r") as f, h5py.File(d / "q.h5", "r") as g:
            proba = f["proba"][()]  # columns: classes 0, 1
            np.testing.assert_allclose(g["proba"][()], proba, rtol=1e-9, atol=1e-12)
        _, values = libsvm_predict(d / "m.model", d / "train.txt", "-b 1 -q")  # columns: labels 1, 0
        np.testing.assert_allclose(values, proba[:, ::-1], atol=2e-7)
    polite_barrier(WORLD)


@pytest.mark.parametrize("kernel, options", [
    ("rbf", "-t 2 -g 0.25 -c 3"), ("linear", "-t 0 -c 0.3"), ("poly", "-t 1 -d 2 -g 0.3 -r 1 -c 0.5"),
    ("sigmoid", "-t 3 -g 0.1 -r -0.5 -c 1"),
])
def test_predict_takes_a_model_trained_by_libsvm(kernel, options, mpi_tmp_path, capsys):
    """LIBSVM's labels (label line "7 3": the first label of the data) and decision values, from
    text and from dense HDF5 data with one more feature than any support vector has."""
    X, y = make_problem(200, 6, seed=55, labels=(7, 3))
    Xt, yt = make_problem(90, 7, seed=56, labels=(7, 3))
    d = mpi_tmp_path
    write_libsvm(d / "train.txt", X, y)
    write_libsvm(d / "test.txt", Xt, yt)
    if WORLD.Get_rank() == 0:
        ys, xs = svmutil.svm_read_problem(str(d / "train.txt"))
        svmutil.svm_save_model(str(d / "lib.model"), svmutil.svm_train(ys, xs, options + " -q"))
    polite_barrier(WORLD)
    main(["convert", str(d / "test.txt"), str(d / "test.h5"), "--storage", "dense", "--quiet"])
    for data, output in (("test.txt", "p.npy"), ("test.h5", "q.npy")):
        main(["predict", "--model", str(d / "lib.model"), "--data", str(d / data), "--output", str(d / output),
              "--quiet"])
    main(["info", str(d / "lib.model")])
    out = capsys.readouterr().out
    one_rank = load_model(d / "lib.model", MPI.COMM_SELF).decision_function(Xt)
    if WORLD.Get_rank() == 0:
        assert "LIBSVM model" in out and f"kernel {'polynomial' if kernel == 'poly' else kernel}" in out
        predicted, values = libsvm_predict(d / "lib.model", d / "test.txt")
        assert set(predicted) == {3.0, 7.0}
        for output in ("p.npy", "q.npy"):
            ours = np.load(d / output)
            np.testing.assert_array_equal(ours[:, 1], predicted)
            assert_decisions_close(ours[:, 0], values[:, 0])
        assert_decisions_close(one_rank, values[:, 0])
    polite_barrier(WORLD)


@pytest.mark.parametrize("svm_type", ["epsilon_svr", "one_class"])
def test_regression_and_one_class_models_go_both_ways_with_libsvm(svm_type, mpi_tmp_path, capsys):
    """`train --svm-type` then `export --libsvm`: LIBSVM's svm_predict gives ppack's decision
    values and predictions. A LIBSVM -s 3 / -s 2 model file: `predict` gives LIBSVM's, on
    every rank count, and `info` names its type."""
    d = mpi_tmp_path
    X, _ = make_problem(150, 6, seed=59)
    Xt, _ = make_problem(60, 6, seed=60)
    write_libsvm(d / "train.txt", X, np.sin(X[:, 0]) * 3 + X[:, 1] * X[:, 2] + 12)
    write_libsvm(d / "test.txt", Xt, np.zeros(len(Xt)))
    ours_options, libsvm_options = {"epsilon_svr": (["--C", "5", "--epsilon", "0.3"], "-s 3 -c 5 -p 0.3"),
                                    "one_class": (["--nu", "0.2"], "-s 2 -n 0.2")}[svm_type]
    main(["train", "--data", str(d / "train.txt"), "--model", str(d / "m.h5"), "--svm-type", svm_type, "--gamma", "0.2",
          *ours_options, "--iterations", "300", "--pack", "50", "--seed", "4", "--dtype", "float64", "--quiet"])
    main(["export", "--libsvm", str(d / "m.h5"), str(d / "m.model")])
    main(["predict", "--model", str(d / "m.h5"), "--data", str(d / "test.txt"), "--output", str(d / "p.npy"),
          "--quiet"])
    if WORLD.Get_rank() == 0:
        assert f"wrote {d / 'm.model'}: LIBSVM model" in capsys.readouterr().out
        ours = np.load(d / "p.npy")
        predicted, values = libsvm_predict(d / "m.model", d / "test.txt")
        np.testing.assert_allclose(values[:, 0], ours[:, 0], rtol=1e-6, atol=1e-6 * np.abs(ours[:, 0]).max())
        np.testing.assert_allclose(predicted, ours[:, 1], rtol=1e-6, atol=1e-6 * np.abs(ours[:, 0]).max())
        ys, xs = svmutil.svm_read_problem(str(d / "train.txt"))
        svmutil.svm_save_model(str(d / "lib.model"), svmutil.svm_train(ys, xs, libsvm_options + " -t 2 -g 0.2 -q"))
    polite_barrier(WORLD)
    main(["predict", "--model", str(d / "lib.model"), "--data", str(d / "test.txt"), "--output", str(d / "q.npy"),
          "--quiet"])
    main(["info", str(d / "lib.model")])
    if WORLD.Get_rank() == 0:
        assert f"LIBSVM model\n  {svm_type}, kernel rbf (gamma=0.2)" in capsys.readouterr().out
        predicted, values = libsvm_predict(d / "lib.model", d / "test.txt")
        ours = np.load(d / "q.npy")
        assert_decisions_close(ours[:, 0], values[:, 0])
        if svm_type == "one_class":
            assert set(predicted) == {-1.0, 1.0}
            np.testing.assert_array_equal(ours[:, 1], predicted)
        else:
            assert_decisions_close(ours[:, 1], predicted)
    polite_barrier(WORLD)


def test_export_and_libsvm_predict_errors_end_every_rank_with_one_message(mpi_tmp_path, capsys):
    d = mpi_tmp_path
    X, y = make_problem(150, 5, seed=57)
    write_libsvm(d / "train.txt", X, y)
    main(["train", "--data", str(d / "train.txt"), "--model", str(d / "lap.h5"), "--kernel", "laplacian",
          "--gamma", "0.2", *FAST])
    fails_with(capsys, ["export", "--libsvm", str(d / "lap.h5"), str(d / "lap.model")],
               f"{d / 'lap.h5'}: attribute 'kernel': laplacian has no LIBSVM kernel type")
    write_libsvm(d / "half.txt", X, np.where(y > 0, 1.5, 0.5))
    main(["train", "--data", str(d / "half.txt"), "--model", str(d / "half.h5"), *FAST])
    fails_with(capsys, ["export", "--libsvm", str(d / "half.h5"), str(d / "half.model")],
               "'classes': LIBSVM model files take integer labels; this model's are 0.5, 1.5")
    fails_with(capsys, ["export", "--libsvm", str(d / "lap.h5"), str(d / "nowhere" / "x.model")],
               "does not exist")
    with pytest.raises(SystemExit) as info:  # argparse: the format must be named
        main(["export", str(d / "lap.h5"), str(d / "x.model")])
    assert info.value.code == 2 and "--libsvm is required" in capsys.readouterr().err or WORLD.Get_rank() > 0
    if WORLD.Get_rank() == 0:
        X3, y3 = make_multiclass(120, 4, seed=58, labels=(1.0, 2.0, 3.0))
        ys = y3.tolist()
        xs = [dict(enumerate(row.tolist(), 1)) for row in X3]
        svmutil.svm_save_model(str(d / "three.model"), svmutil.svm_train(ys, xs, "-t 2 -g 0.5 -q"))
        text = (d / "three.model").read_text()
        (d / "bad.model").write_text(text.replace("nr_class 3", "nr_class 2").split("\nSV\n")[0] +
                                     "\nSV\n0.5 1:0.25 2:x\n")
    polite_barrier(WORLD)
    fails_with(capsys, ["predict", "--model", str(d / "three.model"), "--data", str(d / "train.txt"),
                        "--output", str(d / "three.npy")], f"{d / 'three.model'}: field 'nr_class': 3 classes")
    fails_with(capsys, ["predict", "--model", str(d / "bad.model"), "--data", str(d / "train.txt")],
               "field 'label': expected 2 values, got 3")
    if WORLD.Get_rank() == 0:
        text = (d / "bad.model").read_text().splitlines()
        fixed = ["rho 0.1" if t.startswith("rho") else "label 1 2" if t.startswith("label") else
                 "nr_sv 1 0" if t.startswith("nr_sv") else "total_sv 1" if t.startswith("total_sv") else t
                 for t in text]
        (d / "bad.model").write_text("\n".join(fixed) + "\n")
    polite_barrier(WORLD)
    line = len((d / "bad.model").read_text().splitlines())
    fails_with(capsys, ["predict", "--model", str(d / "bad.model"), "--data", str(d / "train.txt")],
               f"{d / 'bad.model'}: line {line}: expected a number after ':', got '2:x'")
    with pytest.raises(PPackError, match="not saved as a ppack model"):
        load_model(_one_sv_model(d), WORLD).save(d / "again.h5")
    if WORLD.Get_rank() == 0:  # nothing written by the failed commands, no temporary files
        left = sorted(p.name for p in d.iterdir())
        assert left == sorted(["train.txt", "lap.h5", "half.txt", "half.h5", "three.model", "bad.model",
                               "one.model"]), left
    polite_barrier(WORLD)


def _one_sv_model(d):
    if WORLD.Get_rank() == 0:
        (d / "one.model").write_text("svm_type c_svc\nkernel_type linear\nnr_class 2\ntotal_sv 1\nrho 0\n"
                                     "label 1 -1\nnr_sv 1 0\nSV\n1 1:1\n")
    polite_barrier(WORLD)
    return d / "one.model"
