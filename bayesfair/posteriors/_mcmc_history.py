"""Settings, histories and refresh diagnostics of the MCMC fallback (:mod:`bayesfair.posteriors.mcmc`,
which re-exports them).

:class:`NUTSSettings` says how a fallback posterior refreshes; a :class:`History` says how a family
stores the data its NumPyro model conditions on, with static shapes (per-arm counts, or a masked
ring buffer of arms or contexts). The module docstring of :mod:`bayesfair.posteriors.mcmc`
describes how the engine uses them. :func:`split_rhat_ess` computes the convergence diagnostics
of one refresh in JAX (inside the jitted scan); :func:`refresh_track` hands them to the simulator
as tracked values and :func:`warn_failed_refreshes` checks them after a simulation.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bayesfair.core._validate import finite_float, float_in, positive_int

__all__ = ["NUTSSettings", "MCMCState", "is_mcmc_state", "History", "ArmCounts", "ArmBuffer", "ContextBuffer",
           "arm_counts", "arm_buffer",
           "context_buffer", "split_rhat_ess", "refresh_track", "warn_failed_refreshes"]


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class NUTSSettings:
    """How the fallback refreshes its posterior (validated by :meth:`create`).

    Attributes
    ----------
    refresh_every : int
        B >= 1: refresh after every B-th observation (n % B == 0).
    num_warmup : int
        Adaptation steps per refresh and chain (>= 0). Mass-matrix windows need >= 20.
    num_samples : int
        Stored draws per chain (>= 1); TS draws one of the ``num_chains * num_samples`` at random.
    num_chains : int
        Chains per refresh (>= 1, default 2), vmapped; R-hat compares the chains (and the halves
        of every chain), so >= 2 chains can reveal chains stuck in different places.
    max_tree_depth : int
        NUTS tree depth limit in [1, 15] (at most 2^depth leapfrog steps per draw). Under ``vmap``
        every run waits for the deepest tree, so a moderate limit bounds the refresh cost.
    target_accept : float
        Dual-averaging target acceptance probability in (0, 1).
    adapt_mass_matrix : bool
        Re-estimate the diagonal inverse mass matrix in the warmup windows.
    init_radius : float
        First refresh: chains start uniformly in [-r, r] of the unconstrained space (> 0).
    init_step_size : float
        First refresh's initial step size (> 0); later refreshes start from the previous one.
    seed : int
        Seed of the key the state carries (>= 0).
    max_rhat : float
        A refresh whose largest split R-hat over the unconstrained coordinates reaches this (> 1)
        counts as failed (``MCMCState.bad_refreshes``). Default 1.1, looser than the 1.01 of a
        final fit (Vehtari et al. 2021), because a refresh keeps few draws (2 x 100 by default):
        for 2 x 100 *independent* draws of 5 coordinates the largest split R-hat reached 1.01 in
        46% and 1.05 in 0.3% of 20,000 simulated refreshes, and for autocorrelated draws (AR(1),
        0.5) 1.05 in 45%, so over the hundreds of refreshes of a simulation a tighter threshold
        would warn on a healthy sampler. 1.1 was never reached by independent draws and flags
        frozen or drifting chains (docs/mcmc.md).
    min_ess : float
        A refresh whose smallest ESS (split chains, Stan/ArviZ's non-rank-normalized "mean"
        estimator) is below this (> 0) counts as failed; default 20 (10% of the default 200
        draws: reached by independent draws in 1e-4 of refreshes; the 400 of a final fit would
        need more draws than a refresh keeps). A refresh with a divergent transition, or with
        non-finite draws, counts as failed too.
    """

    refresh_every: int = 100
    num_warmup: int = 100
    num_samples: int = 100
    num_chains: int = 2
    max_tree_depth: int = 8
    target_accept: float = 0.8
    adapt_mass_matrix: bool = True
    init_radius: float = 1.0
    init_step_size: float = 0.5
    seed: int = 0
    max_rhat: float = 1.1
    min_ess: float = 20.0

    @classmethod
    def create(cls, **kw: Any) -> NUTSSettings:
        """Validated settings; unknown names raise a TypeError listing the allowed ones."""
        allowed = set(cls.__dataclass_fields__)
        unknown = set(kw) - allowed
        if unknown:
            raise TypeError(f"unknown MCMC setting(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        s = cls(**kw)
        positive_int("refresh_every", s.refresh_every)
        positive_int("num_warmup", s.num_warmup, minimum=0)
        positive_int("num_samples", s.num_samples)
        positive_int("num_chains", s.num_chains)
        depth = positive_int("max_tree_depth", s.max_tree_depth)
        if depth > 15:
            raise ValueError(f"max_tree_depth must be in [1, 15], got {depth}")
        float_in("target_accept", s.target_accept, 0.0, 1.0, low_open=True, high_open=True)
        if not isinstance(s.adapt_mass_matrix, bool):
            raise TypeError(f"adapt_mass_matrix must be a bool, got {s.adapt_mass_matrix!r}")
        for name in ("init_radius", "init_step_size"):
            if finite_float(name, getattr(s, name)) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(s, name)}")
        positive_int("seed", s.seed, minimum=0)
        if finite_float("max_rhat", s.max_rhat) <= 1.0:
            raise ValueError(f"max_rhat must be > 1, got {s.max_rhat}")
        if finite_float("min_ess", s.min_ess) <= 0:
            raise ValueError(f"min_ess must be > 0, got {s.min_ess}")
        return cls(**{**asdict(s), "target_accept": float(s.target_accept),
                      "init_radius": float(s.init_radius), "init_step_size": float(s.init_step_size),
                      "max_rhat": float(s.max_rhat), "min_ess": float(s.min_ess)})


# --------------------------------------------------------------------------- histories


class History(NamedTuple):
    """How a family stores the data its NumPyro model conditions on (static shapes).

    Attributes
    ----------
    name : str
    init : callable
        ``init(size) -> history`` for K arms (or d features).
    append : callable
        ``append(history, item, reward) -> history``; ``item`` is the arm index or the context.
    model_inputs : callable
        ``model_inputs(history, size) -> (args, kwargs, static)``: array arguments and keyword
        arguments of the model, and static (Python) keyword arguments.
    params : dict
        JSON-friendly description.
    """

    name: str
    init: Callable[[int], Any]
    append: Callable[[Any, Any, Any], Any]
    model_inputs: Callable[[Any, int], tuple[tuple, dict, dict]]
    params: dict[str, Any]


class ArmCounts(NamedTuple):
    """Per-arm ``successes`` and ``trials`` ``[K]`` (float32, exact below 2^24)."""

    successes: jax.Array
    trials: jax.Array


class ArmBuffer(NamedTuple):
    """Ring buffer of pulled ``arms`` ``[C]`` int32 and ``rewards`` ``[C]``; ``count`` observations seen."""

    arms: jax.Array
    rewards: jax.Array
    count: jax.Array


class ContextBuffer(NamedTuple):
    """Ring buffer of contexts ``x`` ``[C, d]`` and rewards ``y`` ``[C]``; ``count`` observations seen."""

    x: jax.Array
    y: jax.Array
    count: jax.Array


def arm_counts() -> History:
    """Success and trial counts per arm: the exact sufficient statistic of a Bernoulli likelihood.

    The model is called as ``model(successes [K], trials [K])`` and must use a binomial-type
    likelihood (rewards are taken as 0/1 successes; fractional rewards add fractional successes).
    """

    def init(size: int) -> ArmCounts:
        return ArmCounts(jnp.zeros((size,), jnp.float32), jnp.zeros((size,), jnp.float32))

    def append(h: ArmCounts, arm: jax.Array, reward: jax.Array) -> ArmCounts:
        hit = (jnp.arange(h.trials.shape[0]) == arm).astype(jnp.float32)
        return ArmCounts(h.successes + hit * jnp.asarray(reward, jnp.float32), h.trials + hit)

    def model_inputs(h: ArmCounts, size: int):
        return (h.successes, h.trials), {}, {}

    return History("arm_counts", init, append, model_inputs, {"history": "arm_counts"})


def _ring_mask(count: jax.Array, capacity: int) -> jax.Array:
    return jnp.arange(capacity) < jnp.minimum(count, capacity)


def arm_buffer(capacity: int) -> History:
    """The last ``capacity`` (arm, reward) pairs, masked: ``model(arms, rewards, *, n_arms, mask)``."""
    capacity = positive_int("capacity", capacity)

    def init(size: int) -> ArmBuffer:
        return ArmBuffer(jnp.zeros((capacity,), jnp.int32), jnp.zeros((capacity,), jnp.float32),
                         jnp.zeros((), jnp.int32))

    def append(h: ArmBuffer, arm: jax.Array, reward: jax.Array) -> ArmBuffer:
        i = h.count % capacity
        return ArmBuffer(h.arms.at[i].set(jnp.asarray(arm, jnp.int32)),
                         h.rewards.at[i].set(jnp.asarray(reward, jnp.float32)), h.count + 1)

    def model_inputs(h: ArmBuffer, size: int):
        return (h.arms, h.rewards), {"mask": _ring_mask(h.count, capacity)}, {"n_arms": size}

    return History("arm_buffer", init, append, model_inputs, {"history": "arm_buffer", "capacity": capacity})


def context_buffer(capacity: int) -> History:
    """The last ``capacity`` (context, reward) pairs, masked: ``model(X [C, d], y [C], *, mask)``."""
    capacity = positive_int("capacity", capacity)

    def init(size: int) -> ContextBuffer:
        return ContextBuffer(jnp.zeros((capacity, size), jnp.float32), jnp.zeros((capacity,), jnp.float32),
                             jnp.zeros((), jnp.int32))

    def append(h: ContextBuffer, x: jax.Array, reward: jax.Array) -> ContextBuffer:
        i = h.count % capacity
        return ContextBuffer(h.x.at[i].set(jnp.asarray(x, jnp.float32)),
                             h.y.at[i].set(jnp.asarray(reward, jnp.float32)), h.count + 1)

    def model_inputs(h: ContextBuffer, size: int):
        return (h.x, h.y), {"mask": _ring_mask(h.count, capacity)}, {}

    return History("context_buffer", init, append, model_inputs,
                   {"history": "context_buffer", "capacity": capacity})


# --------------------------------------------------------------------------- refresh diagnostics


class MCMCState(NamedTuple):
    """State of an MCMC-fallback posterior (one run).

    Attributes
    ----------
    history : pytree
        The data the model conditions on (:class:`ArmCounts`, :class:`ArmBuffer`, ...).
    n : jax.Array
        int32, observations so far.
    samples : dict
        Site name -> ``[num_chains, num_samples, ...]`` constrained draws of the last refresh
        (latent and deterministic sites; exact prior draws before the first refresh).
    position : jax.Array
        ``[num_chains, D]`` last unconstrained position of each chain (warm start).
    step_size : jax.Array
        ``[num_chains]`` adapted step size of the last refresh.
    inverse_mass : jax.Array
        ``[num_chains, D]`` diagonal inverse mass matrix for the next refresh (regularized
        variance of the last refresh's unconstrained draws).
    key : jax.Array
        ``uint32`` raw key data for the next refresh.
    refreshes : jax.Array
        int32, number of NUTS refreshes so far (0: ``samples`` are prior draws).
    diverging, accept_prob, num_steps : jax.Array
        ``[num_chains, num_samples]`` per-draw NUTS statistics of the last refresh.
    eta : jax.Array
        Mean of the draw site over the stored samples (``mu [K]`` or ``theta [d]``). Linear
        policies read the feature dimension from ``state.eta`` (as for the conjugate linear
        states, where ``eta`` is Lambda m); here it is the posterior mean itself.
    rhat, ess : jax.Array
        float32, the last refresh's largest split R-hat and smallest ESS over the unconstrained
        coordinates (:func:`split_rhat_ess`; NaN before the first refresh).
    bad_refreshes : jax.Array
        int32, refreshes so far that failed ``max_rhat``, ``min_ess``, had a divergence or
        non-finite draws (:class:`NUTSSettings`).
    first_bad : jax.Array
        int32, the observation count ``n`` (the round, for one observation per round) of the
        first failed refresh; 0 if none.
    """

    history: Any
    n: jax.Array
    samples: dict[str, jax.Array]
    position: jax.Array
    step_size: jax.Array
    inverse_mass: jax.Array
    key: jax.Array
    refreshes: jax.Array
    diverging: jax.Array
    accept_prob: jax.Array
    num_steps: jax.Array
    eta: jax.Array
    rhat: jax.Array
    ess: jax.Array
    bad_refreshes: jax.Array
    first_bad: jax.Array


def is_mcmc_state(state: Any) -> bool:
    """True if ``state`` is an :class:`MCMCState`."""
    return isinstance(state, MCMCState)


def split_rhat_ess(draws: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Largest split R-hat and smallest ESS over the coordinates of ``draws [chains, samples, D]``.

    Every chain is split in halves (the middle draw of an odd count is dropped), giving m chains of
    n draws. R-hat = sqrt(var+ / W) with W the mean within-chain variance and var+ = (n - 1) / n W
    + B / n (B / n the variance of the chain means); the ESS is m n / tau with
    tau = -1 + 2 sum_k P_k over Geyer's initial positive, monotone sequence of paired
    autocorrelations rho_t = 1 - (W - mean_c acov_c(t)) / var+ (the non-rank-normalized split
    estimators of Stan and ArviZ's ``method="split"`` / ``"mean"``). Frozen chains (W = 0) give
    R-hat = inf and ESS = 0; fewer than 4 draws per chain give NaN (not assessed). Pure JAX.
    """
    c, s, d = draws.shape
    n = s // 2
    if n < 2:
        nan = jnp.full((), jnp.nan, jnp.float32)
        return nan, nan
    x = jnp.concatenate([draws[:, :n], draws[:, s - n:]], axis=0).astype(jnp.float32)  # [m, n, D]
    m = 2 * c
    mean = jnp.mean(x, axis=1)
    centred = x - mean[:, None, :]
    w = jnp.mean(jnp.sum(centred * centred, axis=1) / (n - 1), axis=0)  # [D]
    b_over_n = jnp.var(mean, axis=0, ddof=1) if m > 1 else jnp.zeros_like(w)
    var_plus = (n - 1) / n * w + b_over_n
    rhat = jnp.where(w > 0, jnp.sqrt(var_plus / jnp.where(w > 0, w, 1.0)), jnp.inf)
    spec = jnp.fft.rfft(centred, n=2 * n, axis=1)
    acov = jnp.fft.irfft(spec * jnp.conj(spec), n=2 * n, axis=1)[:, :n] / n  # [m, n, D] (biased)
    rho = 1.0 - (w - jnp.mean(acov, axis=0)) / jnp.where(var_plus > 0, var_plus, 1.0)  # [n, D]
    rho = rho.at[0].set(1.0)
    pairs = rho[: 2 * (n // 2)].reshape(n // 2, 2, d).sum(axis=1)  # P_k = rho_2k + rho_2k+1
    positive = jnp.cumprod(pairs > 0, axis=0).astype(bool)  # initial positive sequence
    monotone = lax.cummin(jnp.where(positive, pairs, jnp.inf), axis=0)
    tau = -1.0 + 2.0 * jnp.sum(jnp.where(positive, monotone, 0.0), axis=0)
    tau = jnp.maximum(tau, 1.0 / jnp.log10(float(m * n)))  # Stan's bound (antithetic chains)
    ess = jnp.where(var_plus > 0, m * n / tau, 0.0)
    return jnp.max(rhat).astype(jnp.float32), jnp.min(ess).astype(jnp.float32)


def refresh_track(policy_state: Any) -> dict[str, jax.Array]:
    """The refresh diagnostics of every :class:`MCMCState` inside a policy state, as tracked values.

    ``mcmc_rhat`` (largest split R-hat of the last refresh), ``mcmc_ess`` (smallest ESS),
    ``mcmc_divergences`` (divergent draws of the last refresh), ``mcmc_bad_refreshes`` (failed
    refreshes so far) and ``mcmc_first_bad_round`` (0: none), combined over the states found
    (max, min, sum, sum, earliest); ``{}`` for a policy without an MCMC-fallback posterior.
    Pure JAX (called inside the simulator's scan).
    """
    states = [s for s in jax.tree.leaves(policy_state, is_leaf=is_mcmc_state) if is_mcmc_state(s)]
    if not states:
        return {}
    first = [jnp.where(s.first_bad > 0, s.first_bad, jnp.iinfo(jnp.int32).max) for s in states]
    earliest = jnp.min(jnp.stack(first))
    return {
        "mcmc_rhat": jnp.max(jnp.stack([s.rhat for s in states])),
        "mcmc_ess": jnp.min(jnp.stack([s.ess for s in states])),
        "mcmc_divergences": sum(jnp.sum(s.diverging, dtype=jnp.int32) for s in states),
        "mcmc_bad_refreshes": sum(s.bad_refreshes for s in states),
        "mcmc_first_bad_round": jnp.where(earliest == jnp.iinfo(jnp.int32).max, 0, earliest),
    }


def warn_failed_refreshes(values: dict[str, Any], policy: str, stacklevel: int = 3) -> bool:
    """Host side, after a simulation: one :class:`RuntimeWarning` if some run's refreshes failed.

    ``values`` are a policy's recorded metrics (``track_mcmc_*`` ``[runs, checkpoints]``, from
    :func:`refresh_track`); the warning names the policy, how many runs had failed refreshes, the
    run whose first failure came earliest, that round, and the worst R-hat / ESS / divergences
    recorded at the checkpoints. Returns True if it warned.
    """
    bad = values.get("track_mcmc_bad_refreshes")
    if bad is None:
        return False
    bad = np.nan_to_num(np.asarray(bad, np.float64)[:, -1])
    runs = np.flatnonzero(bad > 0)
    if runs.size == 0:
        return False
    first = np.asarray(values["track_mcmc_first_bad_round"], np.float64)[:, -1]
    run = int(runs[np.argmin(first[runs])])
    rhat = np.asarray(values["track_mcmc_rhat"], np.float64)[run]
    ess = np.asarray(values["track_mcmc_ess"], np.float64)[run]
    div = np.asarray(values["track_mcmc_divergences"], np.float64)[run]
    worst = (f"worst recorded at the checkpoints of run {run}: R-hat {_worst(rhat, np.max):.3g}, "
             f"ESS {_worst(ess, np.min):.3g}, {int(_worst(div, np.max))} divergent draws")
    warnings.warn(
        f"policy {policy!r}: MCMC refreshes failed the convergence thresholds (NUTSSettings max_rhat, "
        f"min_ess, no divergences) in {runs.size} of {bad.size} run(s); first in run {run} at round "
        f"{int(first[run]):,} ({int(bad[run])} failed refresh(es) in that run; {worst}). Its Thompson draws "
        "may come from a badly mixed posterior: raise num_warmup / num_samples, target_accept, or use "
        "another parametrization (track_mcmc_* in the results show every checkpoint).",
        RuntimeWarning, stacklevel=stacklevel)
    return True


def _worst(a: np.ndarray, fn: Callable) -> float:
    a = a[~np.isnan(a)]
    return float(fn(a)) if a.size else 0.0
