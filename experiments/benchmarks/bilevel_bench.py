"""Throughput of BF-UCB and BF-TS: the jitted bayesfair simulator vs a vectorized NumPy loop.

Setting: the bi-level study's (the shipped configs ``bilevel`` and ``bilevel_high``, which
experiments/bilevel/run.py runs; Section 6.2 of the bi-level paper), loaded from those configs so
the benchmark measures exactly its configuration: Bernoulli arms in
two groups (group 0 = minority), beta = (0.4, 0.4), f(mu) = mu (``merit()``, floor 0.01),
delta = 0.01, BF-UCB with ``steps=0`` (the upper corner of the confidence box), BF-TS with
Beta(1, 1)-Bernoulli posteriors.

- K = 15 (``low``):  5 minority + 10 majority arms, means ~ U[0.6, 0.85], drawn per run;
- K = 60 (``high``): 10 minority arms ~ U[0.5, 0.8] + 50 majority arms ~ U[0.7, 1].

The unit is run-rounds per second (R * T / wall seconds); R = 50 runs (the study's).

- bayesfair: ``bayesfair.simulate`` exactly as the study calls it (``floors=beta``, the
  study's checkpoint grid and chunk size 65536), runs sharded over every CPU device. Each call
  builds and compiles its own chunk function. The steady-state rate is
  ``R * T / (time(2T) - time(T))`` (both calls compile the same shapes, so compilation cancels),
  flagged as not resolved when the difference is under twice the spread of the repeated timings;
  the rate between the first and the last chunk of the 2T call (``simulate``'s progress
  callback) is a cross-check. The per-call fixed cost reported as "compile s" is
  ``time(T) - R * T / per-chunk rate``: tracing, XLA compilation and the per-call set-up and
  result assembly. An untimed warm-up call per (policy, K) comes first. ``--quick`` makes no
  warm-up and no 2T call (only the per-chunk rate) and gives no verdict.
- NumPy: :func:`numpy_bilevel`, the same policy (Algorithm 1) in float64, one Python loop over
  rounds, every array ``[R, K]`` (no loop over runs or arms), one thread. It runs a shorter
  horizon (default 2^14 rounds against bayesfair's 2^17); its cost per round is constant after
  the ``m * max|g|`` initialization rounds, so its run-rounds/s does not depend on T.

Cross-check (printed, not asserted): NumPy runs on the per-run means of bayesfair's first timed
call, so both see the same means; their final minority exposure N_min/T, regret against
R*_beta (Eq. 1) and conventional regret at the NumPy horizon are compared per run (paired
differences; the random streams differ, so only the distributions can agree). A difference
counts as agreement when |z| <= 3, z dividing by the larger of its standard error and a small
numerical resolution (bayesfair accumulates in float32 within a chunk).

The implied wall time of the paper-scale study halves (BF-UCB or BF-TS, both settings, three
betas, 50 runs, T = 1e7: 3e9 run-rounds each) is estimated from the measured rates and fixed
costs and compared with the targets (BF-UCB < 1 h, BF-TS < 2 h).

Usage: ``python experiments/benchmarks/bilevel_bench.py [--quick] [--horizon T] [--out FILE]``.
See experiments/benchmarks/README.md.
"""

import functools
import tomllib
from fractions import Fraction
from types import SimpleNamespace

import bayesfair  # one CPU device per core: must come before the first JAX operation (importing jax first is fine)

# isort: split
import harness  # this folder's shared scaffolding (first on sys.path when run as a script)
import numpy as np

from bayesfair.simulation.metrics import bilevel_regret
from bayesfair.workflow import shipped
from bayesfair.workflow.config import load_config

STUDY_CONFIGS = {"high": shipped.config_path("bilevel_high"), "low": shipped.config_path("bilevel")}
SETTING_OF_K = {15: "low", 60: "high"}
POLICIES = ("BF-UCB", "BF-TS")
BETA = (0.4, 0.4)
TARGET_RATIO = 3.0
# Paper-scale study (run.py --scale paper): per policy, both settings x three betas x 50 runs x T = 1e7.
STUDY = {"runs": 50, "horizon": 10_000_000, "n_betas": 3}
TARGET_HOURS = {"BF-UCB": 1.0, "BF-TS": 2.0}


def load_study():
    """The bi-level study's configs (the shipped configs ``bilevel`` and ``bilevel_high``, the
    ones experiments/bilevel/run.py runs), as the benchmark uses them.

    A config is parsed (and its eight policies validated) only when a setting's environment or
    policies are first asked for, once per setting and floors: a K = 15 measurement parses the
    low setting alone, once. (Parsing both settings up front, and the low one again for its
    policies, added ~0.5 s of tracing to every fresh bayesfair process of ``grid_bench.py``
    although the NumPy side parses nothing.)

    Returns
    -------
    types.SimpleNamespace
        ``environment(setting)``, ``policies(beta, with_baselines)`` (``{label: Policy}``),
        ``merit()``, ``SETTINGS`` (``{setting: {"sizes": group sizes}}``, read from the TOML
        without parsing the study) and ``delta()`` (BF-UCB's).
    """

    @functools.cache
    def parsed(setting, floors):
        return load_config(STUDY_CONFIGS[setting], [f"floors={list(floors)}"])

    def policies(beta, with_baselines=False):
        s = parsed("low", tuple(beta))
        return {k: v for k, v in s.policies.items() if with_baselines or k in ("BF-UCB", "BF-TS")}

    def group_sizes(path):  # the repository's own configs, read without parsing the study
        with open(path, "rb") as f:
            return tuple(tomllib.load(f)["environment"]["group_sizes"])

    sizes = {setting: {"sizes": group_sizes(path)} for setting, path in STUDY_CONFIGS.items()}
    return SimpleNamespace(
        environment=lambda setting: parsed(setting, BETA).env,  # the floors do not change the environment
        policies=policies,
        merit=lambda: parsed("low", BETA).merit,
        SETTINGS=sizes,
        delta=lambda: parsed("low", BETA).config["policies"]["BF-UCB"]["delta"],
    )


# ---------------------------------------------------------------------------------------------
# NumPy reference implementation


class _Floors:
    """Exact floor(beta_g s) and the order of the fractional parts of beta_g s, for a shared s.

    Every run plays one round per round, so s = t - 1 is the same for all runs and the floors are
    per-group scalars. beta_g is taken as its exact float64 value (a dyadic rational p / 2^e), as
    bayesfair's fixed point does: beta_g s = quota_g + frac_g / den with Python integers.
    ``quota``, ``frac_pos`` (frac_g > 0) and ``frac_rank`` (dense rank of frac_g among the groups,
    < m) are numpy arrays, rebuilt only when they change.
    """

    def __init__(self, beta):
        ratios = [Fraction(float(b)).as_integer_ratio() for b in beta]
        self.den = max(q for _, q in ratios)
        self.step = [p * (self.den // q) for p, q in ratios]  # beta_g * den, exactly
        self.m = len(beta)
        self.quota_int = [0] * self.m
        self.frac = [0] * self.m
        self.quota = np.zeros(self.m, np.int64)
        self.frac_pos = np.zeros(self.m, bool)
        self.frac_rank = np.zeros(self.m, np.int64)
        self._pos_rank = None

    def advance(self):
        """s -> s + 1."""
        den, frac, quota = self.den, self.frac, self.quota_int
        carried = False
        for g in range(self.m):
            f = frac[g] + self.step[g]
            if f >= den:  # beta_g < 1, so at most one carry
                f -= den
                quota[g] += 1
                carried = True
            frac[g] = f
        if carried:
            self.quota = np.array(quota, np.int64)
        pos_rank = (tuple(f > 0 for f in frac), tuple(sum(o < f for o in set(frac)) for f in frac))
        if pos_rank != self._pos_rank:
            self._pos_rank = pos_rank
            self.frac_pos = np.array(pos_rank[0])
            self.frac_rank = np.array(pos_rank[1], np.int64)


def numpy_bilevel(policy, means, sizes, beta, horizon, seed, *, delta=0.01, merit_floor=0.01):
    """BF-UCB (upper corner of the box) or BF-TS (Beta(1, 1) posteriors) in plain NumPy.

    Algorithm 1 of the bi-level paper, vectorized over runs (arrays ``[R, K]``, one Python loop
    over rounds), with f(mu) = max(mu, merit_floor):

    - rounds s = t - 1 < m * max|g|: round robin over the groups (group s mod m); a group with
      never-pulled arms pulls one of them uniformly at random, otherwise Exposure;
    - otherwise, if UFG = {g : beta_g s - N_g > 0} is non-empty, the group of largest deficit
      (exact integer comparison; ties uniformly at random), else Learn: the group of largest
      value sum_{i in g} f(mu_i) mu_i / sum_{i in g} f(mu_i) (ties uniformly at random);
    - Exposure: the arm ~ f(mu_i) / sum_{j in g} f(mu_j) within the group.

    mu is the upper corner min(1, mu_hat + w) with w_i = sqrt(2 ln(4 N_g k_g / delta) / N_i)
    (BF-UCB; 1 for a never-pulled arm) or one draw of ``Generator.beta`` (BF-TS). The arm is
    drawn by inverting the CDF of the full selection distribution pi_t (the within-group policy
    weighted by the probability of each group, uniform over tied groups), which is the same
    distribution as drawing the group and then the arm. Only the pulled arm's reward is drawn.

    Per run it records what the study reads from the simulator's output: the exposure
    sum_t pi_t, pulls, group pulls, reward, the per-group meritocratic regret
    sum_{t: g_t = g} ||pi*_g - pi^t_g||_1 and the anytime floor slack
    min_t (N_g,t - floor(beta_g t)). With fixed means per run, the regrets that are linear in
    pi_t (conventional regret, regret against R*_beta) follow from the exposure afterwards.

    Parameters
    ----------
    policy : {"BF-UCB", "BF-TS"}
    means : numpy.ndarray
        ``[R, K]`` Bernoulli means, one row per run.
    sizes : sequence of int
        Group sizes; group g holds the next ``sizes[g]`` arms (consecutive, as
        ``Groups.from_sizes``).
    beta : sequence of float
        Exposure floors.
    horizon : int
        Rounds T.
    seed : int
        Seed of ``numpy.random.default_rng``.
    delta, merit_floor : float
        Confidence parameter and the floor of f(mu) = max(mu, floor).

    Returns
    -------
    dict of str to numpy.ndarray
        ``exposure``, ``pulls`` ``[R, K]``; ``group_pulls``, ``group_fairness_regret``,
        ``anytime_slack`` ``[R, m]``; ``reward`` ``[R]``.
    """
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    ucb = policy == "BF-UCB"
    rng = np.random.default_rng(seed)
    means = np.asarray(means, np.float64)
    runs, k = means.shape
    sizes = np.asarray(sizes, np.int64)
    m = sizes.size
    if sizes.sum() != k or len(beta) != m:
        raise ValueError("sizes must add up to K and give one group per floor")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    gidx = np.repeat(np.arange(m), sizes)
    row_k, row_m = np.arange(runs) * k, np.arange(runs) * m
    t_init = int(m * sizes.max())
    log_scale = 4.0 * sizes / delta  # 4 k_g / delta

    def gsum(x):  # [R, K] -> [R, m], sums over each group's (consecutive) arms
        return np.add.reduceat(x, starts, axis=1)

    # optimal within-group fair policy of the true means (fixed per run)
    f_star = np.maximum(means, merit_floor)
    pi_star_within = f_star / gsum(f_star)[:, gidx]

    pulls = np.zeros((runs, k))
    group_pulls = np.zeros((runs, m), np.int64)
    if ucb:
        sums = np.zeros((runs, k))
        mu_hat = np.zeros((runs, k))
        inv_sqrt_n = np.ones((runs, k))  # 1 / sqrt(max(N_i, 1))
    else:
        alpha, beta_post = np.ones((runs, k)), np.ones((runs, k))
    exposure = np.zeros((runs, k))
    reward_sum = np.zeros(runs)
    group_fr = np.zeros((runs, m))
    slack = np.full((runs, m), np.iinfo(np.int64).max, np.int64)
    floors = _Floors(beta)
    pulls_f, group_pulls_f, group_fr_f = pulls.reshape(-1), group_pulls.reshape(-1), group_fr.reshape(-1)
    means_f = means.reshape(-1)

    for s in range(horizon):  # s = t - 1 rounds played
        in_init = s < t_init
        # mu_t: upper corner of the confidence box, or one posterior draw
        if ucb:
            width_g = np.sqrt(2.0 * np.log(np.maximum(group_pulls, 1) * log_scale))  # [R, m]
            mu = mu_hat + np.repeat(width_g, sizes, axis=1) * inv_sqrt_n
            np.minimum(mu, 1.0, out=mu)
            if in_init:
                mu[pulls == 0] = 1.0  # never pulled: the whole reward range
        else:
            mu = rng.beta(alpha, beta_post)
        w = np.maximum(mu, merit_floor)
        w_sum = gsum(w)
        pi = w / np.repeat(w_sum, sizes, axis=1)  # within-group fair policy of mu

        if in_init:  # round robin; never-pulled arms first
            q = np.zeros((runs, m))
            q[:, s % m] = 1.0
            unpulled = (pulls == 0).astype(np.float64)
            n_unpulled = np.repeat(gsum(unpulled), sizes, axis=1)
            within = np.where(n_unpulled > 0, unpulled / np.maximum(n_unpulled, 1.0), pi)
        else:
            score = gsum(w * mu) / w_sum  # Learn: each group's fair-policy value
            deficit = floors.quota - group_pulls  # integer part of beta_g s - N_g
            ufg = (deficit > 0) | ((deficit == 0) & floors.frac_pos)
            under = ufg.any(axis=1, keepdims=True)
            if under.any():  # exposure floors: the largest deficit, compared exactly
                key = np.where(ufg, deficit * m + floors.frac_rank, -1).astype(np.float64)
                score = np.where(under, np.where(ufg, key, -np.inf), score)
            is_max = score == score.max(axis=1, keepdims=True)
            q = is_max / is_max.sum(axis=1, keepdims=True)  # uniform over the tied groups
            within = pi
        probs = within * np.repeat(q, sizes, axis=1)  # pi_t over all K arms

        cdf = np.cumsum(probs, axis=1)
        u = rng.random(runs) * cdf[:, -1]
        arm = (cdf <= u[:, None]).sum(axis=1)
        np.minimum(arm, k - 1, out=arm)
        group = gidx[arm]
        flat = row_k + arm
        reward = (rng.random(runs) < means_f[flat]).astype(np.float64)

        pulls_f[flat] += 1.0
        group_pulls_f[row_m + group] += 1
        if ucb:
            sums_f = sums.reshape(-1)
            sums_f[flat] += reward
            n_arm = pulls_f[flat]
            mu_hat.reshape(-1)[flat] = sums_f[flat] / n_arm
            inv_sqrt_n.reshape(-1)[flat] = 1.0 / np.sqrt(n_arm)
        else:
            alpha.reshape(-1)[flat] += reward
            beta_post.reshape(-1)[flat] += 1.0 - reward

        exposure += probs
        reward_sum += reward
        group_fr_f[row_m + group] += gsum(np.abs(pi_star_within - within)).reshape(-1)[row_m + group]
        floors.advance()
        np.minimum(slack, group_pulls - floors.quota, out=slack)

    return {"exposure": exposure, "pulls": pulls, "group_pulls": group_pulls, "group_fairness_regret": group_fr,
            "anytime_slack": slack, "reward": reward_sum}


# ---------------------------------------------------------------------------------------------
# measurements


def study_objects(study, policy, k):
    """The study's environment for K arms and its ``policy`` (beta = :data:`BETA`), as run_bayesfair uses them."""
    return study.environment(SETTING_OF_K[k]), study.policies(BETA, with_baselines=False)[policy]


def numpy_metrics(study):
    """The metric components that record exactly what :func:`numpy_bilevel` records: exposure,
    pulls, group pulls, reward, the group fairness regret and the anytime floor slack (no
    conventional regret, group exposure, FairX regrets or bi-level regret, which the study's
    defaults add). ``grid_bench.py`` compares the two sides on this set."""
    from bayesfair.simulation.metric_parts import Conventional, FairXRegrets, Floors

    return [FairXRegrets(study.merit(), only=["group_fairness_regret"]),
            Conventional(only=["reward", "exposure", "pulls", "group_pulls"]), Floors(BETA)]


def run_bayesfair(study, policy, k, runs, horizon, seed, chunk_size, extra_checkpoints=(), objects=None,
                  metrics=None):
    """One timed ``bayesfair.simulate`` call, as the study makes it (compilation included).

    Parameters
    ----------
    study : module
        The loaded study script.
    policy : {"BF-UCB", "BF-TS"}
    k : {15, 60}
        Number of arms (selects the study's setting).
    runs, horizon, seed, chunk_size : int
    extra_checkpoints : sequence of int
        Rounds added to the study's checkpoint grid (the cross-check's horizon).
    objects : (Environment, Policy), optional
        The study's environment and policy, built by the caller once (so that a second call
        reuses the compiled functions: ``grid_bench.py``'s steady state); by default built here.
    metrics : list of bayesfair.simulation.metric_parts.Metric, optional
        Record these instead of the study's default metrics (e.g. :func:`numpy_metrics`).

    Returns
    -------
    harness.Timed
        Wall seconds, the per-chunk time stamps and the simulator's dataset.
    """
    env, pol = objects if objects is not None else study_objects(study, policy, k)
    grid = np.union1d(bayesfair.checkpoint_grid(horizon, 80), [c for c in extra_checkpoints if c <= horizon])
    recorded = dict(merit=study.merit(), floors=BETA) if metrics is None else dict(metrics=list(metrics))
    return harness.simulate(seed, env, {policy: pol}, horizon, runs, checkpoints=grid,
                            chunk_size=min(chunk_size, horizon), **recorded)


def _paired(numpy_vals, bf_vals, resolution):
    """Means +- s.e. of both and the z-score of the mean paired difference.

    ``resolution`` is the numerical noise allowed in a difference (bayesfair accumulates in
    float32 within a chunk, NumPy in float64): the z-score divides by max(s.e., resolution), so
    quantities that are (nearly) deterministic do not produce huge z-scores from rounding alone.
    """
    a, b = np.asarray(numpy_vals, np.float64), np.asarray(bf_vals, np.float64)
    np_mean, np_se = harness.mean_se(a)
    bf_mean, bf_se = harness.mean_se(b)
    diff_mean, diff_se = harness.mean_se(a - b)
    z = diff_mean / max(diff_se, resolution) if np.isfinite(diff_se) else None
    return {"numpy": np_mean, "numpy_se": np_se, "bayesfair": bf_mean, "bayesfair_se": bf_se,
            "diff": diff_mean, "diff_se": diff_se, "z": z}


def cross_check(np_out, ds, policy, horizon, sizes):
    """Compare NumPy's final numbers with bayesfair's at the same round, per run.

    Parameters
    ----------
    np_out : dict
        :func:`numpy_bilevel` output after ``horizon`` rounds.
    ds : xarray.Dataset
        bayesfair output on the same per-run means, with ``horizon`` among its checkpoints.
    policy : str
    horizon : int
    sizes : sequence of int

    Returns
    -------
    dict
        Per quantity (``minority_exposure`` N_min/T, ``bf_regret`` against R*_beta,
        ``regret``): both means +- s.e. and the paired z-score; the minimum anytime slack of both.
    """
    at = ds.sel(policy=policy, checkpoint=horizon)
    means = ds["mean"].values.astype(np.float64)  # [R, K]
    labels = np.repeat(np.arange(len(sizes)), sizes)
    pi_star_within = ds["pi_star_within"].values  # f(mu_i) / sum_{j in g(i)} f(mu_j) of the run's means
    np_bf = bilevel_regret(np_out["exposure"][:, None, :], means, pi_star_within, labels, np.asarray(BETA),
                           np.array([horizon]))["bf_regret"][:, 0]
    np_regret = horizon * means.max(axis=1) - (np_out["exposure"] * means).sum(axis=1)
    return {
        "horizon": horizon,
        "minority_exposure": _paired(np_out["exposure"][:, labels == 0].sum(axis=1) / horizon,
                                     at["group_exposure"].values[:, 0] / horizon, 1e-5),
        "bf_regret": _paired(np_bf, at["bf_regret"].values, 1e-5 * horizon),
        "regret": _paired(np_regret, at["regret"].values, 1e-5 * horizon),
        "numpy_min_anytime_slack": int(np_out["anytime_slack"].min()),
        "bayesfair_min_anytime_slack": int(at["anytime_slack"].values.min()),
    }


def bench_one(study, policy, k, args):
    """Time bayesfair and NumPy for one (policy, K); the best of ``args.repeats`` times is kept.

    bayesfair first (:func:`harness.time_doubling`: warm-up, T and 2T; with ``--quick`` T only and
    no warm-up), then NumPy on the per-run means of bayesfair's first timed call.

    Parameters
    ----------
    study, policy, k
        As :func:`run_bayesfair`.
    args : argparse.Namespace

    Returns
    -------
    dict
        Times, rates, ratios, the fixed per-call cost and the cross-check.
    """
    T, R, T_np = args.horizon, args.runs, args.numpy_horizon
    sizes = study.SETTINGS[SETTING_OF_K[k]]["sizes"]
    timing, calls = harness.time_doubling(
        lambda h: run_bayesfair(study, policy, k, R, h, args.seed, args.chunk_size, extra_checkpoints=[T_np]),
        R, T, args.repeats, warmup=None if args.quick else min(T, 1024), double=not args.quick,
        prefix="bayesfair")
    first_ds = calls[T][0].value
    means = first_ds["mean"].values.astype(np.float64)  # the per-run means bayesfair drew
    numpy, np_out = harness.time_numpy(
        lambda runs, horizon, seed: numpy_bilevel(policy, means, sizes, BETA, horizon, seed, delta=study.delta(),
                                                  merit_floor=study.merit().params["floor"]),
        R, T_np, args.repeats, args.seed)
    # the rate used for the study estimate: the difference method when it is resolved
    steady_rate = timing["bayesfair_steady_rate"]
    use_steady = steady_rate is not None and timing["bayesfair_steady_resolved"] is True
    return {
        "policy": policy,
        "k": k,
        "setting": SETTING_OF_K[k],
        **timing,
        "bayesfair_study_rate": steady_rate if use_steady else timing["bayesfair_chunk_rate"],
        "bayesfair_study_rate_method": "steady" if use_steady else "per-chunk",
        **numpy,
        **harness.ratios(numpy["numpy_rate"], timing, "bayesfair"),
        "cross_check": cross_check(np_out[0], first_ds, policy, T_np, sizes),
    }


def study_estimate(results, quick):
    """Implied wall time of each paper-scale study half from the measured rates and fixed costs.

    Per policy: sum over the two settings of n_betas * (runs * T / rate + fixed cost per call)
    for bayesfair, and n_betas * runs * T / rate for NumPy (one thread).

    Parameters
    ----------
    results : list of dict
        :func:`bench_one` outputs.
    quick : bool
        No verdict when True.

    Returns
    -------
    dict
        Per policy: hours (bayesfair, NumPy), the target and whether it is met (None if not
        evaluated).
    """
    out = {}
    per_call = STUDY["runs"] * STUDY["horizon"]
    for policy in POLICIES:
        rows = {r["k"]: r for r in results if r["policy"] == policy}
        entry = {"run_rounds": per_call * STUDY["n_betas"] * len(SETTING_OF_K), "target_hours": TARGET_HOURS[policy],
                 "bayesfair_hours": None, "numpy_hours": None, "met": None}
        if set(rows) == set(SETTING_OF_K) and all(r["bayesfair_study_rate"] for r in rows.values()):
            bf_s = sum(STUDY["n_betas"] * (per_call / r["bayesfair_study_rate"] + (r["bayesfair_fixed_seconds"] or 0))
                       for r in rows.values())
            np_s = sum(STUDY["n_betas"] * per_call / r["numpy_rate"] for r in rows.values())
            entry.update(bayesfair_hours=bf_s / 3600, numpy_hours=np_s / 3600,
                         met=None if quick else bool(bf_s / 3600 < TARGET_HOURS[policy]))
        out[policy] = entry
    return out


def _verdict(r, quick):
    if quick:
        return "-"
    if r["ratio_steady"] is None:
        return "unresolved"
    met = "MET" if r["ratio_steady"] >= TARGET_RATIO else "NOT MET"
    return met + ("?" if r["bayesfair_steady_resolved"] is False else "")


def print_report(report):
    """Print machine info, the rate table, the cross-check and the study estimate.

    ``report`` is what :func:`main` writes to JSON.
    """
    s, _fmt = report["settings"], harness.fmt
    harness.print_preamble(report, f"bi-level study configuration, beta = {BETA}, f(mu) = mu, delta = 0.01",
                           jax_name="bayesfair")
    bf_h = f"T={s['horizon']}" + ("" if s["quick"] else " and 2T")
    print(f"horizons: bayesfair {bf_h} (chunk {s['chunk_size']}), NumPy T={s['numpy_horizon']}; "
          "rates are per run-round and NumPy's cost per round does not grow with t, so the shorter NumPy "
          "horizon favours neither side")
    rate, flag = harness.rate, harness.flag
    harness.print_table(report["results"], [
        ("policy", "<7", lambda r: r["policy"]), ("K", ">3", lambda r: r["k"]),
        ("bf steady", ">11", lambda r: rate(r["bayesfair_steady_rate"]) + flag(r["bayesfair_steady_resolved"])),
        ("(per-chunk)", ">11", lambda r: rate(r["bayesfair_chunk_rate"])),
        ("compile s", ">9", lambda r: _fmt(r["bayesfair_fixed_seconds"], ".1f")),
        ("numpy", ">10", lambda r: rate(r["numpy_rate"])),
        ("steady/np", ">9", lambda r: _fmt(r["ratio_steady"], ".2f") + flag(r["bayesfair_steady_resolved"])),
        ("chunk/np", ">8", lambda r: _fmt(r["ratio_chunk"], ".2f")),
        ("e2e/np", ">7", lambda r: _fmt(r["ratio_end_to_end"], ".2f")),
        (f" target>={TARGET_RATIO:g}", "", lambda r: " " + _verdict(r, s["quick"]))], prefix="bayesfair")
    print("compile s = time(T) - R T / per-chunk rate: tracing, compilation and per-call set-up, paid once per "
          "simulate call")
    print("cross-check on the same per-run means (mean +- s.e. over runs; paired z of NumPy - bayesfair; "
          "not asserted):")
    for r in report["results"]:
        c = r["cross_check"]
        parts = []
        for name, label, spec in (("minority_exposure", "N_min/T", ".4f"), ("bf_regret", "R*_beta regret", ",.1f"),
                                  ("regret", "regret", ",.1f")):
            v = c[name]
            parts.append(f"{label} numpy {v['numpy']:{spec}} +- {v['numpy_se']:{spec}}, bayesfair "
                         f"{v['bayesfair']:{spec}} +- {v['bayesfair_se']:{spec}} (z {_fmt(v['z'], '+.2f')})")
        zs = [abs(c[n]["z"]) for n in ("minority_exposure", "bf_regret", "regret") if c[n]["z"] is not None]
        agree = "agree within Monte Carlo error (|z| <= 3)" if zs and max(zs) <= 3 else "DIFFER (|z| > 3)"
        print(f"  {r['policy']} K={r['k']} at T={c['horizon']}: " + "; ".join(parts)
              + f"; min anytime slack numpy {c['numpy_min_anytime_slack']}, bayesfair "
              f"{c['bayesfair_min_anytime_slack']}: {agree}")
    print(f"implied paper-scale study half (both settings x {STUDY['n_betas']} betas x {STUDY['runs']} runs x "
          f"T={STUDY['horizon']:.0e} = {STUDY['runs'] * STUDY['horizon'] * STUDY['n_betas'] * 2:.0e} run-rounds, "
          "bayesfair adding the fixed cost once per simulate call):")
    for policy, e in report["study_estimate"].items():
        if e["bayesfair_hours"] is None:
            print(f"  {policy}: not estimated (needs both K = 15 and K = 60)")
            continue
        if s["quick"]:
            verdict = "not evaluated in a --quick run"
        else:
            verdict = "MET" if e["met"] else "NOT MET"
        print(f"  {policy}: bayesfair {e['bayesfair_hours']:.2f} h, NumPy (1 thread) {e['numpy_hours']:.2f} h; "
              f"target < {e['target_hours']:g} h: {verdict}")
    if s["quick"]:
        print(harness.QUICK_NOTE)


def parse_args(argv=None):
    """The command line ``argv`` (default ``sys.argv[1:]``), parsed by :func:`harness.parse`."""
    p = harness.parser(__doc__, "bilevel", runs=50, chunk_size=65_536,
                       quick_help="T=2048 (NumPy too), chunk size 512, one repeat, no warm-up, no 2T call (so no "
                                  "difference-method rate)")
    p.add_argument("--horizon", type=int, default=2**17, help="bayesfair rounds T (and 2T); default 2^17")
    p.add_argument("--numpy-horizon", type=int, default=2**14,
                   help="NumPy rounds (<= T; also the cross-check's round); default 2^14")
    p.add_argument("--arms", type=int, nargs="+", default=[15, 60], choices=sorted(SETTING_OF_K),
                   help="values of K (default 15 60)")
    p.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES,
                   help="default: BF-UCB BF-TS")
    args = harness.parse(p, argv, quick={"horizon": 2048, "numpy_horizon": 2048, "chunk_size": 512, "repeats": 1},
                         positive=("horizon", "numpy_horizon", "runs", "repeats", "chunk_size"))
    if args.numpy_horizon > args.horizon:
        p.error("--numpy-horizon must be <= --horizon (the cross-check reads bayesfair at that round)")
    if args.runs < 2:
        p.error(f"--runs must be >= 2 (the cross-check's standard errors), got {args.runs}")
    return args


def main(argv=None):
    """Run the benchmark on the command line ``argv``; print the report, write it to ``--out`` and return it."""
    args = parse_args(argv)
    study = load_study()
    report = harness.new_report("bilevel", argv, args, beta=list(BETA), delta=study.delta(),
                                merit=study.merit().describe(), bf_ucb_steps=0, prior=[1.0, 1.0],
                                study_configs=[p.stem for p in STUDY_CONFIGS.values()],
                                target_ratio=TARGET_RATIO)
    report["results"] = results = [bench_one(study, policy, k, args) for policy in args.policies for k in args.arms]
    report["study"] = STUDY
    report["study_estimate"] = study_estimate(results, args.quick)
    return harness.finish(report, args.out, print_report)


if __name__ == "__main__":
    main()
