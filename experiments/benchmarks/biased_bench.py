"""Throughput of GroupFairTopInterval and GroupFair-TS: the jitted bayesfair simulator vs NumPy over runs.

Setting: the synthetic problem of Section 5.2 of group_fairness_biased_feedback_aamas2022
(:func:`bayesfair.environments.biased.synthetic_biased`): n = 10 arms, 5 of them sensitive,
d = 2, bias mean mu = 10; per run beta_i ~ U[0, 10]^d for every arm, the sensitive group's bias
psi ~ U[-2 mu, 0]^d; contexts U[0, 1]^d per arm and round; observed reward
(beta_i + psi_g(i)) . x + N(0, 1), true reward beta_i . x. R runs (default 50, the paper-scale
experiment's) of T rounds; the issue asks for T = 1e3 and T = 1e6. The unit is run-rounds per
second (R * T / wall seconds).

Policies (the experiment's settings):

- GroupFairTopInterval (Algorithm 1, :func:`bayesfair.policies.biased.group_fair_top_interval`):
  delta = 0.1, sigma = 1, ridge 0.01, reference group 0, anytime widths (t for T).
- GroupFair-TS (:func:`bayesfair.policies.biased.group_fair_ts`): Thompson sampling on the joint
  conjugate posterior of (beta_bar, beta_1..n, psi), tau = 10 / sqrt(12), s = 2 mu / sqrt(3),
  sigma = 1, beta_bar ~ N(0, 10^2 I); plays argmax_i beta_i . x_i of one posterior draw.

The NumPy implementations run the same algorithms with the same incremental statistics, batched
over runs with one Python loop over rounds, float64:

- GroupFairTopInterval: per arm and per group the inverse of lam I + X'X kept by Sherman-Morrison
  rank-one updates (bayesfair keeps Cholesky factors; same matrices), b = X'y; the estimates,
  widths z(delta / (2 n t)) sigma sqrt(x' A^-1 x) and group widths z(delta |P_j| / (2 n t))
  sigma sqrt(x' G_j^-1 x) as in Algorithm 1; exploration with probability t^(-1/3); ties of the
  index split uniformly; the action drawn from pi_t by inverse CDF.
- GroupFair-TS: the joint precision matrix P [R, D, D] (D = d (1 + n + 1)) and P mu, updated
  rank-one per pull; each round a batched Cholesky of P, the mean by a batched solve and the draw
  mean + L^-T z (NumPy has no triangular solver: a general batched solve on the factor).

Both draw the environment the same way (their random numbers are independent), and accumulate
the biased regret (Eq. 1, against the best observed-reward arm) and the true regret (Eq. 3) as
expectations over pi_t, as the simulator does. The final regrets / T of the two implementations
should agree within sampling error (printed, not asserted).

The JAX side is ``bayesfair.simulate`` with all of its metrics, runs sharded over both CPU
devices: *end-to-end* (one call, compile included), *steady-state* R T / (time(2T) - time(T))
(flagged ``?`` when the difference is under twice the spread of repeated timings), *per-chunk*
(first to last chunk of the 2T call) and the compile estimate 2 time(T) - time(2T). With
``--compare-solvers`` GroupFairTopInterval is also timed with LAPACK triangular solves
(``_UNROLL_MAX_D = 0``) instead of the unrolled d <= 8 substitutions it uses by default.

So the ratios compare 2 cores (JAX) with 1 (NumPy). Target: steady-state (or per-chunk) JAX >= 3x
NumPy; nothing is asserted. NumPy's cost per round does not grow with t, so ``--numpy-horizon``
(default min(T, 20,000)) times a shorter NumPy run at the same per-round rate.

Usage: ``python experiments/benchmarks/biased_bench.py [--horizon T] [--runs R]
[--policies GFTI GFTS] [--compare-solvers] [--quick] [--out FILE]``. See
experiments/benchmarks/README.md for measured numbers.
"""

import statistics
import sys

import bayesfair  # one CPU device per core: must come before the first JAX operation (importing jax first is fine)

# isort: split
import harness  # this folder's shared scaffolding (first on sys.path when run as a script)
import numpy as np

import bayesfair.policies.biased as pb
from bayesfair.environments.biased import synthetic_biased

N_ARMS, N_SENSITIVE, D, MU = 10, 5, 2, 10.0
COEF_HIGH, NOISE_SD = 10.0, 1.0
DELTA, SIGMA, RIDGE = 0.1, 1.0, 1e-2
TAU, S_PSI, PRIOR_SD = COEF_HIGH / np.sqrt(12.0), 2.0 * MU / np.sqrt(3.0), 10.0
TARGET_RATIO = 3.0
POLICIES = {"GFTI": "GroupFairTopInterval", "GFTS": "GroupFair-TS"}
_NORMAL = statistics.NormalDist()


def _groups():
    return np.r_[np.zeros(N_ARMS - N_SENSITIVE, np.int64), np.ones(N_SENSITIVE, np.int64)]


def _draw_problem(rng, runs):
    """Per run: beta [R, n, d] ~ U[0, 10], psi [R, m, d] (row 0 = reference = 0, row 1 ~ U[-2 mu, 0])."""
    beta = rng.uniform(0.0, COEF_HIGH, (runs, N_ARMS, D))
    psi = np.zeros((runs, 2, D))
    psi[:, 1] = rng.uniform(-2.0 * MU, 0.0, (runs, D))
    return beta, psi


def _round(rng, beta, psi, group):
    """Contexts [R, n, d] and the observed / true expected rewards [R, n] of one round."""
    x = rng.uniform(0.0, 1.0, beta.shape)
    true = np.einsum("rnd,rnd->rn", beta, x)
    observed = true + np.einsum("rnd,rnd->rn", psi[:, group], x)
    return x, observed, true


def _z(p):
    """|Phi^-1(p)| for a small tail probability p (scalar)."""
    return -_NORMAL.inv_cdf(min(max(p, 1e-300), 0.5))


def _sherman_morrison(inv, x):
    """(A + x x')^-1 from A^-1, batched: inv [R, d, d], x [R, d]."""
    v = np.einsum("rij,rj->ri", inv, x)
    return inv - np.einsum("ri,rj->rij", v, v) / (1.0 + np.einsum("ri,ri->r", x, v))[:, None, None]


def numpy_gfti(runs, horizon, seed):
    """GroupFairTopInterval (Algorithm 1, two groups, reference 0) on the synthetic problem, batched over runs.

    Returns
    -------
    dict
        ``regret``, ``true_regret`` ``[R]`` at T and ``sensitive_share`` ``[R]`` (pulls of group 1 / T).
    """
    rng = np.random.default_rng(seed)
    group = _groups()
    n, m, R = N_ARMS, 2, runs
    size = np.bincount(group, minlength=m).astype(np.float64)
    beta, psi = _draw_problem(rng, R)
    a_inv = np.broadcast_to(np.eye(D) / RIDGE, (R, n, D, D)).copy()
    b = np.zeros((R, n, D))
    g_inv = np.broadcast_to(np.eye(D) / RIDGE, (R, m, D, D)).copy()
    c = np.zeros((R, m, D))
    regret, true_regret, sens = np.zeros(R), np.zeros(R), np.zeros(R)
    rows, arms = np.arange(R), np.arange(n)
    for t in range(1, horizon + 1):
        x, observed, true = _round(rng, beta, psi, group)
        ax = np.einsum("rnij,rnj->rni", a_inv, x)                  # A_i^-1 x_i
        est = np.einsum("rni,rni->rn", ax, b)                       # beta_hat_i . x_i
        w = _z(DELTA / (2.0 * n * t)) * SIGMA * np.sqrt(np.maximum(np.einsum("rni,rni->rn", ax, x), 0.0))
        gx = np.einsum("rmij,rnj->rnmi", g_inv, x)                  # G_j^-1 x_i
        g_est = np.einsum("rnmi,rmi->rnm", gx, c)                   # psi_hat_j . x_i
        z_b = np.array([_z(DELTA * size[j] / (2.0 * n * t)) for j in range(m)])
        gb = z_b * SIGMA * np.sqrt(np.maximum(np.einsum("rnmi,rni->rnm", gx, x), 0.0))
        own_est, own_b = g_est[:, arms, group], gb[:, arms, group]  # each arm's own group's fit and width
        corrected = est + w - own_est + own_b + g_est[..., 0] + gb[..., 0]
        upper = np.where(group == 0, est + w, corrected)
        top = upper == upper.max(axis=1, keepdims=True)
        eps = min(t ** (-1.0 / 3.0), 1.0)
        probs = eps / n + (1.0 - eps) * top / top.sum(axis=1, keepdims=True)
        cdf = np.cumsum(probs, axis=1)
        u = rng.uniform(size=(R, 1)) * cdf[:, -1:]
        action = np.minimum((cdf <= u).sum(axis=1), n - 1)
        regret += observed.max(axis=1) - (probs * observed).sum(axis=1)
        true_regret += true.max(axis=1) - (probs * true).sum(axis=1)
        g = group[action]
        sens += g == 1
        xa = x[rows, action]
        y = observed[rows, action] + NOISE_SD * rng.standard_normal(R)
        a_inv[rows, action] = _sherman_morrison(a_inv[rows, action], xa)
        b[rows, action] += xa * y[:, None]
        g_inv[rows, g] = _sherman_morrison(g_inv[rows, g], xa)
        c[rows, g] += xa * y[:, None]
    return {"regret": regret, "true_regret": true_regret, "sensitive_share": sens / horizon}


def _ts_prior_precision():
    """Joint prior precision over theta = (beta_bar, beta_1..n, psi_1), blocks of d: [D, D]."""
    k = 1 + N_ARMS + 1
    blocks = np.zeros((k, k))
    blocks[0, 0] = 1.0 / PRIOR_SD**2
    for i in range(1, 1 + N_ARMS):  # beta_i ~ N(beta_bar, tau^2 I)
        blocks[i, i] += 1.0 / TAU**2
        blocks[0, 0] += 1.0 / TAU**2
        blocks[0, i] = blocks[i, 0] = -1.0 / TAU**2
    blocks[k - 1, k - 1] = 1.0 / S_PSI**2  # psi of the sensitive group ~ N(0, s^2 I)
    return np.kron(blocks, np.eye(D))


def numpy_gfts(runs, horizon, seed):
    """GroupFair-TS (joint conjugate posterior, one draw per round, argmax of the sampled true rewards).

    Returns
    -------
    dict
        As :func:`numpy_gfti`.
    """
    rng = np.random.default_rng(seed)
    group = _groups()
    n, R = N_ARMS, runs
    beta, psi = _draw_problem(rng, R)
    dim = D * (n + 2)
    prec = np.broadcast_to(_ts_prior_precision(), (R, dim, dim)).copy()
    h = np.zeros((R, dim))  # P mu (the prior mean is 0)
    regret, true_regret, sens = np.zeros(R), np.zeros(R), np.zeros(R)
    rows = np.arange(R)
    for _ in range(horizon):
        x, observed, true = _round(rng, beta, psi, group)
        chol = np.linalg.cholesky(prec)
        mean = np.linalg.solve(prec, h[..., None])[..., 0]
        z = rng.standard_normal((R, dim, 1))
        draw = mean + np.linalg.solve(np.swapaxes(chol, 1, 2), z)[..., 0]
        arms = draw[:, D:D * (n + 1)].reshape(R, n, D)
        scores = np.einsum("rnd,rnd->rn", arms, x)
        action = scores.argmax(axis=1)  # ties have probability zero (continuous draws)
        regret += observed.max(axis=1) - observed[rows, action]
        true_regret += true.max(axis=1) - true[rows, action]
        sens += group[action] == 1
        xa = x[rows, action]
        y = observed[rows, action] + NOISE_SD * rng.standard_normal(R)
        phi = np.zeros((R, dim))
        cols = D * (1 + action)[:, None] + np.arange(D)
        phi[rows[:, None], cols] = xa
        sensitive = group[action] == 1
        phi[sensitive, D * (n + 1):] = xa[sensitive]
        prec += np.einsum("ri,rj->rij", phi, phi) / SIGMA**2
        h += phi * (y / SIGMA**2)[:, None]
    return {"regret": regret, "true_regret": true_regret, "sensitive_share": sens / horizon}


def _policy(key):
    if key == "GFTI":
        return pb.group_fair_top_interval(DELTA, sigma=SIGMA, ridge=RIDGE)
    return pb.group_fair_ts(tau=TAU, s=S_PSI, sigma=SIGMA, prior_sd=PRIOR_SD)


def study_objects(key):
    """The environment, the policy ``key`` and the merit, as :func:`run_jax` uses them."""
    env = synthetic_biased(N_ARMS, N_SENSITIVE, D, bias_mean=MU, coef_high=COEF_HIGH, noise_sd=NOISE_SD)
    merit = bayesfair.core.merit.exponential(1.0, domain=(-100.0, 100.0))  # needed by simulate, unused here
    return env, _policy(key), merit


def run_jax(key, runs, horizon, seed, chunk_size, objects=None):
    """One timed ``bayesfair.simulate`` call (compilation included).

    ``objects``: :func:`study_objects`'s, built once by the caller (so that a second call reuses the
    compiled functions: ``grid_bench.py``'s steady state); by default built here.

    Returns
    -------
    harness.Timed
        Its ``value`` (``finals``) holds ``regret``, ``true_regret``, ``sensitive_share`` ``[R]`` at T.
    """
    env, policy, merit = objects if objects is not None else study_objects(key)
    call = harness.simulate(seed, env, {key: policy}, horizon, runs, merit=merit, checkpoints=[horizon],
                            chunk_size=min(chunk_size, horizon))
    fin = call.value.sel(policy=key, checkpoint=horizon)
    return call._replace(value={"regret": fin["regret"].values, "true_regret": fin["true_regret"].values,
                                "sensitive_share": fin["group_pulls"].values[:, 1] / horizon})


def numpy_side(runs, horizon, seed, policy):
    """The NumPy reference of ``policy`` ("GFTI" or "GFTS"): :func:`numpy_gfti` or :func:`numpy_gfts`."""
    return (numpy_gfti if policy == "GFTI" else numpy_gfts)(runs, horizon, seed)


def jax_side(runs, horizon, seed, chunk_size, policy):
    """The JAX run of ``policy``: :func:`run_jax`."""
    return run_jax(policy, runs, horizon, seed, chunk_size)


def bench_policy(key, args, T):
    """NumPy and JAX timings (:func:`harness.measure`) and the statistical cross-check of one policy at T."""
    pairing = harness.Pairing(numpy_side, jax_side, {"policy": key})
    res, np_out, calls = harness.measure(pairing, args.runs, T, repeats=args.repeats, seed=args.seed,
                                         chunk_size=args.chunk_size, numpy_horizon=args.numpy_horizon)
    out = {"policy": POLICIES[key], "horizon": T, **res}
    if res["numpy_horizon"] == T:  # the cross-check needs the same horizon
        for metric in ("regret", "true_regret", "sensitive_share"):
            scale = 1.0 if metric == "sensitive_share" else 1.0 / T
            out[f"numpy_{metric}"] = harness.mean_se(np_out[-1][metric] * scale)
            out[f"jax_{metric}"] = harness.mean_se(calls[T][-1].value[metric] * scale)
    return out


def bench_solvers(args, T):
    """GroupFairTopInterval per-chunk and steady rates with the unrolled and the LAPACK triangular solves."""
    out = {}
    default = pb._UNROLL_MAX_D
    try:
        for label, value in (("unrolled", default), ("lapack", 0)):
            pb._UNROLL_MAX_D = value
            timing, _ = harness.time_doubling(lambda h: run_jax("GFTI", args.runs, h, args.seed, args.chunk_size),
                                              args.runs, T, args.repeats, warmup=min(T, args.chunk_size))
            out[label] = {"chunk_rate": timing["jax_chunk_rate"], "steady_rate": timing["jax_steady_rate"]}
    finally:
        pb._UNROLL_MAX_D = default
    return out


def _fmt(x, spec):
    return harness.fmt(x, spec, missing="-")


def print_report(report):
    """Print the rate table per (policy, T), the cross-checks and the solver comparison.

    ``report`` is what :func:`main` writes to JSON.
    """
    a = report["settings"]
    harness.print_preamble(report, f"synthetic biased bandit (n={N_ARMS}, {N_SENSITIVE} sensitive, d={D}, mu={MU:g})",
                           numpy_note="batched over runs, 1 thread")
    rate, flag = harness.rate, harness.flag

    def verdict(r):  # the steady-state ratio when resolved, else the per-chunk one
        ratio = r["ratio_steady"] if not flag(r["jax_steady_resolved"]) and r["ratio_steady"] is not None \
            else r["ratio_chunk"]
        return " -" if a["quick"] else (" MET" if ratio is not None and ratio >= TARGET_RATIO else " NOT MET")

    harness.print_table(report["results"], [
        ("policy", "<21", lambda r: r["policy"]), ("T", ">9", lambda r: f"{r['horizon']:,}"),
        ("numpy", ">9", lambda r: rate(r["numpy_rate"])), ("jax e2e", ">10", lambda r: rate(r["jax_end_to_end_rate"])),
        ("steady", ">10", lambda r: rate(r["jax_steady_rate"], "-") + flag(r["jax_steady_resolved"])),
        ("per-chunk", ">10", lambda r: rate(r["jax_chunk_rate"], "-")),
        ("compile s", ">9", lambda r: _fmt(r["jax_compile_seconds_estimate"], ".1f")),
        ("steady/np", ">9", lambda r: _fmt(r["ratio_steady"], ".2f") + flag(r["jax_steady_resolved"])),
        ("chunk/np", ">8", lambda r: _fmt(r["ratio_chunk"], ".2f")),
        (f" target>={TARGET_RATIO:g}", "", verdict)])
    print("numpy: horizon min(T, --numpy-horizon); its cost per round does not grow with t. "
          "? = time(2T) - time(T) under twice the spread of the repeats (use the per-chunk rate)")
    for r in report["results"]:
        if "numpy_regret" not in r:
            continue
        parts = []
        for metric, label in (("regret", "biased regret/T"), ("true_regret", "true regret/T"),
                              ("sensitive_share", "sensitive share")):
            (nm, ns), (jm, js) = r[f"numpy_{metric}"], r[f"jax_{metric}"]
            z = (nm - jm) / np.hypot(ns, js) if np.hypot(ns, js) > 0 else float("nan")
            parts.append(f"{label} numpy {nm:.3f} +- {ns:.3f}, jax {jm:.3f} +- {js:.3f} (z {z:+.2f})")
        print(f"cross-check {r['policy']} at T={r['horizon']:,} (mean +- s.e. over runs, not asserted): "
              + "; ".join(parts))
    if report.get("solvers"):
        for T, res in report["solvers"].items():
            u, lp = res["unrolled"], res["lapack"]
            print(f"GroupFairTopInterval triangular solves at T={int(T):,}: unrolled per-chunk "
                  f"{_fmt(u['chunk_rate'], ',.0f')} (steady {_fmt(u['steady_rate'], ',.0f')}), LAPACK per-chunk "
                  f"{_fmt(lp['chunk_rate'], ',.0f')} (steady {_fmt(lp['steady_rate'], ',.0f')}); "
                  f"unrolled / LAPACK per-chunk {_fmt(harness.ratio(u['chunk_rate'], lp['chunk_rate']), '.2f')}")


def parse_args(argv=None):
    """The command line ``argv`` (default ``sys.argv[1:]``), parsed by :func:`harness.parse`."""
    p = harness.parser(__doc__, "biased", runs=50, chunk_size=8192, quick_help="T = 200, R = 8, one repeat, chunk 64",
                       seed_help="seed of the problems and both simulators")
    p.add_argument("--horizons", type=int, nargs="+", default=[1_000, 1_000_000],
                   help="rounds T (each also timed at 2T; default 1000 1000000)")
    p.add_argument("--numpy-horizon", type=int, default=20_000,
                   help="NumPy rounds at most (its per-round cost is constant; default 20000)")
    p.add_argument("--policies", nargs="+", choices=sorted(POLICIES), default=sorted(POLICIES),
                   help="GFTI = GroupFairTopInterval, GFTS = GroupFair-TS (default both)")
    p.add_argument("--compare-solvers", action="store_true",
                   help="also time GroupFairTopInterval with LAPACK triangular solves (at the smallest T >= 10000)")
    args = harness.parse(p, argv, quick={"horizons": [200], "runs": 8, "repeats": 1, "chunk_size": 64},
                         positive=("runs", "repeats", "chunk_size", "numpy_horizon"))
    if any(h < 2 for h in args.horizons):
        p.error(f"--horizons must be >= 2, got {args.horizons}")
    return args


def main(argv=None):
    """Run the benchmark on the command line ``argv``; print the report and write it to ``--out``; 0."""
    args = parse_args(argv)
    report = harness.new_report("biased", argv, args)
    report["results"] = [bench_policy(k, args, T) for T in args.horizons for k in args.policies]
    report["solvers"] = {}
    if args.compare_solvers:
        T = min((h for h in args.horizons if h >= 10_000), default=max(args.horizons))
        report["solvers"][str(T)] = bench_solvers(args, T)
    harness.finish(report, args.out, print_report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
