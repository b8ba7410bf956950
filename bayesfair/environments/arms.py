"""Multi-armed environments with Bernoulli or Gaussian arms and group labels.

Means are either given, drawn per run from independent uniforms (e.g. the bi-level study's
U[0.6, 0.85] per arm, Section 6 of bilevel_fairness_bf_ucb_aamas2024), or given per run as an
explicit ``[runs, K]`` matrix (instances from another implementation or a file: run r plays row r).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core import _random
from bayesfair.core._validate import finite_array, finite_float
from bayesfair.core.declare import Cap, ConfigError, Count, Labels, Positive, Range, declare
from bayesfair.core.groups import Groups
from bayesfair.core.types import Observation, Round, Spec
from bayesfair.environments.base import Environment

__all__ = ["UniformMeans", "bernoulli_arms", "gaussian_arms", "bernoulli_arms_config", "gaussian_arms_config",
           "per_run_reset", "load_instances"]


def per_run_reset(table: np.ndarray, name: str):
    """``reset(key, run) -> table[run]`` for explicit per-run instances (``table`` is ``[runs, ...]``).

    The simulator passes the run index to a reset that carries ``runs`` (the number of rows) and
    checks that the study has exactly that many runs; ``name`` is the parameter the rows came from
    (for that error). Run r always plays row r, whatever the seed.
    """
    values = jnp.asarray(table, jnp.float32)

    def reset(key: jax.Array, run: Any = 0) -> jax.Array:
        return values[run]

    reset.runs = int(table.shape[0])
    reset.instances_of = name
    return reset


def load_instances(path: Any, name: str) -> np.ndarray:
    """A ``[runs, n]`` matrix from a ``.npy`` file or a comma-separated text file (one run per line)."""
    from pathlib import Path

    file = Path(path)
    if not file.is_file():
        raise ValueError(f"{name}: no such file {str(file)!r}")
    arr = np.load(file) if file.suffix == ".npy" else np.loadtxt(file, delimiter=",", ndmin=2)
    return finite_array(name, arr, ndim=2)


@dataclass(frozen=True, eq=False)
class UniformMeans:
    """Arm means drawn per run: mu_a ~ U[low_a, high_a] independently.

    ``low`` and ``high`` are scalars or one value per arm; ``n_arms`` is needed when both are
    scalars.
    """

    low: Any
    high: Any
    n_arms: int | None = None

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        low = np.atleast_1d(finite_array("means.low", self.low))
        high = np.atleast_1d(finite_array("means.high", self.high))
        k = max(low.size, high.size, self.n_arms or 1)
        for name, arr in (("means.low", low), ("means.high", high)):
            if arr.size not in (1, k):
                raise ValueError(f"{name} must be a scalar or have one value per arm ({k}), got {arr.size}")
        if self.n_arms is not None and k != self.n_arms:
            raise ValueError(f"means.n_arms ({self.n_arms}) does not match low/high length ({k})")
        low, high = np.broadcast_to(low, (k,)).copy(), np.broadcast_to(high, (k,)).copy()
        bad = np.flatnonzero(low > high)
        if bad.size:
            raise ValueError(f"means.low must be <= means.high; arm {bad[0]}: {low[bad[0]]} > {high[bad[0]]}")
        return low, high


def _means(means: Any) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) per arm: equal for fixed means, the range over the runs for a ``[runs, K]`` matrix."""
    if isinstance(means, UniformMeans):
        return means.bounds()
    arr = finite_array("means", means)
    if arr.ndim == 2:
        return arr.min(axis=0), arr.max(axis=0)
    if arr.ndim != 1:
        raise ValueError(f"means must be [K] (fixed) or [runs, K] (one row per run), got shape {arr.shape}")
    return arr, arr


def _groups(groups: Any, n_arms: int) -> Groups:
    if groups is None:
        return Groups.single(n_arms)
    g = groups if isinstance(groups, Groups) else Groups.from_labels(groups)
    if g.n_arms != n_arms:
        raise ValueError(f"groups has {g.n_arms} arms but means has {n_arms}")
    return g


def _build(kind: str, means: Any, groups: Any, draw, reward_range, extra: dict, rewards: str) -> Environment:
    """``draw(key, mu_a) -> r`` is one arm's reward; arm a of round t uses ``fold_in(key_t, a)``.

    Per-arm keys make every arm's counterfactual reward a function of (run, round, arm) only, so
    ``step`` can report all K of them (round logs) while the simulator draws just the pulled
    arm's with ``pull`` (the same bits: K times fewer random numbers per round).
    """
    low, high = _means(means)
    k = low.size
    grp = _groups(groups, k)
    low_j, high_j = jnp.asarray(low, jnp.float32), jnp.asarray(high, jnp.float32)
    per_run = not isinstance(means, UniformMeans) and np.ndim(means) == 2
    fixed = not per_run and bool(np.all(low == high))

    if per_run:
        reset = per_run_reset(np.asarray(means, np.float64), "means")
    else:
        def reset(key: jax.Array) -> jax.Array:
            if fixed:
                return low_j
            return jax.random.uniform(key, (k,), jnp.float32, low_j, high_j)

    arms = jnp.arange(k)

    def step(key: jax.Array, params: jax.Array, t: jax.Array) -> Round:
        rewards = jax.vmap(lambda a, mu_a: draw(jax.random.fold_in(key, a), mu_a))(arms, params)
        return Round(Observation(t=t), rewards, params)

    def pull(key: jax.Array, params: jax.Array, t: jax.Array, action: jax.Array) -> jax.Array:
        return draw(jax.random.fold_in(key, action), params[action])

    spec = Spec(n_arms=k, group_of_arm=grp.labels, n_groups=grp.n_groups, reward_range=reward_range, rewards=rewards)
    if fixed:
        means_cfg: Any = low.tolist()
    elif per_run:
        means_cfg = {"distribution": "per_run", "runs": reset.runs, "low": low.tolist(), "high": high.tolist()}
    else:
        means_cfg = {"distribution": "uniform", "low": low.tolist(), "high": high.tolist()}
    cfg = {"kind": kind, "n_arms": k, "means": means_cfg, "groups": grp.describe(), **extra}
    return Environment(spec, grp, reset, step, lambda p: p, f"{kind}_arms", cfg, pull, name=f"{kind}_arms")


def bernoulli_arms(means: Any, groups: Any = None) -> Environment:
    """K Bernoulli arms: r_t,a ~ Bernoulli(mu_a), one uniform per arm per round (from the arm's own key).

    Parameters
    ----------
    means : array-like [K], array-like [runs, K] or UniformMeans
        Fixed means in [0, 1]; one row of means per run (run r plays row r; the study's runs
        must equal the number of rows); or a per-run uniform draw inside [0, 1].
    groups : Groups or sequence [K] of int or str, optional
        Group of each arm (one group if omitted): indices 0..m-1, or names, numbered in the order
        they first appear (:meth:`bayesfair.Groups.from_labels`).

    Examples
    --------
    >>> import bayesfair as bf
    >>> env = bf.bernoulli_arms([0.2, 0.5, 0.8], groups=[0, 0, 1])
    >>> env.spec.n_arms, env.spec.n_groups, env.spec.rewards
    (3, 2, 'binary')
    >>> env = bf.bernoulli_arms(bf.environments.UniformMeans(0.0, 1.0, 5))   # means drawn afresh in every run
    """
    low, high = _means(means)
    if np.any(low < 0) or np.any(high > 1):
        bad = int(np.flatnonzero((low < 0) | (high > 1))[0])
        raise ValueError(f"Bernoulli means must be in [0, 1]; arm {bad} has range [{low[bad]}, {high[bad]}]")

    def draw(key: jax.Array, mu_a: jax.Array) -> jax.Array:
        return (jax.random.uniform(key, ()) < mu_a).astype(jnp.float32)

    return _build("bernoulli", means, groups, draw, (0.0, 1.0), {}, "binary")


def gaussian_arms(means: Any, sigma: float = 1.0, groups: Any = None) -> Environment:
    """K Gaussian arms: r_t,a ~ N(mu_a, sigma^2); ``means`` as in :func:`bernoulli_arms`."""
    sigma = finite_float("sigma", sigma)
    if sigma <= 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")

    def draw(key: jax.Array, mu_a: jax.Array) -> jax.Array:
        return mu_a + sigma * _random.normal(key, ())

    return _build("gaussian", means, groups, draw, None, {"sigma": sigma}, "real")


# ---------------------------------------------------------------------------------------------
# config forms: means as numbers or {low, high}, groups as labels or sizes

Means = list[float] | Range  # fixed means, or {low, high} drawn per run
Arms = Annotated[Count, Cap(10_000)]


def _config_arms(means: Any, n_arms: int | None, groups: Any, group_sizes: Any, group_names: Any,
                 means_file: str | None = None) -> tuple[Any, Any]:
    """The means object and :class:`Groups` of a config table (errors name the config key)."""
    if means_file is not None:
        if means is not None:
            raise ConfigError("means_file", "give either means or means_file, not both")
        try:
            means = load_instances(means_file, "means_file")
        except (TypeError, ValueError) as exc:
            raise ConfigError("means_file", f"{exc} (a [runs, K] matrix: .npy, or one comma-separated row "
                                            "per run)") from None
        if n_arms is not None and n_arms != means.shape[1]:
            raise ConfigError("n_arms", f"does not match the {means.shape[1]} columns of means_file")
    elif means is None:
        raise ConfigError("means", "required (or means_file)")
    elif isinstance(means, dict):
        if n_arms is None and not any(isinstance(means[b], (list, tuple)) for b in ("low", "high")):
            raise ConfigError("n_arms", "required with means = {low, high} of two numbers: the number of arms "
                                        "whose means are drawn from U[low, high] per run (an integer >= 1)")
        means = UniformMeans(means["low"], means["high"], n_arms)
    elif n_arms is not None and n_arms != len(means):
        raise ConfigError("n_arms", f"does not match the {len(means)} means given")
    if groups is not None and group_sizes is not None:
        raise ConfigError("group_sizes", "give either groups (a label per arm) or group_sizes, not both")
    if group_sizes is not None:
        return means, Groups.from_sizes(group_sizes, group_names)
    if groups is not None:
        return means, Groups.from_labels(groups, group_names)
    if group_names is not None:
        raise ConfigError("group_names", "needs groups or group_sizes")
    return means, None


@declare("environment", "bernoulli_arms", example={"means": [0.2, 0.5, 0.8]})
def bernoulli_arms_config(means: Means | None = None, n_arms: Arms | None = None, groups: Labels | None = None,
                          group_sizes: list[Count] | None = None, group_names: list[str] | None = None,
                          means_file: str | None = None) -> Environment:
    """K Bernoulli arms: fixed means, means = {low, high} drawn per run (with n_arms), or
    means_file = a [runs, K] matrix (.npy, or comma-separated rows), run r playing row r."""
    means, grp = _config_arms(means, n_arms, groups, group_sizes, group_names, means_file)
    return bernoulli_arms(means, groups=grp)


@declare("environment", "gaussian_arms", example={"means": [0.2, 0.5, 0.8], "sigma": 0.5})
def gaussian_arms_config(means: Means | None = None, sigma: Positive = 1.0, n_arms: Arms | None = None,
                         groups: Labels | None = None, group_sizes: list[Count] | None = None,
                         group_names: list[str] | None = None, means_file: str | None = None) -> Environment:
    """K Gaussian arms N(mu_a, sigma^2): fixed means, means = {low, high} drawn per run, or
    means_file = a [runs, K] matrix, run r playing row r."""
    means, grp = _config_arms(means, n_arms, groups, group_sizes, group_names, means_file)
    return gaussian_arms(means, sigma=sigma, groups=grp)

