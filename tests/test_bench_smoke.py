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


def test_harness_timing_method_on_scripted_calls():
    # The T-vs-2T method of experiments/benchmarks/harness.py on scripted timings (no JAX): the
    # warm-up first, T and 2T interleaved, the best of the repeats, the steady rate from the
    # difference, resolved against the spread, the per-chunk rate from the 2T calls.
    harness = _import("harness")
    seconds, made = iter([9.0, 3.0, 5.0, 3.2, 5.1]), []

    def call(h):  # R = 10 runs; one stamp after the first chunk (1 s, 50 rounds) and one at the end
        made.append(h)
        s = next(seconds)
        return harness.Timed(s, [(1.0, 10 * 50), (s, 10 * h)], h)

    timing, calls = harness.time_doubling(call, 10, 100, 2, warmup=50)
    assert made == [50, 100, 200, 100, 200] and [c.value for c in calls[200]] == [200, 200]
    assert timing["jax_seconds_T"] == [3.0, 3.2] and timing["jax_seconds_2T"] == [5.0, 5.1]
    assert timing["jax_end_to_end_rate"] == 1000 / 3.0 and timing["jax_steady_rate"] == 1000 / 2.0
    assert abs(timing["jax_timing_spread_seconds"] - 0.2) < 1e-12 and timing["jax_steady_resolved"] is True
    assert timing["jax_chunk_rate"] == 1500 / 4.0 and timing["jax_compile_seconds_estimate"] == 1.0
    assert abs(timing["jax_fixed_seconds"] - (3.0 - 1000 / 375)) < 1e-12  # time(T) - R T / per-chunk rate
    r = harness.ratios(100.0, timing)
    assert r == {"ratio_steady": 5.0, "ratio_chunk": 3.75, "ratio_end_to_end": 1000 / 3.0 / 100.0}
    # T only, one repeat: no steady-state rate, nothing to judge it by, the per-chunk rate from T
    seconds = iter([2.0])
    one, _ = harness.time_doubling(call, 10, 100, 1, double=False, prefix="bayesfair")
    assert one["bayesfair_steady_rate"] is None and one["bayesfair_steady_resolved"] is None
    assert one["bayesfair_seconds_2T"] == [] and one["bayesfair_chunk_rate"] == 500.0
    assert one["bayesfair_compile_seconds_estimate"] is None and one["bayesfair_fixed_seconds"] == 0.0


def test_harness_fresh_process_and_arguments(capsys):
    # A pairing side timed in a new Python process (start-up and imports included), and the common
    # argument checks naming the flag.
    import pytest

    harness, bench = _import("harness"), _load_bench()
    run = harness.time_fresh(bench.numpy_fairx_ts, runs=2, horizon=5, seed=0, means=[0.2, 0.8])
    assert run["wall_seconds"] > run["call_seconds"] > 0 and run["import_seconds"] > 0
    for argv, flag in ((["--runs", "0"], "--runs"), (["--arms", "3", "0"], "--arms"), (["--seed", "-1"], "--seed"),
                       (["--fresh-runs", "0"], "--fresh-runs")):
        with pytest.raises(SystemExit):
            bench.parse_args(argv)
        assert f"{flag} must be >= " in capsys.readouterr().err
    assert bench.parse_args(["--fresh-runs", "50", "500"]).fresh_horizons == [20_000]  # default: --horizon
