"""The online agent (bayesfair.workflow.online): one decision per call, the policy's own functions
with the documented keys, batches, save/restore, the checks at its boundary and its compiled
programs in the persistent cache."""

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _checks import tracking_block

import bayesfair as bf
from bayesfair.core.compat import IncompatibleError
from bayesfair.core.types import Observation
from bayesfair.workflow import online as online_mod
from bayesfair.workflow.online import Decision, Decisions, OnlineAgent
from bayesfair.workflow.persist import PersistError

K = 6
MEANS = np.linspace(0.15, 0.85, K)


def _policies():
    exp4 = bf.merit.exponential(4.0)
    return {"ts": bf.thompson(bf.beta_bernoulli()), "fairx_ts": bf.fairx_ts(bf.beta_bernoulli(), exp4),
            "fairx_ucb": bf.fairx_ucb(exp4, horizon=1000)}


POLICIES = _policies()  # built once: agents of the same policy object share compiled programs
LINEAR = bf.fairx_lints(bf.posteriors.linear_known_variance(), bf.merit.exponential(2.0))
D = 3


def _reward(rng, action):
    return float(rng.random() < MEANS[action])


def _contexts(rng, n=None):
    shape = (K, D) if n is None else (n, K, D)
    return rng.normal(size=shape).astype(np.float32)


def _play(agent, rounds, seed=0):
    """select/update ``rounds`` times with Bernoulli rewards from numpy; the decisions."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(rounds):
        d = agent.select()
        agent.update(d.action, _reward(rng, d.action))
        out.append(d)
    return out


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_same_seed_and_calls_give_the_same_actions(name):
    a = _play(bf.online(POLICIES[name], n_arms=K, seed=7), 40)
    b = _play(bf.online(POLICIES[name], n_arms=K, seed=7), 40)
    assert [d.action for d in a] == [d.action for d in b]
    np.testing.assert_array_equal(np.stack([d.pi for d in a]), np.stack([d.pi for d in b]))
    assert [d.round for d in a] == list(range(1, 41))
    if name != "fairx_ucb":  # a deterministic index policy may agree across seeds; samplers must not
        c = _play(bf.online(POLICIES[name], n_arms=K, seed=8), 40)
        assert [d.action for d in a] != [d.action for d in c]


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_agent_applies_the_policys_functions_with_the_documented_keys(name):
    # k_init, k_rounds = split(key(seed)); state = init(k_init, spec); round t selects with
    # fold_in(k_rounds, t) and Observation(t=int32(t)); update gets the round's observation
    policy, seed = POLICIES[name], 11
    agent = bf.online(policy, n_arms=K, seed=seed)
    k_init, k_rounds = jax.random.split(jax.random.key(seed))
    state = policy.init(k_init, agent.spec)
    rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
    for t in range(1, 31):
        obs = Observation(jnp.int32(t))
        action, probs, info = policy.select(jax.random.fold_in(k_rounds, t), state, obs)
        d = agent.select()
        assert d.action == int(action) and d.round == t
        np.testing.assert_allclose(d.pi, np.asarray(probs), rtol=1e-6, atol=1e-7)
        assert set(d.info) == set(info)
        state = policy.update(state, obs, action, jnp.float32(_reward(rng_a, int(action))))
        agent.update(d.action, _reward(rng_b, d.action))
    for mine, theirs in zip(jax.tree.leaves(agent.state), jax.tree.leaves(state), strict=True):
        np.testing.assert_allclose(np.asarray(mine), np.asarray(theirs), rtol=1e-6)


def test_linear_agent_applies_the_policys_functions_with_contexts():
    agent = bf.online(LINEAR, n_arms=K, n_features=D, seed=2)
    k_init, k_rounds = jax.random.split(jax.random.key(2))
    state = LINEAR.init(k_init, agent.spec)
    rng = np.random.default_rng(0)
    for t in range(1, 16):
        x = _contexts(rng)
        obs = Observation(jnp.int32(t), jnp.asarray(x))
        action, probs, _ = LINEAR.select(jax.random.fold_in(k_rounds, t), state, obs)
        d = agent.select(x)
        assert d.action == int(action)
        np.testing.assert_allclose(d.pi, np.asarray(probs), rtol=1e-5, atol=1e-6)
        reward = float(x[d.action].sum() + rng.normal())
        state = LINEAR.update(state, obs, action, jnp.float32(reward))
        agent.update(d.action, reward)
    for mine, theirs in zip(jax.tree.leaves(agent.state), jax.tree.leaves(state), strict=True):
        np.testing.assert_allclose(np.asarray(mine), np.asarray(theirs), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_pi_is_a_distribution_with_mass_on_the_action(name):
    for d in _play(bf.online(POLICIES[name], n_arms=K, seed=1), 60):
        assert isinstance(d, Decision) and isinstance(d.action, int) and 0 <= d.action < K
        assert d.pi.shape == (K,) and np.all(d.pi >= 0)
        assert abs(float(d.pi.sum()) - 1.0) <= 1e-5
        assert d.pi[d.action] > 0


def test_update_and_select_equals_update_then_select():
    policy = POLICIES["fairx_ts"]
    a, b = bf.online(policy, n_arms=K, seed=5), bf.online(policy, n_arms=K, seed=5)
    rng_a, rng_b = np.random.default_rng(1), np.random.default_rng(1)
    da, db = a.select(), b.select()
    for _ in range(30):
        a.update(da.action, _reward(rng_a, da.action))
        da = a.select()
        db = b.update_and_select(db.action, _reward(rng_b, db.action))
        assert (da.action, da.round) == (db.action, db.round)
        np.testing.assert_allclose(da.pi, db.pi, rtol=1e-6)


def test_select_batch_equals_selects_without_updates():
    policy = POLICIES["fairx_ts"]
    a, b = bf.online(policy, n_arms=K, seed=4), bf.online(policy, n_arms=K, seed=4)
    _play(a, 5), _play(b, 5)
    batch = a.select_batch(8)
    singles = [b.select() for _ in range(8)]
    assert isinstance(batch, Decisions) and len(batch) == 8 and a.round == b.round == 13
    np.testing.assert_array_equal(batch.action, [d.action for d in singles])
    np.testing.assert_array_equal(batch.round, np.arange(6, 14))
    np.testing.assert_allclose(batch.pi, np.stack([d.pi for d in singles]), rtol=1e-6)
    assert batch[2].action == singles[2].action and batch[-1].round == 13
    np.testing.assert_allclose(np.asarray(batch[2].info["mu"]), np.asarray(singles[2].info["mu"]), rtol=1e-6)


def test_update_batch_equals_sequential_updates():
    policy = POLICIES["fairx_ts"]
    a, b = bf.online(policy, n_arms=K, seed=9), bf.online(policy, n_arms=K, seed=9)
    da, db = a.select_batch(10), b.select_batch(10)
    rewards = (np.random.default_rng(0).random(10) < 0.5).astype(np.float32)
    a.update_batch(da.action, rewards)
    for i in range(10):
        b.update(int(db.action[i]), float(rewards[i]), decision=db[i])
    for x, y in zip(jax.tree.leaves(a.state), jax.tree.leaves(b.state), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert a.select().action == b.select().action
    # several rewards for one selected round: the round's observation for each
    c = bf.online(policy, n_arms=K, seed=9)
    c.select()
    c.update_batch(np.array([0, 1, 1]), np.array([1.0, 0.0, 1.0]))
    state = c.state
    np.testing.assert_array_equal(np.asarray(state.alpha - 1.0)[:2], [1.0, 1.0])


def test_linear_batches_equal_sequential_calls():
    a, b = bf.online(LINEAR, n_arms=K, n_features=D, seed=3), bf.online(LINEAR, n_arms=K, n_features=D, seed=3)
    x = _contexts(np.random.default_rng(5), 4)
    batch = a.select_batch(contexts=x)
    singles = [b.select(x[i]) for i in range(4)]
    np.testing.assert_array_equal(batch.action, [d.action for d in singles])
    rewards = np.array([0.5, -1.0, 2.0, 0.0])
    a.update_batch(batch.action, rewards)
    for d, r in zip(singles, rewards, strict=True):
        b.update(d, float(r))  # a Decision as the action: its round's contexts
    for p, q in zip(jax.tree.leaves(a.state), jax.tree.leaves(b.state), strict=True):
        np.testing.assert_allclose(np.asarray(p), np.asarray(q), rtol=1e-5, atol=1e-6)


def test_late_feedback_uses_the_decisions_round():
    # rewards of two earlier rounds arriving out of order are learned with their own contexts
    a, b = bf.online(LINEAR, n_arms=K, n_features=D, seed=1), bf.online(LINEAR, n_arms=K, n_features=D, seed=1)
    x = _contexts(np.random.default_rng(2), 2)
    d1, d2 = a.select(x[0]), a.select(x[1])
    a.update(d2.action, 1.0, decision=d2)
    a.update(d1.action, -0.5, decision=d1)
    e1, e2 = b.select(x[0]), b.select(x[1])
    b.update_batch([e2.action, e1.action], [1.0, -0.5], decisions=[e2, e1])
    for p, q in zip(jax.tree.leaves(a.state), jax.tree.leaves(b.state), strict=True):
        np.testing.assert_allclose(np.asarray(p), np.asarray(q), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["fairx_ts", "fairx_ucb"])
def test_save_and_load_continue_identically(tmp_path, name):
    policy = POLICIES[name]
    agent = bf.online(policy, n_arms=K, seed=12)
    _play(agent, 20)
    d = agent.select()  # saved between a select and its update
    path = agent.save(tmp_path / "agent.npz", extra={"note": "x"})
    restored = bf.online.load(path, policy)
    assert isinstance(restored, OnlineAgent) and restored.round == agent.round == 21
    for a in (agent, restored):
        a.update(d.action, 1.0)  # the last round before saving, on both
    np.testing.assert_array_equal([x.action for x in _play(agent, 25, seed=4)],
                                  [x.action for x in _play(restored, 25, seed=4)])


def test_an_agent_from_a_registry_table_loads_without_the_policy(tmp_path):
    table = {"name": "fairx_ts", "posterior": {"name": "beta_bernoulli"}, "merit": {"name": "exponential", "c": 4.0}}
    agent = bf.online(table, n_arms=K, seed=3)
    _play(agent, 10)
    restored = bf.online.load(agent.save(tmp_path / "a.npz"))
    assert [d.action for d in _play(agent, 10, 1)] == [d.action for d in _play(restored, 10, 1)]


def test_linear_agent_restores_and_accepts_earlier_decisions(tmp_path):
    agent = bf.online(LINEAR, n_arms=K, n_features=D, seed=6)
    x = _contexts(np.random.default_rng(0), 3)
    d = agent.select(x[0])
    restored = bf.online.load(agent.save(tmp_path / "lin.npz"), LINEAR)
    with pytest.raises(ValueError, match="no round has been selected"):
        restored.update(d.action, 1.0)  # the contexts of the last round are not in the file
    for a in (agent, restored):
        a.update(d, 1.0)  # the decision carries them
    assert [agent.select(x[i]).action for i in (1, 2)] == [restored.select(x[i]).action for i in (1, 2)]


def test_load_refuses_damaged_and_foreign_files(tmp_path):
    policy = POLICIES["ts"]
    agent = bf.online(policy, n_arms=K, seed=0)
    _play(agent, 3)
    path = agent.save(tmp_path / "a.npz")
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["state/0"] = arrays["state/0"] + 1.0  # a hand-edited count
    np.savez(tmp_path / "edited.npz", **arrays)
    with pytest.raises(PersistError, match="checksum"):
        bf.online.load(tmp_path / "edited.npz", policy)
    plain = bf.save_policy(tmp_path / "plain.npz", policy, agent.state, agent.spec, key=jax.random.key(0))
    with pytest.raises(PersistError, match="not saved by an online agent"):
        bf.online.load(plain, policy)
    with pytest.raises(PersistError, match="different configuration"):
        bf.online.load(path, POLICIES["fairx_ts"])


@pytest.mark.parametrize("action, error, match", [
    (-1, ValueError, r"arm index in 0\.\.5, got -1"), (K, ValueError, r"0\.\.5, got 6"),
    (2.0, TypeError, "integer arm index"), (True, TypeError, "integer arm index"), ("1", TypeError, "integer")])
def test_bad_actions_are_refused(action, error, match):
    agent = bf.online(POLICIES["ts"], n_arms=K, seed=0)
    agent.select()
    with pytest.raises(error, match=match):
        agent.update(action, 1.0)


@pytest.mark.parametrize("reward, match", [(float("nan"), "finite"), (float("inf"), "finite"),
                                           (0.5, "binary rewards"), ("x", "real number")])
def test_bad_rewards_are_refused(reward, match):
    agent = bf.online(POLICIES["ts"], n_arms=K, seed=0)
    agent.select()
    with pytest.raises((ValueError, TypeError), match=match):
        agent.update(0, reward)
    with pytest.raises((ValueError, TypeError), match=match):
        agent.update_batch([0, 1], [1.0, reward])


def test_bounded_and_real_rewards_are_checked_as_declared():
    ucb = bf.online(POLICIES["fairx_ucb"], n_arms=K, seed=0)  # bounded in [0, 1] by its requirement
    ucb.select()
    ucb.update(0, 0.25)
    with pytest.raises(ValueError, match=r"inside \[0, 1\]"):
        ucb.update(0, 1.5)
    with pytest.raises(IncompatibleError, match="binary"):
        bf.online(POLICIES["ts"], n_arms=K, rewards="real")
    lin = bf.online(LINEAR, n_arms=K, n_features=D)
    lin.select(np.zeros((K, D)))
    lin.update(0, -12.5)  # real rewards


def test_bad_contexts_and_groups_are_refused():
    lin = bf.online(LINEAR, n_arms=K, n_features=D, seed=0)
    with pytest.raises(ValueError, match=r"needs the candidates' contexts, an array \[6, 3\]"):
        lin.select()
    with pytest.raises(ValueError, match=r"shape \(6, 3\).*got \(6, 2\)"):
        lin.select(np.zeros((K, 2)))
    with pytest.raises(ValueError, match="finite"):
        lin.select(np.full((K, D), np.nan))
    with pytest.raises(ValueError, match=r"shape \(2, 6, 3\)"):
        lin.select_batch(2, contexts=np.zeros((3, K, D)))
    mab = bf.online(POLICIES["ts"], n_arms=K, seed=0)
    with pytest.raises(ValueError, match="takes no contexts"):
        mab.select(np.zeros((K, D)))
    with pytest.raises(ValueError, match=r"group indices in 0\.\.0"):
        mab.select(groups=np.ones(K, int))
    assert mab.round == 0 and lin.round == 0  # a refused call changes nothing


def test_updates_need_a_selected_round():
    agent = bf.online(POLICIES["ts"], n_arms=K, seed=0)
    with pytest.raises(ValueError, match="no round has been selected yet"):
        agent.update(0, 1.0)
    with pytest.raises(ValueError, match="start with select|no round has been selected"):
        agent.update_and_select(0, 1.0)
    agent.select_batch(3)
    with pytest.raises(ValueError, match="last selection was a batch"):
        agent.update(0, 1.0)
    with pytest.raises(ValueError, match="2 rewards, but the last select_batch chose 3"):
        agent.update_batch([0, 1], [1.0, 0.0])
    other = bf.online(POLICIES["ts"], n_arms=K, seed=0)
    late = [other.select() for _ in range(5)][-1]
    with pytest.raises(ValueError, match="round 5, but this agent has selected rounds 1..3"):
        agent.update(late, 1.0)
    with pytest.raises(TypeError, match="either as the action or as decision="):
        agent.update(late, 1.0, decision=late)


def test_problem_arguments_are_derived_and_checked():
    with pytest.raises(ValueError, match="pass n_arms"):
        bf.online(POLICIES["ts"])
    with pytest.raises(ValueError, match="n_features=d"):
        bf.online(LINEAR, n_arms=K)  # a linear policy without the context dimension
    with pytest.raises(ValueError, match="one group per arm"):
        bf.online(POLICIES["ts"], n_arms=K, groups=[0, 1])
    with pytest.raises(ValueError, match="groups="):
        bf.online(bf.bf_ucb([0.2, 0.2], bf.merit.identity()), n_arms=4)  # floors for 2 groups, no groups
    agent = bf.online(bf.bf_ucb([0.2, 0.2], bf.merit.identity()), groups=["a", "a", "b", "b"], seed=0)
    assert agent.spec.n_arms == 4 and agent.spec.n_groups == 2
    _play(agent, 5)
    with pytest.raises(TypeError, match="integer seed"):
        bf.online(POLICIES["ts"], n_arms=K, seed=1.5)
    with pytest.raises(ValueError, match="either spec or n_arms"):
        bf.online(POLICIES["ts"], n_arms=K, spec=agent.spec)
    with pytest.raises(ValueError, match="unknown"):
        bf.online({"name": "thompson", "posteriour": "beta_bernoulli"}, n_arms=K)
    same = bf.online(POLICIES["ts"], seed=jax.random.key(7), spec=bf.bernoulli_arms(MEANS).spec)
    assert same.select().action == bf.online(POLICIES["ts"], n_arms=K, seed=7).select().action


def test_state_is_a_copy_and_info_survives_later_updates():
    agent = bf.online(POLICIES["fairx_ts"], n_arms=K, seed=0)
    d = agent.select()
    held = agent.state
    for _ in range(3):
        agent.update(d.action, 1.0)  # the agent's buffers are donated to update
    np.testing.assert_array_equal(np.asarray(held.alpha), np.ones(K))
    assert np.asarray(d.info["mu"]).shape == (K,)


def test_every_program_compiles_with_the_cache_on_and_small_programs_kept(monkeypatch):
    # the cache is turned on before the agent compiles anything, and every compilation (even one
    # quicker than JAX's 0.02 s threshold) happens inside cache_small_programs, so it is written
    on, inside = [], []
    real_on, real_block = online_mod.enable_persistent_cache, online_mod.cache_small_programs
    monkeypatch.setattr(online_mod, "enable_persistent_cache", lambda: (on.append(1), real_on())[1])

    block = tracking_block(real_block, inside)
    monkeypatch.setattr(online_mod, "cache_small_programs", block)
    compiles = []

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(bool(on) and bool(inside))

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        agent = bf.online(bf.ucb1(w0=0.37), n_arms=5, seed=0)  # a new policy object: its programs compile
        d = agent.select()
        agent.update(d.action, 1.0)
        agent.update_and_select(d.action, 0.0)
        batch = agent.select_batch(3)
        agent.update_batch(batch.action, np.ones(3))
        batch[1]
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert len(compiles) >= 6 and all(compiles), compiles


@pytest.mark.slow  # two fresh processes (~10 s each on a loaded 2-core machine)
def test_a_new_process_writes_then_loads_the_agents_programs(tmp_path):
    # hand-stepping through the agent fills the persistent cache folder, and a second process loads
    # every program from it (no XLA compilation)
    script = textwrap.dedent("""
        import json, jax, bayesfair as bf
        seen = []
        jax.monitoring.register_event_listener(lambda e, **k: seen.append(e.rsplit("/", 1)[-1]))
        agent = bf.online(bf.ucb1(), n_arms=3, seed=0)  # quick to compile: the mechanism is the point
        d = agent.select()
        agent.update(d.action, 1.0)
        agent.update_and_select(d.action, 0.0)
        print(json.dumps([seen.count("cache_misses"), seen.count("cache_hits")]))
    """)
    folder = tmp_path / "cache"
    env = {**os.environ, "BAYESFAIR_COMPILE_CACHE_DIR": str(folder)}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)

    def run():
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    misses, hits = run()
    assert misses >= 4 and hits == 0  # init, select, update, update_and_select
    entries = sorted(p.name for p in folder.iterdir() if p.name.endswith("-cache"))
    assert any(name.startswith("jit_select") for name in entries), entries
    misses, hits = run()
    assert misses == 0 and hits >= 4


def test_online_benchmark_smoke(tmp_path):
    # the benchmark script end to end with tiny arguments (both sides in fresh processes)
    pytest.importorskip("mabwiser")
    bench_dir = os.path.join(os.path.dirname(__file__), os.pardir, "experiments", "benchmarks")
    sys.path.insert(0, os.path.abspath(bench_dir))
    try:
        import online_bench
    finally:
        sys.path.pop(0)
    out = tmp_path / "online.json"
    report = online_bench.main(["--quick", "--sides", "bf-ts", "mab-ts", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(report))
    steady = {r["side"]: r for r in report["summary"]["steady"]}
    assert set(steady) == {"bf-ts", "mab-ts"} and all(r["median_ms"][0] > 0 for r in steady.values())
    assert {(r["side"], r["cache"]) for r in report["summary"]["fresh"]} == {
        ("bf-ts", "cold"), ("bf-ts", "warm"), ("mab-ts", "none")}
    assert all(v.get("median_met") is None and v.get("fresh_met") is None for v in report["summary"]["verdicts"])
