"""What each coefficient column of a packed run trains: its sigma, projection bound, offset
rule, class and held-out fold (``replay.replay_all`` reads them per column).

An ordinary run has one column per binary problem (1, or K classes one-vs-rest), all with the
run's sigma and bound and no fold held out (``Columns.plain``). A grid search
(``ppack.model_selection``) adds columns: classes x grid points x (folds + 1), each with the
sigma of its grid point (1 / (n C), or one-class's nu), holding out the rows of its fold (they carry no loss
for it: weight 0, as a row of sample_weight 0, while its scale still decays), or none for
the refit column. Its grid points may differ in their kernel too: ``kernels`` then holds one
KernelSpec per kernel group (``kernels.compute.KernelGroups``) and ``column_group`` each
column's, the groups' columns consecutive.
"""
import functools
from dataclasses import dataclass

import numpy as np

from ..kernels.compute import KernelGroups


@dataclass
class Columns:
    """Per column (Q,): ``sigma``, ``bound`` (sigma times the squared projection radius, the
    replay's max_weight before a kernel that is not positive semi-definite turns it off),
    ``column_class`` (int64: the class code trained one-vs-rest, -1: the labels are +-1 or
    targets as given) and ``column_fold`` (int64: the fold held out, -1: none); ``folds``:
    (n_samples,) int64, each global row's fold (the same on every rank), or None when no
    column holds one out; ``active`` (Q,) bool: False for a column that has stopped
    (``column_stops.py``: it takes no more steps), all True by default; ``kernels``: a tuple
    of KernelSpecs, one per kernel group, or None (the run's one kernel), with
    ``column_group`` (int64, non-decreasing) each column's; ``rho_step``, ``rho_low`` and
    ``rho_high`` (Q,): each column's offset rule (``losses.Loss``'s fields; by default rho
    stays: step 0, no interval)."""

    sigma: np.ndarray
    bound: np.ndarray
    column_class: np.ndarray
    column_fold: np.ndarray
    folds: np.ndarray = None
    active: np.ndarray = None
    kernels: tuple = None
    column_group: np.ndarray = None
    rho_step: np.ndarray = None
    rho_low: np.ndarray = None
    rho_high: np.ndarray = None

    def __post_init__(self):
        self.sigma = np.ascontiguousarray(self.sigma, dtype=np.float64)
        self.bound = np.ascontiguousarray(self.bound, dtype=np.float64)
        self.column_class = np.ascontiguousarray(self.column_class, dtype=np.int64)
        self.column_fold = np.ascontiguousarray(self.column_fold, dtype=np.int64)
        if self.folds is not None:
            self.folds = np.ascontiguousarray(self.folds, dtype=np.int64)
        Q = len(self.sigma)
        self.active = np.ones(Q, dtype=np.bool_) if self.active is None else \
            np.ascontiguousarray(self.active, dtype=np.bool_)
        self.column_group = np.ascontiguousarray(np.zeros(Q) if self.column_group is None else self.column_group,
                                                 dtype=np.int64)
        for name, default in (("rho_step", 0.0), ("rho_low", -np.inf), ("rho_high", np.inf)):
            value = getattr(self, name)
            setattr(self, name, np.ascontiguousarray(np.full(Q, default) if value is None else value,
                                                     dtype=np.float64))
        if not all(len(a) == Q for a in (self.bound, self.column_class, self.column_fold, self.active,
                                         self.column_group, self.rho_step, self.rho_low, self.rho_high)):
            raise ValueError("Columns: sigma, bound, column_class, column_fold, active, column_group and the rho "
                             "rule need one entry per column")
        n_groups = 1 if self.kernels is None else len(self.kernels)
        if Q and (np.any(np.diff(self.column_group) < 0) or self.column_group[0] != 0 or
                  self.column_group[-1] != n_groups - 1 or np.any(np.diff(self.column_group) > 1)):
            raise ValueError(f"Columns: column_group must run through the {n_groups} kernel groups in order")

    @classmethod
    def plain(cls, n_columns, sigma, loss):
        """An ordinary run's: ``n_columns`` problems (1: labels +-1 or targets; K: class codes
        0..K-1), all with ``sigma`` and the ``losses.Loss`` ``loss``'s bound and rho rule, none
        holding rows out."""
        Q = int(n_columns)
        return cls(np.full(Q, float(sigma)), np.full(Q, float(loss.bound)),
                   np.full(1, -1) if Q == 1 else np.arange(Q), np.full(Q, -1), rho_step=np.full(Q, loss.rho_step),
                   rho_low=np.full(Q, loss.rho_low), rho_high=np.full(Q, loss.rho_high))

    @property
    def n_columns(self):
        return len(self.sigma)

    @property
    def n_groups(self):
        return 1 if self.kernels is None else len(self.kernels)

    def kernel_groups(self):
        """The ``KernelGroups`` of a run of several kernels, or None."""
        if self.n_groups == 1:
            return None
        starts = np.searchsorted(self.column_group, np.arange(self.n_groups + 1))
        return KernelGroups(self.kernels, starts)

    def max_weight(self, spec):
        """The replay's projection bound per column (Q,): ``bound``, or inf for a column whose
        kernel (its group's, else ``spec``) is not positive semi-definite."""
        kernels = (spec,) if self.kernels is None else self.kernels
        psd = np.array([kernel.facts.psd for kernel in kernels])[self.column_group]
        return np.where(psd, self.bound, np.inf)

    def row_folds(self, ids, out):
        """The folds of the pack's global row ids (r,) into ``out`` (at least r,), returning
        out[:r]; when no column holds a fold out, an array of r -1s instead, kept (not to be
        written: a numpy write each pack costs about 15 us with the caches the kernel sums
        emptied)."""
        r = len(ids)
        if self.folds is None:
            return _no_folds(r)
        out[:r] = self.folds[ids]
        return out[:r]


@functools.lru_cache(maxsize=4)
def _no_folds(r):
    """(r,) int64 of -1: the rows' folds when no column holds a fold out (read, never written)."""
    return np.full(r, -1, dtype=np.int64)
