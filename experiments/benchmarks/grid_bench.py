"""`make bench`: bayesfair's ``simulate`` vs a competent NumPy implementation, per policy family,
end to end in fresh processes and in steady state, over run counts R and horizons T.

The NumPy side is what a researcher would write: arrays ``[R, K]`` (vectorized over runs), one
Python loop over rounds, ``numpy.random.Generator`` draws, and only the metrics the study reports
(for the FairX families: fairness and reward regret at two checkpoints, T/2 and T). The bayesfair
side is one ``simulate`` call asking for the same metrics (``metrics=[FairXRegrets(merit,
only=["fairness_regret", "reward_regret"])]``, ``checkpoints=[T/2, T]``) where the family has them;
the bi-level families record exactly what their NumPy reference records
(``bilevel_bench.numpy_metrics``: exposure, pulls, group pulls, reward, group fairness regret,
floor slack) on the study's checkpoint grid; the other families make their own benchmark's call.

Method, per cell (family, R, T), repeated ``--repeats`` times (NumPy and bayesfair interleaved):

- *NumPy*: a new Python process runs the reference once. End to end = spawn to exit, less the
  untimed set-up (drawing the problem; for families whose reference lives in another benchmark
  script, importing it, which imports JAX); steady = the call alone.
- *bayesfair*: a new Python process calls ``simulate`` twice with the same objects. End to end =
  spawn to exit, less the second call (interpreter start-up, imports, tracing, compilation or a
  load from the persistent compilation cache, the run, and the interpreter's exit, ~0.45 s of
  final garbage collection: ``fresh_process.py``); steady = the second call (compiled functions
  reused in process, nothing compiled).
- Ratios = NumPy seconds / bayesfair seconds (> 1: bayesfair is faster), from the medians.
- Agreement: the mean final fairness regret (or the family's headline metric) of both sides over
  the runs of the last repetition; ``|z| = |difference| / s.e. of the difference`` must be <= 4.
  A cell that disagrees is printed as such, and the script exits with status 1 after writing the
  JSON.

The persistent compilation cache is what a user gets by default, so the first repetition of a
cell may compile (cold cache) and later ones load; the JSON keeps every repetition's seconds and
``--cold`` points each bayesfair process at an empty cache folder to measure compilation every time.

Usage: ``python experiments/benchmarks/grid_bench.py [--quick] [--families F ...] [--runs R ...]
[--repeats N] [--cold] [--out FILE]``; ``--estimate`` prints the full grid's estimated wall time
from a JSON report of an earlier run. See experiments/benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MERIT_C = 4.0
UCB_W0, UCB_LR, UCB_STEPS = 0.5, 0.01, 10  # FairX-UCB: box half-width w0 / sqrt(N), ascent settings
Z_MAX = 4.0
LARGE_CELL = 10 ** 8  # run-rounds above which a cell gets one repetition (--large-repeats), noted in the table


# ---------------------------------------------------------------------------------------------
# NumPy references (vectorized over runs; only the reported metrics)


def _softmax(x):
    z = np.exp(x - x.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def _sample(rng, pi):
    """One arm per run from the rows of ``pi`` ``[R, K]`` (inverse CDF)."""
    cdf = np.cumsum(pi, axis=1)
    u = rng.random(pi.shape[0]) * cdf[:, -1]
    return np.minimum((cdf <= u[:, None]).sum(axis=1), pi.shape[1] - 1)


def bernoulli_means(k, seed):
    """Arm means drawn once from U[0.1, 0.9] (``default_rng(seed)``)."""
    return np.random.default_rng(seed).uniform(0.1, 0.9, k)


def fair_reward_gradient(mu):
    """Gradient of pi(mu) . mu with pi = softmax(c mu), per row: pi_a (1 + c (mu_a - pi . mu))."""
    p = _softmax(MERIT_C * mu)
    return p * (1.0 + MERIT_C * (mu - (p * mu).sum(axis=-1, keepdims=True)))


class _FairXRecord:
    """The NumPy references' FairX regrets: sum_t |pi* - pi_t|_1 and sum_t (pi* - pi_t) . mu per run,
    recorded at T/2 and T (pi* = softmax(4 mu) of the fixed means)."""

    def __init__(self, runs, horizon, means):
        self.means = means
        self.pi_star = _softmax(MERIT_C * means)
        self.star_reward = self.pi_star @ means
        self.fr, self.rr = np.zeros(runs), np.zeros(runs)
        self.out_fr, self.out_rr = np.zeros((runs, 2)), np.zeros((runs, 2))
        self.half, self.horizon = max(horizon // 2, 1), horizon

    def add(self, t, pi):
        self.fr += np.abs(self.pi_star - pi).sum(axis=1)
        self.rr += self.star_reward - pi @ self.means
        if t == self.half:
            self.out_fr[:, 0], self.out_rr[:, 0] = self.fr, self.rr
        if t == self.horizon:
            self.out_fr[:, 1], self.out_rr[:, 1] = self.fr, self.rr

    def result(self):
        return {"fairness_regret": self.out_fr, "reward_regret": self.out_rr}


def numpy_fairx(runs, horizon, seed, k, policy):
    """FairX-TS, plain TS or FairX-UCB on Bernoulli arms, merit exp(4 mu), in NumPy.

    Records the fairness regret sum_t |pi*_t - pi_t|_1 and the reward regret
    sum_t (pi*_t - pi_t) . mu at T/2 and T.

    Parameters
    ----------
    runs, horizon, seed : int
        R runs of T rounds; the seed of ``numpy.random.default_rng`` (the arm means use ``seed`` too).
    k : int
        Arms.
    policy : {"fairx_ts", "ts", "fairx_ucb"}

    Returns
    -------
    dict
        ``fairness_regret`` and ``reward_regret``: ``[R, 2]`` (columns T/2, T).
    """
    means = bernoulli_means(k, seed)
    rng = np.random.default_rng(seed + 1)
    rows = np.arange(runs)
    record = _FairXRecord(runs, horizon, means)
    alpha, beta = np.ones((runs, k)), np.ones((runs, k))  # TS: Beta posteriors; UCB: 1 + successes, 1 + failures
    for t in range(1, horizon + 1):
        if policy == "fairx_ts":
            pi = _softmax(MERIT_C * rng.beta(alpha, beta))
            arm = _sample(rng, pi)
        elif policy == "ts":
            arm = np.argmax(rng.beta(alpha, beta), axis=1)
            pi = np.zeros((runs, k))
            pi[rows, arm] = 1.0
        else:  # FairX-UCB: projected gradient ascent of pi(mu) . mu over the box, from mu_hat clipped to it
            # (fairx_ucb's default start="center"; an unpulled arm's mu_hat is 0.5, its box [0, 1])
            n = alpha + beta - 2.0
            mu_hat = np.where(n > 0, (alpha - 1.0) / np.maximum(n, 1.0), 0.5)
            w = UCB_W0 / np.sqrt(np.maximum(n, 1.0))
            low = np.where(n > 0, np.maximum(0.0, mu_hat - w), 0.0)
            high = np.where(n > 0, np.minimum(1.0, mu_hat + w), 1.0)
            mu = np.clip(mu_hat, low, high)
            for _ in range(UCB_STEPS):
                mu = np.clip(mu + UCB_LR * fair_reward_gradient(mu), low, high)
            pi = _softmax(MERIT_C * mu)
            arm = _sample(rng, pi)
        reward = rng.random(runs) < means[arm]
        alpha[rows, arm] += reward
        beta[rows, arm] += ~reward
        record.add(t, pi)
    return record.result()


GAUSS_SIGMA = 0.5  # Gaussian arms N(mu_a, GAUSS_SIGMA^2), mu_a from bernoulli_means
NORMAL_PRIOR = {"prior_mean": 0.5, "prior_var": 1.0, "noise_var": GAUSS_SIGMA ** 2}  # normal_known_variance
NIG_PRIOR = {"m0": 0.5, "kappa0": 1.0, "a0": 1.0, "b0": 0.25}  # normal_inverse_gamma (round_profile.py's nig)


def numpy_fairx_gaussian(runs, horizon, seed, k, posterior):
    """FairX-TS on Gaussian arms N(mu_a, 0.5^2), merit exp(4 mu), in NumPy, with a conjugate
    posterior per arm: ``"normal"`` (Normal prior N(0.5, 1), known noise variance 0.25: one
    Gaussian draw per arm and round) or ``"nig"`` (Normal-Inverse-Gamma, m0 0.5, kappa0 1, a0 1,
    b0 0.25: sigma_a^2 = b / Gamma(a), then mu_a ~ N(m, sigma_a^2 / kappa); one Gamma and one
    Gaussian draw per arm and round). The updates are the posteriors' closed forms (precision and
    precision-weighted mean; kappa' = kappa + 1, m' = (kappa m + r) / kappa', a' = a + 1/2,
    b' = b + kappa (r - m)^2 / (2 kappa')). Records the fairness and reward regret at T/2 and T,
    as :func:`numpy_fairx`.
    """
    means = bernoulli_means(k, seed)
    rng = np.random.default_rng(seed + 1)
    rows = np.arange(runs)
    record = _FairXRecord(runs, horizon, means)
    if posterior == "normal":
        noise_var = NORMAL_PRIOR["noise_var"]
        precision = np.full((runs, k), 1.0 / NORMAL_PRIOR["prior_var"])
        weighted = np.full((runs, k), NORMAL_PRIOR["prior_mean"] / NORMAL_PRIOR["prior_var"])
    elif posterior == "nig":
        m, kappa, a, b = (np.full((runs, k), NIG_PRIOR[name]) for name in ("m0", "kappa0", "a0", "b0"))
    else:
        raise ValueError(f"posterior must be 'normal' or 'nig', got {posterior!r}")
    for t in range(1, horizon + 1):
        z = rng.standard_normal((runs, k))
        if posterior == "normal":
            theta = weighted / precision + z / np.sqrt(precision)
        else:
            theta = m + z * np.sqrt(b / rng.standard_gamma(a) / kappa)
        pi = _softmax(MERIT_C * theta)
        arm = _sample(rng, pi)
        reward = means[arm] + GAUSS_SIGMA * rng.standard_normal(runs)
        if posterior == "normal":
            precision[rows, arm] += 1.0 / noise_var
            weighted[rows, arm] += reward / noise_var
        else:
            k_old, m_old = kappa[rows, arm], m[rows, arm]
            k_new = k_old + 1.0
            b[rows, arm] += k_old * (reward - m_old) ** 2 / (2.0 * k_new)
            m[rows, arm] = (k_old * m_old + reward) / k_new
            kappa[rows, arm] = k_new
            a[rows, arm] += 0.5
        record.add(t, pi)
    return record.result()


# ---------------------------------------------------------------------------------------------
# bayesfair sides (objects built once per process, so the second call reuses its compiled functions)


@functools.cache
def _fairx_study(k, policy, seed):
    import bayesfair
    from bayesfair.simulation.metric_parts import FairXRegrets

    merit = bayesfair.core.merit.exponential(MERIT_C)
    env = bayesfair.bernoulli_arms(bernoulli_means(k, seed))
    post = bayesfair.beta_bernoulli()
    pol = {"fairx_ts": lambda: bayesfair.fairx_ts(post, merit), "ts": lambda: bayesfair.thompson(post),
           "fairx_ucb": lambda: bayesfair.fairx_ucb(merit, w0=UCB_W0, learning_rate=UCB_LR, steps=UCB_STEPS)}[policy]()
    return env, pol, merit, (FairXRegrets(merit, only=["fairness_regret", "reward_regret"]),)


def bayesfair_fairx(runs, horizon, seed, chunk_size, k, policy):
    """One ``simulate`` call of the FairX families, FairX regrets at T/2 and T only; ``[R]`` final fairness regret."""
    import bayesfair

    env, pol, merit, metrics = _fairx_study(k, policy, seed)
    ds = bayesfair.simulate(seed, env, {"p": pol}, horizon, runs, merit=merit, metrics=list(metrics),
                            checkpoints=sorted({max(horizon // 2, 1), horizon}), chunk_size=min(chunk_size, horizon))
    return ds["fairness_regret"].sel(policy="p").values[:, -1]


@functools.cache
def _fairx_gaussian_study(k, posterior, seed):
    import bayesfair
    from bayesfair.simulation.metric_parts import FairXRegrets

    merit = bayesfair.core.merit.exponential(MERIT_C)
    env = bayesfair.gaussian_arms(bernoulli_means(k, seed), sigma=GAUSS_SIGMA)
    post = {"normal": lambda: bayesfair.normal_known_variance(**NORMAL_PRIOR),
            "nig": lambda: bayesfair.normal_inverse_gamma(**NIG_PRIOR)}[posterior]()
    metrics = (FairXRegrets(merit, only=["fairness_regret", "reward_regret"]),)
    return env, bayesfair.fairx_ts(post, merit), merit, metrics


def bayesfair_fairx_gaussian(runs, horizon, seed, chunk_size, k, posterior):
    """FairX-TS on Gaussian arms with the ``"normal"`` or ``"nig"`` posterior (as
    :func:`numpy_fairx_gaussian`), FairX regrets at T/2 and T only; ``[R]`` final fairness regret."""
    import bayesfair

    env, pol, merit, metrics = _fairx_gaussian_study(k, posterior, seed)
    ds = bayesfair.simulate(seed, env, {"p": pol}, horizon, runs, merit=merit, metrics=list(metrics),
                            checkpoints=sorted({max(horizon // 2, 1), horizon}), chunk_size=min(chunk_size, horizon))
    return ds["fairness_regret"].sel(policy="p").values[:, -1]


def _script(name):
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import importlib

    return importlib.import_module(name)


LINTS = {"n_arms": 14, "n_features": 10, "sigma": 1.0}


def numpy_lints(runs, horizon, seed):
    """:func:`fairx_lints_bench.numpy_fairx_lints` (K = 14, d = 10); ``[R]`` final fairness regret."""
    b = _script("fairx_lints_bench")
    theta = b.draw_theta(LINTS["n_features"], seed)
    return b.numpy_fairx_lints(runs, horizon, seed, theta, LINTS["n_arms"], LINTS["sigma"])["fairness_regret"]


@functools.cache
def _lints_objects(seed):
    b = _script("fairx_lints_bench")
    theta = b.draw_theta(LINTS["n_features"], seed)
    return theta, b.study_objects(theta, LINTS["n_arms"], LINTS["sigma"])


def bayesfair_lints(runs, horizon, seed, chunk_size):
    """:func:`fairx_lints_bench.run_jax` (K = 14, d = 10), objects built once per process (a true
    steady state for the second call); ``[R]`` final fairness regret."""
    theta, objects = _lints_objects(seed)
    return _script("fairx_lints_bench").run_jax(runs, horizon, seed, chunk_size, theta, LINTS["n_arms"],
                                                LINTS["sigma"], objects=objects).value


def numpy_fair_greedy(runs, horizon, seed):
    """:func:`fair_greedy_bench.numpy_fair_greedy`; ``[R]`` final fair pseudo-regret."""
    return _script("fair_greedy_bench").numpy_fair_greedy(runs, horizon, seed)["fair_regret"]


@functools.cache
def _fair_greedy_objects(horizon):
    return _script("fair_greedy_bench").study_objects(horizon, None)


def bayesfair_fair_greedy(runs, horizon, seed, chunk_size):
    """:func:`fair_greedy_bench.run_jax` (default block), objects built once per process;
    ``[R]`` final fair pseudo-regret."""
    return _script("fair_greedy_bench").run_jax(runs, horizon, seed, chunk_size, None,
                                                objects=_fair_greedy_objects(horizon)).value


def numpy_gfti(runs, horizon, seed):
    """:func:`biased_bench.numpy_gfti`; ``[R]`` final biased regret."""
    return _script("biased_bench").numpy_gfti(runs, horizon, seed)["regret"]


@functools.cache
def _gfti_objects():
    return _script("biased_bench").study_objects("GFTI")


def bayesfair_gfti(runs, horizon, seed, chunk_size):
    """:func:`biased_bench.run_jax` of GroupFairTopInterval, objects built once per process;
    ``[R]`` final biased regret."""
    return _script("biased_bench").run_jax("GFTI", runs, horizon, seed, chunk_size,
                                           objects=_gfti_objects()).value["regret"]


@functools.cache
def _bilevel():
    return _script("bilevel_bench").load_study()


def _bilevel_means(runs, seed):
    from bayesfair.simulation.simulator import run_means

    b = _script("bilevel_bench")
    return run_means(_bilevel().environment(b.SETTING_OF_K[15]), seed, runs)


def numpy_bilevel(runs, horizon, seed, means, policy):
    """:func:`bilevel_bench.numpy_bilevel` of ``policy`` (BF-UCB or BF-TS, K = 15) on bayesfair's per-run
    means; ``[R]`` final group fairness regret."""
    b, study = _script("bilevel_bench"), _bilevel()
    sizes = study.SETTINGS[b.SETTING_OF_K[15]]["sizes"]
    return b.numpy_bilevel(policy, means, sizes, b.BETA, horizon, seed, delta=study.delta(),
                           merit_floor=study.merit().params["floor"])["group_fairness_regret"]


@functools.cache
def _bilevel_objects(policy):
    b, study = _script("bilevel_bench"), _bilevel()
    return study, b.study_objects(study, policy, 15), tuple(b.numpy_metrics(study))


def bayesfair_bilevel(runs, horizon, seed, chunk_size, policy):
    """:func:`bilevel_bench.run_bayesfair` of ``policy`` (BF-UCB or BF-TS, K = 15), with the study's
    objects built once per process so that the second call is a true steady state; ``[R]`` final
    group fairness regret."""
    study, objects, metrics = _bilevel_objects(policy)
    ds = _script("bilevel_bench").run_bayesfair(study, policy, 15, runs, horizon, seed, chunk_size,
                                                objects=objects, metrics=metrics).value
    return ds["group_fairness_regret"].sel(policy=policy).values[:, -1]


# ---------------------------------------------------------------------------------------------
# the families


@dataclass(frozen=True)
class Family:
    """A row group of the table: both sides, their fixed parameters and the grid."""

    label: str
    numpy: str  # function names in this module
    bayesfair: str
    params: tuple = ()  # (name, value) pairs passed to both sides
    horizons: tuple = (20_000, 200_000)
    runs: tuple = (50, 500, 2000)
    setup: str | None = None  # numpy-side set-up (untimed): returns extra keyword arguments
    metric: str = "fairness regret"
    numpy_metric: str | None = "fairness_regret"  # key of the NumPy output dict (None: it is the array)


FAMILIES = {
    "fairx_ts_k10": Family("FairX-TS K=10", "numpy_fairx", "bayesfair_fairx", (("k", 10), ("policy", "fairx_ts"))),
    "fairx_ts_k60": Family("FairX-TS K=60", "numpy_fairx", "bayesfair_fairx", (("k", 60), ("policy", "fairx_ts"))),
    "ts_k10": Family("TS K=10", "numpy_fairx", "bayesfair_fairx", (("k", 10), ("policy", "ts"))),
    "fairx_ts_normal_k10": Family("FairX-TS Normal K=10", "numpy_fairx_gaussian", "bayesfair_fairx_gaussian",
                                  (("k", 10), ("posterior", "normal"))),
    "fairx_ts_nig_k10": Family("FairX-TS NIG K=10", "numpy_fairx_gaussian", "bayesfair_fairx_gaussian",
                               (("k", 10), ("posterior", "nig"))),
    "fairx_ucb_k10": Family("FairX-UCB K=10", "numpy_fairx", "bayesfair_fairx", (("k", 10), ("policy", "fairx_ucb")),
                            horizons=(10_000, 50_000)),
    "bf_ucb_k15": Family("BF-UCB K=15", "numpy_bilevel", "bayesfair_bilevel", (("policy", "BF-UCB"),),
                         horizons=(10_000, 50_000), setup="_bilevel_means", metric="group fairness regret",
                         numpy_metric=None),
    "bf_ts_k15": Family("BF-TS K=15", "numpy_bilevel", "bayesfair_bilevel", (("policy", "BF-TS"),),
                        horizons=(10_000, 50_000), setup="_bilevel_means", metric="group fairness regret",
                        numpy_metric=None),
    "fairx_lints": Family("FairX-LinTS K=14 d=10", "numpy_lints", "bayesfair_lints", horizons=(5_000, 20_000),
                          numpy_metric=None),
    "fair_greedy": Family("Fair-Greedy K=4 d=17", "numpy_fair_greedy", "bayesfair_fair_greedy",
                          horizons=(2_000, 10_000), runs=(50, 500), metric="fair pseudo-regret", numpy_metric=None),
    "gfti": Family("GroupFairTopInterval", "numpy_gfti", "bayesfair_gfti", horizons=(10_000, 100_000),
                   metric="biased regret", numpy_metric=None),
}
QUICK = {"runs": (8,), "horizons": (200, 400), "repeats": 1}


# ---------------------------------------------------------------------------------------------
# fresh processes


def _child(family, side, runs, horizon, seed, chunk_size, calls):
    """The child process: set up, call the side ``calls`` times, print one JSON line of timings."""
    t_import = time.perf_counter()
    fam = FAMILIES[family]
    params = dict(fam.params)
    t0 = time.perf_counter()
    if side == "numpy":
        if fam.setup:
            params.update(means=globals()[fam.setup](runs, seed))
        fn = functools.partial(globals()[fam.numpy], runs, horizon, seed, **params)
    else:
        fn = functools.partial(globals()[fam.bayesfair], runs, horizon, seed, chunk_size, **params)
    setup = time.perf_counter() - t0
    seconds, value = [], None
    for _ in range(calls):
        t = time.perf_counter()
        value = fn()
        seconds.append(time.perf_counter() - t)
    if isinstance(value, dict):
        value = value[fam.numpy_metric]
    value = np.asarray(value, np.float64)
    final = value[:, -1] if value.ndim == 2 else value
    print(json.dumps({"import_to_setup_seconds": t0 - t_import, "setup_seconds": setup, "seconds": seconds,
                      "final": final.tolist()}))


def run_fresh(family, side, runs, horizon, seed, chunk_size, calls, env=None):
    """Run one side in a new Python process; its wall time from spawn to exit and the child's report."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", family, side, str(runs), str(horizon), str(seed),
           str(chunk_size), str(calls)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{family} {side} R={runs} T={horizon} failed (exit {proc.returncode}):\n{proc.stderr}")
    return {"wall_seconds": wall, **json.loads(proc.stdout.strip().splitlines()[-1])}


def agreement(a, b):
    """Mean, s.e. and z of two samples of per-run values (``|z| <= Z_MAX`` agrees)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    ma, mb = a.mean(), b.mean()
    se = float(np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)) if min(a.size, b.size) > 1 else 0.0
    scale = max(abs(ma), abs(mb), 1e-12)
    z = (ma - mb) / se if se > 1e-9 * scale else (0.0 if abs(ma - mb) <= 1e-6 * scale else float("inf"))
    return {"numpy_mean": float(ma), "bayesfair_mean": float(mb), "se_difference": se, "z": float(z),
            "agree": bool(abs(z) <= Z_MAX)}


def cell(family, runs, horizon, *, repeats, seed, chunk_size, cold=False):
    """Time one cell (module docstring): medians over ``repeats`` of fresh processes, ratios, agreement."""
    np_runs, bf_runs = [], []
    for rep in range(repeats):
        sys.stderr.write(f"  {family} R={runs} T={horizon} repetition {rep + 1}/{repeats}\n")
        np_runs.append(run_fresh(family, "numpy", runs, horizon, seed + rep, chunk_size, 1))
        env = None
        if cold:
            env = {**os.environ, "BAYESFAIR_COMPILE_CACHE_DIR": tempfile.mkdtemp(prefix="bayesfair-bench-cold-")}
        bf_runs.append(run_fresh(family, "bayesfair", runs, horizon, seed + rep, chunk_size, 2, env=env))
    np_e2e = [r["wall_seconds"] - r["setup_seconds"] for r in np_runs]
    np_call = [r["seconds"][0] for r in np_runs]
    bf_e2e = [r["wall_seconds"] - r["seconds"][1] for r in bf_runs]
    bf_steady = [r["seconds"][1] for r in bf_runs]
    med = statistics.median
    out = {"family": family, "label": FAMILIES[family].label, "runs": runs, "horizon": horizon, "repeats": repeats,
           "numpy_end_to_end_seconds": np_e2e, "numpy_call_seconds": np_call,
           "bayesfair_end_to_end_seconds": bf_e2e, "bayesfair_first_call_seconds": [r["seconds"][0] for r in bf_runs],
           "bayesfair_steady_seconds": bf_steady,
           "ratio_end_to_end": med(np_e2e) / med(bf_e2e), "ratio_steady": med(np_call) / med(bf_steady),
           "numpy_rate": runs * horizon / med(np_call), "bayesfair_steady_rate": runs * horizon / med(bf_steady),
           "metric": FAMILIES[family].metric,
           "agreement": agreement(np_runs[-1]["final"], bf_runs[-1]["final"])}
    return out


# ---------------------------------------------------------------------------------------------
# report


def machine_info():
    """CPU count, library versions and the load average (no JAX import in the parent)."""
    import importlib.metadata as md

    def version(name):
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            return None

    return {"cpu_count": os.cpu_count(), "python_version": platform.python_version(), "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(), "numpy_version": np.__version__,
            "jax_version": version("jax"), "jaxlib_version": version("jaxlib"),
            "bayesfair_version": version("bayesfair"),
            # the result's libraries: xarray imports dask (when installed, as with the test extras) on
            # its first Variable, ~0.2 s of bayesfair's end to end at R = 100 (benchmarks README)
            "xarray_version": version("xarray"), "pandas_version": version("pandas"), "dask_version": version("dask"),
            "loadavg_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "host_devices": os.environ.get("BAYESFAIR_HOST_DEVICES", "one per core")}


def print_report(report):
    """The table: one line per cell, both ratios, the agreement."""
    m = report["machine"]
    print(f"machine: {m['cpu_count']} CPUs, {m['platform']}, jax {m['jax_version']}, numpy {m['numpy_version']}, "
          f"dask {m.get('dask_version') or 'not installed'}, "
          f"load average {m['loadavg_at_start'][0]:.2f} -> {m.get('loadavg_at_end', [float('nan')])[0]:.2f}")
    print(f"medians of n fresh processes per side (n = {report['settings']['repeats']}, "
          f"{report['settings']['large_repeats']} above {LARGE_CELL:.0e} run-rounds); seconds; "
          "ratio = NumPy / bayesfair (> 1: bayesfair faster);\n"
          "e2e = spawn to exit, less bayesfair's steady call (imports, compilation or cache load, the run, the exit)")
    head = (f"{'family':<22} {'R':>5} {'T':>8} {'n':>2} {'numpy e2e':>9} {'bf e2e':>8} {'e2e x':>6} {'numpy run':>9} "
            f"{'bf run':>8} {'steady x':>8} {'agreement (z)':>14}")
    print(head)
    print("-" * len(head))
    for c in report["cells"]:
        med = statistics.median
        a = c["agreement"]
        print(f"{c['label']:<22} {c['runs']:>5} {c['horizon']:>8} {c['repeats']:>2} "
              f"{med(c['numpy_end_to_end_seconds']):>9.2f} "
              f"{med(c['bayesfair_end_to_end_seconds']):>8.2f} {c['ratio_end_to_end']:>6.2f} "
              f"{med(c['numpy_call_seconds']):>9.2f} {med(c['bayesfair_steady_seconds']):>8.2f} "
              f"{c['ratio_steady']:>8.2f} {('ok' if a['agree'] else 'DISAGREE'):>8} {a['z']:+5.1f}")
    bad = [c for c in report["cells"] if not c["agreement"]["agree"]]
    print(f"statistical agreement (|z| <= {Z_MAX:g} on the mean final metric): "
          + ("every cell agrees" if not bad else f"{len(bad)} cell(s) DISAGREE"))
    if report["settings"]["quick"]:
        print("(--quick: tiny sizes, the ratios mean nothing)")


def estimate(report, families):
    """Estimated wall seconds of the full grid (3 repetitions, 1 for large cells) from the cells of
    ``report``: each family's rates from its largest measured cell, its fixed costs (start-up,
    compilation) from its smallest; families absent from ``report`` are left out."""
    total = 0.0
    by_family = {}
    for c in report["cells"]:
        by_family.setdefault(c["family"], []).append(c)
    for name in families:
        fam, cells = FAMILIES[name], by_family.get(name)
        if not cells:
            continue
        big = max(cells, key=lambda c: c["runs"] * c["horizon"])
        small = min(cells, key=lambda c: c["runs"] * c["horizon"])
        fixed = statistics.median(small["bayesfair_end_to_end_seconds"]) + statistics.median(
            small["numpy_end_to_end_seconds"])
        for r in fam.runs:
            for t in fam.horizons:
                work = r * t * (1 / big["numpy_rate"] + 2 / big["bayesfair_steady_rate"])
                total += (3 if r * t <= LARGE_CELL else 1) * (fixed + work)
    return total


def main(argv=None):
    """Run the grid (``--quick``: tiny), print the table, write the JSON; exit 1 if a cell disagrees."""
    p = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny grid: R=8, T in (200, 400), one repetition")
    p.add_argument("--families", nargs="+", choices=sorted(FAMILIES), default=list(FAMILIES))
    p.add_argument("--runs", type=int, nargs="+", help="override every family's run counts")
    p.add_argument("--horizons", type=int, nargs="+", help="override every family's horizons")
    p.add_argument("--repeats", type=int, default=3, help="fresh processes per side and cell (default 3)")
    p.add_argument("--large-repeats", type=int, default=1,
                   help=f"repetitions of cells above {LARGE_CELL:.0e} run-rounds (default 1; the table notes it)")
    p.add_argument("--chunk-size", type=int, default=1024, help="simulate's chunk_size (default 1024)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cold", action="store_true", help="an empty compilation cache for every bayesfair process")
    p.add_argument("--estimate", type=Path, help="print the full grid's estimated wall time from this JSON and exit")
    p.add_argument("--out", type=Path, default=Path("results/benchmarks/grid_bench.json"))
    args = p.parse_args(argv)
    for name in ("repeats", "large_repeats", "chunk_size"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    for name in ("runs", "horizons"):
        if getattr(args, name) and min(getattr(args, name)) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.seed < 0:
        p.error(f"--seed must be >= 0, got {args.seed}")
    if args.estimate:
        seconds = estimate(json.loads(args.estimate.read_text()), args.families)
        print(f"estimated wall time of the full grid: {seconds / 3600:.1f} h ({seconds:,.0f} s)")
        return None
    if args.quick:
        args.runs, args.horizons, args.repeats = QUICK["runs"], QUICK["horizons"], QUICK["repeats"]
    report = {"benchmark": "grid", "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "command": " ".join(["python", "experiments/benchmarks/grid_bench.py",
                                   *(sys.argv[1:] if argv is None else argv)]),
              "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "machine": machine_info(), "cells": []}
    for name in args.families:
        fam = FAMILIES[name]
        for r in args.runs or fam.runs:
            for t in args.horizons or fam.horizons:
                reps = args.repeats if r * t <= LARGE_CELL else min(args.repeats, args.large_repeats)
                report["cells"].append(cell(name, r, t, repeats=reps, seed=args.seed,
                                            chunk_size=args.chunk_size, cold=args.cold))
    report["machine"]["loadavg_at_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    print_report(report)
    from bayesfair.simulation.results import write_text  # atomic (imports JAX: only here, the children stay light)

    write_text(args.out, json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    if any(not c["agreement"]["agree"] for c in report["cells"]):
        sys.exit(1)
    return report


if __name__ == "__main__":
    if len(sys.argv) == 9 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3], *map(int, sys.argv[4:9]))
    else:
        main()
