"""The group-bias GLM fitted by bayesfair and by PyMC + nutpie, on the recipes' own designs.

For each recipe's default model (``compas``: COMPAS, ordered logistic; ``adult_sex`` and
``adult_race``: Adult, Bernoulli; ``family_income``: family income, Jones-Faddy skew-t on log income) the
design is built by the recipe itself: the recipe's ``main`` runs with ``--rows N`` up to the point
where it would fit, and its table, outcome and kept rows go through
:func:`bayesfair.inference.glm_fit.glm_design` as the recipe does, so both samplers see the same
matrices. Then, in one process:

- **bayesfair**: :func:`~bayesfair.inference.glm_fit.fit_glm` with its default settings (4 chains
  x (1000 warm-up + 1000 draws), float64, target acceptance 0.9, diagonal mass matrix);
- **nutpie**: the same model and priors written here in PyMC from the docstring of
  :mod:`bayesfair.posteriors.group_glm` (an independent implementation: group membership as a
  one-hot matrix instead of indexing, the same non-centred z-scores and the same transforms of
  the positive parameters), compiled by ``nutpie.compile_pymc_model`` (numba backend) and sampled
  by ``nutpie.sample`` with 4 chains x (1000 tune + 1000 draws) and nutpie's other defaults
  (target acceptance 0.8, its gradient-based diagonal mass matrix, every core).

Both compilation caches start empty (``--warm-cache`` keeps the user's): end-to-end time is
model building + compilation + sampling + collecting the draws. Reported per side: wall and CPU
seconds end to end, compilation and sampling seconds (bayesfair's compilation: JAX's own tracing,
lowering and XLA compile durations from ``jax.monitoring``; nutpie's: ``compile_pymc_model``),
the verdict of :func:`bayesfair.inference.check_convergence` on every sampled site (max R-hat,
min bulk/tail ESS, divergences), min bulk ESS and ESS per end-to-end second of the level shift
``delta``, of the bias estimand (the average counterfactual difference of
:func:`~bayesfair.inference.glm_fit.bias_estimand`, computed for every draw) and of the scales
(``sigma_bucket``, ``sigma_u``, ``s_slope`` and the likelihood's ``phi``/``sigma``/``nu``), the
leapfrog steps per draw, and one gradient's cost (each side's compiled log density gradient,
timed at a posterior draw). Agreement: for every scalar of every sampled site and the estimand,
z = (mean_bf - mean_nutpie) / sqrt(MCSE_bf^2 + MCSE_nutpie^2); the largest |z| is printed.

Usage::

    nice -n 10 .venv/bin/python experiments/benchmarks/nutpie_bench.py [--rows 500]
        [--recipes compas adult_sex adult_race family_income] [--seed 0] [--out FILE]
        [--bf-variant KEY=VALUE,...] [--warm-cache]
    .venv/bin/python experiments/benchmarks/nutpie_bench.py --markdown results/benchmarks/nutpie_bench.json

The default 500 rows: ~490 CPU seconds of fitting for the four recipes (2026-12-01; 40 min of
wall time on the 2-core VM at load average 9-17, the benchmark niced). Writes
``results/benchmarks/nutpie_bench.json`` (atomically) and prints the table. Needs the ``bench``
extra (``pip install -e '.[bench]'``: pymc, nutpie).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

import bayesfair  # noqa: F401  (one CPU device per core: before the first JAX operation)

# isort: split
import harness
import jax
import numpy as np

from bayesfair.inference import check_convergence
from bayesfair.inference.glm_fit import GlmDesign, fit_glm, glm_design, linear_predictor
from bayesfair.posteriors.group_glm import (
    CONTINUOUS_LIKELIHOODS,
    DEFAULT_GLM_PRIORS,
    GlmPriors,
    expected_outcome,
    zero_sum_basis,
)
from bayesfair.simulation.results import write_text
from bayesfair.workflow.recipes import _glm, adult_group_bias, compas_group_bias, family_income_group_bias

#: recipe key -> (recipe module, its flags)
RECIPES = {
    "compas": (compas_group_bias, []),
    "adult_sex": (adult_group_bias, ["--group", "sex"]),
    "adult_race": (adult_group_bias, ["--group", "race"]),
    "family_income": (family_income_group_bias, []),
}
SCALES = ("sigma_bucket", "sigma_u", "s_slope", "phi", "sigma", "nu")
DRAWS = TUNE = 1000
CHAINS = 4


# ---------------------------------------------------------------------------------------------
# the design, as the recipe builds it


class _Built(Exception):
    """Raised by the stand-in of the recipe's fitting step, carrying what it was given."""

    def __init__(self, args, table, kw):
        super().__init__("design built")
        self.flags, self.table, self.kw = args, table, kw


def recipe_design(key: str, rows: int | None, seed: int = 0) -> GlmDesign:
    """The design the recipe ``key`` fits with ``--rows rows --seed seed`` and its defaults.

    The recipe's ``main`` parses its flags, builds its table and its outcome and calls the GLM
    path (``_glm.run_glm``); that call is replaced by one that keeps its arguments, and the design
    is made from them by the same ``glm_design`` call as the recipe's fitting step.
    """
    module, flags = RECIPES[key]

    def stop(args, table, description, *, y, keep, **kw):
        raise _Built(args, table, {"y": y, "keep": keep})

    out = tempfile.TemporaryDirectory(prefix="nutpie_bench_")  # the recipe writes nothing before its fit
    argv = [*flags, "--seed", str(seed), "--out", out.name]
    if rows is not None:
        argv += ["--rows", str(rows)]
    with out, mock.patch.object(_glm, "run_glm", stop):
        try:
            module.main(argv)
        except _Built as built:
            a, table, kw = built.flags, built.table, built.kw
        else:
            raise RuntimeError(f"recipe {key} returned without reaching its GLM fit")
    lik = a.likelihood
    return glm_design(table, likelihood=lik, y=kw["y"], keep=kw["keep"], rows=a.rows, seed=a.seed, n_trials=9,
                      n_levels=10 if lik == "ordered_logistic" else None)


# ---------------------------------------------------------------------------------------------
# the same model in PyMC


def pymc_model(design: GlmDesign, priors: GlmPriors = DEFAULT_GLM_PRIORS):
    """The group-bias GLM of :mod:`bayesfair.posteriors.group_glm` as a ``pm.Model``.

    eta = alpha + sigma_bucket (z_gamma Q)[b] + X beta + sum_j G[n, j] (delta_j + sigma_u (Q^T z_u)[b, j]
    + x . s_slope z_lambda[j]), G the one-hot matrix of the non-reference groups and Q ``[B-1, B]``
    the orthonormal zero-sum basis (the coordinates of the zero-sum bucket effects). With
    ``priors.ric_correction`` the shrinkage prior is on beta_total = beta + Gamma delta, Gamma the
    least-squares coefficients of x in the regression of G on the bucket indicators and x.
    """
    import pymc as pm  # optional benchmark dependency
    import pytensor.tensor as pt

    lik, X, y = design.likelihood, np.asarray(design.X, np.float64), np.asarray(design.y, np.float64)
    n, d = X.shape
    cont = lik in CONTINUOUS_LIKELIHOODS
    loc, sc = (float(y.mean()), float(y.std())) if cont else (0.0, 1.0)
    slope_sd = priors.slope_total_sd / np.sqrt(max(d, 1))
    others = [g for g in range(design.n_groups) if g != design.reference]
    G = (np.asarray(design.group)[:, None] == np.asarray(others)[None, :]).astype(np.float64)
    b = np.asarray(design.bucket, np.int64)
    with pm.Model() as model:
        sigma_bucket = pm.HalfNormal("sigma_bucket", sigma=priors.bucket_sd * sc)
        q = zero_sum_basis(design.n_buckets)  # [B-1, B]
        gamma_z = pm.Normal("gamma_z", 0.0, 1.0, shape=design.n_buckets - 1)
        gamma = sigma_bucket * pt.dot(gamma_z, q)
        if others:
            k = len(others)
            delta = pm.Normal("delta", 0.0, priors.shift_sd * sc, shape=k)
        if others and priors.ric_correction:
            onehot_b = (b[:, None] == np.arange(design.n_buckets)[None, :]).astype(np.float64)
            gamma_x = np.linalg.lstsq(np.hstack([onehot_b, X]), G, rcond=None)[0][design.n_buckets:]  # [d, k]
            beta_total = pm.Normal("beta_total", 0.0, slope_sd * sc, shape=d)
            beta = pm.Deterministic("beta", beta_total - pt.dot(gamma_x, delta))
        else:
            beta = pm.Normal("beta", 0.0, slope_sd * sc, shape=d)
        eta = gamma[b] + pt.dot(X, beta)
        if lik != "ordered_logistic":
            eta = eta + pm.Normal("alpha", loc, priors.intercept_sd * sc)
        if others:
            sigma_u = pm.HalfNormal("sigma_u", sigma=priors.u_sd * sc)
            u_z = pm.Normal("u_z", 0.0, 1.0, shape=(design.n_buckets - 1, k))
            u = sigma_u * pt.dot(q.T, u_z)  # [B, k]
            s_slope = pm.HalfNormal("s_slope", sigma=slope_sd * sc)
            lambda_z = pm.Normal("lambda_z", 0.0, 1.0, shape=(k, d))
            per_group = delta[None, :] + u[b] + s_slope * pt.dot(X, lambda_z.T)  # [n, k]
            eta = eta + pt.sum(G * per_group, axis=1)
        if lik == "bernoulli":
            pm.Bernoulli("y", logit_p=eta, observed=y)
        elif lik == "binomial":
            # PyMC's Binomial(logit_p=) takes log(1 - sigmoid(eta)), -inf once sigmoid rounds to 1
            # (eta > ~37); the log-sigmoids stay finite
            pm.CustomDist("y", eta, design.n_trials, logp=_binomial_logit_logp, observed=y)
        elif lik == "beta_binomial":
            phi = pm.Gamma("phi", alpha=2.0, beta=0.1)
            p = pt.clip(pm.math.sigmoid(eta), 1e-12, 1 - 1e-12)
            pm.BetaBinomial("y", n=design.n_trials, alpha=p * phi, beta=(1 - p) * phi, observed=y)
        elif lik == "ordered_logistic":
            K = int(design.n_levels)
            # equal shares of the K levels: cutpoints logit(j / K), j = 1..K-1, spread 2 log(K - 1)
            gap = 2.0 * np.log(K - 1.0) / (K - 2.0)
            mid = pm.Normal("cut_mid", 0.0, 1.5)
            gaps = pm.LogNormal("cut_gaps", mu=np.log(gap), sigma=0.5, shape=K - 2)
            raw = pt.concatenate([pt.zeros(1), pt.cumsum(gaps)])
            pm.OrderedLogistic("y", eta=eta, cutpoints=mid + raw - pt.mean(raw), observed=y.astype(np.int64),
                               compute_p=False)
        else:
            sigma = pm.HalfNormal("sigma", sigma=sc)
            if lik == "gaussian":
                pm.Normal("y", mu=eta, sigma=sigma, observed=y)
            elif lik == "student_t":
                pm.StudentT("y", nu=pm.Gamma("nu", alpha=2.0, beta=0.1), mu=eta, sigma=sigma, observed=y)
            else:  # Jones & Faddy (2003) Eq. (1), a = skew nu, b = (1 - skew) nu, y = eta + sigma t
                nu = pm.Gamma("nu", alpha=2.0, beta=0.1)
                w = pm.Beta("skew", alpha=2.0, beta=2.0)
                pm.CustomDist("y", nu, w, eta, sigma, logp=_jf_skew_t_logp, observed=y)
    return model


def _binomial_logit_logp(value, eta, n):
    """log Binomial(value | n, sigmoid(eta)) from log-sigmoids (pytensor)."""
    import pytensor.tensor as pt

    log_choose = pt.gammaln(n + 1.0) - pt.gammaln(value + 1.0) - pt.gammaln(n - value + 1.0)
    return log_choose - value * pt.softplus(-eta) - (n - value) * pt.softplus(eta)


def _jf_skew_t_logp(value, nu, w, mu, sigma):
    """log density of mu + sigma T, T Jones-Faddy skew-t with a = w nu, b = (1 - w) nu (pytensor)."""
    import pytensor.tensor as pt

    a, b = w * nu, (1.0 - w) * nu
    t = (value - mu) / sigma
    r = t / pt.sqrt(nu + t ** 2)
    log_c = (nu - 1.0) * np.log(2.0) + pt.gammaln(a) + pt.gammaln(b) - pt.gammaln(nu) + 0.5 * pt.log(nu)
    return (a + 0.5) * pt.log1p(r) + (b + 0.5) * pt.log1p(-r) - log_c - pt.log(sigma)


def derived(samples: dict[str, np.ndarray], K: int | None) -> dict[str, np.ndarray]:
    """gamma, u, lambda (and the cutpoints) of nutpie's draws ``[chains, draws, ...]``, the
    deterministic sites bayesfair's model records."""
    s = dict(samples)
    q = zero_sum_basis(s["gamma_z"].shape[-1] + 1)
    s["gamma_coords"] = s["sigma_bucket"][..., None] * s["gamma_z"]
    s["gamma"] = s["gamma_coords"] @ q
    if "delta" in s:
        s["u_coords"] = s["sigma_u"][..., None, None] * s["u_z"]
        s["u"] = np.einsum("jb,cnjk->cnbk", q, s["u_coords"])
        s["lambda"] = s["s_slope"][..., None, None] * s["lambda_z"]
    if K is not None:
        c, n = s["cut_mid"].shape
        raw = np.concatenate([np.zeros((c, n, 1)), np.cumsum(s["cut_gaps"], axis=-1)], axis=-1)
        s["cutpoints"] = s["cut_mid"][..., None] + raw - raw.mean(-1, keepdims=True)
    return s


# ---------------------------------------------------------------------------------------------
# measurements


def estimand_draws(samples: dict[str, np.ndarray], design: GlmDesign, chunk: int = 256) -> dict[str, np.ndarray]:
    """The bias estimand of every draw ``[chains, draws]`` per non-reference group (the same
    quantity as ``bias_estimand``, there from 1000 thinned draws)."""
    c, n = samples["beta"].shape[:2]
    flat = {k: v.reshape(c * n, *v.shape[2:]) for k, v in samples.items()}
    cut = flat.get("cutpoints")
    out = {}
    for g in range(design.n_groups):
        if g == design.reference:
            continue
        rows = np.flatnonzero(design.group == g)
        total = np.zeros(c * n)
        for start in range(0, rows.size, chunk):
            r = rows[start:start + chunk]
            e = [expected_outcome(design.likelihood, linear_predictor(flat, design, rows=r, as_reference=ref),
                                  n_trials=design.n_trials, cutpoints=cut) for ref in (False, True)]
            total += (e[0] - e[1]).sum(-1)
        out[design.group_names[g] if design.group_names else str(g)] = (total / max(rows.size, 1)).reshape(c, n)
    return out


def _stats(arr: np.ndarray) -> dict[str, np.ndarray]:
    """Per scalar of ``arr [chains, draws, ...]``: mean, MCSE of the mean, bulk/tail ESS, R-hat."""
    from arviz_stats.base import array_stats  # arviz's statistics layer, as check_convergence uses

    c, n = arr.shape[:2]
    moved = np.moveaxis(np.asarray(arr, np.float64).reshape(c, n, -1), (0, 1), (-2, -1))
    with np.errstate(all="ignore"):
        return {"mean": moved.mean(axis=(-2, -1)),
                "mcse": np.asarray(array_stats.mcse(moved, chain_axis=-2, draw_axis=-1, method="mean"), float),
                "ess_bulk": np.asarray(array_stats.ess(moved, chain_axis=-2, draw_axis=-1, method="bulk"), float),
                "ess_tail": np.asarray(array_stats.ess(moved, chain_axis=-2, draw_axis=-1, method="tail",
                                                       prob=(0.05, 0.95)), float),
                "rhat": np.asarray(array_stats.rhat(moved, chain_axis=-2, draw_axis=-1, method="rank"), float)}


def summarize(samples: dict[str, np.ndarray], sites: list[str], estimand: dict[str, np.ndarray],
              diverging: np.ndarray, steps: np.ndarray, seconds: dict[str, float]) -> dict[str, Any]:
    """One side's row: the verdict on ``sites``, min ESS of delta / estimand / scales, rates."""
    conv = check_convergence({k: samples[k] for k in sites}, diverging=diverging)
    per = {k: _stats(samples[k]) for k in sites}
    per.update({f"estimand[{g}]": _stats(v) for g, v in estimand.items()})
    groups = {"delta": ["delta"], "estimand": [k for k in per if k.startswith("estimand")],
              "scales": [k for k in SCALES if k in per]}
    wall = seconds["end_to_end"]
    row = {"seconds": seconds, "converged": conv.converged, "max_rhat": conv.max_rhat,
           "min_ess_bulk": conv.min_ess_bulk, "min_ess_tail": conv.min_ess_tail, "divergences": conv.divergences,
           "failing": list(conv.failing), "steps_per_draw": float(np.mean(steps))}
    for name, keys in groups.items():
        bulk = float(min(per[k]["ess_bulk"].min() for k in keys))
        row[f"ess_{name}"] = bulk
        row[f"ess_tail_{name}"] = float(min(per[k]["ess_tail"].min() for k in keys))
        row[f"rhat_{name}"] = float(max(per[k]["rhat"].max() for k in keys))
        row[f"ess_per_s_{name}"] = bulk / wall
        row[f"ess_per_sampling_s_{name}"] = bulk / seconds["sampling"]
        row[f"ess_per_cpu_s_{name}"] = bulk / seconds["cpu"]
    row["ess_per_s_all"] = conv.min_ess_bulk / wall
    row["_per"] = per
    return row


class _CompileClock:
    """Sums JAX's compile-stage durations (tracing, lowering to MLIR, XLA compile, persistent-cache
    loads; not ``compile_time_saved_sec``, which is time *not* spent), per event name in ``by_name``.
    A trace nested in another trace is counted in both, so this slightly overstates compilation."""

    SPENT = ("/jax/core/compile/", "/jax/compilation_cache/cache_retrieval_time_sec")

    def __init__(self):
        self.by_name: dict[str, float] = {}
        self.on = False
        jax.monitoring.register_event_duration_secs_listener(self._event)

    def _event(self, name, secs, **kw):
        if self.on and name.startswith(self.SPENT):
            self.by_name[name] = self.by_name.get(name, 0.0) + float(secs)

    @property
    def total(self) -> float:
        return sum(self.by_name.values())


def fit_bayesfair(design: GlmDesign, seed: int, clock: _CompileClock, **nuts: Any) -> tuple[Any, dict[str, float]]:
    clock.by_name, clock.on = {}, True
    w0, c0 = time.perf_counter(), time.process_time()
    res = fit_glm(design, seed=seed, warn=False, **nuts)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    clock.on = False
    return res, {"end_to_end": wall, "cpu": cpu, "compile": clock.total, "sampling": max(wall - clock.total, 1e-9),
                 **{f"compile{k.rsplit('/', 1)[-1]}": v for k, v in clock.by_name.items()}}


def fit_nutpie(design: GlmDesign, seed: int) -> tuple[Any, Any, Any, dict[str, float]]:
    import nutpie  # optional benchmark dependency

    w0, c0 = time.perf_counter(), time.process_time()
    model = pymc_model(design)
    compiled = nutpie.compile_pymc_model(model)
    w1 = time.perf_counter()
    trace = nutpie.sample(compiled, draws=DRAWS, tune=TUNE, chains=CHAINS, seed=seed, progress_bar=False)
    w2 = time.perf_counter()
    return model, compiled, trace, {"end_to_end": w2 - w0, "cpu": time.process_time() - c0, "compile": w1 - w0,
                          "sampling": w2 - w1}


def gradient_seconds(bf_fit: Any, compiled: Any, repeats: int = 300) -> dict[str, float]:
    """Seconds per log density and gradient at the initial point: bayesfair's jitted NumPyro
    potential (float64) and the numba-compiled PyTensor logp + gradient that nutpie calls."""
    from numpyro.infer.util import initialize_model

    out = {}
    with jax.enable_x64(True):
        info = initialize_model(jax.random.key(0), bf_fit.model, model_args=bf_fit.model_args)
        grad = jax.jit(jax.value_and_grad(info.potential_fn))
        z = info.param_info.z
        jax.block_until_ready(grad(z))
        t0 = time.perf_counter()
        for _ in range(repeats):
            v = grad(z)
        jax.block_until_ready(v)
        out["bayesfair"] = (time.perf_counter() - t0) / repeats
    x = np.asarray(compiled.initial_point_func(0), np.float64)
    compiled.logp_func(x)
    t0 = time.perf_counter()
    for _ in range(repeats):
        compiled.logp_func(x)
    out["nutpie"] = (time.perf_counter() - t0) / repeats
    return out


def agreement(bf: dict[str, Any], nu: dict[str, Any]) -> dict[str, Any]:
    """z of the posterior means of every shared scalar; the largest |z| and the count past 4."""
    zs = {}
    for k in bf["_per"]:
        if k in nu["_per"]:
            a, b = bf["_per"][k], nu["_per"][k]
            zs[k] = (a["mean"] - b["mean"]) / np.sqrt(a["mcse"] ** 2 + b["mcse"] ** 2)
    named = [(f"{k}[{i}]" if np.size(v) > 1 else k, float(z))
             for k, v in zs.items() for i, z in enumerate(np.atleast_1d(v))]
    named.sort(key=lambda t: -abs(t[1]))
    allz = np.array([z for _, z in named])
    return {"n_scalars": int(allz.size), "max_abs_z": float(np.max(np.abs(allz))), "worst": named[0][0],
            "worst_scalars": [[n, round(z, 3)] for n, z in named[:5]],
            "n_abs_z_over_4": int(np.sum(np.abs(allz) > 4)), "n_abs_z_over_3": int(np.sum(np.abs(allz) > 3))}


def compare(design: GlmDesign, seed: int, clock: _CompileClock, variants: tuple[dict[str, Any], ...] = ()
            ) -> dict[str, Any]:
    """Fit ``design`` both ways; the two rows, the agreement and the gradient costs; each of
    ``variants`` (``fit_glm`` settings) is one more bayesfair fit, in ``"variants"``."""
    K = design.n_levels if design.likelihood == "ordered_logistic" else None
    bf_fit, bf_sec = fit_bayesfair(design, seed, clock)
    print(f"  bayesfair: {bf_sec['end_to_end']:.1f} s ({bf_sec['compile']:.1f} s compiling); "
          f"{bf_fit.convergence.message}", flush=True)
    model, compiled, trace, nu_sec = fit_nutpie(design, seed)
    print(f"  nutpie: {nu_sec['end_to_end']:.1f} s ({nu_sec['compile']:.1f} s compiling)", flush=True)
    bs = {k: np.asarray(v) for k, v in bf_fit.samples.items()}
    sites = sorted(v.name for v in model.free_RVs)
    missing = [s for s in sites if s not in bs]
    if missing:
        raise RuntimeError(f"the PyMC model has sites {missing} that bayesfair's fit lacks: the models differ")
    recorded = sites + [v.name for v in model.deterministics]  # beta is one with ric_correction
    ns = derived({k: np.asarray(trace.posterior[k].values) for k in recorded}, K)
    st = trace.sample_stats
    bf = summarize(bs, sites, estimand_draws(bs, design), bf_fit.sample_stats["diverging"],
                   bf_fit.sample_stats["n_steps"], bf_sec)
    nu = summarize(ns, sites, estimand_draws(ns, design), np.asarray(st["diverging"].values, bool),
                   np.asarray(st["n_steps"].values), nu_sec)
    grad = gradient_seconds(bf_fit, compiled)
    bf["gradient_s"], nu["gradient_s"] = grad["bayesfair"], grad["nutpie"]
    agree = agreement(bf, nu)
    rows = []
    for nuts in variants:
        v_fit, v_sec = fit_bayesfair(design, seed, clock, **nuts)
        vs = {k: np.asarray(v) for k, v in v_fit.samples.items()}
        v = summarize(vs, sites, estimand_draws(vs, design), v_fit.sample_stats["diverging"],
                      v_fit.sample_stats["n_steps"], v_sec)
        v["gradient_s"] = float("nan")
        v["agreement"] = agreement(v, nu)
        v["nuts"] = {k: repr(x) for k, x in nuts.items()}
        v.pop("_per")
        rows.append(v)
        print(f"  bayesfair {nuts}: {v_sec['end_to_end']:.1f} s; {v_fit.convergence.message}", flush=True)
    for row in (bf, nu):
        row.pop("_per")
    return {"bayesfair": bf, "nutpie": nu, "agreement": agree, "variants": rows,
            "settings": {"bayesfair": {k: v for k, v in bf_fit.config.items() if k != "model"},
                         "nutpie": {"draws": DRAWS, "tune": TUNE, "chains": CHAINS, "seed": seed,
                                    "backend": "numba", "other": "nutpie defaults (target_accept 0.8, diag)"}}}


# ---------------------------------------------------------------------------------------------
# the report


def versions() -> dict[str, str]:
    import importlib.metadata as md

    return {p: md.version(p) for p in ("bayesfair", "jax", "numpyro", "pymc", "pytensor", "nutpie", "numba",
                                       "arviz-stats")}


def print_rows(results: list[dict[str, Any]]) -> None:
    head = (f"{'recipe':<14}{'rows':>6} {'side':<9}{'wall s':>8}{'comp s':>8}{'samp s':>8}{'cpu s':>8}"
            f"{'Rhat':>7}{'ESSmin':>7}{'div':>5}{'ESS/s delta':>12}{'ESS/s est':>10}{'ESS/s scl':>10}"
            f"{'ESS/cpu-s delta':>16}{'steps':>7}{'grad us':>9}")
    print(head)
    print("-" * len(head))
    for r in results:
        sides = [("bayesfair", r["bayesfair"]), ("nutpie", r["nutpie"])]
        sides += [(",".join(f"{k}={x}" for k, x in v["nuts"].items()), v) for v in r.get("variants", [])]
        for side, s in sides:
            sec = s["seconds"]
            print(f"{r['recipe']:<14}{r['rows']:>6} {side:<9}{sec['end_to_end']:>8.1f}{sec['compile']:>8.1f}"
                  f"{sec['sampling']:>8.1f}{sec['cpu']:>8.1f}{s['max_rhat']:>7.3f}{s['min_ess_bulk']:>7.0f}"
                  f"{s['divergences']:>5d}{s['ess_per_s_delta']:>12.2f}{s['ess_per_s_estimand']:>10.2f}"
                  f"{s['ess_per_s_scales']:>10.2f}{s['ess_per_cpu_s_delta']:>16.2f}{s['steps_per_draw']:>7.1f}"
                  f"{1e6 * s['gradient_s']:>9.1f}")
        a = r["agreement"]
        ratio = {k: r["bayesfair"][f"ess_per_s_{k}"] / r["nutpie"][f"ess_per_s_{k}"]
                 for k in ("delta", "estimand", "scales")}
        print(f"{'':<21}bayesfair / nutpie ESS/s: delta {ratio['delta']:.2f}x, estimand {ratio['estimand']:.2f}x, "
              f"scales {ratio['scales']:.2f}x; agreement: max |z| {a['max_abs_z']:.2f} over {a['n_scalars']} "
              f"scalars ({a['worst']}), {a['n_abs_z_over_4']} past 4")
        for v in r.get("variants", []):
            print(f"{'':<21}{v['nuts']}: ESS/s vs nutpie: delta "
                  f"{v['ess_per_s_delta'] / r['nutpie']['ess_per_s_delta']:.2f}x, estimand "
                  f"{v['ess_per_s_estimand'] / r['nutpie']['ess_per_s_estimand']:.2f}x, scales "
                  f"{v['ess_per_s_scales'] / r['nutpie']['ess_per_s_scales']:.2f}x; agreement max |z| "
                  f"{v['agreement']['max_abs_z']:.2f}")


def markdown(results: list[dict[str, Any]]) -> str:
    """The report's rows as a Markdown table (``--markdown REPORT.json``)."""
    lines = ["| recipe (rows, likelihood) | side | wall s (compile) | CPU s | max R-hat | min bulk ESS | divergences "
             "| ESS/s delta | ESS/s estimand | ESS/s scales | ESS/CPU-s delta | steps/draw | gradient us |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        sides = [("bayesfair", r["bayesfair"]), ("nutpie", r["nutpie"])]
        sides += [("bayesfair " + ", ".join(f"{k}={x}" for k, x in v["nuts"].items()), v)
                  for v in r.get("variants", [])]
        for side, s in sides:
            sec = s["seconds"]
            grad = "" if not np.isfinite(s["gradient_s"]) else f"{1e6 * s['gradient_s']:.0f}"
            lines.append(f"| {r['recipe']} ({r['rows']}, {r['likelihood']}) | {side} | {sec['end_to_end']:.0f} "
                         f"({sec['compile']:.0f}) | {sec['cpu']:.0f} | {s['max_rhat']:.3f} | {s['min_ess_bulk']:.0f} | "
                         f"{s['divergences']} | {s['ess_per_s_delta']:.1f} | {s['ess_per_s_estimand']:.1f} | "
                         f"{s['ess_per_s_scales']:.1f} | {s['ess_per_cpu_s_delta']:.0f} | {s['steps_per_draw']:.1f} "
                         f"| {grad} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--rows", type=int, default=500, help="rows of each recipe's design (%(default)s; 0: all)")
    p.add_argument("--recipes", nargs="+", choices=sorted(RECIPES), default=list(RECIPES))
    p.add_argument("--seed", type=int, default=0, help="seed of the subsample and of both samplers")
    p.add_argument("--warm-cache", action="store_true",
                   help="use the user's JAX and PyTensor compilation caches (default: empty ones)")
    p.add_argument("--bf-variant", action="append", default=[], metavar="KEY=VALUE[,KEY=VALUE]",
                   help="one more bayesfair fit with these fit_glm settings (Python literals), e.g. "
                        "target_accept=0.8 or dense_mass=True or num_chains=2,num_samples=2000; repeatable")
    p.add_argument("--out", type=Path, default=Path("results/benchmarks/nutpie_bench.json"))
    p.add_argument("--markdown", type=Path, metavar="REPORT.json",
                   help="print an earlier report's rows as a Markdown table and exit (fits nothing)")
    args = p.parse_args(argv)
    if args.markdown is not None:
        print(markdown(json.loads(args.markdown.read_text())["results"]))
        return 0
    try:
        variants = tuple({k: ast.literal_eval(x) for k, x in (kv.split("=", 1) for kv in spec.split(","))}
                         for spec in args.bf_variant)
    except (ValueError, SyntaxError) as exc:
        p.error(f"--bf-variant must be KEY=VALUE pairs of Python literals, comma-separated: {exc}")
    if args.rows < 0:
        p.error(f"--rows must be >= 0 (0: all rows), got {args.rows}")
    with contextlib.ExitStack() as stack:
        if not args.warm_cache:  # empty compilation caches, removed at the end
            jax_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="nutpie_bench_jax_"))
            pt_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="nutpie_bench_pytensor_"))
            os.environ["BAYESFAIR_COMPILE_CACHE_DIR"] = jax_dir
            flags = os.environ.get("PYTENSOR_FLAGS")
            os.environ["PYTENSOR_FLAGS"] = f"{flags + ',' if flags else ''}compiledir={pt_dir}"
        return _run(args, variants)


def _run(args: argparse.Namespace, variants: tuple[dict[str, Any], ...]) -> int:
    now = datetime.datetime.now(datetime.UTC).isoformat()
    report = {"benchmark": "nutpie_bench", "argv": sys.argv[1:], "date": now,
              "machine": harness.machine_info(), "versions": versions(), "cold_caches": not args.warm_cache,
              "results": []}
    clock = _CompileClock()
    for key in args.recipes:
        design = recipe_design(key, args.rows or None, args.seed)
        print(f"{key}: {design.y.size} rows, {design.likelihood}, d={design.X.shape[1]}, "
              f"{design.n_groups} groups x {design.n_buckets} buckets", flush=True)
        res = compare(design, args.seed, clock, variants)
        report["results"].append({"recipe": key, "rows": int(design.y.size), "likelihood": design.likelihood,
                                  "d": int(design.X.shape[1]), **res})
        write_text(args.out, json.dumps(report, indent=2, default=float))
        print_rows(report["results"][-1:])
    report["machine"]["loadavg_at_end"] = harness.load_average()
    write_text(args.out, json.dumps(report, indent=2, default=float))
    print()
    print(harness.machine_line(report["machine"]))
    print("versions: " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()))
    print_rows(report["results"])
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
