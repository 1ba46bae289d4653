"""
``plan`` against measured runs
==============================

``python -m ppack plan`` (in Python, :func:`ppack.packsvm.plan.make_plan`) estimates a
training run's time before it is made. Given ``--from-run``, the metrics of one real run
(``train --metrics-json``), it takes that run's measured rates (seconds per support vector
and row of the kernel sums, the serial part of a pack, how fast the support vectors grow,
the ranks' jitter) and scales them to the run asked for: more iterations, more ranks.

Here plan reads the metrics of a quarter-epoch run on one rank and predicts runs of 0.5, 1
and 2 epochs on 1 and 2 ranks, and, beyond what was measured, on up to 16. The measured
runs' metrics files are kept beside this example (``examples/data/``): every run was made
three times with

.. code-block:: bash

    mpiexec -n P python -m ppack train --data ppack/data/bundled/a9a.h5 --epochs E \\
        --threads 1 --seed 0 --metrics-json a9a-ranksP-epochsE-runK.json

on a two-core machine that other processes were using at the same time, so the three runs
of a setting differ, the two-rank runs most. This example only reads those files and plans;
it starts no MPI job.
"""

# %%
# The measured runs
# -----------------
# Each metrics file says how many ranks and iterations the run had and how long its
# training took (``seconds.total``: the training, without reading the data and compiling).
import json
from collections import defaultdict
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from ppack.data.bundled import bundled_path
from ppack.packsvm.plan import make_plan

try:
    folder = Path(__file__).resolve().parent / "data"
except NameError:  # sphinx-gallery runs the example in its own folder, without __file__
    folder = Path("data")
runs = defaultdict(list)  # (ranks, epochs) -> the runs' metrics
for path in sorted(folder.glob("a9a-ranks*-epochs*-run*.json")):
    metrics = json.loads(path.read_text())
    epochs = metrics["iterations"] / metrics["n_samples"]
    runs[metrics["ranks"], round(epochs, 2)].append(metrics)
for (ranks, epochs), measured in sorted(runs.items()):
    seconds = ", ".join(f"{m['seconds']['total']:.2f}" for m in measured)
    print(f"{ranks} rank(s), {epochs:g} epochs: {len(measured)} runs of {seconds} s, "
          f"{measured[0]['support_vectors']} support vectors")

# %%
# What plan predicts
# ------------------
# Each of the three quarter-epoch runs on one rank is a profile plan can start from; the
# prediction below is their median, and the band spans the three. The memory limit is
# given (4 GiB a rank) so that the plan does not depend on the machine the example runs on.
profiles = runs[1, 0.25]
targets = sorted({epochs for _, epochs in runs if epochs != 0.25})
all_ranks = [1, 2, 4, 8, 16]


def predicted_seconds(ranks, epochs):
    """The plan's time estimate from each profile run, for ``ranks`` ranks and ``epochs``."""
    return [make_plan(bundled_path("a9a"), ranks, {"epochs": epochs, "seed": 0}, mem_per_rank=4 * 2**30,
                      from_run=profile).seconds for profile in profiles]


predictions = {(ranks, epochs): predicted_seconds(ranks, epochs) for ranks in all_ranks for epochs in targets}

example = make_plan(bundled_path("a9a"), 2, {"epochs": 1.0, "seed": 0}, mem_per_rank=4 * 2**30,
                    from_run=profiles[0])
print("what plan says of 1 epoch on 2 ranks, from the first profile run:")
print("\n".join(example.lines[-4:]))

# %%
# Predicted and measured
# ----------------------
# Left: training time against the number of ranks, a line per number of epochs (the
# plan's median and band), the measured runs as points. Right: each measured run against
# its prediction; on the dotted diagonal they agree.
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5), layout="constrained")
colours = dict(zip(targets, ["tab:blue", "tab:orange", "tab:green", "tab:red"]))
for epochs in targets:
    planned = np.array([predictions[ranks, epochs] for ranks in all_ranks])
    left.plot(all_ranks, np.median(planned, axis=1), color=colours[epochs], label=f"plan, {epochs:g} epochs")
    left.fill_between(all_ranks, planned.min(axis=1), planned.max(axis=1), color=colours[epochs], alpha=0.2)
    for (ranks, measured_epochs), measured in runs.items():
        if measured_epochs != epochs:
            continue
        seconds = [m["seconds"]["total"] for m in measured]
        left.scatter([ranks] * len(seconds), seconds, color=colours[epochs], edgecolors="k", zorder=3)
        right.scatter([np.median(predictions[ranks, epochs])] * len(seconds), seconds, color=colours[epochs],
                      edgecolors="k", marker="o" if ranks == 1 else "s",
                      label=f"{epochs:g} epochs, {ranks} rank{'s' if ranks > 1 else ''}")
left.set_xscale("log", base=2)
left.set_yscale("log")
left.set_xticks(all_ranks, [str(p) for p in all_ranks])
left.set_xlabel("ranks")
left.set_ylabel("training seconds")
left.set_title(f"a9a, {profiles[0]['n_samples']:,} rows: planned (lines) and measured (points)")
left.legend()
left.grid(True, which="both", alpha=0.3)
measured_all = [m["seconds"]["total"] for (ranks, epochs), ms in runs.items() if epochs != 0.25 for m in ms]
planned_all = [np.median(predictions[key]) for key in runs if key[1] != 0.25]
lim = [0.8 * min(measured_all + planned_all), 1.25 * max(measured_all + planned_all)]
right.plot(lim, lim, color="grey", linestyle=":")
right.set_xscale("log")
right.set_yscale("log")
right.set_xlim(lim)
right.set_ylim(lim)
right.set_xlabel("planned seconds (median of the three profiles)")
right.set_ylabel("measured seconds")
right.set_title("each measured run against its plan")
right.legend(fontsize=8)
plt.show()

# %%
# How far off
# -----------
# The measured median over the planned median, per setting: 1 is a perfect plan, above 1
# the run took longer than planned.
for (ranks, epochs), measured in sorted(runs.items()):
    if epochs == 0.25:
        continue
    ratio = np.median([m["seconds"]["total"] for m in measured]) / np.median(predictions[ranks, epochs])
    print(f"{ranks} rank(s), {epochs:g} epochs: measured / planned = {ratio:.2f}")

# %%
# A plan rests on what its profile run measured: the rates of one rank's kernel sums and
# serial part, and how much that rank's packs varied (its jitter), from which it models how
# long ranks wait for each other. The network between nodes is modelled (InfiniBand by
# default, ``--allreduce-latency`` and ``--bandwidth`` otherwise). What a one-rank run cannot
# show is how ranks slow each other down on a shared node (memory bandwidth, cores busy with
# other work, as on the machine these runs were made on); ``bench/node_scaling.py`` measures
# that on the target node and ``plan --node-profile`` uses it.
