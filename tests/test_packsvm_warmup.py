"""warm_kernels: the numba kernels compiled (or loaded) once per node before training, timed apart."""
import json

import numpy as np
import pytest
from mpi4py import MPI

from ppack import PackSVC
from ppack.data.delivery import _copy_rows, _gather_csr, _gather_rows, _pad_rows, _scaled, _unpad_rows
from ppack.data.sampler import make_sampler
from ppack.kernels import cpu
from ppack.kernels.spec import KernelSpec
from ppack.packsvm import replay
from ppack.packsvm.warmup import warm_kernels

from helpers import clean_mpi_env, make_problem, run_ppack, write_libsvm
from naive import kernel_matrix, spack_reference

WORLD = MPI.COMM_WORLD
KERNELS = (cpu.gemm_partial_sums, cpu.dense_partial_sums, cpu.csr_partial_sums, cpu.dense_pair_kernels,
           cpu.csr_pair_kernels, replay._replay, _pad_rows, _unpad_rows, _copy_rows, _scaled, _gather_rows, _gather_csr)


def signatures():
    return {f.py_func.__name__: len(f.signatures) for f in KERNELS}


# Run in a fresh process (a numba function this test process already ran has its
# specialisation, so only a first run shows what the warm-up left out): every numba function
# of ppack's modules, their specialisations counted when the pack loop starts and ends.
NOTHING_COMPILED_IN_THE_LOOP = """
import importlib, json, pkgutil
import numpy as np
from mpi4py import MPI
from numba.core.registry import CPUDispatcher
import ppack
from ppack import PackSVC
from ppack.packsvm.loop import PackedSolver
from helpers import make_problem

functions = {}
for info in pkgutil.walk_packages(ppack.__path__, "ppack."):
    if not info.name.endswith("__main__"):  # the command line itself
        for value in vars(importlib.import_module(info.name)).values():
            if isinstance(value, CPUDispatcher):
                functions[value.py_func.__module__ + "." + value.py_func.__name__] = value
counts, run = {}, PackedSolver.run
def counted(self, *args, **kwargs):
    counts["before"] = {name: len(f.signatures) for name, f in functions.items()}
    result = run(self, *args, **kwargs)
    counts["after"] = {name: len(f.signatures) for name, f in functions.items()}
    return result
PackedSolver.run = counted
grew = {}
for sparse in (False, True):
    X, y = make_problem(400, 6, sparse=sparse, seed=44)
    labels = np.digitize(np.asarray(X[:, 0].todense()).ravel() if sparse else X[:, 0], [-0.5, 0.0, 0.5])
    PackSVC(gamma=0.2, C=5.0, epochs=3, pack=50, seed=2, comm=MPI.COMM_SELF).fit(X, labels)
    grew["sparse" if sparse else "dense"] = [n for n in functions if counts["after"][n] != counts["before"][n]]
print(json.dumps({"functions": len(functions), "grew": grew}))
"""


def test_the_pack_loop_compiles_nothing_after_the_warm_up():
    """Every numba function of ppack, not a list: none gets a new specialisation (compiled or
    loaded from the cache) between the end of a fit's warm-up and the end of its pack loop,
    through epoch sampling, the agreement check, four classes, the lazy averages and the key
    map's rehashes as the table grows; dense, then sparse rows."""
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    out = subprocess.run([sys.executable, "-c", NOTHING_COMPILED_IN_THE_LOOP], capture_output=True, text=True,
                         cwd=tests, env=clean_mpi_env(), check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["functions"] > 40
    assert result["grew"] == {"dense": [], "sparse": []}


# A fresh process again: the node's ranks compile the warm-up's parts side by side, then each
# runs the whole warm-up, which must find every specialisation there already.
NOTHING_LEFT_BY_THE_PARTS = """
import importlib, json, pkgutil
import numpy as np
from numba.core.registry import CPUDispatcher
import ppack
from ppack.kernels.compute import KernelGroups
from ppack.kernels.spec import KernelSpec
from ppack.packsvm import warmup

functions = [value for info in pkgutil.walk_packages(ppack.__path__, "ppack.") if not info.name.endswith("__main__")
             for value in vars(importlib.import_module(info.name)).values() if isinstance(value, CPUDispatcher)]
grew = {}
# a run of several ranks (its rows through collective 1's buffer), and one of one rank
for kernel, dtype, sparse, one_rank in (("rbf", np.float64, False, False), ("laplacian", np.float32, True, True)):
    spec = KernelSpec(kernel, 0.5)
    groups = KernelGroups([spec, KernelSpec(kernel, 0.2)], [0, 1, 3])
    parts = warmup._parts(spec, dtype, sparse, np.uint8, groups, one_rank)
    for part in parts:
        part()
    before = {f: len(f.signatures) for f in functions}
    for part in warmup._parts(spec, dtype, sparse, np.uint8, groups, one_rank, whole=True):
        part()
    grew[kernel] = [f.py_func.__name__ for f in functions if len(f.signatures) != before[f]]
print(json.dumps({"parts": len(parts), "grew": grew}))
"""


def test_the_warm_up_parts_leave_nothing_for_the_whole_warm_up():
    """The parts that a node's ranks compile side by side (the kernel sums; the rest of a
    pack, its delivery and a prediction; a grid's groups) cover the whole warm-up: run after
    them in a fresh process, it gives no function a new specialisation."""
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    out = subprocess.run([sys.executable, "-c", NOTHING_LEFT_BY_THE_PARTS], capture_output=True, text=True,
                         cwd=tests, env=clean_mpi_env(), check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result == {"parts": 3, "grew": {"rbf": [], "laplacian": []}}


CASES = [("rbf", np.float64, False), ("rbf", np.float64, True), ("laplacian", np.float32, False)]


def unpacked_decisions(model, X, y):
    """Decision values on X of the unpacked S-packSVM reference (tests/naive.py) after the
    iterations ``model`` trained on."""
    ids = make_sampler(model.sampling, len(y), model.training_["seed"]).take(model.training_["iterations_done"])
    alpha, _ = spack_reference(X, y, model.sigma_, ids, model.kernel, model.gamma, step=model.step,
                               average=model.average)
    keys = sorted(alpha)
    return kernel_matrix(X, X[keys], model.kernel, model.gamma) @ np.array([alpha[k] for k in keys])


def timed(call, *args, comm=MPI.COMM_SELF):
    """(call's result, the most seconds it took on any rank of ``comm``), by the test's clock."""
    start = MPI.Wtime()
    result = call(*args)
    return result, comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)


@pytest.mark.parametrize("kernel, dtype, sparse", CASES)
def test_warm_kernels_on_one_rank_leaves_nothing_to_compile_for_training(kernel, dtype, sparse):
    """The warm-up reports its own time; training after it compiles nothing new and its model is
    the unpacked reference's (float32 kernels: to 1e-4)."""
    spec = KernelSpec(kernel, 0.2)
    seconds, wall = timed(warm_kernels, MPI.COMM_SELF, spec, dtype, sparse)
    assert isinstance(seconds, float) and 0.0 < seconds <= wall
    before = signatures()
    X, y = make_problem(200, 6, sparse=sparse, seed=41)
    X = X.astype(dtype)
    model = PackSVC(kernel=kernel, gamma=0.2, C=5.0, iterations=400, pack=50, seed=2, comm=MPI.COMM_SELF,
                    dtype=np.dtype(dtype).name).fit(X, y)
    expected = unpacked_decisions(model, X, y)
    tol = 1e-9 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(model.decision_function(X), expected, rtol=tol, atol=tol * np.abs(expected).max())
    assert signatures() == before  # same argument types and layouts as training: no new specialisation
    assert "compile" not in model.stats_.seconds


def test_warm_kernels_pad_compact_sparse_rows_as_training_does(tmp_path):
    """A uint8 CSR file: delivery pads and unpads its rows as uint8; with ``stored`` the warm-up
    prepares those kernels too, so training's and prediction's deliveries compile nothing."""
    from ppack.data.delivery import deliver_rows
    from ppack.data.hdf5 import write_dataset
    from ppack.data.shard import load_shard
    from ppack.mpi.collectives import Collectives

    X, y = make_problem(200, 6, sparse=True, seed=45)
    X.data = np.round(np.abs(X.data) * 40) / 255.0  # on uint8's grid of value_scale 1/255
    X.eliminate_zeros()
    write_dataset(tmp_path / "u8.h5", X, y, storage="csr", dtype="uint8")
    shard = load_shard(MPI.COMM_SELF, tmp_path / "u8.h5", dtype=np.float32)
    assert shard.X.dtype == np.uint8 and shard.sparse
    warm_kernels(MPI.COMM_SELF, KernelSpec("rbf", 0.2), np.float32, True, stored=shard.X.dtype)
    before = signatures()
    collectives, ids = Collectives(MPI.COMM_SELF), np.arange(50)
    block = deliver_rows(collectives, shard, shard.y, ids, weights=np.ones(200))  # a pack's
    assert block.csr[2].dtype == np.float32
    deliver_rows(collectives, shard, shard.y, ids, shard.n_features, dtype=np.float32)  # a prediction's
    assert signatures() == before


def test_fit_records_compile_apart_from_total(monkeypatch):
    """A warm-up made to take at least 0.5 s: compile reports it, and total leaves it out
    (compile + total fit in the fit's own wall time)."""
    import time

    import ppack.packsvm.estimator as estimator

    def slow_warm_kernels(*args):
        seconds = warm_kernels(*args)
        time.sleep(0.5)
        return seconds + 0.5

    monkeypatch.setattr(estimator, "warm_kernels", slow_warm_kernels)
    X, y = make_problem(150, 5, seed=42)
    calls = []
    model, wall = timed(PackSVC(gamma=0.2, C=5.0, iterations=300, pack=50, comm=MPI.COMM_SELF).fit,
                        X, y, None, None, None, None, False, None, None, calls.append)
    seconds = model.training_["seconds"]
    assert calls == [seconds["compile"]]
    assert seconds["compile"] >= 0.5 and seconds["compile"] + seconds["total"] <= wall
    parts = sum(seconds[k] for k in ("kernel_sums", "communication", "sequential_updates", "delivery"))
    assert parts <= seconds["total"] + 1e-6


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("sparse", [False, True])
def test_warm_kernels_on_all_ranks(sparse):
    """The warm-up's seconds are the slowest rank's, on every rank; training after it (its rows
    through collective 1's buffer) compiles nothing new and gives the unpacked reference's model."""
    seconds, wall = timed(warm_kernels, WORLD, KernelSpec("rbf", 0.5), np.float64, sparse, comm=WORLD)
    assert isinstance(seconds, float) and 0.0 < seconds <= wall
    assert WORLD.allgather(seconds) == [seconds] * WORLD.Get_size()  # the max over ranks, everywhere
    X, y = make_problem(200, 6, sparse=sparse, seed=43)
    before = signatures()
    model = PackSVC(gamma=0.5, C=5.0, iterations=300, pack=50, comm=WORLD, dtype="float64").fit(X, y)
    assert signatures() == before
    expected = unpacked_decisions(model, X, y)
    np.testing.assert_allclose(model.decision_function(X), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())


@pytest.mark.job
@pytest.mark.second_tier  # a fresh numba cache compiles everything: about 20 s
def test_real_job_compiles_into_a_fresh_cache_and_reports_it(tmp_path):
    X, y = make_problem(200, 6, sparse=True, seed=44)
    write_libsvm(tmp_path / "train.txt", X, y, comm=MPI.COMM_SELF)
    cache = tmp_path / "numba-cache"
    cache.mkdir()
    job = run_ppack(["train", "--data", tmp_path / "train.txt", "--gamma", "0.2", "--C", "5", "--iterations",
                     "300", "--pack", "50", "--metrics-json", tmp_path / "run.json"],
                    ranks=2, env={"NUMBA_CACHE_DIR": str(cache)}, timeout=400)
    assert job.returncode == 0, job.stderr
    lines = job.stdout.splitlines()
    ready = [k for k, line in enumerate(lines) if line.startswith("numba kernels ready in ")]
    trained = [k for k, line in enumerate(lines) if line.startswith("trained in ")]
    assert len(ready) == 1 and "compiled once per node" in lines[ready[0]], job.stdout
    assert trained and ready[0] < trained[0]
    assert any("computed in float32 (auto); a float32 kernel value is off by at most" in line
               for line in lines), job.stdout
    metrics = json.loads((tmp_path / "run.json").read_text())
    assert metrics["seconds"]["compile"] > 0.0 and metrics["seconds"]["total"] > 0.0
    assert list(cache.rglob("*.nbi")), "nothing written to NUMBA_CACHE_DIR"
