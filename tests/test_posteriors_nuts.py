"""The conjugate fast path agrees with NUTS on the family's own NumPyro model.

For several random data sets per family, NUTS samples the NumPyro reference model and the
posterior mean and standard deviation of every arm's mean are compared with the closed form.
Tolerance: Z standard errors of the Monte Carlo estimate, with the standard error computed from
the effective sample size (mean: sd / sqrt(ESS); sd: sd * sqrt((kurtosis - 1) / (4 ESS))).
There are 3 families x 4 data sets x 3 arms x 2 statistics = 72 comparisons; at Z = 4.5 each
fails with probability ~7e-6 for a correct implementation, so the suite has a false-failure rate
below 1e-3. A wrong update (e.g. a missing prior term, a variance used as a scale) moves the
moments by many standard errors at these sample sizes.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.diagnostics import effective_sample_size
from numpyro.infer import MCMC, NUTS

import bayesfair as bf
from bayesfair.posteriors import fit

K = 3
N_OBS = 24
N_SETS = 4
Z = 4.5


def _data(family: str, rng: np.random.Generator):
    arms = rng.integers(0, K, N_OBS)
    if family == "beta_bernoulli":
        p = rng.uniform(0.1, 0.9, K)
        rewards = (rng.random(N_OBS) < p[arms]).astype(np.float32)
    else:
        mu = rng.normal(0.0, 1.0, K)
        sd = rng.uniform(0.3, 1.5, K)
        rewards = (mu[arms] + sd[arms] * rng.normal(size=N_OBS)).astype(np.float32)
    return arms.astype(np.int32), rewards


FAMILIES = {
    "beta_bernoulli": (bf.beta_bernoulli(2.0, 1.5), 4.0),  # (posterior, kurtosis bound for the sd test)
    "normal_known_variance": (bf.normal_known_variance(0.3, 2.0, 0.7), 3.0),
    "normal_inverse_gamma": (bf.normal_inverse_gamma(0.0, 0.5, 3.0, 2.0), 6.0),
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_conjugate_matches_nuts(family):
    post, kurt = FAMILIES[family]
    rng = np.random.default_rng(len(family))
    mcmc = MCMC(NUTS(partial(post.model, n_arms=K)), num_warmup=800, num_samples=6000, num_chains=1,
                progress_bar=False, jit_model_args=True)
    key = jax.random.key(17)
    for i in range(N_SETS):
        arms, rewards = _data(family, rng)
        key, sub = jax.random.split(key)
        mcmc.run(sub, jnp.asarray(arms), jnp.asarray(rewards))
        draws = np.asarray(mcmc.get_samples(group_by_chain=True)["mu"])  # [1, S, K]
        ess = np.asarray(effective_sample_size(draws))
        state = fit(post, K, arms, rewards)
        exact_mean = np.asarray(post.mean(state), np.float64)
        exact_sd = np.sqrt(np.asarray(post.variance(state), np.float64))
        nuts_mean = draws[0].mean(axis=0)
        nuts_sd = draws[0].std(axis=0, ddof=1)
        se_mean = exact_sd / np.sqrt(ess)
        se_sd = exact_sd * np.sqrt((kurt - 1.0) / (4.0 * ess))
        assert np.all(ess > 500), f"{family} set {i}: NUTS mixed poorly, ESS {ess}"
        assert np.all(np.abs(nuts_mean - exact_mean) < Z * se_mean), (
            f"{family} set {i}: means NUTS {nuts_mean} vs conjugate {exact_mean} (se {se_mean})")
        assert np.all(np.abs(nuts_sd - exact_sd) < Z * se_sd), (
            f"{family} set {i}: sds NUTS {nuts_sd} vs conjugate {exact_sd} (se {se_sd})")


@pytest.mark.parametrize("family", list(FAMILIES))
def test_conjugate_sampler_matches_its_own_moments(family):
    """TS draws from the conjugate state have the closed-form mean and variance."""
    post, kurt = FAMILIES[family]
    arms, rewards = _data(family, np.random.default_rng(3))
    state = fit(post, K, arms, rewards)
    n = 40_000
    draws = np.asarray(jax.vmap(post.sample, in_axes=(0, None))(jax.random.split(jax.random.key(9), n), state))
    mean = np.asarray(post.mean(state))
    sd = np.sqrt(np.asarray(post.variance(state)))
    assert np.all(np.abs(draws.mean(0) - mean) < Z * sd / np.sqrt(n))
    assert np.all(np.abs(draws.std(0) - sd) < Z * sd * np.sqrt((kurt - 1.0) / (4.0 * n)))
