"""Throughput of Fair-Greedy in JAX (a plain scan and the bayesfair simulator) vs NumPy vectorized over runs.

Setting: the Section 6 problem of group_meritocratic_fairness_linear_cb_neurips2022
(:func:`bayesfair.environments.group_meritocratic.gmf_synthetic`: K = 4 candidates, d = 17),
Fair-Greedy (Algorithm 1) with lambda = 0.1 and rho = 0.1, R = 10 runs, T in {1e4, 1e5}. The
unit is run-rounds per second (R * T / wall seconds).

Cost per round. Round t compares the estimated rewards of the K candidates with those of the
contexts of rounds t~+1..t-1 (about t / 2 rounds, K d floats each), so a round costs O(t K d) and
T rounds O(T^2 K d / 4): once this term dominates, the rate in run-rounds/s halves when T doubles,
and both implementations are bound by reading the stored contexts (4 K d = 272 bytes per past
round and run). The script fits seconds-per-round = a + b t to the simulator's chunk timings.

- NumPy: one Python loop over rounds; contexts ``[R, T, K, d]`` float32 (the same storage as the
  JAX buffer), the empirical CDF as one stacked ``matmul`` of the window with mu~ (BLAS gemv per
  run) and one comparison; the lagging ridge as float64 ``V``, ``X'r`` and a batched solve. The
  same environment (contexts, rewards, the fair and standard pseudo-regret) is drawn in NumPy.
  Single-threaded (the gemv calls are too small for BLAS to thread).
- JAX *scan*: the environment and the policy in one plain ``lax.scan`` over rounds, vmapped over
  runs and sharded over every CPU device (2 here), compilation timed separately and excluded;
  only the fair pseudo-regret is accumulated. This is the policy's own throughput, and the rate
  the target refers to.
- JAX *simulator*: ``bayesfair.simulate`` (all of its metrics), end-to-end (compilation
  included) and per chunk (between the first and the last chunk, from the progress callback),
  after an untimed warm-up call. The simulator's round loop is a ``fori_loop`` over the active
  rounds, so the history buffer is updated in place (gating each round with ``lax.cond`` would
  make XLA copy the whole buffer in and out of the branch, O(capacity) per round). It is
  timed up to ``--simulator-max-horizon`` (default 20,000), to keep the default run short (its
  end-to-end call includes a warm-up call of the same length).

So the ratios compare 2 cores (JAX) with 1 (NumPy). The target is a scan/NumPy ratio >= 3 at every
T; ``--quick`` (T = 1000, 2000, one repeat) gives no verdict. The final fair pseudo-regret / T of
the implementations should agree within sampling error (printed, not asserted).

Usage: ``python experiments/benchmarks/fair_greedy_bench.py [--horizons T ...] [--runs R] [--quick]
[--out FILE]``. See experiments/benchmarks/README.md for measured numbers.
"""

import sys
import time

import bayesfair  # one CPU device per core: must come before the first JAX operation (importing jax first is fine)

# isort: split
import harness  # this folder's shared scaffolding (first on sys.path when run as a script)
import numpy as np

from bayesfair.environments import group_meritocratic as gm
from bayesfair.policies import group_meritocratic as gp

LAM, RHO, NOISE_SD, BIAS_STEP = 0.1, 0.1, 2.0, 3.0
TARGET_RATIO = 3.0


def _cdf_tables(weights, offsets, n_grid=2 ** 14):
    """Per group: the grid and the closed-form CDF on it (numpy, for ``np.interp``)."""
    grids, values = [], []
    for w, off in zip(weights, offsets, strict=True):
        lo, hi = off + np.minimum(w, 0).sum(), off + np.maximum(w, 0).sum()
        x = np.linspace(lo, hi, n_grid + 1)
        grids.append(x)
        values.append(gm.uniform_sum_cdf(x, w, off))
    return grids, values


def numpy_fair_greedy(runs, horizon, seed):
    """Fair-Greedy (Algorithm 1) on the Section 6 problem in NumPy, vectorized over runs.

    Parameters
    ----------
    runs, horizon : int
        R independent runs of T rounds.
    seed : int
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    dict of str to numpy.ndarray
        Final ``fair_regret``, ``regret`` (``[R]``) and ``exposure`` (``[R, K]``).
    """
    rng = np.random.default_rng(seed)
    weights = np.asarray(gm.PAPER_GROUP_WEIGHTS)
    k, m = weights.shape
    d = k * m + 1
    offsets = BIAS_STEP * (np.arange(k) + 1.0)
    theta = np.concatenate([weights.ravel(), [1.0]])
    grids, values = _cdf_tables(weights, offsets)
    rows = np.arange(runs)
    ctx = np.zeros((runs, horizon, k, d), np.float32)
    actions = np.zeros((runs, horizon), np.int64)
    rewards = np.zeros((runs, horizon))
    v = np.broadcast_to(LAM * np.eye(d), (runs, d, d)).copy()
    xr = np.zeros((runs, d))
    fair_regret, regret, exposure = np.zeros(runs), np.zeros(runs), np.zeros((runs, k))
    for t in range(1, horizon + 1):
        # environment: X_a = B_a Y_a + c_a, reward = theta . x + 2 xi
        x = np.zeros((runs, k, d), np.float32)
        y = rng.random((runs, k, m))
        for a in range(k):
            x[:, a, a * m:(a + 1) * m] = y[:, a]
        x[:, :, -1] = offsets
        mean = x.astype(np.float64) @ theta
        reward = mean + NOISE_SD * rng.standard_normal((runs, k))
        fair = np.stack([np.interp(mean[:, a], grids[a], values[a]) for a in range(k)], axis=1)
        # Fair-Greedy: lines 4-7
        tt = (t - 1) // 2
        if tt > 0:
            mu = np.linalg.solve(v, xr[:, :, None])[:, :, 0] + RHO / np.sqrt(d * tt) * rng.standard_normal((runs, d))
        else:
            mu = np.zeros((runs, d))
        mu32 = mu.astype(np.float32)
        now = np.matmul(x, mu32[:, :, None])[:, :, 0]  # [R, K]
        n = t - 1 - tt
        if n > 0:
            window = ctx[:, tt:t - 1].reshape(runs, n * k, d)
            past = np.matmul(window, mu32[:, :, None]).reshape(runs, n, k)
            rank = (past <= now[:, None, :]).sum(axis=1) / n
        else:
            rank = np.zeros((runs, k))
        best = rank == rank.max(axis=1, keepdims=True)
        probs = best / best.sum(axis=1, keepdims=True)
        cdf = np.cumsum(probs, axis=1)
        u = rng.random(runs) * cdf[:, -1]
        action = np.minimum((cdf <= u[:, None]).sum(axis=1), k - 1)
        # metrics
        fair_regret += fair.max(axis=1) - (probs * fair).sum(axis=1)
        regret += mean.max(axis=1) - (probs * mean).sum(axis=1)
        exposure += probs
        # update: store the round; on even t the ridge absorbs round t / 2
        ctx[:, t - 1] = x
        actions[:, t - 1] = action
        rewards[:, t - 1] = reward[rows, action]
        if t % 2 == 0:
            j = t // 2 - 1
            xj = ctx[rows, j, actions[:, j]].astype(np.float64)
            v += xj[:, :, None] * xj[:, None, :]
            xr += xj * rewards[:, j, None]
    return {"fair_regret": fair_regret, "regret": regret, "exposure": exposure}


def study_objects(horizon, block):
    """The environment, Fair-Greedy (its schedule depends on T) and the merit, as :func:`run_jax` uses them."""
    policy = gp.fair_greedy(horizon, lam=LAM, rho=RHO, block=block)
    return gm.gmf_synthetic(), policy, bayesfair.core.merit.exponential(1.0)


def run_jax(runs, horizon, seed, chunk_size, block, objects=None):
    """One timed ``bayesfair.simulate`` call of Fair-Greedy (compilation included).

    Parameters
    ----------
    runs, horizon, seed, chunk_size : int
    block : int or None
        Fair-Greedy's block (None: ``default_block(T)``).
    objects : tuple, optional
        :func:`study_objects`'s, built once by the caller (so that a second call reuses the compiled
        functions: ``grid_bench.py``'s steady state); by default built here.

    Returns
    -------
    harness.Timed
        Its ``value`` is the ``[R]`` fair pseudo-regret at T.
    """
    env, policy, merit = objects if objects is not None else study_objects(horizon, block)
    call = harness.simulate(seed, env, {"Fair-Greedy": policy}, horizon, runs,
                            merit=merit, checkpoints=[horizon], chunk_size=chunk_size)
    return call._replace(value=call.value["fair_regret"].sel(policy="Fair-Greedy").values[:, -1])


def run_jax_scan(runs, horizon, seed, block):
    """Fair-Greedy and the environment in one plain ``lax.scan`` (no simulator), runs sharded.

    The simulator wraps every round in ``lax.cond`` (so a partial last chunk is free); XLA then
    copies a policy state that is updated in place inside the branch, i.e. Fair-Greedy's whole
    history buffer, twice per round. This measures the policy without that overhead (and without
    the simulator's other metrics): only the fair pseudo-regret is accumulated.

    Returns
    -------
    compile_seconds, run_seconds : float
    fair_regret : numpy.ndarray
        ``[R]`` fair pseudo-regret at T.
    """
    import math

    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec

    env = gm.gmf_synthetic()
    policy = gp.fair_greedy(horizon, lam=LAM, rho=RHO, block=block)

    def run(key):
        k_init, k_rounds = jax.random.split(key)
        params = env.reset(k_init)

        def body(carry, t):
            state, total = carry
            k_env, k_pol = jax.random.split(jax.random.fold_in(k_rounds, t))
            rnd = env.step(k_env, params, t)
            action, probs, _ = policy.select(k_pol, state, rnd.obs)
            state = policy.update(state, rnd.obs, action, rnd.reward[action])
            fair = rnd.extra["fair"]
            return (state, total + jnp.max(fair) - probs @ fair), None

        (_, total), _ = jax.lax.scan(body, (policy.init(k_init, env.spec), jnp.float32(0.0)),
                                     jnp.arange(1, horizon + 1, dtype=jnp.int32))
        return total

    n = math.gcd(runs, jax.local_device_count())
    mesh = jax.make_mesh((n,), ("runs",), devices=jax.local_devices()[:n])
    spec = PartitionSpec("runs")
    fn = jax.jit(jax.shard_map(jax.vmap(run), mesh=mesh, in_specs=spec, out_specs=spec, check_vma=False))
    keys = jax.device_put(jax.random.split(jax.random.key(seed), runs), NamedSharding(mesh, spec))
    t0 = time.perf_counter()
    compiled = fn.lower(keys).compile()
    t1 = time.perf_counter()
    out = np.asarray(jax.block_until_ready(compiled(keys)))
    return t1 - t0, time.perf_counter() - t1, out


def _cost_fit(stamps, runs, chunk_size):
    """Least-squares fit of seconds per round (all runs) = a + b t over the chunks after the first."""
    if len(stamps) < 3:
        return None
    t_end = np.array([s[1] for s in stamps], np.float64) / runs
    secs = np.diff([s[0] for s in stamps])
    rounds = np.diff(t_end)
    mid = t_end[1:] - rounds / 2
    a, b = np.linalg.lstsq(np.stack([np.ones_like(mid), mid], 1), secs / rounds, rcond=None)[0]
    return {"seconds_per_round_at_t0": float(a), "seconds_per_round_per_t": float(b),
            "first_chunk_ms_per_round": float(1e3 * secs[0] / rounds[0]),
            "last_chunk_ms_per_round": float(1e3 * secs[-1] / rounds[-1]),
            "last_chunk_mid_round": float(mid[-1])}


def bench_horizon(horizon, args):
    """Time NumPy, the plain JAX scan and (up to ``--simulator-max-horizon``) the simulator at one T.

    The simulator is timed at T only (:func:`harness.time_doubling` without 2T, after a warm-up
    of ``min(T, 2 chunk)`` rounds): its per-round cost grows with t, so there is no steady state.
    """
    runs = args.runs
    numpy, np_out = harness.time_numpy(numpy_fair_greedy, runs, horizon, args.repeats, args.seed)
    np_fr, np_fr_se = harness.mean_se(np_out[-1]["fair_regret"] / horizon)
    scan = [run_jax_scan(runs, horizon, args.seed, args.block) for _ in range(args.repeats)]
    scan_compile, scan_seconds, scan_fr = min(scan, key=lambda x: x[1])
    scan_rate = runs * horizon / scan_seconds
    out = {
        "horizon": horizon,
        "block": min(gp.default_block(horizon) if args.block is None else args.block, horizon),
        **numpy,
        "jax_scan_compile_seconds": scan_compile,
        "jax_scan_seconds": scan_seconds,
        "jax_scan_rate": scan_rate,
        "ratio_scan": scan_rate / numpy["numpy_rate"],
        "jax_scan_fair_regret_per_T": harness.mean_se(scan_fr / horizon)[0],
        "numpy_fair_regret_per_T": np_fr,
        "numpy_fair_regret_per_T_se": np_fr_se,
        "simulator_skipped": horizon > args.simulator_max_horizon,
        "jax_seconds": None, "jax_end_to_end_rate": None, "jax_chunk_rate": None, "ratio_end_to_end": None,
        "ratio_chunk": None, "jax_cost_fit": None, "jax_fair_regret_per_T": None, "jax_fair_regret_per_T_se": None,
    }
    if out["simulator_skipped"]:
        return out
    chunk = min(args.chunk_size, horizon)
    timing, calls = harness.time_doubling(lambda h: run_jax(runs, h, args.seed, chunk, args.block), runs, horizon,
                                          args.repeats, warmup=min(horizon, 2 * chunk), double=False)
    best = min(calls[horizon], key=lambda c: c.seconds)
    jx_fr, jx_fr_se = harness.mean_se(best.value / horizon)
    out.update({
        **timing,
        "jax_seconds": best.seconds,
        **harness.ratios(numpy["numpy_rate"], timing),
        "jax_cost_fit": _cost_fit(best.stamps, runs, chunk),
        "jax_fair_regret_per_T": jx_fr,
        "jax_fair_regret_per_T_se": jx_fr_se,
    })
    return out


def print_report(report):
    """Print machine info, the rate table, the cost fit and the statistical check."""
    s, _fmt = report["settings"], harness.fmt
    harness.print_preamble(report, f"Fair-Greedy, Section 6 problem (K=4, d=17), lambda={LAM}, rho={RHO}")
    rate = harness.rate
    harness.print_table(report["results"], [
        ("T", ">7", lambda r: r["horizon"]), ("block", ">6", lambda r: r["block"]),
        ("numpy", ">9", lambda r: rate(r["numpy_rate"])), ("jax e2e", ">9", lambda r: rate(r["jax_end_to_end_rate"])),
        ("(per-chunk)", ">11", lambda r: rate(r["jax_chunk_rate"])),
        ("jax scan", ">9", lambda r: rate(r["jax_scan_rate"])),
        ("e2e/np", ">7", lambda r: _fmt(r["ratio_end_to_end"], ".2f")),
        ("chunk/np", ">8", lambda r: _fmt(r["ratio_chunk"], ".2f")),
        ("scan/np", ">8", lambda r: _fmt(r["ratio_scan"], ".2f"))])
    print("(jax scan: the policy in a plain lax.scan, compile excluded; see run_jax_scan. n/a: simulator not run "
          f"above T={s['simulator_max_horizon']}, see --simulator-max-horizon)")
    print("cost per round (JAX, all runs) = a + b t, fitted to the chunk timings:")
    for r in report["results"]:
        f = r["jax_cost_fit"]
        if f is None:
            print(f"  T={r['horizon']}: not fitted (simulator skipped or too few chunks)")
            continue
        print(f"  T={r['horizon']}: a = {1e3 * f['seconds_per_round_at_t0']:.3f} ms, b = "
              f"{1e6 * f['seconds_per_round_per_t']:.4f} us per round of history; first chunk "
              f"{f['first_chunk_ms_per_round']:.3f} ms/round, last chunk (t ~ {f['last_chunk_mid_round']:,.0f}) "
              f"{f['last_chunk_ms_per_round']:.3f} ms/round")
    print("statistical check, mean final fair pseudo-regret / T (+- s.e. over runs; not asserted):")
    for r in report["results"]:
        sim = ("n/a" if r["jax_fair_regret_per_T"] is None else
               f"{r['jax_fair_regret_per_T']:.4f} +- {r['jax_fair_regret_per_T_se']:.4f}")
        print(f"  T={r['horizon']:>7}: numpy {r['numpy_fair_regret_per_T']:.4f} +- "
              f"{r['numpy_fair_regret_per_T_se']:.4f}   jax simulator {sim}   jax scan "
              f"{r['jax_scan_fair_regret_per_T']:.4f}")
    t = report["target"]
    if s["quick"]:
        verdict = "not evaluated in a --quick run"
    else:
        verdict = ", ".join(f"T={h}: {v:.2f}" for h, v in t["ratio_scan"].items())
        verdict += f" -> {'MET' if t['met'] else 'NOT MET'} (through the simulator, per chunk: " + ", ".join(
            f"T={h}: {_fmt(v, '.2f')}" for h, v in t["ratio_chunk"].items()) + ")"
    harness.print_target(f"jax scan / numpy >= {TARGET_RATIO:g} at every T: {verdict}", s["quick"])


def parse_args(argv=None):
    """The command line ``argv`` (default ``sys.argv[1:]``), parsed by :func:`harness.parse`."""
    p = harness.parser(__doc__, "fair_greedy", runs=10, repeats=1, quick_help="T = 1000 and 2000, chunk size 256")
    p.add_argument("--horizons", type=int, nargs="+", default=[10_000, 100_000],
                   help="values of T (default 10000 100000)")
    p.add_argument("--block", type=int, default=None, help="Fair-Greedy's block (default: default_block(T))")
    p.add_argument("--simulator-max-horizon", type=int, default=20_000,
                   help="time bayesfair.simulate only up to this T (default 20000), to keep the default run short")
    args = harness.parse(p, argv, quick={"horizons": [1000, 2000], "chunk_size": 256, "repeats": 1},
                         positive=("runs", "repeats", "chunk_size", "horizons"))
    if args.block is not None and args.block < 1:
        p.error(f"--block must be >= 1, got {args.block}")
    return args


def main(argv=None):
    """Run the benchmark on the command line ``argv``; print the report, write it to ``--out`` and return it."""
    args = parse_args(argv)
    report = harness.new_report("fair_greedy", argv, args, lam=LAM, rho=RHO,
                                problem="gmf_synthetic (Section 6), K=4, d=17")
    results = []
    for h in args.horizons:
        sys.stderr.write(f"fair_greedy_bench: T={h} ...\n")
        results.append(bench_horizon(h, args))
    ratios = {r["horizon"]: r["ratio_scan"] for r in results}
    report["results"] = results
    report["target"] = {"min_ratio": TARGET_RATIO, "ratio_scan": ratios,
                        "met": None if args.quick else all(v >= TARGET_RATIO for v in ratios.values()),
                        "ratio_chunk": {r["horizon"]: r["ratio_chunk"] for r in results}}
    return harness.finish(report, args.out, print_report)


if __name__ == "__main__":
    main()
