"""NUTS settings of the group-bias GLM compared on one recipe design, in one process.

Fits :func:`bayesfair.inference.glm_fit.fit_glm` (on the design's distinct cells, float64) on a
uniform subsample of a recipe's default design (``glm_cells_bench.design``) once per variant and
prints, per variant: NUTS seconds, mean leapfrog steps per iteration, the adapted step size, max
R-hat, min bulk/tail ESS (over every variable), min bulk ESS per second, divergences and the bias
estimand's posterior mean and sd (the variants must agree within Monte Carlo error). Variants:
``diag`` (``fit_glm``'s default: diagonal mass matrix, every random effect non-centred), ``dense``
(dense mass matrix), ``c:gamma+u`` (those effects centred; any of gamma, u, lambda), parts joined
by commas (``c:gamma+u+lambda,dense``, ``auto,ta:0.95``), ``ta:0.95`` for a target acceptance,
``partial`` (every effect centred by the centring weights of a one-chain centred pilot, dense
mass; the pilot is not counted in the seconds), ``partial:0.9`` (each element centred if its weight
is at least 0.9, else non-centred) and ``auto``
(``centered="auto"``: the form :func:`~bayesfair.inference.glm_fit.choose_form` picks, printed with
its rule and the centring weights; its pilots are not counted in the seconds).

Usage: python experiments/benchmarks/glm_sampler_ab.py [--recipe adult_sex] [--rows 5000 (0: all)] [--warmup 500]
       [--samples 500] [--chains 2] [--variants "diag;dense;c:gamma+u"]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from glm_cells_bench import design  # noqa: E402  (the recipes' designs)

from bayesfair.inference.glm_fit import (  # noqa: E402
    RANDOM_EFFECTS,
    bias_estimand,
    centring_weights,
    compress_design,
    fit_glm,
)


def partial_weights(des, seed):
    """Centring weights from a one-chain pilot of the centred form (dense mass), as choose_form's."""
    cells, counts = compress_design(des)
    pilot = fit_glm(des, centered=RANDOM_EFFECTS, dense_mass=True, num_warmup=150, num_samples=50, num_chains=1,
                    seed=seed, warn=False)
    flat = {k: np.asarray(v).reshape(-1, *np.shape(v)[2:]) for k, v in pilot.samples.items()}
    w = centring_weights(flat, cells, weights=counts)
    print("  partial: centring weights " + ", ".join(f"{k} {v.min():.2f}-{v.max():.2f}" for k, v in w.items()),
          flush=True)
    return {k: v.tolist() for k, v in w.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default="adult_sex", choices=("compas", "adult_sex", "adult_race", "income"))
    p.add_argument("--rows", type=int, default=5000)
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--samples", type=int, default=500)
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--variants", default="diag;dense;c:gamma+u")
    a = p.parse_args(argv)
    full = design(a.recipe)
    rows = full.y.size if a.rows <= 0 else min(a.rows, full.y.size)
    idx = np.sort(np.random.default_rng(0).choice(full.y.size, rows, replace=False))
    des = full._replace(group=full.group[idx], bucket=full.bucket[idx], X=full.X[idx], y=full.y[idx])
    for v in a.variants.split(";"):
        kw = {"centered": "auto"} if "auto" in v.split(",") else {"centered": (), "dense_mass": False}
        for part in v.split(","):
            if part == "auto":
                continue
            if part.startswith("partial"):
                w = partial_weights(des, a.seed)
                if part.startswith("partial:"):  # each element centred or not: weight >= the threshold
                    cut = float(part.removeprefix("partial:"))
                    w = {k: (np.asarray(v) >= cut).astype(float).tolist() for k, v in w.items()}
                kw["centered"] = w
                kw["dense_mass"] = True
                continue
            if part.startswith("c:"):
                kw["centered"] = tuple(part.removeprefix("c:").split("+"))
            elif part.startswith("ta:"):
                kw["target_accept"] = float(part.removeprefix("ta:"))
            elif part in ("dense", "diag"):
                kw["dense_mass"] = part == "dense"
            else:
                p.error(f"unknown variant part {part!r} in {v!r}")
        f = fit_glm(des, num_warmup=a.warmup, num_samples=a.samples, num_chains=a.chains, seed=a.seed, warn=False,
                    **kw)
        c, st = f.convergence, f.sample_stats
        est = next(iter(bias_estimand(f, des).values()))
        load = " ".join(open("/proc/loadavg").read().split()[:3])
        print(f"{a.recipe} {des.y.size} rows, {v}: {f.seconds:.1f} s, steps/iter {np.mean(st['n_steps']):.1f}, "
              f"step {np.mean(st['step_size'][:, -1]):.4f}, R-hat {c.max_rhat:.3f}, ESS bulk/tail "
              f"{c.min_ess_bulk:.0f}/{c.min_ess_tail:.0f} ({c.min_ess_bulk / f.seconds:.2f}/s), div {c.divergences}, "
              f"estimand {est['mean']:+.4f} (sd {est['sd']:.4f}); load {load}", flush=True)
        form = f.config["form"]
        if kw["centered"] == "auto":
            print(f"  form {form['form']} ({form['rule']}); centring weights "
                  + ", ".join(f"{k} {w['min']:.2f}-{w['max']:.2f}" for k, w in form["weights"].items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
