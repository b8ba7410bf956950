"""Each paper family's own experimental configuration, run with the constructors' defaults, against
the paper's headline claim: a test per paper family runs the paper's configuration with the
defaults and checks the headline claim.

Only values the paper itself fixes are passed: the environment of its synthetic experiment, its
merit function, its floors, and the arguments our constructors require that the paper fixes or
that follow from the environment (FairX-UCB's horizon T of Theorem 3.2.1; OFUL's R and S; a
posterior for the Thompson-sampling policies, at its defaults). Every other argument is the
constructor's default. Horizons and runs are reduced so that each family runs in well under 25 s
on the 2-core build machine (the measured times are in each fixture's docstring; compilation is
most of them, and the persistent compilation cache of tests/conftest.py removes it on later runs).

Statistics: every assertion is one-sided at Z = 3 standard errors over i.i.d. runs (seeded, so
deterministic): a policy whose expectation sits exactly at the boundary (the claim just false)
passes with probability ~0.0013 under the normal approximation (with R = 12 runs, the t
distribution with 11 d.o.f. gives ~0.006). The observed means sit well beyond the bounds (the
tightest, FairX-UCB's sub-linearity, 4.9 s.e. from 0; all others 5 s.e. or more), so a correct
implementation passes with any seed with probability ~0.97 or more, and the fixed seeds make each
run deterministic.
Each claim has a power check: a policy that does not satisfy it fails the same assertion.

Families:

- FairX (fairness_of_exposure_fairx_icml2021; the text file is one line, so sections are cited):
  :func:`test_fairx_yeast_fairness_regret_far_below_conventional_and_sublinear` and
  :func:`test_fairx_ucb_has_the_lowest_reward_regret_of_the_fairx_algorithms`.
- Bi-level fairness (bilevel_fairness_bf_ucb_aamas2024, Section 6, lines 339-380):
  :func:`test_bilevel_floors_are_met_and_mf_misses_them`, :func:`test_bf_ucb_regret_is_sublinear`,
  :func:`test_bilevel_minority_meritocratic_regret_is_sublinear`.
- Group fairness with biased feedback (group_fairness_biased_feedback_aamas2022, Section 5.2,
  lines 220-234): **not repeated here**. ``tests/test_biased.py::
  test_group_fair_top_interval_beats_top_interval_on_true_regret`` already runs the paper's
  synthetic configuration with defaults (``synthetic_biased()``: n = 10, 5 sensitive arms, d = 2,
  mu = 10; ``top_interval()`` and ``group_fair_top_interval()`` with their defaults; the paper's
  T = 1000; 24 runs) and asserts the headline claim of Figure 2 (GroupFairTopInterval's true
  regret below TopInterval's, paired, one-sided at 3 standard errors), with the power check that
  TopInterval's share of sensitive pulls is far below the fair share.
- Group meritocratic fairness (group_meritocratic_fairness_linear_cb_neurips2022, Section 6; one
  line of text): ``tests/test_group_meritocratic.py::test_fair_greedy_fair_regret_is_sublinear_and_lowest``
  already runs Section 6 with defaults (``gmf_synthetic()``, T = 500, 12 runs) for the fair
  pseudo-regret claim (Fair-Greedy's is sub-linear and the lowest); here only the claim it does not
  check: :func:`test_oful_has_the_lowest_standard_regret` (Figure 1, third panel).
"""

import math
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

import bayesfair as bf
from bayesfair.policies import bilevel as bl

Z = 3.0


def _upper(x) -> float:
    """Mean + Z standard errors over runs."""
    x = np.asarray(x, np.float64)
    return float(x.mean() + Z * x.std(ddof=1) / math.sqrt(x.size))


def _lower(x) -> float:
    x = np.asarray(x, np.float64)
    return float(x.mean() - Z * x.std(ddof=1) / math.sqrt(x.size))


# ============================================================================================
# FairX: yeast multi-armed bandit, Figure 2 (c = 10)

FX_T, FX_R = 32_000, 24
FX_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="module")
def fairx_yeast():
    """Section 5.1: arms = the 14 yeast labels, each round one example drawn at random from the 80%
    test part of a random 20/80 split, reward = the pulled label; pi* from the empirical label
    means. Section 5.3 / Figure 2 caption: merit f(mu) = exp(c mu) with c = 10. Policies with their
    defaults: FairX-UCB (its default w0 is Theorem 3.2.1's, which needs the horizon: T), FairX-TS and
    TS with ``normal_known_variance()`` (the paper's Gaussian prior and reward variance, here at our
    defaults N(0, 1), variance 1, where the paper tuned them), FairX-EG, UCB. T = 32,000 rounds
    (the paper: 2,000,000), 24 runs (the paper: 10; 24 so that FairX-UCB's noisy fairness regret
    clears the sub-linearity bound by ~1.9 s.e.: z = 4.9 with seed 5, where 12 runs gave 3.5).
    Measured (2026-11-25, load average ~11 from other jobs on the 2 cores): 8.5 s of CPU, 20 s wall
    with the compilation cache warm; 18 s of CPU cold."""
    root = Path(os.environ.get("BAYESFAIR_DATA", FX_DATA))
    if not (root / "yeast" / "yeast.arff").is_file():
        pytest.skip(f"yeast data not found under {root} (set BAYESFAIR_DATA)")
    from bayesfair.environments.multilabel import yeast_bandit_config

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BAYESFAIR_DATA", str(root))
        env = yeast_bandit_config(mode="mab", part="test")
    merit = bf.merit.exponential(10.0)
    pols = {"FairX-UCB": bf.fairx_ucb(merit, horizon=FX_T), "FairX-TS": bf.fairx_ts(bf.normal_known_variance(), merit),
            "FairX-EG": bf.fairx_eg(merit), "UCB": bf.ucb1(), "TS": bf.thompson(bf.normal_known_variance())}
    with warnings.catch_warnings():  # data, not draws from the TS prior: the prior-mismatch note is expected
        warnings.filterwarnings("ignore", message=".*not drawn from their prior")
        return bf.simulate(5, env, pols, FX_T, FX_R, merit=merit, checkpoints=[FX_T // 4, FX_T])


def _fr(ds, name):
    return ds["fairness_regret"].sel(policy=name).values  # [run, checkpoint]: T/4, T


def test_fairx_yeast_fairness_regret_far_below_conventional_and_sublinear(fairx_yeast):
    """Section 5.2-5.3: "conventional bandit algorithms consistently suffer from much larger
    fairness regret compared to FairX algorithms", and in Figure 2 "the fairness regret converges
    roughly at the rate predicted by the bounds for FairX-UCB and FairX-TS" (O~(sqrt T),
    Theorems 3.2.1 and 3.3.1).

    Far below: FR_FairX(T) < FR_conv(T) / 2 for conv in (UCB, TS), paired over runs (common random
    numbers): mean + 3 s.e. of FR_FairX - FR_conv / 2 below 0. Sub-linear: the growth from T/4 to T
    is below 3x (sqrt: 2x, linear: 4x): mean + 3 s.e. of FR(T) - 3 FR(T/4) below 0.
    Power checks: UCB and TS, whose exposure piles onto the best arm (Figure 1), fail the
    sub-linearity assertion (their growth is ~3.8x: mean - 3 s.e. above 0), and TS is not "far
    below" UCB.
    """
    fr = {p: _fr(fairx_yeast, p) for p in fairx_yeast["policy"].values}
    for fair in ("FairX-UCB", "FairX-TS"):
        for conv in ("UCB", "TS"):
            assert _upper(fr[fair][:, 1] - 0.5 * fr[conv][:, 1]) < 0, (fair, conv, fr[fair][:, 1].mean(),
                                                                      fr[conv][:, 1].mean())
        growth = fr[fair][:, 1] - 3.0 * fr[fair][:, 0]
        assert _upper(growth) < 0, (fair, fr[fair].mean(0))
    for conv in ("UCB", "TS"):
        assert _lower(fr[conv][:, 1] - 3.0 * fr[conv][:, 0]) > 0, (conv, fr[conv].mean(0))
    assert not _upper(fr["TS"][:, 1] - 0.5 * fr["UCB"][:, 1]) < 0


def test_fairx_ucb_has_the_lowest_reward_regret_of_the_fairx_algorithms(fairx_yeast):
    """Section 5.3, Figure 2: "FairX-UCB does particularly well in terms of reward regret" (and
    FairX-EG "wins neither on fairness regret nor on reward regret"). With the default solver and
    start (projected gradient ascent from the empirical means, experiments/fairx_yeast/README.md,
    "Solvers and start") it holds at this horizon: paired over runs, mean + 3 s.e. of
    RR_FairX-UCB - RR_other below 0 for other in (FairX-TS, FairX-EG). Power check: the same
    assertion for FairX-TS against FairX-UCB fails (mean - 3 s.e. above 0)."""
    rr = {p: fairx_yeast["reward_regret"].sel(policy=p).values[:, 1] for p in ("FairX-UCB", "FairX-TS", "FairX-EG")}
    for other in ("FairX-TS", "FairX-EG"):
        assert _upper(rr["FairX-UCB"] - rr[other]) < 0, (other, rr["FairX-UCB"].mean(), rr[other].mean())
    assert _lower(rr["FairX-TS"] - rr["FairX-UCB"]) > 0


# ============================================================================================
# Bi-level fairness: Section 6.2 setting (2), "high number of arms"

BL_T, BL_R = 8_000, 12
BL_SIZES = (50, 10)  # majority (group 0), minority (group 1)
BL_BETA = np.array([0.4, 0.4])


@pytest.fixture(scope="module")
def bilevel_high():
    """Section 6.2 (lines 354-361), setting (2): a minority group of 10 arms with means ~ U[0.5, 0.8]
    and a majority group of 50 arms with means ~ U[0.7, 1], drawn afresh per run (Bernoulli arms,
    "arm probabilities"); merit f(mu) = mu and delta = 0.01 (the constructors' default); floors
    beta = (0.4, 0.4) (Section 6.3, line 370). Policies with their defaults: BF-UCB, BF-TS (with
    ``beta_bernoulli()``; the paper runs only BF-UCB), MF and GEF (Section 6.1); and, for the
    power check of the regret claim, BF-UCB with floors (0.4, 0.5), which serves the (worse)
    minority group half of the rounds. T = 8,000 (the paper: 10^7), 12 runs (the paper: 50); the simulator's
    floors are the paper's (0.4, 0.4). Measured (load average ~10): 15 s wall with the compilation
    cache warm, 22 s of CPU cold (compilation of the five policies is most of it: T = 4,000 cost
    as much as T = 8,000)."""
    labels = np.repeat([0, 1], BL_SIZES)
    low = np.repeat([0.7, 0.5], BL_SIZES)
    high = np.repeat([1.0, 0.8], BL_SIZES)
    env = bf.bernoulli_arms(bf.environments.UniformMeans(low, high), groups=labels)
    merit = bf.merit.identity()
    pols = {"BF-UCB": bl.bf_ucb(BL_BETA, merit), "BF-TS": bl.bf_ts(BL_BETA, merit, bf.beta_bernoulli()),
            "MF": bl.mf(merit), "GEF": bl.gef(BL_BETA), "BF-UCB (0.4, 0.5)": bl.bf_ucb([0.4, 0.5], merit)}
    with warnings.catch_warnings():  # U[0.5, 1] means against a Beta(1, 1) prior: the note is expected
        warnings.filterwarnings("ignore", message=".*not drawn from their prior")
        return bf.simulate(8, env, pols, BL_T, BL_R, merit=merit, checkpoints=[BL_T // 4, BL_T], floors=BL_BETA)


def test_bilevel_floors_are_met_and_mf_misses_them(bilevel_high):
    """Section 6.3.4 / Figure 3b: "BF-UCB and GEF give the most balanced exposure to the two groups
    ... since MF provides the exposure guarantees across all arms, it still ends up pulling the
    majority group a significantly larger number of times". BF-UCB and BF-TS give every group at
    least floor(beta_g t) pulls at both checkpoints in every run (Theorem 2's guarantee, exact, no
    tolerance). Power check: MF's minority share is below its floor 0.4 (mean + 3 s.e. < 0.4)."""
    floors = np.floor(np.outer([BL_T // 4, BL_T], BL_BETA))
    for name in ("BF-UCB", "BF-TS", "GEF"):
        pulls = bilevel_high["group_pulls"].sel(policy=name).values  # [run, checkpoint, group]
        assert np.all(pulls >= floors[None]), name
    mf_share = bilevel_high["group_pulls"].sel(policy="MF").values[:, -1, 1] / BL_T
    assert _upper(mf_share) < BL_BETA[1], mf_share.mean()


def test_bf_ucb_regret_is_sublinear(bilevel_high):
    """Section 6.3.1 / Figure 1a: BF-UCB's regret against R*_beta (Eq. 1) "is sub-linear"
    (Theorem 7: O(sqrt(T n))). Asserted as mean + 3 s.e. of BFR(T) - 3 BFR(T/4) below 0 (growth
    below 3x; sqrt: 2x). Power check: BF-UCB with floors (0.4, 0.5) gives the worse group 0.1 more
    of the rounds than the optimal bi-level policy, a linear regret (mean - 3 s.e. above 0).

    Not asserted: BF-TS (not in the paper's experiments), whose regret is already ~0 at T/4 here so
    the growth ratio is undefined; and "below the baselines'": the paper says the opposite
    (Section 6.3.3, "BF-UCB receives the least reward amongst all the algorithms"), since MF and
    GEF break a fairness level and so earn more than R*_beta."""
    r = bilevel_high["bf_regret"].sel(policy="BF-UCB").values
    assert _upper(r[:, 1] - 3.0 * r[:, 0]) < 0, r.mean(0)
    bad = bilevel_high["bf_regret"].sel(policy="BF-UCB (0.4, 0.5)").values
    assert _lower(bad[:, 1] - 3.0 * bad[:, 0]) > 0, bad.mean(0)


@pytest.mark.parametrize("name", ["BF-UCB", "BF-TS"])
def test_bilevel_minority_meritocratic_regret_is_sublinear(bilevel_high, name):
    """Section 6.3.2 / Figure 2a: the within-group policy regret |pi*_g - pi^t_g| "eventually
    converges to zero" (Theorem 3). On the minority group (10 arms) its sum grows less than 3x from
    T/4 to T (mean + 3 s.e. of GFR(T) - 3 GFR(T/4) below 0). The majority group (50 arms) is not
    asserted at this horizon: the paper itself notes it converges slowly "due to the large number of
    arms in the majority group" (its growth here is ~3.5x). Power check: GEF plays the best UCB arm
    of the group, so its minority regret grows linearly (mean - 3 s.e. of the same above 0)."""
    g = bilevel_high["group_fairness_regret"].sel(policy=name).values[:, :, 1]
    assert _upper(g[:, 1] - 3.0 * g[:, 0]) < 0, g.mean(0)
    gef = bilevel_high["group_fairness_regret"].sel(policy="GEF").values[:, :, 1]
    assert _lower(gef[:, 1] - 3.0 * gef[:, 0]) > 0, gef.mean(0)


# ============================================================================================
# Group meritocratic fairness: Section 6 simulation, Figure 1

GM_T, GM_R = 500, 12


@pytest.fixture(scope="module")
def gmf_section6():
    """Section 6: K = 4 groups, one candidate each, X_a = B_a Y_a + c_a, eta = 2 xi, mu* with
    bias weight 1 (``gmf_synthetic()`` defaults; the group weights are the authors' code's).
    Fair-Greedy and OFUL "both with regularization parameter set to 0.1" (our defaults) and Uniform
    Random. OFUL's required R and S come from the environment, as the paper's OFUL [1] would take
    them: R = the noise s.d. (2), S = ||mu*||_2. Fair-Greedy's required horizon is T. T = 500 (the
    length of Figure 1), 12 runs (the paper: 10). Measured (load average ~10): 5 s wall with the
    compilation cache warm, ~11 s of CPU cold."""
    from bayesfair.environments import group_meritocratic as gm
    from bayesfair.policies import group_meritocratic as gp

    env = gm.gmf_synthetic()
    pols = {"Fair-Greedy": gp.fair_greedy(GM_T),
            "OFUL": gp.oful(noise_sd=env.params["noise_sd"], theta_bound=float(np.linalg.norm(env.params["theta"]))),
            "Uniform Random": bf.uniform()}
    return bf.simulate(6, env, pols, GM_T, GM_R, merit=bf.merit.exponential(1.0), checkpoints=[GM_T])


def test_oful_has_the_lowest_standard_regret(gmf_section6):
    """Figure 1 (third panel, standard pseudo-regret of Remark 3.1): OFUL, which maximizes the
    reward, has the lowest; Fair-Greedy's is "better-than random, although linear". Paired over
    runs: mean + 3 s.e. of regret_OFUL - regret_other below 0 for both others. Power check: the same
    assertion for Fair-Greedy against OFUL fails (mean - 3 s.e. of the difference above 0)."""
    reg = {p: gmf_section6["regret"].sel(policy=p).values[:, -1] for p in gmf_section6["policy"].values}
    for other in ("Fair-Greedy", "Uniform Random"):
        assert _upper(reg["OFUL"] - reg[other]) < 0, (other, reg["OFUL"].mean(), reg[other].mean())
    assert _lower(reg["Fair-Greedy"] - reg["OFUL"]) > 0
