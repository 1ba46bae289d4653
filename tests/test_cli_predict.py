"""`predict`, after `convert` and `train`: decision files of every format and the metrics, on every rank."""
import json

import h5py
import numpy as np
import pytest
from mpi4py import MPI

from ppack import PackSVC
from ppack.cli import main
from ppack.mpi.comm import polite_barrier

from helpers import TRAIN, make_problem, write_libsvm

WORLD = MPI.COMM_WORLD


@pytest.mark.parametrize("sparse", [False, True])
def test_convert_train_save_load_predict_round_trip(sparse, mpi_tmp_path, capsys):
    X, y = make_problem(600, 10, sparse=sparse, seed=31)
    Xt, yt = make_problem(200, 10, sparse=sparse, seed=32)
    d = mpi_tmp_path
    write_libsvm(d / "train.txt", X, y)
    write_libsvm(d / "test.txt", Xt, yt)
    storage = "csr" if sparse else "dense"
    main(["convert", str(d / "train.txt"), str(d / "train.h5"), "--n-features", "10", "--storage", storage,
          "--quiet"])
    polite_barrier(WORLD)
    with h5py.File(d / "train.h5", "r") as f:
        assert f.attrs["storage"] == storage
    main(["train", "--data", str(d / "train.h5"), "--test", str(d / "test.txt"), "--model", str(d / "m.h5"),
          "--metrics-json", str(d / "train.json"), *TRAIN])
    main(["predict", "--model", str(d / "m.h5"), "--data", str(d / "test.txt"), "--output", str(d / "out.npy"),
          "--metrics-json", str(d / "predict.json"), "--quiet"])
    main(["predict", "--model", str(d / "m.h5"), "--data", str(d / "test.txt"), "--output", str(d / "out.txt"),
          "--quiet"])
    reference = PackSVC(gamma=0.2, C=5, iterations=900, pack=50, seed=4, comm=WORLD).fit(X, y)
    expected = reference.decision_function(Xt)
    if WORLD.Get_rank() == 0:
        out = np.load(d / "out.npy")
        np.testing.assert_allclose(out[:, 0], expected, rtol=1e-10, atol=1e-10)
        np.testing.assert_array_equal(out[:, 1], np.where(expected >= 0, 1.0, -1.0))
        text = np.loadtxt(d / "out.txt", skiprows=1)
        np.testing.assert_allclose(text, out, rtol=1e-15)
        train_metrics = json.loads((d / "train.json").read_text())
        predict_metrics = json.loads((d / "predict.json").read_text())
        accuracy = np.mean(out[:, 1] == yt)
        assert train_metrics["test_accuracy"] == pytest.approx(accuracy)
        assert predict_metrics["test_accuracy"] == pytest.approx(accuracy)
        assert accuracy > 0.6  # better than chance on a balanced problem
        assert train_metrics["ranks"] == WORLD.Get_size()
        assert train_metrics["allreduce_calls"] == 2 * train_metrics["packs"] == 2 * 18
        assert train_metrics["support_vectors"] == reference.n_support_
        # --dtype auto: these well-scaled rows are computed in float32, with the bound recorded
        assert train_metrics["dtype"] == reference.dtype_ == "float32"
        assert train_metrics["float32_error_bound"] == pytest.approx(reference.float32_error_bound_)
        assert 0 < train_metrics["float32_error_bound"] < 1e-2
        seconds = train_metrics["seconds"]
        assert set(seconds) >= {"total", "read", "kernel_sums", "partial_sums", "pair_kernels", "communication",
                                "sequential_updates", "evaluate", "save", "startup"}
        # the parallel products are parts of each rank's local work (the maxima over ranks may come from
        # different ranks, so the sum is checked rank by rank); the start-up excludes read and compile
        ranks = train_metrics["over_ranks"]["per_rank"]["seconds"]
        for products, pairs, local, total in zip(ranks["partial_sums"], ranks["pair_kernels"], ranks["kernel_sums"],
                                                 ranks["total"]):
            assert 0 < products + pairs <= local <= total
        assert max(ranks["kernel_sums"]) == seconds["kernel_sums"] <= seconds["total"]
        assert seconds["startup"] > 0
        # the serial part is taken per rank, then its maximum: at least the difference of the maxima
        differences = seconds["total"] - seconds["partial_sums"] - seconds["pair_kernels"] - \
            seconds["communication"] - seconds["shadow"]  # pipelined: the packs ahead's delivery in the shadow
        assert differences - 1e-9 <= seconds["serial"] <= seconds["total"]
        if WORLD.Get_size() == 1:
            assert seconds["serial"] == differences
        # 18 packs of r = 50 rows computed in float32, so stored as float32: labels 8 r, then values
        # 4 r d (dense) or int32 counts 4 r, int32 indices and float32 values 8 r L (L the longest row)
        rows = 4 * 50 + 8 * 50 * int(np.diff(X.indptr).max()) if sparse else 4 * 50 * 10
        assert train_metrics["bytes"] == {"collective1": 18 * (8 * 50 + rows),
                                          "collective2": 18 * 8 * (50 + 50 * 51 // 2 + 50 + 4 * WORLD.Get_size() + 2)}
        peaks = train_metrics["memory"]["peak_rss_bytes"]
        assert set(peaks) == {"after_read", "after_training", "after_save"}
        for phase in peaks.values():  # one figure per rank, in bytes, never falling
            assert len(phase) == WORLD.Get_size() and min(phase) > 10 * 2**20
        assert all(a <= b <= c for a, b, c in zip(peaks["after_read"], peaks["after_training"], peaks["after_save"]))
        assert 0 < train_metrics["memory"]["table_bytes"][0] and sum(train_metrics["memory"]["shard_bytes"]) > 0
        assert set(predict_metrics["seconds"]) == {"load_model", "read", "predict"}
        with h5py.File(d / "m.h5", "r") as f:
            assert f.attrs["format"] == "ppack-model" and f.attrs["kernel"] == "rbf"
            assert f.attrs["gamma"] == 0.2 and f.attrs["n_features"] == 10
            np.testing.assert_array_equal(f["classes"][()], [-1.0, 1.0])
    polite_barrier(WORLD)


def test_multiclass_train_and_predict_write_one_column_per_class(mpi_tmp_path, capsys):
    """A 4-class text file trains one-vs-rest in one run; predict writes (n, K) decisions in the model's
    class order and the labels of the largest, as .h5, .npy (n, K + 1) and text with a column per class."""
    from helpers import make_multiclass

    X, y = make_multiclass(400, 6, seed=41)
    d = mpi_tmp_path
    write_libsvm(d / "train.txt", X, y)
    main(["train", "--data", str(d / "train.txt"), "--model", str(d / "m.h5"), "--gamma", "0.3", "--C", "10",
          "--iterations", "800", "--pack", "50", "--probability", "--quiet"])
    for suffix in ("h5", "npy", "txt"):
        main(["predict", "--model", str(d / "m.h5"), "--data", str(d / "train.txt"), "--output",
              str(d / f"out.{suffix}"), "--quiet"])
    main(["predict", "--model", str(d / "m.h5"), "--data", str(d / "train.txt"), "--output", str(d / "p.npy"),
          "--proba", "--quiet"])
    main(["predict", "--model", str(d / "m.h5"), "--data", str(d / "train.txt"), "--output", str(d / "p.h5"),
          "--proba", "--quiet"])
    main(["info", str(d / "m.h5")])
    info = capsys.readouterr().out
    if WORLD.Get_rank() == 0:
        assert "4 classes one-vs-rest (3, 5, 7, 11)" in info
        with h5py.File(d / "out.h5", "r") as f:
            decision, label = f["decision"][()], f["label"][()]
        assert decision.shape == (400, 4)
        np.testing.assert_array_equal(label, np.array([3.0, 5.0, 7.0, 11.0])[np.argmax(decision, axis=1)])
        assert np.mean(label == y) > 0.8
        np.testing.assert_array_equal(np.load(d / "out.npy"), np.column_stack([decision, label]))
        with h5py.File(d / "p.h5", "r") as f:
            proba = f["proba"][()]
        assert proba.shape == (400, 4)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
        np.testing.assert_array_equal(np.load(d / "p.npy"), np.column_stack([decision, label, proba]))
        lines = (d / "out.txt").read_text().splitlines()
        assert lines[0] == "decision_3 decision_5 decision_7 decision_11 label"
        np.testing.assert_allclose(np.loadtxt(d / "out.txt", skiprows=1), np.column_stack([decision, label]),
                                   rtol=1e-15)
    polite_barrier(WORLD)


def test_proba_of_a_model_without_probabilities_is_refused(mpi_tmp_path, capsys):
    from helpers import fails_with

    X, y = make_problem(200, 5, seed=43)
    d = mpi_tmp_path
    write_libsvm(d / "train.txt", X, y)
    main(["train", "--data", str(d / "train.txt"), "--model", str(d / "m.h5"), "--iterations", "200", "--quiet"])
    fails_with(capsys, ["predict", "--model", str(d / "m.h5"), "--data", str(d / "train.txt"), "--output",
                        str(d / "p.npy"), "--proba"], "has no probability sigmoids; train it with --probability")
    assert not (d / "p.npy").exists()


def test_data_of_another_width_is_refused_unless_libsvm_text_leaves_out_the_last_features(mpi_tmp_path, capsys):
    """The model's width, or narrower LIBSVM text (LIBSVM's convention: the last features
    may be absent); an HDF5 data set narrower or wider, or wider text, is one line naming the
    file and both widths. In Python, an array of another width is refused as scikit-learn does."""
    from ppack.base import load_model
    from ppack.data.hdf5 import write_dataset

    from helpers import fails_with

    X, y = make_problem(200, 8, seed=44)
    d = mpi_tmp_path
    write_libsvm(d / "train.txt", X, y)
    write_libsvm(d / "narrow.txt", X[:, :5], y)
    write_libsvm(d / "wide.txt", *make_problem(50, 11, seed=45))
    if WORLD.Get_rank() == 0:
        write_dataset(d / "narrow.h5", X[:, :5], y)
        write_dataset(d / "wide.h5", *make_problem(50, 11, seed=45))
    polite_barrier(WORLD)
    model = str(d / "m.h5")
    main(["train", "--data", str(d / "train.txt"), "--model", model, *TRAIN])
    for name, width, expected in (("narrow.h5", 5, "8 (only LIBSVM text may leave out the last features)"),
                                  ("wide.h5", 11, "8 (only LIBSVM text may leave out the last features)"),
                                  ("wide.txt", 11, "at most 8")):
        fails_with(capsys, ["predict", "--model", model, "--data", str(d / name), "--output", str(d / "out.npy")],
                   f"{d / name}: the data has {width} features but the model was trained with 8; expected {expected}")
        assert not (d / "out.npy").exists()
    main(["predict", "--model", model, "--data", str(d / "narrow.txt"), "--output", str(d / "out.npy"), "--quiet"])
    fitted = load_model(model, WORLD)
    expected = fitted.decision_function(np.column_stack([X[:, :5], np.zeros((200, 3))]))
    if WORLD.Get_rank() == 0:
        np.testing.assert_allclose(np.load(d / "out.npy")[:, 0], expected, rtol=1e-12)
    polite_barrier(WORLD)
    with pytest.raises(ValueError, match="X has 5 features, but PackSVC is expecting 8 features as input"):
        fitted.decision_function(X[:, :5])


def test_predict_says_before_predicting_that_the_first_use_compiles(mpi_tmp_path, capsys):
    """A first predict on a machine waits for numba's compile: the line saying so comes once,
    before the result's."""
    X, y = make_problem(200, 5, seed=51)
    d = mpi_tmp_path
    write_libsvm(d / "train.txt", X, y)
    main(["train", "--data", str(d / "train.txt"), "--model", str(d / "m.h5"), "--iterations", "200", "--quiet"])
    capsys.readouterr()
    main(["predict", "--model", str(d / "m.h5"), "--data", str(d / "train.txt")])
    lines = capsys.readouterr().out.splitlines()
    if WORLD.Get_rank() == 0:
        compiles = [k for k, line in enumerate(lines) if "compile on this machine's first use" in line]
        predicted = [k for k, line in enumerate(lines) if line.startswith("predicted 200 rows")]
        assert len(compiles) == 1 and len(predicted) == 1 and compiles[0] < predicted[0]
    else:
        assert lines == []
