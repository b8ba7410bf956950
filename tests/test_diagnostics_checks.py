"""Model-checking groups of the diagnostics tree (bayesfair.diagnostics.checks).

The pointwise log-likelihood is compared with scipy.stats on the tree's own draws; the
predictive draws are checked in expectation with tolerances of 6 Monte Carlo standard errors.
"""

import warnings

import matplotlib
import numpy as np
import pytest
from scipy import stats

import bayesfair as bf
from bayesfair import diagnostics as dg
from bayesfair.posteriors import fit, fit_linear, linear_known_variance, linear_normal_inverse_gamma
from bayesfair.workflow.logs import RoundLog

matplotlib.use("Agg")

K, D = 4, 3
MODEL_GROUPS = {"log_likelihood", "posterior_predictive", "prior_predictive", "observed_data", "constant_data",
                "prior"}
PER_ARM = {"beta_bernoulli": lambda: bf.beta_bernoulli(1.0, 2.0),
           "normal_known_variance": lambda: bf.normal_known_variance(0.2, 2.0, 0.3),
           "normal_inverse_gamma": lambda: bf.normal_inverse_gamma(0.1, 1.0, 2.0, 0.5)}
LINEAR = {"linear_known_variance": lambda: linear_known_variance(0.0, 1.0, 0.5),
          "linear_normal_inverse_gamma": lambda: linear_normal_inverse_gamma(0.0, 1.0, 2.0, 1.0)}


def _instance(family: str, seed: int):
    """A random instance: the family, its state after N observations, and the observations."""
    rng = np.random.default_rng(seed)
    n = 40  # one size: the compiled log-likelihood is reused across seeds
    if family in PER_ARM:
        post = PER_ARM[family]()
        arms = rng.integers(0, K, n)
        mu = rng.uniform(0.1, 0.9, K)
        r = (rng.uniform(size=n) < mu[arms]).astype(float) if family == "beta_bernoulli" else \
            rng.normal(mu[arms], 0.6)
        return post, fit(post, K, arms, r), {"arm": arms, "reward": r}
    post = LINEAR[family]()
    x = rng.normal(size=(n, D))
    y = x @ rng.normal(size=D) + rng.normal(0, 0.7, n)
    return post, fit_linear(post, x, y), {"x": x, "reward": y}


def _expected_loglik(family: str, draws, obs) -> np.ndarray:
    """log p(r_i | draw) by scipy.stats, [draw, obs]."""
    r = obs["reward"][None, :]
    if family == "beta_bernoulli":
        return stats.bernoulli.logpmf(r, draws["mu"][:, obs["arm"]])
    if family == "normal_known_variance":
        return stats.norm.logpdf(r, draws["mu"][:, obs["arm"]], np.sqrt(0.3))
    if family == "normal_inverse_gamma":
        return stats.norm.logpdf(r, draws["mu"][:, obs["arm"]], np.sqrt(draws["sigma2"][:, obs["arm"]]))
    loc = draws["theta"] @ obs["x"].T
    scale = np.sqrt(0.5) if family == "linear_known_variance" else np.sqrt(draws["sigma2"])[:, None]
    return stats.norm.logpdf(r, loc, scale)


@pytest.mark.parametrize("seed", [3, 11])
@pytest.mark.parametrize("family", [*PER_ARM, *LINEAR])
def test_pointwise_loglik_matches_scipy(family, seed):
    post, state, obs = _instance(family, seed)
    kw = {"contexts": np.eye(D)} if family in LINEAR else {}
    tree = dg.from_posterior(post, state, merit=bf.merit.exponential(2.0), observations=obs, n_draws=200, key=seed,
                             **kw)
    assert MODEL_GROUPS <= set(tree.children)
    n = obs["reward"].size
    ll = tree["log_likelihood"].dataset["reward"]
    assert ll.dims == ("chain", "draw", "obs") and ll.shape == (4, 50, n)
    post_ds = tree["posterior"].dataset
    draws = {k: post_ds[k].values[0] for k in post.observation.dims}
    np.testing.assert_allclose(ll.values[0], _expected_loglik(family, draws, obs), rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(tree["observed_data"].dataset["reward"].values, obs["reward"])
    const = tree["constant_data"].dataset
    if family in PER_ARM:
        np.testing.assert_array_equal(const["pulled_arm"].values, obs["arm"])
    else:
        np.testing.assert_allclose(const["x"].values, obs["x"])
        assert const["x"].dims == ("obs", "feature")
    for g in ("posterior_predictive", "prior_predictive"):
        assert tree[g].dataset["reward"].dims == ("chain", "draw", "obs")
    assert set(tree["prior"].dataset.data_vars) == set(post_ds.data_vars)
    # the family's own draws are those of the tree without observations (same key). They come from
    # two separately compiled programs (the family's sample, the likelihood's joint draw) doing the
    # same float32 arithmetic; XLA may round an operation of one differently (1 ulp in 2 of 800
    # draws under LLVM -O0, tests/conftest.py), so equal up to float32 rounding. A key or stream
    # mix-up gives unrelated draws and fails this by orders of magnitude.
    plain = dg.from_posterior(post, state, merit=bf.merit.exponential(2.0), n_draws=200, key=seed, **kw)
    own = next(iter(post.dims))
    np.testing.assert_allclose(plain["posterior"].dataset[own].values, post_ds[own].values, rtol=1e-6, atol=0)


@pytest.mark.parametrize("seed", [0, 1])
def test_predictive_draws_follow_the_posterior_and_the_prior(seed):
    """Beta-Bernoulli: the replicated rewards of arm a average the draws of mu_a (posterior), and
    the prior predictive averages a0 / (a0 + b0); 6 Monte Carlo standard errors."""
    post, state, obs = _instance("beta_bernoulli", seed)
    tree = dg.from_posterior(post, state, observations=obs, n_draws=2000, key=seed)
    rep = tree["posterior_predictive"].dataset["reward"].values[0]  # [draw, obs]
    mu = tree["posterior"].dataset["mu"].values[0]
    assert set(np.unique(rep)) <= {0.0, 1.0}
    for a in np.unique(obs["arm"]):
        cols = obs["arm"] == a
        expected = mu[:, a].mean()
        got = rep[:, cols].mean()
        se = np.sqrt(expected * (1 - expected) / (rep.shape[0] * cols.sum()))
        assert abs(got - expected) < 6 * se + 1e-12
    # prior: Beta(1, 2) draws (mean 1/3, variance 1/18), and rewards replicated from them
    prior_mu = tree["prior"].dataset["mu"].values[0]
    assert abs(prior_mu.mean() - 1 / 3) < 6 * np.sqrt(1 / 18 / prior_mu.size)
    prior_rep = tree["prior_predictive"].dataset["reward"].values[0]
    p = prior_mu[:, obs["arm"]]
    assert abs(prior_rep.mean() - p.mean()) < 6 * np.sqrt((p * (1 - p)).mean() / p.size)


@pytest.mark.filterwarnings("ignore:Estimated shape parameter of Pareto:UserWarning")
def test_arviz_functions_accept_the_tree(tmp_path):
    import arviz as az

    post, state, obs = _instance("normal_inverse_gamma", 5)
    tree = dg.from_posterior(post, state, merit=bf.merit.exponential(2.0), observations=obs, n_draws=300,
                             group_of_arm=[0, 0, 1, 1])
    loo = az.loo(tree, pointwise=True)
    assert np.isfinite(loo.elpd) and loo.n_data_points == obs["reward"].size
    # elpd_loo <= lppd (the in-sample log pointwise predictive density), up to Monte Carlo noise
    lppd = np.log(np.exp(tree["log_likelihood"].dataset["reward"].values[0]).mean(0)).sum()
    assert loo.elpd <= lppd + 1e-6
    pc = az.plot_ppc_dist(tree, num_samples=20)
    pc2 = az.plot_prior_posterior(dg.prior_posterior_view(tree), var_names=["mu", "sigma2"])
    pc3 = az.plot_forest(tree, var_names=["mu", "sigma2"])
    for i, p in enumerate((pc, pc2, pc3)):
        p.savefig(tmp_path / f"plot{i}.png")
        assert (tmp_path / f"plot{i}.png").stat().st_size > 1000
    table = dg.summary(tree)
    assert "sigma2[0]" in table.index
    import matplotlib.pyplot as plt

    plt.close("all")


def test_linear_family_keeps_the_pulled_arms():
    """A linear family's observations from a log: x = contexts[arm] drives the likelihood, the arms
    stay in constant_data."""
    post = linear_known_variance(0.0, 1.0, 0.5)
    rng = np.random.default_rng(8)
    contexts = rng.normal(size=(K, D))
    arms = rng.integers(0, K, 40)
    y = contexts[arms] @ np.array([0.5, -0.2, 0.1]) + rng.normal(0, 0.7, 40)
    state = fit_linear(post, contexts[arms], y)
    tree = dg.from_posterior(post, state, observations={"arm": arms, "x": contexts[arms], "reward": y}, n_draws=48,
                             contexts=contexts)
    const = tree["constant_data"].dataset
    np.testing.assert_array_equal(const["pulled_arm"].values, arms)
    np.testing.assert_allclose(const["x"].values, contexts[arms])
    theta = tree["posterior"].dataset["theta"].values[0]
    expected = stats.norm.logpdf(y[None, :], theta @ contexts[arms].T, np.sqrt(0.5))
    np.testing.assert_allclose(tree["log_likelihood"].dataset["reward"].values[0], expected, rtol=1e-9)


def test_binary_rewards_calibration_plot(tmp_path):
    """For 0/1 rewards ArviZ's PAVA calibration plot takes the tree (docs/diagnostics.md)."""
    import arviz as az

    post, state, obs = _instance("beta_bernoulli", 4)
    tree = dg.from_posterior(post, state, observations=obs, n_draws=100)
    az.plot_ppc_pava(tree).savefig(tmp_path / "pava.png")
    assert (tmp_path / "pava.png").stat().st_size > 1000


def test_prior_posterior_view_renames_group():
    post, state, obs = _instance("beta_bernoulli", 2)
    tree = dg.from_posterior(post, state, merit=bf.merit.exponential(2.0), observations=obs, n_draws=200,
                             group_of_arm=[0, 1, 1, 0])  # (the draw sizes of the tests above: compiled once)
    view = dg.prior_posterior_view(tree)
    assert set(view.children) == {"prior", "posterior"}
    assert view["posterior"].dataset["pi_star_group"].dims == ("chain", "draw", "arm_group")
    assert "group" not in view["prior"].dataset.dims
    assert list(dg.prior_posterior_view(tree, "mu")["prior"].dataset.data_vars) == ["mu"]
    with pytest.raises(ValueError, match="prior and posterior"):
        dg.prior_posterior_view(dg.from_posterior(post, state, n_draws=200))


def test_observation_errors():
    post, state, obs = _instance("beta_bernoulli", 0)
    n = obs["reward"].size
    with pytest.raises(ValueError, match=r"observations\['arm'\] must be in \[0, 3\]"):
        dg.from_posterior(post, state, observations={"arm": np.full(n, 4), "reward": obs["reward"]})
    with pytest.raises(ValueError, match=r"one arm per reward"):
        dg.from_posterior(post, state, observations={"arm": obs["arm"][:-1], "reward": obs["reward"]})
    with pytest.raises(ValueError, match=r"must be 0 or 1"):
        dg.from_posterior(post, state, observations={"arm": obs["arm"], "reward": obs["reward"] + 0.5})
    with pytest.raises(ValueError, match=r"need the keys 'reward' and 'arm'"):
        dg.from_posterior(post, state, observations={"x": obs["arm"], "reward": obs["reward"]})
    with pytest.raises(ValueError, match="do not reproduce the posterior state"):
        dg.from_posterior(post, state, observations={"arm": obs["arm"], "reward": 1.0 - obs["reward"]})
    # one observation fewer than the state learned from: its counts differ by one (the posterior
    # means, compared to 1e-3 before, did not show it for a state of thousands of observations)
    rng = np.random.default_rng(3)
    arms, r = rng.integers(0, 4, 4000), (rng.uniform(size=4000) < 0.5).astype(float)
    big = fit(post, 4, arms, r)
    with pytest.raises(ValueError, match=r"do not reproduce the posterior state: refitting 'beta_bernoulli' to the "
                                         r"3,999 observations"):
        dg.from_posterior(post, big, observations={"arm": arms[:-1], "reward": r[:-1]}, n_draws=12)
    assert "log_likelihood" in dg.from_posterior(post, big, observations={"arm": arms, "reward": r},
                                                 n_draws=12).children
    tree = dg.from_posterior(post, state, observations={"arm": obs["arm"], "reward": 1.0 - obs["reward"]},
                             check_observations=False, n_draws=12)
    assert "log_likelihood" in tree.children
    lin, lstate, lobs = _instance("linear_known_variance", 0)
    with pytest.raises(ValueError, match=r"observations\['x'\] must be \[N="):
        dg.from_posterior(lin, lstate, observations={"x": lobs["x"][:, :2], "reward": lobs["reward"]})
    with pytest.raises(ValueError, match="no observation model"):
        dg.from_posterior(post._replace(observation=None), state, observations=obs)


def test_from_simulation_with_a_round_log():
    """FairX-TS updates its posterior with every round's pull: the log's observations reproduce the
    final state (the refit check passes) for every run, from the RoundLog and from its DataFrame."""
    env = bf.bernoulli_arms([0.2, 0.5, 0.55, 0.8], groups=[0, 0, 1, 1])
    merit = bf.merit.exponential(4.0)
    post = bf.beta_bernoulli()
    log = RoundLog.for_study(env, 120, 2, 1)
    results, states = dg.simulate_with_states(1, env, {"TS": bf.fairx_ts(post, merit)}, 120, 2, merit=merit,
                                              round_log=log)
    frame = log.to_frame()
    for run in range(2):
        a = dg.observations_from_log(log, "TS", run)
        b = dg.observations_from_log(frame, "TS", run)
        for k in ("arm", "reward", "round"):
            np.testing.assert_array_equal(a[k], b[k])
        tree = dg.from_simulation(results, states, "TS", post, merit=merit, run=run, log=log, n_draws=100)
        assert MODEL_GROUPS | {"observed_exposure", "under_exposure"} <= set(tree.children)
        assert tree.attrs["observations"] == 120
        np.testing.assert_array_equal(tree["log_likelihood"].dataset["obs"].values, np.arange(1, 121))
    with pytest.raises(ValueError, match="not in the log"):
        dg.observations_from_log(log, "nope")
    with pytest.raises(ValueError, match="run must be"):
        dg.observations_from_log(log, "TS", 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted = dg.fit_from_log(post, log, "TS")
    np.testing.assert_allclose(fitted["TS"].alpha, states["TS"].alpha if hasattr(states["TS"], "alpha")
                               else dg.posterior_state(states["TS"]).alpha)
