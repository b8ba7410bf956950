"""A user policy's ``select`` is checked: its outputs' shapes and dtypes once, when the simulator
traces it (an error naming the policy, what it returned and what was expected), and its values
every round (an action outside 0..K-1, or one that pi_t gives no mass, stops the study with a
``SimulationError`` naming the policy, the run and the round)."""

import sys
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesfair as bf
from bayesfair.policies.base import Policy
from bayesfair.simulation.simulator import SimulationError
from bayesfair.workflow.registry import ConfigError
from bayesfair.workflow.study import parse_config

K = 4
MEANS = [0.2, 0.4, 0.6, 0.8]


@pytest.fixture(scope="module")
def env():
    return bf.bernoulli_arms(np.array(MEANS))


def _policy(select_out, name="custom"):
    """A stateless policy whose ``select`` returns ``select_out(key, obs)``."""

    def init(key, spec):
        return jnp.zeros(spec.n_arms)

    def select(key, state, obs):
        return select_out(key, obs)

    def update(state, obs, action, reward):
        return state

    return Policy(init, select, update, name)


def _uniform_probs():
    return jnp.full((K,), 1.0 / K)


def _run(env, pol, horizon=40, runs=3):
    return bf.simulate(0, env, {"mine": pol}, horizon=horizon, runs=runs, merit=bf.merit.exponential(4.0),
                       chunk_size=16)


# ---------------------------------------------------------------------------------------------
# values, every round


@pytest.mark.parametrize("bad", [K + 3, -1])
def test_an_action_outside_the_arms_stops_the_study(env, bad):
    # valid for six rounds, then an action that is no arm: unchecked, it would count no pull and
    # take the reward of a clamped or wrapped arm
    pol = _policy(lambda key, obs: (jnp.where(obs.t == 7, bad, obs.t % K).astype(jnp.int32), _uniform_probs(), {}))
    with pytest.raises(SimulationError, match=r"policy 'mine' \(custom\) played an action outside 0\.\.3 at round 7 "
                                              r"of run 0 \(3 run\(s\) affected between rounds 1 and 16\)"):
        _run(env, pol)


def test_an_action_that_pi_t_gives_no_mass_stops_the_study(env):
    # pi_t one-hot on arm 0 while arm 3 is played: unchecked, exposure would go to 0 and pulls to 3
    pol = _policy(lambda key, obs: (jnp.int32(3), jax.nn.one_hot(0, K), {}))
    with pytest.raises(SimulationError, match=r"policy 'mine' \(custom\) played an arm to which its selection "
                                              r"distribution pi_t gives probability 0 at round 1 of run 0"):
        _run(env, pol)


def test_the_first_failing_round_is_reported_across_chunks_and_runs(env):
    # the bad round is in the second chunk (rounds 17..32), only in the runs whose key says so
    def select(key, obs):
        play_bad = (obs.t == 20) & (jax.random.uniform(key) < 0.5)
        return jnp.where(play_bad, K, 0).astype(jnp.int32), jax.nn.one_hot(0, K), {}

    with pytest.raises(SimulationError, match=r"action outside 0\.\.3 at round 20 of run \d+ \(\d run\(s\) affected "
                                              r"between rounds 17 and 32\)"):
        _run(env, _policy(select), runs=8)


def test_a_valid_deterministic_user_policy_runs_unchanged(env):
    # one-hot pi_t on the played arm (round robin): the checks pass and pulls equal exposure
    pol = _policy(lambda key, obs: ((obs.t % K).astype(jnp.int32), jax.nn.one_hot(obs.t % K, K), {}))
    ds = _run(env, pol, horizon=40, runs=2)
    final = ds.isel(checkpoint=-1)
    np.testing.assert_array_equal(final["pulls"].values, final["exposure"].values)
    assert float(final["pulls"].sum()) == 2 * 40


# ---------------------------------------------------------------------------------------------
# shapes and dtypes, once at trace time

_onehot = jax.nn.one_hot(0, K)
SHAPE_CASES = [
    ("float action", lambda k, o: (jnp.float32(1), _onehot, {}), TypeError,
     r"policy 'mine' \(custom\) select returned an action of dtype float32 shape \(\); expected an integer scalar "
     r"\(the arm index\)"),
    ("bool action", lambda k, o: (jnp.bool_(True), _onehot, {}), TypeError,
     r"an action of dtype bool shape \(\); expected an integer scalar"),
    ("action of shape (1,)", lambda k, o: (jnp.zeros((1,), jnp.int32), _onehot, {}), ValueError,
     r"select returned an action of dtype int32 shape \(1,\); expected an integer scalar"),
    ("pi_t of length K + 1", lambda k, o: (jnp.int32(0), jax.nn.one_hot(0, K + 1), {}), ValueError,
     r"select returned probs of dtype float32 shape \(5,\); expected a float vector of shape \(4,\)"),
    ("scalar pi_t", lambda k, o: (jnp.int32(0), jnp.float32(1), {}), ValueError,
     r"select returned probs of dtype float32 shape \(\); expected a float vector of shape \(4,\)"),
    ("integer pi_t", lambda k, o: (jnp.int32(0), jnp.eye(K, dtype=jnp.int32)[0], {}), TypeError,
     r"select returned probs of dtype int32 shape \(4,\); expected a float vector"),
    ("info not a dict", lambda k, o: (jnp.int32(0), _onehot, jnp.zeros(2)), TypeError,
     r"select returned info of dtype float32 shape \(2,\); expected a dict"),
    ("two outputs", lambda k, o: (jnp.int32(0), _onehot), TypeError,
     r"select returned a tuple of 2; expected a tuple \(action, probs, info\)"),
]


@pytest.mark.parametrize("case, select, error, match", SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
def test_select_outputs_of_the_wrong_shape_or_dtype_name_the_policy(env, case, select, error, match):
    with pytest.raises(error, match=match):
        _run(env, _policy(select))


def test_the_policy_label_alone_when_it_is_the_policy_name(env):
    with pytest.raises(TypeError, match=r"^policy 'mine' select returned an action of dtype float32"):
        _run(env, _policy(lambda k, o: (jnp.float32(1), _onehot, {}), name="mine"))


# ---------------------------------------------------------------------------------------------
# the same policies named by a config's import path


def broken_policy(fault: Literal["none", "float_action", "outside"] = "none") -> Policy:
    """A round-robin policy with one ``fault``: ``float_action``, ``outside`` (plays arm K at round 3)
    or ``none``."""
    def select(key, obs):
        arm = (obs.t % K).astype(jnp.int32)
        if fault == "float_action":
            return arm.astype(jnp.float32), jax.nn.one_hot(arm, K), {}
        if fault == "outside":
            return jnp.where(obs.t == 3, K, arm).astype(jnp.int32), jax.nn.one_hot(arm, K), {}
        return arm, jax.nn.one_hot(arm, K), {}

    return _policy(select, name="broken")


def _config(fault):
    return {"name": "t", "seed": 1, "runs": 2, "horizon": 20, "chunk_size": 8,
            "merit": {"name": "exponential", "c": 4.0},
            "environment": {"name": "bernoulli_arms", "means": MEANS},
            "policies": {"X": {"name": "test_policy_checks:broken_policy", "fault": fault}}}


@pytest.fixture
def declared_broken_policy():
    """``broken_policy`` declared as a policy for the test's duration (a config may name only
    declared constructors by import path), then forgotten again."""
    from bayesfair.core.declare import declare, entries

    declared = declare("policy")(broken_policy)
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(sys.modules[__name__], "broken_policy", declared)
    yield
    monkeypatch.undo()
    entries("policy").pop("broken_policy", None)


def test_a_config_import_path_policy_is_checked(declared_broken_policy):
    assert parse_config(_config("none")).run()["pulls"].isel(checkpoint=-1).sum() == 2 * 20
    with pytest.raises(ConfigError, match=r"select returned an action of dtype float32 shape \(\)") as exc:
        parse_config(_config("float_action"))
    assert exc.value.path == "policies.X"
    study = parse_config(_config("outside"))  # the shapes fit: the values are checked as the rounds run
    with pytest.raises(SimulationError, match=r"policy 'X' \(broken\) played an action outside 0\.\.3 at round 3 "):
        study.run()
