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
:func:`fit_nuts` runs it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.linalg import solve_triangular

from bayesfair._validate import finite_array, positive_float, positive_int
from bayesfair.posteriors.linear import chol_rank_one_update

__all__ = [
    "GroupBiasData",
    "GroupBiasDraw",
    "GroupBiasLayout",
    "GroupBiasPosterior",
    "GroupBiasState",
    "CollapsedState",
    "NutsFit",
    "batch_group_bias",
    "check_bias_groups",
    "fit_group_bias",
    "fit_nuts",
    "group_bias_data",
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


# --------------------------------------------------------------------------------------------
# layout and validation


def check_bias_groups(group_of_arm: Any, *, reference: int = 0, min_arms: int = 2,
                      n_groups: int | None = None, what: str = "group_of_arm") -> tuple[np.ndarray, int, int]:
    """Validate an arm -> group map for the biased-feedback model.

    Returns ``(labels int32 [n], m, reference)``. Every group 0..m-1 must hold at least
    ``min_arms`` arms (the paper requires |P_j| > 1 for every group, Section 3) and ``reference``
    must be one of the groups; there must be at least two groups (otherwise there is no bias).
    """
    arr = np.asarray(group_of_arm)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{what} must be a non-empty 1-d sequence of group indices, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise TypeError(f"{what} must hold integer group indices, got dtype {arr.dtype}")
    if arr.min() < 0:
        raise ValueError(f"{what} must be >= 0, got {arr.min()}")
    m = int(arr.max()) + 1 if n_groups is None else positive_int("n_groups", n_groups)
    if arr.max() >= m:
        raise ValueError(f"{what} has group {int(arr.max())} but there are only {m} groups")
    if m < 2:
        raise ValueError(f"the biased-feedback model needs at least 2 groups (one reference group), got {m}")
    counts = np.bincount(arr, minlength=m)
    small = np.flatnonzero(counts < min_arms)
    if small.size:
        g = int(small[0])
        raise ValueError(f"every group needs at least {min_arms} arms (the paper requires |P_j| > 1); "
                         f"group {g} has {int(counts[g])}")
    if isinstance(reference, bool) or not isinstance(reference, (int, np.integer)):
        raise TypeError(f"reference must be an integer group index, got {reference!r}")
    if not 0 <= int(reference) < m:
        raise ValueError(f"reference must be a group index in [0, {m - 1}], got {reference}")
    return arr.astype(np.int32), m, int(reference)


class GroupBiasLayout(NamedTuple):
    """Static shape information of the joint parameter theta (plain Python / numpy).

    theta = [beta_bar (d) | beta_1 .. beta_n (n d) | psi for the non-reference groups ((m-1) d)].
    ``slot[i]`` is the psi block of arm i's group (``-1`` for the reference group) and
    ``group_slot[g]`` the block of group g (``-1`` for the reference).
    """

    n_arms: int
    n_groups: int
    n_features: int
    reference: int
    group_of_arm: np.ndarray
    slot: np.ndarray
    group_slot: np.ndarray

    @property
    def dim(self) -> int:
        return (self.n_arms + self.n_groups) * self.n_features

    def beta_offset(self, arm: Any) -> Any:
        return (1 + arm) * self.n_features

    def psi_offset(self, slot: Any) -> Any:
        return (1 + self.n_arms + slot) * self.n_features


def group_bias_layout(group_of_arm: Any, n_features: int, *, reference: int = 0,
                      min_arms: int = 1) -> GroupBiasLayout:
    """Build the :class:`GroupBiasLayout` (validates the groups; ``min_arms`` arms per group)."""
    labels, m, ref = check_bias_groups(group_of_arm, reference=reference, min_arms=min_arms)
    d = positive_int("n_features", n_features)
    group_slot = np.full(m, -1, np.int32)
    others = [g for g in range(m) if g != ref]
    group_slot[others] = np.arange(m - 1, dtype=np.int32)
    return GroupBiasLayout(int(labels.size), m, d, ref, labels, group_slot[labels], group_slot)


class GroupBiasDraw(NamedTuple):
    """Coefficients of the group-bias model: ``beta_bar [d]``, ``beta [n, d]`` (true
    coefficients of every arm) and ``psi [m, d]`` (the bias of every group; the reference row is 0)."""

    beta_bar: Any
    beta: Any
    psi: Any


def unpack(layout: GroupBiasLayout, theta: Any) -> GroupBiasDraw:
    """Split a joint vector theta ``[..., D]`` into a :class:`GroupBiasDraw` (works on jax and numpy)."""
    return _unpack(theta, layout.n_arms, layout.n_groups, layout.group_slot)


def _unpack(theta: Any, n: int, m: int, group_slot: Any) -> GroupBiasDraw:
    xp = np if isinstance(theta, np.ndarray) else jnp
    d = theta.shape[-1] // (n + m)
    lead = theta.shape[:-1]
    beta_bar = theta[..., :d]
    beta = theta[..., d:(1 + n) * d].reshape(*lead, n, d)
    psi_nonref = theta[..., (1 + n) * d:].reshape(*lead, m - 1, d)
    rows = xp.concatenate([xp.zeros((*lead, 1, d), theta.dtype), psi_nonref], axis=-2)
    psi = rows[..., group_slot + 1, :]
    return GroupBiasDraw(beta_bar, beta, psi)


# --------------------------------------------------------------------------------------------
# conjugate path: the joint state


class GroupBiasState(NamedTuple):
    """Joint conjugate state: the lower Cholesky factor ``chol [D, D]`` of the posterior
    precision Lambda, ``eta = Lambda mean [D]``, ``slot [n]`` (int32 psi block of each arm's
    group), ``group_slot [m]`` (psi block of each group; -1 marks the reference group) and the
    noise sd ``sigma`` (0-d). The layout lives in the state, so the ``state_*`` functions need
    nothing else (e.g. inside a policy)."""

    chol: jax.Array
    eta: jax.Array
    slot: jax.Array
    group_slot: jax.Array
    sigma: jax.Array


class CollapsedState(NamedTuple):
    """Collapsed conjugate state (the same posterior, for large d; module docstring).

    Per arm: ``chol_q [n, d, d]`` lower Cholesky factor of Q_i = I + tau^2 X_i'X_i / sigma^2,
    ``r [n, d]`` = X_i'y_i / sigma^2, and the cached ``k [n, d, d]`` = (I - Q_i^-1) / tau^2 and
    ``h [n, d]`` = Q_i^-1 r_i (the information arm i's data carry about mu_i = beta_bar +
    psi_g(i) once beta_i is integrated out). ``phi_prec0 [p]`` / ``phi_eta0 [p]``: the prior
    precision (diagonal) and eta of phi = (beta_bar, psi of the non-reference groups), p = m d;
    ``slot``, ``group_slot``, ``tau``, ``sigma`` as in :class:`GroupBiasState`."""

    chol_q: jax.Array
    r: jax.Array
    k: jax.Array
    h: jax.Array
    slot: jax.Array
    group_slot: jax.Array
    phi_prec0: jax.Array
    phi_eta0: jax.Array
    tau: jax.Array
    sigma: jax.Array


class GroupBiasPosterior(NamedTuple):
    """The conjugate group-bias family for one arm -> group layout (see the module docstring).

    Attributes
    ----------
    layout : GroupBiasLayout
    method : str
        ``"joint"`` (:class:`GroupBiasState`) or ``"collapsed"`` (:class:`CollapsedState`).
    init : callable
        ``init() -> state``: the prior.
    update : callable
        ``update(state, arm, x [d], y) -> state``: one observation (rank-one update).
    sample : callable
        ``sample(key, state) -> GroupBiasDraw``: one exact joint posterior draw.
    mean : callable
        ``mean(state) -> GroupBiasDraw``: posterior means.
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
    """

    layout: GroupBiasLayout
    method: str
    init: Callable[[], Any]
    update: Callable[[Any, Any, Any, Any], Any]
    sample: Callable[[jax.Array, Any], GroupBiasDraw]
    mean: Callable[[Any], GroupBiasDraw]
    theta_mean: Callable[[Any], jax.Array]
    theta_cov: Callable[[Any], jax.Array]
    psi_cov: Callable[[Any], jax.Array]
    model: Callable[..., None]
    prior_precision: np.ndarray
    prior_eta: np.ndarray
    params: dict[str, Any]


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


def _design_row(dim: int, n_arms: int, arm: Any, x: Any, slot: Any) -> jax.Array:
    """The row z [D] of one observation: x in arm's beta block and in its group's psi block."""
    x = jnp.asarray(x, jnp.float32)
    d = x.shape[0]
    z = lax.dynamic_update_slice(jnp.zeros((dim,), jnp.float32), x, ((1 + arm) * d,))
    psi_part = lax.dynamic_update_slice(jnp.zeros((dim,), jnp.float32), x, ((1 + n_arms + jnp.maximum(slot, 0)) * d,))
    return z + jnp.where(slot >= 0, psi_part, 0.0)


def _lower_solve(chol: jax.Array, v: jax.Array) -> jax.Array:
    return solve_triangular(chol, v, lower=True)


def _upper_solve(chol: jax.Array, v: jax.Array) -> jax.Array:
    """L^-T v."""
    return solve_triangular(chol, v, lower=True, trans=1)


def _chol_inverse(chol: jax.Array) -> jax.Array:
    inv_l = _lower_solve(chol, jnp.eye(chol.shape[-1], dtype=chol.dtype))
    return inv_l.T @ inv_l


# joint ------------------------------------------------------------------------------------------


def _joint_update(state: GroupBiasState, arm: Any, x: Any, y: Any) -> GroupBiasState:
    arm = jnp.asarray(arm, jnp.int32)
    z = _design_row(state.eta.shape[0], state.slot.shape[0], arm, x, state.slot[arm]) / state.sigma
    y_s = jnp.asarray(y, jnp.float32) / state.sigma
    return state._replace(chol=chol_rank_one_update(state.chol, z), eta=state.eta + z * y_s)


def _joint_theta_mean(state: GroupBiasState) -> jax.Array:
    return _upper_solve(state.chol, _lower_solve(state.chol, state.eta))


def _joint_psi_cov(state: GroupBiasState) -> jax.Array:
    n, m = state.slot.shape[0], state.group_slot.shape[0]
    dim = state.eta.shape[0]
    d = dim // (n + m)
    start = (1 + n) * d
    sel = jnp.zeros((dim, (m - 1) * d), state.chol.dtype).at[start:, :].set(jnp.eye((m - 1) * d))
    w = _lower_solve(state.chol, sel)
    return _psi_blocks((w.T @ w), m, d, state.group_slot)


def _psi_blocks(cov_psi: jax.Array, m: int, d: int, group_slot: jax.Array) -> jax.Array:
    """[m, d, d] diagonal blocks of the ((m-1) d)^2 covariance of the non-reference psi (ref: zeros)."""
    cov = cov_psi.reshape(m - 1, d, m - 1, d)
    blocks = jnp.stack([cov[j, :, j, :] for j in range(m - 1)])
    rows = jnp.concatenate([jnp.zeros((1, d, d), blocks.dtype), blocks])
    return rows[group_slot + 1]


# collapsed --------------------------------------------------------------------------------------


def _collapsed_refresh(chol_q: jax.Array, r: jax.Array, tau: jax.Array) -> tuple[jax.Array, jax.Array]:
    """k = (I - Q^-1) / tau^2 (symmetrized) and h = Q^-1 r for one arm, from the factor of Q."""
    q_inv = _chol_inverse(chol_q)
    k = (jnp.eye(q_inv.shape[0], dtype=q_inv.dtype) - q_inv) / (tau * tau)
    return 0.5 * (k + k.T), q_inv @ r


def _collapsed_update(state: CollapsedState, arm: Any, x: Any, y: Any) -> CollapsedState:
    arm = jnp.asarray(arm, jnp.int32)
    x = jnp.asarray(x, jnp.float32)
    chol = chol_rank_one_update(state.chol_q[arm], (state.tau / state.sigma) * x)
    r = state.r[arm] + x * (jnp.asarray(y, jnp.float32) / (state.sigma * state.sigma))
    k, h = _collapsed_refresh(chol, r, state.tau)
    return state._replace(chol_q=state.chol_q.at[arm].set(chol), r=state.r.at[arm].set(r),
                          k=state.k.at[arm].set(k), h=state.h.at[arm].set(h))


def _phi_system(state: CollapsedState) -> tuple[jax.Array, jax.Array]:
    """Precision P [p, p] and eta [p] of phi = (beta_bar, psi_nonref) given all data (beta integrated out).

    mu_i = beta_bar + psi_g(i) = E_i phi; P = P_0 + sum_i E_i' k_i E_i, eta = eta_0 + sum_i E_i' h_i.
    """
    m = state.group_slot.shape[0]
    d = state.r.shape[1]
    onehot = jax.nn.one_hot(state.slot, m - 1, dtype=state.k.dtype)  # reference arms: all zeros
    k_slot = jnp.einsum("nj,nab->jab", onehot, state.k)
    h_slot = jnp.einsum("nj,na->ja", onehot, state.h)
    prec = jnp.diag(state.phi_prec0)
    prec = prec.at[:d, :d].add(jnp.sum(state.k, axis=0))
    for j in range(m - 1):
        o = (1 + j) * d
        prec = prec.at[:d, o:o + d].add(k_slot[j]).at[o:o + d, :d].add(k_slot[j]).at[o:o + d, o:o + d].add(k_slot[j])
    eta = state.phi_eta0 + jnp.concatenate([jnp.sum(state.h, axis=0), h_slot.reshape(-1)])
    return prec, eta


def _mu_of(phi: jax.Array, state: CollapsedState) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """(beta_bar [d], psi [m, d], psi of each arm's group [n, d], mu = beta_bar + psi_g(i) [n, d]) from phi."""
    m, d = state.group_slot.shape[0], state.r.shape[1]
    beta_bar = phi[:d]
    rows = jnp.concatenate([jnp.zeros((1, d), phi.dtype), phi[d:].reshape(m - 1, d)])
    psi_arm = rows[state.slot + 1]
    return beta_bar, rows[state.group_slot + 1], psi_arm, beta_bar + psi_arm


def _q_solve(chol_q: jax.Array, v: jax.Array) -> jax.Array:
    """Q_i^-1 v_i for every arm."""
    return jax.vmap(lambda c, w: _upper_solve(c, _lower_solve(c, w)))(chol_q, v)


def _collapsed_sample(key: jax.Array, state: CollapsedState) -> tuple[GroupBiasDraw, jax.Array]:
    """One joint draw and the posterior mean of psi [m, d] (sharing phi's Cholesky factor)."""
    k_phi, k_beta = jax.random.split(key)
    prec, eta = _phi_system(state)
    chol_p = jnp.linalg.cholesky(prec)
    white = _lower_solve(chol_p, eta)
    phi_mean = _upper_solve(chol_p, white)
    phi = phi_mean + _upper_solve(chol_p, jax.random.normal(k_phi, eta.shape, eta.dtype))
    beta_bar, psi, psi_arm, mu = _mu_of(phi, state)
    noise = jax.vmap(_upper_solve)(state.chol_q, jax.random.normal(k_beta, state.r.shape, state.r.dtype))
    coef = _q_solve(state.chol_q, mu) + state.tau**2 * state.h + state.tau * noise  # c_i = beta_i + psi_g(i)
    return GroupBiasDraw(beta_bar, coef - psi_arm, psi), _mu_of(phi_mean, state)[1]


def _collapsed_phi_mean(state: CollapsedState) -> jax.Array:
    prec, eta = _phi_system(state)
    chol_p = jnp.linalg.cholesky(prec)
    return _upper_solve(chol_p, _lower_solve(chol_p, eta))


def _collapsed_mean(state: CollapsedState) -> GroupBiasDraw:
    beta_bar, psi, psi_arm, mu = _mu_of(_collapsed_phi_mean(state), state)
    return GroupBiasDraw(beta_bar, _q_solve(state.chol_q, mu) + state.tau**2 * state.h - psi_arm, psi)


def _collapsed_psi_cov(state: CollapsedState) -> jax.Array:
    m, d = state.group_slot.shape[0], state.r.shape[1]
    prec, _ = _phi_system(state)
    return _psi_blocks(_chol_inverse(jnp.linalg.cholesky(prec))[d:, d:], m, d, state.group_slot)


def _collapsed_theta_cov(state: CollapsedState) -> jax.Array:
    """Dense joint covariance of theta = (beta_bar, beta_1..n, psi) (for checks; O(D^2) memory)."""
    n, d = state.r.shape
    m = state.group_slot.shape[0]
    prec, _ = _phi_system(state)
    cov_phi = _chol_inverse(jnp.linalg.cholesky(prec))  # [p, p]
    onehot = jax.nn.one_hot(state.slot, m - 1, dtype=prec.dtype)
    e = jnp.concatenate([jnp.broadcast_to(jnp.eye(d), (n, d, d)),
                         jnp.einsum("nj,ab->najb", onehot, jnp.eye(d)).reshape(n, d, (m - 1) * d)], axis=2)
    q_inv = jax.vmap(_chol_inverse)(state.chol_q)
    f = e.at[:, :, :d].set(0.0)  # selects psi_g(i)
    a = jnp.einsum("nab,nbp->nap", q_inv, e) - f  # d E[beta_i | phi] / d phi
    cov_bp = jnp.einsum("nap,pq->naq", a, cov_phi)
    cov_bb = jnp.einsum("naq,mbq->namb", cov_bp, a) + jnp.einsum("nm,nab->namb", jnp.eye(n),
                                                                  state.tau**2 * q_inv)
    dim = (n + m) * d
    out = jnp.zeros((dim, dim), prec.dtype)
    out = out.at[:d, :d].set(cov_phi[:d, :d]).at[:d, (1 + n) * d:].set(cov_phi[:d, d:])
    out = out.at[(1 + n) * d:, :d].set(cov_phi[d:, :d]).at[(1 + n) * d:, (1 + n) * d:].set(cov_phi[d:, d:])
    cb = cov_bp.reshape(n * d, -1)
    out = out.at[d:(1 + n) * d, :d].set(cb[:, :d]).at[d:(1 + n) * d, (1 + n) * d:].set(cb[:, d:])
    out = out.at[:d, d:(1 + n) * d].set(cb[:, :d].T).at[(1 + n) * d:, d:(1 + n) * d].set(cb[:, d:].T)
    return out.at[d:(1 + n) * d, d:(1 + n) * d].set(cov_bb.reshape(n * d, n * d))


def pack(layout: GroupBiasLayout, draw: GroupBiasDraw) -> jax.Array:
    """The joint vector theta ``[D]`` of a :class:`GroupBiasDraw` (inverse of :func:`unpack`)."""
    order = sorted((g for g in range(layout.n_groups) if layout.group_slot[g] >= 0),
                   key=lambda g: int(layout.group_slot[g]))
    psi = jnp.stack([draw.psi[g] for g in order]).reshape(-1)
    return jnp.concatenate([draw.beta_bar, draw.beta.reshape(-1), psi])


# dispatch ---------------------------------------------------------------------------------------


def state_update(state: Any, arm: Any, x: Any, y: Any) -> Any:
    """One observation (arm, x, y): a rank-one update of the state's natural parameters."""
    return _collapsed_update(state, arm, x, y) if isinstance(state, CollapsedState) else \
        _joint_update(state, arm, x, y)


def state_sample(key: jax.Array, state: Any) -> GroupBiasDraw:
    """One exact joint posterior draw of (beta_bar, beta, psi)."""
    return state_sample_with_psi_mean(key, state)[0]


def state_sample_with_psi_mean(key: jax.Array, state: Any) -> tuple[GroupBiasDraw, jax.Array]:
    """One exact joint draw and the posterior mean of psi ``[m, d]``, sharing the factorization."""
    if isinstance(state, CollapsedState):
        return _collapsed_sample(key, state)
    white = _lower_solve(state.chol, state.eta)
    mean = _upper_solve(state.chol, white)
    theta = mean + _upper_solve(state.chol, jax.random.normal(key, state.eta.shape, state.eta.dtype))
    return state_unpack(state, theta), state_unpack(state, mean).psi


def state_mean(state: Any) -> GroupBiasDraw:
    """Posterior means of (beta_bar, beta, psi)."""
    if isinstance(state, CollapsedState):
        return _collapsed_mean(state)
    return state_unpack(state, _joint_theta_mean(state))


def state_psi_mean(state: Any) -> jax.Array:
    """Posterior mean of psi ``[m, d]`` (cheaper than :func:`state_mean` for the collapsed state)."""
    if isinstance(state, CollapsedState):
        return _mu_of(_collapsed_phi_mean(state), state)[1]
    return state_mean(state).psi


def state_psi_cov(state: Any) -> jax.Array:
    """Posterior covariance of every group's psi, ``[m, d, d]`` (zeros for the reference group)."""
    return _collapsed_psi_cov(state) if isinstance(state, CollapsedState) else _joint_psi_cov(state)


def state_unpack(state: GroupBiasState, theta: Any) -> GroupBiasDraw:
    """Split a joint theta into (beta_bar, beta [n, d], psi [m, d]) with the layout kept in the state."""
    return _unpack(theta, state.slot.shape[0], state.group_slot.shape[0], state.group_slot)


def group_bias_posterior(
    group_of_arm: Any,
    n_features: int,
    *,
    tau: float = 1.0,
    s: float = 10.0,
    sigma: float = 1.0,
    prior_mean: Any = 0.0,
    prior_sd: float = 10.0,
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
    """
    layout = group_bias_layout(group_of_arm, n_features, reference=reference)
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

    if method == "joint":
        chol0 = np.linalg.cholesky(lam0)

        def init() -> GroupBiasState:
            return GroupBiasState(jnp.asarray(chol0, f32), jnp.asarray(eta0, f32), jnp.asarray(layout.slot),
                                  jnp.asarray(layout.group_slot), jnp.asarray(sigma, f32))

        def theta_mean(state):
            return _joint_theta_mean(state)

        def theta_cov(state):
            return _chol_inverse(state.chol)
    else:
        prec0 = np.r_[np.full(d, 1.0 / v0), np.full((m - 1) * d, 1.0 / s**2)]
        phi_eta0 = np.r_[m0 / v0, np.zeros((m - 1) * d)]

        def init() -> CollapsedState:
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

    return GroupBiasPosterior(layout, method, init, state_update, state_sample, state_mean, theta_mean, theta_cov,
                              state_psi_cov, model, lam0, eta0, params)


def fit_group_bias(posterior: GroupBiasPosterior, arms: Any, X: Any, y: Any) -> Any:
    """Posterior state after the observations ``(arms[k], X[k], y[k])`` in order, by repeated
    rank-one updates (a ``lax.scan``; jit/vmap friendly)."""
    if not isinstance(posterior, GroupBiasPosterior):
        raise TypeError(f"posterior must be a GroupBiasPosterior (group_bias_posterior(...)), got {posterior!r}")
    arms = jnp.asarray(arms, jnp.int32)
    X = jnp.asarray(X, jnp.float32)
    y = jnp.asarray(y, jnp.float32)

    def step(state, obs):
        a, x, r = obs
        return posterior.update(state, a, x, r), None

    state, _ = lax.scan(step, posterior.init(), (arms, X, y))
    return state


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
    """Validate observations for :func:`fit_nuts` (clear errors naming the bad field)."""
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
        return out

    return GroupBiasData(a.astype(np.int32), X, y, labels, ref, names("arm_names", arm_names, n),
                         names("group_names", group_names, m), names("feature_names", feature_names, X.shape[1]))


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
    tau_scale: float = 1.0,
    s_scale: float = 1.0,
    sigma_scale: float = 1.0,
    prior_mean: Any = 0.0,
    prior_sd: float = 10.0,
    sufficient: bool = False,
    stats: Any = None,
    noncentered_psi: bool = False,
) -> None:
    """NumPyro model of the hierarchical group-bias model (module docstring).

    Sites: ``beta_bar [d]``; ``z [n, d]`` with the deterministic ``beta = beta_bar + tau z``
    (true coefficients of every arm); ``psi [m - 1, d]`` (the non-reference groups, in group
    order) and the deterministic ``psi_all [m, d]`` (reference row 0); ``tau``, ``s``, ``sigma``
    when not fixed (half-normal priors with scales ``tau_scale``, ``s_scale``, ``sigma_scale``);
    observed ``y``. With ``sufficient=True`` (requires ``y``) the Gaussian likelihood enters as a
    factor of the per-arm sufficient statistics (identical posterior, cost independent of N);
    ``stats`` may pass precomputed :func:`sufficient_stats`. With ``noncentered_psi=True`` the
    sampled site is ``psi_z [m - 1, d]`` ~ N(0, 1) and ``psi = s psi_z`` is deterministic (the
    same joint distribution of the other sites; see the module docstring).
    """
    import numpyro
    import numpyro.distributions as dist

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
    s_v = numpyro.sample("s", dist.HalfNormal(s_scale)) if s is None else s
    sigma_v = numpyro.sample("sigma", dist.HalfNormal(sigma_scale)) if sigma is None else sigma
    beta_bar = numpyro.sample("beta_bar", dist.Normal(m0, prior_sd).to_event(1))
    z = numpyro.sample("z", dist.Normal(jnp.zeros((n, d)), 1.0).to_event(2))
    beta = numpyro.deterministic("beta", beta_bar + tau_v * z)
    if noncentered_psi:
        psi_z = numpyro.sample("psi_z", dist.Normal(jnp.zeros((m - 1, d)), 1.0).to_event(2))
        psi = numpyro.deterministic("psi", s_v * psi_z)
    else:
        psi = numpyro.sample("psi", dist.Normal(jnp.zeros((m - 1, d)), s_v).to_event(2))
    psi_all = numpyro.deterministic("psi_all", jnp.concatenate([jnp.zeros((1, d)), psi])[group_slot + 1])
    coef = beta + psi_all[labels]  # [n, d]: observed (biased) coefficients of every arm
    if sufficient:
        if y is None:
            raise ValueError("sufficient=True needs the observed rewards y")
        count, xx, xy, yy = stats if stats is not None else sufficient_stats(arms, X, y, n)
        quad = yy - 2.0 * jnp.sum(coef * xy, -1) + jnp.einsum("ad,ade,ae->a", coef, xx, coef)
        loglik = -0.5 * jnp.sum(count) * jnp.log(2.0 * jnp.pi * sigma_v**2) - 0.5 * jnp.sum(quad) / sigma_v**2
        numpyro.factor("y", loglik)
        return
    mean = jnp.sum(X * coef[jnp.asarray(arms, jnp.int32)], -1)
    with numpyro.plate("obs", X.shape[0]):
        numpyro.sample("y", dist.Normal(mean, sigma_v), obs=y)


class NutsFit(NamedTuple):
    """Result of :func:`fit_nuts`: ``samples`` name -> ``[chains, draws, ...]`` numpy arrays
    (``beta``, ``psi_all``, ``beta_bar``, ``psi``, ``z``, ``psi_z`` with ``noncentered_psi``, and the
    scales that were sampled),
    ``diverging [chains, draws]`` bool, ``seconds`` wall time, ``config`` the settings."""

    samples: dict[str, np.ndarray]
    diverging: np.ndarray
    seconds: float
    config: dict[str, Any]


def fit_nuts(
    data: GroupBiasData,
    *,
    tau: float | None = None,
    s: float | None = None,
    sigma: float | None = None,
    tau_scale: float = 1.0,
    s_scale: float = 1.0,
    sigma_scale: float = 1.0,
    prior_mean: Any = 0.0,
    prior_sd: float = 10.0,
    num_warmup: int = 500,
    num_samples: int = 500,
    num_chains: int = 2,
    seed: int = 0,
    sufficient: bool = True,
    target_accept: float = 0.8,
    progress_bar: bool = False,
    noncentered_psi: bool = False,
) -> NutsFit:
    """Fit the hierarchical group-bias model by NUTS (scales fixed or half-normal).

    Parameters
    ----------
    data : GroupBiasData
        From :func:`group_bias_data`.
    tau, s, sigma : float, optional
        Fix a scale; ``None`` (default) gives it a HalfNormal(``<name>_scale``) prior.
    prior_mean, prior_sd :
        Prior N(m0, prior_sd^2 I) of beta_bar.
    num_warmup, num_samples, num_chains, seed :
        NUTS settings (chains run sequentially unless the host exposes several devices, see
        :func:`bayesfair.set_host_devices`).
    sufficient : bool
        Write the likelihood through per-arm sufficient statistics (same posterior, faster).
    noncentered_psi : bool
        Sample psi as s times a standard normal (same posterior; better mixing of s when the data
        say little about psi, see :func:`group_bias_model`).
    """
    from numpyro.infer import MCMC, NUTS

    if not isinstance(data, GroupBiasData):
        raise TypeError(f"data must be GroupBiasData (see group_bias_data), got {type(data).__name__}")
    for name, v in (("tau", tau), ("s", s), ("sigma", sigma)):
        if v is not None:
            positive_float(name, v)
    for name, v in (("tau_scale", tau_scale), ("s_scale", s_scale), ("sigma_scale", sigma_scale),
                    ("prior_sd", prior_sd)):
        positive_float(name, v)
    num_warmup = positive_int("num_warmup", num_warmup)
    num_samples = positive_int("num_samples", num_samples)
    num_chains = positive_int("num_chains", num_chains)
    kwargs = dict(group_of_arm=data.group_of_arm, reference=data.reference, tau=tau, s=s, sigma=sigma,
                  tau_scale=tau_scale, s_scale=s_scale, sigma_scale=sigma_scale,
                  prior_mean=np.asarray(prior_mean, np.float32), prior_sd=prior_sd, sufficient=sufficient,
                  noncentered_psi=bool(noncentered_psi))
    X = jnp.asarray(data.X, jnp.float32)
    y = jnp.asarray(data.y, jnp.float32)
    arms = jnp.asarray(data.arms, jnp.int32)
    if sufficient:
        kwargs["stats"] = sufficient_stats(arms, X, y, int(data.group_of_arm.size))

    def model(arms, X, y):
        group_bias_model(arms, X, y, **kwargs)

    chain_method = "parallel" if 1 < num_chains <= jax.local_device_count() else "sequential"
    mcmc = MCMC(NUTS(model, target_accept_prob=target_accept), num_warmup=num_warmup, num_samples=num_samples,
                num_chains=num_chains, chain_method=chain_method, progress_bar=progress_bar)
    t0 = time.perf_counter()
    mcmc.run(jax.random.key(int(seed)), arms, X, y, extra_fields=("diverging",))
    samples = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    diverging = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["diverging"])
    config = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in kwargs.items() if k != "stats"}
    config.update(num_warmup=num_warmup, num_samples=num_samples, num_chains=num_chains, seed=int(seed),
                  target_accept=target_accept, chain_method=chain_method)
    return NutsFit(samples, diverging, time.perf_counter() - t0, config)
