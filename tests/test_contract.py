"""One contract over everything the registry lists, driven by the registry itself.

Every registered policy, posterior and environment is built from its declared examples
(``registry.declare(..., example=...)``) exactly as a TOML config builds it, and checked:

- policies: ``init``/``update``/``select`` jit and vmap (over keys and history lengths, inside a
  ``lax.scan`` on the policy's example environment), pi_t is a finite probability vector of shape
  ``[K]``, the action an int32 drawn from it, ``info`` values finite; the state survives a
  save/load round trip (the policy rebuilt from its saved name and params) with the same next
  selection;
- posteriors: jit-fitted on a history, vmapped draws of the documented shape, finite, positive
  variances;
- environments: ``reset``/``step`` jit and vmap, rewards, means and contexts of the documented
  shapes, finite.

A newly declared constructor is tested here without editing any table.
"""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _checks import EXAMPLE_ENV, EXAMPLE_STUDY, assert_valid_selection, policy_examples
from jax import lax

import bayesfair as bf
from bayesfair.datasets import MissingFileError
from bayesfair.posteriors import fit
from bayesfair.posteriors.linear import fit_linear
from bayesfair.workflow import registry
from bayesfair.workflow.persist import load_policy, save_policy

HIST = (0, 4, 30)  # history lengths: before, during and after the initial rounds of the policies
KEYS_PER_HIST = 4
_ENV_CACHE: dict[str, tuple] = {}


def _cases(kind: str) -> list:
    if kind == "policy":
        return [pytest.param(e.name, i, spec, id=label) for e in registry.entries(kind)
                for i, (label, spec) in enumerate(policy_examples(e))]
    return [pytest.param(e.name, i, spec, id=f"{e.name}[{i}]")
            for e in registry.entries(kind) for i, spec in enumerate(e.examples())]


def build(kind: str, spec: dict, study: dict | None = None):
    """Check and build a config table the way a study config does; returns (object, normalized spec)."""
    _, norm = registry.check_params(kind, spec, kind, study=study)
    return registry.build(kind, norm, kind), norm


def example_env(entry: registry.Entry):
    table = dict(entry.example_env or EXAMPLE_ENV)
    key = repr(sorted(table.items()))
    if key not in _ENV_CACHE:
        _ENV_CACHE[key] = build("environment", table)[0]
    return _ENV_CACHE[key]


def play(pol, env, key, n_hist):
    """``max(HIST)`` rounds on the environment, updating only the first ``n_hist``; then one select."""
    k_env, k_init, k_rounds, k_sel = jax.random.split(key, 4)
    params = env.reset(k_env)

    def step(state, x):
        t, k = x
        k_round, k_pol = jax.random.split(k)
        rnd = env.step(k_round, params, t)
        action, _, _ = pol.select(k_pol, state, rnd.obs)
        new = pol.update(state, rnd.obs, action, rnd.reward[action])
        return jax.tree.map(lambda u, v: jnp.where(t <= n_hist, u, v), new, state), None

    ts = jnp.arange(1, max(HIST) + 1, dtype=jnp.int32)
    state = lax.scan(step, pol.init(k_init, env.spec), (ts, jax.random.split(k_rounds, max(HIST))))[0]
    obs = env.step(jax.random.fold_in(k_rounds, 1), params, n_hist + 1).obs
    return state, obs, pol.select(k_sel, state, obs)


@pytest.mark.parametrize("name, index, spec", _cases("policy"))
def test_policy_contract(name, index, spec, tmp_path):
    entry = registry.get("policy", name)
    env = example_env(entry)
    pol, _ = build("policy", spec, study=EXAMPLE_STUDY)
    assert isinstance(pol, bf.Policy) and pol.name == name  # its key and arguments, recorded by the declaration
    assert registry.build("policy", registry.check_params("policy", {"name": name, **pol.params}, "p")[1], "p"
                          ).params == pol.params  # {"name": name, **params} is the table that rebuilds it
    keys = jax.random.split(jax.random.key(index), KEYS_PER_HIST * len(HIST))
    n_hist = jnp.repeat(jnp.asarray(HIST, jnp.int32), KEYS_PER_HIST)
    states, obs, (action, probs, info) = jax.jit(jax.vmap(lambda k, n: play(pol, env, k, n)))(keys, n_hist)
    assert_valid_selection(action, probs, info, env.spec.n_arms)
    for key, v in info.items():
        for leaf in jax.tree.leaves(v):
            leaf = np.asarray(leaf)
            if np.issubdtype(leaf.dtype, np.floating):  # a UCB index is +inf for never-pulled arms
                assert not np.any(np.isnan(leaf)) and (key == "index" or np.all(np.isfinite(leaf))), key
    # save/load round trip of one run's state: the policy comes back from its name and params, bit for bit,
    # and selects exactly what the original selected
    state, ob = jax.tree.map(lambda x: x[-1], (states, obs))
    k_sel = jax.random.split(keys[-1], 4)[3]
    path = save_policy(tmp_path / "policy.npz", pol, state, env.spec, key=k_sel)
    saved = load_policy(path)
    assert (saved.policy.name, saved.policy.label, saved.policy.params) == (pol.name, pol.label, pol.params)
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(saved.state), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    again_action, again_probs, _ = saved.policy.select(saved.key, saved.state, ob)
    assert int(again_action) == int(action[-1])
    np.testing.assert_allclose(np.asarray(again_probs), np.asarray(probs[-1]), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name, index, spec", _cases("posterior"))
def test_posterior_contract(name, index, spec):
    post, _ = build("posterior", spec)
    rng = np.random.default_rng(index)
    if "theta" in post.dims:  # a linear family (the protocol names its draw)
        d, n = 3, 40
        X = rng.normal(size=(n, d)).astype(np.float32)
        y = (X @ np.array([0.5, -0.3, 0.8]) + 0.3 * rng.normal(size=n)).astype(np.float32)
        state = jax.jit(lambda x, r: fit_linear(post, x, r))(X, y)
        shape = (d,)
    else:
        k, n = 6, 40
        arms, rewards = rng.integers(0, k, n), (rng.random(n) < 0.6).astype(np.float32)
        state = jax.jit(lambda a, r: fit(post, k, a, r))(arms, rewards)
        shape = (k,)
    draws = jax.jit(jax.vmap(post.sample, in_axes=(0, None)))(jax.random.split(jax.random.key(1), 8), state)
    assert draws.shape == (8, *shape) and draws.dtype == jnp.float32
    assert np.all(np.isfinite(np.asarray(draws)))
    assert np.asarray(post.mean(state)).shape == shape
    assert np.asarray(post.variance(state)).shape == shape
    assert np.all(np.asarray(post.variance(state)) > 0)


SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _shared_data(monkeypatch):
    """The data environments read the real files of ../shared/data (never the network)."""
    if SHARED_DATA.is_dir():
        monkeypatch.setenv("BAYESFAIR_DATA", str(SHARED_DATA))


@pytest.mark.parametrize("name, index, spec", _cases("environment"))
def test_environment_contract(name, index, spec):
    try:
        env, _ = build("environment", spec)
    except (registry.ConfigError, MissingFileError) as exc:
        if isinstance(exc, MissingFileError) or "is not in the data folder" in str(exc) \
                or isinstance(exc.__cause__, MissingFileError):
            pytest.skip(f"{name} needs a dataset (clone with ../shared beside the repo): {exc}")
        raise
    k = env.spec.n_arms

    def run(key):
        k_reset, k_step = jax.random.split(key)
        params = env.reset(k_reset)
        return jax.vmap(lambda kk, t: env.step(kk, params, t))(jax.random.split(k_step, 3), jnp.arange(1, 4))

    rounds = jax.jit(jax.vmap(run))(jax.random.split(jax.random.key(index), 4))
    assert rounds.reward.shape == (4, 3, k) and rounds.mean.shape == (4, 3, k)
    assert np.all(np.isfinite(np.asarray(rounds.reward))) and np.all(np.isfinite(np.asarray(rounds.mean)))
    if env.spec.n_features:
        assert rounds.obs.contexts.shape == (4, 3, k, env.spec.n_features)
        assert np.all(np.isfinite(np.asarray(rounds.obs.contexts)))
    assert np.asarray(env.spec.group_of_arm).shape == (k,)


def test_every_entry_is_buildable_from_its_example():
    """Every listed constructor declares examples the contract runs (none is listed untestable)."""
    for kind in registry.KINDS:
        for e in registry.entries(kind):
            for spec in e.examples():
                registry.check_params(kind, spec, kind, study=EXAMPLE_STUDY)


def test_fair_policy_is_proportional_to_merit():
    mu = jnp.array([0.1, 0.4, 0.9])
    for m in (bf.merit.exponential(5.0), bf.merit.identity(), bf.merit.custom(lambda x: 1 + x**2)):
        pi = np.asarray(bf.merit.fair_policy(m, mu))
        w = np.asarray(m(mu))
        np.testing.assert_allclose(pi, w / w.sum(), rtol=1e-5)
    # no overflow for steep exponentials
    pi = np.asarray(bf.merit.fair_policy(bf.merit.exponential(100.0), jnp.array([0.0, 5.0, 5.0])))
    np.testing.assert_allclose(pi, [0.0, 0.5, 0.5], atol=1e-6)


def test_python_only_merits_keep_the_policy_contract():
    """A custom merit (a Python function, no TOML form; no log_fn) in the bi-level policies."""
    pol = bf.policies.bilevel.bf_ucb((0.2, 0.3, 0.25), bf.merit.custom(lambda x: 1.0 + x**2))
    env = build("environment", EXAMPLE_ENV)[0]
    keys = jax.random.split(jax.random.key(0), KEYS_PER_HIST * len(HIST))
    n_hist = jnp.repeat(jnp.asarray(HIST, jnp.int32), KEYS_PER_HIST)
    _, _, (action, probs, info) = jax.jit(jax.vmap(lambda k, n: play(pol, env, k, n)))(keys, n_hist)
    assert_valid_selection(action, probs, info, env.spec.n_arms)
