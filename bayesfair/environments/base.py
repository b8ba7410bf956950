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
        ``reset(key) -> params``: per-run parameters (e.g. arm means drawn afresh per run). An
        environment of explicit per-run instances (run r plays row r of given arrays: means,
        theta, beta/psi, mu*) has ``reset(key, run)`` instead and carries the attributes
        ``reset.runs`` (the number of rows) and ``reset.instances_of`` (the parameter's name, for
        errors); the simulator then passes the run index and checks that the study has exactly
        ``runs`` runs (:func:`bayesfair.simulate.reset_run`, :func:`bayesfair.simulate.check_instances`;
        :func:`bayesfair.environments.arms.per_run_reset` builds the row lookup).
    step : callable
        ``step(key, params, t) -> Round``: the round-t contexts, the reward every candidate
        would return, and every candidate's expected reward. It depends only on its key, so
        every compared policy sees the same draws (regret differences are paired).
    arm_means : callable
        ``arm_means(params) -> [K]`` for multi-armed environments (recorded in results).
    name : str
    config : dict
    pull : callable, optional
        ``pull(key, params, t, action) -> reward``: the reward of one candidate, equal to
        ``step(key, params, t).reward[action]`` bit for bit (same key, same draw). Environments
        whose candidates draw their rewards from per-candidate keys offer it so that the simulator
        draws only the pulled candidate's reward (O(1) instead of O(K) random numbers per round)
        while every policy still sees the same counterfactual draws. ``None``: the simulator
        indexes ``step(...).reward``.
    """

    spec: Spec
    groups: Groups
    reset: Callable[[jax.Array], Any]
    step: Callable[[jax.Array, Any, jax.Array], Round]
    arm_means: Callable[[Any], jax.Array]
    name: str = "environment"
    config: dict[str, Any] = {}
    pull: Callable[[jax.Array, Any, jax.Array, jax.Array], jax.Array] | None = None
