"""The Jones-Faddy skew-t (bayesfair.posteriors.skew_t): density, sampler and mean."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from scipy import integrate, stats

from bayesfair.posteriors.skew_t import JonesFaddySkewT, jf_skew_t_mean


def _params(rng, n):
    """Random (nu, w, loc, scale) over tails from Cauchy-like to near-Gaussian and strong skews."""
    return zip(rng.uniform(0.8, 60.0, n), rng.uniform(0.05, 0.95, n), rng.normal(0, 3, n), rng.uniform(0.1, 5.0, n),
               strict=True)


def test_density_is_scipy_jf_skew_t_and_integrates_to_one():
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        for nu, w, loc, scale in _params(rng, 25):
            d = JonesFaddySkewT(nu, w, loc, scale)
            x = loc + scale * np.concatenate([rng.standard_cauchy(30), [-1e4, -30.0, 0.0, 30.0, 1e4]])
            want = stats.jf_skew_t.logpdf(x, w * nu, (1 - w) * nu, loc, scale)
            np.testing.assert_allclose(np.asarray(d.log_prob(x)), want, rtol=1e-9, atol=1e-9)
            mass, err = integrate.quad(lambda v, d=d: float(np.exp(d.log_prob(v))), -np.inf, np.inf, limit=400)
            assert abs(mass - 1.0) < 1e-6 + 10 * err


def test_half_skew_weight_is_student_t():
    import numpyro.distributions as dist

    x = np.linspace(-50, 50, 101)
    with jax.enable_x64(True):
        for nu in (1.0, 3.5, 30.0):
            np.testing.assert_allclose(np.asarray(JonesFaddySkewT(nu, 0.5, 0.2, 1.3).log_prob(x)),
                                       np.asarray(dist.StudentT(nu, 0.2, 1.3).log_prob(x)), rtol=1e-11)


def test_log_density_is_finite_far_in_both_tails():
    """At |t| = 1e12 the naive 1 - t / sqrt(nu + t^2) is 0 in float64; the density must not be -inf."""
    with jax.enable_x64(True):
        d = JonesFaddySkewT(5.0, 0.3)
        lp = np.asarray(d.log_prob(np.array([-1e12, 1e12])))
        ref = np.asarray(d.log_prob(np.array([-1e11, 1e11])))
    a, b = 1.5, 3.5  # a = w nu, b = (1 - w) nu; tails ~ t^(-2b-1) to the right, |t|^(-2a-1) to the left
    assert np.all(np.isfinite(lp))
    np.testing.assert_allclose(ref - lp, [(2 * a + 1) * np.log(10), (2 * b + 1) * np.log(10)], rtol=1e-9)


def test_sampler_draws_the_density():
    """Kolmogorov-Smirnov of 20,000 draws against SciPy's cdf for 12 random parameter sets, each at
    alpha = 1e-3 / 12 (a correct sampler fails with probability <= 1e-3)."""
    rng = np.random.default_rng(1)
    keys = jax.random.split(jax.random.key(2), 12)
    with jax.enable_x64(True):
        for key, (nu, w, loc, scale) in zip(keys, _params(rng, 12), strict=True):
            draws = np.asarray(JonesFaddySkewT(nu, w, loc, scale).sample(key, (20_000,)))
            p = stats.kstest(draws, stats.jf_skew_t(w * nu, (1 - w) * nu, loc, scale).cdf).pvalue
            assert p > 1e-3 / 12, (nu, w, p)


def test_mean_is_the_density_s_mean_and_nan_without_one():
    rng = np.random.default_rng(3)
    with jax.enable_x64(True):
        for nu, w, loc, scale in _params(rng, 20):
            a, b = w * nu, (1 - w) * nu
            got = float(JonesFaddySkewT(nu, w, loc, scale).mean)
            if min(a, b) > 0.5:
                np.testing.assert_allclose(got, stats.jf_skew_t.mean(a, b, loc, scale), rtol=1e-9)
            else:
                assert np.isnan(got)
        assert float(jf_skew_t_mean(6.0, 0.5)) == 0.0


def test_rejects_parameters_outside_the_support():
    with jax.enable_x64(True), pytest.raises(ValueError):
        JonesFaddySkewT(3.0, 1.2, validate_args=True)
