"""The posterior-family record shared by every Thompson-sampling policy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["Posterior", "fit"]


class Posterior(NamedTuple):
    """A per-arm posterior family: conjugate fast path plus its NumPyro reference model.

    Attributes
    ----------
    name : str
        Family name.
    init : callable
        ``init(n_arms) -> state``: the prior, as a pytree of ``[K]`` arrays.
    update : callable
        ``update(state, arm, reward) -> state``: one observation, O(1) (rank-one) work.
    sample : callable
        ``sample(key, state) -> mu [K]``: one exact joint posterior draw of the arm means.
    mean : callable
        ``mean(state) -> [K]``: posterior mean of each arm's mean reward.
    variance : callable
        ``variance(state) -> [K]``: posterior variance of each arm's mean reward.
    model : callable
        NumPyro model ``model(arms, rewards=None, *, n_arms)`` with the same prior and likelihood;
        its posterior over the site ``"mu"`` is what the conjugate path computes in closed form.
    params : dict
        Hyper-parameters (for result metadata).
    rewards : str
        The rewards the likelihood describes: ``"binary"`` (0/1; a policy built on it refuses an
        environment with other rewards, :mod:`bayesfair.compat`) or ``"real"``.
    """

    name: str
    init: Callable[[int], Any]
    update: Callable[[Any, jax.Array, jax.Array], Any]
    sample: Callable[[jax.Array, Any], jax.Array]
    mean: Callable[[Any], jax.Array]
    variance: Callable[[Any], jax.Array]
    model: Callable[..., None]
    params: dict[str, Any]
    rewards: str = "real"


def fit(posterior: Posterior, n_arms: int, arms: jax.Array, rewards: jax.Array) -> Any:
    """Posterior state after observing ``(arms[i], rewards[i])`` in order, by repeated updates."""
    arms = jnp.asarray(arms, jnp.int32)
    rewards = jnp.asarray(rewards, jnp.float32)

    def step(state, ar):
        return posterior.update(state, ar[0], ar[1]), None

    state, _ = lax.scan(step, posterior.init(n_arms), (arms, rewards))
    return state
