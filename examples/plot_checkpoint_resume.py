"""
Stopping, checkpointing and resuming a run
==========================================

A long run on a cluster meets time limits and preemption. ppack saves its whole state to
one checkpoint file (every rank's share of the support vectors, the replicated scalars, the
sampler's position) and continues from it: on the same number of ranks the resumed run
ends with the model the uninterrupted one gives, bit for bit. On the command line
``--checkpoint FILE --checkpoint-every 600 --resume`` does it, and SIGTERM (what SLURM sends
at a time limit) or Ctrl-C stop a run after its current pack with the state saved. Here the
same, from Python, on a9a (shipped with ppack: 32,561 training rows): a run stopped partway
by ``should_stop``, resumed, and compared with a run never stopped.
"""

# %%
# A run that stops partway
# ------------------------
# ``should_stop`` is polled once per pack; here it says stop after 120 packs (of the 326 at
# one epoch), as a signal handler or a time budget would. The checkpoint is written then.
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np
from mpi4py import MPI

from ppack import PackSVC, load_shard
from ppack.data.bundled import bundled_path

train = load_shard(MPI.COMM_SELF, bundled_path("a9a"))
test = load_shard(MPI.COMM_SELF, bundled_path("a9a.t"))
checkpoint = os.path.join(tempfile.mkdtemp(), "a9a.ckpt.h5")
params = {"C": 1.0, "epochs": 1.0, "seed": 0, "comm": MPI.COMM_SELF}

polls = 0


def after_120_packs():
    global polls
    polls += 1
    return polls >= 120


first = PackSVC(**params).fit(train.X, train.y, checkpoint=checkpoint, should_stop=after_120_packs)
print(f"stopped: {first.stopped_}; {first.training_['iterations_done']} of {first.training_['iterations']} "
      f"iterations done; checkpoint {os.path.getsize(checkpoint) / 1e6:.1f} MB")

# %%
# Resumed, and a run never stopped
# --------------------------------
# The same parameters and ``resume=True`` continue from the file (a checkpoint of other
# settings or data is refused, naming the field that differs).
resumed = PackSVC(**params).fit(train.X, train.y, checkpoint=checkpoint, resume=True)
whole = PackSVC(**params).fit(train.X, train.y)
print(f"resumed from iteration {resumed.resumed_from_}: {resumed.n_support_} support vectors, "
      f"test accuracy {resumed.score(test.X, test.y):.4f}")
print(f"never stopped: {whole.n_support_} support vectors, test accuracy {whole.score(test.X, test.y):.4f}")
decisions, expected = resumed.decision_function(test.X), whole.decision_function(test.X)
print(f"largest difference of their decision values on the test rows: {np.max(np.abs(decisions - expected))}")

# %%
# The two models' decisions
# -------------------------
# Every test row's decision value from the resumed model against the uninterrupted one's:
# all on the diagonal.
fig, ax = plt.subplots(figsize=(5, 5), layout="constrained")
ax.scatter(expected, decisions, s=2, alpha=0.3)
ax.plot([expected.min(), expected.max()], [expected.min(), expected.max()], color="k", linewidth=0.8)
ax.set_xlabel("never stopped: decision value")
ax.set_ylabel("stopped at pack 120, then resumed")
ax.set_title(f"a9a test rows ({test.n_samples:,})", fontsize=10)
plt.show()
