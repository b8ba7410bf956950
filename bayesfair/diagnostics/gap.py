"""Exposure under-allocation over runs: the posterior of pi*(a) - share(a), per arm and per group.

For every run r of one policy, the run's final posterior gives draws of the optimal fair policy
pi*(a) = f(mu_a) / sum_b f(mu_b) (FairX Theorem 3.1.1) and the results give the share the
policy actually gave arm a up to the last round, share_r(a) = (1/T) sum_t pi_t(a) (``compare=
"exposure"``, as in :func:`~bayesfair.diagnostics.observed_exposure`) or N_a,T / T
(``"pulls"``). The gap draws are g_r(a) = pi*(a) - share_r(a); a group's gap sums its arms'
(pi*_g - share_g). A positive gap means the arm (group) got less exposure than the posterior says
is fair: under-allocated.

:func:`exposure_gap` aggregates over the R runs and returns a pandas DataFrame, one row per arm
then one per group (columns below). The across-run mean of the per-run posterior mean gaps is
the estimate; its Monte Carlo standard error is sd over runs / sqrt(R) (ddof 1; NaN for R = 1).
The interval is the equal-tailed ``ci_prob`` interval of the pooled draws of all runs (the
mixture of the runs' posteriors: it includes the run-to-run variation), and ``p_under`` is the
pooled P(gap > 0), the average over runs of each run's posterior probability.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from bayesfair.core._validate import as_key
from bayesfair.core.merit import Merit, resolve_merit
from bayesfair.diagnostics.inputs import _labels_from, observed_exposure
from bayesfair.diagnostics.posterior import posterior_draws, run_state
from bayesfair.diagnostics.tree import _COMPARE, SHARE_TOL, _add_mu_from_theta, _fair_quantities

__all__ = ["exposure_gap", "aggregate_gap", "GAP_COLUMNS"]

ZERO_TOL = SHARE_TOL  # a gap this close to 0 is float rounding (e.g. a single group: pi*_g = share_g = 1)
GAP_COLUMNS = ("level", "name", "group", "mu", "mu_source", "share", "pi_star", "gap", "mcse", "sd", "lower",
               "upper", "p_under", "runs")


def aggregate_gap(gap: np.ndarray, ci_prob: float = 0.9) -> dict[str, np.ndarray]:
    """Aggregate gap draws ``[runs, draws, n]`` over runs (module docstring): ``gap`` (mean over
    runs of the posterior mean), ``mcse`` (sd over runs of the posterior means / sqrt(runs)),
    ``sd`` (root mean over runs of the posterior variance), ``lower``/``upper`` (pooled
    equal-tailed interval) and ``p_under`` (pooled P(gap > 0), gaps within :data:`ZERO_TOL` of
    0 counting as 0), each ``[n]``."""
    gap = np.asarray(gap, np.float64)
    if gap.ndim != 3 or min(gap.shape) == 0:
        raise ValueError(f"gap draws must be a non-empty [runs, draws, n] array, got shape {gap.shape}")
    if not 0.0 < ci_prob < 1.0:
        raise ValueError(f"ci_prob must be in (0, 1), got {ci_prob}")
    runs = gap.shape[0]
    per_run = gap.mean(axis=1)  # [runs, n]
    mcse = per_run.std(axis=0, ddof=1) / np.sqrt(runs) if runs > 1 else np.full(gap.shape[2], np.nan)
    pooled = gap.reshape(-1, gap.shape[2])
    lower, upper = np.quantile(pooled, [(1 - ci_prob) / 2, (1 + ci_prob) / 2], axis=0)
    return {"gap": per_run.mean(axis=0), "mcse": mcse, "sd": np.sqrt(gap.var(axis=1).mean(axis=0)),
            "lower": lower, "upper": upper, "p_under": (gap > ZERO_TOL).mean(axis=(0, 1))}


def exposure_gap(results: Any, states: Mapping[str, Any], policy: str, posterior: Any, merit: Merit | Callable, *,
                 runs: Sequence[int] | None = None, compare: str = "exposure", ci_prob: float = 0.9,
                 n_draws: int = 1000, key: Any = 0, group_of_arm: Any = None, contexts: Any = None,
                 link: str = "identity"):
    """Posterior exposure gap pi*(a) - share(a) per arm and group, aggregated over runs.

    Parameters
    ----------
    results, states
        From :func:`~bayesfair.diagnostics.simulate_with_states` (the states are the posteriors
        after the last round, so the shares are taken at the last checkpoint). For a policy
        without a posterior (``uniform``), ``states`` can be :func:`~bayesfair.diagnostics.fit_from_log`'s.
    policy : str
        The policy.
    posterior
        The posterior family the states belong to.
    merit : Merit or callable
        Merit f of pi*.
    runs : sequence of int, optional
        The runs to aggregate (default all).
    compare : {"exposure", "pulls"}
        The share: average selection probability or pull share.
    ci_prob : float
        Probability of the pooled interval.
    n_draws, key
        Posterior draws per run (conjugate states) and the seed: run r uses
        ``jax.random.fold_in(key, r)`` (MCMC states give their stored samples).
    group_of_arm : int array [K], optional
        Groups (default: the results' ``arm_group``, else one group).
    contexts, link
        For linear families: mu_a = link(contexts_a . theta).

    Returns
    -------
    pandas.DataFrame
        One row per arm (``level="arm"``) then per group (``"group"``) with columns
        :data:`GAP_COLUMNS`: ``name`` (coordinate), ``group`` (the arm's group; the group itself),
        ``mu`` (the environment's mean averaged over runs when recorded, ``mu_source="true"``,
        else the posterior mean, ``"posterior"``; NaN for groups), ``share`` and ``pi_star`` (the
        across-run means of the share and of the posterior mean of pi*), ``gap``, ``mcse``,
        ``sd``, ``lower``, ``upper``, ``p_under`` (:func:`aggregate_gap`) and ``runs``.
        ``df.attrs`` records the policy, compare, ci_prob, round, merit and whether the
        environment's means vary over runs (``mu_varies``).
    """
    import pandas as pd

    if compare not in _COMPARE:
        raise ValueError(f"compare must be one of {_COMPARE}, got {compare!r}")
    merit = resolve_merit(merit)
    n_runs = results.sizes["run"]
    run_list = list(range(n_runs)) if runs is None else [int(r) for r in runs]
    if not run_list or any(not 0 <= r < n_runs for r in run_list):
        raise ValueError(f"runs must be a non-empty sequence of run indices in [0, {n_runs - 1}], got {runs!r}")
    base = as_key(key, "key")
    kind = "exposure" if compare == "exposure" else "pull"
    arm_gap, group_gap, shares, group_shares, pis, mus, true_mu = [], [], [], [], [], [], []
    labels = None
    first = None
    for r in run_list:
        obs = observed_exposure(results, policy=policy, run=r)
        first = first or obs
        draws, _, _ = posterior_draws(posterior, run_state(states, policy, r), key=jax.random.fold_in(base, r),
                                      n_draws=n_draws, chains=1)  # pooled over runs, no chains
        _add_mu_from_theta(draws, contexts, link)
        if "mu" not in draws:
            raise ValueError("the posterior has no mu draws: give contexts= for a linear family")
        mu = draws["mu"].reshape(-1, draws["mu"].shape[-1])
        k = mu.shape[-1]
        if obs["exposure_share"].size != k:
            raise ValueError(f"the posterior has {k} arms, the results {obs['exposure_share'].size}")
        if labels is None:
            given = group_of_arm if group_of_arm is not None else obs["group_of_arm"]
            labels = _labels_from(given, k) if given is not None else np.zeros(k, np.int64)
        member = np.eye(int(labels.max()) + 1)[labels]
        fair = _fair_quantities(merit, mu, member, None)
        share = obs[f"{kind}_share"]
        g_share = share @ member
        arm_gap.append(fair["pi_star"] - share)
        group_gap.append(fair["pi_star_group"] - g_share)
        shares.append(share)
        group_shares.append(g_share)
        pis.append(fair["pi_star"].mean(axis=0))
        mus.append(mu.mean(axis=0))
        if "true_mu" in obs:
            true_mu.append(obs["true_mu"])
    arm_stats = aggregate_gap(np.stack(arm_gap), ci_prob)
    group_stats = aggregate_gap(np.stack(group_gap), ci_prob)
    k, m = labels.size, int(labels.max()) + 1
    arm_names = [str(a) for a in first["arm_names"]]
    group_names = [str(g) for g in first["group_names"]][:m] if len(first["group_names"]) == m else \
        [str(g) for g in range(m)]
    has_true = len(true_mu) == len(run_list)
    mu_label = np.mean(true_mu, axis=0) if has_true else np.mean(mus, axis=0)
    arm_rows = pd.DataFrame({"level": "arm", "name": arm_names, "group": [group_names[g] for g in labels],
                             "mu": mu_label, "mu_source": "true" if has_true else "posterior",
                             "share": np.mean(shares, axis=0), "pi_star": np.mean(pis, axis=0), **arm_stats,
                             "runs": len(run_list)})
    group_pi = np.mean(pis, axis=0) @ member
    group_rows = pd.DataFrame({"level": "group", "name": group_names, "group": group_names, "mu": np.nan,
                               "mu_source": "", "share": np.mean(group_shares, axis=0), "pi_star": group_pi,
                               **group_stats, "runs": len(run_list)})
    df = pd.concat([arm_rows, group_rows], ignore_index=True)[list(GAP_COLUMNS)]
    df.attrs.update(policy=policy, compare=compare, ci_prob=ci_prob, round=int(first["round"]),
                    merit=str(merit.describe()), n_groups=m,
                    mu_varies=bool(has_true and np.ptp(np.asarray(true_mu), axis=0).max() > 1e-9))
    return df
