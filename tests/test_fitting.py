"""bayesfair.inference.fitting.fit (the one NUTS entry point) and bayesfair.inference.fit_tree (its ArviZ DataTree).

- the verdict: a deliberately tiny budget (10 warm-up + 10 draws) is reported NOT converged with a
  RuntimeWarning naming variables and remedies; a normal fit is converged; synthetic frozen chains
  (one chain that never moves, one with a tiny step size) are caught even when nothing diverged;
- float64 is scoped: the draws are float64 and JAX's global x64 flag is unchanged afterwards;
- the centred / non-centred rule follows the information ratio it documents;
- the marginal form (the Gaussian default): its log marginal likelihood equals the multivariate
  normal density of y computed directly, its conditional draws have exactly the conjugate
  posterior's mean and covariance, and NUTS with fixed scales reproduces the conjugate posterior;
- the tree has every group ArviZ's model checking needs, with one observation dim; az.loo,
  az.compare (with vs without psi), plot_ppc_dist, plot_prior_posterior and plot_energy run on it;
  the pointwise log-likelihood sums, per draw, to the sufficient-statistics total (float64), and
  for the Bernoulli / binomial likelihoods equals NumPyro's own per-row log-likelihood;
- the other NumPyro models of the package (hierarchical logit-normal, logistic) go through fit and
  arviz_base.from_numpyro(fit.mcmc);
- bad input raises errors naming the field and the allowed range.
"""

import functools
import warnings

import jax
import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from bayesfair.inference import fitting  # noqa: E402
from bayesfair.posteriors import group_bias as gb  # noqa: E402

GROUPS = np.array([0, 0, 0, 1, 1, 1])


def _data(rng, n_obs=240, d=2, shift=0.8, noise=0.6):
    arms = rng.integers(0, GROUPS.size, n_obs)
    X = np.c_[rng.normal(size=(n_obs, d - 1)), np.ones(n_obs)]
    coef = rng.normal(size=(GROUPS.size, d)) + shift * (GROUPS[:, None] == 1)
    eta = np.sum(X * coef[arms], 1)
    return arms, X, eta, eta + noise * rng.normal(size=n_obs)


@pytest.fixture(scope="module")
def gaussian():
    """A normal fit (s fixed: one non-reference group's 2 psi coordinates say little about s)
    and the same data without psi."""
    arms, X, _, y = _data(np.random.default_rng(3))
    data = fitting.group_bias_data(arms, X, y, GROUPS, group_names=["ref", "sens"], feature_names=["x", "intercept"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with_psi = fitting.fit(data, s=1.0, num_warmup=500, num_samples=500, seed=1)
    without = fitting.fit(data, group_bias=False, num_warmup=300, num_samples=300, seed=2, warn=False)
    return data, with_psi, without


def test_tiny_budget_is_not_converged_and_warns(gaussian, monkeypatch):
    data, ok, _ = gaussian
    assert ok.converged and ok.convergence.divergences == 0 and ok.convergence.max_rhat < 1.01
    assert ok.convergence.min_ess_bulk >= 400 and ok.convergence.min_ess_tail >= 400
    assert ok.samples["beta"].shape[:2] == (4, 500)  # 4 chains by default
    # the sampling runs inside _compile.cache_small_programs (numpyro's op-by-op initialization
    # then goes to the persistent cache; a new process's fit ~2x faster)
    blocks, real = [], fitting.cache_small_programs
    monkeypatch.setattr(fitting, "cache_small_programs", lambda: (blocks.append(1), real())[1])
    with pytest.warns(RuntimeWarning, match=r"NOT converged.*failing variables: .*(beta|tau|sigma).*try: more warm-up"):
        bad = fitting.fit(data, s=1.0, num_warmup=10, num_samples=10, seed=1)
    assert not bad.converged and bad.convergence.failing
    assert blocks == [1]


def _direct_design(arms, X, groups, group_bias):
    """The full design matrix of theta = (beta_bar, beta_1..n, psi) and the prior's (mean, cov)."""
    n, d = groups.size, X.shape[1]
    m = int(groups.max()) + 1
    blocks = 1 + n + (m - 1 if group_bias else 0)
    Z = np.zeros((arms.size, blocks * d))
    for row, (a, x) in enumerate(zip(arms, X, strict=True)):
        Z[row, (1 + a) * d:(2 + a) * d] = x
        if group_bias and groups[a] > 0:
            Z[row, (n + groups[a]) * d:(n + groups[a] + 1) * d] = x
    return Z, blocks


@pytest.mark.parametrize("group_bias", [True, False])
def test_marginal_form_is_the_exact_integral_and_conditional(group_bias):
    """log p(y | tau, s, sigma) by the collapsed algebra == the N(Z mu0, Z C Z' + sigma^2 I) density
    of y; the draw map z -> theta is affine with the conjugate posterior's mean and covariance."""
    from scipy.stats import multivariate_normal

    from bayesfair.posteriors._group_bias_algebra import marginal_draw, marginal_gaussian

    rng = np.random.default_rng(11)
    groups = np.array([0, 0, 1, 1, 2])
    n, d, N = groups.size, 3, 60
    for _ in range(3):
        arms = rng.integers(0, n, N)
        X = rng.normal(size=(N, d))
        y = rng.normal(size=N) * rng.uniform(0.5, 3) + rng.normal()
        tau, s, sigma, m0, sd = rng.uniform(0.1, 2, 4).tolist() + [rng.uniform(1, 5)]
        Z, blocks = _direct_design(arms, X, groups, group_bias)
        T = np.eye(blocks * d)
        for i in range(n):
            T[(1 + i) * d:(2 + i) * d, :d] = np.eye(d)
        prior_sd = np.r_[np.full(d, sd), np.full(n * d, tau), np.full((blocks - 1 - n) * d, s)]
        C = T @ np.diag(prior_sd**2) @ T.T
        mu0 = T @ np.r_[np.full(d, m0), np.zeros((blocks - 1) * d)]
        direct = multivariate_normal(Z @ mu0, Z @ C @ Z.T + sigma**2 * np.eye(N)).logpdf(y)
        with jax.enable_x64(True):
            stats = gb.sufficient_stats(arms, X, y, n)
            mg = marginal_gaussian(stats, groups, reference=0, tau=tau, s=s, sigma=sigma, prior_mean=m0,
                                   prior_sd=sd, group_bias=group_bias)
            p = mg.phi_mean.size

            def theta(z, mg=mg, tau=tau, p=p):
                bb, beta, psi = marginal_draw(mg, tau, z[:p], z[p:].reshape(n, d))
                return jax.numpy.concatenate([bb, beta.ravel(), psi.ravel()])

            z0 = jax.numpy.zeros(p + n * d)
            mean, jac = np.asarray(theta(z0)), np.asarray(jax.jacobian(theta)(z0))
        np.testing.assert_allclose(float(mg.log_marginal), direct, rtol=1e-10)
        prec = np.linalg.inv(C) + Z.T @ Z / sigma**2
        cov = np.linalg.inv(prec)
        np.testing.assert_allclose(mean, cov @ (np.linalg.solve(C, mu0) + Z.T @ y / sigma**2), atol=1e-9)
        np.testing.assert_allclose(jac @ jac.T, cov, atol=1e-9)


def test_marginal_nuts_with_fixed_scales_is_the_conjugate_posterior():
    """Scales fixed: the marginal form's draws (Gibbs-exact N(0, I) sites) vs the float64 conjugate
    posterior, per coordinate (mean and sd, Z = 4.5 standard errors of 4000 independent draws)."""
    groups = (0, 0, 1, 1)
    hyper = dict(tau=0.8, s=1.5, sigma=0.6)
    rng = np.random.default_rng(21)
    arms = rng.integers(0, 4, 50)
    X = np.c_[rng.normal(size=(50, 1)), np.ones(50)]
    y = rng.normal(size=50)
    post = gb.group_bias_posterior(groups, 2, **hyper, prior_mean=0.0, prior_sd=10.0)
    fit = fitting.fit(fitting.group_bias_data(arms, X, y, groups), **hyper, num_warmup=100, num_samples=1000,
                      seed=3, warn=False)
    assert fit.config["parametrization"]["marginal"]
    s = fit.samples
    draws = np.concatenate([s["beta_bar"].reshape(-1, 2), s["beta"].reshape(-1, 8), s["psi"].reshape(-1, 2)], 1)
    mean, cov = gb.batch_group_bias(post, arms, X, y)
    sd = np.sqrt(np.diag(cov))
    k = draws.shape[0]
    assert np.all(np.abs(draws.mean(0) - mean) < 4.5 * sd / np.sqrt(k))
    assert np.all(np.abs(draws.std(0, ddof=1) - sd) < 4.5 * sd / np.sqrt(2 * k))


def test_frozen_chains_are_caught_without_divergences():
    rng = np.random.default_rng(0)
    good = rng.normal(size=(4, 400, 3))
    stuck = good.copy()
    stuck[2] = stuck[2, :1]  # chain 2 never moves
    div = np.zeros((4, 400), bool)
    steps, acc = np.full(4, 0.3), np.full((4, 400), 0.9)
    ok = fitting.check_convergence({"a": good}, diverging=div, step_size=steps, accept_prob=acc)
    assert ok.converged and ok.frozen_chains == ()
    v = fitting.check_convergence({"a": stuck}, diverging=div, step_size=steps, accept_prob=acc)
    assert not v.converged and v.frozen_chains == (2,) and v.divergences == 0
    tiny = fitting.check_convergence({"a": good}, diverging=div, step_size=[0.3, 0.3, 1e-6, 0.3], accept_prob=acc)
    assert not tiny.converged and tiny.frozen_chains == (2,)
    one = fitting.check_convergence({"a": good[:1]}, diverging=div[:1])
    assert not one.converged and np.isnan(one.max_rhat)  # 1 chain: no R-hat, never "converged"
    # non-finite draws are not a "constant" coordinate to skip: not converged, named
    for where in ((slice(None), slice(None), 1), (1, 7, 0)):  # a coordinate NaN throughout; one NaN draw
        bad = good.copy()
        bad[where] = np.nan
        v = fitting.check_convergence({"a": good, "b": bad}, diverging=div, step_size=steps, accept_prob=acc)
        assert not v.converged and v.failing == ("b",) and "non-finite (NaN or inf) draws in b" in v.message


def test_float64_is_scoped(gaussian):
    _, fit, _ = gaussian
    assert fit.samples["beta"].dtype == np.float64 and fit.config["x64"] is True
    assert not jax.config.jax_enable_x64  # the user's global setting is untouched


def test_parametrization_rule_follows_the_information_ratio():
    rng = np.random.default_rng(4)
    arms, X, eta, _ = _data(rng, n_obs=3000)
    strong = fitting.group_bias_data(arms, X, eta + 0.01 * rng.normal(size=eta.size), GROUPS)
    rule = fitting.choose_parametrization(strong)
    assert not rule["noncentered_beta"] and rule["beta_ratio"] >= 1.0
    arms, X, eta, _ = _data(rng, n_obs=24)
    weak = fitting.group_bias_data(arms, X, eta + 5.0 * rng.normal(size=eta.size), GROUPS)
    rule = fitting.choose_parametrization(weak, tau=0.05, s=0.01)
    assert rule["noncentered_beta"] and rule["noncentered_psi"] and rule["beta_ratio"] < 1.0
    both = fitting._parametrization({"beta": "centered", "psi": "noncentered"}, weak)
    assert not both["noncentered_beta"] and both["noncentered_psi"]


def test_tree_groups_and_arviz_model_checking(gaussian):
    import arviz as az

    data, fit, without = gaussian
    tree = fit.tree(prior_draws=200)
    for g in ("posterior", "sample_stats", "log_likelihood", "observed_data", "constant_data", "prior",
              "prior_predictive", "posterior_predictive"):
        assert g in tree.children, g
    n = data.y.size
    assert tree["log_likelihood"]["y"].dims == ("chain", "draw", "obs") and tree["log_likelihood"]["y"].shape[2] == n
    assert tree["posterior_predictive"]["y"].dims == ("chain", "draw", "obs")
    assert tree["observed_data"]["y"].dims == ("obs",) and tree["constant_data"]["X"].dims == ("obs", "feature")
    assert {"diverging", "energy", "tree_depth", "step_size"} <= set(tree["sample_stats"].data_vars)
    assert list(tree["posterior"]["group"].values) == ["sens"] and "psi" in tree["prior"].data_vars
    t0 = without.tree(prior_draws=100)
    assert "psi" not in t0["posterior"].data_vars
    loo = az.loo(tree)
    assert np.isfinite(loo.elpd)
    table = az.compare({"with psi": tree, "without psi": t0})
    assert set(table.index) == {"with psi", "without psi"} and "elpd_diff" in table.columns
    az.plot_ppc_dist(tree, num_samples=20)
    az.plot_prior_posterior(tree, var_names=["psi", "tau"])
    az.plot_energy(tree)
    matplotlib.pyplot.close("all")


def test_pointwise_log_likelihood_sums_to_the_sufficient_statistics_total(gaussian):
    """Per draw: sum over rows of the tree's log_likelihood == the sufficient-statistics factor."""
    from numpyro.handlers import substitute, trace

    data, fit, _ = gaussian
    assert fit.config["sufficient"]
    tree = fit.tree(prior_draws=10)
    ll = tree["log_likelihood"]["y"].values.sum(-1)  # [chain, draw]
    assert fit.config["parametrization"]["marginal"]  # the Gaussian default: coefficients drawn exactly
    # the check evaluates the centred per-arm sufficient-statistics likelihood at the draws
    static = dict(fit.model.keywords, marginal=False, noncentered_beta=False, noncentered_psi=False)
    stats = fit.model_kwargs["stats"]
    with jax.enable_x64(True):
        for c, k in [(0, 0), (1, 17), (3, 499)]:
            sampled = ["beta_bar", "tau", "sigma", "beta", "psi"]
            params = {name: fit.samples[name][c, k] for name in sampled if name in fit.samples}
            tr = trace(substitute(functools.partial(fitting._group_bias_site_model, **static), params)).get_trace(
                fit.model_args[0], fit.model_args[1], fit.model_args[2], stats)
            total = float(tr["y"]["fn"].log_prob(tr["y"]["value"]))
            np.testing.assert_allclose(ll[c, k], total, rtol=1e-10, atol=1e-8)


@pytest.mark.parametrize("likelihood", ["bernoulli", "binomial"])
def test_glm_likelihoods_fit_and_match_numpyro_pointwise(likelihood):
    from numpyro.infer import log_likelihood

    rng = np.random.default_rng(7)
    arms, X, eta, _ = _data(rng, n_obs=200, shift=0.5)
    p = 1 / (1 + np.exp(-eta))
    y = (rng.random(p.size) < p).astype(float) if likelihood == "bernoulli" else rng.binomial(9, p).astype(float)
    data = fitting.group_bias_data(arms, X, y, GROUPS)
    fit = fitting.fit(data, likelihood=likelihood, s=1.0, num_warmup=150, num_samples=100, num_chains=2, warn=False)
    assert "sigma" not in fit.samples and not fit.config["sufficient"]
    tree = fit.tree(prior_draws=20)
    ours = tree["log_likelihood"]["y"].values
    with jax.enable_x64(True):
        theirs = log_likelihood(fit.model, {k: v.reshape(-1, *v.shape[2:]) for k, v in fit.samples.items()},
                                *fit.model_args)["y"]
    np.testing.assert_allclose(ours.reshape(-1, ours.shape[-1]), np.asarray(theirs), rtol=1e-9, atol=1e-9)
    assert set(np.unique(tree["posterior_predictive"]["y"].values)) <= set(range(10 if likelihood == "binomial" else 2))


def test_other_numpyro_models_of_the_package():
    import arviz_base

    from bayesfair.posteriors.hierarchical import hierarchical_model
    from bayesfair.posteriors.mcmc import logistic_linear_mcmc

    rng = np.random.default_rng(2)
    arms = rng.integers(0, 4, 120).astype(np.int32)
    rewards = (rng.random(120) < 0.3 + 0.1 * arms).astype(np.float32)
    h = fitting.fit(hierarchical_model([0, 0, 1, 1]), arms, rewards, n_arms=4, num_warmup=150, num_samples=100,
                    num_chains=2, warn=False)
    X = np.c_[rng.normal(size=(120, 1)), np.ones(120)]
    y = (rng.random(120) < 1 / (1 + np.exp(-X @ np.array([1.0, -0.5])))).astype(float)
    lg = fitting.fit(logistic_linear_mcmc().model, X, y, num_warmup=150, num_samples=100, num_chains=2, warn=False)
    assert lg.samples["theta"].shape == (2, 100, 2) and lg.data is None
    # the reference model checks concrete observations: JAX's gather would clamp arm 11 to arm 3
    with pytest.raises(ValueError, match=r"arms must be in \[0, 3\].*observation 0 has 11"):
        fitting.fit(hierarchical_model([0, 0, 1, 1]), np.r_[11, arms[1:]].astype(np.int32), rewards, n_arms=4)
    with pytest.raises(ValueError, match="rewards must be 0 or 1"):
        fitting.fit(hierarchical_model([0, 0, 1, 1]), arms, np.where(arms == 2, 5.0, rewards), n_arms=4)
    for f in (h, lg):
        tree = arviz_base.from_numpyro(f.mcmc)
        assert "posterior" in tree.children
        full = f.tree(prior_draws=20)
        assert {"posterior", "log_likelihood", "prior", "sample_stats"} <= set(full.children)
        assert "energy" in full["sample_stats"].data_vars


def test_bad_inputs_name_the_field():
    rng = np.random.default_rng(1)
    arms, X, _, y = _data(rng, n_obs=30)
    data = fitting.group_bias_data(arms, X, y, GROUPS)
    with pytest.raises(ValueError, match=r"likelihood must be one of"):
        fitting.fit(data, likelihood="poisson")
    with pytest.raises(ValueError, match=r"y must be integers in \[0, 1\] for likelihood='bernoulli'; row"):
        fitting.fit(data, likelihood="bernoulli")
    with pytest.raises(ValueError, match=r"n_trials must be an integer >= 1"):
        fitting.fit(data, likelihood="binomial", n_trials=0)
    with pytest.raises(ValueError, match="sufficient=True is only for likelihood='gaussian'"):
        fitting.fit(fitting.group_bias_data(arms, X, (y > 0).astype(float), GROUPS), likelihood="bernoulli",
                    sufficient=True)
    with pytest.raises(ValueError, match="parametrization must be"):
        fitting.fit(data, parametrization="sideways")
    with pytest.raises(ValueError, match="num_chains must be"):
        fitting.fit(data, num_chains=0)
    with pytest.raises(ValueError, match=r"target_accept must be in \(0, 1\)"):
        fitting.fit(data, target_accept=1.0)
    with pytest.raises(TypeError, match="target must be GroupBiasData"):
        fitting.fit((arms, X, y))
    # a GroupBiasData built or _replace'd without group_bias_data's checks is checked by fit: an arm
    # index out of range was dropped by the sums, NaN features went through to NUTS
    with pytest.raises(ValueError, match=r"arms must be in \[0, 5\].*row 0 has 9"):
        fitting.fit(data._replace(arms=np.r_[9, data.arms[1:]].astype(np.int32)))
    with pytest.raises(ValueError, match="X must be finite"):
        fitting.fit(data._replace(X=np.where(np.arange(X.size).reshape(X.shape) == 3, np.nan, data.X)))
    with pytest.raises(ValueError, match="reference"):
        fitting.fit(data._replace(reference=5))
    with pytest.raises(ValueError, match=r"group_names must be distinct .*\['g'\]"):
        fitting.group_bias_data(arms, X, y, GROUPS, group_names=["g", "g"])
    with pytest.raises(ValueError, match=r"arm_names must be distinct"):
        fitting.group_bias_data(arms, X, y, GROUPS, arm_names=list("aabcde"))
    with pytest.raises(ValueError, match=r"priors.prior_mean must be finite"):
        fitting.fit(data, priors=gb.GroupBiasPriors(prior_mean=float("nan")))
    with pytest.raises(ValueError, match=r"priors.prior_mean must be a number or have one entry per feature \(d = 2\)"):
        fitting.fit(data, priors=gb.GroupBiasPriors(prior_mean=[1.0, 2.0, 3.0]))
    with pytest.raises(TypeError, match="fit must be a bayesfair.inference.fitting.Fit"):
        from bayesfair.inference.fit_tree import fit_tree
        fit_tree({"samples": 1})


def test_one_set_of_default_priors():
    import inspect

    from bayesfair.policies.biased import group_fair_ts

    d = gb.DEFAULT_PRIORS
    assert (d.tau, d.s, d.sigma) == (3.0, 10.0, 1.0)  # GroupFair-TS's study values; sigma = 1 is Eq. 2
    post = gb.group_bias_posterior([0, 1], 1)
    assert (post.params["tau"], post.params["s"], post.params["sigma"], post.params["prior_sd"]) == \
        (d.tau, d.s, d.sigma, d.prior_sd)
    ts = inspect.signature(group_fair_ts).parameters
    assert (ts["tau"].default, ts["s"].default, ts["sigma"].default, ts["prior_sd"].default) == \
        (d.tau, d.s, d.sigma, d.prior_sd)
    model = inspect.signature(gb.group_bias_model).parameters
    assert (model["tau_scale"].default, model["s_scale"].default, model["sigma_scale"].default) == \
        (d.tau, d.s, d.sigma)


def test_coefficient_form_with_fixed_scales_is_the_conjugate_posterior():
    """The coefficient form (NUTS on c_i = beta_i + psi_g(i), (beta_bar, psi) drawn given c), scales
    fixed, Gaussian likelihood row by row: its draws vs the float64 conjugate posterior, per
    coordinate (mean and sd within 4.5 ESS-based standard errors)."""
    from numpyro.diagnostics import effective_sample_size

    groups = (0, 0, 1, 1)
    hyper = dict(tau=0.8, s=1.5, sigma=0.6)
    rng = np.random.default_rng(5)
    arms = rng.integers(0, 4, 60)
    X = np.c_[rng.normal(size=(60, 1)), np.ones(60)]
    y = rng.normal(size=60) + 0.5
    post = gb.group_bias_posterior(groups, 2, **hyper, prior_mean=0.0, prior_sd=10.0)
    fit = fitting.fit(fitting.group_bias_data(arms, X, y, groups), **hyper, sufficient=False,
                      parametrization="coefficients", num_warmup=300, num_samples=1000, seed=4, warn=False)
    assert fit.config["parametrization"]["coefficients"] and "coef_t" in fit.samples
    s = fit.samples
    draws = np.concatenate([s["beta_bar"], s["beta"].reshape(4, 1000, 8), s["psi"].reshape(4, 1000, 2)], -1)
    ess = np.asarray(effective_sample_size(draws))
    assert np.all(ess > 400), ess
    mean, cov = gb.batch_group_bias(post, arms, X, y)
    sd = np.sqrt(np.diag(cov))
    flat = draws.reshape(-1, draws.shape[-1])
    assert np.all(np.abs(flat.mean(0) - mean) < 4.5 * sd / np.sqrt(ess))
    assert np.all(np.abs(flat.std(0, ddof=1) - sd) < 4.5 * sd / np.sqrt(2 * ess))


def test_glm_auto_rule_picks_the_coefficient_form_when_the_data_are_strong():
    rng = np.random.default_rng(8)
    arms, X, eta, _ = _data(rng, n_obs=1200, shift=0.5)
    y = (rng.random(eta.size) < 1 / (1 + np.exp(-eta))).astype(float)
    data = fitting.group_bias_data(arms, X, y, GROUPS)
    param = fitting._parametrization("auto", data, likelihood="bernoulli")
    assert param["coefficients"] and not param["noncentered_beta"]
    weak = fitting.group_bias_data(arms[:12], X[:12], y[:12], GROUPS)
    assert not fitting._parametrization("auto", weak, likelihood="bernoulli", tau=0.05)["coefficients"]
    with pytest.raises(ValueError, match="parametrization must be"):
        fitting._parametrization("coefficient", data, likelihood="bernoulli")


def test_repeated_fits_clear_compiled_code_before_the_mapping_limit(monkeypatch):
    """Each MCMC.run compiles a new loop and JAX keeps it: near vm.max_map_count the fit clears
    JAX's caches (once, loudly) instead of letting LLVM abort the process."""
    fitting._MCMC_CACHE["sentinel"] = object()
    monkeypatch.setattr(fitting, "_memory_maps", lambda: (50_000, 65_530))
    monkeypatch.setattr(fitting, "_MAPS_WARNED", [False])
    with pytest.warns(fitting.CompiledCodeWarning,
                      match=r"50,000 memory mappings .*vm.max_map_count = 65,530.*jax.clear_caches"):
        fitting._bound_compiled_code()
    assert "sentinel" not in fitting._MCMC_CACHE
    assert not issubclass(fitting.CompiledCodeWarning, RuntimeWarning)  # a fit's "not converged" category
    with warnings.catch_warnings():
        warnings.simplefilter("error", fitting.CompiledCodeWarning)
        fitting._bound_compiled_code()  # the warning is shown once
    monkeypatch.setattr(fitting, "_memory_maps", lambda: (1_000, 65_530))
    fitting._MCMC_CACHE["sentinel"] = object()
    fitting._bound_compiled_code()
    assert "sentinel" in fitting._MCMC_CACHE
    fitting._MCMC_CACHE.pop("sentinel")
    used, limit = fitting._memory_maps()
    assert limit == 0 or 0 < used < limit


def test_a_cache_key_reuses_the_sampler_with_the_same_numbers():
    """``fit(model, ..., cache_key=k)``: the second fit with new outcomes reuses the first's MCMC
    object (compiled once, the data as inputs) and gives exactly the draws of a fit without the key
    (same seed, same data); the group-bias data path refuses a key (it keys its sampler itself)."""
    from bayesfair.posteriors.mcmc import logistic_linear_mcmc

    rng = np.random.default_rng(4)
    X = np.c_[rng.normal(size=(80, 1)), np.ones(80)]
    y1, y2 = ((rng.random((2, 80)) < 1 / (1 + np.exp(-X @ np.array([1.0, -0.5])))).astype(float))
    model = logistic_linear_mcmc().model
    kw = dict(num_warmup=60, num_samples=40, num_chains=2, warn=False)
    first = fitting.fit(model, X, y1, cache_key="test-logistic", **kw)
    second = fitting.fit(model, X, y2, seed=3, cache_key="test-logistic", **kw)
    assert second.mcmc is first.mcmc
    plain = fitting.fit(model, X, y2, seed=3, **kw)
    assert plain.mcmc is not first.mcmc
    np.testing.assert_allclose(second.samples["theta"], plain.samples["theta"], rtol=1e-10)
    arms, Xg, _, yg = _data(np.random.default_rng(0), n_obs=40)
    with pytest.raises(TypeError, match="cache_key nor advice"):
        fitting.fit(fitting.group_bias_data(arms, Xg, yg, GROUPS), cache_key="x")
    with pytest.raises(TypeError, match="advice='more warm-up'"):
        fitting.fit(fitting.group_bias_data(arms, Xg, yg, GROUPS), advice="more warm-up")
