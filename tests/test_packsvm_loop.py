"""The packed solver: against the plain S-packSVM of Figures 1 and 2 (tests/naive.py), r- and
p-invariance, two Allreduce calls per pack, support vectors spread evenly, the --tol stop, the
ranks' agreement on the replicated state.

The distributed tests run with ``mpiexec -n 4 python -m pytest --with-mpi``.
"""
import numpy as np
import pytest
from mpi4py import MPI

from ppack import PackSVC
from ppack.data.sampler import make_sampler
from ppack.errors import PPackError
from ppack.packsvm.state import LossWindows, SolverState, replica_digest

from helpers import CountingComm, fitted, make_multiclass, make_problem
from naive import kernel_matrix, spack_reference

WORLD = MPI.COMM_WORLD
SELF = MPI.COMM_SELF
PARAMS = {"kernel": "rbf", "gamma": 0.2, "C": 5.0, "iterations": 1500, "pack": 100, "seed": 11, "dtype": "float64"}


def w_coefficients(model):
    """{row id: coefficient of phi(x_row) in w} of a model trained on one rank."""
    return dict(zip(model.table_.keys.tolist(), model.scale_ * model.table_.coef[:, 0]))


@pytest.mark.parametrize("name", ["rbf", "laplacian", "poly", "linear"])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("step", [1.0, 0.5, 0.1])
@pytest.mark.parametrize("sampling", ["epochs", "uniform"])
def test_packed_equals_unpacked_reference(name, sparse, step, sampling):
    X, y = make_problem(120, 6, sparse=sparse, seed=1)
    params = {"kernel": name, "gamma": 0.3, "degree": 2, "coef0": 1.0, "sigma": 0.02, "iterations": 450,
              "pack": 64, "step": step, "sampling": sampling}
    model = fitted(X, y, **params)
    ids = make_sampler(sampling, 120, 3).take(450)
    expected, _ = spack_reference(X, y, 0.02, ids, name, 0.3, 2, 1.0, step=step)
    got = w_coefficients(model)
    assert set(got) == set(expected)
    keys = sorted(expected)
    # tolerance: both sides are float64; the packed side reorders sums, so 1e-9 relative
    np.testing.assert_allclose([got[k] for k in keys], [expected[k] for k in keys], rtol=1e-9, atol=1e-12)
    assert model.stats_.projections > 0, "the test must exercise the projection"


@pytest.mark.parametrize("sparse", [False, True])
def test_sigmoid_trains_without_the_projection_as_the_reference_does(sparse):
    """The sigmoid kernel is not positive semi-definite: beta' K beta can turn negative (it does
    here), so ppack leaves the projection out for it (``Kernel.psd``); the packed run equals the
    unpacked reference without projection, and the coefficients stay finite and bounded."""
    X, y = make_problem(120, 6, sparse=sparse, seed=1)
    params = {"kernel": "sigmoid", "gamma": 0.5, "coef0": -1.0, "sigma": 0.02, "iterations": 450, "pack": 64,
              "step": 1.0}
    model = fitted(X, y, **params)
    ids = make_sampler(model.sampling, 120, 3).take(450)
    expected, _ = spack_reference(X, y, 0.02, ids, "sigmoid", 0.5, coef0=-1.0, project=False)
    got = w_coefficients(model)
    assert set(got) == set(expected)
    keys = sorted(expected)
    np.testing.assert_allclose([got[k] for k in keys], [expected[k] for k in keys], rtol=1e-9, atol=1e-12)
    assert model.stats_.projections == 0
    alpha = np.array([expected[k] for k in keys])
    K = kernel_matrix(X[keys], X[keys], "sigmoid", 0.5, coef0=-1.0)
    assert alpha @ K @ alpha < 0, "the test must reach a negative beta' K beta"
    # each coefficient is at most the row's draws times 1 / (sigma T) (no projection needed)
    draws = np.bincount(ids, minlength=120)[keys]
    assert np.all(np.abs(alpha) <= draws / (0.02 * 450) * (1 + 1e-12))


# r- and p-invariance hold to the rounding of the kernel values: float64's, or float32's when
# "auto" computes them in float32 (pair kernels and kernel sums then round differently)
INVARIANCE_RTOL = {"float64": 1e-9, "auto": 1e-6}


@pytest.mark.parametrize("dtype", ["float64", "auto"])
@pytest.mark.parametrize("sparse", [False, True])
def test_pack_size_does_not_change_the_model(sparse, dtype):
    """r-invariance: same seed, r = 1 and r = 100 give the same support vectors and decisions.

    Tolerance: decision values within 1e-9 relative (float64 sums in different orders), 1e-6
    of the largest for float32 kernel values ("auto" on these well-scaled rows).
    """
    X, y = make_problem(500, 8, sparse=sparse, seed=7)
    one = fitted(X, y, pack=1, iterations=1000, dtype=dtype)
    hundred = fitted(X, y, pack=100, iterations=1000, dtype=dtype)
    assert hundred.dtype_ == ("float64" if dtype == "float64" else "float32")
    assert np.array_equal(np.sort(one.table_.keys), np.sort(hundred.table_.keys))
    expected = one.decision_function(X)
    tol = INVARIANCE_RTOL[dtype]
    np.testing.assert_allclose(hundred.decision_function(X), expected, rtol=tol, atol=tol * np.abs(expected).max())


def test_tol_stops_when_the_windowed_hinge_loss_is_stable():
    X, y = make_problem(2000, 6, seed=12)
    capped = fitted(X, y, iterations=20000, pack=100, tol=0.05, tol_window=500)
    assert capped.training_["converged"] and capped.training_["iterations_done"] < 20000
    assert capped.training_["iterations_done"] % 500 == 0  # decided at a window boundary
    never = fitted(X, y, iterations=3000, pack=100, tol=1e-12, tol_window=500)
    assert not never.training_["converged"] and never.training_["iterations_done"] == 3000


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("dtype", ["float64", "auto"])
@pytest.mark.parametrize("sparse", [False, True])
def test_rank_count_does_not_change_the_model(sparse, dtype):
    """p-invariance: 1 rank and all ranks give the same support vectors and decisions.

    Tolerance: decision values within 1e-9 relative (float64 sums reduced in a different
    order); 1e-6 of the largest for float32 kernel values ("auto").
    """
    X, y = make_problem(700, 9, sparse=sparse, seed=21)
    serial = PackSVC(comm=SELF, **dict(PARAMS, dtype=dtype)).fit(X, y)
    parallel = PackSVC(comm=WORLD, **dict(PARAMS, dtype=dtype)).fit(X, y)
    assert parallel.dtype_ == serial.dtype_ == ("float64" if dtype == "float64" else "float32")
    keys = np.sort(np.concatenate(WORLD.allgather(parallel.table_.keys)))
    np.testing.assert_array_equal(keys, np.sort(serial.table_.keys))
    assert parallel.n_support_ == serial.n_support_ == len(keys)
    expected = serial.decision_function(X)
    tol = INVARIANCE_RTOL[dtype]
    np.testing.assert_allclose(parallel.decision_function(X), expected, rtol=tol, atol=tol * np.abs(expected).max())


@pytest.mark.mpi(min_size=2)
def test_pack_size_does_not_change_the_distributed_model():
    X, y = make_problem(600, 7, sparse=True, seed=22)
    one = PackSVC(comm=WORLD, **dict(PARAMS, pack=1, iterations=400)).fit(X, y)
    hundred = PackSVC(comm=WORLD, **dict(PARAMS, pack=100, iterations=400)).fit(X, y)
    keys_one = np.sort(np.concatenate(WORLD.allgather(one.table_.keys)))
    keys_hundred = np.sort(np.concatenate(WORLD.allgather(hundred.table_.keys)))
    np.testing.assert_array_equal(keys_one, keys_hundred)
    np.testing.assert_allclose(hundred.decision_function(X), one.decision_function(X), rtol=1e-9, atol=1e-9)


@pytest.mark.mpi(min_size=2)
def test_support_vectors_spread_evenly_over_ranks():
    X, y = make_problem(800, 6, seed=23)
    model = PackSVC(comm=WORLD, **PARAMS).fit(X, y)
    sizes = WORLD.allgather(len(model.table_))
    assert max(sizes) - min(sizes) <= 1  # each new key goes to the least occupied rank
    keys = np.concatenate(WORLD.allgather(model.table_.keys))
    assert len(np.unique(keys)) == len(keys)  # a key lives on exactly one rank


def allreduce_calls(comm, pipeline):
    """``comm.calls`` (a CountingComm's) with its Iallreduce calls counted as Allreduce calls,
    after checking that the pipelined schedule made some and the unpipelined one none."""
    calls = comm.calls.copy()
    started = calls.pop("Iallreduce", 0)
    assert (started > 0) == (pipeline == "on")
    calls["Allreduce"] += started
    return calls


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("pipeline", ["on", "off"])
@pytest.mark.parametrize("sparse", [False, True])
def test_exactly_two_allreduce_calls_per_pack(sparse, pipeline):
    """Runs of 3 and 8 packs differ by exactly 2 Allreduce calls per pack and nothing else
    (pipelined, most of them non-blocking)."""
    X, y = make_problem(400, 8, sparse=sparse, seed=24)
    counts = []
    for packs in (3, 8):
        comm = CountingComm(WORLD)
        model = PackSVC(comm=comm, pipeline=pipeline, **dict(PARAMS, iterations=packs * 50, pack=50)).fit(X, y)
        assert model.training_["allreduce_calls"] == 2 * packs
        counts.append(allreduce_calls(comm, pipeline))
    extra = {name: counts[1][name] - counts[0][name] for name in counts[1] | counts[0]}
    assert {k: v for k, v in extra.items() if v} == {"Allreduce": 2 * 5}


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("pipeline", ["on", "off"])
@pytest.mark.parametrize("variant", ["multiclass", "weights", "validation", "checkpoint", "resume"])
def test_exactly_two_allreduce_calls_per_pack_in_every_kind_of_run(variant, pipeline, mpi_tmp_path):
    """Counted on the communicator, not by the package: runs of 5 and 7 packs differ by
    exactly 2 Allreduce calls per pack and nothing else, for a multiclass, a weighted, a
    validated and a checkpointing run (validation and the checkpoint come after pack 4 in
    both) and for a run resumed after pack 2."""
    X, y = make_multiclass(400, 6, seed=25) if variant == "multiclass" else make_problem(400, 6, seed=25)
    params = dict(PARAMS, pack=50, pipeline=pipeline)
    fit = {}
    if variant == "weights":
        fit["sample_weight"] = 0.5 + np.arange(400) % 3
    elif variant == "validation":
        params.update(validation=0.2, validation_every=4, patience=100)
    counts = []
    for packs in (5, 7):
        path = mpi_tmp_path / f"state{packs}.h5"
        if variant == "checkpoint":
            fit.update(checkpoint=path, checkpoint_every_packs=4)
        elif variant == "resume":
            PackSVC(comm=WORLD, **dict(params, iterations=packs * 50)).fit(X, y, checkpoint=path, stop_after_packs=2)
            fit.update(checkpoint=path, resume=True)
        comm = CountingComm(WORLD)
        model = PackSVC(comm=comm, **dict(params, iterations=packs * 50)).fit(X, y, **fit)
        assert model.training_["packs"] == packs
        if variant == "validation":
            assert len(model.training_["validation"]["history"]) == 1
        counts.append(allreduce_calls(comm, pipeline))
    extra = {name: counts[1][name] - counts[0][name] for name in counts[1] | counts[0]}
    assert {k: v for k, v in extra.items() if v} == {"Allreduce": 2 * 2}


def reference_decisions(X, y, sigma, ids, gamma, step):
    """Decision values on X of the unpacked reference after the iterations ``ids`` (rbf kernel)."""
    alpha, tested = spack_reference(X, y, sigma, ids, "rbf", gamma, step=step)
    assert np.isfinite(tested).all() and np.isfinite(list(alpha.values())).all()
    keys = sorted(alpha)
    return kernel_matrix(X, X[keys], "rbf", gamma) @ np.array([alpha[k] for k in keys])


@pytest.mark.parametrize("sigma", [1e-7, 1e-9, 1e-11])
@pytest.mark.parametrize("pack", [1000, 4096])
def test_tiny_sigma_packed_equals_unpacked_reference(sigma, pack):
    """Early steps with eta = 1/(sigma t) huge project almost every time, each shrinking the
    scale by about sqrt(sigma) t: within one pack it would underflow without the fold.

    Tolerance: decision values within 1e-9 relative (float64 sums in different orders).
    """
    X, y = make_problem(300, 6, seed=5)
    iterations = pack + pack // 2  # a full pack, then a partial one on top of the folded table
    model = fitted(X, y, sigma=sigma, iterations=iterations, pack=pack, seed=8)
    expected = reference_decisions(X, y, sigma, make_sampler(model.sampling, 300, 8).take(iterations), 0.2, model.step)
    got = model.decision_function(X)
    assert np.isfinite(got).all() and np.isfinite(model.table_.coef).all() and np.isfinite(model.scale_)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())
    assert model.stats_.projections > iterations // 10


def test_tiny_sigma_pack_size_does_not_change_the_model():
    """r-invariance at sigma = 1e-9, where the scale is folded many times inside a pack."""
    X, y = make_problem(300, 6, seed=6)
    one = fitted(X, y, sigma=1e-9, pack=1, iterations=2500)
    packed = fitted(X, y, sigma=1e-9, pack=2000, iterations=2500)
    assert np.array_equal(np.sort(one.table_.keys), np.sort(packed.table_.keys))
    got, want = packed.decision_function(X), one.decision_function(X)
    assert np.isfinite(want).all()
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())


def test_overflowing_norm_stops_training_with_a_clear_error():
    """sigma = 1e-160: the first step's eta^2 K(x, x) = 1e320 overflows ||w||^2."""
    X, y = make_problem(50, 4, seed=9)
    with pytest.raises(PPackError, match=r"diverged at iteration 1 \(sigma=1e-160, pack=20\).*norm") as caught:
        fitted(X, y, sigma=1e-160, pack=20, iterations=100)
    assert caught.value.collective


def test_infinite_kernel_value_stops_training_at_the_iteration_that_meets_it():
    """A row whose linear kernel value K(x, x) overflows: the first step that adds it diverges."""
    X, y = make_problem(60, 4, seed=10)
    X = np.hstack([X, np.zeros((60, 1))])
    big = 17
    X[big] = 0.0
    X[big, -1] = 1e200  # orthogonal to every other row: prediction 0, so the hinge step adds it
    ids = make_sampler(PackSVC().sampling, 60, 3).take(400)
    first = int(np.flatnonzero(ids == big)[0]) + 1
    with pytest.raises(PPackError, match=rf"diverged at iteration {first} \(sigma=0.01, pack=50\)"):
        fitted(X, y, kernel="linear", sigma=0.01, pack=50, iterations=400)


def replicated_state():
    state = SolverState(iteration=4200, scale=0.37, norm=12.5, occupancy=np.array([7, 6, 6, 6], dtype=np.int64),
                        loss_windows=LossWindows(500, total=3.25, count=100, means=[0.5]),
                        row_seconds=np.array([1e-7, 2e-7, 0.0, 1.5e-7]))
    rng = np.random.default_rng(0)
    return state, rng.normal(size=50), np.maximum(rng.normal(size=50), 0.0)


def test_replica_digest_is_deterministic_and_sees_one_bit():
    state, coef, loss = replicated_state()
    digest = replica_digest(state, coef, loss)
    assert digest == replica_digest(*replicated_state())
    assert digest == int(digest) and 0 <= digest < 2.0 ** 52  # exact in a float64 sum with zeros
    changed = [replica_digest(SolverState(**dict(vars(state), scale=np.nextafter(state.scale, 1.0))), coef, loss),
               replica_digest(SolverState(**dict(vars(state), norm=np.nextafter(state.norm, 0.0))), coef, loss),
               replica_digest(SolverState(**dict(vars(state), iteration=4201)), coef, loss),
               replica_digest(SolverState(**dict(vars(state), occupancy=np.array([6, 7, 6, 6]))), coef, loss),
               replica_digest(SolverState(**dict(vars(state), row_seconds=np.nextafter(state.row_seconds, 1.0))),
                              coef, loss)]
    for k, array in ((0, coef), (7, coef), (49, loss)):  # the low bit of one value of the pack's replay
        bits = array.copy().view(np.int64)
        bits[k] ^= 1
        changed.append(replica_digest(state, *((bits.view(np.float64), loss) if array is coef
                                               else (coef, bits.view(np.float64)))))
    assert digest not in changed and len(set(changed)) == len(changed)


class PerturbingComm(CountingComm):
    """On rank ``victim`` only, every pack's second Allreduce (the float64 buffer of length
    ``length``) returns its first ``r`` sums (the predictions) 1e-12 relative off, from
    the ``after``-th such call on: an MPI whose sums are not bit-identical on every rank."""

    def __init__(self, comm, victim, length, r, after):
        super().__init__(comm)
        self.victim, self.length, self.r, self.after, self.seen = victim, length, r, after, 0

    def Allreduce(self, sendbuf, recvbuf, *args, **kwargs):
        self._comm.Allreduce(sendbuf, recvbuf, *args, **kwargs)
        self._perturb(recvbuf if isinstance(recvbuf, np.ndarray) else sendbuf)

    def Iallreduce(self, sendbuf, recvbuf, *args, **kwargs):
        """The pipelined collective 2: perturbed when waited for (``PerturbedRequest``)."""
        request = PerturbedRequest(self._comm.Iallreduce(sendbuf, recvbuf, *args, **kwargs))
        request.after_wait = lambda: self._perturb(recvbuf if isinstance(recvbuf, np.ndarray) else sendbuf)
        return request

    def _perturb(self, buf):
        if isinstance(buf, np.ndarray) and buf.dtype == np.float64 and buf.size == self.length:
            self.seen += 1
            if self.seen >= self.after and self._comm.Get_rank() == self.victim:
                buf[:self.r] *= 1.0 + 1e-12


class PerturbedRequest(MPI.Request):
    """A request that calls ``after_wait()`` once waited for."""

    def Wait(self, status=None):
        super().Wait(status)
        self.after_wait()


def drifting_run(after):
    """A 400-row problem, packs of r = 50 rows, and a communicator whose rank 1 drifts from pack
    ``after`` on: (X, y, r, ranks, comm)."""
    X, y = make_problem(400, 8, seed=25)
    r, size = 50, WORLD.Get_size()
    comm = PerturbingComm(WORLD, victim=1, length=2 * r + r * (r + 1) // 2 + 4 * size + 2, r=r, after=after)
    return X, y, r, size, comm


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("pipeline", ["on", "off"])
def test_ranks_that_disagree_on_the_replicated_state_all_stop(pipeline):
    """One rank's predictions drift by 1e-12 in pack 3: in pack 4's collective every rank sees
    the digests differ and raises the same collective error (no rank hangs in a collective)."""
    X, y, r, size, comm = drifting_run(after=3)
    with pytest.raises(PPackError, match=r"ranks disagree on the replicated state after iteration 150 "
                                         r"\(pack 3; .*rank 1\).*I_MPI_CBWR=1") as caught:
        PackSVC(comm=comm, pipeline=pipeline, **dict(PARAMS, iterations=8 * r, pack=r)).fit(X, y)
    assert caught.value.collective
    assert comm.seen == 4  # stopped in the pack after the drift, every rank alike
    assert WORLD.allgather(str(caught.value)) == [str(caught.value)] * size


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("pipeline", ["on", "off"])
def test_a_disagreement_in_the_last_pack_stops_every_rank_before_the_model_is_kept(pipeline):
    """The drift starts in the last of 8 packs, after which no pack's collective follows: the
    check before the model is kept sees it, on every rank alike."""
    X, y, r, size, comm = drifting_run(after=8)
    with pytest.raises(PPackError, match=r"ranks disagree on the replicated state after iteration 400 "
                                         r"\(pack 8; .*rank 1\)") as caught:
        PackSVC(comm=comm, pipeline=pipeline, **dict(PARAMS, iterations=8 * r, pack=r)).fit(X, y)
    assert comm.seen == 8 and caught.value.collective
    assert WORLD.allgather(str(caught.value)) == [str(caught.value)] * size


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("pipeline", ["on", "off"])
def test_a_disagreement_is_caught_before_the_checkpoint_is_written(mpi_tmp_path, pipeline):
    """Checkpoints every 2 packs; the drift starts in pack 4: the checkpoint of pack 2 stays,
    the one of pack 4 is never written."""
    import h5py

    X, y = make_problem(400, 8, seed=25)
    r, size = 50, WORLD.Get_size()
    comm = PerturbingComm(WORLD, victim=1, length=2 * r + r * (r + 1) // 2 + 4 * size + 2, r=r, after=4)
    path = mpi_tmp_path / "drift.h5"
    with pytest.raises(PPackError, match=r"after iteration 200 \(pack 4; "):
        PackSVC(comm=comm, pipeline=pipeline, **dict(PARAMS, iterations=8 * r, pack=r)).fit(
            X, y, checkpoint=path, checkpoint_every_packs=2)
    with h5py.File(path, "r") as f:
        assert f.attrs["iteration"] == 2 * r


@pytest.mark.parametrize("sparse", [False, True])
def test_weighted_rows_equal_the_unpacked_weighted_reference(sparse):
    """Class and sample weights scale each row's step (and widen the ball to max weight / sigma),
    as the unpacked reference does with the same weights."""
    X, y = make_problem(150, 6, sparse=sparse, seed=2)
    sample = np.random.default_rng(3).uniform(0.5, 2.0, size=150)
    model = fitted(X, y, sigma=0.02, iterations=450, pack=64, class_weight={1: 3.0}, sample_weight=sample)
    weights = sample * np.where(y == 1, 3.0, 1.0)
    ids = make_sampler(model.sampling, 150, 3).take(450)
    expected, _ = spack_reference(X, y, 0.02, ids, "rbf", 0.2, weights=weights, step=model.step)
    got = w_coefficients(model)
    assert set(got) == set(expected)
    keys = sorted(expected)
    np.testing.assert_allclose([got[k] for k in keys], [expected[k] for k in keys], rtol=1e-9, atol=1e-12)
    assert model.stats_.projections > 0, "the test must exercise the projection"
    plain = fitted(X, y, sigma=0.02, iterations=450, pack=64)
    assert np.mean(model.predict(X) == 1) > np.mean(plain.predict(X) == 1)  # the weighted class gains rows


def test_balanced_class_weights_are_n_over_k_times_the_class_count():
    """'balanced' weighs each row n / (K * rows of its class), as scikit-learn does; labels given in text
    ('label:weight') and as a dict alike; an unknown label is an error."""
    from ppack import PackSVC
    from ppack.errors import PPackError

    X, y = make_problem(200, 5, seed=4)
    y[:150] = -1.0  # imbalanced
    negative, positive = 200 / (2 * int(np.sum(y == -1))), 200 / (2 * int(np.sum(y == 1)))
    assert positive > 3 * negative
    balanced = fitted(X, y, sigma=0.02, iterations=300, pack=50, class_weight="balanced")
    manual = fitted(X, y, sigma=0.02, iterations=300, pack=50, class_weight={-1.0: negative, 1.0: positive})
    text = fitted(X, y, sigma=0.02, iterations=300, pack=50, class_weight=f"-1:{negative!r},1:{positive!r}")
    np.testing.assert_array_equal(balanced.decision_function(X), manual.decision_function(X))
    np.testing.assert_array_equal(text.decision_function(X), manual.decision_function(X))
    with pytest.raises(PPackError, match="class_weight: 2.0 is not a class of the data"):
        PackSVC(class_weight={2: 1.0}, iterations=10, comm=SELF).fit(X, y)
    with pytest.raises(PPackError, match="class_weight: must be 'balanced'"):
        PackSVC(class_weight="1:-3", iterations=10, comm=SELF).fit(X, y)


@pytest.mark.parametrize("sigma,pack,T", [(0.02, 64, 450), (1e-9, 300, 450), (1e-5, 100, 4000)])
@pytest.mark.parametrize("sparse", [False, True])
def test_averaged_iterate_equals_the_unpacked_references_average(sparse, sigma, pack, T):
    """average=True returns sum_t a_t w_t / sum_t a_t, a_t = t (t+1) (t+2), of the unpacked
    reference's iterates: through projections, scale folds (sigma = 1e-9), and a scale that
    falls by many orders of magnitude without a fold (sigma = 1e-5, T = 4000)."""
    X, y = make_problem(150, 6, sparse=sparse, seed=5)
    model = fitted(X, y, sigma=sigma, iterations=T, pack=pack, average=True)
    expected, _ = spack_reference(X, y, sigma, make_sampler(model.sampling, 150, 3).take(T), "rbf", 0.2, average=True,
                                  step=model.step)
    got = w_coefficients(model)
    assert set(got) == set(expected)
    keys = sorted(expected)
    np.testing.assert_allclose([got[k] for k in keys], [expected[k] for k in keys], rtol=1e-9,
                               atol=1e-12 * max(abs(v) for v in expected.values()))
    assert model.stats_.projections > 0


@pytest.mark.parametrize("comm", [pytest.param(SELF, id="1rank"),
                                  pytest.param(MPI.COMM_WORLD, id="all", marks=pytest.mark.mpi(min_size=2))])
def test_averaged_iterate_does_not_depend_on_the_pack_size_or_the_ranks(comm):
    X, y = make_multiclass(300, 5, seed=6)
    one = fitted(X, y, pack=1, iterations=600, average=True)
    packed = fitted(X, y, comm=comm, pack=100, iterations=600, average=True)
    np.testing.assert_allclose(packed.decision_function(X), one.decision_function(X), rtol=1e-9, atol=1e-9)
