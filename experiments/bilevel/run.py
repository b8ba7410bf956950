"""Bi-level fairness study (bilevel_fairness_bf_ucb_aamas2024, Section 6), BF-UCB and BF-TS side by side.

Settings (Section 6.2), Bernoulli arms, two groups (group 0 = minority):

- ``low``:  5 minority + 10 majority arms, every mean ~ U[0.6, 0.85], drawn afresh per run;
- ``high``: 10 minority arms ~ U[0.5, 0.8] and 50 majority arms ~ U[0.7, 1].

f(mu) = mu, delta = 0.01, beta in {(0.2, 0.2), (0.3, 0.3), (0.4, 0.4)}. The studies are the shipped configs
``bilevel_high`` and ``bilevel`` (beta = (0.4, 0.4), all eight
policies, small scale) with the floors of ``bilevel_beta_sweep``; ``--scale``, ``--horizon``,
``--runs``, ``--seed`` (added to each config's seed) and ``floors`` are config overrides.
The baselines of Section 6.1 (UCB, MF, GEF) and their Thompson counterparts (TS, MF-TS, GEF-TS)
run at beta = (0.4, 0.4), the value of Figures 2 and 3. As Section 6.2 does for f(mu) = mu with means above 0.5, the
optimistic policies use the upper corner of the confidence box as the optimistic means (``steps=0``,
``start="upper"``): the group value sum mu^2 / sum mu is increasing in every mu_i >= 1/2, so the
corner is the maximizer of Subroutine 2/3 line 5 on such boxes.

Figures (written to ``--out``):

- fig1a_regret_high.png / fig1b_regret_low.png: regret against R*_beta(T) (Eq. 1) over time for
  each beta, BF-UCB and BF-TS in two panels;
- fig2a_meritocratic_high.png / fig2b_meritocratic_low.png: meritocratic fairness regret per group
  sum_{t: g_t = g} ||pi*_g - pi^t_g||_1 over time, beta = (0.4, 0.4);
- fig3a_normalized_reward.png, fig3b_group_exposure.png, fig3c_minority_arm_exposure.png (high
  setting, beta = (0.4, 0.4)): reward normalized by UCB's, group exposure N_g,T / T, and the
  exposure of the minority arms ranked by mean within each run.

Usage::

    python experiments/bilevel/run.py --scale small            # seconds
    python experiments/bilevel/run.py --scale paper            # T = 1e7, 50 runs (hours on 2 cores)
    python experiments/bilevel/run.py --scale paper --horizon 1000000 --runs 20   # reduced
    python experiments/bilevel/run.py --scale paper --no-baselines --policies BF-UCB --out results/ucb
    python experiments/bilevel/run.py --merge results/ucb results/ts --out results/paper   # tables + figures
    python experiments/bilevel/run.py --scale paper --horizon 1000000 --betas 0.4   # Figure 3's baselines

``--policies`` runs a subset (each policy's numbers do not depend on which others run: the
environment and policy keys are per run, not per policy), so a long study can run in halves;
``--merge`` joins such halves (same settings, seed, horizon and runs) along the policy axis and
writes the summary and the figures without simulating.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import tomllib
from pathlib import Path

import numpy as np

import bayesfair as bf  # before jax: exposes one CPU device per core
from bayesfair.simulation.results import write_text
from bayesfair.workflow import shipped
from bayesfair.workflow.config import Study, load_config

# The two settings' studies at beta = (0.4, 0.4), all eight policies; each setting's seed is its
# config's (high 0, low 1000) plus --seed.
SETTINGS = {"high": shipped.config_path("bilevel_high"), "low": shipped.config_path("bilevel")}
with open(shipped.config_path("bilevel_beta_sweep"), "rb") as _f:  # the floors of Figure 1
    BETAS = tuple(tuple(b) for b in tomllib.load(_f)["sweep"]["floors"])
with open(SETTINGS["low"], "rb") as _f:  # the settings' floors: the baselines run at this beta only
    BASELINE_BETA = tuple(tomllib.load(_f)["floors"])
# --scale: config overrides (small: the configs as written)
SCALES = {"small": {}, "paper": {"horizon": 10_000_000, "runs": 50, "chunk_size": 65_536}}
BF_POLICIES = ("BF-UCB", "BF-TS")
BASELINES = ("UCB", "TS", "GEF", "GEF-TS", "MF", "MF-TS")


def study(setting: str, beta: tuple[float, float], scale: dict, seed: int = 0, with_baselines: bool = True,
          only: tuple[str, ...] | None = None) -> Study:
    """The study of one setting and floor: its config with ``scale`` (key -> value), ``seed``
    added to the config's seed and ``floors = beta``; the baselines only at BASELINE_BETA."""
    overrides = [f"{k}={v}" for k, v in scale.items()] + [f"floors={list(beta)}"]
    s = load_config(SETTINGS[setting], overrides)
    if seed:
        s = load_config(SETTINGS[setting], [*overrides, f"seed={s.seed + seed}"])
    keep = [p for p in s.policies if (p in BF_POLICIES or with_baselines) and (only is None or p in only)]
    if keep != list(s.policies):
        s = dataclasses.replace(s, policies={p: s.policies[p] for p in keep},
                                config={**s.config, "policies": {p: s.config["policies"][p] for p in keep}})
    return s


def merge_results(dirs: list[Path]) -> dict:
    """Join the results files of several ``--out`` folders along the policy axis.

    Every folder holds ``bilevel_<setting>_<beta>.nc`` files of the same study (same seed,
    horizon, runs and checkpoints, so the same environment draws); a (setting, beta) present in
    only some folders keeps the policies found. Raises ``ValueError`` if two files of one
    (setting, beta) disagree on the environment draws or share a policy.
    """
    import xarray as xr

    found: dict[tuple[str, str], list] = {}
    for d in dirs:
        if not d.is_dir():
            raise ValueError(f"--merge: {d} is not a folder")
        for setting in SETTINGS:
            for beta in BETAS:
                path = d / f"bilevel_{setting}_{_tag(beta)}.nc"
                if path.is_file():
                    found.setdefault((setting, _tag(beta)), []).append(bf.read_results(path))
    if not found:
        raise ValueError(f"--merge: no bilevel_<setting>_<beta>.nc files in {', '.join(map(str, dirs))}")
    results = {}
    for key, parts in found.items():
        names = [str(p) for ds in parts for p in ds["policy"].values]
        if len(set(names)) != len(names):
            raise ValueError(f"--merge: {key[0]}/{key[1]} has policy names in several folders: {names}")
        for ds in parts[1:]:
            if not (np.array_equal(ds["mean"].values, parts[0]["mean"].values)
                    and np.array_equal(ds["checkpoint"].values, parts[0]["checkpoint"].values)):
                raise ValueError(f"--merge: {key[0]}/{key[1]} files differ in their environment draws or "
                                 "checkpoints (not the same seed, horizon and runs)")
        results[key] = parts[0] if len(parts) == 1 else xr.concat(
            parts, dim="policy", data_vars="minimal", coords="minimal", compat="equals",
            combine_attrs="override")
    return {k: results[k] for k in sorted(results, key=lambda k: (list(SETTINGS).index(k[0]), k[1]))}


def _tag(beta) -> str:
    return "beta" + "-".join(f"{b:.1f}" for b in beta)


def _mean_se(x: np.ndarray) -> tuple[float, float]:
    x = np.asarray(x, np.float64)
    return float(x.mean()), float(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else float("nan")


def summarize(results: dict) -> dict:
    """Final-round numbers per setting, beta and policy (means and standard errors over runs)."""
    out: dict = {}
    for (setting, tag), ds in results.items():
        t_end = int(ds["checkpoint"].values[-1])
        fin = ds.isel(checkpoint=-1)
        # growth of the mean from the checkpoint nearest T/4 to T: ~2 for sqrt(T), 4 for linear
        q = int(np.argmin(np.abs(ds["checkpoint"].values - t_end / 4)))
        rows = {}
        for p in ds["policy"].values:
            f = fin.sel(policy=p)
            row = {}
            for name in ("bf_regret", "bf_regret_groups", "bf_regret_within", "reward", "regret"):
                row[name], row[f"{name}_se"] = _mean_se(f[name].values)
            row["min_anytime_slack"] = int(f["anytime_slack"].values.min())
            row["growth_from_round"] = int(ds["checkpoint"].values[q])
            bfr = ds["bf_regret"].sel(policy=p).values  # [run, checkpoint]
            row["bf_regret_growth"] = float(bfr[:, -1].mean() / bfr[:, q].mean())
            gfr = ds["group_fairness_regret"].sel(policy=p).values  # [run, checkpoint, group]
            for g, gname in enumerate(ds["group"].values):
                row[f"meritocratic_regret_{gname}"] = float(gfr[:, -1, g].mean())
                row[f"meritocratic_growth_{gname}"] = float(gfr[:, -1, g].mean() / gfr[:, q, g].mean())
                row[f"group_exposure_{gname}"] = float((f["group_pulls"].values[:, g] / t_end).mean())
            if "UCB" in ds["policy"].values:
                row["reward_over_ucb"] = float((f["reward"].values / fin.sel(policy="UCB")["reward"].values).mean())
            rows[str(p)] = row
        out.setdefault(setting, {})[tag] = {"horizon": t_end, "runs": int(ds.sizes["run"]), "policies": rows}
    return out


def _band(ax, t, arr, label, style="-"):
    mean = arr.mean(axis=0)
    lo, hi = np.quantile(arr, [0.1, 0.9], axis=0)
    (line,) = ax.plot(t, mean, style, label=label)
    ax.fill_between(t, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)


def figures(results: dict, out: Path) -> list[Path]:
    from bayesfair.plotting import pyplot, save_figure

    plt = pyplot()
    written = []
    letters = {"high": "a", "low": "b"}
    base_tag = _tag(BASELINE_BETA)
    for setting in results_settings(results):
        # Figure 1: regret against R*_beta over time, per beta
        present = [p for p in BF_POLICIES if any(p in ds["policy"].values for (s, _), ds in results.items()
                                                   if s == setting)]
        if not present:
            continue
        fig, axes = plt.subplots(1, len(present), figsize=(5.25 * len(present), 4.0), sharey=True, squeeze=False)
        axes = axes[0]
        for ax, pol in zip(axes, present, strict=True):
            for beta in BETAS:
                ds = results.get((setting, _tag(beta)))
                if ds is None or pol not in ds["policy"].values:
                    continue
                _band(ax, ds["checkpoint"].values, ds["bf_regret"].sel(policy=pol).values, f"beta = {beta}")
            ax.set_title(f"{pol}, {setting} number of arms")
            ax.set_xlabel("round t")
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("regret vs R*_beta(t) (Eq. 1)")
        axes[0].legend(fontsize=8)
        fig.tight_layout()
        written.append(save_figure(fig, out / f"fig1{letters[setting]}_regret_{setting}.png"))
        plt.close(fig)

        # Figure 2: meritocratic fairness regret per group, beta = (0.4, 0.4)
        ds = results.get((setting, base_tag))
        if ds is not None and (pols := [p for p in BF_POLICIES if p in ds["policy"].values]):
            fig, axes = plt.subplots(1, len(pols), figsize=(5.25 * len(pols), 4.0), sharey=True, squeeze=False)
            axes = axes[0]
            t = ds["checkpoint"].values
            for ax, pol in zip(axes, pols, strict=True):
                gfr = ds["group_fairness_regret"].sel(policy=pol).values  # [run, ckpt, group]
                for g, gname in enumerate(ds["group"].values):
                    _band(ax, t, gfr[:, :, g], f"{gname} group")
                ax.set_title(f"{pol}, {setting} number of arms, beta = {BASELINE_BETA}")
                ax.set_xlabel("round t")
                ax.grid(alpha=0.3)
            axes[0].set_ylabel("sum_{t: g_t = g} ||pi*_g - pi^t_g||_1")
            axes[0].legend(fontsize=8)
            fig.tight_layout()
            written.append(save_figure(fig, out / f"fig2{letters[setting]}_meritocratic_{setting}.png"))
            plt.close(fig)

    ds = results.get(("high", base_tag))
    if ds is not None and "UCB" in ds["policy"].values:
        t = ds["checkpoint"].values
        names = [p for p in ("BF-UCB", "BF-TS", "GEF", "GEF-TS", "MF", "MF-TS") if p in ds["policy"].values]
        # Figure 3a: reward normalized by UCB's
        fig, ax = plt.subplots(figsize=(6.0, 4.0))
        ucb = ds["reward"].sel(policy="UCB").values
        for p in names:
            ratio = ds["reward"].sel(policy=p).values / np.maximum(ucb, 1.0)
            _band(ax, t, ratio, p, "-" if not p.endswith("TS") else "--")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("round t")
        ax.set_ylabel("total reward / UCB's")
        ax.set_title(f"high number of arms, beta = {BASELINE_BETA}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, ncol=2)
        fig.tight_layout()
        written.append(save_figure(fig, out / "fig3a_normalized_reward.png"))
        plt.close(fig)

        # Figure 3b: group exposure N_g,T / T
        allp = list(ds["policy"].values)
        share = ds["group_pulls"].isel(checkpoint=-1).values / t[-1]  # [policy, run, group]
        fig, ax = plt.subplots(figsize=(7.0, 4.0))
        x = np.arange(len(allp))
        for g, gname in enumerate(ds["group"].values):
            ax.bar(x + (g - 0.5) * 0.38, share[:, :, g].mean(1), 0.38, yerr=share[:, :, g].std(1), label=gname,
                   capsize=2)
        ax.axhline(BASELINE_BETA[0], color="k", ls=":", lw=1, label="floor beta_g")
        ax.set_xticks(x, allp, rotation=30)
        ax.set_ylabel("N_g,T / T")
        ax.set_title(f"group exposure at T = {t[-1]:,}, high number of arms")
        ax.legend(fontsize=8)
        fig.tight_layout()
        written.append(save_figure(fig, out / "fig3b_group_exposure.png"))
        plt.close(fig)

        # Figure 3b over time: the minority group's share N_min,t / t at every checkpoint
        fig, ax = plt.subplots(figsize=(6.0, 4.0))
        minority_share = ds["group_pulls"].values[:, :, :, 0] / t[None, None, :]  # [policy, run, checkpoint]
        for i, p in enumerate(allp):
            _band(ax, t, minority_share[i], p, "-" if not p.endswith("TS") else "--")
        ax.axhline(BASELINE_BETA[0], color="k", ls=":", lw=1, label="floor beta_g")
        ax.set_xscale("log")
        ax.set_xlabel("round t")
        ax.set_ylabel("N_min,t / t")
        ax.set_title("minority group exposure over time, high number of arms")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        written.append(save_figure(fig, out / "fig3b_group_exposure_over_time.png"))
        plt.close(fig)

        # Figure 3c: exposure of the minority arms, ranked by mean within each run
        minority = np.flatnonzero(ds["arm_group"].values == 0)
        order = np.argsort(-ds["mean"].values[:, minority], axis=1)  # [run, rank]
        pulls = ds["pulls"].isel(checkpoint=-1).values[:, :, minority] / t[-1]  # [policy, run, arm]
        ranked = np.take_along_axis(pulls, order[None], axis=2)  # [policy, run, rank]
        fig, ax = plt.subplots(figsize=(8.0, 4.0))
        width = 0.8 / len(allp)
        for i, p in enumerate(allp):
            ax.bar(np.arange(minority.size) + (i - len(allp) / 2 + 0.5) * width, ranked[i].mean(0), width, label=p)
        ax.set_yscale("log")
        ax.set_xticks(np.arange(minority.size), [str(r + 1) for r in range(minority.size)])
        ax.set_xlabel("minority arm, ranked by mean within the run (1 = best)")
        ax.set_ylabel("N_i,T / T")
        ax.set_title("exposure of the minority arms, high number of arms")
        ax.legend(fontsize=7, ncol=4)
        fig.tight_layout()
        written.append(save_figure(fig, out / "fig3c_minority_arm_exposure.png"))
        plt.close(fig)
    return written


def results_settings(results: dict) -> list[str]:
    return [s for s in SETTINGS if any(k[0] == s for k in results)]


def markdown(summary: dict) -> str:
    lines = []
    for setting, per_beta in summary.items():
        for tag, block in per_beta.items():
            lines.append(f"### {setting} number of arms, {tag}, T = {block['horizon']:,}, {block['runs']} runs\n")
            lines.append("| policy | regret vs R*_beta | Thm 4 groups term | Thm 4 within term | regret growth from "
                         "T/4 | meritocratic regret minority / majority (growth) | N_min/T | min anytime slack | "
                         "reward / UCB |")
            lines.append("|---|---|---|---|---|---|---|---|---|")
            for p, r in block["policies"].items():
                ratio = f"{r['reward_over_ucb']:.4f}" if "reward_over_ucb" in r else ""
                lines.append(
                    f"| {p} | {r['bf_regret']:,.0f} ± {r['bf_regret_se']:,.0f} | {r['bf_regret_groups']:,.0f} | "
                    f"{r['bf_regret_within']:,.0f} | x{r['bf_regret_growth']:.2f} | "
                    f"{r['meritocratic_regret_minority']:,.0f} / {r['meritocratic_regret_majority']:,.0f} "
                    f"(x{r['meritocratic_growth_minority']:.2f} / x{r['meritocratic_growth_majority']:.2f}) | "
                    f"{r['group_exposure_minority']:.3f} | "
                    f"{r['min_anytime_slack']} | {ratio} |")
            lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", choices=sorted(SCALES), default="small")
    p.add_argument("--setting", choices=["all", *SETTINGS], default="all")
    p.add_argument("--horizon", type=int, help="override the scale's horizon")
    p.add_argument("--runs", type=int, help="override the scale's number of runs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    p.add_argument("--no-baselines", action="store_true", help="BF-UCB and BF-TS only")
    p.add_argument("--policies", help="comma-separated subset of " + ", ".join(BF_POLICIES + BASELINES))
    p.add_argument("--betas", help="comma-separated subset of the floors beta_g (0.2, 0.3, 0.4; both groups equal)")
    p.add_argument("--merge", type=Path, nargs="+", metavar="DIR",
                   help="join the results of these --out folders and write summary + figures to --out")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    only = None
    if args.policies is not None:
        only = tuple(x.strip() for x in args.policies.split(",") if x.strip())
        unknown = [x for x in only if x not in BF_POLICIES + BASELINES]
        if not only or unknown:
            p.error(f"--policies: unknown name(s) {unknown or args.policies!r}; "
                    f"allowed: {', '.join(BF_POLICIES + BASELINES)}")
    betas = BETAS
    if args.betas is not None:
        try:
            chosen = {round(float(x), 6) for x in args.betas.split(",") if x.strip()}
        except ValueError:
            chosen = set()
        betas = tuple(b for b in BETAS if round(b[0], 6) in chosen)
        if not chosen or len(betas) != len(chosen):
            p.error(f"--betas: expected a comma-separated subset of {', '.join(str(b[0]) for b in BETAS)}, "
                    f"got {args.betas!r}")
    if args.merge:
        try:
            results = merge_results(args.merge)
        except ValueError as exc:
            p.error(str(exc))
        args.out.mkdir(parents=True, exist_ok=True)
        return _report(results, args, {"merged_from": [str(d) for d in args.merge]})
    scale = dict(SCALES[args.scale])
    for name in ("horizon", "runs"):
        value = getattr(args, name)
        if value is not None:
            if value < (2 if name == "runs" else 100):
                p.error(f"--{name} must be >= {2 if name == 'runs' else 100}, got {value}")
            scale[name] = value
    args.out.mkdir(parents=True, exist_ok=True)
    settings = list(SETTINGS) if args.setting == "all" else [args.setting]
    results, timings = {}, {}
    t_all = time.perf_counter()
    for setting in settings:
        for beta in betas:
            tag = _tag(beta)
            st = study(setting, beta, scale, args.seed, with_baselines=beta == BASELINE_BETA and not args.no_baselines,
                       only=only)
            if not st.policies:
                continue
            t0 = time.perf_counter()
            if not args.quiet:
                print(f"{setting} arms, beta = {beta}: {', '.join(st.policies)}", file=sys.stderr)
            ds = st.run(progress=not args.quiet)
            timings[f"{setting}/{tag}"] = {p: float(ds["seconds"].sel(policy=p)) for p in st.policies}
            bf.write_results(ds, args.out / f"bilevel_{setting}_{tag}.nc")
            results[(setting, tag)] = ds
            if not args.quiet:
                print(f"  done in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            scale.setdefault("horizon", st.horizon)
            scale.setdefault("runs", st.runs)
    if not results:
        p.error("--policies selected nothing to run (baselines run only at beta = (0.4, 0.4), without --no-baselines)")
    meta = {"scale": args.scale, "horizon": scale["horizon"], "runs": scale["runs"], "seed": args.seed,
            "wall_seconds": time.perf_counter() - t_all, "seconds_per_policy": timings}
    return _report(results, args, meta)


def _report(results: dict, args: argparse.Namespace, meta: dict) -> int:
    """Write summary.json / summary.md and the figures of ``results`` to ``args.out``."""
    summary = summarize(results)
    summary["_meta"] = meta
    write_text(args.out / "summary.json", json.dumps(summary, indent=2))
    md = markdown({k: v for k, v in summary.items() if k != "_meta"})
    write_text(args.out / "summary.md", md)
    for path in figures(results, args.out):
        if not args.quiet:
            print(f"wrote {path}", file=sys.stderr)
    print(md)
    if "wall_seconds" in meta:
        print(f"wall time {meta['wall_seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
