"""`train --gamma scale` and `--gamma auto`: scikit-learn's words on the command line, the
variance taken over every rank's rows, the model file holding the number."""
import numpy as np
import pytest
from mpi4py import MPI

from ppack.base import load_model
from ppack.cli import main

from helpers import make_problem, write_libsvm

WORLD = MPI.COMM_WORLD
OPTIONS = ["--C", "5", "--iterations", "300", "--pack", "50", "--quiet"]


@pytest.mark.parametrize("word", ["scale", "auto"])
def test_gamma_words_on_the_command_line(word, mpi_tmp_path):
    X, y = make_problem(240, 6, seed=35)
    X = 4.0 * X + 1.5  # a variance far from 1: "scale" and "auto" differ
    write_libsvm(mpi_tmp_path / "train.txt", X, y)
    model = str(mpi_tmp_path / "m.h5")
    main(["train", "--data", str(mpi_tmp_path / "train.txt"), "--gamma", word, "--model", model, *OPTIONS])
    expected = 1.0 / (6 * X.var()) if word == "scale" else 1.0 / 6
    assert load_model(model, WORLD).spec_.gamma == pytest.approx(expected, rel=1e-12)


def test_a_gamma_that_is_neither_number_nor_word_is_refused(capsys):
    with pytest.raises(SystemExit) as info:
        main(["train", "--gamma", "wide"], comm=MPI.COMM_SELF)
    assert info.value.code == 2
    assert "--gamma: expected a number or one of scale, auto, got 'wide'" in capsys.readouterr().err
