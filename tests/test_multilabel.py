"""Multi-label data bandits (FairX Section 5.1): tables, rounds, the least-squares pi*, yeast."""

import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesfair as bf
from bayesfair.environments import multilabel as ml
from bayesfair.environments import multilabel_bandit, yeast_bandit

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _toy(n=40, d=5, k=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = (rng.random((n, k)) < np.linspace(0.2, 0.8, k)).astype(int)
    return x, y


def _data_dir() -> Path:
    root = Path(os.environ.get("BAYESFAIR_DATA", DATA))
    if not (root / "yeast" / "yeast.arff").is_file():
        pytest.skip(f"yeast data not found under {root} (set BAYESFAIR_DATA or put ../shared/data beside the repo)")
    return root


@pytest.fixture(scope="module")
def yeast_xy():
    """The yeast features [2417, 103] and labels [2417, 14], loaded through bayesfair.datasets."""
    root = _data_dir()
    datasets = pytest.importorskip("bayesfair.datasets")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BAYESFAIR_DATA", str(root))
        df = datasets.load_yeast("all")
    return df[list(df.attrs["features"])].to_numpy(float), df[list(df.attrs["labels"])].to_numpy(float)


def _rounds(env, n, seed=0):
    keys = jax.random.split(jax.random.key(seed), n)
    params = env.reset(jax.random.key(1))
    rnd = jax.jit(jax.vmap(lambda k, t: env.step(k, params, t)))(keys, jnp.arange(1, n + 1))
    idx = np.asarray(jax.vmap(lambda k: ml.draw_example(k, env.params["n_examples"]))(keys))
    return rnd, idx


def test_mab_rounds_are_labels_of_the_sampled_example():
    x, y = _toy()
    env = multilabel_bandit(x, y)
    assert env.spec.n_arms == 3 and env.spec.n_features == 0 and env.spec.reward_range == (0.0, 1.0)
    rnd, idx = _rounds(env, 200)
    np.testing.assert_array_equal(np.asarray(rnd.reward), y[idx])
    np.testing.assert_allclose(np.asarray(rnd.mean), np.broadcast_to(y.mean(0), (200, 3)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(env.arm_means(env.reset(jax.random.key(0)))), y.mean(0), rtol=1e-6)
    assert rnd.obs.contexts is None
    assert len(np.unique(idx)) > 30  # uniform with replacement over 40 examples


def test_linear_rounds_index_the_context_table():
    x, y = _toy()
    tables = ml.multilabel_tables(x, y, mode="linear", n_rff=16, key=3)
    env = multilabel_bandit(x, y, mode="linear", n_rff=16, key=3)
    assert env.spec.n_features == 16
    assert tables.contexts.shape == (40, 3, 16) and tables.contexts.dtype == np.float32
    rnd, idx = _rounds(env, 100)
    assert rnd.obs.contexts.shape == (100, 3, 16)
    np.testing.assert_array_equal(np.asarray(rnd.obs.contexts), tables.contexts[idx])
    np.testing.assert_array_equal(np.asarray(rnd.reward), y[idx])
    np.testing.assert_allclose(np.asarray(rnd.mean), tables.fitted_means[idx], rtol=1e-5, atol=1e-6)
    assert env.params["rff_scale"] == pytest.approx(tables.bandwidth)


def test_rff_block_structure_matches_the_full_outer_product():
    x, _ = _toy(n=6, d=4, k=3)
    w, b = ml.rff_params(0, 4 * 3, 7, 2.0)
    ctx = ml.rff_contexts(x, w, b, 3)
    for i in range(6):
        for a in range(3):
            z = np.outer(x[i], np.eye(3)[a]).reshape(-1, order="F")  # vec(x e_a'): x in block a
            np.testing.assert_allclose(ctx[i, a], np.sqrt(2 / 7) * np.cos(w @ z + b), rtol=1e-10)


def test_rff_map_is_deterministic_given_the_key():
    w1, b1 = ml.rff_params(5, 12, 8, 1.5)
    w2, b2 = ml.rff_params(jax.random.key(5), 12, 8, 1.5)
    w3, _ = ml.rff_params(6, 12, 8, 1.5)
    np.testing.assert_array_equal(w1, w2)
    np.testing.assert_array_equal(b1, b2)
    assert not np.allclose(w1, w3)
    assert np.all((b1 >= 0) & (b1 <= 2 * np.pi))
    x, y = _toy()
    t1 = ml.multilabel_tables(x, y, mode="linear", key=5)
    t2 = ml.multilabel_tables(x, y, mode="linear", key=5)
    np.testing.assert_array_equal(t1.contexts, t2.contexts)


def test_rff_approximates_the_rbf_kernel():
    x, _ = _toy(n=5, d=3, k=2)
    sigma = 2.5
    w, b = ml.rff_params(1, 6, 20_000, sigma)
    z = ml.rff_contexts(x, w, b, 2).reshape(10, -1)
    lifted = np.stack([np.outer(x[i], np.eye(2)[a]).reshape(-1, order="F") for i in range(5) for a in range(2)])
    d2 = ((lifted[:, None] - lifted[None]) ** 2).sum(-1)
    np.testing.assert_allclose(z @ z.T, np.exp(-d2 / (2 * sigma**2)), atol=0.05)


def test_median_bandwidth_matches_brute_force():
    x, _ = _toy(n=7, d=3, k=3)
    lifted = np.stack([np.outer(x[i], np.eye(3)[a]).reshape(-1, order="F") for i in range(7) for a in range(3)])
    iu, ju = np.triu_indices(len(lifted), k=1)
    dist = np.sqrt(((lifted[iu] - lifted[ju]) ** 2).sum(-1))
    srt = np.sort(dist)
    got = ml.median_bandwidth(x, 3)
    assert srt[(len(srt) - 1) // 2] * (1 - 1e-12) <= got <= srt[len(srt) // 2] * (1 + 1e-12)


def test_least_squares_recovers_means_that_are_exactly_linear():
    # 5 distinct examples x 3 arms = 15 <= D = 50 independent contexts: any means are linear in
    # them. Each example is repeated 4 times with labels whose averages are the chosen means.
    rng = np.random.default_rng(2)
    base = rng.normal(size=(5, 4))
    p = rng.integers(0, 5, size=(5, 3)) / 4.0
    p[:, 0] = [0.0, 0.25, 0.5, 0.75, 1.0]
    x = np.repeat(base, 4, axis=0)
    y = np.concatenate([(np.arange(4)[:, None] < 4 * p[i]).astype(int) for i in range(5)])
    np.testing.assert_allclose(y.reshape(5, 4, 3).mean(1), p)
    t = ml.multilabel_tables(x, y, mode="linear", n_rff=50, key=0, ridge=1e-12)
    np.testing.assert_allclose(t.fitted_means, np.repeat(p, 4, axis=0), atol=1e-4)
    # Real-valued targets that are exactly linear in many more contexts than D.
    ctx = ml.multilabel_tables(*_toy(n=300), mode="linear", n_rff=20, key=1).contexts
    theta = rng.normal(size=20)
    th, fitted = ml.least_squares_means(ctx, ctx.astype(np.float64) @ theta, ridge=0.0)
    np.testing.assert_allclose(th, theta, rtol=1e-6, atol=1e-6)


def test_bias_feature_lets_the_fit_tell_arms_apart():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 6))
    y = (rng.random((400, 3)) < [0.1, 0.5, 0.9]).astype(int)
    plain = ml.multilabel_tables(x, y, mode="linear", key=0).fitted_means.mean(0)
    biased = ml.multilabel_tables(x, y, mode="linear", key=0, bias=3 * np.sqrt(6)).fitted_means.mean(0)
    assert np.abs(biased - [0.1, 0.5, 0.9]).max() < 0.1
    assert np.abs(biased - y.mean(0)).max() < np.abs(plain - y.mean(0)).max()


@pytest.mark.parametrize(
    "kwargs,err,match",
    [
        ({"features": np.zeros(5)}, ValueError, "features must be 2-dimensional"),
        ({"features": np.full((40, 5), np.nan)}, ValueError, "features must be finite"),
        ({"labels": np.zeros(40)}, ValueError, "labels must be 2-dimensional"),
        ({"labels": np.zeros((39, 3))}, ValueError, "one row per example"),
        ({"labels": np.zeros((40, 1))}, ValueError, "at least 2 columns"),
        ({"labels": np.full((40, 3), 0.5)}, ValueError, r"labels must be 0 or 1; labels\[0, 0\]"),
        ({"mode": "lin"}, ValueError, "mode must be one of"),
        ({"n_rff": 0}, ValueError, "n_rff must be an integer >= 1"),
        ({"n_rff": 2.5}, TypeError, "n_rff"),
        ({"rff_scale": -1.0}, ValueError, "rff_scale must be > 0"),
        ({"rff_scale": "mean"}, ValueError, "rff_scale must be 'median'"),
        ({"key": -1}, ValueError, "key must be"),
        ({"key": "a"}, TypeError, "key must be"),
        ({"ridge": -1.0}, ValueError, "ridge must be >= 0"),
        ({"bias": -1.0}, ValueError, "bias must be >= 0"),
        ({"standardize": "yes"}, TypeError, "standardize"),
        ({"groups": [0, 1]}, ValueError, "groups has 2 arms"),
    ],
)
def test_bad_inputs_raise_clear_errors(kwargs, err, match):
    x, y = _toy()
    args = {"features": x, "labels": y, "mode": "linear", **kwargs}
    with pytest.raises(err, match=match):
        multilabel_bandit(args.pop("features"), args.pop("labels"), **args)


def test_zero_features_need_an_explicit_bandwidth():
    y = _toy()[1]
    with pytest.raises(ValueError, match="rff_scale"):
        ml.multilabel_tables(np.ones((40, 3)), y, mode="linear")  # standardized to zeros
    assert ml.multilabel_tables(np.ones((40, 3)), y, mode="linear", rff_scale=1.0).contexts.shape == (40, 3, 50)


def test_yeast_environments_have_the_paper_shapes(yeast_xy):
    x, y = yeast_xy
    assert x.shape == (2417, 103) and y.shape == (2417, 14)
    mab = multilabel_bandit(x, y)
    rnd = mab.step(jax.random.key(0), mab.reset(jax.random.key(0)), jnp.asarray(1))
    assert rnd.reward.shape == (14,) and mab.spec.n_arms == 14
    np.testing.assert_allclose(np.asarray(rnd.mean), y.mean(0), rtol=1e-6)
    lin = multilabel_bandit(x, y, mode="linear")
    rnd = lin.step(jax.random.key(0), lin.reset(jax.random.key(0)), jnp.asarray(1))
    assert rnd.obs.contexts.shape == (14, 50) and rnd.obs.contexts.dtype == jnp.float32


def test_yeast_bandit_loads_through_datasets(monkeypatch, yeast_xy):
    monkeypatch.setenv("BAYESFAIR_DATA", str(_data_dir()))
    env = yeast_bandit(mode="mab", split="train")
    assert env.spec.n_arms == 14 and env.params["n_examples"] == 1500 and env.label == "yeast_mab_train"
    assert yeast_bandit(mode="linear", n_rff=8).spec.n_features == 8


def test_fairx_ts_runs_on_the_yeast_mab(yeast_xy):
    x, y = yeast_xy
    env = multilabel_bandit(x, y)
    merit = bf.merit.exponential(4.0)
    pols = {"FairX-TS": bf.fairx_ts(bf.normal_known_variance(0.0, 1.0, 0.25), merit), "UCB": bf.ucb1(w0=0.3)}
    ds = bf.simulate(0, env, pols, 400, 2, merit=merit, chunk_size=200)
    np.testing.assert_allclose(ds["pi_star"].values[0], np.exp(4 * y.mean(0)) / np.exp(4 * y.mean(0)).sum(),
                               rtol=1e-5)
    fr = ds["fairness_regret"].isel(checkpoint=-1).values
    assert np.all(np.isfinite(fr)) and np.all(fr > 0)
    assert fr[0].mean() < fr[1].mean()  # FairX-TS is fairer than UCB already at T = 400
