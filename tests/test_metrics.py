"""The simulator's metrics: group, extra, tracked and bi-level quantities, checked against direct
computations (exact identities and independent re-computations, not snapshots)."""

from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesfair as bf
from bayesfair.core.types import Observation, Round
from bayesfair.environments.base import Environment
from bayesfair.policies.base import Policy
from bayesfair.simulation.metrics import bilevel_regret

M = bf.merit.exponential(3.0)
LIN = bf.merit.identity(0.05)


def test_single_group_meritocratic_regret_is_the_fairness_regret():
    """With one group, pi*_g = pi* and pi^t_g = pi_t, so the two sums agree round by round."""
    env = bf.bernoulli_arms(bf.environments.UniformMeans(0.1, 0.9, n_arms=4))
    ds = bf.simulate(3, env, {"FairX-TS": bf.fairx_ts(bf.beta_bernoulli(), M), "TS": bf.thompson(bf.beta_bernoulli())},
                     500, 4, merit=M, checkpoints=[50, 500])
    np.testing.assert_allclose(ds["group_fairness_regret"].isel(group=0).values, ds["fairness_regret"].values,
                               rtol=1e-5)
    t = np.broadcast_to(ds["checkpoint"].values, (2, 4, 2))
    np.testing.assert_allclose(ds["group_exposure"].sum("group").values, t, rtol=1e-6)
    np.testing.assert_allclose(ds["group_offered"].isel(group=0).values, 4 * t, rtol=0)


def _uniform_policy() -> Policy:
    """Pulls uniformly at random; reports the round index as a tracked value."""

    def init(key, spec):
        return jnp.zeros(spec.n_arms)

    def select(key, state, obs):
        k = state.shape[0]
        a = jax.random.randint(key, (), 0, k)
        return a, jnp.full((k,), 1.0 / k), {"track": {"round": obs.t.astype(jnp.float32), "pair": jnp.ones(2)}}

    def update(state, obs, action, reward):
        return state

    return Policy(init, select, update, "uniform-tracked", {})


def _dynamic_group_env(k: int = 4, m: int = 3) -> Environment:
    """Candidates with i.i.d. group labels per round and an extra value table (mean squared)."""
    base = bf.gaussian_arms(np.linspace(0.2, 0.8, k), sigma=0.5)

    def step(key, params, t):
        k1, k2 = jax.random.split(key)
        rnd = base.step(k1, params, t)
        groups = jax.random.randint(k2, (k,), 0, m)
        return Round(Observation(t, None, groups), rnd.reward, rnd.mean, {"squared": rnd.mean ** 2})

    groups = bf.Groups.from_labels(np.arange(k) % m)
    return base._replace(step=step, groups=groups, spec=base.spec._replace(n_groups=m,
                                                                           group_of_arm=groups.labels))


def test_per_round_groups_extra_regret_and_tracking():
    env = _dynamic_group_env()
    t = np.array([10, 100, 300])
    ds = bf.simulate(5, env, {"u": _uniform_policy(), "ts": bf.thompson(bf.normal_known_variance(0.0, 1.0, 0.25))},
                     300, 4, merit=LIN, checkpoints=t)
    # every round offers K candidates, spread over the groups drawn per round
    np.testing.assert_allclose(ds["group_offered"].sum("group").values, np.broadcast_to(4 * t, (2, 4, 3)), rtol=0)
    offered = ds["group_offered"].values
    assert np.all(offered[..., -1, :] > 0) and not np.allclose(offered[0, 0, -1], offered[0, 1, -1])
    # uniform play: exposure of a group is exactly offered / K
    np.testing.assert_allclose(ds["group_exposure"].sel(policy="u").values,
                               ds["group_offered"].sel(policy="u").values / 4, rtol=1e-5)
    # the extra table's regret: sum_t (max v - pi . v) with constant v = mu^2 for the uniform policy
    mu2 = np.linspace(0.2, 0.8, 4) ** 2
    np.testing.assert_allclose(ds["squared_regret"].sel(policy="u").values,
                               np.broadcast_to(t * (mu2.max() - mu2.mean()), (4, 3)), rtol=1e-5)
    # tracked values are the latest ones at each checkpoint, NaN for a policy that does not track
    np.testing.assert_array_equal(ds["track_round"].sel(policy="u").values, np.broadcast_to(t, (4, 3)))
    assert ds["track_pair"].dims == ("policy", "run", "checkpoint", "pair_dim0")
    assert np.isnan(ds["track_round"].sel(policy="ts").values).all()


def _exact_slack(pulls_group: np.ndarray, beta: np.ndarray, t: np.ndarray) -> np.ndarray:
    return np.array([[pulls_group[i, g] - (Fraction(float(beta[g])) * int(t[i])).__floor__()
                      for g in range(beta.size)] for i in range(t.size)])


@pytest.fixture(scope="module")
def bilevel_runs():
    groups = [0] * 3 + [1] * 5
    env = bf.bernoulli_arms(bf.environments.UniformMeans([0.5] * 3 + [0.6] * 5, [0.8] * 3 + [0.95] * 5), groups=groups)
    beta = np.array([0.3, 0.3])
    pols = {"BF-UCB": bf.bf_ucb(beta, LIN), "BF-TS": bf.bf_ts(beta, LIN, bf.beta_bernoulli()),
            "UCB": bf.ucb1()}
    t = np.arange(1, 2001)  # every round is a checkpoint: the running minimum is checked exactly
    return beta, bf.simulate(8, env, pols, 2000, 6, merit=LIN, checkpoints=t, floors=beta)


def test_anytime_slack_is_the_running_minimum_of_the_exact_floor_gap(bilevel_runs):
    beta, ds = bilevel_runs
    t = ds["checkpoint"].values
    for name in ("BF-UCB", "UCB"):
        for r in range(ds.sizes["run"]):
            gap = _exact_slack(ds["group_pulls"].sel(policy=name).values[r], beta, t)
            np.testing.assert_array_equal(ds["anytime_slack"].sel(policy=name).values[r],
                                          np.minimum.accumulate(gap, axis=0))
    assert (ds["anytime_slack"].sel(policy=["BF-UCB", "BF-TS"]) >= 0).all()
    assert (ds["anytime_slack"].sel(policy="UCB").isel(checkpoint=-1) < 0).any()  # the check can fail


def test_bilevel_regret_matches_eq1_and_theorem4_adds_up(bilevel_runs):
    beta, ds = bilevel_runs
    np.testing.assert_allclose(ds["bf_regret"].values, (ds["bf_regret_groups"] + ds["bf_regret_within"]).values,
                               atol=1e-6 * ds["checkpoint"].values.max())
    # Eq. (1) evaluated directly for one run and checkpoint
    r, c = 2, 1499
    mu = ds["mean"].values[r]
    labels = ds["arm_group"].values
    rg = []
    for g in range(2):
        w = mu[labels == g]  # f(mu) = mu
        rg.append(float(np.sum(w / w.sum() * w)))
    t = int(ds["checkpoint"].values[c])
    floors = [(Fraction(float(b)) * t).__floor__() for b in beta]
    optimal = sum(f * v for f, v in zip(floors, rg, strict=True)) + (t - sum(floors)) * max(rg)
    for name in ds["policy"].values:
        earned = float(ds["exposure"].sel(policy=name).values[r, c] @ mu)
        np.testing.assert_allclose(float(ds["bf_regret"].sel(policy=name).values[r, c]), optimal - earned,
                                   rtol=1e-9, atol=1e-6)


def test_bilevel_regret_function_shapes_and_zero_for_the_optimal_policy():
    """The optimal bi-level policy (floors on sub-optimal groups, the rest on g*, pi*_g within)
    has zero regret and zero Theorem 4 terms."""
    mean = np.array([[0.6, 0.7, 0.9, 0.8]])
    labels = np.array([0, 0, 1, 1])
    pis = np.array([[0.6 / 1.3, 0.7 / 1.3, 0.9 / 1.7, 0.8 / 1.7]])
    beta = np.array([0.25, 0.3])
    t = np.array([7, 100, 1000])
    n0 = np.floor(beta[0] * t)  # group 0 is sub-optimal
    exposure = np.stack([np.concatenate([n * pis[0, :2], (tt - n) * pis[0, 2:]]) for n, tt in zip(n0, t, strict=True)])
    out = bilevel_regret(exposure[None], mean, pis, labels, beta, t)
    for v in out.values():
        assert v.shape == (1, 3)
        np.testing.assert_allclose(v, 0.0, atol=1e-9)


@pytest.mark.parametrize("keyword", ["floors"])
def test_floors_validation(keyword):
    env = bf.bernoulli_arms([0.2, 0.5, 0.7], groups=[0, 0, 1])
    pol = {"UCB": bf.ucb1()}
    with pytest.raises(ValueError, match=keyword):
        bf.simulate(0, env, pol, 10, 1, merit=LIN, **{keyword: [0.6, 0.3]})
    with pytest.raises(ValueError, match=keyword):
        bf.simulate(0, env, pol, 10, 1, merit=LIN, **{keyword: [0.3]})
    with pytest.raises(TypeError, match=keyword):
        bf.simulate(0, env, pol, 10, 1, merit=LIN, **{keyword: ["a", object()]})
