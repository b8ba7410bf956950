"""Normal posterior with known noise variance: mu_a ~ N(m0, v0), r | a ~ N(mu_a, sigma^2).

This is the model of the FairX-TS theorems (Theorems 3.3.1/3.3.2: mu_a ~ N(0, 1), unit noise).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from bayesfair.core import _random
from bayesfair.core._validate import finite_float
from bayesfair.core.declare import Positive, declare
from bayesfair.posteriors.base import Outcome, Posterior, init_size, normal_observation

__all__ = ["NormalState", "normal_known_variance"]


class NormalState(NamedTuple):
    """Natural parameters per arm: ``precision`` = 1/var and ``precision_mean`` = mean/var."""

    precision: jax.Array
    precision_mean: jax.Array


@declare("posterior", example=[{}, {"prior_mean": 0.5, "prior_var": 1.0, "noise_var": 0.25}])
def normal_known_variance(prior_mean: float | list[float] | Any = 0.0, prior_var: Positive = 1.0,
                          noise_var: Positive = 1.0) -> Posterior:
    """Conjugate Normal family with known noise variance.

    Posterior precision = 1/v0 + n/sigma^2; posterior mean = (m0/v0 + sum r / sigma^2) / precision.
    """
    m0 = finite_float("prior_mean", prior_mean)
    v0, s2 = float(prior_var), float(noise_var)  # > 0: declared

    def init(size) -> NormalState:
        n_arms = init_size(size, "n_arms")
        return NormalState(jnp.full((n_arms,), 1.0 / v0, jnp.float32), jnp.full((n_arms,), m0 / v0, jnp.float32))

    def update(state: NormalState, obs: Outcome) -> NormalState:
        hit = jnp.arange(state.precision.shape[0]) == obs.arm
        return NormalState(state.precision + hit / s2, state.precision_mean + hit * (obs.reward / s2))

    def mean(state: NormalState) -> jax.Array:
        return state.precision_mean / state.precision

    def variance(state: NormalState) -> jax.Array:
        return 1.0 / state.precision

    def sample(key: jax.Array, state: NormalState) -> jax.Array:
        z = _random.normal(key, state.precision.shape)  # jax.random.normal's numbers, flat under vmap
        return mean(state) + z * jax.lax.rsqrt(state.precision)

    def model(arms, rewards=None, *, n_arms: int) -> None:
        import numpyro
        import numpyro.distributions as dist

        with numpyro.plate("arm", n_arms):
            mu = numpyro.sample("mu", dist.Normal(m0, v0**0.5))
        with numpyro.plate("obs", len(arms)):
            numpyro.sample("r", dist.Normal(mu[arms], s2**0.5), obs=rewards)

    return Posterior(
        "normal_known_variance", init, update, sample, mean, variance, model,
        {"prior_mean": m0, "prior_var": v0, "noise_var": s2},
        observation=normal_observation(lambda key, state: {"mu": sample(key, state)}, {"mu": ("arm",)},
                                       lambda p, o: (p["mu"][o.arm], s2)),
    )
