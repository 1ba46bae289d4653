"""The numba cores' own helpers: the fast exp of non-positive arguments."""
import numpy as np

from ppack.kernels.cpu import exp_nonpositive


def test_fast_exp_matches_numpy():
    rng = np.random.default_rng(0)
    x = np.concatenate([-np.abs(rng.normal(size=100_000)) * 40, [0.0, -1e-300, -5e-324, -0.5, -699.9]])
    got = exp_nonpositive(x)
    expected = np.exp(x)
    assert np.max(np.abs(got - expected) / expected) < 4e-16


def test_fast_exp_clamps_far_tail_to_tiny():
    got = exp_nonpositive(np.array([-800.0, -1e6]))
    assert np.all(got <= np.exp(-699.0)) and np.all(got >= 0.0)
