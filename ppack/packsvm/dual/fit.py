"""What ``PackSVC.fit`` asks of the dual: which optimizer a fit uses, the options it refuses,
its epoch cap and tolerance, and the verdict its convergence report gives."""
import math

from ...errors import PPackError
from ...registry import PACKSVM_PARAMS

# epochs="auto" under the dual: a cap this high, the stopping test ending the run sooner
AUTO_EPOCHS = 100
# the dual's default tolerance on the KKT gap (LIBLINEAR's for its dual solvers, -e 0.1)
DEFAULT_TOL = 0.1
# a column whose certified relative duality gap is at most this has converged, whatever its KKT
# gap: its objective is within 1% of the optimum's (the KKT test can lag far behind that, e.g.
# breast cancer at C = 1 and 5 epochs: KKT gap 0.19, relative gap 0.002)
CERTIFIED_GAP = 1e-2
# what ``optimizer="auto"`` compares: the SGD's bound on its distance to the optimum falls as
# 1 / (sigma T) = C m / T = C / epochs; where that is above AUTO_BOUND, the dual. Measured on 2
# ranks: at C / epochs = 10 (a9a, C = 10, 1 epoch) the SGD had 84.68% and the dual 76.81%; at
# C / epochs = 1 (a9a and ijcnn1, C = 1) the SGD reached LIBSVM's accuracy first
AUTO_BOUND = 10.0

# the SGD's options without a meaning for the dual, refused at any value but their default: {name: why}
SGD_ONLY = {
    "step": "the dual's step is exact on each coordinate",
    "average": "the dual's iterate is the model (--no-average has nothing to turn off)",
    "sampling": "the dual visits every active row once per epoch",
    "tol_window": "the dual stops by its KKT gap, not by loss windows",
    "pipeline": "the dual's packs run unpipelined (shrinking decides each epoch's rows from the last)",
    "placement": "the dual places new support vectors by count",
    "device": "the dual's kernel sums run on the CPU",
    "validation": "the dual stops by its KKT gap",
    "validation_every": "the dual has no --validation",
}


def chosen_optimizer(optimizer, C, epochs):
    """The optimizer a fit uses: ``optimizer`` itself, or for "auto" the dual where the SGD's
    bound C / epochs exceeds ``AUTO_BOUND`` (epochs "auto": the SGD's first stage, half an epoch)."""
    if optimizer != "auto":
        return optimizer
    epochs = 0.5 if epochs == "auto" else float(epochs)
    return "dual" if C / epochs > AUTO_BOUND else "sgd"


def refuse_sgd_options(estimator, checkpoint=None, grid_of=None):
    """Raise PPackError, in one line, for an SGD-only option given to a dual fit (its value
    other than the default; pipeline "auto" and "off" pass: the dual runs unpipelined), or, for
    a grid pass (``grid_of``: its svm_type), a checkpoint or an epsilon_svr grid (one model's
    dual fit has both)."""
    for name, why in SGD_ONLY.items():
        value, default = getattr(estimator, name, None), PACKSVM_PARAMS[name].default
        if value == default or (name == "pipeline" and value in ("auto", "off")):
            continue
        raise PPackError(f"{name}={value!r} is an SGD option and the optimizer is dual: {why}; leave {name} "
                         f"at {default!r} or use optimizer='sgd'")
    if grid_of == "epsilon_svr":
        raise PPackError("optimizer dual: an epsilon_svr grid pass trains with the SGD only (one epsilon_svr model "
                         "trains with the dual); search with optimizer='sgd'")
    if checkpoint is not None:
        raise PPackError("checkpoint: a grid pass under the dual optimizer does not write checkpoints yet; "
                         "search without --checkpoint, or use optimizer='sgd'")


def epoch_cap(epochs, iterations, m):
    """The dual's cap in epochs: ``epochs`` rounded up, ``iterations`` over the m rows rounded up,
    or ``AUTO_EPOCHS`` for "auto"."""
    if iterations is not None:
        return max(1, math.ceil(int(iterations) / m))
    if epochs == "auto":
        return AUTO_EPOCHS
    return max(1, math.ceil(float(epochs) - 1e-9))


def advice(report):
    """The convergence warning's text for a dual run's ``report`` (``solver.convergence_report``),
    or None when every column met the tolerance."""
    if report["converged"]:
        return None
    gap = report["relative_duality_gap"]
    certified = "" if gap is None else f", relative duality gap {gap:.3g}"
    # a gap within tol on the shrunk rows still needs its epoch over every row before it stops
    where = "above" if report["kkt_gap"] > report["tol"] else \
        "within, on the shrunk rows before their check over every row,"
    return (f"the dual optimizer stopped at its cap of {report['epochs']} epochs with a KKT gap of "
            f"{report['kkt_gap']:.3g} {where} tol={report['tol']:g}{certified}: give more epochs (epochs='auto' "
            f"allows {AUTO_EPOCHS}), or a larger tol")
