"""
Training on a GPU: the figures measured on an H200
==================================================

``--device gpu`` (``device="gpu"`` on the estimators) runs each rank's kernel sums and pair
kernels on a GPU through CuPy; everything else, and the model, stays as on the CPU. No GPU
builds this site, so this example does not time one: it reads the figures measured on one
NVIDIA H200 by ``bench/device.sh``, kept in the repository as
``bench/results/device_h200.json``, and shows them with the card and the date that file
records. Where CuPy and a GPU are present, the last section also trains a small model on
the GPU and on the CPU and compares them.

The command a user runs, on dense rows (CSR data has no GPU path yet: convert with
``--storage dense``), one rank per GPU:

.. code-block:: bash

    pip install "ppack[mpi,gpu]"          # CUDA 12; "ppack[mpi,gpu-cuda13]" for CUDA 13
    python -m ppack convert mydata.txt mydata.h5 --storage dense
    mpiexec -n 1 python -m ppack train --data mydata.h5 --device gpu --model mydata.model.h5

``mpiexec -n 4`` on a node with four GPUs gives each rank its own (its rank on the node
modulo the GPUs it sees). What runs on the GPU, and what has not been measured yet, is in
:doc:`../guide/gpus`.
"""

# %%
# The file and the card
# ---------------------
import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

try:
    repository = Path(__file__).resolve().parent.parent
except NameError:  # sphinx-gallery runs the example in its own folder, without __file__
    repository = Path("..").resolve()
source = Path("bench", "results", "device_h200.json")
recorded = json.loads((repository / source).read_text())
print(f"source: {source.as_posix()}")
print(f"measured on {recorded['date']}: {recorded['device']}")

# %%
# The kernel sums of one pack
# ---------------------------
# ``bench/gpu.py sums``: the partial sums of one pack (r rows against every stored row, K
# coefficient columns) on the GPU, with the fused pass (the default) and the earlier unfused
# one, the whole pack as training runs it on the GPU, and the same sums on the node's CPU
# cores as ranks each holding their share of the stored rows (the slowest rank's median).
# The rows are float32 (``bench/gpu.py`` says how each figure was taken).
sums = recorded["gpu_sums"]
print(f"{sums['device']}: d = {sums['d']} features, r = {sums['r']} rows a pack, K = {sums['K']} columns")
print(f"{'stored rows':>12} {'GPU fused us':>13} {'GPU unfused us':>15} {'whole pack us':>14} "
      f"{'CPU ranks':>10} {'CPU us':>9} {'CPU / GPU':>10}")
rows = sorted(sums["rows"], key=int)
for n in rows:
    entry = sums["rows"][n]
    print(f"{int(n):>12,} {1e6 * entry['gpu_seconds_per_pack']:>13,.0f} "
          f"{1e6 * entry['unfused_seconds_per_pack']:>15,.0f} {1e6 * entry['whole_pack_seconds']:>14,.0f} "
          f"{entry['cpu_ranks']:>10} {1e6 * entry['cpu_seconds_per_pack']:>9,.0f} "
          f"{entry['cpu_seconds_per_pack'] / entry['gpu_seconds_per_pack']:>10.1f}")
fixed = sums["fixed_cost"]
print(f"a whole pack at {fixed['rows']} stored rows (the fixed cost of a pack): "
      f"{1e6 * fixed['seconds_per_pack']:.0f} us, of which {1e6 * fixed['host_seconds_to_queue']:.0f} us "
      f"on the host queuing the copies and launches")

# %%
# The same figures as a picture, both axes logarithmic. The CPU's time grows with the stored
# rows from the start; the GPU's grows more slowly, so the last column of the table grows with
# the rows. At the smallest sizes the host's cost of queuing the work (the fixed cost above),
# not the GPU, sets a pack's time.
stored = np.array([int(n) for n in rows])
fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
for key, label, marker in (("gpu_seconds_per_pack", "GPU, fused pass", "o"),
                           ("unfused_seconds_per_pack", "GPU, unfused pass", "s"),
                           ("whole_pack_seconds", "GPU, whole pack", "^"),
                           ("cpu_seconds_per_pack", f"CPU, {sums['rows'][rows[0]]['cpu_ranks']} ranks", "D")):
    ax.plot(stored, [1e3 * sums["rows"][n][key] for n in rows], marker=marker, label=label)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("stored rows (support vectors) on the device")
ax.set_ylabel("milliseconds per pack")
ax.set_title(f"{sums['device']}, {recorded['date']}: d = {sums['d']}, r = {sums['r']}, K = {sums['K']}",
             fontsize=10)
ax.grid(True, which="both", alpha=0.3)
ax.legend()
plt.show()

# %%
# A whole training run
# --------------------
# ``bench/gpu.py train``: the ten MNIST digits on 1,000,000 mnist8m-style rows, one epoch,
# on one rank and one GPU, tested on the 10,000 MNIST test rows.
run = recorded["gpu_train_1000000"]
seconds = run["seconds"]
print(f"{run['n_samples']:,} rows, {run['iterations']:,} iterations in {run['packs']:,} packs of {run['pack']}, "
      f"{run['ranks']} rank, gamma {run['gamma']}, sigma {run['sigma']}, {run['dtype']}")
print(f"trained in {seconds['total']:.2f} s: partial sums {seconds['partial_sums']:.2f} s on the GPU, "
      f"serial work {seconds['serial']:.2f} s on the CPU")
print(f"{run['support_vectors']:,} support vectors, test accuracy {run['test_accuracy']:.2%}")

# %%
# On this machine
# ---------------
# Where CuPy imports and sees a GPU, a small dense problem (scikit-learn's digits, 0 to 4
# against 5 to 9) is trained on the GPU and on the CPU: the same model up to rounding.
# Elsewhere, as where this site is built, it says so and trains nothing.
try:
    import cupy

    gpus = cupy.cuda.runtime.getDeviceCount()
except Exception as exc:  # noqa: BLE001 - no CuPy, or no driver or GPU for it
    gpus, reason = 0, f"{type(exc).__name__}: {exc}"
else:
    reason = "CuPy sees no GPU"
if gpus == 0:
    print(f"no GPU here ({reason}); the figures above are the ones recorded in {source.as_posix()}")
else:
    from sklearn.datasets import load_digits

    from ppack import PackSVC

    X, y = load_digits(return_X_y=True)
    X, y = X / 16.0, (y >= 5).astype(int)
    params = {"C": 10.0, "gamma": "scale", "epochs": 2, "seed": 0}
    on_gpu = PackSVC(device="gpu", **params).fit(X, y)
    on_cpu = PackSVC(device="cpu", **params).fit(X, y)
    difference = np.max(np.abs(on_gpu.decision_function(X) - on_cpu.decision_function(X)))
    print(f"{gpus} GPU(s) seen; GPU: {on_gpu.n_support_} support vectors, training accuracy "
          f"{on_gpu.score(X, y):.4f}; CPU: {on_cpu.n_support_}, {on_cpu.score(X, y):.4f}; "
          f"largest difference of their decision values {difference:.1e}")
