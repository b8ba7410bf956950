"""Experiment scripts run end to end with tiny arguments, and the study configs they run (the
shipped configs, bayesfair/data/configs/*.toml) load, are documented and run end to end when made
tiny."""

import importlib.util
import json
import os
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

import bayesfair as bf
from bayesfair.workflow import shipped
from bayesfair.workflow.config import load_config
from bayesfair.workflow.sweep import Sweep

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = shipped.config_dir()
PATHS = sorted(CONFIGS.glob("*.toml"))
DATA = Path(os.environ.get("BAYESFAIR_DATA", ROOT.parent / "shared" / "data"))
# environments that read a dataset, and the dataset's folder
DATASETS = {"yeast_bandit": "yeast", "gmf_adult": "adult", "compas_bandit": "compas",
            "family_income_bandit": "family_income"}
TINY = ["horizon=40", "runs=2", "checkpoints=5", "chunk_size=16"]


def _load(rel: str):
    spec = importlib.util.spec_from_file_location(rel.replace("/", "_"), ROOT / rel)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_long_horizon_script_tiny(tmp_path, capsys):
    mod = _load("experiments/long_horizon/run.py")
    args = ["--horizon", "300", "--runs", "2", "--arms", "3", "--chunk-size", "64", "--out", str(tmp_path)]
    assert mod.main(args) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["horizon"] == 300 and summary["peak_rss_mb"] > 0
    assert (tmp_path / "long_horizon.nc").stat().st_size > 0


def test_fairx_yeast_script_small_figure2(tmp_path, capsys, monkeypatch):
    data = Path(os.environ.get("BAYESFAIR_DATA", ROOT.parent / "shared" / "data"))
    if not (data / "yeast" / "yeast.arff").is_file():
        pytest.skip(f"yeast data not found under {data}")
    monkeypatch.setenv("BAYESFAIR_DATA", str(data))
    mod = _load("experiments/fairx_yeast/run.py")
    small = mod.SCALES["small"]
    monkeypatch.setitem(small, "fig2", {"horizon": 400, "runs": 2})
    monkeypatch.setitem(small, "tune", {**small["tune"], "horizon": 200, "runs": 1, "linear_horizon": 100})
    grids = {n: {k: v[:1] for k, v in g.items()} for n, g in mod.GRIDS["small"].items()}
    grids["FairX-EG"] = {"epsilon": [0.02, 1.0]}  # one real choice: epsilon = 1 is the uniform policy
    monkeypatch.setitem(mod.GRIDS, "small", grids)
    assert mod.main(["--scale", "small", "--figure", "2", "--out", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "hyper-parameters (mab, c=10, tuned on the validation split at c=10)" in out and "FairX-EG" in out
    tuned = json.loads((tmp_path / "tuned_params.json").read_text())["entries"]
    assert tuned["mab/c=10/FairX-EG"]["params"] == {"epsilon": 0.02}
    assert set(tuned) == {f"mab/c=10/{n}" for n in mod.MAB_ALL}
    summary = json.loads((tmp_path / "summary.json").read_text())
    final = summary["figures"]["2"]["final"]
    assert set(final) == set(mod.MAB_ALL)
    assert final["FairX-TS"]["fairness_regret"] < final["UCB"]["fairness_regret"]
    assert (tmp_path / "fig2.nc").stat().st_size > 0 and (tmp_path / "fig2_regret.png").stat().st_size > 0


def test_bilevel_study_tiny(tmp_path, capsys):
    """The bi-level study end to end on one setting with BF-UCB and BF-TS only: results, the
    summary table and the figures of that setting are written, and the floors held."""
    mod = _load("experiments/bilevel/run.py")
    args = ["--setting", "low", "--no-baselines", "--betas", "0.3,0.4", "--horizon", "600", "--runs", "2", "--quiet",
            "--out", str(tmp_path)]
    assert mod.main(args) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary["low"]) == {"beta0.3-0.3", "beta0.4-0.4"}  # --betas
    block = summary["low"]["beta0.4-0.4"]
    assert block["horizon"] == 600 and set(block["policies"]) == {"BF-UCB", "BF-TS"}
    assert all(p["min_anytime_slack"] >= 0 for p in block["policies"].values())
    for name in ("fig1b_regret_low.png", "fig2b_meritocratic_low.png", "summary.md"):
        assert (tmp_path / name).stat().st_size > 0
    assert "regret vs R*_beta" in capsys.readouterr().out

    # The same study in two halves (--policies) joined by --merge gives the joint run's numbers:
    # the per-run keys do not depend on which policies run together.
    for name in ("BF-UCB", "BF-TS"):
        half = args[:-1] + [str(tmp_path / name), "--policies", name]
        assert mod.main(half) == 0
    merged = tmp_path / "merged"
    halves = [str(tmp_path / "BF-UCB"), str(tmp_path / "BF-TS")]
    assert mod.main(["--merge", *halves, "--out", str(merged), "--quiet"]) == 0
    joined = json.loads((merged / "summary.json").read_text())["low"]["beta0.4-0.4"]
    assert joined["policies"] == block["policies"]
    assert (merged / "fig1b_regret_low.png").stat().st_size > 0
    with pytest.raises(SystemExit):  # a policy in two folders
        mod.main(["--merge", str(tmp_path), str(tmp_path / "BF-TS"), "--out", str(merged), "--quiet"])
    with pytest.raises(SystemExit):
        mod.main(args + ["--policies", "BF-UCB,Nope"])


def test_biased_feedback_script_tiny(tmp_path, capsys, monkeypatch):
    """Section 5 experiments of the biased-feedback paper, synthetic setting, two policies, tiny sizes."""
    mod = _load("experiments/biased_feedback/run.py")
    tiny = {"runs": 2, "horizon": 40, "t_step": 20, "n_arms": (10,), "bias_mean": (), "n_sensitive": (5,)}
    for k, v in tiny.items():
        monkeypatch.setitem(mod.SCALES["small"], k, v)
    args = ["--scale", "small", "--setting", "synthetic", "--policies", "TopInterval,GroupFair-TS",
            "--out", str(tmp_path), "--no-progress"]
    assert mod.main(args) == 0
    assert "synthetic T sweep, at T=40" in capsys.readouterr().out
    summary = json.loads((tmp_path / "summary.json").read_text())
    final = summary["settings"]["synthetic"]["T"]["final"]
    assert set(final) == {"TopInterval", "GroupFair-TS"}
    assert 0.0 <= final["TopInterval"]["sensitive_share"] <= 1.0 and "psi_error" in final["GroupFair-TS"]
    assert summary["settings"]["synthetic"]["T"]["checkpoints"] == [20, 40]
    for name in ("synthetic_n10_s5_mu10_d2.nc", "synthetic_T.png", "synthetic_n.csv", "synthetic_sensitive_share.png"):
        assert (tmp_path / name).stat().st_size > 0


def test_group_meritocratic_script_tiny(tmp_path, capsys, monkeypatch):
    """Figures 1 and 2 of the group meritocratic fairness paper at tiny sizes (Figure 2 needs Adult)."""
    data = Path(os.environ.get("BAYESFAIR_DATA", ROOT.parent / "shared" / "data"))
    have_adult = (data / "adult" / "adult.data").is_file()
    if have_adult:
        monkeypatch.setenv("BAYESFAIR_DATA", str(data))
    mod = _load("experiments/group_meritocratic/run.py")
    monkeypatch.setitem(mod.SCALES["small"], "fig1", {"horizon": 60, "runs": 2})
    monkeypatch.setitem(mod.SCALES["small"], "fig2", {"horizon": 40, "runs": 2})
    figure = "all" if have_adult else "1"
    assert mod.main(["--scale", "small", "--figure", figure, "--out", str(tmp_path), "--no-progress"]) == 0
    assert "Figure 1: T=60, 2 runs" in capsys.readouterr().out
    summary = json.loads((tmp_path / "summary.json").read_text())
    final = summary["figures"]["1"]["final"]
    assert set(final) == {"Uniform Random", "OFUL", "Fair-Greedy"}
    assert final["Fair-Greedy"]["fair_regret"] < final["Uniform Random"]["fair_regret"]
    assert (tmp_path / "fig1.png").stat().st_size > 0 and (tmp_path / "fig1.nc").stat().st_size > 0
    if have_adult:
        fig2 = summary["figures"]["2"]
        assert set(fig2["final"]) == {"Uniform Random", "OFUL", "Fair-Greedy", "Greedy"}
        assert fig2["groups"][0] == "White" and len(fig2["selection_rate_percent"]["Greedy"]) == 5
        assert abs(fig2["selection_rate_percent"]["Uniform Random"][0] - 10.0) < 1e-3  # 1/K of those offered
        assert (tmp_path / "fig2.png").stat().st_size > 0
    assert not list(tmp_path.glob(".*.tmp"))


# ---------------------------------------------------------------------------------------------
# the study configs


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


def _studies(obj) -> list:
    return list(obj.points) if isinstance(obj, Sweep) else [obj]


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
    readmes = [p.read_text() for p in (ROOT / "experiments").glob("*/README.md")]
    assert any(f"bayesfair/data/configs/{path.name}" in t for t in readmes) \
        or f"| `{path.stem}`" in (ROOT / "docs" / "workflow.md").read_text(), \
        f"{path.stem} is not named in any experiment README or in the table of docs/workflow.md"


@pytest.mark.parametrize("readme", sorted((ROOT / "experiments").glob("*/README.md")), ids=lambda p: p.parent.name)
def test_every_experiment_readme_names_its_configs(readme):
    if readme.parent.name == "benchmarks":
        return
    text = readme.read_text()
    named = re.findall(r"configs/([\w.-]+\.toml)", text)
    assert named, f"{readme} does not mention its config"
    for name in named:
        assert (CONFIGS / name).is_file(), f"{readme} names configs/{name}, which is not a shipped config"
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):  # every relative link resolves
        if "://" not in target:
            assert (readme.parent / target).exists(), f"{readme} links to {target}, which does not exist"


def test_the_configs_have_one_copy_in_the_package():
    """The study configs live once, in the package (bayesfair/data/configs): `bayesfair demo` runs
    the shipped demo, and no second copy (a file or a link) is kept elsewhere in the tree."""
    from bayesfair.workflow.cli import demo_config

    assert demo_config() == shipped.config_path("demo") and demo_config().is_file()
    assert CONFIGS == ROOT / "bayesfair" / "data" / "configs"
    shipped_bytes = {c.read_bytes() for c in PATHS}
    stray = [p for d in ("bayesfair", "experiments", "docs", "models", "tests") for p in (ROOT / d).rglob("*.toml")
             if p.parent != CONFIGS and (p.name in {c.name for c in PATHS} or p.read_bytes() in shipped_bytes)]
    assert not stray, f"copies of shipped configs outside the package: {stray}"


def test_yeast_validation_part_shares_the_test_parts_random_fourier_map(monkeypatch):
    """The linear yeast bandit's validation part (tuning in experiments/fairx_yeast/run.py) uses the
    random Fourier map of the test part: the same draws as a bandit built on the validation rows
    with the test part's bandwidth."""
    import jax

    if not (DATA / "yeast").is_dir():
        pytest.skip(f"needs the yeast data under {DATA}")
    monkeypatch.setenv("BAYESFAIR_DATA", str(DATA))
    from bayesfair.datasets import load_yeast
    from bayesfair.environments import multilabel_bandit
    from bayesfair.environments.multilabel import yeast_bandit_config as yeast_bandit
    from bayesfair.workflow.tuning import validation_split

    df = load_yeast("all")
    x, y = df[list(df.attrs["features"])].to_numpy(np.float64), df[list(df.attrs["labels"])].to_numpy(np.float64)
    split = validation_split(x, y, fraction=0.2, seed=0)
    test = multilabel_bandit(split.test_features, split.test_labels, mode="linear", n_rff=50, key=0, bias=0.0)
    want = multilabel_bandit(split.val_features, split.val_labels, mode="linear", n_rff=50, key=0, bias=0.0,
                             rff_scale=test.params["rff_scale"])
    val = yeast_bandit(mode="linear", part="validation", split_seed=0, key=0)
    assert val.spec.n_arms == 14
    assert (val.spec.n_groups, val.spec.n_features, val.spec.reward_range) == \
        (want.spec.n_groups, want.spec.n_features, want.spec.reward_range)
    np.testing.assert_array_equal(val.spec.group_of_arm, want.spec.group_of_arm)
    for k in jax.random.split(jax.random.key(11), 2):
        k1, k2 = jax.random.split(k)
        got, exp = val.reset(k1), want.reset(k1)
        draws = (got, val.step(k2, got, np.int32(3))), (exp, want.step(k2, exp, np.int32(3)))
        for a, b in zip(jax.tree.leaves(draws[0]), jax.tree.leaves(draws[1]), strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


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


def _file_keys(node, path=""):
    """``(key path, value)`` of every ``*_file`` key of a config, at any depth."""
    if isinstance(node, dict):
        for k, v in node.items():
            p = f"{path}.{k}" if path else k
            if k.endswith("_file"):
                yield p, v
            yield from _file_keys(v, p)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _file_keys(v, f"{path}[{i}]")


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_shipped_configs_name_no_input_files(path):
    """An input file a config names (means_file, theta_file, beta_file, psi_file) is read relative to
    the working folder, so a shipped or exported config that named one would fail wherever it is
    run: shipped configs draw their instances from the seed or read registered data sets."""
    assert not list(_file_keys(_raw(path))), f"{path.name} names input files: {list(_file_keys(_raw(path)))}"


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_tiny_run_of_every_config(path, tmp_path, data_for):
    data_for(path)
    _run_tiny(path, tmp_path)
