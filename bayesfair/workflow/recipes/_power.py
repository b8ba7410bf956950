"""The ``--power`` option of the group-bias recipes (``--model glm``): the estimand's power on the design.

After the recipe's fit, :func:`bayesfair.inference.glm_power.glm_power` draws ``--power-reps``
semi-synthetic outcome sets per effect size in ``--power-effects`` (level shifts ``delta`` of the
studied group, in log-odds for the discrete likelihoods; every other parameter at the fit's
posterior mean, the other bias terms 0), refits each with the recipe's NUTS settings and writes
to ``--out``:

- ``power.json``: per effect size the true estimand on the outcome's scale, the coverage of the
  90% interval and the power (P(interval excludes 0)), each with its binomial standard error and
  Wilson 95% interval, over every replicate and over the converged ones, the number of fits that
  failed the convergence verdict, and every replicate's interval;
- ``power.png``: :func:`bayesfair.plotting.plot_power`.

The replicates run round by round (one per effect size) and ``power.json`` is rewritten after
each round with ``"complete": false``, so a run stopped early keeps what it measured.

The power is that of the fitted rows (``--rows``): a subsample's power is not the full data set's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import jax

from bayesfair.inference.glm_power import glm_power, power_point
from bayesfair.plotting import plot_power, save_figure
from bayesfair.simulation.results import write_text

#: The files ``--power`` writes into ``--out``.
OUTPUTS = ("power.json", "power.png")


def add_args(p: argparse.ArgumentParser) -> None:
    """The ``--power`` flags."""
    p.add_argument("--power", action="store_true",
                   help="--model glm: after the fit, measure the bias estimand's coverage and power on this design "
                        "by semi-synthetic refits (power.json, power.png)")
    p.add_argument("--power-effects", default="0,0.25,0.5",
                   help="--power: level shifts delta of the studied group, comma-separated, on delta's scale "
                        "(log-odds for the discrete likelihoods) (%(default)s)")
    p.add_argument("--power-reps", type=int, default=20,
                   help="--power: semi-synthetic data sets per effect size, each fitted once (%(default)s)")
    p.add_argument("--power-group", default=None,
                   help="--power: the studied group (default: the first non-reference group)")


def check_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Parse ``--power-effects`` into ``args.power_effects`` (a list) and reject bad values (exit 2)."""
    try:
        effects = [float(v) for v in str(args.power_effects).split(",") if v.strip()]
    except ValueError:
        p.error(f"--power-effects must be comma-separated numbers, e.g. 0,0.25,0.5; got {args.power_effects!r}")
    if not effects or len(set(effects)) != len(effects) or any(e != e or abs(e) == float("inf") for e in effects):
        p.error(f"--power-effects must be distinct finite numbers, e.g. 0,0.25,0.5; got {args.power_effects!r}")
    args.power_effects = effects
    if args.power_reps < 1:
        p.error(f"--power-reps must be >= 1, got {args.power_reps}")
    if args.power and args.model != "glm":
        p.error("--power needs --model glm (the level shift delta of bayesfair.posteriors.group_glm)")


def plan(args: argparse.Namespace) -> str:
    """One line saying what ``--power`` would run (for ``--dry-run``)."""
    if not args.power:
        return "power study: off (--power to measure the estimand's coverage and power after the fit)"
    n = len(args.power_effects) * args.power_reps
    return (f"power study: effects delta = {', '.join(f'{e:g}' for e in args.power_effects)} "
            f"(group {args.power_group or 'the first non-reference group'}), {args.power_reps} replicates each: "
            f"{n} more NUTS fits of {args.chains} x ({args.warmup} + {args.samples}), writing power.json and "
            "power.png")


def run(args: argparse.Namespace, design: Any, fit_: Any, out: Path, title: str, *, ci_prob: float) -> dict[str, Any]:
    """The power study of the module docstring; prints a table, returns ``power.json``'s content."""
    form = fit_.config.get("form", {})  # the refits sample in the form chosen for the recipe's fit
    nuts = dict(num_warmup=args.warmup, num_samples=args.samples, num_chains=args.chains,
                target_accept=args.target_accept, dense_mass=bool(form.get("dense_mass", args.dense_mass)),
                centered=form.get("centered", ()))
    print(f"power study: {len(args.power_effects)} effect sizes x {args.power_reps} replicates, "
          f"generating point: the posterior mean of the fit"
          + ("" if fit_.converged else " (WARNING: the fit did NOT converge, so the point is uncertain)"), flush=True)
    reading = ("semi-synthetic outcomes from the fitted model at its posterior mean with the group's level shift "
               "set to each effect (no other bias term), refitted as the recipe fits; the power is that of these rows "
               "(a subsample's power is not the full data set's)")

    def content(res: Any, complete: bool) -> dict[str, Any]:
        return {**res.as_dict(), "complete": complete, "fit_converged": bool(fit_.converged), "seed": int(args.seed),
                "reading": reading}

    def partial(res: Any) -> None:  # a run stopped early keeps the rounds done
        write_text(out / "power.json", json.dumps(content(res, False), indent=2, default=str))

    res = glm_power(design, power_point(fit_), jax.random.key(args.seed), effects=args.power_effects,
                    replicates=args.power_reps, group=args.power_group, ci_prob=ci_prob,
                    point_label="posterior mean of the recipe's fit", checkpoint=partial,
                    priors=fit_.model.keywords["priors"],
                    progress=lambda line: print(f"  {line}", flush=True), **nuts)
    done = content(res, True)
    write_text(out / "power.json", json.dumps(done, indent=2, default=str))
    save_figure(plot_power(res, title=title), out / "power.png")
    pct = int(round(100 * ci_prob))
    print(f"power of the bias estimand ({res.group} vs {res.reference}, {res.scale}; {res.replicates} replicates "
          f"per effect, {res.design_rows} rows; +- binomial s.e.):")
    print(f"  {'delta':>7} {'estimand':>9} {'coverage of ' + str(pct) + '%':>18} {'P(excludes 0)':>16} "
          f"{'not converged':>14} {'errors':>6}")
    for r in res.rows:
        c, p = r["coverage"], r["power"]
        print(f"  {r['effect']:>7g} {r['true_estimand']:>+9.4f} {c['p']:>11.2f} +- {c['se']:.2f} "
              f"{p['p']:>9.2f} +- {p['se']:.2f} {r['not_converged']:>14d} {len(r['errors']):>6d}")
    print(f"  ({res.seconds:.0f} s; wrote {out / 'power.json'}, {out / 'power.png'})")
    return done
