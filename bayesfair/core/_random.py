"""Exact, vectorized random primitives used inside jitted policy code.

Everything here is exact: the samplers are rejection samplers whose every proposal uses fresh
randomness, and the loop that re-proposes rejected lanes runs until all lanes are accepted, within
a bound (:data:`MAX_PROPOSALS` proposals per lane for :func:`gamma`, :data:`BETA_MAX_PROPOSALS`
for Cheng's Beta sampler in :func:`beta`). The bound is what keeps an invalid input (a shape <= 0
or NaN, e.g. a Beta-Bernoulli posterior fed a reward outside [0, 1]) from looping forever: such
lanes are NaN at once, and a lane still rejected after the bound is NaN too (for a valid shape
>= 1 a Marsaglia-Tsang proposal is accepted with probability >= 0.95 and a Cheng proposal with
probability >= e/4, so this happens with probability below 1e-40 per draw). The simulator
turns any NaN selection probability into an error naming the policy, run and round
(:func:`bayesfair.simulate`).

Why not ``jax.random.gamma`` / ``jax.random.beta``: JAX samples each element with its own key and
its own ``while_loop``; vmapped over (runs x arms) inside a ``lax.scan`` this measured ~5x slower
than :func:`gamma` below on this project's benchmark (``CHANGELOG.md``, 2026-11-21). Here every
lane's proposals are counter-based: proposal number i of lane l is JAX's Threefry-2x32 hash of the
counter (i, l) under its run's key, so all lanes of all runs make their first proposal as one flat
element-wise computation, and a single array-level loop serves only the lanes that were rejected, a
few per iteration (re-proposing for every lane in every iteration would make the loop cost several
times the first proposal, since nearly every round of a simulation has some rejected lane among its
runs x arms x 2 lanes). Under ``vmap`` a batching rule runs the same flat computation on all runs'
lanes (see :func:`gamma`; ``docs/developer/design.md``, "A flat layout under vmap" and
"Counter-based proposals").
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.custom_batching import custom_vmap

__all__ = ["gamma", "beta", "categorical", "random_argmax", "argmax_set", "normal", "uniform"]


# Flat draws. Under the simulator's vmap over runs, a multi-dimensional draw such as the linear
# environment's [K, d] contexts becomes a [R, K, d] threefry computation, for which XLA's CPU code
# is several times slower per number than for the same count laid out [R, K * d] (measured on the
# 2-core machine, one device, R = 500, a scan of vmapped normal draws: 1,425 us per round for
# (14, 10), 270 us for (140,)). JAX's threefry counters run over the flattened shape, so drawing
# flat and reshaping gives the same random bits; the float transform (erf_inv for normals) may
# round differently between XLA's code for the two layouts, by an ulp on a few draws
# (tests/test_random.py checks both). Same seed, same numbers, as before.


def normal(key: jax.Array, shape: Sequence[int], dtype: Any = float) -> jax.Array:
    """``jax.random.normal(key, shape, dtype)``: the same random bits (drawn flat and reshaped, see
    above) and the same arithmetic, so the same numbers up to XLA's rounding of the float
    transform (an ulp on a few draws, tests/test_random.py). The default dtype is
    ``jax.random.normal``'s too: float32, float64 with ``jax_enable_x64``.

    Under ``vmap`` (the simulator's runs) a batching rule turns all runs' bits into normals as one
    flat array and passes the result through an optimization barrier. Without both, XLA's CPU code
    fused the transform (a logarithm and two polynomials: ``erf_inv``) into the ``[runs, K]``
    consumers of the draw, at ~10x its stand-alone cost per number: FairX-TS with a Normal
    posterior, K = 10, R = 500, T = 2e4, steady, 1.29 s, of which ~0.8 s was the transform, against
    0.58 s with both (either alone: 1.27-1.33 s; ``CHANGELOG.md``, 2026-11-27).
    """
    shape = tuple(int(n) for n in shape)
    dtype = jax.dtypes.canonicalize_dtype(dtype)
    return _flat_normal(math.prod(shape), jnp.dtype(dtype).name)(key).reshape(shape)


def _bits_to_normal(bits: jax.Array, dtype: Any) -> jax.Array:
    """``jax.random.normal``'s transform of uniform random ``bits`` (its ``uniform`` on
    [nextafter(-1, 0), 1), then sqrt(2) erf^-1), element-wise, behind an optimization barrier."""
    dtype = np.dtype(dtype)
    if bits.dtype == np.uint32:
        floats = _unit_float((bits,), dtype)
    else:  # float64: one uint64 word, as _unit_float's two words high first
        floats = _unit_float(((bits >> np.uint64(32)).astype(jnp.uint32), bits.astype(jnp.uint32)), dtype)
    lo = np.nextafter(dtype.type(-1.0), dtype.type(0.0))
    u = lax.max(lo, floats * (dtype.type(1.0) - lo) + lo)
    return lax.optimization_barrier(dtype.type(np.sqrt(2)) * lax.erf_inv(u))


@functools.cache
def _flat_normal(size: int, dtype_name: str):
    """:func:`normal`'s draw of ``size`` numbers of ``dtype_name``, with its flat batching rule."""
    dtype = np.dtype(dtype_name)
    uint = np.uint32 if dtype.itemsize == 4 else np.uint64

    def bits(key):
        return jax.random.bits(key, (size,), uint)

    @custom_vmap
    def draw(key):
        return _bits_to_normal(bits(key), dtype)

    @draw.def_vmap
    def batched(axis_size, in_batched, key):
        if not in_batched[0]:
            key = jnp.broadcast_to(key, (axis_size, *key.shape))
        b = jax.vmap(bits)(key)
        return _bits_to_normal(b.reshape(-1), dtype).reshape(b.shape), True

    return draw


def uniform(key: jax.Array, shape: Sequence[int], dtype: Any = jnp.float32, minval: Any = 0.0,
            maxval: Any = 1.0) -> jax.Array:
    """``jax.random.uniform(key, shape, dtype, minval, maxval)``, its random bits drawn flat and
    reshaped (see above); bounds that broadcast to ``shape`` are flattened with it."""
    shape = tuple(int(n) for n in shape)
    size = math.prod(shape)

    def flat(v):
        return v if jnp.ndim(v) == 0 else jnp.broadcast_to(v, shape).reshape(size)

    return jax.random.uniform(key, (size,), dtype, flat(minval), flat(maxval)).reshape(shape)


MAX_PROPOSALS = 32  # proposals per lane before giving up with NaN (see the module docstring)
_LANES_PER_RETRY = 32  # a retry iteration serves at most one rejected lane per this many lanes (rounded up)
_SERIES_BELOW = 0.1  # |y| below which h(y) is summed as a series (see _mt_log_accept)


def _mt_log_accept(x: jax.Array, d: jax.Array, c: jax.Array) -> jax.Array:
    """log of the Marsaglia-Tsang acceptance ratio, 0.5 x^2 + d - d v^3 + d log v^3 with v = 1 + c x.

    With y = c x and c = 1/sqrt(9 d) this equals 3 d h(y), h(y) = log1p(y) - y + y^2/2 - y^3/3,
    the remainder of the log series after its cubic term: the x^2 terms cancel exactly. Written
    the textbook way in float32, d - d v^3 + d log v^3 cancels catastrophically once d is large
    (absolute error ~ d * 1e-7): at shape 1e5 about 0.13% of proposals, and at 1e6 about 1%,
    were rejected by rounding alone (their float64 decision was to accept), which both distorts
    the accepted distribution and makes the array-level loop run again. Conjugate posteriors of
    long runs reach such shapes (Beta-Bernoulli counts of 1e5-1e7 pulls). Here h is the series
    -y^4 (1/4 - y/5 + y^2/6 - ... - y^7/11) for |y| < 0.1 (truncation error below 3e-9
    relative) and the direct difference above (where d is small, so its rounding error times 3 d
    stays below ~1e-6). Returns -inf where v <= 0 (always rejected).
    """
    y = c * x
    positive = y > -1.0
    ys = jnp.where(positive, y, 0.0)
    series = ys * (1 / 10 - ys / 11)
    for k in (9, 8, 7, 6, 5):
        series = ys * (1.0 / k - series)
    series = -(ys * ys) * (ys * ys) * (0.25 - series)
    direct = _log1p(ys) - ys + 0.5 * ys * ys - ys * ys * ys / 3.0
    h = jnp.where(jnp.abs(ys) < _SERIES_BELOW, series, direct)
    return jnp.where(positive, 3.0 * d * h, -jnp.inf)


def _log1p(y: jax.Array) -> jax.Array:
    """log(1 + y) for y > -1, as accurate as ``jnp.log1p`` and cheaper on the CPU.

    Goldberg's form (Goldberg 1991, "What every computer scientist should know about
    floating-point arithmetic", Theorem 4): with w = fl(1 + y), log1p(y) = log(w) * y / (w - 1),
    and y itself where w rounds to 1. The factor y / (w - 1) cancels the rounding of 1 + y, so
    the result is within a few ulps of log1p (tested against float64 over (-1, 20]: at most
    2.7 ulps, ``jnp.log1p`` 2.4). XLA's CPU ``log1p`` costs ~2x a ``log``: in the sampler's
    acceptance test (:func:`_mt_log_accept`, on every proposal) this form made a FairX-TS / TS
    round (K = 10, R = 500) ~7% faster (``CHANGELOG.md``, 2026-11-26).
    """
    w = 1.0 + y
    return jnp.where(w == 1.0, y, jnp.log(w) * (y / (w - 1.0)))


_THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))  # Threefry-2x32's rotation constants


def _threefry2x32(k1: jax.Array, k2: jax.Array, x1: jax.Array, x2: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Threefry-2x32 with 20 rounds (Salmon et al. 2011, the generator behind ``jax.random``),
    element-wise: key words (k1, k2), counter words (x1, x2), all uint32 of one shape.

    The same function as ``jax.extend.random.threefry2x32_p`` bit for bit (tested), written out
    with its rounds unrolled: on CPU JAX lowers the primitive to a loop of five four-round blocks,
    ~76-90 us per 20,000 lanes on the 2-core machine, against ~15-32 us for this form. The
    optimization barriers matter: without the one on the inputs XLA fuses the per-run key
    broadcast into the hash (index arithmetic per element, no faster than the primitive); without
    the one on the outputs it copies the 20-round hash into every consumer of its words, and the
    FairX-TS round got 3x slower (``CHANGELOG.md``, 2026-11-26).
    """
    k1, k2, x1, x2 = lax.optimization_barrier((k1, k2, x1, x2))
    ks = (k1, k2, k1 ^ k2 ^ np.uint32(0x1BD11BDA))
    a, b = x1 + ks[0], x2 + ks[1]
    for block in range(5):
        for r in _THREEFRY_ROTATIONS[block % 2]:
            a = a + b
            b = ((b << np.uint32(r)) | (b >> np.uint32(32 - r))) ^ a
        a = a + ks[(block + 1) % 3]
        b = b + ks[(block + 2) % 3] + np.uint32(block + 1)
    return lax.optimization_barrier((a, b))


_unrolled_lock = threading.Lock()
_unrolled_depth = 0  # simulations inside unrolled_threefry() (any thread); > 0: the rule below unrolls


def _install_unrolled_rule() -> bool:
    """Register a CPU lowering of ``threefry2x32_p`` that is :func:`_threefry2x32` while
    :func:`unrolled_threefry` is active and JAX's own CPU rule otherwise (once per process).

    JAX's CPU rule is a private name (``jax._src.random.threefry2x32``); if a JAX version moves
    it, nothing is registered and every draw keeps JAX's rolled lowering (same numbers, slower).
    """
    try:
        from jax._src.random import threefry2x32 as _jax_threefry  # JAX's CPU rule, to fall back on
        from jax.extend.random import threefry2x32_p
        from jax.interpreters import mlir

        default = _jax_threefry._threefry2x32_cpu_lowering_rule
    except (ImportError, AttributeError):
        return False
    unrolled = mlir.lower_fun(lambda k1, k2, x1, x2: list(_threefry2x32(k1, k2, x1, x2)), multiple_results=True)

    def rule(ctx, *args):
        return (unrolled if _unrolled_depth > 0 else default)(ctx, *args)

    mlir.register_lowering(threefry2x32_p, rule, platform="cpu")
    return True


_unrolled_rule = _install_unrolled_rule()


@contextlib.contextmanager
def unrolled_threefry() -> Iterator[bool]:
    """Within this block, programs lowered for the CPU compute ``jax.random``'s Threefry-2x32 with
    :func:`_threefry2x32` (20 rounds unrolled between optimization barriers) instead of JAX's CPU
    lowering, a loop of five four-round blocks. The bits are the same (the hash is the same
    function; tests check whole simulations for equality); only the compiled code differs.

    Why: a simulated round splits and folds keys a handful of times (the environment's draws, the
    policy's); on CPU each rolled hash runs as a ``while`` loop of five iterations, 16 small
    kernels each, and a BF-UCB round (K = 15, R = 500) had 7 such loops besides its own 159
    instructions. Unrolled, a steady BF-UCB study (R = 500, T = 1e4) went 1.09-1.13 -> 0.88-0.92 s
    (``CHANGELOG.md``, 2026-11-26). JAX's
    own unrolled lowering (its GPU rule) was far slower on CPU: without the barriers XLA copies
    the hash into its consumers.

    Process-wide while any thread is inside (the simulator compiles policies in threads), so a
    program another thread lowers meanwhile also gets the unrolled form: the same numbers.
    Yields whether the rule is installed. It is installed when this module is imported, before
    anything is compiled: registering a lowering rule later made JAX lower again a function it
    had already compiled (the pre-flight arm means of the next ``simulate`` call, 0.075 s).
    """
    global _unrolled_depth
    with _unrolled_lock:
        _unrolled_depth += 1
    try:
        yield _unrolled_rule
    finally:
        with _unrolled_lock:
            _unrolled_depth -= 1


def _unit_float(words: Sequence[jax.Array], dtype: Any) -> jax.Array:
    """Uniform floats in [0, 1) on the grid of ``dtype``'s mantissa, from one (float32) or two
    (float64: high word first) uint32 words: the mantissa bits under exponent 0, minus 1."""
    if jnp.dtype(dtype) == jnp.float32:
        bits = (words[0] >> np.uint32(9)) | np.uint32(0x3F800000)
        return lax.bitcast_convert_type(bits, jnp.float32) - np.float32(1.0)
    wide = (words[0].astype(jnp.uint64) << np.uint64(32)) | words[1].astype(jnp.uint64)
    bits = (wide >> np.uint64(12)) | np.uint64(0x3FF0000000000000)
    return lax.bitcast_convert_type(bits, jnp.float64) - np.float64(1.0)


def _lane_proposals(k1: jax.Array, k2: jax.Array, attempt: jax.Array, lane: jax.Array,
                    dtype: Any) -> tuple[jax.Array, jax.Array]:
    """Proposal number ``attempt`` of lane ``lane`` of the run whose key words are (k1, k2): a
    standard normal and a uniform in (0, 1), from Threefry-2x32 (Salmon et al. 2011; JAX's own
    generator, :func:`_threefry2x32`) evaluated at the counter (attempt, lane) under that key,
    element-wise over flat arrays.

    A float32 proposal takes both output words of one evaluation (the normal's and the
    uniform's); a float64 proposal two evaluations, at counters (2 attempt, lane) and
    (2 attempt + 1, lane). The normal is sqrt(2) erf^-1(z) for z uniform in (-1, 1), as
    ``jax.random.normal`` makes it.
    """
    dtype = jnp.dtype(dtype)
    if dtype == jnp.float32:
        w = _threefry2x32(k1, k2, attempt, lane)
        wx, wu = (w[0],), (w[1],)
    else:
        w0 = _threefry2x32(k1, k2, np.uint32(2) * attempt, lane)
        w1 = _threefry2x32(k1, k2, np.uint32(2) * attempt + np.uint32(1), lane)
        wx, wu = (w0[0], w0[1]), (w1[0], w1[1])
    lo = np.nextafter(dtype.type(-1), dtype.type(1))  # erf^-1(-1) = -inf is excluded, as in jax.random.normal
    z = jnp.maximum(lo, _unit_float(wx, dtype) * dtype.type(2) - dtype.type(1))
    x = dtype.type(np.sqrt(2)) * lax.erf_inv(z)
    u = jnp.maximum(np.finfo(dtype).tiny, _unit_float(wu, dtype))
    return x, u


def _mt_decide(x: jax.Array, u: jax.Array, d: jax.Array, c: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Marsaglia & Tsang (2000): proposal (x, u) for d = shape - 1/3, c = 1/sqrt(9 d) -> (accepted, value)."""
    v = 1.0 + c * x
    return jnp.log(u) < _mt_log_accept(x, d, c), d * v * v * v


def _key_words(key: jax.Array) -> jax.Array:
    """The two uint32 Threefry key words of a run's lanes, ``[2]``, drawn from ``key`` (any JAX key)."""
    return jax.random.bits(key, (2,), jnp.uint32)


def gamma(key: jax.Array, shape_param: jax.Array, *, allow_small: bool = True) -> jax.Array:
    """Exact Gamma(shape_param, 1) draws, one per element.

    Marsaglia & Tsang (2000) for shapes >= 1; shapes < 1 use the boost
    Gamma(a) = Gamma(a + 1) * U**(1/a). ``allow_small=False`` is a static promise that every
    shape is >= 1 (true for conjugate posteriors whose prior shape is >= 1), which skips the
    extra uniform per lane.

    Every lane makes proposals 0, 1, 2, ... and keeps the first accepted one. Proposal i of lane
    l is a normal and a uniform made from Threefry-2x32 at the counter (i, l) under key words
    drawn from ``key`` (:func:`_lane_proposals`), so the proposals of different lanes and
    attempts are independent and each lane's accepted value has exactly the Gamma law,
    independently across lanes. All lanes make proposal 0 as one flat array; the lanes it
    rejects (< 5% for shapes >= 1, far fewer for the large shapes of long runs) are served by a
    ``while_loop`` that gathers up to M = max(2, ceil(N / 32)) still-rejected lanes at a time (N
    lanes in all), makes their next proposals until each accepts (:func:`_mt_flat`) and writes
    them back.

    Under ``vmap`` (the simulator's runs) a batching rule (:func:`_flat_lanes`) runs the
    same flat computation on all runs' lanes, each run with its own key words. A lane's value is
    a function of its run's key, its lane index and its shape only, never of which loop
    iteration served it, so a run's numbers are those of the unbatched call with its key
    (tested): they never depend on the other runs, on R or on sharding.

    A shape that is not a positive finite number gives NaN (without entering the rejection
    loop), and a lane still rejected after :data:`MAX_PROPOSALS` proposals is NaN, so no input
    can make the loop run forever.
    """
    a = jnp.asarray(shape_param)
    if not jnp.issubdtype(a.dtype, jnp.floating):
        a = a.astype(jnp.float32)
    k_lanes, k_boost = _split_gamma_key(key)
    a_eff = a
    if allow_small:
        small = a < 1.0
        a_eff = jnp.where(small, a + 1.0, a)
    invalid = ~(a > 0.0) | ~jnp.isfinite(a)  # NaN shapes included (comparisons with NaN are false)
    a_eff = jnp.where(invalid, 1.0, a_eff)  # any valid shape, so the loop does not wait on these lanes
    ok, val = _mt_lanes(k_lanes, (a_eff - 1.0 / 3.0).reshape(-1))
    val = jnp.where(ok.reshape(a.shape) & ~invalid, val.reshape(a.shape), jnp.nan)
    if allow_small:
        u = uniform(k_boost, a.shape, val.dtype, minval=jnp.finfo(val.dtype).tiny)  # flat draw (see uniform)
        val = jnp.where(small, val * u ** (1.0 / a), val)
    return val


def _split_gamma_key(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The two keys of :func:`gamma`: the Marsaglia-Tsang lanes', and the boost uniforms' (shapes < 1)."""
    k_lanes, k_boost = jax.random.split(key)
    return k_lanes, k_boost


def _flat_lanes(flat_fn):
    """A per-run sampler on flat lanes, ``fn(key, *params)`` with each param ``[L]``, whose
    ``vmap`` runs the same flat computation on all runs' lanes at once.

    ``flat_fn(words, *params, n_lanes)`` samples B runs' lanes laid out flat and run-major
    (``words`` ``[B, 2]``: each run's Threefry key words; each param ``[B * L]``). XLA's CPU code
    for the element-wise work on ``[B, L]`` operands inside the simulator's loop depends strongly
    on L (at L = 20 a round cost 3.4x more than at L = 32; ``CHANGELOG.md``, 2026-11-26),
    while on a flat ``[B * L]`` array it is one long vectorized loop. Since a lane's proposals are
    a function of (its run's key, attempt, lane) only, the batch is the unbatched computation on
    B runs at once, number for number.
    """

    @custom_vmap
    def lanes(key, *params):
        return flat_fn(_key_words(key)[None, :], *params, params[0].shape[0])

    @lanes.def_vmap
    def batched(axis_size, in_batched, key, *params):
        if not in_batched[0]:
            key = jnp.broadcast_to(key, (axis_size, *key.shape))
        params = [p if batched_p else jnp.broadcast_to(p, (axis_size, *p.shape))
                  for p, batched_p in zip(params, in_batched[1:], strict=True)]
        out = flat_fn(jax.vmap(_key_words)(key), *(p.reshape(-1) for p in params), params[0].shape[-1])
        return tuple(o.reshape(params[0].shape) for o in out), tuple(True for _ in out)

    return lanes


def _rejection_flat(words: jax.Array, params: Sequence[jax.Array], n_lanes: int, decide, budget: int,
                    lanes_per_retry: int) -> tuple[jax.Array, jax.Array]:
    """An exact rejection sampler on B runs' lanes, flat: ``words`` ``[B, 2]`` (each run's key
    words), each of ``params`` ``[B * L]`` run-major, ``L = n_lanes``. Returns (accepted, value),
    ``[B * L]``.

    ``decide(k1, k2, attempt, lane, *params)`` makes proposal number ``attempt`` of the given lanes
    (element-wise, from Threefry at the counter (attempt, lane) under the key words (k1, k2)) and
    returns (accepted, value). Lane l of run b makes proposals 0, 1, 2, ... and keeps the first
    accepted one; a lane not accepted after ``budget`` proposals is returned unaccepted (the
    caller makes it NaN). Every lane makes proposal 0; then a ``while_loop`` gathers the first
    M = max(2, ceil(B L / lanes_per_retry)) still-rejected lanes in flat order (one pass over all
    lanes, :func:`_first_true`) and an inner ``while_loop`` on those M alone makes each its next
    proposals until it accepts or runs out; the outer loop repeats only if more than M lanes were
    rejected. (Compacting once per outer iteration instead of once per proposal took the retries
    from ~34% to ~17% of a FairX-TS round, K = 10, R = 2000: every pass over all lanes costs
    ~20-30 us there.) Which iteration serves a lane never changes its proposals, so a lane's
    value depends only on its run's key, its lane index and its parameters: not on B, on the other
    runs, on M or on sharding.
    """
    n = params[0].shape[0]
    dtype = params[0].dtype
    if n == 0:
        return jnp.zeros((0,), bool), jnp.zeros((0,), dtype)
    runs = n // n_lanes
    k1 = jnp.broadcast_to(words[:, :1], (runs, n_lanes)).reshape(n)
    k2 = jnp.broadcast_to(words[:, 1:], (runs, n_lanes)).reshape(n)
    lane = jnp.arange(n, dtype=jnp.uint32) % np.uint32(n_lanes)
    ok, val = decide(k1, k2, jnp.zeros((n,), jnp.uint32), lane, *params)
    m = min(n, max(2, -(-n // lanes_per_retry)))
    last = np.uint32(budget - 1)  # the attempt number of a lane's last allowed proposal

    def pending(ok, tries):
        return ~ok & (tries < last)

    def body(carry):
        ok, val, tries = carry
        idx = _first_true(pending(ok, tries), m)  # the first m pending lanes; n: none
        at = jnp.minimum(idx, n - 1)
        sk1, sk2, slane = k1[at], k2[at], lane[at]
        sparams = [p[at] for p in params]

        def live(sub):  # gathered (not padding) and still pending
            return (idx < n) & pending(sub[0], sub[2])

        def serve(sub):  # the next proposal of every live lane
            acc, sval, st = sub
            go = live(sub)
            attempt = st + np.uint32(1)
            accept, value = decide(sk1, sk2, attempt, slane, *sparams)
            return acc | (go & accept), jnp.where(go & accept, value, sval), jnp.where(go, attempt, st)

        acc, sval, st = lax.while_loop(lambda sub: jnp.any(live(sub)), serve,
                                       (jnp.zeros((m,), bool), jnp.zeros((m,), val.dtype), tries[at]))
        served = jnp.where(idx < n, idx, n)  # out of range: dropped
        return ok.at[served].set(acc, mode="drop"), val.at[served].set(
            jnp.where(acc, sval, val[at]), mode="drop"), tries.at[served].set(st, mode="drop")

    ok, val, _ = lax.while_loop(lambda s: jnp.any(pending(s[0], s[2])), body,
                                (ok, val, jnp.zeros((n,), jnp.uint32)))
    return ok, val


def _mt_lane_decide(k1, k2, attempt, lane, d, c):
    """Marsaglia-Tsang's proposal number ``attempt`` of each lane (d = shape - 1/3, c = 1/sqrt(9 d))."""
    return _mt_decide(*_lane_proposals(k1, k2, attempt, lane, d.dtype), d, c)


def _mt_flat(words: jax.Array, d: jax.Array, n_lanes: int) -> tuple[jax.Array, jax.Array]:
    """The exact Marsaglia-Tsang sampler on B runs' flat lanes ``d = shape - 1/3`` (>= 2/3)
    (:func:`_rejection_flat`, :data:`MAX_PROPOSALS` proposals per lane). Returns (accepted, value)."""
    return _rejection_flat(words, (d, lax.rsqrt(9.0 * d)), n_lanes, _mt_lane_decide, MAX_PROPOSALS,
                           _LANES_PER_RETRY)


_mt_lanes = _flat_lanes(_mt_flat)  # Marsaglia-Tsang on one run's flat lanes d, ``[L]``; flat under vmap


def _first_true(mask: jax.Array, size: int) -> jax.Array:
    """The indices of the first ``size`` true entries of the flat ``mask``, in order, padded with
    ``mask.size``: ``jnp.nonzero(mask, size=size, fill_value=mask.size)[0]``, computed as a prefix
    count and a binary search per output (``searchsorted``). On this CPU, for the sampler's
    20,000-lane masks, that costs ~26 us against ~86 us for ``jnp.nonzero``'s lowering, and the
    retry loop runs it in nearly every round (``CHANGELOG.md``, 2026-11-26).
    """
    count = jnp.cumsum(mask.astype(jnp.int32))
    want = jnp.arange(1, size + 1, dtype=jnp.int32)
    idx = jnp.searchsorted(count, want, side="left").astype(jnp.int32)
    return jnp.where(want <= count[-1], idx, mask.shape[0])


def beta(key: jax.Array, a: jax.Array, b: jax.Array, *, allow_small: bool = True) -> jax.Array:
    """Exact Beta(a, b) draws, one per element (float32).

    ``allow_small=False`` is a static promise that every shape is >= 1 (true for conjugate
    Beta-Bernoulli posteriors whose prior shapes are >= 1). Then each draw is Cheng's algorithm
    BB (:func:`_beta_bb`: one Threefry evaluation per proposal, ~half the cost of the two
    Marsaglia-Tsang gammas), with Beta(1, b) and Beta(a, 1) in closed form, and a shape below 1
    (the promise broken) gives NaN. Otherwise X / (X + Y) with X ~ Gamma(a), Y ~ Gamma(b) from
    one :func:`gamma` call (one proposal array), which allows shapes < 1.
    """
    a, b = jnp.broadcast_arrays(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32))
    if not allow_small:
        return _beta_bb(key, a, b)
    g = gamma(key, jnp.stack([a, b]), allow_small=allow_small)
    return g[0] / (g[0] + g[1])


BETA_MAX_PROPOSALS = 96  # Cheng's BB accepts with probability >= e/4: 96 rejections have probability < 1e-47
_BETA_LANES_PER_RETRY = 8  # BB rejects up to ~32% of proposals (~11% for typical shapes): gather more per retry
_LOG4 = float(np.log(4.0))
# The two series of _bb_log_accept, truncated where the first omitted term is below float32's
# rounding (relative 6e-8) over their ranges: expm1(v) - v = v^2 sum_k v^(k-2) / k! to k = 8
# (omitted: 2 |v|^7 / 9! < 4.3e-8 for |v| < 0.5); q - log1p(q) = q^2 sum_k (-1)^k q^(k-2) / k to
# k = 12 (omitted: 2 |q|^11 / 13 < 3.7e-8 for |q| < 0.25).
_PHI_COEFFS = tuple(1.0 / math.factorial(k) for k in range(2, 9))
_PSI_COEFFS = tuple((-1.0) ** k / k for k in range(2, 13))
_PHI_SERIES_BELOW = 0.5  # |v| below which expm1(v) - v is summed as a series
_PSI_SERIES_BELOW = 0.25  # |q| below which q - log1p(q) is summed as a series


def _horner(x: jax.Array, coeffs: Sequence[float]) -> jax.Array:
    """sum_i coeffs[i] x^i."""
    acc = jnp.full_like(x, coeffs[-1])
    for c in coeffs[-2::-1]:
        acc = c + x * acc
    return acc


def _midpoint_uniform(word: jax.Array) -> jax.Array:
    """A float32 uniform on the open interval (0, 1): (k + 1/2) 2^-23 for the top 23 bits k of
    ``word``, exact in float32, so both log(u) and log(1 - u) are finite and the law is symmetric."""
    k = (word >> np.uint32(9)).astype(jnp.float32)
    return (k + np.float32(0.5)) * np.float32(2.0**-23)


def _bb_log_accept(logit: jax.Array, v: jax.Array, a0: jax.Array, al: jax.Array) -> jax.Array:
    """The log of Cheng's BB acceptance bound, L = gamma v - log 4 + alpha log(alpha / (b0 + a0 e^v)),
    with gamma = a0 + 1/beta, v = beta logit, alpha = a0 + b0: a proposal is accepted iff
    L >= log(u1^2 u2).

    Written as in the paper, two terms of size ~a0 |v| cancel for large shapes (a0 v and
    alpha log(1 + q), q = a0 (e^v - 1) / alpha): at a0 ~ 1e6 the float32 rounding of each is
    ~1e-4, as large as the margin of many decisions. Since alpha q = a0 (e^v - 1),
    L = logit - log 4 - a0 phi(v) + alpha psi(q) with phi(v) = expm1(v) - v and
    psi(q) = q - log1p(q), both O(1) terms, each summed as a series where its argument is small
    (|v| < 0.5, |q| < 0.25); for larger |v| (only for shapes below ~1e3, where beta > 0.03) the
    paper's form L = logit - log 4 + a0 v - alpha log1p(q) is accurate to ~1e-5. Tested against
    float64 (tests/test_random.py).
    """
    small_v = jnp.abs(v) < _PHI_SERIES_BELOW
    vs = jnp.where(small_v, v, 0.0)
    phi_series = vs * vs * _horner(vs, _PHI_COEFFS)
    em1 = jnp.where(small_v, vs + phi_series, jnp.exp(v) - 1.0)
    q = a0 * em1 / al
    small_q = jnp.abs(q) < _PSI_SERIES_BELOW
    qs = jnp.where(small_q, q, 0.0)
    log1p_q = _log1p(q)
    psi = jnp.where(small_q, qs * qs * _horner(qs, _PSI_COEFFS), q - log1p_q)
    near = logit - _LOG4 - a0 * phi_series + al * psi
    far = logit - _LOG4 + a0 * v - al * log1p_q
    return jnp.where(small_v, near, far)


def _bb_lane_decide(k1, k2, attempt, lane, a0, b0, be, flip, one):
    """Proposal number ``attempt`` of Cheng's BB for Beta lanes with a0 = min(a, b) >= 1 and
    b0 = max(a, b), beta = ``be``; ``flip`` where a is the larger shape; ``one`` where a0 == 1
    (closed form, always accepted). Returns (accepted, value)."""
    w1, w2 = _threefry2x32(k1, k2, attempt, lane)
    u1, u2 = _midpoint_uniform(w1), _midpoint_uniform(w2)
    logit = jnp.log(u1 / (1.0 - u1))
    v = be * logit
    al = a0 + b0
    accept = _bb_log_accept(logit, v, a0, al) >= jnp.log(u1 * u1 * u2)
    w = a0 * jnp.exp(v)
    # Y ~ Beta(a0, b0) is w / (b0 + w) and 1 - Y is b0 / (b0 + w), each without cancellation. For
    # a0 = 1, Y = 1 - U^(1/b0): Y = -expm1(log(U) / b0), 1 - Y = exp(log(U) / b0).
    e = jnp.log(u1) / b0
    y, one_minus_y = jnp.where(one, -jnp.expm1(e), w / (b0 + w)), jnp.where(one, jnp.exp(e), b0 / (b0 + w))
    return accept | one, jnp.where(flip, one_minus_y, y)


def _bb_flat(words: jax.Array, a: jax.Array, b: jax.Array, n_lanes: int) -> tuple[jax.Array, jax.Array]:
    """Cheng's BB on B runs' flat Beta lanes (:func:`_rejection_flat`); lanes whose shapes are not
    both finite and >= 1 are returned accepted with value NaN (no proposal waits on them)."""
    valid = (jnp.minimum(a, b) >= 1.0) & jnp.isfinite(a) & jnp.isfinite(b)
    a0 = jnp.where(valid, jnp.minimum(a, b), 1.0)
    b0 = jnp.where(valid, jnp.maximum(a, b), 1.0)
    a1, b1 = a0 - 1.0, b0 - 1.0
    one = a1 == 0.0
    # beta = sqrt((alpha - 2) / (2 a0 b0 - alpha)) (Cheng 1978), with a1 = a0 - 1, b1 = b0 - 1 so
    # that shapes just above 1 do not cancel: (a1 + b1) / (2 a1 b1 + a1 + b1).
    be = jnp.where(one, 1.0, jnp.sqrt((a1 + b1) / jnp.where(one, 1.0, 2.0 * a1 * b1 + a1 + b1)))
    ok, val = _rejection_flat(words, (a0, b0, be, b < a, one), n_lanes, _bb_lane_decide,
                              BETA_MAX_PROPOSALS, _BETA_LANES_PER_RETRY)
    return ok & valid, jnp.where(valid, val, jnp.nan)


_bb_lanes = _flat_lanes(_bb_flat)  # Cheng's BB on one run's flat lanes (a, b), ``[L]`` each; flat under vmap


def _beta_bb(key: jax.Array, a: jax.Array, b: jax.Array) -> jax.Array:
    """Exact Beta(a, b) draws for shapes >= 1: Cheng (1978), "Generating beta variates with
    nonintegral shape parameters", Commun. ACM 21(4), algorithm BB (min(a, b) > 1); Beta(1, b) and
    Beta(a, 1) by inversion.

    With a0 = min(a, b), b0 = max(a, b), alpha = a0 + b0, beta = sqrt((alpha - 2) / (2 a0 b0 -
    alpha)) and gamma = a0 + 1/beta, a proposal is two uniforms u1, u2: v = beta log(u1 / (1 -
    u1)), w = a0 e^v, accepted iff gamma v - log 4 + alpha log(alpha / (b0 + w)) >= log(u1^2 u2)
    (the paper's exact test; its two squeezes only skip logarithms, which a vectorized pass
    computes anyway), and the draw is w / (b0 + w) if a0 = a, else b0 / (b0 + w). A proposal is
    accepted with probability >= e/4 (~0.68, at a0 -> 1, b0 -> inf; ~0.89 for a0 = b0 large).

    The lanes follow :func:`gamma`'s scheme: proposal i of lane l is Threefry-2x32 at the counter
    (i, l) under key words drawn from ``key`` (u1 from its first word, u2 from its second), all
    lanes make proposal 0 as one flat array, and a retry loop serves the rejected ones; under
    ``vmap`` all runs' lanes are one flat array. A lane's value depends only on its run's key, its
    lane and its shapes. A lane still rejected after :data:`BETA_MAX_PROPOSALS` proposals is NaN.
    """
    ok, val = _bb_lanes(key, a.reshape(-1), b.reshape(-1))  # empty lanes: _rejection_flat returns at once
    return jnp.where(ok, val, jnp.nan).reshape(a.shape)


def categorical(key: jax.Array, probs: jax.Array) -> jax.Array:
    """Sample an index from the (possibly unnormalized) probability vector ``probs`` by inverting its CDF.

    One uniform per draw (``jax.random.categorical`` needs a Gumbel per candidate). The CDF is a
    log-depth parallel prefix sum (``lax.associative_scan``): on CPU ``jnp.cumsum`` lowers to
    windowed reductions that cost about 3x more at K = 60 (``CHANGELOG.md``, 2026-11-23). A tree
    prefix sum need not be monotone to the last bit where ``probs`` has zeros, so the index is the
    *first positive-probability* candidate whose prefix sum exceeds the uniform (falling back to the
    last positive one): a candidate of probability zero is never returned.

    ``probs`` passes an optimization barrier first, so that it is computed once: otherwise XLA
    copies its producer (e.g. the bi-level policies' ``within * member[:, group]``) into each level
    of the scan. The bi-level policies at K = 15 got ~7-10% faster, the other families did not
    change beyond noise (``CHANGELOG.md``, 2026-11-27). A CDF by one matrix product with the upper
    triangle of ones was as fast for the bi-level policies but made FairX-UCB at K = 10 ~15% slower.
    """
    probs = lax.optimization_barrier(probs)
    cdf = lax.associative_scan(jnp.add, probs)
    positive = probs > 0
    u = jax.random.uniform(key, (), cdf.dtype) * cdf[-1]
    hit = (cdf > u) & positive
    k = probs.shape[-1]
    last_positive = k - 1 - jnp.argmax(positive[::-1])
    return jnp.where(jnp.any(hit), jnp.argmax(hit), last_positive).astype(jnp.int32)


def argmax_set(x: jax.Array) -> jax.Array:
    """Uniform distribution over the maximizers of ``x`` (ties share the mass equally); all NaN if
    ``x`` holds a NaN (so an invalid score is reported, not silently played).

    ``x`` passes an optimization barrier first: XLA may otherwise recompute ``x`` inside each
    fusion that uses it, with different floating-point contraction, so that ``x == max(x)`` in
    one fusion and ``sum(x == max(x))`` in another disagree by an ulp: seen as a pi_t of all zeros
    (TopInterval, IntervalChaining on the biased-feedback study), which the simulator now reports.
    """
    x = lax.optimization_barrier(x)
    is_max = x == jnp.max(x)
    return jnp.where(jnp.any(jnp.isnan(x)), jnp.nan, is_max / jnp.sum(is_max))


def random_argmax(key: jax.Array, x: jax.Array) -> jax.Array:
    """Argmax of ``x`` with ties broken uniformly at random (never by index)."""
    x = lax.optimization_barrier(x)  # one value of x for both uses (see argmax_set)
    is_max = x == jnp.max(x)
    noise = jax.random.uniform(key, x.shape)
    return jnp.argmax(jnp.where(is_max, noise, -1.0)).astype(jnp.int32)
