"""Habits of scikit-learn and LIBSVM that the estimators keep: gamma's words, labels in y's own
type, predict_proba only with probability=True, verbose progress, errors naming the Python
parameters."""
import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI
from sklearn.base import clone

from ppack import BlockAveragedSVC, PackOneClassSVM, PackSVC, PackSVR, load_model
from ppack.errors import PPackError

from helpers import make_multiclass, make_problem

SELF = MPI.COMM_SELF
WORLD = MPI.COMM_WORLD


@pytest.mark.parametrize("sparse", [False, True])
def test_gamma_scale_and_auto_as_scikit_learns_svc(sparse, tmp_path):
    """gamma="scale" is 1 / (n_features X.var()) and "auto" (or None) 1 / n_features, as
    SVC's; the model file holds the number."""
    from sklearn.svm import SVC

    X, y = make_problem(200, 5, sparse=sparse, seed=81)
    X = X * 3.0 + (0 if sparse else 2.0)
    for word in ("scale", "auto"):
        ours = PackSVC(gamma=word, iterations=100, comm=SELF).fit(X, y)
        assert ours.gamma == word  # a parameter stays as given
        assert ours.spec_.gamma == pytest.approx(SVC(gamma=word).fit(X, y)._gamma, rel=1e-12)
    assert PackSVC(gamma=None, iterations=100, comm=SELF).fit(X, y).spec_.gamma == 1 / 5
    model = PackSVR(gamma="scale", iterations=100, comm=SELF).fit(X, y)
    model.save(tmp_path / "m.h5")
    assert load_model(tmp_path / "m.h5", SELF).gamma == model.spec_.gamma != 1 / 5
    with pytest.raises(PPackError, match="gamma: must be a finite number > 0 or 'scale' or 'auto' or None, "
                                         "got 'wide'"):
        PackOneClassSVM(gamma="wide", comm=SELF).fit(X)


def test_gamma_scale_of_a_constant_x_is_one():
    X = np.ones((20, 3))
    assert PackOneClassSVM(gamma="scale", iterations=20, comm=SELF).fit(X).spec_.gamma == 1.0


@pytest.mark.mpi
def test_gamma_scale_takes_the_variance_of_every_ranks_rows():
    """Each rank holds a slice of the rows; the variance is the whole data set's."""
    X, y = make_problem(301, 4, seed=82)
    X[:150] *= 10.0  # rank 0's rows vary more than the others'
    model = PackSVC(gamma="scale", iterations=100, comm=WORLD).fit(X, y)
    assert model.spec_.gamma == pytest.approx(1.0 / (4 * X.var()), rel=1e-12)


@pytest.mark.parametrize("estimator", [PackSVC(iterations=200, comm=SELF), BlockAveragedSVC(comm=SELF)],
                         ids=["PackSVC", "BlockAveragedSVC"])
@pytest.mark.parametrize("multiclass", [False, True])
def test_labels_come_back_in_the_type_of_y(estimator, multiclass, tmp_path):
    """Integer (or bool) y gives classes_ and predictions of its type, also after a save and
    load (as int64); float y floats."""
    X, y = make_multiclass(200, 4, seed=83) if multiclass else make_problem(200, 4, seed=83)
    kinds = [np.int64, np.int32, np.float32] + ([] if multiclass else [bool])
    for kind in kinds:
        labels = y.astype(kind) if kind is not bool else y > 0
        model = clone(estimator).fit(X, labels)
        assert model.classes_.dtype == labels.dtype
        np.testing.assert_array_equal(model.classes_, np.unique(labels))
        predicted = model.predict(X)
        assert predicted.dtype == labels.dtype and np.mean(predicted == labels) > 0.6
    model = clone(estimator).fit(X, y.astype(np.int32))
    model.save(tmp_path / "m.h5")
    loaded = load_model(tmp_path / "m.h5", SELF)
    assert loaded.classes_.dtype == np.int64 and loaded.predict(X).dtype == np.int64
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_predict_proba_is_there_only_with_probability_true():
    """As SVC's: without probability=True the model has no predict_proba, and the error says
    what it needs."""
    X, y = make_problem(300, 4, seed=84)
    model = PackSVC(iterations=300, comm=SELF).fit(X, y)
    assert not hasattr(model, "predict_proba")
    with pytest.raises(AttributeError, match=r"'predict_proba': class probabilities need a model fitted with "
                                             r"probability=True"):
        model.predict_proba(X)
    model.set_params(probability=True)  # after the fit: the method is there, the sigmoids are not
    with pytest.raises(PPackError, match=r"class probabilities need a model trained with probability=True"):
        model.predict_proba(X)
    proba = PackSVC(iterations=300, probability=True, calibration="training", comm=SELF).fit(X, y).predict_proba(X)
    assert proba.shape == (300, 2) and np.allclose(proba.sum(axis=1), 1.0)


def test_errors_name_the_python_parameters_and_the_command_line_its_flags(tmp_path, monkeypatch, capsys):
    """The same problems, met from Python and from `train`: each names what its caller wrote."""
    from ppack.cli import main

    from helpers import write_libsvm

    X, y = make_problem(390, 4, seed=85)
    with pytest.raises(PPackError) as info:
        PackSVC(probability=True, comm=SELF).fit(X, y)
    assert str(info.value) == ("probability=True holds out 200 calibration rows, more than half of the 390 training "
                               "rows: give validation a fraction, or calibration='training' to fit the sigmoids on "
                               "the training rows (overconfident)")
    (tmp_path / "notes.h5").write_text("not a checkpoint")
    with pytest.raises(PPackError, match=r"; checkpoint must name a ppack checkpoint") as info:
        PackSVC(iterations=100, comm=SELF).fit(X, y, checkpoint=tmp_path / "notes.h5", resume=True)
    monkeypatch.setitem(__import__("sys").modules, "cupy", None)  # import cupy fails
    with pytest.raises(PPackError, match=r"^device='gpu': CuPy is not installed; .* or train with device='cpu'$"):
        PackSVC(device="gpu", iterations=100, comm=SELF).fit(X, y)

    write_libsvm(tmp_path / "small.txt", X, y, comm=SELF)
    with pytest.raises(SystemExit):
        main(["train", "--data", str(tmp_path / "small.txt"), "--probability"], comm=SELF)
    assert ("ppack: error: --probability holds out 200 calibration rows, more than half of the 390 training rows: "
            "give --validation a fraction, or --calibration training to fit the sigmoids") in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--data", str(tmp_path / "small.txt"), "--device", "gpu"], comm=SELF)
    assert "--device gpu: CuPy is not installed; " in capsys.readouterr().err
    with pytest.raises(PPackError, match=r"^validation=0.05 holds out \d+ rows, fewer than the 200 probability=True"):
        PackSVC(probability=True, validation=0.05, comm=SELF).fit(*make_problem(1000, 4, seed=85))


class _Clock:
    """A monotonic clock ten seconds further on at every reading (``progress.Progress`` then
    prints at every pack)."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self):
        self.now += 10.0
        return self.now


@pytest.mark.parametrize("make", [
    lambda **kw: PackSVC(iterations=300, pack=50, **kw), lambda **kw: PackSVR(iterations=300, pack=50, **kw),
    lambda **kw: PackOneClassSVM(iterations=300, pack=50, **kw), lambda **kw: BlockAveragedSVC(**kw)],
    ids=["PackSVC", "PackSVR", "PackOneClassSVM", "BlockAveragedSVC"])
def test_verbose_progress_lines_on_stderr_and_silence_by_default(make, monkeypatch, capsys):
    """verbose=0 (the default) prints nothing; verbose=1 the first use's compile (once in a
    process), progress lines and a summary on stderr, after the estimator's name."""
    import ppack.progress
    from ppack.packsvm import loop, warmup

    X, y = make_problem(300, 4, seed=86)
    monkeypatch.setattr(warmup, "_USED", set())  # as in a fresh process
    model = make(comm=SELF).fit(X, y)
    model.predict(X)
    assert capsys.readouterr() == ("", "")
    monkeypatch.setattr(warmup, "_USED", set())
    monkeypatch.setattr(ppack.progress, "time", _Clock())
    monkeypatch.setattr(loop, "PROGRESS_EVERY", 0.0)  # the loop's own cadence: every pack reports
    name = type(model).__name__
    make(comm=SELF, verbose=True).fit(X, y).predict(X)
    out, err = capsys.readouterr()
    assert out == "" and all(line.startswith((f"{name}: ", "  ")) for line in err.splitlines())
    assert f"{name}: trained in " in err
    if name == "BlockAveragedSVC":
        assert f"{name}: round 1: primal objective " in err
    else:
        assert err.count("numba kernels ready in") == 1 and "first prediction" not in err
        assert err.count(" it (") == 6 and "/300 it (100%)" in err  # a line per pack
        make(comm=SELF, verbose=1).fit(X, y)
        assert "numba kernels" not in capsys.readouterr().err  # once in a process


def test_verbose_tells_of_the_first_prediction_compile(monkeypatch, capsys):
    from ppack.packsvm import warmup

    X, y = make_problem(200, 4, seed=87)
    model = PackSVC(iterations=200, comm=SELF).fit(X, y)
    monkeypatch.setattr(warmup, "_USED", set())  # a model loaded in a fresh process, say
    model.set_params(verbose=1).predict(X)
    model.predict(X)
    err = capsys.readouterr().err
    assert err.count("PackSVC: first prediction of this process: its numba kernels compile") == 1
    assert err.count("PackSVC: predicted in ") == 1
    with pytest.raises(PPackError, match="verbose: must be an integer >= 0, got -1"):
        PackSVC(verbose=-1, comm=SELF).fit(X, y)


@pytest.mark.mpi
def test_verbose_lines_come_from_rank_0_alone(capsys):
    X, y = make_problem(200, 4, seed=88)
    PackSVC(iterations=200, verbose=1, comm=WORLD).fit(X, y).predict(X)
    err = capsys.readouterr().err
    assert ("PackSVC: trained in " in err) == (WORLD.Get_rank() == 0)
    if WORLD.Get_rank():
        assert err == ""
