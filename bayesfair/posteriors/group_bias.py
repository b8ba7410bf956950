"""The hierarchical group-bias model of biased feedback, with a conjugate path and a NUTS fit.

Paper: group_fairness_biased_feedback_aamas2022 (Schumann et al.), Section 3.1. Arm i of group
g(i) returns, for context x, the observed reward of Eq. (2)

    y = x . (beta_i + psi_g(i)) + N(0, sigma^2),

where beta_i are the arm's *true* coefficients (true reward f*(x) = beta_i . x, Section 3.1) and
psi_g is the societal bias of group g, zero for the reference (non-sensitive) group. The paper
assumes "the average true reward (with no bias) for group P1 should be the same as the average
reward for group P2" (Section 3.1, after Eq. 3). Here that assumption is the prior: every arm's
true coefficients come from **one population distribution shared by all groups**,

    beta_bar ~ N(m0, v0 I)                      (population mean, proper but vague)
    beta_i | beta_bar ~ N(beta_bar, tau^2 I)    (i = 1..n, every group alike)
    psi_g ~ N(0, s^2 I)                         (g != reference; psi_reference = 0)

so the groups differ only through psi, which is identified from the difference between the
groups' observed coefficients (with n_g arms per group its posterior sd does not go below about
tau / sqrt(n_g): only the arms' spread around the population mean limits how well the bias can
be told apart from bad luck in which arms a group has).

Why beta_bar has a prior: with a flat beta_bar the joint posterior is still proper once a
reference-group arm has d independent observations, but not before (round 1 of a bandit), and a
Gaussian conjugate state must be proper from the start. The default N(0, 10^2 I) is vague
relative to rewards of order 10; set ``prior_mean``/``prior_sd`` for other scales.

Conjugate path (tau, s, sigma known)
------------------------------------
theta = (beta_bar, beta_1, ..., beta_n, psi_g for the m - 1 non-reference groups) in R^D,
D = (n + m) d, is jointly Gaussian a priori (prior precision: beta_bar block (1/v0 + n/tau^2) I,
beta_i blocks I/tau^2, beta_bar-beta_i blocks -I/tau^2, psi blocks I/s^2) and every observation
is linear in theta: y = z . theta + noise with z = x in the beta_i block and x in the psi_g(i)
block. The posterior is N(Lambda^-1 eta, Lambda^-1) with Lambda = Lambda_0 + sum z z' / sigma^2
and eta = eta_0 + sum z y / sigma^2. Two exact representations of it, both updated by rank-one
steps per observation and never refitted from the history:

- ``method="joint"`` (:class:`GroupBiasState`): eta and the lower Cholesky factor L of Lambda;
  an observation is a rank-one update of eta and of L (Givens rotations,
  :func:`bayesfair.posteriors.linear.chol_rank_one_update`). A joint draw is
  theta = L^-T (L^-1 eta + z), z ~ N(0, I_D). Best for small D (the synthetic problems: D = 24).
- ``method="collapsed"`` (:class:`CollapsedState`), for large d (family income: d = 58,
  D = 696, where D x D work per round is too slow): the beta_i are conditionally independent
  given phi = (beta_bar, psi), so the state keeps, per arm, the Cholesky factor of
  Q_i = I + tau^2 X_i'X_i / sigma^2 (a d x d rank-one update per observation) and
  r_i = X_i'y_i / sigma^2. Integrating beta_i out, arm i's data inform mu_i = beta_bar + psi_g(i)
  with precision k_i = (I - Q_i^-1) / tau^2 (= (tau^2 I + sigma^2 (X_i'X_i)^-1)^-1, written
  without cancellation for large X_i'X_i) and information h_i = Q_i^-1 r_i; phi's posterior has
  precision P_0 + sum_i E_i' k_i E_i and eta_0 + sum_i E_i' h_i (E_i phi = mu_i, p = m d), and
  the arm's observed coefficients c_i = beta_i + psi_g(i) satisfy c_i | phi ~ N(Q_i^-1 mu_i +
  tau^2 h_i, tau^2 Q_i^-1), so beta_i = c_i - psi_g(i). A joint draw samples phi (one p x p
  Cholesky) then every c_i | phi: exact, O(n d^2 + p^3) per draw and O(d^3) per update.

NUTS path (tau, s, sigma unknown)
---------------------------------
:func:`group_bias_model` is the same model in NumPyro, with tau, s, sigma either fixed (then its
posterior is the conjugate one: tested) or given half-normal priors. The arm coefficients use the
non-centred form beta_i = beta_bar + tau z_i; with ``noncentered_psi=True`` psi too is written
psi_g = s u_g, u_g ~ N(0, I) (the same model: use it when s is sampled and the data say little
about psi, where the centred psi ~ N(0, s^2 I) makes the funnel that stalls NUTS in s, e.g.
Adult with 5 race groups). With ``sufficient=True`` the likelihood is written
through each arm's sufficient statistics (N_i, X_i'X_i, X_i'y_i, y_i'y_i), which is the same
density up to a constant and makes NUTS cost independent of the number of rows.
:func:`bayesfair.inference.fitting.fit` runs it (host-side fits live in :mod:`bayesfair.inference.fitting`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core._validate import finite_array, positive_float
from bayesfair.core.declare import python_only
from bayesfair.posteriors._group_bias_algebra import (
    CollapsedState,
    GroupBiasDraw,
    GroupBiasLayout,
    GroupBiasState,
    _chol_inverse,
    _collapsed_mean,
    _collapsed_theta_cov,
    _joint_theta_mean,
    check_bias_groups,
    coefficient_draw,
    coefficient_prior,
    gram_eigen,
    group_bias_layout,
    marginal_draw,
    marginal_gaussian,
    pack,
    state_mean,
    state_psi_cov,
    state_psi_mean,
    state_sample,
    state_sample_with_psi_mean,
    state_unpack,
    state_update,
    unpack,
)
from bayesfair.posteriors.base import Outcome, fit_outcomes, init_size

__all__ = [
    "GroupBiasDraw",
    "GroupBiasLayout",
    "GroupBiasPosterior",
    "GroupBiasState",
    "CollapsedState",
    "DEFAULT_PRIORS",
    "GroupBiasPriors",
    "LIKELIHOODS",
    "batch_group_bias",
    "check_likelihood",
    "observation_dist",
    "check_bias_groups",
    "fit_group_bias",
    "gram_eigen",
    "group_bias_layout",
    "group_bias_model",
    "group_bias_posterior",
    "pack",
    "state_mean",
    "state_psi_cov",
    "state_psi_mean",
    "state_sample",
    "state_sample_with_psi_mean",
    "state_unpack",
    "state_update",
    "sufficient_stats",
    "unpack",
]


class GroupBiasPosterior(NamedTuple):
    """The conjugate group-bias family for one arm -> group layout (see the module docstring).

    Attributes
    ----------
    layout : GroupBiasLayout
    method : str
        ``"joint"`` (:class:`GroupBiasState`) or ``"collapsed"`` (:class:`CollapsedState`).
    init : callable
        ``init(spec=None) -> state``: the prior (the layout is fixed at construction; a given
        :class:`~bayesfair.core.types.Spec` or arm count is checked against it).
    update : callable
        ``update(state, Outcome(y, arm=a, x=x [d])) -> state``: one observation (rank-one update).
    sample : callable
        ``sample(key, state) -> GroupBiasDraw``: one exact joint posterior draw.
    mean : callable
        ``mean(state) -> GroupBiasDraw``: posterior means.
    variance : callable
        ``variance(state) -> GroupBiasDraw``: marginal posterior variances (the diagonal of
        ``theta_cov``; the reference group's psi is 0).
    theta_mean, theta_cov : callable
        ``(state) -> [D]`` / ``[D, D]``: the joint posterior mean and covariance of theta.
    psi_cov : callable
        ``psi_cov(state) -> [m, d, d]``: posterior covariance of each group's psi (zeros for the
        reference group).
    model : callable
        The NumPyro model with the same (fixed) scales, ``model(arms, X, y=None, *, sufficient=False)``.
    prior_precision, prior_eta : numpy.ndarray
        Lambda_0 ``[D, D]`` and eta_0 ``[D]`` of theta (float64).
    params : dict
        Hyper-parameters (JSON-friendly).
    name, rewards : str
        ``"group_bias_posterior"`` and ``"real"`` (Gaussian rewards).
    dims : dict
        Dimension names of a draw's fields: ``beta_bar`` (feature), ``beta`` (arm, feature),
        ``psi`` (group, feature).

    The same protocol as every family (:mod:`bayesfair.posteriors.base`).
    """

    layout: GroupBiasLayout
    method: str
    init: Callable[..., Any]
    update: Callable[[Any, Outcome], Any]
    sample: Callable[[jax.Array, Any], GroupBiasDraw]
    mean: Callable[[Any], GroupBiasDraw]
    variance: Callable[[Any], GroupBiasDraw]
    theta_mean: Callable[[Any], jax.Array]
    theta_cov: Callable[[Any], jax.Array]
    psi_cov: Callable[[Any], jax.Array]
    model: Callable[..., None]
    prior_precision: np.ndarray
    prior_eta: np.ndarray
    params: dict[str, Any]
    name: str = "group_bias_posterior"
    rewards: str = "real"
    dims: Mapping[str, tuple[str, ...]] = {  # noqa: RUF012 (read-only default)
        "beta_bar": ("feature",), "beta": ("arm", "feature"), "psi": ("group", "feature")}


def _prior_mean(value: Any, d: int) -> np.ndarray:
    arr = finite_array("prior_mean", value)
    if arr.ndim == 0:
        return np.full(d, float(arr))
    if arr.ndim != 1 or arr.shape[0] != d:
        raise ValueError(f"prior_mean must be a scalar or a vector of length n_features={d}, got shape {arr.shape}")
    return arr


def _prior(layout: GroupBiasLayout, tau: float, s: float, m0: np.ndarray, v0: float) -> tuple[np.ndarray, np.ndarray]:
    """Lambda_0 and eta_0 of the joint Gaussian prior of theta (float64)."""
    n, d = layout.n_arms, layout.n_features
    eye = np.eye(d)
    lam0 = np.zeros((layout.dim, layout.dim))
    lam0[:d, :d] = (1.0 / v0 + n / tau**2) * eye
    for i in range(n):
        o = layout.beta_offset(i)
        lam0[o:o + d, o:o + d] = eye / tau**2
        lam0[:d, o:o + d] = lam0[o:o + d, :d] = -eye / tau**2
    for j in range(layout.n_groups - 1):
        o = layout.psi_offset(j)
        lam0[o:o + d, o:o + d] = eye / s**2
    eta0 = np.zeros(layout.dim)
    eta0[:d] = m0 / v0
    return lam0, eta0


@python_only("posterior", "its layout (arm groups, features, reference group) comes from the environment; "
                          "configs name the group_fair_ts policy, which builds it")
def group_bias_posterior(
    group_of_arm: Any,
    n_features: int,
    *,
    tau: float | None = None,
    s: float | None = None,
    sigma: float | None = None,
    prior_mean: Any = None,
    prior_sd: float | None = None,
    reference: int = 0,
    method: str = "auto",
) -> GroupBiasPosterior:
    """Conjugate posterior of the hierarchical group-bias model with known scales.

    Implements the model of the module docstring (the shared population prior on the arms' true
    coefficients, Section 3.1's "the average true reward ... should be the same" assumption, and
    the observed reward of Eq. 2 with N(0, sigma^2) noise).

    Parameters
    ----------
    group_of_arm : int sequence [n]
        Group index of every arm (0..m-1, every group non-empty, m >= 2).
    n_features : int
        Context dimension d.
    tau : float
        Spread of the arms' true coefficients around the population mean (> 0).
    s : float
        Prior scale of every coordinate of a non-reference group's bias psi_g (> 0).
    sigma : float
        Reward noise standard deviation (> 0; the paper's Eq. 2 uses 1).
    prior_mean, prior_sd : float or array [d], float
        Prior N(m0, v0 I) of the population mean beta_bar, v0 = prior_sd^2.
    reference : int
        The reference (non-sensitive) group, whose bias is 0.
    method : {"auto", "joint", "collapsed"}
        State representation (same posterior; module docstring). ``"auto"``: joint when
        D = (n + m) d <= 160, else collapsed.

    Notes
    -----
    Every prior parameter left ``None`` takes its value from :data:`DEFAULT_PRIORS` (tau 3, s 10,
    sigma 1, beta_bar ~ N(0, 10^2 I)), the defaults shared with GroupFair-TS and the NUTS fit.
    """
    layout = group_bias_layout(group_of_arm, n_features, reference=reference)
    tau, s, sigma, prior_mean, prior_sd = (getattr(DEFAULT_PRIORS, k) if v is None else v for k, v in zip(
        GroupBiasPriors._fields, (tau, s, sigma, prior_mean, prior_sd), strict=True))
    tau = positive_float("tau", tau)
    s = positive_float("s", s)
    sigma = positive_float("sigma", sigma)
    v0 = positive_float("prior_sd", prior_sd) ** 2
    m0 = _prior_mean(prior_mean, layout.n_features)
    if method not in ("auto", "joint", "collapsed"):
        raise ValueError(f"method must be 'auto', 'joint' or 'collapsed', got {method!r}")
    if method == "auto":
        method = "joint" if layout.dim <= 160 else "collapsed"
    lam0, eta0 = _prior(layout, tau, s, m0, v0)
    n, m, d = layout.n_arms, layout.n_groups, layout.n_features
    f32 = jnp.float32

    def check(spec: Any) -> None:
        if spec is None:
            return
        if init_size(spec, "n_arms") != n:
            raise ValueError(f"the group-bias posterior was built for {n} arms, got n_arms={init_size(spec, 'n_arms')}")
        if not isinstance(spec, (int, np.integer)) and getattr(spec, "n_features", d) != d:
            raise ValueError(f"the group-bias posterior was built for {d} features, got n_features={spec.n_features}")

    if method == "joint":
        chol0 = np.linalg.cholesky(lam0)

        def init(spec: Any = None) -> GroupBiasState:
            check(spec)
            return GroupBiasState(jnp.asarray(chol0, f32), jnp.asarray(eta0, f32), jnp.asarray(layout.slot),
                                  jnp.asarray(layout.group_slot), jnp.asarray(sigma, f32))

        def theta_mean(state):
            return _joint_theta_mean(state)

        def theta_cov(state):
            return _chol_inverse(state.chol)
    else:
        prec0 = np.r_[np.full(d, 1.0 / v0), np.full((m - 1) * d, 1.0 / s**2)]
        phi_eta0 = np.r_[m0 / v0, np.zeros((m - 1) * d)]

        def init(spec: Any = None) -> CollapsedState:
            check(spec)
            eye = jnp.broadcast_to(jnp.eye(d, dtype=f32), (n, d, d))
            return CollapsedState(eye, jnp.zeros((n, d), f32), jnp.zeros((n, d, d), f32), jnp.zeros((n, d), f32),
                                  jnp.asarray(layout.slot), jnp.asarray(layout.group_slot), jnp.asarray(prec0, f32),
                                  jnp.asarray(phi_eta0, f32), jnp.asarray(tau, f32), jnp.asarray(sigma, f32))

        def theta_mean(state):
            return pack(layout, _collapsed_mean(state))

        def theta_cov(state):
            return _collapsed_theta_cov(state)

    params = {"tau": tau, "s": s, "sigma": sigma, "prior_mean": m0.tolist(), "prior_sd": float(np.sqrt(v0)),
              "reference": layout.reference, "group_of_arm": layout.group_of_arm.tolist(), "method": method}

    def model(arms, X, y=None, *, sufficient: bool = False) -> None:
        group_bias_model(arms, X, y, group_of_arm=layout.group_of_arm, reference=layout.reference, tau=tau, s=s,
                         sigma=sigma, prior_mean=m0, prior_sd=float(np.sqrt(v0)), sufficient=sufficient)

    def variance(state) -> GroupBiasDraw:
        return state_unpack(state, jnp.diagonal(theta_cov(state)))

    return GroupBiasPosterior(layout, method, init, state_update, state_sample, state_mean, variance, theta_mean,
                              theta_cov, state_psi_cov, model, lam0, eta0, params)


def fit_group_bias(posterior: GroupBiasPosterior, arms: Any, X: Any, y: Any) -> Any:
    """Posterior state after the observations ``(arms[k], X[k], y[k])`` in order, by repeated
    rank-one updates (a ``lax.scan``; jit/vmap friendly)."""
    if not isinstance(posterior, GroupBiasPosterior):
        raise TypeError(f"posterior must be a GroupBiasPosterior (group_bias_posterior(...)), got {posterior!r}")
    obs = Outcome(reward=jnp.asarray(y, jnp.float32), arm=jnp.asarray(arms, jnp.int32), x=jnp.asarray(X, jnp.float32))
    return fit_outcomes(posterior, None, obs)


def batch_group_bias(posterior: GroupBiasPosterior, arms: Any, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """The closed form from the whole data set at once, in float64 numpy: (mean [D], cov [D, D]).

    Lambda = Lambda_0 + Z'Z / sigma^2 and eta = eta_0 + Z'y / sigma^2 with the full design
    matrix Z (one row per observation); used to check the rank-one paths.
    """
    lay = posterior.layout
    arms = np.asarray(arms, np.int64)
    X = np.asarray(X, np.float64)
    y = np.asarray(y, np.float64)
    d, n = lay.n_features, lay.n_arms
    Z = np.zeros((arms.size, lay.dim))
    for k, (a, x) in enumerate(zip(arms, X, strict=True)):
        Z[k, (1 + a) * d:(2 + a) * d] = x
        if lay.slot[a] >= 0:
            o = (1 + n + lay.slot[a]) * d
            Z[k, o:o + d] = x
    s2 = posterior.params["sigma"] ** 2
    lam = posterior.prior_precision + Z.T @ Z / s2
    eta = posterior.prior_eta + Z.T @ y / s2
    cov = np.linalg.inv(lam)
    return cov @ eta, cov


# --------------------------------------------------------------------------------------------
# data and the NumPyro model


def sufficient_stats(arms: Any, X: Any, y: Any, n_arms: int) -> tuple[Any, Any, Any, Any]:
    """Per-arm (N_i [n], X_i'X_i [n, d, d], X_i'y_i [n, d], y_i'y_i [n]) of a data set."""
    arms = jnp.asarray(arms, jnp.int32)
    X = jnp.asarray(X)
    y = jnp.asarray(y)
    onehot = jax.nn.one_hot(arms, n_arms, dtype=X.dtype)  # [N, n]
    count = onehot.sum(0)
    xx = jnp.einsum("na,nd,ne->ade", onehot, X, X)
    xy = jnp.einsum("na,nd,n->ad", onehot, X, y)
    yy = jnp.einsum("na,n->a", onehot, y * y)
    return count, xx, xy, yy


class GroupBiasPriors(NamedTuple):
    """THE default priors of the group-bias model, used by the conjugate path
    (:func:`group_bias_posterior`), GroupFair-TS (:func:`bayesfair.policies.biased.group_fair_ts`)
    and the NUTS fit (:func:`bayesfair.inference.fitting.fit`); documented in docs/concepts.md.

    ``tau``, ``s``, ``sigma`` are the values of the scales when they are known (conjugate path,
    GroupFair-TS) and the scales of their half-normal priors when they are sampled (NUTS):
    tau ~ HalfNormal(tau), s ~ HalfNormal(s), sigma ~ HalfNormal(sigma), so a fixed value and the
    hyperprior agree on the order of magnitude. ``sigma = 1`` is the paper's Eq. 2 noise N(0, 1)
    (group_fairness_biased_feedback_aamas2022, Section 3.1); the paper puts no prior on tau or s
    (its algorithm is frequentist), so ``tau = 3`` and ``s = 10`` are GroupFair-TS's values, kept
    because the studies were run with them. beta_bar ~ N(prior_mean, prior_sd^2 I).
    """

    tau: float = 3.0
    s: float = 10.0
    sigma: float = 1.0
    prior_mean: float = 0.0
    prior_sd: float = 10.0


#: The one set of default priors (see :class:`GroupBiasPriors`).
DEFAULT_PRIORS = GroupBiasPriors()

#: Likelihoods of :func:`group_bias_model` (the linear predictor eta = x . (beta_i + psi_g(i))).
LIKELIHOODS = ("gaussian", "bernoulli", "binomial")


def check_likelihood(likelihood: str, y: Any = None, n_trials: int = 9) -> None:
    """Reject an unknown likelihood, or observations outside its support, naming the field."""
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
    if likelihood == "binomial" and (int(n_trials) != n_trials or n_trials < 1):
        raise ValueError(f"n_trials must be an integer >= 1, got {n_trials}")
    if y is None or likelihood == "gaussian":
        return
    y = np.asarray(y)
    top = 1 if likelihood == "bernoulli" else int(n_trials)
    bad = np.flatnonzero((y != np.round(y)) | (y < 0) | (y > top))
    if bad.size:
        raise ValueError(f"y must be integers in [0, {top}] for likelihood={likelihood!r}; row {bad[0]} has "
                         f"{y[bad[0]]}")


def group_bias_model(
    arms: Any,
    X: Any,
    y: Any = None,
    *,
    group_of_arm: Any,
    reference: int = 0,
    tau: float | None = None,
    s: float | None = None,
    sigma: float | None = None,
    tau_scale: float = DEFAULT_PRIORS.tau,
    s_scale: float = DEFAULT_PRIORS.s,
    sigma_scale: float = DEFAULT_PRIORS.sigma,
    prior_mean: Any = DEFAULT_PRIORS.prior_mean,
    prior_sd: float = DEFAULT_PRIORS.prior_sd,
    sufficient: bool = False,
    stats: Any = None,
    noncentered_psi: bool = False,
    noncentered_beta: bool = True,
    group_bias: bool = True,
    likelihood: str = "gaussian",
    n_trials: int = 9,
    marginal: bool = False,
    coefficients: bool = False,
    eig: Any = None,
) -> None:
    """NumPyro model of the hierarchical group-bias model (module docstring).

    Sites: ``beta_bar [d]``; the arms' true coefficients ``beta [n, d]`` (with
    ``noncentered_beta=True``, the default, the sampled site is ``z [n, d]`` ~ N(0, 1) and
    ``beta = beta_bar + tau z`` is deterministic; with ``False`` ``beta ~ N(beta_bar, tau^2 I)`` is
    sampled); ``psi [m - 1, d]`` (the non-reference groups, in group order) and the deterministic
    ``psi_all [m, d]`` (reference row 0); ``tau``, ``s``, ``sigma`` when not fixed (half-normal
    priors with scales ``tau_scale``, ``s_scale``, ``sigma_scale``; defaults :data:`DEFAULT_PRIORS`);
    observed ``y``. With ``noncentered_psi=True`` the sampled site is ``psi_z [m - 1, d]`` ~ N(0, 1)
    and ``psi = s psi_z`` is deterministic (the same joint distribution of the other sites).
    ``group_bias=False`` is the model without bias (psi = 0: no ``psi``/``s`` sites, ``psi_all``
    all zeros), for model comparison.

    Likelihood of an observation with linear predictor eta = x . (beta_i + psi_g(i)) (Eq. 2 of
    group_fairness_biased_feedback_aamas2022 is the Gaussian one, with sigma = 1):
    ``"gaussian"``: y ~ N(eta, sigma^2); ``"bernoulli"``: y in {0, 1} ~ Bernoulli(sigmoid(eta));
    ``"binomial"``: y in {0..n_trials} ~ Binomial(n_trials, sigmoid(eta)) (e.g. a score 1..10 as
    y = score - 1 with n_trials = 9). sigma only exists for the Gaussian.

    With ``sufficient=True`` (Gaussian only, requires ``y``) the likelihood enters as a factor of
    the per-arm sufficient statistics (identical posterior, cost independent of N); ``stats`` may
    pass precomputed :func:`sufficient_stats`.

    With ``marginal=True`` (Gaussian with ``sufficient=True`` only) the coefficients are
    integrated out: the density of the sampled scales is the exact marginal likelihood
    (``numpyro.factor("y_marginal", ...)``, :func:`marginal_gaussian`) and the coefficients are
    exact conditional draws from standard-normal sites ``phi_z [p]`` and ``beta_z [n, d]``
    (:func:`marginal_draw`); ``beta_bar``, ``beta``, ``psi`` and ``psi_all`` are deterministic.
    ``eig``: the per-arm eigen-decomposition of X_i'X_i (:func:`gram_eigen`, precomputed once on
    the host; computed in the model otherwise, which is slow for large d).
    The joint distribution of (scales, coefficients) given y is the same posterior; NUTS only has
    to explore the scales (the coefficients' sites are independent N(0, 1)), which removes both
    funnels and the ridge between beta_i and psi_g(i) that the likelihood alone cannot resolve.

    With ``coefficients=True`` (any likelihood) the sampled site is the arms' observed
    coefficients ``coef_t [d, n]`` (c_i = beta_i + psi_g(i), what the data identify), from their
    prior given the scales with beta_bar and psi integrated out (per coordinate, c ~ N(m0 1,
    E diag(prior_sd^2, s^2 ..) E' + tau^2 I), :func:`coefficient_prior`); then (beta_bar, psi) |
    c, tau, s is Gaussian and drawn exactly from standard-normal sites ``phi_z [B, d]``, and
    beta_i = c_i - psi_g(i) (:func:`coefficient_draw`). Same joint distribution; NUTS moves the
    scales and c only, so the ridge along which beta_i and psi trade off is gone.
    """
    import numpyro
    import numpyro.distributions as dist

    check_likelihood(likelihood, n_trials=n_trials)
    labels = np.asarray(group_of_arm, np.int32)
    n = labels.size
    m = int(labels.max()) + 1
    others = np.array([g for g in range(m) if g != reference], np.int32)
    group_slot = np.full(m, -1, np.int32)
    group_slot[others] = np.arange(m - 1)
    X = jnp.asarray(X)
    d = X.shape[-1]
    m0 = jnp.broadcast_to(jnp.asarray(prior_mean, X.dtype), (d,))

    tau_v = numpyro.sample("tau", dist.HalfNormal(tau_scale)) if tau is None else tau
    if group_bias:
        s_v = numpyro.sample("s", dist.HalfNormal(s_scale)) if s is None else s
    if likelihood == "gaussian":
        sigma_v = numpyro.sample("sigma", dist.HalfNormal(sigma_scale)) if sigma is None else sigma
    if marginal:
        if likelihood != "gaussian" or not sufficient or y is None:
            raise ValueError("marginal=True is the Gaussian likelihood's form with sufficient=True and observed y; "
                             f"got likelihood={likelihood!r}, sufficient={sufficient}, "
                             f"y {'given' if y is not None else 'None'}")
        st = stats if stats is not None else sufficient_stats(arms, X, y, n)
        mg = marginal_gaussian(st, labels, reference=reference, tau=tau_v, s=s_v if group_bias else 1.0,
                               sigma=sigma_v, prior_mean=m0, prior_sd=prior_sd, group_bias=group_bias, eig=eig)
        numpyro.factor("y_marginal", mg.log_marginal)
        phi_z = numpyro.sample("phi_z", dist.Normal(jnp.zeros(mg.phi_mean.shape, X.dtype), 1.0).to_event(1))
        beta_z = numpyro.sample("beta_z", dist.Normal(jnp.zeros((n, d), X.dtype), 1.0).to_event(2))
        _record_coefficients(*marginal_draw(mg, tau_v, phi_z, beta_z), group_slot, group_bias)
        return
    if coefficients:
        coef = _coefficient_form(labels, reference, group_bias, tau_v, s_v if group_bias else 1.0, m0, prior_sd,
                                 X.dtype, group_slot)
    else:
        beta_bar = numpyro.sample("beta_bar", dist.Normal(m0, prior_sd).to_event(1))
        if noncentered_beta:
            z = numpyro.sample("z", dist.Normal(jnp.zeros((n, d), X.dtype), 1.0).to_event(2))
            beta = numpyro.deterministic("beta", beta_bar + tau_v * z)
        else:
            beta = numpyro.sample("beta", dist.Normal(jnp.broadcast_to(beta_bar, (n, d)), tau_v).to_event(2))
        if not group_bias:
            psi_all = numpyro.deterministic("psi_all", jnp.zeros((m, d), X.dtype))
        else:
            if noncentered_psi:
                psi_z = numpyro.sample("psi_z", dist.Normal(jnp.zeros((m - 1, d), X.dtype), 1.0).to_event(2))
                psi = numpyro.deterministic("psi", s_v * psi_z)
            else:
                psi = numpyro.sample("psi", dist.Normal(jnp.zeros((m - 1, d), X.dtype), s_v).to_event(2))
            psi_all = numpyro.deterministic("psi_all",
                                            jnp.concatenate([jnp.zeros((1, d), X.dtype), psi])[group_slot + 1])
        coef = beta + psi_all[labels]  # [n, d]: observed (biased) coefficients of every arm
    if sufficient:
        if likelihood != "gaussian":
            raise ValueError(f"sufficient=True is the Gaussian likelihood's form, got likelihood={likelihood!r}")
        if y is None:
            raise ValueError("sufficient=True needs the observed rewards y")
        count, xx, xy, yy = stats if stats is not None else sufficient_stats(arms, X, y, n)
        quad = yy - 2.0 * jnp.sum(coef * xy, -1) + jnp.einsum("ad,ade,ae->a", coef, xx, coef)
        loglik = -0.5 * jnp.sum(count) * jnp.log(2.0 * jnp.pi * sigma_v**2) - 0.5 * jnp.sum(quad) / sigma_v**2
        numpyro.factor("y", loglik)
        return
    eta = jnp.sum(X * coef[jnp.asarray(arms, jnp.int32)], -1)
    with numpyro.plate("obs", X.shape[0]):
        numpyro.sample("y", observation_dist(likelihood, eta, sigma_v if likelihood == "gaussian" else None,
                                             n_trials), obs=y)


def _record_coefficients(beta_bar: Any, beta: Any, psi: Any, group_slot: np.ndarray, group_bias: bool) -> None:
    """Record the deterministic sites ``beta_bar``, ``beta``, ``psi`` and ``psi_all`` of the marginal and
    coefficient forms (``group_slot[g]``: row of group g in ``psi``, -1 for the reference group)."""
    import numpyro

    numpyro.deterministic("beta_bar", beta_bar)
    numpyro.deterministic("beta", beta)
    d, dtype = beta.shape[-1], beta.dtype
    if group_bias:
        numpyro.deterministic("psi", psi)
        numpyro.deterministic("psi_all", jnp.concatenate([jnp.zeros((1, d), dtype), psi])[group_slot + 1])
    else:
        numpyro.deterministic("psi_all", jnp.zeros((group_slot.size, d), dtype))


def _coefficient_form(labels: np.ndarray, reference: int, group_bias: bool, tau: Any, s: Any, m0: Any,
                      prior_sd: Any, dtype: Any, group_slot: np.ndarray) -> Any:
    """The sites of ``group_bias_model(coefficients=True)``; returns coef [n, d]."""
    import numpyro
    import numpyro.distributions as dist

    mean, chol, E = coefficient_prior(labels, reference, tau=tau, s=s, prior_mean=m0, prior_sd=prior_sd,
                                      group_bias=group_bias, dtype=dtype)
    coef_t = numpyro.sample("coef_t", dist.MultivariateNormal(mean, scale_tril=chol).to_event(1))
    phi_z = numpyro.sample("phi_z", dist.Normal(jnp.zeros((E.shape[1], m0.shape[0]), dtype), 1.0).to_event(2))
    _record_coefficients(*coefficient_draw(coef_t, E, phi_z, tau=tau, s=s, prior_mean=m0, prior_sd=prior_sd),
                         group_slot, group_bias)
    return coef_t.T


def observation_dist(likelihood: str, eta: Any, sigma: Any = None, n_trials: int = 9):
    """The NumPyro distribution of one observation given its linear predictor ``eta``."""
    import numpyro.distributions as dist

    if likelihood == "gaussian":
        return dist.Normal(eta, sigma)
    if likelihood == "bernoulli":
        return dist.Bernoulli(logits=eta)
    if likelihood == "binomial":
        return dist.Binomial(total_count=int(n_trials), logits=eta)
    raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
