"""FairX on the yeast multi-label bandit: Figures 1-3 and the merit-steepness sweep of Section 5.

Reproduces the yeast experiments of fairness_of_exposure_fairx_icml2021 (Section 5.1-5.4):

- Figure 1: average exposure per arm after 2,000 and 2,000,000 rounds (MAB, f = exp(4 mu)) of
  UCB, TS, FairX-UCB and FairX-TS next to the optimal fair exposure pi*.
- Figure 2: fairness and reward regret over time (MAB, c = 10) of FairX-UCB/TS/EG and UCB/TS;
  FairX-UCB with both solvers of line 7 (the paper's projected gradient ascent, and exact).
- Figure 3: the same for the linear bandit with 50-d random Fourier feature contexts (c = 3):
  FairX-LinUCB/LinTS/LinEG and LinUCB/LinTS.
- sweep: final fairness and reward regret of the FairX MAB policies against the steepness c.

The studies are the shipped configs ``fairx_yeast_fig1``, ``fairx_yeast_fig2``,
``fairx_yeast_fig3`` and ``fairx_yeast_c_sweep`` (environment, merit, policies, seeds);
``--scale``, ``--seed`` (the split, the RFF map and 100 N added to the seeds), ``--bias`` and the
hyper-parameters are overrides of them. The data are split once at random into 20% validation /
80% test examples (Section 5.1). Hyper-parameters are chosen by
:func:`bayesfair.workflow.tuning.grid_search` on the validation bandit (the config with
``environment.part = "validation"``; minimum fairness regret, as the paper does), cached in
``<out>/tuned_params.json`` and printed; the figures are run on the test bandit. ``--no-tune``
uses the documented defaults instead.

Usage: python experiments/fairx_yeast/run.py [--scale small|paper] [--figure 1|2|3|sweep|all]
       [--out DIR] [--seed N] [--no-tune] [--retune] [--bias S]
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
from bayesfair.simulation.results import write_text
from bayesfair.workflow import shipped
from bayesfair.workflow.config import Study, parse_config, parse_override, set_path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

CONFIGS = {fig: shipped.config_path(f"fairx_yeast_{name}")
           for fig, name in (("fig1", "fig1"), ("fig2", "fig2"), ("fig3", "fig3"), ("sweep", "c_sweep"))}
MAB_ALL = ("FairX-UCB", "FairX-UCB-exact", "FairX-TS", "FairX-EG", "UCB", "TS")
LINEAR_ALL = ("FairX-LinUCB", "FairX-LinTS", "FairX-LinEG", "LinUCB", "LinTS")
FIG1_POLICIES = ("UCB", "TS", "FairX-UCB", "FairX-TS")
SWEEP_POLICIES = ("FairX-UCB", "FairX-TS", "FairX-EG")
with open(CONFIGS["sweep"], "rb") as _f:
    PAPER_C = tuple(tomllib.load(_f)["sweep"]["merit.c"])

# Scales: config overrides per figure (small: the configs' sizes), Figure 1's rounds, the sweep's
# c values and the tuning runs. The paper states the Figure 1 horizons (2,000 and 2,000,000
# rounds) and 10 runs per experiment; it does not state the horizons of Figures 2-3 or of the
# tuning runs, nor the c values of its appendix sweep -- those below are our choices (see README.md).
SCALES: dict[str, dict[str, Any]] = {
    "small": {
        "fig1": {"rounds": (2_000, 20_000)},
        "fig2": {},
        "fig3": {},
        "sweep": {"c": (1.0, 4.0, 10.0), "horizon": 3_000, "runs": 2, "checkpoints": 100},
        # small: tune once per setting (at c = 10 for the MAB, c = 3 for the linear bandit) and reuse
        "tune": {"horizon": 1_000, "runs": 2, "linear_horizon": 500, "per_c": False, "chunk_size": 1_024},
    },
    "paper": {
        "fig1": {"rounds": (2_000, 2_000_000), "runs": 10, "chunk_size": 8_192},
        "fig2": {"horizon": 2_000_000, "runs": 10, "chunk_size": 8_192},
        "fig3": {"horizon": 200_000, "runs": 10, "chunk_size": 8_192},
        "sweep": {"c": PAPER_C, "horizon": 200_000, "runs": 10, "chunk_size": 8_192, "checkpoints": 100},
        "tune": {"horizon": 100_000, "runs": 3, "linear_horizon": 20_000, "per_c": True, "chunk_size": 8_192},
    },
}

# Grids (Section 5.1 lists what is searched: w0 for (FairX-)UCB; prior and reward variance for the
# TS variants; lambda and beta for (FairX-)LinUCB; epsilon for FairX-EG; epsilon and the ridge
# for FairX-LinEG). The values are ours; the paper does not list them.
GRIDS: dict[str, dict[str, dict[str, list]]] = {
    "paper": {
        "UCB": {"w0": [0.01, 0.03, 0.1, 0.3, 1.0, 3.0]},
        "FairX-UCB": {"w0": [0.01, 0.03, 0.1, 0.3, 1.0, 3.0]},
        "FairX-UCB-exact": {"w0": [0.01, 0.03, 0.1, 0.3, 1.0, 3.0]},
        "TS": {"prior_var": [0.01, 0.1, 1.0], "noise_var": [0.01, 0.1, 1.0]},
        "FairX-TS": {"prior_var": [0.01, 0.1, 1.0], "noise_var": [0.01, 0.1, 1.0]},
        "FairX-EG": {"epsilon": [0.001, 0.01, 0.05, 0.1, 0.2]},
        "LinUCB": {"lam": [0.1, 1.0, 10.0], "beta": [0.01, 0.1, 1.0]},
        "FairX-LinUCB": {"lam": [0.1, 1.0, 10.0], "beta": [0.01, 0.1, 1.0]},
        "LinTS": {"prior_var": [0.1, 1.0, 10.0], "noise_var": [0.01, 0.1, 1.0]},
        "FairX-LinTS": {"prior_var": [0.1, 1.0, 10.0], "noise_var": [0.01, 0.1, 1.0]},
        "FairX-LinEG": {"epsilon": [0.01, 0.05, 0.1], "lam": [0.1, 1.0, 10.0]},
    },
    # small: a real choice only for some policies (a one-point grid is taken as is, not simulated)
    "small": {
        "UCB": {"w0": [0.3]},
        "FairX-UCB": {"w0": [0.1, 1.0]},
        "FairX-UCB-exact": {"w0": [0.1, 1.0]},
        "TS": {"prior_var": [1.0], "noise_var": [0.25]},
        "FairX-TS": {"prior_var": [1.0], "noise_var": [0.05, 0.25]},
        "FairX-EG": {"epsilon": [0.02, 0.1]},
        "LinUCB": {"lam": [1.0], "beta": [0.3]},
        "FairX-LinUCB": {"lam": [1.0], "beta": [0.3]},
        "LinTS": {"prior_var": [1.0], "noise_var": [0.25]},
        "FairX-LinTS": {"prior_var": [1.0], "noise_var": [0.1, 1.0]},
        "FairX-LinEG": {"epsilon": [0.02, 0.1], "lam": [1.0]},
    },
}

# --no-tune defaults (smoke runs only; not the paper's values, which it does not report).
DEFAULTS: dict[str, dict[str, float]] = {
    "UCB": {"w0": 0.3}, "FairX-UCB": {"w0": 0.3}, "FairX-UCB-exact": {"w0": 0.3},
    "TS": {"prior_var": 1.0, "noise_var": 0.25}, "FairX-TS": {"prior_var": 1.0, "noise_var": 0.25},
    "FairX-EG": {"epsilon": 0.05},
    "LinUCB": {"lam": 1.0, "beta": 0.3}, "FairX-LinUCB": {"lam": 1.0, "beta": 0.3},
    "LinTS": {"prior_var": 1.0, "noise_var": 0.25}, "FairX-LinTS": {"prior_var": 1.0, "noise_var": 0.25},
    "FairX-LinEG": {"epsilon": 0.05, "lam": 1.0},
}

TUNE_SEED = 5  # the tuning runs' seed: 100 * --seed + 5 (the figures': their configs' seeds + 100 * --seed)
TUNE_C = {"mab": 10.0, "linear": 3.0}  # where tuning happens when a scale does not tune per c
MODE_CONFIG = {"mab": "fig2", "linear": "fig3"}  # whose environment and policies are tuned
# hyper-parameters of the posteriors are set inside the policy's posterior table
PARAM_PATHS = {"prior_var": "posterior.prior_var", "noise_var": "posterior.noise_var"}


def log(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


# ---------------------------------------------------------------------------------------------
# studies


def use_shared_data() -> None:
    """Use ``$BAYESFAIR_DATA``; if unset and the repository has ``../shared/data`` beside it, that."""
    shared = REPO.parent / "shared" / "data"
    if not os.environ.get("BAYESFAIR_DATA") and (shared / "yeast").is_dir():
        os.environ["BAYESFAIR_DATA"] = str(shared)


def config_c(fig: str) -> float:
    """The merit steepness c of a figure's config."""
    with open(CONFIGS[fig], "rb") as f:
        return float(tomllib.load(f)["merit"]["c"])


def param_overrides(name: str, params: dict[str, float]) -> list[str]:
    """``policies.<name>.<key>=value`` overrides for a policy's hyper-parameters."""
    return [f"policies.{name}.{PARAM_PATHS.get(k, k)}={float(v)!r}" for k, v in params.items()]


def load_study(args, fig: str, overrides: list[str], only: tuple[str, ...] | None = None) -> Study:
    """The figure's config (without its [sweep] table) with the split and RFF seed (--seed), --bias,
    the seed (config's + 100 * --seed), ``overrides`` and only the policies ``only``."""
    with open(CONFIGS[fig], "rb") as f:
        raw = tomllib.load(f)
    raw.pop("sweep", None)
    env = [f"environment.split_seed={args.seed}", f"seed={raw['seed'] + 100 * args.seed}"]
    if raw["environment"]["mode"] == "linear":
        env += [f"environment.key={args.seed}", f"environment.bias={float(args.bias)!r}"]
    for text in (*env, *overrides):
        key, value = parse_override(text)
        set_path(raw, key, value, where=text)
    if only is not None:
        raw["policies"] = {k: v for k, v in raw["policies"].items() if k in only}
    return parse_config(raw, CONFIGS[fig])


# ---------------------------------------------------------------------------------------------
# tuning (cached)


class Tuner:
    """Grid search on the validation bandit, cached in ``<out>/tuned_params.json``."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.scale = SCALES[args.scale]
        self.grids = GRIDS[args.scale]
        self.path = args.out / "tuned_params.json"
        self.cache: dict[str, Any] = {}
        if self.path.is_file() and not args.retune:
            self.cache = json.loads(self.path.read_text()).get("entries", {})

    def params(self, mode: str, c: float, name: str) -> dict[str, float]:
        if self.args.no_tune:
            return dict(DEFAULTS[name])
        tune = self.scale["tune"]
        horizon = tune["linear_horizon"] if mode == "linear" else tune["horizon"]
        c = c if tune["per_c"] else TUNE_C[mode]
        entry_key = f"{mode}/c={c:g}/{name}"
        signature = {"grid": self.grids[name], "horizon": horizon, "runs": tune["runs"], "seed": self.args.seed,
                     "bias": self.args.bias if mode == "linear" else None}
        hit = self.cache.get(entry_key)
        if hit is not None and hit.get("signature") == signature:
            return dict(hit["params"])
        from bayesfair.workflow.tuning import grid_points, grid_search

        points = grid_points(self.grids[name])
        if len(points) == 1:  # nothing to choose
            self.cache[entry_key] = {"params": points[0], "score": None, "signature": signature,
                                     "note": "one-point grid, not simulated"}
            self._save()
            return dict(points[0])
        fig = MODE_CONFIG[mode]
        val = [f"merit.c={float(c)!r}", 'environment.part="validation"']
        study = load_study(self.args, fig, val, only=(name,))
        log(f"tuning {name} ({mode}, c={c:g}) on the validation split: grid {self.grids[name]}")
        t0 = time.perf_counter()
        res = grid_search(study.env,
                          lambda **p: load_study(self.args, fig, [*val, *param_overrides(name, p)],
                                                 only=(name,)).policies[name],
                          self.grids[name], metric="fairness_regret", horizon=horizon, runs=tune["runs"],
                          seed=self.args.seed * 100 + TUNE_SEED, merit=study.merit,
                          chunk_size=min(tune["chunk_size"], horizon), progress=self.args.progress)
        self.cache[entry_key] = {"params": res.best, "score": res.best_score, "signature": signature,
                                 "seconds": time.perf_counter() - t0,
                                 "table": res.scores.drop(columns=["policy"]).to_dict(orient="records")}
        self._save()
        return dict(res.best)

    def _save(self) -> None:
        write_text(self.path, json.dumps({"scale": self.args.scale, "entries": self.cache}, indent=2))

    def origin(self, mode: str, c: float) -> str:
        if self.args.no_tune:
            return "defaults (--no-tune)"
        if self.scale["tune"]["per_c"]:
            return "tuned on the validation split"
        return f"tuned on the validation split at c={TUNE_C[mode]:g}"

    def chosen(self, mode: str, c: float, names: tuple[str, ...]) -> dict[str, dict[str, float]]:
        out = {n: self.params(mode, c, n) for n in names}
        print(f"hyper-parameters ({mode}, c={c:g}, {self.origin(mode, c)}):")
        from bayesfair.workflow.tuning import grid_points

        for n, p in out.items():
            fixed = not self.args.no_tune and len(grid_points(self.grids[n])) == 1
            values = ", ".join(f"{k}={v:g}" for k, v in p.items())
            print(f"  {n:<13} {values}" + ("  (one-point grid)" if fixed else ""))
        return out


# ---------------------------------------------------------------------------------------------
# figures


def run_policies(args, tuner, fig: str, c: float, names, overrides: list[str]):
    """Simulate the figure's config with the tuned (or default) hyper-parameters of ``names``."""
    mode = "linear" if names[0] in LINEAR_ALL else "mab"
    params = tuner.chosen(mode, c, names)
    study = load_study(args, fig, [*overrides, f"merit.c={float(c)!r}",
                                   *(o for n in names for o in param_overrides(n, params[n]))], only=tuple(names))
    log(f"{fig}: {mode}, c={c:g}, T={study.horizon:,}, {study.runs} runs, policies {', '.join(names)}")
    return study, study.run(progress=args.progress)


def _scale(cfg: dict[str, Any]) -> list[str]:
    return [f"{k}={v}" for k, v in cfg.items() if k in ("horizon", "runs", "chunk_size", "checkpoints")]


def final_table(ds) -> dict[str, dict[str, float]]:
    out = {}
    runs = ds.sizes["run"]
    for p in ds["policy"].values:
        row = {}
        for m in ("fairness_regret", "reward_regret"):
            v = ds[m].sel(policy=p).isel(checkpoint=-1).values
            row[m] = float(v.mean())
            row[f"{m}_se"] = float(v.std(ddof=1) / np.sqrt(runs)) if runs > 1 else float("nan")
        out[str(p)] = row
    return out


def print_table(title: str, table: dict[str, dict[str, float]]) -> None:
    print(title)
    print(f"  {'policy':<13} {'fairness regret':>22} {'reward regret':>22}")
    for p, r in table.items():
        print(f"  {p:<13} {r['fairness_regret']:>12,.1f} +- {r['fairness_regret_se']:<7,.1f} "
              f"{r['reward_regret']:>12,.1f} +- {r['reward_regret_se']:<7,.1f}")


def figure1(args, tuner) -> dict:
    from bayesfair import plotting

    cfg = SCALES[args.scale]["fig1"]
    rounds = tuple(cfg["rounds"])
    horizon = max(rounds)
    grid = np.union1d(bf.checkpoint_grid(horizon, 40), rounds)
    _, ds = run_policies(args, tuner, "fig1", config_c("fig1"), FIG1_POLICIES,
                         [*_scale(cfg), f"horizon={horizon}", f"checkpoints={grid.tolist()}"])
    bf.write_results(ds, args.out / "fig1.nc")
    fig = plotting.plot_exposure_at(ds, rounds, title="yeast MAB, f = exp(4 mu): average exposure per arm")
    plotting.save_figure(fig, args.out / "fig1_exposure.png")
    shares = {}
    pi_star = ds["pi_star"].mean("run").values
    for r in rounds:
        share = (ds["exposure"].sel(checkpoint=r) / r).mean("run")
        shares[r] = {str(p): share.sel(policy=p).values.tolist() for p in ds["policy"].values}
        l1 = {p: float(np.abs(np.asarray(v) - pi_star).sum()) for p, v in shares[r].items()}
        print(f"Figure 1, after {r:,} rounds: l1 distance of the average exposure to pi* "
              + ", ".join(f"{p} {v:.3f}" for p, v in l1.items()))
    return {"pi_star": pi_star.tolist(), "exposure": {str(r): v for r, v in shares.items()}}


def figure_regret(args, tuner, fig: str) -> dict:
    from bayesfair import plotting

    cfg = SCALES[args.scale][fig]
    mode, names = ("mab", MAB_ALL) if fig == "fig2" else ("linear", LINEAR_ALL)
    c = config_c(fig)
    study, ds = run_policies(args, tuner, fig, c, names, _scale(cfg))
    bf.write_results(ds, args.out / f"{fig}.nc")
    fig_obj = plotting.plot_regret(ds)
    fig_obj.suptitle(f"yeast {'MAB' if mode == 'mab' else 'linear (50-d RFF)'}, f = exp({c:g} mu); "
                     f"mean over {ds.sizes['run']} runs, band 10-90%", fontsize=9)
    plotting.save_figure(fig_obj, args.out / f"{fig}_regret.png")
    table = final_table(ds)
    print_table(f"Figure {fig[-1]} ({mode}, c={c:g}), at T={study.horizon:,} (mean +- s.e. over runs):", table)
    out: dict[str, Any] = {"final": table}
    if mode == "linear":
        env_cfg = study.env.params
        out["environment"] = {k: env_cfg[k] for k in ("rff_scale", "bias", "fit_r2", "fitted_mean_range")}
    return out


def sweep(args, tuner) -> dict:
    import pandas as pd

    from bayesfair import plotting

    cfg = SCALES[args.scale]["sweep"]
    rows = []
    for c in cfg["c"]:
        _, ds = run_policies(args, tuner, "sweep", c, SWEEP_POLICIES, _scale(cfg))
        bf.write_results(ds, args.out / f"sweep_c{c:g}.nc")
        for p, r in final_table(ds).items():
            rows.append({"c": c, "policy": p, **r})
    table = pd.DataFrame(rows)
    write_text(args.out / "sweep.csv", table.to_csv(index=False))
    fig = plotting.plot_sweep(table, "c", title=f"yeast MAB, f = exp(c mu), T = {cfg['horizon']:,}; "
                                                 f"mean +- s.e. over {cfg['runs']} runs")
    plotting.save_figure(fig, args.out / "sweep.png")
    print(f"merit-steepness sweep (MAB, T={cfg['horizon']:,}):")
    print(table.to_string(index=False, float_format=lambda v: f"{v:,.1f}"))
    return {"table": rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", choices=tuple(SCALES), default="small")
    p.add_argument("--figure", choices=("1", "2", "3", "sweep", "all"), default="all")
    p.add_argument("--out", type=Path, default=HERE / "results")
    p.add_argument("--seed", type=int, default=0, help="seed of the split, the RFF map and the simulations")
    p.add_argument("--no-tune", action="store_true", help="skip the grid search, use documented defaults")
    p.add_argument("--retune", action="store_true", help="ignore cached tuned hyper-parameters")
    p.add_argument("--bias", type=float, default=0.0,
                   help="constant feature appended before the outer product (linear; 0 = the paper's construction)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar on stderr")
    args = p.parse_args(argv)
    if args.seed < 0:
        p.error("--seed must be >= 0")
    if args.bias < 0:
        p.error("--bias must be >= 0")

    figures = ("1", "2", "3", "sweep") if args.figure == "all" else (args.figure,)
    t_start = time.perf_counter()
    use_shared_data()
    tuner = Tuner(args)
    label_means = load_study(args, "fig2", [], only=MAB_ALL[:1]).env.params["label_means"]
    summary: dict[str, Any] = {"scale": args.scale, "seed": args.seed, "tuned": not args.no_tune,
                               "label_means_test": label_means,
                               "figures": {}, "seconds": {}}
    summary_path = args.out / "summary.json"
    if summary_path.is_file():  # keep earlier figures' entries when running one figure at a time
        old = json.loads(summary_path.read_text())
        if old.get("scale") == args.scale and old.get("seed") == args.seed:
            summary["figures"].update(old.get("figures", {}))
            summary["seconds"].update(old.get("seconds", {}))
    for f in figures:
        t0 = time.perf_counter()
        if f == "1":
            summary["figures"]["1"] = figure1(args, tuner)
        elif f in ("2", "3"):
            summary["figures"][f] = figure_regret(args, tuner, f"fig{f}")
        else:
            summary["figures"]["sweep"] = sweep(args, tuner)
        summary["seconds"][f] = time.perf_counter() - t0
        write_text(summary_path, json.dumps(summary, indent=2))
    wall = time.perf_counter() - t_start
    print(f"done in {wall:.1f} s; results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
