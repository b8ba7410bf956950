"""Settings and histories of the MCMC fallback (:mod:`bayesfair.posteriors.mcmc`, which re-exports them).

:class:`NUTSSettings` says how a fallback posterior refreshes; a :class:`History` says how a family
stores the data its NumPyro model conditions on, with static shapes (per-arm counts, or a masked
ring buffer of arms or contexts). The module docstring of :mod:`bayesfair.posteriors.mcmc`
describes how the engine uses them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from bayesfair._validate import finite_float, float_in, positive_int

__all__ = ["NUTSSettings", "History", "ArmCounts", "ArmBuffer", "ContextBuffer", "arm_counts", "arm_buffer",
           "context_buffer"]


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class NUTSSettings:
    """How the fallback refreshes its posterior (validated by :meth:`create`).

    Attributes
    ----------
    refresh_every : int
        B >= 1: refresh after every B-th observation (n % B == 0).
    num_warmup : int
        Adaptation steps per refresh and chain (>= 0). Mass-matrix windows need >= 20.
    num_samples : int
        Stored draws per chain (>= 1); TS draws one of the ``num_chains * num_samples`` at random.
    num_chains : int
        Chains per refresh (>= 1), vmapped; >= 2 makes R-hat meaningful.
    max_tree_depth : int
        NUTS tree depth limit in [1, 15] (at most 2^depth leapfrog steps per draw). Under ``vmap``
        every run waits for the deepest tree, so a moderate limit bounds the refresh cost.
    target_accept : float
        Dual-averaging target acceptance probability in (0, 1).
    adapt_mass_matrix : bool
        Re-estimate the diagonal inverse mass matrix in the warmup windows.
    init_radius : float
        First refresh: chains start uniformly in [-r, r] of the unconstrained space (> 0).
    init_step_size : float
        First refresh's initial step size (> 0); later refreshes start from the previous one.
    seed : int
        Seed of the key the state carries (>= 0).
    """

    refresh_every: int = 100
    num_warmup: int = 100
    num_samples: int = 100
    num_chains: int = 1
    max_tree_depth: int = 8
    target_accept: float = 0.8
    adapt_mass_matrix: bool = True
    init_radius: float = 1.0
    init_step_size: float = 0.5
    seed: int = 0

    @classmethod
    def create(cls, **kw: Any) -> NUTSSettings:
        """Validated settings; unknown names raise a TypeError listing the allowed ones."""
        allowed = set(cls.__dataclass_fields__)
        unknown = set(kw) - allowed
        if unknown:
            raise TypeError(f"unknown MCMC setting(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        s = cls(**kw)
        positive_int("refresh_every", s.refresh_every)
        positive_int("num_warmup", s.num_warmup, minimum=0)
        positive_int("num_samples", s.num_samples)
        positive_int("num_chains", s.num_chains)
        depth = positive_int("max_tree_depth", s.max_tree_depth)
        if depth > 15:
            raise ValueError(f"max_tree_depth must be in [1, 15], got {depth}")
        float_in("target_accept", s.target_accept, 0.0, 1.0, low_open=True, high_open=True)
        if not isinstance(s.adapt_mass_matrix, bool):
            raise TypeError(f"adapt_mass_matrix must be a bool, got {s.adapt_mass_matrix!r}")
        for name in ("init_radius", "init_step_size"):
            if finite_float(name, getattr(s, name)) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(s, name)}")
        positive_int("seed", s.seed, minimum=0)
        return cls(**{**asdict(s), "target_accept": float(s.target_accept),
                      "init_radius": float(s.init_radius), "init_step_size": float(s.init_step_size)})


# --------------------------------------------------------------------------- histories


class History(NamedTuple):
    """How a family stores the data its NumPyro model conditions on (static shapes).

    Attributes
    ----------
    name : str
    init : callable
        ``init(size) -> history`` for K arms (or d features).
    append : callable
        ``append(history, item, reward) -> history``; ``item`` is the arm index or the context.
    model_inputs : callable
        ``model_inputs(history, size) -> (args, kwargs, static)``: array arguments and keyword
        arguments of the model, and static (Python) keyword arguments.
    params : dict
        JSON-friendly description.
    """

    name: str
    init: Callable[[int], Any]
    append: Callable[[Any, Any, Any], Any]
    model_inputs: Callable[[Any, int], tuple[tuple, dict, dict]]
    params: dict[str, Any]


class ArmCounts(NamedTuple):
    """Per-arm ``successes`` and ``trials`` ``[K]`` (float32, exact below 2^24)."""

    successes: jax.Array
    trials: jax.Array


class ArmBuffer(NamedTuple):
    """Ring buffer of pulled ``arms`` ``[C]`` int32 and ``rewards`` ``[C]``; ``count`` observations seen."""

    arms: jax.Array
    rewards: jax.Array
    count: jax.Array


class ContextBuffer(NamedTuple):
    """Ring buffer of contexts ``x`` ``[C, d]`` and rewards ``y`` ``[C]``; ``count`` observations seen."""

    x: jax.Array
    y: jax.Array
    count: jax.Array


def arm_counts() -> History:
    """Success and trial counts per arm: the exact sufficient statistic of a Bernoulli likelihood.

    The model is called as ``model(successes [K], trials [K])`` and must use a binomial-type
    likelihood (rewards are taken as 0/1 successes; fractional rewards add fractional successes).
    """

    def init(size: int) -> ArmCounts:
        return ArmCounts(jnp.zeros((size,), jnp.float32), jnp.zeros((size,), jnp.float32))

    def append(h: ArmCounts, arm: jax.Array, reward: jax.Array) -> ArmCounts:
        hit = (jnp.arange(h.trials.shape[0]) == arm).astype(jnp.float32)
        return ArmCounts(h.successes + hit * jnp.asarray(reward, jnp.float32), h.trials + hit)

    def model_inputs(h: ArmCounts, size: int):
        return (h.successes, h.trials), {}, {}

    return History("arm_counts", init, append, model_inputs, {"history": "arm_counts"})


def _ring_mask(count: jax.Array, capacity: int) -> jax.Array:
    return jnp.arange(capacity) < jnp.minimum(count, capacity)


def arm_buffer(capacity: int) -> History:
    """The last ``capacity`` (arm, reward) pairs, masked: ``model(arms, rewards, *, n_arms, mask)``."""
    capacity = positive_int("capacity", capacity)

    def init(size: int) -> ArmBuffer:
        return ArmBuffer(jnp.zeros((capacity,), jnp.int32), jnp.zeros((capacity,), jnp.float32),
                         jnp.zeros((), jnp.int32))

    def append(h: ArmBuffer, arm: jax.Array, reward: jax.Array) -> ArmBuffer:
        i = h.count % capacity
        return ArmBuffer(h.arms.at[i].set(jnp.asarray(arm, jnp.int32)),
                         h.rewards.at[i].set(jnp.asarray(reward, jnp.float32)), h.count + 1)

    def model_inputs(h: ArmBuffer, size: int):
        return (h.arms, h.rewards), {"mask": _ring_mask(h.count, capacity)}, {"n_arms": size}

    return History("arm_buffer", init, append, model_inputs, {"history": "arm_buffer", "capacity": capacity})


def context_buffer(capacity: int) -> History:
    """The last ``capacity`` (context, reward) pairs, masked: ``model(X [C, d], y [C], *, mask)``."""
    capacity = positive_int("capacity", capacity)

    def init(size: int) -> ContextBuffer:
        return ContextBuffer(jnp.zeros((capacity, size), jnp.float32), jnp.zeros((capacity,), jnp.float32),
                             jnp.zeros((), jnp.int32))

    def append(h: ContextBuffer, x: jax.Array, reward: jax.Array) -> ContextBuffer:
        i = h.count % capacity
        return ContextBuffer(h.x.at[i].set(jnp.asarray(x, jnp.float32)),
                             h.y.at[i].set(jnp.asarray(reward, jnp.float32)), h.count + 1)

    def model_inputs(h: ContextBuffer, size: int):
        return (h.x, h.y), {"mask": _ring_mask(h.count, capacity)}, {}

    return History("context_buffer", init, append, model_inputs,
                   {"history": "context_buffer", "capacity": capacity})
