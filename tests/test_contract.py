"""Contract over every policy and posterior: jit and vmap work, pi_t is a probability vector,
shapes and dtypes are as documented, results are finite."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _checks import assert_valid_selection

import bayesfair as bf
from bayesfair.posteriors import fit
from bayesfair.types import Observation

K = 6
M = bf.merit.exponential(3.0)
POSTERIORS = {
    "beta_bernoulli": bf.beta_bernoulli(),
    "beta_bernoulli_jeffreys": bf.beta_bernoulli(0.5, 0.5),
    "normal_known_variance": bf.normal_known_variance(0.5, 1.0, 0.25),
    "normal_inverse_gamma": bf.normal_inverse_gamma(0.5, 1.0, 2.0, 0.5),
    "normal_inverse_gamma_small_a": bf.normal_inverse_gamma(0.5, 1.0, 0.5, 0.5),
}
POLICIES = {
    **{f"fairx_ts[{n}]": bf.fairx_ts(p, M) for n, p in POSTERIORS.items()},
    **{f"ts[{n}]": bf.thompson(p) for n, p in POSTERIORS.items()},
    "fairx_ucb": bf.fairx_ucb(M, horizon=1000),
    "fairx_ucb_center": bf.fairx_ucb(M, w0=0.5, start="center"),
    "fairx_ucb_identity": bf.fairx_ucb(bf.merit.identity(), w0=1.0),
    "fairx_eg": bf.fairx_eg(M, epsilon=0.1),
    "ucb1": bf.ucb1(),
    "ucb_w0": bf.ucb1(w0=0.3),
    "eg": bf.epsilon_greedy(epsilon=0.1),
    "uniform": bf.uniform(),
}
SPEC = bf.bernoulli_arms(np.linspace(0.1, 0.9, K)).spec


def _history(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, K, n), (rng.random(n) < 0.6).astype(np.float32)


@pytest.mark.parametrize("name", list(POLICIES))
def test_policy_contract(name):
    pol = POLICIES[name]
    arms, rewards = _history()

    def run(key):
        k_init, k_sel = jax.random.split(key)
        state = pol.init(k_init, SPEC)
        for t, (a, r) in enumerate(zip(arms, rewards, strict=True)):
            state = pol.update(state, Observation(jnp.int32(t + 1)), jnp.int32(a), jnp.float32(r))
        return pol.select(k_sel, state, Observation(jnp.int32(len(arms) + 1)))

    keys = jax.random.split(jax.random.key(0), 16)
    action, probs, info = jax.jit(jax.vmap(run))(keys)
    assert_valid_selection(action, probs, info, K)


@pytest.mark.parametrize("name", list(POSTERIORS))
def test_posterior_contract(name):
    post = POSTERIORS[name]
    arms, rewards = _history(seed=1)
    state = jax.jit(lambda a, r: fit(post, K, a, r))(arms, rewards)
    mu = jax.jit(jax.vmap(post.sample, in_axes=(0, None)))(jax.random.split(jax.random.key(1), 8), state)
    assert mu.shape == (8, K) and mu.dtype == jnp.float32
    assert np.all(np.isfinite(np.asarray(mu)))
    for f in (post.mean, post.variance):
        v = np.asarray(f(state))
        assert v.shape == (K,)
    assert np.all(np.asarray(post.variance(state)) > 0)


def test_fair_policy_is_proportional_to_merit():
    mu = jnp.array([0.1, 0.4, 0.9])
    for m in (bf.merit.exponential(5.0), bf.merit.identity(), bf.merit.custom(lambda x: 1 + x**2)):
        pi = np.asarray(bf.fair_policy(m, mu))
        w = np.asarray(m(mu))
        np.testing.assert_allclose(pi, w / w.sum(), rtol=1e-5)
    # no overflow for steep exponentials
    pi = np.asarray(bf.fair_policy(bf.merit.exponential(100.0), jnp.array([0.0, 5.0, 5.0])))
    np.testing.assert_allclose(pi, [0.0, 0.5, 0.5], atol=1e-6)
