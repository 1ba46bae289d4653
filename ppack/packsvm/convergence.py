"""Whether a run stopped short of its optimum, from what training already has (no pass of its own).

Primal SGD needs of the order of C m / epsilon steps: a large C (a small sigma) with few
epochs stops far from the optimum, and says nothing unless asked. Three figures, all
replicated or reduced on every rank alike, so that every rank reaches the same verdict:

- ``sigma_T``: sigma times the iterations done (= epochs / C): the SGD bound on the
  objective's distance to its optimum falls as 1 / (sigma T);
- ``loss_change``: the relative change between the mean loss of the last two windows of
  sampled rows (``state.LossWindows``, each loss taken before its row's step), a loss still
  falling at the end;
- ``late_fall``: the relative fall of the mean loss from the run's third quarter to its last
  (the last four of the run's loss curve, ``state.SolverState.loss_curve``: eight windows
  of about T / 8 sampled rows), a loss still falling late in the run, whatever its length;
- ``loss_ratio``: the returned model's loss on the objective's sample of training rows
  (``objective.primal_objective``) over the zero model's on the same rows (w = 0: for
  epsilon-SVR the constant prediction -rho).
"""
import numpy as np


def figures(svm_type, sigma, iterations, windows, objective, curve=None):
    """The diagnostic's figures (a dict, None where a figure is not known). svm_type: the
    problem (``registry.SVM_TYPES``); sigma: the regularisation weight (a float, or (Q,) per
    column: the smallest counts); iterations: T done; windows: the run's --tol
    ``state.LossWindows``; objective: ``training_["objective"]``, or None; curve: the run's
    loss curve (``state.SolverState.loss_curve``), or None."""
    means = windows.means
    change = (means[1] - means[0]) / max(abs(means[0]), 1e-12) if len(means) == 2 else None
    points = [] if curve is None else curve.means
    late_fall = None
    if len(points) >= 4:
        third, last = (points[-4] + points[-3]) / 2, (points[-2] + points[-1]) / 2
        late_fall = (third - last) / max(abs(third), 1e-12)
    ratio = None
    if objective is not None and objective.get("zero_term") is not None:
        zero = float(np.mean(objective["zero_term"]))
        ratio = float(np.mean(objective["hinge_term"])) / zero if zero > 0 else None
    return {"svm_type": svm_type, "sigma_T": float(np.min(sigma)) * int(iterations), "loss_change": change,
            "window_means": means, "loss_curve": points, "late_fall": late_fall, "loss_ratio": ratio}


# The verdict's thresholds, calibrated on bench/convergence.py's table (bench/results/convergence.json): below MIN_SIGMA_T, or with the loss still falling by more than
# MAX_LOSS_FALL between the last two windows, or with the model's sampled loss above
# MAX_LOSS_RATIO times the zero model's (epsilon-SVR: above the constant model's, whose
# loss is in the targets' units; a hinge loss 3 times the zero model's still classified
# well in the table), the run is taken as stopped short. Of the coarse grid of thresholds
# tried, these warned on the most cells 2 points (20%) worse than their reference (50 of 62)
# while silent on at least 90% of those within 0.5 points (48 of 53); warning on all 62
# took sigma T < 1, silent on only 31 of the 53.
MIN_SIGMA_T = 0.01
MAX_LOSS_FALL = 0.4
MAX_LOSS_RATIO = {"c_svc": 3.0, "one_class": 3.0, "epsilon_svr": 1.0}


def verdict(figures):
    """None when ``figures`` (``figures()``'s) show no sign of a run stopped short; else one
    line saying what was seen and what to change."""
    seen = []
    if figures["sigma_T"] < MIN_SIGMA_T:
        seen.append(f"sigma T = epochs / C = {figures['sigma_T']:.3g}, below {MIN_SIGMA_T:g}")
    change = figures["loss_change"]
    if change is not None and change < -MAX_LOSS_FALL:
        seen.append(f"the mean loss still fell {-change:.0%} between the last two windows of sampled rows")
    ratio, most = figures["loss_ratio"], MAX_LOSS_RATIO[figures["svm_type"]]
    if ratio is not None and ratio > most:
        seen.append(f"the model's loss on its training rows is {ratio:.3g} times the zero model's")
    if not seen:
        return None
    return ("training stopped short of convergence (" + "; ".join(seen) + "): train longer (more epochs), or "
            "use a smaller C (a larger sigma); and scale the features (unscaled features slow every SVM solver)")


# epochs="auto": runs of AUTO_EPOCHS epochs in turn, each continuing the last, the first to
# compare a model with (half an epoch), then from one epoch on until the verdict is satisfied
# and the predictions on the objective's sample rows changed by at most MAX_STAGE_CHANGE since
# the stage before (a run that stops short keeps moving: ``stage_change``), or the last
AUTO_EPOCHS = (0.5,) + tuple(2.0 ** k for k in range(8))  # 0.5, 1, 2, ..., 128
MAX_STAGE_CHANGE = {"c_svc": 0.014, "one_class": 0.014, "epsilon_svr": 0.19}


def is_auto(epochs, iterations):
    """Whether a run's length is epochs="auto" (a number of ``iterations``, when given, decides it)."""
    return epochs == "auto" and iterations is None


def auto_stages(m):
    """epochs="auto": each stage's iterations (AUTO_EPOCHS on ``m`` training rows)."""
    return [max(1, round(epochs * m)) for epochs in AUTO_EPOCHS]


def auto_iterations(m, done=0):
    """epochs="auto": the iterations of the first stage that reaches ``done`` iterations (the last
    stage's when none does)."""
    stages = auto_stages(m)
    return next((T for T in stages if T >= done), stages[-1])


def next_auto_iterations(T, m):
    """epochs="auto": the iterations of the stage after one of T iterations (None after the last)."""
    return next((later for later in auto_stages(m) if later > T), None)


def stage_outputs(svm_type, f, rho):
    """What a model predicts for rows of decision values f (K, n) (``<w, phi(x)>``, each column
    scaled) and offset rho: classes (c_svc: the sign, or the largest of K columns; one_class:
    inside or out) or epsilon_svr's values (n,)."""
    if svm_type == "epsilon_svr":
        return f[0] - rho
    if svm_type == "one_class":
        return f[0] > rho
    return f[0] > 0 if len(f) == 1 else np.argmax(f, axis=0)


def stage_change(svm_type, before, after, y):
    """How far a stage's predictions moved from the stage before's (``stage_outputs`` on the same
    rows): the share of rows whose class changed, or (epsilon_svr) the RMS change over the
    standard deviation of the rows' targets ``y``."""
    if svm_type == "epsilon_svr":
        return float(np.sqrt(np.mean((after - before) ** 2)) / max(float(np.std(y)), 1e-300))
    return float(np.mean(after != before))


def moved(svm_type, change):
    """``stage_change``'s figure in words."""
    if svm_type == "epsilon_svr":
        return (f"the predictions on sampled training rows moved by {change:.3g} times the targets' standard "
                "deviation (RMS)")
    return f"{change:.1%} of sampled training rows changed class"


def unsettled(svm_type, advice, change, epochs):
    """The advice of an epochs="auto" run that ended at its last stage (``epochs``) unsettled: the
    verdict's ``advice`` (or None), and the change of its predictions since the stage before."""
    cap = f"epochs auto stops at {epochs:g} epochs: give a number"
    if advice is not None:
        return f"{advice} ({cap})"
    return (f"training had not settled after {epochs:g} epochs ({moved(svm_type, change)} since the stage before; "
            f"{cap}), or use a smaller C (a larger sigma); and scale the features (unscaled features slow every "
            "SVM solver)")


def stage_line(svm_type, stage, epochs):
    """One line on an epochs="auto" ``stage`` (a ``training_["convergence"]["stages"]`` entry)
    that trains on to ``epochs``: why."""
    done = f"{stage['epochs']:g} epochs"
    if stage["advice"] is not None and stage["epochs"] >= 1:
        why = f"stopped short after {done}"
    elif stage["change"] is not None:
        why = f"still moving after {done} ({moved(svm_type, stage['change'])} since the stage before)"
    else:
        why = f"{done} to compare with"
    return f"epochs auto: {why}; training on to {epochs:g}"
