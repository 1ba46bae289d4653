"""
Linear SVMs: ppack's solvers beside LIBLINEAR
=============================================

Besides the kernel trainer, ppack has linear SVM solvers (``BlockAveragedSVC``): dual
coordinate descent (``dcd``, LIBLINEAR's method), the SVM-ALM primal solver (``alm``),
shrinking dual ascent (``llsvm``), StreamSVM's cached dual loops (``stream``) and Pegasos.
Under ``mpiexec`` each rank solves its own block of rows and the models are averaged
(CoCoA rounds for the dual solvers, until the duality gap is small); in one process, as
here, the block is the whole problem. On a9a (shipped with ppack), each solver beside
scikit-learn's :class:`~sklearn.svm.LinearSVC` (LIBLINEAR) on the same objective:
1/2 (||w||^2 + b^2) + C sum of hinge losses, C = 0.1.
"""

# %%
# The solvers
# -----------
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
from mpi4py import MPI
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import LinearSVC

from ppack import BlockAveragedSVC, load_shard
from ppack.data.bundled import bundled_path

train = load_shard(MPI.COMM_SELF, bundled_path("a9a"))
test = load_shard(MPI.COMM_SELF, bundled_path("a9a.t"))
C = 0.1
y = np.where(train.y > 0, 1.0, -1.0)


def objective(w, b):
    margins = y * (train.X @ w + b)
    return 0.5 * (w @ w + b * b) + C * np.maximum(0.0, 1.0 - margins).sum()


runs = {}
for solver in ("dcd", "alm", "llsvm", "stream", "pegasos"):
    start = time.perf_counter()
    with warnings.catch_warnings():  # said below: converged_ tells whether it met its tolerance
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = BlockAveragedSVC(solver, C=C, comm=MPI.COMM_SELF).fit(train.X, train.y)
    seconds = time.perf_counter() - start
    runs[f"ppack {solver}"] = (seconds, model.score(test.X, test.y), objective(model.w_, float(model.b_)))
    if not model.converged_:
        print(f"{solver}: {model.training_['advice']}")
start = time.perf_counter()
reference = LinearSVC(C=C, loss="hinge", intercept_scaling=1.0, tol=1e-4, max_iter=100_000).fit(train.X, train.y)
seconds = time.perf_counter() - start
runs["LIBLINEAR (LinearSVC)"] = (seconds, reference.score(test.X, test.y),
                                 objective(reference.coef_[0], float(reference.intercept_[0])))
for name, (seconds, accuracy, value) in runs.items():
    print(f"{name:24s} {seconds:6.2f} s  test accuracy {accuracy:.4f}  objective {value:.2f}")

# %%
# Objective and accuracy
# ----------------------
# Each solver's objective above LIBLINEAR's, in percent (0 is LIBLINEAR's own optimum,
# within its tolerance; below 0, closer to the true optimum than it), and the test accuracy.
# Pegasos takes a fixed number of stochastic steps and stops a little further away.
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
names = list(runs)
best = runs["LIBLINEAR (LinearSVC)"][2]
left.barh(names, [100 * (runs[n][2] - best) / best for n in names], color="tab:blue")
left.axvline(0.0, color="k", linewidth=0.8)
left.set_xlabel("objective above LIBLINEAR's, %")
right.barh(names, [runs[n][1] for n in names], color="tab:green")
right.set_xlim(0.8, 0.86)
right.set_xlabel(f"test accuracy on a9a.t ({test.n_samples:,} rows)")
right.set_yticks([])
plt.show()
