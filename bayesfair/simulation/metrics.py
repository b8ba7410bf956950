r"""Regret, exposure and fairness metrics: pure per-round terms and a streaming accumulator.

Every metric the simulator records is either a sum over rounds, a running minimum over rounds, or
the latest value of a quantity a policy reports; all accumulate online in memory independent of
the horizon (the simulator keeps a float32 accumulator per chunk of rounds, each sum with a
compensation term so that long chunks do not drift, and combines the chunk values into float64
totals on the host, so long horizons do not lose precision; counts of at most one per round,
``pulls`` and ``group_pulls``, are exact int32 sums instead).

The definitions (FairX paper, fairness_of_exposure_fairx_icml2021, Sections 3.1 and 4.1;
bi-level paper, bilevel_fairness_bf_ucb_aamas2024, Sections 3 and 6); which of them a simulation
records is chosen by its metric components (:mod:`bayesfair.simulation.metric_parts`; the default set records
all that apply). ``fairness_regret``, ``reward_regret`` and ``group_fairness_regret`` need a merit
(component ``FairXRegrets``):

- ``fairness_regret``  :math:`\mathrm{FR}_T = \sum_t \lVert \pi^*_t - \pi_t \rVert_1` (FairX Eq. 2 / 6)
- ``reward_regret``    :math:`\mathrm{RR}_T = \sum_t (\pi^*_t - \pi_t) \cdot \mu_t` (can be negative; FairX Eq. 1 / 5)
- ``regret``           :math:`\sum_t (\max_a \mu_{t,a} - \pi_t \cdot \mu_t)`, the conventional pseudo-regret
- ``reward``           the realized reward
- ``exposure`` [arm]   sum_t pi_t(a);  ``pulls`` [arm]: pull counts
- ``group_exposure`` [group]  sum_t sum_{a in g} pi_t(a);  ``group_pulls`` [group];
  ``group_offered`` [group]: candidates of the group offered (differs from t |g| only when the
  environment draws the candidates' groups per round, ``Observation.groups``)
- ``group_fairness_regret`` [group]  sum_{t: g_t = g} ||pi*_g,t - pi^t_g||_1, the meritocratic
  fairness regret of each group (bi-level paper, Section 6.3.2 and Theorem 3's left-hand side):
  g_t is the group of the pulled arm, pi*_g,t the within-group fair policy f(mu)/sum_{g} f(mu)
  of the round's means and pi^t_g the policy's selection distribution conditioned on group g.

The others always (``Conventional``). When they apply:

- ``<name>_regret`` for every entry of ``Round.extra`` (an environment's alternative per-candidate
  values, e.g. true rewards under biased feedback or group-relative ranks):
  sum_t (max_a v_t,a - pi_t . v_t).
- ``anytime_slack`` [group] when the simulation is given exposure floors beta:
  min over rounds s <= t of (N_g,s - floor(beta_g s)) (bi-level paper, Definition 2: beta-group
  exposure fairness holds at every round iff it is >= 0), computed exactly in integers.
- every entry of a policy's ``info["track"]`` (its latest value at each checkpoint).

Post hoc (from the recorded values): the bi-level regret against R*_beta(T) of Eq. (1) and its
two terms of Theorem 4, :func:`bilevel_regret`.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core import _fixedpoint

__all__ = [
    "MetricSpec",
    "init_acc",
    "update_acc",
    "acc_value",
    "compensated",
    "FloorState",
    "init_floor_state",
    "advance_floors",
    "fairness_regret_step",
    "reward_regret_step",
    "regret_step",
    "group_fairness_regret_step",
    "group_sums",
    "bilevel_regret",
]

SUM, MIN, LAST = "sum", "min", "last"
_INT_MAX = np.iinfo(np.int32).max


class MetricSpec(NamedTuple):
    """How one recorded metric is shaped and combined across chunks."""

    name: str
    dims: tuple[str, ...]  # dims after (policy, run, checkpoint)
    shape: tuple[int, ...]
    dtype: Any
    combine: str  # "sum" | "min" | "last"
    long_name: str


LO = "__lo"  # suffix of a sum's compensation term in the accumulator (see update_acc)


def compensated(spec: MetricSpec) -> bool:
    """Whether a sum carries a compensation term: float sums do; integer sums (counts of at most
    one per round, e.g. ``pulls``) are exact and do not. A chunk adds at most ``chunk_size``
    rounds, and :func:`bayesfair.simulate` keeps ``horizon + chunk_size`` below 2**31, so such a
    count cannot overflow its int32 chunk sum; the host adds the chunks in float64 as for every
    sum. (The exact count also costs less per round than a compensated float sum: BF-UCB's round
    ~5% less with ``pulls`` and ``group_pulls`` recorded, CHANGELOG.md, 2026-11-27.)"""
    return spec.combine == SUM and not np.issubdtype(np.dtype(spec.dtype), np.integer)


def init_acc(specs: tuple[MetricSpec, ...]) -> dict[str, jax.Array]:
    """An empty accumulator: zeros for sums (and the compensation terms ``<name>__lo`` of float
    sums) and latest values, int32 max for running minima."""
    acc = {s.name: jnp.full(s.shape, _INT_MAX if s.combine == MIN else 0, s.dtype) for s in specs}
    acc.update({s.name + LO: jnp.zeros(s.shape, s.dtype) for s in specs if compensated(s)})
    return acc


def acc_value(acc: Mapping[str, Any], spec: MetricSpec) -> np.ndarray:
    """A metric's value from a (host) accumulator: for sums, float64 (a float sum plus its
    compensation term); otherwise the value as stored."""
    if compensated(spec):
        return np.asarray(acc[spec.name], np.float64) + np.asarray(acc[spec.name + LO], np.float64)
    if spec.combine == SUM:
        return np.asarray(acc[spec.name], np.float64)
    return np.asarray(acc[spec.name])


def _two_sum_add(total: jax.Array, lo: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """total + x with its rounding error added to ``lo`` (Neumaier's compensated summation).

    The rounding error of a float32 addition is exactly (total - (t - b)) + (x - b) with
    t = total + x and b = t - total (Knuth's TwoSum), so ``total + lo`` keeps the sum to about
    float32 precision *relative to the sum*, however many small terms are added. Without it a
    chunk of 65,536 rounds lost up to ~1e-4 of an arm's exposure to systematic rounding (the
    same small pi_t(a) added to a large total rounds the same way every round), i.e. +-1,700
    rounds of exposure per run at T = 1e7: as large as the bi-level regret computed from it.
    """
    t = total + x
    b = t - total
    return t, lo + ((total - (t - b)) + (x - b))


class FloorState(NamedTuple):
    """Exact per-group pull counts and floors, carried across chunks for ``anytime_slack``."""

    group_pulls: jax.Array  # [m] int32, N_g,t
    quota: jax.Array  # [m] int32, floor(beta_g t)
    frac: jax.Array  # [2, m] int32, fractional part of beta_g t (see bayesfair.core._fixedpoint)
    beta_fx: jax.Array  # [2, m] int32, beta_g in fixed point


def init_floor_state(floors: np.ndarray) -> FloorState:
    """The state before round 1 for exposure floors beta_g ``[m]``."""
    m = int(np.asarray(floors).size)
    return FloorState(jnp.zeros((m,), jnp.int32), jnp.zeros((m,), jnp.int32), jnp.zeros((2, m), jnp.int32),
                      jnp.asarray(_fixedpoint.to_fixed(floors)))


def fairness_regret_step(pi_star: jax.Array, pi: jax.Array) -> jax.Array:
    """||pi* - pi||_1, the per-round term of Eq. (2)."""
    return jnp.sum(jnp.abs(pi_star - pi), axis=-1)


def reward_regret_step(pi_star: jax.Array, pi: jax.Array, mean: jax.Array) -> jax.Array:
    """pi* . mu - pi . mu, the per-round term of Eq. (1)."""
    return jnp.sum((pi_star - pi) * mean, axis=-1)


def regret_step(pi: jax.Array, mean: jax.Array) -> jax.Array:
    """max_a mu_a - pi . mu, the per-round conventional (pseudo-)regret."""
    return jnp.max(mean, axis=-1) - jnp.sum(pi * mean, axis=-1)


def group_fairness_regret_step(pi_star_within: jax.Array, pi: jax.Array, member: jax.Array,
                               group: jax.Array) -> jax.Array:
    """||pi*_g - pi^t_g||_1 on the played group g, as a ``[m]`` vector that is zero elsewhere.

    ``pi_star_within`` is the within-group fair policy ``[K]``, ``pi`` the selection distribution,
    ``member`` the one-hot ``[K, m]`` membership and ``group`` the played group g_t; pi^t_g is pi
    restricted to g and renormalized (the played group has positive probability under pi).
    """
    mask = member[:, group]
    p_group = jnp.sum(pi * mask)
    within = pi * mask / jnp.maximum(p_group, jnp.finfo(pi.dtype).tiny)
    step = jnp.sum(jnp.abs(pi_star_within * mask - within))
    return step * (jnp.arange(member.shape[1]) == group)


def update_acc(acc: dict[str, jax.Array], terms: Mapping[str, jax.Array],
               specs: Mapping[str, MetricSpec]) -> dict[str, jax.Array]:
    """Add one round's ``terms`` (metric name -> this round's value) to the accumulator.

    Each term is combined as its spec says: float sums are compensated (:func:`_two_sum_add`:
    ``acc[name] + acc[name + "__lo"]`` is the running sum, read it with :func:`acc_value`),
    integer sums are plain (exact) additions, running minima take the minimum, latest values
    replace the stored value.
    """
    out = dict(acc)
    for name, x in terms.items():
        spec = specs[name]
        if compensated(spec):
            out[name], out[name + LO] = _two_sum_add(acc[name], acc[name + LO], jnp.asarray(x, spec.dtype))
        elif spec.combine == SUM:
            out[name] = acc[name] + jnp.asarray(x, spec.dtype)
        elif spec.combine == MIN:
            out[name] = jnp.minimum(acc[name], x)
        else:
            out[name] = jnp.asarray(x, spec.dtype)
    return out


def advance_floors(fs: FloorState, member_action: jax.Array) -> tuple[FloorState, jax.Array]:
    """Count the round's pull and advance the floors: returns the new state and N_g,t - floor(beta_g t)."""
    quota, frac = _fixedpoint.advance(fs.quota, fs.frac, fs.beta_fx)
    pulls = fs.group_pulls + member_action.astype(jnp.int32)
    return fs._replace(group_pulls=pulls, quota=quota, frac=frac), pulls - quota


def group_sums(per_arm: np.ndarray, group_of_arm: np.ndarray, n_groups: int) -> np.ndarray:
    """Sum a ``[..., K]`` array over the arms of each group -> ``[..., m]``."""
    member = np.eye(n_groups)[np.asarray(group_of_arm)]
    return per_arm @ member


def bilevel_regret(exposure: np.ndarray, mean: np.ndarray, pi_star_within: np.ndarray, group_of_arm: np.ndarray,
                   floors: np.ndarray, checkpoints: np.ndarray) -> dict[str, np.ndarray]:
    """Bi-level regret against R*_beta(T) (Eq. 1, Definition 5) and its Theorem 4 decomposition.

    Parameters
    ----------
    exposure : ``[..., R, P, K]``
        Cumulative exposure sum_t pi_t(i) at the checkpoints, the estimate of E[N_i,T] (it has the
        same expectation as the pull counts and a smaller variance).
    mean, pi_star_within : ``[R, K]``
        Arm means per run and the within-group fair policy pi*_g of those means.
    group_of_arm : ``[K]`` int;  floors : ``[m]`` the exposure floors beta_g;  checkpoints : ``[P]`` int (the T values)

    Returns
    -------
    dict with ``[..., R, P]`` arrays:

    - ``bf_regret``  R*_beta(T) - sum_i E[N_i,T] mu_i, with
      R*_beta(T) = sum_g floor(beta_g T) R*_g + (T - sum_g floor(beta_g T)) R*_{g*}   (Eq. 1)
    - ``bf_regret_groups``  sum_g (E[N_g,T] - floor(beta_g T)) Delta_g, the extra pulls of
      sub-optimal groups (Theorem 4, first term), Delta_g = R*_{g*} - R*_g
    - ``bf_regret_within``  sum_t Delta^t_{g_t} = sum_g E[N_g,T] R*_g - sum_i E[N_i,T] mu_i, the
      within-group policy regret (Theorem 4, second term).

    The two terms add up to ``bf_regret`` exactly (sum_g E[N_g,T] = T).
    """
    exposure = np.asarray(exposure, np.float64)
    labels = np.asarray(group_of_arm)
    m = int(np.asarray(floors).size)
    member = np.eye(m)[labels]  # [K, m]
    r_star = (np.asarray(pi_star_within) * np.asarray(mean)) @ member  # [R, m]: R*_g
    best = r_star.max(axis=-1)  # [R]: R*_{g*}
    t = np.asarray(checkpoints, np.int64)
    # floor(beta_g T) exactly (the float64 beta as a fraction), as the policies' floors are.
    quota = np.array([[(Fraction(float(b)) * int(tt)).__floor__() for b in np.asarray(floors, np.float64)]
                      for tt in t], np.float64)  # [P, m]
    optimal = quota @ r_star.T + (t[:, None] - quota.sum(axis=1, keepdims=True)) * best[None, :]  # [P, R]
    earned = np.einsum("...rpk,rk->...rp", exposure, np.asarray(mean, np.float64))
    group_exp = exposure @ member  # [..., R, P, m]
    delta = best[:, None] - r_star  # [R, m]
    groups_term = np.einsum("...rpg,rg->...rp", group_exp - quota[None, :, :], delta)
    within_term = np.einsum("...rpg,rg->...rp", group_exp, r_star) - earned
    return {"bf_regret": optimal.T - earned, "bf_regret_groups": groups_term, "bf_regret_within": within_term}
