"""Smoke test of experiments/benchmarks/fairx_ts_bench.py (a tiny --quick run)."""

import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "experiments" / "benchmarks" / "fairx_ts_bench.py"


def _load_bench():
    spec = importlib.util.spec_from_file_location("fairx_ts_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
