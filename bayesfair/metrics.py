"""Regret and exposure metrics: pure per-round functions and an online accumulator.

FairX paper (fairness_of_exposure_fairx_icml2021), Section 3.1 and 4.1:

- fairness regret FR_T = sum_t ||pi*_t - pi_t||_1            (Eq. 2 / Eq. 6)
- reward regret   RR_T = sum_t (pi*_t . mu_t - pi_t . mu_t)   (Eq. 1 / Eq. 5; can be negative)
- conventional regret    sum_t (max_a mu_t,a - pi_t . mu_t)
- exposure per arm sum_t pi_t(a), pulls per arm, and the realized reward.

All are sums over rounds, so they accumulate online in O(K) memory whatever the horizon; the
simulator keeps a float32 accumulator per chunk of rounds and adds the chunk totals into float64
on the host, so long horizons do not lose precision.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "FairnessMetrics",
    "SCALAR_METRICS",
    "ARM_METRICS",
    "init_metrics",
    "update_metrics",
    "fairness_regret_step",
    "reward_regret_step",
    "regret_step",
    "group_sums",
]

SCALAR_METRICS = ("fairness_regret", "reward_regret", "regret", "reward")
ARM_METRICS = ("exposure", "pulls")


class FairnessMetrics(NamedTuple):
    """Cumulative metrics of one run: scalars and ``[K]`` per-arm sums."""

    fairness_regret: jax.Array
    reward_regret: jax.Array
    regret: jax.Array
    reward: jax.Array
    exposure: jax.Array
    pulls: jax.Array


def fairness_regret_step(pi_star: jax.Array, pi: jax.Array) -> jax.Array:
    """||pi* - pi||_1, the per-round term of Eq. (2)."""
    return jnp.sum(jnp.abs(pi_star - pi), axis=-1)


def reward_regret_step(pi_star: jax.Array, pi: jax.Array, mean: jax.Array) -> jax.Array:
    """pi* . mu - pi . mu, the per-round term of Eq. (1)."""
    return jnp.sum((pi_star - pi) * mean, axis=-1)


def regret_step(pi: jax.Array, mean: jax.Array) -> jax.Array:
    """max_a mu_a - pi . mu, the per-round conventional (pseudo-)regret."""
    return jnp.max(mean, axis=-1) - jnp.sum(pi * mean, axis=-1)


def init_metrics(n_arms: int) -> FairnessMetrics:
    z = jnp.zeros((), jnp.float32)
    zk = jnp.zeros((n_arms,), jnp.float32)
    return FairnessMetrics(z, z, z, z, zk, zk)


def update_metrics(
    acc: FairnessMetrics,
    pi_star: jax.Array,
    pi: jax.Array,
    mean: jax.Array,
    action: jax.Array,
    reward: jax.Array,
) -> FairnessMetrics:
    """Add one round to the accumulator."""
    hit = (jnp.arange(pi.shape[-1]) == action).astype(jnp.float32)
    return FairnessMetrics(
        acc.fairness_regret + fairness_regret_step(pi_star, pi),
        acc.reward_regret + reward_regret_step(pi_star, pi, mean),
        acc.regret + regret_step(pi, mean),
        acc.reward + reward,
        acc.exposure + pi,
        acc.pulls + hit,
    )


def group_sums(per_arm: np.ndarray, group_of_arm: np.ndarray, n_groups: int) -> np.ndarray:
    """Sum a ``[..., K]`` array over the arms of each group -> ``[..., m]``."""
    member = np.eye(n_groups)[np.asarray(group_of_arm)]
    return per_arm @ member
