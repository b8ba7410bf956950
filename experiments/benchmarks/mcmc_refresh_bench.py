"""Cost of the MCMC fallback: seconds per NUTS refresh and run-rounds/s vs the conjugate path.

Setting: FairX-TS with merit f(mu) = exp(4 mu) on K Bernoulli arms (means drawn once from
U[0.1, 0.9]), R runs of T rounds, inside ``bayesfair.simulate`` (vmapped and sharded over the CPU
devices). Posteriors:

- ``conjugate``: Beta(1, 1)-Bernoulli, closed form (the baseline);
- ``mcmc_beta_bernoulli``: the same model through the MCMC fallback (counts history);
- ``hierarchical``: the hierarchical logit-normal model over two groups of arms (with ``--models``).

For each refresh interval B (default 10, 100, 1000) the script reports

- *s/refresh*: wall seconds of one jitted NUTS refresh of all R runs at once (``vmap``), timed
  directly on states holding T/2 observations (best of ``--repeats`` calls after a warm-up
  call that compiles), and the same per run;
- *rate*: run-rounds/s between the first and the last chunk of the simulation (compilation
  excluded), and the end-to-end rate R T / wall (compilation included);
- *slowdown*: conjugate per-chunk rate / fallback per-chunk rate.

NUTS settings are the fallback's defaults (``num_warmup=100``, ``num_samples=100``, one chain,
``max_tree_depth=8``) unless overridden. Nothing is asserted.

Usage: ``python experiments/benchmarks/mcmc_refresh_bench.py [--quick] [--out FILE]``.
See experiments/benchmarks/README.md for measured numbers.
"""

import time

import bayesfair  # one CPU device per core: must come before the first JAX operation (importing jax first is fine)

# isort: split
import harness  # this folder's shared scaffolding (first on sys.path when run as a script)
import jax
import numpy as np

from bayesfair.posteriors import fit
from bayesfair.posteriors.hierarchical import hierarchical_logit_normal
from bayesfair.posteriors.mcmc import mcmc_beta_bernoulli, refresh

MERIT_C = 4.0


def make_posterior(model, n_arms, refresh_every, args):
    """The fallback posterior ``model`` ("mcmc_beta_bernoulli" or "hierarchical") for K arms.

    Parameters
    ----------
    model : str
    n_arms : int
    refresh_every : int
    args : argparse.Namespace
        NUTS settings (``num_warmup``, ``num_samples``, ``num_chains``).

    Returns
    -------
    bayesfair.posteriors.Posterior
    """
    nuts = {"refresh_every": refresh_every, "num_warmup": args.num_warmup, "num_samples": args.num_samples,
            "num_chains": args.num_chains}
    if model == "mcmc_beta_bernoulli":
        return mcmc_beta_bernoulli(1.0, 1.0, **nuts)
    if model == "hierarchical":
        return hierarchical_logit_normal(np.arange(n_arms) % 2, **nuts)
    raise ValueError(f"unknown model {model!r}")


def run_simulation(posterior, means, args):
    """One timed ``simulate`` of FairX-TS with ``posterior``.

    Returns
    -------
    dict
        ``seconds`` (wall, compile included), ``end_to_end_rate``, ``chunk_rate`` (None with one
        chunk) and the mean final ``fairness_regret_per_T``.
    """
    env = bayesfair.bernoulli_arms(means)
    merit = bayesfair.core.merit.exponential(MERIT_C)
    call = harness.simulate(args.seed, env, {"p": bayesfair.fairx_ts(posterior, merit)}, args.horizon, args.runs,
                            merit=merit, checkpoints=[args.horizon], chunk_size=args.chunk_size)
    fr = call.value["fairness_regret"].isel(checkpoint=-1).values / args.horizon
    return {"seconds": call.seconds, "end_to_end_rate": args.runs * args.horizon / call.seconds,
            "chunk_rate": harness.chunk_rate(call.stamps), "fairness_regret_per_T": float(fr.mean())}


def time_refresh(posterior, means, args):
    """Wall seconds of one vmapped refresh of R runs holding T/2 observations (best of repeats).

    Returns
    -------
    dict
        ``seconds_all_runs``, ``seconds_per_run``, ``compile_seconds`` (first call minus best).
    """
    k = means.size
    n = max(args.horizon // 2, 1)
    rng = np.random.default_rng(args.seed)
    arms = rng.integers(0, k, (args.runs, n)).astype(np.int32)
    rewards = (rng.random((args.runs, n)) < means[arms]).astype(np.float32)
    states = jax.jit(jax.vmap(lambda a, r: fit(posterior, k, a, r)))(arms, rewards)
    fn = jax.jit(jax.vmap(lambda s: refresh(posterior, s)))
    t0 = time.perf_counter()
    jax.block_until_ready(fn(states))
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(states))
        best = min(best, time.perf_counter() - t0)
    return {"seconds_all_runs": best, "seconds_per_run": best / args.runs, "compile_seconds": first - best}


def print_report(report):
    """Print the settings and one table row per (model, B), the conjugate path first.

    ``report`` is what :func:`main` writes to JSON.
    """
    s, m = report["settings"], report["machine"]
    label = "QUICK (smoke-size, not representative) " if s["quick"] else ""
    print(f"{label}MCMC fallback cost: FairX-TS, K={s['arms']}, R={s['runs']}, T={s['horizon']}, "
          f"chunk {s['chunk_size']}, NUTS warmup {s['num_warmup']} + {s['num_samples']} draws x "
          f"{s['num_chains']} chain(s); {m['cpu_count']} CPUs, {m['jax_local_device_count']} devices, "
          f"load {m['loadavg_at_start']}")
    fmt = harness.fmt
    conjugate = {"model": "conjugate", "refresh": {}, "slowdown": 1.0, **report["conjugate"]}
    harness.print_table([conjugate, *report["results"]], [
        ("posterior", "<22", lambda r: r["model"]), ("B", ">6", lambda r: r.get("refresh_every", "-")),
        ("refreshes", ">9", lambda r: r.get("refreshes", "-")),
        ("s/refresh(R runs)", ">17", lambda r: fmt(r["refresh"].get("seconds_all_runs"), ".4f", "-")),
        ("s/refresh/run", ">13", lambda r: fmt(r["refresh"].get("seconds_per_run"), ".4f", "-")),
        ("rate (chunk)", ">13", lambda r: harness.rate(r["chunk_rate"])),
        ("rate (e2e)", ">11", lambda r: harness.rate(r["end_to_end_rate"])),
        ("slowdown", ">9", lambda r: fmt(r["slowdown"], ".2f" if r["model"] == "conjugate" else ".1f")),
        ("FR/T", ">7", lambda r: f"{r['fairness_regret_per_T']:.3f}")])
    if s["quick"]:
        print("(--quick: tiny horizon and runs; compile time and load dominate, use only as a smoke test)")


def parse_args(argv=None):
    """The command line ``argv`` (default ``sys.argv[1:]``), parsed by :func:`harness.parse`."""
    p = harness.parser(__doc__, "mcmc_refresh", runs=8, chunk_size=1000,
                       quick_help="K=5, R=2, T=1000, chunk 250, one repeat")
    p.add_argument("--horizon", type=int, default=5000, help="rounds T (default 5000)")
    p.add_argument("--arms", type=int, default=10, help="arms K (default 10)")
    p.add_argument("--refresh-every", type=int, nargs="+", default=[10, 100, 1000], help="values of B")
    p.add_argument("--models", nargs="+", default=["mcmc_beta_bernoulli"],
                   choices=["mcmc_beta_bernoulli", "hierarchical"], help="fallback posteriors to time")
    p.add_argument("--num-warmup", type=int, default=100)
    p.add_argument("--num-samples", type=int, default=100)
    p.add_argument("--num-chains", type=int, default=1)
    return harness.parse(p, argv, quick={"horizon": 1000, "runs": 2, "arms": 5, "chunk_size": 250, "repeats": 1},
                         positive=("horizon", "runs", "arms", "num_samples", "num_chains", "repeats", "chunk_size",
                                   "refresh_every"))


def main(argv=None):
    """Run the benchmark on the command line ``argv``; print the report, write it to ``--out`` and return it."""
    args = parse_args(argv)
    report = harness.new_report("mcmc_refresh", argv, args)
    means = np.random.default_rng(args.seed).uniform(0.1, 0.9, args.arms)
    conj = run_simulation(bayesfair.beta_bernoulli(), means, args)
    results = []
    for model in args.models:
        for b in args.refresh_every:
            post = make_posterior(model, args.arms, b, args)
            sim = run_simulation(post, means, args)
            slowdown = (conj["chunk_rate"] / sim["chunk_rate"]
                        if conj["chunk_rate"] and sim["chunk_rate"] else None)
            results.append({"model": model, "refresh_every": b, "refreshes": args.horizon // b,
                            "refresh": time_refresh(post, means, args), **sim, "slowdown": slowdown})
    report.update(means=means.tolist(), conjugate=conj, results=results)
    return harness.finish(report, args.out, print_report)


if __name__ == "__main__":
    main()
