"""The diagnostics DataTree (:func:`posterior_tree`), built in parts.

Split out of :mod:`bayesfair.diagnostics` (which re-exports everything public here): the input
checks, the observed shares of a results Dataset, the fair quantities derived from ``mu`` draws,
and one function per DataTree group (``posterior``, ``observed_exposure``/``under_exposure``,
``sample_stats``). The groups and variables are described in :mod:`bayesfair.diagnostics`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core._compile import caches_small_programs
from bayesfair.core.groups import validate_exposure_floors
from bayesfair.core.merit import Merit, fair_policy, group_fair_policy, resolve_merit
from bayesfair.diagnostics.inputs import (
    _float_array,
    _labels_from,
    _names,
    _normalize_draws,
    observed_exposure,
)

__all__ = ["posterior_tree", "observed_exposure", "ARM_VARS", "GROUP_VARS"]

#: Fair and observed shares closer than this are equal. The observed shares are float32 sums of
#: pi_t (compensated, then float64 totals over t), exact to ~1e-8; with a strict comparison a
#: policy at the bi-level optimum (shares 0.2 / 0.8 up to 2e-9) was "under-exposed" with
#: probability 1 in both groups. A real under-exposure below 1e-6 is far below any Monte Carlo
#: error of a share.
SHARE_TOL = 1e-6

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


_ORDER = ("mu", "merit", "pi_star", "pi_star_group", "pi_star_within", "pi_star_bilevel", "theta", "psi")


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


@caches_small_programs
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
    prior: Mapping[str, Any] | None = None,
    groups: Mapping[str, Any] | None = None,
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
    prior : mapping name -> array, optional
        Prior draws of the same variables as ``draws``: the ``prior`` group, with the same derived
        quantities (merit, pi*, ...), dimensions and coordinates as ``posterior``.
    groups : mapping name -> xarray.Dataset, optional
        Further groups added as given (the model-checking groups of
        :mod:`bayesfair.diagnostics.checks`: ``log_likelihood``, ``posterior_predictive``, ...).

    Returns
    -------
    xarray.DataTree
    """
    import xarray as xr

    if compare not in _COMPARE:
        raise ValueError(f"compare must be one of {_COMPARE}, got {compare!r}")
    if link not in _LINKS:
        raise ValueError(f"link must be one of {_LINKS}, got {link!r}")
    arrays = _normalize_draws(draws)
    if merit is not None:
        merit = resolve_merit(merit)
    obs = _observed(exposure, policy, run, checkpoint)
    _add_mu_from_theta(arrays, contexts, link)
    shape = _shape(arrays, obs, group_of_arm, arm_names, group_names, feature_names)
    _check_group_shares(obs, shape)
    floors = _floors(group_floors, obs, shape.n_groups)
    post, post_dims = _posterior_group(arrays, merit, shape, floors, dict(dims or {}),
                                       {"arm": arm_names, "group": group_names, "feature": feature_names})
    out: dict[str, Any] = {"posterior": post}
    if prior is not None:
        out["prior"] = _prior_group(prior, merit, shape, floors, dict(dims or {}), contexts, link, set(post_dims))
    if obs:
        out.update(_exposure_groups(obs, shape, floors, arrays, post_dims, compare))
    if sample_stats is not None:
        out["sample_stats"] = _sample_stats_group(sample_stats, arrays, post_dims, shape.coords)
    for name, ds in (groups or {}).items():
        if name in out:
            raise ValueError(f"groups must not contain {name!r}: the tree builds it")
        out[name] = ds
    tree = xr.DataTree.from_dict(out)
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


# --------------------------------------------------------------------------- parts of the tree


def _observed(exposure: Any, policy: str | None, run: int, checkpoint: int | None) -> dict[str, Any]:
    """The observed shares: from a results Dataset (one policy, run, checkpoint) or given directly."""
    if exposure is None:
        return {}
    if hasattr(exposure, "data_vars"):
        return observed_exposure(exposure, policy=policy, run=run, checkpoint=checkpoint)
    if isinstance(exposure, Mapping):
        allowed = {"exposure_share", "pull_share", "group_exposure_share", "group_pull_share"}
        bad = set(exposure) - allowed
        if bad:
            raise ValueError(f"exposure mapping has unknown keys {sorted(bad)}; allowed: {sorted(allowed)}")
        return _check_shares({k: _float_array(f"exposure[{k!r}]", v).reshape(-1) for k, v in exposure.items()})
    raise TypeError(f"exposure must be a bayesfair.simulate results Dataset or a mapping, got "
                    f"{type(exposure).__name__}")


def _check_shares(shares: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Given shares are shares: each in [0, 1]. Pull counts given here were compared with pi* as
    if they were shares. (They need not sum to 1: a share per arm may be a threshold of interest;
    arm and group shares given together must agree, :func:`_check_group_shares`.)"""
    for key, v in shares.items():
        if np.any(v < -SHARE_TOL) or np.any(v > 1 + SHARE_TOL):
            i = int(np.flatnonzero((v < -SHARE_TOL) | (v > 1 + SHARE_TOL))[0])
            raise ValueError(f"exposure[{key!r}] must be shares in [0, 1], got {v[i]:g} at index {i} (counts? divide "
                             "by the number of rounds)")
    return shares


def _check_group_shares(obs: dict[str, Any], shape: Any) -> None:
    """Arm and group shares given together must agree: a group's share is its arms' shares summed."""
    if shape.labels is None:
        return
    for kind in ("exposure", "pull"):
        arm, group = obs.get(f"{kind}_share"), obs.get(f"group_{kind}_share")
        if arm is None or group is None or np.size(arm) != shape.labels.size:
            continue
        summed = np.bincount(shape.labels, weights=np.asarray(arm, np.float64), minlength=np.size(group))
        if summed.shape != np.shape(group) or not np.allclose(summed, group, rtol=0, atol=1e-6):
            raise ValueError(f"group_{kind}_share {np.round(np.asarray(group), 6).tolist()} is not the sum of "
                             f"{kind}_share over each group's arms ({np.round(summed, 6).tolist()})")


def _add_mu_from_theta(arrays: dict[str, np.ndarray], contexts: Any, link: str) -> None:
    """mu_a = link(contexts_a . theta) for ``theta`` draws with ``contexts`` (added to ``arrays``)."""
    if contexts is None:
        return
    if "theta" not in arrays:
        raise ValueError("contexts need theta draws")
    if "mu" in arrays:
        raise ValueError("give either mu draws or theta draws with contexts, not both")
    x = _float_array("contexts", contexts)
    if x.ndim != 2 or x.shape[1] != arrays["theta"].shape[-1]:
        raise ValueError(f"contexts must be [K, d={arrays['theta'].shape[-1]}], got shape {x.shape}")
    lin = arrays["theta"] @ x.T
    arrays["mu"] = 1.0 / (1.0 + np.exp(-lin)) if link == "logistic" else lin


class _Shape(NamedTuple):
    """Sizes and coordinates of the tree: arms ``k``, their groups ``labels`` and the coordinates."""

    n_arms: int | None
    labels: np.ndarray | None
    n_groups: int | None
    coords: dict[str, Any]


def _shape(arrays: dict[str, np.ndarray], obs: dict[str, Any], group_of_arm: Any, arm_names: Any,
           group_names: Any, feature_names: Any) -> _Shape:
    """Arms, groups and features from the draws, the arguments and the results (checked to agree)."""
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
    return _Shape(k, labels, m, coords)


def _floors(group_floors: Any, obs: dict[str, Any], m: int | None) -> np.ndarray | None:
    """The exposure floors beta [m] (given, or the results' ``group_floor``), validated."""
    floors = group_floors if group_floors is not None else obs.get("group_floor")
    if floors is None:
        return None
    if m is None:
        raise ValueError("group_floors need the arms' groups (group_of_arm)")
    try:
        return validate_exposure_floors(np.asarray(floors, np.float64).reshape(-1), m)
    except ValueError as exc:
        raise ValueError(f"group_floors: {exc}") from None
    except TypeError:
        raise TypeError(f"group_floors must be a sequence of floats, got {group_floors!r}") from None


def _posterior_group(arrays: dict[str, np.ndarray], merit: Merit | None, shape: _Shape, floors: np.ndarray | None,
                     dims: dict[str, Sequence[str]], given: dict[str, Any]):
    """The ``posterior`` Dataset and each variable's dims; adds the fair quantities to ``arrays``
    and any missing coordinates to ``shape.coords``."""
    import xarray as xr

    coords = shape.coords
    member = np.eye(shape.n_groups)[shape.labels] if shape.labels is not None else None
    if "mu" in arrays and merit is not None:
        for name, value in _fair_quantities(merit, arrays["mu"], member, floors).items():
            if name in arrays:
                raise ValueError(f"draws must not contain {name!r}: it is computed from mu and the merit")
            arrays[name] = value
    order = [n for n in _ORDER if n in arrays]
    order += sorted(n for n in arrays if n not in order)
    post_dims = {n: _dims_for(n, arrays[n], dims) for n in order}
    for n in order:
        for dim, size in zip(post_dims[n], arrays[n].shape[2:], strict=True):
            if dim in coords and len(coords[dim]) != size:
                raise ValueError(f"draws[{n!r}] has {size} entries along {dim!r}, expected {len(coords[dim])}")
            if dim not in coords:
                coords[dim] = _names(f"{dim}_names", given.get(dim), size, range(size))
    post = xr.Dataset({n: (("chain", "draw", *post_dims[n]), arrays[n]) for n in order},
                      coords={**_sample_coords(arrays, post_dims), **_used_coords(coords, post_dims)})
    post.attrs["sample_dims"] = ["chain", "draw"]
    return post, post_dims


def _prior_group(prior: Mapping[str, Any], merit: Merit | None, shape: _Shape, floors: np.ndarray | None,
                 dims: dict[str, Sequence[str]], contexts: Any, link: str, names: set[str]):
    """The ``prior`` Dataset: prior draws through the posterior's derivations (same coordinates)."""
    arrays = _normalize_draws(prior)
    _add_mu_from_theta(arrays, contexts, link)
    ds, prior_dims = _posterior_group(arrays, merit, shape, floors, dims, {})
    if set(prior_dims) != names:
        raise ValueError(f"prior draws give the variables {sorted(prior_dims)}, the posterior {sorted(names)}")
    return ds


def _sample_coords(arrays: dict[str, np.ndarray], post_dims: dict[str, list[str]]) -> dict[str, np.ndarray]:
    n_chain, n_draw = arrays[next(iter(post_dims))].shape[:2]
    return {"chain": np.arange(n_chain), "draw": np.arange(n_draw)}


def _used_coords(coords: dict[str, Any], post_dims: dict[str, list[str]]) -> dict[str, Any]:
    return {c: v for c, v in coords.items() if any(c in d for d in post_dims.values())}


def _exposure_groups(obs: dict[str, Any], shape: _Shape, floors: np.ndarray | None, arrays: dict[str, np.ndarray],
                     post_dims: dict[str, list[str]], compare: str) -> dict[str, Any]:
    """The ``observed_exposure`` group and, where a share meets its fair posterior variable,
    the ``under_exposure`` probabilities."""
    import xarray as xr

    arm_group = {c: shape.coords[c] for c in ("arm", "group") if c in shape.coords}
    ov: dict[str, Any] = {}
    for name in ("exposure_share", "pull_share", "true_mu", "true_pi_star"):
        if name in obs:
            ov[name] = (("arm",), obs[name])
    for name in ("group_exposure_share", "group_pull_share"):
        if name in obs:
            ov[name] = (("group",), obs[name])
    for kind in ("exposure", "pull"):
        a, g = obs.get(f"{kind}_share"), obs.get(f"group_{kind}_share")
        if a is not None and g is not None:
            denom = g[shape.labels]
            ov[f"within_{kind}_share"] = (("arm",), np.where(denom > 0, a / np.where(denom > 0, denom, 1), 0.0))
    if floors is not None:
        ov["group_floor"] = (("group",), floors)
        if "group_pull_share" in obs:
            ov["floor_margin"] = (("group",), obs["group_pull_share"] - floors)
    ods = xr.Dataset(ov, coords=arm_group)
    ods.attrs.update({key: obs[key] for key in ("policy", "run", "round") if key in obs})
    out = {"observed_exposure": ods}

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
            uv[p_name] = ((post_dims[var][0],), np.mean(arrays[var] > share + SHARE_TOL, axis=(0, 1)))
    if uv:
        uds = xr.Dataset(uv, coords=arm_group)
        uds.attrs["compare"] = compare
        uds.attrs["definition"] = ("posterior probability that the fair share exceeds the observed share by more "
                                   f"than {SHARE_TOL:g} (float rounding)")
        out["under_exposure"] = uds
    return out


def _sample_stats_group(sample_stats: Mapping[str, Any], arrays: dict[str, np.ndarray],
                        post_dims: dict[str, list[str]], coords: dict[str, Any]):
    """The ``sample_stats`` group: the per-draw MCMC statistics and ArviZ's R-hat and ESS."""
    import arviz as az
    import xarray as xr

    base = _sample_coords(arrays, post_dims)
    n_chain, n_draw = base["chain"].size, base["draw"].size
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
        tree_post = az.from_dict({"posterior": {n: arrays[n] for n in post_dims}}, dims=post_dims,
                                 coords=dict(coords))
        with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
            # constant variables (e.g. pi_star_bilevel when one group always wins) give NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            diag = {"r_hat": az.rhat(tree_post), "ess_bulk": az.ess(tree_post, method="bulk"),
                    "ess_tail": az.ess(tree_post, method="tail")}
        for stat, res in diag.items():
            res_ds = res.to_dataset() if hasattr(res, "to_dataset") else res
            for n, d in post_dims.items():
                ss[f"{stat}_{n}"] = (tuple(d), np.asarray(res_ds[n].values, np.float64))
    ssd = xr.Dataset(ss, coords={**base, **_used_coords(coords, post_dims)})
    ssd.attrs["sample_dims"] = ["chain", "draw"]
    return ssd
