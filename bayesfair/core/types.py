"""Array aliases, shape names and the small records shared by environments and policies.

Shape names used in docstrings: ``K`` candidates (arms) per round, ``m`` groups, ``d`` features,
``R`` runs, ``T`` rounds, ``P`` checkpoints.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np

__all__ = ["Array", "PRNGKey", "Spec", "Observation", "Round"]

Array = jax.Array
PRNGKey = jax.Array


class Spec(NamedTuple):
    """Static description of a bandit problem, handed to ``Policy.init``.

    Attributes
    ----------
    n_arms : int
        Number of candidates per round ``K``.
    group_of_arm : numpy.ndarray
        int array ``[K]``: the group index of every arm (all zeros when there are no groups).
    n_groups : int
        Number of groups ``m``.
    n_features : int
        Context dimension ``d`` (0 for multi-armed bandits).
    reward_range : tuple of float or None
        Known bounds of the reward, if any (e.g. ``(0, 1)`` for Bernoulli arms).
    rewards : str or None
        The kind of reward (:mod:`bayesfair.core.compat`): ``"binary"`` (0 or 1), ``"bounded"``
        (inside ``reward_range``) or ``"real"`` (unbounded; ``reward_range`` then bounds the means
        only). ``None``: ``"bounded"`` if ``reward_range`` is given, else ``"real"``. Policies that
        assume a kind (a Beta-Bernoulli posterior, UCB widths) are checked against it before a run.
    """

    n_arms: int
    group_of_arm: np.ndarray
    n_groups: int
    n_features: int = 0
    reward_range: tuple[float, float] | None = None
    rewards: str | None = None


class Observation(NamedTuple):
    """What a policy sees before choosing: the round index and (for linear bandits) contexts.

    ``t`` is the 1-based round number; ``contexts`` is ``[K, d]`` or ``None``; ``groups`` is the
    int ``[K]`` group of each candidate when the environment draws it per round (e.g. candidates
    with i.i.d. group labels), or ``None`` when the groups are the fixed ``Spec.group_of_arm``.
    """

    t: Array
    contexts: Any = None
    groups: Any = None


class Round(NamedTuple):
    """One round drawn by an environment, with counterfactual rewards for every candidate.

    Attributes
    ----------
    obs : Observation
        What the policy sees.
    reward : Array
        ``[K]`` reward each candidate would return this round (the policy sees only its own).
    mean : Array
        ``[K]`` expected reward of each candidate this round (for regret and pi*).
    extra : dict or None
        Optional named ``[K]`` alternative values of each candidate (e.g. the true reward under
        biased feedback, or a group-relative rank); the simulator records the regret
        ``sum_t (max_a v_t,a - pi_t . v_t)`` of each as ``<name>_regret``.
    """

    obs: Observation
    reward: Array
    mean: Array
    extra: Any = None
