"""Collectives: each buffer collective against plain numpy, on one rank and on all ranks; the one home
of every capitalised buffer collective in the package."""
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI

import ppack
from ppack.mpi.collectives import Collectives

WORLD = MPI.COMM_WORLD
COMMS = [pytest.param(MPI.COMM_SELF, id="self"),
         pytest.param(WORLD, id="world", marks=pytest.mark.mpi(min_size=2))]
BUFFER_COLLECTIVES = ("Allreduce", "Reduce", "Gather", "Gatherv", "Allgather", "Allgatherv", "Alltoall",
                      "Alltoallv", "Bcast", "Scatter", "Scatterv", "Reduce_scatter")


def summand(rank, dtype):
    """Rank ``rank``'s (3, 4) array of the sums: different on every rank, exact in float64 and int64."""
    return (np.arange(12).reshape(3, 4) * (rank + 2) - 7 * rank).astype(dtype)


def gathered_part(rank, shift):
    """Rank ``rank``'s part of a gather: 0, 1 or 2 values (some ranks send nothing)."""
    return np.arange((rank + shift) % 3, dtype=np.float32) + 10 * rank


def sent(source, target, shift):
    """What rank ``source`` sends to rank ``target`` in an exchange: 0, 1 or 2 values."""
    return np.full((source + target + shift) % 3, 1000 * source + target, dtype=np.int64)


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
@pytest.mark.parametrize("comm", COMMS)
def test_sum_adds_every_ranks_buffer_in_place(comm, dtype):
    """``sum`` leaves the sum over the ranks in the caller's buffer, on every rank."""
    c = Collectives(comm)
    buf = summand(c.rank, dtype)
    out = c.sum(buf)
    assert out is buf and buf.dtype == dtype
    np.testing.assert_array_equal(buf, sum(summand(k, dtype) for k in range(c.size)))
    assert c.calls == Counter(sum=1)


@pytest.mark.parametrize("comm", COMMS)
def test_sum_of_bytes_each_written_by_one_rank_gives_the_bytes(comm):
    """A uint8 buffer in which rank k writes only bytes k, k + p, ...: the sum holds every byte as
    written (no carries), whatever they encode; ``last_bytes`` is the buffer's size."""
    c = Collectives(comm)
    whole = np.frombuffer(np.random.default_rng(7).normal(size=50).tobytes(), dtype=np.uint8)  # 400 bytes
    buf = np.zeros_like(whole)
    buf[c.rank::c.size] = whole[c.rank::c.size]
    c.sum(buf)
    assert buf.tobytes() == whole.tobytes() and c.last_bytes == 400
    assert c.calls == Counter(sum=1)


@pytest.mark.parametrize("comm", COMMS)
def test_broadcast_copies_the_roots_buffer_to_every_rank(comm):
    """``broadcast`` overwrites every rank's buffer, in place, with the root's."""
    c = Collectives(comm)
    for root in (0, c.size - 1):
        buf = summand(c.rank, np.float64)
        assert c.broadcast(buf, root=root) is buf
        np.testing.assert_array_equal(buf, summand(root, np.float64))
    assert c.calls == Counter(broadcast=2)


@pytest.mark.parametrize("comm", COMMS)
def test_sum_to_root_gives_the_sum_on_the_root_only(comm):
    """``sum_to_root`` returns a new array on the root and None elsewhere; the input is left alone."""
    c = Collectives(comm)
    expected = sum(summand(k, np.float64) for k in range(c.size))
    for root in (0, c.size - 1):
        buf = summand(c.rank, np.float64)
        total = c.sum_to_root(buf, root=root)
        np.testing.assert_array_equal(buf, summand(c.rank, np.float64))
        if c.rank == root:
            assert total is not buf
            np.testing.assert_array_equal(total, expected)
        else:
            assert total is None
    assert c.calls == Counter(sum_to_root=2)


@pytest.mark.parametrize("shift", [0, 1])
@pytest.mark.parametrize("comm", COMMS)
def test_gather_to_root_concatenates_in_rank_order(comm, shift):
    """``gather_to_root``: every rank's 1-D part (empty ones included) in rank order on the root."""
    c = Collectives(comm)
    out = c.gather_to_root(gathered_part(c.rank, shift))
    if c.rank == 0:
        expected = np.concatenate([gathered_part(k, shift) for k in range(c.size)])
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out, expected)
    else:
        assert out is None
    assert c.calls == Counter(gather_to_root=1)


@pytest.mark.parametrize("shift", [0, 1, 2])
@pytest.mark.parametrize("comm", COMMS)
def test_exchange_delivers_each_part_to_its_rank(comm, shift):
    """``exchange``: parts[k] reaches rank k; what arrives is listed by source rank (empty parts too)."""
    c = Collectives(comm)
    received = c.exchange([sent(c.rank, k, shift) for k in range(c.size)])
    assert len(received) == c.size
    for source, part in enumerate(received):
        assert part.dtype == np.int64
        np.testing.assert_array_equal(part, sent(source, c.rank, shift))
    assert c.calls == Counter(exchange=1)


@pytest.mark.parametrize("comm", COMMS)
def test_calls_count_every_operation_and_time_it(comm):
    """``calls`` counts each operation by name; ``seconds`` adds up their times."""
    c = Collectives(comm)
    c.sum(np.zeros(3))
    c.sum(np.zeros(3))
    c.sum_to_root(np.zeros(2))
    c.gather_to_root(np.zeros(1))
    c.exchange([np.zeros(1) for _ in range(c.size)])
    assert c.calls == Counter(sum=2, sum_to_root=1, gather_to_root=1, exchange=1)
    assert c.seconds >= c.last_seconds >= 0.0


def test_no_module_but_collectives_calls_a_buffer_collective():
    """Bulk data crosses ranks only through ``mpi/collectives.py``: no other module of the package
    calls a capitalised mpi4py buffer collective (read as text)."""
    root = Path(ppack.__file__).resolve().parent
    home = root / "mpi" / "collectives.py"
    pattern = re.compile(r"\.(" + "|".join(BUFFER_COLLECTIVES) + r")\(")
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == home:
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if pattern.search(line):
                found.append(f"{path.relative_to(root.parent)}:{number}: {line.strip()}")
    assert found == []
    assert pattern.search(home.read_text()), "the pattern must find the collectives' own calls"


# Every lowercase (pickled) mpi4py call outside ``mpi/collectives.py``, by module: each carries a
# few numbers or a short list per rank, never rows, keys or coefficients (what it carries
# in the comment). A new call fails the test below until it is read and listed here.
SMALL_LOWERCASE_CALLS = {
    "ppack/base.py": {"allreduce": 1, "allgather": 1},  # class counts (K,), each rank's distinct labels
    "ppack/cli/common.py": {"gather": 1, "allreduce": 2, "bcast": 2},  # peak memory, seconds, accuracy, the
    #   input files' widths
    "ppack/cli/predict.py": {"allreduce": 1},  # seconds
    "ppack/cli/tune.py": {"allreduce": 2},  # seconds; a one-class grid's count of labels that are not +-1
    "ppack/cli/stop.py": {"allgather": 1},  # the stopping signal's name
    "ppack/cli/train.py": {"gather": 2, "allgather": 1, "allreduce": 1},  # shard/table bytes, start-up, seconds
    "ppack/data/shard.py": {"allreduce": 2},  # gamma="scale": the values' sum and squared deviations
    "ppack/collective_write.py": {"bcast": 1, "allreduce": 1, "recv": 1, "send": 1},  # file name, open count,
    #   each rank's list of (dataset, offset, shape, dtype) headers (its rows go as buffers)
    "ppack/kernels/device.py": {"allreduce": 1},  # the device warm-up's seconds
    "ppack/kernels/precision.py": {"allreduce": 1},  # the largest norm
    "ppack/linear/averaging.py": {"allreduce": 7},  # seconds, losses, two dual sums, the blocks converged
    "ppack/linear/estimator.py": {"allreduce": 3},  # seconds, the loss
    "ppack/linear/pegasos.py": {"allreduce": 1},  # the largest weight
    "ppack/mpi/comm.py": {"allgather": 1},  # each rank's error (type, message) or None
    "ppack/mpi/nodes.py": {"allreduce": 1},  # the count of node leaders
    "ppack/packsvm/estimator.py": {"allreduce": 8, "bcast": 4},  # seconds, support-vector counts per
    #   class (K,), the model width; a checkpoint's existence, a LIBSVM header, an epochs auto stage's change
    "ppack/packsvm/losses.py": {"allgather": 1, "allreduce": 1},  # each rank's target sum, count, max and
    #   min; the weights' max
    "ppack/packsvm/offset_estimator.py": {"allreduce": 3, "bcast": 1},  # the count of rows without a finite
    #   target, seconds; the dual SVR's largest target deviation; one-class's rho and objective
    "ppack/packsvm/feature_scale.py": {"bcast": 1},  # rank 0's kernel-scale figures
    "ppack/packsvm/grid.py": {"allgather": 1, "allreduce": 2, "bcast": 1},  # each rank's entries in a refit
    #   column; seconds of the score pass, of the progressive scores' gather; a checkpoint's existence
    "ppack/packsvm/loop.py": {"allgather": 1},  # each rank's replica digest
    "ppack/packsvm/dual/solver.py": {"allgather": 1},  # each rank's entries after an epoch's zeros left
    "ppack/packsvm/objective.py": {"bcast": 1},  # the objective's few numbers
    "ppack/packsvm/probability.py": {"allgather": 2},  # each rank's count of chosen rows
    "ppack/packsvm/rank_report.py": {"allgather": 2},  # each rank's phase seconds, collector runs and jitter
    "ppack/packsvm/table.py": {"allgather": 1},  # each rank's entry and nonzero counts
    "ppack/packsvm/warmup.py": {"allreduce": 1},  # seconds
}
LOWERCASE_CALLS = ("allreduce", "allgather", "gather", "bcast", "reduce", "alltoall", "scatter", "send", "recv",
                   "sendrecv", "isend", "irecv", "scan", "exscan")


def test_lowercase_mpi_calls_outside_collectives_are_the_listed_small_ones():
    """Pickled mpi4py calls (lowercase) carry control data only: outside ``mpi/collectives.py``
    every module's calls, by name, are exactly those listed in SMALL_LOWERCASE_CALLS."""
    root = Path(ppack.__file__).resolve().parent
    pattern = re.compile(r"\.(" + "|".join(LOWERCASE_CALLS) + r")\(")
    found = {}
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root.parent).as_posix()
        if name == "ppack/mpi/collectives.py":
            continue
        for line in path.read_text().splitlines():
            for call in pattern.findall(line):
                found.setdefault(name, {}).setdefault(call, 0)
                found[name][call] += 1
    assert found == SMALL_LOWERCASE_CALLS
