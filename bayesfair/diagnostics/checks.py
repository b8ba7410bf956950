"""Model-checking groups of the diagnostics tree, from the observations a posterior was updated with.

Given a conjugate posterior state and the observations it learned from (``arm`` [N] for a
per-arm family or contexts ``x`` [N, d] for a linear one, and ``reward`` [N]),
:func:`model_check` draws the family's parameters jointly (the family's
:class:`~bayesfair.posteriors.base.ObservationModel`: ``mu`` or ``theta``, plus ``sigma2`` for
the Normal-Inverse-Gamma families) and returns the ArviZ 1.x groups

``log_likelihood``     ``reward`` [chain, draw, obs]: log p(r_i | draw, arm_i or x_i)
``posterior_predictive`` ``reward`` [chain, draw, obs]: a replicated reward per observation and draw
``observed_data``      ``reward`` [obs]
``constant_data``      ``pulled_arm`` [obs] or ``x`` [obs, feature]
``prior``              the same variables drawn from the family's prior (its ``init`` state)
``prior_predictive``   ``reward`` [chain, draw, obs] under the prior draws

The draws are exact and independent, arranged as ``chains`` chains (4 by default,
:func:`~bayesfair.diagnostics.inputs.as_chains`: a valid multi-chain sample, so ArviZ's R-hat is
~1 and its multi-chain functions accept the tree); every group's ``[chain, draw]`` matches.
:func:`prior_posterior_view` is the tree for ArviZ's ``plot_prior_posterior``, which stacks prior
and posterior along a dimension it calls ``group`` and so fails on a tree whose variables have a
``group`` dimension (ours: ``pi_star_group``): the view renames that dimension ``arm_group``.
:func:`observations_from_log` reads one run's observations from a per-round log
(:class:`bayesfair.workflow.logs.RoundLog` or its DataFrame); :func:`fit_from_log` fits a
posterior to every run of a log (e.g. for a policy without one).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core._compile import caches_small_programs
from bayesfair.core._validate import integer_indices
from bayesfair.diagnostics.inputs import EXACT_CHAINS, as_chains, check_chains
from bayesfair.posteriors.base import Outcome, PosteriorFamily, fit_outcomes

__all__ = ["model_check", "observations_from_log", "fit_from_log", "prior_posterior_view", "OBS_DIM",
           "MAX_LOGLIK_ENTRIES"]

OBS_DIM = "obs"
MAX_LOGLIK_ENTRIES = 50_000_000  # draws x observations (400 MB of float64 per group)


# --------------------------------------------------------------------------- observations


def _per_arm(posterior: PosteriorFamily) -> bool:
    return any("arm" in d for d in posterior.dims.values())


def check_observations(posterior: PosteriorFamily, size: int, observations: Any) -> dict[str, np.ndarray]:
    """``{"reward" [N], "arm" [N] or "x" [N, d], "round" [N]}`` checked against the family: arms
    integers in [0, size - 1] (per-arm families), contexts [N, size] (linear families), rewards
    finite (0/1 for a binary family), the same N everywhere."""
    if isinstance(observations, Outcome):
        observations = {k: v for k, v in observations._asdict().items() if v is not None}
    if not isinstance(observations, Mapping):
        raise TypeError("observations must be a mapping with 'reward' and 'arm' (per-arm families) or 'x' "
                        f"(linear families), or an Outcome; got {type(observations).__name__}")
    per_arm = _per_arm(posterior)
    need = "arm" if per_arm else "x"
    allowed = {"reward", need, "round"} | (set() if per_arm else {"arm"})  # a linear family may keep the arms
    bad = set(observations) - allowed
    if bad or "reward" not in observations or need not in observations:
        optional = "'round'" if per_arm else "'round', 'arm'"
        raise ValueError(f"observations for the posterior {posterior.name!r} need the keys 'reward' and {need!r} "
                         f"(optionally {optional}); got {sorted(observations)}")
    reward = np.asarray(observations["reward"], np.float64)
    if reward.ndim != 1 or reward.size == 0:
        raise ValueError(f"observations['reward'] must be a non-empty 1-d array [N], got shape {reward.shape}")
    n = reward.size
    if not np.all(np.isfinite(reward)):
        raise ValueError("observations['reward'] must be finite (no NaN or inf)")
    if getattr(posterior, "rewards", "real") == "binary" and not np.all((reward == 0) | (reward == 1)):
        raise ValueError(f"observations['reward'] must be 0 or 1 for the binary family {posterior.name!r}, "
                         f"got values in [{reward.min():g}, {reward.max():g}]")
    out = {"reward": reward}
    if "arm" in observations:
        arm = np.asarray(observations["arm"])
        if arm.shape != (n,):
            raise ValueError(f"observations['arm'] must have one arm per reward ({n}), got shape {arm.shape}")
        arm = integer_indices("observations['arm']", arm, "arm indices")
        if per_arm and (arm.min() < 0 or arm.max() >= size):
            raise ValueError(f"observations['arm'] must be in [0, {size - 1}], got values in "
                             f"[{arm.min()}, {arm.max()}]")
        out["arm"] = arm.astype(np.int32)
    if not per_arm:
        x = np.asarray(observations["x"], np.float64)
        if x.shape != (n, size):
            raise ValueError(f"observations['x'] must be [N={n}, d={size}], got shape {x.shape}")
        if not np.all(np.isfinite(x)):
            raise ValueError("observations['x'] must be finite (no NaN or inf)")
        out["x"] = x
    rounds = np.asarray(observations.get("round", np.arange(n)))
    if rounds.shape != (n,):
        raise ValueError(f"observations['round'] must have one entry per reward ({n}), got shape {rounds.shape}")
    out["round"] = rounds
    return out


def _outcome(obs: Mapping[str, np.ndarray], dtype: Any = jnp.float32) -> Outcome:
    if "x" not in obs:
        return Outcome(reward=jnp.asarray(obs["reward"], dtype), arm=jnp.asarray(obs["arm"], jnp.int32))
    return Outcome(reward=jnp.asarray(obs["reward"], dtype), x=jnp.asarray(obs["x"], dtype))


#: Relative agreement of a refitted posterior state with the given one (:func:`_check_reproduces`):
#: both are the same float32 updates in the same order, compiled separately (measured: the states of
#: FairX-TS studies with Normal and NIG posteriors, 20,000 rounds, refitted from the round log are
#: bit-identical; a few ulps per update are allowed for).
REFIT_RTOL = 1e-6


def _check_reproduces(posterior: PosteriorFamily, state: Any, size: int, obs: Mapping[str, np.ndarray]) -> None:
    """The observations must be the ones the state learned from: refit from the prior and compare
    every floating leaf of the two states (the sufficient statistics: e.g. a Beta's counts, which
    one observation more or less changes by 1) to :data:`REFIT_RTOL` relative, plus float32
    rounding growing as sqrt(N) over N updates (3.5e-5 at N = 20,000: one observation of an arm
    seen fewer than ~28,000 times is found). Comparing the posterior means to 1e-3 instead would
    let a state that had seen 1-100 observations more than were given pass."""
    refit = fit_outcomes(posterior, size, _outcome(obs))
    n = int(np.asarray(obs["reward"]).size)
    tol = REFIT_RTOL + 2 * float(np.finfo(np.float32).eps) * np.sqrt(n)
    pairs = zip(jax.tree.leaves(refit), jax.tree.leaves(state), strict=True)
    for i, (a, b) in enumerate(pairs):
        a, b = np.asarray(a), np.asarray(b)
        if not np.issubdtype(b.dtype, np.floating) or a.shape != b.shape:
            continue
        a, b = a.astype(np.float64), b.astype(np.float64)
        off = np.abs(a - b) / (1.0 + np.abs(b))
        if not np.all(off <= tol):
            worst = int(np.argmax(off))
            raise ValueError(f"the observations do not reproduce the posterior state: refitting {posterior.name!r} "
                             f"to the {n:,} observations gives {a.ravel()[worst]:.8g} in leaf {i} of the state (entry "
                             f"{worst}), the state has {b.ravel()[worst]:.8g}; pass the observations the state was "
                             "updated with (all of them, in order), or check_observations=False")


def observations_from_log(log: Any, policy: str, run: int = 0, *, contexts: Any = None) -> dict[str, np.ndarray]:
    """One run's observations ``{"arm", "reward", "round"}`` from a per-round log.

    ``log`` is a :class:`bayesfair.workflow.logs.RoundLog` passed to ``simulate(round_log=...)`` or its
    :meth:`~bayesfair.workflow.logs.RoundLog.to_frame` / ``read_log`` DataFrame: the pulled arm and the
    reward the policy observed in every recorded round. The log does not record contexts: for a
    linear family whose arms have fixed features give ``contexts`` [K, d] (then ``x`` =
    ``contexts[arm]`` is added); with contexts drawn per round, pass the observations yourself.
    """
    if hasattr(log, "data") and hasattr(log, "filled"):
        if policy not in log.data:
            raise ValueError(f"policy {policy!r} is not in the log (logged: {list(log.data)})")
        d, t = log.data[policy], int(log.filled[policy])
        runs = d["action"].shape[0]
        if isinstance(run, bool) or not isinstance(run, (int, np.integer)) or not 0 <= run < runs:
            raise ValueError(f"run must be an integer in [0, {runs - 1}], got {run!r}")
        arm = np.asarray(d["action"][run, :t], np.int64)
        reward = np.take_along_axis(np.asarray(d["reward"][run, :t], np.float64), arm[:, None], axis=1)[:, 0]
        out = {"arm": arm, "reward": reward, "round": np.arange(1, t + 1)}
    elif hasattr(log, "columns"):
        need = {"policy", "run", "round", "candidate", "selected", "observed_reward"}
        if not need <= set(log.columns):
            raise ValueError(f"the log DataFrame needs the columns {sorted(need)}; it has {list(log.columns)}")
        names = [str(p) for p in log["policy"].unique()]
        if policy not in names:
            raise ValueError(f"policy {policy!r} is not in the log (logged: {names})")
        rows = log[(log["policy"].astype(str) == policy) & (log["run"] == run) & log["selected"].astype(bool)]
        if rows.empty:
            raise ValueError(f"the log has no round of policy {policy!r}, run {run}")
        rows = rows.sort_values("round")
        out = {"arm": rows["candidate"].to_numpy(np.int64), "reward": rows["observed_reward"].to_numpy(np.float64),
               "round": rows["round"].to_numpy(np.int64)}
    else:
        raise TypeError(f"log must be a bayesfair.workflow.logs.RoundLog or its DataFrame, got {type(log).__name__}")
    if contexts is not None:
        c = np.asarray(contexts, np.float64)
        if c.ndim != 2 or out["arm"].max() >= c.shape[0]:
            raise ValueError(f"contexts must be [K, d] with a row for every logged arm (up to {out['arm'].max()}), "
                             f"got shape {c.shape}")
        out["x"] = c[out["arm"]]
    return out


@caches_small_programs
def fit_from_log(posterior: PosteriorFamily, log: Any, policy: str, *, size: int | None = None,
                 contexts: Any = None) -> dict[str, Any]:
    """``{policy: states}``: ``posterior`` fitted to every run of the log (numpy pytree with a
    leading run axis, like :func:`bayesfair.diagnostics.simulate_with_states`' states), e.g. the
    posterior of what a policy without one (``uniform``) observed. ``size`` is the number of
    arms (per-arm families; default the log's ``n_arms``) or features (linear; default the
    contexts' width)."""
    per_arm = _per_arm(posterior)
    if size is None:
        size = getattr(log, "n_arms", None) if per_arm else (np.shape(contexts)[1] if contexts is not None else None)
        if size is None and per_arm and hasattr(log, "columns"):
            size = int(log["candidate"].max()) + 1
        if size is None:
            raise ValueError("give size= (arms of a per-arm family, features of a linear one)")
    runs = log.runs if hasattr(log, "runs") else int(log["run"].max()) + 1
    states = []
    for r in range(runs):
        obs = observations_from_log(log, policy, r, contexts=None if per_arm else contexts)
        obs = check_observations(posterior, size, obs)
        states.append(jax.device_get(fit_outcomes(posterior, size, _outcome(obs))))
    return {policy: jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *states)}


# --------------------------------------------------------------------------- the groups


_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _vmapped(fn: Callable, make: Callable[[Callable], Callable]) -> Callable:
    """``make(fn)`` (a jitted vmap of ``fn``), built once per function: a new jit wrapper per call
    would recompile every time (seconds for the gamma-based samplers)."""
    cache = _COMPILED.setdefault(fn, {})
    if make not in cache:
        cache[make] = make(fn)
    return cache[make]


def _draw_many(fn: Callable) -> Callable:
    return jax.jit(jax.vmap(fn, in_axes=(0, None)))


def joint_draws(posterior: PosteriorFamily, state: Any, keys: jax.Array, chains: int = 1) -> dict[str, np.ndarray]:
    """Joint draws ``{name: [chains, n_draws / chains, ...]}`` of the likelihood's parameters, one per key."""
    draws = _vmapped(posterior.observation.draw, _draw_many)(keys, state)
    return as_chains(draws, chains)


def _loglik_many(fn: Callable) -> Callable:
    return jax.jit(jax.vmap(jax.vmap(fn, in_axes=(None, 0)), in_axes=(0, None)))


def _replicate_many(fn: Callable) -> Callable:
    return jax.jit(jax.vmap(jax.vmap(fn, in_axes=(0, None, 0)), in_axes=(0, 0, None)))


def _pointwise(posterior: PosteriorFamily, draws: Mapping[str, np.ndarray], obs: Mapping[str, np.ndarray],
               key: jax.Array) -> tuple[np.ndarray, np.ndarray]:
    """log p(r_i | draw) and a replicated reward, ``[chain, draw, obs]`` each, in float64."""
    model = posterior.observation
    n_chain, n_draw = next(iter(draws.values())).shape[:2]
    n_obs = obs["reward"].size
    with jax.enable_x64(True):
        params = {k: jnp.asarray(v.reshape(n_chain * n_draw, *v.shape[2:]), jnp.float64) for k, v in draws.items()}
        outcome = _outcome(obs, jnp.float64)
        loglik = _vmapped(model.log_density, _loglik_many)(params, outcome)
        keys = jax.random.split(key, n_chain * n_draw * n_obs).reshape(n_chain * n_draw, n_obs)
        rep = _vmapped(model.replicate, _replicate_many)(keys, params, outcome)
    shape = (n_chain, n_draw, n_obs)
    return np.asarray(loglik, np.float64).reshape(shape), np.asarray(rep, np.float64).reshape(shape)


@caches_small_programs
def model_check(posterior: PosteriorFamily, state: Any, observations: Any, *, key: jax.Array, n_draws: int,
                chains: int = EXACT_CHAINS,
                check: bool = True) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, Any]]:
    """``(posterior_draws, prior_draws, groups)``: joint draws of the likelihood's parameters
    from ``state`` (keys ``split(key, n_draws)``, so the family's own variables equal
    :func:`~bayesfair.diagnostics.posterior_draws`' with the same key, up to float32 rounding)
    and from the prior, and the Datasets of ``log_likelihood``, ``posterior_predictive``,
    ``prior_predictive``, ``observed_data`` and ``constant_data`` (module docstring)."""
    import xarray as xr

    if getattr(posterior, "observation", None) is None:
        raise ValueError(f"the posterior {posterior.name!r} has no observation model (posterior.observation is "
                         "None), so no log-likelihood: model checking supports beta_bernoulli, normal_known_variance, "
                         "normal_inverse_gamma, linear_known_variance and linear_normal_inverse_gamma")
    mean = np.asarray(posterior.mean(state))
    if mean.ndim != 1:
        raise ValueError(f"state holds several runs (posterior mean has shape {mean.shape}): "
                         "select one with run_state(states, policy, run)")
    size = mean.size
    obs = check_observations(posterior, size, observations)
    n_entries = n_draws * obs["reward"].size
    if n_entries > MAX_LOGLIK_ENTRIES:
        raise ValueError(f"n_draws x observations = {n_draws} x {obs['reward'].size} = {n_entries:,} log-likelihood "
                         f"entries, more than {MAX_LOGLIK_ENTRIES:,}: use fewer draws (n_draws=)")
    if check:
        _check_reproduces(posterior, state, size, obs)
    chains = check_chains(n_draws, chains)
    post = joint_draws(posterior, state, jax.random.split(key, n_draws), chains)
    prior_state = posterior.init(size)
    prior = joint_draws(posterior, prior_state, jax.random.split(jax.random.fold_in(key, 1), n_draws), chains)
    loglik, post_rep = _pointwise(posterior, post, obs, jax.random.fold_in(key, 2))
    _, prior_rep = _pointwise(posterior, prior, obs, jax.random.fold_in(key, 3))
    sample = {"chain": np.arange(chains), "draw": np.arange(n_draws // chains)}
    obs_coord = {OBS_DIM: obs["round"]}
    dims3 = ("chain", "draw", OBS_DIM)

    def sampled(values: np.ndarray, what: str) -> xr.Dataset:
        ds = xr.Dataset({"reward": (dims3, values)}, coords={**sample, **obs_coord})
        ds.attrs.update(sample_dims=["chain", "draw"], definition=what)
        return ds

    constant: dict[str, Any] = {}
    if "arm" in obs:
        constant["pulled_arm"] = ((OBS_DIM,), obs["arm"])
    if "x" in obs:
        constant["x"] = ((OBS_DIM, "feature"), obs["x"])
    groups = {
        "log_likelihood": sampled(loglik, "log p(reward_i | posterior draw, arm_i or x_i), per observation"),
        "posterior_predictive": sampled(post_rep, "a replicated reward per observation under every posterior draw"),
        "prior_predictive": sampled(prior_rep, "a replicated reward per observation under every prior draw"),
        "observed_data": xr.Dataset({"reward": ((OBS_DIM,), obs["reward"])}, coords=obs_coord),
        "constant_data": xr.Dataset(constant, coords=obs_coord),
    }
    return post, prior, groups


def prior_posterior_view(tree: Any, var_names: Any = None, dim: str = "arm_group"):
    """The ``prior`` and ``posterior`` groups of ``tree`` (optionally only ``var_names``) with the
    dimension ``group`` renamed ``dim``, for ``arviz.plot_prior_posterior`` (module docstring)."""
    import xarray as xr

    if not hasattr(tree, "children") or not {"prior", "posterior"} <= set(tree.children):
        raise ValueError("prior_posterior_view needs a tree with prior and posterior groups "
                         "(from_posterior(..., observations=...))")
    out = {}
    for name in ("prior", "posterior"):
        ds = tree[name].dataset
        if var_names is not None:
            names = [var_names] if isinstance(var_names, str) else list(var_names)
            missing = [v for v in names if v not in ds]
            if missing:
                raise ValueError(f"var_names {missing} are not {name} variables ({list(ds.data_vars)})")
            ds = ds[names]
        out[name] = ds.rename({"group": dim}) if "group" in ds.dims else ds
    return xr.DataTree.from_dict(out)
