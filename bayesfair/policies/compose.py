"""Policies composed from an estimator and a selection rule.

Several policies of the papers share their estimator and differ only in how they turn an estimate
of the arm means into the selection distribution pi_t:

- **posterior sampling**: draw mu_t from the posterior, then select by a rule: the argmax
  (Thompson sampling) or the fair share f(mu_t) / sum f(mu_t) (FairX-TS, Algorithm 2);
- **epsilon mixtures of the empirical means**: pi_t = epsilon / K + (1 - epsilon) target(mu_hat),
  with the target the uniform distribution over the argmax set (epsilon-greedy) or the fair share
  (FairX-EG, Section 5.1).

A rule is a function of the estimate; these builders supply the rest (state, update, keys), so a
new rule is one function, as an optax transformation is one function chained with others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from bayesfair.core import _random
from bayesfair.core.merit import Merit, fair_policy
from bayesfair.core.types import Observation, Spec
from bayesfair.policies.base import CountState, Policy, empirical_mean, init_counts, update_counts
from bayesfair.posteriors.base import Outcome, Posterior

__all__ = ["argmax_rule", "fair_share_rule", "posterior_sampling", "epsilon_mixture"]

#: ``rule(mu [K]) -> pi [K]``: a selection distribution from an estimate of the arm means
Rule = Callable[[jax.Array], jax.Array]


def argmax_rule(mu: jax.Array) -> jax.Array:
    """Uniform over the argmax set of ``mu`` (ties broken at random, not by index)."""
    return _random.argmax_set(mu)


def fair_share_rule(merit: Merit) -> Rule:
    """pi(a) = f(mu_a) / sum_b f(mu_b), the optimal fair policy of FairX Theorem 3.1.1."""
    return lambda mu: fair_policy(merit, mu)


def posterior_sampling(posterior: Posterior, rule: Rule, name: str, requires: dict[str, Any] | None = None) -> Policy:
    """Draw mu_t ~ posterior (one key), pi_t = rule(mu_t), a_t ~ pi_t (another key), then update the
    posterior with the pulled arm's reward."""

    def init(key: jax.Array, spec: Spec) -> Any:
        return posterior.init(spec.n_arms)

    def select(key: jax.Array, state: Any, obs: Observation):
        k_mu, k_arm = jax.random.split(key)
        mu = posterior.sample(k_mu, state)
        probs = rule(mu)
        return _random.categorical(k_arm, probs), probs, {"mu": mu}

    def update(state: Any, obs: Observation, action: jax.Array, reward: jax.Array) -> Any:
        return posterior.update(state, Outcome(reward, arm=action))

    return Policy(init, select, update, name, requires=requires)


def epsilon_mixture(rule: Rule, epsilon: float, initial_estimate: float, name: str,
                    requires: dict[str, Any] | None = None) -> Policy:
    """pi_t = epsilon / K + (1 - epsilon) rule(mu_hat) over the empirical means (arms never pulled:
    ``initial_estimate``), a_t ~ pi_t."""
    eps, init_est = float(epsilon), float(initial_estimate)

    def init(key: jax.Array, spec: Spec) -> CountState:
        return init_counts(spec.n_arms)

    def select(key: jax.Array, state: CountState, obs: Observation):
        mu_hat = empirical_mean(state, init_est)
        probs = eps / mu_hat.shape[0] + (1.0 - eps) * rule(mu_hat)
        return _random.categorical(key, probs), probs, {"mu": mu_hat}

    def update(state: CountState, obs: Observation, action: jax.Array, reward: jax.Array) -> CountState:
        return update_counts(state, action, reward)

    return Policy(init, select, update, name, requires=requires)
