"""Simulation-based calibration (bayesfair.inference.sbc) of every conjugate posterior family.

Each family test runs N = 200 replications with L = 99 posterior draws (ranks in 0..99, 20
chi-square bins of 10 expected ranks). ``SBCResult.passed`` fails when any of the 2 P p-values
(chi-square and ECDF, P scalar parameters) is below alpha / (2 P) with alpha = 1e-3, so by
Bonferroni a correct family fails with probability <= 1e-3; the coverage check (|coverage - 0.9|
<= 4 s.e.) adds about 6e-5. The wrong-prior test has power ~1 (p-values ~1e-30 measured).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from bayesfair.inference import sbc as S
from bayesfair.posteriors import (
    beta_bernoulli,
    linear_known_variance,
    linear_normal_inverse_gamma,
    normal_inverse_gamma,
    normal_known_variance,
)
from bayesfair.posteriors.group_bias import group_bias_posterior

N = 200
ALPHA = 1e-3


def _check_calibrated(res: S.SBCResult) -> None:
    assert res.replications == N and res.n_draws == 99 and res.bins == 20
    assert res.passed, res.summary()
    assert abs(res.coverage_all - 0.9) <= 4 * res.coverage_all_se, res.summary()


@pytest.mark.parametrize("posterior, size, n_obs", [
    (beta_bernoulli(2.0, 3.0), 3, 6),
    (beta_bernoulli(0.5, 0.5), 2, 4),
    (normal_known_variance(0.5, 2.0, 0.5), 3, 6),
    (normal_inverse_gamma(0.3, 2.0, 3.0, 2.0), 3, 9),
    (linear_known_variance(0.2, 1.5, 0.5), 3, 5),
    (linear_normal_inverse_gamma(0.0, 1.0, 3.0, 2.0), 3, 8),
], ids=["beta", "beta_small", "normal", "nig", "linear", "linear_nig"])
def test_conjugate_family_passes_sbc(posterior, size, n_obs):
    res = S.sbc(*S.conjugate_problem(posterior, size, n_obs), jax.random.key(11), replications=N, alpha=ALPHA)
    _check_calibrated(res)


@pytest.mark.parametrize("method", ["joint", "collapsed"])
def test_group_bias_conjugate_paths_pass_sbc(method):
    post = group_bias_posterior([0, 0, 1, 2], 2, tau=0.7, s=2.0, sigma=0.8, prior_mean=0.5, prior_sd=3.0,
                                method=method)
    res = S.sbc(*S.group_bias_problem(post, 16), jax.random.key(12), replications=N, alpha=ALPHA)
    _check_calibrated(res)
    # beta_bar [2] + beta [4, 2] + psi of the two non-reference groups [2, 2]; the reference psi (0) is left out
    assert len(res.names) == 14 and "psi[0,0]" not in res.names and "psi[2,1]" in res.names


def test_misstated_prior_fails_sbc(tmp_path):
    """Fitting with the prior variance understated 4x (0.25 instead of 1): posteriors too narrow."""
    problem = S.conjugate_problem(normal_known_variance(0.0, 0.25, 1.0), 4, 4,
                                  data_from=normal_known_variance(0.0, 1.0, 1.0))
    res = S.sbc(*problem, jax.random.key(13), replications=N, alpha=ALPHA)
    assert not res.passed and set(res.failing) == {"mu[0]", "mu[1]", "mu[2]", "mu[3]"}
    assert res.coverage_all < 0.8
    assert "FAILED" in res.summary()
    fig = res.plot(tmp_path / "sbc.png")
    assert (tmp_path / "sbc.png").stat().st_size > 0
    import matplotlib.pyplot as plt

    plt.close(fig)
    fig = res.plot(names=["mu[3]", "mu[1]"])
    assert [ax.get_title().split()[0] for ax in fig.axes if ax.get_visible()] == ["mu[3]", "mu[1]"]
    plt.close(fig)
    with pytest.raises(ValueError, match=r"names: \['theta'\] are not parameters"):
        res.plot(names=["theta"])


def test_loop_equals_vectorized_and_thinning():
    problem = S.conjugate_problem(normal_known_variance(), 2, 3, n_draws=40)
    a = S.sbc(*problem, jax.random.key(3), replications=6)
    b = S.sbc(*problem, jax.random.key(3), replications=6, vectorize=False)
    np.testing.assert_array_equal(a.ranks, b.ranks)
    c = S.sbc(*problem, jax.random.key(3), replications=30, thin=4)
    assert c.n_draws == 10 and c.ranks.max() <= 10


def test_ecdf_test_is_calibrated_under_uniform_ranks():
    """The Monte Carlo ECDF p-value is (nearly) uniform for uniform ranks: P(p <= 0.1) ~ 0.1 over 400 parameters."""
    rng = np.random.default_rng(0)
    ranks = rng.integers(0, 100, size=(N, 400))
    null = S._null_stats(N, 99, 2000)
    z, f = S._ecdf(ranks, 99)
    obs = np.max(np.abs(f - z[:, None]) / np.sqrt(z * (1 - z) / N)[:, None], axis=0)
    p = (1 + 2000 - np.searchsorted(null, obs, side="left")) / 2001
    frac = np.mean(p <= 0.1)  # binomial(400, 0.1): sd 0.015
    assert abs(frac - 0.1) < 0.06


def test_sbc_errors_name_the_argument():
    problem = S.conjugate_problem(normal_known_variance(), 2, 3)
    with pytest.raises(ValueError, match="replications"):
        S.sbc(*problem, jax.random.key(0), replications=1)
    with pytest.raises(ValueError, match="level"):
        S.sbc(*problem, jax.random.key(0), level=1.5)
    with pytest.raises(TypeError, match="fit must be callable"):
        S.sbc(problem.prior_draw, problem.simulate, None, jax.random.key(0))
    with pytest.raises(TypeError, match="conjugate_problem"):
        S.conjugate_problem(normal_known_variance(), 2, 3, data_from=linear_known_variance())
    with pytest.raises(ValueError, match="fit="):
        S.group_bias_problem(group_bias_posterior([0, 1], 1), 4, model_kwargs={"tau": None})


def test_non_finite_draws_are_an_error_not_rank_zero():
    """A NaN draw compares False both ways, so a fitter that failed in a few replications got rank
    0 there and could still pass; now the replications and parameters are named."""
    import jax.numpy as jnp

    problem = S.conjugate_problem(normal_known_variance(), 2, 3, n_draws=20)

    def flaky(data, key):  # replications with a negative first observation "fail"
        out = problem.fit(data, key)
        bad = jnp.asarray(jax.tree.leaves(data)[0]).reshape(-1)[0] < 0
        return jax.tree.map(lambda v: jnp.where(bad, jnp.nan, v), out)

    with pytest.raises(ValueError, match=r"fit's draws are not finite \(NaN or inf\) in \d+ of 40 replications"):
        S.sbc(problem.prior_draw, problem.simulate, flaky, jax.random.key(1), replications=40)
