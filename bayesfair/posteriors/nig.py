"""Normal-Inverse-Gamma posterior (unknown per-arm noise variance).

sigma_a^2 ~ InvGamma(a0, b0), mu_a | sigma_a^2 ~ N(m0, sigma_a^2 / kappa0),
r | a ~ N(mu_a, sigma_a^2). Rank-one update per observation r:
kappa' = kappa + 1, m' = (kappa m + r) / kappa', a' = a + 1/2,
b' = b + kappa (r - m)^2 / (2 kappa'). The marginal of mu_a is Student-t with 2a degrees of
freedom, location m and scale sqrt(b / (a kappa)).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from bayesfair.core import _random
from bayesfair.core._validate import finite_float
from bayesfair.core.declare import Positive, declare
from bayesfair.posteriors.base import Outcome, Posterior, init_size, normal_observation

__all__ = ["NIGState", "normal_inverse_gamma"]


class NIGState(NamedTuple):
    """Per-arm NIG parameters ``(m, kappa, a, b)``, ``[K]`` each."""

    m: jax.Array
    kappa: jax.Array
    a: jax.Array
    b: jax.Array


@declare("posterior",
         example=[{}, {"m0": 0.5, "kappa0": 1.0, "a0": 2.0, "b0": 0.5},
                  {"m0": 0.5, "kappa0": 1.0, "a0": 0.5, "b0": 0.5}])
def normal_inverse_gamma(m0: float | list[float] | Any = 0.0, kappa0: Positive = 1.0, a0: Positive = 1.0,
                         b0: Positive = 1.0) -> Posterior:
    """Conjugate Normal-Inverse-Gamma family; TS draws sigma^2 then mu exactly."""
    m0 = finite_float("m0", m0)
    kappa0, a0, b0 = float(kappa0), float(a0), float(b0)  # > 0: declared
    allow_small = a0 < 1.0

    def init(size) -> NIGState:
        n_arms = init_size(size, "n_arms")

        def full(v):
            return jnp.full((n_arms,), v, jnp.float32)

        return NIGState(full(m0), full(kappa0), full(a0), full(b0))

    def update(state: NIGState, obs: Outcome) -> NIGState:
        reward = obs.reward
        hit = (jnp.arange(state.m.shape[0]) == obs.arm).astype(jnp.float32)
        kappa_new = state.kappa + hit
        m_new = (state.kappa * state.m + hit * reward) / kappa_new
        b_new = state.b + hit * state.kappa * (reward - state.m) ** 2 / (2.0 * kappa_new)
        return NIGState(m_new, kappa_new, state.a + 0.5 * hit, b_new)

    def joint(key: jax.Array, state: NIGState) -> dict[str, jax.Array]:
        """One joint draw (mu, sigma2) per arm; ``sample`` is its mu."""
        kg, kz = jax.random.split(key)
        g = _random.gamma(kg, state.a, allow_small=allow_small)
        # A shape a < 1 can draw g below the float32 range (0; a0 = 0.01 did in about a third of
        # draws): sigma^2 = b / g is then capped at the largest float32 instead of inf, which
        # made the draw inf/NaN. NaN (an invalid shape) stays NaN.
        sigma2 = jnp.minimum(state.b / g, jnp.finfo(jnp.float32).max)
        z = _random.normal(kz, state.m.shape)  # jax.random.normal's numbers, flat under vmap
        return {"mu": state.m + z * jnp.sqrt(sigma2 / state.kappa), "sigma2": sigma2}

    def sample(key: jax.Array, state: NIGState) -> jax.Array:
        return joint(key, state)["mu"]

    def mean(state: NIGState) -> jax.Array:
        return state.m

    def variance(state: NIGState) -> jax.Array:
        # Student-t variance: scale^2 * nu / (nu - 2), nu = 2a; infinite when a <= 1.
        return jnp.where(state.a > 1.0, state.b / (state.kappa * (state.a - 1.0)), jnp.inf)

    def model(arms, rewards=None, *, n_arms: int) -> None:
        import numpyro
        import numpyro.distributions as dist

        with numpyro.plate("arm", n_arms):
            sigma2 = numpyro.sample("sigma2", dist.InverseGamma(a0, b0))
            mu = numpyro.sample("mu", dist.Normal(m0, jnp.sqrt(sigma2 / kappa0)))
        with numpyro.plate("obs", len(arms)):
            numpyro.sample("r", dist.Normal(mu[arms], jnp.sqrt(sigma2[arms])), obs=rewards)

    return Posterior(
        "normal_inverse_gamma", init, update, sample, mean, variance, model,
        {"m0": m0, "kappa0": kappa0, "a0": a0, "b0": b0},
        observation=normal_observation(joint, {"mu": ("arm",), "sigma2": ("arm",)},
                                       lambda p, o: (p["mu"][o.arm], p["sigma2"][o.arm])),
    )
