"""Beta-Bernoulli posterior: mu_a ~ Beta(a0, b0), r | a ~ Bernoulli(mu_a)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from bayesfair.core import _random
from bayesfair.core.declare import Positive, declare
from bayesfair.posteriors.base import ObservationModel, Outcome, Posterior, init_size

__all__ = ["BetaState", "beta_bernoulli"]

MIN_SHAPE = 1e-30  # smallest prior shape: log(U) / a must stay a finite float32 (log U >= -87.4)


class BetaState(NamedTuple):
    """Posterior Beta(alpha, beta) per arm, ``[K]`` each."""

    alpha: jax.Array
    beta: jax.Array


@declare("posterior", example=[{}, {"a0": 0.5, "b0": 0.5}])
def beta_bernoulli(a0: Positive = 1.0, b0: Positive = 1.0) -> Posterior:
    """Conjugate Beta-Bernoulli family.

    The update adds the reward to alpha and ``1 - reward`` to beta of the pulled arm; the
    sample is an exact Beta draw per arm (``bayesfair.core._random.beta``): with prior shapes >= 1
    Cheng's (1978) algorithm BB (a shape of exactly 1 in closed form), otherwise a ratio of two
    gamma draws. A shape that falls below 1 under a prior >= 1 (rewards outside [0, 1]) gives NaN,
    which the simulator reports.

    Parameters
    ----------
    a0, b0 : float
        Prior Beta parameters, >= 1e-30 (:data:`MIN_SHAPE`). Shapes below 1 are exact too: where
        both gamma draws of X / (X + Y) underflow to 0 (Beta(0.01, 0.01) did in ~18% of draws,
        giving NaN), the ratio is taken in log space.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import bayesfair as bf
    >>> from bayesfair.posteriors.base import Outcome
    >>> post = bf.beta_bernoulli()                   # Beta(1, 1) on every arm
    >>> state = post.init(3)
    >>> for arm, reward in [(0, 1.0), (0, 0.0), (2, 1.0), (2, 1.0)]:
    ...     state = post.update(state, Outcome(jnp.float32(reward), arm=jnp.int32(arm)))
    >>> state.alpha.tolist(), state.beta.tolist()
    ([2.0, 1.0, 3.0], [2.0, 1.0, 1.0])
    >>> [round(float(m), 3) for m in post.mean(state)]
    [0.5, 0.5, 0.75]
    """
    a0, b0 = float(a0), float(b0)  # > 0: declared
    if min(a0, b0) < MIN_SHAPE:
        raise ValueError(f"a0 and b0 must be >= {MIN_SHAPE:g} (smaller Beta shapes underflow the float32 sampler), "
                         f"got a0={a0:g}, b0={b0:g}")
    # Counts only add to the prior, so with a0, b0 >= 1 every shape stays >= 1 (static choice).
    allow_small = min(a0, b0) < 1.0

    def init(size) -> BetaState:
        n_arms = init_size(size, "n_arms")
        return BetaState(jnp.full((n_arms,), a0, jnp.float32), jnp.full((n_arms,), b0, jnp.float32))

    def update(state: BetaState, obs: Outcome) -> BetaState:
        hit = jnp.arange(state.alpha.shape[0]) == obs.arm
        r = jnp.asarray(obs.reward, jnp.float32)
        return BetaState(state.alpha + hit * r, state.beta + hit * (1.0 - r))

    def sample(key: jax.Array, state: BetaState) -> jax.Array:
        if not allow_small:
            return _random.beta(key, state.alpha, state.beta, allow_small=False)
        return _beta_small_shapes(key, state.alpha, state.beta)

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
                     rewards="binary", observation=_bernoulli_observation(sample))


def _bernoulli_observation(sample) -> ObservationModel:
    """r | a ~ Bernoulli(mu_a): log p = log mu_a for r = 1, log(1 - mu_a) for r = 0."""

    def draw(key: jax.Array, state: BetaState) -> dict[str, jax.Array]:
        return {"mu": sample(key, state)}

    def log_density(params, obs: Outcome) -> jax.Array:
        mu = params["mu"][obs.arm]
        return jnp.where(jnp.asarray(obs.reward) > 0.5, jnp.log(mu), jnp.log1p(-mu))

    def replicate(key: jax.Array, params, obs: Outcome) -> jax.Array:
        mu = params["mu"][obs.arm]
        return (jax.random.uniform(key, jnp.shape(mu), jnp.result_type(mu)) < mu).astype(jnp.result_type(mu))

    return ObservationModel(draw, {"mu": ("arm",)}, log_density, replicate)


def _beta_small_shapes(key: jax.Array, a: jax.Array, b: jax.Array) -> jax.Array:
    """``_random.beta(key, a, b, allow_small=True)``, bit for bit, except where both gamma draws
    underflow to 0 (0 / 0 = NaN): there X / (X + Y) = sigmoid(log X - log Y) in log space.

    The same keys and operations as :func:`bayesfair.core._random.gamma`: X = G * U**(1/a) with
    G ~ Gamma(a + 1) for a < 1 (the boost), G ~ Gamma(a) otherwise; log X = log G + log(U) / a.
    """
    a, b = jnp.broadcast_arrays(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32))
    shape = jnp.stack([a, b])
    small = shape < 1.0
    invalid = ~(shape > 0.0) | ~jnp.isfinite(shape)
    base = _random.gamma(key, jnp.where(invalid, 1.0, jnp.where(small, shape + 1.0, shape)), allow_small=False)
    base = jnp.where(invalid, jnp.nan, base)
    k_boost = _random._split_gamma_key(key)[1]
    u = _random.uniform(k_boost, shape.shape, base.dtype, minval=jnp.finfo(base.dtype).tiny)  # [2, ...]: flat draw
    g = jnp.where(small, base * u ** (1.0 / shape), base)
    ratio = g[0] / (g[0] + g[1])
    log_g = jnp.log(base) + jnp.where(small, jnp.log(u) / jnp.where(small, shape, 1.0), 0.0)
    underflow = (g[0] + g[1] == 0.0) & jnp.isfinite(log_g[0]) & jnp.isfinite(log_g[1])
    return jnp.where(underflow, jax.nn.sigmoid(log_g[0] - log_g[1]), ratio)
