"""What the group-bias recipes share: flags, subsampling, the NUTS fit, diagnostics and the artifacts.

Not a recipe (the leading ``_`` keeps it out of ``bayesfair fit --list``). A recipe builds a
:class:`bayesfair.environments.biased.BiasedTable` (arm = (group, bucket) cell, reward, context) and
calls :func:`run`, which fits the hierarchical group-bias model of the biased-feedback paper
(group_fairness_biased_feedback_aamas2022, Section 3.1, Eq. 2; model:
:func:`bayesfair.posteriors.group_bias.group_bias_model`) by NUTS and writes, atomically, to
``--out`` (default :func:`default_out`: ``./artifacts/<recipe>/``; ``models/artifacts/<recipe>/``
for the scripts of a checkout's ``models/``, gitignored).

NUTS (``bayesfair.inference.fit``, the one entry point): 4 chains x (1000 warm-up + 1000 draws,
``fit``'s default) in float64, target acceptance 0.9, the model's NUTS form by the documented rule of ``fit``
(Gaussian: the coefficients integrated out, NUTS on the scales; Bernoulli/binomial: NUTS on the
arms' coefficients when the data inform them, else ``fitting.choose_parametrization``'s
centring; ``--parametrization`` to force one), ``--dense-mass``
for a dense mass matrix. The likelihood is the recipe's (``--likelihood``; each recipe says why
its default fits its data); the Gaussian goes through per-arm sufficient statistics. The model
is fitted twice, with and without psi (``group_bias=False``), for LOO. Printed: the convergence
verdict of each fit (R-hat < 1.01, bulk/tail ESS >= 400, 0 divergences, no frozen chain), the
``az.compare`` table (elpd_diff, dse) and the posterior predictive check. Outputs:

- ``posterior.nc``: the ArviZ DataTree of :func:`bayesfair.diagnostics.from_group_bias_fit`
  (groups ``posterior``: psi of the non-reference groups, beta, beta_bar, tau, s, sigma; and
  ``sample_stats``: divergences, R-hat and ESS of every variable); open it with
  ``xarray.open_datatree(path, engine="h5netcdf")``;
- ``psi_hdi.csv``: per (group, feature) of psi: mean, sd, the 90% highest-density interval,
  bulk/tail ESS, R-hat and MCSE (ArviZ's summary);
- ``psi_forest.png``: forest plot of psi, one panel per non-reference group (median and 90%
  equal-tailed interval, :func:`bayesfair.plotting.plot_psi_forest`);
- ``ppc.png``: ``az.plot_ppc_dist`` of the fit with psi (observed vs 50 posterior predictive draws);
- ``loo_compare.csv``: ``az.compare`` of the model with and without psi;
- ``summary.json``: settings, data description, the convergence verdicts, diagnostics (divergences,
  max R-hat and min ESS over every variable and over psi), LOO, the PPC p-values and verdict, the
  scales' posterior and the psi table.

Model checks (public, in :mod:`bayesfair.diagnostics.model_checks`): the PPC verdict
(:func:`~bayesfair.diagnostics.ppc_verdict`: two-sided posterior predictive mid-p values of mean, sd,
each group's mean and, for discrete outcomes, the share of every value, else the 5/50/95%
quantiles and the skewness; a statistic fails iff p < 0.01), the calibration of a 0/1 outcome
(:func:`~bayesfair.diagnostics.calibration_check`, PAV reliability diagram) and the LOO comparison
with vs without psi (:func:`~bayesfair.diagnostics.compare_bias`; no LOO difference is not
evidence of no bias).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bayesfair.diagnostics import (
    calibration_check,
    check_lines,
    compare_bias,
    from_group_bias_fit,
    ppc_verdict,
)
from bayesfair.diagnostics import (
    summary as az_summary,
)
from bayesfair.inference.fitting import fit, group_bias_data
from bayesfair.plotting import plot_psi_forest, save_figure
from bayesfair.posteriors.group_bias import LIKELIHOODS
from bayesfair.posteriors.group_glm import GLM_LIKELIHOODS
from bayesfair.simulation.results import write_results, write_text
from bayesfair.workflow.recipes import _glm as glm_recipe
from bayesfair.workflow.recipes import _power as power_recipe

CI_PROB = 0.9


def default_out(name: str) -> Path:
    """Where a recipe writes by default: ``$BAYESFAIR_ARTIFACTS/<name>``, else ``./artifacts/<name>``
    (``python models/<name>.py`` passes ``models/artifacts``)."""
    root = os.environ.get("BAYESFAIR_ARTIFACTS")
    return (Path(root) if root else Path.cwd() / "artifacts") / name


def form_label(pz: dict) -> str:
    """The NUTS form of a fit, from its ``config["parametrization"]``."""
    if pz.get("marginal"):
        return "marginal form (coefficients integrated out, NUTS on the scales)"
    if pz.get("coefficients"):
        return "coefficient form (NUTS on the arms' coefficients and the scales)"
    return (f"beta {'non-centred' if pz['noncentered_beta'] else 'centred'}, psi "
            f"{'non-centred' if pz['noncentered_psi'] else 'centred'}")


def parser(name: str, doc: str, *, warmup: int = 1000, samples: int = 1000, chains: int = 4,
           target_accept: float | None = None, likelihood: str = "gaussian", glm_likelihood: str = "gaussian",
           glm_target_accept: float | None = None, out: Path | None = None) -> argparse.ArgumentParser:
    """The flags every recipe has (a recipe may add its own before calling :func:`run`)."""
    p = argparse.ArgumentParser(prog=name, description=doc.strip().splitlines()[0])
    p.add_argument("--out", type=Path, default=out if out is not None else default_out(name),
                   help="output folder (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=warmup, help="NUTS warm-up iterations per chain (%(default)s)")
    p.add_argument("--samples", type=int, default=samples, help="NUTS draws kept per chain (%(default)s)")
    p.add_argument("--chains", type=int, default=chains, help="NUTS chains (%(default)s; R-hat needs >= 2)")
    p.add_argument("--rows", type=int, default=None, help="fit a random subsample of this many rows (default: all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the subsample and of NUTS (%(default)s)")
    p.add_argument("--target-accept", type=float, default=target_accept,
                   help="NUTS target acceptance probability in (0, 1) (default: "
                        f"{glm_target_accept or TARGET_ACCEPT['glm']} with --model glm, whose centred random effects "
                        "on a large table need the smaller steps; 0.9 with --model paper; higher: smaller steps, "
                        "fewer divergences)")
    p.add_argument("--model", choices=("glm", "paper"), default="glm",
                   help="glm (default): the hierarchical GLM of bayesfair.posteriors.group_glm (a level shift with "
                        "its own prior, a bucket effect shared by the groups); paper: the biased-feedback paper's "
                        "model (bayesfair.posteriors.group_bias, Eq. 2)")
    p.add_argument("--likelihood", choices=GLM_LIKELIHOODS, default=None,
                   help=f"observation model (default for this data: {glm_likelihood} with --model glm, {likelihood} "
                        "with --model paper; see the recipe's docstring)")
    p.add_argument("--compare-likelihoods", action="store_true",
                   help="--model glm: also fit the recipe's other likelihoods and tabulate their checks and LOO")
    p.add_argument("--min-level-rows", type=int, default=50,
                   help="--model glm: one-hot levels with fewer rows are merged into an 'other' level (%(default)s)")
    p.add_argument("--parametrization", choices=("auto", "marginal", "coefficients", "centered", "noncentered"),
                   default="auto", help="the NUTS form of the model (%(default)s: marginal for the Gaussian, the "
                                        "coefficient form or the centring rule for the others; see fitting.fit)")
    p.add_argument("--centered-psi", action="store_true",
                   help="(old flag) psi centred, beta by the rule")
    p.add_argument("--dense-mass", action="store_true", help="dense NUTS mass matrix")
    p.add_argument("--glm-form", choices=("auto", "centered", "noncentered"), default="auto",
                   help="--model glm: how NUTS samples the random effects (%(default)s: short pilots pick the "
                        "centered form with a dense mass matrix, a split one or the non-centered one, "
                        "bayesfair.inference.glm_fit.choose_form; centered: with a dense mass matrix)")
    p.add_argument("--ric-correction", action=argparse.BooleanOptionalAction, default=True,
                   help="--model glm: shrink the slopes with the part of group membership the features predict "
                        "credited to them, so the shrinkage does not move the level shift (default; "
                        "bayesfair.posteriors.group_glm, Hahn et al. 2018); --no-ric-correction: the independent "
                        "slope prior, whose shrinkage hands correlated features' effects to the level shift")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="NUTS progress bars on stderr (default: when stderr is a terminal)")
    p.add_argument("--no-compare", action="store_true", help="skip the fit without psi (no LOO comparison)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the outputs of an earlier fit in --out (refused otherwise)")
    p.add_argument("--dry-run", action="store_true",
                   help="load the data, print what would be fitted (rows, model, NUTS budget, the power study) and "
                        "exit without fitting")
    power_recipe.add_args(p)
    return p


#: The default ``--target-accept`` per ``--model``.
TARGET_ACCEPT = {"glm": 0.95, "paper": 0.9}


def check_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Reject bad values of the common flags with a usage error (exit code 2) naming the flag."""
    if args.target_accept is None:
        args.target_accept = TARGET_ACCEPT[args.model]
    for flag in ("warmup", "samples", "chains"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag} must be >= 1, got {getattr(args, flag)}")
    if args.rows is not None and args.rows < 10:
        p.error(f"--rows must be >= 10 (or left out for all rows), got {args.rows}")
    if not 0.0 < args.target_accept < 1.0:
        p.error(f"--target-accept must be in (0, 1), got {args.target_accept}")
    if args.seed < 0:
        p.error(f"--seed must be >= 0, got {args.seed}")
    if args.model == "paper" and args.likelihood not in LIKELIHOODS:
        p.error(f"--likelihood {args.likelihood} is a --model glm likelihood; the paper's model takes one of "
                f"{', '.join(LIKELIHOODS)}")
    if args.min_level_rows < 0:
        p.error(f"--min-level-rows must be >= 0, got {args.min_level_rows}")
    if args.parametrization == "marginal" and args.likelihood != "gaussian":
        p.error(f"--parametrization marginal integrates the coefficients out in closed form, which needs "
                f"--likelihood gaussian (got {args.likelihood}); use coefficients, centered, noncentered or auto")
    if args.centered_psi and args.parametrization != "auto":
        p.error(f"--centered-psi (psi centred, beta by the rule) and --parametrization {args.parametrization} "
                "contradict each other: give one of them")
    if args.glm_form == "auto" and args.dense_mass and args.model == "glm":
        p.error("--glm-form auto chooses the mass matrix with the form; give --glm-form centered or noncentered with "
                "--dense-mass")
    if args.model == "paper" and not args.ric_correction:
        p.error("--no-ric-correction is a prior of --model glm; the paper's model has no level shift to correct")
    if args.progress is None:
        args.progress = sys.stderr.isatty()
    power_recipe.check_args(p, args)


#: The files a recipe writes into ``--out``.
OUTPUTS = ("posterior.nc", "summary.json", "psi_hdi.csv", "psi_forest.png", "ppc.png", "loo_compare.csv",
           "bias_estimand.csv", "prior_predictive.png", "calibration.png", "likelihoods.csv", *power_recipe.OUTPUTS)


def check_out(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """An earlier fit's outputs in ``--out`` are replaced only with ``--overwrite`` (exit 2 otherwise)."""
    found = [f for f in OUTPUTS if (args.out / f).exists()]
    if found and not args.overwrite:
        p.error(f"--out {args.out} holds the outputs of an earlier fit ({', '.join(found)}): replace them with "
                "--overwrite, or choose another --out")


def subsample(table: Any, rows: int | None, seed: int, y: Any = None, keep: Any = None) -> Any:
    """:class:`GroupBiasData` of the table, or of a uniform random subsample of ``rows`` of its rows.

    ``y`` replaces the table's rewards (a recipe's transform for its likelihood) and ``keep``
    (bool per row) drops rows first (e.g. COMPAS's 6 scores of -1 for the binomial). The table's
    preprocessing (z-scoring) stays that of the whole table. A subsample may leave an arm without
    rows: the model stays proper (that arm's beta comes from the population prior).
    """
    y = table.rewards if y is None else np.asarray(y)
    idx = np.arange(table.rewards.size) if keep is None else np.flatnonzero(keep)
    if rows is not None and rows < idx.size:
        idx = np.sort(np.random.default_rng(seed).choice(idx, rows, replace=False))
    return group_bias_data(table.arms[idx], table.features[idx], y[idx], table.group_of_arm,
                           reference=table.reference, arm_names=table.arm_names, group_names=table.group_names,
                           feature_names=table.feature_names)


def ppc_check(tree: Any, likelihood: str, n_trials: int = 9) -> dict[str, Any]:
    """The recipe's model check: :func:`~bayesfair.diagnostics.ppc_verdict` with each group's mean
    (and, for a 0/1 outcome, :func:`~bayesfair.diagnostics.calibration_check` as well)."""
    groups = None
    if "group_of_arm" in tree.attrs:
        labels = np.asarray(json.loads(tree.attrs["group_of_arm"]))
        arms = np.asarray(tree["constant_data"]["arms"].values)
        groups = {nm: labels[arms] == g for g, nm in enumerate(json.loads(tree.attrs["group_names"]))}
    kind = {"gaussian": "continuous", "bernoulli": "binary"}.get(likelihood, "discrete")
    levels = None if kind != "discrete" else np.arange(n_trials + 1)
    out = ppc_verdict(tree, kind=kind, groups=groups, levels=levels)
    if kind == "binary":
        cal = calibration_check(tree)
        out["calibration"] = {k: v for k, v in cal.items() if k != "curve"} | {"curve": cal["curve"]}
        if not cal["passed"]:
            out["failed"] = [*out["failed"], "calibration"]
            out["passed"] = False
    return out


def ppc_figure(tree: Any, path: Path, title: str, xlabel: str = "y") -> None:
    """az.plot_ppc_dist of the fit (observed vs 50 posterior predictive draws), saved to ``path``."""
    # arviz and matplotlib are heavy at import and needed only for this figure
    import arviz as az
    import matplotlib.pyplot as plt
    from matplotlib.ticker import AutoLocator, ScalarFormatter

    kind = "ecdf" if tree.attrs.get("likelihood") != "gaussian" else "kde"
    pc = az.plot_ppc_dist(tree, num_samples=50, kind=kind, backend="matplotlib")
    del pc
    fig = plt.gcf()
    fig.suptitle(f"{title}: posterior predictive ({tree.attrs.get('likelihood')} likelihood)", fontsize=10)
    fig.set_size_inches(6.5, 4.0)
    for ax in fig.axes:
        ax.set_xlabel(xlabel)
        ax.set_title("")
        ax.yaxis.set_visible(True)  # ArviZ hides the y axis and its ticks; a reader needs its scale
        ax.spines["left"].set_visible(True)
        ax.yaxis.set_major_locator(AutoLocator())
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.tick_params(left=True, labelleft=True)
        ax.set_ylabel("cumulative share of rows" if kind == "ecdf" else "density")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close("all")


def _extreme(stats: Any, prefix: str, fn: Callable, names: list[str]) -> float:
    vals = [np.ravel(stats[f"{prefix}_{n}"].values) for n in names if f"{prefix}_{n}" in stats]
    vals = np.concatenate(vals) if vals else np.array([np.nan])
    return float(fn(vals)) if np.isfinite(vals).any() else float("nan")


def diagnostics(tree: Any) -> dict[str, Any]:
    """Divergences, max R-hat and min bulk/tail ESS over every posterior variable and over psi."""
    stats = tree["sample_stats"].dataset
    every = list(tree["posterior"].dataset.data_vars)
    out: dict[str, Any] = {"divergences": int(stats["diverging"].values.sum()),
                           "draws": int(stats["diverging"].size)}
    for scope, names in (("all", every), ("psi", ["psi"])):
        out[scope] = {"max_r_hat": _extreme(stats, "r_hat", np.nanmax, names),
                      "min_ess_bulk": _extreme(stats, "ess_bulk", np.nanmin, names),
                      "min_ess_tail": _extreme(stats, "ess_tail", np.nanmin, names)}
    return out


def psi_table(tree: Any, var: str = "psi") -> Any:
    """ArviZ summary of ``var`` with a 90% HDI as a DataFrame with explicit ``group`` and ``feature`` columns."""
    post = tree["posterior"].dataset
    df = az_summary(tree, var_names=[var], ci_prob=CI_PROB, ci_kind="hdi")
    df = df.drop(columns=[c for c in ("observed_share", "p_under_exposed") if c in df.columns])
    dims = post[var].dims[2:]
    if dims:
        grid = np.stack(np.meshgrid(*[post[d].values for d in dims], indexing="ij"), -1).reshape(-1, len(dims))
        expected = [f"{var}[{', '.join(map(str, row))}]" for row in grid]
        if list(df.index) != expected:  # ArviZ's row order is the C order of the dims; check, do not assume
            raise RuntimeError(f"unexpected ArviZ summary rows {list(df.index)[:3]}..., expected {expected[:3]}...")
        for j, d in enumerate(dims):
            df.insert(j, d, grid[:, j])
    return df.reset_index(drop=True)


def forest(tree: Any, title: str):
    """Forest plot of psi, one panel per non-reference group (shared feature axis)."""
    import matplotlib.pyplot as plt
    import xarray as xr

    post = tree["posterior"].dataset
    groups = [str(g) for g in post["group"].values]
    d = post.sizes["feature"]
    fig, axes = plt.subplots(1, len(groups), figsize=(4.0 * len(groups) + 3.0, 1.2 + 0.22 * d), squeeze=False,
                             sharey=True)
    ref = tree.attrs.get("reference_group", "reference")
    for ax, g in zip(axes[0], groups, strict=True):
        sub = xr.DataTree.from_dict({"posterior": post[["psi"]].sel(group=g)})
        plot_psi_forest(sub, ci_prob=CI_PROB, ax=ax, title=f"{g} vs {ref}")
        if ax is not axes[0][0]:
            ax.set_ylabel("")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def _scales(tree: Any) -> dict[str, dict[str, float]]:
    names = [n for n in ("tau", "s", "sigma") if n in tree["posterior"].dataset]
    if not names:
        return {}
    df = az_summary(tree, var_names=names, ci_prob=CI_PROB, ci_kind="hdi")
    df = df.drop(columns=[c for c in ("observed_share", "p_under_exposed") if c in df.columns])
    return {str(k): {c: float(v) for c, v in row.items()} for k, row in df.iterrows()}


def run(argv: list[str] | None, *, name: str, doc: str, build: Callable[[argparse.Namespace], tuple[Any, dict]],
        add_args: Callable[[argparse.ArgumentParser], None] | None = None, title: str | None = None,
        likelihood: str = "gaussian",
        response: Callable[[Any, argparse.Namespace], tuple[Any, Any, str]] | None = None,
        out: Path | None = None, glm_likelihood: str = "gaussian", glm_likelihoods: tuple[str, ...] = (),
        glm_target_accept: float | None = None) -> int:
    """Parse ``argv``, build the table with ``build(args) -> (BiasedTable, description)``, fit, write, print.

    ``description`` (JSON-friendly) goes into ``summary.json["data"]``; it should name the reward,
    the arms, the groups and the reference group. ``likelihood`` is the recipe's default
    ``--likelihood``; ``response(table, args) -> (y, keep, note)`` gives the modelled outcome for
    ``args.likelihood`` (default: the table's rewards); ``out`` the default ``--out``
    (:func:`default_out` if not given); ``glm_target_accept`` the default ``--target-accept`` of
    ``--model glm`` where the data need another than :data:`TARGET_ACCEPT`'s. Returns the exit code (0).
    """
    import warnings

    p = parser(name, doc, likelihood=likelihood, glm_likelihood=glm_likelihood, glm_target_accept=glm_target_accept,
               out=out)
    if add_args is not None:
        add_args(p)
    args = p.parse_args(argv)
    if args.likelihood is None:
        args.likelihood = glm_likelihood if args.model == "glm" else likelihood
    if args.target_accept is None and args.model == "glm" and glm_target_accept is not None:
        args.target_accept = glm_target_accept
    args.default_out = p.get_default("out")  # a recipe may refine the default folder (Adult: per grouping)
    check_args(p, args)
    t0 = time.perf_counter()  # the data folder: bayesfair.datasets.cache_dir(), the one rule
    table, description = build(args)  # may set the default --out (Adult: one folder per grouping)
    y, keep, note = (None, None, "the table's reward") if response is None else response(table, args)
    if args.dry_run:
        n = int(table.rewards.size if keep is None else np.sum(keep))
        print(f"{title or name} (dry run, nothing fitted): {min(n, args.rows or n):,} of {n:,} rows; model "
              f"{args.model}, likelihood {args.likelihood} ({note}); NUTS {args.chains} x ({args.warmup} + "
              f"{args.samples}), target_accept {args.target_accept}"
              f"{f', random effects {args.glm_form}' if args.model == 'glm' else ''}; "
              f"{'no fit without the bias terms' if args.no_compare else 'also the fit without the bias terms'}; "
              f"output folder {args.out}")
        print(power_recipe.plan(args))
        return 0
    check_out(p, args)
    if args.model == "glm":
        return glm_recipe.run_glm(args, table, description, y=y, keep=keep, note=note, name=name,
                                  title=title or name, response=response, likelihoods=glm_likelihoods, t0=t0)
    data = subsample(table, args.rows, args.seed, y=y, keep=keep)
    param = args.parametrization
    if args.centered_psi:
        param = {"psi": "centered"}
    settings = dict(likelihood=args.likelihood, num_warmup=args.warmup, num_samples=args.samples,
                    num_chains=args.chains, seed=args.seed, target_accept=args.target_accept,
                    parametrization=param, dense_mass=args.dense_mass, progress_bar=args.progress)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        res = fit(data, **settings)
        res0 = None if args.no_compare else fit(data, group_bias=False, **settings)
    for w in caught:
        if issubclass(w.category, RuntimeWarning):
            print(f"warning: {w.message}")
    tree = from_group_bias_fit(res, data, attrs={"recipe": name})
    diag = diagnostics(tree)
    psi = psi_table(tree)
    scales = _scales(tree)
    rows_per_arm = np.bincount(data.arms, minlength=data.group_of_arm.size)
    labels = json.dumps(data.group_of_arm.tolist())
    gnames = json.dumps(list(data.group_names))
    full = res.tree(attrs={"group_of_arm": labels, "group_names": gnames})
    ppc = ppc_check(full, args.likelihood)
    loo: dict[str, Any] = {}
    out = args.out
    cmp = None
    if res0 is not None:
        full0 = res0.tree(prior_draws=10)
        try:
            cmp = compare_bias(full, full0, names=("with psi", "without psi"))
        except (ValueError, FloatingPointError) as exc:  # e.g. a frozen tiny-budget fit: no finite ELPD
            loo = {"error": f"{type(exc).__name__}: {exc}", "converged_without": res0.convergence.as_dict()}
        else:
            loo = {k: v for k, v in cmp.items() if k != "csv"} | {"converged_without": res0.convergence.as_dict()}
            write_text(out / "loo_compare.csv", cmp["csv"])
    if cmp is None:  # no comparison this time: an earlier fit's table (replaced with --overwrite) must go
        (out / "loo_compare.csv").unlink(missing_ok=True)

    write_results(tree, out / "posterior.nc")
    write_text(out / "psi_hdi.csv", psi.to_csv(index=False))
    save_figure(forest(tree, title or name), out / "psi_forest.png")
    ppc_figure(full, out / "ppc.png", title or name, xlabel=f"{note} (observed: black)")
    summary = {
        "recipe": name,
        "argv": list(sys.argv[1:] if argv is None else argv),
        "likelihood": args.likelihood, "response": note,
        "data": {**description, "rows": int(data.y.size), "rows_in_table": int(table.rewards.size),
                 "n_features": int(data.X.shape[1]), "arms": list(data.arm_names),
                 "groups": list(data.group_names), "reference_group": data.group_names[data.reference],
                 "rows_per_arm": rows_per_arm.tolist(), "preprocessing": table.info},
        "priors": res.config["priors"],
        "nuts": {**res.config, "seconds": res.seconds},
        "convergence": res.convergence.as_dict(),
        "diagnostics": diag,
        "loo": loo,
        "ppc": ppc,
        "scales": scales,
        "psi": psi.to_dict(orient="records"),
        "wall_seconds": time.perf_counter() - t0,
    }
    write_text(out / "summary.json", json.dumps(summary, indent=2, default=str))

    ref = data.group_names[data.reference]
    pz = res.config["parametrization"]
    print(f"{title or name}: {data.y.size:,} rows, {data.group_of_arm.size} arms, d={data.X.shape[1]}; "
          f"likelihood {args.likelihood} ({note}); NUTS {args.chains} x ({args.warmup} + {args.samples}) in "
          f"{res.seconds:.1f} s; {form_label(pz)}")
    print(f"convergence (with psi): {res.convergence.message}")
    if res0 is not None:
        print(f"convergence (without psi): {res0.convergence.message}")
        if cmp is None:
            print(f"LOO, with vs without psi: not computed ({loo['error']})")
        else:
            print("LOO, with vs without psi (az.compare):")
            for k, v in cmp["table"].items():
                print(f"  {k:<12} " + "  ".join(f"{c} {x:.2f}" for c, x in v.items()))
            print(f"  reading: {cmp['reading']}")
    print("\n".join(check_lines("PPC", ppc)))
    if "psi" in tree["posterior"].dataset:
        lo, hi = [c for c in psi.columns if c.startswith("hdi")][:2]
        print(f"posterior of psi (reference group: {ref}), mean [{int(100 * CI_PROB)}% HDI], r_hat, ESS bulk:")
        for r in psi.to_dict(orient="records"):
            print(f"  {r['group']:<20} {r['feature']:<28} {r['mean']:>8.3f} [{r[lo]:>8.3f}, {r[hi]:>8.3f}]  "
                  f"{r['r_hat']:.3f}  {r['ess_bulk']:>6.0f}")
        for k, v in scales.items():
            print(f"  {k:<49} {v['mean']:>8.3f} [{v[lo]:>8.3f}, {v[hi]:>8.3f}]")
    print(f"done in {time.perf_counter() - t0:.1f} s; wrote {out}")
    return 0
