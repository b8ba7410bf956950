"""The real-data group-bias recipes of models/ (COMPAS, family income, Adult) and what they use.

- the non-centred psi of the group-bias model is the same model as the centred one: its log
  density is the centred one plus the Jacobian log s per coordinate (exact), and with the scales
  fixed its NUTS posterior matches the conjugate closed form (ESS-calibrated tolerances);
- ``diagnostics.from_group_bias_fit`` keeps only the non-reference groups' psi, names the
  reference and rejects a fit that does not match the data;
- the Adult table follows the choices its recipe documents (age buckets, context columns, groups
  with the reference first) and rejects unknown groups and labels;
- the recipes reject bad flags with exit code 2 naming the flag, run as ``python models/<name>.py``,
  are listed by ``bayesfair fit --list`` (the helper is not) and, on a few hundred rows with a few
  NUTS draws, write posterior.nc, psi_hdi.csv, psi_forest.png and summary.json through both
  ``main(argv)`` and ``bayesfair fit <name>`` (slow: each is a NUTS compile).
"""

import importlib.util
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesfair import diagnostics as dg
from bayesfair.inference import fitting
from bayesfair.posteriors import group_bias as gb
from bayesfair.workflow import cli

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
DATA = Path(os.environ.get("BAYESFAIR_DATA", ROOT.parent / "shared" / "data"))
RECIPES = {"compas_group_bias": DATA / "compas" / "compas_filtered_groupfairtreatment.csv",
           "family_income_group_bias": DATA / "family_income",
           "adult_group_bias": DATA / "adult" / "adult.data"}


def _recipe(name):
    spec = importlib.util.spec_from_file_location(f"test_recipe_{name}", MODELS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _random_data(rng, groups, d, n_obs):
    groups = np.asarray(groups)
    arms = rng.integers(0, groups.size, n_obs)
    X = np.c_[rng.normal(size=(n_obs, d - 1)), np.ones(n_obs)]
    coef = rng.normal(size=(groups.size, d)) + 0.8 * (groups[:, None] == 1)
    y = np.sum(X * coef[arms], 1) + 0.5 * rng.normal(size=n_obs)
    return arms, X, y


# ------------------------------------------------------------------------------ the model's psi form


def test_noncentered_psi_log_density_is_centred_plus_jacobian():
    """log p_nc(u) = log p_c(psi = s u) + (m - 1) d log s for every parameter value (change of variables)."""
    from numpyro.infer.util import log_density

    rng = np.random.default_rng(5)
    groups = np.array([0, 0, 1, 1, 2, 2])
    arms, X, y = _random_data(rng, groups, 3, 40)
    kw = dict(group_of_arm=groups, reference=1, tau_scale=1.0, s_scale=2.0, sigma_scale=1.0)
    for i in range(3):
        s = 0.3 + 0.9 * i
        u = rng.normal(size=(2, 3))
        common = {"tau": 0.5 + i, "s": s, "sigma": 0.7 + 0.2 * i, "beta_bar": rng.normal(size=3),
                  "z": rng.normal(size=(6, 3))}
        for sufficient in (False, True):
            centred, _ = log_density(gb.group_bias_model, (arms, X, y), dict(kw, sufficient=sufficient),
                                     {**common, "psi": s * u})
            non, _ = log_density(gb.group_bias_model, (arms, X, y),
                                 dict(kw, sufficient=sufficient, noncentered_psi=True), {**common, "psi_z": u})
            np.testing.assert_allclose(float(non), float(centred) + u.size * np.log(s), rtol=1e-5, atol=1e-3)


def test_noncentered_psi_nuts_matches_the_closed_form():
    """Scales fixed: NUTS on the non-centred form vs the float64 conjugate posterior, per coordinate of
    (beta_bar, beta, psi) (12 coordinates x 2 statistics, Z = 4.5 ESS-based standard errors: a correct
    sampler fails one of the 24 comparisons with probability < 2e-4)."""
    from numpyro.diagnostics import effective_sample_size

    groups = (0, 0, 1, 1)
    hyper = dict(tau=0.8, s=1.5, sigma=0.6)
    post = gb.group_bias_posterior(groups, 2, **hyper, prior_mean=0.5, prior_sd=3.0)
    hyper["priors"] = gb.GroupBiasPriors(prior_mean=0.5, prior_sd=3.0)
    arms, X, y = _random_data(np.random.default_rng(21), groups, 2, 40)
    with warnings.catch_warnings():  # one chain by design (its ESS is checked below): fit's verdict warns
        warnings.filterwarnings("ignore", "NUTS fit NOT converged", RuntimeWarning)
        fit = fitting.fit(fitting.group_bias_data(arms, X, y, groups), **hyper, num_warmup=200, num_samples=1000,
                          num_chains=1, seed=21, target_accept=0.8, sufficient=True, parametrization="noncentered")
    assert "psi_z" in fit.samples and fit.diverging.sum() == 0
    s = fit.samples
    draws = np.concatenate([s["beta_bar"].reshape(1, -1, 2), s["beta"].reshape(1, -1, 8),
                            s["psi"].reshape(1, -1, 2)], axis=-1)
    ess = np.asarray(effective_sample_size(draws))
    mean, cov = gb.batch_group_bias(post, arms, X, y)
    sd = np.sqrt(np.diag(cov))
    assert np.all(ess > 200), f"NUTS mixed poorly, ESS {ess}"
    assert np.all(np.abs(draws[0].mean(0) - mean) < 4.5 * sd / np.sqrt(ess))
    assert np.all(np.abs(draws[0].std(0, ddof=1) - sd) < 4.5 * sd / np.sqrt(2 * ess))


# ------------------------------------------------------------------------------ diagnostics adapter


def _fake_fit(chains=2, draws=30, n=6, m=3, d=2, reference=1, seed=0):
    rng = np.random.default_rng(seed)
    psi = rng.normal(size=(chains, draws, m - 1, d))
    psi_all = np.insert(psi, reference, 0.0, axis=2)
    samples = {"psi_all": psi_all, "psi": psi, "beta": rng.normal(size=(chains, draws, n, d)),
               "beta_bar": rng.normal(size=(chains, draws, d)), "z": rng.normal(size=(chains, draws, n, d)),
               "tau": rng.gamma(2.0, size=(chains, draws)), "sigma": rng.gamma(2.0, size=(chains, draws))}
    diverging = np.zeros((chains, draws), bool)
    diverging[0, 3] = True
    return fitting.Fit(mcmc=None, samples=samples, sample_stats={"diverging": diverging}, convergence=None, seconds=1.0,
                       config={"num_chains": chains}, data=None, model=None, model_args=(), model_kwargs={})


def test_from_group_bias_fit_keeps_the_non_reference_groups():
    groups = np.array([0, 0, 1, 1, 2, 2])
    rng = np.random.default_rng(1)
    arms, X, y = _random_data(rng, groups, 2, 30)
    data = fitting.group_bias_data(arms, X, y, groups, reference=1, group_names=["a", "b", "c"],
                              feature_names=["x", "intercept"], arm_names=[f"arm{i}" for i in range(6)])
    fit = _fake_fit()
    tree = dg.from_group_bias_fit(fit, data, attrs={"recipe": "t"})
    post, stats = tree["posterior"].dataset, tree["sample_stats"].dataset
    assert list(post["group"].values) == ["a", "c"] and tree.attrs["reference_group"] == "b"
    assert tree.attrs["recipe"] == "t" and tree.attrs["rows"] == 30
    np.testing.assert_array_equal(post["psi"].sel(group="c").values, fit.samples["psi_all"][:, :, 2])
    assert post["beta"].dims == ("chain", "draw", "arm", "feature") and "s" not in post and "tau" in post
    assert int(stats["diverging"].sum()) == 1 and stats["r_hat_psi"].shape == (2, 2)
    table = dg.summary(tree, var_names=["psi"], ci_prob=0.9, ci_kind="hdi")
    assert {"hdi90_lb", "hdi90_ub", "r_hat", "ess_bulk"} <= set(table.columns) and len(table) == 4
    with pytest.raises(ValueError, match="ci_kind must be 'hdi' or 'eti'"):
        dg.summary(tree, ci_kind="hpd")
    with pytest.raises(ValueError, match="fit and data disagree"):
        dg.from_group_bias_fit(_fake_fit(n=4), data)
    with pytest.raises(TypeError, match="fit must be a Fit"):
        dg.from_group_bias_fit(fit.samples, data)
    with pytest.raises(TypeError, match="data must be GroupBiasData"):
        dg.from_group_bias_fit(fit, (arms, X, y))


# ------------------------------------------------------------------------------ the Adult table


def _adult_frame(n=400, seed=0):
    rng = np.random.default_rng(seed)
    races = ["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"]
    df = pd.DataFrame({
        "age": np.r_[np.repeat([17, 24, 25, 34, 35, 44, 45, 54, 55, 90], 1), rng.integers(17, 91, n - 10)],
        "sex": np.tile(["Male", "Female"], n // 2),
        "race": np.tile(races, n // 5),
        "workclass": rng.choice(["Private", "Private", "Self-emp-inc", "State-gov"], n),
        "marital-status": rng.choice(["Married-civ-spouse", "Never-married", "Divorced"], n),
        "occupation": rng.choice(["Craft-repair", "Craft-repair", "Sales", "Tech-support"], n),
        "native-country": rng.choice(["United-States", "Mexico"], n),
        "education-num": rng.integers(1, 17, n), "capital-gain": rng.integers(0, 3, n) * 1000,
        "capital-loss": np.zeros(n, int), "hours-per-week": rng.integers(10, 60, n),
        "fnlwgt": rng.integers(10_000, 500_000, n), "education": "x", "relationship": "Husband",
        "label": rng.integers(0, 2, n),
    })
    return df


def test_adult_table_follows_the_documented_choices():
    from bayesfair.workflow.recipes import adult_group_bias as adult

    df = _adult_frame()
    df.loc[5, "occupation"] = np.nan  # a row with a missing value is dropped
    table = adult.adult_table("race", df=df)
    assert table.group_names[0] == "White" and table.reference == 0 and table.n_groups == 5
    assert table.bucket_names == ("17-24", "25-34", "35-44", "45-54", "55+") and table.rewards.size == 399
    assert list(table.bucket[:5]) == [0, 0, 1, 1, 2]  # ages 17, 24, 25, 34, 35 (row 5 dropped)
    assert list(table.bucket[5:9]) == [3, 3, 4, 4]  # ages 45, 54, 55, 90
    names = set(table.feature_names)
    assert {"education-num", "log1p(capital-gain)", "hours-per-week", "native-country=United-States",
            "workclass=Self-emp-inc", "occupation=Sales", "intercept"} <= names
    assert not names & {"age", "sex", "race", "fnlwgt", "education", "relationship", "label",
                        "workclass=Private", "occupation=Craft-repair"}  # baselines: the most frequent levels
    sex = adult.adult_table("sex", df=df)
    assert sex.group_names == ("Male", "Female") and sex.group_of_arm.tolist() == [0] * 5 + [1] * 5
    np.testing.assert_allclose(sex.features[:, :-1].mean(0), 0.0, atol=1e-4)  # z-scored context
    with pytest.raises(ValueError, match="group must be one of"):
        adult.adult_table("age", df=df)
    bad = df.copy()
    bad.loc[0, "race"] = "Martian"
    with pytest.raises(ValueError, match="unknown race label"):
        adult.adult_table("race", df=bad)
    with pytest.raises(ValueError, match="lacks column"):
        adult.adult_table("sex", df=df.drop(columns="hours-per-week"))


def test_family_income_glm_table_logs_the_money_and_one_hots_the_codes(monkeypatch):
    """The family-income GLM context: every money column (and the floor area) as log1p of the
    survey's amount, the other numeric columns as they are, each nominal column as one-hot levels
    (baseline: the most frequent; levels under min_level_rows merged), the paper's rows, groups,
    buckets and reward."""
    if not RECIPES["family_income_group_bias"].exists():
        pytest.skip(f"data for family_income_group_bias not found under {DATA}")
    monkeypatch.setenv("BAYESFAIR_DATA", str(DATA))
    from bayesfair.datasets import load_family_income
    from bayesfair.environments.biased import family_income_table
    from bayesfair.workflow.recipes import family_income_group_bias as fi

    df = load_family_income()
    table = fi.glm_table(df=df, min_level_rows=50)
    paper = family_income_table(df=df)
    np.testing.assert_array_equal(table.group, paper.group)
    np.testing.assert_array_equal(table.bucket, paper.bucket)
    np.testing.assert_allclose(table.rewards, paper.rewards)
    names = list(table.feature_names)
    cats = paper.info["categorical_columns"]
    money = [c for c in paper.feature_names if any(m in c for m in fi.MONEY)]
    assert len(money) >= 20 and "Household Head Occupation" in cats and "Region" in cats
    for c in [*money, "House Floor Area"]:
        j = names.index(f"log1p({c})")
        z = np.log1p(df[c].to_numpy(np.float64))
        np.testing.assert_allclose(table.features[:, j], (z - z.mean()) / z.std(), atol=1e-8)
        assert c not in names
    for c in cats:
        assert c not in names
        counts = df[c].astype(str).value_counts()
        kept = [n[len(c) + 1:] for n in names if n.startswith(f"{c}=")]
        assert counts.index[0] not in kept  # the baseline has no column
        assert all(counts.get(level, 0) >= 50 for level in kept if level != "other")
        assert sorted(table.info["merged_levels"].get(c, [])) == sorted(counts.index[counts < 50])
    assert names[-1] == "intercept" and table.features.shape == (41_544, len(names))


# ------------------------------------------------------------------------------ recipe entry points


def test_a_recipe_does_not_replace_an_earlier_fit_without_overwrite(tmp_path, monkeypatch, capsys):
    """The recipes replaced posterior.nc, summary.json, ... in --out silently, and kept an earlier
    fit's loo_compare.csv beside a fit without a comparison."""
    if not RECIPES["compas_group_bias"].exists():
        pytest.skip(f"data for compas_group_bias not found under {DATA}")
    monkeypatch.setenv("BAYESFAIR_DATA", str(DATA))
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    with pytest.raises(SystemExit) as exc:
        _recipe("compas_group_bias").main(["--rows", "100", "--out", str(out)])
    assert exc.value.code == 2
    assert "holds the outputs of an earlier fit (summary.json)" in capsys.readouterr().err
    assert (out / "summary.json").read_text() == "{}"


def test_dry_run_fits_nothing_and_says_what_power_would_run(tmp_path, monkeypatch, capsys):
    if not RECIPES["compas_group_bias"].exists():
        pytest.skip(f"data for compas_group_bias not found under {DATA}")
    monkeypatch.setenv("BAYESFAIR_DATA", str(DATA))
    out = tmp_path / "out"
    rc = _recipe("compas_group_bias").main(["--rows", "500", "--dry-run", "--power", "--power-effects", "0,0.5",
                                            "--power-reps", "7", "--chains", "2", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0 and not out.exists()
    assert "dry run, nothing fitted): 500 of 18,310 rows" in text
    assert "effects delta = 0, 0.5" in text and "7 replicates each: 14 more NUTS fits of 2 x (1000 + 1000)" in text
    _recipe("compas_group_bias").main(["--dry-run", "--out", str(out)])
    text = capsys.readouterr().out
    assert "power study: off" in text and "target_accept 0.99" in text  # COMPAS's own default for --model glm
    _recipe("compas_group_bias").main(["--dry-run", "--model", "paper", "--out", str(out)])
    assert "target_accept 0.9;" in capsys.readouterr().out
    _recipe("compas_group_bias").main(["--dry-run", "--target-accept", "0.8", "--out", str(out)])
    assert "target_accept 0.8, random effects auto" in capsys.readouterr().out


def test_a_recipe_s_exit_message_is_printed_by_bayesfair_fit(tmp_path, capsys):
    """A recipe's SystemExit("message") came out of `bayesfair fit` as exit 1 and nothing else."""
    assert cli.main(["fit", "--models-dir", str(MODELS), "sbc_group_bias", "--analyze", "--out", str(tmp_path)]) == 1
    assert "bayesfair: " + str(tmp_path) + ": 0 replications, need >= 2" in capsys.readouterr().err


def test_sbc_replications_are_not_mixed(tmp_path, capsys):
    """Running the same SBC command twice into one --out appended records (twice as many as the
    draws files) and the summary counted them: refused; another design in the same folder too."""
    out = tmp_path / "sbc"
    out.mkdir()
    (out / "settings.json").write_text(json.dumps({"warmup": 30, "samples": 30, "draws": 20, "d": 2, "rows": 400,
                                                   "seed": 0, "dense": False, "target_accept": 0.9}))
    (out / "draws_0000.npz").write_bytes(b"")
    base = ["--warmup", "30", "--samples", "30", "--draws", "20", "--d", "2", "--rows", "400", "--no-dense",
            "--out", str(out)]
    for args, message in ((["--reps", "2", *base], "already holds replications [0]: add new ones with --start 1"),
                          (["--reps", "1", "--start", "1", *base[:-2], "--seed", "3", "--out", str(out)],
                           "other settings (--seed 0 -> 3)")):
        with pytest.raises(SystemExit) as exc:
            _recipe("sbc_group_bias").main(args)
        assert exc.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("name,args,message", [
    ("adult_group_bias", ["--group", "age"], "invalid choice: 'age'"),
    ("adult_group_bias", ["--rows", "0"], "--rows must be >= 10"),
    ("family_income_group_bias", ["--rows", "-3"], "--rows must be >= 10"),
    ("family_income_group_bias", ["--chains", "0"], "--chains must be >= 1"),
    ("compas_group_bias", ["--samples", "0"], "--samples must be >= 1"),
    ("compas_group_bias", ["--seed", "-1"], "--seed must be >= 0"),
    ("adult_group_bias", ["--target-accept", "1.0"], "--target-accept must be in (0, 1)"),
    # a combination the likelihood cannot take, and two flags that contradict each other (the
    # first failed after loading the data with exit 1; the second dropped --parametrization)
    ("compas_group_bias", ["--parametrization", "marginal"], "--parametrization marginal"),
    ("compas_group_bias", ["--parametrization", "coefficients", "--centered-psi"], "contradict each other"),
    ("compas_group_bias", ["--model", "paper", "--likelihood", "ordered_logistic"], "is a --model glm likelihood"),
    ("adult_group_bias", ["--min-level-rows", "-1"], "--min-level-rows must be >= 0"),
    ("compas_group_bias", ["--power-reps", "0"], "--power-reps must be >= 1"),
    ("compas_group_bias", ["--power-effects", "0,x"], "--power-effects must be comma-separated numbers"),
    ("compas_group_bias", ["--power-effects", "0,0"], "--power-effects must be distinct finite numbers"),
    ("compas_group_bias", ["--power", "--model", "paper"], "--power needs --model glm"),
    ("compas_group_bias", ["--dense-mass"], "--glm-form auto chooses the mass matrix"),
    ("compas_group_bias", ["--model", "paper", "--no-ric-correction"], "--no-ric-correction is a prior of --model glm"),
    ("sbc_group_bias", ["--rows", "0"], "--rows must be >= 10"),
    ("sbc_group_bias", ["--target-accept", "2"], "--target-accept must be in (0, 1)"),
    ("sbc_group_bias", ["--start", "-1"], "--start must be >= 0"),
])
def test_bad_flags_exit_2_naming_the_flag(name, args, message, capsys):
    with pytest.raises(SystemExit) as exc:
        _recipe(name).main(args)
    assert exc.value.code == 2 and message in capsys.readouterr().err
    assert cli.main(["fit", "--models-dir", str(MODELS), name, *args]) == 2
    assert message in capsys.readouterr().err


def test_recipes_are_listed_and_run_as_scripts(capsys):
    assert cli.main(["fit", "--list", "--models-dir", str(MODELS)]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in RECIPES) and "_group_bias_recipe" not in out
    assert "  _group_bias " not in out  # the shared module of the shipped recipes is not a recipe
    for name in ("adult_group_bias", "family_income_group_bias"):
        res = subprocess.run([sys.executable, str(MODELS / f"{name}.py"), "--help"], capture_output=True, text=True,
                             cwd=ROOT.parent, timeout=120)
        assert res.returncode == 0 and "--rows" in res.stdout and "--warmup" in res.stdout, res.stderr


def test_shipped_recipes_need_no_models_folder(tmp_path, monkeypatch, capsys):
    """An installed package listed "no recipes in .../site-packages/models" and could not run one;
    --models-dir after the recipe name was silently handed to the recipe."""
    monkeypatch.delenv("BAYESFAIR_MODELS", raising=False)
    monkeypatch.chdir(tmp_path)  # no models/ here
    assert cli.main(["fit", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(f"  {name} " in out for name in RECIPES) and "sbc_group_bias" in out
    assert cli.main(["fit", "compas_group_bias", "--help"]) == 0
    assert "--likelihood" in capsys.readouterr().out
    for misplaced in (["--models-dir", str(MODELS)], [f"--models-dir={MODELS}"], ["--list"]):
        assert cli.main(["fit", "compas_group_bias", *misplaced]) == 2
        assert "put it before RECIPE" in capsys.readouterr().err
    assert cli.main(["fit", "nope"]) == 2
    assert "compas_group_bias" in capsys.readouterr().err
    assert cli.main(["fit", "--models-dir", str(tmp_path / "absent"), "--list"]) == 2


def _check_outputs(out, *, rows, groups, d, draws):
    import xarray as xr

    summary = json.loads((out / "summary.json").read_text())
    assert summary["data"]["rows"] == rows and summary["diagnostics"]["draws"] == draws
    assert len(summary["psi"]) == len(groups) * d and summary["data"]["n_features"] == d
    tree = xr.open_datatree(out / "posterior.nc", engine="h5netcdf")
    psi = tree["posterior"]["psi"]
    assert psi.shape == (1, draws, len(groups), d) and list(psi["group"].values) == groups
    assert "diverging" in tree["sample_stats"] and "r_hat_psi" in tree["sample_stats"]
    table = pd.read_csv(out / "psi_hdi.csv")
    assert list(table.columns[:6]) == ["group", "feature", "mean", "sd", "hdi90_lb", "hdi90_ub"]
    assert np.all(table["hdi90_lb"] <= table["hdi90_ub"]) and len(table) == len(groups) * d
    assert (out / "psi_forest.png").read_bytes()[:4] == b"\x89PNG"
    assert not list(out.glob(".*"))  # no temp files left behind


TINY = ["--model", "paper", "--rows", "300", "--warmup", "20", "--samples", "20", "--chains", "1"]


@pytest.mark.slow
@pytest.mark.parametrize("name,extra,via,groups,d", [
    ("compas_group_bias", [], "main", ["African-American"], 15),
    ("family_income_group_bias", [], "main", ["Male"], 58),
    ("family_income_group_bias", [], "cli", ["Male"], 58),
    ("adult_group_bias", ["--group", "sex"], "main", ["Female"], 31),
    ("adult_group_bias", ["--group", "race"], "cli",
     ["Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"], 31),
])
def test_recipe_tiny(name, extra, via, groups, d, tmp_path, monkeypatch, capsys):
    """Each recipe end to end on 300 rows with 20 NUTS draws, through main(argv) or `bayesfair fit`."""
    if not RECIPES[name].exists():
        pytest.skip(f"data for {name} not found under {DATA}")
    monkeypatch.setenv("BAYESFAIR_DATA", str(DATA))
    monkeypatch.delenv("BAYESFAIR_MODELS", raising=False)
    monkeypatch.chdir(tmp_path)  # `bayesfair fit` falls back to the checkout's models/
    args = [*extra, *TINY, "--out", str(tmp_path / "out")]
    rc = _recipe(name).main(args) if via == "main" else cli.main(["fit", name, *args])
    assert rc == 0
    assert "posterior of psi (reference group:" in capsys.readouterr().out
    _check_outputs(tmp_path / "out", rows=300, groups=groups, d=d, draws=20)


@pytest.mark.slow
def test_glm_recipe_tiny(tmp_path, monkeypatch, capsys):
    """The default (--model glm) COMPAS recipe end to end on 300 rows: the estimand, checks and files."""
    if not RECIPES["compas_group_bias"].exists():
        pytest.skip(f"data for compas_group_bias not found under {DATA}")
    monkeypatch.setenv("BAYESFAIR_DATA", str(DATA))
    out = tmp_path / "out"
    assert cli.main(["fit", "compas_group_bias", "--rows", "300", "--warmup", "30", "--samples", "30",
                     "--chains", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "bias estimand" in printed and "detectable at 90% power" in printed
    summary = json.loads((out / "summary.json").read_text())
    est = summary["bias_estimand"]["African-American"]
    assert summary["likelihood"] == "ordered_logistic" and est["lb"] <= est["mean"] <= est["ub"]
    # about (z_0.95 + z_0.9) posterior sds: the large-sample detectable effect
    assert summary["detectable_effect"]["African-American"]["effect"] == pytest.approx(2.926 * est["sd"], rel=1e-3)
    assert summary["priors"]["ric_correction"] is True  # the default prior, recorded
    assert "not evidence of no bias" in summary["loo"]["reading"] or "predicts better" in summary["loo"]["reading"]
    for f in ("posterior.nc", "bias_estimand.csv", "prior_predictive.png", "loo_compare.csv"):
        assert (out / f).exists(), f


@pytest.mark.slow
def test_glm_recipe_power_tiny(tmp_path, monkeypatch, capsys):
    """``--power`` end to end on 100 COMPAS rows (a code-path budget): power.json holds every effect
    size with its replicates counted (a tiny budget fails the verdict: counted, not dropped) and
    power.png is written."""
    if not RECIPES["compas_group_bias"].exists():
        pytest.skip(f"data for compas_group_bias not found under {DATA}")
    monkeypatch.setenv("BAYESFAIR_DATA", str(DATA))
    out = tmp_path / "out"
    argv = ["--rows", "100", "--warmup", "30", "--samples", "30", "--chains", "2", "--no-compare", "--power",
            "--power-effects", "0,0.5", "--power-reps", "2", "--out", str(out)]
    assert cli.main(["fit", "compas_group_bias", *argv]) == 0
    assert "power of the bias estimand (African-American vs rest" in capsys.readouterr().out
    power = json.loads((out / "power.json").read_text())
    assert power["complete"] and [r["effect"] for r in power["rows"]] == [0.0, 0.5]
    for row in power["rows"]:
        assert row["replicates"] == 2 and row["converged"] + row["not_converged"] + len(row["errors"]) == 2
    assert power["rows"][0]["true_estimand"] == 0.0 < power["rows"][1]["true_estimand"]
    assert (out / "power.png").stat().st_size > 10_000
