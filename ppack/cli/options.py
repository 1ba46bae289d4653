"""The training options of `train` and `plan`, built from the registry's parameter tables.

Every option defaults to None on the command line, so a command knows what the user
gave: the trainer's own defaults (the registry's) apply to the rest, and an option that
does not apply to the chosen trainer is an error instead of being ignored.
"""
import argparse
import math
import re

from ..errors import PPackError
from ..registry import (EXCLUSIVE, KERNEL_SOLVER, LINEAR_PARAMS, LINEAR_SOLVERS, NOT_FOR_SVM_TYPE, PACKSVM_PARAMS,
                        SVM_TYPE_PARAMS)

# the kernel trainer's parameters, each under --NAME; C, seed and class_weight serve both trainers
PACKSVM_FLAGS = {name: "--" + name.replace("_", "-") for name in {**PACKSVM_PARAMS, **SVM_TYPE_PARAMS}}
PACKSVM_FLAGS["average"] = "--no-average"  # on by default: the flag turns it off
SHARED = ("C", "seed", "class_weight")
KERNEL_OPTIONS = ("kernel", "gamma", "degree", "coef0", "bias")
# the linear trainer's own parameters and their flags
LINEAR_FLAGS = {"loss": "--loss", "p": "--p", "averaging": "--averaging", "rounds": "--rounds",
                "rounds_tol": "--rounds-tol", "features": "--features", "bias": "--no-bias"}
# options of `train` that only the kernel trainer reads: its checkpoints, and --delay (tests, benchmarks)
CHECKPOINT_FLAGS = {"checkpoint": "--checkpoint", "checkpoint_every": "--checkpoint-every", "resume": "--resume"}
KERNEL_RUN_FLAGS = {**CHECKPOINT_FLAGS, "delay": "--delay"}
# the flags the trainers' error messages name (``errors.given``) while a command runs
PARAMETER_FLAGS = {**PACKSVM_FLAGS, **CHECKPOINT_FLAGS}


# what a flag that turns a default off does, said first (the registry's help describes the parameter)
NEGATED_HELP = {
    "--no-average": "keep the last iterate w_T as the model instead of the averaged iterate "
                    "sum_t a_t w_t / sum_t a_t, a_t = t (t+1) (t+2), which is the default",
    "--no-bias": "train without a bias term (liblinear -B -1); by default the linear solvers learn a "
                 "regularised bias, like liblinear -B 1",
}


def _argument(group, flag, dest, param, negate=False):
    rule = param.rule
    kwargs = {"dest": dest, "default": None, "help": NEGATED_HELP[flag] if negate else param.help}
    if rule.kind == "bool":
        kwargs.update(action="store_const", const=not negate)
    elif rule.kind == "choice":
        kwargs.update(choices=rule.choices)
    elif rule.kind in ("int", "real"):
        number = int if rule.kind == "int" else float
        kwargs.update(type=_number_or(number, rule.choices) if rule.choices else number,
                      metavar=flag.lstrip("-").upper().replace("-", "_"))
    else:
        kwargs.update(metavar=flag.lstrip("-").upper().replace("-", "_"))
    group.add_argument(flag, **kwargs)


def _number_or(number, words):
    """An option's type: a number, or one of ``words`` (--gamma scale)."""
    def parse(text):
        if text in words:
            return text
        try:
            return number(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number or one of {', '.join(words)}, got {text!r}") from None
    return parse


def add_packsvm_options(p, skip=()):
    """The kernel trainer's options, in groups; the registry's exclusive pairs (--C or
    --sigma, --epochs or --iterations) are mutually exclusive; ``skip``: parameters the
    command declares its own way (tune's lists of C, nu and gamma)."""
    kernel = p.add_argument_group("kernel (packsvm)")
    other = p.add_argument_group("packsvm (C = 1 / (n_samples * sigma); T = epochs * n_samples; "
                                 "--C and --seed serve the linear solvers too)")
    group_of = {}
    for pair in EXCLUSIVE:
        kept = [name for name in pair if name not in skip]
        if len(kept) > 1:  # argparse cannot format the usage of an emptied group
            exclusive = other.add_mutually_exclusive_group()
            group_of.update(dict.fromkeys(kept, exclusive))
    for name, param in PACKSVM_PARAMS.items():
        if name in skip:
            continue
        group = group_of.get(name, kernel if name in KERNEL_OPTIONS else other)
        _argument(group, PACKSVM_FLAGS[name], name, param, negate=PACKSVM_FLAGS[name].startswith("--no-"))
    problem = p.add_argument_group("problem (packsvm): LIBSVM's -s 0, 3 and 2 with their -p and -n")
    for name, param in SVM_TYPE_PARAMS.items():
        if name not in skip:
            _argument(problem, PACKSVM_FLAGS[name], name, param)


def add_linear_options(p):
    lin = p.add_argument_group("linear solvers (--solver other than packsvm)")
    for name, flag in LINEAR_FLAGS.items():
        _argument(lin, flag, "linear_" + name, LINEAR_PARAMS[name], negate=(flag == "--no-bias"))
    lin.add_argument("--solver-option", action="append", default=None, metavar="NAME=VALUE",
                     help="solver option, e.g. tol=0.01, max_epochs=50, cache_rows=5000 (repeatable)")


def packsvm_params(args):
    """The kernel trainer's parameters the user gave, by name (--svm-type's aside: it picks the estimator)."""
    names = [*PACKSVM_PARAMS, "epsilon", "nu"]
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def svm_type_of(args):
    """--svm-type (default c_svc), after refusing the given options it does not read (a one-line
    PPackError naming the option, the type and why)."""
    svm_type = SVM_TYPE_PARAMS["svm_type"].default if args.svm_type is None else args.svm_type
    for name, why in NOT_FOR_SVM_TYPE[svm_type].items():
        if getattr(args, name, None) is not None:
            raise PPackError(f"{PACKSVM_FLAGS[name]}: does not apply to --svm-type {svm_type} ({why})",
                             collective=True)
    return svm_type


def linear_params(args):
    """The linear trainer's parameters the user gave (with --solver, --C, --seed), by name."""
    given = {name: getattr(args, "linear_" + name) for name in LINEAR_FLAGS
             if getattr(args, "linear_" + name) is not None}
    given.update({name: getattr(args, name) for name in SHARED if getattr(args, name) is not None})
    given["solver"] = args.solver
    given["solver_options"] = solver_options(args.solver_option or [])
    return given


def add_grid_options(p, default_folds):
    """tune's grid: --C and --gamma as comma-separated lists, and --folds."""
    p.add_argument("--C", dest="C", type=comma_values, default=None, metavar="C1,C2,...",
                   help="the C values of the grid, comma-separated (default: 1)")
    p.add_argument("--gamma", dest="gamma", type=comma_values, default=None, metavar="G1,G2,...",
                   help="the kernel widths of the grid, comma-separated (default: the trainer's, 1 / n_features); "
                        "all in one training pass, sharing each tile's dot products")
    p.add_argument("--folds", type=int, default=None, metavar="K",
                   help=f"cross-validation folds (default {default_folds}): row i's fold is its place in a "
                        "permutation drawn from --seed, modulo K, the same on every rank (not stratified)")


def comma_values(text):
    """'0.1,1,10' -> [0.1, 1.0, 10.0] (positive, finite)."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values or any(not (v > 0 and math.isfinite(v)) for v in values):
        raise argparse.ArgumentTypeError(f"expected positive finite numbers, got {text!r}")
    return values


def add_checkpoint_options(p, title="checkpoints (packsvm)"):
    """--checkpoint, --checkpoint-every and --resume (``CHECKPOINT_FLAGS``), as one group."""
    ck = p.add_argument_group(title)
    ck.add_argument("--checkpoint",
                    help="state file: written atomically every --checkpoint-every, and on SIGTERM or Ctrl-C")
    ck.add_argument("--checkpoint-every", type=_every, default=None, metavar="N[s|p]",
                    help="seconds (600 or 600s) or packs (50p) between checkpoints "
                         "(default: only on SIGTERM or Ctrl-C)")
    ck.add_argument("--resume", action="store_true", default=None,  # None: not given
                    help="continue from --checkpoint if it holds a complete checkpoint (else start afresh)")


def checkpoint_every(args):
    """--checkpoint-every as the fit's keywords: checkpoint_every_seconds and _packs (None or a number)."""
    every = dict([args.checkpoint_every]) if args.checkpoint_every else {}
    return {"checkpoint_every_seconds": every.get("seconds"), "checkpoint_every_packs": every.get("packs")}


def refuse_checkpoint_options_without_a_path(args):
    """--checkpoint-every and --resume mean nothing without --checkpoint: a PPackError."""
    if (args.checkpoint_every or args.resume) and not args.checkpoint:
        raise PPackError("--checkpoint-every and --resume need --checkpoint PATH", collective=True)


def _every(text):
    """'600' or '600s' -> ('seconds', 600.0); '50p' or '50packs' -> ('packs', 50)."""
    match = re.fullmatch(r"(\d+(?:\.\d*)?)(s|p|packs)?", text.strip().lower())
    if match and float(match[1]) > 0:
        if match[2] in ("p", "packs") and match[1].isdigit():
            return "packs", int(match[1])
        if match[2] in (None, "s"):
            return "seconds", float(match[1])
    raise argparse.ArgumentTypeError(f"expected seconds (600, 600s) or packs (50p), got {text!r}")


def refuse_other_trainers_options(args):
    """PPackError for the first given option that the chosen --solver does not read."""
    if args.solver == KERNEL_SOLVER:
        foreign = {**{"linear_" + n: f for n, f in LINEAR_FLAGS.items()}, "solver_option": "--solver-option"}
        owner = f"the linear solvers (--solver {'|'.join(LINEAR_SOLVERS)})"
    else:
        foreign = {**{n: f for n, f in PACKSVM_FLAGS.items() if n not in SHARED}, **KERNEL_RUN_FLAGS}
        owner = f"the kernel trainer (--solver {KERNEL_SOLVER})"
    for dest, flag in foreign.items():
        if getattr(args, dest, None) is not None:  # given, whatever its value: --no-bias stores False, --coef0 0 zero
            raise PPackError(f"{flag}: applies to {owner}, not to --solver {args.solver}", collective=True)


def solver_options(items):
    """NAME=VALUE strings to a dict of ints, floats or strings (the solver's rules check them)."""
    options = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise PPackError(f"--solver-option: expected NAME=VALUE, got {item!r}", collective=True)
        for kind in (int, float):
            try:
                options[name] = kind(value)
                break
            except ValueError:
                continue
        else:
            options[name] = None if value.lower() == "none" else value
    return options

