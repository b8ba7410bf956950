"""Bayesian regret: TS, FairX-TS and a mismatched-prior TS on instances drawn from the prior.

Every run draws K Bernoulli arm means from the prior Beta(1, 1) (the environment
``prior_environment(beta_bernoulli(1, 1), K)``, which records that prior in its config). TS and
FairX-TS use that prior; "TS (Beta(20, 20))" believes the means are near 1/2 (simulate warns that
its prior is not the instances'). All policies see the same instances and reward draws (common
random numbers), so differences are paired over runs. The final conventional regret averaged over
runs is the Bayesian regret; FairX-TS trades it for a small fairness regret (merit f(mu) =
exp(4 mu)).

Usage: python experiments/bayesian_regret/run.py [--arms 5] [--horizon 1000] [--runs 500] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np

import bayesfair as bf  # before jax: exposes one CPU device per core
from bayesfair.environments.prior import prior_environment


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arms", type=int, default=5)
    p.add_argument("--horizon", type=int, default=1000)
    p.add_argument("--runs", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    prior = bf.beta_bernoulli(1.0, 1.0)
    merit = bf.merit.exponential(4.0)
    env = prior_environment(prior, args.arms)
    policies = {"TS": bf.thompson(prior), "FairX-TS": bf.fairx_ts(prior, merit),
                "TS (Beta(20, 20))": bf.thompson(bf.beta_bernoulli(20.0, 20.0))}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = bf.simulate(args.seed, env, policies, args.horizon, args.runs, merit=merit,
                         checkpoints=[args.horizon])
    for w in caught:
        print(f"warning: {w.message}")
    last = ds.isel(checkpoint=-1)
    regret = last["regret"].values  # [policy, run]
    fair = last["fairness_regret"].values
    n = args.runs
    print(f"\nBayesian regret over {n} instances from Beta(1, 1)^{args.arms}, T = {args.horizon}:")
    print(f"{'policy':<20}{'regret':>10}{'s.e.':>8}{'fairness regret':>18}{'s.e.':>8}")
    for i, name in enumerate(ds["policy"].values):
        print(f"{name:<20}{regret[i].mean():>10.2f}{regret[i].std(ddof=1) / np.sqrt(n):>8.2f}"
              f"{fair[i].mean():>18.2f}{fair[i].std(ddof=1) / np.sqrt(n):>8.2f}")
    d = regret[2] - regret[0]
    z = d.mean() / (d.std(ddof=1) / np.sqrt(n))
    print(f"\nmismatched - matched TS regret, paired over runs: {d.mean():.2f} +- {d.std(ddof=1) / np.sqrt(n):.2f} "
          f"(z = {z:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
