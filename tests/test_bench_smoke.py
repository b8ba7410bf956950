"""Smoke tests of experiments/benchmarks/fairx_ts_bench.py and bilevel_bench.py (tiny --quick runs)."""

import importlib
import json
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[1] / "experiments" / "benchmarks"


def _import(name):
    # The benchmark scripts import their shared `harness` module from their own folder, which
    # Python puts first on sys.path when it runs one as a script; do the same here.
    if str(BENCH_DIR) not in sys.path:
        sys.path.insert(0, str(BENCH_DIR))
    return importlib.import_module(name)


def _load_bench():
    return _import("fairx_ts_bench")


def test_quick_bench_writes_json(tmp_path):
    out = tmp_path / "b.json"
    _load_bench().main(["--quick", "--out", str(out)])
    data = json.loads(out.read_text())
    assert {"settings", "machine", "results", "target"} <= data.keys()
    assert data["settings"]["quick"] is True
    assert data["machine"]["cpu_count"] >= 1 and data["machine"]["jax_local_device_count"] >= 1
    assert [r["k"] for r in data["results"]] == [14, 60]
    for r in data["results"]:
        for name in ("numpy_rate", "jax_end_to_end_rate", "ratio_end_to_end"):
            assert r[name] > 0, name
        for name in ("jax_steady_rate", "jax_chunk_rate", "ratio_steady"):  # None: lost in timing noise
            assert r[name] is None or r[name] > 0, name
        assert r["jax_steady_resolved"] is None  # one repeat: no spread to judge the difference by
        assert 0 < r["numpy_fairness_regret_per_T"] <= 2 and 0 < r["jax_fairness_regret_per_T"] <= 2
    assert data["target"]["met"] is None  # no verdict from a smoke run
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic write left no temporary file


def _load_bilevel_bench():
    return _import("bilevel_bench")


def test_quick_bilevel_bench_writes_json(tmp_path):
    # BF-UCB only: every simulate call compiles, and two calls keep the test well under 40 s.
    out = tmp_path / "b.json"
    bench = _load_bilevel_bench()
    data = bench.main(["--quick", "--policies", "BF-UCB", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(data))
    assert data["settings"]["quick"] is True and data["settings"]["beta"] == [0.4, 0.4]
    assert [(r["policy"], r["k"]) for r in data["results"]] == [("BF-UCB", 15), ("BF-UCB", 60)]
    for r in data["results"]:
        for name in ("numpy_rate", "bayesfair_end_to_end_rate", "bayesfair_chunk_rate", "ratio_chunk"):
            assert r[name] > 0, name
        assert r["bayesfair_steady_rate"] is None and r["bayesfair_steady_resolved"] is None  # no 2T call
        c = r["cross_check"]
        assert c["horizon"] == data["settings"]["numpy_horizon"]
        assert 0.35 < c["minority_exposure"]["numpy"] < 0.65 and 0.35 < c["minority_exposure"]["bayesfair"] < 0.65
        assert c["numpy_min_anytime_slack"] >= 0 and c["bayesfair_min_anytime_slack"] >= 0  # floors held
    est = data["study_estimate"]
    assert est["BF-UCB"]["bayesfair_hours"] > 0 and est["BF-UCB"]["numpy_hours"] > 0
    assert est["BF-UCB"]["met"] is None  # no verdict from a smoke run
    assert est["BF-TS"]["bayesfair_hours"] is None  # not run
    assert [p.name for p in tmp_path.iterdir()] == ["b.json"]  # the atomic write left no temporary file


def test_bilevel_numpy_reference_bf_ts():
    # The NumPy BF-TS path (not compiled, so cheap): floors hold at every round, every round's
    # selection distribution sums to one, and every arm is pulled during the initialization.
    import numpy as np

    bench = _load_bilevel_bench()
    means = np.random.default_rng(0).uniform(0.6, 0.85, (6, 15))
    out = bench.numpy_bilevel("BF-TS", means, (5, 10), (0.4, 0.4), 300, seed=1)
    assert out["anytime_slack"].min() >= 0
    np.testing.assert_allclose(out["exposure"].sum(axis=1), 300)
    assert (out["pulls"] >= 1).all() and (out["pulls"].sum(axis=1) == 300).all()
    assert (out["group_pulls"].sum(axis=1) == 300).all() and (out["group_pulls"] >= 120).all()
