"""Host-side fits of the models/ recipes: NUTS over a whole data set, outside the simulator.

The posterior families in :mod:`bayesfair.posteriors` are updated one observation at a time inside
jitted simulations; the recipes in ``models/`` (and the biased-feedback notebook) instead fit the
hierarchical group-bias model of :mod:`bayesfair.posteriors.group_bias` (with unknown scales
tau, s, sigma) to a data table in one NumPyro ``MCMC`` run. This module holds that host-side
code.

:func:`fit` is the one entry point. It takes either :class:`GroupBiasData` (from
:func:`group_bias_data`: the group-bias model of group_fairness_biased_feedback_aamas2022,
Section 3.1, Eq. 2) or any NumPyro model with its arguments (e.g. the hierarchical logit-normal
model of :func:`bayesfair.posteriors.hierarchical.hierarchical_model`, or the ``model`` of
:func:`bayesfair.posteriors.mcmc.logistic_linear_mcmc`), and

- runs 4 chains of NUTS by default, in float64 by default, *scoped* (``jax.enable_x64`` as a
  context manager around the run: JAX's global setting is left as it was);
- for the group-bias model, chooses the centred or non-centred form of each hierarchical level
  (beta and psi) by a documented rule (:func:`choose_parametrization`), or takes yours;
- supports a dense mass matrix (``dense_mass=True``);
- returns a :class:`Fit` that exposes numpyro's ``MCMC`` object (``fit.mcmc``, so
  ``arviz_base.from_numpyro(fit.mcmc)`` works) and a :class:`Convergence` verdict
  (``fit.convergence``): converged iff max R-hat < 1.01, min bulk and tail ESS >= 400,
  0 divergences and no frozen chain. A fit that is not converged raises a ``RuntimeWarning``
  naming the failing variables and what to try; it never reports silently.

``fit.tree()`` is the ArviZ DataTree for model checking (:mod:`bayesfair.inference.fit_tree`).
"""

from __future__ import annotations

import dataclasses
import functools
import time
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core._compile import cache_small_programs, enable_persistent_cache
from bayesfair.core._validate import finite_array, positive_float, positive_int, seed_int
from bayesfair.inference.fit_tree import bind_numpyro_submodules, fit_tree
from bayesfair.posteriors.group_bias import (
    DEFAULT_PRIORS,
    GroupBiasPriors,
    check_bias_groups,
    check_likelihood,
    gram_eigen,
    group_bias_model,
    sufficient_stats,
)

__all__ = ["RHAT_MAX", "ESS_MIN", "CompiledCodeWarning", "Convergence", "Fit", "GroupBiasData", "check_convergence",
           "choose_parametrization", "fit", "group_bias_data"]

#: Convergence thresholds of :func:`check_convergence` (Vehtari et al. 2021's recommendations).
RHAT_MAX = 1.01
ESS_MIN = 400


class GroupBiasData(NamedTuple):
    """Observations for the group-bias model: ``arms [N]`` int, ``X [N, d]``, ``y [N]``, and the
    arm -> group map ``group_of_arm [n]`` with the ``reference`` group. ``arm_names`` /
    ``group_names`` / ``feature_names`` label the results (optional)."""

    arms: np.ndarray
    X: np.ndarray
    y: np.ndarray
    group_of_arm: np.ndarray
    reference: int = 0
    arm_names: tuple[str, ...] | None = None
    group_names: tuple[str, ...] | None = None
    feature_names: tuple[str, ...] | None = None


def group_bias_data(arms: Any, X: Any, y: Any, group_of_arm: Any, *, reference: int = 0, min_arms: int = 1,
                    arm_names: Any = None, group_names: Any = None, feature_names: Any = None) -> GroupBiasData:
    """Validate observations for :func:`fit` (clear errors naming the bad field)."""
    labels, m, ref = check_bias_groups(group_of_arm, reference=reference, min_arms=min_arms)
    n = labels.size
    X = finite_array("X", X, ndim=2)
    y = finite_array("y", y, ndim=1, size=X.shape[0])
    a = np.asarray(arms)
    if a.ndim != 1 or a.shape[0] != X.shape[0]:
        raise ValueError(f"arms must be 1-d with one entry per row of X ({X.shape[0]}), got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"arms must be integer arm indices, got dtype {a.dtype}")
    bad = np.flatnonzero((a < 0) | (a >= n))
    if bad.size:
        raise ValueError(f"arms must be in [0, {n - 1}] (one per entry of group_of_arm); row {bad[0]} has {a[bad[0]]}")

    def names(field, value, size):
        if value is None:
            return None
        out = tuple(str(v) for v in value)
        if len(out) != size:
            raise ValueError(f"{field} must have {size} entries, got {len(out)}")
        if len(set(out)) != size:
            twice = sorted({v for v in out if out.count(v) > 1})
            raise ValueError(f"{field} must be distinct (they label the results' coordinates), got {twice} more than "
                             "once")
        return out

    return GroupBiasData(a.astype(np.int32), X, y, labels, ref, names("arm_names", arm_names, n),
                         names("group_names", group_names, m), names("feature_names", feature_names, X.shape[1]))


# --------------------------------------------------------------------------------------------
# convergence


class Convergence(NamedTuple):
    """The verdict of :func:`check_convergence`.

    ``converged`` iff ``max_rhat < RHAT_MAX``, ``min_ess_bulk >= ESS_MIN``, ``min_ess_tail >=
    ESS_MIN``, ``divergences == 0`` and no chain is frozen. ``failing`` names the variables over
    a threshold, ``frozen_chains`` the chains that did not move (``step_size`` and ``accept_prob``
    per chain show why), ``advice`` what to try, ``message`` the one-line verdict.
    """

    converged: bool
    max_rhat: float
    min_ess_bulk: float
    min_ess_tail: float
    divergences: int
    frozen_chains: tuple[int, ...]
    step_size: tuple[float, ...]
    accept_prob: tuple[float, ...]
    failing: tuple[str, ...]
    advice: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self._asdict().items()}


def _frozen(step_size: np.ndarray, accept: np.ndarray, stuck: np.ndarray) -> list[int]:
    """Chains that did not explore: mean acceptance < 0.1, more than half of the draws equal to
    the previous one, or a step size 100 times below the median chain's."""
    med = float(np.median(step_size))
    return [c for c in range(step_size.size)
            if accept[c] < 0.1 or stuck[c] > 0.5 or (np.isfinite(med) and step_size[c] < med / 100.0)
            or not np.isfinite(step_size[c])]


def check_convergence(samples: dict[str, Any], *, diverging: Any, step_size: Any = None, accept_prob: Any = None,
                      rhat_max: float = RHAT_MAX, ess_min: float = ESS_MIN,
                      advice: str = "") -> Convergence:
    """Verdict on MCMC draws ``samples`` (name -> ``[chains, draws, ...]``).

    R-hat is the rank-normalized split R-hat, ESS the bulk and tail (5% and 95% quantile) ESS of
    ArviZ (arviz_stats); variables constant across all draws (e.g. the reference row of
    ``psi_all``) are skipped. ``step_size [chains]`` and ``accept_prob [chains, draws]``, when
    given, detect frozen chains (see :func:`_frozen`); so do draws that repeat the previous one.
    With 1 chain R-hat cannot be computed and is reported as ``nan`` (not converged).
    """
    from arviz_stats.base import array_stats

    worst_rhat, worst_bulk, worst_tail = -np.inf, np.inf, np.inf
    failing: list[str] = []
    nonfinite: list[str] = []
    stuck = None
    for name, value in samples.items():
        arr = np.asarray(value, np.float64)
        if arr.ndim < 2:
            raise ValueError(f"samples[{name!r}] must be [chains, draws, ...], got shape {arr.shape}")
        c, n = arr.shape[:2]
        flat = arr.reshape(c, n, -1)
        if not np.all(np.isfinite(flat)):  # NaN / inf draws: not converged (and not "constant", below)
            failing.append(name)
            nonfinite.append(name)
            continue
        repeat = np.all(flat[:, 1:] == flat[:, :-1], axis=-1).mean(axis=1) if n > 1 else np.zeros(c)
        stuck = repeat if stuck is None else np.minimum(stuck, repeat)
        flat = flat[..., np.ptp(flat.reshape(c * n, -1), axis=0) > 0]
        if flat.shape[-1] == 0:
            continue
        moved = np.moveaxis(flat, (0, 1), (-2, -1))
        if c < 2:
            rhat = np.full(flat.shape[-1], np.nan)
        else:
            with np.errstate(all="ignore"):
                rhat = np.asarray(array_stats.rhat(moved, chain_axis=-2, draw_axis=-1, method="rank"), float)
        with np.errstate(all="ignore"):
            bulk = np.asarray(array_stats.ess(moved, chain_axis=-2, draw_axis=-1, method="bulk"), float)
            tail = np.asarray(array_stats.ess(moved, chain_axis=-2, draw_axis=-1, method="tail", prob=(0.05, 0.95)),
                              float)
        rhat = np.where(np.isfinite(rhat), rhat, np.inf)
        bulk = np.where(np.isfinite(bulk), bulk, 0.0)
        tail = np.where(np.isfinite(tail), tail, 0.0)
        worst_rhat = max(worst_rhat, float(rhat.max())) if c >= 2 else np.nan
        worst_bulk = min(worst_bulk, float(bulk.min()))
        worst_tail = min(worst_tail, float(tail.min()))
        if c < 2 or np.any(rhat >= rhat_max) or np.any(bulk < ess_min) or np.any(tail < ess_min):
            failing.append(name)
    div = np.asarray(diverging, bool)
    chains = div.shape[0] if div.ndim >= 1 else 1
    steps = np.full(chains, np.nan) if step_size is None else np.asarray(step_size, float).reshape(-1)
    acc = np.full(chains, np.nan) if accept_prob is None else np.asarray(accept_prob, float).reshape(chains, -1).mean(1)
    stuck = np.zeros(chains) if stuck is None else stuck
    frozen = _frozen(np.where(np.isnan(steps), 1.0, steps), np.where(np.isnan(acc), 1.0, acc), stuck)
    n_div = int(div.sum())
    converged = (bool(np.isfinite(worst_rhat)) and worst_rhat < rhat_max and worst_bulk >= ess_min
                 and worst_tail >= ess_min and n_div == 0 and not frozen and not nonfinite)
    def check(ok: bool, text: str, need: str) -> str:
        return f"{text} {'ok' if ok else 'FAILS'} (needs {need})"

    rhat_ok = bool(np.isfinite(worst_rhat)) and worst_rhat < rhat_max
    parts = [check(rhat_ok, f"max R-hat {worst_rhat:.3f}", f"< {rhat_max}"),
             check(worst_bulk >= ess_min, f"min bulk ESS {worst_bulk:.0f}", f">= {ess_min}"),
             check(worst_tail >= ess_min, f"min tail ESS {worst_tail:.0f}", f">= {ess_min}"),
             check(n_div == 0, f"{n_div} divergences", "0"),
             check(not frozen, f"frozen chains {frozen}", "none")]
    if nonfinite:
        parts.insert(0, f"non-finite (NaN or inf) draws in {', '.join(nonfinite)}")
    verdict = "converged" if converged else "NOT converged"
    message = f"{verdict}: " + "; ".join(parts)
    if not converged and failing:
        message += f"; failing variables: {', '.join(failing)}"
    return Convergence(bool(converged), float(worst_rhat), float(worst_bulk), float(worst_tail), n_div,
                       tuple(frozen), tuple(float(v) for v in steps), tuple(float(v) for v in acc), tuple(failing),
                       advice, message)


ADVICE = ("try: more warm-up (num_warmup), a higher target_accept (e.g. 0.95-0.99), another "
          "parametrization (parametrization='marginal' (Gaussian) / 'coefficients' / 'centered' / "
          "'noncentered', or per level {{'beta': ..., 'psi': ...}}; this fit used {param}), "
          "dense_mass=True, or more draws (num_samples) for ESS")


# --------------------------------------------------------------------------------------------
# parametrization


def _link_scale(likelihood: str, y: np.ndarray, n_trials: int) -> tuple[np.ndarray, float]:
    """The pilot response and the working weight: y itself and 1 for the Gaussian; for the GLMs the
    share y / top, whose least-squares slopes divided by w = p(1 - p) approximate the logit-scale
    ones (delta method), with per-observation information w (Bernoulli) or n_trials w (binomial)."""
    if likelihood == "gaussian":
        return y, 1.0
    top = 1.0 if likelihood == "bernoulli" else float(n_trials)
    p = float(np.clip(np.mean(y) / top, 0.02, 0.98))
    return y / top, p * (1 - p)


def choose_parametrization(data: GroupBiasData, *, likelihood: str = "gaussian", n_trials: int = 9,
                           priors: GroupBiasPriors = DEFAULT_PRIORS, tau: float | None = None,
                           s: float | None = None, sigma: float | None = None) -> dict[str, Any]:
    """The documented rule: centred or non-centred beta and psi for the group-bias model.

    A level is sampled **centred** when the data inform it more than its prior does, and
    **non-centred** otherwise (the non-centred form removes the funnel between a weakly informed
    level and its scale; the centred form avoids the opposite funnel when the data pin the level
    down, which is what froze float32 chains on the COMPAS design with small sigma).

    Pilot estimates (float64 numpy, from per-arm least squares with a 1e-6 ridge): the arm
    coefficients c_i, the noise variance sigma_hat^2 (pooled residual variance; for the GLMs the
    inverse working weight), tau_hat^2 (pooled within-group variance of the c_i across arms,
    averaged over coordinates) and s_hat^2 (mean squared difference between each non-reference
    group's mean c and the reference group's). Fixed scales replace their estimates.

    - beta centred iff min over arms with data of (trace(X_i'X_i) / d) / sigma_hat^2 >=
      1 / tau_hat^2 (per-arm information vs the prior precision 1/tau^2);
    - psi centred iff min over non-reference groups of n_g s_hat^2 / tau_hat^2 >= 10 (a group's
      n_g arms inform psi_g with precision about n_g / tau^2, the prior's is 1 / s^2; the margin
      of 10 rather than 1 because s itself is learnt from only (m - 1) d coordinates of psi, so
      its posterior reaches small values where the centred psi is a funnel).

    Returns ``{"noncentered_beta", "noncentered_psi", "beta_ratio", "psi_ratio", "tau_hat",
    "s_hat", "sigma_hat"}``.
    """
    arms, X = np.asarray(data.arms), np.asarray(data.X, np.float64)
    labels = np.asarray(data.group_of_arm)
    n, d = labels.size, X.shape[1]
    resp, w = _link_scale(likelihood, np.asarray(data.y, np.float64), n_trials)
    coef = np.full((n, d), np.nan)
    rss, dof = 0.0, 0
    info = np.full(n, np.nan)
    for i in range(n):
        rows = arms == i
        if not rows.any():
            continue
        Xi, yi = X[rows], resp[rows]
        xx = Xi.T @ Xi
        coef[i] = np.linalg.solve(xx + 1e-6 * np.eye(d), Xi.T @ yi)
        rss += float(np.sum((yi - Xi @ coef[i]) ** 2))
        dof += max(int(rows.sum()) - d, 0)
        info[i] = np.trace(xx) / d
    if likelihood == "gaussian":
        s2 = rss / dof if dof > 0 else float(np.var(resp)) + 1e-12
        s2 = sigma**2 if sigma is not None else max(s2, 1e-12)
        info_w = 1.0 / s2
        coef_link = coef
    else:
        mult = 1.0 if likelihood == "bernoulli" else float(n_trials)
        info_w = mult * w
        s2 = 1.0 / info_w
        coef_link = coef / w
    have = np.isfinite(coef_link[:, 0])
    within = []
    for g in np.unique(labels):
        c = coef_link[(labels == g) & have]
        if c.shape[0] >= 2:
            within.append(np.sum((c - c.mean(0)) ** 2, 0) / (c.shape[0] - 1))
    tau2 = float(np.mean(within)) if within else float(priors.tau) ** 2
    if tau is not None:
        tau2 = float(tau) ** 2
    tau2 = max(tau2, 1e-12)
    ref_mean = coef_link[(labels == data.reference) & have].mean(0) if np.any((labels == data.reference) & have) \
        else np.zeros(d)
    s2_terms, counts = [], []
    for g in np.unique(labels):
        if g == data.reference:
            continue
        sel = (labels == g) & have
        counts.append(int(np.sum(labels == g)))
        s2_terms.append(float(np.mean((coef_link[sel].mean(0) - ref_mean) ** 2)) if sel.any() else 0.0)
    s_hat2 = float(np.mean(s2_terms)) if s2_terms else 0.0
    if s is not None:
        s_hat2 = float(s) ** 2
    beta_ratio = float(np.nanmin(info) * info_w * tau2) if np.isfinite(info).any() else 0.0
    psi_ratio = float(min(counts) * s_hat2 / tau2) if counts else 0.0
    return {"noncentered_beta": not beta_ratio >= 1.0, "noncentered_psi": not psi_ratio >= 10.0,
            "beta_ratio": beta_ratio, "psi_ratio": psi_ratio, "tau_hat": float(np.sqrt(tau2)),
            "s_hat": float(np.sqrt(s_hat2)), "sigma_hat": float(np.sqrt(s2))}


def _parametrization(parametrization: Any, data: GroupBiasData, *, sufficient: bool = False,
                     **kw: Any) -> dict[str, Any]:
    gaussian = kw.get("likelihood", "gaussian") == "gaussian"
    if isinstance(parametrization, str):
        if parametrization == "marginal" or (parametrization == "auto" and gaussian and sufficient):
            if not (gaussian and sufficient):
                raise ValueError("parametrization='marginal' needs likelihood='gaussian' and sufficient=True "
                                 f"(the coefficients are integrated out in closed form), got "
                                 f"likelihood={kw.get('likelihood')!r}, sufficient={sufficient}")
            return {"marginal": True, "coefficients": False, "noncentered_beta": False, "noncentered_psi": False,
                    "rule": "given" if parametrization == "marginal" else
                    "auto: Gaussian likelihood, coefficients integrated out (marginal)"}
        if parametrization == "auto":
            rule = choose_parametrization(data, **kw)
            coefficients = not rule["noncentered_beta"]
            return {"marginal": False, "coefficients": coefficients, **rule,
                    "rule": "auto: the data inform every arm more than tau does: NUTS on the arms' coefficients"
                    if coefficients else "auto: choose_parametrization"}
        if parametrization == "coefficients":
            return {"marginal": False, "coefficients": True, "noncentered_beta": False, "noncentered_psi": False,
                    "rule": "given"}
        if parametrization in ("centered", "noncentered"):
            flag = parametrization == "noncentered"
            return {"marginal": False, "coefficients": False, "noncentered_beta": flag, "noncentered_psi": flag,
                    "rule": "given"}
    elif isinstance(parametrization, dict):
        unknown = set(parametrization) - {"beta", "psi"}
        vals = set(parametrization.values()) - {"centered", "noncentered"}
        if not unknown and not vals:
            auto = choose_parametrization(data, **kw)
            return {**auto, "rule": "given", "marginal": False, "coefficients": False,
                    "noncentered_beta": parametrization.get("beta", "noncentered" if auto["noncentered_beta"]
                                                             else "centered") == "noncentered",
                    "noncentered_psi": parametrization.get("psi", "noncentered" if auto["noncentered_psi"]
                                                            else "centered") == "noncentered"}
    raise ValueError("parametrization must be 'auto', 'marginal', 'coefficients', 'centered', 'noncentered' or a dict "
                     "{'beta': ..., 'psi': ...} "
                     f"of 'centered'/'noncentered', got {parametrization!r}")


# --------------------------------------------------------------------------------------------
# the fit


@dataclasses.dataclass
class Fit:
    """Result of :func:`fit`.

    Attributes
    ----------
    mcmc : numpyro.infer.MCMC
        The sampler after the run (``arviz_base.from_numpyro(fit.mcmc)`` works).
    samples : dict
        name -> ``[chains, draws, ...]`` numpy arrays (sample and deterministic sites).
    sample_stats : dict
        ``diverging``, ``energy``, ``tree_depth``, ``n_steps``, ``acceptance_rate``, ``lp``
        (``[chains, draws]``) and ``step_size`` (``[chains, draws]``, the adapted step size).
    convergence : Convergence
        The verdict (also ``fit.converged``).
    seconds : float
        Wall time of the run (including compilation).
    config : dict
        The settings (JSON-friendly), including the parametrization and why.
    data : GroupBiasData or None
        The group-bias data, or None for a generic model.
    model, model_args, model_kwargs :
        The NumPyro model as run (``model(*model_args, **model_kwargs)``).
    """

    mcmc: Any
    samples: dict[str, np.ndarray]
    sample_stats: dict[str, np.ndarray]
    convergence: Convergence
    seconds: float
    config: dict[str, Any]
    data: GroupBiasData | None
    model: Any
    model_args: tuple
    model_kwargs: dict[str, Any]

    @property
    def converged(self) -> bool:
        return self.convergence.converged

    @property
    def diverging(self) -> np.ndarray:
        return self.sample_stats["diverging"]

    def tree(self, **kwargs: Any):
        """The ArviZ DataTree for model checking (:func:`bayesfair.inference.fit_tree.fit_tree`)."""
        return fit_tree(self, **kwargs)


_EXTRA = ("diverging", "energy", "num_steps", "accept_prob", "adapt_state.step_size", "potential_energy")


_MCMC_CACHE: dict[Any, Any] = {}


def _run(model: Any, args: tuple, kwargs: dict, *, num_warmup: int, num_samples: int, num_chains: int, seed: int,
         target_accept: float, dense_mass: Any, progress_bar: bool, x64: bool, init_strategy: Any = None,
         cache_key: Any = None, gibbs_sites: tuple[str, ...] = ()):
    """One NUTS run, inside ``jax.enable_x64(x64)``. With a ``cache_key`` (the group-bias model: its
    static settings) the ``MCMC`` object is kept (``jit_model_args=True``) and reused by the next
    run with the same key and data shapes, so repeated fits (SBC) compile once.

    ``gibbs_sites``: sites whose full conditional is N(0, I) and independent of every other site
    (the marginal form's ``phi_z``, ``beta_z``); they are drawn exactly in a Gibbs step
    (``numpyro.infer.HMCGibbs``) and NUTS moves only the other sites."""
    from numpyro.infer import MCMC, NUTS, HMCGibbs
    from numpyro.infer.initialization import init_to_median

    bind_numpyro_submodules()

    # Before anything compiles. Besides saving a new process the compilation, the cache stops
    # numpyro's sequential chains from compiling the same sampling loop once per chain (it builds
    # fresh closures for every chain; the programs are identical, so chains 2..n load chain 1's):
    # measured on test_fitting's normal fits, 4 chains, cold folder: 14.8 + 10.0 s -> 10.1 + 4.9 s.
    enable_persistent_cache()
    dtype = jnp.float64 if x64 else jnp.float32

    def cast(v):
        if isinstance(v, (np.ndarray, jax.Array)) and jnp.issubdtype(v.dtype, jnp.floating):
            return jnp.asarray(v, dtype)
        return v

    chain_method = "parallel" if 1 < num_chains <= jax.local_device_count() else "sequential"
    # numpyro's initialization runs the model op by op, per chain: ~290 small programs for the
    # group-bias model, which the persistent cache keeps only inside this block (a new process's
    # fit 6.6-7.2 s -> 3.5-3.6 s; bayesfair.core._compile.cache_small_programs)
    with jax.enable_x64(bool(x64)), cache_small_programs():
        args = jax.tree.map(cast, args)  # pytrees too (bayesfair.posteriors.indicators.IndicatorMatrix)
        kwargs = {k: (tuple(cast(x) for x in v) if isinstance(v, tuple) else cast(v)) for k, v in kwargs.items()}
        key = None
        if cache_key is not None:
            shapes = tuple(np.shape(a) for a in jax.tree.leaves((args, kwargs)))
            key = (cache_key, chain_method, shapes, num_warmup, num_samples, num_chains, target_accept,
                   repr(dense_mass), bool(x64), progress_bar, tuple(gibbs_sites))
        mcmc = _MCMC_CACHE.get(key) if key is not None else None
        if mcmc is None:
            kernel = NUTS(model, target_accept_prob=target_accept, dense_mass=dense_mass,
                          init_strategy=init_strategy or init_to_median(num_samples=15))
            if gibbs_sites:
                kernel = HMCGibbs(kernel, gibbs_fn=_standard_normal_gibbs, gibbs_sites=list(gibbs_sites))
            mcmc = MCMC(kernel, num_warmup=num_warmup, num_samples=num_samples, num_chains=num_chains,
                        chain_method=chain_method, progress_bar=progress_bar, jit_model_args=key is not None)
            if key is not None:
                if len(_MCMC_CACHE) >= 8:
                    _MCMC_CACHE.pop(next(iter(_MCMC_CACHE)))
                _MCMC_CACHE[key] = mcmc
        _bound_compiled_code()
        t0 = time.perf_counter()
        prefix = "hmc_state." if gibbs_sites else ""
        mcmc.run(jax.random.key(int(seed)), *args, extra_fields=tuple(prefix + f for f in _EXTRA), **kwargs)
        samples = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
        extra = {k.removeprefix(prefix): np.asarray(v)
                 for k, v in mcmc.get_extra_fields(group_by_chain=True).items()}
        seconds = time.perf_counter() - t0
    n_steps = extra["num_steps"].astype(np.int64)
    stats = {"diverging": extra["diverging"].astype(bool), "energy": extra["energy"],
             "n_steps": n_steps, "tree_depth": np.floor(np.log2(np.maximum(n_steps, 1))).astype(np.int64) + 1,
             "acceptance_rate": extra["accept_prob"], "step_size": extra["adapt_state.step_size"],
             "lp": -extra["potential_energy"]}
    return mcmc, samples, stats, seconds, chain_method, args, kwargs


def _memory_maps() -> tuple[int, int]:
    """(memory mappings of this process, the kernel's limit vm.max_map_count); (0, 0) off Linux."""
    try:
        with open("/proc/self/maps") as fh:
            used = sum(1 for _ in fh)
        with open("/proc/sys/vm/max_map_count") as fh:
            return used, int(fh.read())
    except (OSError, ValueError):
        return 0, 0


_MAPS_WARNED = [False]


class CompiledCodeWarning(UserWarning):
    """:func:`_bound_compiled_code` cleared JAX's caches: later fits recompile, nothing else changes.
    Its own category, so code that turns a fit's ``RuntimeWarning`` (not converged) into an error is
    not stopped by this notice."""


def _bound_compiled_code(share: float = 0.6) -> None:
    """Keep repeated fits from exhausting the process's memory mappings.

    numpyro compiles its sampling loop afresh for every ``MCMC.run`` (each run's loop body is a new
    closure, and JAX's jit cache keeps every executable), so each fit adds ~3,000 memory mappings;
    at the kernel's limit (vm.max_map_count, 65,530 by default) LLVM aborts the whole process
    ("Unable to allocate section memory", seen after ~20 SBC replications). Whenever the count is
    above ``share`` of the limit this clears JAX's caches and the cached samplers (the count then
    drops back), with a :class:`CompiledCodeWarning` the first time only: the next fits recompile,
    nothing else changes.
    """
    used, limit = _memory_maps()
    if limit and used > share * limit:
        if not _MAPS_WARNED[0]:
            _MAPS_WARNED[0] = True
            warnings.warn(f"bayesfair fit: this process holds {used:,} memory mappings (limit vm.max_map_count = "
                          f"{limit:,}), mostly code compiled by earlier fits; clearing JAX's compilation caches "
                          "(jax.clear_caches()) so that the next compilation does not abort the process. Later "
                          "fits recompile; this message is shown once.", CompiledCodeWarning, stacklevel=4)
        _MCMC_CACHE.clear()
        jax.clear_caches()


def _standard_normal_gibbs(rng_key: Any, gibbs_sites: dict, hmc_sites: dict) -> dict:
    """The Gibbs step of :func:`_run`: fresh N(0, I) values of every Gibbs site (exact: their full
    conditional is N(0, I), see :func:`~bayesfair.posteriors.group_bias.group_bias_model` with
    ``marginal=True``)."""
    names = sorted(gibbs_sites)
    keys = jax.random.split(rng_key, len(names))
    return {k: jax.random.normal(kk, jnp.shape(gibbs_sites[k]), jnp.result_type(gibbs_sites[k]))
            for kk, k in zip(keys, names, strict=True)}


def _verdict(samples: dict, stats: dict, advice: str, warn: bool, skip: tuple = ()) -> Convergence:
    conv = check_convergence({k: v for k, v in samples.items() if k not in skip}, diverging=stats["diverging"],
                             step_size=stats["step_size"][:, -1], accept_prob=stats["acceptance_rate"], advice=advice)
    if warn and not conv.converged:
        warnings.warn(f"NUTS fit {conv.message}. {advice}", RuntimeWarning, stacklevel=3)
    return conv


def fit(
    target: Any,
    *args: Any,
    likelihood: str = "gaussian",
    n_trials: int = 9,
    group_bias: bool = True,
    priors: GroupBiasPriors = DEFAULT_PRIORS,
    tau: float | None = None,
    s: float | None = None,
    sigma: float | None = None,
    parametrization: Any = "auto",
    sufficient: bool | None = None,
    num_warmup: int = 1000,
    num_samples: int = 1000,
    num_chains: int = 4,
    seed: int = 0,
    target_accept: float = 0.9,
    dense_mass: Any = False,
    x64: bool = True,
    progress_bar: bool = False,
    warn: bool = True,
    cache_key: Any = None,
    advice: str | None = None,
    **model_kwargs: Any,
) -> Fit:
    """Fit a NumPyro model by NUTS: the group-bias model given :class:`GroupBiasData`, or any model.

    Parameters
    ----------
    target : GroupBiasData or callable
        :class:`GroupBiasData` fits :func:`~bayesfair.posteriors.group_bias.group_bias_model`
        (the options below); a NumPyro model is run as ``model(*args, **model_kwargs)`` (e.g.
        ``fit(hierarchical_model(groups), arms, rewards, n_arms=K)`` or
        ``fit(logistic_linear_mcmc().model, X, y)``).
    likelihood : {"gaussian", "bernoulli", "binomial"}
        Group-bias model only: the observation model (Gaussian: the paper's Eq. 2; Bernoulli with
        a logit link for 0/1 outcomes; Binomial(n_trials, sigmoid(eta)) for bounded scores, e.g.
        a score 1..10 as y = score - 1 with n_trials = 9).
    group_bias : bool
        False: the model without the bias term (psi = 0), for model comparison.
    priors : GroupBiasPriors
        The scales of the half-normal priors of tau, s, sigma and the prior of beta_bar
        (default :data:`~bayesfair.posteriors.group_bias.DEFAULT_PRIORS`).
    tau, s, sigma : float, optional
        Fix a scale instead of sampling it.
    parametrization : "auto", "marginal", "coefficients", "centered", "noncentered" or {"beta": ..., "psi": ...}
        "marginal" (Gaussian with sufficient statistics only): the coefficients integrated out in
        closed form, NUTS over the scales, exact conditional draws of the coefficients
        (``group_bias_model(marginal=True)``). "coefficients" (any likelihood): NUTS on the arms'
        observed coefficients c_i = beta_i + psi_g(i) and the scales, (beta_bar, psi) drawn exactly
        given them (``group_bias_model(coefficients=True)``). Otherwise centred or non-centred beta
        and psi. "auto": "marginal" for the Gaussian with sufficient statistics; else
        "coefficients" when :func:`choose_parametrization` would centre beta (the data inform each
        arm more than its prior does), and that rule's choice otherwise.
    sufficient : bool, optional
        Gaussian only: the likelihood through per-arm sufficient statistics (same posterior, cost
        independent of the number of rows). Default: True for the Gaussian.
    num_warmup, num_samples, num_chains, seed, target_accept : NUTS settings (4 chains default).
    dense_mass : bool or list
        NUTS's ``dense_mass`` (a full mass matrix, or blocks of sites).
    x64 : bool
        Run in float64 (default), scoped with ``jax.enable_x64``; False: float32.
    warn : bool
        Issue a ``RuntimeWarning`` when the fit is not converged (default True).
    cache_key : hashable, optional
        Generic model only: a name for the model (equal keys must mean the same model, keywords
        and all). The ``MCMC`` object is kept and the next fit with the same key, settings and
        data shapes reuses it, with the model's arguments as inputs (``jit_model_args``), for
        repeated fits on new outcomes (a power study). numpyro still rebuilds its sampling loop
        on every run, which the persistent compilation cache then mostly loads: on a 100-row
        COMPAS design, 14 compilations in the first fit, 2 in each later one (``jax_log_compiles``).
        The group-bias model does this by itself.
    advice : str, optional
        Generic model only: what to try when the fit does not converge (the warning and
        ``fit.convergence.advice``; default: the generic remedies).
    **model_kwargs
        Keyword arguments of a generic model.
    """
    num_warmup = positive_int("num_warmup", num_warmup)
    num_samples = positive_int("num_samples", num_samples)
    num_chains = positive_int("num_chains", num_chains)
    if not 0.0 < float(target_accept) < 1.0:
        raise ValueError(f"target_accept must be in (0, 1), got {target_accept}")
    run_kw = dict(num_warmup=num_warmup, num_samples=num_samples, num_chains=num_chains, seed=seed_int("seed", seed),
                  target_accept=float(target_accept), dense_mass=dense_mass, progress_bar=progress_bar, x64=bool(x64))
    if not isinstance(target, GroupBiasData):
        if not callable(target):
            raise TypeError(f"target must be GroupBiasData (see group_bias_data) or a NumPyro model, got "
                            f"{type(target).__name__}")
        mcmc, samples, stats, seconds, method, a, k = _run(target, args, model_kwargs, cache_key=cache_key, **run_kw)
        config = {**run_kw, "chain_method": method, "model": getattr(target, "__qualname__", repr(target))}
        advice = advice or ADVICE.format(param="the model's own parametrization")
        conv = _verdict(samples, stats, advice, warn)
        return Fit(mcmc, samples, stats, conv, seconds, config, None, target, a, k)

    if args or model_kwargs or cache_key is not None or advice is not None:
        raise TypeError(f"fit(GroupBiasData, ...) takes no extra model arguments, cache_key nor advice (it keys its "
                        f"compiled sampler and words its advice itself), got {args} {sorted(model_kwargs)} "
                        f"cache_key={cache_key!r} advice={advice!r}")
    # checked again: GroupBiasData is a public NamedTuple, so it may be built (or _replace'd) without
    # group_bias_data's checks, and an arm index out of range would be dropped by the sums silently
    data = group_bias_data(target.arms, target.X, target.y, target.group_of_arm, reference=target.reference,
                           arm_names=target.arm_names, group_names=target.group_names,
                           feature_names=target.feature_names)
    check_likelihood(likelihood, data.y, n_trials)
    if not isinstance(priors, GroupBiasPriors):
        raise TypeError(f"priors must be a GroupBiasPriors, got {type(priors).__name__}")
    for name, v in (("tau", tau), ("s", s), ("sigma", sigma)):
        if v is not None:
            positive_float(name, v)
    for name in ("tau", "s", "sigma", "prior_sd"):
        positive_float(f"priors.{name}", getattr(priors, name))
    d = data.X.shape[1]
    prior_mean = np.asarray(priors.prior_mean, np.float64)
    if prior_mean.ndim > 1 or (prior_mean.ndim == 1 and prior_mean.size != d):
        raise ValueError(f"priors.prior_mean must be a number or have one entry per feature (d = {d}), got shape "
                         f"{prior_mean.shape}")
    finite_array("priors.prior_mean", prior_mean.reshape(-1))
    if sufficient is None:
        sufficient = likelihood == "gaussian"
    if sufficient and likelihood != "gaussian":
        raise ValueError(f"sufficient=True is only for likelihood='gaussian', got likelihood={likelihood!r}")
    param = _parametrization(parametrization, data, sufficient=bool(sufficient), likelihood=likelihood,
                             n_trials=n_trials, priors=priors, tau=tau, s=s, sigma=sigma)
    if not group_bias:
        param["noncentered_psi"] = False
    kwargs = dict(group_of_arm=data.group_of_arm, reference=data.reference, tau=tau, s=s, sigma=sigma,
                  tau_scale=priors.tau, s_scale=priors.s, sigma_scale=priors.sigma,
                  prior_mean=np.asarray(priors.prior_mean, np.float64), prior_sd=priors.prior_sd,
                  sufficient=bool(sufficient), noncentered_psi=bool(param["noncentered_psi"]),
                  noncentered_beta=bool(param["noncentered_beta"]), group_bias=bool(group_bias),
                  likelihood=likelihood, n_trials=int(n_trials), marginal=bool(param["marginal"]),
                  coefficients=bool(param["coefficients"]))
    X = np.asarray(data.X, np.float64)
    y = np.asarray(data.y, np.float64)
    arms = np.asarray(data.arms, np.int32)
    if sufficient:
        with jax.enable_x64(bool(x64)):
            dt = jnp.float64 if x64 else jnp.float32
            suff = sufficient_stats(arms, jnp.asarray(X, dt), jnp.asarray(y, dt), int(data.group_of_arm.size))
            kwargs["stats"] = tuple(np.asarray(v) for v in suff)

    static = {k: v for k, v in kwargs.items() if k != "stats"}
    model = functools.partial(_group_bias_site_model, **static)
    cache_key = repr(sorted((k, v.tolist() if isinstance(v, np.ndarray) else v) for k, v in static.items()))
    extra = {"stats": kwargs["stats"]} if sufficient else {}
    if param["marginal"]:
        extra["eig"] = gram_eigen(kwargs["stats"][1])
    mcmc, samples, stats, seconds, method, a, k = _run(model, (arms, X, y), extra, cache_key=cache_key,
                                                       gibbs_sites=_GIBBS[param["marginal"], param["coefficients"]],
                                                       **run_kw)
    config = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()
              if k not in ("stats", "group_of_arm")}
    config.update(run_kw, chain_method=method, parametrization={k: v for k, v in param.items()},
                  priors=priors._asdict())
    which = ("the marginal form (coefficients integrated out)" if param["marginal"] else
             "the coefficient form (NUTS on the arms' coefficients)" if param["coefficients"] else
             f"beta {'non-centred' if param['noncentered_beta'] else 'centred'}, psi "
             f"{'non-centred' if param['noncentered_psi'] else 'centred'}")
    conv = _verdict(samples, stats, ADVICE.format(param=which), warn, skip=("psi_all",))
    return Fit(mcmc, samples, stats, conv, seconds, config, data, model, a, k)


#: Gibbs sites (exact N(0, I) full conditionals) of the (marginal, coefficient) forms.
_GIBBS = {(True, False): ("beta_z", "phi_z"), (False, True): ("phi_z",), (False, False): ()}


def _group_bias_site_model(arms, X, y=None, stats=None, eig=None, **static):
    """:func:`group_bias_model` with the data as positional model arguments (so a cached, jitted
    ``MCMC`` takes new data without recompiling)."""
    group_bias_model(arms, X, y, stats=stats, eig=eig, **static)
