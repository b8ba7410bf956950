"""Model checks of a fitted model's DataTree: the posterior predictive verdict, the calibration of a
binary outcome, and the LOO comparison of a model with and without its group-bias term.

Every function takes ArviZ DataTrees with the groups ``observed_data``, ``posterior_predictive``
(and ``log_likelihood`` for :func:`compare_bias`), as :meth:`bayesfair.inference.fitting.Fit.tree`
builds them, and returns a plain dict (JSON-friendly) with a pass/fail verdict per statistic and
the rule that decided it, so a recipe, a notebook and a test read the same answer.

Reading the verdicts:

- A posterior predictive p-value is not uniform under the model: it uses the data twice and
  concentrates towards 0.5, so a rule "fail iff p < alpha/2 or p > 1 - alpha/2" fails a correct
  model *less* often than alpha (the check is conservative). A FAIL is therefore strong evidence
  of misfit in that statistic; a PASS is weak evidence of fit.
- For a 0/1 outcome the shares of 0 and 1 are the mean, which any model with an intercept
  reproduces: :func:`calibration_check` (the CORP / PAV reliability diagram of Dimitriadis,
  Gneiting and Jordan 2021, which ArviZ draws as ``plot_ppc_pava``) is the check that can fail.
- :func:`compare_bias` measures *prediction*: a real but small group shift can leave the
  expected log predictive density unchanged. No LOO difference is not evidence of no bias; the
  bias estimand's interval is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = ["PPC_ALPHA", "calibration_check", "check_lines", "compare_bias", "ppc_statistics", "ppc_verdict"]

#: Two-sided level of each posterior predictive statistic's check.
PPC_ALPHA = 0.01


def _arrays(tree: Any, var: str) -> tuple[np.ndarray, np.ndarray]:
    for group in ("observed_data", "posterior_predictive"):
        if group not in tree.children or var not in tree[group].dataset:
            raise ValueError(f"the tree has no {group}/{var}: build it with Fit.tree() (or give var=)")
    y = np.asarray(tree["observed_data"][var].values, np.float64).reshape(-1)
    rep = np.asarray(tree["posterior_predictive"][var].values, np.float64)
    return y, rep.reshape(-1, y.size)


def ppc_statistics(kind: str, *, levels: Any = None, groups: Mapping[str, np.ndarray] | None = None
                   ) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """The test statistics of :func:`ppc_verdict` for an outcome ``kind``.

    ``"continuous"``: mean, sd, the 5%, 50% and 95% quantiles and the skewness; ``"discrete"``
    (ordinal or bounded counts): mean, sd and the share of every value in ``levels``;
    ``"binary"``: the mean. Every kind adds the mean of each entry of ``groups`` (name -> bool
    mask over the rows). Each statistic maps ``[..., rows]`` to ``[...]``.
    """
    stats: dict[str, Callable[[np.ndarray], np.ndarray]] = {"mean": lambda v: v.mean(-1)}
    if kind != "binary":
        stats["sd"] = lambda v: v.std(-1)
    for name, rows in (groups or {}).items():
        rows = np.asarray(rows, bool)
        if rows.any():
            stats[f"mean[{name}]"] = (lambda r: lambda v: v[..., r].mean(-1))(rows)
    if kind == "continuous":
        for q in (0.05, 0.5, 0.95):
            stats[f"q{int(100 * q):02d}"] = (lambda qq: lambda v: np.quantile(v, qq, axis=-1))(q)

        def skew(v):
            z = v - v.mean(-1, keepdims=True)
            return (z ** 3).mean(-1) / np.maximum((z ** 2).mean(-1), 1e-300) ** 1.5

        stats["skewness"] = skew
    elif kind == "discrete":
        for k in np.asarray(levels if levels is not None else [], np.float64):
            stats[f"share[{k:g}]"] = (lambda kk: lambda v: (v == kk).mean(-1))(k)
    elif kind != "binary":
        raise ValueError(f"kind must be 'continuous', 'discrete' or 'binary', got {kind!r}")
    return stats


def ppc_verdict(tree: Any, *, kind: str | None = None, var: str = "y", groups: Mapping[str, Any] | None = None,
                levels: Any = None, alpha: float = PPC_ALPHA) -> dict[str, Any]:
    """Posterior predictive p-values of :func:`ppc_statistics` and a pass/fail per statistic.

    For each statistic T, ``p_upper = P(T(y_rep) >= T(y))`` and the two-sided mid-p value
    ``p = 2 min(P(T_rep > T) + P(T_rep = T) / 2, P(T_rep < T) + P(T_rep = T) / 2)`` (capped at
    1). A statistic passes iff ``p >= alpha``; the check passes iff every statistic does.
    Posterior predictive p-values are conservative (module docstring).

    Parameters
    ----------
    tree : xarray.DataTree
        With ``observed_data/var`` ``[obs]`` and ``posterior_predictive/var`` ``[chain, draw, obs]``.
    kind : {"continuous", "discrete", "binary"}, optional
        Default: ``"binary"`` if every observed value is 0 or 1, ``"discrete"`` if every value
        is an integer (levels: the observed and replicated values), else ``"continuous"``.
    groups : mapping of str to bool masks, optional
        Rows of each group whose mean is also checked.
    levels : array-like, optional
        The values whose shares a ``"discrete"`` check compares (default: every value seen).
    alpha : float
        Two-sided level per statistic (default :data:`PPC_ALPHA`).

    Returns
    -------
    dict
        ``statistics`` (name -> observed, replicated_mean, p_upper, p, pass), ``failed``,
        ``passed``, ``kind`` and ``rule``.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=200)
    >>> tree = xr.DataTree.from_dict({
    ...     "observed_data": xr.Dataset({"y": ("obs", y)}),
    ...     "posterior_predictive": xr.Dataset({"y": (("chain", "draw", "obs"), rng.normal(size=(2, 100, 200)))})})
    >>> out = ppc_verdict(tree)
    >>> out["kind"], out["passed"]
    ('continuous', True)
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    y, rep = _arrays(tree, var)
    if kind is None:
        if np.all((y == 0) | (y == 1)):
            kind = "binary"
        elif np.all(y == np.round(y)) and np.all(rep == np.round(rep)):
            kind = "discrete"
        else:
            kind = "continuous"
    if kind == "discrete" and levels is None:
        levels = np.union1d(np.unique(y), np.unique(rep))
        if levels.size > 50:
            raise ValueError(f"{levels.size} distinct values: give levels= (the values whose shares to compare)")
    out = {}
    for name, fn in ppc_statistics(kind, levels=levels, groups=groups).items():
        t_obs, t_rep = float(fn(y)), np.asarray(fn(rep), np.float64)
        above, tie = float(np.mean(t_rep > t_obs)), float(np.mean(t_rep == t_obs))
        p = min(1.0, 2.0 * min(above + tie / 2, 1.0 - above - tie / 2))
        out[name] = {"observed": t_obs, "replicated_mean": float(np.mean(t_rep)), "p_upper": above + tie, "p": p,
                     "pass": bool(p >= alpha)}
    failed = [k for k, v in out.items() if not v["pass"]]
    return {"statistics": out, "failed": failed, "passed": not failed, "kind": kind,
            "rule": f"two-sided posterior predictive mid-p >= {alpha} per statistic (conservative)"}


def _pav(y: np.ndarray) -> np.ndarray:
    # scipy's pool-adjacent-violators isotonic regression; scipy is heavy, so imported here
    from scipy.optimize import isotonic_regression

    return np.asarray(isotonic_regression(y, increasing=True).x)


def _miscalibration(p: np.ndarray, y: np.ndarray) -> float:
    """CORP miscalibration: Brier score of p minus that of its PAV recalibration (>= 0)."""
    cep = _pav(y)
    return float(np.mean((p - y) ** 2) - np.mean((cep - y) ** 2))


def calibration_check(tree: Any, *, var: str = "y", draws: int = 200, ci_prob: float = 0.9, alpha: float = PPC_ALPHA,
                      seed: int = 0) -> dict[str, Any]:
    """Calibration of a 0/1 outcome: the PAV (CORP) reliability diagram and its consistency check.

    The forecast of row i is its posterior predictive mean p_i (the share of replications with
    y = 1). Sorting the rows by p, the pool-adjacent-violators fit of the observed y is the
    conditional event probability (CEP) curve; the same fit of each replicated ``y_rep`` draw
    gives the band a calibrated model would produce (ArviZ's ``plot_ppc_pava`` draws both).
    The statistic is the CORP miscalibration MCB = Brier(p) - Brier(CEP); ``p = P(MCB_rep >=
    MCB_obs)`` over ``draws`` replications, and the check passes iff ``p >= alpha``. Also
    reported: the share of rows whose CEP leaves the ``ci_prob`` band, and the curve on a grid
    of 20 forecast quantiles (for a table or a plot).

    Parameters
    ----------
    tree : xarray.DataTree
        With ``observed_data/var`` (0/1) and ``posterior_predictive/var``.
    draws : int
        Replicated data sets used for the band and the p-value (thinned evenly).
    ci_prob : float
        Probability of the consistency band.
    alpha : float
        Level of the miscalibration test.
    seed : int
        Seed of the choice of replications when there are more than ``draws``.

    Returns
    -------
    dict
        ``miscalibration`` (observed), ``miscalibration_replicated`` (mean), ``p``, ``passed``,
        ``share_outside_band``, ``curve`` (forecast, cep, band_lb, band_ub at 20 quantiles) and
        ``rule``.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> rng = np.random.default_rng(1)
    >>> prob = rng.uniform(0.05, 0.95, 300)
    >>> y = (rng.uniform(size=300) < prob).astype(float)
    >>> rep = (rng.uniform(size=(1, 400, 300)) < prob).astype(float)
    >>> tree = xr.DataTree.from_dict({"observed_data": xr.Dataset({"y": ("obs", y)}),
    ...                               "posterior_predictive": xr.Dataset({"y": (("chain", "draw", "obs"), rep)})})
    >>> calibration_check(tree)["passed"]
    True
    """
    y, rep = _arrays(tree, var)
    if not np.all((y == 0) | (y == 1)):
        raise ValueError(f"calibration_check needs a 0/1 outcome; observed_data/{var} has other values "
                         "(use ppc_verdict)")
    if draws < 10:
        raise ValueError(f"draws must be >= 10, got {draws}")
    p = rep.mean(0)
    order = np.argsort(p, kind="stable")
    p, ys = p[order], y[order]
    pick = rep[np.random.default_rng(seed).choice(rep.shape[0], min(draws, rep.shape[0]), replace=False)][:, order]
    obs_mcb = _miscalibration(p, ys)
    rep_mcb = np.array([_miscalibration(p, r) for r in pick])
    p_value = float(np.mean(rep_mcb >= obs_mcb))
    cep = _pav(ys)
    band = np.stack([_pav(r) for r in pick])
    lb, ub = np.quantile(band, [(1 - ci_prob) / 2, (1 + ci_prob) / 2], axis=0)
    outside = float(np.mean((cep < lb) | (cep > ub)))
    at = np.unique(np.clip(np.round(np.linspace(0, p.size - 1, 20)).astype(int), 0, p.size - 1))
    curve = {"forecast": p[at].tolist(), "cep": cep[at].tolist(), "band_lb": lb[at].tolist(),
             "band_ub": ub[at].tolist()}
    return {"miscalibration": obs_mcb, "miscalibration_replicated": float(rep_mcb.mean()), "p": p_value,
            "passed": bool(p_value >= alpha), "share_outside_band": outside, "ci_prob": ci_prob, "curve": curve,
            "rule": f"P(MCB_rep >= MCB_obs) >= {alpha}, MCB = Brier(forecast) - Brier(PAV recalibration)"}


def compare_bias(with_bias: Any, without_bias: Any, *, names: tuple[str, str] = ("with bias", "without bias")
                 ) -> dict[str, Any]:
    """PSIS-LOO comparison (``arviz.compare``) of a model with its group-bias term and one without.

    Returns the table (elpd, se, elpd_diff, dse per model, unrounded), which model ranks first, the
    difference in units of its standard error, the count of Pareto k > 0.7 of each, a
    plain-words ``reading`` and the table as ``csv``. LOO measures out-of-sample prediction: a
    bias that is real but small next to the outcome's noise moves the elpd by less than its standard error, so **no LOO
    difference is not evidence of no bias**; read the bias estimand's interval for that.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> rng = np.random.default_rng(2)
    >>> def tree(shift):
    ...     ll = -0.5 * (rng.normal(size=(2, 200, 100)) + shift) ** 2
    ...     return xr.DataTree.from_dict({"posterior": xr.Dataset({"a": (("chain", "draw"), ll[..., 0])}),
    ...                                   "log_likelihood": xr.Dataset({"y": (("chain", "draw", "obs"), ll)})})
    >>> out = compare_bias(tree(0.0), tree(0.0))
    >>> "is not evidence of no bias" in out["reading"]
    True
    """
    import warnings

    # arviz is the diagnostics layer's plotting/statistics dependency, heavy at import
    import arviz as az

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # round_to="none": ArviZ's default rounds elpd and elpd_diff to their standard errors
        cmp = az.compare({names[0]: with_bias, names[1]: without_bias}, round_to="none")
        k_bad = {n: int(np.sum(np.asarray(az.loo(t, pointwise=True).pareto_k) > 0.7))
                 for n, t in zip(names, (with_bias, without_bias), strict=True)}
    table = {str(n): {c: float(cmp.loc[n, c]) for c in ("elpd", "se", "elpd_diff", "dse") if c in cmp.columns}
             for n in cmp.index}
    first = str(cmp.index[0])
    diff = float(cmp["elpd_diff"].iloc[1])
    dse = float(cmp["dse"].iloc[1])
    z = diff / dse if dse > 0 else float("inf")
    if abs(z) < 2:
        reading = (f"no LOO difference (elpd_diff {diff:.2f}, dse {dse:.2f}): the two models predict equally well; "
                   "this is not evidence of no bias (read the bias estimand's interval)")
    else:
        reading = (f"'{first}' predicts better by {abs(diff):.2f} elpd ({abs(z):.1f} dse); prediction, not the size of "
                   "the bias: "
                   "no LOO difference would not be evidence of no bias")
    return {"table": table, "first": first, "elpd_diff": diff, "dse": dse, "pareto_k_over_0.7": k_bad,
            "reading": reading, "csv": cmp.to_csv()}


def check_lines(name: str, checks: dict[str, Any]) -> list[str]:
    """The printed form of a :func:`ppc_verdict` result (with ``calibration`` from
    :func:`calibration_check` when present): the verdict line, then one line per statistic, each
    saying ``pass`` or ``FAIL``."""
    failed = f"; failed: {', '.join(checks['failed'])}" if checks["failed"] else ""
    lines = [f"{name} ({checks['rule']}): {'PASS' if checks['passed'] else 'FAIL'}{failed}"]
    for k, v in checks["statistics"].items():
        lines.append(f"  {k:<28} observed {v['observed']:>9.4f}  replicated {v['replicated_mean']:>9.4f}  "
                     f"p {v['p']:.3f}  {'pass' if v['pass'] else 'FAIL'}")
    if "calibration" in checks:
        c = checks["calibration"]
        lines.append(f"  calibration (PAV): miscalibration {c['miscalibration']:.5f} vs replicated "
                     f"{c['miscalibration_replicated']:.5f}, p {c['p']:.3f}, {c['share_outside_band']:.1%} of "
                     f"rows outside the {c['ci_prob']:.0%} band: {'pass' if c['passed'] else 'FAIL'}")
    return lines
