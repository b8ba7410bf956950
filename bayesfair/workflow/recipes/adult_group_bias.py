"""Adult (UCI census income): group bias in P(income > 50K) by sex or race, by NUTS.

Default ``--model glm`` (bayesfair.posteriors.group_glm; models/README.md): Bernoulli-logit with a
level shift per non-reference group that has its own prior, the age buckets as an effect shared by
the groups, one-hot levels with fewer than ``--min-level-rows`` rows merged into ``<column>=other``,
the PAV calibration check, and the bias as the average counterfactual difference in P(income >
50K) (a direct effect: the context holds occupation, hours and marital status). The rest of this
docstring describes ``--model paper``.

Model (bayesfair.posteriors.group_bias; group_fairness_biased_feedback_aamas2022, Section 3.1,
Eq. 2, with the m-group form of Section 4): arm i = (group, age bucket) returns
y ~ Bernoulli(sigmoid(x . (beta_i + psi_g(i)))) (default) or the Gaussian of Eq. 2;
beta_i ~ N(beta_bar, tau^2 I) with one population
prior shared by every group (the paper's "the groups are equal in reality"), psi = 0 for the
reference group, psi_g ~ N(0, s^2 I) for every other group, beta_bar ~ N(0, prior_sd^2 I),
half-normal priors on tau, s (and sigma for the Gaussian): the package's DEFAULT_PRIORS.

Groups (``--group``):
  ``sex``  (default): Male (reference) and Female; 2 x 5 = 10 arms.
  ``race``: White (reference; the largest group), Black, Asian-Pac-Islander, Amer-Indian-Eskimo,
           Other: 5 groups, 4 psi vectors, 5 x 5 = 25 arms (the smallest cells hold 18 and 35 rows).
Arms: the group x 5 age buckets 17-24, 25-34, 35-44, 45-54, 55+ (age is the usual life-cycle
  driver of income and every group x bucket cell of the data is non-empty with these cuts).
Reward: the income label, 1 if income > 50K else 0. Likelihood (``--likelihood``): **bernoulli**
  by default, P(income > 50K) = sigmoid(x . (beta_i + psi_g(i))): the outcome is 0/1, so the
  Bernoulli is its exact noise model and keeps the means in [0, 1]; psi is then a shift in the
  log-odds. ``--likelihood gaussian`` is the paper's Eq. 2 as a linear probability model (psi in
  probability units; its noise is neither Gaussian nor of constant variance), kept for
  comparison with the earlier results. (Hours-per-week, the other continuous candidate, measures
  labour supply rather than an outcome.)
Context: education-num, log1p(capital-gain), log1p(capital-loss), hours-per-week, a
  native-country == United-States indicator, and one-hot workclass, marital-status and occupation
  (the most frequent level of each is the baseline), z-scored, plus an intercept (d = 31).
  Left out: age (the arms), sex and race (the groups, in both settings, so the two fits use the
  same context), fnlwgt (a census sampling weight, not a property of the person), education (the
  same information as education-num), relationship (its Husband/Wife levels encode sex).
Rows: adult.data and adult.test together (48,842) less the 3,620 rows with a missing value = 45,222.

Writes to ``--out`` (default ``./artifacts/adult_group_bias_<group>``, gitignored),
atomically: ``posterior.nc`` (ArviZ DataTree), ``psi_hdi.csv``, ``psi_forest.png``, ``ppc.png``,
``loo_compare.csv`` and ``summary.json`` (see bayesfair.workflow.recipes._group_bias; with --model glm: ._glm).

Usage: python models/adult_group_bias.py [--group sex|race] [--out DIR] [--warmup 1000]
       [--samples 1000] [--chains 4] [--rows N] [--seed 0]
       [--likelihood bernoulli|gaussian]   (or: bayesfair fit adult_group_bias [ARGS])
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from bayesfair.datasets import load_adult
from bayesfair.environments.biased import biased_table
from bayesfair.workflow.recipes import _group_bias as recipe
from bayesfair.workflow.recipes._features import one_hot

NAME = "adult_group_bias"
#: group setting -> (column, group names with the reference first)
GROUPS = {
    "sex": ("sex", ("Male", "Female")),
    "race": ("race", ("White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other")),
}
AGE_CUTS = (25, 35, 45, 55)  # bucket k: AGE_CUTS[k-1] <= age < AGE_CUTS[k]
AGE_BUCKETS = ("17-24", "25-34", "35-44", "45-54", "55+")
NUMERIC = ("education-num", "capital-gain", "capital-loss", "hours-per-week")
ONE_HOT = ("workclass", "marital-status", "occupation")


def adult_table(group: str = "sex", *, df: Any = None, min_level_rows: int = 0):
    """The Adult data as a :class:`~bayesfair.environments.biased.BiasedTable` (choices: module docstring).

    ``df`` defaults to ``load_adult("all")``; rows with a missing value are dropped. One-hot levels
    with fewer than ``min_level_rows`` rows are merged into one ``<column>=other`` level (a rare
    level is often perfectly separated: ``marital-status=Married-AF-spouse`` has 3 rows, all y = 1);
    ``info["merged_levels"]`` lists them.
    """
    import pandas as pd  # pandas is heavy at import; only the table needs it

    if group not in GROUPS:
        raise ValueError(f"group must be one of {sorted(GROUPS)}, got {group!r}")
    if df is None:
        df = load_adult("all")
    column, names = GROUPS[group]
    need = ["age", "label", column, "native-country", *NUMERIC, *ONE_HOT]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise ValueError(f"the Adult table lacks column(s) {missing}")
    df = df.dropna(subset=need)
    unknown = sorted(set(df[column].astype(str)) - set(names))
    if unknown:
        raise ValueError(f"unknown {column} label(s) {unknown}; expected one of {list(names)}")
    g = df[column].astype(str).map({v: i for i, v in enumerate(names)}).to_numpy(np.int32)
    age = df["age"].to_numpy(np.int64)
    if age.min() < 17:
        raise ValueError(f"age must be >= 17 (the first bucket is {AGE_BUCKETS[0]}), got {age.min()}")
    bucket = np.searchsorted(np.asarray(AGE_CUTS), age, side="right").astype(np.int32)
    cols = {"education-num": df["education-num"].to_numpy(np.float64),
            "log1p(capital-gain)": np.log1p(df["capital-gain"].to_numpy(np.float64)),
            "log1p(capital-loss)": np.log1p(df["capital-loss"].to_numpy(np.float64)),
            "hours-per-week": df["hours-per-week"].to_numpy(np.float64),
            "native-country=United-States": (df["native-country"] == "United-States").to_numpy(np.float64)}
    dummies, baselines, merged = one_hot(df, ONE_HOT, min_level_rows)
    X = pd.DataFrame({**cols, **dummies})
    info = {"dataset": "adult", "split": "all (adult.data + adult.test), rows with a missing value dropped",
            "reward": "label (income > 50K), 0/1", "group_column": column, "reference": names[0],
            "bucket_column": "age", "age_cuts": list(AGE_CUTS), "one_hot_baselines": baselines,
            "min_level_rows": int(min_level_rows), "merged_levels": merged}
    return biased_table(X.to_numpy(), df["label"].to_numpy(np.float64), g, bucket, group_names=names,
                        bucket_names=AGE_BUCKETS, feature_names=list(X.columns), reference=0, info=info)


def _add_args(p) -> None:
    p.add_argument("--group", choices=sorted(GROUPS), default="sex",
                   help="sensitive attribute: sex (Male = reference) or race (White = reference); default sex")


def build(args):
    table = adult_table(args.group, min_level_rows=args.min_level_rows if args.model == "glm" else 0)
    if args.out == args.default_out:  # the default folder: one per grouping
        args.out = args.out.with_name(f"{NAME}_{args.group}")
    column, names = GROUPS[args.group]
    return table, {"dataset": "adult", "reward": "income > 50K (0/1)",
                   "arms": f"{column} x age buckets {', '.join(AGE_BUCKETS)}",
                   "group": f"{column}: {', '.join(names[1:])} vs {names[0]} (reference)"}


def response(table, args):
    """The 0/1 label for either likelihood; the binomial (bounded scores) does not apply."""
    if args.likelihood not in ("bernoulli", "gaussian"):
        print(f"adult_group_bias: error: --likelihood {args.likelihood} is not for a 0/1 outcome: "
              "use bernoulli (default) or gaussian", file=sys.stderr)
        raise SystemExit(2)
    note = "income > 50K, 0/1" + (" (linear probability model)" if args.likelihood == "gaussian" else "")
    return table.rewards, None, note


def main(argv: list[str] | None = None, *, out: Path | None = None) -> int:
    """Run the recipe (``argv``: its flags; ``out``: the default ``--out``). Returns the exit code."""
    return recipe.run(argv, out=out, name=NAME, doc=__doc__, build=build, add_args=_add_args, title="Adult group bias",
                      likelihood="bernoulli", response=response, glm_likelihood="bernoulli",
                      glm_likelihoods=("bernoulli",))


if __name__ == "__main__":
    sys.exit(main())
