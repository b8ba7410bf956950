"""Host-side fits of the models/ recipes: NUTS over a whole data set, outside the simulator.

The posterior families in :mod:`bayesfair.posteriors` are updated one observation at a time inside
jitted simulations; the recipes in ``models/`` (and the biased-feedback notebook) instead fit the
hierarchical group-bias model of :mod:`bayesfair.posteriors.group_bias` (with unknown scales
tau, s, sigma) to a data table in one NumPyro ``MCMC`` run. This module holds that host-side
code: :func:`group_bias_data` validates the observations, :func:`fit_nuts` runs NUTS and returns
a :class:`NutsFit` (see :func:`bayesfair.diagnostics.from_group_bias_fit` for its diagnostics).
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair._validate import finite_array, positive_float, positive_int
from bayesfair.posteriors.group_bias import check_bias_groups, group_bias_model, sufficient_stats

__all__ = ["GroupBiasData", "NutsFit", "fit_nuts", "group_bias_data"]


class GroupBiasData(NamedTuple):
    """Observations for the group-bias model: ``arms [N]`` int, ``X [N, d]``, ``y [N]``, and the
    arm -> group map ``group_of_arm [n]`` with the ``reference`` group. ``arm_names`` /
    ``group_names`` / ``feature_names`` label the results (optional)."""

    arms: np.ndarray
    X: np.ndarray
    y: np.ndarray
    group_of_arm: np.ndarray
    reference: int = 0
    arm_names: tuple[str, ...] | None = None
    group_names: tuple[str, ...] | None = None
    feature_names: tuple[str, ...] | None = None


def group_bias_data(arms: Any, X: Any, y: Any, group_of_arm: Any, *, reference: int = 0, min_arms: int = 1,
                    arm_names: Any = None, group_names: Any = None, feature_names: Any = None) -> GroupBiasData:
    """Validate observations for :func:`fit_nuts` (clear errors naming the bad field)."""
    labels, m, ref = check_bias_groups(group_of_arm, reference=reference, min_arms=min_arms)
    n = labels.size
    X = finite_array("X", X, ndim=2)
    y = finite_array("y", y, ndim=1, size=X.shape[0])
    a = np.asarray(arms)
    if a.ndim != 1 or a.shape[0] != X.shape[0]:
        raise ValueError(f"arms must be 1-d with one entry per row of X ({X.shape[0]}), got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"arms must be integer arm indices, got dtype {a.dtype}")
    bad = np.flatnonzero((a < 0) | (a >= n))
    if bad.size:
        raise ValueError(f"arms must be in [0, {n - 1}] (one per entry of group_of_arm); row {bad[0]} has {a[bad[0]]}")

    def names(field, value, size):
        if value is None:
            return None
        out = tuple(str(v) for v in value)
        if len(out) != size:
            raise ValueError(f"{field} must have {size} entries, got {len(out)}")
        return out

    return GroupBiasData(a.astype(np.int32), X, y, labels, ref, names("arm_names", arm_names, n),
                         names("group_names", group_names, m), names("feature_names", feature_names, X.shape[1]))



class NutsFit(NamedTuple):
    """Result of :func:`fit_nuts`: ``samples`` name -> ``[chains, draws, ...]`` numpy arrays
    (``beta``, ``psi_all``, ``beta_bar``, ``psi``, ``z``, ``psi_z`` with ``noncentered_psi``, and the
    scales that were sampled),
    ``diverging [chains, draws]`` bool, ``seconds`` wall time, ``config`` the settings."""

    samples: dict[str, np.ndarray]
    diverging: np.ndarray
    seconds: float
    config: dict[str, Any]


def fit_nuts(
    data: GroupBiasData,
    *,
    tau: float | None = None,
    s: float | None = None,
    sigma: float | None = None,
    tau_scale: float = 1.0,
    s_scale: float = 1.0,
    sigma_scale: float = 1.0,
    prior_mean: Any = 0.0,
    prior_sd: float = 10.0,
    num_warmup: int = 500,
    num_samples: int = 500,
    num_chains: int = 2,
    seed: int = 0,
    sufficient: bool = True,
    target_accept: float = 0.8,
    progress_bar: bool = False,
    noncentered_psi: bool = False,
) -> NutsFit:
    """Fit the hierarchical group-bias model by NUTS (scales fixed or half-normal).

    Parameters
    ----------
    data : GroupBiasData
        From :func:`group_bias_data`.
    tau, s, sigma : float, optional
        Fix a scale; ``None`` (default) gives it a HalfNormal(``<name>_scale``) prior.
    prior_mean, prior_sd :
        Prior N(m0, prior_sd^2 I) of beta_bar.
    num_warmup, num_samples, num_chains, seed :
        NUTS settings (chains run sequentially unless the host exposes several devices, see
        :func:`bayesfair.set_host_devices`).
    sufficient : bool
        Write the likelihood through per-arm sufficient statistics (same posterior, faster).
    noncentered_psi : bool
        Sample psi as s times a standard normal (same posterior; better mixing of s when the data
        say little about psi, see :func:`group_bias_model`).
    """
    from numpyro.infer import MCMC, NUTS

    if not isinstance(data, GroupBiasData):
        raise TypeError(f"data must be GroupBiasData (see group_bias_data), got {type(data).__name__}")
    for name, v in (("tau", tau), ("s", s), ("sigma", sigma)):
        if v is not None:
            positive_float(name, v)
    for name, v in (("tau_scale", tau_scale), ("s_scale", s_scale), ("sigma_scale", sigma_scale),
                    ("prior_sd", prior_sd)):
        positive_float(name, v)
    num_warmup = positive_int("num_warmup", num_warmup)
    num_samples = positive_int("num_samples", num_samples)
    num_chains = positive_int("num_chains", num_chains)
    kwargs = dict(group_of_arm=data.group_of_arm, reference=data.reference, tau=tau, s=s, sigma=sigma,
                  tau_scale=tau_scale, s_scale=s_scale, sigma_scale=sigma_scale,
                  prior_mean=np.asarray(prior_mean, np.float32), prior_sd=prior_sd, sufficient=sufficient,
                  noncentered_psi=bool(noncentered_psi))
    X = jnp.asarray(data.X, jnp.float32)
    y = jnp.asarray(data.y, jnp.float32)
    arms = jnp.asarray(data.arms, jnp.int32)
    if sufficient:
        kwargs["stats"] = sufficient_stats(arms, X, y, int(data.group_of_arm.size))

    def model(arms, X, y):
        group_bias_model(arms, X, y, **kwargs)

    chain_method = "parallel" if 1 < num_chains <= jax.local_device_count() else "sequential"
    mcmc = MCMC(NUTS(model, target_accept_prob=target_accept), num_warmup=num_warmup, num_samples=num_samples,
                num_chains=num_chains, chain_method=chain_method, progress_bar=progress_bar)
    t0 = time.perf_counter()
    mcmc.run(jax.random.key(int(seed)), arms, X, y, extra_fields=("diverging",))
    samples = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    diverging = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["diverging"])
    config = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in kwargs.items() if k != "stats"}
    config.update(num_warmup=num_warmup, num_samples=num_samples, num_chains=num_chains, seed=int(seed),
                  target_accept=target_accept, chain_method=chain_method)
    return NutsFit(samples, diverging, time.perf_counter() - t0, config)
