"""Conventional (fairness-unaware) baselines: UCB1, Thompson sampling, epsilon-greedy, uniform.

These are the comparison policies of the FairX experiments (Section 5.1). Where a policy's
choice is deterministic given its statistics, pi_t is the uniform distribution over the tied
maximizers (ties broken at random, never by index); for Thompson sampling pi_t is the one-hot
argmax of the posterior draw, i.e. the policy conditional on the draw, exactly as FairX-TS's
pi_t is conditional on its draw.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bayesfair.core import _random
from bayesfair.core._validate import finite_float
from bayesfair.core.compat import bounded_requires
from bayesfair.core.declare import Positive, Unit, declare
from bayesfair.core.types import Observation, Spec
from bayesfair.policies.base import CountState, Policy, empirical_mean, init_counts, posterior_requires, update_counts
from bayesfair.policies.compose import argmax_rule, epsilon_mixture, posterior_sampling
from bayesfair.posteriors.base import Posterior

__all__ = ["ucb1", "thompson", "epsilon_greedy", "uniform"]


def _count_policy(select, name: str, requires: dict | None = None) -> Policy:
    def init(key: jax.Array, spec: Spec) -> CountState:
        return init_counts(spec.n_arms)

    def update(state: CountState, obs: Observation, action: jax.Array, reward: jax.Array) -> CountState:
        return update_counts(state, action, reward)

    return Policy(init, select, update, name, requires=requires)


def _argmax_policy(key: jax.Array, index: jax.Array):
    probs = _random.argmax_set(index)
    return _random.categorical(key, probs), probs


@declare("policy", example=[{}, {"w0": 0.3}])
def ucb1(*, w0: Positive | None = None) -> Policy:
    """UCB1 (Auer et al., 2002): argmax of mu_hat + sqrt(2 ln t / N); arms never pulled first.

    With ``w0`` given, the index is mu_hat + w0 / sqrt(N), the UCB variant whose width the FairX
    experiments tune (Section 5.1).
    """
    w0 = None if w0 is None else float(w0)  # range checked by the declaration

    def select(key: jax.Array, state: CountState, obs: Observation):
        n = jnp.maximum(state.n, 1.0)
        t = jnp.asarray(obs.t, jnp.float32)
        width = w0 * jax.lax.rsqrt(n) if w0 is not None else jnp.sqrt(2.0 * jnp.log(jnp.maximum(t, 1.0)) / n)
        index = jnp.where(state.n > 0, empirical_mean(state, 0.0) + width, jnp.inf)
        action, probs = _argmax_policy(key, index)
        return action, probs, {"index": index}

    # sqrt(2 ln t / N) is Hoeffding's width for rewards in [0, 1] (Auer et al., 2002)
    return _count_policy(select, "UCB", bounded_requires(0.0, 1.0, "UCB1"))


@declare("policy", example={"posterior": "beta_bernoulli"})
def thompson(posterior: Posterior) -> Policy:
    """Thompson sampling: play the argmax of one posterior draw (ties at random).

    Examples
    --------
    >>> import bayesfair as bf
    >>> bf.thompson(bf.beta_bernoulli()).label
    'TS'
    """
    if not isinstance(posterior, Posterior):
        raise TypeError(f"posterior must be a bayesfair Posterior, got {posterior!r}")
    return posterior_sampling(posterior, argmax_rule, "TS", requires=posterior_requires(posterior, "TS"))


@declare("policy", example={"epsilon": 0.1})
def epsilon_greedy(*, epsilon: Unit = 0.05, initial_estimate: float = 0.5) -> Policy:
    """Epsilon-greedy: pi_t = epsilon / K + (1 - epsilon) * uniform over argmax mu_hat."""
    init_est = finite_float("initial_estimate", initial_estimate)
    return epsilon_mixture(argmax_rule, epsilon, init_est, "EG")  # epsilon's range: declared


@declare("policy")
def uniform() -> Policy:
    """Uniform random choice: pi_t(a) = 1 / K."""

    def select(key: jax.Array, state: CountState, obs: Observation):
        probs = jnp.full(state.n.shape, 1.0 / state.n.shape[0])
        return _random.categorical(key, probs), probs, {}

    return _count_policy(select, "Uniform")
