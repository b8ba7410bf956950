"""The simulator: one loop over rounds (a ``fori_loop`` per chunk), vmapped over runs, run in chunks.

Design (see docs/developer/design.md):

- Every run has its own keys; round t of run r uses ``fold_in(key_r, t)`` for the environment
  and for the policy, so the numbers do not depend on the chunk size, a resumed run equals an
  uninterrupted one, and every policy sees the same environment draws (common random numbers).
- A chunk of ``chunk_size`` rounds is one jitted call. Inside it the metrics accumulate in a
  float32 accumulator that starts at zero, with a compensation term per sum (Neumaier's
  compensated summation, :func:`bayesfair.simulation.metrics.update_acc`; pull counts are exact int32
  sums instead, :func:`bayesfair.simulation.metrics.compensated`), and the accumulator is copied
  into a small buffer at the rounds of the checkpoint grid (a ``lax.cond`` on an unbatched flag,
  so it costs nothing on other rounds). The host adds the chunk's values to float64 running
  totals. Memory is O(R * K * checkpoints), independent of the horizon; the error of a sum is
  about float32 precision relative to the chunk's sum, whatever the chunk size.
- Runs are sharded over the host's CPU devices (``jax.shard_map``) when there are several (see
  :func:`bayesfair.set_host_devices`), which uses every core for the independent runs.
- Compilation is paid once: the jitted chunk functions of recent calls are kept in process (keyed
  by everything that determines their trace, :mod:`bayesfair.core._compile`), and the compiled programs
  in JAX's persistent cache on disk (on by default; ``BAYESFAIR_NO_COMPILE_CACHE=1`` opts out).
  The policies of a study are compiled concurrently before the first round (tracing one at a
  time, XLA's compilation in parallel threads; ``BAYESFAIR_SERIAL_COMPILE=1`` compiles each just
  before its first chunk instead). Compilation is timed, and the progress bar's rate and ETA
  leave it out.
"""

from __future__ import annotations

import functools
import math
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Literal

from bayesfair.core import (
    _memory,  # read at call time: the memory available now
    _random,
    _signals,
)
from bayesfair.core._compile import TraceCache, enable_persistent_cache
from bayesfair.core._memory import NO_CHECK_VARIABLE, format_bytes
from bayesfair.core._validate import MAX_HORIZON, MAX_RUNS, positive_int
from bayesfair.core._validate import as_key as _as_key
from bayesfair.core.compat import check_policy_fits
from bayesfair.core.merit import Merit, resolve_merit
from bayesfair.environments.base import Environment, check_instances, reset_run, run_means
from bayesfair.environments.prior import check_prior_match
from bayesfair.policies.base import Policy, check_select
from bayesfair.posteriors.mcmc import warn_failed_refreshes
from bayesfair.simulation import results as io
from bayesfair.simulation.metric_parts import (
    Metric,
    RoundData,
    SpecContext,
    check_components,
    collect_specs,
    default_metrics,
    policy_track,
    resolve_floors,
)
from bayesfair.simulation.metrics import MIN, SUM, MetricSpec, acc_value, init_acc, update_acc

__all__ = ["simulate", "checkpoint_grid", "RunCarry", "SimulationOutput", "SimulationError", "as_key",
           "MAX_HORIZON", "wait_interruptibly", "check_study", "run_means", "estimate_memory", "check_memory",
           "MemoryEstimate", "StudyMemoryError"]

_MAX_SLOTS = 64  # checkpoints recorded per chunk call (a chunk is cut short if it would hold more)
_NO_ROUND = np.iinfo(np.int32).max
_SUM_TOL = 1e-3  # |sum_a pi_t(a) - 1| above this is reported as an invalid selection distribution
# What the rounds are checked for (RunCarry.invalid keeps the first failing round of each, per run; on
# a tie the first listed is reported): the action is an arm of the round, pi_t is a probability
# vector and the reward is finite, pi_t gives the action a positive probability.
_CHECKS = ("action", "distribution", "support")
_FNS = TraceCache(maxsize=16)  # jitted (init, chunk) functions of recent calls, see _chunk_fns


class SimulationError(RuntimeError):
    """A policy played an invalid round during a simulation: an action that is no arm, a selection
    distribution that is not a probability vector or puts no mass on the action, a non-finite reward
    or metric."""


class RunCarry(NamedTuple):
    """Everything a run carries from round to round."""

    policy_state: Any
    env_params: Any
    env_key: jax.Array
    policy_key: jax.Array
    acc: dict[str, jax.Array]
    metric_state: tuple = ()  # one state per metric component (None for stateless ones)
    invalid: jax.Array | None = None  # int32 [len(_CHECKS)]: first round failing each check (_NO_ROUND if none)


class SimulationOutput(NamedTuple):
    """Raw simulator output for one policy (numpy arrays on the checkpoint grid)."""

    values: dict[str, np.ndarray]  # name -> [R, P, *spec.shape] (float64; int64 for running minima)
    specs: tuple[MetricSpec, ...]
    seconds: float


def as_key(key: Any) -> jax.Array:
    """Accept a JAX key or an integer seed in [0, 2**32 - 1] (integers only at the edges;
    :func:`bayesfair.core._validate.as_key`)."""
    return _as_key(key)


def checkpoint_grid(horizon: int, n: int = 100) -> np.ndarray:
    """About ``n`` checkpoint rounds in [1, T]: half log-spaced, half evenly spaced, T included.

    Examples
    --------
    >>> import bayesfair as bf
    >>> bf.checkpoint_grid(1000, 5).tolist()
    [1, 333, 667, 1000]
    """
    horizon = positive_int("horizon", horizon)
    n = positive_int("n", n)
    if n - n // 2 >= horizon:  # the evenly spaced half alone hits every round: the grid is 1..T
        return np.arange(1, horizon + 1, dtype=np.int64)
    logs = np.geomspace(1, horizon, max(n // 2, 1))
    lins = np.linspace(horizon / max(n - n // 2, 1), horizon, max(n - n // 2, 1))
    grid = np.unique(np.clip(np.round(np.concatenate([logs, lins])).astype(np.int64), 1, horizon))
    return grid if grid[-1] == horizon else np.append(grid, horizon)


def _validate_checkpoints(checkpoints: Any, horizon: int) -> np.ndarray:
    if checkpoints is None:
        return checkpoint_grid(horizon)
    arr = np.asarray(checkpoints)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"checkpoints must be a non-empty 1-d sequence of rounds, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise TypeError("checkpoints must be integer rounds")
    if arr.min() < 1 or arr.max() > horizon:
        raise ValueError(f"checkpoints must be rounds in [1, horizon={horizon}], got [{arr.min()}, {arr.max()}]")
    arr = np.unique(arr)
    return arr if arr[-1] == horizon else np.append(arr, horizon)


def _n_shards(runs: int, devices: int | None) -> int:
    available = jax.local_device_count()
    want = available if devices is None else positive_int("devices", devices)
    return math.gcd(runs, min(want, available))


def _mesh(n_shards: int):
    return jax.make_mesh((n_shards,), ("runs",), devices=jax.local_devices()[:n_shards])


def _shard_runs(x: Any, n_shards: int) -> Any:
    """Place arrays whose leading axis is the run axis on the run-sharded mesh."""
    if n_shards == 1:
        return x
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    return jax.device_put(x, NamedSharding(_mesh(n_shards), P("runs")))


def _distribute(fn: Callable, n_shards: int, in_specs: tuple, out_specs: Any, batched: bool = False) -> Callable:
    """vmap ``fn`` over runs (unless it is ``batched`` already), then shard the runs over
    ``n_shards`` CPU devices if > 1."""
    from jax.sharding import PartitionSpec as P

    batched = fn if batched else jax.vmap(fn, in_axes=tuple(0 if s else None for s in in_specs))
    if n_shards == 1:
        return jax.jit(batched)
    mesh = _mesh(n_shards)
    specs = tuple(P("runs") if s else P() for s in in_specs)
    return jax.jit(jax.shard_map(batched, mesh=mesh, in_specs=specs, out_specs=out_specs(P("runs")),
                                 check_vma=False))


def _member_of(rnd_groups: Any, static_member: jax.Array, n_groups: int) -> jax.Array:
    """One-hot ``[K, m]`` membership of this round's candidates."""
    if rnd_groups is None:
        return static_member
    return jax.nn.one_hot(jnp.asarray(rnd_groups, jnp.int32), n_groups, dtype=jnp.float32)


def _who(name: str | None, policy: Policy) -> str:
    """How messages name a policy: its label in the study, and its own name if that differs."""
    return f"policy {policy.label!r}" if name in (None, policy.label) else f"policy {name!r} ({policy.label})"


def _probe(env: Environment, policy: Policy, name: str | None = None) -> tuple[Any, Any, Any]:
    """One round traced (no compute): the shapes of the environment's ``Round.extra`` and the
    policy's ``info["track"]``, and which leaves of the policy state are *run-invariant* (see
    :func:`_run_invariant`). The outputs of ``select`` are checked against the documented shapes
    and dtypes here (:func:`bayesfair.policies.base.check_select`, naming the policy as ``name``),
    before anything uses them."""

    def one(env_key, policy_key, run):
        params = reset_run(env, env_key, run)
        state = policy.init(policy_key, env.spec)
        rnd = env.step(env_key, params, jnp.int32(1))
        out = policy.select(policy_key, state, rnd.obs)
        action, _, info = check_select(out, env.spec.n_arms, _who(name, policy))
        new_state = policy.update(state, rnd.obs, action, rnd.reward[action])
        return (rnd.extra, policy_track(info, state)), state, new_state

    closed, shapes = jax.make_jaxpr(one, return_shape=True)(jax.random.key(0), jax.random.key(1), jnp.int32(0))
    (extra, track), state, _ = shapes
    return extra, track, _run_invariant(closed.jaxpr, state)


_PROBES = TraceCache(maxsize=128)  # _probe's answers of recent (environment, policy) pairs (a sweep's points)


def _probe_cached(env: Environment, policy: Policy, name: str | None = None) -> tuple[Any, Any, Any]:
    """:func:`_probe`, reused for the same environment and policy (the memory estimate traces the
    round a study's first chunk function traces again)."""
    precision = jax.dtypes.canonicalize_dtype(np.float64).name
    with _TRACE_LOCK:  # tracing is Python (numpyro's handler stack is a module global): one thread at a time
        out, _ = _PROBES.get((env, policy, precision), lambda: _probe(env, policy, name))
    return out


def _specs(env: Environment, policy: Policy, metrics: Sequence[Metric],
           name: str | None = None) -> tuple[MetricSpec, ...]:
    """The metrics recorded for ``policy`` on ``env`` (they depend on its ``info["track"]`` and the
    environment's ``Round.extra``)."""
    extra_shape, track_shape, _ = _probe_cached(env, policy, name)
    ctx = SpecContext(env.spec.n_arms, env.groups.n_groups, dict(extra_shape or {}), dict(track_shape or {}))
    return collect_specs(metrics, ctx)


def _init_run(env: Environment, policy: Policy, metrics: Sequence[Metric], specs: tuple[MetricSpec, ...],
              env_key: jax.Array, policy_key: jax.Array, run: jax.Array) -> RunCarry:
    """One run's initial carry (vmapped over the runs by the study's init function)."""
    k_reset, k_env_rounds = jax.random.split(env_key)
    k_init, k_pol_rounds = jax.random.split(policy_key)
    params = reset_run(env, k_reset, run)
    states = tuple(part.init() for part in metrics)
    return RunCarry(policy.init(k_init, env.spec), params, k_env_rounds, k_pol_rounds, init_acc(specs), states,
                    jnp.full((len(_CHECKS),), _NO_ROUND, jnp.int32))


def _run_invariant(jaxpr: Any, state: Any) -> Any:
    """Mask (a pytree of bools) of the policy-state leaves that are the same in every run and every
    round: computed by ``init`` from constants only (not from the key) and passed through
    ``update`` unchanged (the same variable of the traced round).

    The simulator passes such leaves to the round unbatched (one copy for all runs, not one per
    run), so the policy's products and gathers with them are one matrix operation over the runs
    instead of a batch of per-run ones: e.g. the bi-level policies' group membership, BF-UCB
    ~12% faster. ``jaxpr`` is :func:`_probe`'s round, whose last outputs are, flattened,
    the initial state and then the updated state. The test is conservative: an output that
    depends on anything the runs differ in, or that ``update`` recomputes (even to an equal
    value), stays per run; a JAX that stopped forwarding a jitted ``update``'s unchanged outputs
    as its inputs would only make no leaf qualify (slower, never wrong)."""
    struct = jax.tree.structure(state)
    n = struct.num_leaves
    outs = jaxpr.outvars[len(jaxpr.outvars) - 2 * n:]
    dependent = set(jaxpr.invars)
    for eqn in jaxpr.eqns:
        if any(not isinstance(v, Literal) and v in dependent for v in eqn.invars):
            dependent.update(eqn.outvars)
    flags = [(isinstance(v, Literal) or v not in dependent) and v is w
             for v, w in zip(outs[:n], outs[n:], strict=True)]
    return struct.unflatten(flags)


def _build_fns(env: Environment, policy: Policy, metrics: Sequence[Metric], chunk_size: int, n_shards: int,
               record: bool = False, name: str | None = None):
    m = env.groups.n_groups
    k = env.spec.n_arms
    static_member = jnp.asarray(np.eye(m, dtype=np.float32)[np.asarray(env.groups.labels)])
    _, _, state_mask = _probe_cached(env, policy, name)
    specs = _specs(env, policy, metrics, name)
    by_name = {s.name: s for s in specs}
    init_run = functools.partial(_init_run, env, policy, metrics, specs)

    def play(c: RunCarry, t: jax.Array, with_record: bool = False):
        """One round of one run (vmapped over the runs by chunk_runs)."""
        k_env = jax.random.fold_in(c.env_key, t)
        rnd = env.step(k_env, c.env_params, t)
        action, probs, info = policy.select(jax.random.fold_in(c.policy_key, t), c.policy_state, rnd.obs)
        if env.pull is not None and not with_record:  # the pulled arm's draw only (rnd.reward is then dead code)
            reward = env.pull(k_env, c.env_params, t, action)
        else:
            reward = rnd.reward[action]
        state = policy.update(c.policy_state, rnd.obs, action, reward)
        member = _member_of(rnd.obs.groups, static_member, m)
        view = RoundData(probs.astype(jnp.float32), rnd.mean.astype(jnp.float32), action,
                         jnp.asarray(reward, jnp.float32), member, rnd.extra or {}, policy_track(info, state))
        states, terms = [], {}
        for part, st in zip(metrics, c.metric_state, strict=True):
            st, part_terms = part.update(st, view)
            states.append(st)
            terms.update(part_terms)
        acc = update_acc(c.acc, terms, by_name)
        # The _CHECKS: the action is an arm of the round; pi_t is a probability vector (the sum is
        # non-finite iff some pi_t(a) is) and the reward is finite; pi_t(action) > 0. The first
        # round that fails each is kept per run and reported by _check_valid after the chunk.
        total = jnp.sum(probs)
        ok = jnp.stack([(action >= 0) & (action < k),
                        jnp.isfinite(total) & (jnp.min(probs) >= 0) & (jnp.abs(total - 1.0) <= _SUM_TOL)
                        & jnp.isfinite(reward),
                        probs[jnp.clip(action, 0, k - 1)] > 0])
        invalid = jnp.where(ok, c.invalid, jnp.minimum(c.invalid, t))
        c = c._replace(policy_state=state, acc=acc, metric_state=tuple(states), invalid=invalid)
        if not with_record:
            return c
        # per-round log (bayesfair.workflow.logs): the round's draw and the policy's choice
        rec = {"action": jnp.asarray(action, jnp.int32), "probs": probs, "reward": rnd.reward,
               "mean": rnd.mean, "group": jnp.argmax(member, axis=1).astype(jnp.int32),
               "extra": rnd.extra if rnd.extra is not None else {}}
        return c, rec

    def chunk_runs(carry: RunCarry, ts: jax.Array, slots: jax.Array, n_active: jax.Array):
        # The round loop over the runs' batch: each round is `play` vmapped over the runs, batched
        # as it is traced. (A vmap of the per-run loop would give the same program and numbers,
        # but the while loop's batching rule batches the round's jaxpr two or three times to find
        # which carries are batched, re-tracing the samplers' custom_vmap rules each time: tracing
        # a TS chunk takes 0.19-0.21 s this way, 0.33-0.41 s that way.) The run-invariant
        # leaves of the carry (_run_invariant) enter once (this shard's first run) and unbatched;
        # every output is per run again.
        runs_here = jax.tree.leaves(carry.env_key)[0].shape[0]
        mask = jax.tree.map(lambda _: False, carry)._replace(policy_state=state_mask)
        axes = jax.tree.map(lambda inv, _: None if inv else 0, mask, carry)
        carry = jax.tree.map(lambda inv, x: x[0] if inv else x, mask, carry)
        per_run = lambda x: jnp.broadcast_to(x, (runs_here, *x.shape))  # noqa: E731
        carry = carry._replace(acc=jax.tree.map(per_run, init_acc(specs)))
        buf = jax.tree.map(lambda x: jnp.zeros((runs_here, _MAX_SLOTS, *x.shape[1:]), x.dtype), carry.acc)
        step = jax.vmap(play, in_axes=(axes, None), out_axes=axes)
        step_rec = jax.vmap(lambda c, t: play(c, t, True), in_axes=(axes, None), out_axes=(axes, 0))

        # Only the first ``n_active`` rounds of a chunk are played (a partial chunk: the horizon or
        # the checkpoint cap ends it early). The bound is unbatched, so this is one while loop with
        # a dynamic trip count; gating each round with ``lax.cond`` instead made XLA copy the whole
        # carry (e.g. Fair-Greedy's history buffer) in and out of the branch every round.
        def body(i, cbr):
            c, b, recs = cbr
            t, slot = ts[i], slots[i]
            if record:
                c, rec = step_rec(c, t)
                recs = jax.tree.map(lambda R, v: R.at[:, i].set(v), recs, rec)
            else:
                c = step(c, t)
            b = lax.cond(slot >= 0,
                         lambda b: jax.tree.map(lambda B, v: B.at[:, slot].set(v), b, c.acc),
                         lambda b: b, b)
            return c, b, recs

        recs = None
        if record:
            shapes = jax.eval_shape(lambda c, t: step_rec(c, t)[1], carry, ts[0])
            recs = jax.tree.map(lambda s: jnp.zeros((s.shape[0], ts.shape[0], *s.shape[1:]), s.dtype), shapes)
        carry, buf, recs = lax.fori_loop(0, n_active, body, (carry, buf, recs))
        carry = jax.tree.map(lambda inv, x: per_run(x) if inv else x, mask, carry)
        if record:
            return carry, buf, recs
        return carry, buf

    init_fn = _distribute(init_run, n_shards, (True, True, True), lambda p: p)
    chunk_fn = _distribute(chunk_runs, n_shards, (True, False, False, False),
                           (lambda p: (p, p, p)) if record else (lambda p: (p, p)), batched=True)
    return init_fn, chunk_fn, specs


def _chunk_fns(env: Environment, policy: Policy, metrics: Sequence[Metric], chunk_size: int, n_shards: int,
               record: bool, name: str | None = None):
    """:func:`_build_fns`'s functions, reused from an earlier call with the same trace.

    The key holds the environment, the policy and the metric components (their functions by
    identity, their data by value: :func:`bayesfair.core._compile.trace_key`), the chunk size, the
    number of shards, the round log switch and the float precision in force, so two calls share
    jitted functions only if they trace the same program; jit itself then compiles once per input
    shape (number of runs). ``name`` (the policy's label in the study) only words the error of a
    ``select`` with outputs of the wrong shape or dtype, raised while tracing (nothing is kept then).
    """
    precision = jax.dtypes.canonicalize_dtype(np.float64).name  # float32, or float64 under enable_x64
    fns, _ = _FNS.get((env, policy, tuple(metrics), chunk_size, n_shards, record, precision),
                      lambda: _build_fns(env, policy, metrics, chunk_size, n_shards, record=record, name=name))
    return fns


class _Progress:
    """Progress of a simulation: a bar on stderr or a callback after every chunk.

    The rate and ETA count simulation time only: the seconds spent compiling (reported through
    :meth:`compiled`) are left out, so the first chunk of a policy does not inflate the ETA.
    """

    def __init__(self, enabled: bool | Callable[[dict], None], total: int):
        self.cb = enabled if callable(enabled) else None
        self.enabled = bool(enabled)
        self.total = total
        self.done = 0
        self.t0 = time.perf_counter()
        self.last_print = 0.0
        self.compile_seconds = 0.0

    def compiled(self, seconds: float) -> None:
        """Exclude ``seconds`` of compilation from the rate and the ETA."""
        self.compile_seconds += seconds

    def __call__(self, rounds: int, runs: int, policy: str) -> None:
        if not self.enabled:
            return
        self.done += rounds * runs
        elapsed = time.perf_counter() - self.t0 - self.compile_seconds
        rate = self.done / elapsed if elapsed > 0 else float("nan")
        eta = (self.total - self.done) / rate if rate > 0 else float("nan")
        info = {"done": self.done, "total": self.total, "rate": rate, "eta": eta, "policy": policy,
                "compile_seconds": self.compile_seconds}
        if self.cb is not None:
            self.cb(info)
            return
        now = time.perf_counter()
        if self.done < self.total and now - self.last_print < 0.5:
            return
        self.last_print = now
        frac = self.done / self.total
        bar = "#" * int(30 * frac)
        sys.stderr.write(f"\r[{bar:<30}] {100 * frac:5.1f}%  {policy:<12} "
                         f"{rate:,.0f} run-rounds/s  ETA {eta:6.1f}s ")
        if self.done >= self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    def skip(self, rounds: int, runs: int) -> None:
        """Rounds restored from a resume file: not counted as done, so the rate stays honest."""
        self.total -= rounds * runs


_TRACE_LOCK = threading.RLock()


def _prepare(env, policy, metrics, runs, chunk_size, n_shards, env_keys, pol_keys, record, compile_chunk=False,
             name=None):
    """A policy's jitted functions, its initial run carry and (``compile_chunk``) its compiled chunk."""
    with _TRACE_LOCK:  # tracing is Python (e.g. numpyro's handler stack is a module global): one thread at a time
        init_fn, chunk_fn, specs = _chunk_fns(env, policy, metrics, chunk_size, n_shards, record, name)
        run_index = jnp.arange(runs, dtype=jnp.int32)
        carry = init_fn(_shard_runs(env_keys, n_shards), _shard_runs(pol_keys, n_shards),
                        _shard_runs(run_index, n_shards))
        lowered = chunk_fn.lower(carry, *_chunk_args(chunk_size)) if compile_chunk else None
    if lowered is not None:
        lowered.compile()  # XLA, without the GIL or the lock: overlaps the next policy's tracing
    return init_fn, chunk_fn, specs, carry


_SHARED_CHUNK = 1024  # compiled chunk length kept for horizons shorter than the chunk (see _compiled_chunk)


def _compiled_chunk(chunk_size: int, horizon: int, record: bool) -> int:
    """The length of a chunk call's round arrays, which is a shape of the compiled program.

    Only the first ``n_active`` rounds of a chunk are played (a dynamic loop bound), so a horizon
    shorter than the chunk does not need a shorter program: with ``chunk_size <= 1024`` the
    length stays ``chunk_size`` whatever the horizon, and studies that differ only in their
    horizon share one compiled chunk (in process and in the persistent cache). The padding is two
    int32 vectors. Longer chunks, and chunks with the round log (whose ``[R, chunk, ...]``
    records are allocated whole), are cut to the horizon as before. The rounds played, and so
    the numbers, are the same either way.
    """
    if record or chunk_size > _SHARED_CHUNK:
        return min(chunk_size, horizon)
    return chunk_size


def _chunk_args(chunk_size: int) -> tuple[np.ndarray, np.ndarray, np.int32]:
    """Arguments of the right shapes for compiling a chunk function (rounds, checkpoint slots, active count)."""
    return np.arange(1, chunk_size + 1, dtype=np.int32), np.full(chunk_size, -1, np.int32), np.int32(chunk_size)


def _compile_together(env, policies, metrics, runs, chunk_size, n_shards, env_keys, pol_keys, record) -> float:
    """Compile every policy's chunk function concurrently, one thread per policy up to the CPU count.

    Tracing and lowering run one policy at a time, under a lock (Python tracing is not thread-safe
    for every model library: numpyro's handler stack is a module global); XLA's compilation (most
    of a cold compile) runs outside the lock and releases the GIL, so on a multi-core host one
    policy compiles while the next one traces. The compiled programs land in JAX's in-process
    caches (and the persistent cache), where :func:`_run_policy`'s own compile step then finds
    them. Returns the wall seconds spent (0 when it does nothing). ``BAYESFAIR_SERIAL_COMPILE=1``
    turns this off (each policy then compiles just before its first chunk, as with one policy).
    """
    import os
    from concurrent.futures import ThreadPoolExecutor

    workers = min(len(policies), os.cpu_count() or 1)
    if workers < 2 or os.environ.get("BAYESFAIR_SERIAL_COMPILE", "0").lower() not in ("", "0", "false", "no"):
        return 0.0
    t0 = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bayesfair-compile")
    try:
        # each task drops its initial carry once compiled (_run_policy makes its own): kept in the futures,
        # every policy's run state would be in memory at once
        futures = [pool.submit(lambda pol=pol, name=name: _prepare(env, pol, metrics, runs, chunk_size, n_shards,
                                                                   env_keys, pol_keys, record, True, name)[:3])
                   for name, pol in policies.items()]
        for f in futures:
            while not f.done():  # poll, so that Ctrl-C and the CLI's SIGTERM handler stay responsive
                time.sleep(0.005)
            f.result()  # re-raise a tracing or compilation error here, in the caller's thread
    finally:  # on an error or an interrupt: return at once, cancel the policies not started yet
        pool.shutdown(wait=False, cancel_futures=True)
    return time.perf_counter() - t0


def _run_policy(env, policy, metrics, horizon, runs, grid, chunk_size, n_shards, env_keys, pol_keys, progress,
                name=None, checkpointer=None, round_log=None):
    t_compile = time.perf_counter()
    init_fn, chunk_fn, specs, carry = _prepare(env, policy, metrics, runs, chunk_size, n_shards, env_keys, pol_keys,
                                               round_log is not None, name=name)
    compile_seconds = time.perf_counter() - t_compile
    compiled = False
    n_ckpt = grid.size
    values = {s.name: np.zeros((runs, n_ckpt, *s.shape), np.int64 if s.combine == MIN else np.float64)
              for s in specs}
    totals = {s.name: (np.full((runs, *s.shape), np.iinfo(np.int64).max, np.int64) if s.combine == MIN
                       else np.zeros((runs, *s.shape))) for s in specs}
    t_start = time.perf_counter()
    t0, ci = 1, 0  # next round to play, next checkpoint index
    if checkpointer is not None:  # resume from the last saved chunk boundary (bayesfair.workflow.persist)
        saved = checkpointer.restore(name, carry, values, totals)
        if saved is not None:
            carry, values, totals, t0, ci, seconds_before = saved
            carry = _shard_runs(carry, n_shards)
            t_start -= seconds_before
            if hasattr(progress, "skip"):
                progress.skip(t0 - 1, runs)

    def finish(job):
        """The host side of a dispatched chunk: wait for it, check it, add its checkpoints to the
        float64 totals, report progress, log and save. Runs while the next chunk computes."""
        c, buf, recs, first, last, n, at = job
        wait_interruptibly(buf)
        if recs is not None:
            round_log(name, first, last, jax.device_get(recs))
        # one read-back; the checkpoint buffer (all its slots) only if the chunk recorded any
        invalid, acc, buf = jax.device_get((c.invalid, c.acc, buf if n else None))
        _check_valid(name or policy.label, policy, invalid, first, last, env.spec.n_arms)
        recorded = {k: v[:, :n] for k, v in buf.items()} if n else None
        for s in specs:
            before = totals[s.name]
            if n:  # the chunk's checkpoints, on top of the totals before it
                vals = acc_value(recorded, s)
                values[s.name][:, at:at + n] = (before[:, None] + vals if s.combine == SUM else
                                                np.minimum(before[:, None], vals) if s.combine == MIN else vals)
            end = acc_value(acc, s)
            if s.combine == SUM:  # cumulative sums only: a tracked latest value (LAST) may be NaN by design
                _check_finite_metric(name or policy.label, policy, s.name, end, first, last)
                totals[s.name] = before + end
            elif s.combine == MIN:
                totals[s.name] = np.minimum(before, end)
        progress(last - first + 1, runs, name or policy.label)  # the study's label of the policy
        if checkpointer is not None:
            checkpointer.chunk_done(name, c, values, totals, last + 1, at + n, time.perf_counter() - t_start)

    # One chunk ahead: chunk i + 1 is dispatched (its input is chunk i's carry, still on the
    # device) before the host side of chunk i runs, so the device does not idle while the host reads
    # back, sums and saves; results, checks and saves are chunk i's, in order, as before.
    pending = None
    in_main_thread = threading.current_thread() is threading.main_thread()
    while t0 <= horizon:
        if not in_main_thread and _signals.stop_requested():  # a signal reaches the main thread only
            raise _signals.StopRequested(f"policy {name or policy.label!r} stopped at round {t0:,}: the process was "
                                         "interrupted")
        t_end = min(t0 + chunk_size - 1, horizon)
        # Cut the chunk so it holds at most _MAX_SLOTS checkpoints.
        in_chunk = grid[ci:][grid[ci:] <= t_end]
        if in_chunk.size > _MAX_SLOTS:
            t_end = int(in_chunk[_MAX_SLOTS - 1])
            in_chunk = in_chunk[:_MAX_SLOTS]
        ts = np.arange(t0, t0 + chunk_size, dtype=np.int32)
        n_active = np.int32(t_end - t0 + 1)  # the chunk's rounds t0..t_end are played, the rest not
        slots = np.full(chunk_size, -1, np.int32)
        slots[in_chunk - t0] = np.arange(in_chunk.size, dtype=np.int32)
        if not compiled:  # compile ahead of the first chunk (timed; the jitted call below then reuses it)
            t_compile = time.perf_counter()
            chunk_fn.lower(carry, *_chunk_args(chunk_size)).compile()
            compile_seconds += time.perf_counter() - t_compile
            if hasattr(progress, "compiled"):
                progress.compiled(compile_seconds)
            compiled = True
        recs = None
        if round_log is not None:
            carry, buf, recs = chunk_fn(carry, ts, slots, n_active)
        else:
            carry, buf = chunk_fn(carry, ts, slots, n_active)
        job = (carry, buf, recs, t0, t_end, in_chunk.size, ci)
        ci += in_chunk.size
        t0 = t_end + 1
        if pending is not None:
            finish(pending)
        pending = job
    if pending is not None:
        finish(pending)
    return SimulationOutput(values, specs, time.perf_counter() - t_start), carry


_WARM_IMPORTS: threading.Thread | None = None


def _warm_result_imports() -> None:
    """Import xarray in a daemon thread (once per process) while the study compiles and runs.

    The result Dataset needs xarray, pandas and, on its first Variable, whatever array libraries
    xarray probes (dask, when installed): ~0.4-0.8 s of imports in a new process, which otherwise
    all come after the simulation. XLA compiles and runs without the GIL, so most of the import
    overlaps them (a fresh process, FairX-TS K = 10, R = 100, T = 2e4, warm compile cache: the call
    2.23 -> 2.0 s; the run itself is ~0.35 s slower, as the import takes CPU from it on 2 cores).
    :func:`simulate` joins the thread before building the Dataset; an import error here is
    ignored (the Dataset's own import then raises it where the user sees it).
    """
    global _WARM_IMPORTS
    if _WARM_IMPORTS is not None or "xarray" in sys.modules:
        return

    def work():
        try:
            import xarray

            xarray.Variable(("x",), np.zeros(1))  # the first Variable probes the duck-array libraries
        except Exception:  # noqa: BLE001 (reported by the main thread's own import)
            pass

    _WARM_IMPORTS = threading.Thread(target=work, name="bayesfair-imports", daemon=True)
    _WARM_IMPORTS.start()


def _join_warm_imports() -> None:
    if _WARM_IMPORTS is not None:
        _WARM_IMPORTS.join()


def wait_interruptibly(tree: Any, max_poll: float = 0.05) -> None:
    """Block until every array of ``tree`` is computed, letting signal handlers run meanwhile.

    JAX dispatches a jitted chunk asynchronously; waiting on its result inside
    ``block_until_ready``/``device_get`` holds the main thread in C++, where Python signal
    handlers (Ctrl-C's ``KeyboardInterrupt``, the CLI's SIGTERM handler) cannot run until the
    chunk ends. A helper thread blocks there instead and sets an event; the main thread waits on
    the event, which a signal interrupts (the handler runs at once on POSIX, elsewhere within
    ``max_poll`` seconds) and which wakes it as soon as the chunk is done. On an interrupt the
    chunk's work is discarded; an error of the computation is raised by the caller's next read
    of the arrays.

    Polling ``is_ready()`` with 2-5 ms sleeps instead would notice a finished chunk ~2.5 ms
    late on average: ~8-10% of a TS study at R = 100, whose chunks take ~16 ms. The helper is not a
    daemon thread: a process that exits (e.g. the CLI after a first Ctrl-C) waits for the chunk
    in flight instead of tearing XLA down under a thread blocked inside it, which aborted the
    process ("terminate called without an active exception"); a second signal still exits at once.
    """
    leaves = [x for x in jax.tree.leaves(tree) if hasattr(x, "is_ready")]
    if all(x.is_ready() for x in leaves):
        return
    done = threading.Event()

    def block() -> None:
        try:
            jax.block_until_ready(leaves)
        except Exception:  # noqa: BLE001 (the caller's next read of the arrays raises it in the main thread)
            pass
        finally:
            done.set()

    threading.Thread(target=block, name="bayesfair-wait").start()
    while not done.wait(max_poll):
        pass


def check_study(env: Environment, policies: Mapping[str, Policy], merit: Merit | None, key: Any, runs: int,
                metrics: Sequence[Metric] | None = None, horizon: int | None = None) -> None:
    """Before any round: every policy fits the environment's rewards (and holds ``horizon``
    rounds, for a policy of fixed capacity such as Fair-Greedy), and every metric component's
    host-side check passes (e.g. the FairX regrets: every run's arm means lie in the merit's domain,
    for multi-armed environments). ``metrics`` defaults to :func:`bayesfair.simulation.metric_parts.default_metrics`
    of ``merit``. Raises :class:`bayesfair.core.compat.IncompatibleError`."""
    enable_persistent_cache()  # the checks compile small programs (study loaders call this first)
    for name, pol in policies.items():
        check_policy_fits(pol, env, name, horizon)
    for part in default_metrics(merit) if metrics is None else metrics:
        part.check(env, key, runs)


class StudyMemoryError(SimulationError, MemoryError):
    """A study that cannot fit in this machine's memory, refused before it compiles or allocates
    (:func:`check_memory`). A :class:`SimulationError` and a :class:`MemoryError`; ``estimate``
    holds the :class:`MemoryEstimate`, ``available`` the bytes that were available."""

    def __init__(self, message: str, estimate: MemoryEstimate | None = None, available: int | None = None):
        super().__init__(message)
        self.estimate = estimate
        self.available = available


#: Bytes per row of the per-round log: its [R, T, K] float32/int32 arrays while the study runs, and
#: its DataFrame (ten columns, built per policy and then concatenated) when it is written.
_LOG_ROW_BYTES_RUN, _LOG_ROW_BYTES_FRAME = 16, 160


class MemoryEstimate(NamedTuple):
    """A study's peak memory, estimated from its shapes without allocating (:func:`estimate_memory`).

    ``peak`` is the larger of the two phases' sums, in bytes: while the rounds run (``run_terms``)
    and while the results Dataset is built and written (``result_terms``). Each term is
    ``(label, bytes, how it is counted)``; ``per_run`` splits one run's state (the largest policy's)
    into policy state, environment and metric accumulators.
    """

    peak: int
    run_terms: tuple[tuple[str, int, str], ...]
    result_terms: tuple[tuple[str, int, str], ...]
    per_run: dict[str, int]

    def describe(self, limit: int = 4) -> str:
        """The main terms, largest first: ``"checkpoint values 44.2 GiB (...), ..."``."""
        phase = self.run_terms if sum(t[1] for t in self.run_terms) >= sum(t[1] for t in self.result_terms) \
            else self.result_terms
        terms = sorted((t for t in phase if t[1] > 0), key=lambda t: -t[1])[:limit]
        return "; ".join(f"{label} {format_bytes(n)} ({how})" for label, n, how in terms)


def _nbytes(tree: Any) -> int:
    """Bytes of the arrays of a pytree of shape structs (a key counts its key data)."""
    total = 0
    for leaf in jax.tree.leaves(tree):
        if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.eval_shape(jax.random.key_data, leaf)
        total += math.prod(leaf.shape) * np.dtype(leaf.dtype).itemsize
    return total


def _run_bytes(env: Environment, policy: Policy, metrics: Sequence[Metric],
               name: str | None = None) -> tuple[dict[str, int], int, tuple]:
    """One run's carry in bytes, split into policy state, environment and metrics (accumulators,
    component states and keys); its accumulator's bytes (what a checkpoint slot holds); and the
    recorded metrics' specs. Traced with :func:`jax.eval_shape`: nothing is allocated."""
    specs = _specs(env, policy, metrics, name)
    key = jax.ShapeDtypeStruct((), jax.random.key(0).dtype)
    with _TRACE_LOCK:
        carry = jax.eval_shape(functools.partial(_init_run, env, policy, metrics, specs), key, key,
                               jax.ShapeDtypeStruct((), jnp.int32))
    parts = {"policy state": _nbytes(carry.policy_state), "environment": _nbytes(carry.env_params)}
    parts["metrics"] = _nbytes(carry) - sum(parts.values())
    return parts, _nbytes(carry.acc), specs


def estimate_memory(env: Environment, policies: Mapping[str, Policy], horizon: int, runs: int, *,
                    metrics: Sequence[Metric], checkpoints: int, log: bool = False,
                    resumable: bool = False) -> MemoryEstimate:
    """The peak memory of a study, from its shapes (``jax.eval_shape``: O(1) memory, no allocation).

    Terms, for R runs, P policies, C checkpoints:

    - run state: one run's carry (policy state, environment parameters, metric accumulators and
      keys) times R, twice for the largest policy (a chunk's input and output); ``resumable``
      (a study with a resume file): also the last carry of every policy run so far, kept for the
      file, and its host copy while the file is written;
    - checkpoint buffers: R x 64 slots of the accumulator per chunk (two in flight on the device,
      one read back);
    - checkpoint values: R x C x the recorded values (float64) of every policy, and their running totals;
    - results Dataset: the values again (stacked into the Dataset while the simulator's arrays
      still exist), the ``[R, K]`` arm means and what the metric components add
      (:meth:`~bayesfair.simulation.metric_parts.Metric.result_bytes`);
    - per-round log (``log``): P x R x T x K rows, as arrays while running and as a DataFrame at the end.

    Parameters
    ----------
    env, policies, horizon, runs
        As for :func:`simulate`.
    metrics : sequence of Metric
        The study's components (:func:`~bayesfair.simulation.metric_parts.default_metrics` for the default set).
    checkpoints : int
        Number of checkpoint rounds.
    log, resumable : bool
        With the per-round log; with a resume file (:meth:`bayesfair.workflow.study.Study.execute`).
    """
    import os

    per_policy = [_run_bytes(env, pol, metrics, name) for name, pol in policies.items()]
    carries = [sum(parts.values()) for parts, _, _ in per_policy]
    big = int(np.argmax(carries))
    n_pol, k = len(policies), env.spec.n_arms
    carry_max, carry_sum = runs * carries[big], runs * sum(carries)
    recorded = [sum(math.prod(sp.shape) for sp in specs) for _, _, specs in per_policy]
    union: dict[str, int] = {}
    for _, _, specs in per_policy:
        union.update({sp.name: math.prod(sp.shape) for sp in specs})
    values = runs * checkpoints * sum(recorded) * 8 + runs * sum(recorded) * 8
    slot = max(acc for _, acc, _ in per_policy)
    buffers = 3 * runs * _MAX_SLOTS * slot
    parallel = min(n_pol, os.cpu_count() or 1) if n_pol > 1 else 1  # _compile_together: one carry per thread
    if resumable:
        state, state_how = carry_sum + carry_max, "every policy's last state kept for the resume file, and a chunk's"
    else:
        state, state_how = max(2, parallel) * carry_max, "a chunk's input and output"
    per_run = f"{runs:,} runs x {carries[big]:,} B"
    run_terms = [
        ("run state", state, f"{per_run}: {state_how}"),
        ("resume-file copy", carry_sum if resumable else 0, f"{per_run} per policy, read back to save"),
        ("checkpoint buffers", buffers, f"{runs:,} runs x {_MAX_SLOTS} slots x {slot:,} B, 3 in flight"),
        ("checkpoint values", values, f"{n_pol} policies x {runs:,} runs x {checkpoints:,} checkpoints x "
                                      f"{max(recorded):,} values x 8 B"),
    ]
    rows = n_pol * runs * horizon * k if log else 0
    extras = runs * k * 8 + sum(part.result_bytes(env, runs, n_pol, checkpoints) for part in metrics)
    dataset = n_pol * runs * checkpoints * sum(union.values()) * 8 + extras
    result_terms = [
        ("checkpoint values", values, "the simulator's arrays, until the Dataset is built"),
        ("results Dataset", dataset, f"{len(union)} metrics of {n_pol} policies x {runs:,} runs x {checkpoints:,} "
                                     f"checkpoints, and [{runs:,} runs x {k:,} arms] arrays"),
    ]
    if rows:
        run_terms.append(("per-round log", rows * _LOG_ROW_BYTES_RUN, f"{rows:,} rows"))
        result_terms.append(("per-round log", rows * _LOG_ROW_BYTES_FRAME, f"{rows:,} rows as a DataFrame"))
    peak = max(sum(t[1] for t in run_terms), sum(t[1] for t in result_terms))
    return MemoryEstimate(int(peak), tuple(run_terms), tuple(result_terms), per_policy[big][0])


def check_memory(estimate: MemoryEstimate, what: str = "the study") -> None:
    """Raise :class:`StudyMemoryError` if ``estimate.peak`` exceeds the memory this process may
    still allocate (:func:`bayesfair.core._memory.available_memory`). Nothing is checked when
    ``BAYESFAIR_NO_MEMORY_CHECK=1`` or when the available memory cannot be read."""
    if _memory.memory_check_disabled():
        return
    avail = _memory.available_memory()
    if avail.bytes is None or estimate.peak <= avail.bytes:
        return
    raise StudyMemoryError(
        f"{what} needs about {format_bytes(estimate.peak)} of memory at its peak, more than the "
        f"{format_bytes(avail.bytes)} {avail.source}: {estimate.describe()}. Reduce the runs (studies with other "
        f"seeds add up to more runs) or what the largest terms grow with (checkpoints, arms, features), or run it "
        f"on a larger machine; {NO_CHECK_VARIABLE}=1 skips this check", estimate, avail.bytes)


def _check_valid(name: str, policy: Policy, invalid: np.ndarray, t0: int, t_end: int, n_arms: int) -> None:
    """Raise :class:`SimulationError` if a run failed one of the round checks (``_CHECKS``) in this
    chunk: the earliest failing round over the runs, and at that round the first check listed."""
    invalid = np.asarray(invalid).reshape(-1, len(_CHECKS))
    first = invalid.min(axis=1)
    bad = np.flatnonzero(first < _NO_ROUND)
    if bad.size == 0:
        return
    run = int(bad[np.argmin(first[bad])])
    t = int(first[run])
    check = _CHECKS[int(np.argmax(invalid[run] == t))]
    where = (f"at round {t:,} of run {run} ({bad.size} run(s) affected between rounds {t0:,} and {t_end:,})")
    who = _who(name, policy)
    if check == "action":
        raise SimulationError(
            f"{who} played an action outside 0..{n_arms - 1} {where}. Its select must return the index of one "
            f"of the round's {n_arms} candidates; another value pulls no arm (no pull is counted, the reward is "
            "some other arm's).")
    if check == "support":
        raise SimulationError(
            f"{who} played an arm to which its selection distribution pi_t gives probability 0 {where}. Its "
            "select must return the pi_t the action was drawn from (one-hot on the action for a deterministic "
            "choice): exposure is measured from pi_t and pulls from the actions, which would disagree.")
    raise SimulationError(
        f"{who} produced an invalid selection distribution pi_t (non-finite, negative "
        "or not summing to 1) or a non-finite reward "
        f"{where}. "
        "Its state became invalid: usually the environment's rewards do not fit the policy (e.g. a "
        "Beta-Bernoulli posterior fed rewards outside [0, 1]), a parameter overflows (a merit of huge means), or a "
        "FairX policy's merit is evaluated outside its domain (e.g. a merit defined on [0, 1] at a linear model's "
        "negative reward estimates: use one defined on all reals, such as exponential).")


# The FairX regrets' terms are computed from f(mu_t) of the round's means: they are the metrics a
# merit that is not finite at some mean (outside its domain) turns into NaN.
_MERIT_TERMS = ("fairness_regret", "reward_regret", "group_fairness_regret")


def _check_finite_metric(name: str, policy: Policy, metric: str, values: np.ndarray, t0: int, t_end: int) -> None:
    """Raise :class:`SimulationError` if a chunk's sum of a float metric is NaN or infinite.

    pi_t and the reward are checked every round (``_check_valid``); a metric term can still be
    non-finite on its own, e.g. the FairX regrets of a merit evaluated outside its domain on a
    contextual environment's means (checked against the domain before the study only for
    multi-armed environments, whose means are fixed per run). A NaN stays NaN in the float64 sums,
    so the chunk's value shows it; the message names the metric, the run and the chunk."""
    v = np.asarray(values)
    if not np.issubdtype(v.dtype, np.floating) or np.all(np.isfinite(v)):
        return
    bad = ~np.isfinite(v.reshape(v.shape[0], -1)).all(axis=1)
    run = int(np.flatnonzero(bad)[0])
    hint = ("The FairX regrets are computed from pi*_t = f(mu_t) / sum_a f(mu_a) of the study's merit f: f is not "
            "finite (or not positive) at some mean reward mu_t of this environment, i.e. the means leave the "
            "merit's domain. Use a merit defined on the environment's means (e.g. exponential), or rescale the "
            "environment" if metric in _MERIT_TERMS else
            "The metric component computed a non-finite term from the round's data.")
    raise SimulationError(
        f"metric {metric!r} of {_who(name, policy)} became non-finite (NaN or inf) in run {run} between "
        f"rounds {t0:,} and {t_end:,} ({int(bad.sum())} run(s) affected). {hint}")


def simulate(
    key: Any,
    env: Environment,
    policies: Mapping[str, Policy],
    horizon: int,
    runs: int,
    *,
    merit: Merit | None = None,
    metrics: Sequence[Metric] | None = None,
    floors: Sequence[float] | np.ndarray | None = None,
    checkpoints: Sequence[int] | np.ndarray | None = None,
    chunk_size: int = 1024,
    devices: int | None = None,
    progress: bool | Callable[[dict], None] = False,
    config: Mapping[str, Any] | None = None,
    checkpointer: Any = None,
    round_log: Callable[[str, int, int, Any], None] | None = None,
):
    """Run every policy for ``runs`` independent runs of ``horizon`` rounds.

    Parameters
    ----------
    key : jax key or int
        Master key (an int seed is turned into ``jax.random.key(seed)``).
    env : Environment
        The environment; each run draws its parameters with ``env.reset``.
    policies : mapping name -> Policy
        The compared policies; all see the same environment draws.
    horizon, runs : int
        T >= 1 rounds, R >= 1 runs.
    merit : Merit, optional
        Defines the optimal fair policy pi*_t of the FairX regrets (fairness, reward and group
        fairness regret) and the bi-level regret; without it (and without ``metrics``) those are
        not computed.
    metrics : sequence of Metric, optional
        The metric components to record (:mod:`bayesfair.simulation.metric_parts`); default
        :func:`~bayesfair.simulation.metric_parts.default_metrics` of ``merit`` and ``floors``.
    floors : float sequence, optional
        Exposure floors beta_g (one per group of ``env.groups``, each in (0, 1/m], sum < 1): the
        default components then record the exact anytime check ``anytime_slack`` = min_t (N_g,t -
        floor(beta_g t)) per group and, with a merit and a multi-armed environment, the bi-level
        regret against R*_beta(T) (Eq. 1 of the bi-level paper) with its Theorem 4 terms
        (:func:`bayesfair.simulation.metrics.bilevel_regret`). Not with ``metrics`` (a TypeError: give a
        :class:`~bayesfair.simulation.metric_parts.Floors` component instead).
    checkpoints : int sequence, optional
        Rounds at which cumulative metrics are recorded (default :func:`checkpoint_grid`);
        T is always included.
    chunk_size : int
        Rounds per jitted call (progress granularity); results do not depend on it.
    devices : int, optional
        Shard runs over at most this many CPU devices (default: all local devices).
    progress : bool or callable
        Print a progress bar to stderr, or call ``progress(info_dict)`` after each chunk
        (``done``, ``total`` run-rounds, ``rate`` and ``eta`` in seconds, ``policy`` (its key in ``policies``),
        ``compile_seconds`` so far). The rate and the ETA leave compilation out.
    config : mapping, optional
        Extra metadata stored in the results' attributes.
    checkpointer : optional
        Saves the run state at chunk boundaries and restores it (resume); see
        :class:`bayesfair.workflow.persist.ResumeStore`. ``restore(name, carry, values, totals)`` returns
        ``None`` or ``(carry, values, totals, next_round, next_checkpoint, seconds)``;
        ``chunk_done(name, carry, values, totals, next_round, next_checkpoint, seconds)`` is called
        after every chunk. Results equal an uninterrupted run's exactly (same chunk boundaries).
    round_log : callable, optional
        ``round_log(policy_name, first_round, last_round, records)`` after every chunk, with
        ``records`` a dict of ``[R, chunk_size, ...]`` arrays (``action``, ``probs``, ``reward``,
        ``mean``, ``group``, ``extra``; rows past ``last_round`` are padding); see
        :class:`bayesfair.workflow.logs.RoundLog`. Costs O(R K) host memory per round: small studies only.

    Returns
    -------
    xarray.Dataset
        Dims ``policy, run, checkpoint, arm, group``; see :func:`bayesfair.simulation.results.to_dataset`.

    Raises
    ------
    StudyMemoryError
        Before anything compiles or is allocated: the study's estimated peak memory
        (:func:`estimate_memory`) exceeds what this machine has available (:func:`check_memory`;
        ``BAYESFAIR_NO_MEMORY_CHECK=1`` skips it).
    bayesfair.core.compat.IncompatibleError
        A policy does not fit the environment, or a run's means lie outside the merit's domain.
    SimulationError
        A policy produced an invalid selection distribution or reward, or a metric became non-finite.

    Examples
    --------
    Two policies, four runs of 500 rounds on three Bernoulli arms; the fair policy has the smaller
    fairness regret:

    >>> import bayesfair as bf
    >>> merit = bf.merit.exponential(4.0)
    >>> env = bf.bernoulli_arms([0.2, 0.5, 0.8])
    >>> policies = {"FairX-TS": bf.fairx_ts(bf.beta_bernoulli(), merit), "TS": bf.thompson(bf.beta_bernoulli())}
    >>> ds = bf.simulate(0, env, policies, horizon=500, runs=4, merit=merit,
    ...                  checkpoints=bf.checkpoint_grid(500, 5))
    >>> dict(ds.sizes)
    {'policy': 2, 'run': 4, 'checkpoint': 4, 'group': 1, 'arm': 3}
    >>> final = ds["fairness_regret"].isel(checkpoint=-1).mean("run")
    >>> bool(final.sel(policy="FairX-TS") < final.sel(policy="TS"))
    True
    """
    enable_persistent_cache()  # before anything compiles (once per process; bayesfair.core._compile)
    key = as_key(key)
    if not isinstance(env, Environment):
        raise TypeError(f"env must be a bayesfair Environment, got {type(env).__name__}")
    if not isinstance(policies, Mapping) or not policies:
        raise ValueError("policies must be a non-empty mapping of name -> Policy")
    for name, pol in policies.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"policy names must be non-empty strings, got {name!r}")
        if not isinstance(pol, Policy):
            raise TypeError(f"policies[{name!r}] must be a bayesfair Policy, got {type(pol).__name__}")
    horizon = positive_int("horizon", horizon)
    if horizon > MAX_HORIZON:
        raise ValueError(f"horizon must be <= {MAX_HORIZON:,} (round indices are 32-bit integers), got {horizon:,}")
    runs = positive_int("runs", runs)
    if runs > MAX_RUNS:
        raise ValueError(f"runs must be <= {MAX_RUNS:,} (runs are simulated together, in memory at once), "
                         f"got {runs:,}")
    chunk_size = positive_int("chunk_size", chunk_size)
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping of metadata (e.g. a dict), got {type(config).__name__}")
    merit = None if merit is None else resolve_merit(merit)
    grid = _validate_checkpoints(checkpoints, horizon)
    chunk_size = _compiled_chunk(chunk_size, horizon, round_log is not None)
    if horizon + chunk_size - 1 > np.iinfo(np.int32).max:
        raise ValueError(f"chunk_size {chunk_size:,} is too large for horizon {horizon:,}: round indices are 32-bit "
                         "integers; use a chunk_size of at most 2**20")
    n_shards = _n_shards(runs, devices)
    if floors is not None:
        floors = resolve_floors(floors, env.groups.n_groups, "floors")
    explicit = metrics is not None
    if explicit and floors is not None:
        raise TypeError("floors configure the default metrics only: with metrics=[...], give the floors to a "
                        "bayesfair.simulation.metric_parts.Floors component")
    metrics = check_components(metrics) if explicit else default_metrics(merit, floors)

    check_instances(env, runs)
    check_study(env, policies, merit, key, runs, metrics, horizon)  # O(1) memory in the runs (means in blocks)
    # before anything of the study's size is allocated or compiled
    check_memory(estimate_memory(env, policies, horizon, runs, metrics=metrics, checkpoints=grid.size,
                                 log=round_log is not None, resumable=checkpointer is not None))
    prior_notes = check_prior_match(env, policies)  # warns if a Bayesian policy's prior is not the instances'
    k_env, k_pol = jax.random.split(key)
    env_keys = jax.random.split(k_env, runs)
    pol_keys = jax.random.split(k_pol, runs)
    progress_fn = _Progress(progress, horizon * runs * len(policies))
    _warm_result_imports()  # xarray's imports overlap compilation and the run (once per process)
    # jax.random's Threefry unrolled in the compiled rounds (same bits; bayesfair.core._random.unrolled_threefry)
    with _random.unrolled_threefry():
        if len(policies) > 1:
            together = _compile_together(env, policies, metrics, runs, chunk_size, n_shards, env_keys, pol_keys,
                                         round_log is not None)
            if together:
                progress_fn.compiled(together)
        outputs: dict[str, SimulationOutput] = {}
        env_params = None
        for name, pol in policies.items():
            out, carry = _run_policy(env, pol, metrics, horizon, runs, grid, chunk_size, n_shards,
                                     env_keys, pol_keys, progress_fn, name=name, checkpointer=checkpointer,
                                     round_log=round_log)
            outputs[name] = out
            warn_failed_refreshes(out.values, name)  # once per policy whose MCMC refreshes failed
            if env_params is None:
                env_params = jax.device_get(carry.env_params)
    means = np.asarray(jax.vmap(env.arm_means)(env_params), np.float64)
    _join_warm_imports()
    return io.to_dataset(
        outputs, grid=grid, env=env, policies=policies, metrics=metrics, merit=merit, means=means, key=key,
        horizon=horizon, runs=runs, config={**(config or {}), **prior_notes}, record_metrics=explicit,
    )
