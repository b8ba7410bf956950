"""Throughput of FairX-LinTS: the jitted bayesfair simulator vs a NumPy loop batched over runs.

Setting: a linear bandit with d = 50 features and K = 14 candidates per round (the size of the
FairX paper's yeast linear experiments, Section 5.1), contexts uniform on the unit sphere, drawn
per round and candidate, Gaussian noise sd 1, theta* drawn once from N(0, I_d) with a fixed seed,
merit f(mu) = exp(3 mu), the well-specified Gaussian posterior theta ~ N(0, I), noise variance 1,
R = 10 runs, horizon T. The unit is run-rounds per second (R * T / wall seconds).

Both implementations run Algorithm 4 with the same rank-one posterior updates: precision
Lambda += x x' / sigma^2 and eta += x r / sigma^2, the Cholesky factor of Lambda refreshed after
each update, and the draw theta = L^-T (L^-1 eta + z).

- NumPy: one Python loop over rounds, every array batched over runs (``[R, d, d]``,
  ``[R, K, d]``), float64, plain sums. NumPy has no triangular solver, so the two solves use
  batched ``numpy.linalg.solve`` on the factor (``scipy.linalg.solve_triangular``'s batched form
  measured no faster). ``--numpy-solver lapack`` instead calls SciPy's LAPACK ``dtrtrs`` once per
  run (a Python loop over the R runs), which measured about 4x faster for the solves at R = 10,
  d = 50: a stronger, no longer purely NumPy, baseline. It draws only the pulled candidate's
  reward.
- JAX: ``bayesfair.simulate`` with ``fairx_lints(linear_known_variance(0, 1, 1), exponential(3))``
  on ``linear_bandit(14, 50, theta=theta*)``; float32 with compensated sums; runs sharded over every
  CPU device; every candidate's reward drawn each round (common random numbers).

Timing follows ``fairx_ts_bench.py`` (:func:`harness.time_doubling`): an untimed warm-up call;
the NumPy time and the JAX times for T and 2T rounds are each the best of ``--repeats``.
End-to-end = R T / time(T) includes compiling; steady-state = R T / (time(2T) - time(T)) (both
calls compile the same chunk), flagged as not resolved when the difference is under twice the
spread of the repeated timings; compile (est.) = 2 time(T) - time(2T), reported separately;
per-chunk = the rate between the first and last chunk of the 2T call. Nothing is asserted: the
script reports whether steady-state JAX >= 3x NumPy, and the final fairness regret / T of both,
which should agree within sampling error.

Usage: ``python experiments/benchmarks/fairx_lints_bench.py [--horizon T] [--quick] [--out FILE]
[--fresh-runs R ... [--fresh-horizons T ...]]``.
See experiments/benchmarks/README.md.
"""

import bayesfair  # one CPU device per core: must come before the first JAX operation (importing jax first is fine)

# isort: split
import harness  # this folder's shared scaffolding (first on sys.path when run as a script)
import numpy as np

from bayesfair.environments import linear_bandit
from bayesfair.policies import fairx_lints
from bayesfair.posteriors import linear_known_variance

MERIT_C = 3.0
TARGET_RATIO = 3.0


def draw_theta(n_features, seed):
    """The true parameter theta*, drawn once from N(0, I_d).

    Parameters
    ----------
    n_features : int
        d.
    seed : int
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    numpy.ndarray
        ``[d]`` float64.
    """
    return np.random.default_rng(seed).normal(size=n_features)


def _softmax(x):
    z = np.exp(x - x.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def _solves_numpy(chol, eta, z):
    """theta = L^-T (L^-1 eta + z) for every run, by batched LU solves on the factor."""
    v = np.linalg.solve(chol, eta[..., None])
    return np.linalg.solve(chol.transpose(0, 2, 1), v + z[..., None])[..., 0]


def _solves_lapack(chol, eta, z):
    """theta = L^-T (L^-1 eta + z) by LAPACK triangular solves, one call pair per run."""
    from scipy.linalg import lapack

    out = np.empty_like(eta)
    for i in range(eta.shape[0]):
        v, _ = lapack.dtrtrs(chol[i], eta[i], lower=1)
        out[i], _ = lapack.dtrtrs(chol[i], v + z[i], lower=1, trans=1)
    return out


def numpy_fairx_lints(runs, horizon, seed, theta, n_arms, sigma, solver="numpy"):
    """FairX-LinTS (Algorithm 4) in NumPy, vectorized over runs, one Python loop over rounds.

    Each round: contexts uniform on the sphere ``[R, K, d]``; theta = L^-T (L^-1 eta + z);
    pi = softmax(c x theta); the candidate by inverting the CDF of pi; its reward
    x . theta* + sigma N(0, 1); Lambda += x x' / sigma^2, eta += x r / sigma^2, L = chol(Lambda);
    and the simulator's metrics against pi*_t = softmax(c x theta*).

    Parameters
    ----------
    runs, horizon : int
        R runs, T rounds.
    seed : int
        Seed of ``numpy.random.default_rng``.
    theta : array_like
        ``[d]`` true parameter.
    n_arms : int
        K candidates.
    sigma : float
        Noise standard deviation (also the posterior's).
    solver : {"numpy", "lapack"}
        How the two triangular solves of a draw are done (module docstring).

    Returns
    -------
    dict of str to numpy.ndarray
        Final ``fairness_regret``, ``reward_regret``, ``regret``, ``reward`` (``[R]``).
    """
    solve = {"numpy": _solves_numpy, "lapack": _solves_lapack}[solver]
    rng = np.random.default_rng(seed)
    theta = np.asarray(theta, np.float64)
    d, k = theta.size, n_arms
    rows = np.arange(runs)
    inv_s2 = 1.0 / sigma**2
    precision = np.broadcast_to(np.eye(d), (runs, d, d)).copy()
    chol = precision.copy()
    eta = np.zeros((runs, d))
    out = {m: np.zeros(runs) for m in ("fairness_regret", "reward_regret", "regret", "reward")}
    for _ in range(horizon):
        x = rng.standard_normal((runs, k, d))
        x /= np.linalg.norm(x, axis=2, keepdims=True)
        th = solve(chol, eta, rng.standard_normal((runs, d)))
        pi = _softmax(MERIT_C * np.einsum("rkd,rd->rk", x, th))
        cdf = np.cumsum(pi, axis=1)
        u = rng.random(runs) * cdf[:, -1]
        arm = np.minimum((cdf <= u[:, None]).sum(axis=1), k - 1)
        mean = x @ theta
        xa = x[rows, arm]
        reward = mean[rows, arm] + sigma * rng.standard_normal(runs)
        precision += inv_s2 * xa[:, :, None] * xa[:, None, :]
        eta += inv_s2 * xa * reward[:, None]
        chol = np.linalg.cholesky(precision)
        pi_star = _softmax(MERIT_C * mean)
        pi_mu = np.sum(pi * mean, axis=1)
        out["fairness_regret"] += np.abs(pi_star - pi).sum(axis=1)
        out["reward_regret"] += np.sum(pi_star * mean, axis=1) - pi_mu
        out["regret"] += mean.max(axis=1) - pi_mu
        out["reward"] += reward
    return out


def study_objects(theta, n_arms, sigma):
    """The environment, FairX-LinTS and the merit, as :func:`run_jax` uses them."""
    theta = np.asarray(theta)
    merit = bayesfair.core.merit.exponential(MERIT_C)
    env = linear_bandit(n_arms, theta.size, theta=theta, sigma=sigma)
    return env, fairx_lints(linear_known_variance(0.0, 1.0, sigma**2), merit), merit


def run_jax(runs, horizon, seed, chunk_size, theta, n_arms, sigma, objects=None):
    """One timed ``bayesfair.simulate`` call of FairX-LinTS (compilation included).

    Parameters
    ----------
    runs, horizon : int
        R, T.
    seed : int
        Simulator seed.
    chunk_size : int
        Rounds per jitted call.
    theta : array_like
        ``[d]`` true parameter.
    n_arms : int
        K.
    sigma : float
        Noise standard deviation.
    objects : tuple, optional
        :func:`study_objects`'s, built once by the caller (so that a second call reuses the compiled
        functions: ``grid_bench.py``'s steady state); by default built here.

    Returns
    -------
    harness.Timed
        Its ``value`` is the ``[R]`` fairness regret at T.
    """
    env, policy, merit = objects if objects is not None else study_objects(theta, n_arms, sigma)
    call = harness.simulate(seed, env, {"FairX-LinTS": policy}, horizon, runs, merit=merit,
                            checkpoints=[horizon], chunk_size=chunk_size)
    return call._replace(value=call.value["fairness_regret"].sel(policy="FairX-LinTS", checkpoint=horizon).values)


def pairing(args):
    """The NumPy and JAX sides of the command line's problem (theta* from :func:`draw_theta`).

    Returns
    -------
    harness.Pairing
    """
    theta = draw_theta(args.features, args.seed)
    return harness.Pairing(numpy_fairx_lints, run_jax,
                           {"theta": theta.tolist(), "n_arms": args.arms, "sigma": args.sigma},
                           {"solver": args.numpy_solver})


def bench(args):
    """Time NumPy and JAX (:func:`harness.measure`); each time is the best of ``args.repeats``.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed command line.

    Returns
    -------
    dict
        Times, rates, ratios, the compile-time estimate and the final fairness regret / T.
    """
    T = args.horizon
    pair = pairing(args)
    res, np_out, calls = harness.measure(pair, args.runs, T, repeats=args.repeats, seed=args.seed,
                                         chunk_size=args.chunk_size)
    return {"theta_norm": float(np.linalg.norm(pair.params["theta"])), **res,
            **harness.compare("fairness_regret_per_T", np_out[-1]["fairness_regret"] / T, calls[T][-1].value / T)}


def print_report(report):
    """Print the machine, the rates and ratios, the statistical check and the target verdict.

    ``report`` is what :func:`main` writes to JSON.
    """
    s, r, fmt = report["settings"], report["result"], harness.fmt
    harness.print_preamble(report, f"FairX-LinTS, d={s['features']}, K={s['arms']}, T={s['horizon']}, "
                           f"merit exp({MERIT_C:g} mu)", numpy_note=f"batched over runs, solver {s['numpy_solver']}")
    flag = harness.flag(r["jax_steady_resolved"])
    print(f"  numpy                {r['numpy_rate']:>12,.0f}")
    print(f"  jax end-to-end       {r['jax_end_to_end_rate']:>12,.0f}   ratio {r['ratio_end_to_end']:.2f}")
    print(f"  jax steady-state     {fmt(r['jax_steady_rate'], ',.0f') + flag:>12}   "
          f"ratio {fmt(r['ratio_steady'], '.2f')}{flag}")
    print(f"  jax per-chunk        {fmt(r['jax_chunk_rate'], ',.0f'):>12}   ratio {fmt(r['ratio_chunk'], '.2f')}")
    print(f"  jax compile (est.)   {r['jax_compile_seconds_estimate']:>11.2f}s  (2 time(T) - time(2T))")
    if flag:
        print(harness.UNRESOLVED_NOTE)
    print(f"statistical check, final fairness regret / T (+- s.e. over runs; not asserted): numpy "
          f"{r['numpy_fairness_regret_per_T']:.4f} +- {r['numpy_fairness_regret_per_T_se']:.4f}, jax "
          f"{r['jax_fairness_regret_per_T']:.4f} +- {r['jax_fairness_regret_per_T_se']:.4f}")
    harness.print_fresh(report.get("fresh", []))
    verdict = harness.steady_verdict(report["target"], s["quick"], "steady-state time lost in noise")
    harness.print_target(f"steady-state ratio >= {TARGET_RATIO:g}: {verdict}", s["quick"])


def parse_args(argv=None):
    """The command line ``argv`` (default ``sys.argv[1:]``), parsed by :func:`harness.parse`."""
    p = harness.parser(__doc__, "fairx_lints", runs=10, quick_help="T=300, chunk size 128, one repeat",
                       seed_help="seed of theta* and both simulators")
    p.add_argument("--horizon", type=int, default=5000, help="rounds T (default 5000)")
    p.add_argument("--arms", type=int, default=14, help="candidates per round K (default 14)")
    p.add_argument("--features", type=int, default=50, help="context dimension d (default 50)")
    p.add_argument("--sigma", type=float, default=1.0, help="noise standard deviation (default 1)")
    p.add_argument("--numpy-solver", choices=["numpy", "lapack"], default="numpy",
                   help="NumPy baseline's triangular solves: batched numpy.linalg.solve (default) or SciPy "
                        "LAPACK dtrtrs per run")
    harness.add_fresh_arguments(p)
    args = harness.parse(p, argv, quick={"horizon": 300, "chunk_size": 128, "repeats": 1},
                         positive=("horizon", "runs", "arms", "features", "repeats", "chunk_size"))
    if not args.sigma > 0:
        p.error(f"--sigma must be > 0, got {args.sigma}")
    return args


def main(argv=None):
    """Run the benchmark on the command line ``argv``; print the report, write it to ``--out`` and return it."""
    args = parse_args(argv)
    report = harness.new_report("fairx_lints", argv, args, merit=f"exp({MERIT_C:g}*mu)",
                                posterior="linear_known_variance(0, 1, sigma^2)",
                                contexts="uniform on the unit sphere", theta="N(0, I_d), drawn once")
    result = bench(args)
    ratio = result["ratio_steady"]
    report["result"] = result
    report["target"] = {"min_ratio": TARGET_RATIO, "ratio_steady": ratio, "ratio_chunk": result["ratio_chunk"],
                        "steady_resolved": result["jax_steady_resolved"],
                        "met": None if ratio is None or args.quick else bool(ratio >= TARGET_RATIO)}
    if args.fresh_runs:
        report["fresh"] = harness.fresh_grid(pairing(args), args.fresh_runs, args.fresh_horizons,
                                             seed=args.seed, chunk_size=args.chunk_size)
    return harness.finish(report, args.out, print_report)


if __name__ == "__main__":
    main()
