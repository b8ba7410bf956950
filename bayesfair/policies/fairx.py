"""FairX policies for multi-armed bandits (fairness_of_exposure_fairx_icml2021, Section 3, 5.1).

Each returns the fair policy pi_t(a) = f(mu_t,a) / sum_a' f(mu_t,a') for some parameter mu_t and
samples the arm from it:

- FairX-TS (Algorithm 2): mu_t is one posterior draw.
- FairX-UCB (Algorithm 1): mu_t is the optimistic parameter in the confidence box, found by
  projected gradient ascent as in the paper's experiments (Section 5.1: lr 0.01, 10 steps), or
  exactly (:func:`exact_box_argmax`).
- FairX-EG (Section 5.1): with probability epsilon uniform, else the fair policy of mu_hat.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, NamedTuple

import jax
import jax.numpy as jnp

from bayesfair.core import _random
from bayesfair.core._validate import check_reward_range, finite_float, float_in, positive_int
from bayesfair.core.compat import bounded_requires
from bayesfair.core.declare import Cap, Horizon, Index, OpenUnit, Pair, Positive, Unit, declare
from bayesfair.core.merit import Merit, fair_policy, resolve_merit
from bayesfair.core.types import Observation, Spec
from bayesfair.policies.base import (
    CountState,
    Policy,
    empirical_mean,
    init_counts,
    posterior_requires,
    update_counts,
)
from bayesfair.policies.compose import epsilon_mixture, fair_share_rule, posterior_sampling
from bayesfair.posteriors.base import Posterior

__all__ = ["fairx_ts", "fairx_ucb", "fairx_eg", "theorem_w0", "UCBState", "exact_box_argmax"]


@declare("policy", example={"posterior": "beta_bernoulli"})
def fairx_ts(posterior: Posterior, merit: Merit) -> Policy:
    """FairX-TS, Algorithm 2: sample mu_t ~ V_t (line 3), pi_t = f(mu_t)/sum f(mu_t) (line 4),
    a_t ~ pi_t (line 5), posterior update (line 7). Works with any :class:`Posterior`.

    Examples
    --------
    One decision by hand: ``select`` returns the action and the full selection distribution pi_t:

    >>> import jax
    >>> import bayesfair as bf
    >>> env = bf.bernoulli_arms([0.2, 0.5, 0.8])
    >>> policy = bf.fairx_ts(bf.beta_bernoulli(), bf.merit.exponential(4.0))
    >>> state = policy.init(jax.random.key(0), env.spec)
    >>> rnd = env.step(jax.random.key(1), env.reset(jax.random.key(2)), 1)
    >>> action, pi, info = policy.select(jax.random.key(3), state, rnd.obs)
    >>> policy.label, pi.shape, round(float(pi.sum()), 5), 0 <= int(action) < 3
    ('FairX-TS', (3,), 1.0, True)
    >>> state = policy.update(state, rnd.obs, action, rnd.reward[action])
    """
    if not isinstance(posterior, Posterior):
        raise TypeError(f"posterior must be a bayesfair Posterior, got {posterior!r}")
    merit = resolve_merit(merit)
    return posterior_sampling(posterior, fair_share_rule(merit), "FairX-TS",
                              requires=posterior_requires(posterior, "FairX-TS"))


def theorem_w0(horizon: int, n_arms: int, delta: float) -> float:
    """w0 = sqrt(2 ln(4 T K / delta)), the confidence width of Theorems 3.2.1/3.2.2."""
    horizon = positive_int("horizon", horizon)
    n_arms = positive_int("n_arms", n_arms)
    delta = float_in("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    return math.sqrt(2.0 * math.log(4.0 * horizon * n_arms / delta))


def check_ascent(learning_rate: Any, steps: Any, start: Any, solver: Any = "pga") -> tuple[float, int]:
    """Validate the optimistic-step settings shared by the optimistic fair policies."""
    lr = finite_float("learning_rate", learning_rate)
    if lr <= 0:
        raise ValueError(f"learning_rate must be > 0, got {lr}")
    steps = positive_int("steps", steps, minimum=0)
    if start not in ("upper", "center"):
        raise ValueError(f"start must be 'upper' or 'center', got {start!r}")
    if solver not in ("pga", "exact"):
        raise ValueError(f"solver must be 'pga' or 'exact', got {solver!r}")
    return lr, steps


def _floor_lifted(merit: Merit, low: jax.Array, high: jax.Array) -> jax.Array:
    """Raise ``low`` to the identity merit's floor (within the box): f is constant below the
    floor, so a larger mean there raises the numerator and leaves every weight unchanged."""
    if merit.name == "identity" and "floor" in merit.params:
        return jnp.maximum(low, jnp.minimum(merit.params["floor"], high))
    return low


def exact_box_argmax(merit: Merit, low: jax.Array, high: jax.Array, member: jax.Array | None = None) -> jax.Array:
    """argmax over the box ``low <= mu <= high`` of every group's fair value, solved exactly.

    The value of a group g is V_g(mu) = sum_{a in g} f(mu_a) mu_a / sum_{a in g} f(mu_a), a ratio
    (line 7 of FairX-UCB's Algorithm 1 with one group; Subroutine 2/3 line 5 of BF-UCB with the
    groups, which partition the arms, so each group is maximized over its own box).

    Why the optimum is one of K + 1 vertices. Let lambda* be the maximum. By Dinkelbach's
    argument, a maximizer maximizes sum_a f(mu_a) (mu_a - lambda*), which is separable: each arm
    maximizes g(m) = f(m) (m - lambda*) over [l_a, h_a]. Above lambda*, g increases (f > 0,
    nondecreasing); below, -g = f(m) (lambda* - m) is log-concave when f is, hence quasi-concave,
    so its minimum over an interval is at an end. Hence every arm sits at l_a or h_a, and h_a is
    (weakly) better exactly when lambda* <= t_a = (f(h_a) h_a - f(l_a) l_a) / (f(h_a) - f(l_a))
    (t_a = +inf when f(h_a) = f(l_a)). So the optimum is "h_a for the arms with t_a >= tau, l_a for
    the others" for some tau in {t_1, ..., t_K, +inf}; all K + 1 of them are evaluated and the
    best is kept per group. Exact for log-concave f: the exponential merit (log f linear), the
    identity above its floor (below the floor f is constant and the low end is raised to the
    floor). For any other nondecreasing positive f (a custom merit) it is the best vertex of the
    box, which the same argument restricted to vertices shows.

    Parameters
    ----------
    merit : Merit
        The merit function f.
    low, high : jax.Array [K]
        The box, ``low <= high``.
    member : jax.Array [K, m], optional
        One-hot arm-to-group matrix; one group holding every arm when omitted.

    Returns
    -------
    jax.Array [K]
        The maximizer. Cost O(K^2 m) per call, pure jnp (jit- and vmap-able).
    """
    k = low.shape[-1]
    if member is None:
        member = jnp.ones((k, 1), low.dtype)
    low = _floor_lifted(merit, low, high)
    log_f = merit.log_fn if merit.log_fn is not None else (lambda m: jnp.log(merit.fn(m)))
    lf_low, lf_high = log_f(low), log_f(high)
    ratio = jnp.exp(jnp.minimum(lf_low - lf_high, 0.0))  # f(l) / f(h) in (0, 1]
    t = jnp.where(ratio < 1.0, (high - ratio * low) / jnp.maximum(1.0 - ratio, jnp.finfo(low.dtype).tiny),
                  jnp.inf)
    tau = jnp.concatenate([t, jnp.full((1,), jnp.inf, t.dtype)])
    up = t[None, :] >= tau[:, None]  # [K + 1 candidates, K arms]
    mu = jnp.where(up, high, low)
    logits = jnp.where(up, lf_high, lf_low)
    gidx = jnp.argmax(member, axis=1)
    gmax = jnp.max(jnp.where(member[None] > 0, logits[:, :, None], -jnp.inf), axis=1)  # [K + 1, m]
    w = jnp.exp(logits - gmax[:, gidx])
    value = ((w * mu) @ member) / (w @ member)  # [K + 1, m]
    best = jnp.argmax(value, axis=0)  # [m]
    return jnp.where(up[best[gidx], jnp.arange(k)], high, low)


UNROLL_STEPS = 32  # ascent steps traced one by one (the default 10: unchanged numbers)


def run_ascent(step: Any, x: Any, steps: int) -> Any:
    """``steps`` applications of ``step`` to ``x`` (the projected gradient-ascent loop).

    Up to :data:`UNROLL_STEPS` steps are unrolled at trace time, as before; more run in a
    ``lax.fori_loop``: the unrolled program grows with every step, and 1,000 unrolled steps took
    XLA over five minutes to compile (a study that seemed to hang, not interruptible by Ctrl-C).
    """
    if steps <= UNROLL_STEPS:
        for _ in range(steps):
            x = step(x)
        return x
    return jax.lax.fori_loop(0, steps, lambda i, v: step(v), x)


class UCBState(NamedTuple):
    """FairX-UCB state: the counts, and w0 (fixed at init from T, K and delta)."""

    counts: CountState
    w0: jax.Array


@declare("policy", example=[{}, {"w0": 0.5, "start": "upper"}, {"merit": {"name": "identity"}, "w0": 1.0},
                             {"w0": 0.5, "solver": "exact", "initial_estimate": 0.2}])
def fairx_ucb(
    merit: Merit,
    *,
    w0: Positive | None = None,
    horizon: Horizon | None = None,
    delta: OpenUnit = 0.05,
    reward_range: Pair = (0.0, 1.0),
    learning_rate: Positive = 0.01,
    steps: Annotated[Index, Cap(1000)] = 10,
    start: Literal["upper", "center"] = "center",
    solver: Literal["pga", "exact"] = "pga",
    initial_estimate: float | None = None,
) -> Policy:
    """FairX-UCB, Algorithm 1.

    Lines 3-6: N_t,a, mu_hat_t,a, w_t,a = w0 / sqrt(N_t,a) and the box
    CR_t = prod_a [mu_hat - w, mu_hat + w]. The box is intersected with the known
    ``reward_range`` (which contains the true means, so CR_t still does); an arm never pulled has
    the whole range. Line 7: mu_t = argmax_{mu in CR_t} sum_a f(mu_a) mu_a / sum_a' f(mu_a'),
    non-convex; ``solver="pga"`` (default) solves it as the paper's experiments do (Section 5.1,
    "we use projected gradient ascent ... learning rate 0.01 ... 10 steps"), ``solver="exact"``
    exactly (:func:`exact_box_argmax`, a different algorithm in practice: the ascent barely moves
    from its start, lr x steps = 0.1). Lines 8-9: pi_t and a_t ~ pi_t.

    Parameters
    ----------
    merit : Merit
        Merit function f.
    w0 : float, optional
        Confidence width. If omitted, Theorem 3.2.1's ``sqrt(2 ln(4 T K / delta))`` is used,
        which needs ``horizon``.
    horizon, delta
        T and delta of Theorem 3.2.1 (only used when ``w0`` is omitted).
    reward_range : (float, float)
        Known bounds of the mean rewards.
    learning_rate, steps
        Projected gradient ascent settings (the paper: 0.01 and 10); unused by ``"exact"``.
    start : {"center", "upper"}
        Starting point of the ascent; unused by ``"exact"``. The paper does not state it.
        ``"center"`` (default) starts at the empirical means mu_hat (clipped to the box):
        with lr x steps = 0.1 the ascent stays near its start, and this start reproduces the
        paper's Figure 2 (FairX-UCB with the best reward regret of the FairX algorithms, Section
        5.3) where ``"upper"`` does not (experiments/fairx_yeast/README.md, "Solvers and start").
        ``"upper"`` starts at the upper corner mu_hat + w, the maximizer whenever the objective
        increases in every coordinate; with 10 small steps it leaves the low arms over-exposed.
    solver : {"pga", "exact"}
        How line 7 is solved: ``"pga"`` (default, the paper's experiments, Section 5.1) or
        ``"exact"``.
    initial_estimate : float, optional
        mu_hat of an arm never pulled (the paper leaves it open); default the middle of
        ``reward_range``. Only the ``"center"`` start uses it: the box of such an arm is the
        whole range.

    Examples
    --------
    >>> import bayesfair as bf
    >>> policy = bf.fairx_ucb(bf.merit.exponential(4.0), horizon=10_000)
    >>> policy.name, policy.label
    ('fairx_ucb', 'FairX-UCB')
    """
    merit = resolve_merit(merit)
    lo, hi = check_reward_range(reward_range)
    lr, steps = check_ascent(learning_rate, steps, start, solver)
    init_est = 0.5 * (lo + hi) if initial_estimate is None else finite_float("initial_estimate", initial_estimate)
    if w0 is None:
        if horizon is None:
            raise ValueError("fairx_ucb needs w0, or horizon (and delta) for Theorem 3.2.1's w0")
        horizon, delta = int(horizon), float(delta)  # ranges checked by the declaration
    else:
        w0 = float(w0)

    def objective(mu: jax.Array) -> jax.Array:
        return jnp.sum(fair_policy(merit, mu) * mu)

    grad = jax.grad(objective)

    def init(key: jax.Array, spec: Spec) -> UCBState:
        width = w0 if w0 is not None else theorem_w0(horizon, spec.n_arms, delta)
        return UCBState(init_counts(spec.n_arms), jnp.asarray(width, jnp.float32))

    def optimistic_mu(state: UCBState) -> jax.Array:
        n = state.counts.n
        mu_hat = empirical_mean(state.counts, init_est)
        w = state.w0 * jax.lax.rsqrt(jnp.maximum(n, 1.0))
        low = jnp.where(n > 0, jnp.maximum(lo, mu_hat - w), lo)
        high = jnp.where(n > 0, jnp.minimum(hi, mu_hat + w), hi)
        if solver == "exact":
            return exact_box_argmax(merit, low, high)
        mu = high if start == "upper" else jnp.clip(mu_hat, low, high)
        return run_ascent(lambda m: jnp.clip(m + lr * grad(m), low, high), mu, steps)

    def select(key: jax.Array, state: UCBState, obs: Observation):
        mu = optimistic_mu(state)
        probs = fair_policy(merit, mu)
        return _random.categorical(key, probs), probs, {"mu": mu}

    def update(state: UCBState, obs: Observation, action: jax.Array, reward: jax.Array) -> UCBState:
        return UCBState(update_counts(state.counts, action, reward), state.w0)

    return Policy(init, select, update, "FairX-UCB", requires=bounded_requires(lo, hi, "FairX-UCB"))


@declare("policy", example={"epsilon": 0.1})
def fairx_eg(merit: Merit, *, epsilon: Unit = 0.05, initial_estimate: float = 0.5) -> Policy:
    """FairX-EG (Section 5.1): pi_t = epsilon / K + (1 - epsilon) f(mu_hat) / sum f(mu_hat).

    ``mu_hat`` is the empirical mean; arms never pulled use ``initial_estimate``.
    """
    merit = resolve_merit(merit)
    init_est = finite_float("initial_estimate", initial_estimate)
    return epsilon_mixture(fair_share_rule(merit), epsilon, init_est, "FairX-EG")  # epsilon's range: declared
