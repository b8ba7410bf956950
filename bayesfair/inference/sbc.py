"""Simulation-based calibration (SBC, Talts et al. 2018) of a posterior approximation.

Draw theta from the prior, simulate data, fit, and rank every scalar's true value among the L
posterior draws: for exact posteriors the ranks are uniform on {0, ..., L} (too narrow posteriors
give U-shaped rank histograms, too wide ones humps, biased ones skew). :func:`sbc` takes the
model as ``prior_draw(key) -> theta``, ``simulate(key, theta) -> data`` and ``fit(data, key) ->
draws`` (a dict of ``[L, ...]`` arrays; only the entries ``fit`` returns are ranked) and returns
an :class:`SBCResult`: ranks, a chi-square test of binned ranks and a test of the largest
standardized ECDF deviation (null simulated) per parameter, interval coverage with its standard
error, a summary and an ECDF-difference plot with simultaneous bands (Saeilynoja et al. 2022,
by simulation). ``passed`` is False when a p-value is below ``alpha / (2 P)`` (Bonferroni over
P parameters and two tests): a correct fitter fails with probability at most ``alpha``.
:func:`conjugate_problem` and :func:`group_bias_problem` build the three functions for the
families of :mod:`bayesfair.posteriors`: prior and data from the family's NumPyro reference
model (the specification), the fit from its conjugate path or any ``fit(data, key)`` (e.g. NUTS).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from bayesfair.core._compile import enable_persistent_cache
from bayesfair.core._validate import float_in, positive_int
from bayesfair.posteriors.base import Outcome, Posterior, fit_outcomes
from bayesfair.posteriors.group_bias import GroupBiasPosterior, fit_group_bias, group_bias_model
from bayesfair.posteriors.linear import LinearPosterior

__all__ = ["SBCResult", "SBCProblem", "sbc", "conjugate_problem", "group_bias_problem"]

_GRID = 100  # ECDF evaluation points at most (test and plot)
_MAX_SIMS = 200_000  # null simulations of the ECDF statistic


class SBCProblem(NamedTuple):
    """A model for :func:`sbc`: ``prior_draw(key)``, ``simulate(key, theta)``, ``fit(data, key)``."""

    prior_draw: Callable[[jax.Array], Any]
    simulate: Callable[[jax.Array, Any], Any]
    fit: Callable[[Any, jax.Array], Any]


@dataclass(frozen=True)
class SBCResult:
    """Outcome of :func:`sbc`.

    ``names`` of the P scalar parameters (e.g. ``"mu[2]"``); ``ranks [N, P]`` of the true values
    among the ``n_draws`` = L (thinned) draws; p-values ``chi2_p`` (``bins`` equiprobable bins) and
    ``ecdf_p`` (largest standardized ECDF deviation, ``sims`` null simulations) ``[P]``;
    ``coverage`` and ``coverage_se`` ``[P]`` of the central ``level`` interval between order
    statistics of the draws, ``coverage_all`` / ``coverage_all_se`` over all parameters (s.e. of
    the mean over replications); ``alpha`` the family-wise false-failure rate of ``passed``;
    ``band`` the 95% simultaneous band's half-width in units of sqrt(z (1 - z) / N).
    """

    names: tuple[str, ...]
    ranks: np.ndarray
    n_draws: int
    chi2_p: np.ndarray
    ecdf_p: np.ndarray
    coverage: np.ndarray
    coverage_se: np.ndarray
    coverage_all: float
    coverage_all_se: float
    level: float
    alpha: float
    bins: int
    sims: int
    band: float

    @property
    def replications(self) -> int:  # N
        return int(self.ranks.shape[0])

    @property
    def threshold(self) -> float:
        """Per-test significance: ``alpha / (2 P)`` (Bonferroni)."""
        return self.alpha / (2 * max(len(self.names), 1))

    @property
    def failing(self) -> tuple[str, ...]:
        """Parameters with a p-value below :attr:`threshold`."""
        bad = np.minimum(self.chi2_p, self.ecdf_p) < self.threshold
        return tuple(n for n, b in zip(self.names, bad, strict=True) if b)

    @property
    def passed(self) -> bool:  # no parameter failing
        return not self.failing

    def summary(self) -> str:
        """A table: per parameter the two p-values and the coverage, then the verdict."""
        pct = f"{100 * self.level:g}%"
        lines = [f"SBC: {self.replications} replications, {self.n_draws} draws each, {len(self.names)} parameters; "
                 f"fails if a p-value < {self.threshold:.2g} (family-wise alpha {self.alpha:g})",
                 f"{'parameter':<16}{'chi2 p':>10}{'ECDF p':>10}{pct + ' cover':>12}{'s.e.':>8}"]
        for i, name in enumerate(self.names):
            lines.append(f"{name:<16}{self.chi2_p[i]:>10.3g}{self.ecdf_p[i]:>10.3g}{self.coverage[i]:>12.3f}"
                         f"{self.coverage_se[i]:>8.3f}")
        lines.append(f"{'all':<36}{self.coverage_all:>12.3f}{self.coverage_all_se:>8.3f}")
        lines.append("PASSED" if self.passed else f"FAILED: {', '.join(self.failing)}")
        return "\n".join(lines)

    def plot(self, path: Any = None, *, max_params: int = 12, names: Any = None):
        """ECDF of the fractional ranks minus the uniform CDF, per parameter, with the 95%
        simultaneous band; saved to ``path`` when given. Returns the matplotlib figure.

        ``names``: the parameters to show (default: the failing ones first, then in order), at most
        ``max_params``; a name that is not a parameter raises ``ValueError``."""
        import matplotlib.pyplot as plt

        z, f = _ecdf(self.ranks, self.n_draws)
        half = self.band * np.sqrt(z * (1 - z) / self.replications)
        if names is None:
            order = [i for i, nm in enumerate(self.names) if nm in self.failing]
            order += [i for i in range(len(self.names)) if i not in order]
        else:
            unknown = [nm for nm in names if nm not in self.names]
            if unknown:
                raise ValueError(f"names: {unknown} are not parameters of this SBC (have e.g. {list(self.names[:5])})")
            order = [self.names.index(nm) for nm in names]
        show = order[:max_params]
        cols = min(4, len(show))
        rows = math.ceil(len(show) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False, sharey=True)
        for ax in axes.flat[len(show):]:
            ax.set_visible(False)
        for ax, i in zip(axes.flat, show, strict=False):  # failing parameters in red
            ax.fill_between(z, -half, half, color="0.85", label="95% simultaneous band")
            ax.axhline(0.0, color="0.5", lw=0.8)
            ax.plot(z, f[:, i] - z, color="C3" if self.names[i] in self.failing else "C0", lw=1.4)
            ax.set_title(f"{self.names[i]}  (chi2 p={self.chi2_p[i]:.2g})", fontsize=9)
            ax.set_xlabel("fractional rank")
        axes[0, 0].set_ylabel("ECDF - uniform")
        axes[0, 0].legend(fontsize=7, loc="lower left")
        more = f" ({len(show)} of {len(self.names)} parameters)" if len(show) < len(self.names) else ""
        fig.suptitle(f"SBC, {self.replications} replications x {self.n_draws} draws: "
                     f"{'passed' if self.passed else 'FAILED'}{more}", fontsize=10)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
        return fig


def _flatten(tree: Any, lead: int) -> tuple[list[str], np.ndarray]:
    """Names and values ``[*batch, P]`` of every scalar of ``tree`` (leaves ``[*batch, ...]``, ``lead`` batch axes)."""
    names, cols = [], []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        base = jax.tree_util.keystr(path, simple=True, separator=".")
        arr = np.asarray(leaf, np.float64)
        shape = arr.shape[lead:]
        cols.append(arr.reshape(*arr.shape[:lead], -1))
        for idx in np.ndindex(*shape):
            names.append(base + (f"[{','.join(map(str, idx))}]" if idx else ""))
    return names, np.concatenate(cols, axis=-1)


def _grid(n_draws: int) -> tuple[np.ndarray, np.ndarray]:
    """Ranks j (at most ``_GRID``) where the ECDF is evaluated, and z_j = j / (L + 1) = P(rank < j)."""
    js = np.unique(np.linspace(1, n_draws, min(n_draws, _GRID)).round().astype(int))
    return js, js / (n_draws + 1)


def _ecdf(ranks: np.ndarray, n_draws: int) -> tuple[np.ndarray, np.ndarray]:
    """The evaluation points z_j and the ECDF ``[J, P]`` of the ranks there."""
    js, z = _grid(n_draws)
    return z, (ranks[None, :, :] < js[:, None, None]).mean(axis=1)


@functools.lru_cache(maxsize=8)
def _null_stats(n_rep: int, n_draws: int, sims: int) -> np.ndarray:
    """Sorted null draws of max_j |F(z_j) - z_j| / sqrt(z_j (1 - z_j) / N) for uniform ranks."""
    rng = np.random.default_rng(20221)  # fixed: the null distribution is a constant of (N, L)
    js, z = _grid(n_draws)
    sd = np.sqrt(z * (1 - z) / n_rep)
    out = np.empty(sims)
    for start in range(0, sims, 20_000):
        m = min(20_000, sims - start)
        counts = rng.multinomial(n_rep, np.full(n_draws + 1, 1.0 / (n_draws + 1)), size=m)
        cdf = np.cumsum(counts, axis=1)[:, js - 1] / n_rep
        out[start:start + m] = np.max(np.abs(cdf - z) / sd, axis=1)
    return np.sort(out)


def _bins(n_values: int, n_rep: int) -> int:
    """Most equiprobable bins (dividing the L + 1 rank values, at most 20) with >= 5 expected per bin."""
    return max(b for b in range(1, min(20, n_values) + 1) if n_values % b == 0 and (b == 1 or n_rep / b >= 5))


def sbc(prior_draw: Callable[[jax.Array], Any], simulate: Callable[[jax.Array, Any], Any],
        fit: Callable[[Any, jax.Array], Any], key: jax.Array, *, replications: int = 200, thin: int = 1,
        level: float = 0.9, alpha: float = 1e-3, vectorize: bool = True) -> SBCResult:
    """Simulation-based calibration of ``fit`` against the model ``(prior_draw, simulate)``.

    Parameters
    ----------
    prior_draw, simulate, fit : callable
        The model and the fitter (module docstring); an :class:`SBCProblem` unpacks into them.
    key : jax.Array
        Replication r uses ``split(fold_in(key, r), 3)`` for the prior, the data and the fit.
    replications : int
        N >= 2 prior draws.
    thin : int
        Keep every ``thin``-th posterior draw (>= 1), for autocorrelated (MCMC) draws.
    level, alpha : float
        Interval level for the coverage; family-wise probability that a correct fitter is
        reported as failing; both in (0, 1).
    vectorize : bool
        True: all replications in one ``jit(vmap(...))``; False: a Python loop (fitters that
        are not traceable, e.g. ``numpyro.infer.MCMC``).

    Returns
    -------
    SBCResult
        Scalars whose true value is the same in every replication (e.g. the reference group's
        bias, 0) are left out.
    """
    n = positive_int("replications", replications, minimum=2)
    thin = positive_int("thin", thin)
    level = float_in("level", level, 0.0, 1.0, low_open=True, high_open=True)
    alpha = float_in("alpha", alpha, 0.0, 1.0, low_open=True, high_open=True)
    for name, fn in (("prior_draw", prior_draw), ("simulate", simulate), ("fit", fit)):
        if not callable(fn):
            raise TypeError(f"{name} must be callable, got {fn!r}")

    def one(k):
        k_prior, k_data, k_fit = jax.random.split(k, 3)
        theta = prior_draw(k_prior)
        draws = fit(simulate(k_data, theta), k_fit)
        if not isinstance(draws, dict) or not isinstance(theta, dict):
            return theta, draws
        missing = sorted(set(draws) - set(theta))
        if missing:
            raise ValueError(f"fit returned draws of {missing}, which prior_draw does not give (it gives "
                             f"{sorted(theta)})")
        return {k: theta[k] for k in draws}, draws

    enable_persistent_cache()  # before anything compiles, as in simulate and fit (bayesfair.core._compile)
    keys = jax.vmap(lambda r: jax.random.fold_in(key, r))(jnp.arange(n))
    if vectorize:
        theta, draws = jax.jit(jax.vmap(one))(keys)
    else:
        outs = [one(keys[r]) for r in range(n)]
        theta, draws = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *outs)
    names, truth = _flatten(theta, 1)  # [N, P]
    dnames, flat = _flatten(draws, 2)  # [N, L, P]
    if dnames != names:
        raise ValueError(f"fit's draws must have the structure of the true parameters: got {dnames[:5]}..., "
                         f"expected {names[:5]}...")
    flat = flat[:, ::thin]
    for what, arr in (("prior_draw's true values", truth), ("fit's draws", flat)):
        bad = ~np.isfinite(arr.reshape(n, -1)).all(axis=1)
        if bad.any():  # a NaN compares False both ways: it would get rank 0 without a word
            reps = np.flatnonzero(bad)
            cols = np.flatnonzero(~np.isfinite(arr[reps[0]].reshape(-1, len(names))).all(axis=0))
            raise ValueError(f"{what} are not finite (NaN or inf) in {reps.size} of {n} replications (first: "
                             f"{reps[:5].tolist()}), e.g. for {[names[c] for c in cols[:5]]}: a rank of a "
                             "non-finite value means nothing; fix the fitter (or the prior draw) first")
    keep = np.ptp(truth, axis=0) > 0
    names = [nm for nm, k in zip(names, keep, strict=True) if k]
    truth, flat = truth[:, keep], flat[:, :, keep]
    if not names:
        raise ValueError("every parameter has the same true value in every replication: nothing to calibrate")
    L = flat.shape[1]
    below = np.sum(flat < truth[:, None, :], axis=1)
    ties = np.sum(flat == truth[:, None, :], axis=1)
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())
    ranks = below + np.floor(rng.uniform(size=ties.shape) * (ties + 1)).astype(int)  # ties broken at random

    bins = _bins(L + 1, n)
    if bins > 1:
        counts = np.stack([np.bincount(ranks[:, p] * bins // (L + 1), minlength=bins) for p in range(len(names))])
        chi2_p = stats.chisquare(counts, axis=1).pvalue
    else:
        chi2_p = np.ones(len(names))
    per_test = alpha / (2 * len(names))
    sims = int(min(_MAX_SIMS, max(2_000, math.ceil(2 / per_test))))  # so that p can fall below per_test
    null = _null_stats(n, L, sims)
    z, f = _ecdf(ranks, L)
    obs = np.max(np.abs(f - z[:, None]) / np.sqrt(z * (1 - z) / n)[:, None], axis=0)
    ecdf_p = (1 + sims - np.searchsorted(null, obs, side="left")) / (sims + 1)
    # the central interval between order statistics of the draws: covered iff the rank's mid-point
    # (r + 1/2) / (L + 1) is within level / 2 of 1/2 (expected coverage exactly ``level`` when
    # level (L + 1) is an even integer; np.quantile's interpolated interval of 99 draws covers 0.882)
    covered = np.abs((ranks + 0.5) / (L + 1) - 0.5) <= level / 2 + 1e-12
    cov = covered.mean(axis=0)
    per_rep = covered.mean(axis=1)
    return SBCResult(
        names=tuple(names), ranks=ranks, n_draws=L, chi2_p=np.asarray(chi2_p, float), ecdf_p=ecdf_p,
        coverage=cov, coverage_se=np.sqrt(cov * (1 - cov) / n), coverage_all=float(per_rep.mean()),
        coverage_all_se=float(per_rep.std(ddof=1) / np.sqrt(n)), level=level, alpha=alpha, bins=bins,
        sims=sims, band=float(np.quantile(null, 0.95)))


def _trace(model: Callable, key: jax.Array, *args: Any, kinds: tuple[str, ...] = ("sample", "deterministic"),
           **kwargs: Any) -> dict[str, jax.Array]:
    """Values of the sample and deterministic sites (``kinds``) of one forward run of a NumPyro model."""
    from numpyro.handlers import seed, trace

    tr = trace(seed(model, key)).get_trace(*args, **kwargs)
    return {k: v["value"] for k, v in tr.items() if v["type"] in kinds}


def conjugate_problem(posterior: Any, size: int, n_obs: int, *, n_draws: int = 99, data_from: Any = None,
                      seed: int = 0) -> SBCProblem:
    """The SBC problem of a conjugate per-arm or linear family.

    The prior draw and the data come from the NumPyro reference model ``(data_from or
    posterior).model``: a per-arm family pulls arm ``i % size`` at observation i; a linear family
    sees a fixed design ``X [n_obs, size]`` of standard normal contexts (seeded by ``seed``). The
    fit is the conjugate path: ``n_draws`` draws of ``posterior.sample`` after ``n_obs`` updates.

    Parameters
    ----------
    posterior : Posterior or LinearPosterior
        E.g. ``beta_bernoulli()``, ``normal_inverse_gamma()``, ``linear_known_variance()``.
    size, n_obs, n_draws : int
        Arms (per-arm family) or features (linear family); observations per replication;
        posterior draws per replication (L); each >= 1.
    data_from : posterior, optional
        Another family of the same kind whose model generates prior and data (e.g. to check that
        a misstated prior fails).
    seed : int
        Seed of the linear design.
    """
    from numpyro.handlers import condition

    size = positive_int("size", size)
    n_obs = positive_int("n_obs", n_obs)
    n_draws = positive_int("n_draws", n_draws)
    source = posterior if data_from is None else data_from
    if isinstance(posterior, Posterior) and isinstance(source, Posterior):
        arms = jnp.arange(n_obs, dtype=jnp.int32) % size
        site, obs_site, args, kw = "mu", "r", (arms,), {"n_arms": size}

        def outcome(r):
            return Outcome(reward=r, arm=arms)
    elif isinstance(posterior, LinearPosterior) and isinstance(source, LinearPosterior):
        X = jnp.asarray(np.random.default_rng(seed).standard_normal((n_obs, size)), jnp.float32)
        site, obs_site, args, kw = "theta", "y", (X,), {}

        def outcome(y):
            return Outcome(reward=y, x=X)
    else:
        raise TypeError("conjugate_problem needs a per-arm Posterior or a LinearPosterior (and data_from of the "
                        f"same kind), got {type(posterior).__name__} and {type(source).__name__}")

    def prior_draw(key):
        return {site: _trace(source.model, key, *args, **kw)[site]}

    def simulate(key, theta):
        return _trace(condition(source.model, theta), key, *args, **kw)[obs_site].astype(jnp.float32)

    def fit(data, key):
        state = fit_outcomes(posterior, size, outcome(data))
        return {site: jax.vmap(lambda k: posterior.sample(k, state))(jax.random.split(key, n_draws))}

    return SBCProblem(prior_draw, simulate, fit)


def group_bias_problem(posterior: Any, n_obs: int, *, n_draws: int = 99, fit: Callable | None = None,
                       model_kwargs: dict[str, Any] | None = None, seed: int = 0) -> SBCProblem:
    """The SBC problem of the group-bias model (:mod:`bayesfair.posteriors.group_bias`).

    Prior and data come from :func:`~bayesfair.posteriors.group_bias.group_bias_model` with the
    layout and hyper-parameters of ``posterior`` (a :func:`group_bias_posterior`), overridden by
    ``model_kwargs`` (e.g. ``{"tau": None, "s": None, "sigma": None}`` to draw the scales from
    their priors, for a NUTS fit). The design: arm ``i % n`` at observation i, standard normal
    contexts (seeded by ``seed``); ``data = {"arms", "X", "y"}``. Ranked (those ``fit`` returns):
    ``beta_bar [d]``, ``beta [n, d]``, ``psi [m, d]`` (the reference row, always 0, is left out)
    and, when drawn, ``tau``, ``s``, ``sigma``. ``fit(data, key) -> draws`` (a dict of those
    names, leading draw axis) defaults to the conjugate path (``n_draws`` draws after ``n_obs``
    updates); e.g. a NUTS fit can be given instead (with ``sbc(..., vectorize=False)`` if it
    is not traceable).
    """
    from numpyro.handlers import condition

    if not isinstance(posterior, GroupBiasPosterior):
        raise TypeError(f"posterior must be a group_bias_posterior(...), got {type(posterior).__name__}")
    n_obs = positive_int("n_obs", n_obs)
    n_draws = positive_int("n_draws", n_draws)
    p = posterior.params
    layout = posterior.layout
    kw = {"group_of_arm": layout.group_of_arm, "reference": layout.reference, "tau": p["tau"], "s": p["s"],
          "sigma": p["sigma"], "prior_mean": np.asarray(p["prior_mean"]), "prior_sd": p["prior_sd"],
          **(model_kwargs or {})}
    n, d = layout.n_arms, layout.n_features
    arms = jnp.arange(n_obs, dtype=jnp.int32) % n
    X = jnp.asarray(np.random.default_rng(seed).standard_normal((n_obs, d)), jnp.float32)
    model = functools.partial(group_bias_model, **kw)
    scales = [k for k in ("tau", "s", "sigma") if kw[k] is None]

    def prior_draw(key):
        vals = _trace(model, key, arms, X)
        latent = {k: vals[k] for k in _trace(model, key, arms, X, kinds=("sample",)) if k != "y"}
        return {"beta_bar": vals["beta_bar"], "beta": vals["beta"], "psi": vals["psi_all"],
                **{k: vals[k] for k in scales}, "_latent": latent}

    def simulate(key, theta):
        return {"arms": arms, "X": X, "y": _trace(condition(model, theta["_latent"]), key, arms, X)["y"]}

    def conjugate_fit(data, key):
        state = fit_group_bias(posterior, data["arms"], data["X"], data["y"])
        draw = jax.vmap(lambda k: posterior.sample(k, state))(jax.random.split(key, n_draws))
        return {"beta_bar": draw.beta_bar, "beta": draw.beta, "psi": draw.psi}

    if fit is None and scales:
        raise ValueError(f"the conjugate path has fixed scales; with {scales} drawn from their priors give fit=...")
    return SBCProblem(prior_draw, simulate, conjugate_fit if fit is None else fit)
