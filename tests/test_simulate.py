"""Simulator: reproducibility, chunking invariance, common random numbers, results files."""

import json

import numpy as np
import pytest
import xarray as xr

import bayesfair as bf
from bayesfair.simulation import results as io

T, R = 300, 4


def _pols(m):
    return {"fx": bf.fairx_ts(bf.beta_bernoulli(), m), "eg": bf.fairx_eg(m, epsilon=0.1)}


def test_same_seed_same_numbers_and_different_seed_differs(small_env, exp4):
    a = bf.simulate(7, small_env, _pols(exp4), T, R, merit=exp4)
    b = bf.simulate(7, small_env, _pols(exp4), T, R, merit=exp4)
    c = bf.simulate(8, small_env, _pols(exp4), T, R, merit=exp4)
    for v in ("fairness_regret", "reward_regret", "exposure", "pulls", "reward"):
        np.testing.assert_array_equal(a[v].values, b[v].values)
    assert not np.array_equal(a["pulls"].values, c["pulls"].values)
    # runs differ from each other within one simulation
    assert not np.array_equal(a["pulls"].values[:, 0], a["pulls"].values[:, 1])


def test_results_do_not_depend_on_chunking_or_sharding(small_env, exp4):
    import jax

    if jax.local_device_count() < 2:  # conftest imports bayesfair first, so this holds on >= 2 cores
        pytest.skip("one CPU device: the sharded path cannot be compared")
    grid = [1, 5, 17, 64, 65, 200, T]
    a = bf.simulate(3, small_env, _pols(exp4), T, R, merit=exp4, checkpoints=grid, chunk_size=1024)
    b = bf.simulate(3, small_env, _pols(exp4), T, R, merit=exp4, checkpoints=grid, chunk_size=16, devices=1)
    np.testing.assert_array_equal(a["pulls"].values, b["pulls"].values)
    np.testing.assert_allclose(a["fairness_regret"].values, b["fairness_regret"].values, rtol=1e-5)
    np.testing.assert_allclose(a["exposure"].values, b["exposure"].values, rtol=1e-5)


def test_the_next_chunk_is_dispatched_before_the_host_side_of_the_previous_one(small_env, exp4, monkeypatch):
    """simulate keeps one chunk in flight ahead of the host: chunk i + 1 is dispatched before chunk
    i is waited for, read back and saved, so the device does not idle meanwhile; the host side
    still handles the chunks in order, each once, and the numbers are those of one long chunk."""
    import importlib

    sim_mod = importlib.import_module("bayesfair.simulation.simulator")
    events = []
    real_fns, real_wait = sim_mod._chunk_fns, sim_mod.wait_interruptibly

    def chunk_fns(*args, **kwargs):
        init_fn, chunk_fn, specs = real_fns(*args, **kwargs)

        def dispatch(carry, ts, slots, n_active):
            events.append(("dispatch", int(ts[0])))
            return chunk_fn(carry, ts, slots, n_active)

        dispatch.lower = chunk_fn.lower
        return init_fn, dispatch, specs

    monkeypatch.setattr(sim_mod, "_chunk_fns", chunk_fns)
    monkeypatch.setattr(sim_mod, "wait_interruptibly", lambda tree: (events.append(("wait",)), real_wait(tree)))
    done, labels = [], set()
    pols = {"flat TS": bf.thompson(bf.beta_bernoulli())}  # the study's label, not the algorithm's name "TS"
    # chunk 3 (rounds 129-192) records no checkpoint: its buffer is not read back, and its sums
    # (exposure) and running minima (anytime_slack) still reach the next checkpoint
    study = dict(merit=exp4, checkpoints=[10, 64, 100, 200], floors=[0.2, 0.2])
    ds = bf.simulate(5, small_env, pols, 200, 3, chunk_size=64,
                     progress=lambda info: (done.append(info["done"]), labels.add(info["policy"])), **study)
    assert [e[1] for e in events if e[0] == "dispatch"] == [1, 65, 129, 193]
    assert [e[0] for e in events] == ["dispatch", "dispatch", "wait", "dispatch", "wait", "dispatch", "wait", "wait"]
    assert done == [3 * 64, 3 * 128, 3 * 192, 3 * 200]  # the host side: in order, every chunk once
    assert labels == {"flat TS"}  # progress names the policy by its key in the study
    monkeypatch.undo()
    whole = bf.simulate(5, small_env, pols, 200, 3, chunk_size=1024, **study)
    for name in ("pulls", "fairness_regret", "exposure", "anytime_slack"):
        np.testing.assert_allclose(ds[name].values, whole[name].values, rtol=1e-5, err_msg=name)


def test_unrolled_threefry_gives_the_numbers_of_jax_s_own_lowering(small_env, exp4, monkeypatch):
    # simulate compiles its rounds with jax.random's hash unrolled (bayesfair.core._random.unrolled_threefry);
    # the same study compiled with JAX's own (rolled) lowering gives the same numbers, bit for bit:
    # environment draws, Thompson draws (Gamma proposals, categorical) and the bi-level policy's splits.
    import contextlib

    from bayesfair.core import _random

    def study():  # new policy objects: nothing compiled for the first call is reused by the second
        pols = {"FairX-TS": bf.fairx_ts(bf.beta_bernoulli(), exp4),
                "BF-UCB": bf.policies.bilevel.bf_ucb((0.2, 0.3), exp4, steps=2)}
        return bf.simulate(7, small_env, pols, 120, 3, merit=exp4, checkpoints=[1, 60, 120], chunk_size=64)

    unrolled = study()
    monkeypatch.setattr(_random, "unrolled_threefry", contextlib.nullcontext)
    rolled = study()
    for name in ("pulls", "reward", "exposure", "fairness_regret"):
        np.testing.assert_array_equal(unrolled[name].values, rolled[name].values, err_msg=name)


def test_run_means_are_the_simulated_means_and_reuse_their_compiled_function(small_env, exp4):
    # run_means draws exactly the means simulate plays (simulate checks them before every study), and a
    # second call with the same environment reuses the jitted function instead of tracing it again
    import importlib

    sim_mod = importlib.import_module("bayesfair.simulation.simulator")
    envbase = importlib.import_module("bayesfair.environments.base")
    env = bf.bernoulli_arms(bf.environments.UniformMeans(0.1, 0.9, n_arms=4), groups=[0, 0, 1, 1])
    first = sim_mod.run_means(env, 11, 5)
    np.testing.assert_array_equal(sim_mod.run_means(env, 11, 5), first)
    # the cached function (a miss fails here instead of storing anything) was traced once for both calls
    draw, _ = envbase._MEANS_FNS.get(("run_means", env), lambda: pytest.fail("run_means did not keep its function"))
    assert draw._cache_size() == 1
    ds = bf.simulate(11, env, {"u": bf.uniform()}, 10, 5, merit=exp4)
    np.testing.assert_allclose(ds["mean"].values, first, rtol=1e-6)


def test_checkpoint_values_are_cumulative_and_consistent(small_env, exp4):
    ds = bf.simulate(1, small_env, _pols(exp4), T, R, merit=exp4, checkpoints=[1, 10, 100, T])
    t = ds["checkpoint"].values
    np.testing.assert_array_equal(t, [1, 10, 100, T])
    # exactly t pulls and total exposure t by round t
    np.testing.assert_allclose(ds["pulls"].sum("arm").values, np.broadcast_to(t, (2, R, 4)))
    np.testing.assert_allclose(ds["exposure"].sum("arm").values, np.broadcast_to(t, (2, R, 4)), rtol=1e-5)
    np.testing.assert_allclose(ds["group_pulls"].sum("group").values, ds["pulls"].sum("arm").values)
    assert np.all(np.diff(ds["fairness_regret"].values, axis=-1) >= 0)
    assert np.all(ds["fairness_regret"].values <= 2 * t + 1e-6)


def test_common_random_numbers_uniform_policies_pull_identically(small_env, exp4):
    # two copies of the same policy see the same environment and policy draws
    pols = {"a": bf.uniform(), "b": bf.uniform()}
    ds = bf.simulate(5, small_env, pols, 200, 3, merit=exp4)
    np.testing.assert_array_equal(ds["reward"].sel(policy="a").values, ds["reward"].sel(policy="b").values)


def test_means_drawn_per_run(exp4):
    env = bf.bernoulli_arms(bf.environments.UniformMeans([0.1, 0.5, 0.7], [0.2, 0.6, 0.9]))
    ds = bf.simulate(0, env, {"u": bf.uniform()}, 10, 6, merit=exp4)
    mu = ds["mean"].values
    assert mu.shape == (6, 3)
    assert np.all(mu >= [0.1, 0.5, 0.7]) and np.all(mu <= [0.2, 0.6, 0.9])
    assert np.unique(mu[:, 0]).size == 6
    np.testing.assert_allclose(ds["pi_star"].values, np.asarray(bf.merit.fair_policy(exp4, mu)), rtol=1e-5)


def test_results_roundtrip_and_tidy(tmp_path, small_env, exp4):
    ds = bf.simulate(0, small_env, _pols(exp4), 50, 2, merit=exp4, config={"note": "x"})
    path = bf.write_results(ds, tmp_path / "out" / "r.nc")
    back = bf.read_results(path)
    xr.testing.assert_allclose(ds, back)
    cfg = json.loads(back.attrs["config"])
    assert cfg["horizon"] == 50 and cfg["note"] == "x" and "fx" in cfg["policies"]
    assert "jax" in json.loads(back.attrs["versions"])
    df = bf.tidy(ds)
    assert len(df) == 2 * 2 * ds.sizes["checkpoint"]
    assert {"policy", "run", "checkpoint", "fairness_regret", "reward_regret"} <= set(df.columns)
    assert list((tmp_path / "out").iterdir()) == [path]  # no temp file left behind


def test_interrupted_write_keeps_previous_file(tmp_path, small_env, exp4, monkeypatch):
    ds = bf.simulate(0, small_env, _pols(exp4), 20, 2, merit=exp4)
    path = bf.write_results(ds, tmp_path / "r.nc")
    before = path.read_bytes()

    def boom(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(xr.Dataset, "to_netcdf", boom)
    with pytest.raises(KeyboardInterrupt):
        bf.write_results(ds, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["r.nc"]


def test_summary_tables(small_env, exp4):
    ds = bf.simulate(0, small_env, _pols(exp4), 100, 3, merit=exp4)
    table = io.summary_table(ds)
    assert list(table.index) == ["fx", "eg"]
    exp = io.exposure_table(ds)
    np.testing.assert_allclose(exp[["fx", "eg", "pi_star"]].sum().values, 1.0, rtol=1e-5)


@pytest.mark.parametrize("make", [
    lambda: bf.bernoulli_arms([0.0, 0.3, 0.5, 0.999, 1.0]),
    lambda: bf.bernoulli_arms(bf.environments.UniformMeans([0.1] * 6, [0.9] * 6)),
    lambda: bf.gaussian_arms(bf.environments.UniformMeans([-1.0] * 4, [1.0] * 4), sigma=0.7),
])
def test_pull_is_bit_identical_to_the_counterfactual_reward_of_the_pulled_arm(make):
    # The simulator draws only the pulled arm's reward with env.pull; step() reports every arm's.
    # Common random numbers need both to be the same bits for every (run, round, arm).
    import jax
    import jax.numpy as jnp

    env = make()
    k = env.spec.n_arms

    def one(key):
        k_reset, k_round = jax.random.split(key)
        params = env.reset(k_reset)
        t = jnp.int32(17)
        full = env.step(k_round, params, t).reward
        each = jax.vmap(lambda a: env.pull(k_round, params, t, a))(jnp.arange(k))
        return full, each

    full, each = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(11), 500))
    np.testing.assert_array_equal(np.asarray(full), np.asarray(each))
    assert np.unique(np.asarray(full)).size > 1  # not a constant stream


def test_recorded_rounds_give_the_same_results_as_the_pull_path(small_env, exp4):
    # With a round log the simulator indexes step().reward; without, it calls env.pull.
    logged = []
    a = bf.simulate(5, small_env, _pols(exp4), 200, 2, merit=exp4, chunk_size=64)
    b = bf.simulate(5, small_env, _pols(exp4), 200, 2, merit=exp4, chunk_size=64,
                    round_log=lambda name, t0, t1, rec: logged.append(rec))
    assert logged
    for v in ("pulls", "reward"):
        np.testing.assert_array_equal(a[v].values, b[v].values)
    # Same draws and choices; the sums of float terms agree to float32 rounding of a round's term
    # (the two programs compile differently, e.g. FMA contraction of pi_t into the compensated
    # sum, which moves the compensation term by ~1e-9 relative), far below any change of draws.
    for v in ("exposure", "fairness_regret"):
        np.testing.assert_allclose(a[v].values, b[v].values, rtol=1e-6, atol=1e-7)


def test_pull_counts_are_exact_integer_sums_of_the_logged_actions(small_env, exp4):
    """``pulls`` and ``group_pulls`` accumulate as int32 chunk sums with no compensation term
    (metrics.compensated); at every checkpoint they equal the cumulative counts of the actions the
    round log recorded, across chunk boundaries (chunk 64 does not divide the checkpoints)."""
    from bayesfair.simulation.metric_parts import Conventional, SpecContext
    from bayesfair.simulation.metrics import compensated, init_acc

    specs = Conventional().specs(SpecContext(4, 2, {}, {}))
    acc = init_acc(specs)
    for s in specs:
        counts = s.name in ("pulls", "group_pulls")
        assert compensated(s) is not counts and (s.name + "__lo" in acc) is not counts, s.name
        assert acc[s.name].dtype == (np.int32 if counts else np.float32), s.name
    logged = {"fx": [], "eg": []}
    grid = [1, 50, 64, 65, 130, 200]
    ds = bf.simulate(5, small_env, _pols(exp4), 200, 3, merit=exp4, chunk_size=64, checkpoints=grid,
                     round_log=lambda name, t0, t1, rec: logged[name].append((t0, rec["action"][:, :t1 - t0 + 1])))
    groups = np.asarray(small_env.groups.labels)
    for name, chunks in logged.items():
        actions = np.concatenate([np.asarray(a) for _, a in sorted(chunks, key=lambda c: c[0])], axis=1)
        assert actions.shape == (3, 200)
        hits = np.eye(4, dtype=np.int64)[actions]  # [run, round, arm]
        expected = np.cumsum(hits, axis=1)[:, np.asarray(grid) - 1]
        np.testing.assert_array_equal(ds["pulls"].sel(policy=name).values, expected)
        np.testing.assert_array_equal(ds["group_pulls"].sel(policy=name).values,
                                      expected @ np.eye(2, dtype=np.int64)[groups])


def test_long_chunks_keep_sums_exact_to_float32_precision():
    """The float32 chunk accumulators are compensated: uniform play over 7 arms adds the same
    pi_t(a) = float32(1/7) every round, whose plain float32 running sum drifts systematically
    (a sequential float32 sum is off by 3.0 rounds per arm at t = 65,537 and by -15.3 at 2^17; at 65,536-round
    chunks and T = 1e7 the drift reached +-1,700 rounds of exposure per run). Compensated, every
    arm's exposure equals t * float32(1/7) to a few float32 ulps of the total at every
    checkpoint."""
    env = bf.bernoulli_arms([0.5] * 7)
    horizon = 2**17
    grid = [1000, 65_537, horizon]
    ds = bf.simulate(3, env, {"U": bf.uniform()}, horizon, 2, merit=bf.merit.identity(0.01), checkpoints=grid,
                     chunk_size=horizon)
    exposure = ds["exposure"].sel(policy="U").values  # [run, checkpoint, arm]
    t = np.asarray(grid, np.float64)
    expected = t * np.float64(np.float32(1.0 / 7.0))
    assert np.abs(exposure - expected[None, :, None]).max() < 1e-2  # ulp(18725) ~ 2e-3
    np.testing.assert_array_equal(ds["pulls"].sel(policy="U").values.sum(-1), np.broadcast_to(t, (2, 3)))


def test_concurrent_compilation_gives_the_serial_numbers_and_reports_errors(small_env, exp4, monkeypatch):
    # simulate compiles a study's policies in threads (tracing under a lock); the numbers must be those
    # of compiling them one by one, and an error raised while tracing one policy must reach the caller.
    import importlib
    import os

    sim = importlib.import_module("bayesfair.simulation.simulator")
    pols = {**_pols(exp4), "ts": bf.thompson(bf.beta_bernoulli())}
    real, spent = sim._compile_together, []
    monkeypatch.setattr(sim, "_compile_together", lambda *a: spent.append(real(*a)) or spent[-1])
    monkeypatch.setenv("BAYESFAIR_SERIAL_COMPILE", "0")  # the default (conftest turns it off for the suite)
    together = bf.simulate(3, small_env, pols, 200, 4, merit=exp4, chunk_size=64)
    monkeypatch.setenv("BAYESFAIR_SERIAL_COMPILE", "1")
    serial = bf.simulate(3, small_env, pols, 200, 4, merit=exp4, chunk_size=64)
    if (os.cpu_count() or 1) >= 2:
        assert spent[0] > 0 and spent[1] == 0.0  # the thread pool ran in the first call only
    for name in ("fairness_regret", "reward_regret", "pulls"):
        np.testing.assert_array_equal(together[name].values, serial[name].values)
    monkeypatch.setenv("BAYESFAIR_SERIAL_COMPILE", "0")

    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU: simulate compiles the policies one by one, no thread pool to test")
    good = pols["ts"]

    def broken_select(key, state, obs):
        raise RuntimeError("select cannot be traced")

    broken = bf.Policy(good.init, broken_select, good.update, "broken")
    keys = sim.as_key(0)
    import jax

    run_keys = jax.random.split(keys, 4)
    with pytest.raises(RuntimeError, match="select cannot be traced"):
        sim._compile_together(small_env, {"ok": good, "bad": broken}, sim.default_metrics(exp4, None), 4, 64, 1,
                              run_keys, run_keys, False)


def test_a_new_process_imports_xarray_while_the_study_compiles_and_runs():
    """simulate starts xarray's import in a thread before compiling (once per process, only if
    xarray is not imported yet) and joins it before building the Dataset; the results are those
    of a process that imported xarray first."""
    import os
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import json, sys
        import bayesfair, numpy as np
        import importlib
        sim = importlib.import_module("bayesfair.simulation.simulator")
        if sys.argv[1] == "first":
            import xarray
        assert ("xarray" in sys.modules) == (sys.argv[1] == "first")
        env = bayesfair.bernoulli_arms(np.array([0.2, 0.7]))
        ds = bayesfair.simulate(0, env, {"ts": bayesfair.thompson(bayesfair.beta_bernoulli())}, 16, 3, chunk_size=8)
        t = sim._WARM_IMPORTS
        print(json.dumps({"thread": t is not None, "alive": t is not None and t.is_alive(),
                          "regret": ds["regret"].values.tolist()}))
    """)
    outs = {}
    for mode in ("first", "during"):  # the session's compile cache (conftest): the second process loads the first's
        out = subprocess.run([sys.executable, "-c", script, mode], env=dict(os.environ), capture_output=True, text=True,
                             check=True)
        outs[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    assert outs["during"]["thread"] and not outs["during"]["alive"]
    assert not outs["first"]["thread"]  # already imported: no thread
    assert outs["during"]["regret"] == outs["first"]["regret"]


def _state_probe_policy(k):
    """A uniform policy whose state has a constant leaf (shared by the runs), a leaf that starts
    constant but adds up the run's rewards, and a leaf drawn from the run's key; ``info["track"]``
    shows all three."""
    from typing import NamedTuple

    import jax
    import jax.numpy as jnp

    class S(NamedTuple):
        const: jax.Array
        count: jax.Array
        noise: jax.Array

    def init(key, spec):
        return S(jnp.arange(k, dtype=jnp.float32), jnp.zeros((), jnp.float32), jax.random.uniform(key, (2,)))

    def select(key, state, obs):
        probs = jnp.full((k,), 1.0 / k)
        track = {"const": jnp.sum(state.const), "count": state.count, "noise": state.noise[0]}
        return jax.random.randint(key, (), 0, k).astype(jnp.int32), probs, {"track": track}

    def update(state, obs, action, reward):
        return state._replace(count=state.count + reward, noise=state.noise)

    return bf.Policy(init, select, update, "probe", {}, {})


@pytest.mark.parametrize("devices", [1, 2])
def test_run_invariant_policy_state_is_shared_only_when_constant_and_passed_through(small_env, devices):
    # The simulator passes policy-state leaves that init computes from constants and update passes
    # through unbatched (one copy for all runs); a leaf that starts constant but changes, or one
    # drawn from the run's key, stays per run. Checked on the mask and on what select saw.
    from bayesfair.simulation.simulator import _probe

    pol = _state_probe_policy(small_env.spec.n_arms)
    mask = _probe(small_env, pol)[2]
    assert (mask.const, mask.count, mask.noise) == (True, False, False)
    runs, horizon = 6, 700  # two chunks of 512: the shared leaf is taken from each chunk's carry again
    ds = bf.simulate(0, small_env, {"probe": pol}, horizon, runs, chunk_size=512, devices=devices,
                     metrics=[bf.simulation.metric_parts.Tracked(), bf.simulation.metric_parts.Conventional()],
                     checkpoints=[horizon - 1, horizon])
    k = small_env.spec.n_arms
    assert np.all(ds["track_const"].values == k * (k - 1) / 2)
    # select at round T saw the rewards of rounds 1..T-1, each run its own
    seen = ds["track_count"].sel(checkpoint=horizon).values.ravel()
    np.testing.assert_allclose(seen, ds["reward"].sel(checkpoint=horizon - 1).values.ravel(), rtol=0, atol=1e-3)
    assert np.unique(seen).size > 1
    noise = ds["track_noise"].sel(checkpoint=horizon).values.ravel()
    assert np.unique(noise).size == runs  # one draw per run, kept per run
