"""
Accuracy against time beside LIBSVM on a9a
==========================================

Test accuracy on a9a (UCI Adult, shipped with ppack: 32,561 training and 16,281 test rows,
123 binary features) against training time, for PackSVC and for LIBSVM, the exact dual
solver behind scikit-learn's SVC, both with the rbf kernel, ``C = 1`` and
``gamma = 1 / 123`` (LIBSVM's defaults).

An exact solver's time grows about with the square of the rows, so within a time budget it
sees only a subset of them. PackSVC takes stochastic sub-gradient steps over all the rows:
its time grows with the epochs (and the support vectors they add), and one epoch or less
is already a usable model. Both run in one process on
one core here; under ``mpiexec`` PackSVC shares the work between the ranks.
"""

# %%
# The data
# --------
# ``load_shard`` reads a ppack HDF5 file; on ``MPI.COMM_SELF`` the one process holds every
# row, a CSR matrix.
import os
import tempfile
import time

import matplotlib.pyplot as plt
import numba
import numpy as np
from libsvm.svmutil import svm_parameter, svm_predict, svm_problem, svm_save_model, svm_train
from mpi4py import MPI

from ppack import PackSVC, load_model, load_shard
from ppack.data.bundled import bundled_path

numba.set_num_threads(1)  # one core, as LIBSVM
train = load_shard(MPI.COMM_SELF, bundled_path("a9a"))
test = load_shard(MPI.COMM_SELF, bundled_path("a9a.t"))
print(f"training {train.X.shape}, test {test.X.shape}")

# %%
# PackSVC: more epochs over all the rows
# --------------------------------------
# One model per number of epochs (T = epochs x 32,561 iterations), each timed from the
# start of ``fit``. The first fit in a process loads the compiled numba kernels (or compiles
# them, the first time ever); a small fit first keeps that out of the timings.
PackSVC(iterations=200).fit(train.X[:1000], train.y[:1000])
ppack_runs = []
for epochs in (0.0625, 0.125, 0.25, 0.5, 1.0, 2.0):
    start = time.perf_counter()
    model = PackSVC(C=1.0, epochs=epochs, seed=0).fit(train.X, train.y)
    seconds = time.perf_counter() - start
    ppack_runs.append((epochs, seconds, model.score(test.X, test.y), model.n_support_))
    print(f"PackSVC {epochs:g} epochs: {seconds:.2f} s, test accuracy {ppack_runs[-1][2]:.4f}, "
          f"{model.n_support_} support vectors")

# %%
# LIBSVM: more rows, each solved exactly
# --------------------------------------
# LIBSVM trains on the first n training rows (its default tolerance, 1e-3). ppack reads
# LIBSVM model files (``load_model``), so the models are scored by the same code as
# PackSVC's; LIBSVM's own ``svm_predict`` on a few hundred test rows checks that they agree.
folder = tempfile.mkdtemp()
libsvm_runs = []
for rows in (500, 1000, 2000, 4000):
    problem = svm_problem(train.y[:rows], train.X[:rows])
    start = time.perf_counter()
    libsvm_model = svm_train(problem, svm_parameter("-q -c 1"))
    seconds = time.perf_counter() - start
    path = os.path.join(folder, f"libsvm-{rows}.model")
    svm_save_model(path, libsvm_model)
    accuracy = load_model(path, MPI.COMM_SELF).score(test.X, test.y)
    libsvm_runs.append((rows, seconds, accuracy, libsvm_model.get_nr_sv()))
    print(f"LIBSVM {rows} rows: {seconds:.2f} s, test accuracy {accuracy:.4f}, "
          f"{libsvm_model.get_nr_sv()} support vectors")

check = slice(0, 500)
own_labels, _, _ = svm_predict(test.y[check], test.X[check], libsvm_model, "-q")
read_labels = load_model(path, MPI.COMM_SELF).predict(test.X[check])
print(f"LIBSVM's predictions and ppack's of its model file agree on "
      f"{np.mean(np.asarray(own_labels) == read_labels):.1%} of {check.stop} test rows")
os.remove(path)

# %%
# The picture
# -----------
# Each point is one model; the labels say how many epochs (PackSVC) or rows (LIBSVM) it
# saw. The time axis is logarithmic.
fig, ax = plt.subplots(figsize=(8, 5), layout="constrained")
for runs, label, marker, tag in ((ppack_runs, f"ppack PackSVC, all {train.n_samples:,} rows", "o", "{:g} ep."),
                                 (libsvm_runs, "LIBSVM, the first n rows", "s", "n={}")):
    size, seconds, accuracy, _ = zip(*runs)
    ax.plot(seconds, accuracy, marker=marker, label=label)
    for s, x, a in zip(size, seconds, accuracy):
        ax.annotate(tag.format(s), (x, a), textcoords="offset points", xytext=(4, -12), fontsize=8)
ax.set_xscale("log")
ax.set_xlabel("training time, seconds (one core)")
ax.set_ylabel(f"test accuracy on a9a.t ({test.n_samples:,} rows)")
ax.set_title(f"a9a: rbf kernel, C = 1, gamma = 1/{train.n_features}")
ax.grid(True, which="both", alpha=0.3)
ax.legend(loc="lower right")
plt.show()

# %%
# What it shows
# -------------
# The most accurate model of each solver, and the time it took.
for name, runs in (("PackSVC", ppack_runs), ("LIBSVM", libsvm_runs)):
    size, seconds, accuracy, n_support = max(runs, key=lambda run: run[2])
    print(f"{name}: best test accuracy {accuracy:.4f} in {seconds:.2f} s ({n_support} support vectors)")
