"""Stepping a policy by hand: select/update are jitted once, and the hand loop plays the
simulator's rounds."""

import pickle

import cloudpickle
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import bayesfair as bf
from bayesfair.core.types import Observation
from bayesfair.policies.base import Policy

MEANS = np.linspace(0.1, 0.9, 10)
_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


@pytest.fixture
def fairx():
    return bf.fairx_ts(bf.beta_bernoulli(), bf.merit.exponential(4.0))


class _Compilations:
    """Counts XLA compilations (jax.monitoring's backend-compile duration events)."""

    def __init__(self):
        self.n = 0

    def __call__(self, event, duration, **kwargs):
        if event == _COMPILE_EVENT:
            self.n += 1

    def __enter__(self):
        jax.monitoring.register_event_duration_secs_listener(self)
        return self

    def __exit__(self, *exc):
        jax.monitoring.unregister_event_duration_listener(self)


def _hand_loop(policy, key, rounds, rng):
    """FairX-TS on Bernoulli arms stepped in Python, rewards drawn with numpy."""
    spec = bf.bernoulli_arms(MEANS).spec
    state = policy.init(key, spec)
    actions = []
    for t in range(1, rounds + 1):
        obs = Observation(jnp.int32(t))
        action, probs, _ = policy.select(jax.random.fold_in(key, t), state, obs)
        action = int(action)
        state = policy.update(state, obs, action, float(rng.random() < MEANS[action]))
        actions.append(action)
    return state, actions


def test_select_and_update_are_jitted_at_construction(fairx):
    assert isinstance(fairx.select, jax.stages.Wrapped) and isinstance(fairx.update, jax.stages.Wrapped)
    assert not isinstance(fairx.init, jax.stages.Wrapped)  # takes the static Spec
    # already-jitted functions are kept as they are; _replace re-wraps replaced ones
    again = Policy(fairx.init, fairx.select, fairx.update, fairx.label, fairx.params, name=fairx.name)
    assert again.select is fairx.select and again.update is fairx.update
    renamed = fairx._replace(label="renamed", update=lambda s, o, a, r: s)
    assert isinstance(renamed, Policy) and renamed.label == "renamed" and renamed.select is fairx.select
    assert isinstance(renamed.update, jax.stages.Wrapped)
    restored = pickle.loads(cloudpickle.dumps(fairx))  # Dask ships policies with cloudpickle
    assert isinstance(restored, Policy) and restored.params == fairx.params


def test_hand_stepping_compiles_once(fairx):
    rng = np.random.default_rng(0)
    key = jax.random.key(3)
    _hand_loop(fairx, key, 3, rng)  # warm-up: compiles select, update and the small eager ops
    with _Compilations() as compiled:
        _, actions = _hand_loop(fairx, key, 60, rng)
    assert compiled.n == 0, f"{compiled.n} compilations in 60 hand-stepped rounds"
    assert len(set(actions)) > 1
    if hasattr(fairx.select, "_cache_size"):  # private, but present in the installed JAX
        assert fairx.select._cache_size() == 1 and fairx.update._cache_size() == 1


def _sim_keys(seed):
    """Round keys of run 0 of ``simulate(seed, ...)``: see bayesfair.simulate (init_run)."""
    k_env, k_pol = jax.random.split(jax.random.key(seed))
    env_key, pol_key = jax.random.split(k_env, 1)[0], jax.random.split(k_pol, 1)[0]
    k_reset, k_env_rounds = jax.random.split(env_key)
    k_init, k_pol_rounds = jax.random.split(pol_key)
    return k_reset, k_env_rounds, k_init, k_pol_rounds


def test_hand_stepped_run_equals_the_simulator_and_a_scan(fairx):
    env = bf.bernoulli_arms(MEANS)
    horizon, seed = 50, 7
    k_reset, k_env, k_init, k_pol = _sim_keys(seed)
    params = env.reset(k_reset)
    env_step = jax.jit(env.step)

    state = fairx.init(k_init, env.spec)
    pulls, reward, exposure = np.zeros(len(MEANS)), 0.0, np.zeros(len(MEANS))
    for t in range(1, horizon + 1):
        rnd = env_step(jax.random.fold_in(k_env, t), params, jnp.int32(t))
        action, probs, _ = fairx.select(jax.random.fold_in(k_pol, t), state, rnd.obs)
        r = rnd.reward[action]
        state = fairx.update(state, rnd.obs, action, r)
        pulls[int(action)] += 1
        reward += float(r)
        exposure += np.asarray(probs, np.float64)

    ds = bf.simulate(seed, env, {"FairX-TS": fairx}, horizon, 1, merit=bf.merit.exponential(4.0),
                     checkpoints=[horizon], chunk_size=16)
    final = ds.sel(policy="FairX-TS").isel(run=0, checkpoint=-1)
    np.testing.assert_array_equal(final["pulls"].values, pulls)
    assert float(final["reward"]) == reward
    np.testing.assert_allclose(final["exposure"].values, exposure, rtol=1e-5)

    @jax.jit
    def scanned(state):
        def step(state, t):
            rnd = env.step(jax.random.fold_in(k_env, t), params, t)
            action, _, _ = fairx.select(jax.random.fold_in(k_pol, t), state, rnd.obs)
            return fairx.update(state, rnd.obs, action, rnd.reward[action]), None

        return lax.scan(step, state, jnp.arange(1, horizon + 1, dtype=jnp.int32))[0]

    for a, b in zip(jax.tree.leaves(scanned(fairx.init(k_init, env.spec))), jax.tree.leaves(state), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
