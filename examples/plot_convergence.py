"""
Epochs, C and the convergence warning
=====================================

ppack trains by stochastic gradient steps on the primal problem, T = epochs x m of them.
The larger C is, the more steps it needs: the optimisation error falls as 1 / (sigma T),
and sigma T = epochs / C. When a run stops far short, ppack says so with a
:class:`~sklearn.exceptions.ConvergenceWarning` and sets ``converged_`` to False, as
scikit-learn's and LIBSVM's solvers do when they stop on an iteration limit. Here,
epsilon-SVR on scikit-learn's diabetes data (442 patients, 10 features, a disease
progression score from 25 to 346), at C = 1, 100 and 10,000 and 1 to 50 epochs, beside
scikit-learn's :class:`~sklearn.svm.SVR` (LIBSVM) at the same settings.
"""

# %%
# The runs
# --------
# Two thirds of the rows train, the rest test. The features are scaled to zero mean and
# unit variance (scikit-learn ships them scaled to unit norm instead, which would make
# gamma = 0.1 see every pair of rows as alike).
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVR

from ppack import PackSVR

X, y = load_diabetes(return_X_y=True)
order = np.random.default_rng(0).permutation(len(y))
train, test = order[: 2 * len(y) // 3], order[2 * len(y) // 3:]
scaler = StandardScaler().fit(X[train])
X_train, X_test = scaler.transform(X[train]), scaler.transform(X[test])
y_train, y_test = y[train], y[test]


def rmse(model):
    return float(np.sqrt(np.mean((model.predict(X_test) - y_test) ** 2)))


Cs, epochs = (1.0, 100.0, 10000.0), (1, 2, 5, 10, 20, 50)
results, curves = {}, {}
for C in Cs:
    reference = SVR(C=C, gamma=0.1, epsilon=0.1).fit(X_train, y_train)
    runs = []
    for E in epochs:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            model = PackSVR(C=C, gamma=0.1, epsilon=0.1, epochs=E, seed=0).fit(X_train, y_train)
        runs.append((E, rmse(model), model.converged_))
        curves[C, E] = model.training_["convergence"]["loss_curve"]
        if caught:
            print(f"C={C:g}, {E} epochs: {caught[0].message}")
    results[C] = (rmse(reference), runs)
    print(f"C={C:g}: LIBSVM (scikit-learn SVR) test RMSE {rmse(reference):.1f}; ppack "
          + ", ".join(f"{E} epochs {r:.1f}{'' if ok else ' (warned)'}" for E, r, ok in runs))
print(f"the test targets' standard deviation: {y_test.std():.1f}")

# %%
# Test error against epochs
# -------------------------
# Each line is one C; hollow markers are the runs that warned. At C = 1 one epoch is
# enough and nothing warns. At C = 10,000 the first runs predict far worse than the targets'
# mean (the dotted line), and they warn; more epochs bring them down to LIBSVM's error (the
# dashes). The warning errs on the careful side: it keeps warning at 20 and 50 epochs, whose
# errors already match LIBSVM's, because sigma T = epochs / C is still below 0.01, and at
# C = 100 it may warn where the loss of the last sampled rows was still falling. It is a
# guide, not a proof: on the calibration table of ``bench/convergence.py`` it caught 50 of the 62
# runs that were 20% (or 2 points) worse than a 20 times longer run, and it stayed silent on
# 48 of the 53 that were within 5% (half a point).
fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
for C, color in zip(Cs, ("tab:green", "tab:blue", "tab:red")):
    reference, runs = results[C]
    E, error, ok = (np.array(column) for column in zip(*runs))
    ax.plot(E, error, color=color, label=f"ppack, C = {C:g}")
    ax.scatter(E[ok], error[ok], color=color, zorder=3)
    ax.scatter(E[~ok], error[~ok], facecolors="white", edgecolors=color, zorder=3, label=f"warned (C = {C:g})")
    ax.axhline(reference, color=color, linestyle="--", linewidth=1)
ax.axhline(y_test.std(), color="0.4", linestyle=":", label="predicting the mean")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("epochs")
ax.set_ylabel("test RMSE")
ax.set_title("epsilon-SVR on diabetes: dashes are LIBSVM at the same C", fontsize=10)
ax.legend(fontsize=8, ncol=2)
plt.show()

# %%
# The loss curve
# --------------
# Every run keeps its loss curve, ``training_["convergence"]["loss_curve"]`` (also in
# ``train``'s metrics JSON): the mean loss of the sampled rows, each taken before its row's
# step, over eight windows of about T / 8 rows (whole packs of 100 rows here, so the short
# runs have fewer points); ``late_fall`` beside it is the fall from the run's third quarter
# to its last. Here C = 10,000: every curve is still falling at its end, at 5 epochs six-fold
# over the run, at 50 epochs by about half from the third quarter to the last, although the
# 50-epoch model already tests better than LIBSVM's. The loss of a large-C problem keeps
# falling long after its predictions are good, and on noisy data it can settle while the test
# error still improves, so the curve is reported for you to read, not judged
# (``bench/convergence.py``).
fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
for E, color in zip((5, 20, 50), ("tab:orange", "tab:purple", "tab:brown")):
    curve = curves[10000.0, E]
    ax.plot(np.arange(1, len(curve) + 1) / len(curve), curve, marker="o", color=color, label=f"{E} epochs")
ax.set_yscale("log")
ax.set_xlabel("fraction of the run")
ax.set_ylabel("mean epsilon-insensitive loss of the sampled rows")
ax.set_title("PackSVR on diabetes, C = 10,000: the loss curve", fontsize=10)
ax.legend(fontsize=8)
plt.show()

# %%
# Letting the run decide: ``epochs="auto"``
# -----------------------------------------
# ``epochs="auto"`` (``train --epochs auto``) trains half an epoch, then continues the same run
# to one epoch, two, four and so on, until the verdict above is satisfied and the predictions on
# sampled training rows moved little since the stage before, at most 128 epochs;
# ``training_["convergence"]["stages"]`` lists each stage's epochs, verdict and change. At C = 1
# it stops at one epoch (the default's model). At C = 100 one epoch satisfies the verdict while
# testing well above LIBSVM's error, but its predictions still move, so auto trains on and
# reaches LIBSVM's error. At C = 10,000 it inherits the verdict's caution and trains on until
# sigma T reaches 0.01. Where neither the verdict nor the change sees a run stop short, auto
# stops too: when the accuracy matters, compare with a longer run, or use ``validation``.
for C in Cs:
    model = PackSVR(C=C, gamma=0.1, epsilon=0.1, epochs="auto", seed=0).fit(X_train, y_train)
    stages = model.training_["convergence"]["stages"]
    print(f"C={C:g}: epochs auto stopped after {stages[-1]['epochs']:g} epochs, in {len(stages)} stage(s): test "
          f"RMSE {rmse(model):.1f} (LIBSVM {results[C][0]:.1f}), converged_ {model.converged_}")
