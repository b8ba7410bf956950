"""From a posterior (a policy state, a simulation, a fit) to the diagnostics DataTree and its summary.

The package docstring of :mod:`bayesfair.diagnostics` describes the tree.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from bayesfair.core._compile import caches_small_programs
from bayesfair.core._validate import as_key, positive_int
from bayesfair.core.merit import Merit
from bayesfair.diagnostics.checks import (
    _draw_many,
    _vmapped,
    fit_from_log,
    model_check,
    observations_from_log,
    prior_posterior_view,
)
from bayesfair.diagnostics.inputs import EXACT_CHAINS, as_chains, check_chains
from bayesfair.diagnostics.tree import _SUMMARY_SHARES, ARM_VARS, GROUP_VARS, observed_exposure, posterior_tree
from bayesfair.inference.fitting import Fit, GroupBiasData
from bayesfair.posteriors.base import PosteriorFamily, is_posterior
from bayesfair.posteriors.mcmc import is_mcmc_state
from bayesfair.simulation.simulator import simulate

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
    "ARM_VARS",
    "GROUP_VARS",
]


# --------------------------------------------------------------------------- inputs


# --------------------------------------------------------------------------- adapters


@runtime_checkable
class PosteriorCarrier(Protocol):
    """A policy state that holds a posterior state (e.g. the bi-level policies'
    :class:`~bayesfair.policies.bilevel.BilevelState`): it says where the posterior state is and
    which group every arm belongs to, so diagnostics never look inside a policy's state."""

    def posterior_state(self) -> Any:
        """The posterior state inside the policy state."""

    def arm_groups(self) -> np.ndarray:
        """The group of every arm, ``[K]`` (``[runs, K]`` for several runs)."""


def posterior_state(policy_state: Any) -> Any:
    """The posterior state inside a policy state: what a :class:`PosteriorCarrier` declares
    (``state.stats`` for the bi-level policies), the state itself otherwise."""
    if isinstance(policy_state, PosteriorCarrier):
        return policy_state.posterior_state()
    return policy_state


def _group_of_arm_from_state(policy_state: Any) -> np.ndarray | None:
    if isinstance(policy_state, PosteriorCarrier):
        labels = np.asarray(policy_state.arm_groups())
        if labels.ndim == 1:
            return labels
    return None


def _named_draws(posterior: PosteriorFamily, value: Any) -> dict[str, Any]:
    """A draw (or mean) of the family as ``{name: array}`` following ``posterior.dims``: the
    fields of a record draw, or the single named array."""
    names = list(posterior.dims)
    if hasattr(value, "_asdict"):
        return dict(value._asdict())
    if len(names) != 1:
        raise TypeError(f"the posterior {posterior.name!r} declares {names} but its draw is a single array")
    return {names[0]: value}


@caches_small_programs
def posterior_draws(posterior: PosteriorFamily, state: Any, *, key: Any = 0, n_draws: int = 1000,
                    chains: int = EXACT_CHAINS) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None, str]:
    """Draws of one run's posterior: ``(draws, sample_stats, source)``.

    - MCMC fallback state after at least one refresh: every stored sample ``[chain, draw, ...]``
      of every site, with the per-draw NUTS statistics; source ``"mcmc"``.
    - MCMC fallback state before its first refresh: its exact prior draws; source ``"prior"``.
    - Conjugate state: ``n_draws`` independent exact draws of the family's variables
      (``posterior.dims``: ``mu`` per arm, ``theta`` for linear posteriors, ``beta_bar``/``beta``/
      ``psi`` for the group-bias model), from the keys ``split(key, n_draws)``, arranged as
      ``chains`` chains of ``n_draws / chains`` draws (default 4: independent draws split into
      chains are a valid multi-chain sample, so ArviZ's ``summary`` gives R-hat ~ 1 and
      ``plot_rank`` works; see :func:`~bayesfair.diagnostics.inputs.as_chains`); source ``"exact"``.
      ``n_draws`` must be a multiple of ``chains`` (``chains=1``: one chain).

    ``state`` must be a single run's posterior state (see :func:`run_state`,
    :func:`posterior_state`).
    """
    if not is_posterior(posterior):
        raise TypeError("posterior must be a bayesfair posterior family (Posterior, LinearPosterior, "
                        f"GroupBiasPosterior), got {posterior!r}")
    state = posterior_state(state)
    if is_mcmc_state(state):
        samples = {k: np.asarray(v, np.float64) for k, v in state.samples.items()}
        site = next(iter(posterior.dims))
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
    chains = check_chains(n_draws, chains)
    keys = jax.random.split(as_key(key, "key"), n_draws)
    try:
        mean = _named_draws(posterior, posterior.mean(state))
    except Exception as exc:  # a state of another family
        raise TypeError(f"state does not belong to the posterior {posterior.name!r}: {exc}") from exc
    for name, value in mean.items():
        if np.ndim(value) != len(posterior.dims[name]):
            raise ValueError(f"state holds several runs (posterior mean of {name!r} has shape {np.shape(value)}): "
                             "select one with run_state(states, policy, run)")
    x = _vmapped(posterior.sample, _draw_many)(keys, state)  # compiled once per family
    return as_chains(_named_draws(posterior, x), chains), None, "exact"


@caches_small_programs
def from_posterior(posterior: PosteriorFamily, state: Any, *, merit: Merit | Callable | None = None,
                   key: Any = 0, n_draws: int = 1000, chains: int = EXACT_CHAINS, observations: Any = None,
                   check_observations: bool = True, **kwargs: Any):
    """:func:`posterior_tree` of one run's posterior state (conjugate or MCMC fallback).

    ``observations``: what the state was updated with, ``{"arm": [N], "reward": [N]}`` for a
    per-arm family or ``{"x": [N, d], "reward": [N]}`` for a linear one (optionally ``"round"``
    [N], the ``obs`` coordinate; an :class:`~bayesfair.posteriors.base.Outcome` of arrays works
    too; :func:`observations_from_log` reads them from a per-round log). With them, a conjugate
    family with an observation model also gives the model-checking groups ``log_likelihood``,
    ``posterior_predictive``, ``observed_data``, ``constant_data``, ``prior`` and
    ``prior_predictive`` (:mod:`bayesfair.diagnostics.checks`), and the posterior group gains the
    likelihood's nuisance draws (``sigma2`` of the Normal-Inverse-Gamma families); the family's own
    draws are the same as without observations (same key; up to float32 rounding, as they come
    from two separately compiled programs). ``check_observations`` refits the
    family to the observations and raises ``ValueError`` when its posterior mean differs from the
    state's (observations that are not the ones the state learned from).

    ``state`` may be a policy state that carries a posterior (:class:`PosteriorCarrier`, e.g. a
    bi-level policy's: its posterior state and group membership are used). Without
    ``group_of_arm``, the groups come from the policy state or the posterior's
    ``params["group_of_arm"]`` (hierarchical and group-bias models), else from the results. The
    draws' dimension names come from ``posterior.dims``. A conjugate state's ``n_draws`` exact
    draws (and the model-checking groups' draws) are ``chains`` chains of ``n_draws / chains``
    independent draws (:func:`posterior_draws`). Other keyword arguments go to
    :func:`posterior_tree`.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> import bayesfair as bf
    >>> from bayesfair import diagnostics as dg
    >>> from bayesfair.posteriors.base import Outcome
    >>> post = bf.beta_bernoulli()
    >>> state = post.update(post.init(3), Outcome(jnp.float32(1.0), arm=jnp.int32(2)))
    >>> tree = dg.from_posterior(post, state, merit=bf.merit.exponential(4.0), n_draws=200)
    >>> tree.attrs["source"], dict(tree.posterior["pi_star"].sizes)
    ('exact', {'chain': 4, 'draw': 50, 'arm': 3})
    >>> table = dg.summary(tree)
    >>> "pi_star[0]" in table.index
    True
    """
    if kwargs.get("group_of_arm") is None:
        labels = _group_of_arm_from_state(state)
        if labels is None and "group_of_arm" in getattr(posterior, "params", {}):
            labels = np.asarray(posterior.params["group_of_arm"])  # e.g. the hierarchical model's groups
        if labels is not None:
            kwargs["group_of_arm"] = labels
    if observations is not None:
        return _from_posterior_checked(posterior, state, observations, merit=merit, key=key, n_draws=n_draws,
                                       chains=chains, check=check_observations, **kwargs)
    draws, stats, source = posterior_draws(posterior, state, key=key, n_draws=n_draws, chains=chains)
    extra: dict[str, Any] = {"posterior": posterior.name}
    if source == "mcmc" or source == "prior":
        st = posterior_state(state)
        extra.update(observations=int(np.asarray(st.n)), refreshes=int(np.asarray(st.refreshes)))
    extra.update(kwargs.pop("attrs", None) or {})
    if stats is not None:
        kwargs["sample_stats"] = stats
    kwargs["dims"] = {**{k: list(v) for k, v in posterior.dims.items()}, **(kwargs.get("dims") or {})}
    return posterior_tree(draws, merit=merit, source=source, attrs=extra, **kwargs)


def _from_posterior_checked(posterior: PosteriorFamily, state: Any, observations: Any, *, merit: Any, key: Any,
                            n_draws: int, chains: int, check: bool, **kwargs: Any):
    """:func:`from_posterior` with the model-checking groups (conjugate states only)."""
    if not is_posterior(posterior):
        raise TypeError(f"posterior must be a bayesfair posterior family, got {posterior!r}")
    st = posterior_state(state)
    if is_mcmc_state(st):
        raise ValueError("observations (model-checking groups) need a conjugate posterior state; the MCMC "
                         "fallback's draws are not joint draws of an observation model")
    n_draws = positive_int("n_draws", n_draws)
    post, prior, groups = model_check(posterior, st, observations, key=as_key(key, "key"), n_draws=n_draws,
                                      chains=check_chains(n_draws, chains), check=check)
    extra: dict[str, Any] = {"posterior": posterior.name, "observations": int(groups["observed_data"].sizes["obs"])}
    extra.update(kwargs.pop("attrs", None) or {})
    dims = {k: list(v) for k, v in posterior.observation.dims.items()}
    kwargs["dims"] = {**dims, **(kwargs.get("dims") or {})}
    tree = posterior_tree(post, merit=merit, source="exact", attrs=extra, prior=prior, groups=groups, **kwargs)
    features = tree["posterior"].dataset.coords.get("feature")
    if features is not None and "x" in tree["constant_data"].dataset:
        tree["constant_data"] = tree["constant_data"].dataset.assign_coords(feature=features.values)
    return tree


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


@caches_small_programs
def from_group_bias_fit(fit: Any, data: Any, *, attrs: Mapping[str, Any] | None = None):
    """:func:`posterior_tree` of a NUTS fit of the hierarchical group-bias model.

    ``fit`` is a :class:`~bayesfair.inference.fitting.Fit` and ``data`` the
    :class:`~bayesfair.inference.fitting.GroupBiasData` it was fitted to (biased-feedback
    paper, Section 3.1, Eq. 2: y = x . (beta_i + psi_g(i)) + noise). The posterior group holds
    ``psi`` [group, feature] for the **non-reference** groups only (the reference group's psi is 0
    by construction, so its R-hat would be undefined; ``tree.attrs["reference_group"]`` names
    it), ``beta`` [arm, feature] (true coefficients), ``beta_bar`` [feature] and whichever of
    ``tau``, ``s``, ``sigma`` were sampled. ``sample_stats`` holds ``diverging`` and, with at
    least 4 draws, ArviZ's R-hat and bulk/tail ESS of every variable. ``attrs`` are added to the
    root attributes (JSON-friendly values).
    """
    import json

    if not isinstance(fit, Fit):
        raise TypeError(f"fit must be a Fit (bayesfair.inference.fitting.fit), got {type(fit).__name__}")
    if not isinstance(data, GroupBiasData):
        raise TypeError(f"data must be GroupBiasData (group_bias_data), got {type(data).__name__}")
    n, m, d = int(data.group_of_arm.size), int(data.group_of_arm.max()) + 1, int(data.X.shape[1])
    psi_all = np.asarray(fit.samples["psi_all"])
    if psi_all.shape[2:] != (m, d) or np.asarray(fit.samples["beta"]).shape[2:] != (n, d):
        raise ValueError(f"fit and data disagree: psi_all has shape {psi_all.shape[2:]} and beta "
                         f"{np.asarray(fit.samples['beta']).shape[2:]}, the data have m={m} groups, n={n} arms, d={d}")
    others = [g for g in range(m) if g != data.reference]
    group_names = list(data.group_names) if data.group_names is not None else [str(g) for g in range(m)]
    draws = {"beta": fit.samples["beta"], "beta_bar": fit.samples["beta_bar"]}
    if fit.config.get("group_bias", True):  # the model without bias (group_bias=False) has no psi
        draws = {"psi": psi_all[:, :, others, :], **draws}
    draws.update({k: fit.samples[k] for k in ("tau", "s", "sigma") if k in fit.samples})
    root = {"model": "bayesfair.posteriors.group_bias.group_bias_model",
            "reference_group": group_names[data.reference], "nuts_config": json.dumps(fit.config, default=str),
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

    if "checkpointer" in kwargs:
        raise ValueError("simulate_with_states uses the checkpointer hook itself; do not pass one")
    if "checkpointer" not in inspect.signature(simulate).parameters:
        raise RuntimeError("this bayesfair.simulate has no checkpointer hook to take the final states from")
    capture = _StateCapture()
    results = simulate(key, env, policies, horizon, runs, checkpointer=capture, **kwargs)
    states = {name: jax.tree.map(_to_host, capture.states[name]) for name in policies}
    return results, states


def from_simulation(results: Any, states: Mapping[str, Any], policy: str, posterior: PosteriorFamily,
                    *, merit: Merit | Callable, run: int = 0, key: Any = 0, n_draws: int = 1000,
                    chains: int = EXACT_CHAINS, log: Any = None, **kwargs: Any):
    """Diagnostics of one run of one policy of a simulation.

    ``results, states = simulate_with_states(...)``; ``posterior`` is the family the policy was
    built with. The group structure, floors and coordinates come from the results; other keyword
    arguments go to :func:`from_posterior` / :func:`posterior_tree`. ``log``: the study's per-round
    log (a :class:`bayesfair.workflow.logs.RoundLog` given to ``simulate_with_states(..., round_log=log)``,
    or its DataFrame); the run's pulled arms and observed rewards become ``observations``, which
    adds the model-checking groups (for a linear family with fixed arm features, ``contexts``
    [K, d] gives every pull's x).
    """
    st = run_state(states, policy, run)
    if log is not None:
        if kwargs.get("observations") is not None:
            raise ValueError("give either log= or observations=, not both")
        kwargs["observations"] = observations_from_log(log, policy, run, contexts=kwargs.get("contexts"))
    return from_posterior(posterior, st, merit=merit, key=key, n_draws=n_draws, chains=chains, exposure=results,
                          policy=policy, run=run, **kwargs)


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
