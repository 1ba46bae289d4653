"""A grid pass's checkpoint (``packsvm/grid.py``, ``packsvm/checkpoint.py``): a stopped pass
resumes exactly where it stopped, every column and every column's stop (tol) included, and a
checkpoint of another grid is refused, naming the file and what differs."""
import h5py
import numpy as np
import pytest
from mpi4py import MPI

from ppack import PackSVC
from ppack.errors import PPackError
from ppack.mpi.comm import polite_barrier
from ppack.packsvm.grid import train_grid

from helpers import make_multiclass, make_problem

SELF, WORLD = MPI.COMM_SELF, MPI.COMM_WORLD
PARAMS = {"kernel": "rbf", "gamma": 0.3, "epochs": 3, "pack": 20, "seed": 5, "dtype": "float64"}
Cs = [0.5, 4.0, 30.0]
SETTINGS = [{"gamma": 0.3}, {"kernel": "poly", "gamma": 0.2, "degree": 2, "coef0": 1.0}]


def _grid(comm, X, y, folds, params, **kwargs):
    return train_grid(PackSVC(comm=comm, **params), X, y, Cs, folds, 3, kernels=SETTINGS, **kwargs)


def _same_pass(resumed, full):
    """Both passes end in the same state: the same stored rows in the same slots, the same
    coefficients and scalars, and the same held-out decision values bit for bit."""
    np.testing.assert_array_equal(resumed.table.keys, full.table.keys)
    np.testing.assert_array_equal(resumed.table.coef, full.table.coef)
    np.testing.assert_array_equal(resumed.state.scale, full.state.scale)
    assert resumed.state.iteration == full.state.iteration
    np.testing.assert_array_equal(resumed.held, full.held)


CASES = [("binary", {"tol": 0.1, "tol_window": 40}), ("multiclass", {"average": True}),
         ("binary", {"validation": 0.2, "patience": 2, "validation_every": 2})]


def _resumes_exactly(comm, which, extra, path):
    X, y = make_problem(150, 6, seed=1) if which == "binary" else make_multiclass(150, 6, seed=2)
    folds = np.arange(len(y)) % 3
    params = {**PARAMS, **extra}
    full = _grid(comm, X, y, folds, params)
    first = _grid(comm, X, y, folds, params, checkpoint=path, checkpoint_every_packs=3, stop_after_packs=8)
    assert first.stopped and not hasattr(first, "held")  # stopped: not scored
    with h5py.File(path, "r") as f:
        assert f.attrs["complete"] and f.attrs["iteration"] == 8 * PARAMS["pack"]
        stopping = "tol" in extra or "validation" in extra
        assert ("column_stops" in f.attrs) == stopping and ("validation" in f.attrs) == ("validation" in extra)
    resumed = _grid(comm, X, y, folds, params, checkpoint=path, resume=True)
    assert resumed.resumed_from == 8 * PARAMS["pack"] and not resumed.stopped
    _same_pass(resumed, full)
    if stopping:
        assert np.any(full.stops.iteration >= 0)  # some columns stopped, and where they did is kept
        np.testing.assert_array_equal(resumed.stops.iteration, full.stops.iteration)
        np.testing.assert_array_equal(resumed.refit(1).decision_function(X), full.refit(1).decision_function(X))
    return full


@pytest.mark.parametrize("which, extra", CASES)
def test_a_stopped_grid_pass_resumes_exactly(which, extra, tmp_path):
    _resumes_exactly(SELF, which, extra, tmp_path / "grid.h5")


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("which, extra", CASES)
def test_a_stopped_grid_pass_resumes_exactly_on_every_rank(which, extra, mpi_tmp_path):
    full = _resumes_exactly(WORLD, which, extra, mpi_tmp_path / "grid.h5")
    polite_barrier(WORLD)
    # one rank reading the all-rank checkpoint: the entries dealt out again, the same pass to rounding
    X, y = make_problem(150, 6, seed=1) if which == "binary" else make_multiclass(150, 6, seed=2)
    on_one = _grid(SELF, X, y, np.arange(len(y)) % 3, {**PARAMS, **extra}, checkpoint=mpi_tmp_path / "grid.h5",
                   resume=True)
    assert on_one.resumed_from == 8 * PARAMS["pack"]
    np.testing.assert_allclose(on_one.held, full.held, rtol=0, atol=1e-9)
    polite_barrier(WORLD)


def test_columns_stopped_before_the_checkpoint_stay_stopped(tmp_path):
    """The checkpoint is taken after some columns have stopped (tol): they stay frozen when the
    pass resumes, where their separate fits stop."""
    X, y = make_problem(150, 6, seed=1)
    folds = np.arange(len(y)) % 3
    params = {**PARAMS, "tol": 0.1, "tol_window": 40}
    full = _grid(SELF, X, y, folds, params)
    stopped_at = full.stops.iteration[full.stops.iteration >= 0]
    packs = int(np.max(stopped_at)) // PARAMS["pack"]  # after the last column that stops has stopped
    first = _grid(SELF, X, y, folds, params, checkpoint=tmp_path / "g.h5", stop_after_packs=packs)
    assert first.stopped and np.all(first.stops.iteration == full.stops.iteration)
    resumed = _grid(SELF, X, y, folds, params, checkpoint=tmp_path / "g.h5", resume=True)
    _same_pass(resumed, full)


@pytest.mark.parametrize("change, named", [({"Cs": [0.5, 4.0, 31.0]}, "grid.C"),
                                           ({"folds": "other"}, "grid.fold_sha1"),
                                           ({"settings": SETTINGS[:1]}, "grid.kernels"),
                                           ({"params": {"seed": 6}}, "seed")])
def test_a_checkpoint_of_another_grid_is_refused(change, named, tmp_path):
    X, y = make_problem(150, 6, seed=1)
    folds = np.arange(len(y)) % 3
    path = tmp_path / "g.h5"
    _grid(SELF, X, y, folds, PARAMS, checkpoint=path, stop_after_packs=2)
    params = {**PARAMS, **change.get("params", {})}
    other = (np.arange(len(y)) + 1) % 3 if change.get("folds") else folds
    for resume in (True, False):  # never overwritten by another grid's fresh start either
        with pytest.raises(PPackError, match=rf"g\.h5: checkpoint was made with {named}=") as info:
            train_grid(PackSVC(comm=SELF, **params), X, y, change.get("Cs", Cs), other, 3,
                       kernels=change.get("settings", SETTINGS), checkpoint=path, resume=resume)
        assert "\n" not in str(info.value)


def test_progressive_scores_resume_with_their_record(tmp_path):
    """The progressive record (each row's last tested decision values) is in the checkpoint,
    each rank's shard rows in global row order: the resumed pass scores every row as the
    uninterrupted one; a checkpoint made with the score pass is refused for it."""
    _progressive_resumes(SELF, tmp_path / "progressive.h5")


@pytest.mark.mpi(min_size=2)
def test_progressive_scores_resume_with_their_record_on_every_rank(mpi_tmp_path):
    _progressive_resumes(WORLD, mpi_tmp_path / "progressive.h5")


def _progressive_resumes(comm, path):
    X, y = make_multiclass(150, 6, seed=2)
    folds = np.arange(len(y)) % 3
    full = _grid(comm, X, y, folds, PARAMS, scores="progressive")
    _grid(comm, X, y, folds, PARAMS, checkpoint=path, stop_after_packs=9, scores="progressive")
    with h5py.File(path, "r") as f:
        assert f["progressive"].shape == (150, full.held.shape[1] * full.held.shape[2])
    resumed = _grid(comm, X, y, folds, PARAMS, checkpoint=path, resume=True, scores="progressive")
    assert resumed.resumed_from == 9 * PARAMS["pack"]
    np.testing.assert_array_equal(resumed.held, full.held)
    with pytest.raises(PPackError, match="checkpoint was made with grid.scores='progressive', this run has "
                                         "grid.scores='pass'"):
        _grid(comm, X, y, folds, PARAMS, checkpoint=path, resume=True)
    polite_barrier(comm)


def test_search_checkpoints_each_pass_and_resumes_to_the_same_results(tmp_path):
    """PackGridSearchCV with a checkpoint: one file per pass (here two: the pack sizes), and a
    search resumed from finished passes' checkpoints scores them again without training."""
    from ppack.model_selection import PackGridSearchCV
    X, y = make_problem(150, 6, seed=1)
    grid = {"C": [0.5, 4.0], "pack": [10, 20]}
    search = PackGridSearchCV(PackSVC(comm=SELF, **PARAMS), grid, cv=3)
    search.fit(X, y, checkpoint=tmp_path / "s.h5", checkpoint_every_packs=5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.pass0.h5", "s.pass1.h5"]
    again = PackGridSearchCV(PackSVC(comm=SELF, **PARAMS), grid, cv=3)
    again.fit(X, y, checkpoint=tmp_path / "s.h5", resume=True)
    np.testing.assert_array_equal(again.cv_results_["mean_test_score"], search.cv_results_["mean_test_score"])
    np.testing.assert_array_equal(again.decision_function(X), search.decision_function(X))
    # pack 10: the last checkpoint at the end (45 packs), nothing trained again; pack 20: at 20 of 23 packs
    assert [p["resumed_from"] for p in again.grid_passes_] == [450, 400]
    assert [p["resumed_from"] for p in search.grid_passes_] == [None, None]
