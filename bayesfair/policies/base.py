"""The policy record and the empirical-mean state shared by the frequentist policies."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core.types import Observation, Spec
from bayesfair.posteriors.base import prior_marker

__all__ = ["Policy", "CountState", "init_counts", "update_counts", "empirical_mean", "posterior_requires",
           "check_select"]


class _PolicyFields(NamedTuple):
    init: Callable[[jax.Array, Spec], Any]
    select: Callable[[jax.Array, Any, Observation], tuple[jax.Array, jax.Array, dict]]
    update: Callable[[Any, Observation, jax.Array, jax.Array], Any]
    label: str = "policy"
    params: dict[str, Any] = {}
    requires: dict[str, Any] = {}
    name: str | None = None


# Nested in another jit (the simulator's scan), the policy's jitted functions are inlined into the
# caller's trace, so the simulator's program is exactly what it was before they were jitted.
_INLINE: Any = getattr(getattr(jax, "Inline", None), "JAX_EARLY", True)


def _is_jitted(fn: Any) -> bool:
    """True for the output of :func:`jax.jit` (a function that compiles once per input signature)."""
    return isinstance(fn, jax.stages.Wrapped) and callable(getattr(fn, "lower", None))


def _jit(fn: Any, what: str) -> Any:
    if not callable(fn):
        raise TypeError(f"Policy.{what} must be callable, got {type(fn).__name__}")
    return fn if _is_jitted(fn) else jax.jit(fn, inline=_INLINE)


class Policy(_PolicyFields):
    """A bandit policy as three pure functions over a pytree state.

    ``select`` and ``update`` are wrapped in :func:`jax.jit` when the record is built (unless they
    already are jitted), so stepping a policy by hand in a Python loop compiles each of them once
    per input signature instead of dispatching op by op; inside the simulator's own jit they are
    inlined, so the simulated numbers do not change. ``init`` stays a plain function: it takes
    the static :class:`~bayesfair.core.types.Spec`.

    Attributes
    ----------
    init : callable
        ``init(key, spec: Spec) -> state``.
    select : callable
        ``select(key, state, obs: Observation) -> (action, probs, info)``: ``action`` is an
        int32 scalar in ``0..K-1``, ``probs`` the full selection distribution pi_t ``[K]`` (float)
        the action was drawn from (one-hot for deterministic choices; so ``probs[action] > 0``),
        ``info`` a dict of extra arrays. Jitted. The simulator checks the shapes and dtypes once,
        when it traces the policy (:func:`check_select`), and the values every round (an error
        names the policy, the run and the round).
    update : callable
        ``update(state, obs, action, reward) -> state``. Jitted.
    label : str
        Display name (e.g. ``"FairX-UCB"``): what tables, progress bars and messages show.
    params : dict
        The hyperparameters, JSON-friendly (written into result files and saved policies). For a
        policy built by a declared constructor they are its arguments, nested kinds (merit,
        posterior) as tables ``{"name": ..., **params}``: ``{"name": name, **params}`` is the
        config table that rebuilds it (:func:`bayesfair.workflow.registry.build`).
    requires : dict
        What the policy assumes of the environment's rewards, checked before every simulation
        (:mod:`bayesfair.core.compat`): ``{}`` (any real reward), ``{"rewards": "binary", "because":
        ...}`` or ``{"rewards": "bounded", "reward_range": [lo, hi], "because": ...}``; and
        ``"max_horizon"`` (with ``"because_horizon"``) for a policy whose state holds at most that
        many rounds (a longer study is refused).
    name : str or None
        The registry key of the declared constructor that built it (``"fairx_ucb"``), set by
        :func:`bayesfair.core.declare.declare`; ``None`` for a policy assembled by hand.
    """

    __slots__ = ()

    def __new__(cls, init: Callable[[jax.Array, Spec], Any],
                select: Callable[[jax.Array, Any, Observation], tuple[jax.Array, jax.Array, dict]],
                update: Callable[[Any, Observation, jax.Array, jax.Array], Any],
                label: str = "policy", params: dict[str, Any] = {},  # noqa: B006 (the field default)
                requires: dict[str, Any] | None = None, name: str | None = None) -> Policy:
        return super().__new__(cls, init, _jit(select, "select"), _jit(update, "update"), label, params,
                               dict(requires or {}), name)

    @classmethod
    def _make(cls, iterable: Any) -> Policy:  # used by _replace: jit replaced functions too
        return cls(*iterable)


def _dtype(x: Any) -> Any:
    """The dtype of an array (traced or concrete) or of a Python number; None for anything else."""
    if isinstance(x, (bool, int, float, complex)):
        return np.asarray(x).dtype
    return getattr(x, "dtype", None)


def _kind(x: Any) -> str:
    """``dtype float32 shape (3,)`` of an array or a Python number, else ``a <type>``."""
    dtype = _dtype(x)
    if dtype is None:
        return f"a {type(x).__name__}"
    return f"dtype {dtype} shape {tuple(np.shape(x))}"


def check_select(out: Any, n_arms: int, who: str) -> tuple[Any, Any, Any]:
    """The outputs of a policy's ``select`` as documented (:class:`Policy`), checked on their
    shapes and dtypes (so at trace time, once per compiled program): ``(action, probs, info)``
    with ``action`` an integer scalar, ``probs`` a float vector ``[n_arms]`` (one entry per
    candidate of the round) and ``info`` a dict (or None). Returns the three outputs.

    ``who`` names the policy in the messages (e.g. ``"policy 'mine'"``). Raises TypeError for a
    wrong dtype or type, ValueError for a wrong shape. The values (an action in ``0..n_arms-1``,
    pi_t a probability vector with mass on the action) are known only once computed: the
    simulator checks them every round.
    """
    if not isinstance(out, tuple) or len(out) != 3:
        got = f"a tuple of {len(out)}" if isinstance(out, tuple) else _kind(out)
        raise TypeError(f"{who} select returned {got}; expected a tuple (action, probs, info)")
    action, probs, info = out
    for what, x, kind, shape, expected in (
            ("an action", action, jnp.integer, (), "an integer scalar (the arm index)"),
            ("probs", probs, jnp.floating, (n_arms,),
             f"a float vector of shape ({n_arms},) (pi_t, one probability per candidate)")):
        dtype = _dtype(x)
        if dtype is None or not jnp.issubdtype(dtype, kind):
            raise TypeError(f"{who} select returned {what} of {_kind(x)}; expected {expected}")
        if tuple(np.shape(x)) != shape:
            raise ValueError(f"{who} select returned {what} of {_kind(x)}; expected {expected}")
    if info is not None and not isinstance(info, Mapping):
        raise TypeError(f"{who} select returned info of {_kind(info)}; expected a dict of arrays (or None)")
    return action, probs, info


class CountState(NamedTuple):
    """Pull counts ``n`` and reward sums ``total`` per arm, ``[K]`` each."""

    n: jax.Array
    total: jax.Array


def init_counts(n_arms: int) -> CountState:
    return CountState(jnp.zeros((n_arms,), jnp.float32), jnp.zeros((n_arms,), jnp.float32))


def update_counts(state: CountState, action: jax.Array, reward: jax.Array) -> CountState:
    hit = (jnp.arange(state.n.shape[0]) == action).astype(jnp.float32)
    return CountState(state.n + hit, state.total + hit * reward)


def empirical_mean(state: CountState, initial: float | jax.Array) -> jax.Array:
    """mu_hat_a = total_a / N_a, and ``initial`` for arms never pulled."""
    return jnp.where(state.n > 0, state.total / jnp.maximum(state.n, 1.0), initial)



def posterior_requires(posterior: Any, what: str) -> dict[str, Any]:
    """The requirement of a policy built on ``posterior``: binary rewards for a 0/1 likelihood, and
    always ``"prior"``, the posterior's prior marker, which :func:`bayesfair.simulate` compares with
    the environment's instance distribution (:mod:`bayesfair.environments.prior`)."""
    out: dict[str, Any] = {"prior": prior_marker(posterior)}
    if getattr(posterior, "rewards", "real") == "binary":
        out.update(rewards="binary", because=f"{what} uses the {posterior.name} posterior (a 0/1 likelihood)")
    return out
