"""Fitting the group-bias GLM (:mod:`bayesfair.posteriors.group_glm`) and its bias estimand.

Three steps, each a function so a benchmark or a power study can call them one by one:

- :func:`glm_design` builds the design (group, bucket, z-scored features without the intercept
  column, outcome) from a :class:`~bayesfair.environments.biased.BiasedTable`;
- :func:`build_glm` returns the NumPyro model and its arguments for a design;
- :func:`fit_glm` fits it by NUTS through :func:`bayesfair.inference.fitting.fit` (4 chains,
  float64, the convergence verdict), in the form :func:`choose_form` measures to be cheaper when
  asked (``centered="auto"``), and :func:`glm_tree` gives the ArviZ DataTree with the
  pointwise log-likelihood, posterior predictive draws and observed data for the model checks.

:func:`bias_estimand` is the bias as a named quantity on the outcome's scale: for each
non-reference group g, the average over g's rows of E[y | group g, x, bucket] - E[y | reference
group, same x and bucket] (the average counterfactual difference for the sensitive group, an
effect on the treated). Conditioning on features that the group can affect (occupation,
a decile score) makes it a *direct* effect: the part of the gap not carried by those features.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import numpy as np

from bayesfair.inference.fitting import Fit, fit
from bayesfair.inference.sbc import SBCProblem
from bayesfair.posteriors.group_glm import (
    CONTINUOUS_LIKELIHOODS,
    DEFAULT_GLM_PRIORS,
    GlmPriors,
    check_glm_likelihood,
    expected_outcome,
    group_glm_model,
    row_information,
    zero_sum_basis,
)
from bayesfair.posteriors.indicators import indicator_matrix

__all__ = ["EFFECT_SCALES", "RANDOM_EFFECTS", "SBC_SITES", "GlmDesign", "bias_estimand", "build_glm",
           "centring_weights", "choose_form", "compress_design", "feature_shift", "fit_glm", "glm_design",
           "glm_sbc_problem", "glm_tree", "linear_predictor"]


class GlmDesign(NamedTuple):
    """Arrays of :func:`~bayesfair.posteriors.group_glm.group_glm_model` and their labels."""

    group: np.ndarray
    bucket: np.ndarray
    X: np.ndarray
    y: np.ndarray
    n_groups: int
    n_buckets: int
    reference: int
    likelihood: str
    n_trials: int = 9
    n_levels: int | None = None
    group_names: tuple[str, ...] = ()
    bucket_names: tuple[str, ...] = ()
    feature_names: tuple[str, ...] = ()


def glm_design(table: Any, *, likelihood: str, y: Any = None, keep: Any = None, rows: int | None = None,
               seed: int = 0, n_trials: int = 9, n_levels: int | None = None) -> GlmDesign:
    """The design of a :class:`~bayesfair.environments.biased.BiasedTable` (its ``intercept``
    column dropped: the model has its own); ``y`` replaces the rewards, ``keep`` drops rows, and
    ``rows`` takes a uniform random subsample (seeded by ``seed``)."""
    yy = np.asarray(table.rewards if y is None else y, np.float64)
    idx = np.arange(yy.size) if keep is None else np.flatnonzero(np.asarray(keep, bool))
    if rows is not None and rows < idx.size:
        idx = np.sort(np.random.default_rng(seed).choice(idx, rows, replace=False))
    names = list(table.feature_names)
    cols = [j for j, n in enumerate(names) if n != "intercept"]
    X = np.asarray(table.features, np.float64)[idx][:, cols]
    group = np.asarray(table.group_of_arm)[np.asarray(table.arms)[idx]].astype(np.int32)
    bucket = np.asarray(table.bucket)[idx].astype(np.int32)
    check_glm_likelihood(likelihood, yy[idx], n_trials=n_trials, n_levels=n_levels)
    return GlmDesign(group, bucket, X, yy[idx], int(table.n_groups), len(table.bucket_names), int(table.reference),
                     likelihood, int(n_trials), n_levels, tuple(table.group_names), tuple(table.bucket_names),
                     tuple(names[j] for j in cols))


def compress_design(design: GlmDesign) -> tuple[GlmDesign, np.ndarray]:
    """``(cells, counts)``: the design's distinct rows (group, bucket, x, y), each once, and how many
    rows each stands for. The model with ``weights=counts`` on ``cells`` has exactly the
    log-density of the model on ``design`` (the rows are exchangeable given the parameters), at
    the cost of ``cells``' rows (COMPAS, ordered logistic: 18,310 rows -> 8,828 cells;
    Adult: 45,222 -> 25,721 by sex, 25,967 by race; family income: none repeat)."""
    key = np.column_stack([design.group, design.bucket, design.X, design.y])
    _, first, counts = np.unique(key, axis=0, return_index=True, return_counts=True)
    order = np.argsort(first)  # the cells in the order their first row appears
    r = first[order]
    return (design._replace(group=design.group[r], bucket=design.bucket[r], X=design.X[r], y=design.y[r]),
            counts[order].astype(np.float64))


def feature_shift(design: GlmDesign, *, weights: Any = None) -> np.ndarray:
    """Gamma ``[d, m-1]``: the least-squares coefficients of x in the regression of each
    non-reference group's indicator on the bucket indicators and x (rows weighted by ``weights``,
    the counts of :func:`compress_design`'s cells, so cells give the rows' Gamma). x . Gamma is the
    part of group membership the features predict; the prior with ``ric_correction``
    (:mod:`bayesfair.posteriors.group_glm`) shrinks the slopes with that part credited to them.
    Collinear columns get the minimum-norm solution (x . Gamma, the projection, is unique)."""
    w = np.ones(design.y.size) if weights is None else np.asarray(weights, np.float64)
    if w.shape != design.y.shape or not np.all(w > 0):
        raise ValueError(f"weights must be {design.y.size} positive row counts, got shape {w.shape}")
    others = [g for g in range(design.n_groups) if g != design.reference]
    on = np.stack([design.group == g for g in others], axis=1).astype(np.float64)
    A = np.column_stack([np.eye(design.n_buckets)[design.bucket], np.asarray(design.X, np.float64)])
    r = np.sqrt(w)[:, None]
    coef = np.linalg.lstsq(A * r, on * r, rcond=None)[0]
    return coef[design.n_buckets:]


def build_glm(design: GlmDesign, *, group_bias: bool = True, priors: GlmPriors = DEFAULT_GLM_PRIORS,
              weights: Any = None, centered: Any = ()) -> tuple[Any, tuple[Any, ...]]:
    """``(model, args)``: ``model(*args)`` is the design's NumPyro model (``y`` observed; with
    ``weights``, row n counted ``weights[n]`` times, as :func:`compress_design` gives them)."""
    y = design.y
    cont = design.likelihood in CONTINUOUS_LIKELIHOODS
    w = np.ones(y.size) if weights is None else np.asarray(weights, np.float64)
    loc = float(np.sum(w * y) / w.sum())  # the rows' mean and sd, also from compressed cells
    scale = float(np.sqrt(np.sum(w * (y - loc) ** 2) / w.sum()))
    shift = None
    if group_bias and priors.ric_correction and design.n_groups > 1:
        shift = tuple(map(tuple, feature_shift(design, weights=weights).tolist()))  # hashable, an exact repr
    model = functools.partial(
        group_glm_model, n_groups=design.n_groups, n_buckets=design.n_buckets, reference=design.reference,
        likelihood=design.likelihood, n_trials=design.n_trials, n_levels=design.n_levels, group_bias=group_bias,
        priors=priors, y_loc=loc if cont else 0.0, y_scale=scale if cont else 1.0,
        centered=_frozen(centered), feature_shift=shift)
    model.__qualname__ = f"group_glm_model[{design.likelihood}{'' if group_bias else ', no bias'}]"
    # one-hot columns as sparse indicators: the same product at a fraction of the cost
    args = (design.group, design.bucket, indicator_matrix(design.X), design.y)
    return model, args if weights is None else (*args, np.asarray(weights, np.float64))


def _frozen(centered: Any) -> Any:
    """``centered`` with nested tuples for arrays: the model's keywords then have an exact repr
    (a compilation cache key) and hash."""
    def tup(x: Any) -> Any:
        return tuple(tup(e) for e in x) if isinstance(x, list) else float(x)

    if isinstance(centered, dict):
        return {k: tup(np.asarray(v, np.float64).tolist()) for k, v in centered.items()}
    return tuple(centered)


#: The random effects of :func:`~bayesfair.posteriors.group_glm.group_glm_model` that the centred
#: form samples as they are (the non-centred form samples their z-scores).
RANDOM_EFFECTS = ("gamma", "u", "lambda")

#: The scale of each random effect in :func:`~bayesfair.posteriors.group_glm.group_glm_model`.
EFFECT_SCALES = {"gamma": "sigma_bucket", "u": "sigma_u", "lambda": "s_slope"}


def centring_weights(samples: dict[str, np.ndarray], design: GlmDesign, *, weights: Any = None
                     ) -> dict[str, np.ndarray]:
    """Per element of each random effect, the centring weight of the partially non-centred form
    (:mod:`bayesfair.posteriors.group_glm`) from posterior draws (``samples``: flattened, e.g. a
    pilot's).

    For an effect element theta ~ N(0, s^2) about which the rows say I (their information about
    eta summed over the rows it enters, times its column squared for a slope difference; for a
    coordinate j of the zero-sum gamma and u, the buckets' information weighted by Q[j, b]^2,
    the diagonal of Q diag(I_b) Q^T with Q :func:`~bayesfair.posteriors.group_glm.zero_sum_basis`), the
    weight w = I s^2 / (I s^2 + 1) makes the partially centred coordinate independent of s in the
    Gaussian approximation (Papaspiliopoulos, Roberts & Skold 2007): 0 (non-centred) for an
    element the data do not inform, -> 1 (centred) for one they pin down. Both I (at each draw's
    eta) and the weight are averaged over the draws, so a scale the posterior is unsure of gives
    an average over its plausible values rather than a plug-in. ``weights [N]``: row counts of
    :func:`compress_design`'s cells.
    """
    lik = design.likelihood
    extra = {k: np.asarray(samples[k]) for k in ("phi", "cutpoints", "sigma", "nu", "skew") if k in samples}
    eta = linear_predictor(samples, design)
    h = np.clip(row_information(lik, eta, design.y, n_trials=design.n_trials, **extra), 0.0, None)
    h = h * (1.0 if weights is None else np.asarray(weights, np.float64))  # [D, N]
    onehot_b = np.eye(design.n_buckets)[design.bucket]  # [N, B]
    q2 = zero_sum_basis(design.n_buckets) ** 2  # [B-1, B]: bucket b's share of coordinate j
    info = {"gamma": h @ onehot_b @ q2.T}  # [D, B-1]
    if "delta" in samples:
        others = [g for g in range(design.n_groups) if g != design.reference]
        on = np.stack([design.group == g for g in others], axis=1).astype(np.float64)  # [N, k]
        info["u"] = np.einsum("dn,nb,nk,jb->djk", h, onehot_b, on, q2)
        info["lambda"] = np.einsum("dn,nk,ni->dki", h, on, design.X ** 2)
    out = {}
    for name, i in info.items():
        s2 = np.asarray(samples[EFFECT_SCALES[name]], np.float64).reshape(-1, *[1] * (i.ndim - 1)) ** 2
        out[name] = np.mean(i * s2 / (i * s2 + 1.0), axis=0)
    return out


def _pilot(design: GlmDesign, form: str, centered: Any, dense: bool, *, group_bias: bool, priors: GlmPriors,
           weights: Any, seed: int, target_accept: float, warmup: int, draws: int, progress_bar: bool
           ) -> tuple[dict[str, Any], Fit]:
    model, args = build_glm(design, group_bias=group_bias, priors=priors, weights=weights, centered=centered)
    f = fit(model, *args, num_warmup=warmup, num_samples=draws, num_chains=1, seed=seed,
            target_accept=target_accept, dense_mass=dense, progress_bar=progress_bar, warn=False)
    st = f.sample_stats
    return ({"form": form, "mean_steps": float(np.mean(st["n_steps"])), "divergences": int(np.sum(st["diverging"])),
             "step_size": float(st["step_size"][0, -1]), "seconds": float(f.seconds)}, f)


def choose_form(design: GlmDesign, *, group_bias: bool = True, priors: GlmPriors = DEFAULT_GLM_PRIORS,
                weights: Any = None, seed: int = 0, target_accept: float = 0.9, pilot_warmup: int = 150,
                pilot_draws: int = 50, accept_steps: float = 48.0, centre_weight: float = 0.9,
                split_steps: float = 500.0, progress_bar: bool = False) -> dict[str, Any]:
    """The form of the GLM's random effects NUTS samples best on ``design``, by measurement.

    Three forms of the same posterior: **centred** (:data:`RANDOM_EFFECTS` sampled as they are,
    with a dense mass matrix), **non-centred** (their z-scores, diagonal mass) and **split**
    (each element centred if its :func:`centring_weights` weight is at least ``centre_weight``,
    else non-centred; dense mass). Which one samples well depends on how much the data say about
    the effects: many rows pin them down, and then the non-centred z-scores and their scale are
    tightly coupled; few rows leave the centred effects in a funnel with their scale; one table
    can have both (weakly informed group effects beside well-informed slopes). docs/mcmc.md gives
    the measurements behind the rule.

    The rule, with pilots of one chain (``pilot_warmup`` + ``pilot_draws``): the centred pilot
    first; its draws give the weights. If every weight is on one side of ``centre_weight`` and
    the pilot took at most ``accept_steps`` leapfrog steps per draw without a divergence, the
    centred form is kept (the non-centred pilot is the expensive one exactly when the centred
    form is cheap). If the weights are on both sides, the split form gets a pilot and is kept if
    it had no divergence and took at most ``split_steps`` steps per draw. The default bound is
    loose on purpose: a pilot's dense mass matrix is adapted from a few dozen draws, so its step
    count is noisy and a split pilot several times as costly as the centred one can still be the
    form that samples; but one near NUTS's tree-depth limit (1,023 steps at depth 10) has a
    collapsed step size. Otherwise the non-centred form gets a pilot too, and the
    form with the fewest steps per draw among the pilots without divergences is kept (with
    divergences in all, the fewest steps).

    The continuous partial form (``centered=centring_weights(...)``) is not a candidate: it
    diverged more than the centred form where it was measured (docs/mcmc.md).

    Returns ``{"form": "centered", "split" or "noncentered", "centered": what :func:`fit_glm`
    takes as ``centered`` (a list of names, or a mapping name -> 0/1 weights as nested lists),
    "dense_mass": bool, "pilots": [per pilot: form, mean_steps, divergences, step_size, seconds],
    "weights": the centring weights' min / median / max per effect, "rule": the reason in
    words}``.
    """
    kw = dict(group_bias=group_bias, priors=priors, weights=weights, seed=seed, target_accept=target_accept,
              warmup=pilot_warmup, draws=pilot_draws, progress_bar=progress_bar)
    first, f = _pilot(design, "centered", RANDOM_EFFECTS, True, **kw)
    cw = centring_weights(_flat(f, pilot_draws), design, weights=weights)
    summary = {k: {"min": float(v.min()), "median": float(np.median(v)), "max": float(v.max())} for k, v in cw.items()}
    pilots = [first]
    split = {k: (v >= centre_weight).astype(np.float64) for k, v in cw.items()}
    mixed = any(v.any() for v in split.values()) and not all(v.all() for v in split.values())
    forms = {"centered": (list(RANDOM_EFFECTS), True), "noncentered": ([], False),
             "split": ({k: v.tolist() for k, v in split.items()}, True)}

    def quick(p: dict[str, Any]) -> bool:
        return p["divergences"] == 0 and p["mean_steps"] <= accept_steps

    if not mixed and quick(first):
        chosen = "centered"
        rule = (f"the centred pilot took {first['mean_steps']:.0f} <= {accept_steps:g} leapfrog steps per draw "
                "without a divergence")
    else:
        if mixed:
            pilots.append(_pilot(design, "split", *forms["split"], **kw)[0])
        if mixed and pilots[-1]["divergences"] == 0 and pilots[-1]["mean_steps"] <= split_steps:
            chosen = "split"
            rule = (f"centring weights on both sides of {centre_weight:g}; the split pilot ("
                    f"{pilots[-1]['mean_steps']:.0f} leapfrog steps per draw) had no divergence; centred pilot "
                    f"{first['mean_steps']:.0f} steps, {first['divergences']} divergences")
        else:
            pilots.append(_pilot(design, "noncentered", (), False, **kw)[0])
            ok = [p for p in pilots if p["divergences"] == 0] or pilots
            chosen = min(ok, key=lambda p: p["mean_steps"])["form"]
            rule = "; ".join(f"{p['form']} pilot {p['mean_steps']:.0f} steps per draw, {p['divergences']} "
                             "divergences" for p in pilots) + f": {chosen} kept"
    return {"form": chosen, "centered": forms[chosen][0], "dense_mass": forms[chosen][1], "pilots": pilots,
            "weights": summary, "rule": rule}


def _check_centred(centered: Any, design: GlmDesign, group_bias: bool) -> Any:
    """``centered`` as :func:`fit_glm` takes it (a tuple of names or a mapping name -> centring
    weights), checked; a ``ValueError`` names what is wrong."""
    names = list(centered)
    unknown = sorted(set(names) - set(RANDOM_EFFECTS))
    if unknown:
        raise ValueError(f"centered names effects of {RANDOM_EFFECTS}, got {unknown}")
    if not isinstance(centered, dict):
        return tuple(names)
    k = design.n_groups - 1
    b = design.n_buckets - 1  # gamma and u are centred per coordinate of their zero-sum form
    shapes = {"gamma": (b,), "u": (b, k), "lambda": (k, design.X.shape[1])}
    out = {}
    for name, w in centered.items():
        w = np.asarray(w, np.float64)
        try:
            np.broadcast_to(w, shapes[name])
        except ValueError:
            raise ValueError(f"centring weights of {name!r} must broadcast to its shape {shapes[name]}, got "
                             f"{w.shape}") from None
        if not np.all((w >= 0) & (w <= 1)):
            raise ValueError(f"centring weights of {name!r} must be in [0, 1], got [{w.min():g}, {w.max():g}]")
        out[name] = w.tolist()
    return out


def fit_glm(design: GlmDesign, *, group_bias: bool = True, priors: GlmPriors = DEFAULT_GLM_PRIORS,
            compress: bool = True, centered: Any = (), **nuts: Any) -> Fit:
    """Fit :func:`build_glm`'s model by NUTS (``nuts``: :func:`~bayesfair.inference.fitting.fit`'s
    settings, e.g. ``num_warmup``, ``num_samples``, ``num_chains``, ``seed``, ``target_accept``,
    ``dense_mass``).

    ``compress`` (default): fit on :func:`compress_design`'s distinct rows with their counts when
    that has fewer rows (the same posterior, fewer rows per gradient); the fit's ``model_args`` are
    then the cells', and :func:`glm_tree` evaluates the pointwise log-likelihood per row of
    ``design``.

    ``centered``: the form of the random effects: a tuple of names in :data:`RANDOM_EFFECTS`
    (those sampled as they are; default none: all non-centred), a mapping of names to centring
    weights in [0, 1] (the partial form, e.g. from :func:`centring_weights`), or ``"auto"``:
    :func:`choose_form` picks the form and the mass matrix by short pilots (then ``dense_mass``
    is not yours to give). The fit's ``config["form"]`` records the choice,
    the pilots and the rule.
    """
    weights = None
    if compress:
        cells, counts = compress_design(design)
        if cells.y.size < design.y.size:
            design, weights = cells, counts
    form: dict[str, Any]
    if isinstance(centered, str):
        if centered != "auto":
            raise ValueError(f"centered must be 'auto', a tuple of effect names in {RANDOM_EFFECTS} or a mapping "
                             f"of them to centring weights, got {centered!r}")
        if "dense_mass" in nuts:
            raise TypeError("fit_glm(centered='auto') chooses dense_mass with the form; do not pass dense_mass")
        form = choose_form(design, group_bias=group_bias, priors=priors, weights=weights,
                           seed=int(nuts.get("seed", 0)), target_accept=float(nuts.get("target_accept", 0.9)),
                           progress_bar=bool(nuts.get("progress_bar", False)))
        centered = form["centered"]
        nuts = {**nuts, "dense_mass": form["dense_mass"]}
    else:
        centered = _check_centred(centered, design, group_bias)
        name = ("partial" if isinstance(centered, dict) else "noncentered" if not centered
                else "centered" if set(centered) == set(RANDOM_EFFECTS) else "partly centered")
        form = {"form": name, "centered": centered if isinstance(centered, dict) else list(centered),
                "dense_mass": nuts.get("dense_mass", False), "rule": "given"}
    model, args = build_glm(design, group_bias=group_bias, priors=priors, weights=weights, centered=centered)
    advice = (f"try: a higher target_accept (e.g. 0.99), more warm-up (num_warmup), another form of the random "
              f"effects (this fit: {form['form']}, centred {sorted(centered) or 'none'}, dense mass "
              f"{bool(nuts.get('dense_mass', False))}; centered='auto', (), or effects of {RANDOM_EFFECTS}, with "
              "dense_mass), or more draws (num_samples) for ESS")
    res = fit(model, *args, advice=advice, **nuts)
    res.config["form"] = form
    return res


def linear_predictor(samples: dict[str, np.ndarray], design: GlmDesign, *, as_reference: bool = False,
                     rows: Any = None) -> np.ndarray:
    """eta ``[draws, rows]`` from flattened posterior ``samples``; ``as_reference``: every row as
    if in the reference group (the bias terms removed)."""
    r = np.arange(design.y.size) if rows is None else np.asarray(rows)
    X, b = design.X[r], design.bucket[r]
    eta = np.asarray(samples["beta"]) @ X.T + np.asarray(samples["gamma"])[:, b]
    if "alpha" in samples:
        eta = eta + np.asarray(samples["alpha"])[:, None]
    if "delta" in samples and not as_reference:
        others = [g for g in range(design.n_groups) if g != design.reference]
        for j, g in enumerate(others):
            on = design.group[r] == g
            if on.any():
                lam = np.asarray(samples["lambda"])[:, j]
                eta[:, on] += (np.asarray(samples["delta"])[:, j, None] + np.asarray(samples["u"])[:, b[on], j]
                               + lam @ X[on].T)
    return eta


def _flat(fit_: Fit, draws: int) -> dict[str, np.ndarray]:
    s = {k: np.asarray(v) for k, v in fit_.samples.items()}
    total = next(iter(s.values())).shape[0] * next(iter(s.values())).shape[1]
    pick = np.unique(np.linspace(0, total - 1, min(draws, total)).round().astype(int))
    return {k: v.reshape(total, *v.shape[2:])[pick] for k, v in s.items()}


def bias_estimand(fit_: Fit, design: GlmDesign, *, draws: int = 1000, ci_prob: float = 0.9,
                  chunk: int = 20_000) -> dict[str, dict[str, float]]:
    """The average counterfactual difference (module docstring) for every non-reference group.

    Returns ``{group name: {"mean", "sd", "lb", "ub" (equal-tailed ci_prob interval), "p_positive",
    "rows", "scale"}}``; ``scale`` names the outcome scale (P(y = 1), expected count, expected
    level, expected y).
    """
    s = _flat(fit_, draws)
    if "delta" not in s:
        raise ValueError("the fit has no bias terms (group_bias=False): no bias estimand")
    cut = s.get("cutpoints")
    scale = {"bernoulli": "P(y = 1)", "binomial": f"expected count of {design.n_trials}",
             "beta_binomial": f"expected count of {design.n_trials}", "ordered_logistic": "expected level",
             "gaussian": "expected y", "student_t": "expected y (location)", "skew_t": "expected y"}[design.likelihood]
    out = {}
    for g in range(design.n_groups):
        if g == design.reference:
            continue
        rows = np.flatnonzero(design.group == g)
        total = np.zeros(next(iter(s.values())).shape[0])
        for start in range(0, rows.size, chunk):
            r = rows[start:start + chunk]
            e1 = expected_outcome(design.likelihood, linear_predictor(s, design, rows=r), n_trials=design.n_trials,
                                  cutpoints=cut)
            e0 = expected_outcome(design.likelihood, linear_predictor(s, design, rows=r, as_reference=True),
                                  n_trials=design.n_trials, cutpoints=cut)
            total += (e1 - e0).sum(-1)
        diff = total / max(rows.size, 1)
        lb, ub = np.quantile(diff, [(1 - ci_prob) / 2, (1 + ci_prob) / 2])
        name = design.group_names[g] if design.group_names else str(g)
        out[name] = {"mean": float(diff.mean()), "sd": float(diff.std()), "lb": float(lb), "ub": float(ub),
                     "ci_prob": ci_prob, "p_positive": float(np.mean(diff > 0)), "rows": int(rows.size),
                     "scale": scale}
    return out


def glm_tree(fit_: Fit, design: GlmDesign, *, draws: int = 400, seed: int = 0):
    """ArviZ DataTree of a GLM fit: ``posterior`` and ``sample_stats`` with every draw (so the
    divergences, step sizes and tree depths in the file are the fit's own), ``log_likelihood``
    (pointwise, from the observed site) and ``posterior_predictive`` on about ``draws`` draws,
    evenly thinned so the tree fits in memory at 45,000 rows (their ``draw`` coordinate holds the
    kept draws' indices), ``observed_data`` and ``constant_data`` (group)."""
    import arviz_base  # arviz's data layer, heavy at import
    import xarray as xr
    from numpyro.infer import Predictive
    from numpyro.infer.util import log_likelihood

    s = {k: np.asarray(v) for k, v in fit_.samples.items()}
    c, n = next(iter(s.values())).shape[:2]
    thin = max(1, int(np.ceil(c * n / draws)))
    thinned_draws = {k: v[:, ::thin] for k, v in s.items()}
    flat = {k: v.reshape(-1, *v.shape[2:]) for k, v in thinned_draws.items()}
    k = next(iter(thinned_draws.values())).shape[1]
    model, args = fit_.model, (design.group, design.bucket, design.X, design.y)  # per row, not per cell
    with jax.enable_x64(True):
        pp = Predictive(model, posterior_samples=flat)(jax.random.key(seed), *args[:3], None)["y"]
        ll = log_likelihood(model, flat, *args)["y"]
    pp = np.asarray(pp).reshape(c, k, -1)
    ll = np.asarray(ll).reshape(c, k, -1)
    obs = ("chain", "draw", "obs")
    post = arviz_base.dict_to_dataset(s, sample_dims=["chain", "draw"])
    stats = {kk: np.asarray(v) for kk, v in fit_.sample_stats.items() if np.asarray(v).shape[:2] == (c, n)}
    thinned = {"chain": np.arange(c), "draw": np.arange(n)[::thin]}
    tree = xr.DataTree.from_dict({
        "posterior": post,
        "sample_stats": xr.Dataset({kk: (("chain", "draw"), v) for kk, v in stats.items()},
                                   coords={"chain": np.arange(c), "draw": np.arange(n)}),
        "log_likelihood": xr.Dataset({"y": (obs, ll)}, coords=thinned),
        "posterior_predictive": xr.Dataset({"y": (obs, pp)}, coords=thinned),
        "observed_data": xr.Dataset({"y": ("obs", np.asarray(design.y))}),
        "constant_data": xr.Dataset({"group": ("obs", np.asarray(design.group))}),
    })
    tree.attrs.update({"likelihood": design.likelihood, "converged": int(fit_.convergence.converged),
                       "convergence": fit_.convergence.message})
    return tree


#: The parameters :func:`glm_sbc_problem` ranks (those the likelihood has).
SBC_SITES = ("alpha", "delta", "beta", "sigma_bucket", "sigma_u", "s_slope", "cutpoints", "phi", "sigma", "nu", "skew")


def glm_sbc_problem(design: GlmDesign, *, n_draws: int = 99, priors: GlmPriors = DEFAULT_GLM_PRIORS,
                    **nuts: Any) -> SBCProblem:
    """The SBC problem (:func:`bayesfair.inference.sbc.sbc`) of the GLM on ``design``'s group,
    bucket and X: parameters from the model's prior, ``y`` simulated from them (the model is the
    specification), the fit :func:`fit_glm` by NUTS with ``nuts`` settings, ``n_draws`` evenly
    thinned posterior draws of :data:`SBC_SITES` ranked. Use ``sbc(..., vectorize=False)``."""
    from numpyro.infer import Predictive

    model, args = build_glm(design, priors=priors)

    def prior_draw(key):
        with jax.enable_x64(True):
            draw = Predictive(model, num_samples=1)(key, *args[:3], None)
        return {k: np.asarray(v)[0] for k, v in draw.items() if k in SBC_SITES or k == "y"}

    def simulate(key, theta):
        del key  # y was drawn with the parameters, from the model itself
        return np.asarray(theta["y"], np.float64)

    def fit_(y, key):
        seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
        res = fit_glm(design._replace(y=np.asarray(y, np.float64)), priors=priors, seed=seed, warn=False, **nuts)
        flat = _flat(res, n_draws)
        return {k: v for k, v in flat.items() if k in SBC_SITES}

    return SBCProblem(prior_draw, simulate, fit_)
