"""Bayesian regret: TS, FairX-TS and a mismatched-prior TS on instances drawn from the prior.

The study is the shipped config ``bayesian_regret``: every run draws K Bernoulli arm means
from U[0, 1] = Beta(1, 1), the prior of TS and FairX-TS (simulate recognizes it, so they are not
warned about); "TS (Beta(20, 20))" believes the means are near 1/2 (simulate warns that its prior
is not the instances'). All policies see the same instances and reward draws (common random
numbers), so differences are paired over runs. The final conventional regret averaged over runs
is the Bayesian regret; FairX-TS trades it for a small fairness regret (merit f(mu) = exp(4 mu)).
This script runs the config with its options as overrides and prints the paired comparison.

Usage: python experiments/bayesian_regret/run.py [--arms 5] [--horizon 1000] [--runs 500] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np

import bayesfair  # noqa: F401  (before jax: exposes one CPU device per core)
from bayesfair.workflow import shipped
from bayesfair.workflow.config import ConfigError, load_config

CONFIG = shipped.config_path("bayesian_regret")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arms", type=int, help="arms (default: the config's, 5)")
    p.add_argument("--horizon", type=int, help="rounds (default: the config's, 1000)")
    p.add_argument("--runs", type=int, help="runs (default: the config's, 500)")
    p.add_argument("--seed", type=int, help="seed (default: the config's, 0)")
    args = p.parse_args(argv)
    overrides = [f"{key}={value}" for key, value in (("environment.n_arms", args.arms), ("horizon", args.horizon),
                                                      ("runs", args.runs), ("seed", args.seed))
                 if value is not None]
    if args.horizon is not None:
        overrides.append(f"checkpoints=[{args.horizon}]")
    try:
        study = load_config(CONFIG, overrides)
    except ConfigError as exc:  # e.g. --runs 0: exit 2 naming the setting, not a traceback
        p.error(str(exc))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = study.run()
    for w in caught:
        print(f"warning: {w.message}")
    last = ds.isel(checkpoint=-1)
    regret = last["regret"].values  # [policy, run]
    fair = last["fairness_regret"].values
    n = study.runs
    print(f"\nBayesian regret over {n} instances from Beta(1, 1)^{study.env.spec.n_arms}, T = {study.horizon}:")
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
