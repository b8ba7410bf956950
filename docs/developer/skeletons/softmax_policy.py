"""Softmax exploration over empirical means: a copyable skeleton of a bayesfair policy module.

Copy this file into ``bayesfair/policies/`` (or any importable package), rename the function and
its declared name, and replace ``select``/``update``. Nothing else needs editing: the
``@declare`` decorator registers the policy for study configs, ``bayesfair list`` and saved-policy
recipes; its parameter specs check Python calls and config values (with the field and range in
the message); the policy's recorded ``config`` is derived from the call's arguments; and the
registry-driven contract test (``tests/test_contract.py``) runs it on the declared ``example``.
"""

from __future__ import annotations

import jax

from bayesfair.core import _random
from bayesfair.core.declare import Positive, declare
from bayesfair.core.types import Observation, Spec
from bayesfair.policies.base import CountState, Policy, empirical_mean, init_counts, update_counts

__all__ = ["softmax"]


@declare("policy", example=[{}, {"temperature": 0.05}])
def softmax(*, temperature: Positive = 0.1, initial_estimate: float = 0.5) -> Policy:
    """Softmax (Boltzmann) exploration: pi_t(a) proportional to exp(mu_hat_a / temperature).

    Parameters
    ----------
    temperature : float
        tau > 0; small values approach greedy play, large ones uniform play.
    initial_estimate : float
        mu_hat of arms never pulled.
    """
    # temperature > 0 is already checked by the declaration; constructor-specific checks go here.
    tau, init_est = float(temperature), float(initial_estimate)

    def init(key: jax.Array, spec: Spec) -> CountState:
        return init_counts(spec.n_arms)

    def select(key: jax.Array, state: CountState, obs: Observation):
        mu_hat = empirical_mean(state, init_est)
        probs = jax.nn.softmax(mu_hat / tau)
        return _random.categorical(key, probs), probs, {"mu": mu_hat}

    def update(state: CountState, obs: Observation, action: jax.Array, reward: jax.Array) -> CountState:
        return update_counts(state, action, reward)

    # the label; @declare records name="softmax" and params={"temperature": ..., "initial_estimate": ...}
    return Policy(init, select, update, "Softmax")
