"""Regularisation-induced confounding on a recipe's design: the level shift with and without the
slopes' shrinkage, and with the shrinkage put on beta_total (``GlmPriors.ric_correction``).

For a recipe's ``--model glm`` design (``nutpie_bench.recipe_design``: the recipe's own table,
outcome and subsample), the pooled regression bucket + group + x (no group-by-bucket deviations,
no slope differences) is fitted three ways, by Newton's method (the logit likelihoods: Bernoulli
on y, or the binomial share of the top level for the others; least squares for the continuous
ones):

- unpenalised (the maximum-likelihood delta and its standard error);
- with a Gaussian penalty of the GLM's slope prior on beta: per-coefficient sd slope_total_sd /
  sqrt(d) (times sd(y) for a continuous outcome), the posterior mode of that prior;
- with the same penalty on beta_total = beta + Gamma delta, Gamma = ``feature_shift`` (the mode
  under the corrected prior).

Printed per fit: delta and, for the logit likelihoods, the estimand (the average over the
sensitive group's rows of P(y = 1 | group) - P(y = 1 | reference, same x and bucket)). When the
penalised delta differs from the unpenalised one by more than a standard error and the corrected
one does not, the slope prior, not the data, moves the bias.

Usage: python experiments/benchmarks/ric_check.py RECIPE [--rows N] [--seed S]
(RECIPE: compas, adult_sex, adult_race, family_income; --rows 0: all rows)
"""

from __future__ import annotations

import argparse

import numpy as np
from nutpie_bench import RECIPES, recipe_design

from bayesfair.inference.glm_fit import feature_shift
from bayesfair.posteriors.group_glm import CONTINUOUS_LIKELIHOODS, DEFAULT_GLM_PRIORS


def _newton(A: np.ndarray, y: np.ndarray, penalty: np.ndarray, logit: bool) -> tuple[np.ndarray, np.ndarray]:
    """Mode and Laplace standard errors of the penalised likelihood (penalty: diagonal precisions)."""
    w = np.zeros(A.shape[1])
    P = np.diag(penalty)
    for _ in range(100):
        if logit:
            p = 1.0 / (1.0 + np.exp(-A @ w))
            H = A.T @ (A * (p * (1 - p))[:, None]) + P
            step = np.linalg.solve(H, A.T @ (y - p) - P @ w)
        else:
            H = A.T @ A + P
            step = np.linalg.solve(H, A.T @ y) - w
        w = w + step
        if np.abs(step).max() < 1e-10:
            break
    if not logit:
        resid = y - A @ w
        H = H / (resid @ resid / (y.size - A.shape[1]))
    return w, np.sqrt(np.diag(np.linalg.inv(H)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("recipe", choices=sorted(RECIPES))
    p.add_argument("--rows", type=int, default=1000, help="subsample size (0: all rows; %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="the subsample's seed (%(default)s)")
    a = p.parse_args(argv)
    des = recipe_design(a.recipe, a.rows or None, a.seed)
    logit = des.likelihood not in CONTINUOUS_LIKELIHOODS
    y = np.asarray(des.y, np.float64)
    if logit and des.likelihood != "bernoulli":
        y = y / y.max()  # the share of the top level: a binomial-logit working response
    X = np.asarray(des.X, np.float64)
    groups = [g for g in range(des.n_groups) if g != des.reference]
    G = np.stack([des.group == g for g in groups], axis=1).astype(np.float64)
    B = np.eye(des.n_buckets)[des.bucket]
    k, d, nb = G.shape[1], X.shape[1], des.n_buckets
    slope_sd = DEFAULT_GLM_PRIORS.slope_total_sd / np.sqrt(d) * (1.0 if logit else y.std())
    ridge = np.r_[np.full(nb + k, 1e-8), np.full(d, 1.0 / slope_sd ** 2)]
    if not logit:  # least squares: the penalty is sigma^2 / prior variance, sigma^2 from the OLS fit
        w0, _ = _newton(np.column_stack([B, G, X]), y, np.full(nb + k + d, 1e-8), False)
        r = y - np.column_stack([B, G, X]) @ w0
        ridge[nb + k:] *= r @ r / (y.size - nb - k - d)
    gamma = feature_shift(des)
    BX = np.column_stack([B, X])
    r2 = 1 - np.var(G - BX @ np.linalg.lstsq(BX, G, rcond=None)[0], axis=0) / np.var(G, axis=0)
    print(f"{a.recipe}: {y.size:,} rows, d = {d}, {des.likelihood} ({'logit' if logit else 'least squares'}), "
          f"slope prior sd {slope_sd:.3g} per coefficient; R^2 of the group indicators on the features: "
          + ", ".join(f"{v:.3f}" for v in r2))
    fits = {"unpenalised": (np.column_stack([B, G, X]), np.r_[ridge[:nb + k], np.full(d, 1e-8)], False),
            "prior on beta": (np.column_stack([B, G, X]), ridge, False),
            "prior on beta_total": (np.column_stack([B, G - X @ gamma, X]), ridge, True)}
    for label, (A, pen, corrected) in fits.items():
        w, se = _newton(A, y, pen, logit)
        delta = w[nb:nb + k]
        beta = w[nb + k:] - gamma @ delta if corrected else w[nb + k:]
        line = f"  {label:<20}"
        for j, g in enumerate(groups):
            name = des.group_names[g] if des.group_names else str(g)
            line += f" delta[{name}] {delta[j]:+.4f} +- {se[nb + j]:.4f}"
            if logit:
                rows = des.group == g
                base = B[rows] @ w[:nb] + X[rows] @ beta
                est = np.mean(1 / (1 + np.exp(-(base + delta[j]))) - 1 / (1 + np.exp(-base)))
                line += f", estimand {est:+.4f}"
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
