"""Synthetic stochastic linear bandits (fairness_of_exposure_fairx_icml2021, Section 4.1).

Every round shows K candidates with contexts x_t,a in R^d; the mean reward of candidate a is
theta* . x_t,a (Gaussian noise, the paper's model) or sigmoid(theta* . x_t,a) (Bernoulli rewards).
The simulator takes pi*_t = fair_policy(merit, mean_t) from each round's means, so the optimal fair
policy of Eq. (5)/(6) changes with the contexts as it should.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core import _random
from bayesfair.core._validate import check_reward_range, finite_array
from bayesfair.core.declare import Cap, Count, Labels, Pair, Positive, declare
from bayesfair.core.groups import Groups
from bayesfair.core.types import Observation, Round, Spec
from bayesfair.environments.arms import load_instances, per_run_reset
from bayesfair.environments.base import Environment

__all__ = ["linear_bandit"]

_QUAD_NODES = 128  # quadrature nodes for E[sigmoid(x . theta)] (Bernoulli arm_means)


def _groups(groups: Any, n_arms: int) -> Groups:
    if groups is None:
        return Groups.single(n_arms)
    g = groups if isinstance(groups, Groups) else Groups.from_labels(groups)
    if g.n_arms != n_arms:
        raise ValueError(f"groups has {g.n_arms} arms but n_arms is {n_arms}")
    return g


def _projection_quadrature(kind: str, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes t_i and weights w_i (sum 1) with E[h(u . e)] ~= sum w_i h(t_i) for a unit vector e.

    ``"gaussian"``: u ~ N(0, I/d), so u . e ~ N(0, 1/d) (Gauss-Hermite). ``"sphere"``: u uniform on
    the unit sphere, so u . e has density proportional to (1 - t^2)^((d-3)/2) on [-1, 1]
    (Gauss-Jacobi with alpha = beta = (d-3)/2); for d = 1 it is +-1 with probability 1/2 each.
    """
    from scipy import special

    if kind == "gaussian":
        t, w = special.roots_hermitenorm(_QUAD_NODES)
        return t / np.sqrt(d), w / w.sum()
    if d == 1:
        return np.array([-1.0, 1.0]), np.array([0.5, 0.5])
    t, w = special.roots_jacobi(_QUAD_NODES, (d - 3) / 2, (d - 3) / 2)
    return t, w / w.sum()


# context_scale: contexts of norm above ~100 (|x|^2 = 1e4 against a ridge of 0.1) leave the ridge
# precision lam I + sum x x' singular in float32 (LinUCB/LinTS/OFUL failed with NaN at 1e3): capped in configs
@declare("environment", example={"n_arms": 4, "n_features": 3})
def linear_bandit(
    n_arms: Annotated[Count, Cap(10_000)],
    n_features: Annotated[Count, Cap(1000)],
    *,
    theta: list[float] | Any = None,
    theta_scale: Positive = 1.0,
    contexts: Literal["sphere", "gaussian"] | Any = "sphere",  # or an array of contexts (Python only)
    context_mean: list[float] | Any = None,
    context_scale: Annotated[Positive, Cap(100.0)] | None = None,
    noise: Literal["gaussian", "bernoulli"] = "gaussian",
    sigma: Positive | None = None,
    groups: Labels | Any = None,
    reward_range: Pair | None = None,
    theta_file: str | None = None,
) -> Environment:
    """A stochastic linear bandit with K candidates per round and d-dimensional contexts.

    Parameters
    ----------
    n_arms : int
        Candidates per round K (>= 1).
    n_features : int
        Context dimension d (>= 1).
    theta : array-like [d] or [runs, d], optional
        The true parameter theta*, the same in every run, or one row per run (explicit
        instances: run r plays row r, and the study's runs must equal the number of rows). If
        omitted, it is drawn afresh for every run from N(0, theta_scale^2 I_d) (with
        ``theta_scale = 1`` this is the prior of Theorem 4.3.1, and the posterior
        ``linear_known_variance(0, 1, sigma^2)`` is then well specified).
    theta_file : str, optional
        Instead of ``theta``: a ``[runs, d]`` matrix in a ``.npy`` file or a comma-separated text
        file (one run per line), e.g. the instances of another implementation.
    theta_scale : float
        Standard deviation of each coordinate of the per-run draw of theta (> 0).
    contexts : {"sphere", "gaussian"} or array-like
        The context distribution, independently for every round and candidate:
        ``"sphere"``: x_t,a = m_a + s u with u uniform on the unit sphere of R^d (||u|| = 1, the
        theorems' ||x|| <= 1 when m = 0, s <= 1); ``"gaussian"``: u ~ N(0, I_d / d)
        (E||u||^2 = 1). Here m_a is ``context_mean`` and s is ``context_scale``.
        An array is a finite pool drawn uniformly with replacement: ``[N, K, d]`` draws one row
        (all K candidates together, like one dataset example) per round; ``[N, d]`` draws a row for
        every candidate independently.
    context_mean : array-like [d] or [K, d], optional
        m_a, a fixed offset per candidate slot (default 0). Only for the parametric distributions.
    context_scale : float, optional
        s > 0 (default 1). Only for the parametric distributions.
    noise : {"gaussian", "bernoulli"}
        ``"gaussian"``: r = theta . x + sigma * N(0, 1), so the mean is linear in x and linear
        policies are well specified. ``"bernoulli"``: r ~ Bernoulli(sigmoid(theta . x)) (logistic
        link; means in (0, 1); a linear model is then misspecified).
    sigma : float, optional
        Noise standard deviation for ``"gaussian"`` (default 1); not allowed with ``"bernoulli"``.
    groups : Groups or int sequence [K], optional
        Group of each candidate slot (one group if omitted).
    reward_range : (float, float), optional
        Known bounds of the mean reward, recorded in ``spec.reward_range``. For ``"bernoulli"`` it
        is (0, 1) (a given range must contain it). For ``"gaussian"`` it may only be given when it
        can be checked to contain every mean theta . x: theta fixed and contexts bounded
        (``"sphere"`` or a pool).

    Returns
    -------
    Environment
        ``reset(key) -> theta [d]``; ``step(key, theta, t)`` gives ``Round(Observation(t, x [K, d]),
        reward [K], mean [K])`` with every candidate's counterfactual reward from the round's key.
        ``arm_means(theta) -> [K]`` is the expected reward of each candidate *slot* over the
        context distribution: E[x_a] . theta = m_a . theta for Gaussian noise (the pool average for
        a pool), and E[sigmoid(theta . x_a)] for Bernoulli rewards (exact over a pool; otherwise a
        128-node Gauss-Hermite/Gauss-Jacobi quadrature over the 1-d projection u . theta, accurate
        to float32 for s ||theta|| up to about 50). With the default zero offsets every slot has
        the same expected reward (0, or 1/2 for Bernoulli); the per-round means, not these, define
        the regret.

    Raises
    ------
    ValueError, TypeError
        For a bad size, a theta or context pool whose dimension differs from ``n_features``,
        non-finite values, a non-positive scale, an unknown option, or an unverifiable range.
    """
    k, d = int(n_arms), int(n_features)  # sizes, scales and sigma: ranges checked by the declaration
    grp = _groups(groups, k)
    if noise not in ("gaussian", "bernoulli"):
        raise ValueError(f"noise must be 'gaussian' or 'bernoulli', got {noise!r}")
    if noise == "bernoulli" and sigma is not None:
        raise ValueError("sigma only applies to noise='gaussian' (Bernoulli rewards have no noise scale)")
    sig = 1.0 if sigma is None else float(sigma)

    # --- theta
    theta_fixed: np.ndarray | None = None
    if theta_file is not None:
        if theta is not None:
            raise ValueError("give either theta or theta_file, not both")
        theta = load_instances(theta_file, "theta_file")
    if theta is not None:
        theta_fixed = finite_array("theta", theta)
        if theta_fixed.ndim not in (1, 2):
            raise ValueError(f"theta must be [n_features] or [runs, n_features], got shape {theta_fixed.shape}")
        if theta_fixed.shape[-1] != d:
            raise ValueError(f"theta has length {theta_fixed.shape[-1]} but n_features is {d}")
    thetas = None if theta_fixed is None else np.atleast_2d(theta_fixed)  # [runs or 1, d]
    tscale = float(theta_scale)

    # --- contexts
    pool: np.ndarray | None = None
    if isinstance(contexts, str):
        if contexts not in ("sphere", "gaussian"):
            raise ValueError(f"contexts must be 'sphere', 'gaussian' or an array pool, got {contexts!r}")
        kind = contexts
        cmean = np.zeros((k, d))
        if context_mean is not None:
            cm = finite_array("context_mean", context_mean)
            if cm.shape == (d,):
                cmean = np.broadcast_to(cm, (k, d)).copy()
            elif cm.shape == (k, d):
                cmean = cm
            else:
                raise ValueError(f"context_mean must have shape [n_features]=({d},) or [n_arms, n_features]="
                                 f"({k}, {d}), got {cm.shape}")
        cscale = 1.0 if context_scale is None else float(context_scale)
    else:
        if context_mean is not None or context_scale is not None:
            raise ValueError("context_mean and context_scale apply to 'sphere'/'gaussian' contexts, not to a pool")
        pool = finite_array("contexts", contexts)
        kind = "pool"
        if pool.ndim not in (2, 3):
            raise ValueError(f"contexts pool must be [N, d] or [N, K, d], got shape {pool.shape}")
        if pool.shape[-1] != d:
            raise ValueError(f"contexts have {pool.shape[-1]} features but n_features is {d}")
        if pool.ndim == 3 and pool.shape[1] != k:
            raise ValueError(f"contexts pool [N, K, d] has K={pool.shape[1]} candidates but n_arms is {k}")
        cmean, cscale = None, None

    # --- reward range
    if noise == "bernoulli":
        rr: tuple[float, float] | None = (0.0, 1.0)
        if reward_range is not None:
            lo, hi = check_reward_range(reward_range)
            if lo > 0.0 or hi < 1.0:
                raise ValueError(f"reward_range must contain [0, 1] for Bernoulli rewards, got ({lo}, {hi})")
            rr = (lo, hi)
    elif reward_range is None:
        rr = None
    else:
        lo, hi = check_reward_range(reward_range)
        if theta_fixed is None or kind == "gaussian":
            raise ValueError("reward_range can only be given for noise='gaussian' when theta is fixed and the "
                             "contexts are bounded ('sphere' or a pool), so that it can be checked")
        if pool is not None:
            means = pool @ thetas.T
            mlo, mhi = float(means.min()), float(means.max())
        else:
            centre = cmean @ thetas.T  # [K, runs]
            spread = cscale * np.linalg.norm(thetas, axis=1)
            mlo, mhi = float((centre - spread).min()), float((centre + spread).max())
        if mlo < lo or mhi > hi:
            raise ValueError(f"reward_range ({lo}, {hi}) does not contain every mean reward theta . x, "
                             f"which ranges over [{mlo:.6g}, {mhi:.6g}]")
        rr = (lo, hi)

    # --- jax constants
    theta_j = None if theta_fixed is None or theta_fixed.ndim == 2 else jnp.asarray(theta_fixed, jnp.float32)
    pool_j = None if pool is None else jnp.asarray(pool, jnp.float32)
    cmean_j = None if cmean is None else jnp.asarray(cmean, jnp.float32)
    bernoulli = noise == "bernoulli"
    if bernoulli and pool is None:
        nodes, weights = _projection_quadrature(kind, d)
        nodes_j, weights_j = jnp.asarray(nodes, jnp.float32), jnp.asarray(weights, jnp.float32)

    if theta_fixed is not None and theta_fixed.ndim == 2:
        reset = per_run_reset(theta_fixed, "theta")
    else:
        def reset(key: jax.Array) -> jax.Array:
            if theta_j is not None:
                return theta_j
            return tscale * _random.normal(key, (d,), jnp.float32)

    def draw_contexts(key: jax.Array) -> jax.Array:
        if pool_j is not None:
            if pool_j.ndim == 3:
                return pool_j[jax.random.randint(key, (), 0, pool_j.shape[0])]
            return pool_j[jax.random.randint(key, (k,), 0, pool_j.shape[0])]
        u = _random.normal(key, (k, d), jnp.float32)  # flat draw: faster under vmap (bayesfair.core._random)
        if kind == "sphere":
            u = u * jax.lax.rsqrt(jnp.sum(u * u, axis=1, keepdims=True))
        else:
            u = u * (1.0 / np.sqrt(d))
        return cmean_j + cscale * u

    def mean_of(score: jax.Array) -> jax.Array:
        return jax.nn.sigmoid(score) if bernoulli else score

    def step(key: jax.Array, params: jax.Array, t: jax.Array) -> Round:
        k_ctx, k_rew = jax.random.split(key)
        x = draw_contexts(k_ctx)
        mean = mean_of(x @ params)
        if bernoulli:
            reward = (jax.random.uniform(k_rew, (k,)) < mean).astype(jnp.float32)
        else:
            reward = mean + sig * _random.normal(k_rew, (k,), jnp.float32)
        return Round(Observation(t=t, contexts=x), reward, mean)

    def arm_means(params: jax.Array) -> jax.Array:
        if pool_j is not None:
            m = jnp.mean(mean_of(pool_j @ params), axis=0)
            return m if pool_j.ndim == 3 else jnp.broadcast_to(m, (k,))
        centre = cmean_j @ params
        if not bernoulli:
            return centre
        spread = cscale * jnp.sqrt(jnp.sum(params * params))
        return jax.nn.sigmoid(centre[:, None] + spread * nodes_j[None, :]) @ weights_j

    spec = Spec(n_arms=k, group_of_arm=grp.labels, n_groups=grp.n_groups, n_features=d, reward_range=rr,
                rewards="binary" if bernoulli else "real")
    cfg: dict[str, Any] = {
        "kind": "linear", "n_arms": k, "n_features": d, "noise": noise,
        "theta": ({"distribution": "normal", "scale": tscale} if theta_fixed is None
                  else {"distribution": "per_run", "runs": len(theta_fixed)} if theta_fixed.ndim == 2
                  else theta_fixed.tolist()),
        "contexts": kind if pool is None else {"pool_shape": list(pool.shape)},
        "groups": grp.describe(), "reward_range": None if rr is None else list(rr),
    }
    if pool is None:
        cfg.update(context_mean=cmean.tolist(), context_scale=cscale)
    if not bernoulli:
        cfg["sigma"] = sig
    return Environment(spec, grp, reset, step, arm_means, f"linear_{noise}", cfg)
