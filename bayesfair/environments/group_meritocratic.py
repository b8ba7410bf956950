"""Environments of group meritocratic fairness (group_meritocratic_fairness_linear_cb_neurips2022).

Every round shows K candidates with contexts x_t,a in R^d and a sensitive group s_t,a; the expected
reward is mu* . x_t,a and the noisy reward adds Gaussian noise (Section 3). The *relative rank* of
a candidate is F_s(mu* . x_t,a), the CDF of its own group's reward distribution at its expected
reward. Each :class:`~bayesfair.core.types.Round` carries it as ``extra["fair"]``, so the simulator
records the fair pseudo-regret of Eq. (1) / Definition 3.2 as ``fair_regret`` =
sum_t (max_a F_s(mu* . x_t,a) - pi_t . F(mu* . x_t)); the standard pseudo-regret of Remark 3.1 is
the simulator's ``regret`` (from ``Round.mean``).

Three settings:

- :func:`gmf_synthetic`, Section 6: one candidate per group per round (arm a = group a, K = 4,
  d = 4K + 1 = 17), X_a = B_a Y_a + c_a with Y_a uniform on [0, 1]^4, reward noise 2 xi.
- :func:`gmf_multigroup`, Section 7 / Appendix E: K candidates per round with i.i.d. group labels
  s_t,a ~ Categorical(p) (``Observation.groups``), each with its group's context distribution.
- :func:`gmf_adult` (built on :func:`gmf_population`), Section 7's real-data study with the UCI
  Adult data standing in for the US census data: candidates drawn uniformly from a finite
  population, the reward a least-squares linear estimate of the outcome fitted once on the data
  plus small Gaussian noise.

True group CDFs
---------------
In the synthetic settings the reward of group g is an offset plus a weighted sum of independent
U[0, 1] variables, whose CDF is known in closed form (inclusion-exclusion over the corners of the
box, the weighted Irwin-Hall distribution). It is evaluated in float64 once, at construction, on
a uniform grid of 2^14 + 1 points over the support and linearly interpolated inside jit (error
below 1e-6 for the default problem). When a group has more than 12 non-zero weights (2^12 terms)
the CDF is instead estimated once from 2^20 (> 1e6) independent draws, stored as a sorted table
per group and looked up by binary search inside jit. In a finite population (Adult) the true CDF
of a group is exactly the empirical CDF of its members' expected rewards, so the relative rank of
every member is computed once (float64) and a round only gathers it.

Explicit instances: ``theta`` (mu*) as ``[runs, d]``, ``group_weights`` as ``[runs, G, m]`` or a
``theta_file`` give every run its own mu* (run r plays row r; the study's runs must equal the
number of rows), with each run's true group CDFs tabulated from its own weights (analytic CDFs
only) and carried in the run's :class:`BlockInstance`.

:func:`selection_rate` turns a simulation's ``group_exposure`` and ``group_offered`` into the
selection share per group normalized by how many candidates of that group were offered (Section 7,
Figure 2).
"""

from __future__ import annotations

import itertools
import math
from typing import Annotated, Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core import _random
from bayesfair.core._validate import finite_array, finite_float, group_labels, positive_int
from bayesfair.core.declare import Cap, Count, Index, Labels, Positive, Unit, declare
from bayesfair.core.groups import Groups
from bayesfair.core.types import Observation, Round, Spec
from bayesfair.datasets import load_adult
from bayesfair.environments.arms import load_instances, per_run_reset
from bayesfair.environments.base import Environment

__all__ = [
    "PAPER_GROUP_WEIGHTS",
    "GroupCDF",
    "BlockInstance",
    "gmf_synthetic",
    "gmf_multigroup",
    "gmf_population",
    "gmf_adult",
    "AdultPopulation",
    "adult_population",
    "uniform_sum_cdf",
    "uniform_sum_pdf",
    "selection_rate",
]

#: Group-specific coordinates of mu* in the Section 6 simulation, one row per group (block of 4).
#: The paper only says they are "manually picked values between 0 and 9"; these are the values of
#: the authors' public code (github.com/CSML-IIT-UCL/GMFbandits, ``simulation.py``), which give
#: the four visibly different reward densities of Figure 1.
PAPER_GROUP_WEIGHTS = ((4.0, 3.0, 7.0, 0.0), (8.0, 0.0, 0.0, 0.0), (5.0, 5.0, 0.0, 0.0), (2.0, 2.0, 2.0, 2.0))

_GRID = 2 ** 14  # intervals of the tabulated analytic CDF
_MAX_EXACT_TERMS = 12  # up to 2^12 inclusion-exclusion terms; beyond, a sampled table
_MC_DRAWS = 2 ** 20  # draws of a sampled CDF table (> 1e6)
# Of a weight: contexts, rewards and the per-round fair-policy metrics are float32. 1e300 became inf
# (NaN rewards); weights of 1e10 gave means ~1e10 and NaN FairX regrets in the simulator (pi* of the
# round computed in float32; found by the fuzz test, root cause open), 1e8 gave exact results.
_MAX_MAGNITUDE = 1e8
_ADULT_NUMERIC = ("age", "education-num", "capital-gain", "capital-loss", "hours-per-week")
_ADULT_CATEGORICAL = ("workclass", "marital-status", "occupation", "relationship", "race", "sex")


# --------------------------------------------------------------------------- validation helpers


def _group_names(names: Any, n_groups: int) -> tuple[str, ...]:
    if names is None:
        return tuple(f"G{g + 1}" for g in range(n_groups))
    names = tuple(str(n) for n in names)
    if len(names) != n_groups:
        raise ValueError(f"group_names must have one name per group ({n_groups}), got {len(names)}")
    if len(set(names)) != n_groups:
        raise ValueError(f"group_names must be distinct, got {names}")
    return names


def _slot_groups(n_candidates: int, names: tuple[str, ...]) -> Groups:
    """Groups record for K candidate slots whose groups are drawn per round.

    The simulator takes each round's membership from ``Observation.groups``; the slot labels
    (``arange(K) % G``) are placeholders that only name the groups (and may leave a group without a
    slot when K < G, which ``Groups.from_labels`` would refuse).
    """
    labels = (np.arange(n_candidates) % len(names)).astype(np.int32)
    return Groups(labels=labels, names=names)


def _proportions(proportions: Any, n_groups: int | None) -> np.ndarray:
    p = finite_array("proportions", proportions, ndim=1, size=n_groups)
    if np.any(p < 0):
        g = int(np.flatnonzero(p < 0)[0])
        raise ValueError(f"proportions must be >= 0, got proportions[{g}] = {p[g]}")
    never = np.flatnonzero(p == 0)
    if never.size:
        g = int(never[0])
        raise ValueError(f"group {g} is never offered (proportions[{g}] = 0): its relative rank is undefined; "
                         f"remove the group instead")
    if abs(p.sum() - 1.0) > 1e-6:
        raise ValueError(f"proportions must sum to 1, got {p.sum():.8g}")
    return p / p.sum()


# --------------------------------------------------------------------------- weighted Irwin-Hall CDF


def _positive_weights(weights: Any, offset: float) -> tuple[np.ndarray, float]:
    """Write offset + sum w_i U_i as offset' + sum |w_i| U_i' (U' = 1 - U where w < 0), zeros dropped."""
    w = np.asarray(weights, np.float64).reshape(-1)
    return np.abs(w[w != 0]), float(offset + w[w < 0].sum())


def _subset_sums(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    masks = np.array(list(itertools.product((0.0, 1.0), repeat=w.size)), np.float64).reshape(-1, w.size)
    return masks @ w, (-1.0) ** masks.sum(axis=1)


def uniform_sum_cdf(x: Any, weights: Any, offset: float = 0.0) -> np.ndarray:
    """CDF of ``offset + sum_i w_i U_i`` with U_i i.i.d. uniform on [0, 1], in float64.

    For positive weights, P(sum w_i U_i <= x) = sum_{J subset [n]} (-1)^|J| (x - w_J)_+^n /
    (n! prod w_i), with w_J = sum_{j in J} w_j (inclusion-exclusion over the corners of the box
    prod [0, w_i]); negative weights are reflected (w U = w + |w| (1 - U)) and zero weights dropped.

    Parameters
    ----------
    x : array-like
        Points.
    weights : array-like [n]
        The w_i, at least one non-zero.
    offset : float
        Constant added to the sum.
    """
    w, off = _positive_weights(weights, offset)
    if w.size == 0:
        raise ValueError("weights must have a non-zero entry (the sum would be a constant)")
    x = np.asarray(x, np.float64) - off
    sums, signs = _subset_sums(w)
    n = w.size
    terms = np.maximum(x[..., None] - sums, 0.0) ** n
    out = (terms @ signs) / (math.factorial(n) * np.prod(w))
    out = np.where(x >= w.sum(), 1.0, np.where(x <= 0, 0.0, out))
    return np.clip(out, 0.0, 1.0)


def uniform_sum_pdf(x: Any, weights: Any, offset: float = 0.0) -> np.ndarray:
    """Density of ``offset + sum_i w_i U_i`` (the derivative of :func:`uniform_sum_cdf`)."""
    w, off = _positive_weights(weights, offset)
    if w.size == 0:
        raise ValueError("weights must have a non-zero entry (the sum would be a constant)")
    x = np.asarray(x, np.float64) - off
    n = w.size
    if n == 1:
        return np.where((x >= 0) & (x <= w[0]), 1.0 / w[0], 0.0)
    sums, signs = _subset_sums(w)
    terms = np.maximum(x[..., None] - sums, 0.0) ** (n - 1)
    out = (terms @ signs) / (math.factorial(n - 1) * np.prod(w))
    return np.where((x < 0) | (x > w.sum()), 0.0, np.maximum(out, 0.0))


class GroupCDF(NamedTuple):
    """True reward CDF of every group, for lookups inside jit.

    ``kind == "grid"``: ``table [G, N + 1]`` holds F_g on the uniform grid ``lo_g + i h_g``
    (linear interpolation). ``kind == "sorted"``: ``table [G, N]`` holds N sorted reward draws per
    group (the empirical CDF, found by binary search). ``lo``, ``step`` are ``[G]``.
    """

    kind: str
    table: jax.Array
    lo: jax.Array
    step: jax.Array

    def __call__(self, groups: jax.Array, values: jax.Array) -> jax.Array:
        """F_g(v) for the ``[K]`` groups ``groups`` and values ``values`` (jit-friendly)."""
        table = self.table
        values = jnp.asarray(values, jnp.float32)
        if self.kind == "grid":
            n = self.table.shape[1] - 1
            lo = self.lo[groups]
            step = self.step[groups]
            u = jnp.clip((values - lo) / step, 0.0, float(n))
            i = jnp.minimum(jnp.floor(u).astype(jnp.int32), n - 1)
            frac = u - i
            f0, f1 = table[groups, i], table[groups, i + 1]
            return f0 + frac * (f1 - f0)
        n = self.table.shape[1]
        lo_i = jnp.zeros_like(groups, jnp.int32)
        hi_i = jnp.full_like(groups, n, jnp.int32)

        def body(_, c):  # count of draws <= value: first index with table > value
            a, b = c
            mid = (a + b) // 2
            le = table[groups, jnp.minimum(mid, n - 1)] <= values
            return jnp.where(le & (a < b), mid + 1, a), jnp.where(le | (a >= b), b, mid)

        a, _ = jax.lax.fori_loop(0, int(math.ceil(math.log2(n + 1))) + 1, body, (lo_i, hi_i))
        return a.astype(jnp.float32) / n


def _block_cdf(group_weights: np.ndarray, offsets: np.ndarray, seed: int) -> tuple[GroupCDF, str]:
    """True CDFs of offset_g + sum_j w_gj U_j: analytic (gridded) or a sampled sorted table."""
    n_groups = group_weights.shape[0]
    nonzero = (group_weights != 0).sum(axis=1)
    if nonzero.max() <= _MAX_EXACT_TERMS:
        table = np.zeros((n_groups, _GRID + 1))
        lo, step = np.zeros(n_groups), np.zeros(n_groups)
        for g in range(n_groups):
            w, off = _positive_weights(group_weights[g], offsets[g])
            lo[g], step[g] = off, w.sum() / _GRID
            grid = off + step[g] * np.arange(_GRID + 1)
            f = np.maximum.accumulate(uniform_sum_cdf(grid, group_weights[g], offsets[g]))
            f[0], f[-1] = 0.0, 1.0
            table[g] = f
        return GroupCDF("grid", jnp.asarray(table, jnp.float32), jnp.asarray(lo, jnp.float32),
                        jnp.asarray(step, jnp.float32)), "analytic"
    rng = np.random.default_rng(seed)
    table = np.empty((n_groups, _MC_DRAWS), np.float32)
    for g in range(n_groups):
        draws = offsets[g] + rng.random((_MC_DRAWS, group_weights.shape[1])) @ group_weights[g]
        table[g] = np.sort(draws)
    zeros = jnp.zeros((n_groups,), jnp.float32)
    return GroupCDF("sorted", jnp.asarray(table), zeros, zeros), f"sampled ({_MC_DRAWS} draws per group)"


# --------------------------------------------------------------------------- synthetic block design


class _BlockDesign(NamedTuple):
    group_weights: np.ndarray  # [G, m]
    bias_step: float
    bias_weight: float
    theta: np.ndarray  # [d] = (w_1, ..., w_G, bias_weight)
    offsets: np.ndarray  # [G]: bias_weight * bias_step * (g + 1)


def _block_design(group_weights: Any, theta: Any, n_groups: int | None, block_size: int | None,
                  bias_step: Any, bias_weight: Any) -> _BlockDesign:
    """Validate the Section 6 construction: d = G m + 1, block g holds Y, the last coordinate c_g."""
    bias_step = finite_float("bias_step", bias_step)
    if theta is not None:
        if group_weights is not None:
            raise ValueError("give either theta or group_weights, not both")
        g = positive_int("n_groups", 4 if n_groups is None else n_groups)
        m = positive_int("block_size", 4 if block_size is None else block_size)
        th = finite_array("theta", theta, ndim=1)
        d = g * m + 1
        if th.shape[0] != d:
            raise ValueError(f"theta has length {th.shape[0]} but the context dimension is d = n_groups * block_size "
                             f"+ 1 = {g} * {m} + 1 = {d}")
        weights, bw = th[:-1].reshape(g, m), float(th[-1])
    else:
        weights = finite_array("group_weights", PAPER_GROUP_WEIGHTS if group_weights is None else group_weights,
                               ndim=2)
        if n_groups is not None and weights.shape[0] != positive_int("n_groups", n_groups):
            raise ValueError(f"group_weights has {weights.shape[0]} rows (groups) but n_groups is {n_groups}")
        if block_size is not None and weights.shape[1] != positive_int("block_size", block_size):
            raise ValueError(f"group_weights has {weights.shape[1]} columns but block_size is {block_size}")
        bw = finite_float("bias_weight", bias_weight)
    for name, big in (("theta" if theta is not None else "group_weights", float(np.abs(weights).max())),
                      ("theta" if theta is not None else "bias_weight", abs(bw)), ("bias_step", abs(bias_step))):
        if big > _MAX_MAGNITUDE:
            raise ValueError(f"{name} must have magnitudes <= {_MAX_MAGNITUDE:g} (contexts and rewards are "
                             f"float32), got {big:g}")
    constant = np.flatnonzero(np.all(weights == 0, axis=1))
    if constant.size:
        raise ValueError(f"group {int(constant[0])} has all-zero weights: its reward is a constant, so its relative "
                         f"rank is undefined (Assumption A(iv) needs an absolutely continuous reward)")
    n_g = weights.shape[0]
    theta_full = np.concatenate([weights.reshape(-1), [bw]])
    offsets = bw * bias_step * (np.arange(n_g) + 1.0)
    return _BlockDesign(weights, bias_step, bw, theta_full, offsets)


def _block_instances(group_weights: Any, theta: Any, n_groups: int | None, block_size: int | None,
                     bias_step: Any, bias_weight: Any, theta_file: str | None = None) -> list[_BlockDesign] | None:
    """The per-run designs of explicit instances (``theta [runs, d]`` or ``group_weights [runs, G, m]``,
    or ``theta_file``), each validated as :func:`_block_design` does, or ``None`` for one fixed mu*."""
    if theta_file is not None:
        if theta is not None or group_weights is not None:
            raise ValueError("give theta_file alone (not with theta or group_weights)")
        theta = load_instances(theta_file, "theta_file")
    if theta is not None and np.ndim(theta) == 2:
        field, rows = "theta", finite_array("theta", theta)
    elif group_weights is not None and np.ndim(group_weights) == 3:
        field, rows = "group_weights", finite_array("group_weights", group_weights)
    else:
        if theta is not None and np.ndim(theta) != 1:
            raise ValueError(f"theta must be [d] (mu*, the same in every run) or [runs, d] (one mu* per run), got "
                             f"shape {np.shape(theta)}")
        if group_weights is not None and np.ndim(group_weights) != 2:
            raise ValueError(f"group_weights must be [G, m] (the same in every run) or [runs, G, m] (one per run), "
                             f"got shape {np.shape(group_weights)}")
        return None
    if field == "group_weights" and theta is not None:
        raise ValueError("give either theta or group_weights, not both")
    designs = []
    for r, row in enumerate(rows):
        try:
            designs.append(_block_design(group_weights, row, n_groups, block_size, bias_step, bias_weight)
                           if field == "theta" else
                           _block_design(row, None, n_groups, block_size, bias_step, bias_weight))
        except ValueError as exc:
            raise ValueError(f"{field}[{r}] (the instance of run {r}): {exc}") from None
    return designs


def _instance_field(group_weights: Any) -> str:
    """The name of the per-run instances, for errors: ``group_weights`` if given per run, else ``theta``."""
    return "group_weights" if group_weights is not None and np.ndim(group_weights) == 3 else "theta"


def _block_contexts(u: jax.Array, groups: jax.Array, n_groups: int, bias_step: float) -> jax.Array:
    """x = B_s Y + c_s: Y (``u [K, m]``) in block s of a ``G m + 1`` vector, bias_step (s + 1) last."""
    k, m = u.shape
    onehot = jax.nn.one_hot(groups, n_groups, dtype=jnp.float32)  # [K, G]
    blocks = (onehot[:, :, None] * u[:, None, :]).reshape(k, n_groups * m)
    return jnp.concatenate([blocks, (bias_step * (groups + 1.0))[:, None]], axis=1)


class BlockInstance(NamedTuple):
    """Per-run parameters of a Section 6/7 environment with explicit per-run instances: mu*
    (``theta [d]``), the expected reward of each candidate slot (``slot_means [K]``) and the run's
    true group CDFs (the grid of :class:`GroupCDF`: ``cdf_table [G, N + 1]``, ``cdf_lo``,
    ``cdf_step [G]``)."""

    theta: jax.Array
    slot_means: jax.Array
    cdf_table: jax.Array
    cdf_lo: jax.Array
    cdf_step: jax.Array


def _slot_means(design: _BlockDesign, n_candidates: int, proportions: np.ndarray | None) -> np.ndarray:
    """E[mu* . X] of every candidate slot: its group's mean (Section 6), or the population mean."""
    group_means = design.offsets + 0.5 * design.group_weights.sum(axis=1)  # E[reward | group]
    if proportions is None:
        return group_means
    return np.full(n_candidates, float(proportions @ group_means))


def _instance_reset(designs: list[_BlockDesign], n_candidates: int, proportions: np.ndarray | None, cdf_seed: int,
                    field: str):
    """``reset(key, run) -> BlockInstance`` of run ``run``, from one design per run."""
    tables, los, steps = [], [], []
    for r, design in enumerate(designs):
        cdf, _ = _block_cdf(design.group_weights, design.offsets, cdf_seed)
        if cdf.kind != "grid":
            many = int((design.group_weights != 0).sum(axis=1).max())
            raise ValueError(f"{field}[{r}] (the instance of run {r}) has a group with {many} non-zero weights: "
                             f"per-run instances need the analytic group CDF (at most {_MAX_EXACT_TERMS} non-zero "
                             f"weights per group; a sampled CDF table per run would take "
                             f"{_MC_DRAWS * 4 // 2**20} MiB per group)")
        tables.append(np.asarray(cdf.table))
        los.append(np.asarray(cdf.lo))
        steps.append(np.asarray(cdf.step))
    fields = {"theta": np.stack([dsg.theta for dsg in designs]),
              "slot_means": np.stack([_slot_means(dsg, n_candidates, proportions) for dsg in designs]),
              "cdf_table": np.stack(tables), "cdf_lo": np.stack(los), "cdf_step": np.stack(steps)}
    rows = {f: per_run_reset(arr, field) for f, arr in fields.items()}

    def reset(key: jax.Array, run: Any = 0) -> BlockInstance:
        return BlockInstance(**{f: row(key, run) for f, row in rows.items()})

    reset.runs = len(designs)  # explicit instances: the simulator passes the run index and checks the runs
    reset.instances_of = field
    return reset


def _block_env(design: _BlockDesign, n_candidates: int, proportions: np.ndarray | None, noise_sd: float,
               names: tuple[str, ...], cdf_seed: int, name: str, setting: str,
               designs: list[_BlockDesign] | None = None, field: str = "theta") -> Environment:
    """The environment of one fixed ``design``, or of one design per run (``designs``, explicit
    instances of ``field``; ``design`` is then the first, for the shapes)."""
    if designs is not None:
        design = designs[0]
    n_groups, m = design.group_weights.shape
    d = n_groups * m + 1
    fixed_groups = jnp.arange(n_candidates, dtype=jnp.int32) if proportions is None else None
    logits = None if proportions is None else jnp.asarray(np.log(proportions), jnp.float32)

    if designs is None:
        cdf, cdf_kind = _block_cdf(design.group_weights, design.offsets, cdf_seed)
        theta_j = jnp.asarray(design.theta, jnp.float32)
        slot_means_j = jnp.asarray(_slot_means(design, n_candidates, proportions), jnp.float32)

        def reset(key: jax.Array) -> jax.Array:
            return theta_j

        def unpack(params: jax.Array) -> tuple[jax.Array, GroupCDF]:
            return params, cdf

        def arm_means(params: jax.Array) -> jax.Array:
            return slot_means_j
    else:
        cdf_kind = "analytic (per run)"
        reset = _instance_reset(designs, n_candidates, proportions, cdf_seed, field)

        def unpack(params: BlockInstance) -> tuple[jax.Array, GroupCDF]:
            return params.theta, GroupCDF("grid", params.cdf_table, params.cdf_lo, params.cdf_step)

        def arm_means(params: BlockInstance) -> jax.Array:
            return params.slot_means

    def step(key: jax.Array, params: Any, t: jax.Array) -> Round:
        theta, cdf = unpack(params)
        k_grp, k_ctx, k_rew = jax.random.split(key, 3)
        if fixed_groups is None:
            groups = jax.random.categorical(k_grp, logits, shape=(n_candidates,)).astype(jnp.int32)
        else:
            groups = fixed_groups
        x = _block_contexts(_random.uniform(k_ctx, (n_candidates, m), jnp.float32), groups, n_groups,
                            design.bias_step)
        mean = x @ theta
        reward = mean + noise_sd * _random.normal(k_rew, (n_candidates,), jnp.float32)
        obs = Observation(t=t, contexts=x, groups=None if fixed_groups is not None else groups)
        return Round(obs, reward, mean, {"fair": cdf(groups, mean)})

    if proportions is None:
        groups_rec = Groups.from_labels(np.arange(n_groups), names)
    else:
        groups_rec = _slot_groups(n_candidates, names)

    spec = Spec(n_arms=n_candidates, group_of_arm=groups_rec.labels, n_groups=n_groups, n_features=d, rewards="real")
    cfg = {
        "kind": name, "setting": setting, "n_candidates": n_candidates, "n_groups": n_groups, "block_size": m,
        "n_features": d, "bias_step": design.bias_step, "noise_sd": noise_sd,
        **({"theta": design.theta.tolist(), "bias_weight": design.bias_weight} if designs is None else
           {"theta": {"distribution": "per_run", "runs": len(designs), "given_as": field}}),
        "group_names": list(names), "true_cdf": cdf_kind,
        "proportions": None if proportions is None else proportions.tolist(),
    }
    env = Environment(spec, groups_rec, reset, step, arm_means, name, cfg)
    return env


@declare("environment")
def gmf_synthetic(
    *,
    group_weights: Any = None,
    theta: list[float] | Any = None,
    n_groups: Count | None = None,
    block_size: Count | None = None,
    bias_step: float = 3.0,
    bias_weight: float = 1.0,
    noise_sd: Positive = 2.0,
    group_names: list[str] | Any = None,
    cdf_seed: Index = 0,
    theta_file: str | None = None,
) -> Environment:
    """Section 6 simulation: one candidate per group per round, arm a is group a.

    X_a = B_a Y_a + c_a with Y_a uniform on [0, 1]^m (m = ``block_size``, the paper's 4): B_a puts
    Y_a in the a-th block of m coordinates of a d = G m + 1 vector (the paper's "starting from the
    4a-th coordinate", a = 1..K, read as the a-th block) and c_a is zero except its last coordinate,
    ``bias_step * a`` (the paper's 3a, a group bias). mu* has the group-specific weights in the
    blocks and ``bias_weight`` (the paper's 1) last. Rewards are mu* . X_a + ``noise_sd`` xi with
    xi ~ N(0, 1) (the paper's eta_t = 2 xi_t). mu* is fixed (the same in every run), as in the paper.
    With the defaults, K = 4 and d = 17.

    The contexts of different arms are independent and mu* . X_a is absolutely continuous for every
    arm, so Assumption A holds and Proposition 3.1 / Lemma 4.1 apply.

    Parameters
    ----------
    group_weights : array-like [G, m] or [runs, G, m], optional
        The group-specific coordinates of mu* (default :data:`PAPER_GROUP_WEIGHTS`, G = m = 4). A
        group with all-zero weights is refused (its reward would be a constant). ``[runs, G, m]``:
        explicit per-run instances (run r plays ``group_weights[r]``, with the scalar
        ``bias_weight``; the study's runs must equal the number of rows).
    theta : array-like [d] or [runs, d], optional
        The full mu* instead (length ``n_groups * block_size + 1``, defaults 4 and 4; last entry is
        the bias weight), or one mu* per run (explicit instances: run r plays ``theta[r]``; the
        study's runs must equal the number of rows). Each run's true group CDFs are then computed
        from its own mu* (analytic CDFs only: at most 12 non-zero weights per group).
    theta_file : str, optional
        Instead of ``theta``: a ``[runs, d]`` matrix in a ``.npy`` file or comma-separated text
        (one run per line), e.g. another implementation's instances (the config form).
    n_groups, block_size : int, optional
        Checks on the shape of ``group_weights`` (or the shape of ``theta``).
    bias_step, bias_weight : float
        c_a's last coordinate is ``bias_step * a``; ``bias_weight`` multiplies it in mu*.
    noise_sd : float
        Standard deviation of the reward noise (> 0).
    group_names : sequence of str, optional
        Default ``G1..GK``.
    cdf_seed : int
        Seed of the sampled CDF tables (only used with more than 12 non-zero weights in a group).

    Returns
    -------
    Environment
        ``step`` gives ``Round(Observation(t, x [K, d]), reward [K], mean [K], {"fair": [K]})``
        where ``fair`` is each candidate's relative rank F_a(mu* . x_a) under the true group CDF.
        ``arm_means`` is E[mu* . X_a] per arm.
    """
    designs = _block_instances(group_weights, theta, n_groups, block_size, bias_step, bias_weight, theta_file)
    design = designs[0] if designs else _block_design(group_weights, theta, n_groups, block_size, bias_step,
                                                      bias_weight)
    sd = float(noise_sd)  # > 0: declared
    g = design.group_weights.shape[0]
    names = _group_names(group_names, g)
    return _block_env(design, g, None, sd, names, int(cdf_seed),
                      "gmf_synthetic", "Section 6: one candidate per group", designs, _instance_field(group_weights))


@declare("environment", example={"n_candidates": 6, "proportions": [0.4, 0.3, 0.2, 0.1]})
def gmf_multigroup(
    n_candidates: Annotated[Count, Cap(10_000)],
    proportions: list[Unit] | Any,
    *,
    group_weights: Any = None,
    theta: list[float] | Any = None,
    n_groups: Count | None = None,
    block_size: Count | None = None,
    bias_step: float = 3.0,
    bias_weight: float = 1.0,
    noise_sd: Positive = 2.0,
    group_names: list[str] | Any = None,
    cdf_seed: Index = 0,
    theta_file: str | None = None,
) -> Environment:
    """Section 7 / Appendix E: K candidates per round with i.i.d. group labels.

    Every round draws K i.i.d. pairs (X_t,a, s_t,a): s_t,a ~ Categorical(``proportions``) and,
    given s, X = B_s Y + c_s with the Section 6 construction of :func:`gmf_synthetic`. The groups
    are in ``Observation.groups``; small proportions make minorities (q_min < 1 in Eq. (4)).

    Parameters
    ----------
    n_candidates : int
        K >= 1 candidates per round.
    proportions : array-like [G]
        P(s_t,a = g), each > 0 (a group that is never offered has no relative rank and is
        refused), summing to 1.
    group_weights, theta, n_groups, block_size, bias_step, bias_weight, noise_sd, group_names, cdf_seed, theta_file
        As in :func:`gmf_synthetic` (including the per-run instances ``theta [runs, d]``,
        ``group_weights [runs, G, m]`` or ``theta_file``); G is the number of groups.

    Returns
    -------
    Environment
        As :func:`gmf_synthetic`, with ``Observation.groups`` ``[K]``; ``extra["fair"]`` is
        F_{s_t,a}(mu* . x_t,a). The slot labels of ``env.groups`` are placeholders (the simulator
        counts groups from ``Observation.groups``); ``arm_means`` is the population mean reward.
    """
    k = int(n_candidates)  # >= 1: declared
    designs = _block_instances(group_weights, theta, n_groups, block_size, bias_step, bias_weight, theta_file)
    design = designs[0] if designs else _block_design(group_weights, theta, n_groups, block_size, bias_step,
                                                      bias_weight)
    g = design.group_weights.shape[0]
    p = _proportions(proportions, g)
    sd = float(noise_sd)  # > 0: declared
    names = _group_names(group_names, g)
    return _block_env(design, k, p, sd, names, int(cdf_seed),
                      "gmf_multigroup", "Section 7: K candidates with i.i.d. groups", designs,
                      _instance_field(group_weights))



# --------------------------------------------------------------------------- finite populations


@declare("environment",
         example={"features": [[0.1, 0.2], [0.3, 0.4], [0.5, 0.1], [0.2, 0.9]],
                  "mean_reward": [0.1, 0.5, 0.3, 0.8], "groups": [0, 0, 1, 1], "n_candidates": 2})
def gmf_population(
    features: Any,
    mean_reward: Any,
    groups: Labels | Any,
    *,
    n_candidates: int = 10,
    noise_sd: Positive = 0.1,
    group_names: list[str] | Any = None,
    name: str = "gmf_population",
    config: dict[str, Any] | None = None,
) -> Environment:
    """Candidates drawn uniformly (with replacement) from a finite population (Section 7).

    Each round draws K row indices uniformly; the contexts are the rows of ``features``, the groups
    the rows' labels (so they are i.i.d. with the population's group proportions), the expected
    reward ``mean_reward[i]`` and the reward adds ``noise_sd`` N(0, 1). The true reward CDF of a
    group is the empirical CDF of its members' expected rewards (exact: a candidate of group g is a
    uniform draw among g's members), so each member's relative rank F_g(mean_i) =
    #{j in g : mean_j <= mean_i} / |g| is computed once in float64.

    Parameters
    ----------
    features : array-like [N, d]
    mean_reward : array-like [N]
    groups : int or str array-like [N]
        Labels 0..G-1, each used at least once (a group never offered is refused), or group names
        (numbered in the order they first appear, and then the default ``group_names``).
    n_candidates : int
        K candidates per round.
    noise_sd : float
        > 0.
    group_names : sequence of str, optional
    name, config
        Environment name and extra configuration recorded in results.
    """
    x = finite_array("features", features, ndim=2)
    n, d = x.shape
    mean = finite_array("mean_reward", mean_reward, ndim=1, size=n)
    for name, arr in (("features", x), ("mean_reward", mean)):
        if np.abs(arr).max() > _MAX_MAGNITUDE:
            raise ValueError(f"{name} must have magnitudes <= {_MAX_MAGNITUDE:g} (contexts and rewards are float32), "
                             f"got {np.abs(arr).max():g}")
    lab, found = group_labels("groups", groups)  # indices, or names numbered in first-appearance order
    if lab.shape != (n,):
        raise ValueError(f"groups must have one label per row of features ({n}), got shape {lab.shape}")
    group_names = found if group_names is None else group_names
    n_groups = int(lab.max()) + 1
    counts = np.bincount(lab, minlength=n_groups)
    never = np.flatnonzero(counts == 0)
    if never.size:
        raise ValueError(f"group {int(never[0])} has no member in the population, so it is never offered; "
                         f"relabel the groups 0..G-1 without gaps")
    k = positive_int("n_candidates", n_candidates)
    sd = float(noise_sd)  # > 0: declared
    names = _group_names(group_names, n_groups)
    rank = np.empty(n)
    for g in range(n_groups):
        idx = np.flatnonzero(lab == g)
        srt = np.sort(mean[idx])
        rank[idx] = np.searchsorted(srt, mean[idx], side="right") / idx.size
    x_j = jnp.asarray(x, jnp.float32)
    mean_j = jnp.asarray(mean, jnp.float32)
    rank_j = jnp.asarray(rank, jnp.float32)
    lab_j = jnp.asarray(lab, jnp.int32)
    pop_mean = jnp.full((k,), float(mean.mean()), jnp.float32)

    def reset(key: jax.Array) -> jax.Array:
        return jnp.zeros((), jnp.float32)

    def step(key: jax.Array, params: jax.Array, t: jax.Array) -> Round:
        k_idx, k_rew = jax.random.split(key)
        idx = jax.random.randint(k_idx, (k,), 0, n)
        m = mean_j[idx]
        reward = m + sd * _random.normal(k_rew, (k,), jnp.float32)
        return Round(Observation(t=t, contexts=x_j[idx], groups=lab_j[idx]), reward, m, {"fair": rank_j[idx]})

    def arm_means(params: jax.Array) -> jax.Array:
        return pop_mean

    groups_rec = _slot_groups(k, names)
    spec = Spec(n_arms=k, group_of_arm=groups_rec.labels, n_groups=n_groups, n_features=d, rewards="real")
    cfg = {"kind": name, "setting": "Section 7: candidates drawn from a finite population", "n_candidates": k,
           "population": n, "n_features": d, "n_groups": n_groups, "group_names": list(names),
           "group_sizes": counts.tolist(), "noise_sd": sd, "true_cdf": "exact population ECDF", **(config or {})}
    return Environment(spec, groups_rec, reset, step, arm_means, name, cfg)


class AdultPopulation(NamedTuple):
    """The Adult population prepared for :func:`gmf_population` (numpy arrays)."""

    features: np.ndarray  # [N, d] float64, first column the constant 1
    feature_names: tuple[str, ...]
    label: np.ndarray  # [N] 0/1 outcome (income > 50K)
    mean_reward: np.ndarray  # [N] least-squares linear estimate features @ theta
    theta: np.ndarray  # [d]
    groups: np.ndarray  # [N] int
    group_names: tuple[str, ...]


def adult_population(df: Any, *, group: str = "race", min_group_size: int = 1,
                     group_in_features: bool = True) -> AdultPopulation:
    """Features, outcome, groups and the linear reward model of the Adult data.

    Rows with a missing value are dropped. Features: a constant 1; ``age``, ``education-num``,
    ``capital-gain``, ``capital-loss``, ``hours-per-week`` standardized; one-hot ``workclass``,
    ``marital-status``, ``occupation``, ``relationship``, ``race``, ``sex`` (first level dropped).
    ``fnlwgt`` (a survey weight, not an attribute of the person), ``education`` (duplicates
    ``education-num``) and ``native-country`` (41 levels, 91% one value) are left out. The reward
    model is the least-squares fit of the outcome (income > 50K, 0/1) on the features over the
    whole population, fitted once (Section 7: "a previously computed linear estimate").

    Parameters
    ----------
    df : pandas.DataFrame
        :func:`bayesfair.datasets.load_adult` output.
    group : {"race", "sex"}
        The sensitive attribute. Groups are ordered by size (largest first).
    min_group_size : int
        Drop the members of groups with fewer people (the paper drops census groups under 5,000).
    group_in_features : bool
        Keep the group's one-hot columns among the features (default, like the paper's census
        features, which include race and sex).
    """
    if group not in ("race", "sex"):
        raise ValueError(f"group must be 'race' or 'sex', got {group!r}")
    min_size = positive_int("min_group_size", min_group_size)
    cols = list(_ADULT_NUMERIC) + list(_ADULT_CATEGORICAL)
    missing = [c for c in cols + ["label"] if c not in df.columns]
    if missing:
        raise ValueError(f"df lacks the Adult columns {missing}; pass bayesfair.datasets.load_adult() output")
    data = df[cols + ["label"]].dropna()
    sizes = data[group].value_counts()
    keep = sizes[sizes >= min_size]
    if keep.empty:
        raise ValueError(f"no {group} group has at least min_group_size={min_size} members")
    data = data[data[group].isin(keep.index)].reset_index(drop=True)
    names = tuple(str(v) for v in keep.index)  # value_counts: largest first
    lab = data[group].map({v: i for i, v in enumerate(keep.index)}).to_numpy(np.int64)
    blocks, fnames = [np.ones((len(data), 1))], ["const"]
    for c in _ADULT_NUMERIC:
        v = data[c].to_numpy(np.float64)
        blocks.append(((v - v.mean()) / (v.std() if v.std() > 0 else 1.0))[:, None])
        fnames.append(c)
    for c in _ADULT_CATEGORICAL:
        if c == group and not group_in_features:
            continue
        levels = sorted(data[c].unique())
        for lev in levels[1:]:
            blocks.append((data[c].to_numpy() == lev).astype(np.float64)[:, None])
            fnames.append(f"{c}={lev}")
    x = np.hstack(blocks)
    y = data["label"].to_numpy(np.float64)
    theta = np.linalg.solve(x.T @ x + 1e-8 * np.eye(x.shape[1]), x.T @ y)
    return AdultPopulation(x, tuple(fnames), y, x @ theta, theta, lab, names)


@declare("environment", hidden=("df",))
def gmf_adult(
    n_candidates: Annotated[Count, Cap(10_000)] = 10,
    *,
    group: Literal["race", "sex"] = "race",
    noise_sd: Positive = 0.1,
    split: Literal["all", "train", "test"] = "all",
    min_group_size: Count = 1,
    group_in_features: bool = True,
    df: Any = None,
) -> Environment:
    """Section 7's real-data study on UCI Adult (the stand-in for the US census data).

    K candidates per round are drawn uniformly from the Adult population (so their groups are
    i.i.d. with the population's proportions: in the 46,033 complete rows of both files race has
    four minorities of 9.5%, 3.1%, 0.9% and 0.8%); the context is the person's features, the
    expected reward the linear least-squares estimate of the outcome (:func:`adult_population`)
    and the reward adds ``noise_sd`` N(0, 1) ("small gaussian noise"; the paper does not give its
    size: the estimate's standard deviation over the population is 0.26). The data are read with
    :func:`bayesfair.datasets.load_adult` (``$BAYESFAIR_DATA/adult``) unless ``df`` is given.

    Parameters
    ----------
    n_candidates : int
        K (the paper's census study uses 10).
    group : {"race", "sex"}
    noise_sd : float
    split : {"train", "test", "all"}
        Which Adult file(s) form the population.
    min_group_size, group_in_features
        See :func:`adult_population`.
    df : pandas.DataFrame, optional
        Pre-loaded ``load_adult`` output.
    """
    if df is None:
        df = load_adult(split)
    pop = adult_population(df, group=group, min_group_size=min_group_size, group_in_features=group_in_features)
    cfg = {"dataset": "adult", "split": split, "group": group, "min_group_size": min_group_size,
           "group_in_features": group_in_features, "feature_names": list(pop.feature_names),
           "theta": pop.theta.tolist(), "reward": "least-squares linear estimate of income > 50K"}
    return gmf_population(pop.features, pop.mean_reward, pop.groups, n_candidates=n_candidates, noise_sd=noise_sd,
                          group_names=pop.group_names, name=f"gmf_adult_{group}", config=cfg)


# --------------------------------------------------------------------------- results


def selection_rate(ds: Any, checkpoint: int = -1) -> Any:
    """Selection share per group normalized by how often the group was offered (Section 7, Fig. 2).

    ``group_exposure / group_offered``: the expected number of selected candidates of group g
    (sum_t of pi_t over g's candidates) over the number of g's candidates offered. Uniform random
    play gives 1/K for every group; demographic parity in the multi-candidate sense is equal
    values across groups.

    Parameters
    ----------
    ds : xarray.Dataset
        :func:`bayesfair.simulate` output.
    checkpoint : int
        Position in the checkpoint dimension (default: the last, T), or ``None`` for all.

    Returns
    -------
    xarray.DataArray
        ``[policy, run, group]`` (``[policy, run, checkpoint, group]`` with ``checkpoint=None``);
        NaN where a group was never offered.
    """
    exp, off = ds["group_exposure"], ds["group_offered"]
    if checkpoint is not None:
        exp, off = exp.isel(checkpoint=checkpoint), off.isel(checkpoint=checkpoint)
    return (exp / off.where(off > 0)).rename("selection_rate")
