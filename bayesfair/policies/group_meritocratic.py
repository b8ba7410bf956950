"""Fair-Greedy and its baselines (group_meritocratic_fairness_linear_cb_neurips2022).

Fair-Greedy (Algorithm 1) selects the candidate with the highest *estimated relative rank*: the
empirical CDF, over the contexts its group showed in the second half of the history, of the
candidate's estimated reward under a perturbed ridge estimate fitted on the first half. It needs
no exploration phase: by Lemma 4.1 it selects every arm with probability exactly 1/K at every
round (information-averaged demographic parity). :func:`fair_greedy` is Algorithm 1 (arm a is
group a); :func:`fair_greedy_multigroup` is its Section 7 / Appendix E form, where each candidate
carries a group label (``obs.groups``, else ``spec.group_of_arm``) and the empirical CDF of a
group pools its candidates of every arm.
Baselines of Sections 6-7: :func:`oful` (OFUL, Abbasi-Yadkori et al. 2011, i.e.
:func:`bayesfair.policies.linucb` with its Theorem 2 radius), :func:`greedy` (argmax of the ridge
estimate) and :func:`~bayesfair.policies.uniform` (the paper's Uniform Random).

Static shapes and the two halves of the history
-----------------------------------------------
Round t (``obs.t``, 1-based, as the simulator passes it) uses t~ = floor((t - 1) / 2) (line 4).

- *Ridge part* (line 5): V = X'X + lambda I and X'r over rounds 1..t~. The state keeps one ridge
  accumulator (:func:`bayesfair.posteriors.linear_known_variance` with prior variance 1/lambda
  and unit noise, whose mean is V^-1 X'r) that *lags* the history: t~ grows by one every second
  round, so after the update of round t the accumulator must hold rounds 1..floor(t / 2). The
  update of an even round t therefore absorbs, by one rank-one update, the stored round t / 2
  (its selected context and reward, read back from the history buffer); odd rounds leave it as
  it is (a ``lax.cond`` on the round index, which the simulator does not batch, so it is a real
  branch). The round absorbed is always at least t / 2 rounds old, so it is in the buffer, and
  each round enters the ridge exactly once. The ridge estimate V^-1 X'r is recomputed only then
  and kept in the state, so ``select`` solves nothing.
- *Empirical CDF part* (line 6): the contexts of rounds t~+1..t-1, all K candidates of each. Every
  round's contexts (and groups) go into a fixed-capacity buffer, capacity = the horizon given at
  construction (rounded up to a whole number of blocks of B rounds); the window is a mask over
  buffer rows. The count sum_s 1{<mu~, X_s,a> <= <mu~, X_t,a>} is one vectorized comparison per
  block, and a ``fori_loop`` visits only the blocks that meet the window, so a round costs
  O(t K d) (not O(capacity K d)) and T rounds O(T^2 K d / 4), as Remark 4.2 says. Blocks are
  stored feature-major (``[d, B K]``), so the estimated rewards of a block are d fused
  multiply-adds over contiguous vectors; this is memory-bound (4 K d bytes read per past round),
  and measured 2-3x faster than the ``[B, K, d] @ [d]`` layout on this project's machine.
- *In place*: ``update`` writes the round into the buffer with a ``dynamic_update_slice`` whose
  value depends on the action, which orders the write after ``select``'s loop over the same
  buffer; without that dependency XLA copied the whole buffer every round (6x slower at
  T = 4,000). Inside :func:`bayesfair.simulate` the rounds of a chunk are a ``fori_loop`` over the
  active rounds (no per-round ``lax.cond``, whose branch operands XLA would copy), so the buffer is
  updated in place there too; ``experiments/benchmarks/fair_greedy_bench.py`` measures both.

Perturbation and ties
---------------------
Line 5 adds rho gamma / sqrt(d t~) with gamma ~ N(0, I_d) to the ridge estimate (mu~ = 0 when
t~ = 0). The paper's line 5 reads rho gamma / sqrt(t~) (``rho_scale="sqrt_t"`` selects it; the
divisor is lost in this project's text copy); the default ``rho_scale="sqrt_dt"`` divides by
sqrt(d t~), which makes the perturbation's norm O(rho) whatever d (E||gamma||^2 = d), keeps its
V-norm O(rho L) (the L in b1 = lambda^1/2 + R + L of Lemma 5.3, with rho <= 1) and is the scaling
of the authors' public code. The paper lets rho be arbitrarily small; in
float32 a tiny rho is lost to rounding exactly when it matters (t~ = 1, where the ridge estimate
lies in the span of one context and the other arms' estimated rewards are constant), so the
default is rho = 0.1. Line 7 samples uniformly among the maximizers of the estimated rank; pi_t
is that uniform distribution (one-hot without ties), *conditional on the perturbation draw*, the
convention of LinTS. With an empty window (t = 1) every rank is equal, so the choice is uniform.
In the multi-group form a candidate whose group has no context in the window gets an independent
U(0, 1) rank (its relative rank is unknown, and a uniform draw is what the true relative rank is
distributed as), part of the draw pi_t is conditional on.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, NamedTuple

import annotated_types as at
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bayesfair.core import _random
from bayesfair.core._validate import positive_int
from bayesfair.core.declare import Count, Horizon, OpenUnit, Positive, declare
from bayesfair.core.types import Observation, Spec
from bayesfair.policies.base import Policy
from bayesfair.policies.linear import linucb
from bayesfair.posteriors.base import Outcome
from bayesfair.posteriors.linear import LinearPosterior, LinearState, linear_known_variance

__all__ = [
    "FairGreedyState",
    "fair_greedy",
    "fair_greedy_multigroup",
    "oful",
    "greedy",
    "default_block",
]


class FairGreedyState(NamedTuple):
    """State of Fair-Greedy.

    Attributes
    ----------
    ridge : LinearState
        Ridge accumulator over rounds 1..floor(t / 2) after the update of round t (precision
        V = lambda I + sum x x', ``eta`` = sum x r).
    theta : jax.Array
        ``[d]`` its ridge estimate V^-1 X'r, recomputed only when the accumulator changes (every
        second round), so ``select`` does no solve.
    contexts : jax.Array
        ``[capacity / B, d, B K]`` contexts of every round so far, in blocks of B rounds stored
        feature-major: round t (row r = t - 1) candidate a is ``contexts[r // B, :, (r % B) K + a]``.
    groups : jax.Array or None
        ``[capacity / B, B K]`` int32 candidate groups, same indexing (multi-group form only).
    arm_groups : jax.Array or None
        ``[K]`` int32 ``spec.group_of_arm``, the candidates' groups when ``obs.groups`` is None
        (multi-group form only).
    actions : jax.Array
        ``[capacity]`` int32 selected candidate of every round.
    rewards : jax.Array
        ``[capacity]`` float32 observed reward of every round.
    """

    ridge: LinearState
    theta: jax.Array
    contexts: jax.Array
    groups: jax.Array | None
    arm_groups: jax.Array | None
    actions: jax.Array
    rewards: jax.Array


def _n_features(spec: Spec, policy: str) -> int:
    d = getattr(spec, "n_features", None)
    if isinstance(d, bool) or not isinstance(d, int) or d < 1:
        raise ValueError(f"{policy} needs spec.n_features >= 1 (contexts [K, d] from a linear environment), "
                         f"got {d!r}")
    return d


def _contexts(obs: Observation, k: int, d: int, policy: str) -> jax.Array:
    """``obs.contexts`` as ``[K, d]`` float32 (static shapes: checked at trace time)."""
    if obs.contexts is None:
        raise ValueError(f"{policy} needs obs.contexts [K, d]; got None (a multi-armed environment?)")
    c = jnp.asarray(obs.contexts, jnp.float32)
    if c.ndim != 2 or c.shape != (k, d):
        raise ValueError(f"{policy}: obs.contexts must be [n_arms={k}, n_features={d}] as in the spec the policy was "
                         f"initialized with, got shape {tuple(c.shape)} (context dimension mismatch)")
    return c


def _contexts_d(obs: Observation, d: int, policy: str) -> jax.Array:
    """``obs.contexts`` as ``[K, d]`` float32 for any K (checked at trace time)."""
    if obs.contexts is None:
        raise ValueError(f"{policy} needs obs.contexts [K, d]; got None (a multi-armed environment?)")
    c = jnp.asarray(obs.contexts, jnp.float32)
    if c.ndim != 2 or c.shape[1] != d:
        raise ValueError(f"{policy}: obs.contexts must be [K, n_features={d}] as in the spec the policy was "
                         f"initialized with, got shape {tuple(c.shape)} (context dimension mismatch)")
    return c


def _lam(lam: Any) -> tuple[float, LinearPosterior]:
    lam = float(lam)  # > 0 checked by the callers' declarations
    return lam, linear_known_variance(0.0, 1.0 / lam, 1.0)


def default_block(capacity: int) -> int:
    """Rounds per block of the empirical-CDF loop: a power of two near capacity / 64, in [64, 512].

    The loop over blocks costs little per iteration, and the partly used blocks at the two ends
    of the window waste up to 2 B rounds of work, so small blocks win: on this project's 2-core
    machine (plain ``lax.scan``, R = 10, K = 4, d = 17) blocks of 64-256 rounds ran equally fast at
    T = 4,000 and T = 16,000 and 1,024 was 20-60% slower.
    """
    target = max(capacity / 64.0, 1.0)
    return int(min(max(2 ** round(math.log2(target)), 64), 512))


def _fair_greedy(horizon: Any, lam: Any, rho: Any, block: Any, multigroup: bool, rho_scale: str = "sqrt_dt") -> Policy:
    name = "Fair-Greedy (multi-group)" if multigroup else "Fair-Greedy"
    horizon = int(horizon)  # horizon, lam, rho, block: ranges checked by the constructors' declarations
    lam, ridge = _lam(lam)
    rho = float(rho)
    blk = default_block(horizon) if block is None else int(block)
    blk = min(blk, horizon)
    n_blocks = -(-horizon // blk)
    capacity = n_blocks * blk

    def init(key: jax.Array, spec: Spec) -> FairGreedyState:
        d = _n_features(spec, name)
        k = positive_int("spec.n_arms", spec.n_arms)
        groups = jnp.zeros((n_blocks, blk * k), jnp.int32) if multigroup else None
        arm_groups = None
        if multigroup:
            labels = np.asarray(spec.group_of_arm)
            if labels.shape != (k,):
                raise ValueError(f"{name}: spec.group_of_arm must have shape ({k},), got {labels.shape}")
            arm_groups = jnp.asarray(labels, jnp.int32)
        return FairGreedyState(ridge.init(d), jnp.zeros((d,), jnp.float32),
                               jnp.zeros((n_blocks, d, blk * k), jnp.float32), groups, arm_groups,
                               jnp.zeros((capacity,), jnp.int32), jnp.zeros((capacity,), jnp.float32))

    def shape_kd(state: FairGreedyState) -> tuple[int, int]:
        return state.contexts.shape[2] // blk, state.contexts.shape[1]

    def current_groups(state: FairGreedyState, obs: Observation, k: int) -> jax.Array:
        if obs.groups is None:  # groups fixed per arm
            return state.arm_groups
        g = jnp.asarray(obs.groups, jnp.int32)
        if g.shape != (k,):
            raise ValueError(f"{name}: obs.groups must have shape ({k},), got {tuple(g.shape)}")
        return g

    def select(key: jax.Array, state: FairGreedyState, obs: Observation):
        k, d = shape_kd(state)
        x = _contexts(obs, k, d, name)
        if not multigroup and obs.groups is not None:
            raise ValueError(f"{name} (Algorithm 1) treats each arm as its own group; with per-round candidate "
                             f"groups (obs.groups) use fair_greedy_multigroup")
        g_now = current_groups(state, obs, k) if multigroup else None
        t = jnp.asarray(obs.t, jnp.int32)
        tt = (t - 1) // 2  # t~ (line 4)
        k_gamma, k_rank, k_arm = jax.random.split(key, 3)
        # line 5: mu~ = V^-1 X'r + rho gamma / sqrt(d t~) (or / sqrt(t~), the paper's text), and 0 when t~ = 0
        scale = rho / jnp.sqrt((d if rho_scale == "sqrt_dt" else 1) * jnp.maximum(tt, 1).astype(jnp.float32))
        mu = state.theta + scale * _random.normal(k_gamma, (d,), jnp.float32)  # jax.random.normal's numbers
        mu = jnp.where(tt > 0, mu, 0.0)
        now = x @ mu  # [K] estimated rewards <mu~, X_t,a>
        now_tiled = jnp.tile(now, blk)  # [B K], candidate-major within a round like the buffer
        lo, hi = tt, t - 1  # rows (0-based) of rounds t~+1 .. t-1
        row_of = jnp.arange(blk * k) // k

        def block_counts(b, carry):
            cnt, tot = carry
            past = mu @ state.contexts[b]  # [B K] estimated rewards of the block's candidates
            rows = b * blk + row_of
            valid = (rows >= lo) & (rows < hi)
            if not multigroup:
                below = valid & (past <= now_tiled)
                return cnt + jnp.sum(below.reshape(blk, k), axis=0, dtype=jnp.int32), tot
            same = valid[:, None] & (state.groups[b][:, None] == g_now[None, :])  # [B K (past), K (now)]
            below = same & (past[:, None] <= now[None, :])
            return (cnt + jnp.sum(below, axis=0, dtype=jnp.int32), tot + jnp.sum(same, axis=0, dtype=jnp.int32))

        zero = jnp.zeros((k,), jnp.int32)
        b_lo, b_hi = lo // blk, jnp.minimum((hi + blk - 1) // blk, n_blocks)
        cnt, tot = lax.fori_loop(b_lo, jnp.maximum(b_hi, b_lo), block_counts, (zero, zero))
        if multigroup:
            rank = jnp.where(tot > 0, cnt / jnp.maximum(tot, 1).astype(jnp.float32),
                             jax.random.uniform(k_rank, (k,), jnp.float32))
        else:
            rank = cnt / jnp.maximum(hi - lo, 1).astype(jnp.float32)  # line 6 (all equal when empty)
        probs = _random.argmax_set(rank)  # line 7: uniform over the maximizers
        return _random.categorical(k_arm, probs), probs, {"rank": rank, "theta": mu}

    def update(state: FairGreedyState, obs: Observation, action: jax.Array, reward: jax.Array) -> FairGreedyState:
        k, d = shape_kd(state)
        x = _contexts(obs, k, d, name)
        t = jnp.asarray(obs.t, jnp.int32)
        row = t - 1
        action = jnp.asarray(action, jnp.int32)
        # Rounds beyond the capacity are not stored. The write also depends on the action (always
        # >= 0): that data dependency orders it after select's loop over the same buffer, without
        # which XLA cannot prove the order and copies the whole buffer every round (measured: 6x
        # slower at T = 4000).
        write = (row < capacity) & (action >= 0)
        b, col = jnp.minimum(row, capacity - 1) // blk, (jnp.minimum(row, capacity - 1) % blk) * k
        old = lax.dynamic_slice(state.contexts, (b, 0, col), (1, d, k))
        contexts = lax.dynamic_update_slice(state.contexts, jnp.where(write, x.T[None], old), (b, 0, col))
        actions = state.actions.at[row].set(action, mode="drop")
        rewards = state.rewards.at[row].set(jnp.asarray(reward, jnp.float32), mode="drop")
        groups = state.groups
        if multigroup:
            old_g = lax.dynamic_slice(groups, (b, col), (1, k))
            g_now = current_groups(state, obs, k)
            groups = lax.dynamic_update_slice(groups, jnp.where(write, g_now[None], old_g), (b, col))

        def absorb(r: tuple[LinearState, jax.Array]) -> tuple[LinearState, jax.Array]:
            j = t // 2 - 1  # round t / 2 joins the ridge (row t / 2 - 1)
            xj = contexts[j // blk, :, (j % blk) * k + actions[j]]
            new = ridge.update(r[0], Outcome(rewards[j], x=xj))
            return new, ridge.mean(new)

        ridge_state, theta = lax.cond(t % 2 == 0, absorb, lambda r: r, (state.ridge, state.theta))
        return FairGreedyState(ridge_state, theta, contexts, groups, state.arm_groups, actions, rewards)

    # Past the capacity, rounds are not stored and lines 5-6 would run on an incomplete history
    # (the window t~+1..t-1 and the ridge's rounds 1..t~ read rows that were never written):
    # bayesfair.core.compat.check_policy_fits refuses a study longer than `horizon`.
    requires = {"max_horizon": horizon,
                "because_horizon": f"its history buffer keeps the contexts, actions and rewards of {horizon:,} rounds"}
    return Policy(init, select, update, name, requires=requires)


@declare("policy", example={"horizon": 50}, example_env={"name": "gmf_synthetic"})
def fair_greedy(horizon: Horizon, *, lam: Positive = 0.1, rho: Annotated[float, at.Gt(0), at.Le(1)] = 0.1,
                block: Count | None = None, rho_scale: Literal["sqrt_dt", "sqrt_t"] = "sqrt_dt") -> Policy:
    """Fair-Greedy, Algorithm 1: one candidate per arm, arm a is group a.

    Line 4: t~ = floor((t - 1) / 2). Line 5: mu~_t = V_t~^-1 X'_1:t~ r_1:t~ + rho gamma / sqrt(d t~)
    with V_t~ = X'X + lambda I over rounds 1..t~ (0 if t~ = 0). Line 6: F^_t,a(<mu~, X_t,a>) =
    (t - 1 - t~)^-1 sum_{s = t~+1}^{t-1} 1{<mu~, X_s,a> <= <mu~, X_t,a>}. Line 7: a_t uniform over
    argmax_a F^_t,a. Line 8: the reward. See the module docstring for how the two halves of the
    history are kept with static shapes.

    Parameters
    ----------
    horizon : int
        Capacity of the history buffer: the number of rounds the policy will be run for. A
        longer study is refused before its first round (:func:`bayesfair.core.compat.check_policy_fits`;
        rounds beyond the buffer could not be stored). Memory is ``horizon * K * d`` float32 per run.
    lam : float
        Ridge regularization lambda > 0 (the paper's experiments: 0.1).
    rho : float
        Noise magnitude rho in (0, 1] of line 5 (default 0.1; see the module docstring).
    block : int, optional
        Rows per block of the empirical-CDF loop (default :func:`default_block`).
    rho_scale : {"sqrt_dt", "sqrt_t"}
        The perturbation's divisor in line 5: ``"sqrt_dt"`` (default) rho gamma / sqrt(d t~),
        the authors' code and an O(rho) perturbation norm for any d; ``"sqrt_t"`` rho gamma /
        sqrt(t~), line 5 as printed (sqrt(d) = 4.1 times larger at the Section 6 problem's d = 17).

    Returns
    -------
    Policy
        ``select`` reports ``info["rank"]`` (the estimated relative ranks) and ``info["theta"]``
        (mu~_t).
    """
    if rho_scale not in ("sqrt_dt", "sqrt_t"):
        raise ValueError(f"rho_scale must be 'sqrt_dt' or 'sqrt_t', got {rho_scale!r}")
    return _fair_greedy(horizon, lam, rho, block, multigroup=False, rho_scale=rho_scale)


@declare("policy", example={"horizon": 50}, example_env={"name": "gmf_synthetic"})
def fair_greedy_multigroup(horizon: Horizon, *, lam: Positive = 0.1,
                           rho: Annotated[float, at.Gt(0), at.Le(1)] = 0.1, block: Count | None = None,
                           rho_scale: Literal["sqrt_dt", "sqrt_t"] = "sqrt_dt") -> Policy:
    """Fair-Greedy with K candidates of random groups per round (Section 7, Appendix E).

    As :func:`fair_greedy`, except that each candidate (X_t,a, s_t,a) carries its group
    (``obs.groups``, or ``spec.group_of_arm`` when the environment gives none, e.g. several arms of
    one group; with one arm per group this is Algorithm 1 except at t = 1) and its estimated
    relative rank is the empirical CDF of the estimated rewards
    of *all* candidates of group s_t,a shown in rounds t~+1..t-1, whichever arm they came in:
    F^_t,a = #{(s, b) : s_s,b = s_t,a, <mu~, X_s,b> <= <mu~, X_t,a>} / #{(s, b) : s_s,b = s_t,a}
    (this pooling is what improves the dependence on K in Eq. (4)). A group with no candidate in
    the window gets an independent U(0, 1) rank.

    Parameters
    ----------
    horizon, lam, rho, block, rho_scale
        As in :func:`fair_greedy`.
    """
    if rho_scale not in ("sqrt_dt", "sqrt_t"):
        raise ValueError(f"rho_scale must be 'sqrt_dt' or 'sqrt_t', got {rho_scale!r}")
    return _fair_greedy(horizon, lam, rho, block, multigroup=True, rho_scale=rho_scale)


@declare("policy", example={"noise_sd": 2.0, "theta_bound": 14.3}, example_env={"name": "gmf_synthetic"})
def oful(*, noise_sd: Positive, theta_bound: Positive, lam: Positive = 0.1, delta: OpenUnit = 0.05) -> Policy:
    """OFUL (Abbasi-Yadkori et al. 2011), the optimistic baseline of Sections 6-7.

    a_t = argmax_a <theta^_t, X_t,a> + beta_t ||X_t,a||_{V_t^-1} over the ridge estimate of all
    past rounds, with beta_t = R sqrt(ln det V_t - d ln lambda + 2 ln(1 / delta)) + sqrt(lambda) S
    ([1], Theorem 2), i.e. :func:`bayesfair.policies.linucb` with ``beta=None``; ties uniform.

    R and S belong to the problem, so both are required (no default): the former defaults R = 1,
    S = 1 gave an invalid radius on the Section 6 problem (R = 2, ||mu*||_2 = 14.3), where OFUL then
    behaves almost greedily (experiments/group_meritocratic/README.md).

    Parameters
    ----------
    noise_sd : float
        R, the sub-Gaussian constant of the reward noise (2 in Section 6: ``noise_sd`` of
        :func:`~bayesfair.environments.group_meritocratic.gmf_synthetic`).
    theta_bound : float
        S >= ||mu*||_2 (``environment.params["theta"]``'s norm for the group-meritocratic
        environments).
    lam : float
        lambda > 0 (the paper: 0.1).
    delta : float
        Confidence level: ||theta^_t - mu*||_{V_t} <= beta_t for all t with probability >= 1 - delta.
    """
    pol = linucb(lam=lam, beta=None, delta=delta, noise_sd=noise_sd, theta_bound=theta_bound)
    return pol._replace(label="OFUL")


@declare("policy", example_env={"name": "gmf_synthetic"})
def greedy(*, lam: Positive = 0.1) -> Policy:
    """Greedy (Section 7): argmax_a <theta^_t, X_t,a> with the ridge estimate of all past rounds.

    theta^_t = (X'X + lambda I)^-1 X'r over rounds 1..t-1 (rank-one updates); no exploration;
    ties (e.g. theta^ = 0 at t = 1) uniform, and pi_t is the uniform distribution over the ties.
    """
    lam, ridge = _lam(lam)
    name = "Greedy"

    def init(key: jax.Array, spec: Spec) -> LinearState:
        return ridge.init(_n_features(spec, name))

    def select(key: jax.Array, state: LinearState, obs: Observation):
        x = _contexts_d(obs, state.eta.shape[0], name)
        theta = ridge.mean(state)
        probs = _random.argmax_set(x @ theta)
        return _random.categorical(key, probs), probs, {"theta": theta}

    def update(state: LinearState, obs: Observation, action: jax.Array, reward: jax.Array) -> LinearState:
        x = _contexts_d(obs, state.eta.shape[0], name)
        return ridge.update(state, Outcome(reward, x=x[action]))

    return Policy(init, select, update, name)
