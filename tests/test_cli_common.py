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
