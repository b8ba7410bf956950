"""Where a fresh process's first online decision goes, phase by phase (CPU and wall seconds).

``online_bench.py`` times a fresh process from spawn to its first decision. This script splits
that time for one FairX-TS agent (Beta-Bernoulli posterior, merit exp(4 mu), K = 10) with a warm
persistent compilation cache: ``import jax``, ``import bayesfair`` (what is left after JAX),
building the policy (the policy and posterior modules are imported on first use), importing the
online agent's modules, ``bf.online(...)`` (tracing, lowering and loading the init program) and
the first ``select``. CPU seconds (``time.process_time``, all threads of the process) move less
with the machine's load than wall seconds, so both are printed: medians over ``--repeats`` fresh
processes, one after another. The first process fills the cache folder and is not counted.

Usage: ``python experiments/benchmarks/online_first_decision.py [--repeats 5] [--cache DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = """
import time
clock, cpu = time.perf_counter, time.process_time
stamps = [(clock(), cpu())]
import jax  # noqa: F401
stamps.append((clock(), cpu()))
import bayesfair as bf
stamps.append((clock(), cpu()))
policy = bf.fairx_ts(bf.beta_bernoulli(), bf.merit.exponential(4.0))
stamps.append((clock(), cpu()))
import bayesfair.workflow.online  # noqa: F401
stamps.append((clock(), cpu()))
agent = bf.online(policy, n_arms=10, seed=0)
stamps.append((clock(), cpu()))
agent.select()
stamps.append((clock(), cpu()))
import json
print(json.dumps([[b[0] - a[0], b[1] - a[1]] for a, b in zip(stamps, stamps[1:])]))
"""
PHASES = ("import jax", "import bayesfair (after JAX)", "bf.fairx_ts(...): policy and posterior modules",
          "the online agent's modules", "bf.online(...): init program, initial state",
          "first select: select program, the call")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=5, help="fresh processes timed (default 5)")
    p.add_argument("--cache", default=None, help="persistent cache folder (default: a new temporary one)")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error(f"--repeats must be >= 1, got {args.repeats}")
    cache = args.cache or tempfile.mkdtemp(prefix="bf-online-cache-")
    env = {**os.environ, "BAYESFAIR_COMPILE_CACHE_DIR": cache}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)

    def child():
        out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    child()  # fills the cache
    load = os.getloadavg()
    rows = [child() for _ in range(args.repeats)]
    print(f"fresh FairX-TS processes, warm cache, {args.repeats} processes; load average {load[0]:.1f} -> "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'phase':50s} {'CPU s':>7s} {'wall s':>7s}")
    for i, name in enumerate(PHASES):
        print(f"{name:50s} {statistics.median(r[i][1] for r in rows):7.2f} "
              f"{statistics.median(r[i][0] for r in rows):7.2f}")
    print(f"{'spawn excluded; to the first decision':50s} {statistics.median(sum(x[1] for x in r) for r in rows):7.2f} "
          f"{statistics.median(sum(x[0] for x in r) for r in rows):7.2f}")
    return rows


if __name__ == "__main__":
    main()
