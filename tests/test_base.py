"""The estimator base: loading any model file, finding the two classes, exclusive parameters."""
import inspect

import h5py
import numpy as np
import pytest
from mpi4py import MPI

import ppack.base
import ppack.linear.estimator
import ppack.packsvm.estimator
from ppack import BlockAveragedSVC, PackSVC, load_model
from ppack.base import find_classes
from ppack.data.shard import Shard
from ppack.errors import PPackError
from ppack.estimators import ESTIMATORS
from ppack.registry import MODEL_TYPES
from ppack.model.linear import LinearModelFile, save_linear_model

from helpers import fitted, make_problem

WORLD = MPI.COMM_WORLD
SELF = MPI.COMM_SELF


def test_load_model_returns_the_estimator_of_the_files_type(tmp_path):
    """A kernel model file loads as a PackSVC, a linear one as a BlockAveragedSVC; both predict as saved."""
    X, y = make_problem(120, 4, seed=80, labels=(2.0, 5.0))
    kernel = fitted(X, y, iterations=200, pack=50)
    kernel.save(tmp_path / "kernel.h5")
    w, b = np.array([0.5, -1.0, 0.25, 2.0]), 0.125
    save_linear_model(tmp_path / "linear.h5", LinearModelFile(w, b, np.array([2.0, 5.0]), "dcd", 1.0, "l1", 1.0,
                                                               True, "identity", 4, {}))
    loaded = load_model(tmp_path / "kernel.h5", SELF)
    assert type(loaded) is PackSVC
    np.testing.assert_allclose(loaded.decision_function(X), kernel.decision_function(X), rtol=1e-12, atol=1e-12)
    linear = load_model(tmp_path / "linear.h5", SELF)
    assert type(linear) is BlockAveragedSVC
    np.testing.assert_allclose(linear.decision_function(X), X @ w + b, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(linear.predict(X), np.where(X @ w + b >= 0, 5.0, 2.0))
    # the command line's loader: the trainers' own classes, which do not need scikit-learn
    assert type(ppack.base.load_model(tmp_path / "kernel.h5", SELF)) is ppack.packsvm.estimator.PackSVC
    assert type(ppack.base.load_model(tmp_path / "linear.h5", SELF)) is ppack.linear.estimator.BlockAveragedSVC


def test_every_model_type_has_a_public_estimator_over_its_trainers_class():
    assert set(ESTIMATORS) == set(MODEL_TYPES)
    for kind, estimator in ESTIMATORS.items():
        trainer = MODEL_TYPES[kind]
        assert estimator is not trainer and issubclass(estimator, trainer), kind
        assert estimator.__name__ == trainer.__name__
        # the trainer's docstring, or (the API reference's estimators) its first paragraph, a
        # Parameters section drawn from the registry, and the rest of it as Notes
        summary, _, rest = trainer.__doc__.partition("\n\n")
        assert estimator.__doc__ == trainer.__doc__ or (
            estimator.__doc__.startswith(inspect.cleandoc(summary) + "\n\nParameters\n----------\n")
            and "Notes\n-----\n" + inspect.cleandoc(rest) in estimator.__doc__), kind


def test_load_model_refuses_an_unknown_model_type(tmp_path):
    """A model file of a type no trainer registered is an error naming the file and the attribute."""
    path = tmp_path / "m.h5"
    fitted(*make_problem(60, 3, seed=81), iterations=50).save(path)
    with h5py.File(path, "r+") as f:
        f.attrs["model_type"] = "tree"
    expected = r"m\.h5: attribute 'model_type': expected one of [a-z, ]*kernel[a-z, ]*, got 'tree'"
    with pytest.raises(PPackError, match=expected):
        load_model(path, SELF)


def test_find_classes_returns_the_two_sorted_label_values():
    """Any two label values, sorted."""
    X, _ = make_problem(20, 3, seed=82)
    y = np.where(np.arange(20) % 2, -3.0, 7.5)
    np.testing.assert_array_equal(find_classes(SELF, Shard.from_arrays(X, y)), [-3.0, 7.5])


@pytest.mark.parametrize("y,max_classes,message", [
    (np.ones(20), 10, "<array>: y: found one class (1); expected 2 to 10 classes"),
    (np.arange(20) % 3, 2, "<array>: y: found 3 classes (0, 1, 2); expected exactly two label values"),
    (np.arange(20) % 11, 10, "<array>: y: found 11 classes (0, 1, 2, 3, 4, 5, 6, 7, 8, 9 ...); expected 2 to 10"),
    (np.arange(20) / 7, 10, "<array>: y: Unknown label type: continuous (20 distinct values, not all integers"),
    (None, 2, "<array>: y: training data needs a label on every row"),
])
def test_find_classes_refuses_one_class_too_many_and_continuous_labels(y, max_classes, message):
    """One class, more than the trainer takes, regression targets, or rows without labels: a
    collective error saying which."""
    X, _ = make_problem(20, 3, seed=83)
    with pytest.raises(PPackError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        find_classes(SELF, Shard.from_arrays(X, y), max_classes)
    assert info.value.collective


@pytest.mark.mpi(min_size=2)
def test_find_classes_looks_at_every_ranks_rows():
    """A third label value on the last rank's rows only is an error on every rank."""
    X, y = make_problem(40, 3, seed=84)
    y[-1] = 9.0
    shard = Shard.from_arrays(X, y, WORLD.Get_rank(), WORLD.Get_size())
    with pytest.raises(PPackError, match="3 classes"):
        find_classes(WORLD, shard)
    np.testing.assert_array_equal(find_classes(WORLD, Shard.from_arrays(X[:-1], y[:-1], WORLD.Get_rank(),
                                                                        WORLD.Get_size())), [-1.0, 1.0])


@pytest.mark.parametrize("params,message", [
    ({"C": 2.0, "sigma": 0.1}, "C and sigma: give one or the other, not both"),
    ({"epochs": 2.0, "iterations": 100}, "epochs and iterations: give one or the other, not both"),
])
def test_validate_params_refuses_both_of_an_exclusive_pair(params, message):
    """C with sigma, or epochs with iterations, is refused; either one alone is fine."""
    with pytest.raises(PPackError, match=message):
        PackSVC(**params).validate_params()
    for name, value in params.items():
        assert PackSVC(**{name: value}).validate_params()[name] == value
