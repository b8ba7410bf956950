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


def test_batched_state_rebuild_and_mismatch_errors(tmp_path, small_env, exp4):
    policy = bf.fairx_ts(bf.beta_bernoulli(), exp4)
    keys = jax.random.split(jax.random.key(0), 3)
    state = jax.vmap(lambda k: policy.init(k, small_env.spec))(keys)
    state = state._replace(alpha=state.alpha + np.arange(12, dtype=np.float32).reshape(3, 4))
    path = persist.save_policy(tmp_path / "runs.npz", policy, state, small_env.spec, key=keys)
    saved = persist.load_policy(path)  # rebuilt from the saved name and params
    assert (saved.policy.name, saved.policy.label, saved.policy.params) == (policy.name, policy.label, policy.params)
    assert saved.meta["batch"] == 3
    np.testing.assert_array_equal(np.asarray(saved.state.alpha), np.asarray(state.alpha))
    np.testing.assert_array_equal(jax.random.key_data(saved.key), jax.random.key_data(keys))

    with pytest.raises(PersistError, match="different configuration.*params.merit"):
        persist.load_policy(path, bf.fairx_ts(bf.beta_bernoulli(), bf.merit.exponential(2.0)))
    with pytest.raises(PersistError, match=r"differs in: name, label"):
        persist.load_policy(path, bf.thompson(bf.beta_bernoulli()))
    by_hand = bf.Policy(policy.init, policy.select, policy.update, "mine", policy.params)
    with pytest.raises(PersistError, match="assembled by hand"):
        persist.load_policy(persist.save_policy(tmp_path / "p.npz", by_hand, state, small_env.spec))
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

    def broken_write(path, data):  # write_results writes the file's bytes into its temp file
        with open(path, "wb") as f:
            f.write(bytes(data)[:100])  # half a file, then the process is interrupted
        raise KeyboardInterrupt

    def broken_to_netcdf(self, *args, **kwargs):  # interrupted while assembling the file
        raise KeyboardInterrupt

    for where, broken in ((io, {"_write_bytes": broken_write}), (xr.Dataset, {"to_netcdf": broken_to_netcdf})):
        for name, fn in broken.items():
            monkeypatch.setattr(where, name, fn)
        with pytest.raises(KeyboardInterrupt):
            io.write_results(ds * 2, target)
        monkeypatch.undo()
        np.testing.assert_array_equal(io.read_results(target)["x"].values, np.arange(5.0))
        assert sorted(p.name for p in tmp_path.iterdir()) == ["r.nc"]  # no temp file left behind

    store_path = tmp_path / "s.resume.npz"
    header = {"format": persist.RESUME_TAG, "format_version": persist.FORMAT_VERSION}
    persist.write_npz(store_path, {"a": np.ones(3)}, header)
    real_savez = np.savez

    def broken_savez(f, **arrays):
        real_savez(f, **{k: v for k, v in list(arrays.items())[:1]})
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(KeyboardInterrupt):
        persist.write_npz(store_path, {"a": np.zeros(3), "b": np.zeros(2)}, header)
    monkeypatch.undo()
    _, arrays = persist.read_npz(store_path, persist.RESUME_TAG)
    np.testing.assert_array_equal(arrays["a"], np.ones(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.nc", "s.resume.npz"]


# ---------------------------------------------------------------------------------------------
# integrity of resume and saved-policy files: checksum, header fields, states checked at save time


def _rewrite_npz(path, edit):
    """Change a saved .npz in place as a hand edit would: arrays and header changed, the rest (the
    stored checksum included) kept as it was."""
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    edit(arrays)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _edit_header(arrays, change):
    meta = json.loads(str(arrays["__meta__"][()]))
    change(meta)
    arrays["__meta__"] = np.array(json.dumps(meta))


def test_an_edited_resume_file_is_refused_naming_it_and_what_to_do(tmp_path):
    """Reported: a running total +1000 (header intact) resumed with exit 0 and final fairness regret
    1,900.73 instead of 900.73; next_round past the horizon made the fairness regret 0.0."""
    study = parse_config(copy.deepcopy(STUDY))
    with pytest.raises(StudyInterrupted):
        study.execute(tmp_path, stop_after_chunks=7)
    path = study.paths(tmp_path)["resume"]
    good = path.read_bytes()

    def plus_1000(arrays):
        key = next(k for k in arrays if k.endswith("/totals/fairness_regret"))
        arrays[key] = arrays[key] + 1000.0

    def past_the_horizon(arrays):
        _edit_header(arrays, lambda meta: [pm.update(next_round=10_000) for pm in meta["policies"].values()])

    for edit in (plus_1000, past_the_horizon):
        path.write_bytes(good)
        _rewrite_npz(path, edit)
        with pytest.raises(PersistError, match="checksum mismatch") as exc:
            persist.ResumeStore(path, study.fingerprint(), resume=True, study=study.config)
        assert str(path) in str(exc.value) and "restart the study" in str(exc.value)
        with pytest.raises(OutputError, match=r"checksum mismatch.*--restart"):
            study.execute(tmp_path, resume=True)
    path.write_bytes(good)
    _rewrite_npz(path, lambda arrays: arrays.pop(persist.CHECKSUM_KEY))  # as files were written before checksums
    with pytest.raises(PersistError, match="has no checksum"):
        persist.read_npz(path, persist.RESUME_TAG)
    path.write_bytes(good)  # the file as saved still resumes
    assert study.execute(tmp_path, resume=True).resumed


def test_resume_header_fields_and_progress_are_checked(tmp_path):
    study = parse_config(copy.deepcopy(STUDY))
    with pytest.raises(StudyInterrupted):
        study.execute(tmp_path, stop_after_chunks=2)
    path = study.paths(tmp_path)["resume"]
    meta, arrays = persist.read_npz(path, persist.RESUME_TAG)
    # written with a valid checksum, but without a field / with a round outside the study
    persist.write_npz(path, arrays, {k: v for k, v in meta.items() if k != "policies"})
    with pytest.raises(PersistError, match="resume header has no field 'policies'") as exc:
        persist.ResumeStore(path, study.fingerprint(), resume=True, study=study.config)
    assert str(path) in str(exc.value)
    pm = {**meta["policies"]["UCB"]}
    del pm["next_round"]
    persist.write_npz(path, arrays, {**meta, "policies": {**meta["policies"], "UCB": pm}})
    with pytest.raises(PersistError, match="policy 'UCB' has no field 'next_round'"):
        persist.describe_resume(path)
    far = {**meta["policies"]["UCB"], "next_round": STUDY["horizon"] + 2}
    persist.write_npz(path, arrays, {**meta, "policies": {**meta["policies"], "UCB": far}})
    store = persist.ResumeStore(path, study.fingerprint(), resume=True, study=study.config)
    with pytest.raises(PersistError, match=r"UCB has next round 82 .*outside the study \(horizon 80"):
        study.run(checkpointer=store)


def test_an_edited_saved_policy_is_refused(tmp_path, small_env, exp4):
    """Reported: a saved state value set to -5 loaded silently, and pi_t was then NaN."""
    policy = bf.fairx_ts(bf.beta_bernoulli(), exp4)
    state = policy.init(jax.random.key(0), small_env.spec)
    path = persist.save_policy(tmp_path / "pol.npz", policy, state, small_env.spec, key=jax.random.key(1))
    meta, _ = persist.read_npz(path, persist.POLICY_TAG)
    alpha = next(i for i, leaf in enumerate(meta["state_leaves"]) if leaf["path"] == ".alpha")

    def minus_5(arrays):
        arrays[f"state/{alpha}"] = np.array(arrays[f"state/{alpha}"])
        arrays[f"state/{alpha}"][0] = -5.0

    _rewrite_npz(path, minus_5)
    with pytest.raises(PersistError, match="checksum mismatch") as exc:
        persist.load_policy(path, policy)
    assert str(path) in str(exc.value) and "save the policy again" in str(exc.value)
    assert float(persist.load_policy(path, policy, verify=False).state.alpha[0]) == -5.0  # the explicit opt-out


def test_a_saved_policy_header_without_a_field_names_the_file_and_field(tmp_path, small_env, exp4):
    """Reported: a header missing a field failed with KeyError: 'state_leaves'."""
    policy = bf.fairx_ts(bf.beta_bernoulli(), exp4)
    path = persist.save_policy(tmp_path / "pol.npz", policy, policy.init(jax.random.key(0), small_env.spec),
                               small_env.spec)
    meta, arrays = persist.read_npz(path, persist.POLICY_TAG)
    for field in ("state_leaves", "spec", "policy", "batch"):
        broken = tmp_path / f"no_{field}.npz"
        persist.write_npz(broken, arrays, {k: v for k, v in meta.items() if k != field})  # a valid checksum
        with pytest.raises(PersistError, match=f"saved-policy header has no field '{field}'") as exc:
            persist.load_policy(broken, policy)
        assert str(broken) in str(exc.value)
    spec = {k: v for k, v in meta["spec"].items() if k != "n_arms"}
    persist.write_npz(tmp_path / "nospec.npz", arrays, {**meta, "spec": spec})
    with pytest.raises(PersistError, match="spec has no field 'n_arms'"):
        persist.load_policy(tmp_path / "nospec.npz", policy)
    leaves = [{k: v for k, v in leaf.items() if k != "shape"} for leaf in meta["state_leaves"]]
    persist.write_npz(tmp_path / "noshape.npz", arrays, {**meta, "state_leaves": leaves})
    with pytest.raises(PersistError, match="header entry of array 0 has no field 'shape'"):
        persist.load_policy(tmp_path / "noshape.npz", policy)


def test_save_policy_refuses_what_load_policy_could_not_restore(tmp_path, small_env, exp4):
    """Reported: ucb1 saved with a FairX-TS state, or with a raw uint32 key, and load_policy failed."""
    ucb, ts = bf.ucb1(), bf.fairx_ts(bf.beta_bernoulli(), exp4)
    ts_state = ts.init(jax.random.key(0), small_env.spec)
    ucb_state = ucb.init(jax.random.key(0), small_env.spec)
    target = tmp_path / "p.npz"
    with pytest.raises(PersistError, match="tree structure .*BetaState.* but UCB.init makes .*CountState.*not a "
                                           "state of this policy"):
        persist.save_policy(target, ucb, ts_state, small_env.spec)
    as_int = jax.tree.map(lambda x: np.asarray(x).astype(np.int32), ucb_state)
    with pytest.raises(PersistError, match=r"state\.\w+ has dtype int32 but UCB.init makes float32"):
        persist.save_policy(target, ucb, as_int, small_env.spec)
    with pytest.raises(TypeError, match=r"typed PRNG key.*jax.random.PRNGKey.*wrap_key_data"):
        persist.save_policy(target, ucb, ucb_state, small_env.spec, key=jax.random.PRNGKey(0))
    assert not target.exists()
    # what it accepts, it loads
    persist.save_policy(target, ucb, ucb_state, small_env.spec, key=jax.random.key(3))
    assert persist.load_policy(target, ucb).policy is ucb
