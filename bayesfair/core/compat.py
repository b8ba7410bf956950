"""Does a policy fit an environment? Checked before any round is played.

Every environment states the kind of reward it returns (``Spec.rewards``): ``"binary"`` (0 or
1: Bernoulli arms, multi-label data), ``"bounded"`` (inside ``Spec.reward_range``) or ``"real"``
(unbounded, e.g. Gaussian noise). Every policy states what it assumes (``Policy.requires``):

- ``{"rewards": "binary", "because": ...}``: a likelihood for 0/1 rewards (Beta-Bernoulli,
  logit models). Fed a reward of -2.5, a Beta posterior's alpha turns negative and its draws are
  undefined.
- ``{"rewards": "bounded", "reward_range": [lo, hi], "because": ...}``: confidence widths for
  rewards inside [lo, hi] (UCB1, FairX-UCB, BF-UCB, GEF, MF). On unbounded rewards they are not
  confidence bounds.
- nothing: any real reward (Gaussian and NIG posteriors, the linear and biased-feedback policies).

A policy whose state holds a fixed number of rounds also states ``"max_horizon"`` (Fair-Greedy's
history buffer): a study longer than that is refused instead of running on an incomplete history.

:func:`check_policy_fits` raises :class:`IncompatibleError` naming the policy, the environment
and what would fit; :func:`bayesfair.simulate` and config loading call it for every policy.
:func:`check_merit_domain` checks that a multi-armed environment's means lie in the merit's
domain (the interval on which its constants gamma and L hold, FairX Conditions 3.1.2-3.1.3).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["REWARD_KINDS", "IncompatibleError", "reward_kind", "bounded_requires",
           "check_policy_fits", "check_merit_domain", "check_merit_domain_blocks"]

REWARD_KINDS = ("binary", "bounded", "real")
_DESCRIBE = {"binary": "binary rewards (0 or 1)", "bounded": "bounded rewards", "real": "unbounded real rewards"}


class IncompatibleError(ValueError):
    """A policy (or merit) cannot be used on this environment."""


def reward_kind(spec: Any) -> str:
    """The environment's reward kind: ``Spec.rewards`` if set, else ``"bounded"`` when a
    ``reward_range`` is known and ``"real"`` otherwise."""
    kind = getattr(spec, "rewards", None)
    if kind is not None:
        if kind not in REWARD_KINDS:
            raise ValueError(f"Spec.rewards must be one of {', '.join(REWARD_KINDS)}, got {kind!r}")
        return kind
    return "real" if spec.reward_range is None else "bounded"



def bounded_requires(lo: float, hi: float, what: str) -> dict[str, Any]:
    """The requirement of a policy whose confidence widths assume rewards in [lo, hi]."""
    return {"rewards": "bounded", "reward_range": [float(lo), float(hi)],
            "because": f"{what}'s confidence widths assume rewards in [{lo:g}, {hi:g}] (reward_range)"}


def _env_range(spec: Any, kind: str) -> tuple[float, float] | None:
    if kind == "binary":
        return (0.0, 1.0) if spec.reward_range is None else (float(spec.reward_range[0]), float(spec.reward_range[1]))
    if kind == "bounded":
        return float(spec.reward_range[0]), float(spec.reward_range[1])
    return None


def check_policy_fits(policy: Any, env: Any, label: str | None = None, horizon: int | None = None) -> None:
    """Raise :class:`IncompatibleError` if ``policy`` assumes rewards ``env`` does not return, or
    (given the study's ``horizon``) if the policy holds fewer rounds than the study plays."""
    req = dict(getattr(policy, "requires", None) or {})
    who = f"policy {label!r} ({policy.label})" if label and label != policy.label else f"policy {policy.label}"
    cap = req.get("max_horizon")
    if cap is not None and horizon is not None and int(horizon) > int(cap):
        because = req.get("because_horizon", "its state holds that many")
        raise IncompatibleError(
            f"{who} was built for at most {int(cap):,} rounds ({because}), but the study plays {int(horizon):,}: "
            f"build it with horizon = {int(horizon):,} (in a config, leave the policy's horizon out to inherit the "
            "study's)")
    need = req.get("rewards")
    if need is None:
        return
    kind = reward_kind(env.spec)
    has = f"environment {env.label} returns {_DESCRIBE[kind]}"
    why = req.get("because", "")
    if need == "binary" and kind != "binary":
        raise IncompatibleError(
            f"{who} needs binary rewards (0 or 1): {why}; but {has}. Use a posterior for real rewards instead "
            "(posterior = \"normal_known_variance\" or \"normal_inverse_gamma\"), or an environment with binary "
            "rewards (bernoulli_arms)")
    if need == "bounded":
        lo, hi = req["reward_range"]
        rng = _env_range(env.spec, kind)
        if rng is None:
            raise IncompatibleError(
                f"{who} needs rewards inside [{lo:g}, {hi:g}]: {why}; but {has}, so these are not confidence "
                "bounds. Use a Thompson-sampling policy with a Gaussian posterior (e.g. fairx_ts with "
                "posterior = \"normal_inverse_gamma\"), or an environment with bounded rewards")
        if rng[0] < lo or rng[1] > hi:
            raise IncompatibleError(
                f"{who} assumes rewards inside [{lo:g}, {hi:g}]: {why}; but environment {env.label} returns rewards "
                f"in [{rng[0]:g}, {rng[1]:g}]; set the policy's reward_range = [{rng[0]:g}, {rng[1]:g}]")


def check_merit_domain(merit: Any, means: Any, env_name: str, what: str = "the study's merit") -> None:
    """Raise :class:`IncompatibleError` if a mean reward lies outside ``merit.domain``.

    ``means`` is ``[R, K]`` (or ``[K]``): the arm means of every run, as the environment drew them.
    """
    check_merit_domain_blocks(merit, [(0, means)], env_name, what)


def check_merit_domain_blocks(merit: Any, blocks: Iterable[tuple[int, Any]], env_name: str,
                              what: str = "the study's merit") -> None:
    """:func:`check_merit_domain` over ``(first run, [B, K] means)`` blocks in run order (the same
    message as for the whole ``[R, K]`` array, from O(block) memory)."""
    lo, hi = merit.domain
    first_out, n_out, size, low, high = None, 0, 0, np.inf, -np.inf
    for start, block in blocks:
        mu = np.atleast_2d(np.asarray(block, np.float64))
        if not np.all(np.isfinite(mu)):
            run, arm = np.argwhere(~np.isfinite(mu))[0]
            raise IncompatibleError(f"environment {env_name}: arm {arm} of run {start + run} has a non-finite mean "
                                    f"{mu[run, arm]}")
        outside = (mu < lo) | (mu > hi)
        if outside.any():
            if first_out is None:
                run, arm = np.argwhere(outside)[0]
                first_out = (start + int(run), int(arm), float(mu[run, arm]))
            n_out += int(outside.sum())
        size += mu.size
        low, high = min(low, float(mu.min())), max(high, float(mu.max()))
    if first_out is None:
        return
    run, arm, value = first_out
    raise IncompatibleError(
        f"environment {env_name}: arm {arm} has mean {value:g} (run {run}), outside the domain "
        f"[{lo:g}, {hi:g}] of {what} {merit.label} ({n_out} of {size} run-arm means are "
        f"outside; they range over [{low:g}, {high:g}]). The merit's constants (minimum merit "
        "gamma, Lipschitz L; FairX Conditions 3.1.2-3.1.3) hold on its domain only: rescale the means, or "
        f"give the merit a domain that holds them (e.g. [merit] domain = [{np.floor(low):g}, "
        f"{np.ceil(high):g}])")
