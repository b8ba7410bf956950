"""The group-bias GLM (bayesfair.posteriors.group_glm) and its fit and estimand (inference.glm_fit)."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.distributions.transforms import ZeroSumTransform
from scipy import stats

from bayesfair.inference.glm_fit import (
    GlmDesign,
    bias_estimand,
    build_glm,
    compress_design,
    feature_shift,
    fit_glm,
    linear_predictor,
)
from bayesfair.posteriors.group_glm import GlmPriors, check_glm_likelihood, expected_outcome


def test_expected_outcome_matches_monte_carlo():
    rng = np.random.default_rng(0)
    eta = rng.normal(size=5)
    cut = np.array([-1.0, 0.0, 0.7])
    draws = (eta[:, None] + rng.logistic(size=(5, 200_000)))[..., None] > cut  # level = number of cutpoints passed
    mc = draws.sum(-1).mean(-1)
    se = draws.sum(-1).std(-1) / np.sqrt(200_000)
    assert np.all(np.abs(expected_outcome("ordered_logistic", eta, cutpoints=cut) - mc) < 5 * se)
    np.testing.assert_allclose(expected_outcome("binomial", eta, n_trials=9), 9 / (1 + np.exp(-eta)))
    np.testing.assert_allclose(expected_outcome("student_t", eta), eta)
    np.testing.assert_allclose(expected_outcome("skew_t", eta), eta)  # its location: E[y] - eta is one constant


def test_check_glm_likelihood_names_the_problem():
    with pytest.raises(ValueError, match="likelihood must be one of"):
        check_glm_likelihood("poisson", [0, 1])
    with pytest.raises(ValueError, match=r"needs y in \[0, 1\]"):
        check_glm_likelihood("bernoulli", [0, 2])
    with pytest.raises(ValueError, match="n_levels >= 3"):
        check_glm_likelihood("ordered_logistic", [0, 1])
    with pytest.raises(ValueError, match="integer outcomes"):
        check_glm_likelihood("beta_binomial", [0.5])


def test_linear_predictor_reference_removes_only_the_bias_terms():
    rng = np.random.default_rng(1)
    des = GlmDesign(np.array([0, 1, 1]), np.array([0, 1, 0]), rng.normal(size=(3, 2)), np.zeros(3), 2, 2, 0,
                    "bernoulli")
    s = {"alpha": rng.normal(size=4), "beta": rng.normal(size=(4, 2)), "gamma": rng.normal(size=(4, 2)),
         "delta": rng.normal(size=(4, 1)), "u": rng.normal(size=(4, 2, 1)), "lambda": rng.normal(size=(4, 1, 2))}
    full, ref = linear_predictor(s, des), linear_predictor(s, des, as_reference=True)
    np.testing.assert_allclose(full[:, 0], ref[:, 0])  # the reference row has no bias terms
    want = s["delta"][:, 0] + s["u"][:, 1, 0] + s["lambda"][:, 0] @ des.X[1]
    np.testing.assert_allclose(full[:, 1] - ref[:, 1], want)


@pytest.mark.slow
def test_a_known_bias_is_recovered_over_seeds():
    """Bernoulli data with a level shift of 0.8 log-odds on 3 buckets, 5 seeds: the estimand's 90%
    interval covers the true average counterfactual difference in P(y = 1) in >= 3 of 5 seeds
    (the binomial(5, 0.9) probability of <= 2 covers is 0.0086), and its sign is right in all."""
    covered = 0
    for seed in range(5):
        rng = np.random.default_rng(seed)
        n, d = 600, 3
        g, b = rng.integers(0, 2, n), rng.integers(0, 3, n)
        X = rng.normal(size=(n, d))
        base = -0.3 + np.array([-0.5, 0.0, 0.5])[b] + X @ np.array([0.5, -0.3, 0.2])
        eta = base + 0.8 * g
        y = (rng.uniform(size=n) < 1 / (1 + np.exp(-eta))).astype(float)
        truth = np.mean(1 / (1 + np.exp(-eta[g == 1])) - 1 / (1 + np.exp(-base[g == 1])))
        des = GlmDesign(g.astype(np.int32), b.astype(np.int32), X, y, 2, 3, 0, "bernoulli", group_names=("r", "s"))
        f = fit_glm(des, num_warmup=300, num_samples=300, num_chains=2, seed=seed, warn=False)
        est = bias_estimand(f, des)["s"]
        covered += est["lb"] <= truth <= est["ub"]
        assert est["mean"] > 0
    assert covered >= 3 and stats.binom.cdf(2, 5, 0.9) < 0.01


@pytest.mark.slow
@pytest.mark.parametrize("likelihood,kw", [("bernoulli", {}), ("binomial", {"n_trials": 9}),
                                           ("ordered_logistic", {"n_levels": 5}), ("skew_t", {})])
def test_glm_nuts_sbc(likelihood, kw):
    """SBC of the GLM's NUTS fit for the Bernoulli, binomial, ordered-logistic and skew-t forms on a tiny
    design (120 rows, 2 groups x 2 buckets, d = 2), 8 replications each (about 1 min each on a loaded
    2-core machine): ``SBCResult.passed``
    (rank-uniformity tests at family-wise alpha = 1e-3, so a correct fitter fails this test with
    probability <= 1e-3 per form) and the 90% coverage over all parameters within 4 s.e. of 0.9."""
    import jax

    from bayesfair.inference.glm_fit import glm_sbc_problem
    from bayesfair.inference.sbc import sbc

    rng = np.random.default_rng(7)
    n = 120
    top = kw.get("n_trials", kw.get("n_levels", 2) - 1)
    y = rng.normal(size=n) if likelihood == "skew_t" else rng.integers(0, top + 1, n).astype(float)
    des = GlmDesign(rng.integers(0, 2, n).astype(np.int32), rng.integers(0, 2, n).astype(np.int32),
                    rng.normal(size=(n, 2)), y, 2, 2, 0, likelihood, **kw)
    problem = glm_sbc_problem(des, n_draws=99, num_warmup=300, num_samples=200, num_chains=2, target_accept=0.95)
    res = sbc(*problem, jax.random.key(11), replications=8, vectorize=False)
    assert res.passed, res.summary() if hasattr(res, "summary") else res
    assert abs(res.coverage_all - 0.9) <= 4 * res.coverage_all_se + 1e-9


@pytest.mark.parametrize("likelihood,kw", [("bernoulli", {}), ("ordered_logistic", {"n_levels": 4}),
                                           ("student_t", {}), ("skew_t", {})])
def test_compressed_design_has_the_same_log_density_and_per_row_likelihood(likelihood, kw):
    """compress_design's cells with their counts give the rows' log-density exactly (at random
    parameter points, 3 groups), and the model's pointwise log-likelihood is that of the numpy
    linear predictor (the one-hot products in the model index like the gathers in linear_predictor)."""
    import jax
    from numpyro.infer import Predictive
    from numpyro.infer.util import log_density, log_likelihood

    from bayesfair.inference.glm_fit import build_glm, compress_design

    rng = np.random.default_rng(3)
    n = 300
    X = rng.integers(0, 2, size=(n, 2)).astype(float)  # few distinct x, so rows repeat
    top = {"bernoulli": 1, "ordered_logistic": 3}.get(likelihood)
    y = rng.integers(0, top + 1, n).astype(float) if top else np.round(rng.normal(size=n), 1)
    des = GlmDesign(rng.integers(0, 3, n).astype(np.int32), rng.integers(0, 2, n).astype(np.int32), X, y, 3, 2, 1,
                    likelihood, **kw)
    cells, counts = compress_design(des)
    assert cells.y.size < n and counts.sum() == n
    model, args = build_glm(des)
    cmodel, cargs = build_glm(cells, weights=counts)
    with jax.enable_x64(True):
        draws = Predictive(model, num_samples=2)(jax.random.key(0), *args[:3], None)
        for i in range(2):
            point = {k: v[i] for k, v in draws.items() if k != "y"}
            full = float(log_density(model, args, {}, point)[0])
            np.testing.assert_allclose(float(log_density(cmodel, cargs, {}, point)[0]), full, rtol=1e-10)
        ll = np.asarray(log_likelihood(model, {k: v for k, v in draws.items() if k != "y"}, *args)["y"])
    assert ll.shape == (2, n)
    if likelihood == "bernoulli":
        eta = linear_predictor({k: np.asarray(v) for k, v in draws.items()}, des)
        np.testing.assert_allclose(ll, stats.bernoulli.logpmf(y, 1 / (1 + np.exp(-eta))), rtol=1e-8)


def _one_hot_columns(rng, n):
    """z-scored design columns: two one-hot blocks, a binary column whose common value is its larger
    one, a constant-free continuous column and a three-valued column."""
    blocks = [np.eye(k)[rng.integers(0, k, n)][:, 1:] for k in (4, 7)]
    X = np.column_stack([*blocks, rng.random(n) < 0.8, rng.normal(size=n), rng.integers(0, 3, n)]).astype(float)
    return (X - X.mean(0)) / X.std(0)


@pytest.mark.parametrize("seed", range(5))
def test_indicator_matrix_is_the_dense_product(seed):
    """IndicatorMatrix @ W equals X @ W (vector and matrix W) for one-hot, binary, continuous and
    three-valued columns; a mostly continuous X stays dense."""
    import jax

    from bayesfair.posteriors.indicators import IndicatorMatrix, indicator_matrix

    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 400))
    X = _one_hot_columns(rng, n)
    M = indicator_matrix(X)
    assert isinstance(M, IndicatorMatrix) and M.shape == X.shape
    assert M.dense.shape[1] == 2  # the continuous and the three-valued columns
    with jax.enable_x64(True):
        for w in (rng.normal(size=X.shape[1]), rng.normal(size=(X.shape[1], 3))):
            np.testing.assert_allclose(np.asarray(jax.jit(lambda m, v: m @ v)(M, w)), X @ w, rtol=0, atol=1e-12)
    assert isinstance(indicator_matrix(rng.normal(size=(n, 5))), np.ndarray)


@pytest.mark.parametrize("likelihood,kw", [("bernoulli", {}), ("ordered_logistic", {"n_levels": 4}),
                                           ("skew_t", {})])
def test_model_with_indicator_matrix_has_the_dense_log_density_and_gradient(likelihood, kw):
    """build_glm's sparse one-hot X gives the dense X's log-density and its gradient at random points."""
    import jax
    from numpyro.infer import Predictive
    from numpyro.infer.util import log_density

    from bayesfair.inference.glm_fit import build_glm
    from bayesfair.posteriors.indicators import IndicatorMatrix

    rng = np.random.default_rng(5)
    n = 400
    X = _one_hot_columns(rng, n)
    top = {"bernoulli": 1, "ordered_logistic": 3}.get(likelihood)
    y = rng.integers(0, top + 1, n).astype(float) if top else rng.normal(size=n)
    des = GlmDesign(rng.integers(0, 3, n).astype(np.int32), rng.integers(0, 2, n).astype(np.int32), X, y, 3, 2, 1,
                    likelihood, **kw)
    model, args = build_glm(des)
    assert isinstance(args[2], IndicatorMatrix)
    dense_args = (args[0], args[1], X, *args[3:])
    with jax.enable_x64(True):
        draws = Predictive(model, num_samples=3)(jax.random.key(1), *args[:3], None)
        for i in range(3):
            point = {k: v[i] for k, v in draws.items() if k != "y"}
            def lp(p, a):
                return log_density(model, a, {}, p)[0]
            v1, g1 = jax.value_and_grad(lp)(point, args)
            v2, g2 = jax.value_and_grad(lp)(point, dense_args)
            np.testing.assert_allclose(float(v1), float(v2), rtol=1e-11)
            for k in g1:
                np.testing.assert_allclose(np.asarray(g1[k]), np.asarray(g2[k]), rtol=1e-8, atol=1e-9)


def _shift_design(n, seed):
    """Bernoulli rows, 2 groups x 4 buckets, 2 binary features (so rows repeat and compress), with a
    real level shift, group-by-bucket deviations and slope differences."""
    rng = np.random.default_rng(seed)
    g, b = rng.integers(0, 2, n), rng.integers(0, 4, n)
    X = rng.integers(0, 2, size=(n, 2)).astype(float)
    eta = (-0.3 + np.array([-1.0, -0.3, 0.4, 1.0])[b] + X @ np.array([0.5, -0.3])
           + g * (0.4 + np.array([-0.6, 0.1, 0.5, -0.2])[b] + X @ np.array([0.8, -0.5])))
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-eta))).astype(float)
    return GlmDesign(g.astype(np.int32), b.astype(np.int32), X, y, 2, 4, 0, "bernoulli", group_names=("r", "s"))


def test_bucket_effects_are_numpyros_zero_sum_normal():
    """gamma and each column of u sum to zero over the buckets, and in every form their prior
    density is NumPyro's ZeroSumNormal's at the same values (the coordinates are iid normal and the
    map is an isometry): checked at random points of the centred and the non-centred model, with
    one bucket (the effect is 0) and four."""
    from numpyro import handlers
    from numpyro.distributions import Normal, ZeroSumNormal
    from numpyro.infer import Predictive

    from bayesfair.inference.glm_fit import RANDOM_EFFECTS, build_glm

    des = _shift_design(60, 1)
    for centered in (RANDOM_EFFECTS, ()):
        model, args = build_glm(des, centered=centered)
        with jax.enable_x64(True):
            draws = Predictive(model, num_samples=4)(jax.random.key(2), *args[:3], None)
            for i in range(4):
                point = {k: np.asarray(v[i]) for k, v in draws.items()}
                gamma, u = point["gamma"], point["u"]
                assert gamma.shape == (4,) and u.shape == (4, 1)
                np.testing.assert_allclose([gamma.sum(), u.sum()], 0.0, atol=1e-12)
                tr = handlers.trace(handlers.substitute(model, point)).get_trace(*args)
                for name, scale, eff in (("gamma", "sigma_bucket", gamma), ("u", "sigma_u", u[:, 0])):
                    sc = point[scale]
                    coords = point[f"{name}_coords"] if centered else point[f"{name}_z"] * sc
                    site = tr[f"{name}_coords" if centered else f"{name}_z"]
                    got = float(np.sum(site["fn"].log_prob(site["value"])))
                    if not centered:  # z-scores: the density of the coordinates is N(0, 1)'s less log s each
                        got -= coords.size * np.log(sc)
                    want = float(ZeroSumNormal(sc, event_shape=(4,)).log_prob(eff))
                    np.testing.assert_allclose(got, want, rtol=1e-10)
                    assert float(Normal(0, sc).log_prob(coords).sum()) == pytest.approx(want, rel=1e-10)
    one = des._replace(bucket=np.zeros_like(des.bucket), n_buckets=1)
    model, args = build_glm(one)
    with jax.enable_x64(True):
        draw = Predictive(model, num_samples=1)(jax.random.key(0), *args[:3], None)
    assert not np.asarray(draw["gamma"]).any() and not np.asarray(draw["u"]).any()
    assert "gamma_z" not in draw and "u_z" not in draw


def test_choose_form_centres_effects_that_many_rows_pin_down():
    """On 20,000 rows the non-centred z-scores are tied to their scales: the centred pilot (dense
    mass) takes several times fewer leapfrog steps per draw, without a divergence, and is kept
    (two data sets), and every centring weight is near 1; on 40 rows the group-by-bucket
    deviations are weakly informed (weights below 0.5) and it is the non-centred form that samples
    without divergences in fewer steps (three data sets)."""
    from bayesfair.inference.glm_fit import RANDOM_EFFECTS, choose_form, compress_design

    cells, counts = compress_design(_shift_design(20_000, 0))
    both = choose_form(cells, weights=counts, accept_steps=0)  # both pilots, to compare them
    steps = {p["form"]: p for p in both["pilots"]}
    assert both["form"] == "centered" and both["centered"] == list(RANDOM_EFFECTS) and both["dense_mass"]
    assert steps["centered"]["divergences"] == 0 and 3 * steps["centered"]["mean_steps"] < steps["noncentered"][
        "mean_steps"]
    assert min(w["min"] for w in both["weights"].values()) > 0.9
    cells, counts = compress_design(_shift_design(20_000, 1))
    quick = choose_form(cells, weights=counts, seed=1)
    assert quick["form"] == "centered" and len(quick["pilots"]) == 1 and "without a divergence" in quick["rule"]
    for seed in (1, 2, 3):
        small = choose_form(_shift_design(40, seed), seed=seed)
        assert small["form"] == "noncentered" and not small["dense_mass"] and len(small["pilots"]) == 2, small
        assert small["weights"]["u"]["max"] < 0.5
        kept = next(p for p in small["pilots"] if p["form"] == "noncentered")
        assert kept["divergences"] == 0
        assert all(kept["mean_steps"] <= p["mean_steps"] for p in small["pilots"] if p["divergences"] == 0)


def test_choose_form_pilots_the_split_form_when_weights_fall_on_both_sides():
    """300 rows: gamma and lambda are well informed and u less so, so with the threshold between
    them the split pilot runs, and its form centres exactly the elements at or above it."""
    from bayesfair.inference.glm_fit import choose_form

    des = _shift_design(300, 0)
    res = choose_form(des, centre_weight=0.8, accept_steps=0, split_steps=0)  # every pilot, to see the split one
    assert [p["form"] for p in res["pilots"]] == ["centered", "split", "noncentered"]
    assert res["weights"]["u"]["max"] < 0.8 <= res["weights"]["gamma"]["min"], res["weights"]
    none = choose_form(des, centre_weight=0.0, accept_steps=1e9)  # every weight above: no split pilot
    forms = [p["form"] for p in none["pilots"]]
    assert forms[0] == "centered" and "split" not in forms
    if none["pilots"][0]["divergences"] == 0:  # a centred pilot without a divergence is kept
        assert forms == ["centered"] and none["form"] == "centered"
    if res["form"] == "split":
        assert res["centered"]["gamma"] == [1.0] * 3 and res["centered"]["u"] == [[0.0]] * 3
    kept = choose_form(des, centre_weight=0.8, accept_steps=0)  # a split pilot without a divergence is kept
    assert [p["form"] for p in kept["pilots"]][:2] == ["centered", "split"]
    assert (kept["form"] == "split") == (kept["pilots"][1]["divergences"] == 0), kept
    if kept["form"] == "split":
        assert len(kept["pilots"]) == 2 and "had no divergence" in kept["rule"]
        assert kept["centered"]["gamma"] == [1.0] * 3 and kept["centered"]["u"] == [[0.0]] * 3


def test_partial_form_is_the_same_model_up_to_its_jacobian():
    """theta = s^(1 - w) v: the partial form's log density at v is the centred one at theta plus
    sum (1 - w) log s over every element of every effect (exact, at random points and random
    weights with some elements exactly 0 and 1), for a logit and a continuous likelihood."""
    import jax
    from numpyro.infer import Predictive
    from numpyro.infer.util import log_density

    from bayesfair.inference.glm_fit import EFFECT_SCALES, RANDOM_EFFECTS, build_glm

    rng = np.random.default_rng(5)
    for likelihood in ("bernoulli", "gaussian"):
        des = _shift_design(80, 4)._replace(likelihood=likelihood)
        if likelihood == "gaussian":
            des = des._replace(y=des.y + rng.normal(size=des.y.size))
        shapes = {"gamma": (3,), "u": (3, 1), "lambda": (1, 2)}  # gamma, u: per zero-sum coordinate
        w = {k: rng.choice([0.0, 0.3, 0.8, 1.0], size=sh) for k, sh in shapes.items()}
        centred, args = build_glm(des, centered=RANDOM_EFFECTS)
        partial, _ = build_glm(des, centered=w)
        with jax.enable_x64(True):
            draws = Predictive(centred, num_samples=3)(jax.random.key(1), *args[:3], None)
            for i in range(3):
                point = {k: np.asarray(v[i]) for k, v in draws.items() if k != "y"}
                sites = {"gamma": "gamma_coords", "u": "u_coords", "lambda": "lambda"}  # the centred sites
                moved = {k: v for k, v in point.items() if k not in {*sites.values(), *RANDOM_EFFECTS}}
                jac = 0.0
                for name, weight in w.items():
                    sc = point[EFFECT_SCALES[name]]
                    moved[f"{name}_partial"] = point[sites[name]] / sc ** (1 - weight)
                    jac += float(np.sum((1 - weight) * np.log(sc)))
                lc = float(log_density(centred, args, {}, point)[0])
                lp = float(log_density(partial, args, {}, moved)[0])
                np.testing.assert_allclose(lp, lc + jac, rtol=1e-10)


def test_centring_weights_follow_the_information_of_the_rows():
    """Bernoulli: the weights are I s^2 / (I s^2 + 1) averaged over draws, with I the sum of
    p (1 - p) over the rows an element enters (times x^2 for a slope difference; for a zero-sum
    coordinate, the buckets' sums weighted by the coordinate's squared loadings), computed here
    directly; row counts of compressed cells multiply the information, so doubling every row
    never lowers a weight. row_information matches the closed forms of the Bernoulli and Gaussian likelihoods."""
    from bayesfair.inference.glm_fit import centring_weights
    from bayesfair.posteriors.group_glm import row_information

    rng = np.random.default_rng(2)
    des = _shift_design(200, 7)
    d = 6
    samples = {"alpha": rng.normal(size=d), "gamma": rng.normal(size=(d, 4)), "beta": rng.normal(size=(d, 2)),
               "delta": rng.normal(size=(d, 1)), "u": 0.3 * rng.normal(size=(d, 4, 1)),
               "lambda": 0.3 * rng.normal(size=(d, 1, 2)), "sigma_bucket": rng.uniform(0.2, 2, d),
               "sigma_u": rng.uniform(0.01, 0.5, d), "s_slope": rng.uniform(0.05, 1, d)}
    w = centring_weights(samples, des)
    p = 1 / (1 + np.exp(-linear_predictor(samples, des)))
    h = p * (1 - p)
    on = des.group == 1
    i_g = np.stack([h[:, des.bucket == b].sum(1) for b in range(4)], 1)  # [D, B] per bucket
    i_u = np.stack([h[:, (des.bucket == b) & on].sum(1) for b in range(4)], 1)
    with jax.enable_x64(True):  # the zero-sum coordinates' map: NumPyro's transform, rows of Q [3, 4]
        q = np.asarray(ZeroSumTransform(1)(jnp.eye(3, dtype=jnp.float64)))
    assert w["gamma"].shape == (3,) and w["u"].shape == (3, 1)
    for j in range(3):  # coordinate j's information: the buckets' weighted by Q[j, b]^2
        for got, info, s in ((w["gamma"][j], i_g @ q[j] ** 2, samples["sigma_bucket"]),
                             (w["u"][j, 0], i_u @ q[j] ** 2, samples["sigma_u"])):
            np.testing.assert_allclose(got, np.mean(info * s**2 / (info * s**2 + 1)), rtol=1e-12)
    i_l = (h[:, on, None] * des.X[on] ** 2).sum(1)  # [D, 2]
    s2 = samples["s_slope"][:, None] ** 2
    np.testing.assert_allclose(w["lambda"][0], np.mean(i_l * s2 / (i_l * s2 + 1), axis=0), rtol=1e-12)
    doubled = centring_weights(samples, des, weights=np.full(des.y.size, 2.0))
    for k in w:
        assert np.all(doubled[k] >= w[k]) and np.all((0 <= w[k]) & (w[k] <= 1))
    eta = rng.normal(size=(3, 5))
    np.testing.assert_allclose(row_information("gaussian", eta, np.zeros(5), sigma=np.array([1.0, 2.0, 0.5])),
                               np.broadcast_to(1 / np.array([1.0, 4.0, 0.25])[:, None], (3, 5)), rtol=1e-12)
    pe = 1 / (1 + np.exp(-eta))
    np.testing.assert_allclose(row_information("bernoulli", eta, np.ones(5)), pe * (1 - pe), rtol=1e-12)


def test_fit_glm_records_the_form_and_refuses_contradictions():
    des = _shift_design(60, 2)
    f = fit_glm(des, centered="auto", num_warmup=100, num_samples=50, num_chains=2, seed=3, warn=False)
    form = f.config["form"]
    assert form["form"] in ("centered", "noncentered") and f.config["dense_mass"] == form["dense_mass"]
    assert form["pilots"] and form["rule"]
    given = fit_glm(des, centered=("lambda",), num_warmup=20, num_samples=10, num_chains=1, seed=3, warn=False)
    assert given.config["form"] == {"form": "partly centered", "centered": ["lambda"], "dense_mass": False,
                                    "rule": "given"}
    assert "this fit: partly centered, centred ['lambda'], dense mass False" in given.convergence.advice
    partial = fit_glm(des, centered={"u": 0.5}, num_warmup=20, num_samples=10, num_chains=1, seed=3, warn=False)
    assert partial.config["form"]["form"] == "partial" and "u_partial" in partial.samples
    with pytest.raises(ValueError, match="centered must be 'auto', a tuple"):
        fit_glm(des, centered="all")
    with pytest.raises(ValueError, match="must be in \\[0, 1\\]"):
        fit_glm(des, centered={"u": 1.5})
    with pytest.raises(ValueError, match="must broadcast to its shape \\(3, 1\\)"):
        fit_glm(des, centered={"u": [0.5, 0.5, 0.5]})
    with pytest.raises(ValueError, match="centered names effects of"):
        fit_glm(des, centered=("beta",))
    with pytest.raises(TypeError, match="do not pass dense_mass"):
        fit_glm(des, centered="auto", dense_mass=True)


def test_glm_tree_keeps_every_draw_of_the_posterior_and_its_sample_stats():
    """The written tree's posterior and sample_stats are the fit's, every draw (its divergence
    count is the fit's own); only the per-row groups are thinned, labelled by the kept draws."""
    import arviz as az

    from bayesfair.inference.glm_fit import glm_tree

    des = _shift_design(80, 4)
    f = fit_glm(des, num_warmup=8, num_samples=150, num_chains=2, seed=1, warn=False)
    tree = glm_tree(f, des, draws=60)
    assert tree["posterior"].sizes["draw"] == 150 and tree["sample_stats"].sizes["draw"] == 150
    div = np.asarray(f.sample_stats["diverging"])
    assert int(tree["sample_stats"]["diverging"].sum()) == int(div.sum()) == f.convergence.divergences
    np.testing.assert_array_equal(tree["posterior"]["delta"].values, np.asarray(f.samples["delta"]))
    kept = tree["log_likelihood"]["draw"].values
    np.testing.assert_array_equal(kept, np.arange(0, 150, 5))
    assert tree["posterior_predictive"]["y"].shape == (2, kept.size, 80)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pareto k of 80 rows and 60 draws
        assert np.isfinite(az.loo(tree).elpd)


def _confounded_design(seed, n=400, d=6):
    """Features of which the first two predict group membership strongly (as relationship and
    marital status predict sex in Adult)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    g = (X[:, 0] + X[:, 1] + 0.7 * rng.normal(size=n) > 0).astype(np.int32)
    b = rng.integers(0, 3, n).astype(np.int32)
    y = rng.integers(0, 2, n).astype(np.float64)
    return GlmDesign(g, b, X, y, 2, 3, 0, "bernoulli")


@pytest.mark.parametrize("seed", range(3))
def test_feature_shift_makes_the_shift_column_orthogonal_to_the_features(seed):
    """Gamma solves the normal equations of g on [bucket indicators, x]: the level shift's column
    1[g] - x . Gamma is then orthogonal to every feature (the bucket part is absorbed by gamma),
    and cells with their counts give the rows' Gamma."""
    des = _confounded_design(seed)
    shift = feature_shift(des)
    A = np.column_stack([np.eye(3)[des.bucket], des.X])
    full = np.linalg.solve(A.T @ A, A.T @ des.group.astype(float))  # the normal equations, solved directly
    np.testing.assert_allclose(shift[:, 0], full[3:], atol=1e-10)
    resid = des.group - A @ full
    np.testing.assert_allclose(A.T @ resid, 0.0, atol=1e-8)
    dup = des._replace(group=np.r_[des.group, des.group[:50]], bucket=np.r_[des.bucket, des.bucket[:50]],
                       X=np.r_[des.X, des.X[:50]], y=np.r_[des.y, des.y[:50]])
    cells, counts = compress_design(dup)
    np.testing.assert_allclose(feature_shift(cells, weights=counts), feature_shift(dup), atol=1e-10)
    with pytest.raises(ValueError, match="positive row counts"):
        feature_shift(des, weights=np.zeros(des.y.size))


@pytest.mark.parametrize("ric", [True, False])
def test_slope_prior_is_on_beta_total_with_the_correction(ric):
    """With ric_correction the shrinkage prior is on beta_total = beta + Gamma delta: beta_total
    ~ N(0, slope sd^2) independent of delta, and beta = beta_total - Gamma delta exactly; without
    it beta itself has that prior, independent of delta. 4,000 prior draws: correlations within
    4.5 standard errors (1 / sqrt(4000)) of 0, sds within 5%."""
    import jax
    from numpyro.infer import Predictive

    des = _confounded_design(0)
    priors = GlmPriors(ric_correction=ric)
    model, args = build_glm(des, priors=priors)
    assert (model.keywords["feature_shift"] is not None) == ric
    with jax.enable_x64(True):
        draws = {k: np.asarray(v) for k, v in
                 Predictive(model, num_samples=4000)(jax.random.key(1), *args[:3], None).items()}
    delta = draws["delta"][:, 0]
    slope_sd = priors.slope_total_sd / np.sqrt(des.X.shape[1])
    free = draws["beta_total"] if ric else draws["beta"]
    assert ("beta_total" in draws) == ric
    if ric:
        np.testing.assert_allclose(draws["beta"], free - delta[:, None] * feature_shift(des)[:, 0], atol=1e-12)
        # the confounded features' beta moves against delta: their prior correlation is far from 0
        assert np.corrcoef(draws["beta"][:, 0], delta)[0, 1] < -4.5 / np.sqrt(4000)
    for j in range(des.X.shape[1]):
        assert abs(np.corrcoef(free[:, j], delta)[0, 1]) < 4.5 / np.sqrt(4000)
        assert abs(free[:, j].std() / slope_sd - 1) < 0.05


@pytest.mark.slow
def test_ric_correction_removes_most_of_the_confounding_bias():
    """Bernoulli data without bias (delta = 0, no slope differences) whose two strongest features
    (logit slopes 1.2, against the prior's per-coefficient sd 1/sqrt(10) = 0.32) predict group
    membership: 6 seeds of 600 rows, each fitted with and without the correction. The corrected
    estimand's z-score (posterior mean / sd, the truth being 0) averages within 3 / sqrt(6) of 0
    (a calibrated posterior's z has sd about 1 across seeds), and the uncorrected one sits above
    it by more than 0.5 on average (the shrunk slopes' effect handed to the shift; 0.9-1.2 per
    seed on three other seeds of this design)."""
    zs = {True: [], False: []}
    for seed in range(6):
        rng = np.random.default_rng(100 + seed)
        n, d = 600, 10
        X = rng.normal(size=(n, d))
        g = (X[:, 0] + X[:, 1] + 0.7 * rng.normal(size=n) > 0).astype(np.int32)
        b = rng.integers(0, 3, n).astype(np.int32)
        eta = -0.5 + 1.2 * X[:, 0] + 1.2 * X[:, 1] + 0.3 * (b - 1)
        y = (rng.uniform(size=n) < 1 / (1 + np.exp(-eta))).astype(np.float64)
        des = GlmDesign(g, b, X, y, 2, 3, 0, "bernoulli", group_names=("a", "b"))
        for ric in (True, False):
            f = fit_glm(des, priors=GlmPriors(ric_correction=ric), num_warmup=300, num_samples=300, num_chains=2,
                        seed=seed, warn=False)
            e = bias_estimand(f, des)["b"]
            zs[ric].append(e["mean"] / e["sd"])
    corrected, plain = np.array(zs[True]), np.array(zs[False])
    assert abs(corrected.mean()) < 3 / np.sqrt(6), corrected
    assert (plain - corrected).mean() > 0.5, (plain, corrected)
