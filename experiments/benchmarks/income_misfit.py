"""Where the family-income skew-t misses, and whether the misfit moves the bias estimand.

On the recipe's ``--model glm`` design (``nutpie_bench.recipe_design("family_income")``), the
fixed-effects analogue of the GLM's linear predictor (intercept, age-bucket dummies, the Male
indicator, Male x bucket, the z-scored context and Male x context; the GLM's random effects
unpenalised) is fitted by maximum likelihood (L-BFGS) with four error laws:

- ``gaussian`` and ``student_t`` (the Jones-Faddy skew-t with skew weight 1/2);
- ``skew_t``: the recipe's default likelihood, a constant scale;
- ``skew_t_scale``: the same with log scale linear in the buckets, the Male terms and the
  context (a ridge of sd 1 on those coefficients).

Per law: the negative log-likelihood, the recipe's predictive statistics
(``bayesfair.diagnostics.model_checks.ppc_statistics``) on ``--reps`` outcome sets drawn at the
estimate, with their two-sided p-values, the largest gap between the observed and the model's
marginal CDF, and the bias estimand at the estimate (the average over the Male rows of
E[y | Male] - E[y | Female, same bucket and context], E[y] = location + scale E[T]).

For the constant-scale skew-t it also asks whether any error law with this location could give
the observed median: the median of location + residuals, the residuals permuted over all rows,
within the 10 arms, and within ``--strata`` quantile bands of the location. A permutation over
all rows keeps the residuals' exact distribution but not their dependence on the row.

Writes ``--out`` (default ``results/benchmarks/income_misfit.json``) and, beside it,
``income_misfit.png``: the observed minus the model's marginal CDF, with the 90% band of the
replicates' gaps, for the two skew-t laws.

Usage: python experiments/benchmarks/income_misfit.py [--rows 0] [--reps 200] [--strata 10] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from nutpie_bench import recipe_design
from scipy.optimize import minimize

from bayesfair.diagnostics.model_checks import ppc_statistics
from bayesfair.posteriors.skew_t import JonesFaddySkewT, jf_skew_t_mean
from bayesfair.simulation.results import write_text

jax.config.update("jax_enable_x64", True)
LAWS = ("gaussian", "student_t", "skew_t", "skew_t_scale")
PROBS = np.linspace(0.01, 0.99, 99)


def _designs(des):
    """(location design F, scale design S, the Male indicator's columns of each) of the module docstring."""
    X = np.asarray(des.X, np.float64)
    sd = X.std(0)
    Z = (X - X.mean(0)) / np.where(sd > 0, sd, 1.0)
    G = (des.group != des.reference).astype(np.float64)
    B = np.eye(des.n_buckets)[des.bucket][:, 1:]
    nb, d = B.shape[1], Z.shape[1]
    F = np.column_stack([np.ones(G.size), B, G, G[:, None] * B, Z, G[:, None] * Z])
    S = np.column_stack([B, G, G[:, None] * B, Z])
    male_F = np.r_[np.zeros(1 + nb), np.ones(1 + nb), np.zeros(d), np.ones(d)].astype(bool)
    male_S = np.r_[np.zeros(nb), np.ones(1 + nb), np.zeros(d)].astype(bool)
    return F, S, G.astype(bool), male_F, male_S


def _fit(law, F, S, y):
    """Maximum-likelihood (location coefficients, log scale per row fn, nu, skew weight)."""
    p, q = F.shape[1], (S.shape[1] if law == "skew_t_scale" else 0)
    b0 = np.linalg.lstsq(F, y, rcond=None)[0]
    s0 = np.log(np.std(y - F @ b0))
    if law == "gaussian":
        return {"b": b0, "c": np.zeros(0), "log_scale": s0, "nu": np.inf, "w": 0.5, "nll": None, "converged": True,
                "optimiser": "least squares"}
    Fj, Sj, yj = jnp.asarray(F), jnp.asarray(S), jnp.asarray(y)

    def nll(th):
        b, ls, lnu = th[:p], th[p], th[p + 1]
        w = 0.5 if law == "student_t" else jax.nn.sigmoid(th[p + 2])
        c = th[p + 3:]
        scale = jnp.exp(ls + (Sj @ c if q else 0.0))
        return -JonesFaddySkewT(jnp.exp(lnu), w, Fj @ b, scale).log_prob(yj).sum() + 0.5 * jnp.sum(c ** 2)

    f = jax.jit(jax.value_and_grad(nll))
    th0 = np.r_[b0 - 0.1 * np.exp(s0) * (law != "student_t") * np.eye(p)[0], s0 - 0.3, np.log(8.0), 0.5, np.zeros(q)]
    res = minimize(lambda t: tuple(np.asarray(v) for v in f(jnp.asarray(t))), th0, jac=True, method="L-BFGS-B",
                   options={"maxiter": 20000, "maxfun": 100000})
    th = res.x
    w = 0.5 if law == "student_t" else float(1.0 / (1.0 + np.exp(-th[p + 2])))
    return {"b": th[:p], "c": th[p + 3:], "log_scale": float(th[p]), "nu": float(np.exp(th[p + 1])), "w": w,
            "nll": float(res.fun - 0.5 * np.sum(th[p + 3:] ** 2)), "converged": bool(res.success),
            "optimiser": str(res.message)}


def _scale(est, S):
    return np.exp(est["log_scale"] + (S @ est["c"] if est["c"].size else np.zeros(S.shape[0])))


def _draw(est, loc, scale, key, n):
    if np.isinf(est["nu"]):
        return np.asarray(loc + scale * jax.random.normal(key, (n, loc.size)))
    return np.asarray(JonesFaddySkewT(est["nu"], est["w"], jnp.asarray(loc), jnp.asarray(scale)).sample(key, (n,)))


def _mean_t(est):
    return 0.0 if np.isinf(est["nu"]) else float(jf_skew_t_mean(est["nu"], est["w"]))


def _permuted_median(loc, resid, strata, rng, reps: int = 50) -> list[float]:
    """Mean and sd over ``reps`` permutations of median(loc + residuals permuted within each stratum)."""
    meds = []
    for _ in range(reps):
        rr = resid.copy()
        for s in np.unique(strata):
            idx = np.flatnonzero(strata == s)
            rr[idx] = resid[rng.permutation(idx)]
        meds.append(np.median(loc + rr))
    return [float(np.mean(meds)), float(np.std(meds))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=0, help="subsample size (0: all rows; %(default)s)")
    p.add_argument("--reps", type=int, default=200, help="replicated outcome sets per law (%(default)s)")
    p.add_argument("--strata", type=int, default=10, help="location bands of the permutation check (%(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("results/benchmarks/income_misfit.json"))
    a = p.parse_args(argv)
    for name in ("reps", "strata"):
        if getattr(a, name) < 2:
            p.error(f"--{name} must be >= 2, got {getattr(a, name)}")
    t0 = time.time()
    des = recipe_design("family_income", a.rows or None, a.seed)
    y = np.asarray(des.y, np.float64)
    F, S, male, male_F, male_S = _designs(des)
    stats = ppc_statistics("continuous", groups={nm: des.group == g for g, nm in enumerate(des.group_names)})
    key = jax.random.key(a.seed)
    grid = np.quantile(y, PROBS)
    args = sys.argv[1:] if argv is None else argv
    out = {"command": " ".join(["python experiments/benchmarks/income_misfit.py", *args]),
           "rows": int(y.size), "location_columns": int(F.shape[1]), "scale_columns": int(S.shape[1]), "laws": {}}
    gaps = {}
    print(f"family income: {y.size:,} rows, {F.shape[1]} location columns; observed median {np.median(y):.4f}")
    for i, law in enumerate(LAWS):
        est = _fit(law, F, S, y)
        loc, scale = F @ est["b"], _scale(est, S)
        reps = _draw(est, loc, scale, jax.random.fold_in(key, i), a.reps)
        checks = {}
        for name, fn in stats.items():
            t, tr = float(fn(y)), np.asarray(fn(reps), np.float64)
            above = float(np.mean(tr > t))
            checks[name] = {"observed": t, "replicated_mean": float(tr.mean()),
                            "p": min(1.0, 2 * min(above, 1 - above))}
        model_cdf = np.mean(reps[:, :, None] <= grid, axis=(0, 1))
        rep_gap = np.mean(reps[:, :, None] <= grid, axis=1) - model_cdf
        gap = np.mean(y[:, None] <= grid, axis=0) - model_cdf
        gaps[law] = (gap, np.quantile(rep_gap, [0.05, 0.95], axis=0))
        # the estimand: Male rows as they are minus the same rows with the Male terms off
        cf_loc = F[male][:, ~male_F] @ est["b"][~male_F]
        cf_scale = (np.exp(est["log_scale"] + S[male][:, ~male_S] @ est["c"][~male_S]) if est["c"].size
                    else scale[male])
        estimand = float(np.mean(loc[male] + scale[male] * _mean_t(est) - cf_loc - cf_scale * _mean_t(est)))
        out["laws"][law] = {"nll": est["nll"], "converged": est["converged"], "optimiser": est["optimiser"],
                            "nu": est["nu"], "skew_weight": est["w"],
                            "scale_range": [float(scale.min()), float(scale.max())], "checks": checks,
                            "failed": [k for k, v in checks.items() if v["p"] < 0.05],
                            "max_cdf_gap": float(np.abs(gap).max()), "estimand": estimand}
        r = out["laws"][law]
        nll = "" if r["nll"] is None else f"nll {r['nll']:.1f}, "
        if not r["converged"]:
            nll = f"OPTIMISER NOT CONVERGED ({r['optimiser']}), " + nll
        print(f"{law:>13}: {nll}estimand {estimand:+.4f}, median {checks['q50']['replicated_mean']:.4f} "
              f"(p {checks['q50']['p']:.3f}), max CDF gap {r['max_cdf_gap']:.4f}, "
              f"failed: {', '.join(r['failed']) or 'none'}", flush=True)
        if law == "skew_t":
            resid, rng = y - loc, np.random.default_rng(a.seed)
            arm = des.group * des.n_buckets + des.bucket
            band = np.searchsorted(np.quantile(loc, np.linspace(0, 1, a.strata + 1)[1:-1]), loc)

            perm = {"all rows": np.zeros(y.size), "within arms": arm, f"within {a.strata} location bands": band}
            out["permuted_median"] = {"observed": float(np.median(y)),
                                      **{k: _permuted_median(loc, resid, v, rng) for k, v in perm.items()}}
            print("   median of location + residuals permuted: observed " + f"{np.median(y):.4f}, " + ", ".join(
                f"{k} {v[0]:.4f}" for k, v in out["permuted_median"].items() if k != "observed"), flush=True)
    out["seconds"] = time.time() - t0
    a.out.parent.mkdir(parents=True, exist_ok=True)
    write_text(a.out, json.dumps(out, indent=2) + "\n")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bayesfair.plotting.figures import save_figure

    fig, ax = plt.subplots(figsize=(7, 4))
    labels = {"skew_t": "skew-t (the recipe's)", "skew_t_scale": "skew-t, log scale on the context"}
    for (law, label), colour in zip(labels.items(), ("C0", "C1"), strict=True):
        gap, band = gaps[law]
        ax.fill_between(grid, band[0], band[1], color=colour, alpha=0.2)
        ax.plot(grid, gap, color=colour, label=label)
    ax.axhline(0, color="k", lw=0.6)
    ax.axvline(np.median(y), color="grey", ls=":", lw=1, label="observed median")
    ax.set_xlabel("log(income / 100,000 PHP)")
    ax.set_ylabel("observed minus model CDF")
    ax.set_title(f"Family income, {y.size:,} rows: marginal CDF gap at the maximum-likelihood fit\n"
                 f"(band: 90% of {a.reps} replicated outcome sets)", fontsize=10)
    ax.legend(fontsize=8)
    save_figure(fig, a.out.with_suffix(".png"))
    print(f"wrote {a.out} and {a.out.with_suffix('.png')} ({out['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
