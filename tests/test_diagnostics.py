"""bayesfair.diagnostics: the DataTree of posterior merit and exposure, summary, plots, errors.

Statistical checks here are exact (hand-computed probabilities over given draws) or use 20,000
independent draws, where a probability estimate has standard error <= 0.0036: the tolerances
(0.03) are > 8 standard errors.
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesfair as bf
from bayesfair import diagnostics as dg
from bayesfair import plotting
from bayesfair.posteriors import fit, fit_linear, linear_known_variance
from bayesfair.posteriors import group_bias as gb
from bayesfair.posteriors.hierarchical import hierarchical_logit_normal
from bayesfair.posteriors.mcmc import refresh

K = 4
LABELS = np.array([0, 0, 1, 1])
ARMS = np.array([0, 1, 2, 3, 3, 2, 1, 3, 3, 0, 2, 3], np.int32)
REWARDS = np.array([0, 1, 1, 1, 0, 1, 0, 1, 1, 0, 1, 1], np.float32)
EXPOSURE = {"exposure_share": [0.1, 0.2, 0.3, 0.4], "pull_share": [0.25, 0.25, 0.25, 0.25],
            "group_exposure_share": [0.3, 0.7], "group_pull_share": [0.5, 0.5]}
POSTERIOR_VARS = {"mu", "merit", "pi_star", "pi_star_group", "pi_star_within"}


@pytest.fixture(scope="module")
def merit():
    return bf.merit.exponential(4.0)


def _check_posterior_dims(tree, n_chain=None):
    post = tree["posterior"].dataset
    assert POSTERIOR_VARS <= set(post.data_vars)
    for name in ("mu", "merit", "pi_star", "pi_star_within"):
        assert post[name].dims == ("chain", "draw", "arm")
    assert post["pi_star_group"].dims == ("chain", "draw", "group")
    assert list(post["arm"].values) == list(range(K))
    if n_chain is not None:
        assert post.sizes["chain"] == n_chain


@pytest.mark.parametrize("family", ["beta_bernoulli", "normal_known_variance", "normal_inverse_gamma"])
def test_tree_structure_for_conjugate_families(family, merit):
    post = {"beta_bernoulli": bf.beta_bernoulli(), "normal_known_variance": bf.normal_known_variance(0.5, 1.0, 0.5),
            "normal_inverse_gamma": bf.normal_inverse_gamma()}[family]
    state = fit(post, K, ARMS, REWARDS)
    tree = dg.from_posterior(post, state, merit=merit, n_draws=500, key=1, group_of_arm=LABELS, exposure=EXPOSURE,
                             group_names=["a", "b"])
    assert set(tree.children) == {"posterior", "observed_exposure", "under_exposure"}  # no sample_stats: exact
    _check_posterior_dims(tree, n_chain=4)  # the 500 independent draws as 4 chains of 125 (az.rhat, plot_rank)
    assert tree["posterior"].dataset.sizes["draw"] == 125
    assert list(tree["posterior"].dataset["group"].values) == ["a", "b"]
    obs = tree["observed_exposure"].dataset
    assert {"exposure_share", "pull_share", "group_exposure_share", "group_pull_share", "within_exposure_share",
            "within_pull_share"} <= set(obs.data_vars)
    np.testing.assert_allclose(obs["within_exposure_share"].values, [1 / 3, 2 / 3, 3 / 7, 4 / 7])
    under = tree["under_exposure"].dataset
    assert under["p_arm"].dims == ("arm",) and under["p_group"].dims == ("group",)
    assert under["p_within"].dims == ("arm",) and "p_bilevel" not in under
    assert tree.attrs["source"] == "exact" and tree.attrs["posterior"] == family
    # the draws follow the posterior: their mean is the closed-form mean (family variance bound)
    mean = tree["posterior"].dataset["mu"].mean(("chain", "draw")).values
    sd = np.sqrt(np.asarray(post.variance(state), np.float64))
    assert np.all(np.abs(mean - np.asarray(post.mean(state))) < 5 * sd / np.sqrt(500) + 1e-6)


def test_pi_star_sums_to_one_per_draw(merit):
    rng = np.random.default_rng(0)
    mu = rng.normal(0.5, 0.3, (2, 50, K))
    tree = dg.posterior_tree({"mu": mu}, merit=merit, group_of_arm=LABELS, group_floors=[0.2, 0.3])
    post = tree["posterior"].dataset
    np.testing.assert_allclose(post["pi_star"].sum("arm").values, 1.0, rtol=1e-12)
    np.testing.assert_allclose(post["pi_star_group"].sum("group").values, 1.0, rtol=1e-12)
    within = post["pi_star_within"].values
    np.testing.assert_allclose(within[..., :2].sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(within[..., 2:].sum(-1), 1.0, rtol=1e-12)
    bil = post["pi_star_bilevel"].values
    np.testing.assert_allclose(bil.sum(-1), 1.0, rtol=1e-12)
    assert set(np.round(bil[..., 0], 12).ravel().tolist()) <= {0.2, 0.7}  # floor, or floor + remainder (0.5)
    np.testing.assert_allclose(post["merit"].values, np.exp(4 * mu), rtol=1e-12)
    # pi* from the merit, draw by draw
    np.testing.assert_allclose(post["pi_star"].values, np.exp(4 * mu) / np.exp(4 * mu).sum(-1, keepdims=True))


def test_under_exposure_hand_computed():
    """Two arms, identity merit: pi*_0 = mu_0 / (mu_0 + mu_1) takes 0.1, 0.3, 0.5, 0.7 on the
    four draws; with observed shares 0.4 / 0.6 two of four draws exceed 0.4 (p = 0.5) and one
    of four exceeds 0.6 for arm 1 (pi*_1 = 0.9, 0.7, 0.5, 0.3)."""
    ident = bf.merit.identity(floor=1e-6)
    mu = np.array([[0.1, 0.9], [0.3, 0.7], [0.5, 0.5], [0.7, 0.3]])  # [draw, arm]
    tree = dg.posterior_tree({"mu": mu}, merit=ident, exposure={"exposure_share": [0.4, 0.6],
                                                                "group_exposure_share": [1.0]})
    np.testing.assert_allclose(tree["posterior"].dataset["pi_star"].values[0, :, 0], [0.1, 0.3, 0.5, 0.7])
    under = tree["under_exposure"].dataset
    np.testing.assert_allclose(under["p_arm"].values, [0.5, 0.5])  # arm 1: 0.9, 0.7 > 0.6
    np.testing.assert_allclose(under["p_group"].values, [0.0])  # one group: pi*_g = 1 = share
    # two groups, floors: group 0 = arm 0, group 1 = arm 1; values mu_0 vs mu_1; g* = 1, 1, tie, 0
    tree = dg.posterior_tree({"mu": mu}, merit=ident, group_of_arm=[0, 1], group_floors=[0.2, 0.3],
                             exposure={"exposure_share": [0.4, 0.6], "pull_share": [0.3, 0.7],
                                       "group_exposure_share": [0.4, 0.6], "group_pull_share": [0.3, 0.7]})
    bil = tree["posterior"].dataset["pi_star_bilevel"].values[0]
    np.testing.assert_allclose(bil[:, 0], [0.2, 0.2, 0.45, 0.7])  # 0.2 + 0.5 * (share of the remainder)
    under = tree["under_exposure"].dataset
    np.testing.assert_allclose(under["p_bilevel"].values, [0.5, 0.5])  # g0: 0.45, 0.7 > 0.4; g1: 0.8, 0.8 > 0.6
    np.testing.assert_allclose(under["p_within"].values, [0.0, 0.0])  # within a singleton group: 1 = 1
    obs = tree["observed_exposure"].dataset
    np.testing.assert_allclose(obs["floor_margin"].values, [0.1, 0.4])
    # compare="pulls" uses the pull shares instead
    tree = dg.posterior_tree({"mu": mu}, merit=ident, compare="pulls",
                             exposure={"exposure_share": [0.4, 0.6], "pull_share": [0.2, 0.8]})
    np.testing.assert_allclose(tree["under_exposure"].dataset["p_arm"].values, [0.75, 0.25])


def test_under_exposure_is_half_at_the_median_and_extreme_far_away(merit):
    rng = np.random.default_rng(1)
    mu = rng.beta(5.0, 3.0, (20_000, K))
    pi = np.exp(4 * mu) / np.exp(4 * mu).sum(-1, keepdims=True)
    med = np.median(pi, axis=0)
    p = dg.posterior_tree({"mu": mu}, merit=merit, exposure={"exposure_share": med}).under_exposure.dataset
    np.testing.assert_allclose(p["p_arm"].values, 0.5, atol=0.03)
    far_low = dg.posterior_tree({"mu": mu}, merit=merit, exposure={"exposure_share": np.full(K, 1e-4)})
    far_high = dg.posterior_tree({"mu": mu}, merit=merit, exposure={"exposure_share": np.full(K, 0.99)})
    np.testing.assert_allclose(far_low["under_exposure"].dataset["p_arm"].values, 1.0)
    np.testing.assert_allclose(far_high["under_exposure"].dataset["p_arm"].values, 0.0)


def test_fair_shares_equal_to_the_observed_ones_are_not_under_exposure(merit):
    """A policy at the bi-level optimum (observed group shares 0.2 / 0.8 up to float32 sums) was
    'under-exposed' with probability 1 in both groups, and a single group (pi*_g = share_g = 1)
    too: a strict comparison of values equal up to rounding."""
    mu = np.tile([0.2, 0.5, 0.55, 0.8], (1, 100, 1))
    t = dg.posterior_tree({"mu": mu}, merit=merit, group_of_arm=[0, 0, 1, 1], group_floors=[0.2, 0.2],
                          exposure={"group_exposure_share": [0.2 - 2e-9, 0.8 - 2e-9]})
    np.testing.assert_allclose(t["posterior"]["pi_star_bilevel"].values.reshape(-1, 2), [[0.2, 0.8]] * 100, rtol=1e-12)
    np.testing.assert_array_equal(t["under_exposure"]["p_bilevel"].values, [0.0, 0.0])
    one = dg.posterior_tree({"mu": mu}, merit=merit, group_of_arm=[0, 0, 0, 0],
                            exposure={"group_exposure_share": [1.0 - 8e-9]})
    np.testing.assert_array_equal(one["under_exposure"]["p_group"].values, [0.0])
    # a clear shortfall still counts
    short = dg.posterior_tree({"mu": mu}, merit=merit, group_of_arm=[0, 0, 1, 1], group_floors=[0.2, 0.2],
                              exposure={"group_exposure_share": [0.15, 0.85]})
    np.testing.assert_array_equal(short["under_exposure"]["p_bilevel"].values, [1.0, 0.0])


def test_exposure_given_directly_must_be_shares(merit):
    mu = np.random.default_rng(0).beta(5.0, 3.0, (1, 50, K))
    with pytest.raises(ValueError, match=r"exposure\['pull_share'\] must be shares in \[0, 1\], got 30 .*counts"):
        dg.posterior_tree({"mu": mu}, merit=merit, compare="pulls", exposure={"pull_share": [30, 50, 20, 0]})
    with pytest.raises(ValueError, match=r"exposure\['exposure_share'\] must be shares in \[0, 1\], got -0.1"):
        dg.posterior_tree({"mu": mu}, merit=merit, exposure={"exposure_share": [0.5, 0.6, -0.1, 0.0]})
    with pytest.raises(ValueError, match=r"group_exposure_share \[0.1, 0.9\] is not the sum of exposure_share"):
        dg.posterior_tree({"mu": mu}, merit=merit, group_of_arm=[0, 0, 1, 1],
                          exposure={"exposure_share": [0.25, 0.25, 0.25, 0.25], "group_exposure_share": [0.1, 0.9]})
    with pytest.raises(ValueError, match=r"^exposure\['exposure_share'\] must be finite"):
        dg.posterior_tree({"mu": mu}, merit=merit, exposure={"exposure_share": [0.5, np.nan, 0.25, 0.25]})
    with pytest.raises(ValueError, match=r"^contexts must be finite"):
        dg.posterior_tree({"theta": mu[..., :2]}, merit=merit, contexts=np.full((K, 2), np.nan))


def test_linear_posterior_theta_with_contexts(merit):
    post = linear_known_variance(0.0, 1.0, 1.0)
    rng = np.random.default_rng(2)
    x = rng.normal(size=(30, 3)).astype(np.float32)
    y = (x @ np.array([0.2, -0.1, 0.3]) + 0.5).astype(np.float32)
    state = fit_linear(post, x, y)
    ctx = rng.normal(size=(K, 3))
    tree = dg.from_posterior(post, state, merit=merit, n_draws=200, contexts=ctx, link="logistic",
                             feature_names=["x0", "x1", "x2"])
    ds = tree["posterior"].dataset
    assert ds["theta"].dims == ("chain", "draw", "feature") and list(ds["feature"].values) == ["x0", "x1", "x2"]
    np.testing.assert_allclose(ds["mu"].values, 1 / (1 + np.exp(-ds["theta"].values @ ctx.T)), rtol=1e-10)
    assert ds.sizes["group"] == 1


def test_psi_draws_and_extra_sites():
    rng = np.random.default_rng(3)
    psi = rng.normal(size=(2, 30, 2, 3))
    tree = dg.posterior_tree({"psi": psi, "sigma": rng.gamma(2.0, size=(2, 30))}, group_names=["ref", "g1"])
    ds = tree["posterior"].dataset
    assert ds["psi"].dims == ("chain", "draw", "group", "feature") and ds["sigma"].dims == ("chain", "draw")
    assert "mu" not in ds and set(tree.children) == {"posterior"}
    tree = dg.posterior_tree({"mu": rng.random((30, K)), "psi": rng.normal(size=(30, 2))},
                             merit=bf.merit.exponential(1.0), group_of_arm=LABELS)
    assert tree["posterior"].dataset["psi"].dims == ("chain", "draw", "group")
    assert list(ds["group"].values) == ["ref", "g1"]
    fig = plotting.plot_psi_forest(dg.posterior_tree({"psi": psi}, group_names=["ref", "g1"]))
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert len(labels) == 6 and labels[0] == "ref, 0"
    plotting.pyplot().close(fig)


@pytest.fixture(scope="module")
def hierarchical_tree(merit):
    """An MCMC-fallback state (hierarchical model, 2 chains) refreshed once with refresh()."""
    post = hierarchical_logit_normal(LABELS, refresh_every=10_000, num_warmup=150, num_samples=150,
                                     num_chains=2, seed=4)
    state = jax.jit(lambda a, r: fit(post, K, a, r))(np.tile(ARMS, 3), np.tile(REWARDS, 3))
    state = refresh(post, state)
    return post, state, dg.from_posterior(post, state, merit=merit, exposure=EXPOSURE, group_floors=[0.2, 0.2])


def test_mcmc_state_refuses_observations(hierarchical_tree):
    """Model-checking groups need joint draws of an observation model: not from MCMC samples."""
    post, state, _ = hierarchical_tree
    with pytest.raises(ValueError, match="need a conjugate posterior state"):
        dg.from_posterior(post, state, observations={"arm": np.tile(ARMS, 3), "reward": np.tile(REWARDS, 3)})


def test_mcmc_tree_has_sample_stats_and_convergence(hierarchical_tree):
    post, state, tree = hierarchical_tree
    assert set(tree.children) == {"posterior", "observed_exposure", "under_exposure", "sample_stats"}
    _check_posterior_dims(tree, n_chain=2)
    ds = tree["posterior"].dataset
    assert ds["group_loc"].dims == ("chain", "draw", "group") and ds["group_scale"].dims == ("chain", "draw", "group")
    assert ds["z"].dims == ("chain", "draw", "arm") and "pi_star_bilevel" in ds
    np.testing.assert_allclose(ds["mu"].values, np.asarray(state.samples["mu"]), rtol=1e-6)
    ss = tree["sample_stats"].dataset
    for name in ("diverging", "acceptance_rate", "n_steps", "step_size"):
        assert ss[name].dims == ("chain", "draw")
    for var in ("mu", "pi_star", "pi_star_group"):
        for stat in ("r_hat", "ess_bulk", "ess_tail"):
            assert f"{stat}_{var}" in ss
    assert np.all(np.isfinite(ss["r_hat_mu"].values)) and np.all(ss["r_hat_mu"].values < 1.1)
    assert np.all(ss["ess_bulk_mu"].values > 50)
    assert tree.attrs["source"] == "mcmc" and tree.attrs["refreshes"] == 1 and tree.attrs["observations"] == 36
    df = dg.summary(tree)
    for col in ("mean", "sd", "ess_bulk", "ess_tail", "r_hat", "observed_share", "p_under_exposed"):
        assert col in df.columns
    assert df.loc["pi_star[0]", "observed_share"] == pytest.approx(0.1)
    assert df.loc["pi_star_group[1]", "observed_share"] == pytest.approx(0.7)
    assert np.isnan(df.loc["mu[0]", "p_under_exposed"])


def test_summary_of_exact_draws_has_no_convergence_columns(merit):
    post = bf.beta_bernoulli()
    tree = dg.from_posterior(post, fit(post, K, ARMS, REWARDS), merit=merit, n_draws=200, exposure=EXPOSURE,
                             group_of_arm=LABELS)
    df = dg.summary(tree)
    assert "r_hat" not in df.columns and {"mean", "sd", "observed_share", "p_under_exposed"} <= set(df.columns)
    under = tree["under_exposure"].dataset
    assert df.loc["pi_star[2]", "p_under_exposed"] == pytest.approx(float(under["p_arm"].values[2]))
    assert df.loc["pi_star_within[1]", "p_under_exposed"] == pytest.approx(float(under["p_within"].values[1]))
    sub = dg.summary(tree, var_names=["pi_star"], ci_prob=0.5)
    assert list(sub.index) == [f"pi_star[{i}]" for i in range(K)]
    with pytest.raises(ValueError, match="var_names"):
        dg.summary(tree, var_names=["nope"])
    with pytest.raises(TypeError, match="DataTree"):
        dg.summary({"posterior": 1})


def test_from_simulation_with_states_and_plots(merit):
    env = bf.bernoulli_arms(np.array([0.2, 0.5, 0.55, 0.8]), groups=[0, 0, 1, 1])
    post = bf.beta_bernoulli()
    pols = {"BF-TS": bf.bf_ts([0.2, 0.2], merit, post), "uniform": bf.uniform()}
    ds, states = dg.simulate_with_states(3, env, pols, 60, 2, merit=merit, chunk_size=25,
                                         floors=[0.2, 0.2], checkpoints=[10, 30, 60])
    stats = states["BF-TS"].stats
    assert np.asarray(stats.alpha).shape == (2, K)
    # the captured state is the state after round T: alpha + beta - 2 = N_a,T, the recorded pulls
    pulls = ds["pulls"].sel(policy="BF-TS").isel(checkpoint=-1).values
    np.testing.assert_allclose(stats.alpha + stats.beta - 2, pulls)
    tree = dg.from_simulation(ds, states, "BF-TS", post, merit=merit, run=1, n_draws=300)
    obs = tree["observed_exposure"].dataset
    sel = ds.sel(policy="BF-TS").isel(run=1, checkpoint=-1)
    np.testing.assert_allclose(obs["exposure_share"].values, sel["exposure"].values / 60)
    np.testing.assert_allclose(obs["group_pull_share"].values, sel["group_pulls"].values / 60)
    np.testing.assert_allclose(obs["true_mu"].values, [0.2, 0.5, 0.55, 0.8])
    assert list(tree["posterior"].dataset["group"].values) == list(ds["group"].values)
    assert "pi_star_bilevel" in tree["posterior"].dataset  # floors taken from the results
    assert tree.attrs["policy"] == "BF-TS" and tree.attrs["run"] == 1 and tree.attrs["round"] == 60
    at30 = dg.from_simulation(ds, states, "BF-TS", post, merit=merit, checkpoint=30, n_draws=48)
    assert at30.attrs["round"] == 30
    for level in ("arm", "group", "within", "bilevel"):
        fig = plotting.plot_merit_exposure(tree, level=level)
        plotting.pyplot().close(fig)
    fig = plotting.plot_exposure_over_time(ds, "BF-TS", tree=tree)
    plotting.pyplot().close(fig)
    fig = plotting.plot_exposure_over_time(ds, "BF-TS", tree=tree, level="group", run=1)
    plotting.pyplot().close(fig)
    with pytest.raises(ValueError, match="level"):
        plotting.plot_merit_exposure(tree, level="nope")
    with pytest.raises(ValueError, match="policy"):
        plotting.plot_exposure_over_time(ds, "nope")
    # input errors that need results
    with pytest.raises(ValueError, match="several policies"):
        dg.posterior_tree({"mu": np.full((5, K), 0.5)}, merit=merit, exposure=ds)
    with pytest.raises(ValueError, match="not in the results"):
        dg.posterior_tree({"mu": np.full((5, K), 0.5)}, merit=merit, exposure=ds, policy="nope")
    with pytest.raises(ValueError, match="run must be"):
        dg.from_simulation(ds, states, "BF-TS", post, merit=merit, run=5)
    with pytest.raises(ValueError, match="checkpoint"):
        dg.posterior_tree({"mu": np.full((5, K), 0.5)}, merit=merit, exposure=ds, policy="BF-TS", checkpoint=11)
    with pytest.raises(ValueError, match="several runs"):
        dg.posterior_draws(post, states["BF-TS"])
    with pytest.raises(ValueError, match="checkpointer"):
        dg.simulate_with_states(3, env, pols, 10, 2, merit=merit, checkpointer=object())


def test_bad_inputs_raise_clear_errors(merit):
    mu = np.full((10, K), 0.5)
    with pytest.raises(TypeError, match="non-empty mapping"):
        dg.posterior_tree(mu, merit=merit)
    with pytest.raises(ValueError, match="finite"):
        dg.posterior_tree({"mu": np.full((10, K), np.nan)}, merit=merit)
    with pytest.raises(ValueError, match=r"\[chain, draw, n\]"):
        dg.posterior_tree({"mu": np.zeros(4)}, merit=merit)
    with pytest.raises(ValueError, match="same leading"):
        dg.posterior_tree({"mu": mu, "psi": np.zeros((1, 9, 2))}, merit=merit)
    with pytest.raises(TypeError, match="merit"):
        dg.posterior_tree({"mu": mu}, merit=3)
    with pytest.raises(ValueError, match="group_of_arm"):
        dg.posterior_tree({"mu": mu}, merit=merit, group_of_arm=[0, 1])
    with pytest.raises(ValueError, match="empty"):
        dg.posterior_tree({"mu": mu}, merit=merit, group_of_arm=[0, 0, 2, 2])
    with pytest.raises(ValueError, match="exposure_share has 3 arms"):
        dg.posterior_tree({"mu": mu}, merit=merit, exposure={"exposure_share": [0.3, 0.3, 0.4]})
    with pytest.raises(ValueError, match="unknown keys"):
        dg.posterior_tree({"mu": mu}, merit=merit, exposure={"share": [0.25] * K})
    with pytest.raises(TypeError, match="results Dataset or a mapping"):
        dg.posterior_tree({"mu": mu}, merit=merit, exposure=[0.25] * K)
    with pytest.raises(ValueError, match="group_floors"):
        dg.posterior_tree({"mu": mu}, merit=merit, group_of_arm=LABELS, group_floors=[0.6, 0.6])
    with pytest.raises(ValueError, match="compare"):
        dg.posterior_tree({"mu": mu}, merit=merit, compare="both")
    with pytest.raises(ValueError, match="link"):
        dg.posterior_tree({"theta": mu}, contexts=np.eye(K), link="probit")
    with pytest.raises(ValueError, match="contexts must be"):
        dg.posterior_tree({"theta": mu}, contexts=np.eye(3))
    with pytest.raises(ValueError, match="dims="):
        dg.posterior_tree({"mu": mu, "weird": np.zeros((10, 3))}, merit=merit)
    with pytest.raises(ValueError, match="computed from mu"):
        dg.posterior_tree({"mu": mu, "pi_star": mu}, merit=merit)
    with pytest.raises(ValueError, match="arm_names"):
        dg.posterior_tree({"mu": mu}, merit=merit, arm_names=["a", "b"])
    with pytest.raises(ValueError, match="sample_stats"):
        dg.posterior_tree({"mu": mu}, merit=merit, sample_stats={"diverging": np.zeros(3)})
    with pytest.raises(TypeError, match="Posterior"):
        dg.posterior_draws("beta", None)
    with pytest.raises(ValueError, match="n_draws"):
        dg.posterior_draws(bf.beta_bernoulli(), bf.beta_bernoulli().init(K), n_draws=0)
    with pytest.raises(TypeError, match="key"):
        dg.posterior_draws(bf.beta_bernoulli(), bf.beta_bernoulli().init(K), key="seed")
    with pytest.raises(ValueError, match="not in the states"):
        dg.run_state({}, "FairX-TS")
    with pytest.raises(ValueError, match="ci_prob"):
        plotting.plot_merit_exposure(dg.posterior_tree({"mu": mu}, merit=merit), ci_prob=1.5)


def test_bilevel_policy_state_is_unwrapped(merit):
    post = bf.beta_bernoulli()
    pol = bf.bf_ts([0.2, 0.2], merit, post)
    env = bf.bernoulli_arms(np.array([0.2, 0.5, 0.55, 0.8]), groups=[0, 0, 1, 1])
    state = pol.init(jax.random.key(0), env.spec)
    state = pol.update(state, None, jnp.int32(2), jnp.float32(1.0))
    tree = dg.from_posterior(post, state, merit=merit, n_draws=100)
    assert tree["posterior"].dataset.sizes["group"] == 2  # groups from the policy state's membership
    assert dg.posterior_state(state) is state.stats



class _Carrier(NamedTuple):
    """A policy state of some other policy that declares the PosteriorCarrier protocol."""

    inner: Any

    def posterior_state(self):
        return self.inner

    def arm_groups(self):
        return np.array([0, 1, 1])


def test_every_posterior_family_through_the_protocol(merit):
    """Diagnostics use only the posterior protocol: a group-bias posterior's draws are named by its
    dims (groups from its params), a linear one's theta by feature, and any policy state that
    declares the carrier protocol is unwrapped."""
    post = bf.posteriors.group_bias_posterior([0, 0, 1, 1], 2)
    rng = np.random.default_rng(0)
    state = gb.fit_group_bias(post, rng.integers(0, 4, 30), rng.normal(size=(30, 2)), rng.normal(size=30))
    tree = dg.from_posterior(post, state, n_draws=48)
    ds = tree["posterior"].dataset
    assert ds["beta"].dims == ("chain", "draw", "arm", "feature")
    assert ds["psi"].dims == ("chain", "draw", "group", "feature") and ds["beta_bar"].dims[-1] == "feature"
    assert ds.sizes["group"] == 2 and ds.sizes["arm"] == 4 and (ds.sizes["chain"], ds.sizes["draw"]) == (4, 12)
    assert tree.attrs["source"] == "exact" and tree.attrs["posterior"] == "group_bias_posterior"
    np.testing.assert_array_equal(ds["psi"].values[:, :, 0], 0.0)  # the reference group has no bias
    var = post.variance(state)
    assert var.beta.shape == (4, 2) and np.all(np.asarray(var.beta) > 0)
    np.testing.assert_allclose(np.asarray(var.psi[1]), np.diagonal(np.asarray(post.psi_cov(state)[1])), rtol=1e-5)
    lin = linear_known_variance()
    lin_state = fit_linear(lin, rng.normal(size=(20, 3)), rng.normal(size=20))
    assert dg.from_posterior(lin, lin_state, n_draws=20)["posterior"].dataset["theta"].dims[-1] == "feature"
    beta = bf.beta_bernoulli()
    carried = _Carrier(beta.init(3))
    assert isinstance(carried, dg.PosteriorCarrier) and not isinstance(beta.init(3), dg.PosteriorCarrier)
    assert dg.posterior_state(carried) is carried.inner
    tree = dg.from_posterior(beta, carried, merit=merit, n_draws=20)
    assert tree["posterior"].dataset.sizes["group"] == 2
    with pytest.raises(TypeError, match="posterior family"):
        dg.posterior_draws(object(), carried.inner)


@pytest.mark.slow
def test_yeast_notebook_code_cells_run(tmp_path, monkeypatch):
    """The code cells of docs/notebooks/fairx_yeast_diagnostics.md, run in order in one namespace
    (what a kernel does; jupytext/nbclient are not dependencies). Needs the yeast data."""
    import ast
    import re
    from pathlib import Path

    from bayesfair import datasets

    try:
        datasets.load_yeast()
    except Exception as exc:  # no cached data and no network
        pytest.skip(f"yeast data not available: {exc}")
    monkeypatch.chdir(tmp_path)
    src = (Path(__file__).resolve().parents[1] / "docs" / "notebooks" / "fairx_yeast_diagnostics.md").read_text()
    cells = re.findall(r"```\{code-cell\} ipython3\n(.*?)```", src, re.S)
    assert len(cells) >= 6
    namespace: dict = {}
    for i, cell in enumerate(cells):
        exec(compile(ast.parse(cell), f"cell {i}", "exec"), namespace)
    assert "sample_stats" in namespace["htree"].children
    plotting.pyplot().close("all")


def test_exact_draw_trees_work_with_arviz_multichain_functions(merit):
    """A conjugate state's tree (and its model-checking groups) holds the independent exact draws
    as 4 chains, so ArviZ's own az.summary gives a finite R-hat near 1 without a warning and
    az.plot_rank draws; the draws are the one-chain draws reshaped (same numbers, same means).

    Calibration: for 20,000 sets of 4 x 250 independent draws ArviZ's rank-normalized R-hat had a
    maximum of 1.0145 (P(>= 1.01) = 0.2%, none >= 1.02), so the bound 1.02 over the tree's
    18 variables fails by chance with probability < 1e-3; the bulk ESS of independent draws is
    about n (the bound n / 2 is far below it)."""
    import warnings

    import arviz as az

    post = bf.beta_bernoulli()
    state = fit(post, K, ARMS, REWARDS)
    tree = dg.from_posterior(post, state, merit=merit, n_draws=1000, key=2, group_of_arm=LABELS, exposure=EXPOSURE)
    ds = tree["posterior"].dataset
    assert (ds.sizes["chain"], ds.sizes["draw"]) == (4, 250)
    one, _, _ = dg.posterior_draws(post, state, key=2, n_draws=1000, chains=1)
    np.testing.assert_array_equal(ds["mu"].values.reshape(1000, K), one["mu"][0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        table = az.summary(tree, round_to="none")
    assert np.isfinite(table["r_hat"]).all() and table["r_hat"].max() < 1.02, table["r_hat"].max()
    assert table["ess_bulk"].min() > 500
    pc = az.plot_rank(tree, var_names=["mu", "pi_star"], backend="matplotlib")
    assert pc is not None
    checked = dg.from_posterior(post, state, merit=merit, n_draws=400, observations={"arm": ARMS, "reward": REWARDS})
    for group in ("posterior", "prior", "log_likelihood", "posterior_predictive", "prior_predictive"):
        assert checked[group].dataset.sizes["chain"] == 4 and checked[group].dataset.sizes["draw"] == 100, group
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert np.isfinite(az.summary(checked, var_names=["mu"], round_to="none")["r_hat"]).all()
    az.plot_rank(checked, var_names=["mu"], backend="matplotlib")
    with pytest.raises(ValueError, match="n_draws=1001 must be a multiple of chains=4"):
        dg.from_posterior(post, state, merit=merit, n_draws=1001)
    assert dg.from_posterior(post, state, n_draws=1001, chains=1)["posterior"].dataset.sizes["chain"] == 1
    plotting.pyplot().close("all")
