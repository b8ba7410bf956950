"""Compilation reuse (bayesfair.core._compile, simulate's chunk-function cache, the progress ETA)."""

import contextlib
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from _checks import tracking_block

import bayesfair
import bayesfair.simulation.simulator  # noqa: F401
from bayesfair.core import _compile
from bayesfair.simulation.metric_parts import Conventional

sim_mod = sys.modules["bayesfair.simulation.simulator"]
env_base = sys.modules["bayesfair.environments.base"]


def _counting_build(monkeypatch):
    built = []
    real = sim_mod._build_fns

    def build(env, policy, *args, **kwargs):
        built.append(policy.label)
        return real(env, policy, *args, **kwargs)

    monkeypatch.setattr(sim_mod, "_build_fns", build)
    return built


def _regret(ds, name):
    return ds["regret"].sel(policy=name).values


_ENV = bayesfair.bernoulli_arms(np.array([0.2, 0.5, 0.55, 0.8]))  # one object: its functions key by identity


def _sim(pol, runs=4, chunk_size=32, horizon=60, env=_ENV):
    # the conventional metrics only (a new list each call, equal by value): the cheapest program
    # to compile that still depends on pi_t
    return _regret(bayesfair.simulate(3, env, {"p": pol}, horizon, runs, metrics=[Conventional()],
                                      chunk_size=chunk_size), "p")


def test_second_identical_call_reuses_the_chunk_functions(monkeypatch, exp4):
    # Same policy object, equal environment and metric data: nothing is built again and the numbers
    # are the same; a different chunk size is another trace; another run count reuses the jitted
    # function (jit compiles the new shape) and still gives the right numbers.
    sim_mod._FNS.clear()
    built = _counting_build(monkeypatch)
    pol = bayesfair.fairx_ts(bayesfair.beta_bernoulli(), exp4)
    a, b = _sim(pol), _sim(pol)
    assert built == [pol.label]
    np.testing.assert_array_equal(a, b)
    c = _sim(pol, chunk_size=20)
    assert built == [pol.label] * 2  # the chunk size is part of the trace
    np.testing.assert_allclose(a, c, rtol=1e-5)
    d = _sim(pol, runs=2)
    assert len(built) == 2 and d.shape[0] == 2
    _sim(pol, env=bayesfair.bernoulli_arms(np.array([0.2, 0.5, 0.55, 0.8])))
    assert len(built) == 3  # an equal but separately built environment: its functions are other objects


def test_horizons_shorter_than_the_chunk_share_one_trace(monkeypatch, exp4):
    # With chunk_size <= 1024 the compiled chunk keeps its length whatever the horizon (only the
    # first horizon rounds are played), so a second study that differs only in its horizon builds
    # nothing; its numbers are those of a chunk cut to the horizon (chunk_size=horizon, another
    # trace). Longer chunks are cut to the horizon and are traced per horizon, as before.
    sim_mod._FNS.clear()
    built = _counting_build(monkeypatch)
    pol = bayesfair.fairx_ts(bayesfair.beta_bernoulli(), exp4)
    a40, a60 = _sim(pol, horizon=40, chunk_size=64), _sim(pol, horizon=60, chunk_size=64)
    assert built == [pol.label]
    np.testing.assert_array_equal(a40, _sim(pol, horizon=40, chunk_size=40))
    np.testing.assert_array_equal(a60, _sim(pol, horizon=60, chunk_size=60))
    assert len(built) == 3
    assert sim_mod._compiled_chunk(64, 40, record=False) == 64
    assert sim_mod._compiled_chunk(64, 40, record=True) == 40  # the round log's records are chunk-long
    assert sim_mod._compiled_chunk(4096, 40, record=False) == 40
    assert sim_mod._compiled_chunk(4096, 5000, record=False) == 4096


def test_different_policies_never_share_a_compiled_function(monkeypatch, exp4):
    # Policies built by one constructor that differ only in a parameter held in a closure (the merit,
    # the prior) are different traces: each gets its own functions, and its numbers equal those of a
    # call with an empty in-process cache.
    sim_mod._FNS.clear()
    built = _counting_build(monkeypatch)
    pols = {"ts4": bayesfair.fairx_ts(bayesfair.beta_bernoulli(), exp4),
            "ts1": bayesfair.fairx_ts(bayesfair.beta_bernoulli(), bayesfair.core.merit.exponential(1.0)),
            "ts4_prior": bayesfair.fairx_ts(bayesfair.beta_bernoulli(2.0, 5.0), exp4)}
    together = {name: _sim(pol, horizon=40) for name, pol in pols.items()}
    assert len(built) == len(pols)
    for name, pol in pols.items():
        sim_mod._FNS.clear()
        np.testing.assert_array_equal(together[name], _sim(pol, horizon=40))
    assert len({v.tobytes() for v in together.values()}) == len(pols)  # they do differ


def test_trace_key_compares_data_by_value_and_functions_by_identity():
    def f(x):
        return x

    def g(x):
        return x

    keep = []
    k = _compile.trace_key
    assert k((f, {"a": np.arange(3), "b": [1.0, "x"]}), keep) == k((f, {"b": [1.0, "x"], "a": np.arange(3)}), keep)
    assert k((f, {"a": np.arange(3)}), keep) != k((g, {"a": np.arange(3)}), keep)
    assert k(np.arange(3), keep) != k(np.arange(3.0), keep)  # dtype matters
    assert k(np.zeros((2, 3)), keep) != k(np.zeros((3, 2)), keep)  # shape matters
    assert k(1, keep) != k(1.0, keep) and k(True, keep) != k(1, keep)
    assert k(bayesfair.core.merit.exponential(2.0), keep) != k(bayesfair.core.merit.exponential(3.0), keep)
    assert f in keep and g in keep  # identities are held alive by the caller


def test_trace_cache_is_bounded_and_counts_hits():
    cache = _compile.TraceCache(maxsize=2)
    assert cache.get(("a",), lambda: 1) == (1, False)
    assert cache.get(("a",), lambda: 2) == (1, True)
    cache.get(("b",), lambda: 3)
    cache.get(("c",), lambda: 4)  # evicts the least recently used ("a")
    assert len(cache) == 2 and cache.get(("a",), lambda: 5) == (5, False)


def test_progress_eta_leaves_compilation_out(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(sim_mod.time, "perf_counter", lambda: now[0])
    seen = []
    prog = sim_mod._Progress(seen.append, total=1000)
    now[0] += 9.0
    prog.compiled(8.0)  # 8 of the 9 s were compilation
    prog(10, 10, "p")  # 100 run-rounds in 1 s of simulation
    assert seen[-1]["rate"] == pytest.approx(100.0) and seen[-1]["eta"] == pytest.approx(9.0)
    assert seen[-1]["compile_seconds"] == 8.0


def test_persistent_cache_decision(monkeypatch, tmp_path):
    # Opt-out, a user's own JAX cache folder and the default folder, without touching JAX's settings.
    updates = {}
    monkeypatch.setattr(_compile.jax.config, "update", lambda name, value: updates.__setitem__(name, value))
    monkeypatch.setattr(_compile, "_enabled", False)
    monkeypatch.setattr(_compile, "_ours", False)
    monkeypatch.setenv("BAYESFAIR_NO_COMPILE_CACHE", "1")
    monkeypatch.setattr(_compile, "_configured_dir", lambda: None)
    assert _compile.enable_persistent_cache() is None and updates == {}
    monkeypatch.setattr(_compile, "_enabled", False)
    monkeypatch.setenv("BAYESFAIR_NO_COMPILE_CACHE", "0")
    monkeypatch.setattr(_compile, "_configured_dir", lambda: "/users/own")
    assert _compile.enable_persistent_cache() == "/users/own" and updates == {} and not _compile._ours  # left alone
    monkeypatch.setattr(_compile, "_enabled", False)
    monkeypatch.setattr(_compile, "_configured_dir", lambda: None)
    monkeypatch.delenv("BAYESFAIR_COMPILE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    trims = []
    monkeypatch.setattr(_compile, "_start_trim", trims.append)
    assert _compile.enable_persistent_cache() == str(tmp_path / "xdg" / "bayesfair" / "jax")
    assert updates["jax_compilation_cache_dir"] == str(tmp_path / "xdg" / "bayesfair" / "jax")
    assert updates["jax_persistent_cache_min_compile_time_secs"] < 1.0
    # JAX's own size bound stays off (with it, every write lists the folder); bayesfair's trim
    # is started instead, for this folder
    assert updates["jax_compilation_cache_max_size"] == -1
    assert trims == [tmp_path / "xdg" / "bayesfair" / "jax"]
    assert (tmp_path / "xdg" / "bayesfair" / "jax").is_dir() and _compile._ours  # its settings: bayesfair's
    assert _compile.enable_persistent_cache() == str(tmp_path / "xdg" / "bayesfair" / "jax")  # decided once
    assert len(trims) == 1
    monkeypatch.setattr(_compile, "_enabled", False)
    monkeypatch.setenv("BAYESFAIR_COMPILE_CACHE_DIR", str(tmp_path / "own"))
    assert _compile.cache_dir() == tmp_path / "own"
    monkeypatch.setenv("BAYESFAIR_COMPILE_CACHE_DIR", str(tmp_path / "file" / "x"))
    (tmp_path / "file").write_text("not a folder")
    updates.clear()
    assert _compile.enable_persistent_cache() is None and updates == {}  # cannot create it: off, no error


@contextlib.contextmanager
def _backend_compiles(on: list):
    """Record, for every XLA backend compilation inside the block, whether ``on`` was non-empty
    (i.e. whether the spied ``enable_persistent_cache`` had been called) at that moment."""
    import jax

    events: list[bool] = []

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            events.append(bool(on))

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield events
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def test_pre_flight_checks_turn_the_cache_on_before_they_compile(monkeypatch, exp4):
    # A study loader validates a config (the merit-domain check draws every run's means) before
    # any simulate call; those programs must go to the persistent cache too. Before this was
    # checked, the bi-level study's config load compiled ~0.55 s afresh in every process.
    calls: list[str] = []
    monkeypatch.setattr(sim_mod, "enable_persistent_cache", lambda: calls.append("on"))
    monkeypatch.setattr(env_base, "enable_persistent_cache", lambda: calls.append("on"))  # run_means' module
    env = bayesfair.bernoulli_arms(np.array([0.3, 0.6]))  # a new environment: run_means builds its function
    policies = {"ts": bayesfair.thompson(bayesfair.beta_bernoulli())}
    with _backend_compiles(calls) as events:
        sim_mod.run_means(env, 1, 3)
    assert events and all(events), f"{events.count(False)} of {len(events)} compilations before the cache"
    calls.clear()  # check_study turns it on before its first check (policy checks may run eager ops)
    real_fits = sim_mod.check_policy_fits
    monkeypatch.setattr(sim_mod, "check_policy_fits", lambda *a: (calls.append("fits"), real_fits(*a)))
    with _backend_compiles(calls) as events:
        sim_mod.check_study(env, policies, exp4, 1, 4)
    assert calls[0] == "on" and "fits" in calls and all(events)


def test_diagnostics_turn_the_cache_on_before_they_compile(monkeypatch, exp4):
    # A notebook that restarts its kernel and only draws diagnostics never calls simulate or fit,
    # so the diagnostics entry points turn the persistent cache on themselves: measured, a fresh
    # process's first from_posterior call 2.0 s with its programs compiled, 1.2 s loaded.
    from bayesfair import diagnostics
    from bayesfair.posteriors.base import Outcome

    # They run inside cache_small_programs (decorator caches_small_programs), which turns the cache
    # on first and lets it keep their small programs too (measured: a fresh kernel's
    # from_posterior with observations 1.31-1.44 s -> 0.88-0.99 s).
    on: list[str] = []
    real_on = _compile.enable_persistent_cache
    monkeypatch.setattr(_compile, "enable_persistent_cache", lambda: (on.append("on"), real_on())[1])
    inside: list[int] = []
    real_block = _compile.cache_small_programs

    block = tracking_block(real_block, inside)
    monkeypatch.setattr(_compile, "cache_small_programs", block)
    post = bayesfair.beta_bernoulli(a0=1.3, b0=0.9)  # new closures and shapes: the calls must compile
    rng = np.random.default_rng(3)
    arm, reward = rng.integers(0, 7, 23), (rng.random(23) < 0.4).astype(np.float32)
    state = post.init(7)
    for a, r in zip(arm, reward, strict=True):
        state = post.update(state, Outcome(np.float32(r), arm=np.int32(a)))
    for call in (lambda: diagnostics.from_posterior(post, state, merit=exp4, n_draws=36),
                 lambda: diagnostics.from_posterior(post, state, merit=exp4, n_draws=44,
                                                    observations={"arm": arm, "reward": reward})):
        on.clear()
        with _backend_compiles(on) as events, _backend_compiles(inside) as in_block:
            call()
        assert events and all(events), f"{events.count(False)} of {len(events)} compilations before the cache"
        assert all(in_block), f"{in_block.count(False)} of {len(in_block)} compilations outside the block"


@pytest.mark.slow  # three fresh processes (~10 s each on a loaded 2-core machine)
def test_new_process_writes_and_then_reads_the_cache(tmp_path):
    # A fresh process fills the folder; a second one with the same study finds its entries
    # (JAX logs no new write), and BAYESFAIR_NO_COMPILE_CACHE=1 writes nothing.
    script = textwrap.dedent("""
        import json, os, sys
        import bayesfair, numpy as np
        env = bayesfair.bernoulli_arms(np.array([0.2, 0.7]))
        bayesfair.simulate(0, env, {"ts": bayesfair.thompson(bayesfair.beta_bernoulli())}, 8, 2, chunk_size=8)
        from bayesfair.core import _compile
        print(json.dumps(_compile.enable_persistent_cache()))
    """)
    folder = tmp_path / "cache"

    def run(**extra):
        env = {**os.environ, "BAYESFAIR_COMPILE_CACHE_DIR": str(folder), **extra}
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    assert run(BAYESFAIR_NO_COMPILE_CACHE="1") is None and not folder.exists()
    assert run() == str(folder)
    first = sorted(p.name for p in folder.iterdir())
    assert any(name.startswith("jit_chunk_run") for name in first)
    run()
    second = sorted(p.name for p in folder.iterdir())
    chunks = [name for name in first if name.startswith("jit_chunk_run")]
    assert set(first) <= set(second)  # (a computation near the 0.02 s threshold may be added now)
    assert [name for name in second if name.startswith("jit_chunk_run")] == chunks  # same key: loaded, not rebuilt
    # JAX's own size bound is off: it would write a <key>-atime file beside every entry it writes or reads
    assert not [name for name in second if name.endswith("-atime")]


def _entry(folder, key, size, when, sidecar=False):
    path = folder / f"{key}-cache"
    path.write_bytes(b"x" * size)
    os.utime(path, ns=(when, when))
    if sidecar:
        (folder / f"{key}-atime").write_bytes(when.to_bytes(8, "little"))


def test_trim_cache_removes_least_recently_used_entries_first(tmp_path):
    # Entries of 100 bytes, used at times 1..5 (s); the bound 250 keeps the two most recent. An
    # entry written long ago but read recently (access time) counts as recent; sidecars go with
    # their entry, orphaned ones alone; other files and folders are left alone.
    folder = tmp_path / "cache"
    folder.mkdir()
    s = 1_000_000_000
    for i, key in enumerate(["a", "b", "c", "d", "e"], start=1):
        _entry(folder, key, 100, i * s, sidecar=key in ("a", "d"))
    old_but_read = folder / "b-cache"
    os.utime(old_but_read, ns=(9 * s, 2 * s))  # (access, modification)
    (folder / "gone-atime").write_bytes(b"12345678")  # its entry was removed elsewhere
    (folder / "notes.txt").write_text("mine")
    (folder / "sub-cache").mkdir()
    assert _compile.trim_cache(folder, max_bytes=250) == (3, 300)
    assert sorted(p.name for p in folder.iterdir()) == ["b-cache", "e-cache", "notes.txt", "sub-cache"]
    assert _compile.trim_cache(folder, max_bytes=250) == (0, 0)  # already within the bound
    assert _compile.trim_cache(folder, max_bytes=0) == (2, 200)
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt", "sub-cache"]
    with pytest.raises(ValueError, match="max_bytes must be >= 0, got -1"):
        _compile.trim_cache(folder, max_bytes=-1)


def test_trim_cache_runs_in_the_background_at_most_hourly(tmp_path, monkeypatch):
    # _start_trim runs the trim on a daemon thread, the first time in a process only; a process
    # that finds the folder trimmed within the hour (the mark file) skips it; a folder that is gone
    # is no error there; one that cannot be trimmed is a warning, not an error (the cache works
    # without the bound).
    import threading
    import time

    calls, done = [], threading.Event()

    def fake_trim(path):
        calls.append((path, threading.current_thread().daemon))
        done.set()

    monkeypatch.setattr(_compile, "trim_cache", fake_trim)
    monkeypatch.setattr(_compile, "_trim_started", False)
    folder = tmp_path / "cache"
    folder.mkdir()
    _compile._start_trim(folder)
    assert done.wait(30)
    _compile._start_trim(folder)
    assert calls == [(folder, True)]
    mark = folder / _compile._TRIM_MARK
    assert mark.is_file()
    _compile._trim_quietly(folder)  # another process, within the hour
    assert len(calls) == 1
    old = time.time() - 2 * _compile._TRIM_EVERY
    os.utime(mark, (old, old))
    _compile._trim_quietly(folder)  # an hour later
    assert len(calls) == 2 and mark.stat().st_mtime > old
    _compile._trim_quietly(tmp_path / "gone")
    assert len(calls) == 2

    def failing(path):
        raise PermissionError(path)

    monkeypatch.setattr(_compile, "trim_cache", failing)
    os.utime(mark, (old, old))
    with pytest.warns(RuntimeWarning, match="could not trim the compilation cache folder .*PermissionError"):
        _compile._trim_quietly(folder)  # not raised: the cache works without the bound, but said


def test_fair_policies_is_one_program_with_the_op_by_op_numbers():
    # The result's pi* and within-group policy were computed op by op: ~20 one-operation programs,
    # each under the persistent cache's threshold, compiled again in every new process (0.18 s of
    # a fresh R = 100 study's 2.8 s). Now one jitted program per merit; same float64 numbers.
    import jax

    from bayesfair.core.merit import fair_policy, group_fair_policy
    from bayesfair.simulation.metric_parts import fair_policies

    merit = bayesfair.core.merit.exponential(3.7)  # a merit no other test uses: the call must compile
    groups = bayesfair.Groups.from_labels([0, 1, 1, 0, 2])
    means = np.random.default_rng(5).uniform(0.05, 0.95, (6, 5))
    with _backend_compiles([]) as events:
        pi_star, within = fair_policies(merit, means, groups)
    assert len(events) == 1
    with _backend_compiles([]) as events:
        fair_policies(merit, means[::-1] * 0.5, groups)  # other means of the same shape
        assert fair_policies(merit, means, groups)[0].dtype == np.float64
    assert events == []
    with jax.enable_x64(True):
        member = np.eye(3)[[0, 1, 1, 0, 2]]
        np.testing.assert_allclose(pi_star, np.asarray(fair_policy(merit, means)), rtol=1e-13, atol=0)
        for r in range(means.shape[0]):
            np.testing.assert_allclose(within[r], np.asarray(group_fair_policy(merit, means[r], member)),
                                       rtol=1e-13, atol=0)


def test_small_programs_are_cached_only_inside_the_block(monkeypatch, tmp_path):
    # cache_small_programs (NUTS fits) lowers the persistent cache's threshold to 0 inside its
    # block; blocks nest and the last one restores the threshold, also on an error; a user's own
    # cache settings, or the cache turned off, are left alone.
    import jax

    def threshold():
        return jax.config.jax_persistent_cache_min_compile_time_secs

    monkeypatch.setattr(_compile, "_enabled", str(tmp_path))
    monkeypatch.setattr(_compile, "_ours", True)
    before = threshold()
    assert before > 0
    with _compile.cache_small_programs():
        assert threshold() == 0.0
        with _compile.cache_small_programs():
            assert threshold() == 0.0
        assert threshold() == 0.0  # the outer block is still open
    assert threshold() == before
    with pytest.raises(RuntimeError), _compile.cache_small_programs():
        raise RuntimeError("a failed fit")
    assert threshold() == before
    for enabled, ours in ((str(tmp_path), False), (None, False)):
        monkeypatch.setattr(_compile, "_enabled", enabled)
        monkeypatch.setattr(_compile, "_ours", ours)
        with _compile.cache_small_programs():
            assert threshold() == before
