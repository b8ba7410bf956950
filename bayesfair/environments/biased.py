"""Biased-feedback contextual bandits (group_fairness_biased_feedback_aamas2022, Sections 3.1, 5.2, 5.3).

Section 3.1: n arms are partitioned into m groups; arm i has true coefficients beta_i and, in
round t, its own context x_t,i (``Observation.contexts`` is ``[n, d]``, one row per arm). Pulling
arm i returns the *observed (biased)* reward of Eq. (2)

    r_t,i = beta_i . x_t,i + psi_g(i) . x_t,i + N(0, sigma^2)

where psi_g is the societal bias of group g (zero for the reference, non-sensitive group); the
*true* reward is f*(x_t,i) = beta_i . x_t,i. Regret mapping for the simulator
(:mod:`bayesfair.simulation.metrics`):

- ``Round.mean`` = (beta_i + psi_g(i)) . x_t,i, the expected observed reward f(x_t,i), so the
  simulator's ``regret`` sum_t (max_i f(x_t,i) - pi_t . f(x_t)) is the **biased regret of
  Eq. (1)**, against the arm that is best under the biased utility;
- ``Round.extra["true"]`` = beta_i . x_t,i, so ``true_regret`` = sum_t (max_i f*(x_t,i) -
  pi_t . f*(x_t)) is the **true regret of Eq. (3)**, against the arm that is best under the true
  utility (Eq. 3's i* "is the optimal arm to pull at timestep t" with "no bias terms").

Both are expected (pseudo-)regrets: the expectation over the noise and over the policy's own
randomization pi_t given the history.

Section 5.2 (synthetic, :func:`synthetic_biased`): coefficients "uniformly at random" (U[0, c]
per coordinate, c = 10: Appendix C varies this range as [0, c]), contexts "chosen randomly" for
each arm in each round (U[0, 1]^d here), bias coefficients "uniformly at random with mean mu",
mu = 10. The paper does not print the sign; Figure 1(c) ("when the error mean mu is large, both
IntervalChaining and TopInterval choose fewer sensitive arms") needs a bias *against* the
sensitive group, so psi's coordinates are U[-2 mu, 0] (mean -mu).

Explicit instances: ``beta`` as ``[runs, n, d]`` and/or ``psi`` as ``[runs, m, d]`` (or, for
:func:`synthetic_biased`, ``beta_file``/``psi_file``) replace the per-run draws; run r plays row r
and the study's runs must equal the number of rows (the way to pair with another implementation's
instances; :func:`env_params` returns what every run played).

Section 5.3 (data, :func:`compas_bandit`, :func:`family_income_bandit`): arms are (group x
bucket) cells, "at each timestep t, we randomly select an individual from each arm"; the reward
is the individual's recorded value. The paper treats the recorded value as the observed (biased)
reward and states that the "real" regret "cannot be calculated" (Figure 3 caption, Section 5.3);
so these environments put the individual's value in ``Round.mean`` (the drawn individual's
reward is known exactly, so the biased regret is the regret against the best drawn individual)
and have no ``"true"`` entry. See each constructor for the preprocessing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, NamedTuple

import annotated_types as at
import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core import _random
from bayesfair.core._validate import as_key, finite_array, finite_float, positive_int
from bayesfair.core.declare import Cap, Count, Index, NonNegative, Positive, declare
from bayesfair.core.groups import Groups
from bayesfair.core.types import Observation, Round, Spec
from bayesfair.datasets import load_compas, load_family_income
from bayesfair.environments.arms import load_instances, per_run_reset
from bayesfair.environments.base import Environment, check_instances, reset_run
from bayesfair.posteriors.group_bias import check_bias_groups

__all__ = [
    "UniformDraw",
    "BiasedParams",
    "BiasedTable",
    "biased_linear_bandit",
    "synthetic_biased",
    "biased_table",
    "biased_data_bandit",
    "biased_data_bandit_config",
    "compas_table",
    "compas_bandit",
    "family_income_table",
    "family_income_bandit",
    "env_params",
]


@dataclass(frozen=True)
class UniformDraw:
    """Coefficients drawn per run, i.i.d. U[low, high] per coordinate (scalars or one value per feature)."""

    low: Any
    high: Any

    def bounds(self, d: int, what: str) -> tuple[np.ndarray, np.ndarray]:
        lo = _bounded(f"{what}.low", np.atleast_1d(finite_array(f"{what}.low", self.low)))
        hi = _bounded(f"{what}.high", np.atleast_1d(finite_array(f"{what}.high", self.high)))
        for field, arr in ((f"{what}.low", lo), (f"{what}.high", hi)):
            if arr.ndim != 1 or arr.size not in (1, d):
                raise ValueError(f"{field} must be a scalar or have one value per feature ({d}), got shape {arr.shape}")
        lo, hi = np.broadcast_to(lo, (d,)).copy(), np.broadcast_to(hi, (d,)).copy()
        if np.any(lo > hi):
            j = int(np.flatnonzero(lo > hi)[0])
            raise ValueError(f"{what}.low must be <= {what}.high; feature {j}: {lo[j]} > {hi[j]}")
        return lo, hi


class BiasedParams(NamedTuple):
    """Per-run parameters of a synthetic biased bandit: ``beta [n, d]`` true coefficients and
    ``psi [m, d]`` group biases (reference row 0)."""

    beta: jax.Array
    psi: jax.Array


def _name(name: Any, default: str) -> str:
    if name is None:
        return default
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty string, got {name!r}")
    return name


def _groups(labels: np.ndarray, m: int, names: Any) -> Groups:
    if names is not None:
        names = tuple(str(v) for v in names)
        if len(names) != m:
            raise ValueError(f"group_names must have one name per group ({m}), got {len(names)}")
    return Groups.from_labels(labels, names)


_MAX_MAGNITUDE = 1e15  # of a coefficient: contexts and rewards are float32 (1e300 became inf: NaN rewards)


def _bounded(name: str, arr: np.ndarray) -> np.ndarray:
    if arr.size and np.abs(arr).max() > _MAX_MAGNITUDE:
        raise ValueError(f"{name} must have magnitudes <= {_MAX_MAGNITUDE:g} (contexts and rewards are float32), "
                         f"got {np.abs(arr).max():g}")
    return arr


def _coefficients(value: Any, shape: tuple[int, int], what: str) -> tuple[np.ndarray | None, tuple | None]:
    """A fixed array of the given shape, a ``[runs, *shape]`` array of per-run instances, or a
    UniformDraw; returns (fixed or per-run array, (low, high))."""
    if isinstance(value, UniformDraw):
        return None, value.bounds(shape[1], what)
    arr = _bounded(what, finite_array(what, value))
    if arr.shape != shape and not (arr.ndim == 3 and arr.shape[1:] == shape and arr.shape[0] >= 1):
        raise ValueError(f"{what} must have shape {shape} ([n_arms, n_features], the same in every run) or "
                         f"[runs, {shape[0]}, {shape[1]}] (one instance per run), got {arr.shape}")
    return arr, None


def _instance_rows(per_run: dict[str, np.ndarray]) -> int | None:
    """The number of runs of the per-run instances given (``None`` if none): equal for all of them."""
    rows = {name: arr.shape[0] for name, arr in per_run.items()}
    if len(set(rows.values())) > 1:
        raise ValueError("the per-run instances must have one row per run, the same number for each: got "
                         + ", ".join(f"{name} with {r} rows" for name, r in rows.items()))
    return next(iter(rows.values()), None)


_DEFAULT_BETA = UniformDraw(0.0, 10.0)  # biased_linear_bandit's defaults (identity tells them from given values)
_DEFAULT_PSI = UniformDraw(-20.0, 0.0)


@declare("environment", example={"group_of_arm": [0, 0, 1, 1], "n_features": 2})
def biased_linear_bandit(
    group_of_arm: Any,
    n_features: Annotated[Count, Cap(1000)],
    *,
    beta: Any = _DEFAULT_BETA,
    psi: Any = _DEFAULT_PSI,
    noise_sd: NonNegative = 1.0,
    context_low: float = 0.0,
    context_high: float = 1.0,
    reference: int = 0,
    group_names: list[str] | Any = None,
    name: str | None = None,
    beta_file: str | None = None,
    psi_file: str | None = None,
) -> Environment:
    """The biased-feedback linear bandit of Section 3.1 (Eq. 2 observed, Eq. 3 true rewards).

    Parameters
    ----------
    group_of_arm : int sequence [n]
        Group of every arm; m >= 2 groups, each with at least 2 arms (the paper's |P_j| > 1).
    n_features : int
        Context dimension d.
    beta : array [n, d], array [runs, n, d] or UniformDraw
        True coefficients: fixed; one ``[n, d]`` instance per run (explicit instances, e.g. those
        of another implementation: run r plays ``beta[r]``, and the study's runs must equal the
        number of rows); or drawn per run i.i.d. U[low, high] per coordinate.
    psi : array [m, d], array [d] (two groups), array [runs, m, d] or UniformDraw
        Group biases. An array must have a zero reference row ([d] is the other group's bias when
        m = 2); ``[runs, m, d]`` is one bias matrix per run (run r plays ``psi[r]``; each with a
        zero reference row); a UniformDraw is drawn per run for every non-reference group. When
        both beta and psi are per run they must have the same number of rows.
    noise_sd : float
        sigma of the N(0, sigma^2) reward noise (Eq. 2 uses 1; >= 0).
    context_low, context_high : float
        Contexts are i.i.d. U[low, high]^d per arm and round.
    reference : int
        The reference (non-sensitive) group, psi = 0.
    group_names : str sequence [m], optional
    name : str, optional
    beta_file, psi_file : str, optional
        Instead of ``beta`` / ``psi``: per-run instances from a file (the config form), a ``.npy``
        array ``[runs, n, d]`` / ``[runs, m, d]``, or comma-separated text with one run per line
        holding its matrix flattened row by row (as in :func:`synthetic_biased`).

    Returns
    -------
    Environment
        ``reset(key) -> BiasedParams`` (``reset(key, run)`` with per-run instances, whose rows
        the simulator matches to its runs); ``step`` gives contexts ``[n, d]``, ``mean`` (observed,
        Eq. 1) and ``extra["true"]`` (Eq. 3); ``arm_means(params)`` is the expected observed
        reward of each arm over the context distribution, (beta_i + psi_g(i)) . E[x].
    """
    labels, m, ref = check_bias_groups(group_of_arm, reference=reference, min_arms=2)
    n = labels.size
    d = int(n_features)  # >= 1: declared
    beta = _instances_from(None if beta is _DEFAULT_BETA else beta, beta_file, "beta", (n, d), _DEFAULT_BETA)
    psi = _instances_from(None if psi is _DEFAULT_PSI else psi, psi_file, "psi", (m, d), _DEFAULT_PSI)
    beta_fixed, beta_bounds = _coefficients(beta, (n, d), "beta")
    if isinstance(psi, UniformDraw):
        psi_fixed, psi_bounds = None, psi.bounds(d, "psi")
    else:
        arr = _bounded("psi", finite_array("psi", psi))
        if arr.ndim == 1 and m == 2:
            if arr.shape[0] != d:
                raise ValueError(f"psi (the bias of the non-reference group) must have n_features={d} entries, "
                                 f"got {arr.shape[0]}")
            full = np.zeros((m, d))
            full[1 - ref] = arr
            arr = full
        if arr.shape != (m, d) and not (arr.ndim == 3 and arr.shape[1:] == (m, d) and arr.shape[0] >= 1):
            raise ValueError(f"psi must have shape (n_groups={m}, n_features={d}) (the same in every run) or "
                             f"[runs, {m}, {d}] (one instance per run), got {arr.shape}")
        if arr.ndim == 2 and np.any(arr[ref] != 0):
            raise ValueError(f"psi[{ref}] (the reference group's bias) must be zero, got {arr[ref]}")
        if arr.ndim == 3 and np.any(arr[:, ref] != 0):
            r = int(np.flatnonzero(np.any(arr[:, ref] != 0, axis=1))[0])
            raise ValueError(f"psi[{r}, {ref}] (run {r}'s bias of the reference group {ref}) must be zero, "
                             f"got {arr[r, ref]}")
        psi_fixed, psi_bounds = arr, None
    noise_sd = float(noise_sd)  # >= 0: declared (0: noiseless rewards)
    c_lo = finite_float("context_low", context_low)
    c_hi = finite_float("context_high", context_high)
    if not c_lo < c_hi:
        raise ValueError(f"context_low must be < context_high, got {c_lo} >= {c_hi}")
    groups = _groups(labels, m, group_names)
    nonref = jnp.asarray(np.arange(m) != ref, jnp.float32)[:, None]
    labels_j = jnp.asarray(labels)
    mean_x = jnp.full((d,), 0.5 * (c_lo + c_hi), jnp.float32)

    per_run = {name: arr for name, arr in (("beta", beta_fixed), ("psi", psi_fixed))
               if arr is not None and arr.ndim == 3}
    rows = _instance_rows(per_run)
    beta_row = None if "beta" not in per_run else per_run_reset(per_run["beta"], "beta")
    psi_row = None if "psi" not in per_run else per_run_reset(per_run["psi"], "psi")

    def reset(key: jax.Array, run: Any = 0) -> BiasedParams:
        kb, kp = jax.random.split(key)
        if beta_row is not None:
            b = beta_row(kb, run)
        elif beta_fixed is not None:
            b = jnp.asarray(beta_fixed, jnp.float32)
        else:
            lo, hi = beta_bounds
            b = jax.random.uniform(kb, (n, d), jnp.float32, jnp.asarray(lo, jnp.float32), jnp.asarray(hi, jnp.float32))
        if psi_row is not None:
            p = psi_row(kp, run)
        elif psi_fixed is not None:
            p = jnp.asarray(psi_fixed, jnp.float32)
        else:
            lo, hi = psi_bounds
            p = nonref * jax.random.uniform(kp, (m, d), jnp.float32, jnp.asarray(lo, jnp.float32),
                                            jnp.asarray(hi, jnp.float32))
        return BiasedParams(b, p)

    if rows is not None:  # explicit instances: the simulator passes the run index and checks the runs
        reset.runs = rows
        reset.instances_of = " and ".join(per_run)

    def step(key: jax.Array, params: BiasedParams, t: jax.Array) -> Round:
        kx, ke = jax.random.split(key)
        x = _random.uniform(kx, (n, d), jnp.float32, c_lo, c_hi)  # flat draw: faster under vmap (core._random)
        true = jnp.sum(params.beta * x, axis=1)
        observed = true + jnp.sum(params.psi[labels_j] * x, axis=1)
        reward = observed + noise_sd * _random.normal(ke, (n,), jnp.float32)
        return Round(Observation(t=t, contexts=x), reward, observed, {"true": true})

    def arm_means(params: BiasedParams) -> jax.Array:
        return (params.beta + params.psi[labels_j]) @ mean_x

    spec = Spec(n_arms=n, group_of_arm=groups.labels, n_groups=m, n_features=d, reward_range=None, rewards="real")
    cfg = {
        "kind": "biased_linear", "n_arms": n, "n_features": d, "reference": ref, "groups": groups.describe(),
        "beta": _describe(beta_fixed, beta_bounds), "psi": _describe(psi_fixed, psi_bounds),
        "noise_sd": noise_sd, "contexts": {"uniform": [c_lo, c_hi]},
        "regrets": {"regret": "biased regret, Eq. (1)", "true_regret": "true regret, Eq. (3)"},
    }
    return Environment(spec, groups, reset, step, arm_means, _name(name, "biased_linear"), cfg)


@declare("environment", hidden=("name",))
def synthetic_biased(
    n_arms: Annotated[int, at.Ge(4), Cap(10_000)] = 10,
    n_sensitive: Annotated[int, at.Ge(2)] = 5,
    n_features: Annotated[Count, Cap(1000)] = 2,
    *,
    bias_mean: NonNegative = 10.0,
    coef_high: Positive = 10.0,
    noise_sd: NonNegative = 1.0,
    beta: Any = None,
    psi: Any = None,
    beta_file: str | None = None,
    psi_file: str | None = None,
    name: str | None = None,
) -> Environment:
    """The synthetic generator of Section 5.2 (defaults: the paper's n = 10, 5 sensitive, d = 2, mu = 10).

    Arms ``0 .. n - n_sensitive - 1`` form the reference group 0 ("rest"), the last
    ``n_sensitive`` arms the sensitive group 1. Per run: beta_i ~ U[0, c]^d (c = ``coef_high``,
    Appendix C's range [0, c]) for every arm of both groups alike, and the sensitive group's bias
    psi ~ U[-2 mu, 0]^d, mean -mu with mu = ``bias_mean`` >= 0 (a bias against the sensitive
    group, see the module docstring). Contexts U[0, 1]^d, noise N(0, ``noise_sd``^2).
    The horizon (T = 1000 in the paper) is chosen when simulating.

    Explicit instances (what a run draws, given instead, e.g. another implementation's): ``beta``
    as a ``[runs, n, d]`` array (run r plays ``beta[r]``; replaces the U[0, c] draw) and/or ``psi``
    as a ``[runs, 2, d]`` array (row 0 of each, the reference group's bias, zero; replaces the
    U[-2 mu, 0] draw). Fixed ``[n, d]`` / ``[2, d]`` arrays are accepted too, as in
    :func:`biased_linear_bandit`. The study's runs must equal the number of rows.
    ``beta_file`` / ``psi_file`` read the same from a file (the config form): a ``.npy`` array of
    either shape, or comma-separated text with one run per line holding that run's matrix
    flattened row by row (``n * d`` or ``2 * d`` numbers).
    """
    n, k = int(n_arms), int(n_sensitive)  # n_arms >= 4, n_sensitive >= 2, bias_mean >= 0, coef_high > 0: declared
    if n - k < 2:
        raise ValueError(f"n_sensitive must leave at least 2 reference arms: n_arms={n}, n_sensitive={k}")
    mu, c = float(bias_mean), float(coef_high)
    d = int(n_features)
    beta = _instances_from(beta, beta_file, "beta", (n, d))
    psi = _instances_from(psi, psi_file, "psi", (2, d))
    labels = np.r_[np.zeros(n - k, np.int32), np.ones(k, np.int32)]
    env = biased_linear_bandit(labels, d, beta=UniformDraw(0.0, c) if beta is None else beta,
                               psi=UniformDraw(-2.0 * mu, 0.0) if psi is None else psi,
                               noise_sd=noise_sd, reference=0, group_names=("rest", "sensitive"),
                               name=_name(name, "synthetic_biased"))
    cfg = {**env.params, "kind": "synthetic_biased", "n_sensitive": k, "bias_mean": mu, "coef_high": c}
    return env._replace(params=cfg)


def _instances_from(value: Any, file: str | None, what: str, shape: tuple[int, int], default: Any = None) -> Any:
    """``value`` (``default`` if None), or the per-run instances in ``file``: a .npy array
    ([runs, *shape] or [*shape]), or comma-separated rows of ``shape[0] * shape[1]`` numbers (one
    run's matrix, flattened, per line)."""
    if file is None:
        return default if value is None else value
    if value is not None:
        raise ValueError(f"give either {what} or {what}_file, not both")
    from pathlib import Path

    path = Path(file)
    if path.suffix == ".npy" and path.is_file():
        arr = finite_array(f"{what}_file", np.load(path))
        if arr.ndim == 3 or arr.shape == shape:
            return arr
    else:
        arr = load_instances(file, f"{what}_file")
    size = shape[0] * shape[1]
    if arr.ndim != 2 or arr.shape[1] != size:
        raise ValueError(f"{what}_file must hold a [runs, {shape[0]}, {shape[1]}] array (.npy) or one run per row "
                         f"with its {shape[0]} x {shape[1]} matrix flattened ({size} numbers), got shape {arr.shape}")
    return arr.reshape(arr.shape[0], *shape)


def _describe(value: np.ndarray | None, bounds: tuple | None) -> Any:
    """Config record of a coefficient: the fixed array, the per-run instances' count, or the uniform draw."""
    if value is None:
        return {"uniform": [b.tolist() for b in bounds]}
    if value.ndim == 3:
        return {"distribution": "per_run", "runs": int(value.shape[0])}
    return value.tolist()


# --------------------------------------------------------------------------------------------
# data-driven versions (Section 5.3)


class BiasedTable(NamedTuple):
    """A preprocessed table for a data-driven biased bandit.

    ``features [N, d]`` float32 contexts, ``rewards [N]``, ``group [N]`` and ``bucket [N]`` int;
    arm of a row = ``group * n_buckets + bucket`` (group-major), so ``group_of_arm`` is
    ``repeat(arange(m), n_buckets)``. ``info`` records the preprocessing.
    """

    features: np.ndarray
    rewards: np.ndarray
    group: np.ndarray
    bucket: np.ndarray
    group_names: tuple[str, ...]
    bucket_names: tuple[str, ...]
    feature_names: tuple[str, ...]
    reference: int
    info: dict[str, Any]

    @property
    def n_buckets(self) -> int:
        return len(self.bucket_names)

    @property
    def n_groups(self) -> int:
        return len(self.group_names)

    @property
    def arms(self) -> np.ndarray:
        return (self.group * self.n_buckets + self.bucket).astype(np.int32)

    @property
    def group_of_arm(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_groups, dtype=np.int32), self.n_buckets)

    @property
    def arm_names(self) -> tuple[str, ...]:
        return tuple(f"{g} | {b}" for g in self.group_names for b in self.bucket_names)


def _labels(field: str, value: Any, n_rows: int, n_levels: int) -> np.ndarray:
    arr = np.asarray(value)
    if arr.shape != (n_rows,):
        raise ValueError(f"{field} must have one label per row ({n_rows}), got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{field} must hold integer labels, got dtype {arr.dtype}")
    bad = np.flatnonzero((arr < 0) | (arr >= n_levels))
    if bad.size:
        raise ValueError(f"{field} label {arr[bad[0]]} in row {bad[0]} is unknown: labels must be in "
                         f"[0, {n_levels - 1}] (one per name)")
    return arr.astype(np.int32)


def biased_table(
    features: Any,
    rewards: Any,
    group: Any,
    bucket: Any,
    *,
    group_names: Any,
    bucket_names: Any,
    feature_names: Any = None,
    reference: int = 0,
    standardize: bool = True,
    intercept: bool = True,
    info: dict[str, Any] | None = None,
) -> BiasedTable:
    """Validate a data table for :func:`biased_data_bandit` and build its contexts.

    Every (group, bucket) cell is an arm and must hold at least one row; every group needs at
    least 2 buckets. With ``standardize`` every feature column is z-scored over the table
    (constant columns are only centred); with ``intercept`` a constant 1 is appended (the
    linear reward model then has an intercept).
    """
    X = finite_array("features", features, ndim=2)
    y = finite_array("rewards", rewards, ndim=1, size=X.shape[0])
    group_names = tuple(str(v) for v in group_names)
    bucket_names = tuple(str(v) for v in bucket_names)
    if len(group_names) < 2:
        raise ValueError(f"group_names must name at least 2 groups, got {group_names}")
    if len(bucket_names) < 2:
        raise ValueError(f"bucket_names must name at least 2 buckets (each group needs >= 2 arms), got {bucket_names}")
    g = _labels("group", group, X.shape[0], len(group_names))
    b = _labels("bucket", bucket, X.shape[0], len(bucket_names))
    if isinstance(reference, bool) or not isinstance(reference, (int, np.integer)) or \
            not 0 <= reference < len(group_names):
        raise ValueError(f"reference must be a group index in [0, {len(group_names) - 1}], got {reference!r}")
    counts = np.zeros((len(group_names), len(bucket_names)), np.int64)
    np.add.at(counts, (g, b), 1)
    if np.any(counts == 0):
        gi, bi = np.argwhere(counts == 0)[0]
        raise ValueError(f"arm ({group_names[gi]!r}, {bucket_names[bi]!r}) has no rows: every group x bucket "
                         f"cell must hold at least one individual")
    names = tuple(str(v) for v in feature_names) if feature_names is not None else \
        tuple(f"x{j}" for j in range(X.shape[1]))
    if len(names) != X.shape[1]:
        raise ValueError(f"feature_names must have one name per column ({X.shape[1]}), got {len(names)}")
    if standardize:
        sd = X.std(axis=0)
        X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    if intercept:
        X = np.hstack([X, np.ones((X.shape[0], 1))])
        names = (*names, "intercept")
    meta = dict(info or {})
    meta.update(standardize=bool(standardize), intercept=bool(intercept), n_rows=int(X.shape[0]),
                rows_per_arm=counts.reshape(-1).tolist())
    return BiasedTable(X.astype(np.float32), y, g, b, group_names, bucket_names, names, int(reference), meta)


def biased_data_bandit(table: BiasedTable, *, noise_sd: float = 0.0, name: str | None = None) -> Environment:
    """A data-driven biased bandit (Section 5.3): each round draws one individual per arm.

    Arm a = (group, bucket) cell; in each round an individual of every cell is drawn uniformly
    (with replacement) from the round's key, its feature row is the arm's context and its
    recorded reward is the arm's expected observed reward (``Round.mean``) and, with
    ``noise_sd > 0``, its reward plus N(0, noise_sd^2) noise (default: the recorded value
    itself). There is no ``"true"`` value: the paper regards the recorded rewards as biased and
    the true regret as not computable (Figure 3's caption). ``reset`` returns the per-arm average
    reward (recorded as ``mean`` in results).
    """
    if not isinstance(table, BiasedTable):
        raise TypeError(f"table must be a BiasedTable (see biased_table), got {type(table).__name__}")
    noise_sd = finite_float("noise_sd", noise_sd)
    if noise_sd < 0:
        raise ValueError(f"noise_sd must be >= 0, got {noise_sd}")
    arms = table.arms
    n = table.n_groups * table.n_buckets
    order = np.argsort(arms, kind="stable")
    counts = np.bincount(arms, minlength=n)
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    X = jnp.asarray(table.features[order], jnp.float32)
    y = jnp.asarray(table.rewards[order], jnp.float32)
    starts_j = jnp.asarray(starts, jnp.int32)
    counts_j = jnp.asarray(counts, jnp.int32)
    counts_f = jnp.asarray(counts, jnp.float32)
    arm_mean = jnp.asarray(np.bincount(arms, weights=table.rewards, minlength=n) / counts, jnp.float32)
    groups = Groups.from_labels(table.group_of_arm, table.group_names)
    d = int(table.features.shape[1])

    def reset(key: jax.Array) -> jax.Array:
        return arm_mean

    def step(key: jax.Array, params: jax.Array, t: jax.Array) -> Round:
        ku, ke = jax.random.split(key)
        u = jax.random.uniform(ku, (n,), jnp.float32)
        idx = starts_j + jnp.minimum((u * counts_f).astype(jnp.int32), counts_j - 1)
        value = y[idx]
        reward = value + noise_sd * _random.normal(ke, (n,), jnp.float32) if noise_sd > 0 else value
        return Round(Observation(t=t, contexts=X[idx]), reward, value, None)

    spec = Spec(n_arms=n, group_of_arm=groups.labels, n_groups=groups.n_groups, n_features=d, reward_range=None,
                rewards="real")
    cfg = {"kind": "biased_data", "n_arms": n, "n_features": d, "reference": table.reference,
           "groups": groups.describe(), "arms": list(table.arm_names), "features": list(table.feature_names),
           "noise_sd": noise_sd, "arm_mean_reward": np.asarray(arm_mean, np.float64).tolist(),
           "regrets": {"regret": "biased regret, Eq. (1), against the best drawn individual"}, **table.info}
    return Environment(spec, groups, reset, step, lambda p: p, _name(name, "biased_data"), cfg)


def _is_numeric(series) -> bool:
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    return bool(is_numeric_dtype(series.dtype)) and not is_bool_dtype(series.dtype)


def _codes(df, columns: list[str], categorical: list[str]) -> tuple[np.ndarray, dict[str, list[str]]]:
    """Feature matrix with nominal columns turned into integer codes (sorted category order)."""
    out = np.empty((len(df), len(columns)))
    levels = {}
    for j, c in enumerate(columns):
        col = df[c]
        if c in categorical:
            cats = sorted(col.astype(str).unique())
            levels[c] = cats
            out[:, j] = col.astype(str).map({v: i for i, v in enumerate(cats)}).to_numpy(np.float64)
        else:
            out[:, j] = col.to_numpy(np.float64)
    return out, levels


def _map_labels(series, mapping: dict[str, int], field: str) -> np.ndarray:
    values = series.astype(str)
    unknown = sorted(set(values.unique()) - set(mapping))
    if unknown:
        raise ValueError(f"unknown {field} label(s) {unknown[:5]} in the data; expected one of {sorted(mapping)}")
    return values.map(mapping).to_numpy(np.int32)


_COMPAS_BUCKETS = ("Less than 25", "25 - 45", "Greater than 45")
_COMPAS_FEATURES = ("sex", "juv_fel_count", "decile_score", "juv_misd_count", "juv_other_count", "priors_count",
                    "days_b_screening_arrest", "c_days_from_compas", "c_charge_degree", "is_recid", "r_charge_degree",
                    "is_violent_recid", "vr_charge_degree", "event")


@declare("environment", "biased_data_bandit",
         example={"features": [[0.1], [0.4], [0.2], [0.9], [0.5], [0.3], [0.8], [0.7]],
                  "rewards": [0.2, 0.5, 0.1, 0.9, 0.4, 0.3, 0.8, 0.6], "group": [0, 0, 0, 0, 1, 1, 1, 1],
                  "bucket": [0, 1, 0, 1, 0, 1, 0, 1], "group_names": ["a", "b"], "bucket_names": ["low", "high"]})
def biased_data_bandit_config(features: list[list[float]], rewards: list[float], group: list[int], bucket: list[int],
                              *, group_names: list[str], bucket_names: list[str],
                              feature_names: list[str] | None = None, reference: Index = 0, standardize: bool = True,
                              intercept: bool = True, noise_sd: NonNegative = 0.0) -> Environment:
    """A data-driven biased bandit from a table given in the config (rows of features, rewards,
    group and bucket labels; see :func:`biased_table` and :func:`biased_data_bandit`)."""
    features = _bounded("features", finite_array("features", features, ndim=2))
    rewards = _bounded("rewards", finite_array("rewards", rewards, ndim=1))
    table = biased_table(features, rewards, group, bucket, group_names=group_names, bucket_names=bucket_names,
                         feature_names=feature_names, reference=reference, standardize=standardize,
                         intercept=intercept)
    return biased_data_bandit(table, noise_sd=noise_sd)


def compas_table(*, standardize: bool = True, intercept: bool = True, df: Any = None) -> BiasedTable:
    """COMPAS as in Section 5.3: group African-American (sensitive) vs the rest, arms = 3 age categories.

    Data: ``load_compas("groupfairtreatment")`` (the paper authors' filtered table, 18,316 rows;
    from ``$BAYESFAIR_DATA/compas``), or ``df`` if given. Group 1 = ``race == "African-American"``
    (sensitive), group 0 = every other race (reference). Buckets = ``age_cat`` (``Less than 25``,
    ``25 - 45``, ``Greater than 45``); 2 x 3 = 6 arms, as the paper says. Reward =
    ``v_decile_score`` (kept as recorded, including the 6 rows with -1). Context = "the remaining
    features where any nominal features are transformed into integers": the 14 columns other
    than race, age_cat, the reward and the two duplicate copies of ``decile_score``; the nominal
    ``sex`` and charge degrees become integer codes (sorted labels). Then, our choice (the paper
    does not say): z-scored columns and an intercept (d = 15).
    """
    if df is None:
        df = load_compas("groupfairtreatment")
    missing = [c for c in ("race", "age_cat", "v_decile_score", *_COMPAS_FEATURES) if c not in df.columns]
    if missing:
        raise ValueError(f"the COMPAS table lacks column(s) {missing}")
    if df["race"].isna().any():
        raise ValueError("unknown group label: the COMPAS race column has missing values")
    group = (df["race"].astype(str) == "African-American").to_numpy(np.int32)
    bucket = _map_labels(df["age_cat"], {b: i for i, b in enumerate(_COMPAS_BUCKETS)}, "age_cat")
    cats = [c for c in _COMPAS_FEATURES if not _is_numeric(df[c])]
    X, levels = _codes(df, list(_COMPAS_FEATURES), cats)
    info = {"dataset": "compas", "variant": "groupfairtreatment", "reward": "v_decile_score",
            "group_column": "race", "sensitive": "African-American", "bucket_column": "age_cat",
            "categorical_codes": levels}
    return biased_table(X, df["v_decile_score"].to_numpy(np.float64), group, bucket,
                        group_names=("rest", "African-American"), bucket_names=_COMPAS_BUCKETS,
                        feature_names=_COMPAS_FEATURES, reference=0, standardize=standardize, intercept=intercept,
                        info=info)


@declare("environment", hidden=("name",))
def compas_bandit(*, standardize: bool = True, intercept: bool = True, noise_sd: NonNegative = 0.0,
                  name: str | None = None) -> Environment:
    """The COMPAS biased bandit of Section 5.3 (6 arms; see :func:`compas_table`)."""
    return biased_data_bandit(compas_table(standardize=standardize, intercept=intercept), noise_sd=noise_sd,
                              name=_name(name, "compas_biased"))


_FI_REWARD = "Total Household Income"
_FI_GROUP = "Household Head Sex"
_FI_AGE = "Household Head Age"


def family_income_table(*, n_buckets: int = 5, reward_scale: float = 1e5, standardize: bool = True,
                        intercept: bool = True, df: Any = None) -> BiasedTable:
    """Philippine family income as in Section 5.3: group household-head sex, arms = 5 age buckets x sex.

    Data: ``load_family_income()`` (41,544 households; ``$BAYESFAIR_DATA/family_income``) or
    ``df``. Group 1 = male household head (the paper's sensitive, "male-grouped arms"), group 0 =
    female (reference). Buckets: ``Household Head Age`` cut into ``n_buckets`` equal-width
    intervals over its range (5 gives the paper's (8, 27], (27, 45], (45, 63], (63, 81], (81, 99]);
    2 x 5 = 10 arms. Reward: ``Total Household Income`` divided by ``reward_scale`` (default
    1e5, i.e. in units of 100,000 PHP, so the unit-noise widths of the interval policies are on
    the reward's scale; our choice). Context: the 57 remaining columns, the nominal ones as
    integer codes (sorted labels), z-scored, plus an intercept (d = 58; the scaling is ours).
    """
    import pandas as pd

    n_buckets = positive_int("n_buckets", n_buckets, minimum=2)
    scale = finite_float("reward_scale", reward_scale)
    if scale <= 0:
        raise ValueError(f"reward_scale must be > 0, got {scale}")
    if df is None:
        df = load_family_income()
    missing = [c for c in (_FI_REWARD, _FI_GROUP, _FI_AGE) if c not in df.columns]
    if missing:
        raise ValueError(f"the family income table lacks column(s) {missing}")
    group = _map_labels(df[_FI_GROUP], {"Female": 0, "Male": 1}, _FI_GROUP)
    age = df[_FI_AGE].to_numpy(np.float64)
    if not np.all(np.isfinite(age)):
        raise ValueError(f"{_FI_AGE} must be finite")
    bucket, edges = pd.cut(age, n_buckets, labels=False, retbins=True)
    bucket_names = tuple(f"({edges[i]:.3g}, {edges[i + 1]:.3g}]" for i in range(n_buckets))
    features = [c for c in df.columns if c not in (_FI_REWARD, _FI_GROUP, _FI_AGE)]
    kinds = df.attrs.get("column_types", {})
    cats = [c for c in features if kinds.get(c) == "vals" or not _is_numeric(df[c])]
    X, levels = _codes(df, features, cats)
    info = {"dataset": "family_income", "reward": _FI_REWARD, "reward_scale": scale, "group_column": _FI_GROUP,
            "sensitive": "Male", "bucket_column": _FI_AGE, "bucket_edges": edges.tolist(),
            "categorical_columns": cats}
    return biased_table(X, df[_FI_REWARD].to_numpy(np.float64) / scale, group, np.asarray(bucket, np.int32),
                        group_names=("Female", "Male"), bucket_names=bucket_names, feature_names=features,
                        reference=0, standardize=standardize, intercept=intercept, info=info)


@declare("environment", hidden=("name",))
def family_income_bandit(*, n_buckets: Annotated[int, at.Ge(2)] = 5, reward_scale: Positive = 1e5,
                         standardize: bool = True, intercept: bool = True, noise_sd: NonNegative = 0.0,
                         name: str | None = None) -> Environment:
    """The family-income biased bandit of Section 5.3 (10 arms; see :func:`family_income_table`)."""
    table = family_income_table(n_buckets=n_buckets, reward_scale=reward_scale, standardize=standardize,
                                intercept=intercept)
    return biased_data_bandit(table, noise_sd=noise_sd, name=_name(name, "family_income_biased"))


def env_params(env: Environment, key: Any, runs: int) -> Any:
    """The per-run environment parameters that :func:`bayesfair.simulate` draws for ``(key, runs)``.

    Mirrors the simulator's key derivation (``key -> (env, policy)``, one env key per run, whose
    first split is ``reset``'s key), so experiments can recover e.g. the true psi of every run
    to score a policy's tracked bias estimate post hoc. ``tests/test_biased.py`` checks it against
    the means the simulator records.
    """
    runs = positive_int("runs", runs)
    check_instances(env, runs)
    k_env, _ = jax.random.split(as_key(key))
    keys = jax.random.split(k_env, runs)
    return jax.vmap(lambda k, r: reset_run(env, jax.random.split(k)[0], r))(keys, jnp.arange(runs, dtype=jnp.int32))
