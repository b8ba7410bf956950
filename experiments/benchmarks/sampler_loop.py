"""Stand-alone cost of the exact Beta draw in a vmapped round loop, old sampler vs current.

A ``fori_loop`` of ``--rounds`` rounds per run, vmapped over ``R`` runs (one device, plain
``jax.jit``), each round drawing Beta(alpha, beta) for K arms with ``_random.beta`` and updating
the pulled arm (the argmax) with a fair coin: the sampler's share of a Thompson-sampling round
without the simulator around it. Prints compile+first-call and steady seconds and milliseconds
per round for the current ``bayesfair/core/_random.py`` and, with ``--old FILE``, for another copy of
it (e.g. ``git show <commit>:bayesfair/core/_random.py > /tmp/old_random.py``).

Usage: ``python experiments/benchmarks/sampler_loop.py --runs 2000 --arms 10 --rounds 1000 [--old FILE]``
"""

from __future__ import annotations

import argparse
import importlib.util
import time

import bayesfair  # noqa: F401  (before jax: one CPU device per core, though this script uses one)

# isort: split
import jax
import jax.numpy as jnp
from jax import lax

from bayesfair.core import _random


def _loop(beta, runs: int, arms: int, rounds: int):
    def one_run(key, a, b):
        def body(t, c):
            a, b, acc = c
            k_draw, k_coin = jax.random.split(jax.random.fold_in(key, t))
            theta = beta(k_draw, a, b, allow_small=False)
            hit = jnp.arange(arms) == jnp.argmax(theta)
            r = (jax.random.uniform(k_coin) < 0.5).astype(jnp.float32)
            return a + hit * r, b + hit * (1.0 - r), acc + jnp.max(theta)
        return lax.fori_loop(0, rounds, body, (a, b, jnp.float32(0.0)))

    fn = jax.jit(jax.vmap(one_run))
    args = (jax.random.split(jax.random.key(0), runs), jnp.ones((runs, arms)), jnp.ones((runs, arms)))
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    t1 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, float(out[2].mean())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--arms", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--old", help="path of another _random.py to compare with")
    args = ap.parse_args(argv)
    for name in ("runs", "arms", "rounds"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    samplers = {"current": _random.beta}
    if args.old:
        spec = importlib.util.spec_from_file_location("old_random", args.old)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        samplers = {"old": old.beta, **samplers}
    for name, beta in samplers.items():
        first, steady, mean_max = _loop(beta, args.runs, args.arms, args.rounds)
        print(f"{name:8s} R={args.runs} K={args.arms} rounds={args.rounds}: compile+first {first:.2f} s, "
              f"steady {steady:.2f} s, {1e3 * steady / args.rounds:.3f} ms/round "
              f"(mean sum of max theta {mean_max:.1f})")


if __name__ == "__main__":
    main()
