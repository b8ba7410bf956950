"""Posterior merit and exposure diagnostics as an ArviZ DataTree (the only package importing arviz).

DESIGN.md (Diagnostics): what does the posterior believe each arm and group deserves, what did
it get, and how sure are we. :func:`posterior_tree` takes posterior draws of the arm means
(conjugate draws from a :class:`~bayesfair.posteriors.Posterior` state, the stored samples of
the MCMC fallback, or any ``[chain, draw, ...]`` arrays) and, when given, a simulation's results,
and returns an ``xarray.DataTree`` with the groups

``posterior`` (dims ``chain, draw`` plus ``arm``/``group``/``feature``)
    ``mu`` [arm] arm mean rewards; ``merit`` [arm] f(mu); ``pi_star`` [arm] the optimal fair
    policy f(mu_a) / sum_b f(mu_b) (FairX Theorem 3.1.1); ``pi_star_group`` [group] its group
    share sum_{a in g} pi*_a; ``pi_star_within`` [arm] the within-group fair policy
    f(mu_i) / sum_{j in g(i)} f(mu_j) (bi-level Definition 3); with exposure floors beta,
    ``pi_star_bilevel`` [group], the group shares of the optimal beta-bi-level-fair policy:
    beta_g + (1 - sum beta) 1[g = g*] with g* the group of largest within-group fair value
    sum_{i in g} pi*_g(i) mu_i (bi-level Section 3, Proposition 1; ties share the remainder);
    ``theta`` [feature] for linear posteriors; ``psi`` [group(, feature)] for bias models; any
    other sampled site (e.g. ``group_loc``, ``group_scale`` of the hierarchical model).
``observed_exposure`` (no sample dims; only with results or given shares)
    ``exposure_share`` [arm] = (1/t) sum_s pi_s(a) (the average selection probability),
    ``pull_share`` [arm] = N_a,t / t, ``group_exposure_share`` / ``group_pull_share`` [group],
    ``within_exposure_share`` / ``within_pull_share`` [arm] (the arm's share of its group's),
    ``group_floor`` and ``floor_margin`` = group pull share - beta_g [group] with floors, and the
    environment's ``true_mu``/``true_pi_star`` [arm] when the results have them.
``under_exposure`` (no sample dims)
    posterior probabilities that the observed share is below what the posterior says is fair:
    ``p_arm`` [arm] = P(pi*_a > share_a), ``p_group`` [group] = P(pi*_g > share_g),
    ``p_within`` [arm] = P(pi*_g(i) > within share_i) and, with floors, ``p_bilevel`` [group]
    = P(pi*_beta(g) > share_g). ``compare="exposure"`` (default) uses the exposure shares,
    ``"pulls"`` the pull shares.
``sample_stats`` (only when MCMC ran)
    per draw ``diverging``, ``acceptance_rate``, ``n_steps``, ``step_size`` [chain, draw], and for
    every posterior variable ``r_hat_<var>``, ``ess_bulk_<var>``, ``ess_tail_<var>`` (ArviZ's
    rank-normalized split R-hat and ESS; R-hat is NaN with a single chain, use ``num_chains >= 2``).

With the observations a conjugate posterior learned from (``from_posterior(...,
observations=...)``, ``from_simulation(..., log=round_log)``), the tree also has the ArviZ
model-checking groups ``log_likelihood``, ``posterior_predictive``, ``observed_data``,
``constant_data``, ``prior`` and ``prior_predictive`` (dims ``chain, draw, obs``; built in
:mod:`bayesfair.diagnostics.checks`), so ``arviz.loo`` and ``arviz.plot_ppc_dist`` take it
(``prior_posterior_view`` for ``arviz.plot_prior_posterior``). :func:`exposure_gap`
(:mod:`bayesfair.diagnostics.gap`) aggregates the posterior of pi* - share over the runs of a
study.

R-hat and ESS are not stored for exact draws (conjugate samplers, or the MCMC fallback's prior
draws before its first refresh): the draws are independent, so R-hat is 1 and the ESS is the
number of draws by construction. A conjugate state's exact draws are arranged as 4 chains of
``n_draws / 4`` (``chains=``; independent draws split into chains are a valid multi-chain
sample), so ArviZ's own ``az.summary`` (R-hat ~ 1), ``az.rhat``, ``az.ess`` and ``az.plot_rank``
work on the tree as on an MCMC one. ``tree.attrs`` records the source (``"exact"``, ``"prior"``, ``"mcmc"``),
the merit, the posterior family and, with results, the policy, run and round.

:func:`summary` is ArviZ's summary of the posterior group plus the exposure columns. The plots
are in :mod:`bayesfair.plotting` (``plot_merit_exposure``, ``plot_exposure_over_time``,
``plot_psi_forest``).

Getting a policy's posterior out of a simulation: :func:`simulate_with_states` runs
:func:`bayesfair.simulate` with a state-capturing ``checkpointer`` hook (the simulator hands its
run state to the hook after every chunk), so it needs no change to the simulator and no replay;
:func:`run_state` picks one run and :func:`posterior_state` takes the posterior state out of a
policy state that declares one (:class:`PosteriorCarrier`, e.g. the bi-level policies' state).

Any posterior family works through the posterior protocol (:mod:`bayesfair.posteriors.base`):
draws come from its ``sample`` and are named by its ``dims``. The tree itself is built in
:mod:`bayesfair.diagnostics.tree`; inputs are checked in :mod:`bayesfair.diagnostics.inputs`.

Model checks of a fitted model (:mod:`bayesfair.diagnostics.model_checks`): :func:`ppc_verdict`
(posterior predictive p-values, pass/fail per statistic), :func:`calibration_check` (the PAV
reliability diagram of a 0/1 outcome) and :func:`compare_bias` (LOO with vs without the
group-bias term; no LOO difference is not evidence of no bias).
"""

from bayesfair.diagnostics.gap import aggregate_gap, exposure_gap
from bayesfair.diagnostics.model_checks import calibration_check, check_lines, compare_bias, ppc_statistics, ppc_verdict
from bayesfair.diagnostics.posterior import (
    ARM_VARS,
    GROUP_VARS,
    PosteriorCarrier,
    fit_from_log,
    from_group_bias_fit,
    from_posterior,
    from_simulation,
    observations_from_log,
    observed_exposure,
    posterior_draws,
    posterior_state,
    posterior_tree,
    prior_posterior_view,
    run_state,
    simulate_with_states,
    summary,
)

__all__ = [
    "posterior_tree",
    "posterior_draws",
    "from_posterior",
    "from_simulation",
    "from_group_bias_fit",
    "observed_exposure",
    "summary",
    "simulate_with_states",
    "run_state",
    "posterior_state",
    "PosteriorCarrier",
    "observations_from_log",
    "fit_from_log",
    "prior_posterior_view",
    "exposure_gap",
    "aggregate_gap",
    "ppc_verdict",
    "check_lines",
    "ppc_statistics",
    "calibration_check",
    "compare_bias",
    "ARM_VARS",
    "GROUP_VARS",
]
