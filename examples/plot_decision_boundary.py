"""
Decision boundary beside scikit-learn's SVC
===========================================

PackSVC and scikit-learn's :class:`~sklearn.svm.SVC` fitted to the same two-moons data with
the same rbf kernel and the same C, and their decision functions drawn over the plane.
PackSVC minimises the primal objective by stochastic sub-gradient descent (P-packSVM);
SVC solves the dual exactly with LIBSVM. With a few epochs the two boundaries nearly
coincide.
"""

# %%
# Data and the two models
# -----------------------
# Two interleaved half-moons with some noise, split into training and test points.
# Both models get ``gamma=2`` and ``C=10``. PackSVC has no separate intercept (its
# objective is the one of the P-packSVM paper), SVC has one.
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_moons
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

from ppack import PackSVC

X, y = make_moons(n_samples=600, noise=0.25, random_state=0)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.5, random_state=0)

models = {"ppack PackSVC": PackSVC(kernel="rbf", gamma=2.0, C=10.0, epochs=10, seed=0),
          "scikit-learn SVC": SVC(kernel="rbf", gamma=2.0, C=10.0)}
seconds = {}
for name, model in models.items():
    start = time.perf_counter()
    model.fit(X_train, y_train)
    seconds[name] = time.perf_counter() - start
    print(f"{name}: test accuracy {model.score(X_test, y_test):.3f}, fit {seconds[name]:.2f} s")

# %%
# The decision functions
# ----------------------
# Colour shows the decision value on a grid over the plane; the solid line is the
# boundary (decision value 0) and the dashed lines the margins (+1 and -1); the points
# are the training points.
x0, x1 = np.meshgrid(np.linspace(-1.6, 2.6, 200), np.linspace(-1.2, 1.7, 150))
grid = np.column_stack([x0.ravel(), x1.ravel()])

fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True, layout="constrained")
decisions = {}
for ax, (name, model) in zip(axes, models.items()):
    decision = model.decision_function(grid).reshape(x0.shape)
    decisions[name] = decision
    limit = np.abs(decision).max()
    ax.contourf(x0, x1, decision, levels=20, cmap="RdBu", vmin=-limit, vmax=limit, alpha=0.8)
    ax.contour(x0, x1, decision, levels=[-1, 0, 1], colors="k", linestyles=["--", "-", "--"], linewidths=1)
    ax.scatter(*X_train.T, c=y_train, cmap="RdBu", edgecolors="k", linewidths=0.5, s=18)
    ax.set_title(f"{name}\ntest accuracy {model.score(X_test, y_test):.3f}, "
                 f"{model.n_support_ if np.isscalar(model.n_support_) else model.n_support_.sum()} support vectors")
    ax.set_xlabel("$x_0$")
axes[0].set_ylabel("$x_1$")
plt.show()

# %%
# How much they agree
# -------------------
# The fraction of the grid on which the two models predict the same class, and of the
# test points.
same_side = np.mean(np.sign(decisions["ppack PackSVC"]) == np.sign(decisions["scikit-learn SVC"]))
same_test = np.mean(models["ppack PackSVC"].predict(X_test) == models["scikit-learn SVC"].predict(X_test))
print(f"same class on {same_side:.1%} of the grid and {same_test:.1%} of the test points")
