"""Where a Beta-Bernoulli FairX-TS round's time goes inside ``simulate``: variants, one process each.

- ``exact``: the study as ``grid_bench.py`` runs it (FairX-TS, K arms, merit exp(4 mu), FairX regrets);
- ``gaussian``: the Gamma draws replaced by one Gaussian each (mean a, sd sqrt(a); inexact, a
  measurement of everything but the exact sampler only);
- ``no-metrics``: without the FairX regrets;
- ``one-device``: ``devices=1`` (the simulator otherwise shards the runs over one CPU device per core);
- ``uniform``: the Uniform Random policy instead (no posterior, no draw but the arm's): the cost of
  the simulator's own round (environment, arm draw, bookkeeping, FairX regrets), a floor for
  every policy on this problem;
- ``ts``: plain Thompson sampling on the same posterior (``grid_bench.py``'s TS row);
- ``nig``: FairX-TS with a Normal-Inverse-Gamma posterior (m0 0.5, kappa0 1, a0 1, b0 0.25; one
  Gamma draw for sigma^2 and one normal per arm) on the same Bernoulli arms.

Prints steady seconds (the second call), run-rounds per microsecond and the cores used (user CPU
time / wall time). ``bayesfair`` is imported before any JAX operation here on purpose: imported
after one, it cannot expose one device per core, every variant runs on one device, and the import
warns (importing JAX itself first is fine).

Usage: ``python experiments/benchmarks/round_profile.py exact --runs 2000 --horizon 4000 [--arms 10]``
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import bayesfair  # before any JAX operation: one CPU device per core (see the docstring)

# isort: split
import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import grid_bench as gb  # noqa: E402

from bayesfair.core import _random  # noqa: E402
from bayesfair.simulation.metric_parts import FairXRegrets  # noqa: E402

VARIANTS = ("exact", "gaussian", "no-metrics", "one-device", "uniform", "ts", "nig")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variant", choices=VARIANTS)
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--horizon", type=int, default=4000)
    ap.add_argument("--arms", type=int, default=10)
    args = ap.parse_args(argv)
    for name in ("runs", "horizon", "arms"):
        if getattr(args, name) < 2:
            ap.error(f"--{name} must be >= 2, got {getattr(args, name)}")
    if args.variant == "gaussian":
        _random.gamma = lambda key, a, allow_small=True: jnp.maximum(
            a + jnp.sqrt(a) * jax.random.normal(key, a.shape), 1e-3)
    merit = bayesfair.core.merit.exponential(gb.MERIT_C)
    env = bayesfair.bernoulli_arms(gb.bernoulli_means(args.arms, 0))
    nig = bayesfair.normal_inverse_gamma(m0=0.5, kappa0=1.0, a0=1.0, b0=0.25)
    policy = {"uniform": bayesfair.uniform, "ts": lambda: bayesfair.thompson(bayesfair.beta_bernoulli()),
              "nig": lambda: bayesfair.fairx_ts(nig, merit)}.get(
        args.variant, lambda: bayesfair.fairx_ts(bayesfair.beta_bernoulli(), merit))()
    metrics = [] if args.variant == "no-metrics" else [FairXRegrets(merit)]
    devices = 1 if args.variant == "one-device" else None

    def run():
        return bayesfair.simulate(0, env, {"p": policy}, args.horizon, args.runs, merit=merit, metrics=metrics,
                                  checkpoints=[args.horizon // 2, args.horizon], devices=devices)

    run()  # compile (or load from the persistent cache)
    cpu0, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_utime, time.perf_counter()
    run()
    wall = time.perf_counter() - t0
    cores = (resource.getrusage(resource.RUSAGE_SELF).ru_utime - cpu0) / wall
    print(f"{args.variant:10s} R={args.runs} T={args.horizon} K={args.arms}: steady {wall:.2f} s, "
          f"{args.runs * args.horizon / wall / 1e6:.2f}M run-rounds/s, {cores:.2f} cores "
          f"({jax.local_device_count()} devices)")


if __name__ == "__main__":
    main()
