"""The ``bayesfair`` command line.

``bayesfair demo`` runs the embedded default study (the main job of ``make demo``): FairX-TS,
FairX-UCB, FairX-EG, TS and UCB on a 10-arm Bernoulli problem with f(mu) = exp(4 mu).

Exit codes: 0 success, 2 bad arguments, 1 any other failure.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

__all__ = ["main", "DEMO_MEANS"]

# The demo problem: two close top arms (0.78 vs 0.80) show the winner-takes-all effect.
DEMO_MEANS = (0.10, 0.25, 0.35, 0.45, 0.50, 0.55, 0.62, 0.70, 0.78, 0.80)


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def _nonneg_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {v}")
    return v


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bayesfair", description="Fair bandits, done the Bayesian way.")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="command")
    d = sub.add_parser("demo", help="run the embedded default FairX study, print a table, write figures",
                       description="FairX-TS, FairX-UCB, FairX-EG, TS and UCB on a 10-arm Bernoulli "
                                   "problem with f(mu) = exp(4 mu).")
    d.add_argument("--runs", type=_positive_int, default=20, help="independent runs (default 20)")
    d.add_argument("--horizon", type=_positive_int, default=20_000, help="rounds per run (default 20000)")
    d.add_argument("--seed", type=_nonneg_int, default=0, help="integer seed (default 0)")
    d.add_argument("--c", type=float, default=4.0, help="merit steepness c in exp(c mu) (default 4)")
    d.add_argument("--out", type=Path, default=Path("demo-output"), help="output folder (default demo-output)")
    d.add_argument("--no-progress", action="store_true", help="do not print a progress bar")
    return p


def run_demo(args: argparse.Namespace) -> int:
    import bayesfair as bf
    from bayesfair import io, plotting

    merit = bf.merit.exponential(args.c)
    env = bf.bernoulli_arms(DEMO_MEANS)
    policies = {
        "FairX-TS": bf.fairx_ts(bf.beta_bernoulli(), merit),
        "FairX-UCB": bf.fairx_ucb(merit, horizon=args.horizon, delta=0.05),
        "FairX-EG": bf.fairx_eg(merit, epsilon=0.05),
        "TS": bf.thompson(bf.beta_bernoulli()),
        "UCB": bf.ucb1(),
    }
    t0 = time.perf_counter()
    ds = bf.simulate(args.seed, env, policies, args.horizon, args.runs, merit=merit,
                     progress=not args.no_progress, config={"job": "demo", "seed": args.seed})
    elapsed = time.perf_counter() - t0
    out = args.out
    io.write_results(ds, out / "demo.nc")
    f1 = plotting.save_figure(plotting.plot_regret(ds), out / "regret.png")
    f2 = plotting.save_figure(plotting.plot_exposure(ds), out / "exposure.png")

    import pandas as pd

    with pd.option_context("display.width", 140, "display.max_columns", 20, "display.precision", 3):
        print(f"\nbayesfair demo: {env.spec.n_arms} Bernoulli arms, f(mu) = exp({args.c:g} mu), "
              f"{args.runs} runs x {args.horizon:,} rounds, seed {args.seed}")
        table = io.summary_table(ds)
        print("\nCumulative regret at T (mean and standard error over runs):")
        print(table[["fairness_regret", "fairness_regret_se", "reward_regret", "reward_regret_se",
                     "regret", "regret_se"]].to_string(float_format=lambda v: f"{v:,.1f}"))
        print("\nExposure share per arm at T (average pi_t over rounds and runs) vs merit share pi*:")
        print(io.exposure_table(ds).to_string(float_format=lambda v: f"{v:.3f}"))
    print(f"\nsimulated in {elapsed:.1f} s; wrote {out / 'demo.nc'}, {f1}, {f2}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.version:
        import bayesfair

        print(bayesfair.__version__)
        return 0
    if args.command == "demo":
        return run_demo(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
