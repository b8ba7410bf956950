"""Inputs of the diagnostics tree: draws and labels checked, and the observed shares of a results Dataset.

Split out of :mod:`bayesfair.diagnostics.tree` (which imports everything here);
:func:`observed_exposure` is public through :mod:`bayesfair.diagnostics`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bayesfair.core._validate import arm_groups, positive_int

__all__ = ["observed_exposure", "EXACT_CHAINS", "as_chains", "check_chains"]


# --------------------------------------------------------------------------- inputs


def _float_array(label: str, value: Any) -> np.ndarray:
    """``value`` as a finite float64 array; errors name ``label`` (e.g. ``draws['mu']``, ``contexts``)."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{label} must be an array of real numbers, got {type(value).__name__}") from None
    if arr.size == 0:
        raise ValueError(f"{label} is empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{label} must be finite (no NaN or inf)")
    return arr


def _normalize_draws(draws: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Every array as ``[chain, draw, ...]``; ``mu``/``theta`` may be given as ``[draw, n]`` (one chain)."""
    if not isinstance(draws, Mapping) or not draws:
        raise TypeError("draws must be a non-empty mapping of variable name -> array [chain, draw, ...]")
    arrays = {str(k): _float_array(f"draws[{str(k)!r}]", v) for k, v in draws.items()}
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


#: Chains that the independent exact draws of a conjugate posterior are arranged in (see
#: :func:`as_chains`): enough for ArviZ's multi-chain functions (R-hat, rank plots), few enough that
#: every chain keeps hundreds of draws at the default 1,000.
EXACT_CHAINS = 4


def check_chains(n_draws: int, chains: Any) -> int:
    """``chains`` validated: a positive integer that divides ``n_draws`` (the chains have equal lengths)."""
    chains = positive_int("chains", chains)
    if n_draws % chains:
        lower, upper = n_draws - n_draws % chains, n_draws + chains - n_draws % chains
        raise ValueError(f"n_draws={n_draws} must be a multiple of chains={chains} (the independent draws are split "
                         f"into {chains} chains of equal length): use n_draws={lower or upper} or {upper}, or chains=1")
    return chains


def as_chains(flat: Mapping[str, Any], chains: int) -> dict[str, np.ndarray]:
    """Independent draws ``{name: [n, ...]}`` arranged as ``chains`` chains ``[chains, n / chains, ...]``.

    Chain c holds draws c n/chains, ..., (c + 1) n/chains - 1, in their order (a reshape: the
    draws, and so every mean or quantile over them, are unchanged). Independent draws split into
    chains are a valid multi-chain sample of the same distribution: ArviZ's R-hat is 1 up to
    Monte Carlo error (it compares the chains' halves, which have the same distribution), its
    ESS is about n, and its multi-chain functions (``az.summary``, ``az.rhat``, ``az.plot_rank``)
    accept the tree, which with one chain they do not (R-hat NaN, rank plots fail).
    """
    out = {}
    for name, value in flat.items():
        arr = np.asarray(value, np.float64)
        out[name] = arr.reshape(chains, arr.shape[0] // chains, *arr.shape[1:])
    return out


def _labels_from(group_of_arm: Any, n_arms: int) -> np.ndarray:
    return arm_groups("group_of_arm", group_of_arm, n_arms)


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
