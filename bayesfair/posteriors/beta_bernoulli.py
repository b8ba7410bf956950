"""Beta-Bernoulli posterior: mu_a ~ Beta(a0, b0), r | a ~ Bernoulli(mu_a)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from bayesfair import _random
from bayesfair._validate import finite_float
from bayesfair.posteriors.base import Posterior

__all__ = ["BetaState", "beta_bernoulli"]


class BetaState(NamedTuple):
    """Posterior Beta(alpha, beta) per arm, ``[K]`` each."""

    alpha: jax.Array
    beta: jax.Array


def beta_bernoulli(a0: float = 1.0, b0: float = 1.0) -> Posterior:
    """Conjugate Beta-Bernoulli family.

    The update adds the reward to alpha and ``1 - reward`` to beta of the pulled arm; the
    sample is an exact Beta draw per arm (``bayesfair._random.beta``).

    Parameters
    ----------
    a0, b0 : float
        Prior Beta parameters, > 0.
    """
    a0 = finite_float("a0", a0)
    b0 = finite_float("b0", b0)
    if a0 <= 0 or b0 <= 0:
        raise ValueError(f"a0 and b0 must be > 0, got a0={a0}, b0={b0}")
    # Counts only add to the prior, so with a0, b0 >= 1 every shape stays >= 1 (static choice).
    allow_small = min(a0, b0) < 1.0

    def init(n_arms: int) -> BetaState:
        return BetaState(jnp.full((n_arms,), a0, jnp.float32), jnp.full((n_arms,), b0, jnp.float32))

    def update(state: BetaState, arm: jax.Array, reward: jax.Array) -> BetaState:
        hit = jnp.arange(state.alpha.shape[0]) == arm
        r = jnp.asarray(reward, jnp.float32)
        return BetaState(state.alpha + hit * r, state.beta + hit * (1.0 - r))

    def sample(key: jax.Array, state: BetaState) -> jax.Array:
        return _random.beta(key, state.alpha, state.beta, allow_small=allow_small)

    def mean(state: BetaState) -> jax.Array:
        return state.alpha / (state.alpha + state.beta)

    def variance(state: BetaState) -> jax.Array:
        s = state.alpha + state.beta
        return state.alpha * state.beta / (s * s * (s + 1.0))

    def model(arms, rewards=None, *, n_arms: int) -> None:
        import numpyro
        import numpyro.distributions as dist

        with numpyro.plate("arm", n_arms):
            mu = numpyro.sample("mu", dist.Beta(a0, b0))
        with numpyro.plate("obs", len(arms)):
            numpyro.sample("r", dist.Bernoulli(probs=mu[arms]), obs=rewards)

    return Posterior("beta_bernoulli", init, update, sample, mean, variance, model, {"a0": a0, "b0": b0},
                     rewards="binary")
