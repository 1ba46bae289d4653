"""The numba cores' own helpers (the fast exp of non-positive arguments) and each partial-sum core,
called directly, for one and several coefficient columns, against the numpy twins (tests/naive.py)."""
import os

import numpy as np
import pytest
import scipy.sparse as sp

from ppack.kernels import cpu
from ppack.kernels.cpu import exp_nonpositive
from ppack.kernels.spec import KernelSpec

from naive import kernel_sums

KERNELS = [("rbf", {}), ("laplacian", {}), ("linear", {}), ("poly", {"degree": 3, "coef0": 0.5}),
           ("sigmoid", {"coef0": -0.5}),
           ("rbf", {"offset": 1.0})]


def test_fast_exp_matches_numpy():
    rng = np.random.default_rng(0)
    x = np.concatenate([-np.abs(rng.normal(size=100_000)) * 40, [0.0, -1e-300, -5e-324, -0.5, -699.9]])
    got = exp_nonpositive(x)
    expected = np.exp(x)
    assert np.max(np.abs(got - expected) / expected) < 4e-16


def test_float32_fast_exp_matches_numpy_to_float32_accuracy():
    """The float32 exp (float32 storage's kernel values): within 1e-7 relative of the float64
    exp of the same float32 arguments down to -86, and exactly 0 below (no subnormals)."""
    rng = np.random.default_rng(1)
    x = np.concatenate([-np.abs(rng.normal(size=100_000)) * 20, -rng.random(100_000) * 86,
                        [0.0, -1e-30, -0.5, -85.9]]).astype(np.float32)
    x = x[x > -86.0]
    got = exp_nonpositive(x)
    assert got.dtype == np.float32
    expected = np.exp(x.astype(np.float64))
    assert np.max(np.abs(got - expected) / expected) < 1e-7
    assert np.all(exp_nonpositive(np.array([-86.0, -86.5, -200.0, -1e30], dtype=np.float32)) == 0.0)


def test_fast_exp_clamps_far_tail_to_tiny():
    got = exp_nonpositive(np.array([-800.0, -1e6]))
    assert np.all(got <= np.exp(-699.0)) and np.all(got >= 0.0)


def _norms(X, spec):
    return np.abs(X).sum(1) if spec.uses_l1 else (X * X).sum(1)


def _problem(name, params, n_columns, n_sv=150, r=37, d=20, seed=3):
    """Support vectors (n_sv, d) with zeros, rows (r, d), coef (n_sv, K): n_sv spans 3 blocks, the last partial."""
    rng = np.random.default_rng(seed)
    spec = KernelSpec(name, gamma=0.05, **params)
    X = rng.normal(size=(n_sv + r, d)) * (rng.random((n_sv + r, d)) < 0.5)
    sv, rows = X[:n_sv], X[n_sv:]
    coef = rng.normal(size=(n_sv, n_columns))
    return spec, sv, rows, coef


def _run(core, spec, sv, rows, coef, n_chunks=None, tile=40):
    """One call of ``core`` ("csr", "dense" or "gemm") on fresh (K, r) sums, as ops.partial_sums calls it."""
    n_sv, r = len(sv), len(rows)
    XT = np.ascontiguousarray(rows.T)
    sv_norms, x_norms = _norms(sv, spec), _norms(rows, spec)
    out = np.zeros((coef.shape[1], r))
    items = cpu.work_items(n_sv) if n_chunks is None else n_chunks
    if core == "csr":
        m = sp.csr_matrix(sv)
        cpu.csr_partial_sums(m.indptr.astype(np.int64), m.indices.astype(np.int32), m.data, sv_norms, coef, n_sv,
                             XT, x_norms, items, *spec.params(), out)
    elif core == "dense":
        cpu.dense_partial_sums(sv, sv_norms, coef, n_sv, XT, x_norms, items, *spec.params(), out)
    else:
        n_tiles = (n_sv + tile - 1) // tile
        items = cpu.gemm_work_items(n_tiles) if n_chunks is None else n_chunks
        dots = np.full((items, tile, r), np.nan, dtype=sv.dtype)  # work arrays: every entry written before read
        partial = np.full((n_tiles + 1, coef.shape[1], r), np.nan)
        cpu.gemm_partial_sums(sv, sv_norms, coef, n_sv, XT, x_norms, tile, dots, partial, *spec.params(), out)
    return out


CORE_CASES = [(core, name, params) for core in ("csr", "dense", "gemm") for name, params in KERNELS
              if not (core == "gemm" and name == "laplacian")]  # laplacian has no GEMM form


@pytest.mark.parametrize("core,name,params", CORE_CASES)
@pytest.mark.parametrize("n_columns", [1, 3])
def test_partial_sum_cores_match_naive(core, name, params, n_columns):
    spec, sv, rows, coef = _problem(name, params, n_columns)
    out = _run(core, spec, sv, rows, coef)
    expected = kernel_sums(sv, rows, coef, name, spec.gamma, spec.degree, spec.coef0, spec.offset)
    np.testing.assert_allclose(out, expected, rtol=1e-11, atol=1e-11 * np.abs(expected).max())


@pytest.mark.parametrize("core", ["csr", "dense", "gemm"])
@pytest.mark.parametrize("n_columns", [1, 3])
def test_partial_sum_cores_do_not_depend_on_work_split(core, n_columns):
    """Bit-identical sums for any number of work items (per-block partial sums in block order)."""
    spec, sv, rows, coef = _problem("rbf", {}, n_columns, n_sv=700)
    reference = _run(core, spec, sv, rows, coef, n_chunks=1)
    for n_chunks in (2, 3, 11):  # gemm: 18 tiles of 40 rows shared among the items
        np.testing.assert_array_equal(_run(core, spec, sv, rows, coef, n_chunks=n_chunks), reference)


# run in a process of its own started with NUMBA_NUM_THREADS=3 (numba allows more threads than
# cores; this process's numba pool is already sized to the node's cores)
THREADS_SCRIPT = """
import numba, numpy as np
from test_kernels_cpu import _problem, _run

@numba.njit(parallel=True)
def thread_ids(n):
    ids = np.empty(n, dtype=np.int64)
    for i in numba.prange(n):
        ids[i] = numba.get_thread_id()
    return ids

for core in ("csr", "dense", "gemm"):
    for n_columns in (1, 3):
        spec, sv, rows, coef = _problem("rbf", {}, n_columns, n_sv=700)
        numba.set_num_threads(1)
        reference = _run(core, spec, sv, rows, coef, n_chunks=7)
        for n in (2, 3):
            numba.set_num_threads(n)
            assert len(set(thread_ids(600))) == n  # the parallel loops really run on n threads
            np.testing.assert_array_equal(_run(core, spec, sv, rows, coef, n_chunks=7), reference,
                                          err_msg=f"{core}, {n_columns} columns, {n} threads")
print("ok")
"""


def test_partial_sum_cores_are_bit_identical_on_one_two_and_three_threads():
    """Each core on 1, 2 and 3 numba threads (work items shared among them) gives the same bits."""
    import subprocess
    import sys
    from pathlib import Path

    from helpers import clean_mpi_env

    env = {**clean_mpi_env(), "NUMBA_NUM_THREADS": "3"}
    env["PYTHONPATH"] = str(Path(__file__).parent) + os.pathsep + env["PYTHONPATH"]
    done = subprocess.run([sys.executable, "-c", THREADS_SCRIPT], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
