"""Long-horizon check: FairX-TS (Beta-Bernoulli) with K = 60 arms, R = 50 runs, T = 1e7 rounds.

The study is the shipped config ``long_horizon``; this script runs it with the command-line
options as config overrides, adds the checkpoint T/100 to the grid and reports the peak resident
memory (the simulator's memory does not grow with the horizon: metrics are accumulated online and
only recorded on the checkpoint grid).

Usage: python experiments/long_horizon/run.py [--horizon 10000000] [--runs 50] [--arms 60]
       [--chunk-size 8192] [--seed 0] [--out results/long_horizon] [--figure-from RESULTS.nc]
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
from bayesfair.plotting import save_figure
from bayesfair.simulation.results import write_text
from bayesfair.workflow import shipped
from bayesfair.workflow.config import ConfigError, load_config

CONFIG = shipped.config_path("long_horizon")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--horizon", type=int, help="rounds (default: the config's, 1e7)")
    p.add_argument("--runs", type=int, help="runs (default: the config's, 50)")
    p.add_argument("--arms", type=int, help="arms (default: the config's, 60)")
    p.add_argument("--chunk-size", type=int, help="rounds per jitted call (default: the config's, 8192)")
    p.add_argument("--seed", type=int, help="seed (default: the config's, 0)")
    p.add_argument("--out", type=Path, default=Path("results/long_horizon"))
    p.add_argument("--figure-from", type=Path, metavar="NC",
                   help="only draw the figure from an existing results file (into --out) and exit")
    args = p.parse_args(argv)
    if args.figure_from is not None:
        if not args.figure_from.is_file():
            p.error(f"--figure-from: no results file at {args.figure_from}")
        print(figure(bf.read_results(args.figure_from), args.out / "long_horizon_fr.png"))
        return 0

    overrides = [f"{key}={value}" for key, value in (("horizon", args.horizon), ("runs", args.runs),
                                                      ("environment.n_arms", args.arms),
                                                      ("chunk_size", args.chunk_size), ("seed", args.seed))
                 if value is not None]
    try:
        study = load_config(CONFIG, overrides)
    except ConfigError as exc:  # e.g. --runs 0: exit 2 naming the setting, not a traceback
        p.error(str(exc))
    horizon = study.horizon
    marker = max(horizon // 100, 1)
    grid = np.union1d(study.checkpoints, [marker])
    study = load_config(CONFIG, [*overrides, f"checkpoints={grid.tolist()}"])
    t0 = time.perf_counter()
    ds = study.run(progress=True)
    wall = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    path = bf.write_results(ds, args.out / "long_horizon.nc")
    fr = ds["fairness_regret"].sel(policy="FairX-TS").values
    summary = {
        "horizon": horizon, "runs": study.runs, "arms": study.env.spec.n_arms, "wall_seconds": wall,
        "run_rounds_per_second": horizon * study.runs / wall, "peak_rss_mb": peak_mb,
        "fairness_regret_at_T_mean": float(fr[:, -1].mean()),
        "fairness_regret_at_T_over_100_mean": float(fr[:, ds["checkpoint"].values == marker].mean()),
        "results_file": str(path),
    }
    print(json.dumps(summary, indent=2))
    write_text(args.out / "summary.json", json.dumps(summary, indent=2) + "\n")
    figure(ds, args.out / "long_horizon_fr.png")
    return 0


def figure(ds, path: Path) -> Path:
    """Log-log fairness regret (mean over runs, +- 2 s.e. band) with a sqrt(t) line through its value at T."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = ds["checkpoint"].values.astype(float)
    fr = ds["fairness_regret"].sel(policy="FairX-TS").values
    mean, se = fr.mean(axis=0), fr.std(axis=0, ddof=1) / np.sqrt(fr.shape[0])
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    ax.fill_between(t, mean - 2 * se, mean + 2 * se, alpha=0.3, lw=0)
    ax.plot(t, mean, label=f"FairX-TS, mean of {fr.shape[0]} runs (band: +- 2 s.e.)")
    ax.plot(t, mean[-1] * np.sqrt(t / t[-1]), "k--", lw=1, label="c sqrt(t), through the value at T")
    ax.set(xscale="log", yscale="log", xlabel="round t", ylabel="fairness regret FR(t)",
           title=f"K = {ds.sizes['arm']} Bernoulli arms, f(mu) = exp(4 mu)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)  # atomic; closes the figure


if __name__ == "__main__":
    sys.exit(main())
