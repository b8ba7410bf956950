"""Hierarchical logit-normal prior over grouped Bernoulli arms, refreshed by NUTS.

Arms i in groups g(i) (the bi-level fairness setting, bilevel_fairness_bf_ucb_aamas2024,
Section 3) share a group-level prior on their logits:

    m_g ~ Normal(loc, loc_scale)            group mean logit          site ``group_loc``   [m]
    s_g ~ HalfNormal(scale)                 group spread of logits    site ``group_scale`` [m]
    z_i ~ Normal(0, 1)                      arm offset                site ``z``           [K]
    logit_i = m_g(i) + s_g(i) z_i           (non-centered)            site ``logit``       [K]
    mu_i = sigmoid(logit_i)                 arm mean reward           site ``mu``          [K]
    r | arm i ~ Bernoulli(mu_i)

Arms of a group borrow strength from each other (an arm pulled rarely is shrunk toward its
group's mean), and the group scales are learned. The posterior has no closed form, so the family
runs through the MCMC fallback (:mod:`bayesfair.posteriors.mcmc`): use it with
``fairx_ts(posterior, merit)`` or ``bf_ts(beta, merit, posterior)`` unchanged. The Bernoulli
likelihood only depends on each arm's success and trial counts, so by default the refresh
conditions on those (exact, O(K) per gradient, no capacity limit); ``capacity=C`` uses the
generic masked buffer of the last C observations instead.

Parametrization (the same joint distribution in every form; only the coordinates NUTS moves in
change). The non-centred form (``centered=False``, the default, site ``z``) suits arms with few
observations and the centred form (``centered=True``: logit_i ~ Normal(m_g, s_g) directly, site
``logit``) arms with many; a bandit run has both, and arms move from one to the other as they are
pulled. ``centered="auto"`` centres each arm partially by how much its data say about its
logit (the partially non-centred parametrization of Papaspiliopoulos, Roberts & Skold 2007, "A
general framework for the parametrization of hierarchical models", Statistical Science 22(1);
the form of NumPyro's ``LocScaleReparam(centered=lambda)``):

    w_i = lambda_i m_g(i) + s_g(i)^lambda_i eps_i,  eps_i ~ N(0, 1)    site ``z_partial`` [K]
    logit_i = m_g(i) + s_g(i)^(1 - lambda_i) (w_i - lambda_i m_g(i))   (= m_g(i) + s_g(i) eps_i)

with lambda_i = I_i c^2 / (I_i c^2 + 1), I_i = n_i p_i (1 - p_i) the Fisher information of arm
i's n_i observations about its logit (p_i = (successes + 1/2) / (n_i + 1)): the weight that makes
the partially centred coordinate independent of the group mean in the Gaussian approximation
with the group scale equal to c (``centring_scale``, default ``scale``). lambda_i = 0
(non-centred) for an arm never pulled, -> 1 (centred) for an arm pulled often. The weights are
functions of the data only, recomputed at every refresh, so every refresh samples the exact
posterior.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core._validate import arm_groups, finite_float
from bayesfair.core.declare import python_only
from bayesfair.posteriors.base import Posterior
from bayesfair.posteriors.mcmc import arm_buffer, arm_counts, mcmc_posterior

__all__ = ["hierarchical_logit_normal", "hierarchical_model"]


def _labels(group_of_arm: Any) -> np.ndarray:
    try:
        labels = np.asarray(group_of_arm)
    except (TypeError, ValueError):
        raise TypeError(f"group_of_arm must be a 1-d integer array, got {group_of_arm!r}") from None
    return arm_groups("group_of_arm", labels).astype(np.int32)


def hierarchical_model(group_of_arm: Any, *, loc: float = 0.0, loc_scale: float = 1.5, scale: float = 1.0,
                       centered: bool | str = False, centring_scale: float | None = None):
    """The NumPyro model ``model(arms, rewards=None, *, n_arms, mask=None)`` (per observation).

    This is the reference model (``Posterior.model``); :func:`hierarchical_logit_normal` refreshes
    with the equivalent count form. Parameters as in :func:`hierarchical_logit_normal`.
    """
    labels, loc, loc_scale, scale, centered = _check(group_of_arm, loc, loc_scale, scale, centered)
    priors = _priors(labels, loc, loc_scale, scale, centered, _centring_scale(centring_scale, scale))

    def model(arms, rewards=None, *, n_arms: int, mask=None) -> None:
        import numpyro
        import numpyro.distributions as dist
        from numpyro.handlers import mask as mask_handler

        _check_n_arms(n_arms, labels)
        _check_observations(arms, rewards, mask, labels.size)
        keep = jnp.ones(arms.shape, jnp.float32) if mask is None else jnp.asarray(mask, jnp.float32)
        trials = jnp.zeros(labels.size, jnp.float32).at[arms].add(keep)
        successes = None if rewards is None else jnp.zeros(labels.size, jnp.float32).at[arms].add(keep * rewards)
        logit = priors(successes, trials)
        with numpyro.plate("obs", arms.shape[0]), mask_handler(mask=True if mask is None else mask):
            numpyro.sample("r", dist.Bernoulli(logits=logit[arms]), obs=rewards)

    return model


def _check(group_of_arm, loc, loc_scale, scale, centered):
    labels = _labels(group_of_arm)
    loc = finite_float("loc", loc)
    loc_scale = finite_float("loc_scale", loc_scale)
    scale = finite_float("scale", scale)
    if loc_scale <= 0 or scale <= 0:
        raise ValueError(f"loc_scale and scale must be > 0, got loc_scale={loc_scale}, scale={scale}")
    if not isinstance(centered, bool) and centered != "auto":
        raise TypeError(f"centered must be True, False or 'auto', got {centered!r}")
    return labels, loc, loc_scale, scale, centered


def _check_n_arms(n_arms: int, labels: np.ndarray) -> None:
    if n_arms != labels.size:
        raise ValueError(f"the hierarchical model was built for {labels.size} arms (group_of_arm), got n_arms={n_arms}")


def _check_observations(arms: Any, rewards: Any, mask: Any, k: int) -> None:
    """Concrete observations (not traced: checked when NUTS first runs the model, or when a user
    calls it) must index an arm and be 0/1: ``logit[arms]`` would clamp an arm index >= K to arm
    K - 1 (JAX's out-of-bounds gather), and a Bernoulli log-density of a reward of 5 is not a
    likelihood. Masked-out entries (a buffer's padding) are not checked."""
    if any(isinstance(x, jax.core.Tracer) for x in (arms, rewards, mask)):
        return
    a = np.asarray(arms)
    keep = np.ones(a.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), a.shape)
    if a.ndim != 1:
        raise ValueError(f"arms must be 1-d (one arm index per observation), got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"arms must be integer arm indices, got dtype {a.dtype}")
    bad = np.flatnonzero(keep & ((a < 0) | (a >= k)))
    if bad.size:
        raise ValueError(f"arms must be in [0, {k - 1}] (one per entry of group_of_arm); observation {bad[0]} has "
                         f"{a[bad[0]]}")
    if rewards is not None:
        r = np.asarray(rewards, np.float64)
        if r.shape != a.shape:
            raise ValueError(f"rewards must have one entry per observation ({a.shape[0]}), got shape {r.shape}")
        bad = np.flatnonzero(keep & (r != 0) & (r != 1))
        if bad.size:
            raise ValueError(f"rewards must be 0 or 1 (Bernoulli likelihood); observation {bad[0]} has {r[bad[0]]}")


def _centring_scale(value: float | None, scale: float) -> float:
    """The reference group scale of the ``"auto"`` form's weights: ``scale`` unless given (> 0)."""
    if value is None:
        return scale
    value = finite_float("centring_scale", value)
    if value <= 0:
        raise ValueError(f"centring_scale must be > 0, got {value}")
    return value


def _centring_weights(successes: jax.Array | None, trials: jax.Array, scale: float) -> jax.Array:
    """lambda_i [K] of the ``centered="auto"`` form (module docstring) from the arms' counts.

    ``successes=None`` (no data: the prior run forward) gives 0 for every arm.
    """
    if successes is None:
        return jnp.zeros_like(trials)
    p = (successes + 0.5) / (trials + 1.0)
    info = trials * p * (1.0 - p) * scale**2
    return info / (info + 1.0)


def _priors(labels: np.ndarray, loc: float, loc_scale: float, scale: float, centered: bool | str,
            centring_scale: float):
    """The prior part of the model: samples the group and arm sites, returns the logits [K].

    ``priors(successes, trials)``: the arms' counts set the ``"auto"`` form's centring weights
    (ignored by the other forms).
    """
    n_groups = int(labels.max()) + 1
    k = labels.size

    def priors(successes: jax.Array | None = None, trials: jax.Array | None = None) -> jax.Array:
        import numpyro
        import numpyro.distributions as dist

        with numpyro.plate("group", n_groups):
            m = numpyro.sample("group_loc", dist.Normal(loc, loc_scale))
            s = numpyro.sample("group_scale", dist.HalfNormal(scale))
        with numpyro.plate("arm", k):
            if centered == "auto":
                lam = _centring_weights(successes, jnp.zeros(k, jnp.float32) if trials is None else trials,
                                        centring_scale)
                mg, sg = m[labels], s[labels]
                w = numpyro.sample("z_partial", dist.Normal(lam * mg, sg**lam))
                logit = numpyro.deterministic("logit", mg + sg ** (1.0 - lam) * (w - lam * mg))
            elif centered:
                logit = numpyro.sample("logit", dist.Normal(m[labels], s[labels]))
            else:
                z = numpyro.sample("z", dist.Normal(0.0, 1.0))
                logit = numpyro.deterministic("logit", m[labels] + s[labels] * z)
            numpyro.deterministic("mu", jax.nn.sigmoid(logit))
        return logit

    return priors


@python_only("posterior", "an MCMC-fallback family: its NUTS refresh settings are a Python NUTSSettings "
                          "object (bayesfair.posteriors.NUTSSettings)")
def hierarchical_logit_normal(
    group_of_arm: Any,
    *,
    loc: float = 0.0,
    loc_scale: float = 1.5,
    scale: float = 1.0,
    centered: bool | str = False,
    centring_scale: float | None = None,
    capacity: int | None = None,
    **settings: Any,
) -> Posterior:
    """Hierarchical logit-normal posterior over grouped Bernoulli arms (MCMC fallback).

    Parameters
    ----------
    group_of_arm : array-like [K]
        Group index of every arm, 0..m-1, every group non-empty (e.g. ``env.spec.group_of_arm``).
        ``init(n_arms)`` checks ``n_arms == K``.
    loc, loc_scale : float
        Prior of the group mean logits, Normal(loc, loc_scale); loc_scale > 0. The default 1.5
        puts 95% of the group means' mean rewards in about [0.05, 0.95].
    scale : float
        HalfNormal scale of the within-group spread of logits, > 0.
    centered : {"auto", False, True}
        The coordinates NUTS samples in (module docstring; the model is the same): ``False``
        (default) the non-centred form (site ``z``), ``True`` the centred one (site ``logit``),
        ``"auto"`` each arm partially centred by its data (site ``z_partial``).
    centring_scale : float, optional
        The group scale the ``"auto"`` weights assume (module docstring), > 0; default
        ``scale``. A smaller value centres the arms later in a run (docs/mcmc.md measures 0.3).
    capacity : int, optional
        None: condition on per-arm counts (exact). An int: a masked ring buffer of the last
        ``capacity`` observations (the generic path; a sliding window once full).
    **settings
        :class:`~bayesfair.posteriors.mcmc.NUTSSettings` fields: ``refresh_every``,
        ``num_warmup``, ``num_samples``, ``num_chains``, ``max_tree_depth``, ``target_accept``,
        ``adapt_mass_matrix``, ``init_radius``, ``init_step_size``, ``seed``, ``max_rhat``, ``min_ess``.

    Returns
    -------
    Posterior
        The stored samples hold ``group_loc [m]``, ``group_scale [m]``, ``z`` (``z_partial``
        with ``centered="auto"``; none centred), ``logit [K]`` and ``mu [K]``.
    """
    labels, loc, loc_scale, scale, centered = _check(group_of_arm, loc, loc_scale, scale, centered)
    centring_scale = _centring_scale(centring_scale, scale)
    priors = _priors(labels, loc, loc_scale, scale, centered, centring_scale)
    reference = hierarchical_model(labels, loc=loc, loc_scale=loc_scale, scale=scale, centered=centered,
                                   centring_scale=centring_scale)

    def counts_model(successes, trials) -> None:
        import numpyro
        import numpyro.distributions as dist

        _check_n_arms(successes.shape[0], labels)
        logit = priors(successes, trials)
        with numpyro.plate("arm", labels.size):
            numpyro.sample("r", dist.Binomial(total_count=trials, logits=logit), obs=successes)

    if capacity is None:
        model, hist = counts_model, arm_counts()
    else:
        model, hist = reference, arm_buffer(capacity)
    params = {"group_of_arm": labels.tolist(), "loc": loc, "loc_scale": loc_scale, "scale": scale,
              "centered": centered, "centring_scale": centring_scale}
    return mcmc_posterior(model, history=hist, name="hierarchical_logit_normal", reference_model=reference,
                          params=params, rewards="binary", **settings)
