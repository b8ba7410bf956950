"""Which coordinate fails? The hierarchical fallback's refreshes on a stream of pulls, checked one by one.

The setting of docs/mcmc.md's example: four Bernoulli arms with means [0.2, 0.5, 0.55, 0.8] in
groups [0, 0, 1, 1], ``hierarchical_logit_normal`` refreshed every ``--refresh-every`` (100)
observations. Instead of a policy, the pulls come at FairX's fair shares for the merit exp(4 mu)
(0.05, 0.17, 0.21, 0.57), ``--runs`` independent streams vmapped, so every refresh is known in
advance and its draws can be inspected. Each refresh is warm-started from the previous one exactly
as inside the simulator (:func:`bayesfair.posteriors.mcmc.refresh`). Printed: the fraction of
refreshes that fail the fallback's own thresholds (R-hat, ESS, any divergence), early (the first
10) and later; which unconstrained coordinate has the smallest ESS / largest R-hat when those fail;
the median ESS per coordinate, the mean leapfrog steps per draw and the step size.

Usage: ``python experiments/benchmarks/hierarchical_refresh_stream.py [--centered false|true|auto]
[--centring-scale C] [--runs 8] [--refreshes 50] [--setting name=value ...]`` (NUTSSettings fields, e.g.
``--setting target_accept=0.95``). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import bayesfair  # noqa: F401  one CPU device per core, before the first JAX operation

# isort: split
import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.posteriors._mcmc_history import ArmCounts
from bayesfair.posteriors.hierarchical import hierarchical_logit_normal
from bayesfair.posteriors.mcmc import refresh, split_rhat_ess

MEANS = np.array([0.2, 0.5, 0.55, 0.8])
GROUPS = np.array([0, 0, 1, 1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--centered", default="false", choices=["auto", "false", "true"])
    p.add_argument("--centring-scale", type=float, default=None, help="centring_scale of the 'auto' form")
    p.add_argument("--runs", type=int, default=8)
    p.add_argument("--refreshes", type=int, default=50)
    p.add_argument("--refresh-every", type=int, default=100)
    p.add_argument("--seed", type=int, default=1, help="seed of the pulls and rewards (default 1)")
    p.add_argument("--setting", action="append", default=[], help="a NUTSSettings field, name=value (JSON value)")
    args = p.parse_args(argv)
    settings = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.setting)}
    centered = {"auto": "auto", "false": False, "true": True}[args.centered]
    post = hierarchical_logit_normal(GROUPS, centered=centered, centring_scale=args.centring_scale,
                                     refresh_every=args.refresh_every, **settings)
    r, b = args.runs, args.refresh_every
    share = np.exp(4 * MEANS) / np.exp(4 * MEANS).sum()
    rng = np.random.default_rng(args.seed)
    state = post.init(GROUPS.size)
    states = jax.tree.map(lambda x: jnp.broadcast_to(x, (r, *x.shape)), state)
    keys = jax.vmap(lambda i: jax.random.key_data(jax.random.fold_in(jax.random.key(0), i)))(jnp.arange(r))
    states = states._replace(key=keys)
    step = jax.jit(jax.vmap(lambda s: refresh(post, s)))
    succ, trials = np.zeros((r, GROUPS.size)), np.zeros((r, GROUPS.size))
    offsets = "z_partial" if centered == "auto" else ("logit" if centered else "z")
    names = ["loc0", "loc1", "log_scale0", "log_scale1"] + [f"{offsets}{i}" for i in range(GROUPS.size)]
    bad, div, ess, rhat, steps, size = [], [], [], [], [], []
    t0, load = time.time(), os.getloadavg()[0]
    for j in range(1, args.refreshes + 1):
        pulls = rng.multinomial(b, share, size=r)
        trials += pulls
        succ += rng.binomial(pulls, MEANS)
        states = states._replace(history=ArmCounts(jnp.asarray(succ, jnp.float32), jnp.asarray(trials, jnp.float32)),
                                 n=jnp.full((r,), j * b, jnp.int32))
        before = np.asarray(states.bad_refreshes)
        states = step(states)
        bad.append(np.asarray(states.bad_refreshes) - before)
        s = states.samples
        unc = np.concatenate([np.asarray(s["group_loc"]), np.log(np.asarray(s["group_scale"])), np.asarray(s[offsets])],
                             axis=-1)
        per = [[split_rhat_ess(jnp.asarray(unc[i][:, :, [c]])) for c in range(unc.shape[-1])] for i in range(r)]
        rhat.append([[float(a) for a, _ in row] for row in per])
        ess.append([[float(e) for _, e in row] for row in per])
        div.append(np.asarray(states.diverging).reshape(r, -1).any(axis=1))
        steps.append(np.asarray(states.num_steps).reshape(r, -1).mean(axis=1))
        size.append(np.asarray(states.step_size).mean(axis=1))
    bad, div = np.array(bad) > 0, np.array(div)
    ess, rhat = np.array(ess).reshape(-1, len(names)), np.array(rhat).reshape(-1, len(names))
    steps, size = np.array(steps), np.array(size)
    print(f"centered={centered!r} centring_scale={args.centring_scale} {settings} runs {r} x {args.refreshes} "
          f"refreshes every {b}: "
          f"{time.time() - t0:.0f} s, load average {load:.1f} -> {os.getloadavg()[0]:.1f}")
    print(f"failed refreshes: {bad.sum()} of {bad.size} ({bad.mean():.1%}); the first 10: {bad[:10].mean():.1%}, "
          f"later: {bad[10:].mean():.1%}")
    print(f"with a divergence {div.mean():.1%}, ESS < 20 {(ess.min(1) < 20).mean():.1%}, "
          f"R-hat >= 1.1 {(rhat.max(1) >= 1.1).mean():.1%}")
    low, high = ess.min(1) < 20, rhat.max(1) >= 1.1
    print("smallest-ESS coordinate of the refreshes with ESS < 20:",
          dict(zip(names, np.bincount(ess[low].argmin(1), minlength=len(names)).tolist(), strict=True)))
    print("largest-R-hat coordinate of the refreshes with R-hat >= 1.1:",
          dict(zip(names, np.bincount(rhat[high].argmax(1), minlength=len(names)).tolist(), strict=True)))
    print("median ESS per coordinate:", dict(zip(names, np.round(np.median(ess, 0)).tolist(), strict=True)))
    print(f"leapfrog steps per draw: first 10 refreshes {steps[:10].mean():.1f}, later {steps[10:].mean():.1f}; "
          f"step size {size[:10].mean():.3f}, {size[10:].mean():.3f}")
    print("failed refreshes by refresh:", bad.sum(1).tolist())


if __name__ == "__main__":
    main()
