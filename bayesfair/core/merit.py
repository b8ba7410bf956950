"""Merit functions f: mean reward -> positive merit, and the optimal fair policy they define.

FairX paper (fairness_of_exposure_fairx_icml2021), Section 3.1: the optimal fair policy is
pi*(a) = f(mu_a) / sum_a' f(mu_a') (Theorem 3.1.1). Sub-linear fairness regret needs
Condition 3.1.2 (minimum merit f >= gamma > 0) and Condition 3.1.3 (f is L-Lipschitz);
Theorems 3.1.4/3.1.5 show neither can be dropped. A :class:`Merit` therefore carries its floor
``gamma`` and Lipschitz constant ``L`` on a stated domain.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core._validate import finite_float
from bayesfair.core.declare import Pair, Positive, declare, set_callable_describer

__all__ = ["Merit", "identity", "exponential", "custom", "fair_policy", "group_merit_weights", "group_fair_policy",
           "resolve_merit"]


@dataclass(frozen=True, eq=False)
class Merit:
    """A positive, nondecreasing merit function with its constants.

    Attributes
    ----------
    fn : callable
        jax-traceable ``f(mu) -> merit`` applied elementwise.
    label : str
        Display name for tables, titles and messages (e.g. ``"exp(4*mu)"``).
    gamma : float
        Minimum merit on ``domain`` (Condition 3.1.2).
    lipschitz : float
        Lipschitz constant on ``domain`` (Condition 3.1.3).
    domain : tuple of float
        The mean-reward interval the constants refer to.
    log_fn : callable or None
        ``log f``, when known in closed form; used for a numerically stable pi*.
    params : dict
        The constructor's arguments (e.g. ``{"c": 4.0, "domain": [0.0, 1.0]}``).
    name : str or None
        The registry key of the declared constructor that built it (``"exponential"``), set by
        :func:`bayesfair.core.declare.declare`; ``None`` for :func:`custom` merits. ``{"name":
        name, **params}`` is the config table that rebuilds it.
    """

    __bayesfair_kind__ = "merit"  # a config gives it as a merit table (bayesfair.core.declare)

    fn: Callable[[jax.Array], jax.Array]
    label: str
    gamma: float
    lipschitz: float
    domain: tuple[float, float]
    log_fn: Callable[[jax.Array], jax.Array] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    name: str | None = None

    def __call__(self, mu: jax.Array) -> jax.Array:
        return self.fn(mu)

    def describe(self) -> dict[str, Any]:
        """JSON-friendly description for result metadata: the config table ``{"name": ...,
        **params}``, the label and the constants."""
        return {"name": self.name, **self.params, "label": self.label, "gamma": self.gamma,
                "lipschitz": self.lipschitz, "domain": list(self.domain)}


_LOG_FLOAT_MAX = math.log(np.finfo(np.float64).max)  # ~709.78: math.exp overflows above


def _domain(domain: Any) -> tuple[float, float]:
    try:
        lo, hi = domain
    except (TypeError, ValueError):
        raise TypeError(f"domain must be a pair (low, high), got {domain!r}") from None
    lo = finite_float("domain[0]", lo)
    hi = finite_float("domain[1]", hi)
    if not lo < hi:
        raise ValueError(f"domain must satisfy low < high, got ({lo}, {hi})")
    return lo, hi


@declare("merit")
def identity(floor: Positive = 1e-3, domain: Pair = (0.0, 1.0)) -> Merit:
    """f(mu) = max(mu, floor): the identity with a positive floor.

    The floor keeps the merit positive for posterior draws outside the reward support (e.g.
    Gaussian TS draws below 0), as Condition 3.1.2 requires. L = 1, gamma = max(floor, low).
    """
    floor = float(floor)  # > 0 (the minimum-merit condition): declared
    lo, hi = _domain(domain)
    return Merit(
        # No log_fn: max(mu, floor) is positive and cannot overflow, so pi* = f / sum f is already
        # stable, and a log + exp per arm per use would dominate the bi-level study's round cost.
        fn=lambda mu: jnp.maximum(mu, floor),
        label="identity",
        gamma=max(floor, lo),
        lipschitz=1.0,
        domain=(lo, hi),
    )


@declare("merit", example={"c": 3.0})
def exponential(c: Positive, domain: Pair = (0.0, 1.0)) -> Merit:
    r""":math:`f(\mu) = e^{c \mu}`, the family of the FairX experiments (Section 5.1).

    On ``domain = [low, high]``: :math:`\gamma = e^{c \cdot \mathrm{low}}` and
    :math:`L = c\, e^{c \cdot \mathrm{high}}`; c varies :math:`L / \gamma`.

    Examples
    --------
    >>> import bayesfair as bf
    >>> merit = bf.merit.exponential(4.0)          # f(mu) = exp(4 mu) on [0, 1]
    >>> round(float(merit.gamma), 3), round(float(merit.lipschitz), 1)
    (1.0, 218.4)
    """
    c = float(c)  # > 0 (the merit must increase with the mean): declared
    lo, hi = _domain(domain)
    if c * hi + math.log(c) > _LOG_FLOAT_MAX:  # L = c exp(c high) must be a finite float
        raise ValueError(f"c and domain[1] too large: the Lipschitz constant c exp(c high) overflows a float "
                         f"(allowed c * high + ln c <= {_LOG_FLOAT_MAX:.2f}); got c = {c:g}, "
                         f"domain = [{lo:g}, {hi:g}], c * high + ln c = {c * hi + math.log(c):.4g}; use a smaller c "
                         f"or a narrower domain")
    return Merit(
        fn=lambda mu: jnp.exp(c * mu),
        log_fn=lambda mu: c * mu,
        label=f"exp({c:g}*mu)",
        gamma=math.exp(c * lo),
        lipschitz=c * math.exp(c * hi),
        domain=(lo, hi),
    )


def custom(
    fn: Callable[[jax.Array], jax.Array],
    *,
    label: str = "custom",
    domain: tuple[float, float] = (0.0, 1.0),
    n_check: int = 1001,
) -> Merit:
    """Wrap a user merit function after checking it on a grid over ``domain``.

    The function must be jax-traceable, and on the grid finite, strictly positive and
    nondecreasing; gamma and L are estimated from the grid (min value, max finite difference).

    Raises
    ------
    ValueError
        If ``fn`` returns non-finite or non-positive values, or decreases, on the grid.
    """
    if not callable(fn):
        raise TypeError(f"merit fn must be callable, got {fn!r}")
    if isinstance(n_check, bool) or not isinstance(n_check, (int, np.integer)) or n_check < 2:
        raise ValueError(f"n_check must be an integer >= 2 (grid points over the domain), got {n_check!r}")
    lo, hi = _domain(domain)
    grid = jnp.linspace(lo, hi, n_check, dtype=jnp.float32)
    try:
        vals = np.asarray(jax.jit(jax.vmap(fn))(grid), dtype=np.float64)
    except Exception as exc:  # a user function that cannot be traced
        raise TypeError(f"merit fn must be a jax-traceable elementwise function: {exc}") from exc
    if vals.shape != grid.shape:
        raise ValueError(f"merit fn must map a scalar to a scalar, got output shape {vals.shape[1:]}")
    if not np.all(np.isfinite(vals)):
        bad = float(grid[np.argmax(~np.isfinite(vals))])
        raise ValueError(f"merit fn must be finite on the domain [{lo}, {hi}]; not finite at mu={bad}")
    if np.any(vals <= 0):
        bad = float(grid[np.argmax(vals <= 0)])
        raise ValueError(
            f"merit fn must be > 0 on the domain [{lo}, {hi}] (minimum-merit condition); "
            f"f({bad:g}) = {vals[np.argmax(vals <= 0)]:g}"
        )
    if np.any(np.diff(vals) < -1e-6 * np.abs(vals[:-1])):
        raise ValueError(f"merit fn must be nondecreasing on the domain [{lo}, {hi}]")
    step = float(grid[1] - grid[0])
    lipschitz = float(np.max(np.abs(np.diff(vals))) / step) if n_check > 1 else 0.0
    return Merit(fn=fn, label=label, gamma=float(vals.min()), lipschitz=lipschitz, domain=(lo, hi))


def resolve_merit(merit: Merit | Callable[[jax.Array], jax.Array]) -> Merit:
    """Accept a :class:`Merit` or a bare callable (validated with :func:`custom`)."""
    if isinstance(merit, Merit):
        return merit
    if callable(merit):
        return custom(merit)
    raise TypeError(f"merit must be a bayesfair.core.merit.Merit or a callable, got {merit!r}")


def fair_policy(merit: Merit, mu: jax.Array) -> jax.Array:
    r"""Optimal fair policy :math:`\pi^*(a) = f(\mu_a) / \sum_{a'} f(\mu_{a'})` (Theorem 3.1.1), over the last axis.

    Uses ``log f`` and a softmax when the merit provides it, so exp(c mu) never overflows.
    Called with concrete values (outside ``jax.jit``), NaN or infinite means raise a ValueError
    naming the arm; traced inside jitted code, a NaN propagates (the simulator reports it).

    Examples
    --------
    >>> import numpy as np
    >>> import bayesfair as bf
    >>> pi = bf.merit.fair_policy(bf.merit.exponential(4.0), np.array([0.2, 0.5, 0.8]))
    >>> [round(float(p), 3) for p in pi]
    [0.065, 0.216, 0.718]
    """
    _check_concrete_means(mu, "mu")
    mu = jnp.asarray(mu)
    if merit.log_fn is not None:
        return jax.nn.softmax(merit.log_fn(mu), axis=-1)
    w = merit.fn(mu)
    return w / jnp.sum(w, axis=-1, keepdims=True)


def _check_concrete_means(mu: Any, name: str) -> None:
    if isinstance(mu, jax.core.Tracer):
        return
    arr = np.asarray(mu, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        where = ", ".join(str(int(i)) for i in bad)
        raise ValueError(f"{name} must be finite: entry [{where}] is {arr[tuple(bad)]} (NaN or infinite means have no "
                         "fair policy)")


def group_merit_weights(merit: Merit, mu: jax.Array, member: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Merit weights for within-group fair policies: ``(w [K], w_sum [m])``.

    ``w_i`` is proportional to f(mu_i) with one positive scale per group (``exp(log f - max over
    the group)`` when the merit has ``log_fn``, so exp(c mu) never overflows), and ``w_sum`` is the
    sum of w over each group. ``member`` is the one-hot ``[K, m]`` arm-to-group matrix.
    """
    gidx = jnp.argmax(member, axis=1)
    if merit.log_fn is not None:
        logits = merit.log_fn(mu)
        gmax = jnp.max(jnp.where(member > 0, logits[:, None], -jnp.inf), axis=0)
        gmax = jnp.where(jnp.isfinite(gmax), gmax, 0.0)  # a group with no candidate this round
        w = jnp.exp(logits - jax.lax.stop_gradient(gmax)[gidx])
    else:
        w = merit.fn(mu)
    return w, w @ member


def group_fair_policy(merit: Merit, mu: jax.Array, member: jax.Array) -> jax.Array:
    """Within-group optimal fair policy pi*_g(i) = f(mu_i) / sum_{j in g(i)} f(mu_j) for every arm.

    Definition 3 of the bi-level fairness paper (meritocratic fairness within each group); with a
    single group it is :func:`fair_policy`. ``member`` is the one-hot ``[K, m]`` membership.
    """
    _check_concrete_means(mu, "mu")
    w, w_sum = group_merit_weights(merit, jnp.asarray(mu), member)
    return w / (member @ w_sum)


# a plain function given where a merit is expected is recorded in a policy's config as its Merit
set_callable_describer(lambda fn: resolve_merit(fn).describe())
