"""Bayesian linear regression posteriors over theta in R^d, updated one observation at a time.

Two conjugate families for rewards y = x . theta + noise:

- known noise variance (:func:`linear_known_variance`): theta ~ N(m0, v0 I),
  y | x ~ N(x . theta, sigma^2). Posterior N(Lambda^-1 eta, Lambda^-1) with precision
  Lambda = I / v0 + sum x x' / sigma^2 and eta = m0 / v0 + sum x y / sigma^2. This is the model of
  the FairX-LinTS theorems (fairness_of_exposure_fairx_icml2021, Theorems 4.3.1/4.3.2: theta_i ~
  N(0, 1), N(0, 1) noise) and, with v0 = 1 / lambda and sigma^2 = 1, the ridge regression of
  FairX-LinUCB (Algorithm 3, lines 2, 5, 11-12: Sigma_1 = lambda I, mu_hat = Sigma^-1 b).
- Normal-Inverse-Gamma (:func:`linear_normal_inverse_gamma`): s2 ~ InvGamma(a0, b0),
  theta | s2 ~ N(m0, s2 / kappa0 I), y | x ~ N(x . theta, s2). Posterior theta | s2 ~
  N(Lambda^-1 eta, s2 Lambda^-1), s2 ~ InvGamma(a, b) with Lambda = kappa0 I + sum x x',
  eta = kappa0 m0 + sum x y, a = a0 + n / 2 and the recursive update
  b <- b + (y - x . m)^2 / (2 (1 + x' Lambda^-1 x)) (m, Lambda before the observation). The
  marginal of theta is multivariate Student-t with 2a degrees of freedom, location m and scale
  matrix (b / a) Lambda^-1.

State and numerics (float32 inside jit)
----------------------------------------
The state keeps the precision ``Lambda`` and ``eta`` as compensated sums (``precision`` plus the
running rounding error ``precision_err``; the same for ``eta``, Neumaier's variant of Kahan
summation), and the lower Cholesky factor ``chol`` of Lambda. An update adds the rank-one term
x x' to Lambda and x y to eta (O(d^2)); then, by default (``cholesky="refresh"``), the factor is
recomputed from the accumulated precision (one O(d^3 / 3) LAPACK call). Alternatively
(``cholesky="rank_one"``) the factor itself is updated by d rotations (O(d^2), sequential in d).

Why: Lambda is a sum of positive semi-definite terms that is never subtracted from, so in float32
it stays symmetric (x_i x_j == x_j x_i exactly) and positive definite (the prior term bounds it
below). A factor refreshed from it is the backward-stable factor of an accurately known matrix and
never drifts. Plain float32 sums, though, carry a rounding error that random-walks (relative
~sqrt(n) * 6e-8), while the posterior standard deviation shrinks like 1/sqrt(n): the error of the
mean Lambda^-1 eta *in posterior standard deviations* grows like n * 6e-8 * |theta| / sigma. With
plain sums it measured 0.09 sd after 1e5 updates of a low-noise problem (d = 8, anisotropic
contexts; ``tests/test_linear_posteriors.py``), and it would be several sd at 1e7. The
compensated sums keep Lambda and eta to about one float32 rounding (the same test: 2e-4 sd, and
Lambda^-1 to 1e-7 relative), at the price of two extra arrays and a few flops per entry.

A covariance kept by Sherman-Morrison subtracts at every step and loses symmetry and
definiteness in float32, so it is not offered; a closed-form O(d^2) factor update (the factor of
I + p p' times the old factor) measured 100x less accurate than rotations and is not used either.
The rotated factor (``rank_one``) accumulates its own rounding error like a plain sum (Lambda^-1
to 5e-5 relative after 1e5 updates), which barely matters for the covariance of a draw; the
*mean* is therefore refined by one step of iterative refinement against the compensated Lambda
(O(d^2)), which brings it to the accuracy of ``refresh`` (2e-4 sd in the same test). On this
project's 2-core machine, at d = 50, refreshing was faster inside the simulator (a prototype:
about 64 vs 93-113 us per round for 5 vmapped runs including the draw), so it is the default;
``rank_one`` is the O(d^2) choice for large d.

With the factor in the state, ``sample`` and ``mean`` cost two triangular solves (O(d^2)):
theta = L^-T (L^-1 eta + z) with z ~ N(0, I) (times sqrt(s2) for NIG), since
Lambda^-1 eta + L^-T z = L^-T (L^-1 eta + z). The NIG ``b`` uses the recursive form above, which
only adds non-negative terms, instead of b0 + (y'y + m0' Lambda0 m0 - m' Lambda m) / 2, which
cancels catastrophically in float32 when the noise is small; ``a`` is a0 + count / 2 from an
integer count (a float32 ``a += 1/2`` would stop being exact once a reaches 2^23).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.linalg import solve_triangular

from bayesfair.core import _random
from bayesfair.core._validate import finite_array
from bayesfair.core.declare import Positive, declare
from bayesfair.posteriors.base import ObservationModel, Outcome, fit_outcomes, init_size, normal_observation

__all__ = [
    "LinearPosterior",
    "LinearState",
    "LinearNIGState",
    "linear_known_variance",
    "linear_normal_inverse_gamma",
    "fit_linear",
    "chol_rank_one_update",
]

_CHOLESKY_MODES = ("refresh", "rank_one")


class LinearPosterior(NamedTuple):
    """A Bayesian linear-regression posterior family over theta ``[d]``.

    Attributes
    ----------
    name : str
        Family name.
    init : callable
        ``init(n_features or spec) -> state``: the prior.
    update : callable
        ``update(state, Outcome(y, x=x [d])) -> state``: one observation, a rank-one update.
    sample : callable
        ``sample(key, state) -> theta [d]``: one exact joint posterior draw.
    mean : callable
        ``mean(state) -> [d]``: posterior mean of theta.
    cov : callable
        ``cov(state) -> [d, d]``: posterior covariance of theta (``inf`` where it does not exist).
    variance : callable
        ``variance(state) -> [d]``: the diagonal of ``cov``.
    model : callable
        NumPyro model ``model(X [n, d], y=None)`` with the same prior and likelihood; its
        posterior over the site ``"theta"`` (and ``"sigma2"`` for NIG) is what the conjugate path
        computes in closed form.
    params : dict
        Hyper-parameters (for result metadata).
    rewards : str
        ``"binary"`` for a 0/1 likelihood (logistic), ``"real"`` for the Gaussian ones
        (:mod:`bayesfair.core.compat`).
    dims : dict
        ``{"theta": ("feature",)}``: a draw is the coefficient vector.
    observation : ObservationModel or None
        The likelihood of one observation ``Outcome(y, x=x)`` for model checking.

    The same protocol as every family (:mod:`bayesfair.posteriors.base`).
    """

    __bayesfair_kind__ = "posterior"  # a config gives it as a posterior table (bayesfair.core.declare)

    name: str
    init: Callable[[Any], Any]
    update: Callable[[Any, Outcome], Any]
    sample: Callable[[jax.Array, Any], jax.Array]
    mean: Callable[[Any], jax.Array]
    cov: Callable[[Any], jax.Array]
    variance: Callable[[Any], jax.Array]
    model: Callable[..., None]
    params: dict[str, Any]
    rewards: str = "real"
    dims: Mapping[str, tuple[str, ...]] = {"theta": ("feature",)}  # noqa: RUF012 (read-only default)
    observation: ObservationModel | None = None


class LinearState(NamedTuple):
    """Known-variance posterior: the precision Lambda = ``precision + precision_err`` ``[d, d]``
    (a compensated sum), its lower Cholesky factor ``chol`` ``[d, d]`` and
    eta = Lambda m = ``eta + eta_err`` ``[d]``."""

    precision: jax.Array
    precision_err: jax.Array
    chol: jax.Array
    eta: jax.Array
    eta_err: jax.Array


class LinearNIGState(NamedTuple):
    """NIG posterior: the fields of :class:`LinearState` (Lambda and eta in units of s2), the
    number of observations ``count`` (int32) and the inverse-gamma ``a`` = a0 + count / 2 and
    ``b`` (scalars)."""

    precision: jax.Array
    precision_err: jax.Array
    chol: jax.Array
    eta: jax.Array
    eta_err: jax.Array
    count: jax.Array
    a: jax.Array
    b: jax.Array


def chol_rank_one_update(chol: jax.Array, x: jax.Array) -> jax.Array:
    """Lower Cholesky factor of ``chol chol' + x x'`` by d rotations, O(d^2).

    Column k is rotated against the running vector x (Golub & Van Loan's rank-one update):
    r = sqrt(L_kk^2 + x_k^2), c = r / L_kk, s = x_k / L_kk, L_kk <- r,
    L_ik <- (L_ik + s x_i) / c and x_i <- c x_i - s L_ik for i > k.
    """
    d = x.shape[0]
    idx = jnp.arange(d)

    def body(k, carry):
        low, v = carry
        col = low[:, k]
        lkk, vk = col[k], v[k]
        r = jnp.sqrt(lkk * lkk + vk * vk)
        c, s = r / lkk, vk / lkk
        below = idx > k
        new = jnp.where(below, (col + s * v) / c, jnp.where(idx == k, r, col))
        return low.at[:, k].set(new), jnp.where(below, c * v - s * new, v)

    out, _ = lax.fori_loop(0, d, body, (chol, x), unroll=min(d, 4))
    return out


def _check_cholesky(cholesky: Any) -> str:
    if cholesky not in _CHOLESKY_MODES:
        raise ValueError(f"cholesky must be one of {_CHOLESKY_MODES}, got {cholesky!r}")
    return cholesky


def _prior_mean(value: Any) -> tuple[float | np.ndarray, Any]:
    """A scalar (broadcast to every coordinate) or a 1-d finite vector; also its JSON form."""
    arr = finite_array("prior_mean", value)
    if arr.ndim == 0:
        return float(arr), float(arr)
    if arr.ndim != 1:
        raise ValueError(f"prior_mean must be a scalar or a 1-d vector [d], got shape {arr.shape}")
    return arr, arr.tolist()


def _prior_mean_vector(m0: float | np.ndarray, d: int) -> jax.Array:
    if isinstance(m0, np.ndarray) and m0.shape[0] != d:
        raise ValueError(f"prior_mean has length {m0.shape[0]} but n_features is {d}")
    return jnp.broadcast_to(jnp.asarray(m0, jnp.float32), (d,))


def _add(total: jax.Array, err: jax.Array, term: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Compensated (Neumaier) summation: total + err tracks the exact sum to ~one rounding."""
    new = total + term
    lost = jnp.where(jnp.abs(total) >= jnp.abs(term), (total - new) + term, (term - new) + total)
    return new, err + lost


# A prior precision below this (relative to unit contexts) is guarded against a singular refresh;
# the defaults (ridge lam 0.1 or 1, prior_var = noise_var = 1, kappa0 = 1) are not
_GUARD_BELOW = 0.1


def _rank_one(mode: str, state, x: jax.Array, y: jax.Array, guard: bool = False) -> tuple[jax.Array, ...]:
    """Lambda += x x', eta += x y (compensated), and the new Cholesky factor of Lambda.

    ``guard`` (static; set when the prior precision is below ``_GUARD_BELOW``): Lambda is positive
    definite, but a prior precision below float32's resolution of the data term (a ridge lam = 1e-8
    next to |x|^2 = 1) leaves it singular once rounded, and LAPACK returned NaN (LinUCB, OFUL,
    Greedy, FairX-LinEG failed at lam <= 1e-8); the rotated factor of the same matrix (the old
    factor plus x x') is finite and is used instead. Unguarded, nothing is added to the round.
    """
    precision, precision_err = _add(state.precision, state.precision_err, jnp.outer(x, x))
    eta, eta_err = _add(state.eta, state.eta_err, x * y)
    if mode == "refresh":
        chol = jnp.linalg.cholesky(precision + precision_err)
        if guard:
            chol = jnp.where(jnp.all(jnp.isfinite(chol)), chol, chol_rank_one_update(state.chol, x))
    else:
        chol = chol_rank_one_update(state.chol, x)
    return precision, precision_err, chol, eta, eta_err


def _solve_lower(chol: jax.Array, v: jax.Array) -> jax.Array:
    return solve_triangular(chol, v, lower=True)


def _solve_upper(chol: jax.Array, v: jax.Array) -> jax.Array:
    """L^-T v."""
    return solve_triangular(chol, v, lower=True, trans=1)


def _inverse_precision(chol: jax.Array) -> jax.Array:
    inv_l = _solve_lower(chol, jnp.eye(chol.shape[0], dtype=chol.dtype))
    return inv_l.T @ inv_l


def _eta(state) -> jax.Array:
    return state.eta + state.eta_err


def _mean_fn(mode: str) -> Callable[[Any], jax.Array]:
    """Posterior mean Lambda^-1 eta by two triangular solves; with a rotated (``rank_one``) factor,
    plus one step of iterative refinement against the compensated Lambda, which removes the
    factor's accumulated error from the mean (O(d^2))."""

    def mean(state) -> jax.Array:
        eta = _eta(state)
        m = _solve_upper(state.chol, _solve_lower(state.chol, eta))
        if mode == "rank_one":
            resid = (eta - state.precision @ m) - state.precision_err @ m
            m = m + _solve_upper(state.chol, _solve_lower(state.chol, resid))
        return m

    return mean


def _draw(mode: str, mean: Callable[[Any], jax.Array], state, z: jax.Array) -> jax.Array:
    """mean + L^-T z; fused into L^-T (L^-1 eta + z) when the factor is refreshed."""
    if mode == "refresh":
        return _solve_upper(state.chol, _solve_lower(state.chol, _eta(state)) + z)
    return mean(state) + _solve_upper(state.chol, z)


@declare("posterior", example=[{}, {"cholesky": "rank_one"}])
def linear_known_variance(
    prior_mean: float | list[float] | Any = 0.0,
    prior_var: Positive = 1.0,
    noise_var: Positive = 1.0,
    *,
    cholesky: Literal["refresh", "rank_one"] = "refresh",
) -> LinearPosterior:
    """Conjugate Gaussian linear regression with known noise variance.

    Prior theta ~ N(m0, v0 I); likelihood y | x ~ N(x . theta, sigma^2). Update:
    Lambda += x x' / sigma^2, eta += x y / sigma^2; posterior N(Lambda^-1 eta, Lambda^-1).
    FairX-LinTS's theorems use m0 = 0, v0 = 1, sigma^2 = 1 (Theorems 4.3.1/4.3.2); ridge
    regression with parameter lambda is v0 = 1 / lambda, sigma^2 = 1 (Algorithm 3).

    Parameters
    ----------
    prior_mean : float or array-like [d]
        m0, a scalar for every coordinate or one value per feature (checked against
        ``n_features`` at ``init``).
    prior_var : float
        v0 > 0, the prior variance of every coordinate.
    noise_var : float
        sigma^2 > 0.
    cholesky : {"refresh", "rank_one"}
        How the Cholesky factor of the precision follows an update (module docstring).
    """
    m0, m0_json = _prior_mean(prior_mean)
    v0, s2 = float(prior_var), float(noise_var)  # > 0: declared
    mode = _check_cholesky(cholesky)
    inv_s = float(1.0 / np.sqrt(s2))
    guard = s2 / v0 < _GUARD_BELOW  # prior precision 1/v0 against a unit context's x x' / s2

    def init(size) -> LinearState:
        d = init_size(size, "n_features")
        eye = jnp.eye(d, dtype=jnp.float32)
        zero = jnp.zeros((d,), jnp.float32)
        return LinearState(eye / v0, 0.0 * eye, eye / np.sqrt(v0), _prior_mean_vector(m0, d) / v0, zero)

    def update(state: LinearState, obs: Outcome) -> LinearState:
        xs = jnp.asarray(obs.x, jnp.float32) * inv_s
        ys = jnp.asarray(obs.reward, jnp.float32) * inv_s
        return LinearState(*_rank_one(mode, state, xs, ys, guard))

    mean = _mean_fn(mode)

    def sample(key: jax.Array, state: LinearState) -> jax.Array:
        return _draw(mode, mean, state, _random.normal(key, state.eta.shape))  # jax.random.normal's numbers

    def cov(state: LinearState) -> jax.Array:
        return _inverse_precision(state.chol)

    def variance(state: LinearState) -> jax.Array:
        inv_l = _solve_lower(state.chol, jnp.eye(state.chol.shape[0], dtype=state.chol.dtype))
        return jnp.sum(inv_l * inv_l, axis=0)

    def model(X, y=None) -> None:
        import numpyro
        import numpyro.distributions as dist

        X = jnp.asarray(X)
        loc = _prior_mean_vector(m0, X.shape[1])
        theta = numpyro.sample("theta", dist.Normal(loc, np.sqrt(v0)).to_event(1))
        with numpyro.plate("obs", X.shape[0]):
            numpyro.sample("y", dist.Normal(X @ theta, np.sqrt(s2)), obs=y)

    return LinearPosterior(
        "linear_known_variance", init, update, sample, mean, cov, variance, model,
        {"prior_mean": m0_json, "prior_var": v0, "noise_var": s2, "cholesky": mode},
        observation=normal_observation(lambda key, state: {"theta": sample(key, state)}, {"theta": ("feature",)},
                                       lambda p, o: (jnp.dot(o.x, p["theta"]), s2)),
    )


@declare("posterior", example=[{"a0": 2.0}, {"a0": 0.5}])
def linear_normal_inverse_gamma(
    m0: float | list[float] | Any = 0.0,
    kappa0: Positive = 1.0,
    a0: Positive = 1.0,
    b0: Positive = 1.0,
    *,
    cholesky: Literal["refresh", "rank_one"] = "refresh",
) -> LinearPosterior:
    """Conjugate Normal-Inverse-Gamma linear regression (unknown noise variance).

    Prior s2 ~ InvGamma(a0, b0), theta | s2 ~ N(m0, s2 / kappa0 I); likelihood
    y | x ~ N(x . theta, s2). Update (module docstring): Lambda += x x', eta += x y,
    a += 1/2, b += (y - x . m)^2 / (2 (1 + x' Lambda^-1 x)). A draw is s2 = b / G with
    G ~ Gamma(a) (exact, ``bayesfair.core._random.gamma``), then theta ~ N(m, s2 Lambda^-1): a draw from
    the multivariate Student-t marginal. ``cov`` is b / (a - 1) Lambda^-1 (infinite for a <= 1).

    Parameters
    ----------
    m0 : float or array-like [d]
        Prior mean of theta.
    kappa0 : float
        > 0, the prior precision multiplier (theta | s2 has covariance s2 / kappa0 I).
    a0, b0 : float
        > 0, the inverse-gamma prior of the noise variance.
    cholesky : {"refresh", "rank_one"}
        As in :func:`linear_known_variance`.
    """
    m0_val, m0_json = _prior_mean(m0)
    kappa0, a0, b0 = float(kappa0), float(a0), float(b0)  # > 0: declared
    mode = _check_cholesky(cholesky)
    allow_small = a0 < 1.0  # a only grows, so shapes stay >= 1 when a0 >= 1 (static choice)
    mean = _mean_fn(mode)

    def init(size) -> LinearNIGState:
        d = init_size(size, "n_features")
        eye = jnp.eye(d, dtype=jnp.float32)
        zero = jnp.zeros((d,), jnp.float32)
        return LinearNIGState(eye * kappa0, 0.0 * eye, eye * np.sqrt(kappa0),
                              _prior_mean_vector(m0_val, d) * kappa0, zero, jnp.int32(0),
                              jnp.asarray(a0, jnp.float32), jnp.asarray(b0, jnp.float32))

    def update(state: LinearNIGState, obs: Outcome) -> LinearNIGState:
        x = jnp.asarray(obs.x, jnp.float32)
        y = jnp.asarray(obs.reward, jnp.float32)
        u = _solve_lower(state.chol, x)  # L^-1 x: x' Lambda^-1 x = |u|^2
        resid = y - jnp.dot(x, mean(state))
        b = state.b + 0.5 * resid * resid / (1.0 + jnp.dot(u, u))
        count = state.count + 1
        a = a0 + 0.5 * count.astype(jnp.float32)
        return LinearNIGState(*_rank_one(mode, state, x, y, kappa0 < _GUARD_BELOW), count, a, b)

    def joint(key: jax.Array, state: LinearNIGState) -> dict[str, jax.Array]:
        """One joint draw (theta, sigma2 = s2); ``sample`` is its theta."""
        kg, kz = jax.random.split(key)
        # capped at the largest float32: a shape a0 < 1 can draw a gamma below the float32 range
        # (0), which made s2 inf and the draw inf/NaN (as in normal_inverse_gamma)
        s2 = jnp.minimum(state.b / _random.gamma(kg, state.a, allow_small=allow_small), jnp.finfo(jnp.float32).max)
        return {"theta": _draw(mode, mean, state, jnp.sqrt(s2) * _random.normal(kz, state.eta.shape)), "sigma2": s2}

    def sample(key: jax.Array, state: LinearNIGState) -> jax.Array:
        return joint(key, state)["theta"]

    def _scale(state: LinearNIGState) -> jax.Array:
        return jnp.where(state.a > 1.0, state.b / (state.a - 1.0), jnp.inf)

    def cov(state: LinearNIGState) -> jax.Array:
        return _scale(state) * _inverse_precision(state.chol)

    def variance(state: LinearNIGState) -> jax.Array:
        inv_l = _solve_lower(state.chol, jnp.eye(state.chol.shape[0], dtype=state.chol.dtype))
        return _scale(state) * jnp.sum(inv_l * inv_l, axis=0)

    def model(X, y=None) -> None:
        import numpyro
        import numpyro.distributions as dist

        X = jnp.asarray(X)
        loc = _prior_mean_vector(m0_val, X.shape[1])
        sigma2 = numpyro.sample("sigma2", dist.InverseGamma(a0, b0))
        theta = numpyro.sample("theta", dist.Normal(loc, jnp.sqrt(sigma2 / kappa0)).to_event(1))
        with numpyro.plate("obs", X.shape[0]):
            numpyro.sample("y", dist.Normal(X @ theta, jnp.sqrt(sigma2)), obs=y)

    return LinearPosterior(
        "linear_normal_inverse_gamma", init, update, sample, mean, cov, variance, model,
        {"m0": m0_json, "kappa0": kappa0, "a0": a0, "b0": b0, "cholesky": mode},
        observation=normal_observation(joint, {"theta": ("feature",), "sigma2": ()},
                                       lambda p, o: (jnp.dot(o.x, p["theta"]), p["sigma2"])),
    )


def fit_linear(posterior: LinearPosterior, X: Any, y: Any) -> Any:
    """Posterior state after observing the rows of ``X [n, d]`` with rewards ``y [n]`` in order,
    by repeated rank-one updates (a ``lax.scan``)."""
    if not isinstance(posterior, LinearPosterior):
        raise TypeError(f"posterior must be a bayesfair LinearPosterior, got {posterior!r}")
    X = jnp.asarray(X, jnp.float32)
    y = jnp.asarray(y, jnp.float32)
    if X.ndim != 2 or y.shape != X.shape[:1]:
        raise ValueError(f"X must be [n, d] and y [n], got shapes {X.shape} and {y.shape}")
    return fit_outcomes(posterior, X.shape[1], Outcome(reward=y, x=X))
