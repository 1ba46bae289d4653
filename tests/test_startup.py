"""Start-up: `import ppack` and `python -m ppack --help` load neither numba, h5py, scipy nor
scikit-learn; no command imports scikit-learn or scipy.stats; the public estimators are
scikit-learn's whichever is imported first. Each runs in a fresh process, which reports the
modules it had loaded when it exited. (bench/startup.py measures the time and memory.)"""
import json
import subprocess
import sys

import pytest
from mpi4py import MPI

from helpers import clean_mpi_env, make_problem, write_libsvm

# python -c WRAPPER LISTING ARGS...: `python -m ppack ARGS...`, then the names in sys.modules
# written to LISTING (JSON) at exit, --help's SystemExit included
WRAPPER = """import atexit, json, runpy, sys
listing = sys.argv.pop(1)
atexit.register(lambda: open(listing, "w").write(json.dumps(sorted(sys.modules))))
sys.argv[0] = "ppack"
runpy.run_module("ppack", run_name="__main__", alter_sys=True)
"""
NEVER_IN_A_COMMAND = ("sklearn", "scipy.stats", "cupy")  # cupy: only `--device gpu` imports it
NEVER_AT_START = ("sklearn", "scipy", "numba", "h5py")


def run_python(args, timeout=240):
    out = subprocess.run([sys.executable, *map(str, args)], env=clean_mpi_env(), capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stderr
    return out


def ppack_modules(tmp_path, *args):
    """The modules a `python -m ppack ARGS` process had imported at its (successful) exit, and its output."""
    listing = tmp_path / "modules.json"
    out = run_python(["-c", WRAPPER, listing, *args])
    return set(json.loads(listing.read_text())), out.stdout


def within(modules, packages):
    """The modules that are one of ``packages`` or inside one."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


@pytest.mark.job
@pytest.mark.second_tier  # starts its own jobs: the CI's second tier keeps the first under 4 minutes
def test_train_predict_and_info_import_neither_scikit_learn_nor_scipy_stats(tmp_path):
    X, y = make_problem(200, 5, seed=90)
    data = tmp_path / "train.txt"
    write_libsvm(data, X, y, comm=MPI.COMM_SELF)
    model = tmp_path / "model.h5"
    trained, _ = ppack_modules(tmp_path, "train", "--data", data, "--iterations", 200, "--model", model, "--quiet")
    assert model.is_file() and "ppack.packsvm.loop" in trained  # it trained
    assert within(trained, NEVER_IN_A_COMMAND) == []
    predicted, out = ppack_modules(tmp_path, "predict", "--model", model, "--data", data)
    assert "accuracy" in out and "ppack.packsvm.predict" in predicted
    assert within(predicted, NEVER_IN_A_COMMAND) == []
    described, out = ppack_modules(tmp_path, "info", model)
    assert "ppack kernel model" in out
    assert within(described, NEVER_IN_A_COMMAND) == []


@pytest.mark.job
@pytest.mark.second_tier  # starts its own jobs: the CI's second tier keeps the first under 4 minutes
def test_the_linear_trainer_imports_neither_scikit_learn_nor_scipy_stats(tmp_path):
    data = tmp_path / "train.txt"
    write_libsvm(data, *make_problem(200, 5, seed=91), comm=MPI.COMM_SELF)
    trained, out = ppack_modules(tmp_path, "train", "--solver", "dcd", "--data", data)
    assert "primal objective" in out and "ppack.linear.dcd" in trained
    assert within(trained, NEVER_IN_A_COMMAND) == []


@pytest.mark.job
@pytest.mark.second_tier  # starts its own jobs: the CI's second tier keeps the first under 4 minutes
def test_help_and_import_ppack_load_neither_numba_h5py_scipy_nor_scikit_learn(tmp_path):
    helped, out = ppack_modules(tmp_path, "--help")
    assert out.startswith("usage: ") and "ppack.cli.train" in helped
    assert within(helped, NEVER_AT_START) == []
    listing = tmp_path / "import.json"
    run_python(["-c", f"import json, sys, ppack; open({str(listing)!r}, 'w').write(json.dumps(list(sys.modules)))"])
    imported = set(json.loads(listing.read_text()))
    assert "ppack.errors" in imported and within(imported, NEVER_AT_START) == []


@pytest.mark.job
@pytest.mark.second_tier  # starts its own jobs: the CI's second tier keeps the first under 4 minutes
@pytest.mark.parametrize("first", ["sklearn", "ppack"])
def test_the_public_estimators_are_scikit_learns_whichever_is_imported_first(first):
    pytest.importorskip("sklearn")
    imports = ["import sklearn.base", "import ppack"]
    code = "\n".join((imports if first == "sklearn" else imports[::-1]) + [
        "from ppack import BlockAveragedSVC, PackSVC, load_model",
        "from ppack.estimators import ESTIMATORS",
        "from sklearn.base import BaseEstimator, ClassifierMixin, clone",
        "for cls in (PackSVC, BlockAveragedSVC, *ESTIMATORS.values()):",
        "    assert issubclass(cls, BaseEstimator) and issubclass(cls, ClassifierMixin), cls",
        "assert load_model is ppack.estimators.load_model and ESTIMATORS['kernel'] is PackSVC",
        "print(clone(PackSVC(C=2.0)).get_params()['C'])",
    ])
    assert float(run_python(["-c", code], timeout=120).stdout) == 2.0
