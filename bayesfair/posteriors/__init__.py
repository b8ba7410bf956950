"""Posterior families: conjugate fast paths, each with its NumPyro reference model.

Every family follows one protocol (:mod:`bayesfair.posteriors.base`): ``init``, ``update(state,
Outcome(...))``, ``sample``, ``mean``, ``variance`` and ``dims``.
"""

from bayesfair.posteriors.base import Outcome, Posterior, PosteriorFamily, fit, fit_outcomes, is_posterior
from bayesfair.posteriors.beta_bernoulli import BetaState, beta_bernoulli
from bayesfair.posteriors.gaussian import NormalState, normal_known_variance
from bayesfair.posteriors.group_bias import group_bias_posterior
from bayesfair.posteriors.hierarchical import hierarchical_logit_normal
from bayesfair.posteriors.linear import (
    LinearNIGState,
    LinearPosterior,
    LinearState,
    chol_rank_one_update,
    fit_linear,
    linear_known_variance,
    linear_normal_inverse_gamma,
)
from bayesfair.posteriors.mcmc import NUTSSettings, logistic_linear_mcmc, mcmc_beta_bernoulli, mcmc_posterior
from bayesfair.posteriors.nig import NIGState, normal_inverse_gamma

__all__ = [
    "Outcome",
    "PosteriorFamily",
    "Posterior",
    "is_posterior",
    "fit",
    "fit_outcomes",
    "BetaState",
    "beta_bernoulli",
    "NormalState",
    "normal_known_variance",
    "NIGState",
    "normal_inverse_gamma",
    "LinearPosterior",
    "LinearState",
    "LinearNIGState",
    "linear_known_variance",
    "linear_normal_inverse_gamma",
    "fit_linear",
    "chol_rank_one_update",
    "group_bias_posterior",
    "hierarchical_logit_normal",
    "NUTSSettings",
    "mcmc_posterior",
    "mcmc_beta_bernoulli",
    "logistic_linear_mcmc",
]
