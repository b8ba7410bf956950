"""The environment record: a per-run parameter draw and a per-round counterfactual draw."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core._compile import TraceCache, enable_persistent_cache
from bayesfair.core._validate import as_key
from bayesfair.core.groups import Groups
from bayesfair.core.types import Round, Spec

__all__ = ["Environment", "reset_run", "check_instances", "run_means", "run_means_blocks"]

_MEANS_FNS = TraceCache(maxsize=16)  # jitted per-run arm means of recent environments, see run_means


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
        ``runs`` runs (:func:`reset_run`, :func:`check_instances`;
        :func:`bayesfair.environments.arms.per_run_reset` builds the row lookup).
    step : callable
        ``step(key, params, t) -> Round``: the round-t contexts, the reward every candidate
        would return, and every candidate's expected reward. It depends only on its key, so
        every compared policy sees the same draws (regret differences are paired).
    arm_means : callable
        ``arm_means(params) -> [K]`` for multi-armed environments (recorded in results).
    label : str
        Display name (e.g. ``"bernoulli_arms"``, ``"yeast_mab_train"``).
    params : dict
        The instance's parameters, JSON-friendly (recorded in result files): what it was built
        with and what it derived (e.g. ``means``, ``theta``, ``label_means``, ``groups``).
    pull : callable, optional
        ``pull(key, params, t, action) -> reward``: the reward of one candidate, equal to
        ``step(key, params, t).reward[action]`` bit for bit (same key, same draw). Environments
        whose candidates draw their rewards from per-candidate keys offer it so that the simulator
        draws only the pulled candidate's reward (O(1) instead of O(K) random numbers per round)
        while every policy still sees the same counterfactual draws. ``None``: the simulator
        indexes ``step(...).reward``.
    name : str or None
        The registry key of the declared constructor that built it (``"bernoulli_arms"``), set by
        :func:`bayesfair.core.declare.declare`; ``None`` for an environment assembled otherwise.
    """

    spec: Spec
    groups: Groups
    reset: Callable[[jax.Array], Any]
    step: Callable[[jax.Array, Any, jax.Array], Round]
    arm_means: Callable[[Any], jax.Array]
    label: str = "environment"
    params: dict[str, Any] = {}
    pull: Callable[[jax.Array, Any, jax.Array, jax.Array], jax.Array] | None = None
    name: str | None = None


def reset_run(env: Environment, key: jax.Array, run: jax.Array) -> Any:
    """Run ``run``'s parameters: ``env.reset(key)``, or ``env.reset(key, run)`` for an environment
    of explicit per-run instances (its reset carries ``runs``; run r plays row r)."""
    if getattr(env.reset, "runs", None) is not None:
        return env.reset(key, run)
    return env.reset(key)


def check_instances(env: Environment, runs: int) -> None:
    """An environment of explicit per-run instances needs exactly as many runs as it has rows."""
    rows = getattr(env.reset, "runs", None)
    if rows is not None and rows != runs:
        raise ValueError(f"the environment's {env.reset.instances_of} holds {rows} per-run instances (rows); "
                         f"the study must have runs = {rows}, got runs = {runs}")


def run_means(env: Environment, key: Any, runs: int) -> np.ndarray:
    """``[R, K]`` arm means of every run, exactly as :func:`bayesfair.simulate` draws them for ``key``."""
    enable_persistent_cache()  # study loaders and metric checks call this before any simulate call
    k_env, _ = jax.random.split(as_key(key))
    env_keys = jax.random.split(k_env, runs)
    check_instances(env, runs)
    return np.asarray(_means_fn(env)(env_keys, jnp.arange(runs, dtype=jnp.int32)), np.float64)


def _means_fn(env: Environment) -> Callable:
    # one jitted function per environment, reused by later calls (simulate's pre-flight check calls
    # this every time: rebuilding it re-traced and re-lowered it, 0.12 s of a 1.0 s BF-UCB study)
    draw, _ = _MEANS_FNS.get(("run_means", env), lambda: jax.jit(jax.vmap(
        lambda k, r: env.arm_means(reset_run(env, jax.random.split(k)[0], r)))))
    return draw


#: Run means drawn at a time by :func:`run_means_blocks` (float64 elements: 128 MiB).
BLOCK_ELEMENTS = 1 << 24


def run_means_blocks(env: Environment, key: Any, runs: int, max_elements: int = BLOCK_ELEMENTS) -> Iterator[
        tuple[int, np.ndarray]]:
    """``(first run, [B, K] arm means)`` of every run in blocks of at most ``max_elements`` values,
    the same numbers as :func:`run_means` without holding all ``R x K`` of them: a check of every
    run's means needs O(block) memory whatever the study's size. Every block but the last has the
    same number of runs; the last is padded to it (one compiled program) and cut back."""
    enable_persistent_cache()
    check_instances(env, runs)
    k_env, _ = jax.random.split(as_key(key))
    env_keys = jax.random.split(k_env, runs)  # R keys: 8 bytes per run
    block = max(1, min(runs, max_elements // max(env.spec.n_arms, 1)))
    draw = _means_fn(env)
    for first in range(0, runs, block):
        n = min(block, runs - first)
        idx = np.minimum(np.arange(first, first + block), runs - 1).astype(np.int32)  # padded with the last run
        yield first, np.asarray(draw(env_keys[idx], jnp.asarray(idx)), np.float64)[:n]
