"""
One model on one rank and on two: ``mpiexec``
==============================================

The other examples train in one process. Here the command line trains under ``mpiexec``,
as on a cluster: ``mpiexec -n 2 python -m ppack train`` on a9a (shipped with ppack: 32,561
training and 16,281 test rows), then the same run on one rank. Each rank holds half of the
rows and half of the support vectors; every pack of r = 100 iterations costs two
``Allreduce`` calls, whatever the number of ranks. The number of ranks changes the cost,
not the model: both runs end with the same support vectors and the same test accuracy.

The ``mpiexec`` is the one beside this Python (the ``mpich`` wheel of the ``mpi`` extra puts
it there), else the first on ``PATH``. Everything printed below is the jobs' own output and
metrics, from the run made when this page was built.
"""

# %%
# Two ranks
# ---------
# The command runs from the folder that holds the ``ppack`` package, so the data's paths
# read as in the quick start. ``--threads 1`` gives each rank one core; ``--model`` and
# ``--metrics-json`` keep the model and the run's measured phases for the comparison below.
# A job that fails stops this example with its output.
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from mpi4py import MPI

import ppack
from ppack import load_model, load_shard
from ppack.data.bundled import bundled_path

beside = Path(sys.executable).with_name("mpiexec")
mpiexec = str(beside) if beside.is_file() else shutil.which("mpiexec")
if mpiexec is None:
    raise RuntimeError("no mpiexec beside this Python nor on PATH: pip install mpich (the 'mpi' extra)")

root = Path(ppack.__file__).resolve().parent.parent  # the folder that holds the ppack package
train_file = os.path.relpath(bundled_path("a9a"), root)
test_file = os.path.relpath(bundled_path("a9a.t"), root)
folder = tempfile.mkdtemp()
# this process started MPI itself (a singleton); its launcher's variables are not the job's
environment = {name: value for name, value in os.environ.items()
               if not name.startswith(("PMI_", "PMIX_", "HYDRA_", "MPIR_", "OMPI_"))}
environment["PYTHONUNBUFFERED"] = "1"  # the progress lines (stderr) in their place among the others


def train(ranks):
    """Run ``train`` on ``ranks`` ranks; its printed output, model and metrics."""
    model = os.path.join(folder, f"a9a-{ranks}.model.h5")
    metrics = os.path.join(folder, f"a9a-{ranks}.json")
    arguments = ["-m", "ppack", "train", "--data", train_file, "--test", test_file, "--epochs", "1",
                 "--threads", "1", "--seed", "0", "--model", model, "--metrics-json", metrics]
    print("$ mpiexec -n", ranks, "python", " ".join(arguments).replace(folder + os.sep, ""))
    job = subprocess.run([mpiexec, "-n", str(ranks), sys.executable, *arguments], cwd=root, env=environment,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    output = job.stdout.replace(folder + os.sep, "")
    print(output)
    if job.returncode != 0:
        raise RuntimeError(f"mpiexec -n {ranks} failed with status {job.returncode}:\n{output}")
    return model, json.loads(Path(metrics).read_text())


two_model, two = train(2)

# %%
# The layout line says ``2 ranks x 1 thread``; the line on waiting (printed only above one
# rank) says how long the ranks waited in the collectives for the last one to arrive, and how
# the support vectors were shared. The metrics file says the same in numbers:
print(f"ranks {two['ranks']}, threads per rank {two['threads_per_rank']}, "
      f"{two['iterations']} iterations in {two['packs']} packs, {two['allreduce_calls']} Allreduce calls")
print("support vectors on each rank:", two["over_ranks"]["per_rank"]["support_vectors"])

# %%
# One rank, the same run
# ----------------------
one_model, one = train(1)

# %%
# The same model
# --------------
# The ranks split every kernel sum between them and add the parts in another order, so the
# two models agree up to rounding (here float32's, the type ``--dtype auto`` chose for
# these rows): the same support vectors and test accuracy, and decision values that differ
# only in their last digits.
test = load_shard(MPI.COMM_SELF, bundled_path("a9a.t"))
decisions = {ranks: load_model(path, MPI.COMM_SELF).decision_function(test.X)
             for ranks, path in ((1, one_model), (2, two_model))}
names = {1: "1 rank", 2: "2 ranks"}
for ranks, metrics in ((1, one), (2, two)):
    print(f"{names[ranks]}: {metrics['support_vectors']} support vectors, "
          f"test accuracy {metrics['test_accuracy']:.4f}, trained in {metrics['seconds']['total']:.2f} s")
difference = np.max(np.abs(decisions[1] - decisions[2])) / np.max(np.abs(decisions[1]))
print(f"largest difference of the decision values on the {test.n_samples} test rows, "
      f"relative to the largest value: {difference:.1e}")

# %%
# Where the time went
# -------------------
# Each run's training seconds on its slowest rank (``over_ranks.per_rank.seconds`` in the
# metrics holds every rank's) split into the kernel sums that divide among the ranks
# (``partial_sums``, ``pair_kernels``), the two collectives with the waiting for the last
# rank (``communication``), and the rest every rank repeats. On two cores that other work
# also uses, two ranks need not be faster than one: a rank that is held up makes the other
# wait in the next collective. On quiet cores, and on larger data, where the kernel sums
# take most of a pack, more ranks train faster (the scaling figures of
# :doc:`../guide/performance`).
phases = ("partial_sums", "pair_kernels", "communication")
fig, ax = plt.subplots(figsize=(8, 3), layout="constrained")
for row, (ranks, metrics) in enumerate(((1, one), (2, two))):
    per_rank = metrics["over_ranks"]["per_rank"]["seconds"]
    slowest = int(np.argmax(per_rank["total"]))
    seconds = {name: values[slowest] for name, values in per_rank.items()}
    parts = [seconds[phase] for phase in phases]
    parts.append(max(seconds["total"] - sum(parts), 0.0))
    left = 0.0
    for part, label, color in zip(parts, (*phases, "the rest"), ("C0", "C1", "C3", "C7")):
        ax.barh(row, part, left=left, color=color, label=label if row == 0 else None)
        left += part
    print(f"{names[ranks]}: " + ", ".join(f"{label} {part:.2f} s"
                                          for label, part in zip((*phases, "the rest"), parts)))
ax.set_yticks([0, 1], ["1 rank", "2 ranks"])
ax.set_xlabel("training seconds of the slowest rank")
ax.set_title("a9a, one epoch, rbf kernel, C = 1: the same model", fontsize=10)
ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
plt.show()
print(f"speed-up of 2 ranks over 1 in this build: {one['seconds']['total'] / two['seconds']['total']:.2f}x")
