"""The power study of the group-bias GLM's estimand (bayesfair.inference.glm_power) and its figure.

- the semi-synthetic outcomes have the stated level shift: over many replicates each group's mean
  outcome matches E[y] computed by hand from the generating point (an independent formula, not
  the model's code), for the Bernoulli and ordered-logistic likelihoods, within 4 standard errors;
  the true estimand is the hand-computed average counterfactual difference;
- :func:`power_point`'s posterior mean is the mean of the effects (not a product of means);
- bad input raises naming the field; a fit that fails the convergence verdict is counted (not
  dropped) and a fit that raises is counted with its message;
- the large-sample approximation (:func:`normal_power`) is the share of simulated normal intervals
  that exclude 0, :func:`detectable_effect` inverts it, and every recipe fit states it;
- slow: at effect 0 the 90% interval's coverage over 40 replicates is consistent with 0.9.
"""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.distributions.transforms import ZeroSumTransform
from scipy import stats

from bayesfair import plotting
from bayesfair.inference import fitting
from bayesfair.inference import glm_power as gp
from bayesfair.inference.glm_fit import GlmDesign


def _design(likelihood="bernoulli", n=200, seed=0, n_levels=None):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 2, n).astype(np.int32)
    b = rng.integers(0, 3, n).astype(np.int32)
    X = rng.normal(size=(n, 2))
    top = 1 if likelihood == "bernoulli" else n_levels - 1
    y = rng.integers(0, top + 1, n).astype(float)
    return GlmDesign(g, b, X, y, 2, 3, 0, likelihood, n_levels=n_levels, group_names=("ref", "sens"))


def _point(likelihood):
    p = {"sigma_bucket": np.float64(0.6), "gamma_z": np.array([-1.0, 1.1]), "beta": np.array([0.7, -0.4]),
         "delta": np.array([0.3]), "sigma_u": np.float64(0.3), "u_z": np.ones((2, 1)), "s_slope": np.float64(0.2),
         "lambda_z": np.ones((1, 2))}
    if likelihood == "ordered_logistic":
        p.update(cut_mid=np.float64(0.2), cut_gaps=np.array([1.0, 0.6, 1.4]))
    else:
        p["alpha"] = np.float64(-0.3)
    return p


def _by_hand(design, point, effect):
    """E[y] per row at the generating point, and as the reference group: written out from the model's
    definition (no bias terms other than delta), not through the package's code; the zero-sum bucket
    effects from their 2 coordinates by NumPyro's ZeroSumTransform."""
    with jax.enable_x64(True):
        gamma = point["sigma_bucket"] * np.asarray(ZeroSumTransform(1)(jnp.asarray(point["gamma_z"], jnp.float64)))
    assert gamma.shape == (3,) and abs(gamma.sum()) < 1e-12
    base = gamma[design.bucket] + design.X @ point["beta"] + point.get("alpha", 0)
    eta1 = base + effect * (design.group == 1)

    def mean(eta):
        if design.likelihood == "bernoulli":
            return 1 / (1 + np.exp(-eta))
        raw = np.r_[0.0, np.cumsum(point["cut_gaps"])]
        cut = point["cut_mid"] + raw - raw.mean()
        return (1 / (1 + np.exp(-(eta[:, None] - cut)))).sum(-1)  # E[level] = sum_k P(y > k)

    return mean(eta1), mean(base)


@pytest.mark.parametrize("likelihood,n_levels", [("bernoulli", None), ("ordered_logistic", 5)])
@pytest.mark.parametrize("effect", [0.0, 0.8])
def test_simulated_outcomes_have_the_stated_level_shift(likelihood, n_levels, effect):
    des = _design(likelihood, n_levels=n_levels)
    point = _point(likelihood)
    reps = 3000
    y = gp.simulate_outcomes(des, point, effect, jax.random.key(3), replicates=reps)
    assert y.shape == (reps, des.y.size)
    e1, e0 = _by_hand(des, point, effect)
    for grp in (0, 1):
        rows = des.group == grp
        per_rep = y[:, rows].mean(1)  # independent across replicates
        se = per_rep.std(ddof=1) / np.sqrt(reps)
        assert abs(per_rep.mean() - e1[rows].mean()) < 4 * se, (grp, per_rep.mean(), e1[rows].mean(), se)
    truth = gp.true_estimand(des, point, effect)
    np.testing.assert_allclose(truth, np.mean((e1 - e0)[des.group == 1]), rtol=1e-10, atol=1e-12)
    assert (truth == 0) == (effect == 0)


def test_simulations_are_reproducible_from_the_key():
    des, point = _design(), _point("bernoulli")
    a = gp.simulate_outcomes(des, point, 0.5, jax.random.key(1), replicates=4)
    b = gp.simulate_outcomes(des, point, 0.5, jax.random.key(1), replicates=4)
    c = gp.simulate_outcomes(des, point, 0.5, jax.random.key(2), replicates=4)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_generating_point_has_only_the_stated_bias():
    des = _design()._replace(n_groups=3, group_names=("ref", "a", "b"))
    point = {**_point("bernoulli"), "delta": np.array([0.3, -0.2]), "u_z": np.ones((3, 2)),
             "lambda_z": np.ones((2, 2))}
    des = des._replace(group=np.r_[des.group[:-5], np.full(5, 2)].astype(np.int32))
    gen = gp.generating_point(des, point, 0.7, group="b")
    np.testing.assert_array_equal(gen["delta"], [0.0, 0.7])
    assert not gen["u_z"].any() and not gen["lambda_z"].any()
    np.testing.assert_array_equal(gen["beta"], point["beta"])


def test_power_point_mean_is_the_mean_of_the_effects():
    """The point's effects are the posterior means of the effects' coordinates, from a
    non-centred fit (z-scores recorded) and from a centred one (only the coordinates) alike."""
    rng = np.random.default_rng(0)
    s = {"alpha": rng.normal(size=(2, 5)), "beta": rng.normal(size=(2, 5, 2)),
         "sigma_bucket": rng.uniform(0.2, 2, size=(2, 5)), "gamma_z": rng.normal(size=(2, 5, 3)),
         "delta": rng.normal(size=(2, 5, 1))}
    s["gamma_coords"] = s["sigma_bucket"][..., None] * s["gamma_z"]
    s["gamma"] = np.concatenate([s["gamma_coords"], -s["gamma_coords"].sum(-1, keepdims=True)], -1)
    centred = {k: v for k, v in s.items() if k != "gamma_z"}
    for fake in (SimpleNamespace(samples=s), SimpleNamespace(samples=centred)):
        pt = gp.power_point(fake)
        np.testing.assert_allclose(pt["sigma_bucket"] * pt["gamma_z"], s["gamma_coords"].mean((0, 1)))
        np.testing.assert_allclose(pt["beta"], s["beta"].mean((0, 1)))
        draw = gp.power_point(fake, draw=7)  # chain 1, draw 2
        np.testing.assert_allclose(draw["gamma_z"], s["gamma_z"][1, 2], rtol=1e-12)
        np.testing.assert_array_equal(draw["alpha"], s["alpha"][1, 2])
    fake = SimpleNamespace(samples=s)
    with pytest.raises(ValueError, match=r"draw must be in \[0, 9\]"):
        gp.power_point(fake, draw=10)
    with pytest.raises(ValueError, match="not a fit of group_glm_model"):
        gp.power_point(SimpleNamespace(samples={"psi": s["delta"]}))


@pytest.mark.parametrize("kwargs,error,message", [
    ({"effects": ()}, ValueError, "at least one effect"),
    ({"effects": (0.0, 0.0)}, ValueError, "distinct"),
    ({"effects": (0.0, float("nan"))}, ValueError, "finite"),
    ({"replicates": 0}, ValueError, "replicates"),
    ({"group": "ref"}, ValueError, "is the reference group"),
    ({"group": "nobody"}, ValueError, "is not one of the design's groups"),
    ({"group": 5}, ValueError, r"index in \[0, 1\]"),
    ({"ci_prob": 1.0}, ValueError, r"ci_prob must be in \(0, 1\)"),
    ({"seed": 3}, TypeError, "takes no seed"),
    ({"key": 0}, TypeError, "must be a JAX key"),
])
def test_bad_input_raises_naming_the_field(kwargs, error, message):
    kw = {"key": jax.random.key(0), **kwargs}
    with pytest.raises(error, match=message):
        gp.glm_power(_design(), _point("bernoulli"), kw.pop("key"), **kw)


def test_a_point_without_the_bias_terms_is_refused():
    point = {k: v for k, v in _point("bernoulli").items() if k != "delta"}
    with pytest.raises(ValueError, match="point lacks delta"):
        gp.simulate_outcomes(_design(), point, 0.1, jax.random.key(0), replicates=2)


def test_failed_fits_are_counted_not_dropped(monkeypatch):
    """Fits that fail the convergence verdict are counted in ``not_converged`` and still in the
    coverage and power; a fit that raises is counted in ``errors`` with its message. The fit is a
    stand-in (2 chains x 10 draws around the point, judged by the real verdict: NOT converged) so
    the test needs no NUTS; the refits themselves are exercised by the slow test below."""
    des = _design(n=120)
    point = _point("bernoulli")
    calls = []

    def stand_in(model, group, bucket, X, y, *, seed, cache_key, **nuts):
        calls.append((seed, cache_key, y.copy()))
        if len(calls) == 2:
            raise FloatingPointError("a broken replicate")
        rng = np.random.default_rng(seed)
        s = {"alpha": point["alpha"] + 0.1 * rng.normal(size=(2, 10)),
             "beta": point["beta"] + 0.1 * rng.normal(size=(2, 10, 2)),
             "gamma": 0.1 * rng.normal(size=(2, 10, 3)), "delta": 0.3 * rng.normal(size=(2, 10, 1)),
             "u": np.zeros((2, 10, 3, 1)), "lambda": np.zeros((2, 10, 1, 2))}
        conv = fitting.check_convergence(s, diverging=np.zeros((2, 10), bool))
        return SimpleNamespace(samples=s, convergence=conv)

    monkeypatch.setattr(gp, "fit", stand_in)
    lines = []
    res = gp.glm_power(des, point, jax.random.key(5), effects=(0.0, 0.5), replicates=3, num_warmup=20,
                       num_samples=20, num_chains=2, progress=lines.append)
    zero, half = res.rows
    # the second refit is replicate 0 of effect 0.5 (round by round: every effect, then the next round)
    assert half["replicates"] == 3 and half["converged"] == 0 and half["not_converged"] == 2
    assert len(half["errors"]) == 1 and "replicate 0: FloatingPointError: a broken replicate" in half["errors"][0]
    assert half["coverage"]["n"] == 2 and half["power"]["n"] == 2 and half["coverage_converged"]["n"] == 0
    assert zero["not_converged"] == 3 and not zero["errors"] and zero["coverage"]["n"] == 3
    # at a true estimand of 0, excluding 0 is exactly not covering it
    assert zero["coverage"]["k"] + zero["power"]["k"] == 3 and zero["true_estimand"] == 0.0
    assert half["true_estimand"] > 0
    seeds, keys, ys = zip(*calls, strict=True)
    assert len(set(seeds)) == 6 and len(set(keys)) == 1  # one compiled sampler, a seed per refit
    assert len({y.tobytes() for y in ys}) == 6  # every refit sees its own outcomes
    assert sum("NOT converged" in ln for ln in lines) == 5 and sum("FAILED" in ln for ln in lines) == 1
    assert res.group == "sens" and res.reference == "ref" and res.scale == "P(y = 1)"


def test_a_checkpoint_gets_every_round_but_the_last(monkeypatch):
    seen = []
    monkeypatch.setattr(gp, "fit", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("no fit")))
    res = gp.glm_power(_design(n=60), _point("bernoulli"), jax.random.key(0), effects=(0.0, 1.0), replicates=3,
                       checkpoint=lambda r: seen.append([row["replicates"] for row in r.rows]))
    assert seen == [[1, 1], [2, 2]] and [row["replicates"] for row in res.rows] == [3, 3]
    assert all(len(row["errors"]) == 3 and row["coverage"]["n"] == 0 for row in res.rows)


def _fake_result(failed=0):
    rows = []
    for e, (cov, pw) in zip((0.0, 0.25, 0.5), ((0.9, 0.1), (0.85, 0.5), (0.95, 1.0)), strict=True):
        share = lambda p: {"p": p, "se": np.sqrt(p * (1 - p) / 20), "wilson95": [max(p - 0.15, 0), min(p + 0.1, 1)],
                           "k": int(20 * p), "n": 20}  # noqa: E731
        rows.append({"effect": e, "true_estimand": 0.6 * e, "replicates": 20, "converged": 20 - failed,
                     "coverage": share(cov), "power": share(pw)})
    return {"rows": rows, "ci_prob": 0.9, "scale": "expected level", "group": "sens", "reference": "ref",
            "replicates": 20, "design_rows": 500, "likelihood": "ordered_logistic"}


def test_plot_power_draws_both_panels_and_rejects_other_input(tmp_path):
    fig = plotting.plot_power(_fake_result(failed=2), title="tiny")
    ax_p, ax_c = fig.axes[:2]
    assert [round(v, 2) for v in ax_p.get_lines()[0].get_ydata()] == [0.1, 0.5, 1.0]
    refs = {round(ln.get_ydata()[0], 2) for ln in ax_p.get_lines() if ln.get_linestyle() in ("--", ":")}
    assert refs == {0.1, 0.9}  # 1 - ci_prob and 0.9
    assert "+0.15" in ax_p.get_xticklabels()[1].get_text()  # the estimand on the outcome scale
    assert "2/20 not conv." in ax_c.get_xticklabels()[0].get_text()
    plotting.save_figure(fig, tmp_path / "power.png")
    assert (tmp_path / "power.png").stat().st_size > 10_000
    with pytest.raises(TypeError, match="PowerResult"):
        plotting.plot_power({"rows": []})
    with pytest.raises(ValueError, match="not a glm_power result"):
        plotting.plot_power({"rows": [{"effect": 0.0}]})


@pytest.mark.slow
def test_coverage_at_effect_zero_is_nominal():
    """40 replicates at delta = 0 on a 300-row Bernoulli design (2 x 3 cells, d = 2), 2 chains x
    (300 + 300): the number of 90% intervals holding the true estimand (0) is inside the central
    99.8% range of Binomial(40, 0.9) (a calibrated interval fails this with probability <= 0.002;
    the prior of delta is centred at 0, so a slight over-coverage is expected and allowed)."""
    des = _design(n=300, seed=4)
    res = gp.glm_power(des, _point("bernoulli"), jax.random.key(21), effects=(0.0,), replicates=40, num_warmup=300,
                       num_samples=300, num_chains=2)
    row = res.rows[0]
    assert not row["errors"] and row["coverage"]["n"] == 40
    lo, hi = stats.binom.ppf(0.001, 40, 0.9), stats.binom.isf(0.001, 40, 0.9)
    assert lo <= row["coverage"]["k"] <= hi, row["coverage"]
    assert row["coverage"]["k"] + row["power"]["k"] == 40


def test_normal_power_is_the_share_of_simulated_intervals_that_exclude_zero():
    """The closed form against simulation: estimates N(effect, sd^2), intervals estimate +- z sd,
    on random effects, sds and interval levels; within 4 binomial standard errors."""
    rng = np.random.default_rng(7)
    n = 20_000
    for _ in range(25):
        sd, ci = rng.uniform(0.01, 2.0), rng.uniform(0.5, 0.99)
        effect = rng.normal(0, 3 * sd)
        z = stats.norm.ppf((1 + ci) / 2)
        est = effect + sd * rng.normal(size=n)
        share = np.mean((est - z * sd > 0) | (est + z * sd < 0))
        p = gp.normal_power(effect, sd, ci_prob=ci)
        assert abs(share - p) <= 4 * np.sqrt(p * (1 - p) / n) + 1e-9, (effect, sd, ci, share, p)
    assert gp.normal_power(0.0, 1.0, ci_prob=0.9) == pytest.approx(0.1, abs=1e-12)
    assert gp.normal_power(-0.3, 0.1) == pytest.approx(gp.normal_power(0.3, 0.1), abs=1e-15)


def test_detectable_effect_inverts_normal_power():
    rng = np.random.default_rng(8)
    for _ in range(25):
        sd, ci = rng.uniform(0.001, 5.0), rng.uniform(0.5, 0.99)
        power = rng.uniform(1 - ci + 0.01, 0.999)
        e = gp.detectable_effect(sd, power=power, ci_prob=ci)
        assert e > 0
        assert gp.normal_power(e, sd, ci_prob=ci) == pytest.approx(power, abs=1e-9)
    # 90% interval, 90% power: (z_0.95 + z_0.9) sd up to the far tail's Phi(-4.57) ~ 2e-6
    assert gp.detectable_effect(0.02) == pytest.approx(0.02 * (stats.norm.ppf(0.95) + stats.norm.ppf(0.9)), rel=1e-5)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: gp.normal_power(0.1, 0.0), "sd must be > 0"),
    (lambda: gp.normal_power(0.1, 1.0, ci_prob=1.0), "ci_prob must be in"),
    (lambda: gp.normal_power(float("nan"), 1.0), "effect must be finite"),
    (lambda: gp.detectable_effect(1.0, power=0.05, ci_prob=0.9), "power must be in"),
    (lambda: gp.detectable_effect(-1.0), "sd must be > 0"),
])
def test_normal_power_rejects_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_every_recipe_fit_states_its_detectable_effect():
    from bayesfair.workflow.recipes import _glm

    est = {"B": {"sd": 0.01, "scale": "P(y = 1)"}, "C": {"sd": 0.0, "scale": "P(y = 1)"}}
    out = _glm.detectable(est)
    assert set(out) == {"B"}  # a degenerate posterior states nothing
    assert out["B"]["effect"] == pytest.approx(gp.detectable_effect(0.01, power=_glm.DETECT_POWER,
                                                                    ci_prob=_glm.CI_PROB))
    assert out["B"]["scale"] == "P(y = 1)" and "approximation" in out["B"]["method"]
