"""Online use: one decision per request, from a policy served by an agent that holds its state.

``agent = bf.online(policy, n_arms=10, seed=0)`` starts an :class:`OnlineAgent`; each request is
``d = agent.select()`` (the action, the full selection distribution pi_t for propensity logging,
the policy's info), each observed reward ``agent.update(d.action, reward)``. The agent keeps the
policy state on the device, the round counter and the keys; ``agent.save(path)`` /
``bf.online.load(path)`` store and restore all of it in the checksummed saved-policy format of
:mod:`bayesfair.workflow.persist`.

**Keys.** An agent started with ``seed`` (or a typed key ``key = jax.random.key(seed)``) splits
``k_init, k_rounds = jax.random.split(key)``, starts from ``state = policy.init(k_init, spec)``
and selects round t (1, 2, ...) with ``policy.select(jax.random.fold_in(k_rounds, t), state,
Observation(t=int32(t), contexts, groups))``, the keys the simulator gives a run whose policy key
is ``key``. So the same seed and the same sequence of calls give the same actions, in any
process, and an agent restored from a file continues exactly as the saved one would have.

**Feedback.** ``update(action, reward)`` is the feedback of the round last selected (its round
index and contexts go to ``policy.update``); ``update(action, reward, decision=d)`` (or
``update(d, reward)``) that of an earlier round, for rewards that arrive late or out of order.
The action may be any arm, not only the one the policy chose: logged bandit feedback (a request
served by another system, an override) teaches the posterior all the same; the propensity to log
for it is ``d.pi[action]``. A round may get several updates or none (a lost reward is simply not
learned from). An update that names no selected round is an error, since the policy's update
needs the round's observation (its contexts, for a linear policy). Policies that keep a per-round
history (Fair-Greedy) take one update per round.

**Speed.** Each agent runs four jitted programs (init; select; update; update then select, fused),
compiled once per shape, shared by the agents of the same policy and problem, and kept in the
persistent compilation cache (:mod:`bayesfair.core._compile`), so a new process loads them
instead of compiling them. The state stays on the device and is donated to ``update`` (updated in
place); the only host transfers are the action and pi_t that ``select`` returns.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core._compile import TraceCache, cache_small_programs, enable_persistent_cache
from bayesfair.core._validate import seed_int
from bayesfair.core.compat import REWARD_KINDS, check_policy_fits, reward_kind
from bayesfair.core.groups import Groups
from bayesfair.core.types import Observation, Spec
from bayesfair.policies.base import Policy, check_select
from bayesfair.workflow import registry
from bayesfair.workflow.persist import PersistError, load_policy, save_policy

__all__ = ["online", "OnlineAgent", "Decision", "Decisions"]

#: the entry of a saved policy's ``extra`` header that marks an online agent's file
_ONLINE_KEY = "online"


def _label(policy: Policy) -> str:
    """How messages name a policy (the one place this module reads the policy's display name)."""
    return policy.label


@dataclass(frozen=True, slots=True)
class Decision:
    """One round's choice, as :meth:`OnlineAgent.select` returns it.

    Attributes
    ----------
    action : int
        The chosen arm, ``0..K-1``.
    pi : numpy.ndarray
        float32 ``[K]``: the full selection distribution pi_t the action was drawn from (log
        ``pi[action]`` as the propensity; one-hot for a deterministic choice).
    info : dict
        The policy's extra outputs for the round (e.g. the posterior draw ``"mu"``), as JAX
        arrays (not copied to the host unless read).
    round : int
        The round index t (1 for the agent's first selection).
    observation : Observation
        What the policy saw (``t``, and the contexts / candidate groups given to ``select``);
        :meth:`OnlineAgent.update` hands it back to the policy with the reward.
    """

    action: int
    pi: np.ndarray
    info: dict
    round: int
    observation: Observation


@dataclass(frozen=True, slots=True)
class Decisions:
    """``n`` consecutive rounds chosen by :meth:`OnlineAgent.select_batch`.

    Attributes
    ----------
    action : numpy.ndarray
        int32 ``[n]``.
    pi : numpy.ndarray
        float32 ``[n, K]``, one selection distribution per round.
    info : dict
        The policy's extra outputs with a leading axis ``n`` (JAX arrays).
    round : numpy.ndarray
        int32 ``[n]``: the rounds t + 1, ..., t + n.
    observation : Observation
        The rounds' observations, each field with a leading axis ``n``.

    ``len(decisions)`` is ``n``; ``decisions[i]`` is round i's :class:`Decision`.
    """

    action: np.ndarray
    pi: np.ndarray
    info: dict
    round: np.ndarray
    observation: Observation

    def __len__(self) -> int:
        return int(self.action.shape[0])

    def __getitem__(self, i: int) -> Decision:
        n = len(self)
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not -n <= int(i) < n:
            raise IndexError(f"Decisions index must be an integer in [-{n}, {n - 1}], got {i!r}")
        i = int(i) % n
        with cache_small_programs():  # the slices of info are small eager programs
            info = jax.tree.map(lambda x: x[i], self.info)
        return Decision(int(self.action[i]), self.pi[i], info, int(self.round[i]),
                        jax.tree.map(lambda x: x[i], self.observation))


class _Programs(NamedTuple):
    """The jitted programs of one (policy, problem) pair, and which signatures have run."""

    init: Any
    select: Any
    update: Any
    update_select: Any
    select_batch: Any
    update_batch: Any
    warm: set


def _build_programs(policy: Policy, spec: Spec) -> _Programs:
    who = f"policy {_label(policy)!r}"
    k = int(spec.n_arms)

    def init(seed_or_key):
        key = seed_or_key if jnp.issubdtype(seed_or_key.dtype, jax.dtypes.prng_key) else jax.random.key(seed_or_key)
        k_init, k_rounds = jax.random.split(key)
        return k_rounds, policy.init(k_init, spec)

    def select(k_rounds, state, obs):
        # check_select runs when the program is traced (once per shape): shapes and dtypes only
        action, probs, info = check_select(policy.select(jax.random.fold_in(k_rounds, obs.t), state, obs), k, who)
        # copies, so that no output is the state's own buffer, which update then donates
        return jnp.asarray(action, jnp.int32), probs, jax.tree.map(jnp.copy, dict(info or {}))

    def update(state, obs, action, reward):
        return policy.update(state, obs, action, reward)

    def update_select(k_rounds, state, obs_before, action, reward, obs):
        state = update(state, obs_before, action, reward)
        return (state, *select(k_rounds, state, obs))

    def select_batch(k_rounds, state, obs):
        return jax.vmap(select, in_axes=(None, None, 0))(k_rounds, state, obs)

    def update_batch(state, obs, actions, rewards):
        def one(s, x):
            return update(s, *x), None

        return jax.lax.scan(one, state, (obs, actions, rewards))[0]

    return _Programs(jax.jit(init), jax.jit(select), jax.jit(update, donate_argnums=0),
                     jax.jit(update_select, donate_argnums=1), jax.jit(select_batch),
                     jax.jit(update_batch, donate_argnums=0), set())


_PROGRAMS = TraceCache(maxsize=32)  # the programs of recent (policy, problem) pairs: agents share them


def _programs(policy: Policy, spec: Spec) -> _Programs:
    return _PROGRAMS.get((policy, spec), lambda: _build_programs(policy, spec))[0]


class _Problem(NamedTuple):
    """What :func:`bayesfair.core.compat.check_policy_fits` reads of an environment."""

    spec: Spec
    label: str


def _default_rewards(policy: Policy) -> tuple[str, tuple[float, float] | None]:
    """The reward kind and range a policy assumes (``requires``), as the agent's default."""
    req = policy.requires or {}
    if req.get("rewards") == "binary":
        return "binary", (0.0, 1.0)
    if req.get("rewards") == "bounded":
        lo, hi = req["reward_range"]
        return "bounded", (float(lo), float(hi))
    return "real", None


def _problem_spec(policy: Policy, n_arms: Any, groups: Any, n_features: Any, rewards: Any,
                  reward_range: Any) -> Spec:
    """The :class:`Spec` an agent initializes its policy with, from :func:`online`'s arguments."""
    labels = None
    if groups is not None:
        grouping = groups if isinstance(groups, Groups) else Groups.from_labels(groups)
        labels = np.asarray(grouping.labels, np.int32)
    if n_arms is None:
        if labels is None:
            raise ValueError("online: pass n_arms (the number of arms K), or groups (one group label per arm)")
        n_arms = labels.size
    if isinstance(n_arms, bool) or not isinstance(n_arms, (int, np.integer)) or int(n_arms) < 1:
        raise ValueError(f"online: n_arms must be a positive integer (the number of arms K), got {n_arms!r}")
    n_arms = int(n_arms)
    if labels is None:
        labels = np.zeros(n_arms, np.int32)
    elif labels.size != n_arms:
        raise ValueError(f"online: groups must give one group per arm ({n_arms}), got {labels.size} labels")
    if n_features is None:
        n_features = 0
    if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) or int(n_features) < 0:
        raise ValueError(f"online: n_features must be an integer >= 0 (the context dimension d of a linear policy; "
                         f"0 for multi-armed policies), got {n_features!r}")
    kind, rng = _default_rewards(policy)
    if rewards is not None:
        if rewards not in REWARD_KINDS:
            raise ValueError(f"online: rewards must be one of {', '.join(REWARD_KINDS)}, got {rewards!r}")
        kind = rewards
        rng = (0.0, 1.0) if kind == "binary" else (None if kind == "real" else rng)
    if reward_range is not None:
        try:
            lo, hi = (float(v) for v in reward_range)
        except (TypeError, ValueError):
            raise ValueError(f"online: reward_range must be a pair (low, high), got {reward_range!r}") from None
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"online: reward_range must be finite with low < high, got {reward_range!r}")
        rng = (lo, hi)
        if rewards is None and kind == "real":
            kind = "bounded"
    if kind == "bounded" and rng is None:
        raise ValueError("online: rewards='bounded' needs reward_range=(low, high)")
    return Spec(n_arms, labels, int(labels.max()) + 1, int(n_features), rng, kind)


def _same_kind(exc: Exception) -> type[Exception]:
    """TypeError or ValueError, as ``exc`` is (its own class may take other arguments)."""
    return TypeError if isinstance(exc, TypeError) else ValueError


def _describe(spec: Spec) -> str:
    groups = f", {spec.n_groups} groups" if spec.n_groups > 1 else ""
    return f"n_arms={spec.n_arms}{groups}, n_features={spec.n_features}, rewards={spec.rewards!r}"


class OnlineAgent:
    """A policy served one decision at a time: state, keys and the round counter held inside.

    Start one with :func:`online` (or restore one with :meth:`load`); see
    :mod:`bayesfair.workflow.online` for the keys and the semantics of feedback.

    Attributes
    ----------
    policy : Policy
    spec : Spec
        The problem the policy was initialized for.
    round : int
        Rounds selected so far (the next ``select`` is round ``round + 1``).
    """

    __slots__ = ("policy", "spec", "round", "_p", "_k_rounds", "_state", "_last", "_last_batch", "_binary", "_range",
                 "_shapes")

    def __init__(self, policy: Policy, spec: Spec, k_rounds: jax.Array, state: Any, round: int = 0,
                 _programs_: _Programs | None = None):
        self.policy, self.spec, self.round = policy, spec, int(round)
        self._p = _programs_ if _programs_ is not None else _programs(policy, spec)
        self._k_rounds, self._state = k_rounds, state
        self._last: Observation | None = None  # the last single select's observation
        self._last_batch: Observation | None = None  # the last select_batch's observations
        kind = reward_kind(spec)
        self._binary = kind == "binary"
        self._range = spec.reward_range if kind == "bounded" else None
        self._shapes = self._check_select()

    # -- construction ------------------------------------------------------------------------------

    def _check_select(self) -> Any:
        """Trace ``select`` once (no compute; the trace is reused when it compiles), so that a policy
        whose select does not fit this problem fails here, naming what is missing."""
        obs = self._example_obs()
        try:
            return jax.eval_shape(self._p.select, self._k_rounds, self._state, obs)
        except (ValueError, TypeError) as exc:
            raise _same_kind(exc)(f"online: {self._who()} cannot select on this problem ({_describe(self.spec)}): "
                                  f"{exc}. {self._hint()}") from exc

    def _example_obs(self) -> Observation:
        k, d = self.spec.n_arms, self.spec.n_features
        return Observation(t=np.int32(1), contexts=np.zeros((k, d), np.float32) if d else None)

    def _who(self) -> str:
        return f"policy {_label(self.policy)!r}"

    @staticmethod
    def _hint() -> str:
        return ("A linear (contextual) policy needs n_features=d (contexts [K, d] per round); group-fair policies "
                "need groups= (the group of each arm); UCB-type policies need a reward_range they accept")

    # -- decisions ---------------------------------------------------------------------------------

    def _run(self, name: str, sig: Any, fn: Any, *args: Any) -> Any:
        """``fn(*args)``; its first call per signature compiles inside
        :func:`~bayesfair.core._compile.cache_small_programs`, so every program (however quick to
        compile) goes to the persistent cache and a new process loads it."""
        warm = self._p.warm
        if (name, sig) in warm:
            return fn(*args)
        with cache_small_programs():
            out = fn(*args)
        warm.add((name, sig))
        return out

    def select(self, context: Any = None, groups: Any = None) -> Decision:
        """Choose the next round's action.

        Parameters
        ----------
        context : array ``[K, d]``, optional
            The candidates' contexts, required by a linear policy (``n_features = d``), refused
            by a multi-armed one.
        groups : int array ``[K]``, optional
            The candidates' groups this round, for policies that read per-round groups
            (``Observation.groups``); default: the fixed groups the agent was started with.

        Returns
        -------
        Decision
            ``action`` (int), ``pi`` (pi_t, float32 ``[K]``), ``info``, ``round``, ``observation``.
        """
        t = self.round + 1
        obs = Observation(np.int32(t), self._check_contexts(context, None), self._check_groups(groups, None))
        action, probs, info = self._run("select", None, self._p.select, self._k_rounds, self._state, obs)
        self.round, self._last, self._last_batch = t, obs, None
        return Decision(int(action), np.asarray(probs), info, t, obs)

    def update(self, action: Any, reward: Any, *, decision: Decision | None = None) -> None:
        """Learn from one reward.

        Parameters
        ----------
        action : int or Decision
            The arm whose reward was observed (any arm: logged feedback need not be the policy's
            choice), or a :class:`Decision` (its action and round).
        reward : float
            Finite; 0 or 1 for a binary-reward policy, inside ``reward_range`` for a bounded one.
        decision : Decision, optional
            The round the reward belongs to (default: the round last selected by :meth:`select`).
        """
        if isinstance(action, Decision):
            if decision is not None:
                raise TypeError("update: pass the Decision either as the action or as decision=, not both")
            decision, action = action, action.action
        obs = self._feedback_obs(decision)
        a, r = self._check_action(action), self._check_reward(reward)
        self._state = self._run("update", None, self._p.update, self._state, obs, a, r)

    def update_and_select(self, action: Any, reward: Any, context: Any = None, groups: Any = None) -> Decision:
        """:meth:`update` for the round last selected, then :meth:`select`, as one compiled call.

        The same state, keys and numbers as the two calls (one dispatch instead of two): for a
        server that logs each reward before the next request. The first round has no reward
        yet: start with :meth:`select`.
        """
        obs_before = self._feedback_obs(None)
        a, r = self._check_action(action), self._check_reward(reward)
        t = self.round + 1
        obs = Observation(np.int32(t), self._check_contexts(context, None), self._check_groups(groups, None))
        state, act, probs, info = self._run("update_select", None, self._p.update_select, self._k_rounds,
                                            self._state, obs_before, a, r, obs)
        self._state, self.round, self._last, self._last_batch = state, t, obs, None
        return Decision(int(act), np.asarray(probs), info, t, obs)

    def select_batch(self, n: int | None = None, *, contexts: Any = None, groups: Any = None) -> Decisions:
        """Choose ``n`` consecutive rounds from the current state (no update in between).

        The same actions as ``n`` calls of :meth:`select` with no update between them (rounds
        t + 1, ..., t + n, their own keys), in one compiled call: for a batch of requests served
        before their rewards arrive.

        Parameters
        ----------
        n : int, optional
            Rounds; default ``len(contexts)``.
        contexts : array ``[n, K, d]``, optional
            One context matrix per round (linear policies).
        groups : int array ``[n, K]``, optional
            Per-round candidate groups (see :meth:`select`).
        """
        if n is None:
            if contexts is None:
                raise ValueError("select_batch: pass n (the number of rounds), or contexts [n, K, d]")
            n = np.shape(contexts)[0] if np.ndim(contexts) else 0
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or int(n) < 1:
            raise ValueError(f"select_batch: n must be a positive integer (rounds to choose), got {n!r}")
        n = int(n)
        t0 = self.round
        rounds = np.arange(t0 + 1, t0 + n + 1, dtype=np.int32)
        obs = Observation(rounds, self._check_contexts(contexts, n), self._check_groups(groups, n))
        action, probs, info = self._run("select_batch", n, self._p.select_batch, self._k_rounds, self._state, obs)
        self.round, self._last, self._last_batch = t0 + n, None, obs
        return Decisions(np.asarray(action), np.asarray(probs), info, rounds, obs)

    def update_batch(self, actions: Any, rewards: Any, *, decisions: Decisions | Sequence[Decision] | None = None
                     ) -> None:
        """Learn from ``n`` rewards in order: the same state as ``n`` calls of :meth:`update`.

        Parameters
        ----------
        actions : int array ``[n]``
        rewards : float array ``[n]``
        decisions : Decisions or sequence of Decision, optional
            The rounds the rewards belong to, one per reward. Default: the rounds of the last
            :meth:`select_batch` (``n`` of them), or ``n`` rewards for the round of the last
            :meth:`select`.
        """
        a = self._check_actions(actions)
        r = self._check_rewards(rewards, a.shape[0])
        n = a.shape[0]
        obs = self._feedback_obs_batch(decisions, n)
        self._state = self._run("update_batch", n, self._p.update_batch, self._state, obs, a, r)

    # -- checks at the boundary ------------------------------------------------------------------

    def _feedback_obs(self, decision: Decision | None) -> Observation:
        if decision is None:
            if self._last is None:
                what = ("the last selection was a batch: pass decision=decisions[i], or use update_batch"
                        if self._last_batch is not None else "no round has been selected yet: call select() first")
                raise ValueError(f"update: a reward is the feedback of a selected round, and {what}. Rewards logged "
                                 "elsewhere are learned the same way: select, then update with the logged action")
            return self._last
        if not isinstance(decision, Decision):
            raise TypeError(f"update: decision must be a Decision returned by select, got {type(decision).__name__}")
        self._check_decision_round(decision.round)
        return decision.observation

    def _check_decision_round(self, r: Any) -> None:
        if not 1 <= int(r) <= self.round:
            raise ValueError(f"update: the decision is for round {int(r)}, but this agent has selected rounds 1.."
                             f"{self.round}: it comes from another agent (or one restored from an older file)")

    def _feedback_obs_batch(self, decisions: Any, n: int) -> Observation:
        if decisions is None:
            if self._last_batch is not None:
                obs = self._last_batch
                if obs.t.shape[0] != n:
                    raise ValueError(f"update_batch: {n} rewards, but the last select_batch chose {obs.t.shape[0]} "
                                     "rounds; pass decisions= (one per reward)")
                return obs
            if self._last is None:
                raise ValueError("update_batch: no round has been selected yet: call select() or select_batch() "
                                 "first, or pass decisions=")
            return jax.tree.map(lambda x: np.broadcast_to(x, (n, *np.shape(x))), self._last)
        if isinstance(decisions, Decisions):
            obs = decisions.observation
        elif isinstance(decisions, Sequence) and decisions and all(isinstance(d, Decision) for d in decisions):
            obs = jax.tree.map(lambda *xs: np.stack(xs), *[d.observation for d in decisions])
        else:
            raise TypeError("update_batch: decisions must be the Decisions of select_batch or a list of Decision")
        if obs.t.shape[0] != n:
            raise ValueError(f"update_batch: {n} rewards but {obs.t.shape[0]} decisions; pass one decision per reward")
        for r in (int(obs.t.min()), int(obs.t.max())):
            self._check_decision_round(r)
        return obs

    def _check_action(self, action: Any) -> np.int32:
        if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
            if isinstance(action, (np.ndarray, jax.Array)) and np.ndim(action) == 0 and \
                    np.issubdtype(action.dtype, np.integer):
                action = int(action)
            else:
                raise TypeError(f"update: action must be an integer arm index in 0..{self.spec.n_arms - 1}, "
                                f"got {action!r} ({type(action).__name__})")
        if not 0 <= action < self.spec.n_arms:
            raise ValueError(f"update: action must be an arm index in 0..{self.spec.n_arms - 1}, got {action}")
        return np.int32(action)

    def _check_reward(self, reward: Any) -> np.float32:
        if isinstance(reward, (bool, np.bool_)):
            reward = float(reward)
        try:
            r = float(reward)
        except (TypeError, ValueError):
            raise TypeError(f"update: reward must be a real number, got {reward!r}") from None
        if not math.isfinite(r):
            raise ValueError(f"update: reward must be finite, got {r}")
        if self._binary and r != 0.0 and r != 1.0:
            raise ValueError(f"update: {self._who()} needs binary rewards (0 or 1), got {r}")
        if self._range is not None and not self._range[0] <= r <= self._range[1]:
            raise ValueError(f"update: {self._who()} needs rewards inside [{self._range[0]:g}, {self._range[1]:g}] "
                             f"(reward_range), got {r}")
        return np.float32(r)

    def _check_actions(self, actions: Any) -> np.ndarray:
        arr = np.asarray(actions)
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError(f"update_batch: actions must be a non-empty 1-d array of arm indices, got shape "
                             f"{arr.shape}")
        if arr.dtype.kind not in "iu":
            raise TypeError(f"update_batch: actions must be integer arm indices, got dtype {arr.dtype}")
        bad = np.flatnonzero((arr < 0) | (arr >= self.spec.n_arms))
        if bad.size:
            raise ValueError(f"update_batch: actions must be arm indices in 0..{self.spec.n_arms - 1}; "
                             f"actions[{bad[0]}] = {arr[bad[0]]}")
        return arr.astype(np.int32)

    def _check_rewards(self, rewards: Any, n: int) -> np.ndarray:
        try:
            arr = np.asarray(rewards, np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"update_batch: rewards must be an array of real numbers, got {rewards!r}") from None
        if arr.shape != (n,):
            raise ValueError(f"update_batch: rewards must have shape ({n},) (one per action), got {arr.shape}")
        checks = [(~np.isfinite(arr), "finite")]
        if self._binary:
            checks.append(((arr != 0.0) & (arr != 1.0), f"0 or 1 ({self._who()} needs binary rewards)"))
        if self._range is not None:
            lo, hi = self._range
            checks.append(((arr < lo) | (arr > hi), f"inside [{lo:g}, {hi:g}] ({self._who()}'s reward_range)"))
        for bad, what in checks:
            i = np.flatnonzero(bad)
            if i.size:
                raise ValueError(f"update_batch: rewards must be {what}; rewards[{i[0]}] = {arr[i[0]]}")
        return arr.astype(np.float32)

    def _check_contexts(self, context: Any, n: int | None) -> np.ndarray | None:
        k, d = self.spec.n_arms, self.spec.n_features
        where = "select" if n is None else "select_batch"
        if d == 0:
            if context is not None:
                raise ValueError(f"{where}: {self._who()} takes no contexts (the agent was started with n_features=0); "
                                 "start it with n_features=d for a linear policy")
            return None
        if context is None:
            shape = f"[{k}, {d}]" if n is None else f"[n, {k}, {d}]"
            raise ValueError(f"{where}: {self._who()} needs the candidates' contexts, an array {shape}")
        try:
            arr = np.array(context, dtype=np.float32)  # a copy: the decision keeps what the policy saw
        except (TypeError, ValueError):
            raise TypeError(f"{where}: contexts must be an array of real numbers, got "
                            f"{type(context).__name__}") from None
        want = (k, d) if n is None else (n, k, d)
        if arr.shape != want:
            axes = "candidates K, features d" if n is None else "rounds, candidates K, features d"
            raise ValueError(f"{where}: contexts must have shape {want} ({axes}), got {arr.shape}")
        if not np.isfinite(arr).all():
            raise ValueError(f"{where}: contexts must be finite (no NaN or inf)")
        return arr

    def _check_groups(self, groups: Any, n: int | None) -> np.ndarray | None:
        if groups is None:
            return None
        k, m = self.spec.n_arms, self.spec.n_groups
        where = "select" if n is None else "select_batch"
        arr = np.asarray(groups)
        want = (k,) if n is None else (n, k)
        if arr.shape != want:
            raise ValueError(f"{where}: groups must have shape {want} (the group of each candidate), got {arr.shape}")
        if arr.dtype.kind not in "iu":
            raise TypeError(f"{where}: groups must be integer group indices, got dtype {arr.dtype}")
        if arr.min() < 0 or arr.max() >= m:
            raise ValueError(f"{where}: groups must be group indices in 0..{m - 1}, got values in "
                             f"[{arr.min()}, {arr.max()}]")
        return arr.astype(np.int32)

    # -- inspection and persistence --------------------------------------------------------------

    @property
    def state(self) -> Any:
        """A copy of the policy state (the agent's own buffers are updated in place)."""
        return jax.tree.map(jnp.copy, self._state)

    def __repr__(self) -> str:
        return f"OnlineAgent({self._who()}, {_describe(self.spec)}, round={self.round})"

    def save(self, path: str | os.PathLike, *, extra: Mapping[str, Any] | None = None) -> Path:
        """Write the agent (policy state, round key, round counter, problem) to ``path`` atomically,
        in :func:`bayesfair.save_policy`'s checksummed format; :meth:`load` continues from it exactly.

        ``extra`` is JSON-able metadata stored with it (the key ``"online"`` is the agent's own).
        Decisions made before saving can still be updated on the restored agent (``update(d, r)``);
        a plain ``update(action, reward)`` right after loading refers to the last round selected
        before saving only for a policy without contexts or per-round groups.
        """
        extra = dict(extra or {})
        if _ONLINE_KEY in extra:
            raise ValueError(f"save: extra[{_ONLINE_KEY!r}] is the agent's own entry; use another key")
        last = self._last
        resumable = last is not None and last.contexts is None and last.groups is None
        extra[_ONLINE_KEY] = {"round": self.round, "last_round": int(last.t) if resumable else None}
        return save_policy(path, self.policy, self._state, self.spec, key=self._k_rounds, step=self.round,
                           extra=extra)

    @classmethod
    def load(cls, path: str | os.PathLike, policy: Policy | None = None, *, verify: bool = True) -> OnlineAgent:
        """An agent restored from :meth:`save`'s file: the same next actions as the saved agent's.

        ``policy`` as for :func:`bayesfair.load_policy`: needed only for a policy assembled by hand
        (one without a registry ``name``); its ``name``, ``label`` and ``params`` must equal the
        saved ones.
        ``verify=False`` skips the checksum (at your own risk).
        """
        saved = load_policy(path, policy, verify=verify)
        info = (saved.meta.get("extra") or {}).get(_ONLINE_KEY)
        if not isinstance(info, Mapping) or not isinstance(info.get("round"), int) or saved.key is None:
            raise PersistError(f"{path} was not saved by an online agent (OnlineAgent.save): load it with "
                               "bayesfair.load_policy, or start an agent with bayesfair.online")
        if saved.meta.get("batch") is not None:
            raise PersistError(f"{path} holds {saved.meta['batch']} runs' states; an online agent holds one")
        agent = cls(saved.policy, saved.spec, saved.key, saved.state, info["round"])
        last = info.get("last_round")
        if isinstance(last, int) and 1 <= last <= agent.round:
            agent._last = Observation(np.int32(last))
        return agent


def _as_policy(policy: Any) -> Policy:
    """A Policy, or one built from a registry table (``"thompson"``, ``{"name": "fairx_ts", ...}``)."""
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, (str, Mapping)):
        try:
            _, norm = registry.check_params("policy", dict(policy) if isinstance(policy, Mapping) else policy, "policy")
            return registry.build("policy", norm, "policy")
        except registry.ConfigError as exc:
            raise ValueError(f"online: {exc}") from None
    raise TypeError(f"online: policy must be a bayesfair Policy or a registry table such as "
                    f"{{'name': 'thompson', 'posterior': 'beta_bernoulli'}}, got {type(policy).__name__}")


def online(policy: Any, n_arms: int | None = None, *, seed: Any = 0, groups: Any = None,
           n_features: int | None = None, rewards: str | None = None,
           reward_range: tuple[float, float] | None = None, spec: Spec | None = None) -> OnlineAgent:
    """Start an :class:`OnlineAgent` that serves ``policy`` one decision at a time.

    Parameters
    ----------
    policy : Policy, str or mapping
        A policy (``bf.fairx_ts(bf.beta_bernoulli(), bf.merit.exponential(4.0))``), or a registry
        table (``{"name": "fairx_ts", "posterior": "beta_bernoulli", "merit": {"name":
        "exponential", "c": 4.0}}``). :meth:`OnlineAgent.load` rebuilds any policy of a declared
        constructor from its saved ``name`` and ``params``.
    n_arms : int
        The number of arms K (default: ``len(groups)``).
    seed : int or jax key
        An integer seed in [0, 2**32 - 1] or a typed key (``jax.random.key``); see
        :mod:`bayesfair.workflow.online` for how rounds' keys derive from it.
    groups : sequence or Groups, optional
        The group of each arm (indices 0..m-1 or names), for group-fair policies (bi-level,
        biased feedback). Default: one group.
    n_features : int, optional
        The context dimension d of a linear policy (contexts ``[K, d]`` per round); 0 (default)
        for multi-armed policies.
    rewards : {"binary", "bounded", "real"}, optional
        The kind of reward the agent will be fed; default: what the policy assumes (binary for a
        Beta-Bernoulli posterior, bounded in its reward_range for UCB, else real). Checked
        against the policy, and every reward given to ``update`` is checked against it.
    reward_range : (float, float), optional
        The bounds of the rewards (with ``rewards="bounded"``).
    spec : Spec, optional
        The problem as a :class:`~bayesfair.core.types.Spec` (e.g. ``env.spec`` of the
        environment the policy was studied on), instead of the arguments above.

    Returns
    -------
    OnlineAgent

    Raises
    ------
    ValueError, TypeError
        A missing or invalid argument, or a policy that cannot run on the problem described
        (the message names what to pass: ``n_features``, ``groups``, ``reward_range``).
    bayesfair.IncompatibleError
        The rewards declared do not fit what the policy assumes.

    Examples
    --------
    >>> import bayesfair as bf
    >>> agent = bf.online(bf.thompson(bf.beta_bernoulli()), n_arms=3, seed=0)
    >>> d = agent.select()
    >>> d.round, 0 <= d.action < 3, round(float(d.pi.sum()), 6)
    (1, True, 1.0)
    >>> agent.update(d.action, 1.0)

    ``bf.online.load(path)`` is :meth:`OnlineAgent.load`.
    """
    pol = _as_policy(policy)
    if spec is not None:
        if not isinstance(spec, Spec):
            raise TypeError(f"online: spec must be a bayesfair Spec (e.g. env.spec), got {type(spec).__name__}")
        given = [k for k, v in (("n_arms", n_arms), ("groups", groups), ("n_features", n_features),
                                ("rewards", rewards), ("reward_range", reward_range)) if v is not None]
        if given:
            raise ValueError(f"online: pass either spec or {', '.join(given)}, not both")
        problem = spec
    else:
        problem = _problem_spec(pol, n_arms, groups, n_features, rewards, reward_range)
    check_policy_fits(pol, _Problem(problem, "of this online agent"))
    if isinstance(seed, jax.Array) and jnp.issubdtype(seed.dtype, jax.dtypes.prng_key):
        if seed.shape != ():
            raise ValueError(f"online: seed must be one key (shape ()), got keys of shape {seed.shape}")
        seed_arg = seed
    else:
        seed_arg = np.uint32(seed_int("online: seed", seed))
    enable_persistent_cache()
    programs = _programs(pol, problem)
    try:
        with cache_small_programs():
            k_rounds, state = programs.init(seed_arg)
    except (ValueError, TypeError) as exc:
        raise _same_kind(exc)(f"online: policy {_label(pol)!r} cannot be initialized for this problem "
                        f"({_describe(problem)}): {exc}. {OnlineAgent._hint()}") from exc
    return OnlineAgent(pol, problem, k_rounds, state, 0, programs)


online.load = OnlineAgent.load  # bf.online.load(path)
