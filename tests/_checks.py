"""Assertions shared by the policy contract tests."""

import jax.numpy as jnp
import numpy as np


def assert_valid_selection(action, probs, info, n_arms: int) -> None:
    """A batch of ``select`` outputs: documented shapes/dtypes, pi_t a probability vector, and
    every action drawn from pi_t (never an arm with zero probability)."""
    n = action.shape[0]
    assert action.shape == (n,) and action.dtype == jnp.int32
    assert probs.shape == (n, n_arms) and probs.dtype == jnp.float32
    assert isinstance(info, dict)
    p = np.asarray(probs)
    assert np.all(np.isfinite(p)) and np.all(p >= 0)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-5)
    a = np.asarray(action)
    assert np.all((a >= 0) & (a < n_arms))
    assert np.all(p[np.arange(n), a] > 0)
