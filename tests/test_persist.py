"""Saved policies continue identically; resumed studies equal uninterrupted ones; writes are atomic."""

import copy
import json

import jax
import numpy as np
import pytest
import xarray as xr
from jax import lax

import bayesfair as bf
from bayesfair.simulation import results as io
from bayesfair.workflow import persist
from bayesfair.workflow.config import parse_config
from bayesfair.workflow.outputs import OutputError
from bayesfair.workflow.persist import IncompatibleFileError, PersistError, StudyInterrupted

K_ROUNDS = 40


def _player(policy, env):
    """Play rounds ts from (state, policy key), as the simulator does: keys fold_in(key, t)."""

    @jax.jit
    def play(state, env_params, env_key, pol_key, ts):
        def step(state, t):
            rnd = env.step(jax.random.fold_in(env_key, t), env_params, t)
            action, probs, _ = policy.select(jax.random.fold_in(pol_key, t), state, rnd.obs)
            return policy.update(state, rnd.obs, action, rnd.reward[action]), (action, probs)

        return lax.scan(step, state, ts)

    return play


@pytest.mark.parametrize("make", [
    lambda m: bf.fairx_ts(bf.beta_bernoulli(), m),
    lambda m: bf.policies.gef_ts([0.3, 0.3], bf.normal_inverse_gamma()),
], ids=["fairx_ts", "gef_ts"])
def test_save_load_round_trip_continues_identically(tmp_path, small_env, exp4, make):
    policy = make(exp4)
    env = small_env
    k_env, k_init, k_pol = jax.random.split(jax.random.key(11), 3)
    params = env.reset(k_env)
    play = _player(policy, env)
    first, second = np.arange(1, K_ROUNDS + 1), np.arange(K_ROUNDS + 1, 2 * K_ROUNDS + 1)

    state0 = policy.init(k_init, env.spec)
    s_full, (a1, p1) = play(state0, params, k_env, k_pol, first)
    s_full, (a2, p2) = play(s_full, params, k_env, k_pol, second)

    s_half, _ = play(state0, params, k_env, k_pol, first)
    path = persist.save_policy(tmp_path / "pol.npz", policy, s_half, env.spec, key=k_pol, step=K_ROUNDS)
    del s_half
    saved = persist.load_policy(path, make(exp4))  # a fresh but identically configured policy
    assert saved.meta["step"] == K_ROUNDS and saved.spec.n_arms == env.spec.n_arms
    np.testing.assert_array_equal(jax.random.key_data(saved.key), jax.random.key_data(k_pol))
    s_cont, (b2, q2) = play(saved.state, params, k_env, saved.key, second)
    np.testing.assert_array_equal(np.asarray(b2), np.asarray(a2))
    np.testing.assert_array_equal(np.asarray(q2), np.asarray(p2))
    for x, y in zip(jax.tree.leaves(s_cont), jax.tree.leaves(s_full), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_batched_state_recipe_rebuild_and_mismatch_errors(tmp_path, small_env, exp4):
    recipe = {"name": "fairx_ts", "posterior": "beta_bernoulli", "merit": {"name": "exponential", "c": 4.0}}
    policy = bf.fairx_ts(bf.beta_bernoulli(), exp4)
    keys = jax.random.split(jax.random.key(0), 3)
    state = jax.vmap(lambda k: policy.init(k, small_env.spec))(keys)
    state = state._replace(alpha=state.alpha + np.arange(12, dtype=np.float32).reshape(3, 4))
    path = persist.save_policy(tmp_path / "runs.npz", policy, state, small_env.spec, key=keys, recipe=recipe)
    saved = persist.load_policy(path)  # rebuilt from the registry recipe
    assert saved.policy.config == policy.config and saved.meta["batch"] == 3
    np.testing.assert_array_equal(np.asarray(saved.state.alpha), np.asarray(state.alpha))
    np.testing.assert_array_equal(jax.random.key_data(saved.key), jax.random.key_data(keys))

    with pytest.raises(PersistError, match="different configuration.*merit"):
        persist.load_policy(path, bf.fairx_ts(bf.beta_bernoulli(), bf.merit.exponential(2.0)))
    with pytest.raises(PersistError, match="no registry recipe"):
        persist.load_policy(persist.save_policy(tmp_path / "p.npz", policy, state, small_env.spec))
    with pytest.raises(PersistError, match="not a state of this policy"):
        persist.save_policy(tmp_path / "bad.npz", policy, {"x": np.zeros(3)}, small_env.spec)


def test_incompatible_version_and_damaged_files(tmp_path, small_env, exp4):
    policy = bf.ucb1()
    state = policy.init(jax.random.key(0), small_env.spec)
    path = persist.save_policy(tmp_path / "ucb.npz", policy, state, small_env.spec)
    meta, arrays = persist.read_npz(path, persist.POLICY_TAG)
    future = tmp_path / "future.npz"
    persist.write_npz(future, arrays, {**meta, "format_version": persist.FORMAT_VERSION + 1, "bayesfair": "9.0"})
    with pytest.raises(IncompatibleFileError) as exc:
        persist.load_policy(future, policy)
    msg = str(exc.value)
    assert f"format version {persist.FORMAT_VERSION + 1}" in msg and "bayesfair 9.0" in msg
    assert f"reads format version {persist.FORMAT_VERSION} only" in msg
    other = tmp_path / "other.npz"
    persist.write_npz(other, arrays, {**meta, "format": persist.RESUME_TAG})
    with pytest.raises(IncompatibleFileError, match="expected a 'bayesfair-policy' file"):
        persist.load_policy(other, policy)
    damaged = tmp_path / "damaged.npz"
    damaged.write_bytes(path.read_bytes()[:100])
    with pytest.raises(PersistError, match="damaged"):
        persist.load_policy(damaged, policy)


STUDY = {
    "name": "tiny", "seed": 5, "runs": 2, "horizon": 80, "chunk_size": 16, "checkpoints": [3, 16, 17, 40, 79],
    "merit": {"name": "exponential", "c": 3.0},
    "environment": {"name": "bernoulli_arms", "means": {"low": 0.2, "high": 0.9}, "n_arms": 4, "groups": [0, 1, 0, 1]},
    "floors": [0.2, 0.2],
    "policies": {"UCB": {"name": "ucb1"}, "EG": {"name": "epsilon_greedy", "epsilon": 0.2}},
    "resume": {"every_chunks": 1},
}


def _same(a, b):
    assert set(a.data_vars) == set(b.data_vars)
    for v in a.data_vars:
        if v != "seconds":
            np.testing.assert_array_equal(a[v].values, b[v].values, err_msg=v)


def test_interrupted_then_resumed_equals_uninterrupted(tmp_path):
    study = parse_config(copy.deepcopy(STUDY))
    full = study.run()
    paths = study.paths(tmp_path)
    # 5 chunks per policy: stop in the middle of the second policy (the first one finished)
    with pytest.raises(StudyInterrupted):
        study.execute(tmp_path, stop_after_chunks=7)
    assert paths["resume"].is_file() and not paths["results"].exists()
    meta, arrays = persist.read_npz(paths["resume"], persist.RESUME_TAG)
    assert meta["policies"]["UCB"]["next_round"] == 81 and meta["policies"]["EG"]["next_round"] == 33
    # a resume file of another configuration is refused
    persist.write_npz(tmp_path / "o" / "tiny.resume.npz", arrays, {**meta, "fingerprint": "another study"})
    with pytest.raises(OutputError, match="belongs to a different study"):
        study.execute(tmp_path / "o", resume=True)
    res = study.execute(tmp_path, resume=True)
    assert res.resumed and not paths["resume"].exists()
    _same(full, io.read_results(paths["results"]))
    assert json.loads(res.dataset.attrs["config"])["fingerprint"] == study.fingerprint()


def test_interrupted_writes_leave_the_previous_file(tmp_path, monkeypatch):
    ds = xr.Dataset({"x": ("a", np.arange(5.0))}, attrs={"config": "{}"})
    target = io.write_results(ds, tmp_path / "r.nc")

    def broken_to_netcdf(self, path, *args, **kwargs):
        with open(path, "wb") as f:
            f.write(b"\x89HDF partial")  # half a file, then the process is interrupted
        raise KeyboardInterrupt

    monkeypatch.setattr(xr.Dataset, "to_netcdf", broken_to_netcdf)
    with pytest.raises(KeyboardInterrupt):
        io.write_results(ds * 2, target)
    monkeypatch.undo()
    np.testing.assert_array_equal(io.read_results(target)["x"].values, np.arange(5.0))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.nc"]  # no temp file left behind

    store_path = tmp_path / "s.resume.npz"
    persist.write_npz(store_path, {"a": np.ones(3)}, {"format": persist.RESUME_TAG, "format_version": 1})
    real_savez = np.savez

    def broken_savez(f, **arrays):
        real_savez(f, **{k: v for k, v in list(arrays.items())[:1]})
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(KeyboardInterrupt):
        persist.write_npz(store_path, {"a": np.zeros(3), "b": np.zeros(2)}, {"format": persist.RESUME_TAG,
                                                                               "format_version": 1})
    monkeypatch.undo()
    _, arrays = persist.read_npz(store_path, persist.RESUME_TAG)
    np.testing.assert_array_equal(arrays["a"], np.ones(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.nc", "s.resume.npz"]
