"""The posterior protocol shared by every posterior family, and the per-arm record.

Every family -- per-arm (:class:`Posterior`), linear (:class:`~bayesfair.posteriors.linear.
LinearPosterior`) and the group-bias model (:class:`~bayesfair.posteriors.group_bias.
GroupBiasPosterior`) -- offers the same functions over one observation record, :class:`Outcome`:

- ``init(size) -> state``: the prior; ``size`` is an int (the family's own size: arms for a
  per-arm family, features for a linear one) or a :class:`~bayesfair.core.types.Spec`, from which the
  family takes what it needs (:func:`init_size`).
- ``update(state, obs: Outcome) -> state``: one observation; each family reads the fields its
  likelihood uses (``arm`` and ``reward``; ``x`` and ``reward``; all three).
- ``sample(key, state)``: one joint posterior draw; ``mean(state)`` / ``variance(state)``: the
  posterior means and marginal variances, in the same layout as a draw.
- ``dims``: the draw's variable names and their dimension names (e.g. ``{"mu": ("arm",)}``), so
  diagnostics name a draw without knowing the family; ``name``, ``params``, ``rewards`` and the
  NumPyro reference ``model``.

:func:`is_posterior` checks the protocol (policies and :mod:`bayesfair.diagnostics` never switch
on the record's type); :func:`fit_outcomes` folds a sequence of outcomes into a state.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bayesfair.core._validate import positive_int

__all__ = ["prior_marker", "Outcome", "ObservationModel", "PosteriorFamily", "Posterior", "is_posterior", "init_size",
           "fit",
           "fit_outcomes"]


class Outcome(NamedTuple):
    """One observation a posterior learns from: the ``reward`` of a pull, the pulled ``arm`` and
    its context ``x`` (fields a family does not use may be None)."""

    reward: Any
    arm: Any = None
    x: Any = None


class ObservationModel(NamedTuple):
    """A family's likelihood of one observation, for model checking (log-likelihood and
    predictive draws in :mod:`bayesfair.diagnostics`). Optional: a family without one
    (``observation=None``) still gives posterior draws.

    Attributes
    ----------
    draw : callable
        ``draw(key, state) -> {name: array}``: one joint draw of every parameter of the
        likelihood: the family's own draw (the same values ``sample(key, state)`` returns, from the
        same key) plus nuisance parameters (``sigma2`` of the Normal-Inverse-Gamma families).
    dims : dict
        Dimension names of every drawn variable (e.g. ``{"mu": ("arm",), "sigma2": ("arm",)}``).
    log_density : callable
        ``log_density(params, Outcome(reward, arm=, x=)) -> scalar``: log p(reward | params, arm or
        x) of one observation under the drawn ``params``.
    replicate : callable
        ``replicate(key, params, Outcome(...)) -> scalar``: a reward drawn from that density (the
        outcome's ``reward`` is not used).
    """

    draw: Callable[[jax.Array, Any], dict[str, jax.Array]]
    dims: Mapping[str, tuple[str, ...]]
    log_density: Callable[[Mapping[str, jax.Array], Outcome], jax.Array]
    replicate: Callable[[jax.Array, Mapping[str, jax.Array], Outcome], jax.Array]


@runtime_checkable
class PosteriorFamily(Protocol):
    """The posterior protocol (module docstring); every posterior record satisfies it."""

    name: str
    init: Callable[[Any], Any]
    update: Callable[[Any, Outcome], Any]
    sample: Callable[[jax.Array, Any], Any]
    mean: Callable[[Any], Any]
    variance: Callable[[Any], Any]
    model: Callable[..., None]
    params: dict[str, Any]
    rewards: str
    dims: Mapping[str, tuple[str, ...]]


def is_posterior(obj: Any) -> bool:
    """True if ``obj`` offers the posterior protocol (:class:`PosteriorFamily`)."""
    return isinstance(obj, PosteriorFamily) and isinstance(getattr(obj, "dims", None), Mapping)


def init_size(size: Any, field: str) -> int:
    """The size a family's ``init`` needs: ``size`` itself (an int), or ``size.<field>`` of a
    :class:`~bayesfair.core.types.Spec` (``field`` is ``"n_arms"`` or ``"n_features"``)."""
    if not isinstance(size, (int, np.integer)) and hasattr(size, field):
        size = getattr(size, field)
    return positive_int(field, size)


class Posterior(NamedTuple):
    """A per-arm posterior family: conjugate fast path plus its NumPyro reference model.

    Attributes
    ----------
    name : str
        Family name.
    init : callable
        ``init(n_arms or spec) -> state``: the prior, as a pytree of ``[K]`` arrays.
    update : callable
        ``update(state, Outcome(reward, arm=a)) -> state``: one observation, O(1) (rank-one) work.
    sample : callable
        ``sample(key, state) -> mu [K]``: one exact joint posterior draw of the arm means.
    mean : callable
        ``mean(state) -> [K]``: posterior mean of each arm's mean reward.
    variance : callable
        ``variance(state) -> [K]``: posterior variance of each arm's mean reward.
    model : callable
        NumPyro model ``model(arms, rewards=None, *, n_arms)`` with the same prior and likelihood;
        its posterior over the site ``"mu"`` is what the conjugate path computes in closed form.
    params : dict
        Hyper-parameters (for result metadata).
    rewards : str
        The rewards the likelihood describes: ``"binary"`` (0/1; a policy built on it refuses an
        environment with other rewards, :mod:`bayesfair.core.compat`) or ``"real"``.
    dims : dict
        ``{"mu": ("arm",)}``: a draw is the arm means.
    observation : ObservationModel or None
        The likelihood of one observation ``Outcome(reward, arm=a)`` for model checking (None:
        not available, e.g. the MCMC fallback).
    """

    __bayesfair_kind__ = "posterior"  # a config gives it as a posterior table (bayesfair.core.declare)

    name: str
    init: Callable[[Any], Any]
    update: Callable[[Any, Outcome], Any]
    sample: Callable[[jax.Array, Any], jax.Array]
    mean: Callable[[Any], jax.Array]
    variance: Callable[[Any], jax.Array]
    model: Callable[..., None]
    params: dict[str, Any]
    rewards: str = "real"
    dims: Mapping[str, tuple[str, ...]] = {"mu": ("arm",)}  # noqa: RUF012 (read-only default)
    observation: ObservationModel | None = None


def fit_outcomes(posterior: PosteriorFamily, size: Any, obs: Outcome) -> Any:
    """Posterior state after the outcomes ``obs`` (an :class:`Outcome` of arrays with a leading
    observation axis) in order, by repeated updates (a ``lax.scan``; jit/vmap friendly)."""
    if not is_posterior(posterior):
        raise TypeError(f"posterior must be a bayesfair posterior family, got {posterior!r}")

    def step(state, o):
        return posterior.update(state, o), None

    state, _ = lax.scan(step, posterior.init(size), obs)
    return state


def fit(posterior: Posterior, n_arms: int, arms: jax.Array, rewards: jax.Array) -> Any:
    """Posterior state after observing ``(arms[i], rewards[i])`` in order, by repeated updates."""
    arms = jnp.asarray(arms, jnp.int32)
    rewards = jnp.asarray(rewards, jnp.float32)
    return fit_outcomes(posterior, n_arms, Outcome(reward=rewards, arm=arms))


def normal_observation(draw: Callable[[jax.Array, Any], dict[str, jax.Array]], dims: Mapping[str, tuple[str, ...]],
                       loc_var: Callable[[Mapping[str, jax.Array], Outcome], tuple[jax.Array, jax.Array]]
                       ) -> ObservationModel:
    """An :class:`ObservationModel` with a Normal likelihood: reward ~ N(loc, var), where
    ``loc_var(params, obs) -> (loc, var)`` reads the drawn parameters and the observation."""

    def log_density(params: Mapping[str, jax.Array], obs: Outcome) -> jax.Array:
        loc, var = loc_var(params, obs)
        r = jnp.asarray(obs.reward, jnp.result_type(loc))
        return -0.5 * (jnp.log(2.0 * jnp.pi * var) + (r - loc) ** 2 / var)

    def replicate(key: jax.Array, params: Mapping[str, jax.Array], obs: Outcome) -> jax.Array:
        loc, var = loc_var(params, obs)
        return loc + jnp.sqrt(var) * jax.random.normal(key, jnp.shape(loc), jnp.result_type(loc))

    return ObservationModel(draw, dict(dims), log_density, replicate)

# hyper-parameters that do not change the prior (numerics, parametrization, MCMC settings)
_NOT_PRIOR = ("cholesky", "method", "centered", "centring_scale", "history", "capacity", "link")
_ALIASES = {"mcmc_beta_bernoulli": "beta_bernoulli"}


def prior_marker(posterior: Any) -> dict[str, Any]:
    """``{"family": name, "params": {...}}``: what identifies a posterior family's prior (JSON-friendly)."""
    params = {k: v for k, v in dict(getattr(posterior, "params", {}) or {}).items()
              if not k.startswith("mcmc_") and k not in _NOT_PRIOR}
    name = str(getattr(posterior, "name", type(posterior).__name__))
    return {"family": _ALIASES.get(name, name), "params": json.loads(json.dumps(params, default=_json))}


def _json(obj: Any) -> Any:
    return obj.tolist() if isinstance(obj, (np.ndarray, np.generic)) else repr(obj)
