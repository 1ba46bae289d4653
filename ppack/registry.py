"""Every name ppack knows and one table of parameter constraints, for the CLI and the Python API.

Strings stop here: kernels, solvers, losses, storages, dtypes and averaging modes are
listed once; every trainer parameter and every linear solver option has one ``Rule``
that validates it (with a one-line ``PPackError`` naming the parameter, the allowed
range and the value) and one default. The CLI builds its training options from the
same tables, so an option is typed, checked and documented in one place. Model files
name their type ("kernel", "linear"); each trainer registers the class that loads it.
"""
import math
import os
import re
from dataclasses import dataclass

import numpy as np

from .errors import PPackError



@dataclass(frozen=True)
class Kernel:
    """The facts of one kernel; its numba formula is ``kernels.formulas.value`` at the same id
    (the kernel's position in ``KERNEL_TABLE``).

    ``reduction``: how two rows meet, "dot" (<x, z>, with the squared L2 norm of a row) or
    "l1" (sum_f |x_f| + |z_f| - |x_f - z_f|, with the L1 norm); ``gemm``: dense rows may take
    their reductions from BLAS GEMM (dot reductions only); ``exp``: the formula gives the
    argument of an exp taken afterwards, vectorised over a whole block (its argument is <= 0);
    ``float32_error``: c in the bound delta = c g_d max_norm on a float32 value's error, relative
    to the kernel value (``kernels.precision``), or None where the error is absolute: ``--dtype
    auto`` then keeps float64; ``libsvm_type``: LIBSVM's kernel_type, or None; ``params``: which
    of gamma, degree and coef0 the formula reads (LIBSVM model files store exactly these);
    ``psd``: positive semi-definite for every gamma > 0 and coef0.
    """

    name: str
    formula: str
    reduction: str
    gemm: bool
    exp: bool
    float32_error: float | None
    libsvm_type: str | None
    params: tuple
    psd: bool = True


# Kernel ids are positions here: add a kernel at the end, with its formula in kernels/formulas.py.
KERNEL_TABLE = (
    Kernel("rbf", "exp(-gamma ||x - z||^2)", "dot", gemm=True, exp=True, float32_error=2.0,
           libsvm_type="rbf", params=("gamma",)),
    Kernel("linear", "<x, z>", "dot", gemm=True, exp=False, float32_error=None,
           libsvm_type="linear", params=()),
    Kernel("poly", "(gamma <x, z> + coef0)^degree", "dot", gemm=True, exp=False, float32_error=None,
           libsvm_type="polynomial", params=("gamma", "degree", "coef0")),
    Kernel("laplacian", "exp(-gamma ||x - z||_1)", "l1", gemm=False, exp=True, float32_error=4.0,
           libsvm_type=None, params=("gamma",)),
    Kernel("sigmoid", "tanh(gamma <x, z> + coef0)", "dot", gemm=True, exp=False, float32_error=None,
           libsvm_type="sigmoid", params=("gamma", "coef0"), psd=False),
)
KERNELS = tuple(k.name for k in KERNEL_TABLE)
KERNEL_FACTS = {k.name: k for k in KERNEL_TABLE}
OPTIMIZERS = ("sgd", "dual", "auto")  # the kernel trainer's C-SVC optimizers (packsvm.loop, packsvm.dual)
SAMPLINGS = ("epochs", "uniform")  # the kernel trainer's row streams (data.sampler)
PIPELINES = ("auto", "on", "off")  # the kernel trainer's pack schedule (packsvm.loop): auto is on above one rank
PLACEMENTS = ("count", "cost")  # where the kernel trainer puts new support vectors (packsvm.table.place_new)
COMPUTE_DEVICES = ("cpu", "gpu")  # where a rank's kernel work runs (kernels.device)
KERNEL_SOLVER = "packsvm"
LOSSES = ("l1", "l2")
STORAGES = ("dense", "csr")
DTYPES = {"float32": np.float32, "float64": np.float64}
# the value types a ppack HDF5 data file stores (data.hdf5; convert --dtype)
STORED_DTYPES = {"float64": np.float64, "float32": np.float32, "float16": np.float16, "uint8": np.uint8}
AVERAGING = ("iterative", "oneshot")
GAMMAS = ("scale", "auto")  # the kernel widths gamma takes from the data (packsvm.estimator.resolve_gamma)
CALIBRATIONS = ("slice", "training")  # the rows --probability's sigmoids are fitted on (packsvm.calibration)

_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


@dataclass(frozen=True)
class Rule:
    """What one parameter accepts. ``kind``: "real", "int", "bool", "choice", "directory"
    or "text"; ``low``/``high`` bound numbers (``low_open``: strictly above ``low``);
    ``choices`` for "choice" (and extra words a number may be replaced by, e.g. tau's
    "radius"); ``none``: None is allowed (it means "the default behaviour")."""

    kind: str
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    choices: tuple = ()
    none: bool = False

    def describe(self):
        if self.kind == "bool":
            text = "True or False"
        elif self.kind == "choice":
            text = "one of " + ", ".join(map(str, self.choices))
        elif self.kind == "directory":
            text = "an existing directory"
        elif self.kind == "text":
            text = "a string"
        elif self.kind == "class_weight":
            text = "'balanced', a dict {label: weight > 0} or 'label:weight,...'"
        else:
            text = "an integer" if self.kind == "int" else "a finite number"
            bounds = []
            if self.low > -math.inf:
                bounds.append(f"{'>' if self.low_open else '>='} {_number(self.low)}")
            if self.high < math.inf:
                bounds.append(f"<= {_number(self.high)}")
            text += (" " + " and ".join(bounds)) if bounds else ""
            if self.choices:
                text += " or " + " or ".join(repr(c) for c in self.choices)
        return text + (" or None" if self.none else "")

    def check(self, name, value):
        """``value`` normalised (an int, float, bool or str); raises PPackError naming ``name``."""
        if value is None:
            if self.none:
                return None
            raise PPackError(f"{name}: must be {self.describe()}, got None")
        normal = self._normal(value)
        if normal is None:
            raise PPackError(f"{name}: must be {self.describe()}, got {value!r}")
        return normal

    def _normal(self, value):
        if self.kind == "bool":
            if isinstance(value, (bool, np.bool_)):
                return bool(value)
            if isinstance(value, (int, np.integer)) and value in (0, 1):
                return bool(value)
            if isinstance(value, str) and value.lower() in _TRUE + _FALSE:
                return value.lower() in _TRUE
            return None
        if self.kind == "choice":
            return value if isinstance(value, str) and value in self.choices else None
        if self.kind == "directory":
            return str(value) if isinstance(value, (str, os.PathLike)) and os.path.isdir(value) else None
        if self.kind == "text":
            return value if isinstance(value, str) and value else None
        if self.kind == "class_weight":
            return _class_weight(value)
        if isinstance(value, str) and value in self.choices:
            return value
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            return None
        if not math.isfinite(value):
            return None
        if self.kind == "int" and not isinstance(value, (int, np.integer)) and not float(value).is_integer():
            return None
        if (value <= self.low if self.low_open else value < self.low) or value > self.high:
            return None
        return int(value) if self.kind == "int" else float(value)


def _class_weight(value):
    """'balanced', or {label: weight} from a dict or 'label:weight,...' text (labels that read
    as numbers become floats); None when malformed or a weight is not a finite number > 0."""
    if isinstance(value, str):
        if value == "balanced":
            return value
        try:
            pairs = [item.rsplit(":", 1) for item in value.split(",")]
            value = {_label(label.strip()): float(weight) for label, weight in pairs}
        except ValueError:
            return None
    if not isinstance(value, dict) or not value:
        return None
    weights = {}
    for label, weight in value.items():
        if isinstance(weight, (bool, np.bool_)) or not isinstance(weight, (int, float, np.integer, np.floating)):
            return None
        if not (math.isfinite(weight) and weight > 0):
            return None
        weights[_label(label)] = float(weight)
    return weights


def _label(label):
    """A label as a float when it is a number (1, '1', 1.0 alike), else as given."""
    try:
        return float(label)
    except (TypeError, ValueError):
        return label


def _number(x):
    return f"{x:g}" if isinstance(x, float) else str(x)


def real(low=-math.inf, high=math.inf, low_open=False, none=False, choices=()):
    return Rule("real", low, high, low_open, tuple(choices), none)


def integer(low=-math.inf, high=math.inf, none=False):
    return Rule("int", low, high, False, (), none)


def positive(none=False):
    """A finite number > 0."""
    return real(0.0, low_open=True, none=none)


def count(none=False):
    """An integer >= 1."""
    return integer(1, none=none)


BOOL = Rule("bool")
SEED = integer(0, 2**63 - 1)


@dataclass(frozen=True)
class LinearSolver:
    """One linear solver: its name, how its iterative mode combines the rank blocks ("dual":
    CoCoA rounds; "data-parallel": sums every iteration; "stochastic": rows delivered to every
    rank), and its options (``solver_options``, `--solver-option NAME=VALUE`), each with its
    Rule. Every solver reads rows through any COFFIN feature map; its ``solve`` is
    ``linear.estimator.SOLVE[name]``."""

    name: str
    combination: str
    options: dict


_SHARED_OPTIONS = {"tol": positive(), "max_epochs": count(), "seed": SEED}
LINEAR_SOLVER_TABLE = (
    LinearSolver("dcd", "dual", {**_SHARED_OPTIONS, "shrinking": BOOL}),
    LinearSolver("llsvm", "dual", {
        **_SHARED_OPTIONS, "inner_iterations": count(), "max_block_rows": count(none=True),
        "workdir": Rule("directory", none=True), "tau": real(0.0, low_open=True, choices=("radius",)),
        "shuffle_first_pass": BOOL, "reshrink": BOOL, "full_passes": count()}),
    LinearSolver("stream", "dual", {
        **_SHARED_OPTIONS, "cache_rows": count(none=True), "cache_bytes": count(none=True),
        "chunk_rows": count(none=True), "batch_updates": count(), "max_updates": count(none=True),
        "updates_per_row": real(0.0)}),
    LinearSolver("alm", "data-parallel", {
        **_SHARED_OPTIONS, "mu0": positive(none=True), "rho": real(1.0), "mu_max": positive(),
        "regularize_bias": BOOL, "bisect_tol": positive()}),
    LinearSolver("pegasos", "stochastic", {
        "tol": real(0.0, none=True), "max_epochs": count(none=True), "seed": SEED, "epochs": count(),
        "t0": integer(0, 2**62, none=True), "average": BOOL, "pack": count()}),
)
LINEAR_SOLVER_ENTRIES = {s.name: s for s in LINEAR_SOLVER_TABLE}
LINEAR_SOLVERS = tuple(LINEAR_SOLVER_ENTRIES)
SOLVERS = (KERNEL_SOLVER,) + LINEAR_SOLVERS


@dataclass(frozen=True)
class Param:
    """A trainer parameter: its rule, default, and (for the CLI) help text."""

    rule: Rule
    default: object
    help: str


# The numba/BLAS threads of each rank (`train` and `predict --threads`).
THREADS = Param(count(), None, "numba/BLAS threads per rank (default: NUMBA_NUM_THREADS or "
                "OMP_NUM_THREADS if set, else this node's cores divided by its ranks)")


# The estimators' progress lines on rank 0's stderr (``progress.Console``; the command line has
# --quiet and --log-every instead). True and False are 1 and 0, as scikit-learn's verbose.
VERBOSE = Param(integer(0), 0, "0: silent (default); 1: the first use's compile, a progress line every 10 s and a "
                "summary; 2 or more: a progress line every second")


# The P-packSVM trainer (PackSVC and `train --solver packsvm`).
PACKSVM_PARAMS = {
    "kernel": Param(Rule("choice", choices=KERNELS), "rbf",
                    ", ".join(f"{k.name} {k.formula}" for k in KERNEL_TABLE) + " (default rbf)"),
    "gamma": Param(real(0.0, low_open=True, none=True, choices=GAMMAS), "auto",
                   "kernel width: a number > 0, scale (1 / (n_features * X.var()), the variance of every value of "
                   "the training data) or auto (1 / n_features; default), as scikit-learn's SVC"),
    "degree": Param(count(), 3, "poly degree (default 3)"),
    "coef0": Param(real(), 0.0, "poly and sigmoid constant (default 0)"),
    "bias": Param(BOOL, False, "learn a bias term, regularised with w (kernel K + 1; paper section V)"),
    "C": Param(positive(none=True), None, "SVM cost, C = 1 / (n_samples * sigma) (default 1)"),
    "sigma": Param(positive(none=True), None, "regulariser weight of the primal objective (instead of C)"),
    "epochs": Param(real(0.0, low_open=True, choices=("auto",)), 1.0,
                    "T = epochs * n_samples SGD iterations (default 1); auto: half an epoch, one, then twice as "
                    "many until the convergence diagnostic is satisfied and the predictions settle, at most 128"),
    "iterations": Param(count(none=True), None, "T, the number of SGD iterations (instead of --epochs)"),
    "pack": Param(count(), 100, "r, iterations per pack: two Allreduce calls per pack (default 100)"),
    "optimizer": Param(Rule("choice", choices=OPTIMIZERS), "sgd",
                       "sgd (default): P-packSVM's primal SGD, averaged; dual: dual coordinate descent on the same "
                       "packs (LIBLINEAR's, with a kernel row), which stops by its KKT gap and certifies its "
                       "duality gap, --epochs its cap; auto: the dual where the SGD's bound 1 / (sigma T) = C / "
                       "epochs is above 10, else the SGD"),
    "tol": Param(positive(none=True), None,
                 "sgd: stop before T when the mean hinge loss of the last --tol-window sampled rows changes by at "
                 "most this fraction from the window before; dual: stop when the projected gradients' spread "
                 "over an epoch (the KKT gap, LIBLINEAR's) is at most this (default: sgd runs T iterations, "
                 "dual stops at 0.1)"),
    "tol_window": Param(count(), 1000, "rows per window of --tol (default 1000)"),
    "seed": Param(SEED, 0, "seed of the shared sampling stream (default 0)"),
    "probability": Param(BOOL, False,
                         "also fit Platt sigmoids (per class, on held-out rows: see --calibration) so the model "
                         "gives class probabilities (predict --proba)"),
    "calibration": Param(Rule("choice", choices=CALIBRATIONS), "slice",
                         "rows --probability fits its sigmoids on, without --validation: slice (default) holds "
                         "out a twentieth of the rows (at least 200, at most 50,000) from training; training fits them on "
                         "the rows trained on (overconfident; for sets too small to spare rows)"),
    "validation": Param(real(0.0, 0.5, low_open=True, none=True), None,
                        "hold out this fraction of the rows (never sampled) and stop when the accuracy on them "
                        "has not improved for --patience evaluations (default: no hold-out)"),
    "validation_every": Param(count(none=True), None,
                              "packs between validation evaluations (default: a tenth of an epoch)"),
    "patience": Param(count(), 5, "evaluations without improvement before --validation stops (default 5)"),
    "sampling": Param(Rule("choice", choices=SAMPLINGS), "epochs",
                      "epochs: each epoch visits every row once, in a fresh random order (default); uniform: "
                      "independent draws with replacement, as in the paper"),
    "device": Param(Rule("choice", choices=COMPUTE_DEVICES), "cpu",
                    "where each rank's kernel sums run: cpu (default) or gpu, one GPU per rank (its rank on the "
                    "node modulo the GPUs it sees; needs CuPy: pip install \"ppack[gpu]\"); the model is the same"),
    "placement": Param(Rule("choice", choices=PLACEMENTS), "count",
                       "where new support vectors go: count (default): the rank holding fewest, the same model bit "
                       "for bit from run to run; cost: the rank whose stored rows would take the least measured "
                       "time (faster ranks hold more, so no rank waits for a slow one; the model then varies from "
                       "run to run in its last bits)"),
    "pipeline": Param(Rule("choice", choices=PIPELINES), "off",
                      "off (default): each rank waits in every collective; on: the next pack's kernel sums run "
                      "while this pack's two Allreduce calls are in flight, hiding the collectives and one pack "
                      "of a rank's jitter (faster where ranks' speeds jitter from pack to pack; measured no faster "
                      "on quiet cores); auto: on above one rank, off on one (on's model equals off's up to "
                      "rounding, 1e-12 relative)"),
    "step": Param(real(0.0, 1.0, low_open=True), 0.5,
                  "c in the SGD step c / (sigma (t + c - 1)); 1 is Pegasos' 1 / (sigma t), 0.5 (default) halves "
                  "the early steps: more accurate at T = m on most measured sets, with fewer support vectors"),
    "average": Param(BOOL, True,
                     "the model is the averaged iterate sum_t a_t w_t / sum_t a_t, a_t = t (t+1) (t+2) (default "
                     "on; --no-average: the last iterate w_T)"),
    "objective": Param(BOOL, False,
                       "after training, take the primal objective's hinge part over every row (one prediction "
                       "pass over the training set) instead of a sample of 2,000 rows"),
    "class_weight": Param(Rule("class_weight", none=True), None,
                          "weights on the hinge loss of each class's rows: balanced (n_samples / (K * rows of "
                          "the class)) or LABEL:WEIGHT,... (others 1); times the data's row weights 'w'"),
    "dtype": Param(Rule("choice", choices=("auto",) + tuple(DTYPES)), "auto",
                   "stored feature type; float32 also computes dot products and kernel values in float32 "
                   "(faster, half the memory; sums stay float64); auto (default): float32 for the rbf and "
                   "laplacian kernels when the worst-case float32 error of a kernel value, bounded from the "
                   "data's largest norm and gamma, is at most 0.01 (relative), else float64"),
}
# Pairs a user gives one of, not both.
EXCLUSIVE = (("C", "sigma"), ("epochs", "iterations"))

# The kernel trainer's problems (LIBSVM's names, its -s 0, 3 and 2) and their own parameters.
SVM_TYPES = ("c_svc", "epsilon_svr", "one_class")
SVM_TYPE_PARAMS = {
    "svm_type": Param(Rule("choice", choices=SVM_TYPES), "c_svc",
                      "c_svc: classification (default); epsilon_svr: regression with the epsilon-insensitive "
                      "loss (targets: any finite numbers); one_class: novelty detection, Schoelkopf's nu "
                      "one-class SVM (labels ignored)"),
    "epsilon": Param(real(0.0), 0.1, "epsilon_svr: the tube's half width, residuals within it cost nothing "
                                     "(LIBSVM's -p; default 0.1)"),
    "nu": Param(real(0.0, 1.0, low_open=True), 0.5,
                "one_class: an upper bound on the fraction of training rows outside the boundary and a lower "
                "bound on the fraction of support vectors (LIBSVM's -n; default 0.5); C = 1 / (nu n_samples)"),
}
# What each problem does not read, and why: the CLI refuses these options for it, and its
# estimator has no such parameter.
NOT_FOR_SVM_TYPE = {
    "c_svc": {"epsilon": "only epsilon_svr has a tube", "nu": "only one_class has nu"},
    "epsilon_svr": {"class_weight": "regression has no classes", "nu": "only one_class has nu",
                    "probability": "Platt's sigmoids turn class decision values into probabilities",
                    "calibration": "it chooses the rows of --probability's sigmoids",
                    "bias": "epsilon_svr has its own unregularised offset rho"},
    "one_class": {"optimizer": "one_class's dual has an equality constraint: it trains with the SGD only",
                  "C": "one_class's regularisation is 1 / (nu n_samples): give --nu",
                  "sigma": "one_class's regularisation is sigma = nu: give --nu",
                  "class_weight": "one_class ignores labels", "epsilon": "only epsilon_svr has a tube",
                  "probability": "Platt's sigmoids need class labels",
                  "calibration": "it chooses the rows of --probability's sigmoids",
                  "bias": "one_class has its own unregularised offset rho",
                  "validation": "one_class has no labels to validate against",
                  "validation_every": "one_class has no --validation", "patience": "one_class has no --validation"},
}


def svm_type_params(svm_type):
    """The kernel trainer's parameter table for ``svm_type``: PACKSVM_PARAMS and the type's own,
    without those ``NOT_FOR_SVM_TYPE`` lists."""
    table = {**PACKSVM_PARAMS, "epsilon": SVM_TYPE_PARAMS["epsilon"], "nu": SVM_TYPE_PARAMS["nu"]}
    return {name: param for name, param in table.items() if name not in NOT_FOR_SVM_TYPE[svm_type]}

# The linear solvers under block averaging (BlockAveragedSVC and `train --solver NAME`).
LINEAR_PARAMS = {
    "solver": Param(Rule("choice", choices=LINEAR_SOLVERS), "dcd", "linear solver"),
    "C": Param(positive(), 1.0, "SVM cost (default 1)"),
    "loss": Param(Rule("choice", choices=LOSSES), "l1", "hinge (l1, default) or squared hinge (l2)"),
    "p": Param(real(1.0, 2.0, none=True), None, "alm only: loss power 1 <= p <= 2 (overrides --loss)"),
    "bias": Param(BOOL, True, "a regularised bias, like liblinear -B 1 (default on; --no-bias drops it)"),
    "averaging": Param(Rule("choice", choices=AVERAGING), "iterative",
                       "iterative: rounds warm-started from the average (default); oneshot: average once"),
    "rounds": Param(count(), 100, "most averaging rounds (default 100)"),
    "rounds_tol": Param(positive(), 1e-3,
                        "stop the rounds when the duality gap (dual solvers) or the change of the primal "
                        "objective (primal solvers) is at most this fraction of the objective (default 1e-3)"),
    "features": Param(Rule("text", none=True), None,
                      "COFFIN feature map computed on demand: poly2, hash:BITS (e.g. hash:20), shifts:S "
                      "(virtual shifted images)"),
    "shuffle": Param(BOOL, True, "deal the rows out to the ranks at random before solving (default on)"),
    "seed": Param(SEED, 0, "seed of the random blocks (default 0)"),
    "class_weight": PACKSVM_PARAMS["class_weight"],
}



def numpydoc_parameters(names, table, others):
    """The numpydoc Parameters section of a constructor taking ``names``, in that order: each
    drawn from ``table`` (type and default from its Rule and default, meaning from its help, with
    the command line's flags named as parameters), or from ``others`` {name: (type, meaning)}."""
    lines = ["Parameters", "----------"]
    for name in names:
        if name in others:
            kind, meaning = others[name]
        else:
            param = table[name]
            kind, meaning = f"{_numpydoc_type(param.rule)}, default={param.default!r}", _python_words(param.help, table)
        lines += [f"{name} : {kind}", f"    {meaning}."]
    return "\n".join(lines)


def _numpydoc_type(rule):
    if rule.kind == "choice":
        text = "{" + ", ".join(repr(c) for c in rule.choices) + "}"
    elif rule.kind == "class_weight":
        text = "dict, 'balanced' or str"
    else:
        text = {"real": "float", "int": "int", "bool": "bool", "directory": "str", "text": "str"}[rule.kind]
        if rule.choices:
            text += " or {" + ", ".join(repr(c) for c in rule.choices) + "}"
    return text + (" or None" if rule.none else "")


def _python_words(help_text, table):
    """A command-line help text as the Python API says it: ``--tol-window`` is ``tol_window``,
    ``--no-average`` is ``average=False``; | is escaped for reStructuredText (the kernel formulas)."""
    def parameter(match):
        flag = match.group(1)
        if flag.startswith("no-") and flag[3:].replace("-", "_") in table:
            return f"``{flag[3:].replace('-', '_')}=False``"
        name = flag.replace("-", "_")
        return f"``{name}``" if name in table else f"``--{flag}``"
    text = re.sub(r"--([a-z][a-z0-9-]*)", parameter, help_text).rstrip(".")
    return text.replace("|", "\\|")


def check_params(values, table):
    """Every entry of ``values`` (name -> value) checked against ``table``; returns them normalised."""
    return {name: table[name].rule.check(name, value) for name, value in values.items()}


def check_solver_options(solver, options):
    """``options`` of a linear solver, normalised; unknown names are an error that lists the known."""
    known = LINEAR_SOLVER_ENTRIES[solver].options
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise PPackError(f"solver option {unknown[0]}: not an option of the {solver} solver; "
                         f"expected one of {', '.join(known)}")
    return {name: known[name].check(name, value) for name, value in options.items()}


# model_type -> the estimator class whose ``load(path, comm)`` reads it (filled by each trainer)
MODEL_TYPES = {}


def register_model_type(name, estimator):
    MODEL_TYPES[name] = estimator
