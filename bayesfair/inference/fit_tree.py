"""The ArviZ DataTree of a :func:`bayesfair.inference.fitting.fit` result, for model checking.

For the group-bias model (group_fairness_biased_feedback_aamas2022, Section 3.1, Eq. 2) the tree
follows ArviZ 1.x conventions (dims ``chain``, ``draw``; the observation dim is ``obs`` in every
group that has one):

- ``posterior``: ``psi [group, feature]`` of the non-reference groups (absent when
  ``group_bias=False``), ``beta [arm, feature]``, ``beta_bar [feature]`` and the sampled scales
  ``tau``, ``s``, ``sigma``;
- ``sample_stats``: ``diverging``, ``energy``, ``tree_depth``, ``n_steps``, ``acceptance_rate``,
  ``step_size``, ``lp``;
- ``log_likelihood``: ``y [obs]``, the log density of every row at every draw. When the fit used
  the sufficient-statistics likelihood (Gaussian), the per-row values are computed here from the
  posterior draws (float64); they sum to the sufficient-statistics total per draw (also for the
  marginal form, whose draws of the coefficients are the conditional ones: the values are the
  likelihood of the rows given all parameters, not the marginal factor NUTS ran on);
- ``observed_data``: ``y [obs]``; ``constant_data``: ``arms [obs]``, ``X [obs, feature]``;
- ``prior`` (the posterior's variables) and ``prior_predictive`` (``y``): draws of the model's
  prior, one chain;
- ``posterior_predictive``: ``y [obs]`` simulated at every kept posterior draw.

The observation-level groups hold chains x draws x N values; to bound memory the draws are
thinned (the same draws in every group) so that chains x draws x N <= ``max_cells``.

For a generic NumPyro model the tree is ``arviz_base.from_numpyro(fit.mcmc, log_likelihood=True,
prior=...)`` plus the sampler statistics above.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np

from bayesfair.posteriors.group_bias import group_bias_model

__all__ = ["fit_tree", "pointwise_log_likelihood", "linear_predictor", "OBS_DIM"]

OBS_DIM = "obs"


def linear_predictor(coef: np.ndarray, arms: np.ndarray, X: np.ndarray) -> np.ndarray:
    """eta ``[S, N]`` = x_k . coef[s, arms[k]] for coefficient draws ``coef [S, n, d]`` (per arm, so
    memory stays S x N)."""
    coef = np.asarray(coef, np.float64)
    arms = np.asarray(arms)
    X = np.asarray(X, np.float64)
    out = np.empty((coef.shape[0], X.shape[0]))
    for a in np.unique(arms):
        rows = arms == a
        out[:, rows] = coef[:, a, :] @ X[rows].T
    return out


def pointwise_log_likelihood(likelihood: str, eta: np.ndarray, y: np.ndarray, sigma: Any = None,
                             n_trials: int = 9) -> np.ndarray:
    """log p(y_k | eta[s, k]) ``[S, N]`` in float64 (``sigma [S]`` for the Gaussian)."""
    eta = np.asarray(eta, np.float64)
    y = np.asarray(y, np.float64)
    if likelihood == "gaussian":
        sig = np.asarray(sigma, np.float64).reshape(-1, 1)
        return -0.5 * np.log(2 * np.pi * sig**2) - 0.5 * ((y - eta) / sig) ** 2
    softplus = np.logaddexp(0.0, eta)
    if likelihood == "bernoulli":
        return y * eta - softplus
    if likelihood == "binomial":
        from scipy.special import gammaln  # scipy: ~0.1 s, only for binomial model checks (not at import bayesfair)

        n = float(n_trials)
        return gammaln(n + 1) - gammaln(y + 1) - gammaln(n - y + 1) + y * eta - n * softplus
    raise ValueError(f"likelihood must be 'gaussian', 'bernoulli' or 'binomial', got {likelihood!r}")


def _simulate(rng: np.random.Generator, likelihood: str, eta: np.ndarray, sigma: Any, n_trials: int) -> np.ndarray:
    if likelihood == "gaussian":
        return eta + np.asarray(sigma, np.float64).reshape(-1, 1) * rng.standard_normal(eta.shape)
    p = 1.0 / (1.0 + np.exp(-eta))
    if likelihood == "bernoulli":
        return (rng.random(eta.shape) < p).astype(np.int64)
    return rng.binomial(int(n_trials), p).astype(np.int64)


def _dataset(values: dict[str, np.ndarray], dims: dict[str, list[str]], coords: dict[str, Any]):
    import xarray as xr

    data_vars = {}
    for k, v in values.items():
        v = np.asarray(v)
        dd = ["chain", "draw", *dims.get(k, [])][: v.ndim]
        data_vars[k] = (dd, v)
    used = {d for k in data_vars for d in data_vars[k][0]}
    return xr.Dataset(data_vars, coords={k: v for k, v in coords.items() if k in used})


def _posterior_vars(samples: dict[str, np.ndarray], others: list[int]) -> dict[str, np.ndarray]:
    out = {}
    if "psi" in samples or ("psi_all" in samples and "s" in samples):
        out["psi"] = np.asarray(samples["psi_all"])[:, :, others, :]
    out["beta"] = np.asarray(samples["beta"])
    out["beta_bar"] = np.asarray(samples["beta_bar"])
    out.update({k: np.asarray(samples[k]) for k in ("tau", "s", "sigma") if k in samples})
    return out


def bind_numpyro_submodules() -> None:
    """Bind every imported ``numpyro.*`` submodule as an attribute of its parent package.

    ArviZ imports numpyro lazily (``lazy_loader``, i.e. ``importlib.util.LazyLoader``). In a process
    that imported arviz before numpyro, the submodules numpyro's own ``__init__`` imports while the
    lazy package loads were not bound on it, and ``arviz_base.from_numpyro(fit.mcmc)`` (and
    ``fit.tree()`` of a generic model) failed with "module 'numpyro.infer' has no attribute
    'initialization'". Binding them is what an eager import would have done."""
    import sys

    for name, module in list(sys.modules.items()):
        if not name.startswith("numpyro.") or module is None:
            continue
        parent, _, child = name.rpartition(".")
        package = sys.modules.get(parent)
        if package is not None and not hasattr(package, child):
            setattr(package, child, module)


_FIT_FIELDS = ("samples", "sample_stats", "config", "data", "model", "model_args")


def fit_tree(fit: Any, *, max_cells: float = 2e7, prior_draws: int = 500, seed: int = 0,
             attrs: dict[str, Any] | None = None):
    """The DataTree of ``fit`` (a :class:`bayesfair.inference.fitting.Fit`; module docstring)."""
    import json

    import xarray as xr

    if not all(hasattr(fit, a) for a in _FIT_FIELDS):  # a Fit (fitting imports this module, not the reverse)
        raise TypeError(f"fit must be a bayesfair.inference.fitting.Fit (from fitting.fit), got {type(fit).__name__}")
    if not max_cells > 0:
        raise ValueError(f"max_cells must be > 0, got {max_cells}")
    if int(prior_draws) < 1:
        raise ValueError(f"prior_draws must be >= 1, got {prior_draws}")
    stats = {k: np.asarray(v) for k, v in fit.sample_stats.items()}
    if fit.data is None:
        return _generic_tree(fit, stats, int(prior_draws), seed, attrs)

    data = fit.data
    cfg = fit.config
    likelihood, n_trials = cfg["likelihood"], int(cfg["n_trials"])
    arms, X, y = np.asarray(data.arms), np.asarray(data.X, np.float64), np.asarray(data.y, np.float64)
    n, m, d, N = int(data.group_of_arm.size), int(data.group_of_arm.max()) + 1, X.shape[1], X.shape[0]
    chains, draws = np.asarray(fit.samples["beta"]).shape[:2]
    thin = max(1, math.ceil(chains * draws * N / float(max_cells)))
    samples = {k: np.asarray(v)[:, ::thin] for k, v in fit.samples.items()}
    stats = {k: v[:, ::thin] for k, v in stats.items()}
    kept = samples["beta"].shape[1]
    others = [g for g in range(m) if g != data.reference]
    group_names = list(data.group_names) if data.group_names is not None else [str(g) for g in range(m)]
    coords = {"group": [group_names[g] for g in others],
              "arm": list(data.arm_names) if data.arm_names is not None else list(range(n)),
              "feature": list(data.feature_names) if data.feature_names is not None else list(range(d)),
              OBS_DIM: np.arange(N), "chain": np.arange(chains), "draw": np.arange(kept) * thin}
    dims = {"psi": ["group", "feature"], "beta": ["arm", "feature"], "beta_bar": ["feature"],
            "y": [OBS_DIM], "arms": [OBS_DIM], "X": [OBS_DIM, "feature"]}
    labels = np.asarray(data.group_of_arm)
    post = _posterior_vars(samples, others) if cfg.get("group_bias", True) else {
        k: v for k, v in _posterior_vars(samples, others).items() if k != "psi"}
    flat = lambda a: a.reshape(chains * kept, *a.shape[2:])  # noqa: E731
    coef = flat(samples["beta"]) + flat(samples["psi_all"])[:, labels, :]
    eta = linear_predictor(coef, arms, X)
    sigma = flat(samples["sigma"]) if "sigma" in samples else cfg.get("sigma")
    loglik = pointwise_log_likelihood(likelihood, eta, y, sigma, n_trials).reshape(chains, kept, N)
    rng = np.random.default_rng(seed)
    ppc = _simulate(rng, likelihood, eta, sigma, n_trials).reshape(chains, kept, N)
    del eta

    prior_vals, prior_y = _prior(fit, int(prior_draws), seed, others)
    obs_y = y.astype(np.int64) if likelihood != "gaussian" else y

    def ds(values, c=None):
        return _dataset(values, dims, coords if c is None else {**coords, "chain": [0], "draw": np.arange(c)})

    groups = {
        "posterior": ds(post),
        "sample_stats": ds(stats),
        "log_likelihood": ds({"y": loglik}),
        "posterior_predictive": ds({"y": ppc}),
        "observed_data": xr.Dataset({"y": ([OBS_DIM], obs_y)}, coords={OBS_DIM: np.arange(N)}),
        "constant_data": xr.Dataset({"arms": ([OBS_DIM], arms), "X": ([OBS_DIM, "feature"], X)},
                                    coords={OBS_DIM: np.arange(N), "feature": coords["feature"]}),
        "prior": ds(prior_vals, prior_draws),
        "prior_predictive": ds({"y": prior_y}, prior_draws),
    }
    tree = xr.DataTree.from_dict(groups)
    tree.attrs.update({"model": "bayesfair.posteriors.group_bias.group_bias_model", "likelihood": likelihood,
                       "n_trials": n_trials if likelihood == "binomial" else 0,
                       "group_bias": int(bool(cfg.get("group_bias", True))),
                       "reference_group": group_names[data.reference], "rows": int(N), "thin": int(thin),
                       "converged": int(fit.convergence.converged), "convergence": fit.convergence.message,
                       "nuts_config": json.dumps(cfg, default=str), "nuts_seconds": float(fit.seconds)})
    tree.attrs.update(dict(attrs or {}))
    return tree


def _prior(fit: Any, k: int, seed: int, others: list[int]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Prior draws of the posterior's variables and of y (the plain, per-row form of the model)."""
    import functools

    from numpyro.infer import Predictive

    static = dict(fit.model.keywords)
    static["sufficient"] = False
    static["marginal"] = False
    model = functools.partial(group_bias_model, **static)
    arms, X = fit.model_args[0], fit.model_args[1]
    with jax.enable_x64(bool(fit.config.get("x64", True))):
        draws = Predictive(model, num_samples=k)(jax.random.key(seed + 1), arms, X, None)
        draws = {kk: np.asarray(v)[None] for kk, v in draws.items()}
    vals = _posterior_vars(draws, others) if static.get("group_bias", True) else {
        kk: v for kk, v in _posterior_vars(draws, others).items() if kk != "psi"}
    return vals, draws["y"]


def _generic_tree(fit: Any, stats: dict[str, np.ndarray], prior_draws: int, seed: int, attrs: Any):
    import arviz_base
    import xarray as xr
    from numpyro.infer import Predictive

    bind_numpyro_submodules()  # arviz_base.from_numpyro reads numpyro.infer.initialization (see there)

    with jax.enable_x64(bool(fit.config.get("x64", True))):
        prior = Predictive(fit.model, num_samples=prior_draws)(jax.random.key(seed + 1), *fit.model_args,
                                                               **fit.model_kwargs)
        prior = {k: np.asarray(v) for k, v in prior.items() if k in fit.samples}
        tree = arviz_base.from_numpyro(fit.mcmc, prior=prior, log_likelihood=True)
    ss = tree["sample_stats"].dataset
    extra = {k: (("chain", "draw"), v) for k, v in stats.items() if k not in ss}
    tree["sample_stats"] = xr.DataTree(ss.assign(extra))
    tree.attrs.update({"converged": int(fit.convergence.converged), "convergence": fit.convergence.message})
    tree.attrs.update(dict(attrs or {}))
    return tree
