"""experiments/benchmarks/biased_bench.py: its NumPy reference implementations are the same
algorithms as bayesfair's (statistical agreement, slow) and their building blocks are exact (fast)."""

import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH_DIR = Path(__file__).resolve().parents[1] / "experiments" / "benchmarks"


def _load():
    # The benchmark scripts import their shared `harness` module from their own folder, which
    # Python puts first on sys.path when it runs one as a script; do the same here.
    if str(BENCH_DIR) not in sys.path:
        sys.path.insert(0, str(BENCH_DIR))
    return importlib.import_module("biased_bench")


def test_sherman_morrison_tracks_the_inverse():
    bb = _load()
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (40, 3, 2))  # 40 updates of 3 batched matrices
    inv = np.broadcast_to(np.eye(2) / bb.RIDGE, (3, 2, 2)).copy()
    for k in range(40):
        inv = bb._sherman_morrison(inv, x[k])
    want = np.linalg.inv(bb.RIDGE * np.eye(2) + np.einsum("krd,kre->rde", x, x))
    np.testing.assert_allclose(inv, want, rtol=1e-8, atol=1e-10)


def test_ts_prior_precision_is_the_hierarchical_prior():
    # theta = (beta_bar, beta_1..n, psi): its covariance must give Var(beta_i) = prior_sd^2 + tau^2,
    # Cov(beta_i, beta_j) = prior_sd^2 (i != j, shared population mean) and Var(psi) = s^2.
    bb = _load()
    cov = np.linalg.inv(bb._ts_prior_precision())
    d, n = bb.D, bb.N_ARMS
    arm = lambda i: slice(d * (1 + i), d * (2 + i))  # noqa: E731
    np.testing.assert_allclose(cov[arm(0), arm(0)], (bb.PRIOR_SD**2 + bb.TAU**2) * np.eye(d), rtol=1e-9)
    np.testing.assert_allclose(cov[arm(0), arm(n - 1)], bb.PRIOR_SD**2 * np.eye(d), rtol=1e-9)
    np.testing.assert_allclose(cov[-d:, -d:], bb.S_PSI**2 * np.eye(d), rtol=1e-9)
    np.testing.assert_allclose(cov[-d:, :-d], 0.0, atol=1e-9)


def test_quick_run_writes_json(tmp_path, monkeypatch):
    bb = _load()
    monkeypatch.setattr(bb, "bench_policy", lambda key, args, T: {  # no JAX here: only the report path
        "policy": bb.POLICIES[key], "horizon": T, "numpy_horizon": T, "numpy_rate": 1.0, "jax_end_to_end_rate": 1.0,
        "jax_steady_rate": None, "jax_steady_resolved": None, "jax_chunk_rate": 2.0, "ratio_steady": None,
        "ratio_chunk": 2.0, "ratio_end_to_end": 1.0, "jax_compile_seconds_estimate": 0.0})
    out = tmp_path / "b.json"
    assert bb.main(["--quick", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert [r["policy"] for r in data["results"]] == ["GroupFairTopInterval", "GroupFair-TS"]
    assert [p.name for p in tmp_path.iterdir()] == ["b.json"]  # atomic write, no temporary left


@pytest.mark.slow
@pytest.mark.parametrize("key", ["GFTI", "GFTS"])
def test_numpy_reference_agrees_with_bayesfair(key):
    # Same problem distribution and algorithm, independent random numbers: the final true regret,
    # biased regret and sensitive share over 64 runs agree within 4 combined standard errors.
    bb = _load()
    R, T = 64, 300
    ref = (bb.numpy_gfti if key == "GFTI" else bb.numpy_gfts)(R, T, 3)
    _, _, got = bb.run_jax(key, R, T, 4, T)
    for metric in ("true_regret", "regret", "sensitive_share"):
        a, b = ref[metric], got[metric]
        se = np.hypot(a.std(ddof=1), b.std(ddof=1)) / np.sqrt(R)
        assert abs(a.mean() - b.mean()) < 4 * se, (metric, a.mean(), b.mean(), se)
