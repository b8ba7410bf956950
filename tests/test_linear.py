"""Linear bandits: the ellipsoid projection, the FairX linear policies and baselines, the environment.

Statistical tests follow tests/test_statistical.py: each run draws its own theta ~ N(0, I_3)
(contexts uniform on the unit sphere, Gaussian noise sd 0.5, so the Gaussian posteriors are well
specified), assertions are one-sided at Z = 3 standard errors over R = 40 runs (an implementation
whose expectation sits exactly at the bound passes with probability ~0.0013; a correct one D
standard errors inside fails with probability ~P(Z > D - 3)), and the keys are fixed.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesfair as bf
from bayesfair.core.types import Observation, Spec
from bayesfair.environments import linear_bandit
from bayesfair.policies import (
    fairx_lineg,
    fairx_lints,
    fairx_linucb,
    lints,
    linucb,
    project_ellipsoid,
    project_ellipsoid_eig,
)
from bayesfair.posteriors import fit_linear, linear_known_variance, linear_normal_inverse_gamma

M = bf.merit.exponential(3.0)
Z = 3.0


# --------------------------------------------------------------------------- ellipsoid projection


def _instances(n: int, d: int, seed: int):
    """Random ellipsoids (eigenvalues log-uniform over 4 decades), centres, radii and points."""
    rng = np.random.default_rng(seed)
    q = np.linalg.qr(rng.normal(size=(n, d, d)))[0]
    lam = np.exp(rng.uniform(-2.3, 2.3, size=(n, d)) * 2)
    c = rng.normal(size=(n, d)) * 2
    r = np.exp(rng.uniform(-1.5, 1.5, size=n))
    y = c + rng.normal(size=(n, d)) * np.exp(rng.uniform(-3, 3, size=(n, 1)))
    return [a.astype(np.float32) for a in (y, c, lam, q, r)]


def _reference(y, c, lam, q, r):
    """Float64 projection by bisection on the multiplier (independent of the Newton solver)."""
    y, c, lam, q, r = (np.asarray(a, np.float64) for a in (y, c, lam, q, r))
    w = q.T @ (y - c)
    if np.sum(lam * w * w) <= r * r:
        return y
    lo, hi = 0.0, np.sqrt(np.sum(w * w / lam)) / r
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.sum(lam * w * w / (1 + mid * lam) ** 2) > r * r else (lo, mid)
    return c + q @ (w / (1 + 0.5 * (lo + hi) * lam))


@pytest.mark.parametrize("d", [1, 2, 5])
def test_projection_is_exact(d):
    """Over 400 random instances per d: points inside are returned unchanged (bit for bit); points
    outside land on the boundary, satisfy the KKT condition y - z = nu V (z - c) with nu >= 0, and
    agree with an independent float64 solution to float32 precision."""
    y, c, lam, q, r = _instances(400, d, seed=d)
    z = np.asarray(jax.jit(jax.vmap(project_ellipsoid_eig))(y, c, lam, q, r), np.float64)
    n_out = 0
    for i in range(len(y)):
        V = (q[i].astype(np.float64) * lam[i]) @ q[i].T.astype(np.float64)
        yi, ci, zi = y[i].astype(np.float64), c[i].astype(np.float64), z[i]
        if (yi - ci) @ V @ (yi - ci) <= float(r[i]) ** 2 * (1 - 1e-5):
            assert np.array_equal(z[i], y[i]), f"instance {i}: an inside point moved"
            continue
        n_out += 1
        scale = np.linalg.norm(yi - ci) + np.linalg.norm(ci)
        ref = _reference(y[i], c[i], lam[i], q[i], r[i])
        assert np.linalg.norm(zi - ref) <= 1e-5 * scale, f"instance {i}: {zi} vs float64 {ref}"
        u = zi - ci
        assert abs(u @ V @ u / float(r[i]) ** 2 - 1) < 1e-4 * (1 + np.linalg.norm(ci) / np.linalg.norm(u)) ** 2
        grad = V @ u  # KKT: y - z parallel to V (z - c), non-negative multiplier
        nu = (yi - zi) @ grad / (grad @ grad)
        assert nu >= 0
        assert np.linalg.norm(yi - zi - nu * grad) <= 1e-3 * np.linalg.norm(yi - zi) + 1e-5 * scale
    assert n_out > 100  # the instances exercise the outside branch


def test_no_feasible_point_is_closer():
    """For 50 instances, none of 4000 random feasible points (uniform in the ellipsoid and on its
    boundary) is closer to y than the projection."""
    y, c, lam, q, r = _instances(50, 3, seed=9)
    z = np.asarray(jax.vmap(project_ellipsoid_eig)(y, c, lam, q, r), np.float64)
    rng = np.random.default_rng(0)
    for i in range(len(y)):
        u = rng.normal(size=(4000, 3))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        u[:2000] *= rng.random((2000, 1)) ** (1 / 3)  # half inside, half on the boundary
        pts = c[i] + (u * (float(r[i]) / np.sqrt(lam[i].astype(np.float64)))) @ q[i].T.astype(np.float64)
        best = np.linalg.norm(pts - y[i], axis=1).min()
        assert np.linalg.norm(z[i] - y[i]) <= best * (1 + 1e-5) + 1e-6, f"instance {i}"


def test_projection_from_a_matrix_matches_the_eigen_form():
    y, c, lam, q, r = _instances(100, 4, seed=3)
    lam = np.clip(lam, 0.1, 10.0)  # moderate condition: eigh in float32 is then accurate
    V = np.einsum("nij,nj,nkj->nik", q, lam, q)
    a = np.asarray(jax.vmap(project_ellipsoid)(y, c, V, r))
    b = np.asarray(jax.vmap(project_ellipsoid_eig)(y, c, lam, q, r))
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------- policy contract

K, D = 6, 3
SPEC = Spec(n_arms=K, group_of_arm=np.zeros(K, np.int32), n_groups=1, n_features=D)
POLICIES = {
    "fairx_lints": fairx_lints(linear_known_variance(), M),
    "fairx_lints_nig": fairx_lints(linear_normal_inverse_gamma(0.0, 1.0, 2.0, 1.0), M),
    "fairx_lints_rank_one": fairx_lints(linear_known_variance(cholesky="rank_one"), M),
    "fairx_linucb": fairx_linucb(M),
    "fairx_linucb_linearized": fairx_linucb(M, beta=0.5, start="linearized"),
    "fairx_linucb_identity": fairx_linucb(bf.merit.identity(), lam=2.0, beta=1.0),
    "fairx_lineg": fairx_lineg(M, epsilon=0.1),
    "linucb": linucb(),
    "linucb_beta": linucb(beta=0.3, lam=0.5),
    "lints": lints(linear_known_variance()),
    "lints_nig": lints(linear_normal_inverse_gamma(0.0, 1.0, 0.5, 1.0)),
}


def _history(n=40, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, K, D)).astype(np.float32) / np.sqrt(D)
    a = rng.integers(0, K, n)
    r = (x[np.arange(n), a] @ np.array([0.5, -0.3, 0.8]) + 0.3 * rng.normal(size=n)).astype(np.float32)
    return x, a, r


def _run(pol, x, a, r, key, contexts):
    """Update on the history (a scan), then select once."""
    k_init, k_sel = jax.random.split(key)

    def step(state, h):
        t, xt, at, rt = h
        return pol.update(state, Observation(t, xt), at, rt), None

    ts = jnp.arange(1, len(a) + 1, dtype=jnp.int32)
    state, _ = jax.lax.scan(step, pol.init(k_init, SPEC), (ts, jnp.asarray(x), jnp.asarray(a, jnp.int32),
                                                           jnp.asarray(r, jnp.float32)))
    return pol.select(k_sel, state, Observation(jnp.int32(len(a) + 1), contexts)), state


def test_probs_are_the_exact_selection_distributions():
    x, a, r = _history()
    ctx = jnp.asarray(x[-1])
    key = jax.random.key(4)
    # FairX-LinTS: the fair policy of the drawn theta
    (_, probs, info), _ = _run(POLICIES["fairx_lints"], x, a, r, key, ctx)
    np.testing.assert_allclose(probs, bf.merit.fair_policy(M, ctx @ info["theta"]), rtol=1e-6)
    # FairX-LinEG: epsilon / K + (1 - epsilon) * fair policy of the ridge estimate
    (_, probs, info), state = _run(POLICIES["fairx_lineg"], x, a, r, key, ctx)
    ridge = linear_known_variance(0.0, 1.0, 1.0)
    theta_hat = ridge.mean(fit_linear(ridge, x[np.arange(len(a)), a], r))
    np.testing.assert_allclose(info["theta"], theta_hat, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(probs, 0.1 / K + 0.9 * bf.merit.fair_policy(M, ctx @ theta_hat), rtol=1e-5)
    # argmax policies: one-hot, or the uniform mixture over tied maximizers
    tied = jnp.zeros((K, D)).at[1].set(1.0).at[4].set(1.0)
    for name in ("linucb", "lints"):
        (action, probs, _), _ = _run(POLICIES[name], x, a, r, key, tied if name == "linucb" else ctx)
        p = np.asarray(probs)
        assert p[int(action)] > 0 and set(np.round(p, 6)) <= {0.0, 1.0, 0.5}
    (_, probs, info), _ = _run(POLICIES["linucb"], x, a, r, key, jnp.zeros((K, D)))
    np.testing.assert_allclose(probs, np.full(K, 1.0 / K), rtol=1e-6)  # every candidate tied


def test_fairx_linucb_theta_lies_in_the_confidence_ellipsoid():
    x, a, r = _history()
    for name in ("fairx_linucb", "fairx_linucb_linearized"):
        (_, probs, info), state = _run(POLICIES[name], x, a, r, jax.random.key(1), jnp.asarray(x[-1]))
        V = np.asarray(state.precision + state.precision_err, np.float64)
        theta_hat = np.linalg.solve(V, np.asarray(state.eta + state.eta_err, np.float64))
        u = np.asarray(info["theta"], np.float64) - theta_hat
        beta = float(info["beta"])
        assert u @ V @ u <= beta**2 * (1 + 1e-4)
        if name == "fairx_linucb_linearized":
            assert beta == 0.5 and u @ V @ u > 0.25 * beta**2  # the optimism moved theta away
        np.testing.assert_allclose(probs, bf.merit.fair_policy(M, jnp.asarray(x[-1]) @ info["theta"]), rtol=1e-5)


def test_abbasi_yadkori_beta_default():
    """beta_t = R sqrt(ln det V - d ln lambda + 2 ln(1/delta)) + sqrt(lambda) S."""
    pol = fairx_linucb(M, lam=2.0, noise_sd=0.5, theta_bound=3.0, delta=0.1)
    x, a, r = _history()
    (_, _, info), state = _run(pol, x, a, r, jax.random.key(0), jnp.asarray(x[-1]))
    V = np.asarray(state.precision + state.precision_err, np.float64)
    want = 0.5 * np.sqrt(np.linalg.slogdet(V)[1] - D * np.log(2.0) + 2 * np.log(10.0)) + np.sqrt(2.0) * 3.0
    np.testing.assert_allclose(float(info["beta"]), want, rtol=1e-4)


# --------------------------------------------------------------------------- statistical

R = 40
T = 1000


def _upper(v):
    return float(v.mean() + Z * v.std(ddof=1) / np.sqrt(v.size))


def _lower(v):
    return float(v.mean() - Z * v.std(ddof=1) / np.sqrt(v.size))


@pytest.fixture(scope="module")
def linear_runs():
    env = linear_bandit(5, 3, sigma=0.5)  # theta ~ N(0, I_3) per run, contexts on the unit sphere
    well_specified = linear_known_variance(0.0, 1.0, 0.25)
    pols = {
        "FairX-LinTS": fairx_lints(well_specified, M),
        # lam = sigma^2 / prior var; a fixed beta as in the paper's experiments (Section 5.1)
        "FairX-LinUCB": fairx_linucb(M, lam=0.25, beta=0.3),
        "LinTS": lints(well_specified),
        "LinUCB": linucb(lam=0.25, beta=0.3),
        "Uniform": bf.uniform(),
    }
    return bf.simulate(2027, env, pols, 4 * T, R, merit=M, checkpoints=[T, 4 * T])


@pytest.mark.parametrize("name", ["FairX-LinTS", "FairX-LinUCB"])
def test_fairx_linear_fairness_regret_is_sublinear(linear_runs, name):
    """FR(4T) / FR(T) clearly below 4 (Theorems 4.2.1, 4.3.1: O~(sqrt T) gives ~2), asserted as
    E[FR(4T) - 3 FR(T)] < 0 at 3 standard errors."""
    fr = linear_runs["fairness_regret"].sel(policy=name).values
    assert _upper(fr[:, 1] - 3.0 * fr[:, 0]) < 0, f"{name}: FR(4T)/FR(T) = {fr[:, 1].mean() / fr[:, 0].mean():.2f}"


@pytest.mark.parametrize("name", ["LinTS", "LinUCB"])
def test_conventional_linear_policies_concentrate_on_the_best_candidate(linear_runs, name):
    """Late rounds: conventional regret per round under 5% of a uniform policy's, and the fairness
    regret grows linearly (FR(4T) > 3 FR(T)): they play the best candidate, not the fair policy."""
    def late(pol, metric):
        v = linear_runs[metric].sel(policy=pol).values
        return (v[:, 1] - v[:, 0]) / (3 * T)

    assert _upper(late(name, "regret")) < 0.05 * late("Uniform", "regret").mean()
    fr = linear_runs["fairness_regret"].sel(policy=name).values
    assert _lower(fr[:, 1] - 3.0 * fr[:, 0]) > 0


def test_simulate_records_slot_means(linear_runs):
    """The recorded per-run ``mean`` is arm_means: every slot's expected reward, 0 for centred contexts
    (pi*_t itself comes from each round's means)."""
    assert linear_runs["mean"].shape == (R, 5) and np.allclose(linear_runs["mean"].values, 0.0)
    assert np.all(np.isfinite(linear_runs["fairness_regret"].values))


def test_fairx_linear_policies_do_not_concentrate(linear_runs):
    """FairX-LinTS spreads exposure: its late conventional regret stays far above LinTS's."""
    def late(pol):
        v = linear_runs["regret"].sel(policy=pol).values
        return (v[:, 1] - v[:, 0]) / (3 * T)

    assert _lower(late("FairX-LinTS") - 10 * late("LinTS")) > 0


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["FairX-LinUCB-AY", "FairX-LinTS-NIG", "FairX-LinEG"])
def test_fairness_regret_sublinear_long_horizon(variant):
    """Slow: the default Abbasi-Yadkori beta_t (a larger constant: its per-round fairness regret only
    starts falling once beta_t sqrt(d / t) is small), the NIG posterior, and FairX-LinEG with
    epsilon = 0 over 4000 -> 32000 rounds: FR(8 T0) / FR(T0) well below 8 (sqrt: ~2.8)."""
    env = linear_bandit(5, 3, sigma=0.5)
    pol = {"FairX-LinUCB-AY": fairx_linucb(M, lam=0.25, noise_sd=0.5, theta_bound=2.0),
           "FairX-LinTS-NIG": fairx_lints(linear_normal_inverse_gamma(0.0, 1.0, 2.0, 0.5), M),
           "FairX-LinEG": fairx_lineg(M, epsilon=0.0, lam=0.25)}[variant]
    ds = bf.simulate(5, env, {variant: pol}, 32_000, R, merit=M, checkpoints=[4000, 32_000])
    fr = ds["fairness_regret"].sel(policy=variant).values
    assert _upper(fr[:, 1] - 5.0 * fr[:, 0]) < 0


# --------------------------------------------------------------------------- environment


def test_environment_rounds():
    theta = np.array([0.5, -1.0, 0.25, 2.0])
    env = linear_bandit(7, 4, theta=theta, sigma=0.1, context_mean=np.arange(4) / 4, context_scale=0.5)
    assert env.spec.n_features == 4 and env.spec.n_arms == 7 and env.spec.reward_range is None
    params = env.reset(jax.random.key(0))
    np.testing.assert_allclose(params, theta, rtol=1e-6)
    keys = jax.random.split(jax.random.key(1), 4000)
    rnd = jax.vmap(env.step, in_axes=(0, None, None))(keys, params, jnp.int32(1))
    x = np.asarray(rnd.obs.contexts)
    assert x.shape == (4000, 7, 4) and rnd.reward.shape == (4000, 7) and rnd.mean.shape == (4000, 7)
    np.testing.assert_allclose(rnd.mean, x @ theta, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(x - np.arange(4) / 4, axis=2), 0.5, rtol=1e-5)  # on the sphere
    resid = np.asarray(rnd.reward - rnd.mean)
    assert abs(resid.std() - 0.1) < 0.005 and abs(resid.mean()) < 0.002
    # arm_means: the expected reward of each slot, E[x_a] . theta, matched by the sample average
    means = np.asarray(env.arm_means(params))
    np.testing.assert_allclose(means, np.full(7, (np.arange(4) / 4) @ theta), rtol=1e-6)
    assert np.all(np.abs(np.asarray(rnd.mean).mean(0) - means) < 5 * 0.5 * np.linalg.norm(theta) / np.sqrt(4000))


def test_theta_drawn_per_run():
    env = linear_bandit(3, 5, theta_scale=2.0, contexts="gaussian")
    th = np.asarray(jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 4000)))
    assert th.shape == (4000, 5) and abs(th.std() - 2.0) < 0.05
    rnd = env.step(jax.random.key(1), jnp.asarray(th[0]), jnp.int32(3))
    assert rnd.obs.contexts.shape == (3, 5) and int(rnd.obs.t) == 3


@pytest.mark.parametrize("contexts,d", [("sphere", 1), ("sphere", 2), ("sphere", 6), ("gaussian", 3)])
def test_bernoulli_arm_means_quadrature(contexts, d):
    """E[sigmoid(theta . x_a)] by quadrature vs a large Monte Carlo average of the per-round means."""
    rng = np.random.default_rng(d)
    theta = rng.normal(size=d) * 2
    cm = rng.normal(size=(4, d)) * 0.3
    env = linear_bandit(4, d, theta=theta, contexts=contexts, context_mean=cm, context_scale=0.8, noise="bernoulli")
    assert env.spec.reward_range == (0.0, 1.0)
    params = env.reset(jax.random.key(0))
    rnd = jax.vmap(env.step, in_axes=(0, None, None))(jax.random.split(jax.random.key(2), 100_000), params, 1)
    mc = np.asarray(rnd.mean, np.float64)
    assert set(np.unique(np.asarray(rnd.reward))) <= {0.0, 1.0}
    se = mc.std(0) / np.sqrt(mc.shape[0])
    assert np.all(np.abs(mc.mean(0) - np.asarray(env.arm_means(params))) < 4.5 * se + 1e-6)


def test_context_pool():
    rng = np.random.default_rng(0)
    pool = rng.normal(size=(10, 3, 2))
    theta = np.array([1.0, -0.5])
    env = linear_bandit(3, 2, theta=theta, contexts=pool, reward_range=(-10.0, 10.0))
    rnd = env.step(jax.random.key(0), env.reset(jax.random.key(1)), jnp.int32(1))
    x = np.asarray(rnd.obs.contexts)
    assert any(np.allclose(x, p, atol=1e-6) for p in pool)  # one dataset row for all candidates
    np.testing.assert_allclose(env.arm_means(jnp.asarray(theta)), (pool @ theta).mean(0), rtol=1e-5)
    env2 = linear_bandit(3, 2, theta=theta, contexts=pool[:, 0], noise="bernoulli")
    m = np.asarray(env2.arm_means(jnp.asarray(theta)))
    np.testing.assert_allclose(m, np.full(3, (1 / (1 + np.exp(-(pool[:, 0] @ theta)))).mean()), rtol=1e-5)


# --------------------------------------------------------------------------- bad inputs


def test_context_dimension_mismatch_is_reported():
    env = linear_bandit(4, 5)  # supplies contexts [4, 5]
    rnd = env.step(jax.random.key(0), env.reset(jax.random.key(1)), jnp.int32(1))
    wrong = Spec(n_arms=4, group_of_arm=np.zeros(4, np.int32), n_groups=1, n_features=3)
    for pol in (fairx_lints(linear_known_variance(), M), fairx_linucb(M), fairx_lineg(M), linucb(),
                lints(linear_known_variance())):
        state = pol.init(jax.random.key(0), wrong)
        with pytest.raises(ValueError, match=r"obs.contexts must be \[K, n_features=3\], got shape \(4, 5\)"):
            pol.select(jax.random.key(1), state, rnd.obs)
        with pytest.raises(ValueError, match="n_features=3"):
            pol.update(state, rnd.obs, jnp.int32(0), jnp.float32(1.0))
        with pytest.raises(ValueError, match="needs obs.contexts"):
            pol.select(jax.random.key(1), state, Observation(jnp.int32(1)))
        with pytest.raises(ValueError, match=r"needs spec.n_features >= 1"):
            pol.init(jax.random.key(0), bf.bernoulli_arms([0.2, 0.4]).spec)


@pytest.mark.parametrize(
    "build,exc,match",
    [
        (lambda: linear_bandit(3, 2, theta=[1.0, 2.0, 3.0]), ValueError, "theta has length 3 but n_features is 2"),
        (lambda: linear_bandit(3, 2, theta=[1.0, np.inf]), ValueError, r"theta\[1\]: must be finite"),
        (lambda: linear_bandit(3, 2, contexts=np.array([[0.0, np.nan]])), ValueError, "contexts must be finite"),
        (lambda: linear_bandit(3, 2, contexts=np.ones((5, 3))), ValueError,
         "contexts have 3 features but n_features is 2"),
        (lambda: linear_bandit(3, 2, contexts=np.ones((5, 4, 2))), ValueError, "has K=4 candidates but n_arms is 3"),
        (lambda: linear_bandit(3, 2, contexts=np.ones(5)), ValueError, r"must be \[N, d\] or \[N, K, d\]"),
        (lambda: linear_bandit(3, 2, contexts="ball"), ValueError,
         "contexts: invalid value: allowed one of 'sphere', 'gaussian'"),
        (lambda: linear_bandit(3, 2, context_mean=[0.0, np.nan]), ValueError, r"context_mean\[1\]: must be finite"),
        (lambda: linear_bandit(3, 2, context_mean=[0.0, 1.0, 2.0]), ValueError, "context_mean must have shape"),
        (lambda: linear_bandit(3, 2, context_scale=0.0), ValueError,
         r"context_scale: out of range: allowed a number in \(0, inf\)"),
        (lambda: linear_bandit(3, 2, contexts=np.ones((4, 2)), context_scale=2.0), ValueError, "not to a pool"),
        (lambda: linear_bandit(3, 2, sigma=-1.0), ValueError, r"sigma: out of range: allowed a number in \(0, inf\)"),
        (lambda: linear_bandit(3, 2, noise="bernoulli", sigma=1.0), ValueError, "sigma only applies"),
        (lambda: linear_bandit(3, 2, noise="poisson"), ValueError,
         "noise: invalid value: allowed one of 'gaussian', 'bernoulli'"),
        (lambda: linear_bandit(3, 2, theta_scale=np.nan), ValueError, "theta_scale: must be finite"),
        (lambda: linear_bandit(0, 2), ValueError, r"n_arms: out of range: allowed an integer in \[1, inf\)"),
        (lambda: linear_bandit(3, 0), ValueError, r"n_features: out of range: allowed an integer in \[1, inf\)"),
        (lambda: linear_bandit(3, 2, groups=[0, 1]), ValueError, "groups has 2 arms but n_arms is 3"),
        (lambda: linear_bandit(3, 2, reward_range=(0.0, 1.0)), ValueError, "theta is fixed and the contexts are"),
        (lambda: linear_bandit(3, 2, theta=[1.0, 1.0], reward_range=(-1.0, 1.0)), ValueError,
         "does not contain every mean reward"),
        (lambda: linear_bandit(3, 2, noise="bernoulli", reward_range=(0.2, 1.0)), ValueError, "must contain"),
        (lambda: fairx_linucb(M, lam=0.0), ValueError, r"lam: out of range: allowed a number in \(0, inf\)"),
        (lambda: fairx_linucb(M, beta=-1.0), ValueError, r"beta: out of range: allowed a number in \(0, inf\)"),
        (lambda: fairx_linucb(M, delta=1.0), ValueError, r"delta: out of range: allowed a number in \(0, 1\)"),
        (lambda: fairx_linucb(M, noise_sd=0.0), ValueError, r"noise_sd: out of range: allowed a number in \(0, inf\)"),
        (lambda: fairx_linucb(M, theta_bound=np.inf), ValueError, "theta_bound: must be finite"),
        (lambda: fairx_linucb(M, learning_rate=0.0), ValueError,
         r"learning_rate: out of range: allowed a number in \(0, inf\)"),
        (lambda: fairx_linucb(M, steps=-1), ValueError, r"steps: out of range: allowed an integer in \[0, inf\)"),
        (lambda: fairx_linucb(M, start="upper"), ValueError,
         "start: invalid value: allowed one of 'center', 'linearized'"),
        (lambda: linucb(beta=0.0), ValueError, r"beta: out of range: allowed a number in \(0, inf\)"),
        (lambda: linucb(lam=-2.0), ValueError, r"lam: out of range: allowed a number in \(0, inf\)"),
        (lambda: fairx_lineg(M, epsilon=1.5), ValueError, r"epsilon: out of range: allowed a number in \[0, 1\]"),
        (lambda: fairx_lineg(M, lam=np.nan), ValueError, "lam: must be finite"),
        (lambda: fairx_lints(bf.beta_bernoulli(), M), TypeError, "posterior must be a bayesfair LinearPosterior"),
        (lambda: lints(None), TypeError, "posterior must be a bayesfair LinearPosterior"),
        (lambda: fairx_lints(linear_known_variance(), lambda mu: mu - 5.0), ValueError, "merit fn must be > 0"),
    ],
)
def test_constructors_validate(build, exc, match):
    with pytest.raises(exc, match=match):
        build()
