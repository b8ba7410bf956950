"""Family income (Philippines): group bias in log household income by household-head sex, by NUTS.

Default ``--model glm`` (bayesfair.posteriors.group_glm; models/README.md): a Jones-Faddy skew-t
likelihood on log income (its residuals are heavy-tailed and skewed to the right: the Gaussian
and the symmetric Student-t miss their quantiles and skewness), the household-head age bucket as
an effect shared by the sexes, a level shift for Male with its own prior, the bias as the average
counterfactual difference in expected log income. Its context (:func:`glm_table`) differs from
the paper's: the money columns (expenditures, imputed rent, farming expenses, entrepreneurial
income) and the floor area enter as log1p, so a household's log income is modelled from the logs
of what it spends (the raw amounts reach 91 sd above their mean and make the linear predictor
far more skewed than log income), and the nominal columns are one-hot levels (the paper's
integer codes of region or occupation are not quantities), those with fewer than
``--min-level-rows`` rows merged into ``<column>=other``. ``Total Income from Entrepreneurial
Acitivites`` (the survey's spelling) is a part of the total income, in both contexts: the
estimand is conditional on it. ``--likelihood student_t|gaussian`` and
``--compare-likelihoods`` for the alternatives. The rest of this docstring describes ``--model
paper``.

Model (bayesfair.posteriors.group_bias; group_fairness_biased_feedback_aamas2022, Section 3.1,
Eq. 2): arm i = (household-head sex, household-head age bucket) returns the total household
income, log(income / 100,000 PHP) = x . (beta_i + psi_g(i)) + N(0, sigma^2); beta_i ~ N(beta_bar, tau^2 I) with one
population prior shared by both groups (the paper's "the groups are equal in reality"),
psi_Female = 0 (reference), psi_Male ~ N(0, s^2 I), beta_bar ~ N(0, prior_sd^2 I), half-normal
priors on tau, s, sigma (the package's DEFAULT_PRIORS).

Likelihood: **gaussian on the log income** by default (``--raw-income`` for the income itself in
100,000 PHP, the earlier model). Why: income is positive and right-skewed with a spread that
grows with its level; on the log scale the noise is close to Gaussian with a constant variance,
which is what Eq. 2's N(0, sigma^2) assumes, and psi becomes a relative (multiplicative) shift
(psi's intercept 0.05 = about 5% higher income). Bernoulli/binomial do not apply.

Data (bayesfair.environments.biased.family_income_table, as in the paper's Section 5.3 and
experiments/biased_feedback): the Family Income and Expenditure Survey table (41,544 households).
Group = ``Household Head Sex``: Male is the paper's sensitive group ("male-grouped arms"),
Female the reference. Arms = 2 sexes x 5 equal-width buckets of ``Household Head Age``
((8.91, 27], (27, 45], (45, 63], (63, 81], (81, 99]) = 10 arms. Reward = log of ``Total
Household Income`` in units of 100,000 PHP (rows with an income <= 0 dropped; ``--raw-income``:
the income itself), Gaussian. Context = the 57 remaining columns (nominal ones as integer
codes, as the paper says), z-scored, plus an intercept (d = 58). The ``intercept`` coordinate of
psi is the difference (Male - Female head) in the (log) income of a household with average features,
beyond what the spread of the arms explains; the others are differences in slopes per sd.

Writes to ``--out`` (default ``./artifacts/family_income_group_bias``, gitignored),
atomically: ``posterior.nc`` (ArviZ DataTree), ``psi_hdi.csv``, ``psi_forest.png`` and
``ppc.png``, ``loo_compare.csv`` and ``summary.json`` (see bayesfair.workflow.recipes._group_bias;
with --model glm: ._glm).

Usage: python models/family_income_group_bias.py [--out DIR] [--warmup 1000] [--samples 1000]
       [--chains 4] [--rows N] [--seed 0] [--raw-income]     (or: bayesfair fit family_income_group_bias [ARGS])
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from bayesfair.datasets import load_family_income
from bayesfair.environments.biased import biased_table, family_income_table
from bayesfair.posteriors.group_glm import CONTINUOUS_LIKELIHOODS
from bayesfair.workflow.recipes import _group_bias as recipe
from bayesfair.workflow.recipes._features import one_hot

NAME = "family_income_group_bias"
#: Words that mark a money column of the survey (all >= 0 PHP), which the GLM's context logs.
MONEY = ("Expenditure", "expenses", "Income from", "Rental Value")


def glm_table(*, df: Any = None, min_level_rows: int = 0):
    """The family-income table with the GLM's context (module docstring): the paper's rows, groups,
    age buckets and reward (:func:`~bayesfair.environments.biased.family_income_table`), with
    log1p of the money columns and of ``House Floor Area``, the other numeric columns as they are,
    and one-hot nominal columns (most frequent level the baseline; levels with fewer than
    ``min_level_rows`` rows merged into ``<column>=other``; ``info["merged_levels"]``)."""
    import pandas as pd  # pandas is heavy at import; only the table needs it

    if df is None:
        df = load_family_income()
    paper = family_income_table(n_buckets=5, reward_scale=1e5, df=df)
    cats = list(paper.info["categorical_columns"])
    numeric = [c for c in paper.feature_names if c not in cats and c != "intercept"]
    cols: dict[str, np.ndarray] = {}
    for c in numeric:
        x = df[c].to_numpy(np.float64)
        if any(m in c for m in MONEY) or c == "House Floor Area":
            if x.min() < 0:
                raise ValueError(f"{c!r} must be >= 0 to enter as log1p, got {x.min():g}")
            cols[f"log1p({c})"] = np.log1p(x)
        else:
            cols[c] = x
    dummies, baselines, merged = one_hot(df, cats, min_level_rows)
    X = pd.DataFrame({**cols, **dummies})
    info = {**paper.info, "context": "log1p money columns and floor area, one-hot nominal columns",
            "one_hot_baselines": baselines, "min_level_rows": int(min_level_rows), "merged_levels": merged}
    return biased_table(X.to_numpy(), paper.rewards, paper.group, paper.bucket, group_names=paper.group_names,
                        bucket_names=paper.bucket_names, feature_names=list(X.columns), reference=paper.reference,
                        info=info)


def build(args):
    """The family-income table (2 sexes x 5 age buckets, reward in 100,000 PHP) and its description:
    :func:`glm_table`'s context for ``--model glm``, the paper's for ``--model paper``."""
    if args.model == "glm":
        table = glm_table(min_level_rows=args.min_level_rows)
    else:
        table = family_income_table(n_buckets=5, reward_scale=1e5)
    return table, {"dataset": "family_income", "reward": "Total Household Income / 100,000 PHP",
                   "arms": "Household Head Sex x 5 equal-width Household Head Age buckets",
                   "group": "Household Head Sex: Male (sensitive, as in the paper) vs Female (reference)"}


def _add_args(p) -> None:
    p.add_argument("--raw-income", action="store_true",
                   help="model the income in 100,000 PHP instead of its log (with the same --likelihood)")


def response(table, args):
    """log(income / 100,000 PHP) (default) or the income itself, for a continuous likelihood."""
    if args.likelihood not in CONTINUOUS_LIKELIHOODS:
        print(f"family_income_group_bias.py: error: --likelihood {args.likelihood} needs a 0/1 or bounded integer "
              f"outcome; income is continuous: use one of {', '.join(CONTINUOUS_LIKELIHOODS)}", file=sys.stderr)
        raise SystemExit(2)
    income = np.asarray(table.rewards, np.float64)
    if args.raw_income:
        return income, None, f"income / 100,000 PHP, {args.likelihood}"
    keep = income > 0
    return np.log(np.where(keep, income, 1.0)), keep, (f"log(income / 100,000 PHP), {args.likelihood}; "
                                                      f"{int((~keep).sum())} rows with income <= 0 dropped")


def main(argv: list[str] | None = None, *, out: Path | None = None) -> int:
    """Run the recipe (``argv``: its flags; ``out``: the default ``--out``). Returns the exit code."""
    return recipe.run(argv, out=out, name=NAME, doc=__doc__, build=build, add_args=_add_args,
                      title="Family income group bias (household head sex)", response=response,
                      glm_likelihood="skew_t", glm_likelihoods=("skew_t", "student_t", "gaussian"))


if __name__ == "__main__":
    sys.exit(main())
