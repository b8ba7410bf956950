"""A hierarchical GLM for group bias on real data: a level shift with its own prior, an age-bucket
effect shared across groups, and likelihoods for binary, bounded-count, ordinal and continuous
outcomes.

In brms/bambi notation the model is ``y ~ group + bucket + x + x:group + (1 + group | bucket)``:
for row n in group g (0..m-1, ``reference`` has no bias terms) and bucket b with features x
(z-scored, no intercept column),

    eta_n = alpha + delta_g + gamma_b + u_{b,g} + x . (beta + lambda_g)

- ``delta [m-1]``: the **level shift** of each non-reference group (the bias a user asks about),
  prior N(0, ``shift_sd``^2), its own scale, *not* shrunk together with the slope differences;
- ``gamma [B]``: bucket effects shared by every group (the pairing of the groups' arms in the
  same bucket), zero-sum normal with scale sigma_bucket ~ HalfNormal(``bucket_sd``);
- ``u [B, m-1]``: the group-by-bucket deviation of the shift (the ``group | bucket`` slope),
  zero-sum normal over the buckets with scale sigma_u ~ HalfNormal(``u_sd``);
- ``beta [d]``: common slopes, shrunk with per-coefficient sd ``slope_total_sd`` / sqrt(d): the
  prior sd of the features' part of eta is ``slope_total_sd`` whatever d, so 30 features do not
  put the prior predictive probabilities at 0 or 1. With ``feature_shift`` (Gamma ``[d, m-1]``,
  the least-squares regression of the group indicators on the bucket indicators and x, which
  :func:`bayesfair.inference.glm_fit.build_glm` computes when ``priors.ric_correction``) the
  shrinkage is put on ``beta_total = beta + Gamma delta`` (site ``beta_total``; ``beta`` is then
  deterministic): eta's group part becomes delta (1[g] - x . Gamma) + x . beta_total, whose two
  columns are uncorrelated, so shrinking the slopes does not move delta. With the shrinkage on
  ``beta`` itself (``feature_shift=None``), features correlated with the group lose their effect
  to delta: *regularisation-induced confounding* (Hahn, Carvalho, Puelz & He 2018, Bayesian
  Analysis 13(1), Sections 2-3, whose reparametrisation this is; exact for a Gaussian likelihood,
  a first-order correction on the logit scale);
- ``lambda [m-1, d]``: slope differences, N(0, s_slope^2), s_slope ~ HalfNormal(per-coefficient
  slope sd): shrunk together, separately from delta.

**Zero-sum bucket effects.** gamma and each column of u sum to zero over the buckets: their
distribution is that of B iid N(0, scale^2) draws minus their mean (NumPyro's and PyMC's
``ZeroSumNormal``; each element has variance scale^2 (1 - 1/B)), sampled as B - 1 iid
N(0, scale^2) coordinates ``gamma_coords [B-1]``, ``u_coords [B-1, m-1]`` mapped onto the
zero-sum subspace by NumPyro's orthonormal ``ZeroSumTransform`` (:func:`zero_sum_basis`). With
iid effects their mean over the B buckets is a second intercept: alpha + mean(gamma) and
delta + mean(u) are what the rows determine, and alone alpha and delta are known only to
sd ~ scale / sqrt(B), a funnel with the scale that NUTS diverges in with few buckets
(docs/mcmc.md, "Bucket effects sum to zero"). The zero-sum model is the iid one with the
buckets' mean moved into alpha and delta: delta is the level shift averaged over the buckets
with prior N(0, ``shift_sd``^2) (the iid model's average shift has N(0, ``shift_sd``^2 +
sigma_u^2 / B)); the linear predictor and the bias estimand are unchanged.

Every random effect is non-centred (z-scores times their scale, site ``<name>_z``; for gamma and
u, of their coordinates) unless ``centered`` gives it centring weights (for gamma and u, per
coordinate: shapes ``[B-1]`` and ``[B-1, m-1]``). A name in a tuple is weight 1: the effect is
sampled as it is (site ``lambda``; ``gamma_coords``, ``u_coords``). A mapping ``{name: w}`` with
w in [0, 1] (a number, or an array of the effect's shape) samples the partially non-centred
coordinate of Papaspiliopoulos, Roberts & Skold (2007), the form of NumPyro's
``LocScaleReparam(centered=w)`` (site ``<name>_partial``):

    v ~ N(0, scale^(2 w)),   effect = scale^(1 - w) v      (w = 0: non-centred, w = 1: centred)

The forms are one model; which one NUTS samples well depends on how much the data say about each
element of each effect (:func:`bayesfair.inference.glm_fit.choose_form` measures it;
docs/mcmc.md). The deterministic site ``<name>`` holds the effect in every form (and
``gamma_coords``, ``u_coords`` the coordinates). On the logit scale (Bernoulli, binomial,
beta-binomial, ordered logistic) the scales are in log-odds; for the continuous likelihoods
every location scale is multiplied by ``y_scale`` (the outcome's sd) and alpha is
centred at ``y_loc``. The paper's model (Section 3.1, Eq. 2: exchangeable arms, one s for every
coordinate of psi) stays available as :func:`bayesfair.posteriors.group_bias.group_bias_model`.

Likelihoods (``likelihood``; the observed site is ``y``, so ArviZ's pointwise log-likelihood and
NumPyro's ``Predictive`` draws come from it):

- ``"bernoulli"``: y in {0, 1}, P(y = 1) = sigmoid(eta);
- ``"binomial"``: y in 0..n_trials, Binomial(n_trials, sigmoid(eta));
- ``"beta_binomial"``: over-dispersed bounded counts, BetaBinomial(n_trials, p phi, (1 - p) phi),
  p = sigmoid(eta), phi ~ Gamma(2, 0.1);
- ``"ordered_logistic"``: ordinal y in 0..n_levels-1, cumulative logit with cutpoints (no alpha):
  their centre ~ N(0, 1.5^2) and gaps c_k - c_{k-1} ~ LogNormal(log g, 0.5^2), g the gap of the
  cutpoints that give every level the same share (logit(j / K), so the prior predictive spreads
  over the levels instead of piling at the lowest);
- ``"gaussian"``: N(eta, sigma^2), sigma ~ HalfNormal(y_scale);
- ``"student_t"``: StudentT(nu, eta, sigma), nu ~ Gamma(2, 0.1) (Juarez and Steel 2010);
- ``"skew_t"``: eta + sigma T with T Jones-Faddy skew-t (:mod:`bayesfair.posteriors.skew_t`) of
  tail weight nu ~ Gamma(2, 0.1) and skew weight ``skew`` = a / (a + b) ~ Beta(2, 2) (1/2:
  Student's t; above: a heavier, longer right tail). E[y] = eta + sigma E[T], the same shift for
  every row, so differences of E[y] are differences of eta.

``group_bias=False`` drops delta, u and lambda (the model without group bias, for LOO).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.distributions.transforms import ZeroSumTransform

from bayesfair.posteriors.skew_t import JonesFaddySkewT

__all__ = ["GLM_LIKELIHOODS", "CONTINUOUS_LIKELIHOODS", "GlmPriors", "DEFAULT_GLM_PRIORS", "group_glm_model",
           "check_glm_likelihood", "expected_outcome", "row_information", "zero_sum_basis"]

GLM_LIKELIHOODS = ("bernoulli", "binomial", "beta_binomial", "ordered_logistic", "gaussian", "student_t", "skew_t")
#: The likelihoods of a continuous outcome (their scales are multiplied by the outcome's sd).
CONTINUOUS_LIKELIHOODS = ("gaussian", "student_t", "skew_t")


class GlmPriors(NamedTuple):
    """Scales of :func:`group_glm_model`'s priors (logit scale; times ``y_scale`` for continuous y)
    and whether the slopes' prior is corrected for confounding (``ric_correction``)."""

    intercept_sd: float = 1.5
    shift_sd: float = 1.0
    bucket_sd: float = 1.0
    u_sd: float = 0.5
    slope_total_sd: float = 1.0
    #: Shrink ``beta + Gamma delta`` instead of ``beta`` (module docstring): the level shift is not
    #: confounded by the slopes' shrinkage. False: the independent prior on ``beta``.
    ric_correction: bool = True


DEFAULT_GLM_PRIORS = GlmPriors()


def check_glm_likelihood(likelihood: str, y: Any, *, n_trials: int = 9, n_levels: int | None = None) -> None:
    """Raise ``ValueError`` naming the problem if ``y`` is not a valid outcome of ``likelihood``."""
    if likelihood not in GLM_LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {GLM_LIKELIHOODS}, got {likelihood!r}")
    y = np.asarray(y, np.float64)
    if not np.all(np.isfinite(y)):
        raise ValueError("y must be finite")
    if likelihood in CONTINUOUS_LIKELIHOODS:
        return
    if not np.all(y == np.round(y)):
        raise ValueError(f"likelihood {likelihood!r} needs integer outcomes, got non-integer y")
    top = {"bernoulli": 1, "binomial": n_trials, "beta_binomial": n_trials,
           "ordered_logistic": (n_levels or 0) - 1}[likelihood]
    if likelihood == "ordered_logistic" and (n_levels is None or n_levels < 3):
        raise ValueError(f"ordered_logistic needs n_levels >= 3, got {n_levels}")
    if y.min() < 0 or y.max() > top:
        raise ValueError(f"likelihood {likelihood!r} needs y in [0, {top}], got [{y.min():g}, {y.max():g}]")


def _obs_dist(likelihood: str, eta: Any, extra: dict[str, Any], n_trials: int):
    if likelihood == "bernoulli":
        return dist.BernoulliLogits(eta)
    if likelihood == "binomial":
        return dist.BinomialLogits(eta, total_count=n_trials)
    if likelihood == "beta_binomial":
        p = jnp.clip(jnp.asarray(1.0) / (1.0 + jnp.exp(-eta)), 1e-12, 1 - 1e-12)
        phi = extra["phi"]
        return dist.BetaBinomial(p * phi, (1 - p) * phi, total_count=n_trials)
    if likelihood == "ordered_logistic":
        return dist.OrderedLogistic(eta, extra["cutpoints"])
    if likelihood == "gaussian":
        return dist.Normal(eta, extra["sigma"])
    if likelihood == "student_t":
        return dist.StudentT(extra["nu"], eta, extra["sigma"])
    return JonesFaddySkewT(extra["nu"], extra["skew"], eta, extra["sigma"])


def _centring(centered: Any) -> dict[str, Any]:
    """``centered`` (a tuple of effect names, or a mapping name -> weights) as name -> weights."""
    if isinstance(centered, dict):
        return dict(centered)
    return {name: 1.0 for name in centered}


def zero_sum_basis(n: int) -> np.ndarray:
    """Q ``[n-1, n]``: orthonormal rows that each sum to 0, the linear map of NumPyro's
    ``ZeroSumTransform`` (coordinates c ``[n-1]`` -> the zero-sum vector c @ Q), in float64."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if n == 1:
        return np.zeros((0, 1))
    with jax.enable_x64(True):
        return np.asarray(ZeroSumTransform(1)(jnp.eye(n - 1, dtype=jnp.float64)))


def _effect(name: str, scale: Any, shape: list[int], weight: Any, *, coords: bool = False):
    """N(0, scale^2) effects of ``shape``, sampled in the form of the centring ``weight`` (module
    docstring; ``None``: non-centred). ``coords``: they are the coordinates of a zero-sum effect
    (the centred site and the deterministic one are ``<name>_coords``)."""
    site = f"{name}_coords" if coords else name
    w = None if weight is None else np.broadcast_to(np.asarray(weight, np.float64), shape)
    n = len(shape)
    if w is None or not w.any():
        z = numpyro.sample(f"{name}_z", dist.Normal(0, 1).expand(shape).to_event(n))
        return numpyro.deterministic(site, scale * z)
    if (w == 1).all():
        return numpyro.sample(site, dist.Normal(0, scale).expand(shape).to_event(n))
    v = numpyro.sample(f"{name}_partial", dist.Normal(0, scale ** w).to_event(n))
    return numpyro.deterministic(site, scale ** (1.0 - w) * v)


def _zero_sum_effect(name: str, scale: Any, n_buckets: int, cols: list[int], weight: Any):
    """Effects ``[B, *cols]`` that sum to zero over the buckets (axis 0): ``B - 1`` coordinates per
    column in the form of ``weight`` (shape ``[B-1, *cols]``), mapped by ``ZeroSumTransform``."""
    if n_buckets == 1:  # one bucket: the effect is 0 (the intercept and the shift hold its level)
        return numpyro.deterministic(name, jnp.zeros([1, *cols]))
    c = _effect(name, scale, [n_buckets - 1, *cols], weight, coords=True)
    zs = jnp.moveaxis(ZeroSumTransform(1)(jnp.moveaxis(c, 0, -1)), -1, 0)
    return numpyro.deterministic(name, zs)


def group_glm_model(group: Any, bucket: Any, X: Any, y: Any = None, weights: Any = None, *, n_groups: int,
                    n_buckets: int,
                    reference: int = 0, likelihood: str = "bernoulli", n_trials: int = 9,
                    n_levels: int | None = None, group_bias: bool = True, priors: GlmPriors = DEFAULT_GLM_PRIORS,
                    y_loc: float = 0.0, y_scale: float = 1.0, centered: Any = (), feature_shift: Any = None) -> None:
    """NumPyro model of the module docstring. ``group``, ``bucket`` int ``[N]``; ``X [N, d]``, an
    array or a :class:`~bayesfair.posteriors.indicators.IndicatorMatrix` (the same product).

    ``weights [N]`` (optional, > 0): row n stands for ``weights[n]`` identical observations (same
    group, bucket, x and y), its log-likelihood counted that many times; the posterior is that of
    the expanded data exactly (:func:`bayesfair.inference.glm_fit.compress_design` builds them).
    ``feature_shift``: Gamma ``[d, m-1]`` (nested sequences or an array) of the module docstring,
    or None (the independent prior on ``beta``); ignored without group bias.
    """
    d = X.shape[1]
    weight = _centring(centered)
    others = [g for g in range(n_groups) if g != reference]
    slot = np.full(n_groups, -1, np.int64)
    slot[others] = np.arange(len(others))
    cont = likelihood in CONTINUOUS_LIKELIHOODS
    sc = y_scale if cont else 1.0
    slope_sd = priors.slope_total_sd / np.sqrt(max(d, 1))
    eta = jnp.zeros(X.shape[0])
    if likelihood != "ordered_logistic":
        alpha = numpyro.sample("alpha", dist.Normal(y_loc if cont else 0.0, priors.intercept_sd * sc))
        eta = eta + alpha
    sigma_bucket = numpyro.sample("sigma_bucket", dist.HalfNormal(priors.bucket_sd * sc))
    gamma = _zero_sum_effect("gamma", sigma_bucket, n_buckets, [], weight.get("gamma"))
    k = len(others)
    biased = group_bias and k > 0
    delta = None
    if biased:
        delta = numpyro.sample("delta", dist.Normal(0, priors.shift_sd * sc).expand([k]).to_event(1))
    slopes = dist.Normal(0, slope_sd * sc).expand([d]).to_event(1)
    if biased and feature_shift is not None:
        shift = jnp.asarray(np.asarray(feature_shift, np.float64).reshape(d, k), dtype=X.dtype)
        beta = numpyro.deterministic("beta", numpyro.sample("beta_total", slopes) - shift @ delta)
    else:
        beta = numpyro.sample("beta", slopes)
    # Bucket and group effects as one-hot products, not gathers (the gradient of a gather is a
    # scatter-add over the rows, slow on CPU) and one pass over X for beta and lambda: on all
    # rows, 1.3-2x faster gradients (docs/mcmc.md)
    onehot_b = jax.nn.one_hot(bucket, n_buckets, dtype=X.dtype)
    eta = eta + onehot_b @ gamma
    if not biased:
        eta = eta + X @ beta
    else:
        sigma_u = numpyro.sample("sigma_u", dist.HalfNormal(priors.u_sd * sc))
        u = _zero_sum_effect("u", sigma_u, n_buckets, [k], weight.get("u"))
        s_slope = numpyro.sample("s_slope", dist.HalfNormal(slope_sd * sc))
        lam = _effect("lambda", s_slope, [k, d], weight.get("lambda"))
        onehot_g = jax.nn.one_hot(jnp.asarray(slot)[group], k, dtype=X.dtype)  # the reference's rows: all 0
        xw = X @ jnp.concatenate([beta[:, None], lam.T], axis=1)  # one pass over X for beta and lambda
        eta = eta + xw[:, 0] + onehot_g @ delta + jnp.sum(onehot_g * (onehot_b @ u + xw[:, 1:]), axis=-1)
    extra: dict[str, Any] = {}
    if likelihood == "beta_binomial":
        extra["phi"] = numpyro.sample("phi", dist.Gamma(2.0, 0.1))
    elif likelihood == "ordered_logistic":
        k = int(n_levels)
        gap = 2.0 * np.log(k - 1.0) / (k - 2)  # equal level shares have cutpoints logit(j / k), spread 2 logit(1 - 1/k)
        mid = numpyro.sample("cut_mid", dist.Normal(0, 1.5))
        gaps = numpyro.sample("cut_gaps", dist.LogNormal(np.log(gap), 0.5).expand([k - 2]).to_event(1))
        raw = jnp.concatenate([jnp.zeros(1), jnp.cumsum(gaps)])
        extra["cutpoints"] = numpyro.deterministic("cutpoints", mid + raw - raw.mean())
    elif cont:
        extra["sigma"] = numpyro.sample("sigma", dist.HalfNormal(y_scale))
        if likelihood in ("student_t", "skew_t"):
            extra["nu"] = numpyro.sample("nu", dist.Gamma(2.0, 0.1))
        if likelihood == "skew_t":
            extra["skew"] = numpyro.sample("skew", dist.Beta(2.0, 2.0))
    if y is not None and likelihood == "ordered_logistic":  # categorical log-probs index by the level
        y = jnp.asarray(y).astype(jnp.int32)
    obs = _obs_dist(likelihood, eta, extra, n_trials)
    if weights is None:
        numpyro.sample("y", obs, obs=y)
    else:
        with numpyro.handlers.scale(scale=weights):
            numpyro.sample("y", obs, obs=y)


def expected_outcome(likelihood: str, eta: np.ndarray, *, n_trials: int = 9, cutpoints: np.ndarray | None = None
                     ) -> np.ndarray:
    """E[y | eta] on the outcome's scale: P(y = 1), n_trials p, the expected ordinal level
    sum_k k P(y = k), or eta itself (the Gaussian's and Student-t's mean, e.g. the expected log
    income; the skew-t's location, whose differences between rows are those of the mean).

    ``eta [..., N]``; ``cutpoints [..., K-1]`` (ordered logistic) broadcast against ``eta[..., :1]``.
    """
    eta = np.asarray(eta, np.float64)
    if likelihood in CONTINUOUS_LIKELIHOODS:
        return eta
    if likelihood == "ordered_logistic":
        c = np.asarray(cutpoints, np.float64)[..., None, :]
        above = 1.0 / (1.0 + np.exp(-(eta[..., None] - c)))  # P(y > k) for k = 0..K-2
        return above.sum(-1)
    p = 1.0 / (1.0 + np.exp(-eta))
    return p if likelihood == "bernoulli" else n_trials * p


def row_information(likelihood: str, eta: Any, y: Any, *, n_trials: int = 9, **extra: Any) -> np.ndarray:
    """-d^2/d eta^2 log p(y_n | eta_n): the observed information of each row about its linear
    predictor, ``[D, N]`` for ``eta [D, N]`` (D posterior draws; ``y [N]``). ``extra``: the
    likelihood's other parameters as :func:`group_glm_model` names them (``phi``, ``sigma``,
    ``nu``, ``skew`` ``[D]``; ``cutpoints [D, K-1]``)."""
    def logp(e, yy, ex):
        return _obs_dist(likelihood, e, ex, n_trials).log_prob(yy)

    per_row = jax.vmap(jax.grad(jax.grad(logp)), in_axes=(0, 0, None))  # rows of one draw
    with jax.enable_x64(True):
        y = jnp.asarray(y).astype(jnp.int32) if likelihood == "ordered_logistic" else jnp.asarray(y, jnp.float64)
        h = jax.vmap(per_row, in_axes=(0, None, 0))(jnp.asarray(eta, jnp.float64), y,
                                                    {k: jnp.asarray(v, jnp.float64) for k, v in extra.items()})
    return -np.asarray(h)
