"""Averaged iterates with no communication (``average=True``).

The model returned is w_bar = sum_t a_t w_t / sum_t a_t with a_t = t (t + 1) (t + 2): the
polynomial-decay average of Shamir and Zhang (2013) with eta = 3 in closed form, which
weighs late iterates most and does not depend on T (a run stopped early, or resumed, has a
well defined average). Every entry keeps ``avg``, its coefficient's weighted sum so far in
true units (coefficient times scale). w_t = s_t sum_j beta_j phi_j, so over a pack an entry
held on entry gains beta_j sum_t a_t s_t, the pack's increment that the replay computes
alike on every rank (``replay_pack(average_out=...)``, with the coefficients it adds).
The table adds it lazily (``table.merge_pack``): a per-column clock sums the packs'
increments, and an entry gains its coefficient times the clock's advance when it is touched,
so a pack costs O(the entries it touches). A scale fold changes the coefficients' units and
s can fall by a hundred orders of magnitude between folds, which would lose the late
increments below the clock's rounding: the clock is settled into every entry on a fold and
whenever an increment falls far below it (``table.SETTLE_BELOW``).
"""


def weight_sum(t0, r):
    """sum of a_t = t (t + 1) (t + 2) for t = t0+1 .. t0+r (from t(t+1)(t+2)(t+3)/4, exact)."""
    def total(t):
        return t * (t + 1) * (t + 2) * (t + 3) // 4
    return float(total(int(t0) + int(r)) - total(int(t0)))


def averaged_coefficients(table, state):
    """(n, n_columns) the averaged model's coefficients in true units (scale 1)."""
    return table.avg / state.avg_weight


def averaged_offset(state, loss):
    """(n_columns,) the averaged model's offset rho: sum_t a_t rho_t / sum_t a_t, or rho itself
    when the loss keeps it fixed (``loss.rho_step`` 0, so no rounding moves it)."""
    if loss.rho_step == 0.0:
        return state.rho.copy()
    return state.rho_sum / state.avg_weight
