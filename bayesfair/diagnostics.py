"""Posterior merit and exposure diagnostics as an ArviZ DataTree (the only module importing arviz).

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

R-hat and ESS are omitted for exact draws (conjugate samplers, or the MCMC fallback's prior draws
before its first refresh): the draws are independent, so R-hat is 1 and the ESS is the number of
draws by construction. ``tree.attrs`` records the source (``"exact"``, ``"prior"``, ``"mcmc"``),
the merit, the posterior family and, with results, the policy, run and round.

:func:`summary` is ArviZ's summary of the posterior group plus the exposure columns. The plots
are in :mod:`bayesfair.plotting` (``plot_merit_exposure``, ``plot_exposure_over_time``,
``plot_psi_forest``).

Getting a policy's posterior out of a simulation: :func:`simulate_with_states` runs
:func:`bayesfair.simulate` with a state-capturing ``checkpointer`` hook (the simulator hands its
run state to the hook after every chunk), so it needs no change to the simulator and no replay;
:func:`run_state` picks one run and :func:`posterior_state` unwraps the bi-level policies' state.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair._validate import positive_int
from bayesfair.groups import validate_exposure_floors
from bayesfair.merit import Merit, fair_policy, group_fair_policy, resolve_merit
from bayesfair.posteriors.base import Posterior
from bayesfair.posteriors.linear import LinearPosterior
from bayesfair.posteriors.mcmc import is_mcmc_state

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
    "ARM_VARS",
    "GROUP_VARS",
]

#: Posterior variables indexed by arm / group (default dims of named draws).
ARM_VARS = ("mu", "merit", "pi_star", "pi_star_within", "logit", "z")
GROUP_VARS = ("pi_star_group", "pi_star_bilevel", "group_loc", "group_scale")
_FEATURE_VARS = ("theta",)
_LINKS = ("identity", "logistic")
_COMPARE = ("exposure", "pulls")
_SUMMARY_SHARES = {  # posterior variable -> (observed share, under-exposure probability)
    "pi_star": ("share_arm", "p_arm"),
    "pi_star_group": ("share_group", "p_group"),
    "pi_star_within": ("share_within", "p_within"),
    "pi_star_bilevel": ("share_group", "p_bilevel"),
}


# --------------------------------------------------------------------------- inputs


def _key(key: Any) -> jax.Array:
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        if key < 0:
            raise ValueError(f"key must be a non-negative int seed or a jax key, got {key}")
        return jax.random.key(int(key))
    if isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    raise TypeError(f"key must be a jax.random.key(...) or a non-negative int seed, got {key!r}")


def _float_array(name: str, value: Any) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"draws[{name!r}] must be an array of real numbers, got {type(value).__name__}") from None
    if arr.size == 0:
        raise ValueError(f"draws[{name!r}] is empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"draws[{name!r}] must be finite (no NaN or inf)")
    return arr


def _normalize_draws(draws: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Every array as ``[chain, draw, ...]``; ``mu``/``theta`` may be given as ``[draw, n]`` (one chain)."""
    if not isinstance(draws, Mapping) or not draws:
        raise TypeError("draws must be a non-empty mapping of variable name -> array [chain, draw, ...]")
    arrays = {str(k): _float_array(str(k), v) for k, v in draws.items()}
    ref = next((n for n in ("mu", "theta") if n in arrays), None)
    if ref is not None:
        nd = arrays[ref].ndim
        if nd not in (2, 3):
            raise ValueError(f"draws[{ref!r}] must be [chain, draw, n] or [draw, n], got shape {arrays[ref].shape}")
        sample_ndim = nd - 1
    else:
        sample_ndim = 2
    if sample_ndim == 1:
        arrays = {k: v[None] for k, v in arrays.items()}
    lead = arrays[ref].shape[:2] if ref else next(iter(arrays.values())).shape[:2]
    for k, v in arrays.items():
        if v.ndim < 2 or v.shape[:2] != lead:
            raise ValueError(f"draws[{k!r}] has shape {v.shape}; every variable needs the same leading "
                             f"[chain, draw] = {list(lead)} shape")
    return arrays


def _labels_from(group_of_arm: Any, n_arms: int) -> np.ndarray:
    arr = np.asarray(group_of_arm)
    if arr.ndim != 1 or arr.size != n_arms:
        raise ValueError(f"group_of_arm must have one group per arm ({n_arms}), got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise TypeError(f"group_of_arm must hold integer group indices, got dtype {arr.dtype}")
    if arr.min() < 0:
        raise ValueError(f"group_of_arm must be >= 0, got {arr.min()}")
    m = int(arr.max()) + 1
    empty = np.flatnonzero(np.bincount(arr, minlength=m) == 0)
    if empty.size:
        raise ValueError(f"every group 0..{m - 1} must hold an arm; group(s) {empty.tolist()} are empty")
    return arr.astype(np.int64)


def _names(name: str, given: Any, n: int, default: Sequence[Any]) -> list[Any]:
    if given is None:
        return list(default)
    out = list(given)
    if len(out) != n:
        raise ValueError(f"{name} must have {n} entries, got {len(out)}")
    if len(set(map(str, out))) != n:
        raise ValueError(f"{name} must be distinct, got {out}")
    return out


def _results_selection(results: Any, policy: str | None, run: int, checkpoint: int | None):
    """``(ds_policy_run, policy_name, run, t)`` for one policy, run and checkpoint of a results Dataset."""
    for var in ("exposure", "pulls", "group_exposure", "group_pulls"):
        if var not in results:
            raise ValueError(f"results must be a bayesfair.simulate Dataset; it has no variable {var!r}")
    names = [str(p) for p in results["policy"].values]
    if policy is None:
        if len(names) != 1:
            raise ValueError(f"results hold several policies {names}: choose one with policy=")
        policy = names[0]
    if policy not in names:
        raise ValueError(f"policy {policy!r} is not in the results (policies: {names})")
    runs = results.sizes["run"]
    if isinstance(run, bool) or not isinstance(run, (int, np.integer)) or not -runs <= run < runs:
        raise ValueError(f"run must be an integer in [0, {runs - 1}], got {run!r}")
    run = int(run) % runs
    ckpts = results["checkpoint"].values
    if checkpoint is None:
        idx = ckpts.size - 1
    else:
        matches = np.flatnonzero(ckpts == checkpoint)
        if matches.size == 0:
            raise ValueError(f"checkpoint {checkpoint} is not a recorded round (last: {int(ckpts[-1])})")
        idx = int(matches[0])
    t = int(ckpts[idx])
    sel = results.sel(policy=policy).isel(run=run, checkpoint=idx)
    return sel, policy, run, t


def observed_exposure(results: Any, *, policy: str | None = None, run: int = 0,
                      checkpoint: int | None = None) -> dict[str, Any]:
    """Observed shares of one policy and run after round t (the last checkpoint by default).

    Returns a dict of numpy arrays (``exposure_share`` and ``pull_share`` [arm],
    ``group_exposure_share`` and ``group_pull_share`` [group], ``true_mu``/``true_pi_star`` [arm]
    when present) and the metadata ``policy``, ``run``, ``round``, ``group_of_arm``,
    ``arm_names``, ``group_names`` and ``group_floor`` (or None).
    """
    sel, policy, run, t = _results_selection(results, policy, run, checkpoint)
    out: dict[str, Any] = {
        "exposure_share": np.asarray(sel["exposure"].values, np.float64) / t,
        "pull_share": np.asarray(sel["pulls"].values, np.float64) / t,
        "group_exposure_share": np.asarray(sel["group_exposure"].values, np.float64) / t,
        "group_pull_share": np.asarray(sel["group_pulls"].values, np.float64) / t,
        "policy": policy, "run": run, "round": t,
        "arm_names": list(results["arm"].values), "group_names": list(results["group"].values),
        "group_of_arm": np.asarray(results["arm_group"].values) if "arm_group" in results.coords else None,
        "group_floor": np.asarray(results["group_floor"].values) if "group_floor" in results else None,
    }
    if "mean" in results:
        out["true_mu"] = np.asarray(results["mean"].isel(run=run).values, np.float64)
    if "pi_star" in results:
        out["true_pi_star"] = np.asarray(results["pi_star"].isel(run=run).values, np.float64)
    return out


# --------------------------------------------------------------------------- derived quantities


def _with_x64(fn: Callable, *arrays: np.ndarray) -> np.ndarray:
    with jax.enable_x64(True):
        return np.asarray(fn(*(jnp.asarray(a, jnp.float64) for a in arrays)), np.float64)


def _fair_quantities(merit: Merit, mu: np.ndarray, member: np.ndarray, floors: np.ndarray | None):
    """merit, pi*, its group shares, the within-group policy and (with floors) the bi-level group shares."""
    flat = mu.reshape(-1, mu.shape[-1])
    merit_v = _with_x64(lambda x: merit.fn(x), flat)
    pi = _with_x64(lambda x: fair_policy(merit, x), flat)
    within = _with_x64(lambda x, mem: jax.vmap(lambda row: group_fair_policy(merit, row, mem))(x), flat, member)
    lead = mu.shape[:-1]
    out = {
        "merit": merit_v.reshape(mu.shape),
        "pi_star": pi.reshape(mu.shape),
        "pi_star_group": (pi @ member).reshape(*lead, member.shape[1]),
        "pi_star_within": within.reshape(mu.shape),
    }
    if floors is not None:
        value = (within * flat) @ member  # [n, m]: within-group fair value of every group
        best = np.isclose(value, value.max(axis=1, keepdims=True), rtol=1e-12, atol=0.0)
        share = best / best.sum(axis=1, keepdims=True)
        bilevel = floors[None, :] + (1.0 - floors.sum()) * share
        out["pi_star_bilevel"] = bilevel.reshape(*lead, member.shape[1])
    return out


def _dims_for(name: str, arr: np.ndarray, dims: Mapping[str, Sequence[str]]) -> list[str]:
    event = arr.ndim - 2
    if name in dims:
        d = list(dims[name])
    elif name in ARM_VARS:
        d = ["arm"]
    elif name in GROUP_VARS:
        d = ["group"]
    elif name in _FEATURE_VARS:
        d = ["feature"]
    elif name == "psi":
        d = ["group", "feature"][:event]
    elif event == 0:
        d = []
    else:
        raise ValueError(f"draws[{name!r}] has event shape {arr.shape[2:]}: give its dimension names with "
                         f"dims={{{name!r}: [...]}} (e.g. 'arm', 'group', 'feature')")
    if len(d) != event:
        raise ValueError(f"draws[{name!r}] has event shape {arr.shape[2:]} but dims {d}")
    return d


# --------------------------------------------------------------------------- the tree


def posterior_tree(
    draws: Mapping[str, Any],
    *,
    merit: Merit | Callable | None = None,
    group_of_arm: Any = None,
    exposure: Any = None,
    policy: str | None = None,
    run: int = 0,
    checkpoint: int | None = None,
    group_floors: Any = None,
    compare: str = "exposure",
    contexts: Any = None,
    link: str = "identity",
    sample_stats: Mapping[str, Any] | None = None,
    dims: Mapping[str, Sequence[str]] | None = None,
    arm_names: Sequence[Any] | None = None,
    group_names: Sequence[Any] | None = None,
    feature_names: Sequence[Any] | None = None,
    source: str = "draws",
    attrs: Mapping[str, Any] | None = None,
):
    """Build the diagnostics DataTree (groups and variables: module docstring).

    Parameters
    ----------
    draws : mapping name -> array
        Posterior draws ``[chain, draw, ...]``: ``mu`` ``[.., K]`` (arm means), or ``theta``
        ``[.., d]`` with ``contexts``; optionally ``psi`` ``[.., m]`` or ``[.., m, d]`` and other
        sites (named in ``dims`` unless their name is one of :data:`ARM_VARS`/:data:`GROUP_VARS`).
        ``mu``/``theta`` may be ``[draw, n]`` (one chain).
    merit : Merit or callable
        Merit f; needed for ``merit`` and the pi* variables (skipped without ``mu`` or merit).
    group_of_arm : int array [K], optional
        Group of every arm; default from the results (``arm_group``), else one group.
    exposure : xarray.Dataset or mapping, optional
        A :func:`bayesfair.simulate` Dataset (``policy``, ``run``, ``checkpoint`` select the
        trajectory) or a mapping with some of ``exposure_share``, ``pull_share`` [K],
        ``group_exposure_share``, ``group_pull_share`` [m].
    policy : str, optional
        The policy of the results (needed when they hold several).
    run : int
        The run of the results (the posterior should be that run's).
    checkpoint : int, optional
        A recorded round of the results (default the last, T).
    group_floors : array-like [m], optional
        Exposure floors beta (bi-level); default the results' ``group_floor`` if recorded.
    compare : {"exposure", "pulls"}
        Which observed share the under-exposure probabilities compare with.
    contexts : array-like [K, d], optional
        With ``theta`` draws: mu_a = link(contexts_a . theta) (e.g. one round's contexts, or each
        arm's average context).
    link : {"identity", "logistic"}
        Link from the linear predictor to the mean reward.
    sample_stats : mapping, optional
        MCMC statistics ``[chain, draw]`` (``diverging``, ``acceptance_rate``, ``n_steps``,
        ``step_size``); when given, R-hat and ESS are added.
    dims : mapping, optional
        Dimension names of extra draws.
    arm_names, group_names, feature_names : sequence, optional
        Coordinates (defaults: the results' coordinates, else 0..n-1).
    source : str
        Recorded in ``tree.attrs["source"]``.
    attrs : mapping, optional
        Extra root attributes (JSON-friendly values).

    Returns
    -------
    xarray.DataTree
    """
    import arviz as az
    import xarray as xr

    if compare not in _COMPARE:
        raise ValueError(f"compare must be one of {_COMPARE}, got {compare!r}")
    if link not in _LINKS:
        raise ValueError(f"link must be one of {_LINKS}, got {link!r}")
    dims = dict(dims or {})
    arrays = _normalize_draws(draws)
    if merit is not None:
        merit = resolve_merit(merit)

    # observed shares (from a results Dataset or given directly)
    obs: dict[str, Any] = {}
    if exposure is not None:
        if hasattr(exposure, "data_vars"):
            obs = observed_exposure(exposure, policy=policy, run=run, checkpoint=checkpoint)
        elif isinstance(exposure, Mapping):
            allowed = {"exposure_share", "pull_share", "group_exposure_share", "group_pull_share"}
            bad = set(exposure) - allowed
            if bad:
                raise ValueError(f"exposure mapping has unknown keys {sorted(bad)}; allowed: {sorted(allowed)}")
            obs = {k: _float_array(k, v).reshape(-1) for k, v in exposure.items()}
        else:
            raise TypeError(f"exposure must be a bayesfair.simulate results Dataset or a mapping, got "
                            f"{type(exposure).__name__}")

    # mu from theta and contexts
    if "theta" in arrays and contexts is not None:
        if "mu" in arrays:
            raise ValueError("give either mu draws or theta draws with contexts, not both")
        x = _float_array("contexts", contexts)
        if x.ndim != 2 or x.shape[1] != arrays["theta"].shape[-1]:
            raise ValueError(f"contexts must be [K, d={arrays['theta'].shape[-1]}], got shape {x.shape}")
        lin = arrays["theta"] @ x.T
        arrays["mu"] = 1.0 / (1.0 + np.exp(-lin)) if link == "logistic" else lin
    elif contexts is not None:
        raise ValueError("contexts need theta draws")

    # sizes and coordinates
    k = arrays["mu"].shape[-1] if "mu" in arrays else None
    if k is None and obs.get("exposure_share") is not None:
        k = obs["exposure_share"].size
    labels = None
    if group_of_arm is not None:
        labels = _labels_from(group_of_arm, k if k is not None else np.asarray(group_of_arm).size)
    elif obs.get("group_of_arm") is not None:
        labels = _labels_from(obs["group_of_arm"], obs["group_of_arm"].size)
    elif k is not None:
        labels = np.zeros(k, np.int64)
    if k is None and labels is not None:
        k = labels.size
    m = int(labels.max()) + 1 if labels is not None else None
    if k is not None and labels is not None and labels.size != k:
        raise ValueError(f"group_of_arm has {labels.size} arms but the draws have {k}")
    for name in ("exposure_share", "pull_share"):
        if name in obs and obs[name].size != k:
            raise ValueError(f"{name} has {obs[name].size} arms but the draws have {k}")
    for name in ("group_exposure_share", "group_pull_share"):
        if name in obs and obs[name].size != m:
            raise ValueError(f"{name} has {obs[name].size} groups but group_of_arm defines {m}")
    coords: dict[str, Any] = {}
    if k is not None:
        coords["arm"] = _names("arm_names", arm_names, k, obs.get("arm_names") or range(k))
    if m is not None:
        coords["group"] = _names("group_names", group_names, m, obs.get("group_names") or range(m))
    d = arrays["theta"].shape[-1] if "theta" in arrays else None
    if d is None and "psi" in arrays and arrays["psi"].ndim == 4:
        d = arrays["psi"].shape[-1]
    if d is not None:
        coords["feature"] = _names("feature_names", feature_names, d, range(d))

    floors = group_floors if group_floors is not None else obs.get("group_floor")
    if floors is not None:
        if m is None:
            raise ValueError("group_floors need the arms' groups (group_of_arm)")
        try:
            floors = validate_exposure_floors(np.asarray(floors, np.float64).reshape(-1), m)
        except ValueError as exc:
            raise ValueError(f"group_floors: {exc}") from None
        except TypeError:
            raise TypeError(f"group_floors must be a sequence of floats, got {group_floors!r}") from None

    # posterior variables
    member = np.eye(m)[labels] if labels is not None else None
    if "mu" in arrays and merit is not None:
        for name, value in _fair_quantities(merit, arrays["mu"], member, floors).items():
            if name in arrays:
                raise ValueError(f"draws must not contain {name!r}: it is computed from mu and the merit")
            arrays[name] = value
    order = [n for n in ("mu", "merit", "pi_star", "pi_star_group", "pi_star_within", "pi_star_bilevel",
                         "theta", "psi") if n in arrays]
    order += sorted(n for n in arrays if n not in order)
    post_dims = {n: _dims_for(n, arrays[n], dims) for n in order}
    given = {"arm": arm_names, "group": group_names, "feature": feature_names}
    for n in order:
        for dim, size in zip(post_dims[n], arrays[n].shape[2:], strict=True):
            if dim in coords and len(coords[dim]) != size:
                raise ValueError(f"draws[{n!r}] has {size} entries along {dim!r}, expected {len(coords[dim])}")
            if dim not in coords:
                coords[dim] = _names(f"{dim}_names", given.get(dim), size, range(size))
    n_chain, n_draw = arrays[order[0]].shape[:2]
    base = {"chain": np.arange(n_chain), "draw": np.arange(n_draw)}
    post = xr.Dataset({n: (("chain", "draw", *post_dims[n]), arrays[n]) for n in order},
                      coords={**base, **{c: v for c, v in coords.items() if any(c in post_dims[n] for n in order)}})
    post.attrs["sample_dims"] = ["chain", "draw"]
    groups: dict[str, Any] = {"posterior": post}

    # observed shares and under-exposure probabilities
    if obs:
        ov: dict[str, Any] = {}
        arm_keys = ("exposure_share", "pull_share", "true_mu", "true_pi_star")
        for name in arm_keys:
            if name in obs:
                ov[name] = (("arm",), obs[name])
        for name in ("group_exposure_share", "group_pull_share"):
            if name in obs:
                ov[name] = (("group",), obs[name])
        for kind in ("exposure", "pull"):
            a, g = obs.get(f"{kind}_share"), obs.get(f"group_{kind}_share")
            if a is not None and g is not None:
                denom = g[labels]
                ov[f"within_{kind}_share"] = (("arm",), np.where(denom > 0, a / np.where(denom > 0, denom, 1), 0.0))
        if floors is not None:
            ov["group_floor"] = (("group",), floors)
            if "group_pull_share" in obs:
                ov["floor_margin"] = (("group",), obs["group_pull_share"] - floors)
        ods = xr.Dataset(ov, coords={c: coords[c] for c in ("arm", "group") if c in coords})
        ods.attrs.update({key: obs[key] for key in ("policy", "run", "round") if key in obs})
        groups["observed_exposure"] = ods

        kind = "exposure" if compare == "exposure" else "pull"
        shares = {
            "share_arm": obs.get(f"{kind}_share"),
            "share_group": obs.get(f"group_{kind}_share"),
            "share_within": ov[f"within_{kind}_share"][1] if f"within_{kind}_share" in ov else None,
        }
        uv: dict[str, Any] = {}
        for var, (share_key, p_name) in _SUMMARY_SHARES.items():
            share = shares[share_key]
            if var in arrays and share is not None:
                dim = post_dims[var][0]
                uv[p_name] = ((dim,), np.mean(arrays[var] > share, axis=(0, 1)))
        if uv:
            uds = xr.Dataset(uv, coords={c: coords[c] for c in ("arm", "group") if c in coords})
            uds.attrs["compare"] = compare
            uds.attrs["definition"] = "posterior probability that the fair share exceeds the observed share"
            groups["under_exposure"] = uds

    # MCMC statistics and convergence diagnostics
    if sample_stats is not None:
        ss: dict[str, Any] = {}
        for name, value in sample_stats.items():
            arr = np.asarray(value)
            if arr.shape == (n_chain,):
                arr = np.broadcast_to(arr[:, None], (n_chain, n_draw))
            if arr.shape != (n_chain, n_draw):
                raise ValueError(f"sample_stats[{name!r}] must be [chain, draw] = {[n_chain, n_draw]}, "
                                 f"got shape {arr.shape}")
            ss[name] = (("chain", "draw"), arr)
        if n_draw >= 4:
            tree_post = az.from_dict({"posterior": {n: arrays[n] for n in order}}, dims=post_dims,
                                     coords={c: v for c, v in coords.items()})
            with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
                # constant variables (e.g. pi_star_bilevel when one group always wins) give NaN
                warnings.simplefilter("ignore", RuntimeWarning)
                diag = {"r_hat": az.rhat(tree_post), "ess_bulk": az.ess(tree_post, method="bulk"),
                        "ess_tail": az.ess(tree_post, method="tail")}
            for stat, res in diag.items():
                res_ds = res.to_dataset() if hasattr(res, "to_dataset") else res
                for n in order:
                    ss[f"{stat}_{n}"] = (tuple(post_dims[n]), np.asarray(res_ds[n].values, np.float64))
        ssd = xr.Dataset(ss, coords={**base, **{c: v for c, v in coords.items()
                                                if any(c in post_dims[n] for n in order)}})
        ssd.attrs["sample_dims"] = ["chain", "draw"]
        groups["sample_stats"] = ssd

    tree = xr.DataTree.from_dict(groups)
    root = {"source": source, "compare": compare}
    if merit is not None:
        root["merit"] = str(merit.describe())
    if obs:
        root.update({key: obs[key] for key in ("policy", "run", "round") if key in obs})
    if floors is not None:
        root["group_floors"] = floors.tolist()
    root.update(dict(attrs or {}))
    tree.attrs = root
    return tree


# --------------------------------------------------------------------------- adapters


def posterior_state(policy_state: Any) -> Any:
    """The posterior state inside a policy state: ``state.stats`` for the bi-level policies
    (:class:`~bayesfair.policies.bilevel.BilevelState`), the state itself otherwise."""
    if hasattr(policy_state, "stats") and hasattr(policy_state, "member"):
        return policy_state.stats
    return policy_state


def _group_of_arm_from_state(policy_state: Any) -> np.ndarray | None:
    if hasattr(policy_state, "stats") and hasattr(policy_state, "member"):
        member = np.asarray(policy_state.member)
        if member.ndim == 2:
            return np.argmax(member, axis=1)
    return None


def posterior_draws(posterior: Posterior | LinearPosterior, state: Any, *, key: Any = 0,
                    n_draws: int = 1000) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None, str]:
    """Draws of one run's posterior: ``(draws, sample_stats, source)``.

    - MCMC fallback state after at least one refresh: every stored sample ``[chain, draw, ...]``
      of every site, with the per-draw NUTS statistics; source ``"mcmc"``.
    - MCMC fallback state before its first refresh: its exact prior draws; source ``"prior"``.
    - Conjugate state: ``n_draws`` independent exact draws of ``mu`` (``theta`` for linear
      posteriors), as one chain; source ``"exact"``.

    ``state`` must be a single run's posterior state (see :func:`run_state`,
    :func:`posterior_state`).
    """
    if not isinstance(posterior, (Posterior, LinearPosterior)):
        raise TypeError(f"posterior must be a bayesfair Posterior or LinearPosterior, got {posterior!r}")
    state = posterior_state(state)
    if is_mcmc_state(state):
        samples = {k: np.asarray(v, np.float64) for k, v in state.samples.items()}
        site = "theta" if "theta" in samples else "mu"
        if samples[site].ndim != 3:
            raise ValueError(f"state holds several runs (samples[{site!r}] has shape {samples[site].shape}): "
                             "select one with run_state(states, policy, run)")
        if int(np.asarray(state.refreshes)) == 0:
            return samples, None, "prior"
        stats = {
            "diverging": np.asarray(state.diverging, bool),
            "acceptance_rate": np.asarray(state.accept_prob, np.float64),
            "n_steps": np.asarray(state.num_steps, np.int64),
            "step_size": np.asarray(state.step_size, np.float64),
        }
        return samples, stats, "mcmc"
    n_draws = positive_int("n_draws", n_draws)
    keys = jax.random.split(_key(key), n_draws)
    try:
        mean = np.asarray(posterior.mean(state))
    except Exception as exc:  # a state of another family
        raise TypeError(f"state does not belong to the posterior {posterior.name!r}: {exc}") from exc
    if mean.ndim != 1:
        raise ValueError(f"state holds several runs (posterior mean has shape {mean.shape}): select one with "
                         "run_state(states, policy, run)")
    x = np.asarray(jax.jit(jax.vmap(posterior.sample, in_axes=(0, None)))(keys, state), np.float64)
    name = "theta" if isinstance(posterior, LinearPosterior) else "mu"
    return {name: x[None]}, None, "exact"


def from_posterior(posterior: Posterior | LinearPosterior, state: Any, *, merit: Merit | Callable | None = None,
                   key: Any = 0, n_draws: int = 1000, **kwargs: Any):
    """:func:`posterior_tree` of one run's posterior state (conjugate or MCMC fallback).

    ``state`` may be a policy state of a bi-level policy (its ``stats`` and group membership are
    used). Without ``group_of_arm``, the groups come from the policy state's membership or the
    posterior's ``params["group_of_arm"]`` (hierarchical model), else from the results. Other
    keyword arguments go to :func:`posterior_tree`.
    """
    if kwargs.get("group_of_arm") is None:
        labels = _group_of_arm_from_state(state)
        if labels is None and "group_of_arm" in getattr(posterior, "params", {}):
            labels = np.asarray(posterior.params["group_of_arm"])  # e.g. the hierarchical model's groups
        if labels is not None:
            kwargs["group_of_arm"] = labels
    draws, stats, source = posterior_draws(posterior, state, key=key, n_draws=n_draws)
    if source == "mcmc" or source == "prior":
        st = posterior_state(state)
        extra = {"posterior": posterior.name, "observations": int(np.asarray(st.n)),
                 "refreshes": int(np.asarray(st.refreshes))}
    else:
        extra = {"posterior": posterior.name}
    extra.update(kwargs.pop("attrs", None) or {})
    if stats is not None:
        kwargs["sample_stats"] = stats
    return posterior_tree(draws, merit=merit, source=source, attrs=extra, **kwargs)


def run_state(states: Mapping[str, Any], policy: str, run: int = 0) -> Any:
    """One run's state from :func:`simulate_with_states`'s ``states`` (leading run axis removed)."""
    if not isinstance(states, Mapping) or policy not in states:
        have = list(states) if isinstance(states, Mapping) else type(states).__name__
        raise ValueError(f"policy {policy!r} is not in the states (have: {have})")
    leaves = jax.tree.leaves(states[policy])
    runs = int(np.shape(leaves[0])[0]) if leaves else 0
    if isinstance(run, bool) or not isinstance(run, (int, np.integer)) or not -runs <= run < runs:
        raise ValueError(f"run must be an integer in [0, {runs - 1}], got {run!r}")
    return jax.tree.map(lambda x: np.asarray(x)[int(run)], states[policy])


def from_group_bias_fit(fit: Any, data: Any, *, attrs: Mapping[str, Any] | None = None):
    """:func:`posterior_tree` of a NUTS fit of the hierarchical group-bias model.

    ``fit`` is a :class:`~bayesfair.posteriors.group_bias.NutsFit` and ``data`` the
    :class:`~bayesfair.posteriors.group_bias.GroupBiasData` it was fitted to (biased-feedback
    paper, Section 3.1, Eq. 2: y = x . (beta_i + psi_g(i)) + noise). The posterior group holds
    ``psi`` [group, feature] for the **non-reference** groups only (the reference group's psi is 0
    by construction, so its R-hat would be undefined; ``tree.attrs["reference_group"]`` names
    it), ``beta`` [arm, feature] (true coefficients), ``beta_bar`` [feature] and whichever of
    ``tau``, ``s``, ``sigma`` were sampled. ``sample_stats`` holds ``diverging`` and, with at
    least 4 draws, ArviZ's R-hat and bulk/tail ESS of every variable. ``attrs`` are added to the
    root attributes (JSON-friendly values).
    """
    import json

    from bayesfair.posteriors.group_bias import GroupBiasData, NutsFit

    if not isinstance(fit, NutsFit):
        raise TypeError(f"fit must be a NutsFit (bayesfair.posteriors.group_bias.fit_nuts), got {type(fit).__name__}")
    if not isinstance(data, GroupBiasData):
        raise TypeError(f"data must be GroupBiasData (group_bias_data), got {type(data).__name__}")
    n, m, d = int(data.group_of_arm.size), int(data.group_of_arm.max()) + 1, int(data.X.shape[1])
    psi_all = np.asarray(fit.samples["psi_all"])
    if psi_all.shape[2:] != (m, d) or np.asarray(fit.samples["beta"]).shape[2:] != (n, d):
        raise ValueError(f"fit and data disagree: psi_all has shape {psi_all.shape[2:]} and beta "
                         f"{np.asarray(fit.samples['beta']).shape[2:]}, the data have m={m} groups, n={n} arms, d={d}")
    others = [g for g in range(m) if g != data.reference]
    group_names = list(data.group_names) if data.group_names is not None else [str(g) for g in range(m)]
    draws = {"psi": psi_all[:, :, others, :], "beta": fit.samples["beta"], "beta_bar": fit.samples["beta_bar"]}
    draws.update({k: fit.samples[k] for k in ("tau", "s", "sigma") if k in fit.samples})
    root = {"model": "bayesfair.posteriors.group_bias.group_bias_model",
            "reference_group": group_names[data.reference], "nuts_config": json.dumps(fit.config),
            "nuts_seconds": float(fit.seconds), "rows": int(data.y.size)}
    root.update(dict(attrs or {}))
    return posterior_tree(draws, dims={"psi": ["group", "feature"], "beta": ["arm", "feature"],
                                       "beta_bar": ["feature"]},
                          sample_stats={"diverging": np.asarray(fit.diverging, bool)},
                          arm_names=data.arm_names, group_names=[group_names[g] for g in others],
                          feature_names=data.feature_names, source="mcmc", attrs=root)


class _StateCapture:
    """A ``simulate(checkpointer=...)`` hook that keeps each policy's latest run state (no files)."""

    def __init__(self) -> None:
        self.states: dict[str, Any] = {}

    def restore(self, name: str, carry: Any, values: Any, totals: Any) -> None:
        return None

    def chunk_done(self, name: str, carry: Any, *args: Any, **kwargs: Any) -> None:
        self.states[name] = carry.policy_state


def _to_host(x: Any) -> np.ndarray:
    if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    return np.asarray(jax.device_get(x))


def simulate_with_states(key: Any, env: Any, policies: Mapping[str, Any], horizon: int, runs: int,
                         **kwargs: Any) -> tuple[Any, dict[str, Any]]:
    """:func:`bayesfair.simulate`, also returning every policy's final state.

    Returns ``(results, states)``: ``states[name]`` is the policy's state after round T as a
    pytree of numpy arrays with a leading run axis (PRNG keys as raw key data). The states are
    taken from the simulator's ``checkpointer`` hook, called after every chunk with the run
    state; the simulation itself is unchanged (same numbers as ``simulate``). A ``checkpointer``
    of your own cannot be combined with it.
    """
    import inspect

    from bayesfair.simulate import simulate

    if "checkpointer" in kwargs:
        raise ValueError("simulate_with_states uses the checkpointer hook itself; do not pass one")
    if "checkpointer" not in inspect.signature(simulate).parameters:
        raise RuntimeError("this bayesfair.simulate has no checkpointer hook to take the final states from")
    capture = _StateCapture()
    results = simulate(key, env, policies, horizon, runs, checkpointer=capture, **kwargs)
    states = {name: jax.tree.map(_to_host, capture.states[name]) for name in policies}
    return results, states


def from_simulation(results: Any, states: Mapping[str, Any], policy: str, posterior: Posterior | LinearPosterior,
                    *, merit: Merit | Callable, run: int = 0, key: Any = 0, n_draws: int = 1000, **kwargs: Any):
    """Diagnostics of one run of one policy of a simulation.

    ``results, states = simulate_with_states(...)``; ``posterior`` is the family the policy was
    built with. The group structure, floors and coordinates come from the results; other keyword
    arguments go to :func:`posterior_tree`.
    """
    st = run_state(states, policy, run)
    return from_posterior(posterior, st, merit=merit, key=key, n_draws=n_draws, exposure=results, policy=policy,
                          run=run, **kwargs)


# --------------------------------------------------------------------------- summary


def _label(var: str, coord: Any) -> str:
    return f"{var}[{coord}]"


def summary(tree: Any, *, var_names: Sequence[str] | None = None, ci_prob: float | None = None,
            kind: str | None = None, ci_kind: str | None = None):
    """ArviZ's summary of the posterior group plus exposure columns, as a pandas DataFrame.

    Rows are ``var[coord]`` (ArviZ labels). The ArviZ columns are ``kind="all"`` (mean, sd,
    credible interval, ess_bulk, ess_tail, r_hat, mcse) when MCMC ran, else ``kind="stats"``
    (mean, sd, interval). ``ci_kind`` is ``"hdi"`` (highest density interval) or ``"eti"``
    (equal-tailed); default ArviZ's ``rcParams["stats.ci_kind"]``. Added columns, filled on the
    rows of ``pi_star``, ``pi_star_group``, ``pi_star_within`` and ``pi_star_bilevel`` (NaN
    elsewhere): ``observed_share`` (the compared share, see ``tree.attrs["compare"]``) and
    ``p_under_exposed`` (the under-exposure probability). Numbers are not rounded.
    """
    import arviz as az
    import pandas as pd

    if not hasattr(tree, "children") or "posterior" not in tree.children:
        raise TypeError("summary needs a DataTree from bayesfair.diagnostics (with a posterior group)")
    if kind is None:
        kind = "all" if "sample_stats" in tree.children else "stats"
    post = tree["posterior"].dataset
    if var_names is not None:
        missing = [v for v in var_names if v not in post]
        if missing:
            raise ValueError(f"var_names {missing} are not posterior variables ({list(post.data_vars)})")
    kw: dict[str, Any] = {"round_to": "none", "kind": kind, "var_names": list(var_names) if var_names else None}
    if ci_prob is not None:
        kw["ci_prob"] = ci_prob
    if ci_kind is not None:
        if ci_kind not in ("hdi", "eti"):
            raise ValueError(f"ci_kind must be 'hdi' or 'eti', got {ci_kind!r}")
        kw["ci_kind"] = ci_kind
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # R-hat of constant variables is NaN
        df = pd.DataFrame(az.summary(tree, **kw))
    observed = pd.Series(np.nan, index=df.index, dtype=float)
    p_under = pd.Series(np.nan, index=df.index, dtype=float)
    obs = tree["observed_exposure"].dataset if "observed_exposure" in tree.children else None
    under = tree["under_exposure"].dataset if "under_exposure" in tree.children else None
    compare = tree.attrs.get("compare", "exposure")
    kind_name = "exposure" if compare == "exposure" else "pull"
    share_vars = {"share_arm": f"{kind_name}_share", "share_group": f"group_{kind_name}_share",
                  "share_within": f"within_{kind_name}_share"}
    for var, (share_key, p_name) in _SUMMARY_SHARES.items():
        if var not in post:
            continue
        dim = post[var].dims[-1]
        for i, c in enumerate(post[var][dim].values):
            label = _label(var, c)
            if label not in df.index:
                continue
            if obs is not None and share_vars[share_key] in obs:
                observed[label] = float(obs[share_vars[share_key]].values[i])
            if under is not None and p_name in under:
                p_under[label] = float(under[p_name].values[i])
    df["observed_share"] = observed
    df["p_under_exposed"] = p_under
    return df
