"""Simulation-based calibration of the NUTS group-bias fit (bayesfair.inference.fitting.fit) on the COMPAS design.

Model: the hierarchical group-bias model of group_fairness_biased_feedback_aamas2022, Section 3.1,
Eq. 2 (bayesfair.posteriors.group_bias.group_bias_model), Gaussian likelihood, every scale drawn
from its prior: the package's one set of default priors (DEFAULT_PRIORS: tau ~ HalfNormal(3),
s ~ HalfNormal(10), sigma ~ HalfNormal(1), beta_bar ~ N(0, 10^2 I)).

Design: the real COMPAS table's arms (2 race groups x 3 age categories = 6 arms) and contexts
(z-scored, intercept; d = 15, or the first ``--d`` columns incl. the intercept), all 18,316 rows
(or a ``--rows`` subsample). Replication r: draw (beta_bar, beta, psi, tau, s, sigma) from the
prior, simulate y on the design, fit with ``fitting.fit`` (defaults: 4 chains, float64, the
automatic centred/non-centred rule; ``--warmup``/``--samples`` per chain), keep ``--draws``
equally spaced posterior draws and rank the truth among them (bayesfair.inference.sbc.sbc).

Reports: the 90% coverage of psi (and of every parameter), the uniformity p-values (chi-square
and ECDF, smallest over the parameters, with the family-wise alpha of bayesfair.inference.sbc), and per
replication the convergence verdict, the frozen chains, max R-hat, divergences, the step sizes;
a replication whose chains froze but was reported converged counts as a failure of the verdict.

Every replication is appended to ``<out>/replications.jsonl`` and its ranks-inputs to
``<out>/draws_<r>.npz`` as it finishes, so ``--analyze`` can summarise a partial run.

Usage: python models/sbc_group_bias.py [--reps 100] [--warmup 300] [--samples 250] [--draws 100]
       [--d 15] [--rows N] [--seed 0] [--out models/artifacts/sbc_group_bias] [--analyze]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jax
import numpy as np
from numpyro.handlers import seed, trace

from bayesfair.environments.biased import compas_table
from bayesfair.inference import fitting
from bayesfair.inference.sbc import _bins, sbc
from bayesfair.posteriors.group_bias import group_bias_model
from bayesfair.simulation.results import write_text
from bayesfair.workflow.recipes._group_bias import default_out

NAMES = ("beta_bar", "beta", "psi", "tau", "s", "sigma")


def design(d: int, rows: int | None, seed: int):

    table = compas_table()
    X = np.asarray(table.features, np.float64)
    if d < X.shape[1]:
        keep = list(range(d - 1)) + [X.shape[1] - 1] if table.feature_names[-1] == "intercept" else list(range(d))
        X = X[:, keep]
    idx = np.arange(X.shape[0])
    if rows is not None and rows < idx.size:
        idx = np.sort(np.random.default_rng(seed).choice(idx, rows, replace=False))
    return np.asarray(table.arms)[idx].astype(np.int32), X[idx], np.asarray(table.group_of_arm), int(table.reference)


def prior_and_data(key, arms, X, groups, reference):
    """One prior draw of every parameter and data y simulated from it (float64)."""


    with jax.enable_x64(True):
        tr = trace(seed(group_bias_model, key)).get_trace(arms, X, None, group_of_arm=groups, reference=reference)
        vals = {k: np.asarray(v["value"], np.float64) for k, v in tr.items()}
    theta = {"beta_bar": vals["beta_bar"], "beta": vals["beta"], "psi": vals["psi_all"], "tau": vals["tau"],
             "s": vals["s"], "sigma": vals["sigma"]}
    return theta, vals["y"]


def one_replication(r, args, arms, X, groups, reference, out: Path):
    import warnings



    key = jax.random.fold_in(jax.random.key(args.seed), r)
    theta, y = prior_and_data(key, arms, X, groups, reference)
    data = fitting.group_bias_data(arms, X, y, groups, reference=reference)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        f = fitting.fit(data, num_warmup=args.warmup, num_samples=args.samples, seed=args.seed + r, warn=False,
                        dense_mass=args.dense, target_accept=args.target_accept)
    secs = time.perf_counter() - t0
    c, n = f.samples["beta"].shape[:2]
    pick = np.linspace(0, c * n - 1, args.draws).round().astype(int)
    flat = {k: f.samples[k].reshape(c * n, *f.samples[k].shape[2:])[pick] for k in
            ("beta_bar", "beta", "psi_all", "tau", "s", "sigma")}
    flat["psi"] = flat.pop("psi_all")
    np.savez(out / f"draws_{r:04d}.npz", **{f"truth_{k}": v for k, v in theta.items()},
             **{f"draw_{k}": v for k, v in flat.items()})
    conv = f.convergence
    # an independent frozen-chain check: a chain whose log density hardly moved, or whose step
    # size is below 1e-3 of the largest chain's
    lp = f.sample_stats["lp"]
    steps = f.sample_stats["step_size"][:, -1]
    indep_frozen = [int(i) for i in range(lp.shape[0])
                    if np.std(lp[i]) < 1e-8 * max(1.0, abs(np.mean(lp[i]))) or steps[i] < 1e-3 * steps.max()]
    rec = {"rep": r, "seconds": secs, "converged": conv.converged, "max_rhat": conv.max_rhat,
           "min_ess_bulk": conv.min_ess_bulk, "min_ess_tail": conv.min_ess_tail, "divergences": conv.divergences,
           "frozen_chains": list(conv.frozen_chains), "independent_frozen": indep_frozen,
           "step_size": list(conv.step_size), "accept_prob": list(conv.accept_prob), "failing": list(conv.failing),
           "parametrization": {k: f.config["parametrization"][k] for k in ("marginal", "noncentered_beta",
                                                                               "noncentered_psi")},
           "true_sigma": float(theta["sigma"]), "true_s": float(theta["s"]), "true_tau": float(theta["tau"])}
    with open(out / "replications.jsonl", "a") as fh:
        fh.write(json.dumps(rec) + "\n")
    return rec


def _param_label(rec: dict) -> str:
    pz = rec["parametrization"]
    if pz.get("marginal"):
        return "marginal"
    return f"beta {'nc' if pz['noncentered_beta'] else 'c'}, psi {'nc' if pz['noncentered_psi'] else 'c'}"


def analyze(out: Path, alpha: float = 1e-3) -> dict:
    """SBC statistics of every finished replication in ``out`` (bayesfair.inference.sbc.sbc on the stored draws)."""


    files = sorted(out.glob("draws_*.npz"))
    # one record per replication with draws (the latest, should a replication have been run again)
    latest = {}
    if (out / "replications.jsonl").exists():
        for line in open(out / "replications.jsonl"):
            rec = json.loads(line)
            latest[rec["rep"]] = rec
    have = {int(f.stem.split("_")[1]) for f in files}
    recs = [latest[r] for r in sorted(latest) if r in have]
    if len(recs) != len(files):
        raise SystemExit(f"{out}: {len(files)} draw files but {len(recs)} replication records match them; the folder "
                         "mixes runs: start a new --out")
    if len(files) < 2:
        raise SystemExit(f"{out}: {len(files)} replications, need >= 2")
    stored = [dict(np.load(f)) for f in files]
    it = iter(range(len(stored)))
    cur = {}

    def prior_draw(key):
        cur["i"] = next(it)
        return {k: stored[cur["i"]][f"truth_{k}"] for k in NAMES}

    def simulate(key, theta):
        return None

    # ranks among L draws take L + 1 values; the chi-square test needs equiprobable bins that
    # divide them (bayesfair.inference.sbc._bins): 100 stored draws give 101 values (prime, 1 bin), so rank
    # among the first L <= 100 draws with the most bins (any fixed subset of the draws is valid)

    stored_l = min(int(s[f"draw_{NAMES[0]}"].shape[0]) for s in stored)
    use = max(range(max(1, stored_l - 10), stored_l + 1), key=lambda L: (_bins(L + 1, len(stored)), L))

    def fit(data, key):
        return {k: stored[cur["i"]][f"draw_{k}"][:use] for k in NAMES}

    res = sbc(prior_draw, simulate, fit, jax.random.key(0), replications=len(stored), vectorize=False, alpha=alpha)
    psi = [i for i, nm in enumerate(res.names) if nm.startswith("psi")]
    frozen = sum(1 for r in recs if r["frozen_chains"] or r["independent_frozen"])
    frozen_but_converged = sum(1 for r in recs if (r["frozen_chains"] or r["independent_frozen"]) and r["converged"])
    summary = {
        "replications": len(stored), "draws_per_replication": int(res.n_draws), "chi2_bins": int(res.bins),
        "psi_coverage_90": float(np.mean(res.coverage[psi])),
        "psi_coverage_90_range": [float(res.coverage[psi].min()), float(res.coverage[psi].max())],
        "coverage_all_90": res.coverage_all, "coverage_all_se": res.coverage_all_se,
        "min_chi2_p": float(res.chi2_p.min()), "min_ecdf_p": float(res.ecdf_p.min()),
        "min_chi2_p_psi": float(res.chi2_p[psi].min()), "min_ecdf_p_psi": float(res.ecdf_p[psi].min()),
        "failing_parameters": list(res.failing), "passed": bool(res.passed), "alpha_familywise": alpha,
        "not_converged": sum(1 for r in recs if not r["converged"]), "frozen": frozen,
        "frozen_but_reported_converged": frozen_but_converged,
        "divergent_replications": sum(1 for r in recs if r["divergences"] > 0),
        "max_rhat_over_reps": float(max(r["max_rhat"] for r in recs)),
        "low_sigma_reps(<=0.3)": sum(1 for r in recs if r["true_sigma"] <= 0.3),
        "low_sigma_not_converged": sum(1 for r in recs if r["true_sigma"] <= 0.3 and not r["converged"]),
        "median_seconds": float(np.median([r["seconds"] for r in recs])),
        "parametrizations": {k: sum(1 for r in recs if _param_label(r) == k)
                             for k in ("marginal", "beta c, psi c", "beta c, psi nc", "beta nc, psi c",
                                       "beta nc, psi nc")},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    try:
        psi_names = [nm for nm in res.names if nm.startswith("psi")]
        res.plot(out / "sbc_ecdf.png", max_params=12,
                 names=[nm for nm in ("tau", "s", "sigma") if nm in res.names] + psi_names[:9])
    except Exception as exc:  # the plot is a convenience; the numbers are in summary.json
        print(f"(no plot: {exc})")
    return summary


_SETTINGS = ("warmup", "samples", "draws", "d", "rows", "seed", "dense", "target_accept")


def _check_folder(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Replications are added to ``--out`` (``--start`` continues a run): only with the settings of
    the ones already there (``settings.json``), and never over one already there; the summary would
    otherwise count records of two runs, or of different designs, as one."""
    settings = {k: getattr(args, k) for k in _SETTINGS}
    path = args.out / "settings.json"
    if path.exists():
        old = json.loads(path.read_text())
        diff = [f"--{k.replace('_', '-')} {old.get(k)} -> {settings[k]}" for k in _SETTINGS
                if old.get(k) != settings[k]]
        if diff:
            p.error(f"--out {args.out} holds replications made with other settings ({'; '.join(diff)}): use another "
                    "--out")
    elif any(args.out.glob("draws_*.npz")):
        p.error(f"--out {args.out} holds replications without a settings record (an older run): use another --out")
    done = sorted(int(f.stem.split("_")[1]) for f in args.out.glob("draws_*.npz"))
    again = [r for r in done if args.start <= r < args.start + args.reps]
    if again:
        p.error(f"--out {args.out} already holds replications {again[:5]}{' ...' if len(again) > 5 else ''}: add new "
                f"ones with --start {max(done) + 1}, or use another --out")

    write_text(path, json.dumps(settings, indent=2))


def main(argv: list[str] | None = None, *, out: Path | None = None) -> int:
    """Run the SBC (``argv``: its flags; ``out``: the default ``--out``). Returns the exit code."""
    p = argparse.ArgumentParser(prog="sbc_group_bias", description=__doc__.strip().splitlines()[0])
    p.add_argument("--reps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=300)
    p.add_argument("--samples", type=int, default=250)
    p.add_argument("--draws", type=int, default=100, help="posterior draws ranked per replication")
    p.add_argument("--d", type=int, default=15, help="context columns incl. the intercept (COMPAS has 15)")
    p.add_argument("--rows", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start", type=int, default=0, help="first replication index (to resume)")
    p.add_argument("--dense", action=argparse.BooleanOptionalAction, default=True,
                   help="dense mass matrix (default: yes; the COMPAS contexts are correlated)")
    p.add_argument("--target-accept", type=float, default=0.9)
    p.add_argument("--out", type=Path, default=out if out is not None else default_out("sbc_group_bias"))
    p.add_argument("--analyze", action="store_true", help="only summarise the replications in --out")
    args = p.parse_args(argv)
    for flag in ("reps", "warmup", "samples", "draws", "d"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag} must be >= 1, got {getattr(args, flag)}")
    if args.d < 2 or args.d > 15:
        p.error(f"--d must be in [2, 15] (COMPAS has 15 context columns incl. the intercept), got {args.d}")
    if args.draws > 4 * args.samples:
        p.error(f"--draws must be <= 4 x --samples = {4 * args.samples}, got {args.draws}")
    if args.rows is not None and args.rows < 10:
        p.error(f"--rows must be >= 10 (or left out for all rows), got {args.rows}")
    for flag in ("seed", "start"):
        if getattr(args, flag) < 0:
            p.error(f"--{flag} must be >= 0, got {getattr(args, flag)}")
    if not 0.0 < args.target_accept < 1.0:
        p.error(f"--target-accept must be in (0, 1), got {args.target_accept}")
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.analyze:
        _check_folder(p, args)
        arms, X, groups, ref = design(args.d, args.rows, args.seed)
        print(f"COMPAS design: {arms.size} rows, {groups.size} arms, d={X.shape[1]}; {args.reps} replications of "
              f"4 x ({args.warmup} + {args.samples})", flush=True)
        t0 = time.perf_counter()
        for r in range(args.start, args.start + args.reps):
            rec = one_replication(r, args, arms, X, groups, ref, args.out)
            print(f"rep {r}: {rec['seconds']:.1f} s, converged {rec['converged']}, max R-hat {rec['max_rhat']:.3f}, "
                  f"div {rec['divergences']}, frozen {rec['frozen_chains']}/{rec['independent_frozen']}, "
                  f"sigma {rec['true_sigma']:.3f}, {rec['parametrization']}", flush=True)
        print(f"wall {time.perf_counter() - t0:.0f} s", flush=True)
    summary = analyze(args.out)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
