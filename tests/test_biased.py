"""Biased feedback (group_fairness_biased_feedback_aamas2022): environments, the group-bias posterior, policies.

What is tested, and against which statement:

- the conjugate group-bias posterior: its rank-one updates equal the batch closed form
  (float64, whole design matrix); it agrees with NUTS on the same NumPyro model with the scales
  fixed (ESS-calibrated tolerances, several random data sets); the sufficient-statistic
  likelihood is the plain one up to a constant; its psi credible intervals cover the true psi at
  the nominal rate over data sets simulated from the prior (binomial tolerance);
- the interval policies' pi_t is exactly the paper's rule (Algorithm 1 lines 2-18, Algorithm 2,
  Algorithm 3, TopInterval and IntervalChaining), computed independently in float64 numpy from
  the raw history (so the rank-one state is checked against a batch least-squares fit); the
  m-group form of Algorithm 1 is Algorithm 1 itself for m = 2;
- the policy contract (pi_t a probability vector, the action drawn from it) for every policy;
- calibrated behaviour on the Section 5.2 synthetic problem: GroupFairTopInterval's true regret
  (Eq. 3) beats TopInterval's and its share of sensitive pulls is near the sensitive arms' share;
  GroupFair-TS's psi error decreases; NaiveFair gives every group exactly 1/m of pi_t;
- bad inputs raise clear errors.
"""

import os
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from scipy.stats import norm

import bayesfair as bf
from bayesfair.core.types import Observation, Spec
from bayesfair.environments import biased as eb
from bayesfair.inference import fitting
from bayesfair.policies import biased as pb
from bayesfair.posteriors import group_bias as gb

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("BAYESFAIR_DATA", ROOT.parent / "shared" / "data"))
MERIT = bf.merit.exponential(1.0, domain=(-100.0, 100.0))


def _random_data(rng, group_of_arm, d, n_obs, *, scale=1.0):
    n = len(group_of_arm)
    arms = rng.integers(0, n, n_obs)
    X = rng.uniform(-1.0, 1.0, (n_obs, d))
    coef = rng.normal(0.0, 1.5, (n, d))
    y = np.sum(X * coef[arms], axis=1) + scale * rng.normal(size=n_obs)
    return arms.astype(np.int32), X, y


# ------------------------------------------------------------------------------------ posterior


@pytest.mark.parametrize("groups,reference,method", [((0, 0, 1, 1, 1), 0, "joint"), ((2, 0, 1, 2, 0, 1), 1, "joint"),
                                                     ((2, 0, 1, 2, 0, 1), 1, "collapsed")])
def test_rank_one_updates_equal_batch_closed_form(groups, reference, method):
    rng = np.random.default_rng(len(groups))
    post = gb.group_bias_posterior(groups, 3, tau=1.3, s=2.5, sigma=0.8, prior_mean=[0.5, -1.0, 0.0],
                                   prior_sd=4.0, reference=reference, method=method)
    assert post.method == method
    arms, X, y = _random_data(rng, groups, 3, 300)
    state = jax.jit(lambda a, x, r: gb.fit_group_bias(post, a, x, r))(arms, X, y)
    mean, cov = gb.batch_group_bias(post, arms, X, y)
    np.testing.assert_allclose(np.asarray(post.theta_mean(state)), mean, atol=2e-3 * np.abs(mean).max())
    np.testing.assert_allclose(np.asarray(post.theta_cov(state)), cov, atol=1e-3 * np.abs(cov).max())
    draw = post.mean(state)
    ref_rows = np.asarray(draw.psi)[reference]
    assert np.all(ref_rows == 0.0)
    lay = post.layout
    psi_cov = np.asarray(post.psi_cov(state))
    for g in range(lay.n_groups):
        if g == reference:
            assert np.all(psi_cov[g] == 0.0)
        else:
            o = lay.psi_offset(int(lay.group_slot[g]))
            np.testing.assert_allclose(psi_cov[g], cov[o:o + 3, o:o + 3], atol=1e-3 * np.abs(cov).max())


@pytest.mark.parametrize("method", ["joint", "collapsed"])
def test_conjugate_draws_have_the_closed_form_moments(method):
    """20,000 joint draws: every coordinate's mean and sd within 4.5 s.e. of the closed form
    (2 x 2 x 14 checks, false-failure probability < 1e-3)."""
    rng = np.random.default_rng(7)
    groups = (0, 0, 1, 1, 2)
    post = gb.group_bias_posterior(groups, 2, tau=1.0, s=2.0, sigma=0.5, method=method)
    arms, X, y = _random_data(rng, groups, 2, 60)
    state = gb.fit_group_bias(post, arms, X, y)
    n = 20_000
    draws = jax.vmap(post.sample, (0, None))(jax.random.split(jax.random.key(1), n), state)
    theta = np.asarray(jax.vmap(lambda dr: gb.pack(post.layout, dr))(draws))
    mean, cov = gb.batch_group_bias(post, arms, X, y)
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(theta.mean(0) - mean) < 4.5 * sd / np.sqrt(n))
    assert np.all(np.abs(theta.std(0) - sd) < 4.5 * sd / np.sqrt(2 * n))


def test_sufficient_statistic_likelihood_equals_plain_one():
    from numpyro.infer.util import log_density

    rng = np.random.default_rng(3)
    groups = np.array([0, 0, 1, 1, 2, 2])
    arms, X, y = _random_data(rng, groups, 2, 50)
    kw = dict(group_of_arm=groups, reference=2, tau_scale=1.0, s_scale=2.0, sigma_scale=1.0)
    diffs = []
    for i in range(2):
        params = {"tau": 0.5 + i, "s": 1.0 + i, "sigma": 0.7 + 0.2 * i, "beta_bar": rng.normal(size=2),
                  "z": rng.normal(size=(6, 2)), "psi": rng.normal(size=(2, 2))}
        plain, _ = log_density(gb.group_bias_model, (arms, X, y), dict(kw), params)
        suff, _ = log_density(gb.group_bias_model, (arms, X, y), dict(kw, sufficient=True), params)
        diffs.append(float(plain) - float(suff))
    np.testing.assert_allclose(diffs, 0.0, atol=1e-3)


# NUTS vs the closed form, per data set: (2 psi + 8 beta + 2 beta_bar coordinates) x 2 statistics
# = 24 comparisons at Z = 4.5 standard errors (ESS-based; the posterior is Gaussian, so the sd's
# standard error is sd / sqrt(2 ESS)). Each fails with probability ~7e-6 for a correct
# implementation: the default test (2 data sets, 48 comparisons) and the slow one (5 data sets,
# 120 comparisons) have false-failure rates below 1e-3.
Z = 4.5


def _nuts_agreement(n_sets, num_warmup, num_samples, seed):
    """NUTS through :func:`fitting.fit` (scales fixed; beta non-centred, psi centred), alternating the plain and the
    sufficient-statistic likelihood, against the float64 closed form."""
    from numpyro.diagnostics import effective_sample_size

    groups = (0, 0, 1, 1)
    hyper = dict(tau=0.8, s=1.5, sigma=0.6)
    post = gb.group_bias_posterior(groups, 2, **hyper, prior_mean=0.5, prior_sd=3.0)
    priors = gb.GroupBiasPriors(prior_mean=0.5, prior_sd=3.0)
    rng = np.random.default_rng(seed)
    for i in range(n_sets):
        arms, X, y = _random_data(rng, groups, 2, 40, scale=0.6)
        with warnings.catch_warnings():  # one chain by design (its ESS is checked below): fit's verdict warns
            warnings.filterwarnings("ignore", "NUTS fit NOT converged", RuntimeWarning)
            fit = fitting.fit(fitting.group_bias_data(arms, X, y, groups), **hyper, priors=priors,
                              num_warmup=num_warmup, num_samples=num_samples, num_chains=1, seed=seed + i,
                              sufficient=i % 2 == 1, target_accept=0.8,
                              parametrization={"beta": "noncentered", "psi": "centered"})
        assert fit.diverging.sum() == 0
        s = fit.samples
        draws = np.concatenate([np.asarray(s["beta_bar"]).reshape(1, -1, 2), np.asarray(s["beta"]).reshape(1, -1, 8),
                                np.asarray(s["psi"]).reshape(1, -1, 2)], axis=-1)
        ess = np.asarray(effective_sample_size(draws))
        mean, cov = gb.batch_group_bias(post, arms, X, y)
        sd = np.sqrt(np.diag(cov))
        assert np.all(ess > 200), f"set {i}: NUTS mixed poorly, ESS {ess}"
        nuts_mean, nuts_sd = draws[0].mean(0), draws[0].std(0, ddof=1)
        assert np.all(np.abs(nuts_mean - mean) < Z * sd / np.sqrt(ess)), (i, nuts_mean, mean, sd)
        assert np.all(np.abs(nuts_sd - sd) < Z * sd / np.sqrt(2 * ess)), (i, nuts_sd, sd)


def test_conjugate_matches_nuts_with_fixed_scales():
    _nuts_agreement(2, 300, 1500, seed=11)


@pytest.mark.slow
def test_conjugate_matches_nuts_with_fixed_scales_more_data_sets():
    _nuts_agreement(5, 800, 5000, seed=12)


def test_psi_credible_intervals_are_calibrated():
    """Data sets drawn from the model's own prior (beta_bar, beta_i, psi, y): the central 50% and
    90% posterior intervals of each psi coordinate cover the truth at their nominal rate.

    400 data sets; each (level, coordinate) coverage count is Binomial(400, level) for a correct
    posterior; the test allows 4 binomial standard errors (two-sided false-failure probability
    6e-5 each, < 5e-4 for the 8 checks)."""
    groups = np.array([0, 0, 0, 1, 1, 1, 2, 2])
    d, n_obs, n_sets = 2, 30, 400
    tau, s, sigma, m0, v0 = 1.0, 2.0, 0.5, 1.0, 3.0
    post = gb.group_bias_posterior(groups, d, tau=tau, s=s, sigma=sigma, prior_mean=m0, prior_sd=v0)

    def one(key):
        k = jax.random.split(key, 6)
        beta_bar = m0 + v0 * jax.random.normal(k[0], (d,))
        beta = beta_bar + tau * jax.random.normal(k[1], (groups.size, d))
        psi = jnp.concatenate([jnp.zeros((1, d)), s * jax.random.normal(k[2], (2, d))])
        arms = jax.random.randint(k[3], (n_obs,), 0, groups.size)
        X = jax.random.uniform(k[4], (n_obs, d), minval=-1.0, maxval=1.0)
        y = jnp.sum(X * (beta + psi[groups])[arms], axis=1) + sigma * jax.random.normal(k[5], (n_obs,))
        state = gb.fit_group_bias(post, arms, X, y)
        mean = post.mean(state).psi
        sd = jnp.sqrt(jnp.diagonal(post.psi_cov(state), axis1=-2, axis2=-1))
        return psi, mean, sd

    psi, mean, sd = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(2026), n_sets))
    psi, mean, sd = (np.asarray(a)[:, 1:] for a in (psi, mean, sd))  # the two non-reference groups
    zscore = np.abs(psi - mean) / sd
    for level in (0.5, 0.9):
        cover = (zscore <= norm.ppf(0.5 + level / 2)).reshape(n_sets, -1).mean(axis=0)
        se = np.sqrt(level * (1 - level) / n_sets)
        assert np.all(np.abs(cover - level) < 4 * se), (level, cover)


# ------------------------------------------------------------------------------------ policies

GROUPS = np.array([0, 0, 0, 1, 1, 1, 1])
N, D = GROUPS.size, 2
SPEC = Spec(n_arms=N, group_of_arm=GROUPS, n_groups=2, n_features=D)
def _history(rng, t_len, n=N, d=D, groups=GROUPS):
    arms = rng.integers(0, n, t_len)
    X = rng.uniform(0.0, 1.0, (t_len, n, d))
    coef = rng.uniform(0, 5, (n, d)) - 3.0 * (np.asarray(groups) == 1)[:, None]
    y = np.sum(X[np.arange(t_len), arms] * coef[arms], axis=1) + rng.normal(size=t_len)
    return arms.astype(np.int32), X.astype(np.float32), y.astype(np.float32)


def _state_after(pol, arms, X, y, spec=SPEC):
    def step(state, inp):
        t, a, x, r = inp
        return pol.update(state, Observation(t, x), a, r), None

    ts = jnp.arange(1, len(arms) + 1, dtype=jnp.int32)
    return lax.scan(step, pol.init(jax.random.key(0), spec), (ts, jnp.asarray(arms), jnp.asarray(X),
                                                                jnp.asarray(y)))[0]


def _np_fit(arms, X, y, ridge, n, d, t_len, groups):
    """Float64 batch least squares from the raw history: per arm and per group (A^-1, b)."""
    xs = X[np.arange(t_len), arms]
    arm_stats, grp_stats = [], []
    for i in range(n):
        rows = arms == i
        arm_stats.append((np.linalg.inv(ridge * np.eye(d) + xs[rows].T @ xs[rows]), xs[rows].T @ y[rows]))
    for g in range(groups.max() + 1):
        rows = groups[arms] == g
        grp_stats.append((np.linalg.inv(ridge * np.eye(d) + xs[rows].T @ xs[rows]), xs[rows].T @ y[rows]))
    return arm_stats, grp_stats


def _ties(v):
    is_max = np.isclose(v, v.max(), rtol=0, atol=1e-9)
    return is_max / is_max.sum()


def _literal_probs(kind, arms, X, y, ctx, t, *, groups=GROUPS, delta=0.1, sigma=1.0, ridge=1e-2, reference=0,
                   rho=0.0, horizon=None):
    """The paper's rules, written out from the raw history in float64."""
    n, d = ctx.shape
    arm_stats, grp_stats = _np_fit(arms, X, y, ridge, n, d, len(arms), groups)
    est = np.array([ctx[i] @ Ai @ bi for i, (Ai, bi) in enumerate(arm_stats)])
    var = np.array([ctx[i] @ Ai @ ctx[i] for i, (Ai, _) in enumerate(arm_stats)])
    w = np.abs(norm.ppf(delta / (2 * n * t))) * np.sqrt(sigma**2 * var)  # Alg. 1 lines 8-9
    eps = min(1.0, t ** (-1 / 3))
    if kind == "top_interval":
        exploit = _ties(est + w)
    elif kind == "interval_chaining":
        lo, up = est - w, est + w
        chained = {int(np.argmax(up))}
        grew = True
        while grew:  # transitive overlap with the chain
            grew = False
            for j in range(n):
                if j not in chained and any(lo[j] <= up[k] and lo[k] <= up[j] for k in chained):
                    chained.add(j)
                    grew = True
        exploit = np.array([1.0 if j in chained else 0.0 for j in range(n)])
        exploit /= exploit.sum()
    elif kind == "naive_fair":
        m = groups.max() + 1
        probs = np.zeros(n)
        for g in range(m):  # Alg. 2: group g w.p. 1/m, then TopInterval within g
            inside = groups == g
            u = np.where(inside, est + w, -np.inf)
            probs += (eps * inside / inside.sum() + (1 - eps) * _ties(u)) / m
        return probs
    else:
        big_t = horizon if horizon is not None else t
        sizes = np.bincount(groups)
        psi_x = np.array([[ctx[i] @ Gg @ cg for (Gg, cg) in grp_stats] for i in range(n)])
        b = np.array([[np.abs(norm.ppf(delta / (2 * (n / sizes[g]) * big_t))) * sigma * np.sqrt(ctx[i] @ Gg @ ctx[i])
                       for g, (Gg, _) in enumerate(grp_stats)] for i in range(n)])  # lines 11-14
        u = np.empty(n)
        for i in range(n):
            j = groups[i]
            if kind == "gfti":  # Algorithm 1 (lines 15 and 17), every non-reference group vs the reference
                u[i] = est[i] + w[i] if j == reference else (
                    est[i] + w[i] - psi_x[i, j] + b[i, j] + psi_x[i, reference] + b[i, reference])
            else:  # Algorithm 3 line 13
                u[i] = est[i] + w[i] + rho - psi_x[i, j] + b[i, j]
        exploit = _ties(u)
    return eps / n + (1 - eps) * exploit


@pytest.mark.parametrize("kind,pol,groups", [
    ("top_interval", pb.top_interval(), GROUPS),
    ("interval_chaining", pb.interval_chaining(delta=0.3), GROUPS),
    ("naive_fair", pb.naive_fair(), np.array([0, 0, 1, 1, 1, 2, 2])),
    ("gfti", pb.group_fair_top_interval(), GROUPS),  # m = 2: Algorithm 1 as printed
    ("gfti", pb.group_fair_top_interval(reference=1), np.array([1, 1, 0, 0, 2, 2, 2])),  # its m-group form
    ("gfti_rho", pb.group_fair_top_interval(rho=3.0, horizon=400), np.array([0, 0, 1, 1, 1, 2, 2])),
])
def test_probs_are_the_papers_rule_from_a_batch_fit(kind, pol, groups):
    """pi_t from the rank-one float32 state equals the float64 batch rule of the paper."""
    spec = Spec(n_arms=N, group_of_arm=groups, n_groups=int(groups.max()) + 1, n_features=D)
    rng = np.random.default_rng(abs(hash(kind)) % 1000)
    reference = pol.params.get("reference", 0)
    for t_len in (4, 150):
        arms, X, y = _history(rng, t_len, groups=groups)
        state = _state_after(pol, arms, X, y, spec)
        ctx = rng.uniform(0, 1, (N, D)).astype(np.float32)
        t = t_len + 1
        _, probs, _ = pol.select(jax.random.key(0), state, Observation(jnp.int32(t), jnp.asarray(ctx)))
        want = _literal_probs(kind, arms, X.astype(np.float64), y.astype(np.float64), ctx.astype(np.float64), t,
                              groups=groups, delta=pol.params["delta"], reference=reference,
                              rho=pol.params.get("rho") or 0.0, horizon=pol.params.get("horizon"))
        np.testing.assert_allclose(np.asarray(probs), want, atol=2e-4, err_msg=f"{kind}, t={t}")
        if kind == "naive_fair":  # demographic parity (Eq. 13): every group gets exactly 1/m of pi_t
            np.testing.assert_allclose(np.bincount(groups, weights=np.asarray(probs)), 1.0 / 3.0, atol=1e-6)


def test_chain_set_is_the_connected_component_of_the_top_interval():
    rng = np.random.default_rng(0)
    lo = rng.uniform(0, 10, (300, 6))
    up = lo + rng.uniform(0, 2, (300, 6))
    got = np.asarray(jax.jit(jax.vmap(pb.chain_set))(jnp.asarray(lo), jnp.asarray(up)))
    for i in range(lo.shape[0]):
        comp = {int(np.argmax(up[i]))}
        for _ in range(6):  # brute-force transitive closure of "intervals overlap"
            comp |= {j for j in range(6) for k in comp if lo[i, j] <= up[i, k] and lo[i, k] <= up[i, j]}
        assert set(np.flatnonzero(got[i]).tolist()) == comp


# ------------------------------------------------------------------------------------ behaviour


def test_group_fair_top_interval_beats_top_interval_on_true_regret():
    """Section 5.2 synthetic problem (n = 10, 5 sensitive, d = 2, mu = 10), T = 1000, 24 runs with
    common random numbers. Paired difference of the true regret (Eq. 3) TopInterval minus
    GroupFairTopInterval: its mean must exceed 3 standard errors (a one-sided z-test; here the
    effect is > 10 s.e., so a false failure has probability far below 1e-3). The sensitive share
    of GroupFairTopInterval's pulls must be within 4 s.e. + 0.08 (finite-T optimism slack) of the
    sensitive arms' share 0.5, which is the true-optimal policy's expected share by symmetry, and
    TopInterval's share must be far below it (the bias hides the sensitive arms)."""
    env = eb.synthetic_biased()
    T, R = 1000, 24
    ds = bf.simulate(3, env, {"TI": pb.top_interval(), "GFTI": pb.group_fair_top_interval()}, T, R, merit=MERIT,
                     checkpoints=[T])
    fin = ds.isel(checkpoint=-1)
    diff = fin["true_regret"].sel(policy="TI").values - fin["true_regret"].sel(policy="GFTI").values
    assert diff.mean() > 3 * diff.std(ddof=1) / np.sqrt(R), diff
    share = fin["group_pulls"].sel(policy="GFTI").values[:, 1] / T
    se = share.std(ddof=1) / np.sqrt(R)
    assert abs(share.mean() - 0.5) < 4 * se + 0.08, share
    share_ti = fin["group_pulls"].sel(policy="TI").values[:, 1] / T
    assert share_ti.mean() < 0.25, share_ti
    # the biased regret (Eq. 1) goes the other way: ignoring the bias is what the biased feedback rewards
    assert fin["regret"].sel(policy="TI").values.mean() < fin["regret"].sel(policy="GFTI").values.mean()


def test_group_fair_ts_learns_psi_and_env_params_match_the_simulator():
    """psi fixed, beta_i ~ U[4, 6]^2 per run; the tracked posterior-mean error ||E[psi] - psi||
    falls (mean over 6 runs at T = 800 below half its value at t = 10). Its floor is not 0: with
    5 arms per group psi is known only up to the spread of the groups' average true coefficients
    (about tau sqrt(2 / 5) per coordinate), whatever T. The post-hoc route
    (track psi_hat + env_params) gives the same error, and env_params reproduces the simulator's
    per-run draws (checked on the recorded arm means)."""
    psi = np.array([0.0, 0.0, -8.0, -4.0]).reshape(2, 2)
    env = eb.biased_linear_bandit(np.repeat([0, 1], 5), 2, beta=eb.UniformDraw(4.0, 6.0), psi=psi)
    pol = pb.group_fair_ts(tau=0.6, s=10.0, true_psi=psi)
    ds = bf.simulate(9, env, {"TS": pol}, 800, 6, merit=MERIT, checkpoints=[10, 800])
    err = ds["track_psi_error"].sel(policy="TS").values  # [run, checkpoint]
    assert err[:, 1].mean() < 0.5 * err[:, 0].mean(), err
    psi_hat = ds["track_psi_hat"].sel(policy="TS").values
    post_hoc = np.sqrt(((psi_hat - psi) ** 2).sum(axis=(-1, -2)))
    np.testing.assert_allclose(post_hoc, err, rtol=1e-4)
    params = eb.env_params(env, 9, 6)
    np.testing.assert_allclose(np.asarray(jax.vmap(env.arm_means)(params)), ds["mean"].values, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(params.psi), np.broadcast_to(psi, (6, 2, 2)))


def test_synthetic_environment_rewards():
    """Round.mean is the observed reward of Eq. (2) without noise, extra['true'] the true one."""
    env = eb.synthetic_biased(8, 3, 4, bias_mean=5.0)
    params = env.reset(jax.random.key(0))
    beta, psi = np.asarray(params.beta), np.asarray(params.psi)
    assert beta.shape == (8, 4) and psi.shape == (2, 4)
    assert np.all((beta >= 0) & (beta <= 10)) and np.all(psi[0] == 0) and np.all((psi[1] >= -10) & (psi[1] <= 0))
    rnd = env.step(jax.random.key(1), params, jnp.int32(1))
    x = np.asarray(rnd.obs.contexts)
    labels = env.spec.group_of_arm
    np.testing.assert_allclose(np.asarray(rnd.extra["true"]), np.sum(beta * x, 1), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(rnd.mean), np.sum((beta + psi[labels]) * x, 1), rtol=1e-5, atol=1e-5)
    assert list(labels) == [0] * 5 + [1] * 3


@pytest.mark.skipif(not (DATA / "compas" / "compas_filtered_groupfairtreatment.csv").is_file(),
                    reason=f"COMPAS data not found under {DATA}")
def test_compas_environment(monkeypatch):
    monkeypatch.setenv("BAYESFAIR_DATA", str(DATA))
    env = eb.compas_bandit()
    assert env.spec.n_arms == 6 and env.spec.n_features == 15 and list(env.spec.group_of_arm) == [0, 0, 0, 1, 1, 1]
    rnd = env.step(jax.random.key(0), env.reset(jax.random.key(0)), jnp.int32(1))
    assert rnd.obs.contexts.shape == (6, 15) and rnd.extra is None
    assert np.all(np.asarray(rnd.mean) == np.asarray(rnd.reward))
    assert set(np.asarray(rnd.mean).tolist()) <= set(range(-1, 11))


@pytest.mark.skipif(not (DATA / "family_income" / "family_income_and_expenditure.csv.gz").is_file(),
                    reason=f"family income data not found under {DATA}")
def test_family_income_environment(monkeypatch):
    monkeypatch.setenv("BAYESFAIR_DATA", str(DATA))
    table = eb.family_income_table()
    assert table.bucket_names[0].startswith("(8.91, 27") and table.bucket_names[-1].endswith("99]")
    assert table.group_names == ("Female", "Male") and table.features.shape == (41544, 58)
    env = eb.biased_data_bandit(table)
    assert env.spec.n_arms == 10 and list(env.spec.group_of_arm) == [0] * 5 + [1] * 5
    rnd = env.step(jax.random.key(3), env.reset(jax.random.key(0)), jnp.int32(1))
    assert rnd.obs.contexts.shape == (10, 58) and np.all(np.asarray(rnd.mean) > 0)


# models/compas_group_bias.py and the other real-data recipes: tests/test_group_bias_recipes.py


# ------------------------------------------------------------------------------------ validation


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="at least 2 arms"):
        eb.biased_linear_bandit([0, 0, 1], 2)
    with pytest.raises(ValueError, match="psi must have shape"):
        eb.biased_linear_bandit([0, 0, 1, 1], 2, psi=np.zeros((2, 3)))
    with pytest.raises(ValueError, match="n_features=2"):
        eb.biased_linear_bandit([0, 0, 1, 1], 2, psi=np.zeros(3))
    with pytest.raises(ValueError, match="the reference group's bias\\) must be zero"):
        eb.biased_linear_bandit([0, 0, 1, 1], 2, psi=np.ones((2, 2)))
    with pytest.raises(ValueError, match="beta must have shape"):
        eb.biased_linear_bandit([0, 0, 1, 1], 2, beta=np.ones((3, 2)))
    with pytest.raises(ValueError, match="at least 2 groups"):
        eb.biased_linear_bandit([0, 0, 0], 2)
    with pytest.raises(ValueError, match="n_sensitive must leave"):
        eb.synthetic_biased(10, 9)
    with pytest.raises(ValueError, match="bias_mean"):
        eb.synthetic_biased(bias_mean=-1.0)
    x = np.ones((6, 2))
    g, b = np.array([0, 0, 0, 1, 1, 1]), np.array([0, 1, 0, 1, 0, 1])
    with pytest.raises(ValueError, match="features must be finite"):
        eb.biased_table(np.where(np.eye(6, 2) > 0, np.nan, x), np.ones(6), g, b, group_names="ab", bucket_names="xy")
    with pytest.raises(ValueError, match="group label 2 in row 3 is unknown"):
        eb.biased_table(x, np.ones(6), np.array([0, 0, 0, 2, 1, 1]), b, group_names="ab", bucket_names="xy")
    with pytest.raises(ValueError, match="has no rows"):
        eb.biased_table(x, np.ones(6), g, np.array([0, 0, 0, 1, 1, 1]), group_names="ab", bucket_names="xy")
    import pandas as pd

    df = pd.DataFrame({"race": ["African-American", "Other"], "age_cat": ["25 - 45", "Unknown age"],
                       "v_decile_score": [1, 2], **{c: [0, 0] for c in eb._COMPAS_FEATURES}})
    with pytest.raises(ValueError, match=r"unknown age_cat label\(s\) \['Unknown age'\]"):
        eb.compas_table(df=df)
    with pytest.raises(ValueError, match=r"delta: out of range: allowed a number in \(0, 1\)"):
        pb.top_interval(delta=1.5)
    with pytest.raises(ValueError, match=r"sigma: out of range: allowed a number in \(0, inf\)"):
        pb.group_fair_top_interval(sigma=0.0)
    with pytest.raises(ValueError, match="GroupFairTopInterval: every group needs at least 2 arms"):
        pb.group_fair_top_interval().init(jax.random.key(0), Spec(3, np.array([0, 0, 1]), 2, 2))
    with pytest.raises(ValueError, match="reference must be a group index"):
        pb.group_fair_ts(reference=2).init(jax.random.key(0), SPEC)
    with pytest.raises(ValueError, match="true_psi must have shape"):
        pb.group_fair_ts(true_psi=np.zeros((2, 3))).init(jax.random.key(0), SPEC)
    with pytest.raises(ValueError, match="needs spec.n_features"):
        pb.top_interval().init(jax.random.key(0), Spec(4, np.array([0, 0, 1, 1]), 2, 0))
    with pytest.raises(ValueError, match="obs.contexts must be"):
        pol = pb.top_interval()
        pol.select(jax.random.key(0), pol.init(jax.random.key(0), SPEC), Observation(jnp.int32(1), jnp.ones((N, 3))))
    with pytest.raises(ValueError, match="y must be finite"):
        fitting.group_bias_data([0, 1], np.ones((2, 2)), [1.0, np.nan], [0, 1])
    with pytest.raises(ValueError, match="arms must be in"):
        fitting.group_bias_data([0, 5], np.ones((2, 2)), [1.0, 2.0], [0, 1])
    with pytest.raises(ValueError, match="tau must be > 0"):
        gb.group_bias_posterior([0, 1], 2, tau=-1.0)


@pytest.mark.parametrize("make", ["synthetic_biased", "biased_linear_bandit"])
def test_noise_sd_zero_gives_noiseless_rewards(make):
    """noise_sd = 0 is declared valid for both synthetic constructors (synthetic_biased builds a
    biased_linear_bandit, which refused it): the reward is then the observed (biased) mean exactly."""
    from bayesfair.environments import biased

    env = (biased.synthetic_biased(noise_sd=0.0) if make == "synthetic_biased"
           else biased.biased_linear_bandit([0, 0, 1, 1], n_features=2, noise_sd=0.0))
    params = env.reset(jax.random.key(3))
    for t in range(3):
        rnd = env.step(jax.random.key(10 + t), params, jnp.int32(t))
        # noiseless: every candidate's reward is its expected (observed) reward, exactly
        np.testing.assert_array_equal(np.asarray(rnd.reward), np.asarray(rnd.mean))
