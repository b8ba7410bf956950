"""Long-horizon check: FairX-TS (Beta-Bernoulli) with K = 60 arms, R = 50 runs, T = 1e7 rounds.

Shows that the simulator's memory does not grow with the horizon (metrics are accumulated
online and only recorded on the checkpoint grid) and reports the peak resident memory.

Usage: python experiments/long_horizon/run.py [--horizon 10000000] [--runs 50] [--arms 60]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

import bayesfair as bf  # before jax: exposes one CPU device per core


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--horizon", type=int, default=10_000_000)
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--arms", type=int, default=60)
    p.add_argument("--chunk-size", type=int, default=8192)
    p.add_argument("--out", type=Path, default=Path("results/long_horizon"))
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    merit = bf.merit.exponential(4.0)
    env = bf.bernoulli_arms(bf.UniformMeans(0.1, 0.9, n_arms=args.arms))
    pol = {"FairX-TS": bf.fairx_ts(bf.beta_bernoulli(), merit)}
    t0 = time.perf_counter()
    grid = np.union1d(bf.checkpoint_grid(args.horizon), [max(args.horizon // 100, 1)])
    ds = bf.simulate(args.seed, env, pol, args.horizon, args.runs, merit=merit, checkpoints=grid,
                     chunk_size=args.chunk_size, progress=True)
    wall = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    path = bf.write_results(ds, args.out / "long_horizon.nc")
    fr = ds["fairness_regret"].sel(policy="FairX-TS").values
    summary = {
        "horizon": args.horizon, "runs": args.runs, "arms": args.arms, "wall_seconds": wall,
        "run_rounds_per_second": args.horizon * args.runs / wall, "peak_rss_mb": peak_mb,
        "fairness_regret_at_T_mean": float(fr[:, -1].mean()),
        "fairness_regret_at_T_over_100_mean": float(fr[:, grid == max(args.horizon // 100, 1)].mean()),
        "results_file": str(path),
    }
    print(json.dumps(summary, indent=2))
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
