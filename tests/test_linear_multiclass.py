"""K classes one-vs-rest for every linear solver: class k's model is the binary run "k against
the rest" with the same seed, on 1 rank and on every rank; model files, the command line."""
import json

import h5py
import numpy as np
import pytest
from mpi4py import MPI

from ppack.cli import main
from ppack.errors import PPackError
from ppack.linear.estimator import BlockAveragedSVC
from ppack.mpi.comm import polite_barrier

from helpers import fails_with, make_multiclass, write_libsvm

WORLD = MPI.COMM_WORLD
SELF = MPI.COMM_SELF

# (solver, averaging, features, solver options): every solver once, both modes of the
# stochastic one, and the three feature maps, each map on a different solver
CASES = [
    ("dcd", "iterative", None, {}),
    ("dcd", "oneshot", "shifts:1", {}),
    ("llsvm", "iterative", None, {}),
    ("stream", "iterative", "hash:6", {}),
    ("alm", "iterative", None, {"max_epochs": 3}),
    ("pegasos", "iterative", None, {"epochs": 4, "pack": 100}),
    ("pegasos", "oneshot", "poly2", {"epochs": 4}),
]
IDS = [f"{c[0]}-{c[1]}-{c[2]}" for c in CASES]


def three_classes(n=150, sparse=True):
    """Three classes on 9 features (a 3x3 image, for the shifts map), labels 2, 5 and 9."""
    X, y = make_multiclass(n, 9, sparse=sparse, seed=21, labels=(2.0, 5.0, 9.0))
    return X, y


def classes_are_binary_runs(solver, averaging, features, options, comm):
    """Fit three classes, then each "k against the rest" alone (labels 1 and 0) with the same
    seed and row weights: the same weights to 1e-9, the same rounds (each class stops on its
    own gap; at most 2 rounds keep the test short) and objective."""
    X, y = three_classes()
    weights = np.random.default_rng(2).uniform(0.5, 2.0, len(y)) if solver == "dcd" else None
    params = dict(solver=solver, C=2.0, averaging=averaging, features=features, solver_options=options, seed=4,
                  rounds=2, comm=comm)
    multi = BlockAveragedSVC(**params).fit(X, y, sample_weight=weights)
    assert multi.w_.shape[1] == 3 and multi.b_.shape == (3,)
    for k, label in enumerate(multi.classes_):
        binary = BlockAveragedSVC(**params).fit(X, np.where(y == label, 1.0, 0.0), sample_weight=weights)
        np.testing.assert_allclose(multi.w_[:, k], binary.w_, rtol=0, atol=1e-9)
        assert abs(multi.b_[k] - binary.b_) <= 1e-9
        assert multi.report_[k].rounds == binary.report_.rounds
        assert multi.report_[k].primal[-1] == pytest.approx(binary.report_.primal[-1], rel=1e-12)
    decisions = multi.decision_function(X)
    assert decisions.shape == (len(y), 3)
    np.testing.assert_array_equal(multi.predict(X), multi.classes_[np.argmax(decisions, axis=1)])
    assert multi.training_["rounds"] == sum(r.rounds for r in multi.report_)


@pytest.mark.parametrize("solver,averaging,features,options", CASES, ids=IDS)
def test_each_class_is_the_binary_run_k_against_the_rest_on_one_rank(solver, averaging, features, options):
    classes_are_binary_runs(solver, averaging, features, options, SELF)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("solver,averaging,features,options", CASES, ids=IDS)
def test_each_class_is_the_binary_run_k_against_the_rest_on_every_rank(solver, averaging, features, options):
    classes_are_binary_runs(solver, averaging, features, options, WORLD)


def test_one_vs_rest_learns_the_classes_and_reports_each():
    X, y = three_classes(300, sparse=False)
    rounds = []
    model = BlockAveragedSVC("dcd", C=1.0, comm=SELF).fit(X, y, on_round=rounds.append)
    assert model.score(X, y) > 0.75
    assert {r.label for r in rounds} == {2.0, 5.0, 9.0}
    per_class = model.training_["per_class"]
    assert [c["class"] for c in per_class] == [2.0, 5.0, 9.0]
    assert model.training_["primal_objective"] == pytest.approx(sum(c["primal_objective"] for c in per_class))
    text = BlockAveragedSVC("dcd", C=1.0, comm=SELF).fit(X, np.array(["two", "five", "nine"])[np.searchsorted(
        [2.0, 5.0, 9.0], y)])
    np.testing.assert_array_equal(text.predict(X), np.array(["two", "five", "nine"])[np.searchsorted(
        [2.0, 5.0, 9.0], model.predict(X))])


def test_multiclass_model_file_round_trip_and_a_bad_block(tmp_path):
    X, y = three_classes(120)
    model = BlockAveragedSVC("dcd", C=1.0, features="poly2", comm=SELF).fit(X, y)
    model.save(tmp_path / "multi.h5")
    loaded = BlockAveragedSVC.load(tmp_path / "multi.h5", SELF)
    np.testing.assert_array_equal(loaded.decision_function(X), model.decision_function(X))
    np.testing.assert_array_equal(loaded.classes_, [2.0, 5.0, 9.0])
    with h5py.File(tmp_path / "multi.h5", "r") as f:
        assert f["w"].shape == (model.w_.shape[0], 3) and f["b"].shape == (3,)
    with h5py.File(tmp_path / "multi.h5", "a") as f:
        del f["b"]
        f["b"] = 0.5
    with pytest.raises(PPackError, match=r"multi.h5: datasets 'w' and 'b': expected shapes \(54, 3\) and \(3,\) "
                                         r"for 3 classes, got \(54, 3\) and \(\)"):
        BlockAveragedSVC.load(tmp_path / "multi.h5", SELF)


def test_train_predict_and_export_of_a_multiclass_linear_model(mpi_tmp_path, capsys):
    """`train --solver dcd` on three classes on every rank; predict writes (n, K + 1) as for
    kernel models; export refuses a linear model."""
    X, y = three_classes(240)
    d = mpi_tmp_path
    write_libsvm(d / "three.txt", X, y)
    main(["train", "--solver", "dcd", "--data", str(d / "three.txt"), "--test", str(d / "three.txt"),
          "--model", str(d / "lin.h5"), "--metrics-json", str(d / "lin.json"), "--rounds", "3", "--quiet"])
    main(["predict", "--model", str(d / "lin.h5"), "--data", str(d / "three.txt"), "--output", str(d / "o.npy"),
          "--metrics-json", str(d / "p.json"), "--quiet"])
    if WORLD.Get_rank() == 0:
        out = np.load(d / "o.npy")
        assert out.shape == (240, 4)
        np.testing.assert_array_equal(out[:, 3], np.array([2.0, 5.0, 9.0])[np.argmax(out[:, :3], axis=1)])
        trained, predicted = json.loads((d / "lin.json").read_text()), json.loads((d / "p.json").read_text())
        assert trained["test_accuracy"] == predicted["test_accuracy"] == pytest.approx(np.mean(out[:, 3] == y))
        assert trained["test_accuracy"] > 0.7 and len(trained["per_class"]) == 3
    polite_barrier(WORLD)
    fails_with(capsys, ["export", "--libsvm", str(d / "lin.h5"), str(d / "lin.model")],
               "attribute 'model_type': expected 'kernel', got 'linear'")

