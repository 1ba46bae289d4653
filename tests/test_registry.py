"""The registry: one rule per parameter (accept, normalise, refuse with a one-line message), and the
tables agreeing with the estimators, the kernels and the solvers they describe."""
import inspect
import math
import re

import numpy as np
import pytest

from ppack import PackSVC
from ppack.errors import PPackError
from ppack.kernels.formulas import KIND
from ppack.kernels.spec import KernelSpec
from ppack.linear.estimator import SOLVE, BlockAveragedSVC
from ppack.registry import (BOOL, KERNEL_TABLE, KERNELS, LINEAR_PARAMS, LINEAR_SOLVER_ENTRIES, LINEAR_SOLVERS, PACKSVM_PARAMS, SEED, Rule,
                            check_params, check_solver_options, count, integer, positive, real)

# (rule, value given, the normalised value and its type)
ACCEPTED = [
    (count(), 5, 5, int),
    (count(), 5.0, 5, int),
    (count(), np.int64(7), 7, int),
    (integer(0, 10), 10, 10, int),
    (positive(), 1, 1.0, float),
    (positive(), np.float32(0.5), 0.5, float),
    (real(1.0, 2.0, none=True), 2, 2.0, float),
    (real(1.0, 2.0, none=True), None, None, type(None)),
    (real(), -1e300, -1e300, float),
    (real(0.0, low_open=True, choices=("radius",)), "radius", "radius", str),
    (BOOL, True, True, bool),
    (BOOL, np.bool_(False), False, bool),
    (BOOL, "true", True, bool),
    (BOOL, "Yes", True, bool),
    (BOOL, "0", False, bool),
    (BOOL, "off", False, bool),
    (BOOL, 1, True, bool),
    (BOOL, 0, False, bool),
    (Rule("choice", choices=KERNELS), "poly", "poly", str),
    (Rule("text", none=True), "poly2", "poly2", str),
    (SEED, 2**53, 2**53, int),
]

# (rule, value given, the whole message for a parameter called NAME)
REFUSED = [
    (count(), 0, "NAME: must be an integer >= 1, got 0"),
    (count(), 2.5, "NAME: must be an integer >= 1, got 2.5"),
    (count(), "5", "NAME: must be an integer >= 1, got '5'"),
    (count(), True, "NAME: must be an integer >= 1, got True"),
    (count(), None, "NAME: must be an integer >= 1, got None"),
    (positive(), 0, "NAME: must be a finite number > 0, got 0"),
    (positive(), -0.5, "NAME: must be a finite number > 0, got -0.5"),
    (positive(), math.nan, "NAME: must be a finite number > 0, got nan"),
    (positive(), math.inf, "NAME: must be a finite number > 0, got inf"),
    (positive(none=True), -math.inf, "NAME: must be a finite number > 0 or None, got -inf"),
    (real(), math.nan, "NAME: must be a finite number, got nan"),
    (real(1.0, 2.0, none=True), 2.5, "NAME: must be a finite number >= 1 and <= 2 or None, got 2.5"),
    (real(0.0, low_open=True, choices=("radius",)), "R", "NAME: must be a finite number > 0 or 'radius', got 'R'"),
    (integer(0, 10), 11, "NAME: must be an integer >= 0 and <= 10, got 11"),
    (BOOL, "maybe", "NAME: must be True or False, got 'maybe'"),
    (BOOL, 2, "NAME: must be True or False, got 2"),
    (BOOL, None, "NAME: must be True or False, got None"),
    (Rule("choice", choices=KERNELS), "precomputed",
     "NAME: must be one of rbf, linear, poly, laplacian, sigmoid, got 'precomputed'"),
    (Rule("text", none=True), "", "NAME: must be a string or None, got ''"),
    (Rule("directory"), "/nonexistent/ppack-test-dir", "NAME: must be an existing directory, got "
                                                      "'/nonexistent/ppack-test-dir'"),
    (SEED, -1, "NAME: must be an integer >= 0 and <= 9223372036854775807, got -1"),
]


@pytest.mark.parametrize("rule,value,expected,kind", ACCEPTED)
def test_rule_accepts_and_normalises(rule, value, expected, kind):
    """An allowed value comes back as the plain Python value of the rule's kind."""
    got = rule.check("NAME", value)
    assert got == expected and type(got) is kind


@pytest.mark.parametrize("rule,value,message", REFUSED)
def test_rule_refuses_with_a_one_line_message(rule, value, message):
    """A refused value gives "NAME: must be ..., got ..." and nothing else."""
    with pytest.raises(PPackError, match=f"^{re.escape(message)}$"):
        rule.check("NAME", value)


def test_integer_rule_accepts_every_integer_in_range_exactly():
    """Integers too large for a double (seeds up to 2**63 - 1) are accepted and returned unchanged."""
    for value in (2**53 + 1, 2**62 + 3, 2**63 - 1):
        assert SEED.check("seed", value) == value


def test_directory_rule_accepts_an_existing_directory(tmp_path):
    """A path object or string of an existing directory comes back as a string."""
    assert Rule("directory").check("workdir", tmp_path) == str(tmp_path)
    assert Rule("directory", none=True).check("workdir", None) is None


def test_check_solver_options_lists_the_known_options():
    """An unknown solver option names itself, the solver and the options it has."""
    assert check_solver_options("dcd", {"tol": 1, "shrinking": "false"}) == {"tol": 1.0, "shrinking": False}
    with pytest.raises(PPackError, match="^solver option cache_rows: not an option of the dcd solver; expected "
                                         "one of tol, max_epochs, seed, shrinking$"):
        check_solver_options("dcd", {"cache_rows": 10})


@pytest.mark.parametrize("estimator,table", [(PackSVC, PACKSVM_PARAMS), (BlockAveragedSVC, LINEAR_PARAMS)])
def test_estimator_defaults_are_the_registry_defaults(estimator, table):
    """Every registry parameter is an ``__init__`` argument whose default is the registry's, and obeys its rule."""
    parameters = inspect.signature(estimator.__init__).parameters
    assert set(table) <= set(parameters)
    for name, param in table.items():
        assert parameters[name].default == param.default, name
        assert param.rule.check(name, param.default) == param.default, name
    assert check_params({name: param.default for name, param in table.items()}, table)


def test_every_kernel_name_has_a_numba_id_and_a_formula():
    """Each kernel name maps to its own integer id of the numba cores (its table position), and
    KernelSpec uses it; every entry has a formula text (the numba formulas are checked against
    numpy in test_kernels_formulas.py)."""
    assert KERNELS == tuple(k.name for k in KERNEL_TABLE) == tuple(KIND)
    assert list(KIND.values()) == list(range(len(KERNELS)))
    for name in KERNELS:
        assert KernelSpec(name).kind == KIND[name]
        assert KernelSpec(name).params()[0] == KIND[name]
        assert KernelSpec(name).facts.formula in KernelSpec(name).describe()


@pytest.mark.parametrize("solver", LINEAR_SOLVERS)
def test_every_solver_option_is_a_keyword_of_the_solvers_solve(solver):
    """Each option of the solver's registry entry is a named keyword argument of that solver's
    ``solve`` (and every linear solver of the registry has one)."""
    assert set(SOLVE) == set(LINEAR_SOLVERS) == set(LINEAR_SOLVER_ENTRIES)
    parameters = inspect.signature(SOLVE[solver]).parameters
    keywords = {name for name, p in parameters.items()
                if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)}
    assert sorted(set(LINEAR_SOLVER_ENTRIES[solver].options) - keywords) == []


@pytest.mark.parametrize("estimator", ["PackSVC", "PackSVR", "PackOneClassSVM"])
def test_pipeline_is_a_parameter_of_every_kernel_estimator_and_checked(estimator):
    """pipeline ("auto", "on", "off") is stored, returned by get_params, and anything else refused
    by the parameters' validation in one line."""
    import ppack

    cls = getattr(ppack, estimator)
    assert cls().get_params()["pipeline"] == "off"
    assert cls(pipeline="on").get_params()["pipeline"] == "on"
    assert cls(pipeline="off").validate_params()["pipeline"] == "off"
    with pytest.raises(PPackError, match="^pipeline: must be one of auto, on, off, got 'sideways'$"):
        cls(pipeline="sideways").validate_params()


def test_the_estimators_docstrings_show_every_parameter_with_its_real_default():
    """The public estimators' Parameters sections (registry.numpydoc_parameters) name every
    constructor parameter, in order, each with the default the constructor really has."""
    import ppack

    for estimator in (ppack.PackSVC, ppack.PackSVR, ppack.PackOneClassSVM, ppack.BlockAveragedSVC):
        parameters = [p for p in inspect.signature(estimator.__init__).parameters.values() if p.name != "self"]
        section = estimator.__doc__.split("Parameters\n----------\n", 1)[1].split("\n\n", 1)[0]
        entries = re.findall(r"^(\w+) : (.*)$", section, re.M)
        assert [name for name, _ in entries] == [p.name for p in parameters], estimator.__name__
        for (name, kind), parameter in zip(entries, parameters):
            assert kind.endswith(f", default={parameter.default!r}"), (estimator.__name__, name, kind)
