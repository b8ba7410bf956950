"""Environments whose per-run instances are drawn from a posterior family's prior (Bayesian regret).

The Bayesian regret of a policy is its regret averaged over problem instances drawn from a prior.
:func:`prior_environment` builds, for a posterior family, the environment that draws every run's
instance from that family's prior and every reward from its likelihood:

- per-arm families (``beta_bernoulli``, ``normal_known_variance``, ``normal_inverse_gamma``,
  ``hierarchical_logit_normal``, ``mcmc_beta_bernoulli``, any ``mcmc_posterior`` whose reference
  model is ``model(arms, rewards=None, *, n_arms)``): the reference NumPyro model run forward
  (``reset`` draws its latent sites, ``step`` one reward per arm given them);
- linear families (``linear_known_variance``, ``linear_normal_inverse_gamma``,
  ``logistic_linear_mcmc``): theta (and the noise variance) from the prior, contexts from
  :func:`~bayesfair.environments.linear.linear_bandit`'s distributions;
- the group-bias family (``group_bias_posterior``): beta and psi drawn from its prior (an exact
  draw of the conjugate sampler at the prior state), rewards and contexts as in
  :func:`~bayesfair.environments.biased.biased_linear_bandit`.

The environment carries the prior it was drawn from as a marker, ``env.params["prior"]``
(:func:`prior_marker`: the family name and the hyper-parameters that define the prior), and
policies built on a posterior carry their own (``policy.requires["prior"]``,
:func:`bayesfair.core.compat.posterior_requires`). :func:`check_prior_match`, called by
:func:`bayesfair.simulate`, compares them: a Bayesian policy run on instances drawn from another
distribution (another prior, or random instances from an environment without a prior marker)
triggers one warning, and every Bayesian policy gets a note in the results' metadata
(``config["prior_check"]``). Fixed instances (frequentist regret) are not flagged.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np

from bayesfair.core._validate import positive_int
from bayesfair.core.types import Observation, Round, Spec
from bayesfair.environments.arms import _groups as arm_groups
from bayesfair.environments.base import Environment
from bayesfair.environments.biased import BiasedParams, biased_linear_bandit
from bayesfair.environments.linear import linear_bandit
from bayesfair.posteriors.base import Posterior, init_size, prior_marker
from bayesfair.posteriors.group_bias import GroupBiasPosterior
from bayesfair.posteriors.linear import LinearPosterior

__all__ = ["prior_environment", "prior_marker", "check_prior_match"]



def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return set(a) == set(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def prior_environment(posterior: Any, n_arms: int | None = None, *, n_features: int | None = None, groups: Any = None,
                      contexts: str = "sphere", name: str | None = None) -> Environment:
    """The environment whose run instances are drawn from ``posterior``'s prior (module docstring).

    Parameters
    ----------
    posterior : posterior family
        A per-arm, linear or group-bias family of :mod:`bayesfair.posteriors`.
    n_arms : int, optional
        Arms (per-arm families; default: the hierarchical family's number of arms), or candidates
        per round (linear families). Not for the group-bias family (its layout fixes the arms).
    n_features : int, optional
        Context dimension of a linear family (default: the length of its prior mean vector).
    groups : Groups or int sequence, optional
        Group of every arm (default: the family's own grouping, else one group).
    contexts : {"sphere", "gaussian"}
        Context distribution of a linear family (:func:`~bayesfair.environments.linear.linear_bandit`).
        The group-bias family uses U[0, 1]^d contexts.
    name : str, optional
        Environment name (default ``"prior_<family>"``).

    Returns
    -------
    Environment
        ``config["prior"]`` is :func:`prior_marker` of ``posterior``; ``arm_means`` the
        instance's expected reward per arm (per candidate slot for linear families).

    Examples
    --------
    Instances drawn from the prior of the policies' posterior: ``simulate`` then reports a matched
    prior (Bayesian regret) in the results' ``config["prior_check"]``:

    >>> import bayesfair as bf
    >>> from bayesfair.environments.prior import prior_environment
    >>> env = prior_environment(bf.beta_bernoulli(1.0, 1.0), 5)
    >>> env.label, env.params["prior"]
    ('prior_beta_bernoulli', {'family': 'beta_bernoulli', 'params': {'a0': 1.0, 'b0': 1.0}})
    """
    marker = prior_marker(posterior)
    label = name or f"prior_{marker['family']}"
    if isinstance(posterior, GroupBiasPosterior):
        if n_arms is not None or n_features is not None:
            raise ValueError("n_arms, n_features: the group-bias posterior's layout fixes them; leave them out")
        env = _group_bias_env(posterior)
    elif isinstance(posterior, LinearPosterior):
        if n_arms is None:
            raise ValueError("n_arms (candidates per round) is required for a linear family")
        env = _linear_env(posterior, int(n_arms), n_features, groups, contexts)
    elif isinstance(posterior, Posterior):
        env = _per_arm_env(posterior, n_arms, groups)
    else:
        raise TypeError(f"posterior must be a bayesfair posterior family, got {type(posterior).__name__}")
    cfg = {**env.params, "kind": "prior", "prior": marker}
    return env._replace(label=label, params=cfg, name=None)


def _per_arm_env(posterior: Any, n_arms: int | None, groups: Any) -> Environment:
    from numpyro.handlers import condition, seed, trace

    own = posterior.params.get("group_of_arm")
    k = init_size(n_arms if n_arms is not None else (len(own) if own is not None else None), "n_arms")
    grp = arm_groups(groups if groups is not None else own, k)
    arms = jnp.arange(k, dtype=jnp.int32)
    model = posterior.model

    def sites(key, params=None):
        m = model if params is None else condition(model, params)
        tr = trace(seed(m, key)).get_trace(arms, n_arms=k)
        return {n: jnp.asarray(s["value"], jnp.float32) for n, s in tr.items()
                if s["type"] in ("sample", "deterministic") and n != "r"}, tr["r"]["value"]

    def reset(key):
        return sites(key)[0]

    def step(key, params, t):
        _, r = sites(key, params)
        return Round(Observation(t=t), jnp.asarray(r, jnp.float32), params["mu"])

    binary = posterior.rewards == "binary"
    spec = Spec(n_arms=k, group_of_arm=grp.labels, n_groups=grp.n_groups, reward_range=(0.0, 1.0) if binary else None,
                rewards="binary" if binary else "real")
    cfg = {"n_arms": k, "groups": grp.describe()}
    return Environment(spec, grp, reset, step, lambda p: p["mu"], "prior", cfg)


def _linear_env(posterior: Any, k: int, n_features: int | None, groups: Any, contexts: str) -> Environment:
    from numpyro.handlers import seed, trace

    binary = posterior.rewards == "binary"
    p = posterior.params
    d = _linear_dim(p, n_features)
    base = linear_bandit(k, d, contexts=contexts, groups=groups, noise="bernoulli" if binary else "gaussian")
    dummy = jnp.zeros((1, d), jnp.float32)
    noise_var = p.get("noise_var")

    def reset(key):
        tr = trace(seed(posterior.model, key)).get_trace(dummy)
        theta = jnp.asarray(tr["theta"]["value"], jnp.float32)
        s2 = tr["sigma2"]["value"] if "sigma2" in tr else (1.0 if noise_var is None else noise_var)
        return {"theta": theta, "sigma": jnp.sqrt(jnp.asarray(s2, jnp.float32))}

    def step(key, params, t):
        rnd = base.step(key, params["theta"], t)
        if binary:
            return rnd
        return rnd._replace(reward=rnd.mean + params["sigma"] * (rnd.reward - rnd.mean))  # unit noise, rescaled

    cfg = {k_: v for k_, v in base.params.items() if k_ not in ("theta", "sigma")}
    return Environment(base.spec, base.groups, reset, step, lambda q: base.arm_means(q["theta"]), "prior", cfg)


def _linear_dim(params: Mapping[str, Any], n_features: int | None) -> int:
    m0 = params.get("prior_mean", params.get("m0"))
    if n_features is not None:
        d = positive_int("n_features", n_features)
        if isinstance(m0, list) and len(m0) != d:
            raise ValueError(f"n_features={d} differs from the length {len(m0)} of the family's prior mean")
        return d
    if isinstance(m0, list):
        return len(m0)
    raise ValueError("n_features is required for a linear family with a scalar prior mean")


def _group_bias_env(posterior: Any) -> Environment:
    lay = posterior.layout
    n, m, d = lay.n_arms, lay.n_groups, lay.n_features
    base = biased_linear_bandit(lay.group_of_arm, d, beta=np.zeros((n, d)), psi=np.zeros((m, d)),
                                noise_sd=posterior.params["sigma"], reference=lay.reference)
    prior = posterior.init()

    def reset(key):
        draw = posterior.sample(key, prior)
        return BiasedParams(jnp.asarray(draw.beta, jnp.float32), jnp.asarray(draw.psi, jnp.float32))

    cfg = {k: v for k, v in base.params.items() if k not in ("beta", "psi")}
    return base._replace(reset=reset, params=cfg)


def _implied_prior(env: Environment) -> dict[str, Any] | None:
    """The prior an environment's instances come from: its marker, or the two classic cases
    (Bernoulli arms with U(0, 1) means: Beta(1, 1); a Gaussian linear bandit with theta ~
    N(0, s^2 I): linear_known_variance(0, s^2, sigma^2))."""
    cfg = env.params
    if "prior" in cfg:
        return cfg["prior"]
    means = cfg.get("means")
    if cfg.get("kind") == "bernoulli" and isinstance(means, Mapping) and means.get("distribution") == "uniform":
        if set(means["low"]) == {0.0} and set(means["high"]) == {1.0}:
            return {"family": "beta_bernoulli", "params": {"a0": 1.0, "b0": 1.0}}
    theta = cfg.get("theta")
    if (cfg.get("kind") == "linear" and cfg.get("noise") == "gaussian" and isinstance(theta, Mapping)
            and theta.get("distribution") == "normal"):
        return {"family": "linear_known_variance",
                "params": {"prior_mean": 0.0, "prior_var": theta["scale"] ** 2, "noise_var": cfg["sigma"] ** 2}}
    return None


def _random_instances(cfg: Any) -> bool:
    """True if an environment config describes instances drawn per run (a distribution entry);
    explicit per-run instances (``{"distribution": "per_run", ...}``, rows given by the user) are
    not drawn by the environment, so they count as fixed."""
    if isinstance(cfg, Mapping):
        if cfg.get("distribution") == "per_run":
            return False
        return any(k in ("distribution", "uniform") for k in cfg) or any(_random_instances(v) for v in cfg.values())
    if isinstance(cfg, (list, tuple)):
        return any(_random_instances(v) for v in cfg)
    return False


def _per_run_instances(cfg: Any) -> bool:
    """True if an environment config holds explicit per-run instances anywhere."""
    if isinstance(cfg, Mapping):
        return cfg.get("distribution") == "per_run" or any(_per_run_instances(v) for v in cfg.values())
    if isinstance(cfg, (list, tuple)):
        return any(_per_run_instances(v) for v in cfg)
    return False


def check_prior_match(env: Environment, policies: Mapping[str, Any]) -> dict[str, Any]:
    """Compare every Bayesian policy's prior with the environment's instance distribution.

    Returns ``{"prior_check": {policy: note}}`` for the results' metadata (``{}`` when no policy
    carries a prior); warns once (:class:`UserWarning`) naming the policies whose prior is not the
    distribution the instances are drawn from. Silent for matched priors, fixed instances and
    explicit per-run instances (rows the user gave: their regret is frequentist, and the note says so).
    """
    env_prior = _implied_prior(env)
    random = env_prior is not None or _random_instances({k: v for k, v in env.params.items() if k != "groups"})
    notes, bad = {}, []
    for label, pol in policies.items():
        prior = (getattr(pol, "requires", None) or {}).get("prior")
        if prior is None:
            continue
        if not random:
            notes[label] = "fixed instance: the regret is frequentist (not averaged over the policy's prior)"
            if _per_run_instances(env.params):
                notes[label] = ("explicit per-run instances: the regret is frequentist, averaged over the given "
                                "instances (not over the policy's prior)")
        elif env_prior is not None and _same(prior, env_prior):
            notes[label] = "matched: instances are drawn from the policy's prior (Bayesian regret)"
        else:
            where = json.dumps(env_prior) if env_prior is not None else f"environment {env.label}'s own distribution"
            notes[label] = f"mismatched: instances come from {where}, the policy's prior is {json.dumps(prior)}"
            bad.append(label)
    if bad:
        warnings.warn(
            f"policies {', '.join(map(repr, bad))} are Bayesian but the environment's instances are not drawn "
            "from their prior, so the regret is not their Bayesian regret (" + "; ".join(notes[b] for b in bad)
            + "). Use bayesfair.environments.prior.prior_environment(posterior, ...) for matched instances.",
            UserWarning, stacklevel=3)
    return {"prior_check": notes} if notes else {}
