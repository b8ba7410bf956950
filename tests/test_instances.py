"""Environments from explicit instances: a [runs, K] means matrix (multi-armed) or a [runs, d]
parameter matrix (linear), run r playing row r; validated against the study's runs."""

import numpy as np
import pytest

import bayesfair as bf
from bayesfair.environments import bernoulli_arms, gaussian_arms
from bayesfair.environments.arms import bernoulli_arms_config
from bayesfair.environments.linear import linear_bandit
from bayesfair.registry import ConfigError

T = 2_000


def _uniform():
    """A policy that plays uniformly at random (FairX-EG with epsilon = 1)."""
    return {"U": bf.fairx_eg(bf.merit.exponential(1.0), epsilon=1.0)}


def _reward_per_round(ds):
    return ds["reward"].isel(checkpoint=-1).sel(policy="U").values / T


def test_bernoulli_means_matrix_row_r_is_played_in_run_r():
    rng = np.random.default_rng(0)
    runs, k = 6, 4
    means = rng.uniform(0.05, 0.95, (runs, k))
    ds = bf.simulate(3, bernoulli_arms(means), _uniform(), T, runs, merit=bf.merit.exponential(1.0))
    np.testing.assert_allclose(ds["mean"].values, means, rtol=1e-6)
    # uniform play: the reward per round of run r estimates the mean of row r (s.d. <= 0.5 / sqrt(T))
    got = _reward_per_round(ds)
    np.testing.assert_array_less(np.abs(got - means.mean(axis=1)), 4.5 * 0.5 / np.sqrt(T))
    # and the rows are told apart: the run's estimate is closest to its own row's mean
    assert np.all(np.argmin(np.abs(got[:, None] - means.mean(axis=1)[None]), axis=1) == np.arange(runs))


def test_gaussian_means_matrix_and_its_seed_independence():
    means = np.array([[0.0, 0.0], [5.0, 5.0], [-5.0, -5.0]])
    for seed in (0, 1):
        ds = bf.simulate(seed, gaussian_arms(means, sigma=1.0), _uniform(), T, 3)
        np.testing.assert_allclose(_reward_per_round(ds), [0.0, 5.0, -5.0], atol=4.5 / np.sqrt(T))


def test_linear_theta_matrix_row_r_is_played_in_run_r():
    rng = np.random.default_rng(1)
    runs, k, d = 4, 3, 2
    theta = rng.normal(0, 2, (runs, d))
    cmean = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    env = linear_bandit(k, d, theta=theta, context_mean=cmean, context_scale=0.1, sigma=0.5)
    pol = {"U": bf.fairx_lineg(bf.merit.exponential(1.0), epsilon=1.0)}
    ds = bf.simulate(2, env, pol, T, runs)
    want = (cmean @ theta.T).T  # [runs, K]
    np.testing.assert_allclose(ds["mean"].values, want, rtol=1e-5, atol=1e-6)
    sd = np.sqrt(0.5**2 + 0.1**2 * np.sum(theta**2, axis=1) + want.var(axis=1))
    np.testing.assert_array_less(np.abs(_reward_per_round(ds) - want.mean(axis=1)), 4.5 * sd / np.sqrt(T))


def test_instances_are_validated():
    means = np.full((3, 2), 0.5)
    with pytest.raises(ValueError, match=r"holds 3 per-run instances.*runs = 3, got runs = 4"):
        bf.simulate(0, bernoulli_arms(means), _uniform(), 10, 4)
    with pytest.raises(ValueError, match="Bernoulli means must be in"):
        bernoulli_arms(np.array([[0.5, 0.5], [0.5, 1.5]]))
    with pytest.raises(ValueError, match="means must be finite"):
        bernoulli_arms(np.array([[0.5, np.nan]]))
    with pytest.raises(ValueError, match="groups has 3 arms but means has 2"):
        bernoulli_arms(means, groups=[0, 1, 1])
    with pytest.raises(ValueError, match=r"theta has length 3 but n_features is 2"):
        linear_bandit(2, 2, theta=np.zeros((4, 3)))
    with pytest.raises(ValueError, match=r"theta must be \[n_features\] or \[runs, n_features\]"):
        linear_bandit(2, 2, theta=np.zeros((4, 2, 1)))
    with pytest.raises(ValueError, match=r"holds 4 per-run instances"):
        bf.simulate(0, linear_bandit(2, 2, theta=np.zeros((4, 2))), {"U": bf.fairx_lineg(bf.merit.identity())}, 5, 2)


def test_means_file_config(tmp_path):
    means = np.array([[0.2, 0.4, 0.6], [0.7, 0.5, 0.3]])
    np.save(tmp_path / "m.npy", means)
    np.savetxt(tmp_path / "m.csv", means, delimiter=",")
    for name in ("m.npy", "m.csv"):
        env = bernoulli_arms_config(means_file=str(tmp_path / name))
        assert env.reset.runs == 2 and env.spec.n_arms == 3
        np.testing.assert_allclose(np.asarray(env.reset(None, 1)), means[1], rtol=1e-6)
    with pytest.raises(ConfigError, match="means_file.*no such file"):
        bernoulli_arms_config(means_file=str(tmp_path / "absent.npy"))
    with pytest.raises(ConfigError, match="either means or means_file"):
        bernoulli_arms_config(means=[0.5], means_file=str(tmp_path / "m.npy"))
    with pytest.raises(ConfigError, match="n_arms"):
        bernoulli_arms_config(means_file=str(tmp_path / "m.npy"), n_arms=4)
    with pytest.raises(ConfigError, match="means"):
        bernoulli_arms_config()
