"""Bayesian regret: environments drawn from a posterior family's prior, the prior-mismatch check,
and matched-prior TS beating mismatched-prior TS on instances from the prior.

Moment checks: 4000 instances per family, every mean and variance within Z = 5 standard errors
(a variance's s.e. from the fourth moment), ~6e-7 false failures per comparison, < 1e-4 over all.
Regret test: paired over 120 runs, one-sided z > 3.09 (significance 1e-3); the measured effect
(Beta(1, 1) instances, K = 5, T = 200) is z ~ 6.
"""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest

import bayesfair as bf
from bayesfair.environments.arms import UniformMeans
from bayesfair.environments.prior import check_prior_match, prior_environment, prior_marker
from bayesfair.posteriors import (
    linear_known_variance,
    linear_normal_inverse_gamma,
    normal_inverse_gamma,
    normal_known_variance,
)
from bayesfair.posteriors.group_bias import group_bias_posterior
from bayesfair.posteriors.hierarchical import hierarchical_logit_normal

Z = 5.0
N = 4000


def _check_moments(x, mean, var, what):
    x = np.asarray(x, np.float64).reshape(N, -1)
    m, v = x.mean(axis=0), x.var(axis=0, ddof=1)
    se_m = np.sqrt(var / N)
    c = x - x.mean(axis=0)
    se_v = np.sqrt(np.maximum(np.mean(c**4, axis=0) - v**2, 1e-12) / N)
    assert np.all(np.abs(m - mean) < Z * se_m), f"{what}: means {m} vs {mean}"
    assert np.all(np.abs(v - var) < Z * se_v), f"{what}: variances {v} vs {var}"


def _instances(env):
    keys = jax.random.split(jax.random.key(7), N)
    params = jax.vmap(env.reset)(keys)
    rnd = jax.vmap(lambda k, p: env.step(k, p, 1))(jax.random.split(jax.random.key(8), N), params)
    return params, rnd


@pytest.mark.parametrize("post, mean, var", [
    (bf.beta_bernoulli(2.0, 3.0), 0.4, 2.0 * 3.0 / (25.0 * 6.0)),
    (normal_known_variance(1.0, 2.0, 0.5), 1.0, 2.0),
    (normal_inverse_gamma(0.5, 2.0, 3.0, 2.0), 0.5, 2.0 / (2.0 * 2.0)),  # Student-t: b0 / (kappa0 (a0 - 1))
], ids=["beta", "normal", "nig"])
def test_per_arm_prior_environment_draws_the_prior(post, mean, var):
    env = prior_environment(post, 3)
    params, rnd = _instances(env)
    means = jax.vmap(env.arm_means)(params)
    _check_moments(means, mean, var, post.name)
    resid = np.asarray(rnd.reward - rnd.mean)  # E[r | instance] = the instance's mean
    assert np.all(np.abs(resid.mean(axis=0)) < Z * resid.std(axis=0) / np.sqrt(N))
    assert env.params["prior"] == prior_marker(post) and env.spec.n_arms == 3
    assert env.spec.rewards == ("binary" if post.rewards == "binary" else "real")


def test_linear_hierarchical_and_group_bias_prior_environments():
    lin = prior_environment(linear_known_variance(0.0, 2.0, 0.5), 4, n_features=3)
    params, rnd = _instances(lin)
    _check_moments(params["theta"], 0.0, 2.0, "linear theta")
    _check_moments(rnd.reward - rnd.mean, 0.0, 0.5, "linear noise")
    nig = prior_environment(linear_normal_inverse_gamma(0.0, 1.0, 3.0, 2.0), 4, n_features=2)
    params, _ = _instances(nig)
    _check_moments(params["theta"], 0.0, 2.0 / 2.0, "linear NIG theta")
    hier = prior_environment(hierarchical_logit_normal([0, 0, 1, 1], loc=0.5, loc_scale=1.0, scale=0.5))
    params, _ = _instances(hier)
    assert hier.spec.n_arms == 4 and hier.spec.n_groups == 2
    _check_moments(params["logit"], 0.5, 1.0 + 0.25 * 2 / np.pi, "hierarchical logit")  # var m + E[s^2]
    gb = group_bias_posterior([0, 0, 1, 1], 2, tau=0.5, s=2.0, sigma=1.0, prior_sd=3.0)
    env = prior_environment(gb)
    params, rnd = _instances(env)
    _check_moments(params.beta, 0.0, 9.0 + 0.25, "group-bias beta")
    _check_moments(params.psi[:, 1], 0.0, 4.0, "group-bias psi")
    assert np.all(np.asarray(params.psi[:, 0]) == 0.0)
    with pytest.raises(ValueError, match="n_features"):
        prior_environment(linear_known_variance(), 3)
    with pytest.raises(TypeError, match="posterior family"):
        prior_environment("beta", 3)


def _check(env, policies):
    """check_prior_match's warnings about priors and its notes (what simulate adds to the metadata)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        notes = check_prior_match(env, policies).get("prior_check", {})
    return [str(w.message) for w in caught if "not drawn from their prior" in str(w.message)], notes


def test_prior_mismatch_warns_and_match_is_silent():
    import json

    flat, peaked = bf.beta_bernoulli(1.0, 1.0), bf.beta_bernoulli(20.0, 20.0)
    env = prior_environment(flat, 3)
    # through simulate: one warning naming the mismatched policy, a note per Bayesian policy in the metadata
    with pytest.warns(UserWarning, match="'TS20' are Bayesian but") as rec:
        ds = bf.simulate(0, env, {"TS": bf.thompson(flat), "TS20": bf.thompson(peaked), "UCB": bf.ucb1()}, 5, 2,
                         checkpoints=[5])
    msgs = [str(w.message) for w in rec if "not drawn from their prior" in str(w.message)]
    assert len(msgs) == 1 and "'TS'" not in msgs[0]
    notes = json.loads(ds.attrs["config"])["prior_check"]
    assert notes["TS20"].startswith("mismatched") and notes["TS"].startswith("matched") and "UCB" not in notes
    msgs, notes = _check(env, {"TS": bf.thompson(flat), "FairX-TS": bf.fairx_ts(flat, bf.merit.exponential(4.0))})
    assert msgs == [] and notes["FairX-TS"].startswith("matched")
    # U(0, 1) means are the Beta(1, 1) prior; U(0.6, 0.85) is no prior of a Beta-Bernoulli TS
    uniform = bf.bernoulli_arms(UniformMeans(0.0, 1.0, 3))
    assert _check(uniform, {"TS": bf.thompson(flat)})[0] == []
    assert len(_check(uniform, {"TS20": bf.thompson(peaked)})[0]) == 1
    assert len(_check(bf.bernoulli_arms(UniformMeans(0.6, 0.85, 3)), {"TS": bf.thompson(flat)})[0]) == 1
    # another family, or the same family with another prior, on a Gaussian prior environment
    gauss = prior_environment(normal_known_variance(0.0, 1.0, 1.0), 3)
    assert _check(gauss, {"TS": bf.thompson(normal_known_variance(0.0, 1.0, 1.0))})[0] == []
    assert len(_check(gauss, {"TS": bf.thompson(normal_known_variance(0.0, 4.0, 1.0))})[0]) == 1
    assert len(_check(gauss, {"TS": bf.thompson(normal_inverse_gamma())})[0]) == 1
    # a linear bandit with theta ~ N(0, s^2 I) and N(0, sigma^2) noise is linear_known_variance(0, s^2, sigma^2)'s prior
    from bayesfair.policies.linear import lints

    assert _check(bf.linear_bandit(3, 2), {"LinTS": lints(linear_known_variance(0.0, 1.0, 1.0))})[0] == []
    assert len(_check(bf.linear_bandit(3, 2, theta_scale=2.0), {"LinTS": lints(linear_known_variance())})[0]) == 1
    # fixed instance: frequentist regret, noted but not warned
    msgs, notes = _check(bf.bernoulli_arms([0.2, 0.5, 0.8]), {"TS": bf.thompson(flat)})
    assert msgs == [] and notes["TS"].startswith("fixed instance")
    # explicit per-run instances (rows from elsewhere): frequentist too, noted as such, not warned
    rows = np.random.default_rng(0).uniform(0.1, 0.9, (4, 3))
    msgs, notes = _check(bf.bernoulli_arms(rows), {"TS": bf.thompson(flat)})
    assert msgs == [] and notes["TS"].startswith("explicit per-run instances")
    msgs, notes = _check(bf.linear_bandit(3, 2, theta=np.ones((4, 2))), {"LinTS": lints(linear_known_variance())})
    assert msgs == [] and notes["LinTS"].startswith("explicit per-run instances")
    # a prior parameter that differs only in the 12th digit still matches
    assert _check(env, {"TS": bf.thompson(bf.beta_bernoulli(1.0 + 1e-12, 1.0))})[1]["TS"].startswith("matched")


def test_matched_prior_ts_has_lower_bayesian_regret():
    """TS with the instances' prior Beta(1, 1) against TS believing Beta(20, 20), paired over runs."""
    flat = bf.beta_bernoulli(1.0, 1.0)
    env = prior_environment(flat, 5)
    pols = {"matched": bf.thompson(flat), "mismatched": bf.thompson(bf.beta_bernoulli(20.0, 20.0))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ds = bf.simulate(11, env, pols, 200, 120, checkpoints=[200])
    r = ds["regret"].isel(checkpoint=-1).values
    d = r[1] - r[0]
    z = d.mean() / (d.std(ddof=1) / np.sqrt(d.size))
    assert z > 3.09, f"mismatched - matched regret {d.mean():.2f}, z = {z:.2f}"


@pytest.mark.slow
def test_bayesian_regret_example_tiny(capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "experiments" / "bayesian_regret" / "run.py"
    spec = importlib.util.spec_from_file_location("bayesian_regret_run", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--arms", "3", "--horizon", "20", "--runs", "4"]) == 0
    out = capsys.readouterr().out
    assert "TS (Beta(20, 20))" in out and "not drawn from their prior" in out and "paired over runs" in out
