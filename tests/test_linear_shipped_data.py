"""The linear solvers against LIBLINEAR on data the package ships (the first rows of the bundled
a9a, read as the installed package reads them): in a few seconds, the claim the real-data tests
make on the full a9a, w8a and ijcnn1 of tests/data: each solver's primal objective at C = 1 within 1% of LIBLINEAR's (Pegasos, an SGD
method run for a fixed number of epochs: within 3%)."""
import numpy as np
import pytest

from ppack.data.bundled import bundled_path
from ppack.data.hdf5 import read_rows
from ppack.linear import alm, dcd, llsvm, pegasos
from ppack.linear.problem import primal_objective

ROWS = 4000  # the first rows of the bundled a9a: a few seconds for all the solvers


@pytest.fixture(scope="module")
def a9a_rows():
    X, y = read_rows(bundled_path("a9a"), 0, ROWS, dtype=np.float64)
    return X, y


def liblinear_objective(X, y, p):
    """LIBLINEAR's primal objective, -s 3 (p = 1) or -s 1 (p = 2), -B 1 -c 1 -e 0.001."""
    ll = pytest.importorskip("liblinear.liblinearutil", reason="liblinear-official is not installed")
    model = ll.train(ll.problem(y, X), ll.parameter(f"-s {3 if p == 1 else 1} -B 1 -c 1 -e 0.001 -q"))
    w, b = model.get_decfun()
    sign = 1.0 if model.get_labels()[0] == 1 else -1.0  # LIBLINEAR scores its first label
    return primal_objective(X, y, sign * np.array(w), sign * b, 1.0, p)


SOLVERS = {
    "dcd l1": (1, 0.01, lambda X, y: dcd.solve(X, y, 1.0, loss="l1")),
    "dcd l2": (2, 0.01, lambda X, y: dcd.solve(X, y, 1.0, loss="l2")),
    "alm l1": (1, 0.01, lambda X, y: alm.solve(X, y, 1.0, loss="l1", tol=1e-3, max_epochs=300)),
    "alm l2": (2, 0.01, lambda X, y: alm.solve(X, y, 1.0, loss="l2", tol=1e-3, max_epochs=300)),
    "llsvm": (1, 0.01, lambda X, y: llsvm.solve(X, y, 1.0, tol=0.01, full_passes=5)),
    "pegasos": (1, 0.03, lambda X, y: pegasos.solve(X, y, 1.0, epochs=100, seed=0)),
}


@pytest.mark.parametrize("name", list(SOLVERS))
def test_solver_reaches_liblinears_objective_on_the_bundled_a9a(a9a_rows, name):
    X, y = a9a_rows
    p, slack, solve = SOLVERS[name]
    target = liblinear_objective(X, y, p)
    sol = solve(X, y)
    ours = primal_objective(X, y, sol.w, sol.b, 1.0, p)
    assert abs(ours - target) <= slack * target, (ours, target)
