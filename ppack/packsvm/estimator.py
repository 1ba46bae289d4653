"""PackSVC: the scikit-learn-style face of the P-packSVM trainer (collective, see ``base``)."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable

import numpy as np
from mpi4py import MPI

from ..base import BaseSVC, available_if
from ..kernels.compute import DEFAULT_WORK_BYTES, KernelCompute
from ..kernels.precision import read_dtype, resolve_dtype
from ..kernels.spec import KernelSpec
from ..data.shard import value_variance
from ..model.kernel import KernelModelHeader, read_kernel_header, read_support_vectors, write_kernel_model_by_rank
from ..model.libsvm_file import read_libsvm_model_header, read_libsvm_model_rows
from ..errors import PPackError, given
from ..mpi.collectives import Collectives
from ..kernels.threads import ensure_threads
from ..mpi.comm import chunk, on_rank0, run_collectively
from ..progress import pack_callback
from ..registry import DTYPES, PACKSVM_PARAMS, VERBOSE, register_model_type
from .checkpoint import check_checkpoint_file, read_checkpoint, run_identity
from .columns import Columns
from .dual import fit as dual_fit
from .dual.solver import DualSolver
from .loop import Checkpointing, PackedSolver
from .predict import distributed_decisions
from .averaging import averaged_coefficients, averaged_offset
from . import convergence, feature_scale
from .losses import hinge_loss, largest_weight
from .objective import objective_rows, primal_objective
from .calibration import calibration_holdout, check_room
from .probability import MIN_ROWS, fit_power, fit_rows, fit_sigmoid, probabilities
from .validation import Validation
from .table import SupportVectorTable, shard_offsets, shard_parts
from .rank_report import over_ranks
from .state import serial_seconds
from .warmup import first_use, warm_kernels

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..data.shard import Shard

_D = {name: param.default for name, param in PACKSVM_PARAMS.items()}

# {svm_type: the class of its models}, from model files and from LIBSVM model files: c_svc's
# here, the other types' added by offset_estimator.py and libsvm_offset.py when imported
SVM_TYPE_CLASSES = {}
LIBSVM_TYPE_CLASSES = {}


class PackSVC(BaseSVC):
    """Kernel SVM trained by P-packSVM on ``comm``'s ranks: binary, or K classes one-vs-rest
    in one pass (each pack's rows, kernel values and support vectors shared by the classes).

    Parameters (checked against ``registry.PACKSVM_PARAMS``, as the CLI's): kernel, gamma
    (a number, "auto": 1 / n_features, the default, None alike, or "scale": 1 / (n_features *
    X.var()), ``resolve_gamma``; ``spec_.gamma`` is the number used), degree, coef0, C or
    sigma (tied by C = 1 / (n_samples * sigma)), epochs or iterations (T; epochs "auto": half an
    epoch, one, then twice the iterations each time, one run continued, until the convergence
    diagnostic is satisfied and the predictions on the objective's sample rows settle, at most
    128 epochs; each stage in ``training_["convergence"]["stages"]``), pack (r), seed,
    step (c of the SGD step c / (sigma (t + c - 1)); 1 is Pegasos'), sampling ("epochs": every row once per epoch;
    "uniform": with replacement), placement of new support vectors ("count", "cost": by each
    rank's measured seconds per stored row, ``table.place_new``), pipeline ("auto": on above one
    rank; "on": the next pack's sums run while this pack's collectives are in flight, ``pipeline.py``;
    "off"), device of the kernel sums
    ("cpu", "gpu": ``kernels.device``), dtype of stored features and
    kernel values ("auto": float32 unless the data's float32 error bound exceeds 1e-2, see
    ``kernels.precision``), bias
    (adds a regularised bias term: K + 1), tol and tol_window (stop early when the
    windowed mean hinge loss is stable; paper section V), probability and calibration
    ("slice": hold out a calibration slice for Platt's sigmoids, ``calibration.py``;
    "training": fit them on the training rows); comm, work_bytes (kernel-sum
    working memory), progress (rank 0's callback after every pack) and verbose (0: silent; 1:
    rank 0 tells on stderr the first use's numba compile, a progress line every 10 s and a
    summary; 2: a progress line every second; ``progress.Console``).
    Fitted attributes: ``classes_`` (the sorted label values; for two, negative then
    positive), ``table_`` (this rank's support vectors), ``scale_`` (a float, or (K,) for K > 2
    classes), ``sigma_``, ``C_``, ``n_features_in_``, ``n_support_`` (distinct support
    vectors, shared by the classes), ``n_support_per_class_`` ((1,) or (K,): the support
    vectors each coefficient column uses), ``stats_``, ``dtype_`` (the float type computed in)
    and ``float32_error_bound_`` (or None). ``decision_function`` gives (n,) for two
    classes and (n, K) for more.
    """

    PARAMS = PACKSVM_PARAMS
    MULTICLASS = True
    SVM_TYPE = "c_svc"
    VALIDATION_METRIC = "accuracy"  # what --validation measures (``validation_score``)
    rho_ = 0.0  # the offset of f = <w, phi> - rho: 0 for C-SVC (PackSVR and PackOneClassSVM learn one)

    def __init__(
        self,
        kernel: str = _D["kernel"],
        gamma: float | str = _D["gamma"],
        degree: int = _D["degree"],
        coef0: float = _D["coef0"],
        C: float | None = _D["C"],
        sigma: float | None = _D["sigma"],
        epochs: float | str = _D["epochs"],
        iterations: int | None = _D["iterations"],
        pack: int = _D["pack"],
        seed: int = _D["seed"],
        dtype: str = _D["dtype"],
        bias: bool = _D["bias"],
        tol: float | None = _D["tol"],
        tol_window: int = _D["tol_window"],
        class_weight: dict | str | None = _D["class_weight"],
        probability: bool = _D["probability"],
        objective: bool = _D["objective"],
        sampling: str = _D["sampling"],
        placement: str = _D["placement"],
        pipeline: str = _D["pipeline"],
        device: str = _D["device"],
        step: float = _D["step"],
        average: bool = _D["average"],
        validation: float | None = _D["validation"],
        validation_every: int | None = _D["validation_every"],
        patience: int = _D["patience"],
        calibration: str = _D["calibration"],
        optimizer: str = _D["optimizer"],
        random_state: int | None = None,
        comm: MPI.Comm | None = None,
        work_bytes: int = DEFAULT_WORK_BYTES,
        progress: Callable | None = None,
        verbose: int = VERBOSE.default,
    ) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.C = C
        self.sigma = sigma
        self.epochs = epochs
        self.iterations = iterations
        self.pack = pack
        self.seed = seed
        self.random_state = random_state
        self.dtype = dtype
        self.bias = bias
        self.tol = tol
        self.tol_window = tol_window
        self.class_weight = class_weight
        self.probability = probability
        self.objective = objective
        self.sampling = sampling
        self.placement = placement
        self.pipeline = pipeline
        self.device = device
        self.step = step
        self.average = average
        self.validation = validation
        self.validation_every = validation_every
        self.patience = patience
        self.calibration = calibration
        self.optimizer = optimizer
        self.comm = comm
        self.work_bytes = work_bytes
        self.progress = progress
        self.verbose = verbose

    @property
    def feature_dtype(self):
        """The float type data is read in: the asked one, or with "auto" float64 until ``fit``
        has resolved it (``dtype_``)."""
        return np.dtype(DTYPES[getattr(self, "dtype_", read_dtype(self.dtype))])

    def summary(self):
        return f"{self.n_support_} support vectors"

    def _validated_shard(self, X, y, sample_weight):
        """Check the parameters and build the kernel spec and the shard (raises the same on every rank)."""
        p = self.validate_params()
        self.class_weight_ = p.get("class_weight")
        shard = self._as_shard(X, y, sample_weight, fitting=True)
        gamma = resolve_gamma(self._comm(), p["gamma"], shard)
        self.spec_ = KernelSpec(p["kernel"], gamma, p["degree"], p["coef0"], 1.0 if p.get("bias") else 0.0)
        return shard

    # -- training --------------------------------------------------------------------
    def fit(self, X: ArrayLike | Shard, y: ArrayLike | None = None, sample_weight: ArrayLike | None = None,
            checkpoint: str | os.PathLike | None = None, checkpoint_every_seconds: float | None = None,
            checkpoint_every_packs: int | None = None, resume: bool = False,
            should_stop: Callable[[], bool] | None = None, stop_after_packs: int | None = None,
            on_kernels_ready: Callable[[float], None] | None = None, delay=None,
            on_stage: Callable[[dict, float], None] | None = None) -> PackSVC:
        """Collective: train on ``X`` with labels ``y``.

        Before training the numba kernels are compiled, or loaded from numba's cache, once per
        node (``warmup.warm_kernels``), and a GPU's path is run once (``kernels.device.on_device``):
        ``training_["seconds"]["compile"]`` is both times, kept out of ``total``. Before the packs,
        rank 0 warns (``feature_scale_warning``) when the kernel vanishes or saturates between
        a sample of the training rows at gamma (``feature_scale``: badly scaled features);
        ``training_["kernel_scale"]`` holds its figures (None for the kernels not judged).

        Parameters
        ----------
        X : Shard, array-like or scipy.sparse matrix of shape (n_samples, n_features)
            This rank's shard of a data file (``load_shard``), or rows every rank holds whole.
        y : array-like of shape (n_samples,) or None, default=None
            The labels (targets for PackSVR) of in-memory rows; a Shard carries its own.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Weights on the rows' loss, with in-memory data (a file's rows carry theirs in its
            dataset ``w``); multiplied by ``class_weight``'s.
        checkpoint : str, os.PathLike or None, default=None
            File for the solver's state, written every ``checkpoint_every_seconds`` (rank 0's
            clock) and/or ``checkpoint_every_packs``, and when the run is stopped.
        checkpoint_every_seconds : float or None, default=None
            Seconds between checkpoints.
        checkpoint_every_packs : int or None, default=None
            Packs between checkpoints.
        resume : bool, default=False
            Continue from ``checkpoint`` if it holds a complete checkpoint.
        should_stop : callable or None, default=None
            Polled once per pack (on any rank); True stops the run. ``stopped_`` tells whether
            the run ended early; the fitted state is then the checkpointed one.
        stop_after_packs : int or None, default=None
            Stop after this many packs (tests).
        on_kernels_ready : callable or None, default=None
            Called on every rank with the seconds the numba kernels took to compile or load.
        delay : packsvm.delay.Delay or None, default=None
            Added to each pack's partial sums (tests and benchmarks: a node's jitter on a few cores).
        on_stage : callable or None, default=None
            With ``epochs="auto"``, called on every rank when the run trains on past a stage:
            with that stage (its entry of ``training_["convergence"]["stages"]``: its epochs,
            iterations, seconds, advice and change; a resumed fit lists the stages it judged)
            and the next stage's epochs.

        Returns
        -------
        PackSVC
            The fitted estimator itself.

        Raises
        ------
        PPackError
            On every rank, for a parameter out of its range or bad data (the message names the
            parameter or the file, what was expected and what was given).
        """
        comm = self._comm()
        ensure_threads(comm)  # a Python script under mpiexec: this rank's share of the node's cores
        self.__dict__.pop("dtype_", None)  # "auto" reads in float64, then resolves against the data
        shard = run_collectively(comm, self._validated_shard, X, y, sample_weight)
        self.dtype_, self.float32_error_bound_ = resolve_dtype(comm, self.dtype, shard, self.spec_)
        shard = shard.computed_in(DTYPES[self.dtype_])
        kernel_scale = feature_scale.figures(comm, shard, [self.spec_])  # said now, before the packs
        self._warn(comm, self.feature_scale_warning, feature_scale.advice(kernel_scale))
        labels, weights, n_classes, n_columns = self._targets(shard)
        d, seed = shard.n_features, self.seed_
        validation, self.held_out_ = self._held_out_rows(comm, shard, seed)
        m = shard.n_samples - (0 if self.held_out_ is None else self.held_out_["rows"])  # the rows trained on
        self.sigma_ = self._sigma(m)
        self.C_ = 1.0 / (m * self.sigma_)
        self.optimizer_ = dual_fit.chosen_optimizer(getattr(self, "optimizer", "sgd"), self.C_,
                                                    self.epochs if self.iterations is None else self.iterations / m)
        if self.optimizer_ == "dual":
            dual_fit.refuse_sgd_options(self)
            return self._fit_dual(comm, shard, labels, weights, n_classes, n_columns, validation, seed, m, checkpoint,
                                  checkpoint_every_seconds, checkpoint_every_packs, resume, should_stop,
                                  stop_after_packs, on_kernels_ready, kernel_scale)
        auto = convergence.is_auto(self.epochs, self.iterations)  # stages of 0.5, 1, 2, 4, ... epochs
        if auto:
            T = convergence.auto_iterations(m)
        else:
            T = int(self.iterations) if self.iterations is not None else max(1, int(round(self.epochs * m)))
        self.loss_ = self._loss(comm, shard, labels, weights)
        console = self._console()
        bar = None if self.progress is not None else console.progress()
        solver = PackedSolver(comm, self.spec_, self.sigma_, T, self.pack, seed,
                              self.work_bytes, self.progress if bar is None else pack_callback(bar),
                              should_stop=should_stop, tol=self.tol,
                              tol_window=self.tol_window, n_columns=n_columns, validation=validation,
                              average=self.average, step=self.step, sampling=self.sampling, loss=self.loss_,
                              placement=self.placement, device=self.device, pipeline=self.pipeline,
                              delay=_delay_on(comm, delay),
                              holdout=None if self.held_out_ is None else self.held_out_["holdout"])
        params = self._run_identity(shard, seed, T, n_classes, weights, validation)
        checkpointing = None if checkpoint is None else Checkpointing(
            str(checkpoint), checkpoint_every_seconds, checkpoint_every_packs, params)
        previous = None
        exists = checkpoint is not None and comm.bcast(on_rank0(comm, check_checkpoint_file, checkpoint, params))
        if resume and exists:
            previous = read_checkpoint(comm, checkpoint, params, self.spec_, DTYPES[self.dtype_], self.tol_window,
                                       self.work_bytes, validation=validation)
        self.resumed_from_ = None if previous is None else previous[1].iteration
        if auto and previous is not None:  # the stage the checkpoint was written in
            T = solver.iterations = convergence.auto_iterations(m, previous[1].iteration)
        first = first_use("training", shard.dtype, shard.sparse)
        if first:
            console("preparing the numba kernels (compiled on a machine's first use, then loaded from numba's "
                    "cache)")
        compile_seconds = warm_kernels(comm, self.spec_, shard.dtype, shard.sparse, shard.X.dtype)
        if first:
            console(f"numba kernels ready in {compile_seconds:.1f} s")
        if on_kernels_ready is not None:
            on_kernels_ready(compile_seconds)
        self.table_, state, stats, self.stopped_ = solver.run(shard, labels, checkpointing, previous,
                                                              stop_after_packs, weights)
        compile_seconds += solver.device_seconds
        stages = []  # epochs="auto": each stage's iterations, verdict and change
        while auto:
            following = self._judge_stage(comm, shard, state, stats, weights, validation, seed, T, m, compile_seconds,
                                          stages)
            if following is None:
                break
            T = solver.iterations = following
            console(convergence.stage_line(self.SVM_TYPE, stages[-1], T / m))
            if on_stage is not None:
                on_stage(stages[-1], T / m)
            state.loss_curve = None  # each stage keeps the loss curve of its own iterations
            self.table_, state, stats, self.stopped_ = solver.run(shard, labels, checkpointing, (
                self.table_, state, stats, solver.sampler), stop_after_packs, weights)
        if bar is not None:
            bar.close()
        if not auto:
            self._finish(comm, shard, state, stats, weights, validation, seed, T, compile_seconds)
        elif getattr(self, "probability", False) and not self.stopped_:  # the last stage's _finish left them
            self._fit_probability(shard, state)
        info = self.training_
        if auto:
            info["convergence"]["stages"] = stages
        info["kernel_scale"] = kernel_scale[0]
        console(f"trained in {info['seconds']['total']:.2f} s: {info['iterations_done']} of {T} iterations in "
                f"{info['packs']} packs, {self.n_support_} support vectors"
                + ("; converged (tol)" if info["converged"] else "") + ("; stopped" if self.stopped_ else ""))
        self._warn(comm, self.convergence_warning, info["convergence"]["advice"])
        return self

    def _run_identity(self, shard, seed, T, n_classes, weights, validation):
        """The training parameters a checkpoint of this fit is made with (``checkpoint.run_identity``)."""
        dual = self.optimizer_ == "dual"
        return run_identity(self.spec_, self.sigma_, self.pack, seed, shard.n_samples, shard.n_features, self.dtype_,
                            T, n_classes, average=self.average and not dual, sampling=self.sampling, step=self.step,
                            class_weight=None if weights is None else repr(self.class_weight_),
                            row_weights=shard.w is not None,
                            validation=None if validation is None else self.validation,
                            calibration=None if self.held_out_ is None or validation is not None
                            else self.held_out_["holdout"][0],
                            svm_type=self.SVM_TYPE, epsilon=getattr(self, "epsilon", None), optimizer=self.optimizer_)

    def _fit_dual(self, comm, shard, labels, weights, n_classes, n_columns, validation, seed, m, checkpoint,
                  checkpoint_every_seconds, checkpoint_every_packs, resume, should_stop, stop_after_packs,
                  on_kernels_ready, kernel_scale):
        """Collective: ``fit`` by the dual coordinate optimizer (``dual.solver``): its epochs a cap,
        its tolerance the KKT gap, ``training_["convergence"]`` its report; checkpoints as the SGD's
        (the draws' active sets and the epoch's figures besides the table)."""
        epochs = dual_fit.epoch_cap(self.epochs, self.iterations, m)
        self.loss_ = self._loss(comm, shard, labels, weights)
        labels, regression = self._dual_problem(comm, labels)
        console = self._console()
        solver = DualSolver(comm, self.spec_, np.full(n_columns, self.C_), Columns.plain(n_columns, self.sigma_,
                                                                                        self.loss_),
                            epochs, self.pack, seed, dual_fit.DEFAULT_TOL if self.tol is None else self.tol,
                            work_bytes=self.work_bytes, should_stop=should_stop, regression=regression,
                            holdout=None if self.held_out_ is None else self.held_out_["holdout"],
                            progress=None if not self.verbose else lambda f: console(
                                f"epoch {f['epoch']}: KKT gap {f['kkt_gap']:.3g}, {f['rows_drawn']} rows drawn, "
                                f"{f['support_vectors']} support vectors"))
        params = self._run_identity(shard, seed, epochs * m, n_classes, weights, validation)
        checkpointing = None if checkpoint is None else Checkpointing(
            str(checkpoint), checkpoint_every_seconds, checkpoint_every_packs, params)
        exists = checkpoint is not None and comm.bcast(on_rank0(comm, check_checkpoint_file, checkpoint, params))
        previous = None
        if resume and exists:
            fresh = solver.fresh_state(shard.n_samples)
            previous = read_checkpoint(comm, checkpoint, params, self.spec_, DTYPES[self.dtype_], self.tol_window,
                                       self.work_bytes, dual=fresh)[:4] + (fresh[1],)
        self.resumed_from_ = None if previous is None else previous[1].iteration
        compile_seconds = warm_kernels(comm, self.spec_, shard.dtype, shard.sparse, shard.X.dtype, dual=True)
        if on_kernels_ready is not None:
            on_kernels_ready(compile_seconds)
        self.table_, state, stats, self.stopped_ = solver.run(shard, labels, weights, stop_after_packs, checkpointing,
                                                              previous)
        self._dual_report = solver.report
        state.rho[:] = self.loss_.rho  # epsilon-SVR's -mean(y); C-SVC's 0
        self._finish(comm, shard, state, stats, weights, validation, seed, epochs * m, compile_seconds)
        info = self.training_
        info["kernel_scale"] = kernel_scale[0]
        self.n_iter_ = solver.report["epochs"]
        self.dual_coef_ = self.table_.coef.T.copy()
        console(f"trained in {info['seconds']['total']:.2f} s: {self.n_iter_} epochs of at most {epochs}, "
                f"{self.n_support_} support vectors" + ("; converged (tol)" if self.converged_ else "")
                + ("; stopped" if self.stopped_ else ""))
        self._warn(comm, self.convergence_warning, info["convergence"]["advice"])
        return self

    def _held_out_rows(self, comm, shard, seed):
        """Collective: the ``Validation`` (or None) and the rows held out of training (or None): a
        dict of ``holdout`` ((fraction, seed) for the sampler), ``rows`` and ``for`` ("validation",
        or "calibration" for ``--probability``'s slice, see ``calibration``)."""
        if self.validation is not None:
            every = self.validation_every or max(1, shard.n_samples // (10 * int(self.pack)))
            validation = Validation(comm, self, shard, self.validation, seed, every, self.patience)
            rows = len(validation.ids)
            if self._probability_slice() and rows < MIN_ROWS:
                raise PPackError(f"{given('validation', float(self.validation))} holds out {rows} rows, fewer "
                                 f"than the {MIN_ROWS} {given('probability', True)} fits its sigmoids on: give a "
                                 f"larger fraction, or {given('calibration', 'training')} to fit them on the training "
                                 "rows (overconfident)")
            return validation, {"holdout": validation.holdout, "rows": rows, "for": "validation"}
        if not self._probability_slice():
            return None, None
        check_room(shard.n_samples)
        holdout, rows = calibration_holdout(comm, shard.start, shard.stop, shard.n_samples, seed)
        return None, {"holdout": holdout, "rows": rows, "for": "calibration"}

    def _probability_slice(self):
        """Whether probabilities are fitted on held-out rows (the types without probabilities: no)."""
        return bool(getattr(self, "probability", False)) and getattr(self, "calibration", "slice") == "slice"

    # -- what the problem (svm_type) decides; PackSVR and PackOneClassSVM override ----------
    def _targets(self, shard):
        """Collective: ``(labels, weights, n_classes, n_columns)``: the solver's labels for the
        shard's rows, their weights (or None), the classes (for the run's identity) and the
        coefficient columns. Here: classes, {-1, +1} or class codes, class and row weights."""
        labels = self._fit_classes(shard)
        n_classes = len(self.classes_)
        return labels, self._row_weights(shard, self.class_weight_), n_classes, 1 if n_classes == 2 else n_classes

    def _sigma(self, m):
        """sigma from ``sigma`` or ``C`` (C = 1 / (m sigma))."""
        if self.sigma is not None:
            return float(self.sigma)
        return 1.0 / (m * (1.0 if self.C is None else float(self.C)))

    def _loss(self, comm, shard, labels, weights):
        """Collective: the replay's ``losses.Loss``: the hinge, radius sqrt(max_weight / sigma)."""
        return hinge_loss(largest_weight(comm, weights))

    def _dual_problem(self, comm, labels):
        """Collective: the dual's labels and its problem (``DualSolver``'s ``regression``): here the
        labels as they are and None, the C-SVC dual."""
        return labels, None

    def _finish(self, comm, shard, state, stats, weights, validation, seed, T, compile_seconds, probability=True,
                kept=None):
        """Collective: the fitted attributes and ``training_`` report from the solver's end state;
        the averaged model, the objective and (unless ``probability`` is False) the
        probabilities when asked (outside the packs). ``kept``: as ``primal_objective``'s.
        Returns the training state an averaged model replaced (the table's coefficients, the
        state's scale, norm and rho), for a run that trains on (epochs="auto"), or None."""
        m, d = shard.n_samples, shard.n_features
        replaced = None
        dual = getattr(self, "optimizer_", "sgd") == "dual"
        if self.average and not dual and not self.stopped_:  # the model is the averaged iterate (averaging.py)
            replaced = self.table_.coef.copy(), state.scale, state.norm, state.rho
            self.table_.coef[:] = averaged_coefficients(self.table_, state)
            state.scale = np.ones_like(state.scale)
            state.norm = np.full_like(state.norm, np.nan)  # not tracked: --objective computes it
            state.rho = averaged_offset(state, self.loss_)
        self.scale_ = float(state.scale[0]) if self.table_.n_columns == 1 else state.scale.copy()
        self.rho_ = float(state.rho[0])
        self.n_features_in_ = d
        self.n_support_ = int(state.occupancy.sum())
        self.n_support_per_class_ = comm.allreduce(np.count_nonzero(self.table_.coef, axis=0))
        self.stats_ = stats
        self.training_ = {
            "n_samples": m, "iterations": T, "iterations_done": state.iteration, "pack": int(self.pack),
            "ranks": comm.Get_size(), "seed": seed, "packs": stats.packs,
            "projections": stats.projections, "converged": stats.converged,
            "allreduce_calls": stats.allreduce_calls, "dtype": self.dtype_,
            "float32_error_bound": self.float32_error_bound_, "sampling": self.sampling,
            "optimizer": "dual" if dual else "sgd",
            "step": None if dual else float(self.step), "average": bool(self.average) and not dual,
            "hinge_moving_average": stats.hinge_moving_average, "data": shard.path,
            "held_out": None if self.held_out_ is None else {k: self.held_out_[k] for k in ("rows", "for")},
            "seconds": {k: comm.allreduce(v, op=MPI.MAX) for k, v in stats.seconds.items()},
            "bytes": dict(stats.bytes),  # the same on every rank
        }
        for name in ("epsilon", "nu"):  # the problem's own parameter (epsilon_svr, one_class)
            if name in self.PARAMS:
                self.training_[name] = float(getattr(self, name))
        self.training_["seconds"]["serial"] = comm.allreduce(serial_seconds(stats.seconds), op=MPI.MAX)
        self.training_["over_ranks"] = over_ranks(comm, stats, state.occupancy)
        self.training_["seconds"]["compile"] = compile_seconds  # not part of total (nor checkpointed)
        if stats.checkpoint_writes:
            self.training_["checkpoints"] = checkpoint_summary(stats.checkpoint_writes)
        if validation is not None:
            self.training_["validation"] = validation.report()
        if not self.stopped_:
            passed = self._offset_after_training(comm, shard, weights)
            start = MPI.Wtime()
            ids = objective_rows(m, seed, exact=bool(self.objective))
            self.training_["objective"] = primal_objective(comm, self, shard, state.norm, weights, ids, passed,
                                                           kept)
            self.training_["seconds"]["objective"] = comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)
        self.n_iter_ = int(state.iteration)
        self._diagnose(stats, state, validation)
        self.probability_ = None
        if probability and getattr(self, "probability", False) and not self.stopped_:
            self._fit_probability(shard, state)
        return replaced

    def _fit_probability(self, shard, state):
        """Collective: ``probability_`` and its report in ``training_`` (``_fit_probabilities``)."""
        comm = self._comm()
        start = MPI.Wtime()
        A, B, power, fitted_on, rows = self._fit_probabilities(shard, state.iteration)
        self.probability_ = (A, B, power)
        self.training_["probability"] = {"fitted_on": fitted_on, "rows": rows, "power": power}
        self.training_["seconds"]["probability"] = comm.allreduce(MPI.Wtime() - start, op=MPI.MAX)

    def _judge_stage(self, comm, shard, state, stats, weights, validation, seed, T, m, compile_seconds, stages):
        """Collective, epochs="auto": the fitted attributes of the stage of T iterations on m rows just
        run (``_finish``, its probabilities aside), appended to ``stages`` with its verdict and how far
        its predictions on the objective's sample rows moved since the stage before
        (``convergence.stage_change``); returns the next stage's iterations, or None when this one
        is the last: stopped, converged by ``tol`` or validation, or from one epoch on judged
        converged and settled, or the last of ``convergence.AUTO_EPOCHS``. The training state is
        left as the next stage continues it (what ``_finish`` replaced by an averaged model is put back)."""
        kept = []
        replaced = self._finish(comm, shard, state, stats, weights, validation, seed, T, compile_seconds,
                                probability=False, kept=kept)
        diagnosis = self.training_["convergence"]
        change = None
        if kept:  # rank 0, unless the run stopped
            f, y = (np.concatenate(parts, axis=-1) for parts in zip(*kept))
            outputs = convergence.stage_outputs(self.SVM_TYPE, f, self.rho_)
            if state.stage_outputs is not None:  # the stage before's (a checkpoint keeps them)
                change = convergence.stage_change(self.SVM_TYPE, state.stage_outputs, outputs, y)
            state.stage_outputs = outputs
        change = comm.bcast(change, root=0)
        stages.append({"epochs": state.iteration / m, "iterations": int(state.iteration),
                       "seconds": self.training_["seconds"]["total"], "advice": diagnosis["advice"],
                       "change": change})
        following = convergence.next_auto_iterations(T, m)
        settled = diagnosis["advice"] is None and state.iteration >= m and change is not None and \
            change <= convergence.MAX_STAGE_CHANGE[self.SVM_TYPE]
        stopped = self._ended_early(stats, validation)
        if stopped or settled or following is None:
            if not (stopped or settled) and following is None:  # the last stage, not settled
                diagnosis["advice"] = convergence.unsettled(self.SVM_TYPE, diagnosis["advice"], change,
                                                           stages[-1]["epochs"])
                self.converged_ = diagnosis["converged"] = False
            return None
        if replaced is not None:
            self.table_.coef[:] = replaced[0]
            state.scale, state.norm, state.rho = replaced[1:]
        return following

    def _ended_early(self, stats, validation):
        """Whether the run ended by its own test (``tol``), by validation or on request."""
        return self.stopped_ or stats.converged or (validation is not None and validation.track.stopped)

    def _diagnose(self, stats, state, validation):
        """``converged_`` and ``training_["convergence"]``: the figures of ``convergence.py`` and its
        verdict (``advice``, None when converged). A run stopped by its own test (``tol``), by
        validation or on request is not judged."""
        if getattr(self, "optimizer_", "sgd") == "dual":
            diagnosis = dict(self._dual_report)
            diagnosis["advice"] = None if self.stopped_ else dual_fit.advice(diagnosis)
            self.converged_ = diagnosis["converged"]
            self.training_["convergence"] = diagnosis
            return
        diagnosis = convergence.figures(self.SVM_TYPE, self.sigma_, state.iteration, state.loss_windows,
                                        self.training_.get("objective"), state.loss_curve)
        judged = not self._ended_early(stats, validation)
        diagnosis["advice"] = convergence.verdict(diagnosis) if judged else None
        self.converged_ = diagnosis["converged"] = diagnosis["advice"] is None
        self.training_["convergence"] = diagnosis

    def _offset_after_training(self, comm, shard, weights):
        """Collective: where the model's offset comes from a pass over the training rows, sets it
        and returns the pass (``objective.training_rows``) for the objective; C-SVC has none: None."""
        return None

    def _fit_probabilities(self, shard, iterations):
        """Collective: Platt's (A (K,), B (K,)), the power of their normalisation (1.0 for two
        classes), fitted_on, rows: from the decision values of rows the training never sampled
        (see ``probability``), the same on every rank."""
        comm = self._comm()
        held = self.held_out_ or {"holdout": None, "for": "out-of-bag"}
        ids, fitted_on = fit_rows(comm, shard.start, shard.stop, shard.n_samples, self.training_["seed"], iterations,
                                  self.sampling, held["holdout"], held_out_name=held["for"] + " rows")
        decisions, labels = distributed_decisions(comm, self.table_, self.scale_, shard, self.n_features_in_,
                                                  ids=ids)
        values = self._class_values
        columns = 1 if len(values) == 2 else len(values)
        fitted = np.ones((3, columns))  # A, B and (in [2, 0]) the power
        if comm.Get_rank() == 0:
            f = decisions.reshape(len(ids), columns)
            for c in range(columns):
                positive = labels == (values[1] if columns == 1 else values[c])
                fitted[:2, c] = fit_sigmoid(f[:, c], positive)
            if columns > 1:
                fitted[2, 0] = fit_power(f, fitted[0], fitted[1], np.searchsorted(values, labels))
        fitted = Collectives(comm).broadcast(fitted)
        return fitted[0], fitted[1], float(fitted[2, 0]), fitted_on, len(ids)

    @available_if(lambda self: bool(self.probability) or getattr(self, "probability_", None) is not None,
                  why="class probabilities need a model fitted with probability=True")
    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Collective: class probabilities of data every rank holds (only for ``probability=True``).

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
            The rows, the same on every rank.

        Returns
        -------
        numpy.ndarray
            (n_samples, K) probabilities, columns in ``classes_`` order, each row summing to 1.
        """
        return self.probabilities_of(self.decision_function(X))

    def probabilities_of(self, decisions):
        """Class probabilities (n, K) for decision values (n,) or (n, K) of this model."""
        if getattr(self, "probability_", None) is None:
            raise PPackError(f"class probabilities need a model trained with {given('probability', True)}")
        return probabilities(decisions, *self.probability_)

    def _decisions(self, shard):
        comm = self._comm()
        ensure_threads(comm)
        console = self._console()
        first = first_use("prediction", self.table_.dtype, self.table_.sparse)
        if first:
            console("first prediction of this process: its numba kernels compile on a machine's first use, then "
                    "load from numba's cache")
        start = MPI.Wtime()
        decisions = distributed_decisions(comm, self.table_, self.scale_, shard, self.n_features_in_)
        if first:
            console(f"predicted in {MPI.Wtime() - start:.1f} s, the kernels' compile or load included")
        return decisions

    # -- model file ------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Collective: write the model file, each rank its own support vectors.

        The file appears whole or not at all (``collective_write``); ``save_report_`` tells
        how it was written (a ``WriteReport``).

        Parameters
        ----------
        path : str or os.PathLike
            The model file to write (HDF5, ``.h5``); ``load_model`` reads it back.
        """
        comm = self._comm()
        table = self.table_
        offsets = shard_offsets(comm, table)
        header = KernelModelHeader(self.spec_, self.C_, self.sigma_, self.scale_, self._model_classes(),
                                   self.n_features_in_, int(offsets[0][-1]), "csr" if table.sparse else "dense",
                                   table.dtype, self.training_,
                                   None if self.probability_ is None else self.probability_[:2], self.SVM_TYPE,
                                   float(self.rho_), 1.0 if self.probability_ is None else self.probability_[2])

        def own_parts():
            return shard_parts(table, offsets, comm.Get_rank(), keys="support_keys", coef="coef",
                               dense="support_vectors",
                               csr=("support_vectors/indptr", "support_vectors/indices", "support_vectors/data"))

        self.save_report_ = write_kernel_model_by_rank(comm, path, header, int(offsets[0][-1]), int(offsets[1][-1]),
                                                       own_parts)

    @classmethod
    def load(cls, path: str | os.PathLike, comm: MPI.Comm | None = None,
             work_bytes: int = DEFAULT_WORK_BYTES) -> PackSVC:
        """Collective: a fitted estimator from a model file; each rank loads a slice of it.

        Parameters
        ----------
        path : str or os.PathLike
            A kernel model file written by ``save``.
        comm : mpi4py.MPI.Comm or None, default=None
            The ranks that load it; None is ``MPI.COMM_WORLD``.
        work_bytes : int, default=67108864
            Working memory of a rank's kernel sums, in bytes.

        Returns
        -------
        PackSVC
            The fitted estimator (of the file's SVM type: PackSVR and PackOneClassSVM files
            give those classes).
        """
        comm = MPI.COMM_WORLD if comm is None else comm
        header = run_collectively(comm, read_kernel_header, path)
        spec = header.spec
        cls = cls if header.svm_type == cls.SVM_TYPE else cls.svm_type_classes()[header.svm_type]
        model = cls(**cls._load_params(header), comm=comm, work_bytes=work_bytes,
                    dtype="float32" if header.dtype == np.float32 else "float64")
        model.dtype_, model.float32_error_bound_ = model.dtype, None
        model.table_ = run_collectively(comm, _read_table_slice, path, header, comm.Get_rank(), comm.Get_size(),
                                        work_bytes)
        model.spec_, model.scale_ = spec, header.scale
        model.sigma_, model.C_, model.rho_ = header.sigma, header.C, header.rho
        if header.svm_type == "c_svc":
            model.classes_ = header.classes
        model.n_features_in_, model.n_support_ = header.n_features, header.n_support
        model.n_support_per_class_ = comm.allreduce(np.count_nonzero(model.table_.coef, axis=0))
        model.training_ = header.training
        model.probability_ = None if header.probability is None else (*header.probability, header.probability_power)
        if header.svm_type == "c_svc":
            model.probability = header.probability is not None
        return model

    @classmethod
    def _load_params(cls, header):
        """The constructor's parameters that a model file's ``header`` records."""
        spec = header.spec
        params = {"kernel": spec.name, "gamma": spec.gamma, "degree": spec.degree, "coef0": spec.coef0,
                  "sigma": header.sigma}
        if "bias" in cls.PARAMS:
            params["bias"] = spec.offset > 0
        return params

    @classmethod
    def svm_type_classes(cls):
        """{svm_type: the estimator class of models of that type} (the public estimators' own in
        ``ppack.estimators``)."""
        return SVM_TYPE_CLASSES

    def _model_classes(self):
        """The model file's ``classes``: the label values."""
        return self.classes_

    def row_losses(self, f, y):
        """(Q, n) the hinge losses of decision values f (Q, n) for raw labels y (n,)."""
        values = self._class_values
        if len(f) == 1:
            signs = np.where(y == values[1], 1.0, -1.0)[None, :]
        else:
            signs = np.where(y[None, :] == values[:, None], 1.0, -1.0)
        return np.maximum(0.0, 1.0 - signs * f)

    def objective_offset_term(self):
        """What the objective adds for rho (one-class: -sigma rho; else 0)."""
        return 0.0

    def validation_score(self, decisions, labels):
        """Accuracy of the decision values on held-out labels (--validation keeps the best)."""
        values = self._class_values
        if decisions.ndim == 1:
            predicted = np.where(decisions >= 0, values[1], values[0])
        else:
            predicted = values[np.argmax(decisions, axis=1)]
        return float(np.mean(predicted == labels))


def _delay_on(comm, delay):
    """``delay`` on ``comm``'s ranks (``Delay.for_ranks``), or None; a rank it names that is not
    among them is a one-line PPackError."""
    if delay is None:
        return None
    try:
        return delay.for_ranks(comm.Get_size())
    except ValueError as error:
        raise PPackError(str(error), collective=True) from None


def resolve_gamma(comm, gamma, shard):
    """Collective: the kernel width ``gamma`` gives on the training ``shard``, as scikit-learn's
    SVC: a number as it is; "auto" (or None, as older scripts and model files say) 1 /
    n_features; "scale" 1 / (n_features * X.var()) over every rank's rows (1 for constant X)."""
    if gamma == "scale":
        variance = value_variance(comm, shard)
        return 1.0 / (shard.n_features * variance) if variance > 0 else 1.0
    if gamma in (None, "auto"):
        return 1.0 / shard.n_features
    return float(gamma)


def _read_table_slice(path, header, rank, size, work_bytes):
    """This rank's even slice of a kernel model's support vectors, as a table."""
    start, stop = chunk(header.n_support, rank, size)
    keys, coef, X = read_support_vectors(path, header, start, stop)
    table = SupportVectorTable(KernelCompute(header.spec, header.n_features, header.storage == "csr", header.dtype,
                                             work_bytes), header.n_columns)
    table.insert_many(keys, coef, X)
    return table


def checkpoint_summary(reports):
    """What a run's checkpoint writes (``collective_write.WriteReport``s) had in common: how many,
    the way they were written, the node groups, and the most sequential file opens of any."""
    last = reports[-1]
    return {"written": len(reports), "method": last.method, "nodes": last.nodes,
            "sequential_opens": max(r.opens for r in reports)}


SVM_TYPE_CLASSES["c_svc"] = PackSVC
register_model_type("kernel", PackSVC)


class LibsvmModel:
    """What the models read from LIBSVM model files (``model.libsvm_file``) share, before a
    PackSVC-family class in the bases: predictions on any number of ranks from a table of the
    support vectors (scale 1, offset 0), with LIBSVM's rho applied by the subclass. The
    support vectors name only the features they use: data with more features is read as it
    is, as LIBSVM does. Predicts only: no fit, and no save."""

    def summary(self):
        return f"{self.n_support_} support vectors (LIBSVM {self.SVM_TYPE} model)"

    def fit(self, *args, **kwargs):
        raise PPackError("a model read from a LIBSVM model file predicts only; fit a new PackSVC, PackSVR or "
                         "PackOneClassSVM to train")

    def save(self, path):
        raise PPackError(f"{path}: a model read from a LIBSVM model file is not saved as a ppack model "
                         "(it has no training parameters); keep using the LIBSVM file")

    def _widen(self, n_features):
        if n_features > self.n_features_in_:  # the support vectors are 0 on the features beyond
            self.table_.compute.stored.widen(n_features)
            self.n_features_in_ = int(n_features)

    def _as_shard(self, X, *args, **kwargs):
        shape = (X.n_samples, X.n_features) if hasattr(X, "n_features") else np.shape(X)
        if len(shape) == 2:
            self._widen(shape[1])
        return super()._as_shard(X, *args, **kwargs)

    def decision_function_shard(self, shard):
        self._widen(shard.n_features)
        return super().decision_function_shard(shard)

    @classmethod
    def libsvm_type_classes(cls):
        """{LIBSVM svm_type: the class of models of that type read from a file} (the public
        estimators' own in ``ppack.estimators``)."""
        return LIBSVM_TYPE_CLASSES

    @classmethod
    def load(cls, path, comm=None, work_bytes=DEFAULT_WORK_BYTES):
        """Collective: rank 0 checks the header, then every rank reads its slice of the support
        vectors; the model is of the class ``libsvm_type_classes`` gives the file's svm_type."""
        comm = MPI.COMM_WORLD if comm is None else comm
        header = comm.bcast(on_rank0(comm, read_libsvm_model_header, path), root=0)
        cls = cls.libsvm_type_classes()[header.svm_type]
        spec = header.spec
        start, stop = chunk(header.total_sv, comm.Get_rank(), comm.Get_size())
        coef, X, width = run_collectively(comm, read_libsvm_model_rows, path, header, start, stop)
        n_features = max(1, comm.allreduce(width, op=MPI.MAX))
        table = SupportVectorTable(KernelCompute(spec, n_features, True, np.float64, work_bytes), 1)
        table.insert_many(np.arange(start, stop, dtype=np.int64), coef, X)
        model = cls(kernel=spec.name, gamma=spec.gamma, degree=spec.degree, coef0=spec.coef0, comm=comm,
                    work_bytes=work_bytes)
        model.table_, model.spec_, model.scale_ = table, spec, 1.0
        model.n_features_in_, model.n_support_ = n_features, header.total_sv
        model.n_support_per_class_ = comm.allreduce(np.count_nonzero(table.coef, axis=0))
        model.sigma_ = model.C_ = None
        model.training_ = {"libsvm_model": str(path)}
        model._set_libsvm_fields(header)
        return model


class LibsvmSVC(LibsvmModel, PackSVC):
    """A binary C-SVC model read from a LIBSVM model file: LIBSVM's -rho is ``intercept_``,
    added to every decision value. ``classes_`` is [second label, first label], so a value >=
    0 gives LIBSVM's first label (see ``LibsvmModel``)."""

    def _decisions(self, shard):
        decisions, labels = super()._decisions(shard)
        return (None if decisions is None else decisions + self.intercept_), labels

    def _set_libsvm_fields(self, header):
        self.intercept_ = -header.rho
        self.classes_ = np.array([header.labels[1], header.labels[0]], dtype=np.float64)
        self.probability_ = None if header.probability is None else (*header.probability, 1.0)  # binary: no power
        self.probability = header.probability is not None


LIBSVM_TYPE_CLASSES["c_svc"] = LibsvmSVC
register_model_type("libsvm", LibsvmSVC)
