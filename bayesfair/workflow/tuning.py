"""Hyper-parameter selection by grid search on a validation split (FairX paper, Section 5.1).

The FairX experiments split each dataset at random into 20% validation and 80% test examples,
grid-search every algorithm's hyper-parameters "to minimize fairness regret on the validation
set" and report the chosen setting on the test set. :func:`validation_split` makes the split and
:func:`grid_search` runs :func:`bayesfair.simulate` on the validation environment for every grid
point (all points in one call, so they see the same environment draws and their differences are
paired) and scores each one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from bayesfair.core._validate import positive_int
from bayesfair.datasets.splits import Split, validation_split
from bayesfair.environments.base import Environment
from bayesfair.policies.base import Policy
from bayesfair.simulation.simulator import simulate

__all__ = ["Split", "validation_split", "GridSearchResult", "grid_search", "grid_points"]

_MAX_POINTS = 10_000
# Scalar metrics every simulation records (other result variables: pass a callable metric).
NAMED_METRICS = ("fairness_regret", "reward_regret", "regret", "reward")


class GridSearchResult(NamedTuple):
    """What :func:`grid_search` returns.

    Attributes
    ----------
    scores : pandas.DataFrame
        One row per grid point: the parameters, ``policy`` (the name in ``results``), ``score``,
        ``score_se`` (standard error over runs, for named metrics) and ``rank`` (1 = best).
    best : dict
        The parameters of the best point (lowest score, or highest if ``minimize=False``; the
        first in grid order on ties).
    best_score : float
    results : xarray.Dataset
        The validation simulation of every grid point.
    """

    scores: Any
    best: dict[str, Any]
    best_score: float
    results: Any


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def grid_points(grid: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Validate a grid ``{name: [values...]}`` and return its points (cartesian product, in order)."""
    if not isinstance(grid, Mapping):
        raise TypeError(f"grid must be a mapping of parameter name -> list of values, got {type(grid).__name__}")
    if not grid:
        raise ValueError("grid must have at least one parameter")
    names, values = [], []
    for name, vals in grid.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise TypeError(f"grid parameter names must be identifier strings, got {name!r}")
        if isinstance(vals, (str, bytes)) or not hasattr(vals, "__iter__"):
            raise TypeError(f"grid[{name!r}] must be a list of values, got {vals!r}")
        vals = [_plain(v) for v in (np.asarray(vals).tolist() if isinstance(vals, np.ndarray) else vals)]
        if not vals:
            raise ValueError(f"grid[{name!r}] must have at least one value")
        if len({repr(v) for v in vals}) != len(vals):
            raise ValueError(f"grid[{name!r}] has repeated values: {vals}")
        names.append(name)
        values.append(vals)
    n_points = math.prod(len(v) for v in values)
    if n_points > _MAX_POINTS:
        raise ValueError(f"grid has {n_points} points (more than {_MAX_POINTS}); make it smaller")
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]


def _label(point: dict[str, Any]) -> str:
    return ",".join(f"{k}={v:.10g}" if isinstance(v, float) else f"{k}={v}" for k, v in point.items())


def grid_search(
    make_env: Any,
    make_policy: Callable[..., Any],
    grid: Mapping[str, Any],
    *,
    metric: str | Callable[[Any], float] = "fairness_regret",
    horizon: int,
    runs: int,
    seed: Any = 0,
    merit: Any,
    minimize: bool = True,
    chunk_size: int = 1024,
    progress: bool | Callable[[dict], None] = False,
) -> GridSearchResult:
    """Score every point of a hyper-parameter grid on a (validation) environment.

    Parameters
    ----------
    make_env : Environment or callable
        The validation environment, or a zero-argument function returning it.
    make_policy : callable
        ``make_policy(**point) -> Policy`` for each grid point.
    grid : mapping name -> list of values
        The cartesian product of the lists is searched.
    metric : str or callable
        A scalar metric of the results (``"fairness_regret"`` — the paper's criterion —,
        ``"reward_regret"``, ``"regret"``, ``"reward"``): its mean over runs at the horizon.
        Or ``metric(ds) -> float`` called on the results Dataset of one policy
        (``results.sel(policy=name)``, dims ``run, checkpoint, arm``).
    horizon, runs : int
        Length and number of the validation runs.
    seed : int or jax key
        Master key of the validation simulation (shared by all grid points).
    merit : Merit
        Merit function defining pi* (and so the fairness regret).
    minimize : bool
        Lower scores are better (default). Use ``False`` for e.g. ``"reward"``.
    chunk_size, progress
        Passed to :func:`bayesfair.simulate`.

    Returns
    -------
    GridSearchResult
        ``scores`` DataFrame, ``best`` parameters, ``best_score`` and the ``results`` Dataset.
    """
    import pandas as pd

    points = grid_points(grid)
    env = make_env() if callable(make_env) and not isinstance(make_env, Environment) else make_env
    if not isinstance(env, Environment):
        raise TypeError(f"make_env must be an Environment or return one, got {type(env).__name__}")
    if not callable(make_policy):
        raise TypeError(f"make_policy must be callable (point -> Policy), got {make_policy!r}")
    if isinstance(metric, str):
        if metric not in NAMED_METRICS:
            raise ValueError(f"metric must be one of {NAMED_METRICS} or a callable, got {metric!r}")
        if merit is None and metric in ("fairness_regret", "reward_regret"):
            raise ValueError(f"metric {metric!r} is a FairX regret, defined by the merit's pi*: give a merit, or "
                             "score by metric = 'regret' or 'reward'")
    elif not callable(metric):
        raise TypeError(f"metric must be a metric name or a callable on the results, got {metric!r}")
    if not isinstance(minimize, (bool, np.bool_)):
        raise TypeError(f"minimize must be True or False, got {minimize!r}")
    horizon = positive_int("horizon", horizon)
    runs = positive_int("runs", runs)

    policies = {}
    for point in points:
        try:
            pol = make_policy(**point)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"make_policy failed on grid point {point}: {exc}") from exc
        if not isinstance(pol, Policy):
            raise TypeError(f"make_policy must return a bayesfair Policy, got {type(pol).__name__} for {point}")
        label = _label(point)
        if label in policies:  # values that print alike
            label = f"{label}#{len(policies)}"
        policies[label] = pol

    ds = simulate(seed, env, policies, horizon, runs, merit=merit, chunk_size=chunk_size, progress=progress,
                  config={"job": "grid_search", "grid": {k: list(v) for k, v in grid.items()}})
    rows = []
    for point, name in zip(points, policies, strict=True):
        sub = ds.sel(policy=name)
        if isinstance(metric, str):
            vals = np.asarray(sub[metric].isel(checkpoint=-1).values, np.float64)
            score = float(vals.mean())
            se = float(vals.std(ddof=1) / np.sqrt(runs)) if runs > 1 else float("nan")
        else:
            score = float(metric(sub))
            se = float("nan")
        rows.append({**point, "policy": name, "score": score, "score_se": se})
    table = pd.DataFrame(rows)
    finite = np.isfinite(table["score"].to_numpy())
    if not finite.any():
        raise ValueError("every grid point scored NaN/inf; check the metric")
    signed = table["score"].where(finite, np.inf if minimize else -np.inf)
    signed = signed if minimize else -signed
    table["rank"] = signed.rank(method="first").astype(int)
    best_i = int(np.argmin(signed.to_numpy()))
    best = {k: _plain(v) for k, v in points[best_i].items()}
    return GridSearchResult(table, best, float(table["score"].iloc[best_i]), ds)
