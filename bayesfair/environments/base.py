"""The environment record: a per-run parameter draw and a per-round counterfactual draw."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from bayesfair.groups import Groups
from bayesfair.types import Round, Spec

__all__ = ["Environment"]


class Environment(NamedTuple):
    """A stochastic bandit environment with common random numbers.

    Attributes
    ----------
    spec : Spec
        Static problem description handed to the policies.
    groups : Groups
        Arm -> group structure (for group exposure).
    reset : callable
        ``reset(key) -> params``: per-run parameters (e.g. arm means drawn afresh per run).
    step : callable
        ``step(key, params, t) -> Round``: the round-t contexts, the reward every candidate
        would return, and every candidate's expected reward. It depends only on its key, so
        every compared policy sees the same draws (regret differences are paired).
    arm_means : callable
        ``arm_means(params) -> [K]`` for multi-armed environments (recorded in results).
    name : str
    config : dict
    """

    spec: Spec
    groups: Groups
    reset: Callable[[jax.Array], Any]
    step: Callable[[jax.Array, Any, jax.Array], Round]
    arm_means: Callable[[Any], jax.Array]
    name: str = "environment"
    config: dict[str, Any] = {}
