"""What the group-bias recipes share: flags, subsampling, the NUTS fit, diagnostics and the artifacts.

Not a recipe (the leading ``_`` keeps it out of ``bayesfair fit --list``). A recipe builds a
:class:`bayesfair.environments.biased.BiasedTable` (arm = (group, bucket) cell, reward, context) and
calls :func:`run`, which fits the hierarchical group-bias model of the biased-feedback paper
(group_fairness_biased_feedback_aamas2022, Section 3.1, Eq. 2; model:
:func:`bayesfair.posteriors.group_bias.group_bias_model`) by NUTS and writes, atomically, to
``--out`` (default ``models/artifacts/<recipe>/``, gitignored).

NUTS settings (flags): 2 chains x (500 warm-up + 500 draws), target acceptance 0.95, psi in the
non-centred form psi = s u (``--centered-psi`` for psi ~ N(0, s^2 I)), likelihood through per-arm
sufficient statistics (cost independent of the number of rows). Why: on these data s is small and
the centred psi is a funnel (s mixed with R-hat up to 1.44, ESS 4), and the non-centred form at
target 0.9 left 11-15 divergences in 600 draws; models/README.md has the measurements. Outputs:

- ``posterior.nc``: the ArviZ DataTree of :func:`bayesfair.diagnostics.from_group_bias_fit`
  (groups ``posterior``: psi of the non-reference groups, beta, beta_bar, tau, s, sigma; and
  ``sample_stats``: divergences, R-hat and ESS of every variable); open it with
  ``xarray.open_datatree(path, engine="h5netcdf")``;
- ``psi_hdi.csv``: per (group, feature) of psi: mean, sd, the 90% highest-density interval,
  bulk/tail ESS, R-hat and MCSE (ArviZ's summary);
- ``psi_forest.png``: forest plot of psi, one panel per non-reference group (median and 90%
  equal-tailed interval, :func:`bayesfair.plotting.plot_psi_forest`);
- ``summary.json``: settings, data description, diagnostics (divergences, max R-hat and min ESS
  over every variable and over psi), the scales' posterior and the psi table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import bayesfair  # noqa: F401  (before jax: one CPU device per core, so chains run in parallel)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
#: Priors of the scales (half-normal scales) and of beta_bar (N(prior_mean, prior_sd^2 I)); features are z-scored.
PRIORS = {"tau_scale": 1.0, "s_scale": 1.0, "sigma_scale": 5.0, "prior_mean": 0.0, "prior_sd": 10.0}
CI_PROB = 0.9


def parser(name: str, doc: str, *, warmup: int = 500, samples: int = 500, chains: int = 2,
           target_accept: float = 0.95) -> argparse.ArgumentParser:
    """The flags every recipe has (a recipe may add its own before calling :func:`run`)."""
    p = argparse.ArgumentParser(prog=f"{name}.py", description=doc.strip().splitlines()[0])
    p.add_argument("--out", type=Path, default=HERE / "artifacts" / name, help="output folder (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=warmup, help="NUTS warm-up iterations per chain (%(default)s)")
    p.add_argument("--samples", type=int, default=samples, help="NUTS draws kept per chain (%(default)s)")
    p.add_argument("--chains", type=int, default=chains, help="NUTS chains (%(default)s; R-hat needs >= 2)")
    p.add_argument("--rows", type=int, default=None, help="fit a random subsample of this many rows (default: all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the subsample and of NUTS (%(default)s)")
    p.add_argument("--target-accept", type=float, default=target_accept,
                   help="NUTS target acceptance probability in (0, 1) (%(default)s; higher: smaller steps, fewer "
                        "divergences)")
    p.add_argument("--centered-psi", action="store_true",
                   help="sample psi ~ N(0, s^2 I) directly instead of psi = s u, u ~ N(0, I) (same model; the "
                        "default non-centred form avoids the funnel in s when the data say little about psi)")
    return p


def check_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Reject bad values of the common flags with a usage error (exit code 2) naming the flag."""
    for flag in ("warmup", "samples", "chains"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag} must be >= 1, got {getattr(args, flag)}")
    if args.rows is not None and args.rows < 10:
        p.error(f"--rows must be >= 10 (or left out for all rows), got {args.rows}")
    if not 0.0 < args.target_accept < 1.0:
        p.error(f"--target-accept must be in (0, 1), got {args.target_accept}")
    if args.seed < 0:
        p.error(f"--seed must be >= 0, got {args.seed}")


def subsample(table: Any, rows: int | None, seed: int) -> Any:
    """:class:`GroupBiasData` of the table, or of a uniform random subsample of ``rows`` of its rows.

    The table's preprocessing (z-scoring) stays that of the whole table. A subsample may leave an
    arm without rows: the model stays proper (that arm's beta comes from the population prior).
    """
    from bayesfair.fitting import group_bias_data

    idx = np.arange(table.rewards.size)
    if rows is not None and rows < idx.size:
        idx = np.sort(np.random.default_rng(seed).choice(idx, rows, replace=False))
    return group_bias_data(table.arms[idx], table.features[idx], table.rewards[idx], table.group_of_arm,
                           reference=table.reference, arm_names=table.arm_names, group_names=table.group_names,
                           feature_names=table.feature_names)


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
    from bayesfair.diagnostics import summary

    post = tree["posterior"].dataset
    df = summary(tree, var_names=[var], ci_prob=CI_PROB, ci_kind="hdi")
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

    from bayesfair.plotting import plot_psi_forest

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
    from bayesfair.diagnostics import summary

    df = summary(tree, var_names=names, ci_prob=CI_PROB, ci_kind="hdi")
    df = df.drop(columns=[c for c in ("observed_share", "p_under_exposed") if c in df.columns])
    return {str(k): {c: float(v) for c, v in row.items()} for k, row in df.iterrows()}


def run(argv: list[str] | None, *, name: str, doc: str, build: Callable[[argparse.Namespace], tuple[Any, dict]],
        add_args: Callable[[argparse.ArgumentParser], None] | None = None, title: str | None = None) -> int:
    """Parse ``argv``, build the table with ``build(args) -> (BiasedTable, description)``, fit, write, print.

    ``description`` (JSON-friendly) goes into ``summary.json["data"]``; it should name the reward,
    the arms, the groups and the reference group. Returns the exit code (0).
    """
    from bayesfair.diagnostics import from_group_bias_fit
    from bayesfair.fitting import fit_nuts
    from bayesfair.io import write_results, write_text
    from bayesfair.plotting import save_figure

    p = parser(name, doc)
    if add_args is not None:
        add_args(p)
    args = p.parse_args(argv)
    check_args(p, args)
    t0 = time.perf_counter()  # the data folder: bayesfair.datasets.cache_dir(), the one rule
    table, description = build(args)
    data = subsample(table, args.rows, args.seed)
    fit = fit_nuts(data, num_warmup=args.warmup, num_samples=args.samples, num_chains=args.chains, seed=args.seed,
                   target_accept=args.target_accept, noncentered_psi=not args.centered_psi, **PRIORS)
    tree = from_group_bias_fit(fit, data, attrs={"recipe": name})
    diag = diagnostics(tree)
    psi = psi_table(tree)
    scales = _scales(tree)
    rows_per_arm = np.bincount(data.arms, minlength=data.group_of_arm.size)

    out: Path = args.out
    write_results(tree, out / "posterior.nc")
    write_text(out / "psi_hdi.csv", psi.to_csv(index=False))
    save_figure(forest(tree, title or name), out / "psi_forest.png")
    summary = {
        "recipe": name,
        "argv": list(sys.argv[1:] if argv is None else argv),
        "data": {**description, "rows": int(data.y.size), "rows_in_table": int(table.rewards.size),
                 "n_features": int(data.X.shape[1]), "arms": list(data.arm_names),
                 "groups": list(data.group_names), "reference_group": data.group_names[data.reference],
                 "rows_per_arm": rows_per_arm.tolist(), "preprocessing": table.info},
        "priors": PRIORS,
        "nuts": {**fit.config, "seconds": fit.seconds},
        "diagnostics": diag,
        "scales": scales,
        "psi": psi.to_dict(orient="records"),
        "wall_seconds": time.perf_counter() - t0,
    }
    write_text(out / "summary.json", json.dumps(summary, indent=2, default=str))

    ref = data.group_names[data.reference]
    print(f"{title or name}: {data.y.size:,} rows, {data.group_of_arm.size} arms, d={data.X.shape[1]}; NUTS "
          f"{args.chains} x ({args.warmup} + {args.samples}) in {fit.seconds:.1f} s; "
          f"{diag['divergences']} divergences; "
          f"max r_hat {diag['all']['max_r_hat']:.3f}; min ESS bulk {diag['all']['min_ess_bulk']:.0f} "
          f"(psi: max r_hat {diag['psi']['max_r_hat']:.3f}, min ESS bulk {diag['psi']['min_ess_bulk']:.0f})")
    lo, hi = [c for c in psi.columns if c.startswith("hdi")][:2]
    print(f"posterior of psi (reference group: {ref}), mean [{int(100 * CI_PROB)}% HDI], r_hat, ESS bulk:")
    for r in psi.to_dict(orient="records"):
        print(f"  {r['group']:<20} {r['feature']:<28} {r['mean']:>8.3f} [{r[lo]:>8.3f}, {r[hi]:>8.3f}]  "
              f"{r['r_hat']:.3f}  {r['ess_bulk']:>6.0f}")
    for k, v in scales.items():
        print(f"  {k:<49} {v['mean']:>8.3f} [{v[lo]:>8.3f}, {v[hi]:>8.3f}]")
    print(f"done in {time.perf_counter() - t0:.1f} s; wrote {out}")
    return 0
