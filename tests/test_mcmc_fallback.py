"""Validation of the MCMC fallback (bayesfair.posteriors.mcmc) against the conjugate path.

Posterior agreement: the Beta-Bernoulli model run through the fallback is compared with the
closed form at every refresh point. Tolerance: Z standard errors of the Monte Carlo estimate,
from the effective sample size of the stored draws (mean: sd / sqrt(ESS); sd:
sd sqrt((kurtosis - 1) / (4 ESS)), kurtosis <= 4 for these Beta posteriors). With Z = 4.5 each
comparison fails with probability ~7e-6 for a correct sampler; the default tests make
4 x 3 x 3 x 2 + 2 x 2 x 3 x 2 = 96 comparisons (false-failure rate < 1e-3).

Policy agreement: FairX-TS with the fallback (refresh every round, so it plays the same policy up
to MCMC error) and with the conjugate posterior are simulated over independent runs; their mean
final fairness and reward regrets must agree within Z_POLICY = 4 standard errors of the
difference (two-sided, ~6e-5 per comparison).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.diagnostics import effective_sample_size

import bayesfair as bf
from bayesfair.posteriors import Outcome, fit
from bayesfair.posteriors.hierarchical import hierarchical_logit_normal, hierarchical_model
from bayesfair.posteriors.mcmc import (
    MCMCState,
    NUTSSettings,
    arm_buffer,
    context_buffer,
    logistic_linear_mcmc,
    logistic_merit,
    mcmc_beta_bernoulli,
    mcmc_posterior,
    refresh,
)

K = 3
Z = 4.5
Z_POLICY = 4.0
KURTOSIS = 4.0


def _bernoulli_data(rng, n_sets, n_obs):
    arms = rng.integers(0, K, (n_sets, n_obs)).astype(np.int32)
    p = rng.uniform(0.1, 0.9, (n_sets, K))
    rewards = (rng.random((n_sets, n_obs)) < np.take_along_axis(p, arms, axis=1)).astype(np.float32)
    return arms, rewards


def _check_moments(draws, exact_mean, exact_sd, what):
    """draws [chain, draw, K] against the exact moments, ESS-calibrated."""
    draws = np.asarray(draws, np.float64)
    ess = np.asarray(effective_sample_size(draws))
    flat = draws.reshape(-1, draws.shape[-1])
    mean, sd = flat.mean(axis=0), flat.std(axis=0, ddof=1)
    assert np.all(ess > 100), f"{what}: the refresh mixed poorly, ESS {ess}"
    se_mean = exact_sd / np.sqrt(ess)
    se_sd = exact_sd * np.sqrt((KURTOSIS - 1.0) / (4.0 * ess))
    assert np.all(np.abs(mean - exact_mean) < Z * se_mean), f"{what}: means {mean} vs {exact_mean} (se {se_mean})"
    assert np.all(np.abs(sd - exact_sd) < Z * se_sd), f"{what}: sds {sd} vs {exact_sd} (se {se_sd})"


def test_refreshed_posterior_matches_conjugate_at_every_refresh_point():
    b, n_refresh, n_sets = 20, 3, 4
    post = mcmc_beta_bernoulli(2.0, 1.5, refresh_every=b, num_warmup=100, num_samples=200, num_chains=2, seed=3)
    conj = bf.beta_bernoulli(2.0, 1.5)
    arms, rewards = _bernoulli_data(np.random.default_rng(11), n_sets, b * n_refresh)

    def history(a, r):
        def step(state, ar):
            state = post.update(state, Outcome(ar[1], arm=ar[0]))
            return state, state.samples["mu"]

        return jax.lax.scan(step, post.init(K), (a, r))

    final, mus = jax.jit(jax.vmap(history))(arms, rewards)
    assert np.all(np.asarray(final.refreshes) == n_refresh)
    assert np.all(np.asarray(final.n) == b * n_refresh)
    for i in range(n_sets):
        for j in range(1, n_refresh + 1):
            n = j * b
            state = fit(conj, K, arms[i, :n], rewards[i, :n])
            _check_moments(mus[i, n - 1], np.asarray(conj.mean(state)), np.sqrt(np.asarray(conj.variance(state))),
                           f"set {i}, refresh at n={n}")
    # warm-started refreshes stay healthy
    assert int(np.asarray(final.diverging).sum()) <= 2


def test_refresh_schedule_prior_draws_and_keys_on_the_generic_buffer_path():
    """The generic path (a masked ring buffer, per-observation Bernoulli likelihood): refreshes
    exactly on schedule under vmap, draws from the prior before, and agrees with the conjugate
    posterior at its refresh points."""
    post = mcmc_beta_bernoulli(1.0, 1.0, capacity=16, refresh_every=5, num_warmup=100, num_samples=200,
                               num_chains=2, seed=1)
    assert post.params["mcmc_refresh_every"] == 5
    assert post.params["history"] == "arm_buffer" and post.params["capacity"] == 16
    arms = jnp.asarray([0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1], jnp.int32)
    rewards = jnp.asarray([1, 0, 1, 1, 0, 1, 0, 0, 1, 1, 1], jnp.float32)

    def trace(a, r):
        def step(state, ar):
            state = post.update(state, Outcome(ar[1], arm=ar[0]))
            return state, (state.refreshes, state.samples["mu"], state.key)

        return jax.lax.scan(step, post.init(K), (a, r))

    # two runs with different data (vmapped, as in the simulator): the refresh runs exactly at
    # n % 5 == 0 in both, and only then
    final, (refreshes, mus, keys) = jax.jit(jax.vmap(trace))(jnp.stack([arms, arms[::-1]]),
                                                              jnp.stack([rewards, 1 - rewards]))
    refreshes, mus, keys = np.asarray(refreshes), np.asarray(mus), np.asarray(keys)
    np.testing.assert_array_equal(refreshes[0], [0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2])
    np.testing.assert_array_equal(refreshes[1], refreshes[0])
    prior = np.asarray(jax.jit(post.init, static_argnums=0)(K).samples["mu"])
    for r in range(2):
        for t in range(4):  # exact prior draws until the first refresh
            np.testing.assert_array_equal(mus[r, t], prior)
        assert not np.array_equal(mus[r, 4], prior)
        for t in range(5, 9):  # stored samples do not move between refreshes
            np.testing.assert_array_equal(mus[r, t], mus[r, 4])
        assert not np.array_equal(mus[r, 9], mus[r, 4])
        assert len({tuple(k) for k in keys[r]}) == keys.shape[1]  # the key moves with every observation
    assert not np.array_equal(mus[0, 4], mus[1, 4])  # different data, different posteriors and keys
    conj = bf.beta_bernoulli(1.0, 1.0)
    for r, (a, y) in enumerate([(arms, rewards), (arms[::-1], 1 - rewards)]):
        for n in (5, 10):
            exact = fit(conj, K, a[:n], y[:n])
            _check_moments(mus[r, n - 1], np.asarray(conj.mean(exact)), np.sqrt(np.asarray(conj.variance(exact))),
                           f"buffer run {r}, refresh at n={n}")
    # Thompson draws come from the stored samples
    st = jax.tree.map(lambda x: x[0], final)
    draws = np.asarray(jax.vmap(post.sample, in_axes=(0, None))(jax.random.split(jax.random.key(0), 50), st))
    stored = np.asarray(st.samples["mu"]).reshape(-1, K)
    assert all(any(np.array_equal(d, s) for s in stored) for d in draws)
    np.testing.assert_allclose(np.asarray(post.mean(st)), stored.mean(axis=0), rtol=1e-5)


def test_ring_buffer_keeps_the_last_capacity_observations():
    hist = arm_buffer(4)
    h = hist.init(K)
    for i in range(6):
        h = hist.append(h, jnp.int32(i % K), jnp.float32(i))
    args, kwargs, static = hist.model_inputs(h, K)
    np.testing.assert_array_equal(np.asarray(args[1]), [4, 5, 2, 3])
    assert bool(np.all(np.asarray(kwargs["mask"]))) and static == {"n_arms": K}
    h2 = hist.append(hist.init(K), jnp.int32(1), jnp.float32(1.0))
    np.testing.assert_array_equal(np.asarray(hist.model_inputs(h2, K)[1]["mask"]), [True, False, False, False])
    ch = context_buffer(2)
    c = ch.append(ch.init(3), jnp.ones(3), jnp.float32(1.0))
    assert c.x.shape == (2, 3) and int(c.count) == 1


def test_fairx_ts_regret_matches_conjugate_over_seeds():
    """Refreshing every round, the fallback is FairX-TS up to MCMC error: same regret distribution."""
    env = bf.bernoulli_arms(np.array([0.2, 0.5, 0.8]))
    merit = bf.merit.exponential(4.0)
    post = mcmc_beta_bernoulli(refresh_every=1, num_warmup=10, num_samples=10, num_chains=1, seed=2)
    pols = {"conjugate": bf.fairx_ts(bf.beta_bernoulli(), merit), "mcmc": bf.fairx_ts(post, merit)}
    runs, horizon = 24, 80
    ds = bf.simulate(7, env, pols, horizon, runs, merit=merit, chunk_size=40, checkpoints=[horizon])
    for metric in ("fairness_regret", "reward_regret"):
        v = ds[metric].isel(checkpoint=-1).values  # [policy, run]
        diff = v[1].mean() - v[0].mean()
        se = np.sqrt(v[0].var(ddof=1) / runs + v[1].var(ddof=1) / runs)
        assert abs(diff) < Z_POLICY * se, (
            f"{metric}: mcmc {v[1].mean():.3f} vs conjugate {v[0].mean():.3f} (se {se:.3f})")
    np.testing.assert_allclose(ds["exposure"].isel(checkpoint=-1).sum("arm").values, horizon, rtol=1e-5)


def test_settings_and_constructor_validation():
    with pytest.raises(ValueError, match="refresh_every"):
        mcmc_beta_bernoulli(refresh_every=0)
    with pytest.raises(TypeError, match="unknown MCMC setting"):
        mcmc_beta_bernoulli(num_warmups=10)
    with pytest.raises(ValueError, match="target_accept"):
        NUTSSettings.create(target_accept=1.0)
    with pytest.raises(ValueError, match="max_tree_depth"):
        NUTSSettings.create(max_tree_depth=20)
    with pytest.raises(ValueError, match="a0 and b0"):
        mcmc_beta_bernoulli(0.0, 1.0)
    with pytest.raises(TypeError, match="NumPyro model"):
        mcmc_posterior(3, history=arm_buffer(4))
    with pytest.raises(TypeError, match="History"):
        mcmc_posterior(hierarchical_model([0, 1]), history="buffer")
    with pytest.raises(ValueError, match="empty"):
        hierarchical_logit_normal([0, 2])
    with pytest.raises(ValueError, match="loc_scale"):
        hierarchical_logit_normal([0, 1], loc_scale=0.0)
    with pytest.raises(ValueError, match="capacity"):
        logistic_linear_mcmc(capacity=0)
    post = hierarchical_logit_normal([0, 0, 1], num_warmup=5, num_samples=4)
    with pytest.raises(ValueError, match="built for 3 arms"):
        post.init(4)
    with pytest.raises(TypeError, match="MCMC-fallback"):
        refresh(bf.beta_bernoulli(), bf.beta_bernoulli().init(3))


def test_hierarchical_posterior_plugs_into_fairx_ts_and_bf_ts():
    """Construction and one policy round, abstractly (shapes only: no NUTS compilation here)."""
    post = hierarchical_logit_normal([0, 0, 1, 1], refresh_every=10, num_warmup=5, num_samples=4, num_chains=2)
    env = bf.bernoulli_arms(np.array([0.2, 0.5, 0.55, 0.8]), groups=[0, 0, 1, 1])
    merit = bf.merit.exponential(4.0)
    for pol in (bf.fairx_ts(post, merit), bf.bf_ts([0.2, 0.2], merit, post)):
        def one(key, pol=pol):
            state = pol.init(key, env.spec)
            a, probs, _ = pol.select(key, state, env.step(key, env.reset(key), jnp.int32(1)).obs)
            return pol.update(state, None, a, jnp.float32(1.0)), probs

        state, probs = jax.eval_shape(one, jax.random.key(0))
        assert probs.shape == (4,)
        inner = state.stats if hasattr(state, "stats") else state
        assert isinstance(inner, MCMCState)
        assert inner.samples["mu"].shape == (2, 4, 4) and inner.samples["group_scale"].shape == (2, 4, 2)
    assert pol.params["posterior"]["name"] == "hierarchical_logit_normal"
    assert pol.params["posterior"]["group_of_arm"] == [0, 0, 1, 1]


def test_partial_centring_keeps_the_prior():
    """``centered="auto"`` changes only the coordinates NUTS moves in: with data that give the arms
    centring weights from 0.16 to 0.99, forward draws of the model's sites still have
    eps = (logit - group_loc) / group_scale ~ N(0, 1), uncorrelated with the group scale (20,000
    draws; mean, variance and correlation within 4.5 standard errors, per check a false-failure
    rate < 1e-5)."""
    from numpyro.handlers import seed, trace

    from bayesfair.posteriors.hierarchical import _centring_weights

    labels = np.array([0, 0, 1, 1])
    arms = np.repeat(np.arange(4), [1, 10, 40, 400]).astype(np.int32)
    rewards = (np.arange(arms.size) % 3 == 0).astype(np.float32)
    model = hierarchical_model(labels, centered="auto")
    trials = np.bincount(arms, minlength=4).astype(np.float32)
    successes = np.bincount(arms, weights=rewards, minlength=4).astype(np.float32)
    lam = np.asarray(_centring_weights(jnp.asarray(successes), jnp.asarray(trials), 1.0))
    assert lam.min() < 0.3 and lam.max() > 0.98

    def draw(key):
        tr = trace(seed(model, key)).get_trace(jnp.asarray(arms), jnp.asarray(rewards), n_arms=4)
        return tr["logit"]["value"], tr["group_loc"]["value"], tr["group_scale"]["value"]

    n = 20_000
    logit, m, s = (np.asarray(x, np.float64) for x in jax.jit(jax.vmap(draw))(jax.random.split(jax.random.key(0), n)))
    eps = (logit - m[:, labels]) / s[:, labels]
    assert np.all(np.abs(eps.mean(axis=0)) < Z / np.sqrt(n)), eps.mean(axis=0)
    assert np.all(np.abs(eps.var(axis=0) - 1.0) < Z * np.sqrt(2.0 / n)), eps.var(axis=0)
    corr = [np.corrcoef(eps[:, i], np.log(s[:, labels[i]]))[0, 1] for i in range(4)]
    assert np.all(np.abs(corr) < Z / np.sqrt(n)), corr


def test_logistic_merit_composes_with_sigmoid():
    m = bf.merit.exponential(3.0)
    lm = logistic_merit(m)
    z = jnp.linspace(-4, 4, 9)
    np.testing.assert_allclose(np.asarray(lm.fn(z)), np.exp(3.0 / (1 + np.exp(-np.asarray(z)))), rtol=1e-5)
    fair = bf.merit.fair_policy
    np.testing.assert_allclose(np.asarray(fair(lm, z)), np.asarray(fair(m, jax.nn.sigmoid(z))),
                               rtol=1e-5)
    assert lm.lipschitz == pytest.approx(m.lipschitz / 4)


# --------------------------------------------------------------------------- slow variants


def _numpyro_reference(model, args, kwargs, seed, num_samples=3000):
    from numpyro.infer import MCMC, NUTS

    mcmc = MCMC(NUTS(model), num_warmup=1000, num_samples=num_samples, num_chains=1, progress_bar=False)
    mcmc.run(jax.random.key(seed), *args, **kwargs)
    return {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}


@pytest.mark.slow
def test_hierarchical_refresh_matches_numpyro_mcmc():
    """The count form used by the refresh and the per-observation reference model agree (the
    reference is sampled by NumPyro's own MCMC; both sides are Monte Carlo, so the standard
    errors of both enter)."""
    labels = [0, 0, 0, 1, 1]
    rng = np.random.default_rng(3)
    arms = rng.integers(0, 5, 80).astype(np.int32)
    p = np.array([0.2, 0.3, 0.35, 0.7, 0.8])
    rewards = (rng.random(80) < p[arms]).astype(np.float32)
    post = hierarchical_logit_normal(labels, refresh_every=80, num_warmup=300, num_samples=1000, num_chains=2,
                                     target_accept=0.9)
    state = jax.jit(lambda a, r: fit(post, 5, a, r))(arms, rewards)
    ref = _numpyro_reference(post.model, (jnp.asarray(arms), jnp.asarray(rewards)), {"n_arms": 5}, 1)
    for site in ("mu", "group_loc"):
        a = np.asarray(state.samples[site], np.float64)
        b = ref[site]
        ess_a, ess_b = np.asarray(effective_sample_size(a)), np.asarray(effective_sample_size(b))
        sd = b.reshape(-1, b.shape[-1]).std(axis=0)
        se = sd * np.sqrt(1 / ess_a + 1 / ess_b)
        diff = a.reshape(-1, a.shape[-1]).mean(axis=0) - b.reshape(-1, b.shape[-1]).mean(axis=0)
        assert np.all(np.abs(diff) < Z * se), f"{site}: {diff} (se {se})"
    assert int(np.asarray(state.diverging).sum()) <= 20


@pytest.mark.slow
def test_logistic_linear_refresh_matches_numpyro_mcmc_and_runs_fairx_lints():
    from bayesfair.core.types import Observation, Spec
    from bayesfair.policies.linear import fairx_lints

    d, n = 3, 60
    rng = np.random.default_rng(4)
    x = rng.normal(size=(n, d)).astype(np.float32)
    theta = np.array([1.0, -0.5, 0.25])
    y = (rng.random(n) < 1 / (1 + np.exp(-x @ theta))).astype(np.float32)
    post = logistic_linear_mcmc(0.0, 1.0, capacity=64, refresh_every=n, num_warmup=200, num_samples=500,
                                num_chains=2)
    state = jax.jit(lambda a, b: bf.posteriors.fit_linear(post, a, b))(x, y)
    ref = _numpyro_reference(post.model, (jnp.asarray(x), jnp.asarray(y)), {}, 2)
    a, b = np.asarray(state.samples["theta"], np.float64), ref["theta"]
    se = b.reshape(-1, d).std(axis=0) * np.sqrt(1 / np.asarray(effective_sample_size(a))
                                                + 1 / np.asarray(effective_sample_size(b)))
    diff = a.reshape(-1, d).mean(axis=0) - b.reshape(-1, d).mean(axis=0)
    assert np.all(np.abs(diff) < Z * se), f"theta: {diff} (se {se})"
    # FairX-LinTS with the logistic posterior and the composite merit, a few jitted rounds
    merit = logistic_merit(bf.merit.exponential(2.0))
    pol = fairx_lints(post, merit)
    spec = Spec(n_arms=4, group_of_arm=np.zeros(4, np.int32), n_groups=1, n_features=d)

    def rounds(key):
        def step(st, t):
            ctx = jax.random.normal(jax.random.fold_in(key, t), (4, d))
            obs = Observation(t=t, contexts=ctx)
            a, probs, _ = pol.select(jax.random.fold_in(key, t + 1000), st, obs)
            r = jax.random.bernoulli(jax.random.fold_in(key, t + 2000), jax.nn.sigmoid(ctx[a] @ theta))
            return pol.update(st, obs, a, r.astype(jnp.float32)), probs

        return jax.lax.scan(step, pol.init(key, spec), jnp.arange(1, 2 * n + 1))

    final, probs = jax.jit(rounds)(jax.random.key(0))
    np.testing.assert_allclose(np.asarray(probs).sum(axis=1), 1.0, rtol=1e-5)
    assert int(final.refreshes) == 2


@pytest.mark.slow
def test_fairx_ts_regret_matches_conjugate_refresh_every_10():
    """Refreshing every 10 rounds (draws up to 9 observations stale): still within Monte Carlo
    error of the conjugate path at this scale."""
    env = bf.bernoulli_arms(np.array([0.2, 0.4, 0.5, 0.8]))
    merit = bf.merit.exponential(4.0)
    post = mcmc_beta_bernoulli(refresh_every=10, num_warmup=50, num_samples=50, seed=4)
    pols = {"conjugate": bf.fairx_ts(bf.beta_bernoulli(), merit), "mcmc": bf.fairx_ts(post, merit)}
    runs, horizon = 64, 500
    ds = bf.simulate(8, env, pols, horizon, runs, merit=merit, chunk_size=250, checkpoints=[horizon])
    for metric in ("fairness_regret", "reward_regret"):
        v = ds[metric].isel(checkpoint=-1).values
        se = np.sqrt(v[0].var(ddof=1) / runs + v[1].var(ddof=1) / runs)
        assert abs(v[1].mean() - v[0].mean()) < Z_POLICY * se, f"{metric}: {v[1].mean()} vs {v[0].mean()} ({se})"


@pytest.mark.slow
def test_refresh_bench_quick_smoke(tmp_path):
    """experiments/benchmarks/mcmc_refresh_bench.py --quick writes its JSON report."""
    import importlib
    import json
    import sys
    from pathlib import Path

    bench_dir = str(Path(__file__).resolve().parents[1] / "experiments" / "benchmarks")
    if bench_dir not in sys.path:
        sys.path.insert(0, bench_dir)  # the scripts import their shared `harness` module
    module = importlib.import_module("mcmc_refresh_bench")
    out = tmp_path / "bench.json"
    module.main(["--quick", "--refresh-every", "100", "1000", "--out", str(out)])
    data = json.loads(out.read_text())
    assert data["settings"]["quick"] is True and data["conjugate"]["end_to_end_rate"] > 0
    assert [r["refresh_every"] for r in data["results"]] == [100, 1000]
    for r in data["results"]:
        assert r["refresh"]["seconds_all_runs"] > 0 and r["refreshes"] == 1000 // r["refresh_every"]


def test_split_rhat_ess_match_arviz():
    """The in-loop (JAX) split R-hat and ESS equal ArviZ's split R-hat and "mean" ESS on AR(1) chains."""
    import arviz as az

    from bayesfair.posteriors.mcmc import split_rhat_ess

    rng = np.random.default_rng(5)
    for phi, n in ((0.0, 100), (0.6, 101), (-0.3, 64)):
        x = np.zeros((3, n, 2))
        e = rng.standard_normal(x.shape)
        for t in range(n):
            x[:, t] = (phi * x[:, t - 1] if t else 0.0) + e[:, t]
        x[:, :, 1] += 0.4 * np.arange(3)[:, None]  # chains apart in one coordinate
        rhat, ess = split_rhat_ess(jnp.asarray(x, jnp.float32))
        ref_rhat = max(float(az.rhat(x[:, :, j], method="split")) for j in range(2))
        ref_ess = min(float(az.ess(x[:, :, j], method="mean")) for j in range(2))
        assert abs(float(rhat) - ref_rhat) < 1e-4
        assert abs(float(ess) - ref_ess) < 0.1 * ref_ess  # ArviZ's Geyer tail differs slightly
    frozen = split_rhat_ess(jnp.ones((2, 10, 3)))
    assert float(frozen[0]) == np.inf and float(frozen[1]) == 0.0
    assert np.isnan(float(split_rhat_ess(jnp.zeros((2, 3, 1)))[0]))  # too few draws: not assessed


def _refresh_study(**settings):
    env = bf.bernoulli_arms(np.array([0.2, 0.5, 0.8]))
    merit = bf.merit.exponential(4.0)
    post = mcmc_beta_bernoulli(refresh_every=25, seed=1, **settings)
    pols = {"conjugate": bf.fairx_ts(bf.beta_bernoulli(), merit), "mcmc": bf.fairx_ts(post, merit)}
    return bf.simulate(3, env, pols, 100, 4, merit=merit, checkpoints=[30, 60, 100])


def test_refresh_diagnostics_in_results_and_silent_when_converged():
    """Default settings (2 chains): every refresh's R-hat, ESS and divergences are tracked per run
    and checkpoint; the conjugate policy has none (NaN); no warning."""
    import warnings

    assert NUTSSettings().num_chains == 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = _refresh_study(num_warmup=50, num_samples=100)
    assert not [w for w in caught if "MCMC refreshes" in str(w.message)]
    for name in ("rhat", "ess", "divergences", "bad_refreshes", "first_bad_round"):
        var = ds[f"track_mcmc_{name}"]
        assert var.dims == ("policy", "run", "checkpoint")
        assert np.all(np.isnan(var.sel(policy="conjugate").values))
    mc = ds.sel(policy="mcmc")
    rhat, ess = mc["track_mcmc_rhat"].values, mc["track_mcmc_ess"].values
    assert np.all((rhat >= 0.9) & (rhat < 1.1)) and np.all(ess > 20)
    assert np.all(mc["track_mcmc_bad_refreshes"].values == 0) and np.all(mc["track_mcmc_divergences"].values == 0)
    # the checkpoints see different refreshes (rounds 25, 50, 100): the values change over time
    assert np.any(rhat[:, 0] != rhat[:, -1])


def test_failed_refreshes_warn_once_naming_run_and_round():
    """No warmup and a tiny step size: the chains stay where they started (frozen), every refresh fails."""
    with pytest.warns(RuntimeWarning, match=r"policy 'mcmc'.*in 4 of 4 run\(s\); first in run \d at round 25 ") as rec:
        ds = _refresh_study(num_warmup=0, num_samples=20, init_step_size=1e-4, max_tree_depth=2)
    assert sum("MCMC refreshes" in str(w.message) for w in rec) == 1
    mc = ds.sel(policy="mcmc").isel(checkpoint=-1)
    np.testing.assert_array_equal(mc["track_mcmc_bad_refreshes"].values, 4)
    np.testing.assert_array_equal(mc["track_mcmc_first_bad_round"].values, 25)
    assert np.all(mc["track_mcmc_rhat"].values > 1.1)
