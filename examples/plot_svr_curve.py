"""
SVR on a curve
==============

PackSVR (epsilon-SVR, LIBSVM's ``-s 3``) fitted to noisy samples of a one-dimensional
curve, beside scikit-learn's :class:`~sklearn.svm.SVR` with the same kernel, C and
epsilon. Residuals within the tube of half-width epsilon cost nothing; only the points
outside it pull on the fit.
"""

# %%
# A noisy curve
# -------------
# 400 points of :math:`x \sin(x)` on [0, 10] with Gaussian noise of standard deviation 0.5.
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import mean_squared_error
from sklearn.svm import SVR

from ppack import PackSVR

rng = np.random.default_rng(0)
X = np.sort(rng.uniform(0, 10, size=(400, 1)), axis=0)
truth = X[:, 0] * np.sin(X[:, 0])
y = truth + rng.normal(scale=0.5, size=len(X))

epsilon = 0.5
models = {"ppack PackSVR": PackSVR(kernel="rbf", gamma=0.5, C=100.0, epsilon=epsilon, epochs=20, seed=0),
          "scikit-learn SVR": SVR(kernel="rbf", gamma=0.5, C=100.0, epsilon=epsilon)}
for name, model in models.items():
    start = time.perf_counter()
    model.fit(X, y)
    print(f"{name}: fit {time.perf_counter() - start:.2f} s, R^2 on the noisy samples {model.score(X, y):.3f}")

# %%
# The fits and the tube
# ---------------------
# Each panel shows the samples, the curve they were drawn from, the model's prediction and
# its epsilon tube. The root-mean-square error against the noiseless curve, on a fine grid,
# is in the title.
grid = np.linspace(0, 10, 500).reshape(-1, 1)
grid_truth = grid[:, 0] * np.sin(grid[:, 0])

fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True, layout="constrained")
for ax, (name, model) in zip(axes, models.items()):
    prediction = model.predict(grid)
    rmse = mean_squared_error(grid_truth, prediction) ** 0.5
    outside = np.abs(y - model.predict(X)) > epsilon
    ax.scatter(X[~outside, 0], y[~outside], s=8, color="0.6", label="samples in the tube")
    ax.scatter(X[outside, 0], y[outside], s=10, color="tab:red", label="samples outside it")
    ax.plot(grid, grid_truth, color="k", linestyle=":", label=r"$x \sin x$")
    ax.plot(grid, prediction, color="tab:blue", label="prediction")
    ax.fill_between(grid[:, 0], prediction - epsilon, prediction + epsilon, color="tab:blue", alpha=0.15,
                    label=f"tube, epsilon = {epsilon}")
    ax.set_title(f"{name}\nRMSE against the curve {rmse:.3f}, {outside.sum()} of {len(X)} samples outside", fontsize=10)
    ax.set_xlabel("x")
    print(f"{name}: RMSE against the noiseless curve {rmse:.3f}")
axes[0].set_ylabel("y")
axes[0].legend(loc="lower left", fontsize=8)
plt.show()
