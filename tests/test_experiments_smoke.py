"""Experiment scripts run end to end with tiny arguments."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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
    import os

    import pytest

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
    import os

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
