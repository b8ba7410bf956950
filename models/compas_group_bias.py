"""COMPAS: the posterior of the societal-bias term psi of the hierarchical group-bias model, by NUTS.

Model (bayesfair.posteriors.group_bias; group_fairness_biased_feedback_aamas2022, Section 3.1,
Eq. 2): arm i = (race group, age category) returns v_decile_score = x . (beta_i + psi_g(i)) +
N(0, sigma^2); beta_i ~ N(beta_bar, tau^2 I) with one population prior shared by both groups
(the paper's "the groups are equal in reality"), psi_rest = 0, psi_African-American ~ N(0, s^2 I),
beta_bar ~ N(0, prior_sd^2 I), and half-normal priors on tau, s, sigma.

Data (bayesfair.environments.biased.compas_table): the paper authors' filtered COMPAS table
(18,316 rows), 2 groups x 3 age categories = 6 arms, the 14 remaining features as integer codes,
z-scored, plus an intercept (d = 15). Reference group: "rest" (every race but African-American).
Because the features are z-scored, the ``intercept`` coordinate of psi is the bias in the violent
decile score of an individual with average features, and every other coordinate is the bias in
the score's slope on that feature (per standard deviation).

Writes to ``--out`` (default ``models/artifacts/compas_group_bias``, gitignored), atomically:
``posterior.nc`` (ArviZ DataTree: posterior and sample_stats), ``psi_hdi.csv`` (mean, sd, 90% HDI,
ESS, R-hat of every psi coordinate), ``psi_forest.png`` and ``summary.json`` (see
models/_group_bias_recipe.py).

Usage: python models/compas_group_bias.py [--out DIR] [--warmup 500] [--samples 500] [--chains 2]
       [--rows N] [--seed 0]        (or: bayesfair fit compas_group_bias [ARGS])
"""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:  # models/_group_bias_recipe.py, also under `bayesfair fit`
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import _group_bias_recipe as recipe  # noqa: E402

NAME = "compas_group_bias"


def build(args):
    """The COMPAS table (2 groups x 3 age categories) and its description for summary.json."""
    from bayesfair.environments.biased import compas_table

    table = compas_table()
    return table, {"dataset": "compas (compas_filtered_groupfairtreatment.csv)", "reward": "v_decile_score",
                   "arms": "race group x age_cat", "group": "race: African-American (sensitive) vs rest (reference)"}


def main(argv: list[str] | None = None) -> int:
    return recipe.run(argv, name=NAME, doc=__doc__, build=build, title="COMPAS group bias")


if __name__ == "__main__":
    sys.exit(main())
