"""The exposure gap pi* - share over runs (bayesfair.diagnostics.exposure_gap) and its forest.

Calibrated expectations: under the ``uniform`` policy every share is exactly 1/K, so the sign of
the gap must be the sign of pi* - 1/K wherever that difference is many posterior sd wide; the
aggregation's numbers are recomputed independently from per-run trees and from raw arrays.
"""

import matplotlib
import numpy as np
import pytest

import bayesfair as bf
from bayesfair import diagnostics as dg
from bayesfair import plotting
from bayesfair.plotting import figures
from bayesfair.workflow.logs import RoundLog

matplotlib.use("Agg")

MEANS = [0.1, 0.3, 0.5, 0.9]
GROUPS = [0, 0, 1, 1]
T, R = 400, 6


@pytest.fixture(scope="module")
def merit():
    return bf.merit.exponential(4.0)


@pytest.fixture(scope="module")
def study(merit):
    """A uniform policy and FairX-TS on 4 Bernoulli arms in 2 groups, with a round log."""
    env = bf.bernoulli_arms(MEANS, groups=GROUPS)
    log = RoundLog.for_study(env, T, R, 2)
    post = bf.beta_bernoulli()
    results, states = dg.simulate_with_states(7, env, {"uniform": bf.uniform(), "TS": bf.fairx_ts(post, merit)},
                                              T, R, merit=merit, round_log=log)
    return results, states, log, post


def test_uniform_gap_sign_matches_pi_star_minus_uniform(study, merit):
    results, _, log, post = study
    states = dg.fit_from_log(post, log, "uniform")
    gap = dg.exposure_gap(results, states, "uniform", post, merit, n_draws=400, key=3)
    arms = gap[gap["level"] == "arm"]
    np.testing.assert_allclose(arms["share"], 0.25, atol=1e-6)  # uniform: pi_t(a) = 1/K every round
    mu = np.asarray(MEANS)
    true_diff = np.exp(4 * mu) / np.exp(4 * mu).sum() - 0.25
    clear = np.abs(true_diff) > 5 * arms["sd"].to_numpy()
    assert clear.sum() >= 3  # the instance is informative
    assert np.all(np.sign(arms["gap"].to_numpy()[clear]) == np.sign(true_diff[clear]))
    p = arms["p_under"].to_numpy()[clear]
    assert np.all(np.where(true_diff[clear] > 0, p > 0.9, p < 0.1))
    # groups: the group shares are 1/2 each; pi*_g - 1/2 has the sign of the true group share
    groups = gap[gap["level"] == "group"]
    true_group = np.array([true_diff[:2].sum(), true_diff[2:].sum()])
    assert np.all(np.sign(groups["gap"].to_numpy()) == np.sign(true_group))
    np.testing.assert_allclose(groups["gap"].sum(), 0.0, atol=1e-9)  # shares and pi* both sum to 1
    np.testing.assert_allclose(arms["mu"], MEANS, rtol=1e-6)  # labels: the environment's means (float32)
    assert set(arms["mu_source"]) == {"true"}


def test_aggregation_matches_per_run_trees(study, merit):
    """gap and MCSE = sd over runs / sqrt(R) recomputed from one tree per run (same keys)."""
    import jax

    results, states, _, post = study
    gap = dg.exposure_gap(results, states, "TS", post, merit, n_draws=300, key=5)
    per_run, p_under = [], []
    for r in range(R):
        tree = dg.from_simulation(results, states, "TS", post, merit=merit, run=r, n_draws=300,
                                  key=jax.random.fold_in(jax.random.key(5), r))
        pi = tree["posterior"].dataset["pi_star"].values.reshape(300, -1)
        share = tree["observed_exposure"].dataset["exposure_share"].values
        per_run.append((pi - share).mean(axis=0))
        p_under.append(tree["under_exposure"].dataset["p_arm"].values)
    per_run = np.asarray(per_run)
    arms = gap[gap["level"] == "arm"]
    np.testing.assert_allclose(arms["gap"], per_run.mean(axis=0), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(arms["mcse"], per_run.std(axis=0, ddof=1) / np.sqrt(R), rtol=1e-8)
    np.testing.assert_allclose(arms["p_under"], np.mean(p_under, axis=0), atol=1e-12)
    assert (arms["lower"] <= arms["gap"]).all() and (arms["gap"] <= arms["upper"]).all()
    # a subset of runs
    two = dg.exposure_gap(results, states, "TS", post, merit, n_draws=300, key=5, runs=[1, 4])
    np.testing.assert_allclose(two[two["level"] == "arm"]["gap"], per_run[[1, 4]].mean(axis=0), rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_aggregate_gap_on_raw_draws(seed):
    rng = np.random.default_rng(seed)
    runs, draws, n = int(rng.integers(2, 9)), int(rng.integers(50, 200)), int(rng.integers(1, 6))
    g = rng.normal(rng.normal(size=(runs, 1, n)), rng.uniform(0.1, 1.0, (runs, 1, n)), (runs, draws, n))
    out = dg.aggregate_gap(g, ci_prob=0.8)
    means = np.array([[g[r, :, j].mean() for j in range(n)] for r in range(runs)])
    np.testing.assert_allclose(out["gap"], means.mean(0))
    sd = np.sqrt(((means - means.mean(0)) ** 2).sum(0) / (runs - 1))
    np.testing.assert_allclose(out["mcse"], sd / np.sqrt(runs))
    pooled = g.reshape(-1, n)
    np.testing.assert_allclose(out["lower"], np.quantile(pooled, 0.1, axis=0))
    np.testing.assert_allclose(out["upper"], np.quantile(pooled, 0.9, axis=0))
    np.testing.assert_allclose(out["p_under"], (pooled > 0).mean(0))
    assert np.isnan(dg.aggregate_gap(g[:1])["mcse"]).all()  # one run: no Monte Carlo error across runs


def test_exposure_gap_errors(study, merit):
    results, states, _, post = study
    with pytest.raises(ValueError, match=r"runs must be a non-empty sequence of run indices in \[0, 5\]"):
        dg.exposure_gap(results, states, "TS", post, merit, runs=[6])
    with pytest.raises(ValueError, match="compare must be one of"):
        dg.exposure_gap(results, states, "TS", post, merit, compare="x")
    with pytest.raises(ValueError, match="policy 'nope' is not in the results"):
        dg.exposure_gap(results, states, "nope", post, merit)
    with pytest.raises(ValueError, match="policy 'uniform' is not in the states"):
        dg.exposure_gap(results, {"TS": states["TS"]}, "uniform", post, merit)
    with pytest.raises(ValueError, match=r"ci_prob must be in \(0, 1\)"):
        dg.aggregate_gap(np.zeros((2, 3, 1)), ci_prob=1.5)
    with pytest.raises(ValueError, match=r"\[runs, draws, n\]"):
        dg.aggregate_gap(np.zeros((3, 1)))


def test_plot_exposure_gap(study, merit, tmp_path):
    results, states, _, post = study
    gap = dg.exposure_gap(results, states, "TS", post, merit, n_draws=200)
    fig = plotting.plot_exposure_gap(gap)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[:4] == [f"arm {a} (mu={m:.2f})" for a, m in enumerate(MEANS)]
    group_names = [str(g) for g in results["group"].values]
    assert labels[4:] == [f"group {g}" for g in group_names]
    assert any(line.get_xdata()[0] == 0.0 for line in ax.get_lines())  # the zero line
    legend = ax.get_legend()
    assert legend is not None and not figures._legend_overlaps(ax, legend)
    plotting.save_figure(fig, tmp_path / "gap.png")
    fig = plotting.plot_exposure_gap(gap, levels=("arm",))
    assert len(fig.axes[0].get_yticklabels()) == 4
    plotting.save_figure(fig, tmp_path / "gap_arm.png")
    with pytest.raises(TypeError, match="exposure_gap"):
        plotting.plot_exposure_gap({"gap": 1})
    with pytest.raises(ValueError, match="levels"):
        plotting.plot_exposure_gap(gap, levels=("x",))
