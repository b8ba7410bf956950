"""State algebra of the conjugate group-bias posterior (:mod:`bayesfair.posteriors.group_bias`).

The layout of the joint parameter theta = (beta_bar, beta_1..n, psi of the non-reference groups),
the two exact state representations (``joint``: the Cholesky factor of the precision of theta;
``collapsed``: per-arm factors with the arms' coefficients integrated out) and their rank-one
updates, exact joint draws, means and covariances. The model, the derivations and the public
names are in :mod:`bayesfair.posteriors.group_bias`, which re-exports everything here.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.linalg import solve_triangular

from bayesfair.core import _random
from bayesfair.core._validate import group_labels, positive_int
from bayesfair.posteriors.base import Outcome
from bayesfair.posteriors.linear import chol_rank_one_update

__all__ = [
    "GroupBiasDraw",
    "GroupBiasLayout",
    "GroupBiasState",
    "CollapsedState",
    "MarginalGaussian",
    "check_bias_groups",
    "coefficient_draw",
    "coefficient_prior",
    "gram_eigen",
    "group_bias_layout",
    "marginal_draw",
    "marginal_gaussian",
    "pack",
    "state_mean",
    "state_psi_cov",
    "state_psi_mean",
    "state_sample",
    "state_sample_with_psi_mean",
    "state_unpack",
    "state_update",
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
    arr, names = group_labels(what, group_of_arm)
    if names is not None:  # the reference group is an index: name the groups with group_names
        raise TypeError(f"{what} must hold integer group indices (0 = the reference group by default; "
                        f"group_names names them), got the names {list(names)}")
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
    phi = phi_mean + _upper_solve(chol_p, _random.normal(k_phi, eta.shape, eta.dtype))
    beta_bar, psi, psi_arm, mu = _mu_of(phi, state)
    noise = jax.vmap(_upper_solve)(state.chol_q, _random.normal(k_beta, state.r.shape, state.r.dtype))
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


def state_update(state: Any, obs: Outcome) -> Any:
    """One observation ``Outcome(y, arm, x)``: a rank-one update of the state's natural parameters."""
    update = _collapsed_update if isinstance(state, CollapsedState) else _joint_update
    return update(state, obs.arm, obs.x, obs.reward)


def state_sample(key: jax.Array, state: Any) -> GroupBiasDraw:
    """One exact joint posterior draw of (beta_bar, beta, psi)."""
    return state_sample_with_psi_mean(key, state)[0]


def state_sample_with_psi_mean(key: jax.Array, state: Any) -> tuple[GroupBiasDraw, jax.Array]:
    """One exact joint draw and the posterior mean of psi ``[m, d]``, sharing the factorization."""
    if isinstance(state, CollapsedState):
        return _collapsed_sample(key, state)
    white = _lower_solve(state.chol, state.eta)
    mean = _upper_solve(state.chol, white)
    theta = mean + _upper_solve(state.chol, _random.normal(key, state.eta.shape, state.eta.dtype))
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


# --------------------------------------------------------------------------------------------
# the Gaussian model with (beta_bar, beta, psi) integrated out: the marginal NUTS form


class MarginalGaussian(NamedTuple):
    """Result of :func:`marginal_gaussian` for given scales (tau, s, sigma).

    ``log_marginal``: log p(y | tau, s, sigma) with beta_bar, every beta_i and psi integrated out;
    ``phi_mean [p]`` and ``phi_chol [p, p]``: phi = (beta_bar, psi of the non-reference groups)
    | y ~ N(phi_mean, (phi_chol phi_chol')^-1) (``phi_chol`` is the lower Cholesky factor of the
    precision); per arm, in the eigenbasis ``eig_u [n, d, d]`` of X_i'X_i: ``g [n, d]`` the
    eigenvalues of Q_i = I + tau^2 X_i'X_i / sigma^2, ``h [n, d]`` = Q_i^-1 r_i with
    r_i = X_i'y_i / sigma^2, and ``k [n, d, d]`` = Q_i^-1 X_i'X_i / sigma^2, which give
    beta_i | phi, y; ``E [n, B]`` maps phi's blocks to each arm's mean (block 0 beta_bar, then
    the psi of the non-reference groups)."""

    log_marginal: Any
    phi_mean: Any
    phi_chol: Any
    eig_u: Any
    g: Any
    h: Any
    k: Any
    E: Any


def _phi_map(group_of_arm: np.ndarray, reference: int, group_bias: bool) -> np.ndarray:
    """E [n, B]: arm i's observed mean mu_i = sum_b E[i, b] phi_b (block 0 beta_bar, blocks 1..m-1
    the psi of the non-reference groups in group order; only block 0 without group bias)."""
    labels = np.asarray(group_of_arm, np.int64)
    m = int(labels.max()) + 1
    others = [g for g in range(m) if g != reference] if group_bias else []
    E = np.zeros((labels.size, 1 + len(others)))
    E[:, 0] = 1.0
    for j, g in enumerate(others):
        E[labels == g, 1 + j] = 1.0
    return E


def gram_eigen(xx: Any) -> tuple[np.ndarray, np.ndarray]:
    """Eigen-decomposition (float64 numpy, host side, once per data set) of every arm's
    X_i'X_i [n, d, d]: (eigenvalues [n, d] clipped at 0, eigenvectors [n, d, d])."""
    lam, u = np.linalg.eigh(np.asarray(xx, np.float64))
    return np.maximum(lam, 0.0), u


def marginal_gaussian(stats: tuple[Any, Any, Any, Any], group_of_arm: Any, *, reference: int, tau: Any, s: Any,
                      sigma: Any, prior_mean: Any, prior_sd: Any, group_bias: bool = True,
                      eig: tuple[Any, Any] | None = None) -> MarginalGaussian:
    """The Gaussian group-bias model with every coefficient integrated out (exact, jit/grad friendly).

    With the scales given, the model of :mod:`bayesfair.posteriors.group_bias` is linear-Gaussian,
    so p(y | tau, s, sigma) and the conditional posterior of the coefficients are closed forms.
    Written in the collapsed coordinates (module docstring of group_bias, ``method="collapsed"``):
    arm i's data, with delta_i = beta_i - beta_bar ~ N(0, tau^2 I) integrated out, contribute

        -N_i/2 log(2 pi sigma^2) - 1/2 log|Q_i| - y_i'y_i / (2 sigma^2) + tau^2 r_i'h_i / 2
        + mu_i'h_i - mu_i'k_i mu_i / 2,      k_i = Q_i^-1 M_i,  mu_i = beta_bar + psi_g(i),

    (M_i = X_i'X_i / sigma^2, Q_i = I + tau^2 M_i, r_i = X_i'y_i / sigma^2, h_i = Q_i^-1 r_i) and
    integrating phi = (beta_bar, psi) ~ N(phi_0, P_0^-1) (P_0 = diag(I / prior_sd^2, I / s^2),
    phi_0 = (prior_mean, 0)) out of exp(phi'b - phi'A phi / 2) with A = P_0 + sum_i E_i'k_i E_i,
    b = P_0 phi_0 + sum_i E_i'h_i gives + b'A^-1 b / 2 - phi_0'P_0 phi_0 / 2 + log|P_0| / 2
    - log|A| / 2. Q_i, k_i and h_i are written in the eigenbasis of X_i'X_i (``eig``, from
    :func:`gram_eigen`; computed here when not given), where they are elementwise in the scales:
    no per-arm factorization depends on tau or sigma, so gradients stay cheap. ``stats`` are
    :func:`~bayesfair.posteriors.group_bias.sufficient_stats` (N_i, X_i'X_i, X_i'y_i, y_i'y_i).
    Cost O(n d^3 + (m d)^3) per evaluation, independent of the rows.
    """
    count, xx, xy, yy = stats
    xx = jnp.asarray(xx)
    dt = xx.dtype
    d = xx.shape[-1]
    if eig is None:
        lam, u = jnp.linalg.eigh(xx)
        lam = jnp.maximum(lam, 0.0)
    else:
        lam, u = (jnp.asarray(v, dt) for v in eig)
    E = jnp.asarray(_phi_map(np.asarray(group_of_arm), reference, group_bias), dt)
    B = E.shape[1]
    s2 = jnp.asarray(sigma, dt) ** 2
    t2 = jnp.asarray(tau, dt) ** 2
    v0 = jnp.asarray(prior_sd, dt) ** 2
    w = lam / s2  # eigenvalues of M_i
    g = 1.0 + t2 * w  # eigenvalues of Q_i
    r_rot = jnp.einsum("ide,id->ie", u, jnp.asarray(xy, dt) / s2)  # U_i' r_i
    h = jnp.einsum("ide,ie->id", u, r_rot / g)
    k = jnp.einsum("ide,ie,ife->idf", u, w / g, u)
    const = (-0.5 * jnp.sum(count) * jnp.log(2.0 * jnp.pi * s2) - 0.5 * jnp.sum(jnp.log(g))
             - 0.5 * jnp.sum(jnp.asarray(yy, dt)) / s2 + 0.5 * t2 * jnp.sum(r_rot * r_rot / g))
    p0 = jnp.concatenate([jnp.full((d,), 1.0, dt) / v0] + ([jnp.full(((B - 1) * d,), 1.0, dt) / jnp.asarray(s, dt) ** 2]
                                                         if B > 1 else []))
    phi0 = jnp.concatenate([jnp.broadcast_to(jnp.asarray(prior_mean, dt), (d,)), jnp.zeros(((B - 1) * d,), dt)])
    A = jnp.einsum("ib,ic,ide->bdce", E, E, k).reshape(B * d, B * d) + jnp.diag(p0)
    b = p0 * phi0 + jnp.einsum("ib,id->bd", E, h).reshape(B * d)
    phi_chol = jnp.linalg.cholesky(A)
    v = solve_triangular(phi_chol, b, lower=True)
    phi_mean = solve_triangular(phi_chol.T, v, lower=False)
    log_marginal = (const + 0.5 * jnp.sum(v * v) - 0.5 * jnp.sum(p0 * phi0 * phi0) + 0.5 * jnp.sum(jnp.log(p0))
                    - jnp.sum(jnp.log(jnp.diagonal(phi_chol))))
    return MarginalGaussian(log_marginal, phi_mean, phi_chol, u, g, h, k, E)


def marginal_draw(mg: MarginalGaussian, tau: Any, phi_z: Any, beta_z: Any) -> tuple[Any, Any, Any]:
    """An exact draw of (beta_bar [d], beta [n, d], psi [m - 1, d]) | tau, s, sigma, y from
    standard normals ``phi_z [p]`` and ``beta_z [n, d]``: phi = phi_mean + L_A^-T phi_z, then
    beta_i = beta_bar + delta_i with delta_i | phi ~ N(tau^2 (h_i - k_i mu_i), tau^2 Q_i^-1)
    (= tau^2 (h_i - k_i mu_i) + tau U_i diag(g_i^-1/2) beta_z_i)."""
    E = mg.E
    d = mg.h.shape[1]
    B = E.shape[1]
    phi = (mg.phi_mean + solve_triangular(mg.phi_chol.T, phi_z, lower=False)).reshape(B, d)
    mu = E @ phi  # [n, d]
    t2 = jnp.asarray(tau, mg.h.dtype) ** 2
    noise = jnp.einsum("ide,ie->id", mg.eig_u, beta_z / jnp.sqrt(mg.g))
    delta = t2 * (mg.h - jnp.einsum("ide,ie->id", mg.k, mu)) + jnp.sqrt(t2) * noise
    return phi[0], phi[0] + delta, phi[1:]


# --------------------------------------------------------------------------------------------
# the coefficient form (any likelihood): NUTS on the arms' observed coefficients


def coefficient_prior(group_of_arm: Any, reference: int, *, tau: Any, s: Any, prior_mean: Any, prior_sd: Any,
                      group_bias: bool = True, dtype: Any = jnp.float64) -> tuple[Any, Any, Any]:
    """Prior of the arms' observed coefficients c_i = beta_i + psi_g(i) given tau and s, with
    beta_bar and psi integrated out. c_i = E_i phi + delta_i (phi = (beta_bar, psi) ~
    N((m0, 0), diag(prior_sd^2, s^2 ..)), delta_i ~ N(0, tau^2 I)), and every coordinate is an
    independent n-variate normal with covariance S = E D E' + tau^2 I. Returns (mean [d, n],
    lower Cholesky factor of S [n, n], E [n, B])."""
    E = jnp.asarray(_phi_map(np.asarray(group_of_arm), reference, group_bias), dtype)
    n, B = E.shape
    dvar = jnp.concatenate([jnp.full((1,), jnp.asarray(prior_sd, dtype) ** 2),
                            jnp.full((B - 1,), jnp.asarray(s, dtype) ** 2)])
    S = (E * dvar) @ E.T + jnp.asarray(tau, dtype) ** 2 * jnp.eye(n, dtype=dtype)
    mean = jnp.asarray(prior_mean, dtype)[:, None] * E[:, 0][None, :]
    return mean, jnp.linalg.cholesky(S), E


def coefficient_draw(coef_t: Any, E: Any, phi_z: Any, *, tau: Any, s: Any, prior_mean: Any,
                     prior_sd: Any) -> tuple[Any, Any, Any]:
    """An exact draw of (beta_bar [d], beta [n, d], psi [B - 1, d]) given the observed
    coefficients ``coef_t [d, n]`` and the scales, from standard normals ``phi_z [B, d]``:
    phi | c ~ N(A^-1 b, A^-1) per coordinate with A = E'E / tau^2 + D^-1 and
    b = E'c / tau^2 + D^-1 phi_0; beta_i = c_i - psi_g(i)."""
    dtype = E.dtype
    B = E.shape[1]
    t2 = jnp.asarray(tau, dtype) ** 2
    dvar = jnp.concatenate([jnp.full((1,), jnp.asarray(prior_sd, dtype) ** 2),
                            jnp.full((B - 1,), jnp.asarray(s, dtype) ** 2)])
    A = E.T @ E / t2 + jnp.diag(1.0 / dvar)
    phi0 = jnp.zeros((B, coef_t.shape[0]), dtype).at[0].set(jnp.asarray(prior_mean, dtype))
    b = E.T @ coef_t.T / t2 + phi0 / dvar[:, None]
    L = jnp.linalg.cholesky(A)
    phi = jax.scipy.linalg.cho_solve((L, True), b) + solve_triangular(L.T, phi_z, lower=False)
    beta = coef_t.T - E @ phi + phi[0][None, :]
    return phi[0], beta, phi[1:]
