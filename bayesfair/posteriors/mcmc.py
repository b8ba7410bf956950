"""The MCMC fallback: posteriors without a closed form, refreshed by NUTS inside the simulator.

DESIGN.md (Core abstractions, Posterior): a model whose posterior has no conjugate update (logistic
rewards, hierarchical priors with unknown scales, ...) is refreshed every ``refresh_every``
observations by NUTS over a fixed-capacity, masked history, warm-started from the previous
samples; between refreshes Thompson sampling draws one of the stored samples at random.

Everything here is a pure function of a pytree state with static shapes, so it runs inside the
simulator's jitted ``lax.scan`` over rounds, vmapped (and sharded) over runs, chunked:

- The **history** (:class:`History`) is family specific: per-arm success/trial counts
  (:func:`arm_counts`, exact and O(K) for Bernoulli-likelihood models), or a ring buffer of
  ``capacity`` observations with a validity mask (:func:`arm_buffer`, :func:`context_buffer`).
  A full buffer overwrites its oldest entry, so the posterior then conditions on the last
  ``capacity`` observations only (a sliding window); use ``capacity >= horizon`` for the exact
  posterior.
- **The refresh is a while loop, not a cond.** ``update`` appends the observation and refreshes
  when ``n % refresh_every == 0``. Under ``vmap`` the count ``n`` is a batched value (it is in the
  per-run state) even though every run holds the same count, and ``lax.cond`` on a batched
  predicate becomes a ``select`` that executes *both* branches, i.e. NUTS on every round. A
  ``lax.while_loop`` whose predicate is "refresh due and not yet done" runs its body while *any*
  run needs it, so it costs one predicate evaluation on the other rounds and one NUTS pass on
  refresh rounds (runs that do not need it are masked, never the case here).
- **The NUTS pass** uses NumPyro's functional kernels, ``numpyro.infer.hmc.hmc(potential_fn,
  algo="NUTS")`` (``init_kernel``/``sample_kernel``; ``MCMC`` is not traceable inside a scan).
  The potential is ``numpyro.infer.util.potential_energy`` of the family's NumPyro model on the
  current history (traced once; the data are the scan's values), over a flat vector of the
  model's unconstrained latent sites. Per refresh and chain: ``init_kernel`` at the previous
  chain position with the previous step size and an inverse mass matrix estimated from the
  previous samples (the warm start), ``num_warmup`` adaptation steps (dual averaging of the step
  size; Stan-style mass-matrix windows when ``num_warmup >= 20``), then ``num_samples`` stored
  draws. Chains are vmapped.
- **Keys.** ``update(state, obs)`` has no key argument, so the state carries one (raw ``uint32``
  key data), seeded by ``seed`` and mixed with every observation (``fold_in`` of the reward's
  bits and the arm or context). Runs with different histories therefore use different NUTS
  randomness; runs whose histories coincide share it (their posteriors coincide too).
- Before the first refresh the stored samples are exact draws from the prior (the model run
  forward on an empty history), so TS explores from the prior.

The state keeps the per-draw NUTS statistics of the last refresh (divergences, acceptance
probability, number of leapfrog steps) for :mod:`bayesfair.diagnostics`, the last refresh's
largest split R-hat and smallest ESS (:func:`split_rhat_ess`, computed in the scan), and how
many refreshes failed the settings' thresholds and when the first did. :func:`refresh_track`
hands these to the simulator as tracked values (``track_mcmc_*`` in the results), and
:func:`warn_failed_refreshes` warns once after a simulation. A refresh that produces non-finite
values keeps the previous samples and warm start. See docs/mcmc.md for the cost trade-off of
``refresh_every``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bayesfair.core._validate import finite_float, positive_int
from bayesfair.core.declare import python_only
from bayesfair.core.merit import Merit, resolve_merit
from bayesfair.posteriors._mcmc_history import (
    ArmBuffer,
    ArmCounts,
    ContextBuffer,
    History,
    MCMCState,
    NUTSSettings,
    arm_buffer,
    arm_counts,
    context_buffer,
    is_mcmc_state,
    refresh_track,
    split_rhat_ess,
    warn_failed_refreshes,
)
from bayesfair.posteriors.base import Outcome, Posterior, init_size
from bayesfair.posteriors.linear import LinearPosterior

__all__ = [
    "NUTSSettings",
    "MCMCState",
    "History",
    "ArmCounts",
    "ArmBuffer",
    "ContextBuffer",
    "arm_counts",
    "arm_buffer",
    "context_buffer",
    "mcmc_posterior",
    "mcmc_beta_bernoulli",
    "logistic_linear_mcmc",
    "logistic_merit",
    "refresh",
    "stored_draws",
    "is_mcmc_state",
    "split_rhat_ess",
    "refresh_track",
    "warn_failed_refreshes",
]


# --------------------------------------------------------------------------- model structure


class _Structure(NamedTuple):
    names: tuple[str, ...]  # latent sites, sorted (the flat layout)
    shapes: tuple[tuple[int, ...], ...]  # their unconstrained shapes
    keep: tuple[str, ...]  # sites stored in MCMCState.samples
    size: int  # D, the flat unconstrained dimension


def _structure(model: Callable, args: tuple, kwargs: dict) -> _Structure:
    """Latent sites and unconstrained shapes of ``model(*args, **kwargs)``, by abstract tracing only."""
    from numpyro.handlers import seed, trace
    from numpyro.infer.util import unconstrain_fn

    def run(a, kw):
        tr = trace(seed(model, jax.random.key(0))).get_trace(*a, **kw)
        latent = {k: v["value"] for k, v in tr.items() if v["type"] == "sample" and not v["is_observed"]}
        det = {k: v["value"] for k, v in tr.items() if v["type"] == "deterministic"}
        return unconstrain_fn(model, a, kw, latent), det

    unc, det = jax.eval_shape(run, args, kwargs)
    if not unc:
        raise ValueError("the MCMC model has no latent sample site to infer")
    names = tuple(sorted(unc))
    shapes = tuple(tuple(unc[k].shape) for k in names)
    keep = tuple(sorted(set(names) | set(det)))
    return _Structure(names, shapes, keep, int(sum(math.prod(s) for s in shapes)))


def _unravel(struct: _Structure, flat: jax.Array) -> dict[str, jax.Array]:
    out, i = {}, 0
    for name, shape in zip(struct.names, struct.shapes, strict=True):
        n = math.prod(shape)
        out[name] = flat[i:i + n].reshape(shape)
        i += n
    return out


def _mix_key(raw: jax.Array, item: jax.Array, reward: jax.Array) -> jax.Array:
    """Fold one observation into the carried key (so different histories use different keys)."""
    key = jax.random.wrap_key_data(raw)
    key = jax.random.fold_in(key, lax.bitcast_convert_type(jnp.asarray(reward, jnp.float32), jnp.uint32))
    item = jnp.ravel(jnp.asarray(item))
    if jnp.issubdtype(item.dtype, jnp.floating):
        bits = lax.bitcast_convert_type(item.astype(jnp.float32), jnp.uint32)
    else:
        bits = item.astype(jnp.uint32)
    odd = (2 * jnp.arange(bits.shape[0], dtype=jnp.uint32) + 1) * jnp.uint32(2654435761)
    key = jax.random.fold_in(key, jnp.sum(bits * odd, dtype=jnp.uint32))
    return jax.random.key_data(key)


# --------------------------------------------------------------------------- the engine


class _Engine(NamedTuple):
    init: Callable[[int], MCMCState]
    update: Callable[[MCMCState, Any, Any], MCMCState]
    refresh: Callable[[MCMCState], MCMCState]
    sample: Callable[[jax.Array, MCMCState], jax.Array]
    mean: Callable[[MCMCState], jax.Array]
    variance: Callable[[MCMCState], jax.Array]


def _engine(model: Callable, history: History, draw_site: str, cfg: NUTSSettings) -> _Engine:
    """init / update / refresh / sample over :class:`MCMCState` for ``model`` on ``history``."""
    from numpyro.handlers import seed, trace
    from numpyro.infer.hmc import hmc
    from numpyro.infer.util import constrain_fn, potential_energy

    n_chains, n_samples, n_warmup = cfg.num_chains, cfg.num_samples, cfg.num_warmup

    def inputs(h: Any, size: int):
        args, kwargs, static = history.model_inputs(h, size)
        return partial(model, **static), args, kwargs

    def size_of(state: MCMCState) -> int:
        return int(state.samples[draw_site].shape[-1])

    def init(size: int) -> MCMCState:
        size = positive_int("n_arms/n_features", size)
        h = history.init(size)
        m, args, kwargs = inputs(h, size)
        struct = _structure(m, args, kwargs)
        if draw_site not in struct.keep:
            raise ValueError(f"the MCMC model has no site {draw_site!r} (sites: {list(struct.keep)})")
        key = jax.random.key(cfg.seed)
        k_prior, k_pos, k_state = jax.random.split(key, 3)

        def prior_draw(k):
            tr = trace(seed(m, k)).get_trace(*args, **kwargs)
            return {name: jnp.asarray(tr[name]["value"], jnp.float32) for name in struct.keep}

        draws = jax.vmap(prior_draw)(jax.random.split(k_prior, n_chains * n_samples))
        samples = jax.tree.map(lambda x: x.reshape((n_chains, n_samples, *x.shape[1:])), draws)
        position = jax.random.uniform(k_pos, (n_chains, struct.size), jnp.float32, -cfg.init_radius,
                                      cfg.init_radius)
        return MCMCState(
            history=h,
            n=jnp.zeros((), jnp.int32),
            samples=samples,
            position=position,
            step_size=jnp.full((n_chains,), cfg.init_step_size, jnp.float32),
            inverse_mass=jnp.ones((n_chains, struct.size), jnp.float32),
            key=jax.random.key_data(k_state),
            refreshes=jnp.zeros((), jnp.int32),
            diverging=jnp.zeros((n_chains, n_samples), bool),
            accept_prob=jnp.zeros((n_chains, n_samples), jnp.float32),
            num_steps=jnp.zeros((n_chains, n_samples), jnp.int32),
            eta=jnp.mean(samples[draw_site], axis=(0, 1)),
            rhat=jnp.full((), jnp.nan, jnp.float32),
            ess=jnp.full((), jnp.nan, jnp.float32),
            bad_refreshes=jnp.zeros((), jnp.int32),
            first_bad=jnp.zeros((), jnp.int32),
        )

    def refresh_fn(state: MCMCState) -> MCMCState:
        m, args, kwargs = inputs(state.history, size_of(state))
        struct = _structure(m, args, kwargs)
        key, k_run = jax.random.split(jax.random.wrap_key_data(state.key))

        def potential(flat):
            return potential_energy(m, args, kwargs, _unravel(struct, flat))

        init_kernel, sample_kernel = hmc(potential, algo="NUTS")

        def chain(k, z0, step, inv_mass):
            hs = init_kernel(z0, n_warmup, step_size=step, inverse_mass_matrix=inv_mass,
                             adapt_step_size=True, adapt_mass_matrix=cfg.adapt_mass_matrix,
                             target_accept_prob=cfg.target_accept, max_tree_depth=cfg.max_tree_depth, rng_key=k)

            def draw(s, _):
                s = sample_kernel(s)
                return s, (s.z, s.diverging, s.accept_prob, s.num_steps)

            # One scan over warmup and sampling (one traced copy of the NUTS kernel, half the
            # compile time of two loops); the warmup outputs are dropped.
            hs, out = lax.scan(draw, hs, None, length=n_warmup + n_samples)
            return hs.z, hs.adapt_state.step_size, jax.tree.map(lambda x: x[n_warmup:], out)

        z, step, (zs, div, acc, steps) = jax.vmap(chain)(
            jax.random.split(k_run, n_chains), state.position, state.step_size, state.inverse_mass)

        def constrain(flat):
            vals = constrain_fn(m, args, kwargs, _unravel(struct, flat), return_deterministic=True)
            return {name: jnp.asarray(vals[name], jnp.float32) for name in struct.keep}

        samples = jax.vmap(jax.vmap(constrain))(zs)
        # Warm start of the next refresh: the (regularized, as in NumPyro's windows) variance of
        # this refresh's unconstrained draws, pooled over chains.
        pooled = zs.reshape(-1, struct.size)
        n_pool = pooled.shape[0]
        var = jnp.var(pooled, axis=0)
        inv_mass = (n_pool / (n_pool + 5.0)) * var + 1e-3 * (5.0 / (n_pool + 5.0))
        new = (samples, z.astype(jnp.float32), step.astype(jnp.float32),
               jnp.broadcast_to(inv_mass, state.inverse_mass.shape).astype(jnp.float32))
        # A refresh that produced non-finite values (numerical failure) keeps the previous samples
        # and warm start rather than poisoning every later round; its statistics are still recorded.
        finite = jnp.all(jnp.isfinite(zs)) & jnp.all(jnp.isfinite(step)) & jnp.all(inv_mass > 0)
        samples, position, step_size, inverse_mass = jax.tree.map(
            lambda a, b: jnp.where(finite, a, b), new, (state.samples, state.position, state.step_size,
                                                        state.inverse_mass))
        rhat, ess = split_rhat_ess(zs)
        bad = ~finite | (rhat >= cfg.max_rhat) | (ess < cfg.min_ess) | jnp.any(div)
        return state._replace(
            samples=samples,
            position=position,
            step_size=step_size,
            inverse_mass=inverse_mass,
            key=jax.random.key_data(key),
            refreshes=state.refreshes + 1,
            diverging=div,
            accept_prob=acc.astype(jnp.float32),
            num_steps=steps.astype(jnp.int32),
            eta=jnp.mean(samples[draw_site], axis=(0, 1)),
            rhat=rhat,
            ess=ess,
            bad_refreshes=state.bad_refreshes + bad.astype(jnp.int32),
            first_bad=jnp.where(bad & (state.bad_refreshes == 0), state.n, state.first_bad),
        )

    def update(state: MCMCState, item: Any, reward: Any) -> MCMCState:
        n = state.n + 1
        state = state._replace(history=history.append(state.history, item, reward), n=n,
                               key=_mix_key(state.key, item, reward))
        due = (n % cfg.refresh_every) == 0
        # A while loop, not a cond: see the module docstring (vmap turns a batched cond into select).
        state, _ = lax.while_loop(lambda c: c[1], lambda c: (refresh_fn(c[0]), jnp.zeros_like(c[1])), (state, due))
        return state

    def flat_draws(state: MCMCState) -> jax.Array:
        x = state.samples[draw_site]
        return x.reshape((-1, *x.shape[2:]))

    def sample(key: jax.Array, state: MCMCState) -> jax.Array:
        x = flat_draws(state)
        return x[jax.random.randint(key, (), 0, x.shape[0])]

    def mean(state: MCMCState) -> jax.Array:
        return jnp.mean(flat_draws(state), axis=0)

    def variance(state: MCMCState) -> jax.Array:
        return jnp.var(flat_draws(state), axis=0)

    return _Engine(init, update, refresh_fn, sample, mean, variance)


def refresh(posterior: Posterior | LinearPosterior, state: MCMCState) -> MCMCState:
    """Run one NUTS refresh now (outside the ``refresh_every`` schedule), e.g. at the end of a run.

    Jitted (compiled once per posterior family and state shape); ``state`` is one run's state or,
    vmapped by the caller, several.
    """
    fn = getattr(posterior.update, "_mcmc_refresh", None)
    if fn is None or not is_mcmc_state(state):
        raise TypeError("refresh needs an MCMC-fallback posterior and its MCMCState")
    return fn(state)


def stored_draws(state: MCMCState) -> dict[str, np.ndarray]:
    """The stored samples as numpy arrays ``[num_chains, num_samples, ...]`` (one run's state)."""
    if not is_mcmc_state(state):
        raise TypeError(f"stored_draws needs an MCMCState, got {type(state).__name__}")
    return {k: np.asarray(v) for k, v in state.samples.items()}


def _settings_params(cfg: NUTSSettings) -> dict[str, Any]:
    return {f"mcmc_{k}": v for k, v in asdict(cfg).items()}


@python_only("posterior", "it takes a NumPyro model function")
def mcmc_posterior(
    model: Callable,
    *,
    history: History,
    name: str = "mcmc",
    reference_model: Callable | None = None,
    params: dict[str, Any] | None = None,
    rewards: str | None = None,
    **settings: Any,
) -> Posterior:
    """A per-arm posterior family refreshed by NUTS (the MCMC fallback).

    ``fairx_ts(posterior, merit)``, ``bf_ts(beta, merit, posterior)`` and the other TS policies
    use it unchanged: ``update`` appends to the history and refreshes every ``refresh_every``
    observations, ``sample`` returns one stored draw of ``mu [K]`` chosen at random.

    Parameters
    ----------
    model : callable
        NumPyro model called with the history's inputs (see :func:`arm_counts`,
        :func:`arm_buffer`); it must have a site ``"mu"`` ``[K]`` (sample or deterministic),
        the arms' mean rewards. The observed site must be masked by ``mask`` for buffers.
    history : History
        :func:`arm_counts` (Bernoulli likelihoods, exact) or :func:`arm_buffer` (any likelihood).
    name : str
        Family name (result metadata).
    reference_model : callable, optional
        The ``Posterior.model`` reference ``model(arms, rewards=None, *, n_arms)``; defaults to
        ``model`` itself for :func:`arm_buffer` histories.
    params : dict, optional
        Extra JSON-friendly hyper-parameters for metadata.
    rewards : {"binary", "real"}, optional
        The rewards the likelihood describes (:mod:`bayesfair.core.compat`); default ``"binary"`` for
        :func:`arm_counts` (a binomial likelihood) and ``"real"`` for buffers.
    **settings
        :class:`NUTSSettings` fields (``refresh_every``, ``num_warmup``, ``num_samples``,
        ``num_chains``, ``max_tree_depth``, ``target_accept``, ``adapt_mass_matrix``,
        ``init_radius``, ``init_step_size``, ``seed``, ``max_rhat``, ``min_ess``).
    """
    if not callable(model):
        raise TypeError(f"model must be a NumPyro model (a callable), got {model!r}")
    if not isinstance(history, History):
        raise TypeError(f"history must be a bayesfair History (arm_counts(), arm_buffer(C)), got {history!r}")
    if history.name == "context_buffer":
        raise ValueError("context_buffer is for linear models: use logistic_linear_mcmc")
    if rewards is None:
        rewards = "binary" if history.name == "arm_counts" else "real"
    if rewards not in ("binary", "real"):
        raise ValueError(f"rewards must be 'binary' or 'real', got {rewards!r}")
    cfg = NUTSSettings.create(**settings)
    eng = _engine(model, history, "mu", cfg)
    if reference_model is None:
        if history.name != "arm_buffer":
            raise ValueError("give reference_model=model(arms, rewards=None, *, n_arms) for a counts history")
        reference_model = model

    def init(size):
        return eng.init(init_size(size, "n_arms"))

    def update(state, obs: Outcome):
        return eng.update(state, obs.arm, obs.reward)

    update._mcmc_refresh = jax.jit(eng.refresh)
    all_params = {**(params or {}), **history.params, **_settings_params(cfg)}
    return Posterior(name, init, update, eng.sample, eng.mean, eng.variance, reference_model, all_params,
                     rewards)


# --------------------------------------------------------------------------- Beta-Bernoulli via MCMC


@python_only("posterior", "an MCMC-fallback family: its NUTS refresh settings are a Python NUTSSettings "
                          "object (bayesfair.posteriors.NUTSSettings)")
def mcmc_beta_bernoulli(a0: float = 1.0, b0: float = 1.0, *, capacity: int | None = None,
                        **settings: Any) -> Posterior:
    """The Beta-Bernoulli model run through the MCMC fallback (for validating the fallback).

    mu_a ~ Beta(a0, b0), r | a ~ Bernoulli(mu_a): the model of :func:`beta_bernoulli`, but its
    posterior is refreshed by NUTS instead of the closed form. ``capacity=None`` conditions on
    per-arm counts (a binomial likelihood, exact); an int uses a masked buffer of that many
    observations with the per-observation Bernoulli likelihood (the generic path).
    """
    a0 = finite_float("a0", a0)
    b0 = finite_float("b0", b0)
    if a0 <= 0 or b0 <= 0:
        raise ValueError(f"a0 and b0 must be > 0, got a0={a0}, b0={b0}")

    def reference(arms, rewards=None, *, n_arms: int, mask=None) -> None:
        import numpyro
        import numpyro.distributions as dist
        from numpyro.handlers import mask as mask_handler

        with numpyro.plate("arm", n_arms):
            mu = numpyro.sample("mu", dist.Beta(a0, b0))
        with numpyro.plate("obs", arms.shape[0]), mask_handler(mask=True if mask is None else mask):
            numpyro.sample("r", dist.Bernoulli(probs=mu[arms]), obs=rewards)

    def counts(successes, trials) -> None:
        import numpyro
        import numpyro.distributions as dist

        with numpyro.plate("arm", successes.shape[0]):
            mu = numpyro.sample("mu", dist.Beta(a0, b0))
            numpyro.sample("r", dist.Binomial(total_count=trials, probs=mu), obs=successes)

    hist = arm_counts() if capacity is None else arm_buffer(capacity)
    model = counts if capacity is None else reference
    return mcmc_posterior(model, history=hist, name="mcmc_beta_bernoulli", reference_model=reference,
                          params={"a0": a0, "b0": b0}, rewards="binary", **settings)


# --------------------------------------------------------------------------- logistic-linear


def logistic_merit(merit: Merit) -> Merit:
    """``f(sigmoid(z))``: a merit of the mean reward, applied to a logit.

    FairX-LinTS computes pi_t = f(theta . x) / sum f(theta . x'); with a logistic-linear
    posterior ``theta . x`` is the logit of the mean reward, so pass this composite merit to
    :func:`~bayesfair.policies.linear.fairx_lints` and the policy plays
    f(sigmoid(theta . x)) / sum f(sigmoid(theta . x')). The simulator's fairness metrics keep
    using ``merit`` on the environment's mean rewards. gamma stays f's floor on its domain;
    the Lipschitz constant is L / 4 (sigmoid' <= 1/4); the domain is the logit interval of
    ``merit.domain`` clipped to [1e-6, 1 - 1e-6].
    """
    merit = resolve_merit(merit)
    lo = min(max(merit.domain[0], 1e-6), 1 - 1e-6)
    hi = min(max(merit.domain[1], 1e-6), 1 - 1e-6)
    log_fn = None
    if merit.log_fn is not None:
        inner_log = merit.log_fn
        log_fn = lambda z: inner_log(jax.nn.sigmoid(z))
    fn = merit.fn
    return Merit(
        fn=lambda z: fn(jax.nn.sigmoid(z)),
        log_fn=log_fn,
        label=f"{merit.label}(sigmoid)",
        gamma=merit.gamma,
        lipschitz=merit.lipschitz / 4.0,
        domain=(math.log(lo / (1 - lo)), math.log(hi / (1 - hi))),
        params={**merit.params, "link": "logistic"},
    )


@python_only("posterior", "an MCMC-fallback family: its NUTS refresh settings are a Python NUTSSettings "
                          "object (bayesfair.posteriors.NUTSSettings)")
def logistic_linear_mcmc(prior_mean: float = 0.0, prior_var: float = 1.0, *, capacity: int = 2048,
                         **settings: Any) -> LinearPosterior:
    """Bayesian logistic regression for binary rewards, refreshed by NUTS (the MCMC fallback).

    theta ~ N(m0, v0 I), r | x ~ Bernoulli(sigmoid(x . theta)). A
    :class:`~bayesfair.posteriors.linear.LinearPosterior`, so FairX-LinTS (and LinTS) use it
    unchanged: ``sample`` returns one stored draw of theta ``[d]``. Use it with
    ``fairx_lints(logistic_linear_mcmc(...), logistic_merit(merit))`` so the fair policy is
    built from the mean reward sigmoid(theta . x), not from the logit.

    The history is a ring buffer of the last ``capacity`` (context, reward) pairs
    (:func:`context_buffer`); each gradient costs O(capacity * d).

    Parameters
    ----------
    prior_mean : float
        m0, the prior mean of every coordinate.
    prior_var : float
        v0 > 0.
    capacity : int
        Buffer size (>= horizon for the exact posterior).
    **settings
        :class:`NUTSSettings` fields.
    """
    m0 = finite_float("prior_mean", prior_mean)
    v0 = finite_float("prior_var", prior_var)
    if v0 <= 0:
        raise ValueError(f"prior_var must be > 0, got {v0}")
    cfg = NUTSSettings.create(**settings)
    hist = context_buffer(capacity)

    def model(X, y=None, *, mask=None) -> None:
        import numpyro
        import numpyro.distributions as dist
        from numpyro.handlers import mask as mask_handler

        X = jnp.asarray(X)
        theta = numpyro.sample("theta", dist.Normal(jnp.full((X.shape[1],), m0), math.sqrt(v0)).to_event(1))
        with numpyro.plate("obs", X.shape[0]), mask_handler(mask=True if mask is None else mask):
            numpyro.sample("y", dist.Bernoulli(logits=X @ theta), obs=y)

    eng = _engine(model, hist, "theta", cfg)

    def init(size):
        return eng.init(init_size(size, "n_features"))

    def update(state, obs: Outcome):
        return eng.update(state, obs.x, obs.reward)

    update._mcmc_refresh = jax.jit(eng.refresh)

    def cov(state: MCMCState) -> jax.Array:
        x = state.samples["theta"].reshape(-1, state.samples["theta"].shape[-1])
        xc = x - jnp.mean(x, axis=0)
        return xc.T @ xc / x.shape[0]

    params = {"prior_mean": m0, "prior_var": v0, "link": "logistic", **hist.params, **_settings_params(cfg)}
    return LinearPosterior("logistic_linear_mcmc", init, update, eng.sample, eng.mean, cov, eng.variance,
                           model, params, rewards="binary")
