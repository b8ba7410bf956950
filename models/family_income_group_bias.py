"""Family income (Philippines): the posterior of the group-bias term psi of household-head sex, by NUTS.

Model (bayesfair.posteriors.group_bias; group_fairness_biased_feedback_aamas2022, Section 3.1,
Eq. 2): arm i = (household-head sex, household-head age bucket) returns the total household
income y = x . (beta_i + psi_g(i)) + N(0, sigma^2); beta_i ~ N(beta_bar, tau^2 I) with one
population prior shared by both groups (the paper's "the groups are equal in reality"),
psi_Female = 0 (reference), psi_Male ~ N(0, s^2 I), beta_bar ~ N(0, prior_sd^2 I), half-normal
priors on tau, s, sigma.

Data (bayesfair.environments.biased.family_income_table, as in the paper's Section 5.3 and
experiments/biased_feedback): the Family Income and Expenditure Survey table (41,544 households).
Group = ``Household Head Sex``: Male is the paper's sensitive group ("male-grouped arms"),
Female the reference. Arms = 2 sexes x 5 equal-width buckets of ``Household Head Age``
((8.91, 27], (27, 45], (45, 63], (63, 81], (81, 99]) = 10 arms. Reward = ``Total Household
Income`` in units of 100,000 PHP. Context = the 57 remaining columns (nominal ones as integer
codes, as the paper says), z-scored, plus an intercept (d = 58). The ``intercept`` coordinate of
psi is the difference (Male - Female head) in the income of a household with average features,
beyond what the spread of the arms explains; the others are differences in slopes per sd.

Writes to ``--out`` (default ``models/artifacts/family_income_group_bias``, gitignored),
atomically: ``posterior.nc`` (ArviZ DataTree), ``psi_hdi.csv``, ``psi_forest.png`` and
``summary.json`` (see models/_group_bias_recipe.py).

Usage: python models/family_income_group_bias.py [--out DIR] [--warmup 500] [--samples 500]
       [--chains 2] [--rows N] [--seed 0]     (or: bayesfair fit family_income_group_bias [ARGS])
"""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:  # models/_group_bias_recipe.py, also under `bayesfair fit`
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import _group_bias_recipe as recipe  # noqa: E402

NAME = "family_income_group_bias"


def build(args):
    """The family-income table (2 sexes x 5 age buckets, reward in 100,000 PHP) and its description."""
    from bayesfair.environments.biased import family_income_table

    table = family_income_table(n_buckets=5, reward_scale=1e5)
    return table, {"dataset": "family_income", "reward": "Total Household Income / 100,000 PHP",
                   "arms": "Household Head Sex x 5 equal-width Household Head Age buckets",
                   "group": "Household Head Sex: Male (sensitive, as in the paper) vs Female (reference)"}


def main(argv: list[str] | None = None) -> int:
    return recipe.run(argv, name=NAME, doc=__doc__, build=build, title="Family income group bias (household head sex)")


if __name__ == "__main__":
    sys.exit(main())
