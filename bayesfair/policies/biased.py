"""Policies for contextual bandits with biased feedback (group_fairness_biased_feedback_aamas2022).

Round t shows one context x_t,i per arm (``obs.contexts`` ``[n, d]``); arm i belongs to group
g(i) (``spec.group_of_arm``). The interval policies of Sections 3-5 keep, for every arm, the
least-squares statistics of its own observations (Algorithm 1, line 7) and, for every group, of
all observations of the group's arms (lines 4-5):

    A_i = lam I + X_i'X_i,  b_i = X_i'Y_i        (per arm)
    G_j = lam I + X_Pj'X_Pj, c_j = X_Pj'Y_Pj    (per group)

Each pull adds x x' and x y to the pulled arm's and its group's statistics: the Cholesky factors
of A_i and G_j follow by rank-one updates (O(d^2), :func:`bayesfair.posteriors.linear.
chol_rank_one_update`), never a refit from the history. ``lam`` (``ridge``) is a tiny ridge that
makes the estimate defined before an arm has d linearly independent contexts; in unexplored
directions it gives a very wide interval (x' A^-1 x ~ |x|^2 / lam), which plays the role of the
paper's undefined OLS interval (its code uses an infinite one). Estimates and widths:

    beta_hat_i . x = (L_i^-1 x) . (L_i^-1 b_i),   x' A_i^-1 x = |L_i^-1 x|^2

    w_i,t = |Q_N(0, sigma^2 x' A_i^-1 x)(delta / (2 n t))| = z(delta / (2 n t)) sigma sqrt(x' A_i^-1 x)
    b_Pj,i,t = z(delta / (2 (n / |P_j|) T)) sigma sqrt(x' G_j^-1 x)

(Algorithm 1, lines 8-9 and 11-14, with z(p) = -Phi^-1(p): the quantile of a normal whose
*variance* is sigma^2 x' A^-1 x, so its scale is the square root. Line 11-12 print X'X without the
inverse; the Appendix B proofs (Lemma 4, Eq. 15) use the inverse, as here.) Without a
``horizon`` the b widths use t in place of T (anytime), so one run serves every horizon.

Every round is an exploration round with probability eps_t = t^(-1/3) (Algorithm 1, line 2),
which plays an arm uniformly at random; otherwise the policy plays the argmax of its upper
bounds. The reported pi_t is the exact mixture eps_t / n + (1 - eps_t) * (uniform over the tied
maximizers), or over the chained arms for IntervalChaining.

GroupFair-TS (:func:`group_fair_ts`) replaces the intervals by Thompson sampling on the
hierarchical group-bias posterior (:mod:`bayesfair.posteriors.group_bias`).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.linalg import solve_triangular
from jax.scipy.special import ndtri

from bayesfair.core import _random
from bayesfair.core._validate import finite_array
from bayesfair.core.declare import Count, Index, OpenUnit, Positive, declare
from bayesfair.core.types import Observation, Spec
from bayesfair.policies.base import Policy
from bayesfair.posteriors import group_bias as gb
from bayesfair.posteriors.base import Outcome
from bayesfair.posteriors.linear import chol_rank_one_update

__all__ = [
    "IntervalState",
    "top_interval",
    "interval_chaining",
    "naive_fair",
    "group_fair_top_interval",
    "group_fair_ts",
    "interval_bounds",
]


class IntervalState(NamedTuple):
    """Least-squares statistics of the interval policies.

    ``chol [n, d, d]`` / ``xty [n, d]``: lower Cholesky factor of A_i = lam I + X_i'X_i and
    b_i = X_i'Y_i per arm; ``group_chol [m, d, d]`` / ``group_xty [m, d]``: the same per group;
    ``pulls [n]`` and ``group_pulls [m]`` counts; ``group_of_arm [n]`` int32 (from the spec).
    """

    chol: jax.Array
    xty: jax.Array
    pulls: jax.Array
    group_chol: jax.Array
    group_xty: jax.Array
    group_pulls: jax.Array
    group_of_arm: jax.Array


# --------------------------------------------------------------------------- validation helpers


def _common(delta: Any, sigma: Any, ridge: Any, horizon: Any) -> tuple[float, float, float, int | None]:
    """As floats/int; the ranges are checked by the callers' declarations."""
    return float(delta), float(sigma), float(ridge), None if horizon is None else int(horizon)


def _n_features(spec: Spec, name: str) -> int:
    d = getattr(spec, "n_features", None)
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"{name} needs spec.n_features >= 1 (contexts [n, d] from a linear environment), got {d!r}")
    return int(d)


def _contexts(obs: Observation, state: IntervalState, name: str) -> jax.Array:
    if obs.contexts is None:
        raise ValueError(f"{name} needs obs.contexts [n, d]; got None (a multi-armed environment?)")
    c = jnp.asarray(obs.contexts, jnp.float32)
    n, d = state.xty.shape
    if c.shape != (n, d):
        raise ValueError(f"{name}: obs.contexts must be [n_arms={n}, n_features={d}], got shape {tuple(c.shape)}")
    return c


def _groups_of(spec: Spec, name: str, *, reference: int | None = None, min_arms: int = 2) -> np.ndarray:
    try:
        labels, _, _ = gb.check_bias_groups(spec.group_of_arm, reference=0 if reference is None else reference,
                                            min_arms=min_arms, n_groups=spec.n_groups, what="spec.group_of_arm")
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{name}: {exc}") from None
    return labels


def _explore_prob(t: jax.Array) -> jax.Array:
    """eps_t = t^(-1/3) (Algorithm 1, line 2), capped at 1."""
    return jnp.minimum(jnp.asarray(t, jnp.float32) ** (-1.0 / 3.0), 1.0)


def _quantile(p: jax.Array) -> jax.Array:
    """z(p) = |Phi^-1(p)| for the small tail probability p (the half-width of a unit normal)."""
    return -ndtri(jnp.clip(p, 1e-37, 0.5))


# --------------------------------------------------------------------------- shared statistics


def _init_state(spec: Spec, ridge: float, name: str) -> IntervalState:
    n = int(spec.n_arms)
    d = _n_features(spec, name)
    labels = np.asarray(spec.group_of_arm, np.int32).reshape(-1)
    if labels.shape != (n,):
        raise ValueError(f"{name}: spec.group_of_arm must have one entry per arm ({n}), got shape {labels.shape}")
    m = int(spec.n_groups)
    eye = jnp.eye(d, dtype=jnp.float32) * np.float32(np.sqrt(ridge))
    return IntervalState(jnp.broadcast_to(eye, (n, d, d)), jnp.zeros((n, d), jnp.float32), jnp.zeros((n,), jnp.float32),
                         jnp.broadcast_to(eye, (m, d, d)), jnp.zeros((m, d), jnp.float32),
                         jnp.zeros((m,), jnp.float32), jnp.asarray(labels))


def _update_state(state: IntervalState, x: jax.Array, action: jax.Array, reward: jax.Array) -> IntervalState:
    """Rank-one update of the pulled arm's and its group's statistics (Algorithm 1's X, Y, 𝒳, 𝒴)."""
    reward = jnp.asarray(reward, jnp.float32)
    g = state.group_of_arm[action]
    return state._replace(
        chol=state.chol.at[action].set(chol_rank_one_update(state.chol[action], x)),
        xty=state.xty.at[action].add(x * reward),
        pulls=state.pulls.at[action].add(1.0),
        group_chol=state.group_chol.at[g].set(chol_rank_one_update(state.group_chol[g], x)),
        group_xty=state.group_xty.at[g].add(x * reward),
        group_pulls=state.group_pulls.at[g].add(1.0),
    )


# Largest d for which the triangular solves are unrolled substitutions (see _tri_solve).
_UNROLL_MAX_D = 8


def _tri_solve(chol: jax.Array, v: jax.Array, *, trans: bool = False) -> jax.Array:
    """L^-1 v (``trans=False``) or L^-T v for one lower factor ``chol`` [d, d] and ``v`` [d].

    For d <= ``_UNROLL_MAX_D`` this is forward (back) substitution written out over the d rows:
    d^2 / 2 scalar multiply-adds that XLA fuses with the surrounding arithmetic. On CPU,
    ``solve_triangular`` is one LAPACK ``trsm`` call per matrix (per run and arm under ``vmap``)
    plus layout copies: with them GroupFairTopInterval ran 4.3x slower at n = 10, d = 2, R = 50
    (``experiments/benchmarks/biased_bench.py --compare-solvers``, 2026-11-24; numbers in
    experiments/benchmarks/README.md). The substitution is the algorithm ``trsm`` runs for one
    right-hand side, so the results agree up to rounding. Larger d keeps ``solve_triangular``: the
    unrolled code grows as d^2, and the threshold 8 is a choice, not a measured break-even.
    """
    d = chol.shape[-1]
    if d > _UNROLL_MAX_D:
        return solve_triangular(chol, v, lower=True, trans=1 if trans else 0)
    out: list[Any] = [None] * d
    for i in (range(d - 1, -1, -1) if trans else range(d)):
        acc = v[i]
        for j in (range(i + 1, d) if trans else range(i)):
            acc = acc - (chol[j, i] if trans else chol[i, j]) * out[j]
        out[i] = acc / chol[i, i]
    return jnp.stack(out)


def _fit_at(chol: jax.Array, xty: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(beta_hat . x, x' A^-1 x) for one factor ``chol`` [d, d], ``xty`` [d] and context ``x`` [d]."""
    v = _tri_solve(chol, x)
    u = _tri_solve(chol, xty)
    return jnp.dot(v, u), jnp.dot(v, v)


def _arm_fits(state: IntervalState, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per arm: beta_hat_i . x_i and x_i' A_i^-1 x_i, ``[n]`` each (Algorithm 1, lines 7-8)."""
    return jax.vmap(_fit_at)(state.chol, state.xty, x)


def _group_fits(state: IntervalState, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per (arm, group): psi_hat_j . x_i and x_i' G_j^-1 x_i, ``[n, m]`` each (lines 4-5, 11-12)."""
    per_group = jax.vmap(_fit_at, in_axes=(0, 0, None))
    return jax.vmap(per_group, in_axes=(None, None, 0))(state.group_chol, state.group_xty, x)


def _group_coefficients(state: IntervalState) -> jax.Array:
    """psi_hat_j = G_j^-1 c_j, ``[m, d]`` (Algorithm 1, lines 4-5)."""

    def solve(chol, xty):
        return _tri_solve(chol, _tri_solve(chol, xty), trans=True)

    return jax.vmap(solve)(state.group_chol, state.group_xty)


def _arm_width(state: IntervalState, x: jax.Array, t: jax.Array, delta: float, sigma: float
               ) -> tuple[jax.Array, jax.Array]:
    """(beta_hat_i . x_i, w_i,t) with w_i,t = z(delta / (2 n t)) sigma sqrt(x' A_i^-1 x) (lines 8-9)."""
    n = state.xty.shape[0]
    est, var = _arm_fits(state, x)
    z = _quantile(delta / (2.0 * n * jnp.asarray(t, jnp.float32)))
    return est, z * sigma * jnp.sqrt(jnp.maximum(var, 0.0))


def interval_bounds(state: IntervalState, contexts: Any, t: Any, *, delta: float = 0.1,
                    sigma: float = 1.0) -> tuple[jax.Array, jax.Array]:
    """Lower and upper confidence bounds beta_hat_i . x_i -+ w_i,t of every arm (TopInterval's intervals)."""
    est, w = _arm_width(state, jnp.asarray(contexts, jnp.float32), t, delta, sigma)
    return est - w, est + w


def _mixture(key: jax.Array, t: jax.Array, exploit: jax.Array) -> tuple[jax.Array, jax.Array]:
    """pi_t = eps_t / n + (1 - eps_t) exploit, and an action drawn from it."""
    eps = _explore_prob(t)
    probs = eps / exploit.shape[0] + (1.0 - eps) * exploit
    return _random.categorical(key, probs), probs


def _interval_policy(select_index, name: str, ridge: float, *, needs_groups: bool = False,
                     reference: int | None = None) -> Policy:
    def init(key: jax.Array, spec: Spec) -> IntervalState:
        if needs_groups:
            _groups_of(spec, name, reference=reference)
        return _init_state(spec, ridge, name)

    def select(key: jax.Array, state: IntervalState, obs: Observation):
        x = _contexts(obs, state, name)
        return select_index(key, state, x, obs.t)

    def update(state: IntervalState, obs: Observation, action: jax.Array, reward: jax.Array) -> IntervalState:
        x = _contexts(obs, state, name)
        return _update_state(state, x[action], action, reward)

    return Policy(init, select, update, name)


# --------------------------------------------------------------------------- TopInterval, IntervalChaining


#: The environment the interval policies' contract examples run on.
_BIASED_ENV = {"name": "synthetic_biased", "n_arms": 7, "n_sensitive": 4, "n_features": 3}


@declare("policy", example_env=_BIASED_ENV)
def top_interval(delta: OpenUnit = 0.1, *, sigma: Positive = 1.0, ridge: Positive = 1e-2) -> Policy:
    """TopInterval (Section 3; a LinUCB variant, Li et al. 2010; Algorithm 1 without the group terms).

    With probability t^(-1/3) play an arm uniformly at random (Algorithm 1, line 2); otherwise play
    the largest upper interval beta_hat_i . x_i + w_i,t (line 17-18 with w from lines 8-9).

    Parameters
    ----------
    delta : float
        Confidence parameter in (0, 1) (the paper's experiments use 0.1).
    sigma : float
        Reward noise sd in the interval widths (Eq. 2 has N(0, 1) noise).
    ridge : float
        lam > 0 of the per-arm least squares (see the module docstring).
    """
    delta, sigma, ridge, _ = _common(delta, sigma, ridge, None)

    def select(key, state, x, t):
        est, w = _arm_width(state, x, t, delta, sigma)
        upper = est + w
        action, probs = _mixture(key, t, _random.argmax_set(upper))
        return action, probs, {"upper": upper}

    return _interval_policy(select, "TopInterval", ridge)


def chain_set(lower: jax.Array, upper: jax.Array) -> jax.Array:
    """Boolean ``[n]``: the arms whose intervals are chained (transitively overlap) with the top interval.

    The chained intervals form one connected component whose union is [low, max upper]; an
    interval belongs to it iff its upper end reaches ``low``. ``low`` starts at the top interval's
    lower end and decreases to the minimum lower end of the members (at most n passes).
    """
    n = upper.shape[0]
    lower, upper = lax.optimization_barrier((lower, upper))  # one value for every use (see _random.argmax_set)
    top = upper == jnp.max(upper)
    low0 = jnp.min(jnp.where(top, lower, jnp.inf))

    def body(_, low):
        member = upper >= low
        return jnp.minimum(low, jnp.min(jnp.where(member, lower, jnp.inf)))

    low = lax.fori_loop(0, n, body, low0)
    return upper >= low


@declare("policy", example_env=_BIASED_ENV)
def interval_chaining(delta: OpenUnit = 0.1, *, sigma: Positive = 1.0, ridge: Positive = 1e-2) -> Policy:
    """IntervalChaining (Joseph et al. 2016; Section 3 of the paper).

    With probability t^(-1/3) play uniformly at random; otherwise play uniformly among the arms
    whose intervals [beta_hat_i . x_i - w_i,t, beta_hat_i . x_i + w_i,t] are chained to the arm with
    the highest upper confidence (:func:`chain_set`; intervals sharing a point are chained).
    Parameters as :func:`top_interval`.
    """
    delta, sigma, ridge, _ = _common(delta, sigma, ridge, None)

    def select(key, state, x, t):
        est, w = _arm_width(state, x, t, delta, sigma)
        chained = chain_set(est - w, est + w).astype(jnp.float32)
        action, probs = _mixture(key, t, chained / jnp.sum(chained))
        return action, probs, {"upper": est + w, "chained": chained}

    return _interval_policy(select, "IntervalChaining", ridge)


@declare("policy", example_env=_BIASED_ENV)
def naive_fair(delta: OpenUnit = 0.1, *, sigma: Positive = 1.0, ridge: Positive = 1e-2) -> Policy:
    """NaiveFair / NaiveGroupFair (Algorithm 2, Section 5.1): a uniformly random group, then TopInterval in it.

    Line 2 picks each of the m groups with probability 1/m; line 3 applies TopInterval to the
    chosen group's arms (explore uniformly within the group with probability t^(-1/3), else the
    largest upper interval in the group). pi_t is the exact mixture
    sum_g (1/m) [eps_t / |g| on g + (1 - eps_t) argmax-set of the upper bounds within g], so every
    group's exposure is exactly 1/m per round (demographic parity, Eq. 13).
    """
    delta, sigma, ridge, _ = _common(delta, sigma, ridge, None)

    def select(key, state, x, t):
        est, w = _arm_width(state, x, t, delta, sigma)
        upper = lax.optimization_barrier(est + w)  # one value for every use (see _random.argmax_set)
        m = state.group_chol.shape[0]
        member = jax.nn.one_hot(state.group_of_arm, m, dtype=jnp.float32)  # [n, m]
        eps = _explore_prob(t)
        masked = jnp.where(member > 0, upper[:, None], -jnp.inf)  # [n, m]
        best = (masked == jnp.max(masked, axis=0, keepdims=True)) & (member > 0)
        best = best / jnp.sum(best, axis=0, keepdims=True)
        within = eps * member / jnp.sum(member, axis=0, keepdims=True) + (1.0 - eps) * best
        probs = jnp.mean(within, axis=1)
        return _random.categorical(key, probs), probs, {"upper": upper}

    return _interval_policy(select, "NaiveFair", ridge, needs_groups=True)


# --------------------------------------------------------------------------- GroupFairTopInterval


@declare("policy", example=[{}, {"rho": 2.0, "horizon": 500}], example_env=_BIASED_ENV)
def group_fair_top_interval(
    delta: OpenUnit = 0.1,
    *,
    reference: Index = 0,
    rho: float | None = None,
    sigma: Positive = 1.0,
    ridge: Positive = 1e-2,
    horizon: Count | None = None,
) -> Policy:
    """GroupFairTopInterval: Algorithm 1 (two groups, and its m-group form) or Algorithm 3 (with rho).

    With probability t^(-1/3) play uniformly at random (line 2); otherwise play the argmax of u_i,t:

    - ``rho=None`` (Algorithm 1, lines 15/17): an arm of the reference group P_r keeps
      u = beta_hat_i . x + w_i,t; an arm of another group P_j gets the bias-corrected
      u = beta_hat_i . x + w_i,t - psi_hat_Pj . x + b_Pj,i,t + psi_hat_Pr . x + b_Pr,i,t,
      i.e. its group's average coefficients replaced by the reference group's. With two groups
      this is Algorithm 1 literally (P1 = the non-reference group); with m > 2 every
      non-reference group is corrected towards the reference group the same way.
    - ``rho=<float>`` (Algorithm 3, Appendix B.2, line 13): every arm gets
      u = beta_hat_i . x + w_i,t + rho - psi_hat_Pj . x + b_Pj,i,t with P_j its own group (every
      group centred at its own average, then at the user's rho). rho shifts every arm's index
      by the same amount, so it does not change the choice; it is kept for fidelity.

    psi_hat_Pj = G_j^-1 c_j is the least-squares fit of all rewards of group j's arms (lines
    4-5). ``info["track"]["psi_hat"]`` ``[m, d]`` reports psi_hat_Pj - psi_hat_Pr, the bias
    estimate the correction implies (0 for the reference group).

    Parameters
    ----------
    delta : float
        Confidence parameter in (0, 1).
    reference : int
        The reference (non-sensitive) group P_r (Algorithm 1's P2).
    rho : float, optional
        Algorithm 3's centre; ``None`` selects Algorithm 1.
    sigma, ridge : float
        As :func:`top_interval`.
    horizon : int, optional
        T in the group widths b: Algorithm 1 lines 13-14 write b_Pj,i,t with delta / (2 (n / |P_j|) T),
        the paper's form, selected by ``horizon=T`` (a study's ``horizon``). ``None`` (default)
        uses t in place of T: an anytime width (one run serves every horizon, and the policy
        does not need T, as the arm widths w_i,t of line 9 do not). The b widths are then
        narrower early on; on the paper's synthetic problem this lowers the sensitive group's
        share by about 0.5 points against ``horizon=T``.
    """
    delta, sigma, ridge, horizon = _common(delta, sigma, ridge, horizon)
    if isinstance(reference, bool) or not isinstance(reference, (int, np.integer)) or reference < 0:
        raise ValueError(f"reference must be a non-negative group index, got {reference!r}")
    reference = int(reference)
    rho = None if rho is None else float(rho)
    name = "GroupFairTopInterval"

    def select(key, state, x, t):
        n = state.xty.shape[0]
        m = state.group_chol.shape[0]
        est, w = _arm_width(state, x, t, delta, sigma)
        g_est, g_var = _group_fits(state, x)  # [n, m]
        size = jnp.sum(jax.nn.one_hot(state.group_of_arm, m, dtype=jnp.float32), axis=0)  # |P_j|
        big_t = jnp.asarray(horizon if horizon is not None else t, jnp.float32)
        z_b = _quantile(delta * size / (2.0 * n * big_t))  # [m]: delta / (2 (n / |P_j|) T)
        b = z_b[None, :] * sigma * jnp.sqrt(jnp.maximum(g_var, 0.0))  # [n, m]
        own = jax.nn.one_hot(state.group_of_arm, m, dtype=jnp.float32)
        own_est = jnp.sum(own * g_est, axis=1)
        own_b = jnp.sum(own * b, axis=1)
        if rho is None:
            corrected = est + w - own_est + own_b + g_est[:, reference] + b[:, reference]
            upper = jnp.where(state.group_of_arm == reference, est + w, corrected)
        else:
            upper = est + w + rho - own_est + own_b
        action, probs = _mixture(key, t, _random.argmax_set(upper))
        coef = _group_coefficients(state)
        return action, probs, {"upper": upper, "track": {"psi_hat": coef - coef[reference]}}

    def init(key: jax.Array, spec: Spec) -> IntervalState:
        _groups_of(spec, name, reference=reference)
        return _init_state(spec, ridge, name)

    def select_obs(key, state, obs):
        return select(key, state, _contexts(obs, state, name), obs.t)

    def update(state, obs, action, reward):
        return _update_state(state, _contexts(obs, state, name)[action], action, reward)

    return Policy(init, select_obs, update, name)


# --------------------------------------------------------------------------- GroupFair-TS


@declare("policy", example=[{"tau": 2.0, "s": 5.0}, {"tau": 2.0, "s": 5.0, "method": "collapsed"}],
         example_env=_BIASED_ENV)
def group_fair_ts(
    *,
    tau: Positive = gb.DEFAULT_PRIORS.tau,
    s: Positive = gb.DEFAULT_PRIORS.s,
    sigma: Positive = gb.DEFAULT_PRIORS.sigma,
    prior_mean: float | list[float] | Any = gb.DEFAULT_PRIORS.prior_mean,
    prior_sd: Positive = gb.DEFAULT_PRIORS.prior_sd,
    reference: Index = 0,
    true_psi: Any = None,
    method: Literal["auto", "joint", "collapsed"] = "auto",
) -> Policy:
    """GroupFair-TS: Thompson sampling on the hierarchical group-bias posterior, maximizing the *true* reward.

    Each round draws (beta_bar, beta_1..n, psi) jointly from the conjugate posterior of
    :func:`bayesfair.posteriors.group_bias.group_bias_posterior` (the shared population prior on
    the arms' true coefficients that encodes Section 3.1's equal-groups assumption) and plays
    argmax_i beta_i . x_i: the sampled *true* reward f*(x) of Eq. (3), not the biased reward the
    arm returns. The bias psi is learned from the data through the hierarchical prior, never
    given. The posterior is then updated with the observed (biased) reward of Eq. (2), a rank-one
    update. pi_t is the uniform distribution over the maximizers of the sampled true rewards
    (one-hot almost surely), i.e. the policy conditional on the draw.

    ``info["track"]`` reports ``psi_hat`` ``[m, d]``, the posterior mean of every group's bias
    (reference row 0), and, if ``true_psi`` is given, ``psi_error`` = ||E[psi | data] - psi||_2
    over all groups. When psi is drawn per run (e.g. :func:`bayesfair.environments.biased.
    synthetic_biased`), score ``psi_hat`` post hoc against each run's psi
    (:func:`bayesfair.environments.biased.env_params`).

    Parameters
    ----------
    tau, s, sigma : float
        Known scales: spread of the arms' true coefficients, prior sd of the bias coordinates,
        reward noise sd (defaults: the group-bias model's one set of default priors,
        :data:`bayesfair.posteriors.group_bias.DEFAULT_PRIORS`: 3, 10 and the paper's 1).
    prior_mean, prior_sd : float or array [d], float
        Prior N(m0, prior_sd^2 I) of the population mean beta_bar.
    reference : int
        Reference group (psi = 0).
    true_psi : array [m, d], optional
        The true bias, only for tracking ``psi_error``.
    method : {"auto", "joint", "collapsed"}
        Conjugate state representation (same posterior; see
        :func:`~bayesfair.posteriors.group_bias.group_bias_posterior`).
    """
    tau, s, sigma, prior_sd = float(tau), float(s), float(sigma), float(prior_sd)  # > 0: declared
    prior_mean_arr = finite_array("prior_mean", prior_mean)
    if isinstance(reference, bool) or not isinstance(reference, (int, np.integer)) or reference < 0:
        raise ValueError(f"reference must be a non-negative group index, got {reference!r}")
    reference = int(reference)
    psi_true = None if true_psi is None else finite_array("true_psi", true_psi, ndim=2)
    if psi_true is not None and np.abs(psi_true).max() > 1e15:  # float32 inside: 1e300 became inf
        raise ValueError(f"true_psi must have magnitudes <= 1e15, got {np.abs(psi_true).max():g}")
    if method not in ("auto", "joint", "collapsed"):
        raise ValueError(f"method must be 'auto', 'joint' or 'collapsed', got {method!r}")
    name = "GroupFair-TS"

    def init(key: jax.Array, spec: Spec) -> gb.GroupBiasState:
        labels = _groups_of(spec, name, reference=reference)
        d = _n_features(spec, name)
        if psi_true is not None and psi_true.shape != (spec.n_groups, d):
            raise ValueError(f"{name}: true_psi must have shape (n_groups={spec.n_groups}, n_features={d}), "
                             f"got {psi_true.shape}")
        post = gb.group_bias_posterior(labels, d, tau=tau, s=s, sigma=sigma, prior_mean=prior_mean_arr,
                                       prior_sd=prior_sd, reference=reference, method=method)
        return post.init()

    def _x(obs: Observation, state: Any) -> jax.Array:
        if obs.contexts is None:
            raise ValueError(f"{name} needs obs.contexts [n, d]; got None (a multi-armed environment?)")
        x = jnp.asarray(obs.contexts, jnp.float32)
        n = state.slot.shape[0]
        d = state.r.shape[1] if isinstance(state, gb.CollapsedState) else state.eta.shape[0] // (
            n + state.group_slot.shape[0])
        if x.shape != (n, d):
            raise ValueError(f"{name}: obs.contexts must be [n_arms={n}, n_features={d}], got shape {tuple(x.shape)}")
        return x

    def select(key: jax.Array, state: Any, obs: Observation):
        x = _x(obs, state)
        k_theta, k_arm = jax.random.split(key)
        draw, psi_hat = gb.state_sample_with_psi_mean(k_theta, state)
        true_value = jnp.sum(draw.beta * x, axis=1)
        probs = _random.argmax_set(true_value)
        track = {"psi_hat": psi_hat}
        if psi_true is not None:
            track["psi_error"] = jnp.sqrt(jnp.sum((psi_hat - jnp.asarray(psi_true, jnp.float32)) ** 2))
        return _random.categorical(k_arm, probs), probs, {"true_value": true_value, "track": track}

    def update(state, obs, action, reward):
        return gb.state_update(state, Outcome(reward, arm=action, x=_x(obs, state)[action]))

    return Policy(init, select, update, name)
