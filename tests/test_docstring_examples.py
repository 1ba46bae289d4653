"""The Examples sections of the public API's docstrings run as doctests (the site's API
reference shows them, and docs/api_checks.py requires one on each public name).

Collective examples (the estimators, the grid search, ``load_model``, ``load_shard``) run on every rank of an
MPI run, in a folder the ranks share, as a user's script under ``mpiexec`` would; the others
(data writers and readers that one process calls) run on rank 0 alone, in its own folder.
"""
import doctest

import pytest

import ppack
from ppack import model_selection
from ppack.data import bundled, convert, hdf5
from ppack.packsvm import plan

COLLECTIVE = {"PackSVC": ppack.PackSVC, "PackSVR": ppack.PackSVR, "PackOneClassSVM": ppack.PackOneClassSVM,
              "BlockAveragedSVC": ppack.BlockAveragedSVC, "load_model": ppack.load_model,
              "load_shard": ppack.load_shard, "PackGridSearchCV": model_selection.PackGridSearchCV}
ONE_PROCESS = {"Shard": ppack.Shard, "convert": convert.convert, "write_dataset": hdf5.write_dataset,
               "bundled_path": bundled.bundled_path, "make_plan": plan.make_plan, "Plan": plan.Plan}
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def run_examples(name, obj):
    """Run the doctest of ``obj``'s own docstring; fail with doctest's report."""
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, globs={})
    assert len(tests) == 1 and tests[0].examples, f"{name}: no Examples in its docstring"
    report = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    runner.run(tests[0], out=report.append)
    assert runner.failures == 0, "".join(report)


def test_every_public_name_of_the_package_has_its_examples_run():
    errors = {"PPackError", "InputError", "FeatureScaleWarning", "__version__"}  # the error and warning types'
    # docstrings have no examples
    assert set(ppack.__all__) - errors <= set(COLLECTIVE) | set(ONE_PROCESS)


@pytest.mark.parametrize("name", sorted(COLLECTIVE))
def test_collective_examples(name, mpi_tmp_path, monkeypatch):
    monkeypatch.chdir(mpi_tmp_path)
    run_examples(name, COLLECTIVE[name])


@pytest.mark.parametrize("name", sorted(ONE_PROCESS))
def test_one_process_examples(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_examples(name, ONE_PROCESS[name])
