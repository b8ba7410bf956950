"""Experiment scripts run end to end with tiny arguments."""

import importlib.util
import json
from pathlib import Path

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
