"""Smoke tests of experiments/benchmarks/fairx_ts_bench.py and bilevel_bench.py (tiny --quick runs)."""

import importlib
import json
import sys
from pathlib import Path

import pytest

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


# ---------------------------------------------------------------------------------------------
# grid_bench.py (`make bench`): cheap checks without JAX processes


def test_grid_numpy_references():
    # FairX-TS / TS / FairX-UCB in NumPy: regrets within their ranges, cumulative (T/2 <= T),
    # deterministic per seed; TS's pi_t is one-hot; the FairX-UCB gradient matches finite differences.
    import numpy as np

    grid = _import("grid_bench")
    for policy in ("fairx_ts", "ts", "fairx_ucb"):
        out = grid.numpy_fairx(32, 40, 3, 6, policy)
        fr, rr = out["fairness_regret"], out["reward_regret"]
        assert fr.shape == rr.shape == (32, 2)
        assert (fr >= 0).all() and (fr <= 2 * 40 + 1e-9).all() and (fr[:, 0] <= fr[:, 1] + 1e-12).all()
        assert (np.abs(rr) <= 40).all()
        np.testing.assert_array_equal(fr, grid.numpy_fairx(32, 40, 3, 6, policy)["fairness_regret"])
    ts = grid.numpy_fairx(8, 1, 0, 5, "ts")["fairness_regret"]
    pi_star = grid._softmax(grid.MERIT_C * grid.bernoulli_means(5, 0))
    assert np.all(np.isin(np.round(ts[:, 1], 12), np.round(2 - 2 * pi_star, 12)))  # |pi* - e_a|_1 = 2 - 2 pi*_a
    rng = np.random.default_rng(1)
    mu, eps = rng.uniform(0, 1, (5, 7)), 1e-6
    objective = lambda m: (grid._softmax(grid.MERIT_C * m) * m).sum(axis=-1)  # noqa: E731
    numeric = np.stack([(objective(mu + eps * e) - objective(mu - eps * e)) / (2 * eps) for e in np.eye(7)], axis=-1)
    np.testing.assert_allclose(grid.fair_reward_gradient(mu), numeric, rtol=1e-6, atol=1e-8)


def test_grid_gaussian_numpy_references_learn():
    # FairX-TS on Gaussian arms with the Normal and the Normal-Inverse-Gamma posterior in NumPy:
    # regrets of the right shapes and ranges, cumulative, deterministic per seed, and learning: the
    # second half's fairness regret is below the first half's (prior sd 1 against ~0.07 after ~70
    # pulls per arm). A posterior that did not update (or updated the wrong arm) keeps sampling
    # from the prior and fails this on the mean over the runs.
    import numpy as np
    import pytest

    grid = _import("grid_bench")
    for posterior in ("normal", "nig"):
        out = grid.numpy_fairx_gaussian(64, 400, 5, 6, posterior)
        fr, rr = out["fairness_regret"], out["reward_regret"]
        assert fr.shape == rr.shape == (64, 2) and (fr >= 0).all() and (fr <= 2 * 400 + 1e-9).all()
        assert (fr[:, 0] <= fr[:, 1] + 1e-12).all() and np.isfinite(rr).all()
        np.testing.assert_array_equal(fr, grid.numpy_fairx_gaussian(64, 400, 5, 6, posterior)["fairness_regret"])
        first, second = fr[:, 0], fr[:, 1] - fr[:, 0]
        assert second.mean() < 0.8 * first.mean(), (posterior, first.mean(), second.mean())
    with pytest.raises(ValueError, match="posterior must be"):
        grid.numpy_fairx_gaussian(2, 2, 0, 3, "beta")


def test_grid_agreement_rule():
    import numpy as np

    grid = _import("grid_bench")
    rng = np.random.default_rng(0)
    hits = [grid.agreement(rng.normal(0, 1, 200), rng.normal(0, 1, 200))["agree"] for _ in range(200)]
    assert sum(hits) >= 198  # |z| <= 4 for equal distributions (false alarm rate ~6e-5)
    assert not grid.agreement(rng.normal(0, 1, 200), rng.normal(0.6, 1, 200))["agree"]  # ~6 s.e. apart
    assert grid.agreement([2.0, 2.0], [2.0, 2.0]) == {"numpy_mean": 2.0, "bayesfair_mean": 2.0, "se_difference": 0.0,
                                                      "z": 0.0, "agree": True}
    assert not grid.agreement([2.0, 2.0], [3.0, 3.0])["agree"]


def test_grid_cells_table_json_and_exit_status(tmp_path, monkeypatch, capsys):
    # The grid on scripted child reports (no processes): medians of the repetitions, both ratios,
    # the agreement, the atomic JSON, and exit status 1 when a cell disagrees.
    import pytest

    grid = _import("grid_bench")
    calls = []

    def fake(family, side, runs, horizon, seed, chunk_size, calls_, env=None):
        calls.append((family, side, runs, horizon, seed, calls_))
        rep = seed  # seeds 0, 1, 2 for the three repetitions
        if side == "numpy":
            return {"wall_seconds": 2.0 + rep, "setup_seconds": 0.5, "seconds": [1.0 + rep], "final": [1.0, 1.1, 0.9]}
        return {"wall_seconds": 9.0 + rep, "setup_seconds": 0.0, "seconds": [5.0, 0.25 * (1 + rep)],
                "final": [1.05, 0.95, 1.0]}

    monkeypatch.setattr(grid, "run_fresh", fake)
    out = tmp_path / "g.json"
    report = grid.main(["--families", "ts_k10", "--runs", "4", "--horizons", "10", "20", "--out", str(out)])
    assert [c[1] for c in calls[:2]] == ["numpy", "bayesfair"] and calls[1][-1] == 2  # bayesfair: two calls
    assert len(calls) == 2 * 2 * 3
    c = report["cells"][0]
    assert c["numpy_end_to_end_seconds"] == [1.5, 2.5, 3.5] and c["bayesfair_end_to_end_seconds"] == [8.75, 9.5, 10.25]
    assert c["ratio_end_to_end"] == pytest.approx(2.5 / 9.5) and c["ratio_steady"] == pytest.approx(2.0 / 0.5)
    assert c["agreement"]["agree"] and json.loads(out.read_text())["cells"] == json.loads(json.dumps(report["cells"]))
    assert {"cpu_count", "loadavg_at_start", "loadavg_at_end", "jax_version"} <= report["machine"].keys()
    assert [p.name for p in tmp_path.iterdir()] == ["g.json"]
    assert "every cell agrees" in capsys.readouterr().out
    assert grid.estimate(report, ["ts_k10"]) > 0

    def disagree(*args, **kwargs):
        r = fake(*args, **kwargs)
        return {**r, "final": [5.0, 5.1, 4.9]} if args[1] == "bayesfair" else r

    monkeypatch.setattr(grid, "run_fresh", disagree)
    with pytest.raises(SystemExit) as exc:
        grid.main(["--families", "ts_k10", "--runs", "4", "--horizons", "10", "--repeats", "1", "--out", str(out)])
    assert exc.value.code == 1 and "DISAGREE" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        grid.main(["--repeats", "0"])
    assert "--repeats must be >= 1" in capsys.readouterr().err


def test_grid_numpy_child_in_a_fresh_process():
    # The child protocol for real on the NumPy side (no JAX import: a fraction of a second).
    grid = _import("grid_bench")
    r = grid.run_fresh("fairx_ts_k10", "numpy", 4, 20, 0, 16, 1)
    assert r["wall_seconds"] > r["seconds"][0] > 0 and len(r["final"]) == 4


# Every family of `make bench`: the NumPy reference and bayesfair agree in distribution (the
# agreement asserted in a slow test as well as in the benchmark). Each side runs in a fresh
# process through the benchmark's own child protocol, with independent random numbers, so
# z = (mean_numpy - mean_bayesfair) / s.e. is about N(0, 1) when both implement the same
# algorithm; |z| <= 4 has a false-alarm rate of ~6e-5 per family.
AGREEMENT_SIZES = {"fair_greedy": (64, 400), "bf_ucb_k15": (64, 400), "bf_ts_k15": (64, 400),
                   "fairx_lints": (128, 500)}


AGREEMENT_FAMILIES = ["fairx_ts_k10", "fairx_ts_k60", "ts_k10", "fairx_ts_normal_k10", "fairx_ts_nig_k10",
                      "fairx_ucb_k10", "bf_ucb_k15", "bf_ts_k15", "fairx_lints", "fair_greedy", "gfti"]


def test_agreement_test_covers_every_benchmark_family():
    assert sorted(AGREEMENT_FAMILIES) == sorted(_import("grid_bench").FAMILIES)


@pytest.mark.slow
@pytest.mark.parametrize("family", AGREEMENT_FAMILIES)
def test_numpy_reference_agrees_with_bayesfair(family):
    grid = _import("grid_bench")
    runs, horizon = AGREEMENT_SIZES.get(family, (200, 1000))
    numpy_side = grid.run_fresh(family, "numpy", runs, horizon, 3, 256, 1)
    jax_side = grid.run_fresh(family, "bayesfair", runs, horizon, 3, 256, 1)
    assert len(numpy_side["final"]) == len(jax_side["final"]) == runs
    result = grid.agreement(numpy_side["final"], jax_side["final"])
    assert result["se_difference"] > 0, result  # a degenerate sample would make z meaningless
    assert result["agree"], result


def test_fresh_process_phases_add_up(tmp_path, capsys):
    """fresh_process.py splits a fresh process's time: the phases it stamps are consecutive, so
    they add up to the spawn-to-exit time up to the unstamped gaps (script imports, ~ms)."""
    fresh = _import("fresh_process")
    out = tmp_path / "f.json"
    fresh.main(["--runs", "4", "--horizon", "64", "--repeats", "1", "--out", str(out)])
    data = json.loads(out.read_text())
    (row,) = data["processes"]["plain"]
    stamped = sum(row[k] for k in fresh.PHASES if not k.startswith("  "))
    assert 0 < stamped <= row["spawn to exit"] <= stamped + 0.5
    assert row["import bayesfair"] > 0 and row["exit"] > 0 and row["first call"] > row["second call (steady)"] > 0
    assert 0 < row["  of which JAX tracing"] < row["first call"]
    assert "spawn to exit" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        fresh.main(["--family", "nope"])


def test_cache_write_bench_times_one_write_each_way():
    # Part 1 of cache_write_bench.py: one row per folder size, both settings timed (the cost
    # itself is the benchmark's to report, not a test's).
    bench = _import("cache_write_bench")
    rows = bench.write_cost([0, 30], writes=3)
    assert [r["entries"] for r in rows] == [0, 30]
    assert all(r["jax_bound"] > 0 and r["no_bound"] > 0 for r in rows)


@pytest.mark.slow  # two fresh processes with a NUTS fit and a study each
def test_cache_write_bench_end_to_end(tmp_path, capsys):
    bench = _import("cache_write_bench")
    out = tmp_path / "c.json"
    bench.main(["--entries", "20", "--repeats", "1", "--out", str(out)])
    (row,) = json.loads(out.read_text())["first_fit"]
    # every program of the fit and the study misses the filler entries and is written, either way
    assert row["entries"] == 20 and row["no_bound_written"] > 10 and row["jax_bound_written"] > 10
    assert row["no_bound_fit"] > 0 and row["jax_bound_fit"] > 0
    reps = [rep for side in row["processes"].values() for rep in side]
    assert len(reps) == 2 and all(isinstance(rep["converged"], bool) and rep["max_rhat"] > 0.9 for rep in reps)
    printed = capsys.readouterr().out
    assert "a new process's first fit" in printed and "the timed fits:" in printed
    with pytest.raises(SystemExit):
        bench.main(["--repeats", "0"])
