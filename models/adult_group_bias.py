"""Adult (UCI census income): the posterior of the group-bias term psi of sex or race, by NUTS.

Model (bayesfair.posteriors.group_bias; group_fairness_biased_feedback_aamas2022, Section 3.1,
Eq. 2, with the m-group form of Section 4): arm i = (group, age bucket) returns
y = x . (beta_i + psi_g(i)) + N(0, sigma^2); beta_i ~ N(beta_bar, tau^2 I) with one population
prior shared by every group (the paper's "the groups are equal in reality"), psi = 0 for the
reference group, psi_g ~ N(0, s^2 I) for every other group, beta_bar ~ N(0, prior_sd^2 I),
half-normal priors on tau, s, sigma.

Groups (``--group``):
  ``sex``  (default): Male (reference) and Female; 2 x 5 = 10 arms.
  ``race``: White (reference; the largest group), Black, Asian-Pac-Islander, Amer-Indian-Eskimo,
           Other: 5 groups, 4 psi vectors, 5 x 5 = 25 arms (the smallest cells hold 18 and 35 rows).
Arms: the group x 5 age buckets 17-24, 25-34, 35-44, 45-54, 55+ (age is the usual life-cycle
  driver of income and every group x bucket cell of the data is non-empty with these cuts).
Reward: the income label, 1 if income > 50K else 0, modelled as Gaussian, i.e. a linear
  probability model. Why: it is the outcome a decision-maker reads off this data set (and the
  one whose group gaps the fairness literature reports), and with a linear-Gaussian model psi is
  in probability units (psi's ``intercept`` = the difference in P(income > 50K) for a person with
  average features, beyond what the spread of the arms explains). What the Gaussian misses: the
  noise of a 0/1 outcome is not Gaussian nor of constant variance and the fitted means are not
  kept in [0, 1]; with tens of thousands of rows the within-arm fit is tight anyway, and psi's
  uncertainty is dominated by the between-arm spread tau (module docstring of group_bias), so we
  accept the approximation rather than leave the paper's model. (Hours-per-week, the other
  continuous candidate, measures labour supply rather than an outcome.)
Context: education-num, log1p(capital-gain), log1p(capital-loss), hours-per-week, a
  native-country == United-States indicator, and one-hot workclass, marital-status and occupation
  (the most frequent level of each is the baseline), z-scored, plus an intercept (d = 31).
  Left out: age (the arms), sex and race (the groups, in both settings, so the two fits use the
  same context), fnlwgt (a census sampling weight, not a property of the person), education (the
  same information as education-num), relationship (its Husband/Wife levels encode sex).
Rows: adult.data and adult.test together (48,842) less the 3,620 rows with a missing value = 45,222.

Writes to ``--out`` (default ``models/artifacts/adult_group_bias_<group>``, gitignored),
atomically: ``posterior.nc`` (ArviZ DataTree), ``psi_hdi.csv``, ``psi_forest.png`` and
``summary.json`` (see models/_group_bias_recipe.py).

Usage: python models/adult_group_bias.py [--group sex|race] [--out DIR] [--warmup 500]
       [--samples 500] [--chains 2] [--rows N] [--seed 0]   (or: bayesfair fit adult_group_bias [ARGS])
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

if str(Path(__file__).resolve().parent) not in sys.path:  # models/_group_bias_recipe.py, also under `bayesfair fit`
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import _group_bias_recipe as recipe  # noqa: E402

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


def adult_table(group: str = "sex", *, df: Any = None):
    """The Adult data as a :class:`~bayesfair.environments.biased.BiasedTable` (choices: module docstring).

    ``df`` defaults to ``load_adult("all")``; rows with a missing value are dropped.
    """
    import pandas as pd

    from bayesfair.environments.biased import biased_table

    if group not in GROUPS:
        raise ValueError(f"group must be one of {sorted(GROUPS)}, got {group!r}")
    if df is None:
        from bayesfair.datasets import load_adult

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
    baselines = {}
    for c in ONE_HOT:
        levels = df[c].astype(str)
        counts = levels.value_counts()
        baselines[c] = str(counts.index[0])  # the most frequent level is the baseline
        for level in sorted(counts.index[1:]):
            cols[f"{c}={level}"] = (levels == level).to_numpy(np.float64)
    X = pd.DataFrame(cols)
    info = {"dataset": "adult", "split": "all (adult.data + adult.test), rows with a missing value dropped",
            "reward": "label (income > 50K), Gaussian", "group_column": column, "reference": names[0],
            "bucket_column": "age", "age_cuts": list(AGE_CUTS), "one_hot_baselines": baselines}
    return biased_table(X.to_numpy(), df["label"].to_numpy(np.float64), g, bucket, group_names=names,
                        bucket_names=AGE_BUCKETS, feature_names=list(X.columns), reference=0, info=info)


def _add_args(p) -> None:
    p.add_argument("--group", choices=sorted(GROUPS), default="sex",
                   help="sensitive attribute: sex (Male = reference) or race (White = reference); default sex")


def build(args):
    table = adult_table(args.group)
    if args.out == recipe.HERE / "artifacts" / NAME:  # the default folder: one per grouping
        args.out = recipe.HERE / "artifacts" / f"{NAME}_{args.group}"
    column, names = GROUPS[args.group]
    return table, {"dataset": "adult", "reward": "income > 50K (0/1), Gaussian (linear probability model)",
                   "arms": f"{column} x age buckets {', '.join(AGE_BUCKETS)}",
                   "group": f"{column}: {', '.join(names[1:])} vs {names[0]} (reference)"}


def main(argv: list[str] | None = None) -> int:
    return recipe.run(argv, name=NAME, doc=__doc__, build=build, add_args=_add_args, title="Adult group bias")


if __name__ == "__main__":
    sys.exit(main())
