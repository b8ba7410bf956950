"""The ``--model glm`` path of the group-bias recipes: fit, check, estimate, write, print.

The model is :func:`bayesfair.posteriors.group_glm.group_glm_model` (a level shift with its own
prior, a bucket effect shared across groups, a group-by-bucket deviation, slope differences
shrunk separately); the fit is :func:`bayesfair.inference.glm_fit.fit_glm` (NUTS, 4 chains,
float64, target acceptance 0.95 unless the recipe sets its own (COMPAS: 0.99), the random
effects centred, split or non-centred as short pilots measure: ``--glm-form``,
:func:`~bayesfair.inference.glm_fit.choose_form`; the fit without bias reuses the choice). Outputs in ``--out``:

- ``posterior.nc``: the DataTree of :func:`~bayesfair.inference.glm_fit.glm_tree` (posterior and
  sample_stats with every draw; log_likelihood and posterior_predictive on 400 thinned draws;
  observed_data);
- ``bias_estimand.csv``: per non-reference group the average counterfactual difference on the
  outcome's scale (mean, sd, 90% interval, P(> 0)); conditioning on mediators makes it a direct
  effect;
- ``prior_predictive.png``: the prior predictive distribution of the outcome's mean per row
  (the priors are weakly informative on the logit scale: look that it is not piled at 0 and 1);
- ``calibration.png`` (0/1 outcomes): ArviZ's PAV calibration plot;
- ``likelihoods.csv`` (``--compare-likelihoods``): every candidate likelihood's verdict, checks,
  elpd and estimand;
- ``loo_compare.csv`` and ``summary.json`` (with ``detectable_effect``: per group, the effect on
  the estimand's scale its 90% interval would exclude 0 for at 90% power, in the large-sample
  approximation from the posterior sd, :func:`detectable`);
- ``power.json`` and ``power.png`` (``--power``): the estimand's coverage and power on the design
  (:mod:`bayesfair.workflow.recipes._power`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from typing import Any

import jax
import numpy as np

from bayesfair.diagnostics import calibration_check, check_lines, compare_bias, ppc_verdict
from bayesfair.inference.glm_fit import (
    RANDOM_EFFECTS,
    bias_estimand,
    build_glm,
    compress_design,
    fit_glm,
    glm_design,
    glm_tree,
    linear_predictor,
)
from bayesfair.inference.glm_power import detectable_effect
from bayesfair.plotting import save_figure
from bayesfair.posteriors.group_glm import CONTINUOUS_LIKELIHOODS, GlmPriors, expected_outcome
from bayesfair.simulation.results import write_results, write_text
from bayesfair.workflow.recipes import _power as power_recipe

CI_PROB = 0.9
#: The power at which every fit states the detectable effect (:func:`detectable`).
DETECT_POWER = 0.9


def _kind(likelihood: str) -> str:
    if likelihood in CONTINUOUS_LIKELIHOODS:
        return "continuous"
    return "binary" if likelihood == "bernoulli" else "discrete"


def check_fit(tree: Any, design: Any) -> dict[str, Any]:
    """PPC verdict (with each group's mean) and, for a 0/1 outcome, the calibration check."""
    groups = {nm: design.group == g for g, nm in enumerate(design.group_names)}
    kind = _kind(design.likelihood)
    levels = np.arange(design.n_trials + 1) if kind == "discrete" else None
    out = ppc_verdict(tree, kind=kind, groups=groups, levels=levels)
    if kind == "binary":
        out["calibration"] = calibration_check(tree)
        if not out["calibration"]["passed"]:
            out["failed"] = [*out["failed"], "calibration"]
            out["passed"] = False
    return out


def detectable(est: dict[str, dict[str, Any]], power: float = DETECT_POWER) -> dict[str, dict[str, Any]]:
    """Per group, the smallest effect on the estimand's scale that its ``CI_PROB`` interval would
    exclude 0 for with probability ``power``, in the large-sample approximation from the posterior
    sd (:func:`~bayesfair.inference.glm_power.detectable_effect`); a group whose sd is 0 (a
    degenerate posterior) has no entry."""
    return {g: {"effect": detectable_effect(v["sd"], power=power, ci_prob=CI_PROB), "power": power,
                "ci_prob": CI_PROB, "scale": v["scale"],
                "method": "normal approximation from the posterior sd of the estimand (calibrated, same sd under "
                          "every effect); --power measures it by semi-synthetic refits"}
            for g, v in est.items() if v["sd"] > 0}


def prior_predictive_figure(design: Any, path: Any, title: str, draws: int = 200, seed: int = 0,
                            priors: GlmPriors | None = None) -> dict[str, float]:
    """Histogram of the prior predictive mean outcome (the skew-t: its location) of every (draw, row)
    under ``priors`` (default: the model's defaults); returns its quantiles."""
    # matplotlib is heavy at import and needed only for the figures
    import matplotlib.pyplot as plt
    from numpyro.infer import Predictive

    model, args = build_glm(design, **({} if priors is None else {"priors": priors}))
    with jax.enable_x64(True):
        prior = Predictive(model, num_samples=draws)(jax.random.key(seed), *args[:3], None)
    rows = np.random.default_rng(seed).choice(design.y.size, min(2000, design.y.size), replace=False)
    s = {k: np.asarray(v) for k, v in prior.items()}
    sub = design._replace(group=design.group[rows], bucket=design.bucket[rows], X=design.X[rows], y=design.y[rows])
    eta = linear_predictor(s, sub)
    mean = expected_outcome(design.likelihood, eta, n_trials=design.n_trials, cutpoints=s.get("cutpoints"))
    fig, ax = plt.subplots(figsize=(6.0, 3.6), layout="constrained")
    ax.hist(mean.ravel(), bins=60, color="0.5")
    ax.axvline(float(design.y.mean()), color="k", lw=1.5, label=f"observed mean {design.y.mean():.3g}")
    # the skew-t's mean, eta + sigma E[T], is undefined for some tail weights the prior allows, so
    # its figure shows the location eta, whose differences between rows are those of the mean
    what = "location eta of y | x" if design.likelihood == "skew_t" else "E[y | x]"
    ax.set_xlabel(f"prior predictive {what} per row ({design.likelihood})")
    ax.set_ylabel("count of (draw, row)")
    ax.set_title(f"{title}\nprior predictive ({draws} draws x {rows.size} rows)", fontsize=10)
    ax.legend(fontsize=8)
    save_figure(fig, path)
    q = np.quantile(mean.ravel(), [0.05, 0.25, 0.5, 0.75, 0.95])
    return {f"q{int(100 * p):02d}": float(v) for p, v in zip((0.05, 0.25, 0.5, 0.75, 0.95), q, strict=True)}


def calibration_figure(tree: Any, path: Any, title: str) -> None:
    # arviz and matplotlib are heavy at import and needed only for this figure
    import arviz as az
    import matplotlib.pyplot as plt

    az.plot_ppc_pava(tree, backend="matplotlib")
    fig = plt.gcf()
    fig.set_size_inches(5.0, 4.5)
    fig.suptitle(f"{title}: PAV calibration (observed vs replicated band)", fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close("all")


def _without_bias_form(nuts: dict[str, Any], f1: Any) -> dict[str, Any]:
    """The NUTS settings of the fit without bias: with ``centered="auto"``, the form the pilots chose
    for the fit with bias, restricted to gamma (the only random effect left), so its pilots do not
    run twice."""
    if nuts.get("centered") != "auto":
        return nuts
    form = f1.config["form"]
    c = form["centered"]
    gamma = {k: v for k, v in c.items() if k == "gamma"} if isinstance(c, dict) else [e for e in c if e == "gamma"]
    return {**nuts, "centered": gamma, "dense_mass": form["dense_mass"]}


def _one(args: argparse.Namespace, table: Any, likelihood: str, y: Any, keep: Any, nuts: dict[str, Any],
         compare: bool) -> dict[str, Any]:
    design = glm_design(table, likelihood=likelihood, y=y, keep=keep, rows=args.rows, seed=args.seed, n_trials=9,
                        n_levels=10 if likelihood == "ordered_logistic" else None)
    cells = compress_design(design)[0].y.size
    print(f"fitting the {likelihood} GLM on {design.y.size:,} rows ({cells:,} distinct), NUTS {args.chains} x "
          f"({args.warmup} + {args.samples}), random effects {args.glm_form}"
          f"{'' if compare else ', without the comparison fit'}{'' if args.progress else ' (--progress for bars)'}",
          flush=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        f1 = fit_glm(design, **nuts)
        f0 = fit_glm(design, group_bias=False, **_without_bias_form(nuts, f1)) if compare else None
    tree = glm_tree(f1, design, seed=args.seed)
    out = {"design": design, "fit": f1, "fit0": f0, "tree": tree, "checks": check_fit(tree, design),
           "estimand": bias_estimand(f1, design, ci_prob=CI_PROB),
           "warnings": [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]}
    if f0 is not None:
        try:
            out["loo"] = compare_bias(tree, glm_tree(f0, design, seed=args.seed), names=("with bias", "without bias"))
        except (ValueError, FloatingPointError) as exc:
            out["loo"] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def run_glm(args: argparse.Namespace, table: Any, description: dict, *, y: Any, keep: Any, note: str, name: str,
            title: str, response: Any, likelihoods: tuple[str, ...], t0: float) -> int:
    """Fit the recipe's GLM with ``args.likelihood`` (and, with ``--compare-likelihoods``, the
    others of ``likelihoods``), write the module docstring's outputs and print the verdicts."""
    out = args.out
    nuts = dict(num_warmup=args.warmup, num_samples=args.samples, num_chains=args.chains, seed=args.seed,
                target_accept=args.target_accept, progress_bar=args.progress,
                priors=GlmPriors(ric_correction=args.ric_correction),
                **({"centered": "auto"} if args.glm_form == "auto" else
                   {"centered": RANDOM_EFFECTS, "dense_mass": True} if args.glm_form == "centered" else
                   {"dense_mass": args.dense_mass}))
    main = _one(args, table, args.likelihood, y, keep, nuts, not args.no_compare)
    for w in main["warnings"]:
        print(f"warning: {w}")
    design, f1, tree, checks, est = main["design"], main["fit"], main["tree"], main["checks"], main["estimand"]
    import arviz as az  # arviz is heavy at import; the likelihood table's LOO needs it

    rows = []
    others = [lk for lk in likelihoods if lk != args.likelihood] if args.compare_likelihoods else []
    for lk in [args.likelihood, *others]:
        if lk == args.likelihood:
            res = main
        else:
            args_lk = argparse.Namespace(**{**vars(args), "likelihood": lk})
            y_lk, keep_lk, _ = (y, keep, note) if response is None else response(table, args_lk)
            res = _one(args, table, lk, y_lk, keep_lk, nuts, False)
        loo = res["tree"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            elpd = az.loo(loo)
        first = next(iter(res["estimand"].values()))
        rows.append({"likelihood": lk, "default": lk == args.likelihood, "converged": res["fit"].converged,
                     "max_r_hat": res["fit"].convergence.max_rhat, "min_ess_bulk": res["fit"].convergence.min_ess_bulk,
                     "divergences": res["fit"].convergence.divergences, "checks_passed": res["checks"]["passed"],
                     "failed": ";".join(res["checks"]["failed"]), "elpd_loo": float(elpd.elpd), "se": float(elpd.se),
                     "estimand_mean": first["mean"], "estimand_lb": first["lb"], "estimand_ub": first["ub"],
                     "seconds": res["fit"].seconds})
    write_results(tree, out / "posterior.nc")
    est_rows = [{"group": g, **v} for g, v in est.items()]
    header = list(est_rows[0])
    write_text(out / "bias_estimand.csv", "\n".join([",".join(header)] + [",".join(str(r[h]) for h in header)
                                                                            for r in est_rows]) + "\n")
    prior_q = prior_predictive_figure(design, out / "prior_predictive.png", title,
                                      priors=f1.model.keywords["priors"])
    if design.likelihood == "bernoulli":
        calibration_figure(tree, out / "calibration.png", title)
    if len(rows) > 1:
        header = list(rows[0])
        write_text(out / "likelihoods.csv", "\n".join([",".join(header)] + [",".join(str(r[h]) for h in header)
                                                                             for r in rows]) + "\n")
    loo = main.get("loo", {})
    if "csv" in loo:
        write_text(out / "loo_compare.csv", loo["csv"])
    else:
        (out / "loo_compare.csv").unlink(missing_ok=True)
    summary = {
        "recipe": name, "model": "glm (bayesfair.posteriors.group_glm.group_glm_model)",
        "argv": list(sys.argv[1:]), "likelihood": args.likelihood, "response": note,
        "data": {**description, "rows": int(design.y.size), "rows_in_table": int(table.rewards.size),
                 "n_features": int(design.X.shape[1]), "groups": list(design.group_names),
                 "reference_group": design.group_names[design.reference], "buckets": list(design.bucket_names),
                 "rows_per_group_bucket": np.bincount(design.group * design.n_buckets + design.bucket,
                                                      minlength=design.n_groups * design.n_buckets).tolist(),
                 "preprocessing": table.info},
        "priors": f1.model.keywords["priors"]._asdict(), "nuts": {**f1.config, "seconds": f1.seconds},
        "convergence": f1.convergence.as_dict(),
        "convergence_without_bias": None if main["fit0"] is None else main["fit0"].convergence.as_dict(),
        "bias_estimand": est, "estimand_reading": (
            "average over the sensitive group's rows of E[y | its group] - E[y | reference group, same covariates "
            "and bucket]; the covariates include features the group may affect (mediators), so this is a direct "
            "effect, not the total gap"),
        "detectable_effect": detectable(est),
        "checks": {k: v for k, v in checks.items()}, "loo": {k: v for k, v in loo.items() if k != "csv"},
        "likelihoods": rows, "prior_predictive_quantiles": prior_q,
        "wall_seconds": time.perf_counter() - t0,
    }
    write_text(out / "summary.json", json.dumps(summary, indent=2, default=str))
    print(f"{title}: {design.y.size:,} rows, {design.n_groups} groups x {design.n_buckets} buckets, "
          f"d={design.X.shape[1]}; model glm, likelihood {args.likelihood} ({note}); NUTS {args.chains} x "
          f"({args.warmup} + {args.samples}) in {f1.seconds:.1f} s")
    form = f1.config["form"]
    weights = "; centring weights " + ", ".join(f"{k} {w['min']:.2f}-{w['max']:.2f}" for k, w in
                                                form["weights"].items()) if "weights" in form else ""
    print(f"random effects: {form['form']}, dense mass {bool(form['dense_mass'])} ({form['rule']}{weights})")
    print(f"convergence (with bias): {f1.convergence.message}")
    if main["fit0"] is not None:
        print(f"convergence (without bias): {main['fit0'].convergence.message}")
    print("\n".join(check_lines("checks", checks)))
    if "reading" in loo:
        print(f"LOO with vs without bias: {loo['reading']}")
    ref = design.group_names[design.reference]
    print(f"bias estimand ({summary['estimand_reading']}):")
    for g, v in est.items():
        print(f"  {g} vs {ref}: {v['mean']:+.4f} [{v['lb']:+.4f}, {v['ub']:+.4f}] ({int(100 * CI_PROB)}% interval, "
              f"{v['scale']}), P(> 0) {v['p_positive']:.3f}")
        if g in summary["detectable_effect"]:
            print(f"    detectable at {DETECT_POWER:.0%} power: |effect| >= "
                  f"{summary['detectable_effect'][g]['effect']:.4f} (normal approximation from the posterior sd)")
    if len(rows) > 1:
        print("likelihoods (default first):")
        for r in rows:
            verdict = "PASS" if r["checks_passed"] else "FAIL"
            print(f"  {r['likelihood']:<18} converged {r['converged']!s:<5} checks {verdict}"
                  f" elpd {r['elpd_loo']:.1f} ({r['se']:.1f})  estimand {r['estimand_mean']:+.4f} "
                  f"[{r['estimand_lb']:+.4f}, {r['estimand_ub']:+.4f}]")
    if args.power:
        power_recipe.run(args, design, f1, out, title, ci_prob=CI_PROB)
    print(f"done in {time.perf_counter() - t0:.1f} s; wrote {out}")
    return 0
