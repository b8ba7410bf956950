"""Throughput of FairX-TS: the jitted bayesfair simulator vs a vectorized NumPy loop.

Setting: Beta(1, 1)-Bernoulli posteriors, merit f(mu) = exp(4 mu), Bernoulli arms whose means
are drawn once from U[0.1, 0.9] with a fixed seed, K in {14, 60} arms, R = 50 runs, horizon T.
The unit is run-rounds per second (R * T / wall seconds).

- NumPy: one Python loop over rounds, every array ``[R, K]``, one thread.
- JAX: ``bayesfair.simulate`` with runs sharded over every CPU device. Each ``simulate`` call
  builds and compiles its own chunk function, so the end-to-end time includes compilation. The
  steady-state rate is ``R * T / (time(2T) - time(T))``: both calls compile the same chunk
  shape, so the difference is the cost of T extra rounds. It is flagged as not resolved when it
  is under twice the spread of the repeated timings (compile-time jitter). As a cross-check, the
  rate between the first and the last chunk of the 2T call (from ``simulate``'s progress
  callback) is also given. An untimed warm-up call per K comes first. ``--quick`` (a smoke run)
  makes no warm-up and no 2T call, so it gives only the end-to-end and per-chunk rates.
  The method is :func:`harness.time_doubling`; ``--fresh-runs R ...`` adds the end-to-end time
  of both sides in a fresh process (:func:`harness.fresh_grid`) for those run counts.

Each time is the best of ``--repeats`` (default 3). Nothing is asserted: the script reports
whether the target (steady-state JAX >= 3x NumPy at K = 60) is met and the final fairness
regret / T of both implementations, which should agree within sampling error.

Usage: ``python experiments/benchmarks/fairx_ts_bench.py [--horizon T] [--quick] [--out FILE]
[--fresh-runs R ... [--fresh-horizons T ...]]``.
See experiments/benchmarks/README.md for measured numbers.
"""

import bayesfair  # one CPU device per core: must come before the first JAX operation (importing jax first is fine)

# isort: split
import harness  # this folder's shared scaffolding (first on sys.path when run as a script)
import numpy as np

from bayesfair.simulation.metric_parts import FairXRegrets

MERIT_C = 4.0
TARGET_K, TARGET_RATIO = 60, 3.0


def draw_means(n_arms, seed):
    """Arm means drawn once from U[0.1, 0.9].

    Parameters
    ----------
    n_arms : int
        Number of arms K.
    seed : int
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    numpy.ndarray
        ``[K]`` float64 means.
    """
    return np.random.default_rng(seed).uniform(0.1, 0.9, n_arms)


def _softmax(x):
    z = np.exp(x - x.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def numpy_fairx_ts(runs, horizon, seed, means):
    """FairX-TS with Beta(1, 1) posteriors and merit exp(4 mu) in plain NumPy.

    Vectorized over runs (arrays ``[R, K]``) with one Python loop over rounds. Each round: draw
    mu ~ Beta(alpha, beta), pi = softmax(4 mu), sample the arm by inverting the CDF of pi, draw
    its Bernoulli reward, update alpha/beta, and accumulate the simulator's metrics.

    Parameters
    ----------
    runs, horizon, seed : int
        R independent runs of T rounds; the seed of ``numpy.random.default_rng``.
    means : array_like
        ``[K]`` Bernoulli means.

    Returns
    -------
    dict of str to numpy.ndarray
        Final ``fairness_regret``, ``reward_regret``, ``regret``, ``reward`` (``[R]``) and
        ``exposure``, ``pulls`` (``[R, K]``).
    """
    rng = np.random.default_rng(seed)
    means = np.asarray(means, np.float64)
    k = means.size
    rows = np.arange(runs)
    pi_star = _softmax(MERIT_C * means)
    best = means.max()
    alpha, beta = np.ones((runs, k)), np.ones((runs, k))
    out = {m: np.zeros(runs) for m in ("fairness_regret", "reward_regret", "regret", "reward")}
    exposure, pulls = np.zeros((runs, k)), np.zeros((runs, k))
    for _ in range(horizon):
        pi = _softmax(MERIT_C * rng.beta(alpha, beta))
        cdf = np.cumsum(pi, axis=1)
        u = rng.random(runs) * cdf[:, -1]
        arm = np.minimum((cdf <= u[:, None]).sum(axis=1), k - 1)
        reward = (rng.random(runs) < means[arm]).astype(np.float64)
        alpha[rows, arm] += reward
        beta[rows, arm] += 1.0 - reward
        pi_mu = pi @ means
        out["fairness_regret"] += np.abs(pi_star - pi).sum(axis=1)
        out["reward_regret"] += pi_star @ means - pi_mu
        out["regret"] += best - pi_mu
        out["reward"] += reward
        exposure += pi
        pulls[rows, arm] += 1.0
    return {**out, "exposure": exposure, "pulls": pulls}


def run_jax(runs, horizon, seed, chunk_size, means):
    """One timed ``bayesfair.simulate`` call of FairX-TS (compilation included), recording the FairX
    regrets only (what the study reports; since 2026-11-25, before: every default metric).

    Parameters
    ----------
    runs, horizon : int
        R runs of T rounds.
    seed : int
        Simulator seed.
    chunk_size : int
        Rounds per jitted call (``simulate``'s default is 1024).
    means : array_like
        ``[K]`` Bernoulli means.

    Returns
    -------
    harness.Timed
        Its ``value`` is the ``[R]`` fairness regret at T.
    """
    env = bayesfair.bernoulli_arms(np.asarray(means))
    merit = bayesfair.core.merit.exponential(MERIT_C)
    policy = bayesfair.fairx_ts(bayesfair.beta_bernoulli(), merit)
    call = harness.simulate(seed, env, {"FairX-TS": policy}, horizon, runs, merit=merit, checkpoints=[horizon],
                            metrics=[FairXRegrets(merit)], chunk_size=chunk_size)
    return call._replace(value=call.value["fairness_regret"].sel(policy="FairX-TS", checkpoint=horizon).values)


def pairing(n_arms, seed):
    """The NumPy and JAX sides for K arms with means :func:`draw_means` ``(K, seed)``.

    Returns
    -------
    harness.Pairing
    """
    return harness.Pairing(numpy_fairx_ts, run_jax, {"means": draw_means(n_arms, seed).tolist()})


def bench_arms(n_arms, args):
    """Time NumPy and JAX for one K (:func:`harness.measure`; ``--quick``: T only, no warm-up).

    Parameters
    ----------
    n_arms : int
        Number of arms K.
    args : argparse.Namespace
        Parsed command line (horizon, runs, repeats, seed, chunk_size, quick).

    Returns
    -------
    dict
        Times, rates, ratios and the final fairness regret / T of both implementations.
    """
    T = args.horizon
    pair = pairing(n_arms, args.seed)
    res, np_out, calls = harness.measure(pair, args.runs, T, repeats=args.repeats, seed=args.seed,
                                         chunk_size=args.chunk_size, warmup=not args.quick, double=not args.quick)
    return {"k": n_arms, "means": pair.params["means"], **res,
            **harness.compare("fairness_regret_per_T", np_out[-1]["fairness_regret"] / T, calls[T][-1].value / T)}


def print_report(report):
    """Print machine info, the rate table per K, the statistical check and the target verdict.

    ``report`` is what :func:`main` writes to JSON.
    """
    s, fmt, rate, flag = report["settings"], harness.fmt, harness.rate, harness.flag
    harness.print_preamble(report, f"FairX-TS, Beta(1,1)-Bernoulli, merit exp({MERIT_C:g} mu), T={s['horizon']}")
    harness.print_table(report["results"], [
        ("K", ">4", lambda r: r["k"]), ("numpy", ">11", lambda r: rate(r["numpy_rate"])),
        ("jax e2e", ">11", lambda r: rate(r["jax_end_to_end_rate"])),
        ("jax steady", ">11", lambda r: rate(r["jax_steady_rate"]) + flag(r["jax_steady_resolved"])),
        ("(per-chunk)", ">11", lambda r: rate(r["jax_chunk_rate"])),
        ("steady/np", ">10", lambda r: fmt(r["ratio_steady"], ".2f") + flag(r["jax_steady_resolved"])),
        ("chunk/np", ">9", lambda r: fmt(r["ratio_chunk"], ".2f")),
        ("e2e/np", ">8", lambda r: fmt(r["ratio_end_to_end"], ".2f"))], prefix="jax")
    print("statistical check, mean final fairness regret / T (+- s.e. over runs; not asserted):")
    for r in report["results"]:
        print(f"  K={r['k']:>3}: numpy {r['numpy_fairness_regret_per_T']:.4f} "
              f"+- {r['numpy_fairness_regret_per_T_se']:.4f}   jax {r['jax_fairness_regret_per_T']:.4f} "
              f"+- {r['jax_fairness_regret_per_T_se']:.4f}")
    for k, rows in report.get("fresh", {}).items():
        print(f"K={k}:", end=" ")
        harness.print_fresh(rows)
    verdict = harness.steady_verdict(report["target"], s["quick"],
                                     f"K={TARGET_K} not run, or steady-state time lost in noise")
    harness.print_target(f"steady-state ratio >= {TARGET_RATIO:g} at K={TARGET_K}: {verdict}", s["quick"])


def parse_args(argv=None):
    """The command line ``argv`` (default ``sys.argv[1:]``), parsed by :func:`harness.parse`."""
    p = harness.parser(__doc__, "fairx_ts", runs=50,
                       quick_help="T=500, chunk size 128, one repeat, no warm-up, no 2T call (no steady-state rate)",
                       seed_help="seed of the means and both simulators")
    p.add_argument("--horizon", type=int, default=20_000, help="rounds T (default 20000)")
    p.add_argument("--arms", type=int, nargs="+", default=[14, 60], help="values of K (default 14 60)")
    harness.add_fresh_arguments(p)
    return harness.parse(p, argv, quick={"horizon": 500, "chunk_size": 128, "repeats": 1},
                         positive=("horizon", "runs", "repeats", "chunk_size", "arms"))


def main(argv=None):
    """Run the benchmark on the command line ``argv``; print the report, write it to ``--out`` and return it."""
    args = parse_args(argv)
    report = harness.new_report("fairx_ts", argv, args, merit=f"exp({MERIT_C:g}*mu)", prior=[1.0, 1.0],
                                means="U[0.1, 0.9], drawn once")
    results = [bench_arms(k, args) for k in args.arms]
    at = next((r for r in results if r["k"] == TARGET_K), {})
    ratio = at.get("ratio_steady")
    report["results"] = results
    report["target"] = {"k": TARGET_K, "min_ratio": TARGET_RATIO, "ratio_steady": ratio,
                        "ratio_chunk": at.get("ratio_chunk"), "steady_resolved": at.get("jax_steady_resolved"),
                        "met": None if ratio is None or args.quick else bool(ratio >= TARGET_RATIO)}
    if args.fresh_runs:
        report["fresh"] = {k: harness.fresh_grid(pairing(k, args.seed), args.fresh_runs,
                                                 args.fresh_horizons, seed=args.seed,
                                                 chunk_size=args.chunk_size) for k in args.arms}
    return harness.finish(report, args.out, print_report)


if __name__ == "__main__":
    main()
