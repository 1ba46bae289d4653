"""
One-class SVM on a 2-D blob
===========================

PackOneClassSVM (Schoelkopf's nu one-class SVM, LIBSVM's ``-s 2``) learns the region where
training data lies, from unlabelled points, and says of new points whether they fall in it.
``nu`` bounds the fraction of training points left outside. Beside it is scikit-learn's
:class:`~sklearn.svm.OneClassSVM` with the same kernel and nu.
"""

# %%
# A blob, new points, and outliers
# --------------------------------
# Training points from a stretched Gaussian blob; new points from the same blob, and
# outliers drawn uniformly over the square around it.
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.svm import OneClassSVM

from ppack import PackOneClassSVM

rng = np.random.default_rng(0)
stretch = np.array([[1.5, 0.6], [0.0, 0.7]])
X_train = rng.normal(size=(1000, 2)) @ stretch
X_new = rng.normal(size=(300, 2)) @ stretch
X_outliers = rng.uniform(-6, 6, size=(60, 2))

nu = 0.1
models = {"ppack PackOneClassSVM": PackOneClassSVM(nu=nu, gamma=0.5, epochs=5, seed=0),
          "scikit-learn OneClassSVM": OneClassSVM(nu=nu, gamma=0.5)}
for name, model in models.items():
    start = time.perf_counter()
    model.fit(X_train)
    print(f"{name}: fit {time.perf_counter() - start:.2f} s")

# %%
# The frontier
# ------------
# Colour is the decision value; the solid line is the frontier (decision value 0), inside
# which ``predict`` gives +1. The titles count, from the run, the training points left
# outside (at most about nu = 10%), the new points of the blob kept inside and the
# outliers caught outside.
x0, x1 = np.meshgrid(np.linspace(-6, 6, 200), np.linspace(-6, 6, 200))
grid = np.column_stack([x0.ravel(), x1.ravel()])

fig, axes = plt.subplots(1, 2, figsize=(11, 5), sharey=True, layout="constrained")
for ax, (name, model) in zip(axes, models.items()):
    decision = model.decision_function(grid).reshape(x0.shape)
    ax.contourf(x0, x1, decision, levels=np.linspace(decision.min(), decision.max(), 15), cmap="Blues_r")
    ax.contour(x0, x1, decision, levels=[0], colors="darkred", linewidths=2)
    ax.scatter(*X_train.T, s=6, color="white", edgecolors="k", linewidths=0.3, label="training")
    ax.scatter(*X_new.T, s=14, color="gold", edgecolors="k", linewidths=0.3, label="new, from the blob")
    ax.scatter(*X_outliers.T, s=18, color="tab:red", edgecolors="k", linewidths=0.3, label="outliers")
    outside = np.mean(model.predict(X_train) == -1)
    kept = np.mean(model.predict(X_new) == 1)
    caught = np.mean(model.predict(X_outliers) == -1)
    ax.set_title(f"{name}\ntraining outside {outside:.1%}, new kept {kept:.1%}, outliers caught {caught:.1%}",
                 fontsize=10)
    ax.set_xlabel("$x_0$")
    print(f"{name}: training points outside {outside:.1%} (nu = {nu}), new points kept {kept:.1%}, "
          f"outliers caught {caught:.1%}")
axes[0].set_ylabel("$x_1$")
axes[0].legend(loc="lower left", fontsize=8)
plt.show()
