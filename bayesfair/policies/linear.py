"""FairX policies for stochastic linear bandits (fairness_of_exposure_fairx_icml2021, Sections 4, 5.1).

Round t shows K candidates with contexts x_t,a (``obs.contexts`` ``[K, d]``); the mean reward is
theta* . x_t,a and the optimal fair policy is pi*_t(a) = f(theta* . x_t,a) / sum_a' f(theta* . x_t,a')
(Section 4.1). Each FairX policy plays the fair policy of some parameter theta_t:

- FairX-LinTS (Algorithm 4): theta_t is one posterior draw (any :class:`LinearPosterior`).
- FairX-LinUCB (Algorithm 3): theta_t is an optimistic parameter in the confidence ellipsoid
  ||theta - theta_hat||_{V_t} <= beta_t, found by projected gradient ascent (Section 5.1: learning
  rate 0.01, 10 steps) with an exact Euclidean projection onto the ellipsoid.
- FairX-LinEG (Section 5.1): epsilon-greedy on the ridge estimate with the fair policy.

Conventional baselines (Section 5.1's LinUCB and LinTS) play the argmax of an optimistic index or
of a posterior draw; their pi_t is the uniform distribution over the tied maximizers (one-hot
without ties), conditional on the draw for LinTS, as for the multi-armed baselines.

Ridge regression with parameter lambda is the known-variance posterior with prior N(0, I / lambda)
and unit noise (:func:`bayesfair.posteriors.linear_known_variance`), so the UCB and EG policies
keep V_t = lambda I + sum x x' and b_t = sum x r with the same rank-one updates.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bayesfair.core import _random
from bayesfair.core.declare import Cap, Index, OpenUnit, Positive, Unit, declare
from bayesfair.core.merit import Merit, fair_policy, resolve_merit
from bayesfair.core.types import Observation, Spec
from bayesfair.policies.base import Policy, posterior_requires
from bayesfair.policies.fairx import check_ascent, run_ascent
from bayesfair.posteriors.base import Outcome
from bayesfair.posteriors.linear import LinearPosterior, LinearState, linear_known_variance

__all__ = [
    "fairx_lints",
    "fairx_linucb",
    "fairx_lineg",
    "linucb",
    "lints",
    "project_ellipsoid",
    "project_ellipsoid_eig",
    "abbasi_yadkori_beta",
]


# --------------------------------------------------------------------------- shared checks


def _n_features(spec: Spec, policy: str) -> int:
    """d from the spec (validated at init, outside jit)."""
    d = getattr(spec, "n_features", None)
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(
            f"{policy} needs spec.n_features >= 1 (contexts [K, d] from a linear environment), got {d!r}")
    return int(d)


def _contexts(obs: Observation, d: int, policy: str) -> jax.Array:
    """``obs.contexts`` as ``[K, d]`` float32; shapes are static, so this check runs at trace time."""
    if obs.contexts is None:
        raise ValueError(f"{policy} needs obs.contexts [K, d]; got None (a multi-armed environment?)")
    c = jnp.asarray(obs.contexts, jnp.float32)
    if c.ndim != 2 or c.shape[1] != d:
        raise ValueError(
            f"{policy}: obs.contexts must be [K, n_features={d}], got shape {tuple(c.shape)}; the policy was "
            f"initialized with spec.n_features={d}, which differs from the environment's contexts")
    return c


def _check_linear_posterior(posterior: Any) -> LinearPosterior:
    if not isinstance(posterior, LinearPosterior):
        raise TypeError(f"posterior must be a bayesfair LinearPosterior (e.g. linear_known_variance()), "
                        f"got {posterior!r}")
    return posterior


def _argmax_choice(key: jax.Array, index: jax.Array) -> tuple[jax.Array, jax.Array]:
    probs = _random.argmax_set(index)
    return _random.categorical(key, probs), probs


# --------------------------------------------------------------------------- Thompson sampling


#: The environment the linear policies' contract examples run on.
_LINEAR_ENV = {"name": "linear_bandit", "n_arms": 5, "n_features": 3}


@declare("policy", example={"posterior": "linear_known_variance"}, example_env=_LINEAR_ENV)
def fairx_lints(posterior: LinearPosterior, merit: Merit) -> Policy:
    """FairX-LinTS, Algorithm 4.

    Line 3: contexts D_t = obs.contexts ``[K, d]``; line 4: theta_t ~ V_t (one exact posterior
    draw); line 5: pi_t(a) = f(theta_t . x_t,a) / sum_a' f(theta_t . x_t,a') (computed as a softmax
    of log f when the merit has one, like FairX-TS); line 6: a_t ~ pi_t; line 8: rank-one posterior
    update with (x_t,a_t, r_t). Theorems 4.3.1/4.3.2 assume the prior theta_i ~ N(0, 1) and N(0, 1)
    noise, i.e. ``linear_known_variance(0.0, 1.0, 1.0)``.

    Parameters
    ----------
    posterior : LinearPosterior
        E.g. :func:`~bayesfair.posteriors.linear_known_variance` or
        :func:`~bayesfair.posteriors.linear_normal_inverse_gamma`.
    merit : Merit
        Merit function f.
    """
    posterior = _check_linear_posterior(posterior)
    merit = resolve_merit(merit)
    name = "FairX-LinTS"

    def init(key: jax.Array, spec: Spec) -> Any:
        return posterior.init(_n_features(spec, name))

    def select(key: jax.Array, state: Any, obs: Observation):
        x = _contexts(obs, state.eta.shape[0], name)
        k_theta, k_arm = jax.random.split(key)
        theta = posterior.sample(k_theta, state)
        probs = fair_policy(merit, x @ theta)
        return _random.categorical(k_arm, probs), probs, {"theta": theta}

    def update(state: Any, obs: Observation, action: jax.Array, reward: jax.Array) -> Any:
        x = _contexts(obs, state.eta.shape[0], name)
        return posterior.update(state, Outcome(reward, x=x[action]))

    return Policy(init, select, update, name, requires=posterior_requires(posterior, "FairX-LinTS"))


@declare("policy", example={"posterior": "linear_known_variance"}, example_env=_LINEAR_ENV)
def lints(posterior: LinearPosterior) -> Policy:
    """Linear Thompson sampling: play argmax_a theta_t . x_t,a for one posterior draw theta_t.

    pi_t is the uniform distribution over the maximizers of the sampled rewards (one-hot unless
    tied), i.e. the policy conditional on the draw.
    """
    posterior = _check_linear_posterior(posterior)
    name = "LinTS"

    def init(key: jax.Array, spec: Spec) -> Any:
        return posterior.init(_n_features(spec, name))

    def select(key: jax.Array, state: Any, obs: Observation):
        x = _contexts(obs, state.eta.shape[0], name)
        k_theta, k_arm = jax.random.split(key)
        theta = posterior.sample(k_theta, state)
        action, probs = _argmax_choice(k_arm, x @ theta)
        return action, probs, {"theta": theta}

    def update(state: Any, obs: Observation, action: jax.Array, reward: jax.Array) -> Any:
        x = _contexts(obs, state.eta.shape[0], name)
        return posterior.update(state, Outcome(reward, x=x[action]))

    return Policy(init, select, update, name, requires=posterior_requires(posterior, "LinTS"))


# --------------------------------------------------------------------------- confidence ellipsoid


def abbasi_yadkori_beta(logdet_v: jax.Array, n_features: int, lam: float, noise_sd: float,
                        theta_bound: float, delta: float) -> jax.Array:
    """Confidence radius of Abbasi-Yadkori et al. (2011), Theorem 2.

    beta_t = R sqrt(2 ln(det(V_t)^(1/2) det(lambda I)^(-1/2) / delta)) + sqrt(lambda) S
           = R sqrt(ln det V_t - d ln lambda + 2 ln(1 / delta)) + sqrt(lambda) S,

    for R-sub-Gaussian noise and ||theta*||_2 <= S; then ||theta* - theta_hat_t||_{V_t} <= beta_t
    for all t with probability >= 1 - delta. The FairX paper leaves beta_t as an input ("with
    proper choice of beta_t", Theorems 4.2.1/4.2.2, which assume R = 1, S = 1, lambda = 1) and uses
    a fixed beta in its experiments (Section 5.1).
    """
    inner = logdet_v - n_features * math.log(lam) + 2.0 * math.log(1.0 / delta)
    return noise_sd * jnp.sqrt(jnp.maximum(inner, 0.0)) + math.sqrt(lam) * theta_bound


def _radius_fn(beta: Any, lam: float, delta: Any, noise_sd: Any, theta_bound: Any
               ) -> Callable[[jax.Array, int], jax.Array]:
    """beta_t as a function of (log det V_t, d): fixed, or Abbasi-Yadkori's (ranges checked by the
    callers' declarations)."""
    if beta is not None:
        b = float(beta)
        return lambda logdet, d: jnp.asarray(b, jnp.float32)
    delta, noise_sd, theta_bound = float(delta), float(noise_sd), float(theta_bound)

    def radius(logdet: jax.Array, d: int) -> jax.Array:
        return abbasi_yadkori_beta(logdet, d, lam, noise_sd, theta_bound, delta)

    return radius


def _project_axis(w: jax.Array, lam: jax.Array, radius: jax.Array, max_iter: int) -> jax.Array:
    """Euclidean projection of w onto {z : sum_i lam_i z_i^2 <= radius^2} (all lam_i > 0).

    KKT: z = w / (1 + nu lam) with nu >= 0 the root of g(nu) = sum lam w^2 / (1 + nu lam)^2 = r^2.
    With a_i = w_i / sqrt(lam_i) and s_i = 1 / lam_i, g(nu) = sum a^2 / (s + nu)^2, and
    phi(nu) = g(nu)^(-1/2) - 1/r is concave and increasing (the secular equation of trust-region
    methods, More & Sorensen 1983), so Newton's method started left of the root increases
    monotonically to it without overshooting. The root lies in [max(0, |a|/r - max s), |a|/r]
    (bounds of g by the extreme s_i); Newton starts at the left end, its iterates are clipped to
    the bracket, and a lane stops when an iterate no longer increases (machine precision) or after
    ``max_iter`` iterations. A final radial rescale by at most a rounding error keeps z feasible.
    """
    r2 = radius * radius
    lw2 = lam * w * w
    outside = jnp.sum(lw2) > r2
    nu_hi = jnp.sqrt(jnp.sum(w * w / lam)) / radius
    nu_lo = jnp.maximum(nu_hi - 1.0 / jnp.min(lam), 0.0)

    def newton(nu):
        den = 1.0 + nu * lam
        g = jnp.sum(lw2 / (den * den))
        h = jnp.sum(lam * lw2 / (den * den * den))  # -g'(nu) / 2
        return jnp.clip(nu + (g * jnp.sqrt(g) / radius - g) / h, nu_lo, nu_hi)

    def cond(c):
        i, _, done = c
        return (i < max_iter) & ~done

    def body(c):
        i, nu, done = c
        new = newton(nu)
        stop = ~(new > nu)
        return i + 1, jnp.where(stop, nu, new), done | stop

    _, nu, _ = lax.while_loop(cond, body, (jnp.int32(0), nu_lo, ~outside))
    z = w / (1.0 + nu * lam)
    qz = jnp.sum(lam * z * z)
    z = jnp.where(qz > r2, z * (radius * lax.rsqrt(qz)), z)
    return jnp.where(outside, z, w)


def project_ellipsoid_eig(point: jax.Array, center: jax.Array, eigvals: jax.Array, eigvecs: jax.Array,
                          radius: jax.Array, *, max_iter: int = 60) -> jax.Array:
    """Euclidean projection of ``point`` onto {z : (z - c)' V (z - c) <= radius^2}, V = Q diag(l) Q'.

    argmin_z ||z - point||_2 over the ellipsoid, solved exactly (to float precision) as a 1-d
    root-finding problem in the Lagrange multiplier (see ``_project_axis``): with
    w = Q' (point - c), z = c + Q (w / (1 + nu l)). Points inside are returned unchanged.

    Parameters
    ----------
    point, center : [d]
    eigvals : [d]
        Eigenvalues l of V, all > 0.
    eigvecs : [d, d]
        Orthonormal eigenvectors Q of V (columns).
    radius : scalar, > 0
    max_iter : int
        Cap on the Newton iterations (monotone convergence stops far earlier in practice).
    """
    w = eigvecs.T @ (point - center)
    z = _project_axis(w, eigvals, radius, max_iter)
    inside = jnp.sum(eigvals * w * w) <= radius * radius
    return jnp.where(inside, point, center + eigvecs @ z)


def project_ellipsoid(point: jax.Array, center: jax.Array, V: jax.Array, radius: jax.Array,
                      *, max_iter: int = 60) -> jax.Array:
    """:func:`project_ellipsoid_eig` for a symmetric positive-definite ``V`` [d, d] (uses ``eigh``)."""
    eigvals, eigvecs = jnp.linalg.eigh(V)
    return project_ellipsoid_eig(point, center, eigvals, eigvecs, radius, max_iter=max_iter)


# --------------------------------------------------------------------------- UCB family


def _ridge(lam: Any) -> tuple[float, LinearPosterior]:
    lam = float(lam)  # > 0 checked by the callers' declarations
    return lam, linear_known_variance(0.0, 1.0 / lam, 1.0)


def _logdet_chol(chol: jax.Array) -> jax.Array:
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol)))


@declare("policy",
         example=[{}, {"beta": 0.5, "start": "linearized"}, {"merit": {"name": "identity"}, "lam": 2.0, "beta": 1.0}],
         example_env=_LINEAR_ENV)
def fairx_linucb(
    merit: Merit,
    *,
    lam: Positive = 1.0,
    beta: Positive | None = None,
    delta: OpenUnit = 0.05,
    noise_sd: Positive = 1.0,
    theta_bound: Positive = 1.0,
    learning_rate: Positive = 0.01,
    steps: Annotated[Index, Cap(1000)] = 10,
    start: Literal["center", "linearized"] = "center",
) -> Policy:
    """FairX-LinUCB, Algorithm 3.

    Line 2: Sigma_1 = lambda I, b_1 = 0 (here V_t and b_t, the ridge posterior's precision and
    eta). Line 5: theta_hat_t = V_t^-1 b_t. Line 6: CR_t = {theta : ||theta - theta_hat_t||_{V_t} <=
    beta_t}. Line 7: theta_t = argmax_{theta in CR_t} sum_a pi(a; theta) theta . x_t,a with
    pi(a; theta) = f(theta . x_t,a) / sum_a' f(theta . x_t,a'); non-convex, solved as in the paper's
    experiments (Section 5.1) by ``steps`` projected gradient-ascent steps of size
    ``learning_rate``. The paper says "projected gradient descent" (Section 4.2) without naming the
    metric of the projection; the standard one, the Euclidean projection onto CR_t, is used, and it
    is exact (:func:`project_ellipsoid_eig`, one ``eigh`` of V_t per round; Newton on the Lagrange
    multiplier, which converged within 8 iterations for condition numbers up to 1e5 in testing).
    A projection in the V_t metric would instead be a radial rescale towards theta_hat_t.
    Lines 8-9: pi_t = pi(.; theta_t) and a_t ~ pi_t. Lines 11-12: V += x x', b += x r.

    The cost per round is O(d^3) (the eigendecomposition), plus O(steps K d) for the ascent.

    Unlike FairX-UCB's box (:func:`bayesfair.policies.fairx.exact_box_argmax`), line 7 has no
    exact solver here: the attainable means theta . x_t,a are coupled through one ellipsoid, not
    a product of intervals, so the K + 1 threshold-vertex argument does not apply. The default
    start, theta_hat_t, is the analogue of FairX-UCB's default (the empirical means).

    Parameters
    ----------
    merit : Merit
        Merit function f.
    lam : float
        Ridge parameter lambda > 0 (the theorems use 1).
    beta : float, optional
        A fixed radius beta_t = beta, as in the paper's experiments. If omitted, beta_t is
        :func:`abbasi_yadkori_beta` with ``delta``, ``noise_sd`` (R) and ``theta_bound`` (S); the
        defaults R = S = 1 are the theorems' assumptions.
    learning_rate, steps
        Projected gradient ascent settings (the paper: 0.01 and 10).
    start : {"center", "linearized"}
        Starting point of the ascent, which the paper does not state. ``"center"`` (default)
        starts at theta_hat_t. ``"linearized"`` starts at the maximizer over CR_t of the objective's
        first-order expansion at theta_hat_t, theta_hat + beta V^-1 g / ||g||_{V^-1} with g the
        gradient there (the analogue of FairX-UCB's upper-corner start).
    """
    merit = resolve_merit(merit)
    lam, ridge = _ridge(lam)
    radius_fn = _radius_fn(beta, lam, delta, noise_sd, theta_bound)
    lr, steps = check_ascent(learning_rate, steps, "center")
    if start not in ("center", "linearized"):
        raise ValueError(f"start must be 'center' or 'linearized', got {start!r}")
    name = "FairX-LinUCB"

    def optimistic_theta(state: LinearState, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        def objective(theta: jax.Array) -> jax.Array:
            mean = x @ theta
            return jnp.sum(fair_policy(merit, mean) * mean)

        grad = jax.grad(objective)
        d = x.shape[1]
        eigvals, eigvecs = jnp.linalg.eigh(state.precision + state.precision_err)
        eigvals = jnp.maximum(eigvals, lam)  # V >= lambda I exactly; guards rounding in eigh
        theta_hat = eigvecs @ ((eigvecs.T @ (state.eta + state.eta_err)) / eigvals)
        radius = radius_fn(jnp.sum(jnp.log(eigvals)), d)
        # Iterate in eigen-coordinates w = Q' (theta - theta_hat): the map is an isometry, so the
        # Euclidean projection onto CR_t is the projection onto {w : sum l w^2 <= beta^2}.
        if start == "center":
            w = jnp.zeros((d,), jnp.float32)
        else:
            gq = eigvecs.T @ grad(theta_hat)
            norm = jnp.sqrt(jnp.sum(gq * gq / eigvals))
            w = jnp.where(norm > 0, radius * (gq / eigvals) / jnp.where(norm > 0, norm, 1.0), 0.0)
        def step(w):
            gw = eigvecs.T @ grad(theta_hat + eigvecs @ w)
            return _project_axis(w + lr * gw, eigvals, radius, 60)

        w = run_ascent(step, w, steps)
        return theta_hat + eigvecs @ w, radius

    def init(key: jax.Array, spec: Spec) -> LinearState:
        return ridge.init(_n_features(spec, name))

    def select(key: jax.Array, state: LinearState, obs: Observation):
        x = _contexts(obs, state.eta.shape[0], name)
        theta, radius = optimistic_theta(state, x)
        probs = fair_policy(merit, x @ theta)
        return _random.categorical(key, probs), probs, {"theta": theta, "beta": radius}

    def update(state: LinearState, obs: Observation, action: jax.Array, reward: jax.Array) -> LinearState:
        x = _contexts(obs, state.eta.shape[0], name)
        return ridge.update(state, Outcome(reward, x=x[action]))

    return Policy(init, select, update, name)


@declare("policy", example=[{}, {"beta": 0.3, "lam": 0.5}], example_env=_LINEAR_ENV)
def linucb(
    *,
    lam: Positive = 1.0,
    beta: Positive | None = None,
    delta: OpenUnit = 0.05,
    noise_sd: Positive = 1.0,
    theta_bound: Positive = 1.0,
) -> Policy:
    """LinUCB / OFUL: play argmax_a theta_hat_t . x_t,a + beta_t ||x_t,a||_{V_t^-1}.

    The index is max over the same confidence ellipsoid as :func:`fairx_linucb` of theta . x_t,a
    (Abbasi-Yadkori et al. 2011), with the same ``beta`` options. Ties are broken uniformly at
    random and pi_t is the uniform distribution over the maximizers.
    """
    lam, ridge = _ridge(lam)
    radius_fn = _radius_fn(beta, lam, delta, noise_sd, theta_bound)
    name = "LinUCB"

    def init(key: jax.Array, spec: Spec) -> LinearState:
        return ridge.init(_n_features(spec, name))

    def select(key: jax.Array, state: LinearState, obs: Observation):
        x = _contexts(obs, state.eta.shape[0], name)
        theta_hat = ridge.mean(state)
        u = jax.scipy.linalg.solve_triangular(state.chol, x.T, lower=True)  # [d, K]: L^-1 x_a
        radius = radius_fn(_logdet_chol(state.chol), x.shape[1])
        index = x @ theta_hat + radius * jnp.sqrt(jnp.sum(u * u, axis=0))
        action, probs = _argmax_choice(key, index)
        return action, probs, {"index": index}

    def update(state: LinearState, obs: Observation, action: jax.Array, reward: jax.Array) -> LinearState:
        x = _contexts(obs, state.eta.shape[0], name)
        return ridge.update(state, Outcome(reward, x=x[action]))

    return Policy(init, select, update, name)


@declare("policy", example={"epsilon": 0.1}, example_env=_LINEAR_ENV)
def fairx_lineg(merit: Merit, *, epsilon: Unit = 0.05, lam: Positive = 1.0) -> Policy:
    """FairX-LinEG (Section 5.1): pi_t(a) = epsilon / K + (1 - epsilon) f(theta_hat . x_t,a) /
    sum_a' f(theta_hat . x_t,a').

    The paper defines it as conventional epsilon-greedy with the greedy step replaced by the fair
    policy of the ridge estimate theta_hat_t, and grid-searches a fixed epsilon and the ridge
    parameter; so epsilon is constant over rounds (no decay schedule) and ``lam`` is the ridge
    parameter.
    """
    merit = resolve_merit(merit)
    eps = float(epsilon)  # range checked by the declaration
    lam, ridge = _ridge(lam)
    name = "FairX-LinEG"

    def init(key: jax.Array, spec: Spec) -> LinearState:
        return ridge.init(_n_features(spec, name))

    def select(key: jax.Array, state: LinearState, obs: Observation):
        x = _contexts(obs, state.eta.shape[0], name)
        theta_hat = ridge.mean(state)
        probs = eps / x.shape[0] + (1.0 - eps) * fair_policy(merit, x @ theta_hat)
        return _random.categorical(key, probs), probs, {"theta": theta_hat}

    def update(state: LinearState, obs: Observation, action: jax.Array, reward: jax.Array) -> LinearState:
        x = _contexts(obs, state.eta.shape[0], name)
        return ridge.update(state, Outcome(reward, x=x[action]))

    return Policy(init, select, update, name)

