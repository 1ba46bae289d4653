"""Early stopping on held-out rows (--validation, --patience)."""
import numpy as np
import pytest
from mpi4py import MPI

from ppack import PackSVC
from ppack.data.sampler import RowSampler, held_out

from helpers import make_multiclass, make_problem

SELF = MPI.COMM_SELF
WORLD = MPI.COMM_WORLD


def test_held_out_rows_are_a_seeded_fraction_the_sampler_never_draws():
    ids = np.arange(200_000)
    chosen = held_out(ids, 0.1, 7)
    assert 0.098 < chosen.mean() < 0.102
    np.testing.assert_array_equal(chosen, held_out(ids, 0.1, 7))
    assert np.mean(chosen == held_out(ids, 0.1, 8)) < 0.85  # another seed, other rows
    drawn = RowSampler(200_000, 3, (0.1, 7)).take(100_000)
    assert not held_out(drawn, 0.1, 7).any()
    one_at_a_time = RowSampler(200_000, 3, (0.1, 7))
    np.testing.assert_array_equal(np.concatenate([one_at_a_time.take(1) for _ in range(500)]), drawn[:500])


@pytest.mark.parametrize("comm", [pytest.param(SELF, id="1rank"),
                                  pytest.param(WORLD, id="all", marks=pytest.mark.mpi(min_size=2))])
@pytest.mark.parametrize("multiclass", [False, True])
def test_validation_stops_when_held_out_accuracy_stops_improving(comm, multiclass):
    X, y = make_multiclass(2000, 5, seed=91) if multiclass else make_problem(2000, 5, seed=91)
    model = PackSVC(gamma=0.3, C=5.0, epochs=20, pack=50, validation=0.2, validation_every=4, patience=3,
                    pipeline="auto", comm=comm).fit(X, y)
    report = model.training_["validation"]
    assert 350 < report["rows"] < 450 and report["stopped_early"]
    done = model.training_["iterations_done"]
    assert done < model.training_["iterations"] and done == report["history"][-1][0]
    accuracies = [a for _, a in report["history"]]
    assert max(accuracies[-3:]) <= report["best_accuracy"] == max(accuracies) > 0.75
    # no extra call in the packs; pipelined (above one rank), the two packs delivered ahead of the stop
    dropped = 2 if comm.Get_size() > 1 else 0
    assert model.training_["allreduce_calls"] == 2 * model.training_["packs"] + dropped
    assert report["collectives"] > 0
    held = held_out(np.arange(2000), 0.2, model.training_["seed"])
    assert not np.isin(np.flatnonzero(held), model.table_.keys).any()  # never trained on


def test_validation_measures_the_averaged_model_when_averaging():
    """With average=True the held-out accuracy is that of the averaged iterate, the model returned."""
    X, y = make_problem(1000, 5, seed=92)
    params = dict(gamma=0.3, C=5.0, pack=50, validation=0.2, validation_every=10, patience=50, average=True,
                  comm=SELF)
    model = PackSVC(iterations=1000, **params).fit(X, y)
    iteration, accuracy = model.training_["validation"]["history"][-1]
    assert iteration == 500  # the evaluation after pack 10; the average does not depend on T
    at_500 = PackSVC(iterations=500, **params).fit(X, y)
    held = np.flatnonzero(held_out(np.arange(1000), 0.2, model.training_["seed"]))
    assert accuracy == np.mean(at_500.predict(X[held]) == y[held])


@pytest.mark.parametrize("comm", [pytest.param(SELF, id="1rank"),
                                  pytest.param(WORLD, id="all", marks=pytest.mark.mpi(min_size=2))])
def test_a_run_resumed_after_validation_evaluations_stops_where_the_uninterrupted_one_does(comm, mpi_tmp_path):
    """The checkpoint keeps the accuracy history and patience count: a run stopped after some
    evaluations and resumed stops at the same iteration with the same model and history."""
    X, y = make_problem(2000, 5, seed=91)
    params = dict(gamma=0.3, C=5.0, epochs=20, pack=50, validation=0.2, validation_every=4, patience=3, comm=comm)
    whole = PackSVC(**params).fit(X, y)
    history = whole.training_["validation"]["history"]
    assert len(history) >= 5 and whole.training_["validation"]["stopped_early"]
    path = mpi_tmp_path / "v.h5"
    stop = 4 * (len(history) - 2)  # two evaluations before the stop: patience already counting
    stopped = PackSVC(**params).fit(X, y, checkpoint=path, stop_after_packs=stop)
    assert stopped.stopped_
    resumed = PackSVC(**params).fit(X, y, checkpoint=path, resume=True)
    assert resumed.training_["validation"]["history"] == history
    assert resumed.training_["iterations_done"] == whole.training_["iterations_done"]
    np.testing.assert_array_equal(resumed.decision_function(X), whole.decision_function(X))
