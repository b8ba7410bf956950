"""Group fairness with biased feedback: the experiments of Section 5 (Figures 1-3).

Reproduces group_fairness_biased_feedback_aamas2022 (Schumann et al.), Section 5, with
TopInterval, IntervalChaining, NaiveFair, GroupFairTopInterval (Algorithm 1) and GroupFair-TS
(Thompson sampling on the hierarchical group-bias posterior) side by side; every simulation
gives all five the same environment draws (common random numbers).

- ``synthetic`` (Section 5.2, Figures 1-2): the T sweep (one run of T rounds recorded at every
  checkpoint; Figures 1(a)/2(a)), the number of arms n (1(b)/2(b), half of them sensitive), the
  bias mean mu (1(c)/2(c), d = 5 as the paper states) and the number of sensitive arms out of 10
  (1(d)/2(d)). Reported: share of sensitive pulls, biased regret (Eq. 1), true regret (Eq. 3),
  and the psi estimation error over time of GroupFairTopInterval (its implied estimate
  psi_hat_P1 - psi_hat_P2) and GroupFair-TS (posterior mean), scored against each run's true psi.
- ``family_income`` and ``compas`` (Section 5.3, Figure 3): share of sensitive pulls and biased
  regret over time (the true regret is not defined on these data, as the paper says).

The studies are the shipped configs ``biased_feedback_synthetic`` (the paper's
default point, the T sweep), ``biased_feedback_compas`` and
``biased_feedback_family_income``, all at the small scale. ``--scale``, ``--seed`` (1000 N
added to the seeds), ``--policies`` and the points of the synthetic sweeps are overrides of them.

Usage: python experiments/biased_feedback/run.py [--scale small|paper]
       [--setting synthetic|family_income|compas|all] [--out DIR] [--seed N] [--policies A,B,...]
       [--no-progress]
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
from bayesfair.workflow.config import load_config

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

CONFIGS = {setting: shipped.config_path(f"biased_feedback_{setting}")
           for setting in ("synthetic", "family_income", "compas")}
POLICIES = ("TopInterval", "IntervalChaining", "NaiveFair", "GroupFairTopInterval", "GroupFair-TS")
SETTINGS = tuple(CONFIGS)

# --scale: overrides of the synthetic config (runs, horizon; t_step: checkpoints every t_step
# rounds), of the data configs (data_horizon, data_runs), and the synthetic sweeps' grids. The paper
# (Section 5.2): n = 10, 5 sensitive, mu = 10, d = 2, T = 1000 (the config); d = 5 in the mu sweep.
# Its sweep grids and run counts are not printed (the figures are images); the values below are
# ours. The authors' code records the T sweep at T = 20, 40, ..., 1000.
SCALES: dict[str, dict[str, Any]] = {
    "small": {"n_arms": (6, 10, 16), "bias_mean": (0.0, 10.0, 20.0), "n_sensitive": (3, 5, 7)},
    "paper": {
        "runs": 50, "t_step": 20,
        "n_arms": (4, 6, 8, 10, 12, 14, 16, 18, 20), "bias_mean": (0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 15.0, 20.0),
        "n_sensitive": (2, 3, 4, 5, 6, 7, 8),
        "data_horizon": 2000, "data_runs": 50,
    },
}
# the synthetic config's environment (the sweeps move one of these from it)
with open(CONFIGS["synthetic"], "rb") as _f:
    _ENV = tomllib.load(_f)["environment"]
DEFAULT = {k: _ENV[k] for k in ("n_arms", "n_sensitive", "bias_mean", "n_features")}


def log(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def use_shared_data() -> Path:
    """``$BAYESFAIR_DATA``, defaulting to the ``../shared/data`` folder beside the repository."""
    shared = REPO.parent / "shared" / "data"
    if not os.environ.get("BAYESFAIR_DATA") and shared.is_dir():
        os.environ["BAYESFAIR_DATA"] = str(shared)
    return Path(os.environ.get("BAYESFAIR_DATA", shared))


# ---------------------------------------------------------------------------------------------
# studies


def synthetic_ts_s(bias_mean: float) -> float:
    """GroupFair-TS's s matched to the generator's spread (not to its draws): the root mean square
    of U[-2 mu, 0], 2 mu / sqrt(3), at least 1 (tau = sd of U[0, c] = c / sqrt(12) is in the config)."""
    return float(max(2.0 * bias_mean / np.sqrt(3.0), 1.0))


def load_study(args, setting: str, overrides: list[str], seed_offset: int | None = None):
    """A setting's config with ``overrides``, the seed (``seed_offset`` if given, else the config's)
    plus 1000 * --seed, and the chosen policies."""
    import dataclasses

    with open(CONFIGS[setting], "rb") as f:
        seed = tomllib.load(f)["seed"] if seed_offset is None else seed_offset
    study = load_config(CONFIGS[setting], [*overrides, f"seed={seed + 1000 * args.seed}"])
    if list(args.policies) != list(study.policies):
        study = dataclasses.replace(study, policies={p: study.policies[p] for p in args.policies},
                                    config={**study.config, "policies": {p: study.config["policies"][p]
                                                                         for p in args.policies}})
    return study


def simulate(args, study, tag: str):
    env = study.env
    log(f"{tag}: {env.label}, n={env.spec.n_arms}, d={env.spec.n_features}, T={study.horizon:,}, {study.runs} runs")
    return add_derived(study.run(progress=args.progress), env, study.seed, study.runs)


def add_derived(ds, env, seed: int, runs: int):
    """Sensitive share of pulls and, when the environment has a true psi, the psi error."""
    from bayesfair.environments.biased import env_params

    t = ds["checkpoint"]
    ds["sensitive_share"] = ds["group_pulls"].isel(group=1) / t
    ds["sensitive_share"].attrs["long_name"] = "share of pulls from the sensitive group's arms"
    if "track_psi_hat" in ds and env.params.get("kind") in ("biased_linear", "synthetic_biased"):
        psi = np.asarray(env_params(env, seed, runs).psi, np.float64)  # [run, m, d]
        err = np.sqrt(((ds["track_psi_hat"].values - psi[None, :, None]) ** 2).sum(axis=(-1, -2)))
        has = np.isfinite(ds["track_psi_hat"].values).all(axis=(-1, -2))
        ds["psi_error"] = (("policy", "run", "checkpoint"), np.where(has, err, np.nan),
                           {"long_name": "||psi_hat - psi||_2 over all groups (tracked estimate vs the run's psi)"})
    return ds


def final_row(ds, policy: str) -> dict[str, float]:
    sel = ds.sel(policy=policy).isel(checkpoint=-1)
    runs = ds.sizes["run"]
    row = {}
    for m in ("sensitive_share", "regret", "true_regret", "psi_error"):
        if m not in ds:
            continue
        v = np.asarray(sel[m].values, np.float64)
        if not np.all(np.isfinite(v)):
            continue
        row[m] = float(v.mean())
        row[f"{m}_se"] = float(v.std(ddof=1) / np.sqrt(runs)) if runs > 1 else float("nan")
    return row


def print_final(title: str, ds) -> dict[str, dict[str, float]]:
    table = {str(p): final_row(ds, str(p)) for p in ds["policy"].values}
    print(title)
    cols = [c for c in ("sensitive_share", "regret", "true_regret", "psi_error") if any(c in r for r in table.values())]
    print(f"  {'policy':<21}" + "".join(f"{c:>22}" for c in cols))
    for p, r in table.items():
        cells = "".join(f"{r[c]:>13,.3f} +- {r[c + '_se']:<5,.2f}" if c in r else f"{'-':>22}" for c in cols)
        print(f"  {p:<21}{cells}")
    return table


def plot_over_time(ds, path: Path, title: str) -> None:
    from bayesfair import plotting

    metrics = tuple(m for m in ("sensitive_share", "regret", "true_regret", "psi_error") if m in ds)
    fig = plotting.plot_regret(ds, metrics=metrics)
    fig.suptitle(title, fontsize=9)
    plotting.save_figure(fig, path)


# ---------------------------------------------------------------------------------------------
# settings


def synthetic(args) -> dict[str, Any]:
    import pandas as pd

    from bayesfair import plotting

    cfg = SCALES[args.scale]
    scale = [f"{k}={cfg[k]}" for k in ("runs", "horizon") if k in cfg]
    if "t_step" in cfg:
        with open(CONFIGS["synthetic"], "rb") as f:
            horizon = cfg.get("horizon", tomllib.load(f)["horizon"])
        scale.append(f"checkpoints={np.arange(cfg['t_step'], horizon + 1, cfg['t_step']).tolist()}")
    out: dict[str, Any] = {}
    cache: dict[tuple, Any] = {}

    def run(n_arms, n_sensitive, bias_mean, n_features, tag, seed):
        key = (n_arms, n_sensitive, bias_mean, n_features)
        if key not in cache:
            study = load_study(args, "synthetic", [
                *scale, f"environment.n_arms={n_arms}", f"environment.n_sensitive={n_sensitive}",
                f"environment.bias_mean={float(bias_mean)!r}", f"environment.n_features={n_features}",
                f"policies.GroupFair-TS.s={synthetic_ts_s(bias_mean)!r}"], seed)
            ds = simulate(args, study, tag)
            name = f"synthetic_n{n_arms}_s{n_sensitive}_mu{bias_mean:g}_d{n_features}"
            bf.write_results(ds, args.out / f"{name}.nc")
            cache[key] = ds
        return cache[key]

    # T sweep (Figures 1(a)/2(a)): one run, every checkpoint is a horizon
    base = run(DEFAULT["n_arms"], DEFAULT["n_sensitive"], DEFAULT["bias_mean"], DEFAULT["n_features"], "T", None)
    grid = base["checkpoint"].values
    T, R = int(grid[-1]), base.sizes["run"]
    plot_over_time(base, args.out / "synthetic_T.png",
                   f"synthetic, n=10, 5 sensitive, mu=10, d=2; mean over {R} runs (band 10-90%)")
    out["T"] = {"final": print_final(f"synthetic T sweep, at T={T:,} (mean +- s.e. over {R} runs):", base),
                "checkpoints": grid.tolist(),
                "curves": {m: {str(p): base[m].sel(policy=p).mean("run").values.tolist() for p in base["policy"].values}
                           for m in ("sensitive_share", "regret", "true_regret", "psi_error")}}
    sweeps = (("n_arms", "n"), ("bias_mean", "mu"), ("n_sensitive", "sensitive"))
    for param, short in sweeps:
        if not cfg[param]:
            continue
        rows = []
        for i, v in enumerate(cfg[param]):
            setting = dict(DEFAULT)
            if param == "bias_mean":
                setting["n_features"] = 5  # Section 5.2 (c): d = 5
            setting[param] = v
            if param == "n_arms":
                setting["n_sensitive"] = v // 2
            ds = run(setting["n_arms"], setting["n_sensitive"], setting["bias_mean"], setting["n_features"],
                     f"{short}={v:g}", 10 * (sweeps.index((param, short)) + 1) + i)
            for p, r in {str(p): final_row(ds, str(p)) for p in ds["policy"].values}.items():
                rows.append({short: v, "policy": p, **r})
        table = pd.DataFrame(rows)
        write_text(args.out / f"synthetic_{short}.csv", table.to_csv(index=False))
        for metrics, suffix in ((("sensitive_share",), "share"), (("regret", "true_regret"), "regret")):
            fig = plotting.plot_sweep(table, short, metrics=metrics,
                                      title=f"synthetic, sweep over {short} at T={T:,}; mean +- s.e. over {R} runs")
            plotting.save_figure(fig, args.out / f"synthetic_{short}_{suffix}.png")
        print(f"synthetic sweep over {short} (T={T:,}):")
        show = [c for c in ("sensitive_share", "regret", "true_regret") if c in table]
        print(table[[short, "policy", *show]].to_string(index=False, float_format=lambda x: f"{x:,.3f}"))
        out[short] = rows
    return out


def data_setting(args, which: str) -> dict[str, Any]:
    cfg = SCALES[args.scale]
    scale = [f"{k}={cfg[f'data_{k}']}" for k in ("horizon", "runs") if f"data_{k}" in cfg]
    study = load_study(args, which, scale)
    env, T, R = study.env, study.horizon, study.runs
    ds = simulate(args, study, which)
    bf.write_results(ds, args.out / f"{which}.nc")
    sensitive = env.groups.names[1]
    plot_over_time(ds, args.out / f"{which}.png",
                   f"{which}: share of sensitive ({sensitive}) pulls and biased regret; mean over {R} runs")
    table = print_final(f"{which} (sensitive group {sensitive!r}), at T={T:,} (mean +- s.e. over {R} runs):", ds)
    psi = {}
    if "track_psi_hat" in ds:
        for p in (q for q in ("GroupFairTopInterval", "GroupFair-TS") if q in ds["policy"].values):
            est = ds["track_psi_hat"].sel(policy=p).isel(checkpoint=-1).values[:, 1]  # [run, d]
            psi[p] = dict(zip(env.params["features"], est.mean(axis=0).round(4).tolist(), strict=True))
    return {"final": table, "psi_hat_sensitive_mean_over_runs": psi, "arms": env.params["arms"],
            "arm_mean_reward": env.params["arm_mean_reward"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", choices=tuple(SCALES), default="small")
    p.add_argument("--setting", choices=(*SETTINGS, "all"), default="all")
    p.add_argument("--out", type=Path, default=HERE / "results")
    p.add_argument("--seed", type=int, default=0, help="master seed of the simulations")
    p.add_argument("--policies", default=",".join(POLICIES),
                   help=f"comma-separated subset of {', '.join(POLICIES)} (default: all)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar on stderr")
    args = p.parse_args(argv)
    if args.seed < 0:
        p.error("--seed must be >= 0")
    args.policies = tuple(x.strip() for x in args.policies.split(",") if x.strip())
    unknown = [x for x in args.policies if x not in POLICIES]
    if unknown or not args.policies:
        p.error(f"--policies must name some of {', '.join(POLICIES)}; unknown {unknown}")
    settings = SETTINGS if args.setting == "all" else (args.setting,)
    data_dir = use_shared_data()
    t_start = time.perf_counter()
    summary_path = args.out / "summary.json"
    summary: dict[str, Any] = {"scale": args.scale, "seed": args.seed, "settings": {}, "seconds": {},
                               "scales": SCALES[args.scale]}
    if summary_path.is_file():  # keep earlier settings' entries when running one setting at a time
        old = json.loads(summary_path.read_text())
        if old.get("scale") == args.scale and old.get("seed") == args.seed:
            summary["settings"].update(old.get("settings", {}))
            summary["seconds"].update(old.get("seconds", {}))
    for s in settings:
        if s != "synthetic":
            need = data_dir / s
            if not need.is_dir():
                if args.setting == "all":
                    log(f"skipping {s}: no data under {need} (set BAYESFAIR_DATA)")
                    continue
                p.error(f"{s} needs the data folder {need} (set BAYESFAIR_DATA)")
        t0 = time.perf_counter()
        summary["settings"][s] = synthetic(args) if s == "synthetic" else data_setting(args, s)
        summary["seconds"][s] = time.perf_counter() - t0
        write_text(summary_path, json.dumps(summary, indent=2))
    wall = time.perf_counter() - t_start
    print(f"done in {wall:.1f} s; results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
