"""The shipped study configs (experiments/configs/*.toml).

- every config loads and validates at its full size and with a tiny override, and is documented
  (a header comment; named in its experiment's README or in docs/workflow.md);
- each config builds the same objects as the experiment script it stands for (policies' names and
  configurations, the merit, the seed and chunk size, and an environment that draws the same
  rounds), so `bayesfair simulate CONFIG` repeats the script's core simulation;
- tiny versions run end to end: two configs in the default suite, every config (all policies, all
  sweep points) in the slow suite.

simulate() is a deterministic function of (seed, env, policies, horizon, runs, merit, checkpoints,
chunk_size), so equal objects give equal numbers; that the numbers agree was also checked by hand
on tiny horizons for every config (2026-11-23).
"""

from __future__ import annotations

import importlib.util
import os
import re
import tomllib
from pathlib import Path

import jax
import numpy as np
import pytest

import bayesfair as bf
from bayesfair.config import Study, load_config
from bayesfair.sweep import Sweep

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "experiments" / "configs"
PATHS = sorted(CONFIGS.glob("*.toml"))
DATA = Path(os.environ.get("BAYESFAIR_DATA", ROOT.parent / "shared" / "data"))
# environments that read a dataset, and the dataset's folder
DATASETS = {"yeast_bandit": "yeast", "gmf_adult": "adult", "compas_bandit": "compas",
            "family_income_bandit": "family_income"}
TINY = ["horizon=40", "runs=2", "checkpoints=5", "chunk_size=16"]


def _raw(path: Path) -> dict:
    with open(path, "rb") as f:
        return tomllib.load(f)


@pytest.fixture
def data_for(monkeypatch):
    """Point BAYESFAIR_DATA at the shared data for a config that needs a dataset, or skip."""

    def use(path: Path) -> None:
        dataset = DATASETS.get(_raw(path)["environment"]["name"])
        if dataset is None:
            return
        if not (DATA / dataset).is_dir():
            pytest.skip(f"{path.name} needs the {dataset} data under {DATA}")
        monkeypatch.setenv("BAYESFAIR_DATA", str(DATA))

    return use


def _studies(obj) -> list[Study]:
    return list(obj.points) if isinstance(obj, Sweep) else [obj]


def _script(name: str):
    """experiments/<name>/run.py as a module (its main() is not run)."""
    spec = importlib.util.spec_from_file_location(f"_experiment_{name}", ROOT / "experiments" / name / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------------------------------------
# loading, validation, documentation


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_config_loads_validates_and_is_documented(path, data_for):
    text = path.read_text()
    assert text.startswith("#"), f"{path.name}: start with a header comment (what it reproduces, what it cannot)"
    data_for(path)
    full = load_config(path)
    tiny = load_config(path, TINY)
    for study in _studies(tiny):
        assert (study.horizon, study.runs) == (40, 2)
        assert study.policies and study.env.spec.n_arms >= 2
    assert len(_studies(full)) == len(_studies(tiny))
    docs = [*(ROOT / "experiments").glob("*/README.md"), ROOT / "docs" / "workflow.md"]
    assert any(f"configs/{path.name}" in d.read_text() for d in docs), \
        f"{path.name} is not named in any experiment README or docs/workflow.md"


@pytest.mark.parametrize("readme", sorted((ROOT / "experiments").glob("*/README.md")), ids=lambda p: p.parent.name)
def test_every_experiment_readme_names_its_configs(readme):
    if readme.parent.name == "benchmarks":
        return
    named = re.findall(r"configs/([\w.-]+\.toml)", readme.read_text())
    assert named, f"{readme} does not mention its config"
    for name in named:
        assert (CONFIGS / name).is_file(), f"{readme} names configs/{name}, which does not exist"


# ---------------------------------------------------------------------------------------------
# each config builds the experiment script's objects


def _draws(env, seed: int = 11):
    """Two resets and a step of each: a fingerprint of the rounds an environment draws."""
    out = []
    for k in jax.random.split(jax.random.key(seed), 2):
        k1, k2 = jax.random.split(k)
        params = env.reset(k1)
        rnd = env.step(k2, params, np.int32(3))
        out.append((params, rnd))
    return jax.tree.map(np.asarray, out)


def _assert_same_env(got, want):
    a, b = got.spec, want.spec
    assert (a.n_arms, a.n_groups, a.n_features, a.reward_range) == (b.n_arms, b.n_groups, b.n_features, b.reward_range)
    np.testing.assert_array_equal(a.group_of_arm, b.group_of_arm)
    np.testing.assert_array_equal(got.groups.labels, want.groups.labels)
    for a, b in zip(jax.tree.leaves(_draws(got)), jax.tree.leaves(_draws(want)), strict=True):
        np.testing.assert_array_equal(a, b)


def _assert_same_policies(study: Study, want: dict, ignore: tuple[str, ...] = ()):
    assert list(study.policies) == list(want)
    for label, pol in want.items():
        got = study.policies[label]
        assert got.name == pol.name, label
        strip = lambda c: {k: v for k, v in c.items() if k not in ignore}  # noqa: E731
        a, b = strip(got.config), strip(pol.config)
        assert a.keys() == b.keys(), label
        for k in a:  # numbers derived along two paths (e.g. OFUL's theta bound) agree to rounding
            if isinstance(a[k], float) or isinstance(b[k], float):
                assert a[k] == pytest.approx(b[k], rel=1e-12), f"{label}.{k}"
            else:
                assert a[k] == b[k], f"{label}.{k}"


def _assert_same_run(study: Study, seed: int, merit, chunk_size: int, checkpoints=None):
    assert study.seed == seed
    assert study.merit.describe() == merit.describe()
    assert study.config["chunk_size"] == chunk_size
    if checkpoints is not None:
        np.testing.assert_array_equal(study.checkpoints, checkpoints)


def test_bilevel_configs_are_the_scripts_small_scale():
    m = _script("bilevel")
    grid = bf.checkpoint_grid(10_000, 80)
    for cfg, setting, seed in (("bilevel.toml", "low", 1000), ("bilevel_high.toml", "high", 0)):
        study = load_config(CONFIGS / cfg)
        assert (study.horizon, study.runs) == (m.SCALES["small"]["horizon"], m.SCALES["small"]["runs"])
        _assert_same_run(study, seed, m.MERIT, m.SCALES["small"]["chunk"], grid)
        assert study.config["group_floors"] == list(m.BASELINE_BETA)
        _assert_same_env(study.env, m.environment(setting))
        _assert_same_policies(study, m.policies(m.BASELINE_BETA, with_baselines=True))
    sweep = load_config(CONFIGS / "bilevel_beta_sweep.toml")
    assert [p.config["group_floors"] for p in sweep.points] == [list(b) for b in m.BETAS]
    for point, beta in zip(sweep.points, m.BETAS, strict=True):
        _assert_same_run(point, 1000, m.MERIT, m.SCALES["small"]["chunk"], grid)
        _assert_same_policies(point, m.policies(beta, with_baselines=False))
    _assert_same_env(sweep.points[0].env, m.environment("low"))


def test_biased_feedback_config_is_the_scripts_base_point():
    from bayesfair.environments.biased import synthetic_biased

    m = _script("biased_feedback")
    small = m.SCALES["small"]
    study = load_config(CONFIGS / "biased_feedback_synthetic.toml")
    assert (study.horizon, study.runs) == (small["horizon"], small["runs"])
    _assert_same_run(study, 1, m.MERIT, small["chunk"], np.arange(small["t_step"], small["horizon"] + 1,
                                                                    small["t_step"]))
    d = m.DEFAULT
    _assert_same_env(study.env, synthetic_biased(d["n_arms"], d["n_sensitive"], d["n_features"],
                                                 bias_mean=d["bias_mean"], coef_high=m.COEF_HIGH))
    _assert_same_policies(study, m.make_policies(m.synthetic_ts_params(d["bias_mean"])))


def test_group_meritocratic_fig1_config_is_the_scripts_small_scale():
    m = _script("group_meritocratic")
    small = m.SCALES["small"]["fig1"]
    study = load_config(CONFIGS / "group_meritocratic_fig1.toml")
    assert (study.horizon, study.runs) == (small["horizon"], small["runs"])
    _assert_same_run(study, 1, m.MERIT, small["horizon"])
    env = m.gm.gmf_synthetic()
    _assert_same_env(study.env, env)
    s = float(np.linalg.norm(env.config["theta"]))
    _assert_same_policies(study, {
        "Uniform Random": m.gp.uniform_random(),
        "OFUL": m.gp.oful(lam=m.LAM, noise_sd=env.config["noise_sd"], theta_bound=s, delta=m.DELTA),
        "Fair-Greedy": m.gp.fair_greedy(small["horizon"], lam=m.LAM, rho=m.RHO),
    })


def test_group_meritocratic_fig2_config_is_the_scripts_small_scale(data_for):
    path = CONFIGS / "group_meritocratic_fig2_adult.toml"
    data_for(path)
    m = _script("group_meritocratic")
    small = m.SCALES["small"]["fig2"]
    study = load_config(path)
    assert (study.horizon, study.runs) == (small["horizon"], small["runs"])
    _assert_same_run(study, 2, m.MERIT, 1024)
    env = m.gm.gmf_adult(m.N_CANDIDATES, group="race", noise_sd=m.ADULT_NOISE, split="all")
    _assert_same_env(study.env, env)
    s = float(np.linalg.norm(env.config["theta"]))
    _assert_same_policies(study, {
        "Uniform Random": m.gp.uniform_random(),
        "OFUL": m.gp.oful(lam=m.LAM, noise_sd=m.ADULT_NOISE, theta_bound=s, delta=m.DELTA),
        "Fair-Greedy": m.gp.fair_greedy_multigroup(small["horizon"], lam=m.LAM, rho=m.RHO),
        "Greedy": m.gp.greedy(lam=m.LAM),
    })


def test_fairx_yeast_configs_are_the_scripts_simulations(data_for):
    data_for(CONFIGS / "fairx_yeast_fig2.toml")
    m = _script("fairx_yeast")
    bandits = m.Bandits(0, 0.0)
    # Figure 2 with the values run.py --scale paper tuned (README); FairX-UCB's horizon is unused with w0
    tuned = {"FairX-UCB": {"w0": 0.3}, "FairX-TS": {"prior_var": 0.1, "noise_var": 0.01},
             "FairX-EG": {"epsilon": 0.01}, "UCB": {"w0": 1.0}, "TS": {"prior_var": 0.01, "noise_var": 1.0}}
    study = load_config(CONFIGS / "fairx_yeast_fig2.toml")
    merit = bf.merit.exponential(10.0)
    _assert_same_run(study, 2, merit, 1024)
    assert (study.horizon, study.runs) == (m.SCALES["small"]["fig2"]["horizon"], m.SCALES["small"]["fig2"]["runs"])
    _assert_same_env(study.env, bandits.get("mab", "test"))
    _assert_same_policies(study, {n: m.make_policy(n, merit, tuned[n]) for n in m.MAB_ALL}, ignore=("horizon",))
    # Figure 3 with run.py's --no-tune defaults
    study = load_config(CONFIGS / "fairx_yeast_fig3.toml")
    merit = bf.merit.exponential(3.0)
    _assert_same_run(study, 3, merit, 1024)
    assert (study.horizon, study.runs) == (m.SCALES["small"]["fig3"]["horizon"], m.SCALES["small"]["fig3"]["runs"])
    _assert_same_env(study.env, bandits.get("linear", "test"))
    _assert_same_policies(study, {n: m.make_policy(n, merit, m.DEFAULTS[n]) for n in m.LINEAR_ALL})
    # the c sweep: the same seed and bandit for every c
    sweep = load_config(CONFIGS / "fairx_yeast_c_sweep.toml")
    for point, c in zip(sweep.points, sweep.values[0], strict=True):
        merit = bf.merit.exponential(c)
        _assert_same_run(point, 4, merit, 1024)
        _assert_same_policies(point, {n: m.make_policy(n, merit, tuned[n]) for n in m.SWEEP_POLICIES},
                              ignore=("horizon",))
    _assert_same_env(sweep.points[0].env, bandits.get("mab", "test"))


def test_yeast_validation_part_shares_the_test_parts_random_fourier_map(data_for):
    data_for(CONFIGS / "fairx_yeast_fig3.toml")
    m = _script("fairx_yeast")
    bandits = m.Bandits(0, 0.0)
    from bayesfair.registry import yeast_bandit

    val = yeast_bandit(mode="linear", part="validation", split_seed=0, key=0)
    _assert_same_env(val, bandits.get("linear", "val"))
    assert val.spec.n_arms == 14


def test_long_horizon_config_is_the_scripts_study():
    study = load_config(CONFIGS / "long_horizon.toml")
    merit = bf.merit.exponential(4.0)
    assert (study.horizon, study.runs) == (10_000_000, 50)
    _assert_same_run(study, 0, merit, 8192)
    _assert_same_env(study.env, bf.bernoulli_arms(bf.UniformMeans(0.1, 0.9, n_arms=60)))
    _assert_same_policies(study, {"FairX-TS": bf.fairx_ts(bf.beta_bernoulli(), merit)})


# ---------------------------------------------------------------------------------------------
# tiny runs


def _run_tiny(path: Path, tmp_path: Path):
    obj = load_config(path, [*TINY, f"output={tmp_path / path.stem}"])
    res = obj.execute()
    ds = bf.read_results(res.results)
    studies = _studies(obj)
    assert list(ds["policy"].values) == list(studies[0].policies)
    assert int(ds["checkpoint"].values[-1]) == 40 and ds.sizes["run"] == 2
    assert np.isfinite(ds["fairness_regret"].values).all()
    assert np.all(ds["pulls"].isel(checkpoint=-1).sum("arm").values == 40)
    return ds


@pytest.mark.parametrize("name", ["long_horizon.toml", "group_meritocratic_fig1.toml"])
def test_tiny_run(name, tmp_path):
    _run_tiny(CONFIGS / name, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_tiny_run_of_every_config(path, tmp_path, data_for):
    data_for(path)
    _run_tiny(path, tmp_path)
