"""Bandit policies: ``Policy(init, select, update)`` records, one module per paper family."""

from bayesfair.policies.base import CountState, Policy
from bayesfair.policies.biased import (
    group_fair_top_interval,
    group_fair_ts,
    interval_chaining,
    naive_fair,
    top_interval,
)
from bayesfair.policies.bilevel import BilevelState, bf_ts, bf_ucb, gef, gef_ts, mf, mf_ts
from bayesfair.policies.classic import epsilon_greedy, thompson, ucb1, uniform
from bayesfair.policies.fairx import UCBState, fairx_eg, fairx_ts, fairx_ucb, theorem_w0
from bayesfair.policies.group_meritocratic import fair_greedy, fair_greedy_multigroup, greedy, oful
from bayesfair.policies.linear import (
    abbasi_yadkori_beta,
    fairx_lineg,
    fairx_lints,
    fairx_linucb,
    lints,
    linucb,
    project_ellipsoid,
    project_ellipsoid_eig,
)

__all__ = [
    "Policy",
    "CountState",
    "UCBState",
    "fairx_ts",
    "fairx_ucb",
    "fairx_eg",
    "theorem_w0",
    "ucb1",
    "thompson",
    "epsilon_greedy",
    "uniform",
    "BilevelState",
    "bf_ucb",
    "bf_ts",
    "gef",
    "gef_ts",
    "mf",
    "mf_ts",
    "fairx_lints",
    "fairx_linucb",
    "fairx_lineg",
    "linucb",
    "lints",
    "project_ellipsoid",
    "project_ellipsoid_eig",
    "abbasi_yadkori_beta",
    "top_interval",
    "interval_chaining",
    "naive_fair",
    "group_fair_top_interval",
    "group_fair_ts",
    "fair_greedy",
    "fair_greedy_multigroup",
    "oful",
    "greedy",
]
