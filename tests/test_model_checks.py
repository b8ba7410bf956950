"""The public model checks of bayesfair.diagnostics.model_checks, on synthetic posterior predictive
draws whose truth is known (no MCMC: the checks, not a sampler, are under test).

False-failure rates are stated per test: each check is run on many independent data sets drawn
from the model it checks, and the failure count is compared with a binomial bound.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from scipy import stats

from bayesfair.diagnostics import calibration_check, compare_bias, ppc_verdict


def _tree(y, rep, ll=None):
    d = {"observed_data": xr.Dataset({"y": ("obs", np.asarray(y, float))}),
         "posterior_predictive": xr.Dataset({"y": (("chain", "draw", "obs"), np.asarray(rep, float))})}
    if ll is not None:
        d["posterior"] = xr.Dataset({"a": (("chain", "draw"), ll[..., 0])})
        d["log_likelihood"] = xr.Dataset({"y": (("chain", "draw", "obs"), ll)})
    return xr.DataTree.from_dict(d)


def test_ppc_verdict_rarely_fails_a_true_model_and_fails_a_wrong_one():
    """y and y_rep from the same N(0, 1): each of the 7 statistics fails w.p. <= 1% (conservative
    for posterior predictive p-values; here exact replication, so about 1%); over 60 data sets at
    most 60 * 7 * 0.01 = 4.2 expected failures, bounded by the binomial 1e-4 quantile. Left-skewed
    data against Gaussian replications fail the skewness (and quantiles) in every data set."""
    rng = np.random.default_rng(0)
    fails = 0
    for _ in range(60):
        out = ppc_verdict(_tree(rng.normal(size=300), rng.normal(size=(1, 400, 300))))
        fails += len(out["failed"])
        assert out["kind"] == "continuous" and set(out["statistics"]) >= {"mean", "sd", "q05", "skewness"}
    assert fails <= stats.binom.ppf(1 - 1e-4, 60 * 7, 0.01)
    for _ in range(5):
        y = -rng.gamma(2.0, size=300)
        rep = rng.normal(y.mean(), y.std(), size=(1, 400, 300))
        out = ppc_verdict(_tree(y, rep))
        assert not out["passed"] and "skewness" in out["failed"]


def test_ppc_verdict_kinds_levels_groups_and_bad_input():
    rng = np.random.default_rng(1)
    y = rng.binomial(9, 0.4, 200)
    out = ppc_verdict(_tree(y, rng.binomial(9, 0.4, (2, 100, 200))), groups={"a": np.arange(200) < 50})
    assert out["kind"] == "discrete" and "share[0]" in out["statistics"] and "mean[a]" in out["statistics"]
    over = rng.binomial(9, rng.beta(1, 1.5, 200))  # over-dispersed against a binomial
    assert not ppc_verdict(_tree(over, rng.binomial(9, over.mean() / 9, (1, 400, 200))))["passed"]
    assert ppc_verdict(_tree(rng.integers(0, 2, 50), rng.integers(0, 2, (1, 50, 50))))["kind"] == "binary"
    with pytest.raises(ValueError, match="alpha"):
        ppc_verdict(_tree(y, rng.binomial(9, 0.4, (1, 10, 200))), alpha=0)
    with pytest.raises(ValueError, match="no observed_data/z"):
        ppc_verdict(_tree(y, rng.binomial(9, 0.4, (1, 10, 200))), var="z")


def test_calibration_check_rate_and_power():
    """Calibrated forecasts: P(fail) <= 1% per data set (the replications come from the same
    probabilities), so at most the binomial 1e-4 quantile of 40 data sets fail. Forecasts that are
    too extreme (true log-odds halved) fail in every one of 5 data sets."""
    rng = np.random.default_rng(2)
    fails = 0
    for _ in range(40):
        p = rng.uniform(0.02, 0.98, 400)
        y = rng.uniform(size=400) < p
        out = calibration_check(_tree(y, rng.uniform(size=(1, 300, 400)) < p), draws=100)
        fails += not out["passed"]
    assert fails <= stats.binom.ppf(1 - 1e-4, 40, 0.01)
    for _ in range(5):
        logit = rng.normal(0, 2.5, 600)
        y = rng.uniform(size=600) < 1 / (1 + np.exp(-logit / 2))  # the truth is flatter than the forecast
        out = calibration_check(_tree(y, rng.uniform(size=(1, 300, 600)) < 1 / (1 + np.exp(-logit))), draws=100)
        assert not out["passed"] and out["miscalibration"] > out["miscalibration_replicated"]
        assert len(out["curve"]["cep"]) == 20
    with pytest.raises(ValueError, match="0/1 outcome"):
        calibration_check(_tree([0, 2], np.zeros((1, 20, 2))))


def test_compare_bias_says_no_difference_is_not_no_bias():
    rng = np.random.default_rng(3)
    ll = -0.5 * rng.normal(size=(2, 200, 100)) ** 2
    out = compare_bias(_tree(np.zeros(100), np.zeros((2, 200, 100)), ll),
                       _tree(np.zeros(100), np.zeros((2, 200, 100)), ll + 1e-3 * rng.normal(size=ll.shape)))
    assert set(out["table"]) == {"with bias", "without bias"} and "not evidence of no bias" in out["reading"]
    assert out["csv"].startswith(",") or "elpd" in out["csv"]
    better = compare_bias(_tree(np.zeros(100), np.zeros((2, 200, 100)), ll),
                          _tree(np.zeros(100), np.zeros((2, 200, 100)), ll - 1.0))
    assert better["first"] == "with bias" and "predicts better" in better["reading"]
    # the table is ArviZ's unrounded numbers: a per-observation shift c moves the elpd by exactly -sum(c)
    shift = 0.3 + 0.05 * rng.normal(size=100)
    shifted = compare_bias(_tree(np.zeros(100), np.zeros((2, 200, 100)), ll),
                           _tree(np.zeros(100), np.zeros((2, 200, 100)), ll - shift))
    np.testing.assert_allclose(shifted["elpd_diff"], -shift.sum(), rtol=1e-9)
    assert f"predicts better by {shift.sum():.2f} elpd" in shifted["reading"] and "by -" not in shifted["reading"]
