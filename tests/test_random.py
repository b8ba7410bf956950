"""The exact samplers: distributional checks (Kolmogorov-Smirnov) over many draws.

Each KS test uses the 0.001 critical value 1.95/sqrt(n): a correct sampler fails a given case
with probability 0.001; the cases are fixed keys, so the suite is deterministic.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import betainc, gammainc

from bayesfair import _random

N = 20_000
KS_CRIT = 1.95 / np.sqrt(N)


def _ks(samples: np.ndarray, cdf_values: np.ndarray) -> float:
    n = samples.size
    ecdf_hi = np.arange(1, n + 1) / n
    ecdf_lo = np.arange(0, n) / n
    return float(max(np.max(ecdf_hi - cdf_values), np.max(cdf_values - ecdf_lo)))


@pytest.mark.parametrize("shape", [0.3, 1.0, 2.5, 40.0, 5000.0])
def test_gamma_matches_cdf(shape):
    x = np.sort(np.asarray(_random.gamma(jax.random.key(1), jnp.full((N,), shape))))
    assert np.all(np.isfinite(x)) and np.all(x > 0)
    d = _ks(x, np.asarray(gammainc(shape, jnp.asarray(x))))
    assert d < KS_CRIT, f"KS distance {d:.4f} >= {KS_CRIT:.4f} for Gamma({shape})"


@pytest.mark.parametrize("a,b", [(1.0, 1.0), (0.5, 0.5), (3.0, 20.0), (500.0, 700.0)])
def test_beta_matches_cdf(a, b):
    x = np.sort(np.asarray(_random.beta(jax.random.key(2), jnp.full((N,), a), jnp.full((N,), b))))
    d = _ks(x, np.asarray(betainc(a, b, jnp.asarray(x))))
    assert d < KS_CRIT, f"KS distance {d:.4f} for Beta({a}, {b})"


def test_allow_small_false_matches_for_large_shapes():
    a = jnp.full((N,), 7.0)
    x = np.sort(np.asarray(_random.gamma(jax.random.key(3), a, allow_small=False)))
    assert _ks(x, np.asarray(gammainc(7.0, jnp.asarray(x)))) < KS_CRIT


def test_categorical_frequencies():
    p = jnp.array([0.1, 0.2, 0.3, 0.4])
    keys = jax.random.split(jax.random.key(4), N)
    draws = np.asarray(jax.vmap(lambda k: _random.categorical(k, p))(keys))
    freq = np.bincount(draws, minlength=4) / N
    se = np.sqrt(np.asarray(p) * (1 - np.asarray(p)) / N)
    assert np.all(np.abs(freq - np.asarray(p)) < 4.5 * se)


def test_random_argmax_breaks_ties_uniformly():
    x = jnp.array([1.0, 3.0, 3.0, 0.0, 3.0])
    keys = jax.random.split(jax.random.key(5), N)
    draws = np.asarray(jax.vmap(lambda k: _random.random_argmax(k, x))(keys))
    freq = np.bincount(draws, minlength=5) / N
    assert freq[0] == 0 and freq[3] == 0
    se = np.sqrt(1 / 3 * 2 / 3 / N)
    assert np.all(np.abs(freq[[1, 2, 4]] - 1 / 3) < 4.5 * se)
    np.testing.assert_allclose(np.asarray(_random.argmax_set(x)), [0, 1 / 3, 1 / 3, 0, 1 / 3], rtol=1e-6)
