"""Bi-level fairness policies (bilevel_fairness_bf_ucb_aamas2024): BF-UCB, BF-TS and the baselines.

Bi-level fairness (Definition 4) asks for two things at once:

1. beta-Group Exposure Fairness (Definition 2): ``N_g,t >= floor(beta_g t)`` for every group g
   and every round t, with ``beta_g in (0, 1/m]`` and ``sum_g beta_g < 1``;
2. Meritocratic Fairness within each group (Definition 3): given that group g is played, arm i
   of g is played with probability ``f(mu_i) / sum_{j in g} f(mu_j)``.

Algorithm 1 (BF-UCB) achieves both. Every policy here is an instance of its skeleton:

- **initialization**, lines 3-15: ``t_init = m * max_g |g|`` rounds of round robin over the groups
  in index order (round t serves group ``(t - 1) mod m``); a group still holding an arm that was
  never pulled pulls one of them (chosen uniformly at random), otherwise it calls Exposure;
- **group exposure floors**, lines 17-20: ``UFG(t) = {g : beta_g (t-1) - N_g,t-1 > 0}``; if it is
  non-empty, the group of largest deficit is served (ties uniformly at random);
- **Learn**, line 22: otherwise the group with the best estimated value of its within-group
  policy (Subroutine 3) is played;
- **Exposure**, lines 20 and 23: the arm is drawn within the chosen group (Subroutine 2).

The policies differ in the estimate ``mu_t`` of the arm means and in the within-group rule:

============  ============================================  ==========================
policy        mu_t                                          within-group rule
============  ============================================  ==========================
``bf_ucb``    optimistic point of the confidence box        fair policy f(mu)/sum f(mu)
``bf_ts``     one posterior draw                            fair policy
``gef``       upper confidence bound (upper box corner)     argmax (Section 6.1.3)
``gef_ts``    one posterior draw                            argmax
``mf``        optimistic point over all arms, no groups     fair policy (Section 6.1.2)
``mf_ts``     FairX-TS over all arms, no groups             fair policy
============  ============================================  ==========================

Shapes are static: the group structure is read from ``spec.group_of_arm`` at ``init`` and kept
in the state as the one-hot membership matrix ``[K, m]`` (``select`` never sees the spec); every
per-group quantity is a matrix product with it, so nothing loops over groups or rounds in Python
and everything jits and vmaps.

The round index is the policy's own count t - 1 = sum_g N_g,t-1 (``obs.t`` is not used), so the
state alone determines the phase and the floors.

Exactness of the floors. ``beta_g (t - 1)`` is not computed in float32 (at t ~ 1e7 its rounding
error reaches ~0.25, enough to miss a floor). The state carries ``floor(beta_g s)`` as an int32
and its fractional part as two 30-bit int32 limbs, advanced by ``beta_g`` (in the same 60-bit
fixed point) every round; the UFG test and the largest-deficit choice are then exact integer
comparisons. The fixed point represents beta_g exactly when beta_g >= 2^-8 (any float64 in
[2^-8, 1) has no bits below 2^-60); smaller floors are rounded to the nearest 2^-60. Pull counts
are exact while below 2^24 (float32 arm counts) and 2^31 (int32 group counts).

``probs`` is the full selection distribution pi_t over all K arms: the within-group distribution
placed on the groups with weight q_t(g), the probability that g is the group played this round.
q_t is one-hot except when several groups tie (largest deficit, or best Learn value), where it
is uniform over the tied groups, so probs is exact, tie-mixture included. For the Thompson
variants it is conditional on the round's posterior draw (as FairX-TS reports it).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core import _fixedpoint, _random
from bayesfair.core._validate import check_reward_range, positive_int
from bayesfair.core.compat import bounded_requires
from bayesfair.core.declare import Cap, Count, Floors, Index, OpenUnit, Pair, Positive, declare
from bayesfair.core.groups import validate_exposure_floors
from bayesfair.core.merit import Merit, group_merit_weights, resolve_merit
from bayesfair.core.types import Observation, Spec
from bayesfair.policies.base import Policy, posterior_requires
from bayesfair.policies.fairx import check_ascent, exact_box_argmax, fairx_ts, fairx_ucb, run_ascent
from bayesfair.posteriors.base import Outcome, Posterior

__all__ = ["BilevelState", "bf_ucb", "bf_ts", "gef", "gef_ts", "mf", "mf_ts"]

_LIMB = _fixedpoint.LIMB  # bits per limb of the fixed-point fractional part of beta_g * s
_PHASE_INIT, _PHASE_FLOOR, _PHASE_LEARN = 0, 1, 2


class BilevelState(NamedTuple):
    """State of the bi-level policies (one run).

    Attributes
    ----------
    stats : pytree
        Reward statistics: the per-arm reward sums ``[K]`` (UCB variants) or the posterior
        state (Thompson variants).
    arm_pulls : jax.Array
        ``[K]`` float32, N_i: pulls of each arm so far.
    group_pulls : jax.Array
        ``[m]`` int32, N_g: pulls of each group so far; their sum is the number of rounds played
        s = t - 1.
    quota : jax.Array
        ``[m]`` int32, floor(beta_g * s).
    frac : jax.Array
        ``[2, m]`` int32, the fractional part of beta_g * s in two 30-bit limbs (high, low):
        beta_g * s = quota + frac[0] 2^-30 + frac[1] 2^-60, exactly.
    beta_fx : jax.Array
        ``[2, m]`` int32, beta_g in the same fixed point (constant).
    member : jax.Array
        ``[K, m]`` float32 one-hot group membership (constant).
    """

    stats: Any
    arm_pulls: jax.Array
    group_pulls: jax.Array
    quota: jax.Array
    frac: jax.Array
    beta_fx: jax.Array
    member: jax.Array

    # The policy-state protocol of bayesfair.diagnostics (PosteriorCarrier): where the posterior
    # state is, and the arms' groups.

    def posterior_state(self) -> Any:
        """The posterior (or reward-sum) state inside the policy state: ``stats``."""
        return self.stats

    def arm_groups(self) -> np.ndarray:
        """The group of every arm ``[..., K]`` from the one-hot membership."""
        return np.argmax(np.asarray(self.member), axis=-1)


# ---------------------------------------------------------------------------------------------
# construction-time checks


def _check_floors(groups_beta: Any) -> np.ndarray:
    """beta as a float64 [m] array: each beta_g in (0, 1/m], sum < 1 (Definition 2)."""
    try:
        arr = np.asarray(groups_beta, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"groups_beta must be a 1-d array of floors, got {groups_beta!r}") from None
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"groups_beta must be a non-empty 1-d array (one floor per group), got shape {arr.shape}")
    try:
        return validate_exposure_floors(arr, arr.size)
    except ValueError as exc:
        raise ValueError(f"groups_beta: {exc} (Definition 2 of the bi-level paper)") from None


def _check_merit(merit: Any) -> Merit:
    merit = resolve_merit(merit)
    if not merit.gamma > 0:
        raise ValueError(f"merit.gamma must be > 0 (minimum-merit condition, Assumption 2), got {merit.gamma}")
    return merit


def _check_posterior(posterior: Any) -> Posterior:
    if not isinstance(posterior, Posterior):
        raise TypeError(f"posterior must be a bayesfair Posterior, got {posterior!r}")
    return posterior


def _fixed_point(beta: np.ndarray) -> np.ndarray:
    """beta in 60-bit fixed point as ``[2, m]`` int32 limbs (see :mod:`bayesfair.core._fixedpoint`)."""
    return _fixedpoint.to_fixed(beta)


def _membership(spec: Spec, n_groups: int | None) -> np.ndarray:
    """One-hot ``[K, m]`` membership from ``spec``, with the checks init can make (outside jit)."""
    labels = np.asarray(spec.group_of_arm)
    k = int(spec.n_arms)
    if labels.shape != (k,):
        raise ValueError(f"spec.group_of_arm must have shape [n_arms] = ({k},), got {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer):
        raise TypeError(f"spec.group_of_arm must be integers, got dtype {labels.dtype}")
    m = int(spec.n_groups)
    if n_groups is not None and m != n_groups:
        raise ValueError(
            f"groups_beta has {n_groups} floor(s) but the problem has spec.n_groups = {m} groups; "
            "give one floor per group"
        )
    if labels.min() < 0 or labels.max() >= m:
        raise ValueError(f"spec.group_of_arm must lie in [0, {m - 1}], got [{labels.min()}, {labels.max()}]")
    empty = np.flatnonzero(np.bincount(labels, minlength=m) == 0)
    if empty.size:
        raise ValueError(f"every group must be non-empty: group(s) {empty.tolist()} have no arm (spec.group_of_arm)")
    return np.eye(m, dtype=np.float32)[labels]


# ---------------------------------------------------------------------------------------------
# pure per-round pieces (all shapes static)


def _group_index(member: jax.Array) -> jax.Array:
    return jnp.argmax(member, axis=1)


def _within_fair(merit: Merit, mu: jax.Array, member: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Within-group fair policy and group values for all groups at once.

    Returns ``pi [K]`` with pi_i = f(mu_i) / sum_{j in g(i)} f(mu_j) (Definition 3, Subroutine 2
    line 6) and ``value [m]`` with value_g = sum_{i in g} pi_i mu_i (Subroutine 3 line 6). The
    value is computed as sum(w mu) / sum(w) with the same weights, so a group whose means are all
    equal to c gets exactly c (ties between such groups are real ties, not float accidents).
    """
    gidx = _group_index(member)
    w, w_sum = group_merit_weights(merit, mu, member)
    pi = w / w_sum[gidx]
    value = (w * mu) @ member / w_sum
    return pi, value


def _within_argmax(mu: jax.Array, member: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Uniform over each group's maximizers of mu, and value_g = max_{i in g} mu_i (GEF)."""
    gidx = _group_index(member)
    gmax = jnp.max(jnp.where(member > 0, mu[:, None], -jnp.inf), axis=0)
    is_max = (mu == gmax[gidx]).astype(mu.dtype)
    return is_max / (is_max @ member)[gidx], gmax


def _floor_choice(state: BilevelState) -> tuple[jax.Array, jax.Array, jax.Array]:
    """UFG(t) and the uniform distribution over its largest-deficit groups (lines 17-19).

    The deficit beta_g (t-1) - N_g,t-1 is (quota - N_g) + frac, compared exactly and
    lexicographically as the integer triple (quota - N_g, frac_high, frac_low). Returns
    ``(any_under_exposed, q [m], deficit [m] float32)``.
    """
    d_int = state.quota - state.group_pulls
    hi, lo = state.frac[0], state.frac[1]
    ufg = (d_int > 0) | ((d_int == 0) & ((hi > 0) | (lo > 0)))
    cand = ufg & (d_int == jnp.max(jnp.where(ufg, d_int, jnp.iinfo(jnp.int32).min)))
    cand = cand & (hi == jnp.max(jnp.where(cand, hi, -1)))
    cand = cand & (lo == jnp.max(jnp.where(cand, lo, -1)))
    q = cand.astype(jnp.float32) / jnp.maximum(jnp.sum(cand), 1)
    deficit = d_int.astype(jnp.float32) + hi.astype(jnp.float32) * 2.0**-_LIMB + lo.astype(jnp.float32) * 2.0**-60
    return jnp.any(ufg), q, deficit


def _advance_quota(state: BilevelState) -> tuple[jax.Array, jax.Array]:
    """beta_g * s -> beta_g * (s + 1) in exact int32 fixed point."""
    return _fixedpoint.advance(state.quota, state.frac, state.beta_fx)


def _confidence_box(state: BilevelState, delta: float, lo: float, hi: float):
    """Subroutine 2 lines 1-4 (= Subroutine 3 lines 1-4) for every group at once.

    w_i = sqrt(2 ln(4 N_g,t k_g / delta)) / sqrt(N_i), with N_g,t the pulls of i's group before
    this round and k_g = |g|. The box is intersected with the known reward range (which holds the
    true means); an arm never pulled gets the whole range (w = w^g / sqrt(0) is infinite).
    Returns ``(mu_hat, low, high)``, each ``[K]``, behind an optimization barrier: without it XLA
    recomputed the box inside every fusion that reads it (BF-UCB's steady study ~9% longer,
    ``CHANGELOG.md``, 2026-11-27); the values are the same.
    """
    member = state.member
    n = state.arm_pulls
    mu_hat = jnp.where(n > 0, state.stats / jnp.maximum(n, 1.0), 0.5 * (lo + hi))
    # w^g = sqrt(2 ln(4 N_g k_g / delta)) once per group [m], then spread to the arms (one log per group)
    n_group = state.group_pulls.astype(jnp.float32)
    w_group = jnp.sqrt(2.0 * jnp.log(4.0 * jnp.maximum(n_group, 1.0) * jnp.sum(member, axis=0) / delta))
    width = (member @ w_group) * jax.lax.rsqrt(jnp.maximum(n, 1.0))
    low = jnp.where(n > 0, jnp.maximum(lo, mu_hat - width), lo)
    high = jnp.where(n > 0, jnp.minimum(hi, mu_hat + width), hi)
    return jax.lax.optimization_barrier((mu_hat, low, high))


def _build(
    *,
    label: str,
    beta: np.ndarray | None,
    estimate,
    within_rule,
    init_stats,
    update_stats,
    requires: dict[str, Any] | None = None,
) -> Policy:
    """Algorithm 1's skeleton around an estimate of the means and a within-group rule.

    ``beta=None`` means one group holding every arm and no floors (the MF baseline).
    ``estimate(key, state) -> mu [K]``; ``within_rule(mu, member) -> (pi [K], value [m])``.
    """
    floors = beta is not None
    beta_fx = _fixed_point(beta) if floors else np.zeros((2, 1), np.int32)
    n_groups = int(beta.size) if floors else None

    def init(key: jax.Array, spec: Spec) -> BilevelState:
        if floors:
            member = _membership(spec, n_groups)
        else:
            member = np.ones((positive_int("spec.n_arms", spec.n_arms), 1), np.float32)
        k, m = member.shape
        return BilevelState(
            stats=init_stats(k),
            arm_pulls=jnp.zeros((k,), jnp.float32),
            group_pulls=jnp.zeros((m,), jnp.int32),
            quota=jnp.zeros((m,), jnp.int32),
            frac=jnp.zeros((2, m), jnp.int32),
            beta_fx=jnp.asarray(beta_fx),
            member=jnp.asarray(member),
        )

    def select(key: jax.Array, state: BilevelState, obs: Observation):
        k_mu, k_group, k_arm = jax.random.split(key, 3)
        member = state.member
        m = member.shape[1]
        gidx = _group_index(member)
        s = jnp.sum(state.group_pulls)  # rounds played so far, t - 1
        sizes = jnp.sum(member, axis=0)

        mu = estimate(k_mu, state)
        pi_est, value = within_rule(mu, member)

        # Lines 7-8: a group holding never-pulled arms pulls one of them (uniformly at random).
        unpulled = (state.arm_pulls == 0).astype(jnp.float32)
        unpulled_in_group = (unpulled @ member)[gidx]
        within = jnp.where(unpulled_in_group > 0, unpulled / jnp.maximum(unpulled_in_group, 1.0), pi_est)

        # Group distribution q_t: round robin (lines 5-6), largest deficit (17-19), Learn (22).
        t_init = m * jnp.max(sizes).astype(jnp.int32)
        in_init = s < t_init
        q_init = (jnp.arange(m) == s % m).astype(jnp.float32)
        q_learn = _random.argmax_set(value)
        if floors:
            under, q_floor, deficit = _floor_choice(state)
        else:
            under, q_floor, deficit = jnp.bool_(False), q_learn, jnp.zeros((m,), jnp.float32)
        q = jnp.where(in_init, q_init, jnp.where(under, q_floor, q_learn))
        phase = jnp.where(in_init, _PHASE_INIT, jnp.where(under, _PHASE_FLOOR, _PHASE_LEARN)).astype(jnp.int32)

        probs = within * q[gidx]
        group = _random.random_argmax(k_group, q)  # uniform over the groups of largest q (the ties)
        action = _random.categorical(k_arm, within * member[:, group])
        info = {"group": group, "phase": phase, "mu": mu, "group_value": value, "deficit": deficit}
        return action, probs, info

    def update(state: BilevelState, obs: Observation, action: jax.Array, reward: jax.Array) -> BilevelState:
        hit = jnp.arange(state.arm_pulls.shape[0]) == action
        quota, frac = _advance_quota(state)
        return state._replace(
            stats=update_stats(state.stats, Outcome(reward, arm=action)),
            arm_pulls=state.arm_pulls + hit,
            group_pulls=state.group_pulls + state.member[action].astype(jnp.int32),
            quota=quota,
            frac=frac,
        )

    return Policy(init, select, update, label, requires=requires)


def _reward_sums(k: int) -> jax.Array:
    return jnp.zeros((k,), jnp.float32)


def _add_reward(total: jax.Array, obs: Outcome) -> jax.Array:
    """The reward sums per arm, updated like a posterior (``update(stats, Outcome)``)."""
    return total + (jnp.arange(total.shape[0]) == obs.arm) * jnp.asarray(obs.reward, jnp.float32)


def _optimistic_estimate(merit: Merit, delta: float, lo: float, hi: float, lr: float, steps: int, start: str,
                         solver: str = "pga"):
    """Subroutine 2 line 5 / Subroutine 3 line 5 for all groups at once.

    The groups partition the arms, so sum_g value_g(mu) is separable and one projected ascent on
    it maximizes every group's value over its own box simultaneously. As FairX-UCB does (Section
    5.1 of the FairX paper): ``steps`` projected gradient-ascent steps of size ``lr`` from the
    upper corner (or the clipped empirical mean); ``solver="exact"``: every group's maximum
    exactly (:func:`bayesfair.policies.fairx.exact_box_argmax`).
    """

    def estimate(key: jax.Array, state: BilevelState) -> jax.Array:
        mu_hat, low, high = _confidence_box(state, delta, lo, hi)
        member = state.member
        if solver == "exact":
            return exact_box_argmax(merit, low, high, member)

        def objective(mu):
            return jnp.sum(_within_fair(merit, mu, member)[1])

        grad = jax.grad(objective)
        mu = high if start == "upper" else jnp.clip(mu_hat, low, high)
        return run_ascent(lambda m: jnp.clip(m + lr * grad(m), low, high), mu, steps)

    return estimate


def _posterior_estimate(posterior: Posterior):
    def estimate(key: jax.Array, state: BilevelState) -> jax.Array:
        return posterior.sample(key, state.stats)

    return estimate


def _optimistic_fair_parts(merit: Merit, delta: float, lo: float, hi: float, lr: float, steps: int,
                           start: str, solver: str) -> dict[str, Any]:
    """The ``_build`` pieces of the optimistic fair policies (BF-UCB, anytime MF): optimistic
    means from reward sums, and the within-group fair policy of those means."""
    return {
        "estimate": _optimistic_estimate(merit, delta, lo, hi, lr, steps, start, solver),
        "within_rule": lambda mu, member: _within_fair(merit, mu, member),
        "init_stats": _reward_sums,
        "update_stats": _add_reward,
    }


# ---------------------------------------------------------------------------------------------
# public constructors


@declare("policy", example=[{}, {"start": "center", "delta": 0.1}, {"merit": {"name": "identity"}}])
def bf_ucb(
    groups_beta: Floors | Any,
    merit: Merit,
    *,
    delta: OpenUnit = 0.01,
    reward_range: Pair = (0.0, 1.0),
    learning_rate: Positive = 0.01,
    steps: Annotated[Index, Cap(1000)] = 10,
    start: Literal["upper", "center"] = "upper",
    solver: Literal["pga", "exact"] = "pga",
) -> Policy:
    """BF-UCB, Algorithm 1 of the bi-level fairness paper (AAMAS 2024).

    - Lines 3-15 (initialization): ``t_init = m * max_g |g|`` rounds of round robin over the
      groups in index order. On its turn a group pulls an arm it has never pulled (uniformly at
      random among them, line 8) or, once all its arms were pulled, calls Exposure (line 10).
      Every arm has been pulled once after ``t_init`` rounds (after exactly K rounds only when
      the groups have equal sizes).
    - Lines 17-20: ``UFG(t) = {g : beta_g (t-1) - N_g,t-1 > 0}``; if non-empty, the group of
      largest deficit (ties uniformly at random) calls Exposure. This gives Theorem 2's anytime
      guarantee ``N_g,t >= floor(beta_g t)`` for every t >= 1 and every g.
    - Lines 22-23: otherwise Learn (Subroutine 3) picks
      ``argmax_g sum_{i in g} pi_g(mu~^g)_i mu~^g_i`` (line 6, ties uniformly at random), where
      mu~^g maximizes that value over the group's confidence box (line 5), and Exposure is called.
    - Exposure (Subroutine 2): box ``mu_i in [mu_hat_i - w_i, mu_hat_i + w_i]`` with
      ``w_i = sqrt(2 ln(4 N_g,t k_g / delta)) / sqrt(N_i)`` (lines 2-3, delta inside the log,
      N_g,t the group's pulls before this round, k_g = |g|), the optimistic point mu~^g of line 5
      (the same box as Learn's, so computed once), and ``I_t ~ f(mu~) / sum_{j in g} f(mu~_j)``.

    Line 6 of Subroutine 2 writes the policy with mu_hat_{i,t}, the symbol line 1 uses for the
    empirical mean; the proof of Theorem 3 (and FairX-UCB, which it adapts) uses the optimistic
    mu~ of line 5, which is what is implemented.

    Parameters
    ----------
    groups_beta : array-like [m]
        Exposure floors beta_g in (0, 1/m] with sum < 1 (Definition 2). Their number must equal
        ``spec.n_groups`` of the problem (checked by ``init``).
    merit : Merit
        Merit function f; ``merit.gamma > 0`` is required (minimum merit, Assumption 2).
    delta : float
        Confidence parameter in (0, 1); the paper's experiments use 0.01.
    reward_range : (float, float)
        Known bounds of the mean rewards; the confidence box is intersected with it.
    learning_rate, steps, start
        Projected gradient ascent for line 5 (non-convex), as in FairX-UCB
        (:func:`bayesfair.fairx_ucb`): ``steps`` steps of size ``learning_rate`` from the upper
        corner (``"upper"``) or the clipped empirical mean (``"center"``). With f(mu) = mu and
        means above 0.5 the upper corner is the exact maximizer (Section 6.2).
    solver : {"pga", "exact"}
        ``"pga"`` (default): the ascent above, as the FairX experiments the paper adapts (its
        Section 6 does not name a solver for line 5); ``"exact"``: every group's line 5 solved
        exactly (:func:`bayesfair.policies.fairx.exact_box_argmax`; ``learning_rate``, ``steps``
        and ``start`` unused). No value for never-pulled arms is needed: every arm is pulled
        once in the initialization (lines 7-8) before any optimistic point is used.

    Returns
    -------
    Policy
        ``info`` holds ``group`` (the group played), ``phase`` (0 initialization, 1 exposure
        floor, 2 Learn), ``mu`` (the optimistic means), ``group_value [m]`` and ``deficit [m]``.
    """
    beta = _check_floors(groups_beta)
    merit = _check_merit(merit)
    delta = float(delta)  # in (0, 1): declared
    lo, hi = check_reward_range(reward_range)
    lr, steps = check_ascent(learning_rate, steps, start, solver)
    return _build(
        label="BF-UCB", beta=beta, requires=bounded_requires(lo, hi, "BF-UCB"),
        **_optimistic_fair_parts(merit, delta, lo, hi, lr, steps, start, solver),
    )


@declare("policy", example={"posterior": "beta_bernoulli"})
def bf_ts(groups_beta: Floors | Any, merit: Merit, posterior: Posterior) -> Policy:
    """BF-TS: Algorithm 1 with a Thompson-sampling Learn (the paper's Section 4 allows either).

    Each round draws mu ~ posterior once. Initialization (lines 3-15) and the exposure floors
    (lines 17-20) are exactly BF-UCB's; Learn picks the group whose fair-policy value
    sum_{i in g} f(mu_i) mu_i / sum_{j in g} f(mu_j) is largest under the draw (ties uniformly at
    random), and Exposure draws the arm from the fair policy of the same draw within the chosen
    group. ``probs`` is pi_t conditional on the draw. Works with any conjugate
    :class:`~bayesfair.posteriors.Posterior` (Beta-Bernoulli, Normal, Normal-Inverse-Gamma).

    Parameters
    ----------
    groups_beta : array-like [m]
        Exposure floors, as for :func:`bf_ucb`.
    merit : Merit
        Merit function with ``gamma > 0``.
    posterior : Posterior
        Per-arm posterior family.
    """
    beta = _check_floors(groups_beta)
    merit = _check_merit(merit)
    posterior = _check_posterior(posterior)
    return _build(
        label="BF-TS", beta=beta, estimate=_posterior_estimate(posterior),
        requires=posterior_requires(posterior, "BF-TS"),
        within_rule=lambda mu, member: _within_fair(merit, mu, member),
        init_stats=posterior.init, update_stats=posterior.update,
    )


@declare("policy")
def gef(groups_beta: Floors | Any, *, delta: OpenUnit = 0.01, reward_range: Pair = (0.0, 1.0)) -> Policy:
    """GEF baseline (Section 6.1.3): group exposure floors, then the best UCB arm in the group.

    The adaptation of Patil et al.'s Fair-Learn to groups: Algorithm 1's initialization and
    exposure floors, but "when a group is chosen, the arm with the highest reward is preferred
    instead of ensuring meritocratic fairness within the group". The index of arm i is the upper
    corner of BF-UCB's confidence box, ``min(high, mu_hat_i + w_i)`` with the same
    ``w_i = sqrt(2 ln(4 N_g,t k_g / delta)) / sqrt(N_i)``. A floor-served group plays its
    largest index; otherwise Learn plays the group whose largest index is largest (i.e. the arm
    of largest index overall). Ties, including arms clipped to the same upper bound, are broken
    uniformly at random.
    """
    beta = _check_floors(groups_beta)
    delta = float(delta)  # in (0, 1): declared
    lo, hi = check_reward_range(reward_range)

    def estimate(key: jax.Array, state: BilevelState) -> jax.Array:
        return _confidence_box(state, delta, lo, hi)[2]

    return _build(label="GEF", beta=beta, estimate=estimate, within_rule=_within_argmax,
                  requires=bounded_requires(lo, hi, "GEF"),
                  init_stats=_reward_sums, update_stats=_add_reward)


@declare("policy", example={"posterior": "beta_bernoulli"})
def gef_ts(groups_beta: Floors | Any, posterior: Posterior) -> Policy:
    """GEF with Thompson sampling: the floors of Algorithm 1, then the argmax of one posterior draw.

    A floor-served group plays the arm of largest draw within it; otherwise the arm of largest
    draw overall is played (Learn = the group holding it). Initialization as in Algorithm 1.
    """
    beta = _check_floors(groups_beta)
    posterior = _check_posterior(posterior)
    return _build(label="GEF-TS", beta=beta, estimate=_posterior_estimate(posterior),
                  requires=posterior_requires(posterior, "GEF-TS"),
                  within_rule=_within_argmax, init_stats=posterior.init, update_stats=posterior.update)


@declare("policy", example=[{}, {"horizon": 1000}])
def mf(
    merit: Merit,
    *,
    delta: OpenUnit = 0.01,
    horizon: Count | None = None,
    reward_range: Pair = (0.0, 1.0),
    learning_rate: Positive = 0.01,
    steps: Annotated[Index, Cap(1000)] = 10,
    start: Literal["upper", "center"] | None = None,
    solver: Literal["pga", "exact"] = "pga",
) -> Policy:
    """MF baseline (Section 6.1.2): meritocratic fairness over all arms, ignoring the groups.

    The paper's MF is the FairX algorithm of Wang et al. [40] run on all arms. FairX-UCB needs the
    horizon in its width w0 = sqrt(2 ln(4 T K / delta)); bi-level fairness replaces T by the
    pull count. Both are offered:

    - ``horizon=None`` (default, anytime): BF-UCB's Exposure (Subroutine 2) applied to a single
      group holding every arm, without floors: every arm is pulled once first (uniformly at
      random among the unpulled ones), then ``I_t ~ f(mu~) / sum f(mu~)`` with mu~ the optimistic
      point of the box ``w_i = sqrt(2 ln(4 (t-1) K / delta)) / sqrt(N_i)``. This is what the
      authors' released experiment code runs for MF.
    - ``horizon=T``: exactly :func:`bayesfair.fairx_ucb` with Theorem 3.2.1's w0 (renamed MF).

    ``reward_range``, ``learning_rate``, ``steps``, ``start`` and ``solver`` are as in :func:`bf_ucb`,
    except that ``start`` defaults to the default of the algorithm MF runs: ``"center"`` (FairX-UCB's)
    with ``horizon``, ``"upper"`` (BF-UCB's) without, so ``mf(merit, horizon=T)`` is
    ``fairx_ucb(merit, horizon=T)`` with its defaults.
    """
    merit = _check_merit(merit)
    delta = float(delta)  # in (0, 1): declared
    lo, hi = check_reward_range(reward_range)
    if start is None:
        start = "center" if horizon is not None else "upper"
    lr, steps = check_ascent(learning_rate, steps, start, solver)
    if horizon is not None:
        pol = fairx_ucb(merit, horizon=horizon, delta=delta, reward_range=(lo, hi), learning_rate=lr,
                        steps=steps, start=start, solver=solver)
        return pol._replace(label="MF", requires=bounded_requires(lo, hi, "MF"))
    return _build(
        label="MF", beta=None, requires=bounded_requires(lo, hi, "MF"),
        **_optimistic_fair_parts(merit, delta, lo, hi, lr, steps, start, solver),
    )


@declare("policy", example={"posterior": "beta_bernoulli"})
def mf_ts(merit: Merit, posterior: Posterior) -> Policy:
    """MF with Thompson sampling: FairX-TS (:func:`bayesfair.fairx_ts`) over all arms, renamed MF-TS."""
    merit = _check_merit(merit)
    posterior = _check_posterior(posterior)
    pol = fairx_ts(posterior, merit)
    return pol._replace(label="MF-TS", requires=posterior_requires(posterior, "MF-TS"))
