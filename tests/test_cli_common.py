"""What every command shares: rank-0 argparse help."""
import pytest
from mpi4py import MPI

from ppack.cli import main

WORLD = MPI.COMM_WORLD


def test_help_of_every_command(capsys):
    for argv in (["--help"], ["train", "--help"], ["predict", "--help"], ["convert", "--help"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 0
    out = capsys.readouterr().out
    if WORLD.Get_rank() == 0:
        assert "--pack" in out and "--metrics-json" in out and "--n-features" in out


@pytest.mark.parametrize("argv,error", [
    (["train", "--kernel", "rbff"], "argument --kernel: invalid choice: 'rbff' (choose from 'rbf', 'linear', 'poly', "
                                    "'laplacian', 'sigmoid')"),
    (["predict"], "the following arguments are required: --model, --data"),
    (["info"], "the following arguments are required: file"),
])
def test_a_bad_argument_is_the_usage_line_and_one_error_line(argv, error, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    prog = f"python -m ppack {argv[0]}"
    assert lines[1:] == [f"{prog}: error: {error}"], lines
    assert lines[0] in (f"usage: {prog} [options] (see {prog} --help)", f"usage: {prog} [-h] file"), lines


def test_the_help_of_a_flag_that_turns_a_default_off_says_what_the_flag_does_first(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    helped = " ".join(capsys.readouterr().out.split())
    if WORLD.Get_rank() == 0:
        assert "--no-average keep the last iterate w_T as the model instead of the averaged iterate" in helped
        assert "--no-bias train without a bias term" in helped


def test_version_is_the_installed_distributions(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    if WORLD.Get_rank() == 0:
        assert capsys.readouterr().out == f"ppack {version('ppack')}\n"


def test_version_without_an_installed_distribution_is_the_pyprojects(monkeypatch):
    import importlib.metadata
    import re
    from pathlib import Path

    import ppack
    from ppack.version import version

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    assert ppack.__version__ == version() == importlib.metadata.version("ppack")
    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    pyproject = (Path(ppack.__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert version() == re.search(r'^version = "([^"]+)"', pyproject, re.M)[1]
