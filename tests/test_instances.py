"""Environments from explicit instances: a [runs, K] means matrix (multi-armed) or a [runs, d]
parameter matrix (linear), run r playing row r; validated against the study's runs."""

import numpy as np
import pytest

import bayesfair as bf
from bayesfair.environments import bernoulli_arms, gaussian_arms
from bayesfair.environments.arms import bernoulli_arms_config
from bayesfair.environments.linear import linear_bandit
from bayesfair.workflow.registry import ConfigError

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
    pol = {"U": bf.policies.fairx_lineg(bf.merit.exponential(1.0), epsilon=1.0)}
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
        pol = bf.policies.fairx_lineg(bf.merit.identity())
        bf.simulate(0, linear_bandit(2, 2, theta=np.zeros((4, 2))), {"U": pol}, 5, 2)


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


# ---------------------------------------------------------------------------------------------
# biased-feedback and group-meritocratic environments: the parameters a run draws, given per run


def _same_as_fixed_rows(per_run_env, fixed_env_of_row, policies, runs, horizon=200, merit=None):
    """Run r of the per-run environment equals run r of the environment fixed at row r (same key:
    same contexts and noise), on every recorded variable; the recorded means too."""
    ds = bf.simulate(4, per_run_env, policies, horizon, runs, merit=merit)
    for r in range(runs):
        ref = bf.simulate(4, fixed_env_of_row(r), policies, horizon, runs, merit=merit)
        np.testing.assert_allclose(ds["mean"].values[r], ref["mean"].values[r], rtol=1e-6)
        for var in ("reward", "regret", *(v for v in ("true_regret", "fair_regret") if v in ds)):
            np.testing.assert_allclose(ds[var].values[:, r], ref[var].values[:, r], rtol=1e-5, atol=1e-4,
                                       err_msg=f"{var}, run {r}")
    return ds


def _biased_instances(runs, n=6, d=2, seed=5):
    rng = np.random.default_rng(seed)
    beta = rng.uniform(0.0, 10.0, (runs, n, d))
    psi = np.zeros((runs, 2, d))
    psi[:, 1] = rng.uniform(-20.0, 0.0, (runs, d))
    return beta, psi


def test_biased_beta_and_psi_rows_are_played_in_run_r():
    from bayesfair.environments import biased as eb

    runs, labels = 3, np.repeat([0, 1], 3)
    beta, psi = _biased_instances(runs)
    env = eb.biased_linear_bandit(labels, 2, beta=beta, psi=psi)
    assert env.reset.runs == runs and env.params["beta"] == {"distribution": "per_run", "runs": runs}
    ds = _same_as_fixed_rows(env, lambda r: eb.biased_linear_bandit(labels, 2, beta=beta[r], psi=psi[r]),
                             _uniform(), runs)
    np.testing.assert_allclose(ds["mean"].values, (beta + psi[:, labels]) @ np.full(2, 0.5), rtol=1e-5)
    params = eb.env_params(env, 4, runs)  # the post-hoc route sees the same instances
    np.testing.assert_allclose(np.asarray(params.beta), beta, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(params.psi), psi, rtol=1e-6)


def test_synthetic_biased_takes_beta_alone_and_psi_keeps_its_draw():
    """beta per run, psi still drawn U[-2 mu, 0] per run from the key (as without instances)."""
    from bayesfair.environments import biased as eb

    runs = 4
    beta, _ = _biased_instances(runs, n=10)
    env = eb.synthetic_biased(beta=beta)
    drawn = eb.env_params(eb.synthetic_biased(), 1, runs)
    params = eb.env_params(env, 1, runs)
    np.testing.assert_allclose(np.asarray(params.beta), beta, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(params.psi), np.asarray(drawn.psi))  # the same draw as before
    assert np.all(np.asarray(params.psi)[:, 0] == 0) and np.all(np.asarray(params.psi)[:, 1] <= 0)


def test_gmf_theta_rows_are_played_in_run_r():
    """Per-run mu*: contexts, rewards, the standard and the fair regret (each run's own group CDFs)
    equal those of the environment fixed at that run's mu*; group_weights [runs, G, m] is the same."""
    from bayesfair.environments import group_meritocratic as gm

    rng = np.random.default_rng(7)
    runs = 3
    w = rng.uniform(0.0, 9.0, (runs, 4, 4))
    w[:, 1, 1:] = 0.0  # group 1 with one weight, as in the paper's (8, 0, 0, 0)
    theta = np.concatenate([w.reshape(runs, -1), np.ones((runs, 1))], axis=1)
    pols = {"U": bf.uniform()}
    merit = bf.merit.exponential(1.0)
    env = gm.gmf_synthetic(theta=theta)
    ds = _same_as_fixed_rows(env, lambda r: gm.gmf_synthetic(theta=theta[r]), pols, runs, merit=merit)
    by_weights = bf.simulate(4, gm.gmf_synthetic(group_weights=w), pols, 200, runs, merit=merit)
    np.testing.assert_allclose(by_weights["fair_regret"].values, ds["fair_regret"].values, rtol=1e-6)
    multi = gm.gmf_multigroup(5, [0.4, 0.3, 0.2, 0.1], theta=theta)
    _same_as_fixed_rows(multi, lambda r: gm.gmf_multigroup(5, [0.4, 0.3, 0.2, 0.1], theta=theta[r]), pols, runs,
                        merit=merit)


def test_biased_and_gmf_instances_are_validated():
    from bayesfair.environments import biased as eb
    from bayesfair.environments import group_meritocratic as gm

    labels = np.repeat([0, 1], 3)
    beta, psi = _biased_instances(3)
    with pytest.raises(ValueError, match=r"beta must have shape \(6, 2\).*or \[runs, 6, 2\].*got \(3, 5, 2\)"):
        eb.biased_linear_bandit(labels, 2, beta=beta[:, :5])
    with pytest.raises(ValueError, match=r"psi must have shape \(n_groups=2, n_features=2\).*or \[runs, 2, 2\]"):
        eb.biased_linear_bandit(labels, 2, psi=np.zeros((3, 3, 2)))
    bad = psi.copy()
    bad[2, 0, 1] = 1.0
    with pytest.raises(ValueError, match=r"psi\[2, 0\] \(run 2's bias of the reference group 0\) must be zero"):
        eb.biased_linear_bandit(labels, 2, psi=bad)
    with pytest.raises(ValueError, match="same number for each: got beta with 3 rows, psi with 2 rows"):
        eb.biased_linear_bandit(labels, 2, beta=beta, psi=psi[:2])
    with pytest.raises(ValueError, match=r"beta and psi holds 3 per-run instances.*runs = 3, got runs = 2"):
        bf.simulate(0, eb.biased_linear_bandit(labels, 2, beta=beta, psi=psi), _uniform(), 5, 2)
    with pytest.raises(ValueError, match=r"beta holds 3 per-run instances"):
        eb.env_params(eb.synthetic_biased(beta=_biased_instances(3, n=10)[0]), 0, 4)
    theta = np.tile(np.r_[np.ravel(gm.PAPER_GROUP_WEIGHTS), 1.0], (2, 1))
    with pytest.raises(ValueError, match=r"theta has length 16 but the context dimension is d"):
        gm.gmf_synthetic(theta=theta[:, :16])
    zero = theta.copy()
    zero[1, 4:8] = 0.0
    with pytest.raises(ValueError, match=r"theta\[1\] \(the instance of run 1\): group 1 has all-zero weights"):
        gm.gmf_synthetic(theta=zero)
    with pytest.raises(ValueError, match=r"theta must be \[d\] .* or \[runs, d\]"):
        gm.gmf_synthetic(theta=theta[None])
    with pytest.raises(ValueError, match=r"group_weights must be \[G, m\] .* or \[runs, G, m\]"):
        gm.gmf_synthetic(group_weights=np.ones(4))
    with pytest.raises(ValueError, match="either theta or group_weights"):
        gm.gmf_synthetic(theta=theta[0], group_weights=np.ones((2, 4, 4)))
    many = np.ones((2, 1, 13))  # 13 non-zero weights: only a sampled CDF, refused per run
    with pytest.raises(ValueError, match=r"group_weights\[0\] .* 13 non-zero weights: per-run instances need"):
        gm.gmf_synthetic(group_weights=many)
    with pytest.raises(ValueError, match=r"theta holds 2 per-run instances.*got runs = 3"):
        bf.simulate(0, gm.gmf_synthetic(theta=theta), _uniform(), 5, 3)


def test_biased_and_gmf_instance_files(tmp_path):
    from bayesfair.environments import biased as eb
    from bayesfair.environments import group_meritocratic as gm

    beta, psi = _biased_instances(2, n=10)
    np.save(tmp_path / "beta.npy", beta)
    np.savetxt(tmp_path / "beta.csv", beta.reshape(2, -1), delimiter=",")
    np.savetxt(tmp_path / "psi.csv", psi.reshape(2, -1), delimiter=",")
    for name in ("beta.npy", "beta.csv"):
        env = eb.synthetic_biased(beta_file=str(tmp_path / name), psi_file=str(tmp_path / "psi.csv"))
        params = eb.env_params(env, 0, 2)
        np.testing.assert_allclose(np.asarray(params.beta), beta, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(params.psi), psi, rtol=1e-6)
    with pytest.raises(ValueError, match=r"beta_file must hold a \[runs, 10, 2\] array .* \(20 numbers\), got"):
        eb.synthetic_biased(beta_file=str(tmp_path / "psi.csv"))
    with pytest.raises(ValueError, match="either beta or beta_file"):
        eb.synthetic_biased(beta=beta, beta_file=str(tmp_path / "beta.npy"))
    with pytest.raises(ValueError, match="beta_file: no such file"):
        eb.synthetic_biased(beta_file=str(tmp_path / "absent.csv"))
    theta = np.tile(np.r_[np.ravel(gm.PAPER_GROUP_WEIGHTS), 1.0], (3, 1)) * [[1.0], [0.5], [2.0]]
    np.savetxt(tmp_path / "theta.csv", theta, delimiter=",")
    env = gm.gmf_synthetic(theta_file=str(tmp_path / "theta.csv"))
    assert env.reset.runs == 3
    np.testing.assert_allclose(np.asarray(env.reset(None, 2).theta), theta[2], rtol=1e-6)
    with pytest.raises(ValueError, match="theta_file alone"):
        gm.gmf_synthetic(theta=theta, theta_file=str(tmp_path / "theta.csv"))


def test_biased_and_gmf_instance_files_from_a_config(tmp_path):
    """The config forms (beta_file / psi_file, theta_file) build the same per-run environments."""
    from bayesfair.workflow import registry

    beta, psi = _biased_instances(2, n=10)
    np.save(tmp_path / "beta.npy", beta)
    np.save(tmp_path / "psi.npy", psi)
    env = registry.build("environment", {"name": "synthetic_biased", "beta_file": str(tmp_path / "beta.npy"),
                                         "psi_file": str(tmp_path / "psi.npy")}, "environment")
    assert env.reset.runs == 2 and env.reset.instances_of == "beta and psi"
    theta = np.tile(np.r_[np.ravel([[4.0, 3.0, 7.0, 0.0], [8.0, 0, 0, 0], [5.0, 5.0, 0, 0], [2.0] * 4]), 1.0], (3, 1))
    np.savetxt(tmp_path / "mu.csv", theta, delimiter=",")
    for table in ({"name": "gmf_synthetic"}, {"name": "gmf_multigroup", "n_candidates": 3,
                                               "proportions": [0.4, 0.3, 0.2, 0.1]}):
        env = registry.build("environment", {**table, "theta_file": str(tmp_path / "mu.csv")}, "environment")
        assert env.reset.runs == 3 and env.params["theta"]["distribution"] == "per_run"
    with pytest.raises(ConfigError, match="theta_file: no such file"):
        registry.build("environment", {"name": "gmf_synthetic", "theta_file": str(tmp_path / "no.csv")}, "environment")


def test_biased_linear_bandit_instance_files(tmp_path):
    """biased_linear_bandit's beta_file / psi_file (m = 3 groups here), also from a config table."""
    from bayesfair.environments import biased as eb
    from bayesfair.workflow import registry

    rng = np.random.default_rng(2)
    labels = [0, 0, 1, 1, 2, 2]
    beta = rng.uniform(0, 10, (2, 6, 2))
    psi = np.zeros((2, 3, 2))
    psi[:, 1:] = rng.uniform(-5, 0, (2, 2, 2))
    np.save(tmp_path / "beta.npy", beta)
    np.savetxt(tmp_path / "psi.csv", psi.reshape(2, -1), delimiter=",")
    env = registry.build("environment", {"name": "biased_linear_bandit", "group_of_arm": labels, "n_features": 2,
                                         "beta_file": str(tmp_path / "beta.npy"),
                                         "psi_file": str(tmp_path / "psi.csv")}, "environment")
    params = eb.env_params(env, 0, 2)
    np.testing.assert_allclose(np.asarray(params.beta), beta, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(params.psi), psi, rtol=1e-6)
    with pytest.raises(ValueError, match="either psi or psi_file"):
        eb.biased_linear_bandit(labels, 2, psi=psi, psi_file=str(tmp_path / "psi.csv"))
    drawn = eb.env_params(eb.biased_linear_bandit(labels, 2, beta_file=str(tmp_path / "beta.npy")), 0, 2)
    assert np.all(np.asarray(drawn.psi)[:, 0] == 0) and np.all(np.asarray(drawn.psi)[:, 1:] <= 0)  # psi still drawn
