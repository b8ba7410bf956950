"""Bayesian linear-regression posteriors: conjugate rank-one path vs NUTS, vs the batch closed form.

NUTS agreement: for 4 random data sets per family (d in 2..4, n in 20..60) NUTS samples the
family's NumPyro model, and the posterior mean and standard deviation of every coordinate of theta
(and of sigma2 for NIG) are compared with the closed form. Tolerance: Z standard errors of the
Monte Carlo estimate, from the effective sample size (mean: sd / sqrt(ESS); sd:
sd * sqrt((kurtosis - 1) / (4 ESS)), with the exact kurtosis of the marginal: 3 for a Gaussian,
3 + 6 / (nu - 4) for a Student-t with nu = 2a, 3 + (30a - 66) / ((a - 3)(a - 4)) for InvGamma(a, .)).
At most 72 comparisons at Z = 4.5 (each fails with probability ~7e-6 for a correct
implementation): false-failure rate below 1e-3. The same draws must *reject* deliberately wrong
updates (each observation counted twice; the noise variance ignored; a += 1 instead of 1/2), which
shows the check has power.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.diagnostics import effective_sample_size
from numpyro.infer import MCMC, NUTS

import bayesfair as bf  # noqa: F401  (before jax use: device setup)
from bayesfair.posteriors import (
    LinearNIGState,
    LinearState,
    chol_rank_one_update,
    fit_linear,
    linear_known_variance,
    linear_normal_inverse_gamma,
)

Z = 4.5
N_SETS = 4
FAMILIES = {
    "known_variance": linear_known_variance(0.3, 2.0, 0.5),
    "nig": linear_normal_inverse_gamma(0.1, 0.5, 3.0, 2.0),
}


def _dataset(rng: np.random.Generator):
    d = int(rng.integers(2, 5))
    n = int(rng.integers(20, 61))
    X = rng.normal(size=(n, d))
    theta = rng.normal(size=d)
    y = X @ theta + rng.uniform(0.3, 1.5) * rng.normal(size=n)
    return X.astype(np.float32), y.astype(np.float32)


def _exact_moments(family: str, post, X, y) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """site -> (mean, sd, kurtosis) of the closed-form marginals, from the rank-one state."""
    state = fit_linear(post, X, y)
    mean = np.asarray(post.mean(state), np.float64)
    sd = np.sqrt(np.asarray(post.variance(state), np.float64))
    if family == "known_variance":
        return {"theta": (mean, sd, np.full_like(mean, 3.0))}
    a, b = float(state.a), float(state.b)
    nu = 2.0 * a
    s2_mean = b / (a - 1.0)
    s2_sd = s2_mean / np.sqrt(a - 2.0)
    s2_kurt = 3.0 + (30.0 * a - 66.0) / ((a - 3.0) * (a - 4.0))
    return {"theta": (mean, sd, np.full_like(mean, 3.0 + 6.0 / (nu - 4.0))),
            "sigma2": (np.array([s2_mean]), np.array([s2_sd]), np.array([s2_kurt]))}


def _disagreements(exact, draws) -> list[str]:
    """The comparisons (site, coordinate, statistic) that NUTS rejects at Z standard errors."""
    bad = []
    for site, (mean, sd, kurt) in exact.items():
        d = np.asarray(draws[site], np.float64).reshape(1, -1, mean.size)  # [chain, S, coords]
        ess = np.asarray(effective_sample_size(d))
        assert np.all(ess > 500), f"NUTS mixed poorly on {site}: ESS {ess}"
        nuts_mean, nuts_sd = d[0].mean(axis=0), d[0].std(axis=0, ddof=1)
        se_mean = sd / np.sqrt(ess)
        se_sd = sd * np.sqrt((kurt - 1.0) / (4.0 * ess))
        for i in np.flatnonzero(np.abs(nuts_mean - mean) >= Z * se_mean):
            bad.append(f"{site}[{i}] mean: NUTS {nuts_mean[i]:.4f} vs {mean[i]:.4f} (se {se_mean[i]:.4f})")
        for i in np.flatnonzero(np.abs(nuts_sd - sd) >= Z * se_sd):
            bad.append(f"{site}[{i}] sd: NUTS {nuts_sd[i]:.4f} vs {sd[i]:.4f} (se {se_sd[i]:.4f})")
    return bad


@pytest.fixture(scope="module", params=list(FAMILIES))
def nuts_runs(request):
    """(family, [(X, y, draws)]) for N_SETS random data sets, NUTS on the family's own model."""
    family = request.param
    post = FAMILIES[family]
    rng = np.random.default_rng(7 + len(family))
    key = jax.random.key(3)
    out = []
    for _ in range(N_SETS):
        X, y = _dataset(rng)
        key, sub = jax.random.split(key)
        mcmc = MCMC(NUTS(post.model), num_warmup=400, num_samples=3000, num_chains=1, progress_bar=False)
        mcmc.run(sub, jnp.asarray(X), jnp.asarray(y))
        out.append((X, y, {k: np.asarray(v) for k, v in mcmc.get_samples().items()}))
    return family, out


def test_conjugate_matches_nuts(nuts_runs):
    family, runs = nuts_runs
    post = FAMILIES[family]
    for i, (X, y, draws) in enumerate(runs):
        bad = _disagreements(_exact_moments(family, post, X, y), draws)
        assert not bad, f"{family} set {i} (n={X.shape[0]}, d={X.shape[1]}): " + "; ".join(bad)


def _double_counting(post):
    """A wrong update: every observation is applied twice."""
    return post._replace(update=lambda s, obs: post.update(post.update(s, obs), obs))


def _wrong_shape_update(post):
    """A wrong NIG update: a += 1 per observation instead of 1/2 (each observation counted twice in a)."""
    def update(s, obs):
        new = post.update(s, obs)
        return new._replace(count=new.count + 1, a=new.a + 0.5)

    return post._replace(update=update)


WRONG = {
    "known_variance": {"double_counting": _double_counting(FAMILIES["known_variance"]),
                       "noise_var_ignored": linear_known_variance(0.3, 2.0, 1.0)},
    "nig": {"double_counting": _double_counting(FAMILIES["nig"]),
            "a_plus_one": _wrong_shape_update(FAMILIES["nig"])},
}


def test_wrong_updates_are_rejected(nuts_runs):
    """The agreement check has power: each deliberately wrong posterior fails it on every data set."""
    family, runs = nuts_runs
    for bug, wrong in WRONG[family].items():
        for i, (X, y, draws) in enumerate(runs):
            assert _disagreements(_exact_moments(family, wrong, X, y), draws), (
                f"{family}: the wrong update {bug!r} was not detected on set {i}")


# --------------------------------------------------------------------------- closed form


def _batch_known(X, y, m0, v0, s2):
    d = X.shape[1]
    prec = np.eye(d) / v0 + X.T @ X / s2
    cov = np.linalg.inv(prec)
    return cov @ (np.full(d, m0) / v0 + X.T @ y / s2), cov


def _batch_nig(X, y, m0, kappa0, a0, b0):
    d = X.shape[1]
    prec = kappa0 * np.eye(d) + X.T @ X
    m0v = np.full(d, m0)
    mean = np.linalg.solve(prec, kappa0 * m0v + X.T @ y)
    a = a0 + X.shape[0] / 2
    b = b0 + 0.5 * (y @ y + kappa0 * m0v @ m0v - mean @ prec @ mean)
    return mean, b / (a - 1) * np.linalg.inv(prec), a, b


@pytest.mark.parametrize("cholesky", ["refresh", "rank_one"])
def test_rank_one_updates_equal_the_batch_closed_form(cholesky):
    rng = np.random.default_rng(11)
    for d, n in ((1, 5), (3, 40), (6, 200)):
        X = rng.normal(size=(n, d))
        y = X @ rng.normal(size=d) + 0.6 * rng.normal(size=n)
        X32, y32 = X.astype(np.float32), y.astype(np.float32)
        X, y = X32.astype(np.float64), y32.astype(np.float64)

        post = linear_known_variance(0.2, 1.5, 0.36, cholesky=cholesky)
        state = fit_linear(post, X32, y32)
        assert isinstance(state, LinearState)
        mean, cov = _batch_known(X, y, 0.2, 1.5, 0.36)
        np.testing.assert_allclose(post.mean(state), mean, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(post.cov(state), cov, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(post.variance(state), np.diag(cov), rtol=1e-4, atol=1e-6)
        lam = np.asarray(state.precision + state.precision_err)
        np.testing.assert_allclose(state.chol @ state.chol.T, lam, rtol=1e-4, atol=1e-5 * np.abs(lam).max())

        post = linear_normal_inverse_gamma(-0.1, 0.7, 2.5, 0.8, cholesky=cholesky)
        state = fit_linear(post, X32, y32)
        assert isinstance(state, LinearNIGState)
        mean, cov, a, b = _batch_nig(X, y, -0.1, 0.7, 2.5, 0.8)
        assert float(state.a) == a
        np.testing.assert_allclose(float(state.b), b, rtol=1e-4)
        np.testing.assert_allclose(post.mean(state), mean, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(post.cov(state), cov, rtol=1e-4, atol=1e-6)


def test_long_run_float32_stays_accurate():
    """1e5 rank-one updates in float32 (d = 8, anisotropic contexts, low noise) vs the float64 batch
    answer: the module docstring's claim that the compensated sums (and, for ``rank_one``, the
    refined mean) keep the posterior mean within a small fraction of a posterior sd. Plain float32
    sums were off by 0.09 sd here."""
    rng = np.random.default_rng(5)
    n, d = 100_000, 8
    X = rng.normal(size=(n, d)) * np.array([5.0, 2.0, 1.0, 1.0, 1.0, 0.5, 0.2, 0.05])
    y = X @ rng.normal(size=d) + 0.3 * rng.normal(size=n)
    X32, y32 = X.astype(np.float32), y.astype(np.float32)
    X, y = X32.astype(np.float64), y32.astype(np.float64)
    mean, cov = _batch_known(X, y, 0.0, 1.0, 0.09)
    for mode in ("refresh", "rank_one"):
        post = linear_known_variance(0.0, 1.0, 0.09, cholesky=mode)
        state = jax.jit(lambda a, b, p=post: fit_linear(p, a, b))(X32, y32)
        got_cov = np.asarray(post.cov(state), np.float64)
        assert np.linalg.norm(got_cov - cov, 2) < 1e-3 * np.linalg.norm(cov, 2), mode
        # the mean error in units of the posterior sd (what TS draws are sensitive to)
        err = np.abs(np.asarray(post.mean(state), np.float64) - mean) / np.sqrt(np.diag(cov))
        assert err.max() < 0.01, (mode, err)


def test_chol_rank_one_update_matches_refactorization():
    rng = np.random.default_rng(2)
    for d in (1, 2, 5, 9):
        A = rng.normal(size=(d, d))
        P = (A @ A.T + np.eye(d)).astype(np.float32)
        x = rng.normal(size=d).astype(np.float32)
        got = np.asarray(chol_rank_one_update(jnp.linalg.cholesky(P), jnp.asarray(x)))
        want = np.linalg.cholesky(P.astype(np.float64) + np.outer(x, x))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        assert np.all(np.triu(got, 1) == 0)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_sampler_matches_its_own_moments(family):
    """TS draws from the conjugate state have the closed-form mean and covariance (and are jit/vmap-safe)."""
    post = FAMILIES[family]
    X, y = _dataset(np.random.default_rng(4))
    state = fit_linear(post, X, y)
    n = 40_000
    draws = np.asarray(jax.jit(jax.vmap(post.sample, in_axes=(0, None)))(
        jax.random.split(jax.random.key(8), n), state), np.float64)
    assert draws.shape == (n, X.shape[1]) and np.all(np.isfinite(draws))
    mean = np.asarray(post.mean(state), np.float64)
    cov = np.asarray(post.cov(state), np.float64)
    sd = np.sqrt(np.diag(cov))
    kurt = 3.0 if family == "known_variance" else 3.0 + 6.0 / (2.0 * float(state.a) - 4.0)
    assert np.all(np.abs(draws.mean(0) - mean) < Z * sd / np.sqrt(n))
    assert np.all(np.abs(draws.std(0) - sd) < Z * sd * np.sqrt((kurt - 1.0) / (4.0 * n)))
    corr = np.corrcoef(draws.T)
    want = cov / np.outer(sd, sd)
    assert np.all(np.abs(corr - want) < Z * 1.5 / np.sqrt(n))  # se of a correlation <= ~1/sqrt(n)


def test_nig_variance_is_infinite_without_second_moment():
    post = linear_normal_inverse_gamma(0.0, 1.0, 0.5, 1.0)
    state = post.init(2)
    assert np.all(np.isinf(np.asarray(post.variance(state))))
    theta = post.sample(jax.random.key(0), state)  # a0 < 1 uses the small-shape gamma path
    assert theta.shape == (2,) and np.all(np.isfinite(np.asarray(theta)))


@pytest.mark.parametrize(
    "build,exc,match",
    [
        (lambda: linear_known_variance(prior_var=0.0), ValueError,
         r"prior_var: out of range: allowed a number in \(0, inf\)"),
        (lambda: linear_known_variance(noise_var=-1.0), ValueError,
         r"noise_var: out of range: allowed a number in \(0, inf\)"),
        (lambda: linear_known_variance(noise_var=float("inf")), ValueError, "noise_var: must be finite"),
        (lambda: linear_known_variance(prior_mean=[0.0, np.nan]), ValueError, r"prior_mean\[1\]: must be finite"),
        (lambda: linear_known_variance(prior_mean=[[0.0]]), TypeError,
         r"prior_mean\[0\]: wrong type: expected a number"),
        (lambda: linear_known_variance(cholesky="qr"), ValueError, "cholesky: invalid value: allowed one of"),
        (lambda: linear_known_variance(prior_var="big"), TypeError, "prior_var: wrong type: expected a number"),
        (lambda: linear_normal_inverse_gamma(kappa0=0.0), ValueError,
         r"kappa0: out of range: allowed a number in \(0, inf\)"),
        (lambda: linear_normal_inverse_gamma(a0=-1.0), ValueError, r"a0: out of range: allowed a number in \(0, inf\)"),
        (lambda: linear_normal_inverse_gamma(b0=np.nan), ValueError, "b0: must be finite"),
        (lambda: linear_known_variance([0.1, 0.2, 0.3]).init(2), ValueError,
         "prior_mean has length 3 but n_features is 2"),
        (lambda: linear_known_variance().init(0), ValueError, "n_features must be an integer >= 1"),
        (lambda: fit_linear(linear_known_variance(), np.zeros((3, 2)), np.zeros(4)), ValueError,
         r"X must be \[n, d\] and y \[n\]"),
    ],
)
def test_hyperparameters_validated(build, exc, match):
    with pytest.raises(exc, match=match):
        build()
