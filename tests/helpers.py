"""Plain helpers of the test files: synthetic problems, the real data sets in tests/data, MPI jobs,
the CLI, LIBSVM text. Fixtures live in ``conftest.py``."""
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

from ppack.mpi.comm import polite_barrier

# the real data sets the tests read, in the repository (tests/data/README.md: sources and cuts)
TEST_DATA = Path(__file__).resolve().parent / "data"
NODE_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def make_problem(n=400, d=12, sparse=False, seed=0, labels=(-1.0, 1.0)):
    """A two-class problem that needs a nonlinear kernel: X (n, d), y (n,) with ``labels``.

    Sparse problems keep the three informative columns and about 20% of the others.
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if sparse:
        X[:, 3:][rng.random((n, d - 3)) > 0.2] = 0.0
    score = X[:, 0] * X[:, 1] + 0.5 * np.sin(2 * X[:, 2]) + 0.1 * rng.normal(size=n)
    y = np.where(score > 0, labels[1], labels[0])
    return (sp.csr_matrix(X) if sparse else X), y


def make_multiclass(n=300, d=8, sparse=False, seed=0, labels=(3.0, 5.0, 7.0, 11.0)):
    """A problem of len(labels) classes, the quadrants of a nonlinear map of two columns."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if sparse:
        X[:, 2:][rng.random((n, d - 2)) > 0.25] = 0.0
    angle = np.arctan2(X[:, 1] + 0.3 * np.sin(2 * X[:, 0]), X[:, 0]) + 0.2 * rng.normal(size=n)
    codes = ((angle + np.pi) / (2 * np.pi) * len(labels)).astype(int) % len(labels)
    return (sp.csr_matrix(X) if sparse else X), np.asarray(labels)[codes]


def fitted(X, y, comm=MPI.COMM_SELF, sample_weight=None, **params):
    """A PackSVC fitted on one rank (by default) with small test settings; ``params`` override them.
    The last iterate unless ``average=True``, in float64: most tests hold it to the unpacked
    reference (the default dtype "auto" would compute these rbf kernels in float32)."""
    from ppack import PackSVC

    params = {"kernel": "rbf", "gamma": 0.2, "iterations": 600, "pack": 100, "seed": 3, "average": False,
              "dtype": "float64", **params}
    if "sigma" not in params:
        params.setdefault("C", 5.0)
    return PackSVC(comm=comm, **params).fit(X, y, sample_weight=sample_weight)


class CountingComm:
    """A communicator proxy that counts every collective and point-to-point call by name."""

    COUNTED = {
        "Allreduce", "allreduce", "Reduce", "reduce", "Bcast", "bcast", "Gather", "gather",
        "Gatherv", "Allgather", "allgather", "Allgatherv", "Scatter", "scatter", "Scatterv",
        "Alltoall", "alltoall", "Alltoallv", "Barrier", "barrier", "Scan", "scan", "Exscan",
        "exscan", "Reduce_scatter", "Iallreduce", "Ibarrier", "Ibcast", "Send", "send", "Recv",
        "recv", "Isend", "isend", "Irecv", "irecv", "Sendrecv", "sendrecv",
    }

    DERIVED = {"Split", "Split_type"}  # communicators made from this one are counted too, in the same tally

    def __init__(self, comm, calls=None, largest=None):
        self._comm = comm
        self.calls = Counter() if calls is None else calls
        self.largest = Counter() if largest is None else largest  # the largest buffer (bytes) per call name

    def __getattr__(self, name):
        attr = getattr(self._comm, name)
        if name in self.DERIVED:
            def derived(*args, **kwargs):
                made = attr(*args, **kwargs)
                return made if made == MPI.COMM_NULL else CountingComm(made, self.calls, self.largest)
            return derived
        if name not in self.COUNTED:
            return attr

        def counted(*args, **kwargs):
            self.calls[name] += 1
            if args:
                self.largest[name] = max(self.largest[name], _buffer_bytes(args[0]))
            return attr(*args, **kwargs)

        return counted


def assert_rows_move_only_in_pieces(counting):
    """What a file write may do with the table across ranks, on the counted communicators
    (``CountingComm``, its node and leader communicators included): no gather, reduce,
    all-to-all or scatter of any kind, and point-to-point messages of at most one piece
    (``collective_write.PIECE_BYTES``)."""
    from ppack.collective_write import PIECE_BYTES

    moving = ("Gather", "gather", "Gatherv", "Allgather", "Allgatherv", "Reduce", "reduce", "Alltoall", "alltoall",
              "Alltoallv", "Scatter", "scatter", "Scatterv", "Reduce_scatter", "Iallreduce", "Ibcast")
    assert {name: counting.calls[name] for name in moving if counting.calls[name]} == {}
    for name in ("Send", "Recv", "Isend", "Irecv", "Sendrecv", "Bcast", "Allreduce"):
        assert counting.largest[name] <= PIECE_BYTES, (name, counting.largest[name])


def _buffer_bytes(spec):
    """Bytes of an mpi4py buffer argument: an array, or [array, count, MPI.BYTE] (0 for anything else)."""
    if isinstance(spec, np.ndarray):
        return spec.nbytes
    if isinstance(spec, (list, tuple)) and spec and isinstance(spec[0], np.ndarray):
        return int(spec[1]) if len(spec) > 2 and spec[2] == MPI.BYTE else spec[0].nbytes
    return 0


def clean_mpi_env():
    """The environment without the variables of the MPI job we may be running inside."""
    prefixes = ("PMI", "PMIX", "MPI_", "MPIR", "HYDRA", "OMPI", "I_MPI")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = env["NUMBA_NUM_THREADS"] = "1"
    return env


def mpiexec():
    """The mpiexec that belongs to this Python environment, else the one on PATH."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else "mpiexec"


def run_ppack(args, ranks=4, timeout=240, cwd=None, env=None):
    """Run ``python -m ppack ARGS`` on ``ranks`` ranks; returns the CompletedProcess.

    ``env``: variables added to (or replacing those of) the clean environment."""
    cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "ppack", *map(str, args)]
    return subprocess.run(cmd, env={**clean_mpi_env(), **(env or {})}, capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


# ---------------------------------------------------------------- command line

# small, fast training options of `train --solver packsvm`
TRAIN = ["--gamma", "0.2", "--C", "5", "--iterations", "900", "--pack", "50", "--seed", "4", "--quiet"]


def write_libsvm(path, X, y, precision=17, comm=None):
    """LIBSVM text of dense or CSR X (zeros omitted), written by rank 0 of ``comm`` (default
    the world: a collective; a rank-0 test passes MPI.COMM_SELF)."""
    comm = MPI.COMM_WORLD if comm is None else comm
    if comm.Get_rank() == 0:
        dense = X.toarray() if hasattr(X, "toarray") else X
        with open(path, "w") as f:
            for row, label in zip(dense, y):
                pairs = " ".join(f"{j + 1}:{v:.{precision}g}" for j, v in enumerate(row) if v != 0)
                f.write(f"{label:g} {pairs}\n")
    polite_barrier(comm)


def fails_with(capsys, argv, pattern, comm=None):
    """Run the CLI on ``comm`` (default: every rank, a collective) expecting exit status 1 on
    every rank, ``pattern`` once in rank 0's message, nothing from the other ranks, and no
    traceback."""
    from ppack.cli import main

    comm = MPI.COMM_WORLD if comm is None else comm
    with pytest.raises(SystemExit) as info:
        main(argv, comm=comm)
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    if comm.Get_rank() == 0:
        assert err.count(pattern) == 1, err
    else:
        assert pattern not in err, err
    polite_barrier(comm)


# ---------------------------------------------------------------- LIBSVM text


def write(path, raw):
    """Write the bytes ``raw`` to ``path``; returns ``path``."""
    path.write_bytes(raw)
    return path


def format_number(rng, v):
    """v written in one of the spellings found in LIBSVM files."""
    style = rng.randrange(9)
    if style == 0:
        s = repr(v)
    elif style == 1:
        s = "%g" % v
    elif style == 2:
        s = "%.6e" % v
    elif style == 3:
        s = "%.17E" % v
    elif style == 4:
        s = "%.25g" % v  # more digits than a double holds: exact path needed
    elif style == 5:
        s = "%.4f" % v
        s = s.replace("0.", ".", 1) if s.startswith("0.") else s  # ".5"
    elif style == 6:
        s = "%d." % round(v)  # "5."
    elif style == 7:
        s = str(round(v))
    else:
        s = "%.3e" % v
    if rng.random() < 0.1 and not s.startswith("-"):
        s = "+" + s
    return s


def random_value(rng):
    """A random double over a wide range of magnitudes, sometimes an edge value."""
    kind = rng.random()
    if kind < 0.05:
        return rng.choice([0.0, 1.0, -1.0, 1e-310, 1.7e308, -2.5e-300, 5e-324])
    return rng.gauss(0, 1) * 10 ** rng.uniform(-30, 30)


def random_libsvm(rng, n_rows, n_features, quirks=True):
    """Random LIBSVM bytes with formatting quirks (when quirks)."""
    lines = []
    for _ in range(n_rows):
        if quirks and rng.random() < 0.1:
            lines.append(rng.choice(["", "   ", "# a comment", "\t# indented comment", "#"]))
        label = rng.choice(["+1", "-1", "1", "1.0", "-1.0", "0", "3", "2.5e-1", "-7"])
        nnz = rng.randrange(0, min(10, n_features) + 1)
        idx = sorted(rng.sample(range(1, n_features + 1), nnz))
        seps = [" ", "\t", "  ", " \t "] if quirks else [" "]
        parts = [label]
        if quirks and rng.random() < 0.2:
            parts.append(f"qid:{rng.randrange(1, 50)}")
        parts += [f"{i}:{format_number(rng, random_value(rng))}" for i in idx]
        line = parts[0] + "".join(rng.choice(seps) + p for p in parts[1:])
        if quirks and rng.random() < 0.2:
            line = rng.choice(["", " ", "\t"]) + line + rng.choice(["", " ", "\t"])
        if quirks and rng.random() < 0.15:
            line += rng.choice([" # trailing comment 1:2", "#x", "  #"])
        lines.append(line)
    eol = "\r\n" if quirks and rng.random() < 0.5 else "\n"
    text = eol.join(lines)
    if not quirks or rng.random() < 0.5:
        text += eol
    return text.encode()


def empty_folder_and_failing_rank_1(mpi_tmp_path, monkeypatch, module, name):
    """A new empty folder every rank sees; on rank 1 ``module.name`` raises PPackError("disk full on rank 1")."""
    from ppack.errors import PPackError

    world = MPI.COMM_WORLD
    folder = mpi_tmp_path / "failing"
    if world.Get_rank() == 0:
        folder.mkdir()
    polite_barrier(world)
    if world.Get_rank() == 1:
        def broken(*args, **kwargs):
            raise PPackError("disk full on rank 1")
        monkeypatch.setattr(module, name, broken)
    return folder


def check_certificate(report, primal, dual):
    """A dual run's ``training_["convergence"]`` certifies the primal and dual objectives of its
    model (one column): P and D as computed here, and their relative gap."""
    from ppack.packsvm.dual.coordinate import relative_gap

    assert report["primal"][0] == pytest.approx(primal, rel=1e-10)
    assert report["dual"][0] == pytest.approx(dual, rel=1e-10)
    assert report["relative_duality_gap"] == pytest.approx(relative_gap(primal, dual), rel=1e-8, abs=1e-12)
