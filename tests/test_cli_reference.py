"""The CLI reference (docs/cli_reference.py, one page a subcommand) names every option of every
subcommand with its true default: the registry's for the training options, whose parser
default is None by design, and the parser's for the others."""
import argparse
import importlib.util
import re
from pathlib import Path

import pytest

from ppack.cli import build_parser
from ppack.registry import LINEAR_PARAMS, PACKSVM_PARAMS, SVM_TYPE_PARAMS, THREADS

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _reference():
    spec = importlib.util.spec_from_file_location("cli_reference", DOCS / "cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REFERENCE = _reference()
PAGES = REFERENCE.pages()


def shown_defaults(page):
    """{first word of each option's signature: its 'Default:' text, reStructuredText escapes removed}."""
    found = {}
    for match in re.finditer(r"^\.\. option:: (\S+).*\n\n(?:   Default: (.*)\.\n)?", page, re.M):
        found[match[1]] = None if match[2] is None else match[2].replace("\\", "")
    return found


def leaf_parsers(parser, words=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from leaf_parsers(sub, words + (name,))
            return
    yield words, parser


def words(value, help_text=""):
    """A default in words; None as the help's "(default X)" where it says one (a default worked
    out when the run starts), else "none"."""
    said = re.search(r"\(default:? (.*)\)", help_text)
    if value is None and said:
        return said[1]
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def test_one_page_per_subcommand():
    names = {"-".join(w) for w, _ in leaf_parsers(build_parser())}
    assert set(PAGES) == names
    assert {"train", "plan", "predict", "convert", "data-mnist8m", "data-mnist", "info", "export"} <= names


@pytest.mark.parametrize("command", sorted(PAGES))
def test_every_option_is_shown_with_a_default(command):
    parser = dict(("-".join(w), p) for w, p in leaf_parsers(build_parser()))[command]
    shown = shown_defaults(PAGES[command])
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        key = action.option_strings[0] if action.option_strings else (action.metavar or action.dest)
        assert key in shown, f"{command}: {key} is not in its page"
        if action.option_strings:
            assert shown[key], f"{command}: {key} shows no default"


def test_training_options_show_the_registry_defaults_not_the_parsers_none():
    train, plan, tune = (shown_defaults(PAGES[name]) for name in ("train", "plan", "tune"))
    for name, param in {**PACKSVM_PARAMS, **SVM_TYPE_PARAMS}.items():
        if param.rule.kind == "bool":
            continue
        flag = "--" + name.replace("_", "-")
        if name in ("C", "seed", "class_weight"):  # both trainers read them, each with its default
            linear = LINEAR_PARAMS[name]
            assert train[flag] == (f"packsvm: {words(param.default, param.help)}; "
                                   f"linear solvers: {words(linear.default, linear.help)}")
        else:
            assert train[flag] == words(param.default, param.help), flag
        if flag in plan:
            assert plan[flag] == words(param.default, param.help), flag
        if flag in tune:
            assert tune[flag] == words(param.default, param.help), flag
    assert train["--epochs"] == "1" and train["--pack"] == "100" and train["--kernel"] == "rbf"
    assert train["--C"] == "packsvm: 1; linear solvers: 1"  # None in the registry: 1 unless sigma is given
    assert tune["--kernel"] == "rbf" and tune["--degree"] == "3" and tune["--epochs"] == "1"
    assert train["--bias"] == "off" and train["--no-average"] == "off (on unless given)"
    assert train["--no-bias"] == "off (on unless given)"  # the linear solvers' bias, on by default
    assert train["--rounds"] == words(LINEAR_PARAMS["rounds"].default)
    assert train["--threads"] == words(THREADS.default, THREADS.help)
    assert shown_defaults(PAGES["export"])["--libsvm"] == "required (one of ``--libsvm``)"


def test_other_options_show_the_parsers_defaults():
    convert, mnist8m, predict = (shown_defaults(PAGES[name]) for name in ("convert", "data-mnist8m", "predict"))
    assert convert["--storage"] == "auto" and convert["--dtype"] == "float64" and convert["--compression"] == "gzip"
    assert convert["--quiet"] == "off"
    assert mnist8m["--rows"] == "required" and mnist8m["--seed"] == "0" and mnist8m["--log-every"] == "30"
    assert predict["--device"] == "cpu" and predict["--model"] == "required"
