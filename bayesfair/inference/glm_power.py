"""The power of the group-bias GLM's bias estimand on a real design, by semi-synthetic outcomes.

"Every interval contains 0" is evidence of no bias only if the fit would have seen a bias of a
given size. :func:`glm_power` measures that on a design (the real group, bucket and features of a
:class:`~bayesfair.inference.glm_fit.GlmDesign`): it takes a parameter point of the fitted model
(:func:`power_point`: the posterior mean, or one posterior draw), sets the group bias to a known
size, draws outcomes from the model itself, refits each replicate as the recipe would, and counts.

The generating point (:func:`generating_point`): every parameter at the point, except the bias
terms of :func:`~bayesfair.posteriors.group_glm.group_glm_model`: the level shift ``delta`` of
the studied group is the effect size (every other group's 0), and the group-by-bucket deviations
``u`` and slope differences ``lambda`` are 0, so the level shift is the only bias in the data and
effect 0 is no bias at all. The effect is stated on ``delta``'s scale (log-odds for the discrete
likelihoods; the linear predictor's units for the continuous ones) and translated to the
estimand's outcome scale by :func:`true_estimand` (the average over the group's rows of
E[y | group, x, bucket] - E[y | reference, same x and bucket] at the generating point, computed by
the estimand's own code, :func:`~bayesfair.inference.glm_fit.linear_predictor` and
:func:`~bayesfair.posteriors.group_glm.expected_outcome`).

Outcomes (:func:`simulate_outcomes`) come from the model's observation site through NumPyro's
``Predictive`` with the generating point substituted: the same code as the model's prior and
posterior predictive draws. Each replicate is fitted by :func:`bayesfair.inference.fitting.fit`
with the real design's model (its priors; for the continuous likelihoods the prior scales that
the real outcome's mean and sd set), with one ``MCMC`` object for every replicate
(``fit(..., cache_key=...)``: same shapes, new outcomes as inputs), and its estimand is
:func:`~bayesfair.inference.glm_fit.bias_estimand`'s equal-tailed ``ci_prob`` interval. Per
effect size: the coverage of the interval (the share of replicates whose interval holds the true
estimand), the power (the share whose interval excludes 0), each with its binomial standard error
sqrt(p (1 - p) / n) and Wilson 95% interval, and how many fits failed the convergence verdict.
Fits that did not converge are counted and reported, never dropped: the headline numbers use
every replicate, and the same numbers over the converged ones only are given beside them. A fit
that raised is counted in ``errors`` with its message (it has no interval).

The power is that of this design (its rows, groups and features) under this generating point; a
subsample's power is not the full data set's.

Without refits, :func:`normal_power` and :func:`detectable_effect` give the large-sample
approximation from one fit's posterior sd of the estimand (a normal, calibrated posterior of the
same sd under every effect size); the recipes print it with every fit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from bayesfair.core._validate import finite_float, float_in, positive_float, positive_int
from bayesfair.inference.fitting import fit
from bayesfair.inference.glm_fit import GlmDesign, bias_estimand, build_glm, linear_predictor
from bayesfair.posteriors.group_glm import DEFAULT_GLM_PRIORS, GlmPriors, expected_outcome

__all__ = ["PowerResult", "detectable_effect", "glm_power", "generating_point", "normal_power", "power_point",
           "simulate_outcomes", "true_estimand"]

#: The sample sites of the model that a parameter point holds (those the likelihood has).
POINT_SITES = ("alpha", "sigma_bucket", "gamma_z", "beta", "delta", "sigma_u", "u_z", "s_slope", "lambda_z",
               "phi", "cut_mid", "cut_gaps", "sigma", "nu", "skew")


class PowerResult(NamedTuple):
    """Result of :func:`glm_power`.

    ``rows``: one dict per effect size (see :func:`glm_power`); ``group``: the studied group,
    ``reference`` the reference group, ``scale`` the estimand's outcome scale, ``ci_prob`` the
    interval's probability, ``replicates`` per effect, ``design_rows`` the design's rows,
    ``likelihood``, ``nuts`` the NUTS settings of the refits, ``point`` how the generating point
    was chosen, ``seconds`` the wall time.
    """

    rows: list[dict[str, Any]]
    group: str
    reference: str
    scale: str
    ci_prob: float
    replicates: int
    design_rows: int
    likelihood: str
    nuts: dict[str, Any]
    point: str
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return self._asdict()


def _group_slot(design: GlmDesign, group: Any) -> tuple[int, int, str]:
    """(group index, its slot in ``delta``, its name) of ``group`` (a name or an index; None: the
    first non-reference group)."""
    others = [g for g in range(design.n_groups) if g != design.reference]
    if not others:
        raise ValueError("the design has no non-reference group: no group bias to study")
    names = list(design.group_names) if design.group_names else [str(g) for g in range(design.n_groups)]
    if group is None:
        g = others[0]
    elif isinstance(group, str):
        if group not in names:
            raise ValueError(f"group {group!r} is not one of the design's groups {names}")
        g = names.index(group)
    else:
        g = int(group)
        if not 0 <= g < design.n_groups:
            raise ValueError(f"group must be a name in {names} or an index in [0, {design.n_groups - 1}], got {group}")
    if g == design.reference:
        raise ValueError(f"group {names[g]!r} is the reference group: its bias is 0 by definition; choose one of "
                         f"{[names[o] for o in others]}")
    if not np.any(design.group == g):
        raise ValueError(f"group {names[g]!r} has no rows in the design: its estimand is undefined")
    return g, others.index(g), names[g]


def power_point(fit_: Any, *, draw: int | None = None) -> dict[str, np.ndarray]:
    """A parameter point of a GLM fit (:func:`~bayesfair.inference.glm_fit.fit_glm`): the sample
    sites of :data:`POINT_SITES` the model has.

    ``draw=None``: the posterior mean, taken on the scale of the effects (the coordinates of the
    zero-sum bucket effects ``gamma_coords``, the cutpoints, the slopes) and mapped back to the
    non-centred sites (``gamma_z = mean(gamma_coords) / mean(sigma_bucket)``, and so for ``u``
    and ``lambda``), so the point's effects
    are the posterior means of the effects, not products of means. ``draw=i``: the i-th draw of
    the chains laid end to end (chain 0's draws first), a coherent posterior draw.
    """
    s = {k: np.asarray(v, np.float64) for k, v in fit_.samples.items()}
    missing = [k for k in ("beta", "sigma_bucket", "gamma") if k not in s]
    if missing:
        raise ValueError(f"fit_ is not a fit of group_glm_model (no {', '.join(missing)} in its samples)")
    c, n = s["beta"].shape[:2]
    flat = {k: v.reshape(c * n, *v.shape[2:]) for k, v in s.items()}
    effects = [(eff, z, scale) for eff, z, scale in (("gamma_coords", "gamma_z", "sigma_bucket"),
                                                     ("u_coords", "u_z", "sigma_u"), ("lambda", "lambda_z", "s_slope"))
               if eff in flat]  # every form records the effects; the z-scores only the non-centred one
    if draw is not None and not -c * n <= int(draw) < c * n:
        raise ValueError(f"draw must be in [0, {c * n - 1}] (chains x draws of the fit), got {draw}")

    def pick(v: np.ndarray) -> np.ndarray:
        return v.mean(0) if draw is None else v[int(draw)]

    point = {k: pick(flat[k]) for k in POINT_SITES if k in flat}
    for eff, z, scale in effects:
        point[z] = pick(flat[eff]) / point[scale]
    return point


def generating_point(design: GlmDesign, point: dict[str, Any], effect: float, *, group: Any = None
                     ) -> dict[str, np.ndarray]:
    """``point`` with the bias set: ``delta`` = ``effect`` for ``group`` (default: the first
    non-reference group) and 0 for the others, ``u_z`` and ``lambda_z`` 0 (no group-by-bucket
    deviation, no slope difference)."""
    effect = float(effect)
    if not np.isfinite(effect):
        raise ValueError(f"effect must be finite, got {effect}")
    _, slot, _ = _group_slot(design, group)
    missing = [k for k in ("beta", "sigma_bucket", "delta") if k not in point]
    if missing:
        raise ValueError(f"point lacks {', '.join(missing)} (a point of group_glm_model with its bias terms: "
                         "see power_point)")
    k = design.n_groups - 1
    out = {name: np.asarray(v, np.float64) for name, v in point.items() if name in POINT_SITES}
    delta = np.zeros(k)
    delta[slot] = effect
    out["delta"] = delta
    out["u_z"] = np.zeros((design.n_buckets - 1, k))
    out["lambda_z"] = np.zeros((k, design.X.shape[1]))
    for name in ("sigma_u", "s_slope"):  # any positive value: their effects are 0
        out[name] = np.asarray(point.get(name, 1.0), np.float64)
    return out


def _predict(design: GlmDesign, gen: dict[str, np.ndarray], key: Any, n: int, priors: GlmPriors
             ) -> dict[str, np.ndarray]:
    """``n`` draws of the model's unobserved and deterministic sites at the generating point ``gen``."""
    from numpyro.infer import Predictive  # numpyro.infer pulls in the samplers: heavy at import

    model, args = build_glm(design, priors=priors)
    shift = model.keywords["feature_shift"]
    if shift is not None:  # the prior's site is beta_total = beta + Gamma delta (ric_correction)
        gen = {**gen, "beta_total": np.asarray(gen["beta"]) + np.asarray(shift) @ np.asarray(gen["delta"])}
    batch = {k: np.broadcast_to(v, (n, *np.shape(v))) for k, v in gen.items()}
    with jax.enable_x64(True):
        out = Predictive(model, posterior_samples=batch)(key, *args[:3], None)
    return {k: np.asarray(v) for k, v in out.items()}


def simulate_outcomes(design: GlmDesign, point: dict[str, Any], effect: float, key: Any, *, replicates: int,
                      group: Any = None, priors: GlmPriors = DEFAULT_GLM_PRIORS) -> np.ndarray:
    """``y [replicates, rows]``: outcomes of the design's rows drawn from the model's observation
    site at :func:`generating_point` ``(design, point, effect)``, with the JAX ``key``."""
    replicates = positive_int("replicates", replicates)
    gen = generating_point(design, point, effect, group=group)
    return np.asarray(_predict(design, gen, key, replicates, priors)["y"], np.float64)


def true_estimand(design: GlmDesign, point: dict[str, Any], effect: float, *, group: Any = None,
                  priors: GlmPriors = DEFAULT_GLM_PRIORS) -> float:
    """The estimand of :func:`~bayesfair.inference.glm_fit.bias_estimand` for ``group`` at
    :func:`generating_point` ``(design, point, effect)``: the average over the group's rows of
    E[y | group] - E[y | reference group, same x and bucket], on the outcome's scale."""
    g, _, _ = _group_slot(design, group)
    gen = generating_point(design, point, effect, group=group)
    det = _predict(design, gen, jax.random.key(0), 1, priors)  # the deterministic sites (the key draws y only)
    s = {k: np.asarray(v, np.float64)[None] for k, v in gen.items()}
    s.update({k: np.asarray(det[k], np.float64) for k in ("gamma", "u", "lambda", "cutpoints") if k in det})
    rows = np.flatnonzero(design.group == g)
    e1 = expected_outcome(design.likelihood, linear_predictor(s, design, rows=rows), n_trials=design.n_trials,
                          cutpoints=s.get("cutpoints"))
    e0 = expected_outcome(design.likelihood, linear_predictor(s, design, rows=rows, as_reference=True),
                          n_trials=design.n_trials, cutpoints=s.get("cutpoints"))
    return float(np.mean(e1 - e0))


def normal_power(effect: float, sd: float, *, ci_prob: float = 0.9) -> float:
    """P(the equal-tailed ``ci_prob`` interval excludes 0) in the large-sample approximation.

    The estimate is taken as N(``effect``, ``sd``^2) and the interval as the estimate +- z sd,
    z = Phi^-1((1 + ci_prob) / 2): a posterior that is normal, of the same sd under every effect
    size, and calibrated. Then P(excludes 0) = Phi(effect / sd - z) + Phi(-effect / sd - z),
    ``1 - ci_prob`` at effect 0. On a large design this is what :func:`glm_power` estimates by
    refitting; where the posterior is skewed, its sd depends on the effect, or the interval
    under-covers (short chains, a prior that shrinks the bias), only the refits say.
    """
    from scipy.stats import norm  # scipy.stats is heavy at import

    effect, sd = finite_float("effect", effect), positive_float("sd", sd)
    z = norm.ppf((1.0 + float_in("ci_prob", ci_prob, 0.0, 1.0, low_open=True, high_open=True)) / 2.0)
    return float(norm.cdf(effect / sd - z) + norm.cdf(-effect / sd - z))


def detectable_effect(sd: float, *, power: float = 0.9, ci_prob: float = 0.9) -> float:
    """The smallest |effect| whose :func:`normal_power` is ``power`` (same approximation): about
    (z_{(1 + ci_prob) / 2} + z_power) sd, 2.93 sd for a 90% interval at 90% power. ``power``
    must exceed ``1 - ci_prob``, the power at effect 0."""
    from scipy.optimize import brentq

    sd = positive_float("sd", sd)
    ci_prob = float_in("ci_prob", ci_prob, 0.0, 1.0, low_open=True, high_open=True)
    power = float_in("power", power, round(1.0 - ci_prob, 12), 1.0, low_open=True, high_open=True)
    hi = sd
    while normal_power(hi, sd, ci_prob=ci_prob) < power:
        hi *= 2.0
    return float(brentq(lambda e: normal_power(e, sd, ci_prob=ci_prob) - power, 0.0, hi, xtol=1e-12 * sd))


def _share(hits: np.ndarray) -> dict[str, Any]:
    """The share of True in ``hits`` with its binomial standard error and Wilson 95% interval."""
    from scipy.stats import binomtest  # scipy.stats is heavy at import

    n = int(hits.size)
    k = int(np.sum(hits))
    if n == 0:
        return {"p": float("nan"), "se": float("nan"), "wilson95": [float("nan"), float("nan")], "k": 0, "n": 0}
    p = k / n
    ci = binomtest(k, n).proportion_ci(0.95, method="wilson")
    return {"p": p, "se": float(np.sqrt(p * (1 - p) / n)), "wilson95": [float(ci.low), float(ci.high)], "k": k,
            "n": n}


def glm_power(design: GlmDesign, point: dict[str, Any], key: Any, *, effects: Sequence[float] = (0.0, 0.25, 0.5),
              replicates: int = 20, group: Any = None, ci_prob: float = 0.9, priors: GlmPriors = DEFAULT_GLM_PRIORS,
              point_label: str = "given", estimand_draws: int = 1000, centered: Any = (),
              progress: Callable[[str], None] | None = None,
              checkpoint: Callable[[PowerResult], None] | None = None, **nuts: Any) -> PowerResult:
    """Coverage and power of the bias estimand's ``ci_prob`` interval on ``design`` (module docstring).

    Parameters
    ----------
    design : GlmDesign
        The real design (its outcome ``y`` is replaced by the simulated ones).
    point : dict
        A parameter point of :func:`~bayesfair.posteriors.group_glm.group_glm_model` (e.g.
        :func:`power_point` of the real fit); its bias terms are replaced.
    key : jax.random.key
        Every simulation and refit seed comes from it (effect i: ``fold_in(key, i)``).
    effects : floats
        Level shifts ``delta`` of ``group`` (on ``delta``'s scale), e.g. ``(0, 0.25, 0.5)``.
    replicates : int
        Simulated data sets per effect size, each fitted once.
    group : str or int, optional
        The studied group (default: the first non-reference group).
    ci_prob : float
        The interval of :func:`~bayesfair.inference.glm_fit.bias_estimand` (equal-tailed).
    point_label : str
        How ``point`` was chosen (written to the result).
    centered : tuple of str, or mapping
        The form the refits sample the random effects in (:func:`~bayesfair.inference.glm_fit.fit_glm`'s
        ``centered``: the names centred, or their centring weights; default none centred).
    progress : callable, optional
        Called with a line after each refit.
    checkpoint : callable, optional
        Called with the result so far (``replicates`` = those done) after each round of
        replicates (one per effect size; the replicates run round by round, so a run stopped
        early covers every effect size), except the last (the return value).
    **nuts
        :func:`~bayesfair.inference.fitting.fit`'s NUTS settings (``num_warmup``, ``num_samples``,
        ``num_chains``, ``target_accept``, ``dense_mass``); the seed comes from ``key``.

    Returns
    -------
    PowerResult
        ``rows``, one per effect: ``effect`` (delta scale), ``true_estimand`` (outcome scale),
        ``replicates``, ``converged`` (fits that passed the verdict), ``not_converged``,
        ``errors`` (fits that raised, with messages), ``coverage`` and ``power`` (each ``{"p",
        "se", "wilson95", "k", "n"}`` over every replicate with an interval), the same over the
        converged fits (``coverage_converged``, ``power_converged``), ``power_right_sign`` (the
        interval excludes 0 on the effect's side), ``mean_estimate``, ``mean_width``, and per
        replicate ``estimate``, ``lb``, ``ub``, ``replicate_converged``, ``max_rhat``,
        ``min_ess_bulk``, ``divergences``, ``seconds``.
    """
    replicates = positive_int("replicates", replicates)
    effects = [float(e) for e in effects]
    if not effects:
        raise ValueError("effects must hold at least one effect size (e.g. 0, 0.25, 0.5)")
    if not all(np.isfinite(effects)):
        raise ValueError(f"effects must be finite, got {effects}")
    if len(set(effects)) != len(effects):
        raise ValueError(f"effects must be distinct, got {effects}")
    if not 0.0 < float(ci_prob) < 1.0:
        raise ValueError(f"ci_prob must be in (0, 1), got {ci_prob}")
    if "seed" in nuts:
        raise TypeError("glm_power takes no seed: every refit's seed comes from key")
    g, _, name = _group_slot(design, group)
    if not isinstance(key, jax.Array):
        raise TypeError(f"key must be a JAX key (jax.random.key(seed)), got {type(key).__name__}")
    t_start = time.perf_counter()
    model, _ = build_glm(design, priors=priors, centered=centered)
    cache_key = ("bayesfair.inference.glm_power", repr(sorted(model.keywords.items())))
    ref = design.group_names[design.reference] if design.group_names else str(design.reference)
    truths, ys, seeds = [], [], []
    for i, effect in enumerate(effects):
        k_sim, k_fit = jax.random.split(jax.random.fold_in(key, i))
        truths.append(true_estimand(design, point, effect, group=group, priors=priors))
        ys.append(simulate_outcomes(design, point, effect, k_sim, replicates=replicates, group=group, priors=priors))
        seeds.append(np.asarray(jax.random.randint(k_fit, (replicates,), 0, 2**31 - 1)))
    recs: list[dict[str, list]] = [{k: [] for k in _PER_REPLICATE} for _ in effects]
    errors: list[list[str]] = [[] for _ in effects]
    scale = ""

    def result(done: int) -> PowerResult:
        rows = [_summary(effect, truths[i], recs[i], errors[i]) for i, effect in enumerate(effects)]
        form = centered if isinstance(centered, dict) else list(centered)
        return PowerResult(rows, name, ref, scale, float(ci_prob), done, int(design.y.size), design.likelihood,
                           {**nuts, "centered": form}, point_label, time.perf_counter() - t_start)

    for r in range(replicates):  # replicate by replicate across the effects: a partial run covers them all
        for i, effect in enumerate(effects):
            t0 = time.perf_counter()
            des_r = design._replace(y=ys[i][r])
            rec = recs[i]
            try:
                f = fit(model, des_r.group, des_r.bucket, des_r.X, des_r.y, seed=int(seeds[i][r]), warn=False,
                        cache_key=cache_key, **nuts)
                est = bias_estimand(f, des_r, draws=estimand_draws, ci_prob=ci_prob)[name]
            except Exception as exc:  # counted and reported with its message: one bad replicate must not end the run
                errors[i].append(f"replicate {r}: {type(exc).__name__}: {exc}")
                for k in rec:
                    rec[k].append(False if k == "replicate_converged" else float("nan"))
                rec["seconds"][-1] = time.perf_counter() - t0
                if progress is not None:
                    progress(f"effect {effect:g} replicate {r + 1}/{replicates}: FAILED ({errors[i][-1]})")
                continue
            scale = est["scale"]
            conv = f.convergence
            for k, v in (("estimate", est["mean"]), ("lb", est["lb"]), ("ub", est["ub"]),
                         ("replicate_converged", bool(conv.converged)), ("max_rhat", conv.max_rhat),
                         ("min_ess_bulk", conv.min_ess_bulk), ("divergences", conv.divergences),
                         ("seconds", time.perf_counter() - t0)):
                rec[k].append(v)
            if progress is not None:
                progress(f"effect {effect:g} (estimand {truths[i]:+.4f}) replicate {r + 1}/{replicates}: "
                         f"{est['mean']:+.4f} [{est['lb']:+.4f}, {est['ub']:+.4f}] "
                         f"{'converged' if conv.converged else 'NOT converged'} "
                         f"(R-hat {conv.max_rhat:.3f}, ESS {conv.min_ess_bulk:.0f}) in {rec['seconds'][-1]:.1f} s")
        if checkpoint is not None and r + 1 < replicates:
            checkpoint(result(r + 1))
    return result(replicates)


_PER_REPLICATE = ("estimate", "lb", "ub", "replicate_converged", "max_rhat", "min_ess_bulk", "divergences", "seconds")


def _summary(effect: float, truth: float, rec: dict[str, list], errors: list[str]) -> dict[str, Any]:
    """One effect size's row of :func:`glm_power` from its replicates so far."""
    lb, ub = np.asarray(rec["lb"], float), np.asarray(rec["ub"], float)
    has = np.isfinite(lb) & np.isfinite(ub)
    ok = np.asarray(rec["replicate_converged"], bool)
    covered = (lb <= truth) & (truth <= ub)
    excl = (lb > 0) | (ub < 0)
    right = (lb > 0) if effect > 0 else (ub < 0) if effect < 0 else excl
    est = np.asarray(rec["estimate"], float)
    return {
        "effect": effect, "true_estimand": truth, "replicates": int(lb.size),
        "converged": int(ok.sum()), "not_converged": int((has & ~ok).sum()), "errors": list(errors),
        "coverage": _share(covered[has]), "power": _share(excl[has]),
        "coverage_converged": _share(covered[ok]), "power_converged": _share(excl[ok]),
        "power_right_sign": _share(right[has]),
        "mean_estimate": float(np.mean(est[has])) if has.any() else float("nan"),
        "mean_width": float(np.mean((ub - lb)[has])) if has.any() else float("nan"),
        **{k: list(v) for k, v in rec.items()},
    }
