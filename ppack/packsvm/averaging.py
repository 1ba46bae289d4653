"""Averaged iterates, kept lazily with no communication (``average=True``).

The model returned is w_bar = sum_t a_t w_t / sum_t a_t with a_t = t (t + 1) (t + 2): the
polynomial-decay average of Shamir and Zhang (2013) with eta = 3 in closed form, which
weighs late iterates most and does not depend on T (a run stopped early, or resumed, has a
well defined average). w_t = s_t sum_j beta_j phi_j, so between two changes of beta_j its
weighted sum grows by beta_j sum_t a_t s_t: every rank keeps the replicated running sum
``state.avg_total`` = sum a_t s_t (per coefficient column, in the units of the table's
coefficients), and each entry its own weighted sum ``avg`` (true units) and the running
sum ``mark`` it was last brought up to. An entry is brought up to date only when its
coefficient changes, at a fold of the scale (all entries; then the running sum restarts at
0 in the new units) and at the end. The replay (``replay_pack(average_out=...)``) supplies
each pack's running-sum increment and the weighted sums of the coefficients it adds.
"""
import numpy as np


def weight_sum(t0, r):
    """sum of a_t = t (t + 1) (t + 2) for t = t0+1 .. t0+r (from t(t+1)(t+2)(t+3)/4, exact)."""
    def total(t):
        return t * (t + 1) * (t + 2) * (t + 3) // 4
    return float(total(int(t0) + int(r)) - total(int(t0)))


def bring_up_to_date(table, totals, slots=slice(None)):
    """Add to the entries ``slots`` their weighted sums since their mark; marks := totals (n_columns,)."""
    coef, avg, mark = table.coef, table.avg, table.mark
    avg[slots] += coef[slots] * (totals - mark[slots])
    mark[slots] = totals


def after_replay(table, state, increments, folds):
    """Before the pack's folds and coefficients reach the table: add the pack's running-sum
    increments (n_columns,) and, for each column whose scale was folded (folds (n_columns, 2)
    as mantissa and exponent), bring every entry up to date and restart the running sum at 0."""
    state.avg_total = state.avg_total + increments
    folded = (folds[:, 0] != 1.0) | (folds[:, 1] != 0.0)
    if folded.any():
        bring_up_to_date(table, state.avg_total)
        state.avg_total = np.where(folded, 0.0, state.avg_total)
        table.mark[:, folded] = 0.0


def averaged_coefficients(table, state):
    """(n, n_columns) the averaged model's coefficients in true units (scale 1); brings every
    entry up to date first."""
    bring_up_to_date(table, state.avg_total)
    return table.avg / state.avg_weight
