"""Whether the kernel vanishes or saturates between the training rows at the chosen gamma.

Badly scaled features (one feature in the thousands, or every feature tiny) show in the
kernel values before any training: at gamma the rbf kernel exp(-gamma ||x - z||^2) between
two distinct rows is then ~0 for every pair (each row an island: nearly every row becomes a
support vector of a slow nearest-neighbour rule) or ~1 for every pair (every row alike: a
model close to a constant). The figure is the mean kernel value over the distinct pairs of
``SAMPLE_ROWS`` rows spread evenly over the whole data set (``sample_ids``: global row ids,
the same for any number of ranks), delivered to every rank as a pack's rows are: no pass
over the data. Rank 0 computes it with numpy and broadcasts it, so every rank holds the
same figures and verdict.

The kernels judged: rbf and laplacian (vanish below ``VANISHES``, saturate above
``SATURATES``) and sigmoid (tanh(gamma <x, z> + coef0): saturates when its absolute value
averages above ``SATURATES``, every pair then +-1; near 0 it is a scaled linear kernel,
which is not a fault). linear has no gamma; poly's values have no floor or ceiling to
vanish or saturate at: neither is judged. The kernel's ``offset`` (``bias``) is left out.

The thresholds, from the mean rbf kernel value of 256 evenly spread rows (the figure here)
beside scikit-learn's SVC or SVR (C = 1, 2,000 training rows) and PackSVC (5 epochs):

- standard scaled sets at their usual gammas, all between 0.0016 and 0.95: a9a 0.47 at gamma
  0.05 and 0.88 at "auto"; w8a 0.93 at "auto"; ijcnn1 0.89 at "auto", 0.13 at gamma 1 and
  0.048 at gamma 2; usps (values in [-1, 1]) 0.40 at "auto" and 0.028 at 0.02; MNIST's test
  digits (pixels / 255) 0.14 at gamma 0.02, 0.88 at "auto" and 0.0016 at gamma 0.1 (SVC
  still 95.6% on 0-4 against 5-9); splice_scale, heart_scale and german.numer_scale 0.35,
  0.43 and 0.43 at "auto"; breast cancer and diabetes standardised 0.29 and 0.21 at "auto".
- vanishing: unscaled breast cancer at "auto" (1/30) 8.9e-05 (SVC 62%, the majority class;
  97.9% standardised); unscaled diabetes (ages, blood pressures) at "auto" 8.5e-08; MNIST
  with pixels 0-255 at "auto" 1e-112 (SVC 50%); svmguide1 unscaled at "auto" (0.25)
  4.5e-05 (SVC 74.9%; PackSVC 95.6% but with 3,055 of its 3,089 rows as support vectors,
  547 at gamma "scale"); a9a at gamma 1 (the paper's setting) 1.9e-04 (LIBSVM 78.9% with
  27,528 support vectors of 32,561, against 85% at 0.05); german.numer_scale at gamma 1
  6.1e-04 (SVC 68.6%, below the majority's 70%). Missed at 1e-3, moderately worse: usps at
  gamma 0.05 (0.0055, SVC 76.2% against 96.2% at "scale"), splice_scale at 0.1 (0.0037,
  72.8% against 86.0%).
- saturating: scikit-learn's diabetes as shipped (each feature of unit norm) at gamma 0.1
  0.995 (SVR R^2 -0.04, 0.10 standardised); svmguide1 scaled to [0, 1] at gamma 0.02 0.995
  (PackSVC 83.8% against 96.7% at gamma "scale", 3.19), at 0.05 0.989 (91.1%, not warned).
- laplacian, with the same thresholds, at "auto": 0.35 to 0.93 on the scaled sets above;
  unscaled svmguide1, MNIST and diabetes 6.4e-04, 3.1e-06 and 6.8e-04 (warned), unscaled
  breast cancer 0.0073 (not warned). sigmoid at "auto": mean absolute value 1 on every
  unscaled set above, 0.005 to 0.34 on the scaled ones.
"""
import numpy as np
import scipy.sparse as sp

from ..data.delivery import Delivery
from ..kernels.device_formulas import numpy_kernel_values
from ..mpi.collectives import Collectives

SAMPLE_ROWS = 256  # rows sampled, spread evenly over the data set
VANISHES = 1e-3  # mean kernel value of distinct rows below which the kernel vanishes
SATURATES = 0.99  # mean (absolute) kernel value above which it saturates
JUDGED = ("rbf", "laplacian", "sigmoid")
# values of a sparse sample densified for the laplacian's L1 distances (its used columns
# only): 32 MB of float64; a wider sample keeps fewer rows
DENSE_VALUES = 1 << 22


def sample_ids(n_samples, rows=SAMPLE_ROWS):
    """The global ids of the sampled rows: ``rows`` (at most ``n_samples``) spread evenly, first and last included."""
    return np.unique(np.linspace(0, n_samples - 1, min(rows, n_samples)).round().astype(np.int64))


def gathered_rows(comm, shard, spec, rows=SAMPLE_ROWS):
    """Collective: the sampled rows (``sample_ids``) as float64 feature values, dense or CSR as
    the shard is, on every rank: delivered as a pack's rows are (``data.delivery``, one sum,
    the same compiled kernels as the run's packs)."""
    ids = sample_ids(shard.n_samples, rows)
    block = Delivery(shard, shard.y, norms_l1=spec.uses_l1).deliver(Collectives(comm), ids)
    if block.dense is not None:
        return block.dense.astype(np.float64)
    indptr, indices, values = block.csr
    return sp.csr_matrix((values.astype(np.float64), indices, indptr), shape=(len(ids), shard.n_features))


def pair_values(rows, spec):
    """The kernel values (without ``spec.offset``) and the distances or products (rbf: squared
    distances, laplacian: L1 distances, sigmoid: |<x, z>|) of the distinct pairs i < j of
    ``rows`` (dense or CSR, float64): two (n (n - 1) / 2,) arrays, and n, the rows used."""
    if spec.name == "laplacian":
        dense = _dense(rows)
        n = dense.shape[0]
        distances = np.concatenate([np.abs(dense[i + 1:] - dense[i]).sum(axis=1) for i in range(n - 1)])
        return numpy_kernel_values(spec, distances, 0.0, 0.0), distances, n
    n = rows.shape[0]
    left, right = np.triu_indices(n, 1)
    gram = rows @ rows.T
    gram = gram.toarray() if sp.issparse(gram) else np.asarray(gram)
    products = gram[left, right]
    if spec.name == "rbf":
        norms = np.diag(gram)
        values = numpy_kernel_values(spec, products, norms[left], norms[right])
        return values, np.maximum(norms[left] + norms[right] - 2.0 * products, 0.0), n
    if spec.name == "sigmoid":
        return numpy_kernel_values(spec, products, 0.0, 0.0), np.abs(products), n
    raise ValueError(f"kernel {spec.name!r} is not judged (feature_scale.JUDGED)")


def _dense(rows):
    """``rows`` as a dense array; CSR over its used columns only, keeping fewer rows where
    those would exceed ``DENSE_VALUES`` values."""
    if not sp.issparse(rows):
        return np.asarray(rows)
    used = np.unique(rows.indices)
    keep = min(rows.shape[0], max(2, DENSE_VALUES // max(len(used), 1)))
    if keep < rows.shape[0]:
        rows = rows[sample_ids(rows.shape[0], keep)]
    return rows[:, used].toarray()


def kernel_figures(rows, spec):
    """The figures of ``rows`` (float64, dense or CSR) under ``spec``, a dict: the kernel, gamma,
    ``rows`` used, ``mean`` (the mean kernel value over distinct pairs; sigmoid: of its absolute
    value) and ``suggested_gamma`` (1 / the median over the pairs of the squared distance for
    rbf, the L1 distance for laplacian, |<x, z>| for sigmoid; None where that median is 0);
    None for the kernels not judged or fewer than two rows."""
    if spec.name not in JUDGED or rows is None or rows.shape[0] < 2:
        return None
    values, spreads, used = pair_values(rows, spec)
    mean = float(np.mean(np.abs(values)))
    middle = float(np.median(spreads))
    return {"kernel": spec.name, "gamma": float(spec.gamma), "coef0": float(spec.coef0), "rows": used,
            "mean": mean, "suggested_gamma": 1.0 / middle if middle > 0 else None}


def figures(comm, shard, specs, rows=SAMPLE_ROWS):
    """Collective: for each KernelSpec of ``specs`` (a run's one, or a grid's settings, which
    share a reduction), ``kernel_figures`` of the sampled rows with their ``verdict`` under
    ``"advice"`` (None when the kernel neither vanishes nor saturates), None for a kernel not
    judged; a list, the same on every rank. The rows are delivered once, and not at all when
    no kernel is judged."""
    if all(spec.name not in JUDGED for spec in specs):
        return [None] * len(specs)
    sample = gathered_rows(comm, shard, specs[0], rows)
    found = None
    if comm.Get_rank() == 0:
        found = [kernel_figures(sample, spec) for spec in specs]
        for one in found:
            if one is not None:
                one["advice"] = verdict(one)
    return comm.bcast(found, root=0)


def advice(found):
    """One line for a run's kernel setting or a grid's (``figures``' list): None when no
    setting's kernel vanishes or saturates; else the first such setting's advice (in a grid,
    naming the settings it holds for)."""
    bad = [one for one in found if one is not None and one["advice"] is not None]
    if not bad:
        return None
    if len(found) == 1:
        return bad[0]["advice"]
    gammas = ", ".join(f"{one['gamma']:.4g}" for one in bad)
    return f"at {len(bad)} of the grid's {len(found)} kernel settings (gamma {gammas}): {bad[0]['advice']}"


def verdict(figures):
    """None when the kernel values of ``figures`` (``kernel_figures``') neither vanish nor
    saturate; else one line saying what was seen and what to change."""
    kernel, gamma, mean, rows = figures["kernel"], figures["gamma"], figures["mean"], figures["rows"]
    suggested = figures["suggested_gamma"]
    measure = {"rbf": "squared distance", "laplacian": "L1 distance", "sigmoid": "|<x, z>|"}[kernel]
    about = "" if suggested is None else f", or about {suggested:.2g} (1 / the median {measure} of those rows)"
    seen = f"over pairs of {rows} training rows spread over the data"
    scale = "scale each feature to [0, 1] or to unit variance"
    if kernel in ("rbf", "laplacian") and mean < VANISHES:
        return (f"the {kernel} kernel vanishes between the rows at gamma={gamma:.4g}: its mean value {seen} is "
                f"{mean:.2g} (below {VANISHES:g}), so nearly every row becomes a support vector of a slow "
                f"nearest-neighbour rule; {scale}, or lower gamma: gamma=\"scale\"{about}")
    if kernel in ("rbf", "laplacian") and mean > SATURATES:
        return (f"the {kernel} kernel saturates between the rows at gamma={gamma:.4g}: its mean value {seen} is "
                f"{mean:.4g} (above {SATURATES:g}), so every row looks alike to it and the model is close to a "
                f"constant; {scale} if they are not, or raise gamma: gamma=\"scale\"{about}")
    if kernel == "sigmoid" and mean > SATURATES:
        return (f"the sigmoid kernel saturates between the rows at gamma={gamma:.4g}, coef0={figures['coef0']:g}: "
                f"its mean absolute value {seen} is {mean:.4g} (above {SATURATES:g}), so tanh is +-1 for nearly "
                f"every pair; {scale}, keep coef0 near 0, or lower gamma"
                + ("" if suggested is None else f" to about {suggested:.2g} (1 / the median |<x, z>| of those rows)"))
    return None
