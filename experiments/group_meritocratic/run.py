"""Group meritocratic fairness: Figures 1 and 2 of group_meritocratic_fairness_linear_cb_neurips2022.

- Figure 1 (Section 6): the synthetic problem with one candidate per group (K = 4, d = 17,
  :func:`~bayesfair.environments.group_meritocratic.gmf_synthetic`). Panels: the reward density of
  each group (closed form), the fair pseudo-regret (Eq. 1) and the standard pseudo-regret of
  Fair-Greedy (Algorithm 1), OFUL and Uniform Random, mean +- standard deviation over runs.
- Figure 2 (Section 7): candidates drawn from the UCI Adult population (K = 10 per round, race as
  the group; the stand-in for the paper's US census data,
  :func:`~bayesfair.environments.group_meritocratic.gmf_adult`). Panels: the selection share of
  each group normalized by how many of its candidates were offered (mean and standard deviation
  over runs), and the fair and standard pseudo-regret of Uniform Random, OFUL, Fair-Greedy
  (multi-group form) and Greedy.

The studies are the shipped configs ``group_meritocratic_fig1`` and
``group_meritocratic_fig2_adult`` (the small scale); ``--scale paper``, ``--seed`` (the
config's seed + 100 N) and ``--group`` are config overrides, and the checkpoints are 100 evenly
spaced rounds (the figures' linear round axis). Hyper-parameters (in the configs): lambda = 0.1 for
every ridge estimate (Section 6 states it for Fair-Greedy and OFUL; we keep it in Section 7, which
does not say); Fair-Greedy's rho = 0.1; OFUL's radius is Abbasi-Yadkori et al.'s Theorem 2 with
delta = 0.05, R = the reward noise's standard deviation and S = ||mu*||_2 (known to the
experimenter, not to the policy's estimate).

Usage: python experiments/group_meritocratic/run.py [--scale small|paper] [--figure 1|2|all]
       [--out DIR] [--seed N] [--group race|sex] [--no-progress]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import numpy as np

import bayesfair as bf  # before jax: exposes one CPU device per core
from bayesfair.environments import group_meritocratic as gm
from bayesfair.simulation.results import write_text
from bayesfair.workflow import shipped
from bayesfair.workflow.config import load_config

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CONFIGS = {"fig1": shipped.config_path("group_meritocratic_fig1"),
           "fig2": shipped.config_path("group_meritocratic_fig2_adult")}

# --scale: config overrides per figure (small: the configs as written). The paper: Figure 1 over
# 500 rounds and Figure 2 over 2,500 rounds, 10 runs each.
SCALES: dict[str, dict[str, dict[str, Any]]] = {
    "small": {"fig1": {}, "fig2": {}},
    "paper": {"fig1": {"horizon": 500, "runs": 10, "chunk_size": 500}, "fig2": {"horizon": 2_500, "runs": 10}},
}
COLORS = {"Uniform Random": "tab:blue", "OFUL": "tab:orange", "Fair-Greedy": "tab:green", "Greedy": "tab:red"}


def log(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def _checkpoints(horizon: int, n: int = 100) -> np.ndarray:
    return np.unique(np.clip(np.linspace(horizon / n, horizon, n).round().astype(np.int64), 1, horizon))


def load_study(args, fig: str, extra: tuple[str, ...] = ()):
    """The figure's study: its config with the scale's values, the seed (config's + 100 * --seed)
    and 100 evenly spaced checkpoints as overrides."""
    with open(CONFIGS[fig], "rb") as f:
        raw = tomllib.load(f)
    scale = SCALES[args.scale][fig]
    horizon = scale.get("horizon", raw["horizon"])
    overrides = [f"{k}={v}" for k, v in scale.items()]
    overrides += [f"seed={raw['seed'] + 100 * args.seed}", f"checkpoints={_checkpoints(horizon).tolist()}", *extra]
    return load_config(CONFIGS[fig], overrides)


def _final(ds, metrics=("fair_regret", "regret")) -> dict[str, dict[str, float]]:
    out = {}
    for p in ds["policy"].values:
        row = {}
        for m in metrics:
            v = ds[m].sel(policy=p).isel(checkpoint=-1).values
            row[m] = float(v.mean())
            row[f"{m}_sd"] = float(v.std(ddof=1)) if v.size > 1 else float("nan")
        out[str(p)] = row
    return out


def _regret_panel(ax, ds, metric: str, title: str) -> None:
    t = ds["checkpoint"].values
    for p in ds["policy"].values:
        arr = ds[metric].sel(policy=p).values  # [run, checkpoint]
        mean, sd = arr.mean(axis=0), arr.std(axis=0, ddof=1) if arr.shape[0] > 1 else np.zeros(t.size)
        (line,) = ax.plot(t, mean, label=str(p), color=COLORS.get(str(p)))
        ax.fill_between(t, mean - sd, mean + sd, color=line.get_color(), alpha=0.2, linewidth=0)
    ax.set_xlabel("# of rounds")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)


def figure1(args) -> dict:
    from bayesfair import plotting

    study = load_study(args, "fig1")
    env = study.env
    log(f"figure 1: Section 6 synthetic (K=4, d=17), T={study.horizon}, {study.runs} runs")
    ds = study.run(progress=args.progress)
    cfg = {"horizon": study.horizon, "runs": study.runs}
    bf.write_results(ds, args.out / "fig1.nc")

    plt = plotting.pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(14.5, 3.9))
    weights = np.asarray(env.params["theta"][:-1]).reshape(env.spec.n_groups, env.params["block_size"])
    offsets = env.params["bias_weight"] * env.params["bias_step"] * np.arange(1, env.spec.n_groups + 1)
    x = np.linspace(0, 22, 600)
    for g in range(env.spec.n_groups):
        axes[0].plot(x, gm.uniform_sum_pdf(x, weights[g], offsets[g]), label=f"Group {g + 1}")
    axes[0].set_xlabel("Reward")
    axes[0].set_title("Reward densities", fontsize=10)
    axes[0].legend(fontsize=8)
    axes[0].grid(alpha=0.3)
    _regret_panel(axes[1], ds, "fair_regret", "Fair pseudo-regret")
    _regret_panel(axes[2], ds, "regret", "Standard pseudo-regret")
    axes[1].legend(fontsize=8)
    fig.suptitle(f"Section 6 synthetic, mean +- sd over {cfg['runs']} runs ({args.scale} scale)", fontsize=10)
    fig.tight_layout()
    plotting.save_figure(fig, args.out / "fig1.png")
    final = _final(ds)
    share = (ds["exposure"].isel(checkpoint=-1) / cfg["horizon"]).mean("run")
    return {"horizon": cfg["horizon"], "runs": cfg["runs"], "final": final,
            "selection_share_per_group": {str(p): share.sel(policy=p).values.round(4).tolist()
                                          for p in ds["policy"].values},
            "seconds": float(ds["seconds"].sum())}


def _use_shared_data() -> None:
    shared = REPO.parent / "shared" / "data"
    if not os.environ.get("BAYESFAIR_DATA") and (shared / "adult").is_dir():
        os.environ["BAYESFAIR_DATA"] = str(shared)


def figure2(args) -> dict:
    from bayesfair import plotting

    _use_shared_data()
    study = load_study(args, "fig2", (f'environment.group="{args.group}"',))
    env = study.env
    cfg = {"horizon": study.horizon, "runs": study.runs}
    log(f"figure 2: Adult ({args.group}, {env.spec.n_groups} groups, population {env.params['population']:,}), "
        f"K={env.spec.n_arms}, d={env.spec.n_features}, T={cfg['horizon']}, {cfg['runs']} runs")
    ds = study.run(progress=args.progress)
    bf.write_results(ds, args.out / "fig2.nc")

    rate = gm.selection_rate(ds)  # [policy, run, group]
    names = list(ds["policy"].values)
    groups = list(ds["group"].values)
    plt = plotting.pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15.5, 4.2))
    width = 0.8 / len(names)
    xg = np.arange(len(groups))
    for i, p in enumerate(names):
        v = rate.sel(policy=p).values * 100
        sd = v.std(axis=0, ddof=1) if v.shape[0] > 1 else None
        axes[0].bar(xg - 0.4 + width * (i + 0.5), v.mean(axis=0), width, yerr=sd, capsize=2, label=str(p),
                    color=COLORS.get(str(p)), error_kw={"elinewidth": 0.8})
    axes[0].set_xticks(xg)
    axes[0].set_xticklabels([str(g) for g in groups], rotation=20, fontsize=8)
    axes[0].set_ylabel("% of offered candidates selected")
    axes[0].set_title(f"Percentage of selected groups at T={cfg['horizon']:,}", fontsize=10)
    axes[0].grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=7)
    _regret_panel(axes[1], ds, "fair_regret", "Fair pseudo-regret")
    _regret_panel(axes[2], ds, "regret", "Standard pseudo-regret")
    fig.suptitle(f"Adult ({args.group}) stand-in for the census study, K={env.spec.n_arms}, mean +- sd over "
                 f"{cfg['runs']} runs ({args.scale} scale)", fontsize=10)
    fig.tight_layout()
    plotting.save_figure(fig, args.out / "fig2.png")
    offered = ds["group_offered"].isel(checkpoint=-1).mean("run").sel(policy=names[0]).values
    return {"horizon": cfg["horizon"], "runs": cfg["runs"], "groups": [str(g) for g in groups],
            "group_sizes": env.params["group_sizes"], "mean_offered_per_group": offered.round(1).tolist(),
            "final": _final(ds),
            "selection_rate_percent": {str(p): (rate.sel(policy=p).mean("run").values * 100).round(2).tolist()
                                       for p in names},
            "seconds": float(ds["seconds"].sum())}


def print_summary(fig: str, res: dict) -> None:
    print(f"Figure {fig}: T={res['horizon']:,}, {res['runs']} runs; final pseudo-regrets (mean +- sd over runs)")
    for p, r in res["final"].items():
        print(f"  {p:<15} fair {r['fair_regret']:9.1f} +- {r['fair_regret_sd']:<7.1f} standard "
              f"{r['regret']:10.1f} +- {r['regret_sd']:.1f}")
    if "selection_rate_percent" in res:
        print(f"  selection rate (% of offered), groups {res['groups']}:")
        for p, v in res["selection_rate_percent"].items():
            print(f"    {p:<15} " + "  ".join(f"{x:5.1f}" for x in v))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scale", choices=sorted(SCALES), default="small")
    p.add_argument("--figure", choices=("1", "2", "all"), default="all")
    p.add_argument("--out", type=Path, default=HERE / "results", help="output folder (default: results/ here)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--group", choices=("race", "sex"), default="race", help="Adult's sensitive attribute (Figure 2)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar on stderr")
    args = p.parse_args(argv)
    if args.seed < 0:
        p.error("--seed must be >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    summary: dict[str, Any] = {"scale": args.scale, "seed": args.seed, "group": args.group, "figures": {}}
    summary_path = args.out / "summary.json"
    if summary_path.is_file():  # keep the other figure's entry when only one is rerun with the same settings
        try:
            old = json.loads(summary_path.read_text())
            if all(old.get(k) == summary[k] for k in ("scale", "seed", "group")):
                summary["figures"].update(old.get("figures", {}))
        except (OSError, json.JSONDecodeError):
            pass
    for fig, fn in (("1", figure1), ("2", figure2)):
        if args.figure in (fig, "all"):
            res = fn(args)
            summary["figures"][fig] = res
            print_summary(fig, res)
            write_text(summary_path, json.dumps(summary, indent=2))
    summary["seconds"] = time.perf_counter() - t0
    write_text(summary_path, json.dumps(summary, indent=2))
    log(f"done in {summary['seconds']:.1f} s; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
