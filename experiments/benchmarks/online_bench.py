"""bayesfair's online agent against mabwiser, one decision per call, K = 10 Bernoulli arms.

Measured side by side in one run, each measurement in its own fresh Python process (started one
after another, the sides interleaved in every repetition):

- **Steady state**: the latency of one select + update (bayesfair: ``agent.select()`` then
  ``agent.update(action, reward)``, or the fused ``agent.update_and_select(action, reward)``;
  mabwiser: ``predict()`` then ``partial_fit([action], [reward])``) over ``--calls`` calls after
  ``--warmup`` untimed ones, with the persistent compilation cache warm. Median and p99 per
  process; the table gives the median over ``--repeats`` processes and the range. bayesfair runs
  with JAX's default asynchronous CPU dispatch and with it off
  (``jax.config.update("jax_cpu_enable_async_dispatch", False)`` before the first JAX operation).
  ``jax-floor`` is two trivial jitted calls per round (an argmax, then one scatter-add into a
  ``[K]`` array) with the same host conversions: what JAX's dispatch costs on this machine
  whatever the policy computes.
- **Fresh process**: seconds from spawning the interpreter to the first decision (imports,
  building the agent, tracing, compiling or loading the programs, one select), with an empty
  persistent cache (``cold``) and with the cache that process left (``warm``); mabwiser's
  import, fit and first ``predict`` for comparison.

Rewards: arm means drawn from U[0.1, 0.9] with ``--seed``, one uniform number per call decides
the Bernoulli reward of whichever arm was chosen (the same numbers on every side). mabwiser
predicts only after a ``fit``, so each mabwiser process starts with one reward per arm.
bayesfair's policies: Thompson sampling and FairX-TS (merit exp(4 mu)) with Beta-Bernoulli
posteriors, FairX-UCB (merit exp(4 mu), w0 of Theorem 3.2.1 for T = 1e5); mabwiser's
ThompsonSampling (Beta(1, 1) priors) and UCB1 (alpha 1). Targets: bayesfair's select + update
median at most mabwiser's (TS and FairX-TS against ThompsonSampling, FairX-UCB against UCB1),
its p99 under 1 ms, and the first decision of a fresh process with a warm cache under 1 s.

Usage: ``python experiments/benchmarks/online_bench.py [--calls 2000] [--warmup 300]
[--repeats 3] [--fresh-repeats 3] [--sides ...] [--quick] [--out FILE]``; writes JSON
(atomically, default ``results/benchmarks/online_bench.json``) and prints the tables. Needs
mabwiser (``pip install 'bayesfair[bench]'``); without it only bayesfair's sides run.
"""

from __future__ import annotations

import time

_T_START = time.time()  # first line a child runs: the interpreter has started

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
SIDES = {
    "bf-ts": "bayesfair Thompson sampling (Beta-Bernoulli)",
    "bf-fairx-ts": "bayesfair FairX-TS (Beta-Bernoulli, exp(4 mu))",
    "bf-fairx-ucb": "bayesfair FairX-UCB (exp(4 mu))",
    "mab-ts": "mabwiser ThompsonSampling",
    "mab-ucb1": "mabwiser UCB1 (alpha 1)",
    "jax-floor": "two trivial jitted calls (JAX's dispatch floor)",
}
#: each bayesfair side against the mabwiser side it is compared with
PAIRS = {"bf-ts": "mab-ts", "bf-fairx-ts": "mab-ts", "bf-fairx-ucb": "mab-ucb1"}
MODES = ("select+update", "fused")
P99_TARGET_MS, FIRST_TARGET_S = 1.0, 1.0


# ---------------------------------------------------------------------------------------------
# the child: one side in a fresh process


def _bayesfair_policy(side):
    import bayesfair as bf

    exp4 = bf.merit.exponential(4.0)
    if side == "bf-ts":
        return bf.thompson(bf.beta_bernoulli())
    if side == "bf-fairx-ts":
        return bf.fairx_ts(bf.beta_bernoulli(), exp4)
    return bf.fairx_ucb(exp4, horizon=100_000)


def _child(cfg):
    """Run one side; print a JSON line with the stamps (time.time()) and the latencies (seconds)."""
    stamps = {"start": _T_START}
    side, k, seed = cfg["side"], cfg["arms"], cfg["seed"]
    import numpy as np

    rng = np.random.default_rng(seed)
    means = rng.uniform(0.1, 0.9, k)
    u = rng.random(cfg["warmup"] + cfg["calls"] + k)
    reward = lambda i, a: float(u[i] < means[a])  # noqa: E731
    if side.startswith("mab"):
        from mabwiser.mab import MAB, LearningPolicy

        stamps["import"] = time.time()
        lp = LearningPolicy.ThompsonSampling() if side == "mab-ts" else LearningPolicy.UCB1(alpha=1.0)
        mab = MAB(list(range(k)), lp, seed=seed)
        first = cfg["warmup"] + cfg["calls"]
        mab.fit(decisions=list(range(k)), rewards=[reward(first + a, a) for a in range(k)])
        stamps["agent"] = time.time()
        mab.predict()
        stamps["first"] = time.time()

        def call(i):
            a = mab.predict()
            mab.partial_fit([a], [reward(i, a)])
    else:
        import bayesfair as bf  # before the first JAX operation (one CPU device per core)

        if cfg["sync"]:
            import jax

            jax.config.update("jax_cpu_enable_async_dispatch", False)
        stamps["import"] = time.time()
        if side == "jax-floor":
            call = _floor(k, reward)
            stamps["agent"] = time.time()
            call(0)
        else:
            agent = bf.online(_bayesfair_policy(side), n_arms=k, seed=seed)
            stamps["agent"] = time.time()
            last = [agent.select()]
            if cfg["mode"] == "fused":
                def call(i):
                    a = last[0].action
                    last[0] = agent.update_and_select(a, reward(i, a))
            else:
                def call(i):
                    a = agent.select().action
                    agent.update(a, reward(i, a))
        stamps["first"] = time.time()
    stamps["cpu_first"] = time.process_time()  # CPU seconds of the process (all threads) so far
    for i in range(cfg["warmup"]):
        call(i)
    lat = []
    clock = time.perf_counter
    cpu0 = time.process_time()
    for i in range(cfg["warmup"], cfg["warmup"] + cfg["calls"]):
        t0 = clock()
        call(i)
        lat.append(clock() - t0)
    cpu = (time.process_time() - cpu0) / max(cfg["calls"], 1)
    print(json.dumps({"stamps": stamps, "lat": lat, "cpu_per_call": cpu}), flush=True)


def _floor(k, reward):
    """Two trivial jitted programs per round with the agent's host conversions."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    choose = jax.jit(lambda s, t: (jnp.argmax(s + t), s / jnp.sum(s)))
    learn = jax.jit(lambda s, a, r: s.at[a].add(r), donate_argnums=0)
    state = [jnp.ones((k,), jnp.float32)]

    def call(i):
        a, p = choose(state[0], np.int32(i))
        a = int(a)
        np.asarray(p)
        state[0] = learn(state[0], np.int32(a), np.float32(reward(i, a)))

    return call


# ---------------------------------------------------------------------------------------------
# the parent


def _run_child(cfg, cache):
    env = {**os.environ, "BAYESFAIR_COMPILE_CACHE_DIR": str(cache)}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    spawn = time.time()
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(cfg)], env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"online_bench child {cfg} failed:\n{out.stderr[-3000:]}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    s = data["stamps"]
    lat_ms = [x * 1e3 for x in data["lat"]]
    row = {"interpreter_s": s["start"] - spawn, "import_s": s["import"] - s["start"],
           "build_s": s["agent"] - s["import"], "first_call_s": s["first"] - s["agent"],
           "first_decision_s": s["first"] - spawn, "first_decision_cpu_s": s["cpu_first"]}
    if lat_ms:
        q = statistics.quantiles(lat_ms, n=100, method="inclusive")
        row.update(median_ms=statistics.median(lat_ms), p90_ms=q[89], p99_ms=q[98], max_ms=max(lat_ms),
                   mean_ms=statistics.fmean(lat_ms), cpu_ms=data["cpu_per_call"] * 1e3)
    return row


def _spread(values):
    """``(median, min, max)`` of a list (None for an empty one)."""
    return (statistics.median(values), min(values), max(values)) if values else None


def _steady_configs(sides, quick=False):
    """``(side, mode, sync)`` of every steady-state row (with ``quick``, one per side)."""
    out = []
    for side in sides:
        if quick:
            out.append((side, "select+update", False))
        elif side.startswith("bf"):
            out += [(side, mode, sync) for mode in MODES for sync in (False, True)]
        elif side == "jax-floor":
            out += [(side, "select+update", sync) for sync in (False, True)]
        else:
            out.append((side, "select+update", False))
    return out


def measure(args):
    """Every steady-state and fresh-process measurement; a dict of result lists."""
    steady, fresh = [], []
    root = Path(tempfile.mkdtemp(prefix="online-bench-"))
    try:
        warm_cache = root / "warm"
        base = {"arms": args.arms, "seed": args.seed, "warmup": args.warmup, "calls": args.calls}
        for rep in range(args.repeats):
            for side, mode, sync in _steady_configs(args.sides, args.quick):
                row = _run_child({**base, "side": side, "mode": mode, "sync": sync}, warm_cache)
                steady.append({"side": side, "mode": mode, "sync": sync, "repeat": rep, **row})
                print(f"  steady {rep} {side:13s} {mode:13s} {'sync ' if sync else 'async'} "
                      f"median {row['median_ms']:.3f} ms  p99 {row['p99_ms']:.3f} ms", flush=True)
        first = {**base, "warmup": 0, "calls": 0, "mode": "select+update", "sync": False}
        for rep in range(args.fresh_repeats):
            for side in args.sides:
                if side == "jax-floor":
                    continue
                caches = ("cold", "warm") if side.startswith("bf") else ("none",)
                cache = root / f"fresh-{rep}-{side}"
                for kind in caches:
                    row = _run_child({**first, "side": side}, cache)
                    fresh.append({"side": side, "cache": kind, "repeat": rep, **row})
                    print(f"  fresh {rep} {side:13s} {kind:5s} first decision {row['first_decision_s']:.2f} s "
                          f"(import {row['import_s']:.2f} s)", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"steady": steady, "fresh": fresh}


def summarize(results, sides, quick):
    """Per-configuration medians and ranges over the repetitions, and the verdicts."""
    steady = []
    for side, mode, sync in _steady_configs(sides, quick):
        rows = [r for r in results["steady"] if (r["side"], r["mode"], r["sync"]) == (side, mode, sync)]
        steady.append({"side": side, "mode": mode, "sync": sync,
                       **{f: _spread([r[f] for r in rows]) for f in ("median_ms", "p99_ms", "cpu_ms")}})
    fresh = []
    for side in sides:
        for kind in ("cold", "warm", "none"):
            rows = [r for r in results["fresh"] if (r["side"], r["cache"]) == (side, kind)]
            if rows:
                fresh.append({"side": side, "cache": kind,
                              **{f: _spread([r[f] for r in rows]) for f in
                                 ("first_decision_s", "first_decision_cpu_s", "interpreter_s", "import_s", "build_s",
                                  "first_call_s")}})
    verdicts = []
    by = {(s["side"], s["mode"], s["sync"]): s for s in steady}
    for side, other in PAIRS.items():
        if side not in sides or other not in sides:
            continue
        theirs = by[(other, "select+update", False)]["median_ms"][0]
        for mode in MODES:
            for sync in (False, True):
                mine = by.get((side, mode, sync))
                if mine is None:  # not run (--quick)
                    continue
                verdicts.append({
                    "side": side, "mode": mode, "sync": sync, "against": other,
                    "median_ratio": mine["median_ms"][0] / theirs,
                    "median_met": None if quick else mine["median_ms"][0] <= theirs,
                    "p99_met": None if quick else mine["p99_ms"][0] < P99_TARGET_MS})
    for row in fresh:
        if row["cache"] == "warm":
            verdicts.append({"side": row["side"], "fresh_warm_s": row["first_decision_s"][0],
                             "fresh_met": None if quick else row["first_decision_s"][0] < FIRST_TARGET_S})
    return {"steady": steady, "fresh": fresh, "verdicts": verdicts}


def _fmt(spread, spec):
    if spread is None:
        return "n/a"
    mid, lo, hi = spread
    return f"{mid:{spec}} ({lo:{spec}}-{hi:{spec}})"


def print_report(report):
    m = report["machine"]
    print(f"\nonline bench: K = {report['settings']['arms']}, {report['settings']['calls']} calls after "
          f"{report['settings']['warmup']} warm-up, {report['settings']['repeats']} processes per row; "
          f"{m['cpu_count']} CPUs, load average {m['loadavg_at_start']} -> {m.get('loadavg_at_end')}")
    print("\nselect + update, ms per call: median over processes (range) of each process's median and p99 (wall "
          "clock), and the process's CPU time per call (all threads)")
    print(f"{'side':14s} {'mode':14s} {'dispatch':8s} {'median ms':>22s} {'p99 ms':>22s} {'CPU ms':>22s}")
    for row in report["summary"]["steady"]:
        print(f"{row['side']:14s} {row['mode']:14s} {'sync' if row['sync'] else 'async':8s} "
              f"{_fmt(row['median_ms'], '.3f'):>22s} {_fmt(row['p99_ms'], '.3f'):>22s} "
              f"{_fmt(row['cpu_ms'], '.3f'):>22s}")
    print("\nfresh process, seconds from spawn to the first decision (wall clock; CPU: the process's CPU seconds "
          "by then, all threads): median (range)")
    print(f"{'side':14s} {'cache':6s} {'first decision':>20s} {'CPU':>20s} {'import':>20s} {'build':>20s} "
          f"{'first call':>20s}")
    for row in report["summary"]["fresh"]:
        print(f"{row['side']:14s} {row['cache']:6s} {_fmt(row['first_decision_s'], '.2f'):>20s} "
              f"{_fmt(row['first_decision_cpu_s'], '.2f'):>20s} "
              f"{_fmt(row['import_s'], '.2f'):>20s} {_fmt(row['build_s'], '.2f'):>20s} "
              f"{_fmt(row['first_call_s'], '.2f'):>20s}")
    print("\ntargets:")
    for v in report["summary"]["verdicts"]:
        if "median_ratio" in v:
            print(f"  {v['side']:13s} {v['mode']:13s} {'sync ' if v['sync'] else 'async'} median / {v['against']} "
                  f"{v['median_ratio']:.2f} (<= 1: {v['median_met']}), p99 < {P99_TARGET_MS:g} ms: {v['p99_met']}")
        else:
            print(f"  {v['side']:13s} fresh process, warm cache: {v['fresh_warm_s']:.2f} s "
                  f"(< {FIRST_TARGET_S:g} s: {v['fresh_met']})")
    for note in report.get("notes", []):
        print(note)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    p.add_argument("--arms", type=int, default=10, help="arms K (default 10)")
    p.add_argument("--calls", type=int, default=2000, help="timed calls per process (default 2000)")
    p.add_argument("--warmup", type=int, default=300, help="untimed calls first (default 300)")
    p.add_argument("--repeats", type=int, default=3, help="steady-state processes per row (default 3)")
    p.add_argument("--fresh-repeats", type=int, default=3, help="fresh-process measurements per row (default 3)")
    p.add_argument("--sides", nargs="+", choices=sorted(SIDES), default=list(SIDES), help="sides to run (default all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the arm means, rewards and policies (default 0)")
    p.add_argument("--quick", action="store_true", help="smoke run: 50 calls, 10 warm-up, one process per row, "
                                                        "select + update with asynchronous dispatch only; no verdict")
    out = Path("results/benchmarks/online_bench.json")
    p.add_argument("--out", type=Path, default=out, help=f"JSON output, written atomically (default {out})")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return _child(json.loads(args.child))
    if args.quick:
        args.calls, args.warmup, args.repeats, args.fresh_repeats = 50, 10, 1, 1
    for name in ("arms", "calls", "repeats", "fresh_repeats"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.warmup < 0 or args.seed < 0:
        p.error("--warmup and --seed must be >= 0")
    notes = []
    if importlib.util.find_spec("mabwiser") is None:
        missing = [s for s in args.sides if s.startswith("mab")]
        args.sides = [s for s in args.sides if not s.startswith("mab")]
        if missing:
            notes.append(f"mabwiser is not installed (pip install 'bayesfair[bench]'): {', '.join(missing)} not run")
    sys.path.insert(0, str(HERE))
    import harness  # imports bayesfair: only the parent does

    report = harness.new_report("online", argv, args)
    report["settings"].pop("child", None)
    if importlib.util.find_spec("mabwiser") is not None:
        from importlib.metadata import version

        report["machine"]["mabwiser_version"] = version("mabwiser")
    report["results"] = measure(args)
    report["summary"] = summarize(report["results"], args.sides, args.quick)
    if args.quick:
        notes.append(harness.QUICK_NOTE)
    report["notes"] = notes
    return harness.finish(report, args.out, print_report)


if __name__ == "__main__":
    main()
