"""COMPAS: group bias in the violent decile score (African-American vs rest), by NUTS.

Default ``--model glm`` (bayesfair.posteriors.group_glm; models/README.md): an ordered-logistic
likelihood on score - 1 (0..9) with a level shift for African-American that has its own prior, the
age category as a bucket effect shared by the groups, and the bias reported as the average
counterfactual difference in the expected score level (a direct effect: the context holds the
general decile score). ``--likelihood beta_binomial|binomial`` and ``--compare-likelihoods`` for
the alternatives. Target acceptance 0.99 by default with ``--model glm``: on all rows the centred
random effects at 0.95 left 3 divergences in 4,000 draws, at 0.99 none (models/README.md). The
rest of this docstring describes ``--model paper``.

Model (bayesfair.posteriors.group_bias; group_fairness_biased_feedback_aamas2022, Section 3.1,
Eq. 2): arm i = (race group, age category) returns the violent decile score, with linear
predictor eta = x . (beta_i + psi_g(i)); beta_i ~ N(beta_bar, tau^2 I) with one population prior shared by both groups
(the paper's "the groups are equal in reality"), psi_rest = 0, psi_African-American ~ N(0, s^2 I),
beta_bar ~ N(0, prior_sd^2 I), and half-normal priors on tau, s (and sigma for the Gaussian):
the package's DEFAULT_PRIORS.

Likelihood (``--likelihood``): **binomial** by default, score - 1 ~ Binomial(9, sigmoid(eta)).
Why: ``v_decile_score`` is an integer 1..10 (a decile), which a Gaussian misfits badly (it puts
mass outside 1..10 and between the integers, and cannot follow the pile-up at 1: a posterior
predictive check of the Gaussian fit showed it); the binomial has exactly the support 1..10 and a
variance that shrinks towards the ends. The 6 rows with score -1 (recorded as such in the table,
not a decile) are dropped for the binomial. psi is then a shift in the log-odds of the score's
position in 1..10. ``--likelihood gaussian`` keeps the paper's Eq. 2 (y = score, all rows);
``bernoulli`` does not apply (the table has no 0/1 outcome that is not also a context column).

Data (bayesfair.environments.biased.compas_table): the paper authors' filtered COMPAS table
(18,316 rows), 2 groups x 3 age categories = 6 arms, the 14 remaining features as integer codes,
z-scored, plus an intercept (d = 15). Reference group: "rest" (every race but African-American).
Because the features are z-scored, the ``intercept`` coordinate of psi is the bias in the violent
decile score of an individual with average features, and every other coordinate is the bias in
the score's slope on that feature (per standard deviation).

Writes to ``--out`` (default ``./artifacts/compas_group_bias``, gitignored), atomically:
``posterior.nc`` (ArviZ DataTree: posterior and sample_stats), ``psi_hdi.csv`` (mean, sd, 90% HDI,
ESS, R-hat of every psi coordinate), ``psi_forest.png``, ``ppc.png``, ``loo_compare.csv`` and
``summary.json`` (see bayesfair.workflow.recipes._group_bias; with --model glm: ._glm).

Usage: python models/compas_group_bias.py [--out DIR] [--warmup 1000] [--samples 1000] [--chains 4]
       [--rows N] [--seed 0]        (or: bayesfair fit compas_group_bias [ARGS])
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from bayesfair.environments.biased import compas_table
from bayesfair.workflow.recipes import _group_bias as recipe

NAME = "compas_group_bias"


def build(args):
    """The COMPAS table (2 groups x 3 age categories) and its description for summary.json."""
    table = compas_table()
    return table, {"dataset": "compas (compas_filtered_groupfairtreatment.csv)", "reward": "v_decile_score",
                   "arms": "race group x age_cat", "group": "race: African-American (sensitive) vs rest (reference)"}


def response(table, args):
    """binomial: score - 1 in 0..9, the 6 rows with score -1 dropped; gaussian: the score, all rows."""
    score = np.asarray(table.rewards, np.float64)
    if args.likelihood in ("binomial", "beta_binomial", "ordered_logistic"):
        keep = (score >= 1) & (score <= 10)
        form = {"binomial": "Binomial(9, .)", "beta_binomial": "BetaBinomial(9, .)",
                "ordered_logistic": "ordered logistic over 0..9"}[args.likelihood]
        return score - 1, keep, f"v_decile_score - 1 ~ {form}; {int((~keep).sum())} rows outside 1..10 dropped"
    if args.likelihood == "bernoulli":
        print("compas_group_bias.py: error: --likelihood bernoulli needs a 0/1 outcome; v_decile_score is 1..10: "
              "use binomial (default) or gaussian", file=sys.stderr)
        raise SystemExit(2)
    return score, None, f"v_decile_score, {args.likelihood}"


def main(argv: list[str] | None = None, *, out: Path | None = None) -> int:
    """Run the recipe (``argv``: its flags; ``out``: the default ``--out``). Returns the exit code."""
    return recipe.run(argv, out=out, name=NAME, doc=__doc__, build=build, title="COMPAS group bias",
                      likelihood="binomial", response=response, glm_likelihood="ordered_logistic",
                      glm_likelihoods=("ordered_logistic", "beta_binomial", "binomial"), glm_target_accept=0.99)


if __name__ == "__main__":
    sys.exit(main())
