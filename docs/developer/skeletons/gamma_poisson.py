"""Gamma-Poisson posterior for count rewards: a copyable skeleton of a bayesfair posterior module.

Copy this file into ``bayesfair/posteriors/`` (or any importable package) and replace the prior,
update and model. The ``@declare("posterior")`` decorator registers it for study configs
(``posterior = {name = "gamma_poisson", a0 = 2.0}``) and ``bayesfair list``; the contract test
builds it from the declared ``example``; the closed-form-equals-NUTS test
(``tests/test_posteriors_nuts.py``) runs NUTS on its ``model`` and compares.

The family: lambda_a ~ Gamma(a0, b0) (shape, rate), r | a ~ Poisson(lambda_a); after n_a counts
with sum s_a the posterior is Gamma(a0 + s_a, b0 + n_a).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from bayesfair.core import _random
from bayesfair.core.declare import Positive, declare
from bayesfair.posteriors.base import Outcome, Posterior, init_size

__all__ = ["gamma_poisson"]


class GammaState(NamedTuple):
    """Posterior Gamma(shape, rate) per arm, ``[K]`` each."""

    shape: jax.Array
    rate: jax.Array


@declare("posterior", example=[{}, {"a0": 2.0, "b0": 4.0}])
def gamma_poisson(a0: Positive = 1.0, b0: Positive = 1.0) -> Posterior:
    """Conjugate Gamma-Poisson family: the rate of each arm's Poisson counts.

    Parameters
    ----------
    a0, b0 : float
        Prior shape and rate (> 0, declared).
    """
    a0, b0 = float(a0), float(b0)

    def init(size) -> GammaState:
        n_arms = init_size(size, "n_arms")
        return GammaState(jnp.full((n_arms,), a0, jnp.float32), jnp.full((n_arms,), b0, jnp.float32))

    def update(state: GammaState, obs: Outcome) -> GammaState:
        hit = jnp.arange(state.shape.shape[0]) == obs.arm
        return GammaState(state.shape + hit * jnp.asarray(obs.reward, jnp.float32), state.rate + hit)

    def sample(key: jax.Array, state: GammaState) -> jax.Array:
        return _random.gamma(key, state.shape) / state.rate

    def mean(state: GammaState) -> jax.Array:
        return state.shape / state.rate

    def variance(state: GammaState) -> jax.Array:
        return state.shape / (state.rate * state.rate)

    def model(arms, rewards=None, *, n_arms: int) -> None:
        import numpyro
        import numpyro.distributions as dist

        with numpyro.plate("arm", n_arms):
            mu = numpyro.sample("mu", dist.Gamma(a0, b0))
        with numpyro.plate("obs", len(arms)):
            numpyro.sample("r", dist.Poisson(mu[arms]), obs=rewards)

    return Posterior("gamma_poisson", init, update, sample, mean, variance, model, {"a0": a0, "b0": b0})
