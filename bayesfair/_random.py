"""Exact, vectorized random primitives used inside jitted policy code.

Everything here is exact: the samplers are rejection samplers whose every proposal uses fresh
randomness, and the loop that re-proposes rejected lanes runs until all lanes are accepted, within
a bound (:data:`MAX_PROPOSALS` proposals per lane on average, see :func:`gamma`). The bound is what
keeps an invalid input (a shape <= 0 or NaN, e.g. a Beta-Bernoulli posterior fed a reward outside
[0, 1]) from looping forever: such lanes are NaN at once, and a lane still rejected after the
bound is NaN too (for a valid shape >= 1 a proposal is accepted with probability >= 0.95, so this
happens with probability below 1e-40 per draw). The simulator turns any NaN selection probability
into an error naming the policy, run and round (:func:`bayesfair.simulate`).

Why not ``jax.random.gamma`` / ``jax.random.beta``: JAX samples each element with its own key
and its own ``while_loop``; vmapped over (runs x arms) inside a ``lax.scan`` this measured ~5x
slower than :func:`gamma` below on this project's benchmark (see
``experiments/benchmarks/README.md``). Here one proposal is made for the whole array with one
key, and a single array-level loop re-proposes only for the lanes that were rejected: a few
fresh proposals per iteration, handed to the first rejected lanes and evaluated for those lanes
only (issue 18: re-proposing for every lane in every iteration made the loop cost several times
the first proposal, since nearly every round of a simulation has some rejected lane among its
runs x arms x 2 lanes). Under ``vmap`` a batching rule decides all runs' first proposals as one
flat array (see :func:`gamma`; ``docs/developer/design.md``, "A flat layout under vmap").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
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


def normal(key: jax.Array, shape: Sequence[int], dtype: Any = jnp.float32) -> jax.Array:
    """``jax.random.normal(key, shape, dtype)``, its random bits drawn flat and reshaped (see above)."""
    shape = tuple(int(n) for n in shape)
    return jax.random.normal(key, (math.prod(shape),), dtype).reshape(shape)


def uniform(key: jax.Array, shape: Sequence[int], dtype: Any = jnp.float32, minval: Any = 0.0,
            maxval: Any = 1.0) -> jax.Array:
    """``jax.random.uniform(key, shape, dtype, minval, maxval)``, its random bits drawn flat and
    reshaped (see above); bounds that broadcast to ``shape`` are flattened with it."""
    shape = tuple(int(n) for n in shape)
    size = math.prod(shape)

    def flat(v):
        return v if jnp.ndim(v) == 0 else jnp.broadcast_to(v, shape).reshape(size)

    return jax.random.uniform(key, (size,), dtype, flat(minval), flat(maxval)).reshape(shape)


MAX_PROPOSALS = 32  # proposals per lane (on average) before giving up with NaN (see the module docstring)
_LANES_PER_RETRY = 32  # a retry of the rejection loop makes one fresh proposal per this many lanes (rounded up)
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
    direct = jnp.log1p(ys) - ys + 0.5 * ys * ys - ys * ys * ys / 3.0
    h = jnp.where(jnp.abs(ys) < _SERIES_BELOW, series, direct)
    return jnp.where(positive, 3.0 * d * h, -jnp.inf)


def _proposals(key: jax.Array, n: int, dtype: Any) -> tuple[jax.Array, jax.Array]:
    """n Marsaglia-Tsang proposals: a standard normal and a uniform in (0, 1) each."""
    kx, ku = jax.random.split(key)
    return (jax.random.normal(kx, (n,), dtype),
            jax.random.uniform(ku, (n,), dtype, minval=jnp.finfo(dtype).tiny))


def _mt_decide(x: jax.Array, u: jax.Array, d: jax.Array, c: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Marsaglia & Tsang (2000): proposal (x, u) for d = shape - 1/3, c = 1/sqrt(9 d) -> (accepted, value)."""
    v = 1.0 + c * x
    return jnp.log(u) < _mt_log_accept(x, d, c), d * v * v * v


def gamma(key: jax.Array, shape_param: jax.Array, *, allow_small: bool = True) -> jax.Array:
    """Exact Gamma(shape_param, 1) draws, one per element.

    Marsaglia & Tsang (2000) for shapes >= 1; shapes < 1 use the boost
    Gamma(a) = Gamma(a + 1) * U**(1/a). ``allow_small=False`` is a static promise that every
    shape is >= 1 (true for conjugate posteriors whose prior shape is >= 1), which skips the
    extra uniform per lane.

    Every lane gets one proposal (one normal and one uniform call for the whole array). The
    lanes it rejects (< 5% for shapes >= 1, far fewer for the large shapes of long runs) are
    retried in a ``while_loop`` whose every iteration draws M = max(2, ceil(L / 32)) fresh
    proposals (at most L, the lane count) and hands proposal i to the i-th still-rejected lane
    in lane order; only those M proposals are evaluated, and the accepted ones are written back
    to their lanes. The assignment depends only on earlier accept/reject outcomes, never on the
    proposal it hands out, so each lane still sees a sequence of independent fresh proposals and
    keeps the first accepted one: the accepted value has exactly the Gamma law, independently
    across lanes.

    Under ``vmap`` (the simulator's runs) a batching rule (:func:`_mt_lanes_batched`) evaluates
    the first proposals of all runs as one flat array and vmaps the retry loop, so an iteration
    costs M proposals per run; every run still uses only its own key, and its numbers are those
    of the unbatched call with that run's key up to float32 rounding (relative 5e-7; tested), so
    they never depend on the other runs.

    A shape that is not a positive finite number gives NaN (without entering the rejection
    loop), and the loop stops after ``MAX_PROPOSALS * ceil(L / M)`` iterations (as many
    proposals as :data:`MAX_PROPOSALS` per lane), so no input can make it run forever; a lane
    still rejected then is NaN.
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


@custom_vmap
def _mt_lanes(key: jax.Array, d: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Marsaglia-Tsang on flat lanes ``d = shape - 1/3`` (``[L]``, >= 2/3): one proposal each, then the
    rejection loop (:func:`_retry_rejected`). Returns (accepted, value)."""
    k_first, k_retry = jax.random.split(key)
    c = lax.rsqrt(9.0 * d)
    ok, val = _mt_decide(*_proposals(k_first, d.shape[0], d.dtype), d, c)
    return _retry_rejected(k_retry, d, c, ok, val)


@_mt_lanes.def_vmap
def _mt_lanes_batched(axis_size: int, in_batched: Sequence[bool], key: jax.Array,
                      d: jax.Array) -> tuple[tuple[jax.Array, jax.Array], tuple[bool, bool]]:
    """:func:`_mt_lanes` for a batch ``[B, L]``: the same keys and arithmetic per batch member, laid out flat.

    XLA's CPU code for the element-wise acceptance test on ``[B, L]`` operands inside the
    simulator's loop depends strongly on L (``experiments/benchmarks/README.md``: at L = 20 a
    round cost 3.4x more than at L = 32), while on a flat ``[B * L]`` array it is one long
    vectorized loop. So the first proposals are generated per member (its own key) and decided
    as one flat array; the rejection loop is vmapped (its work is M proposals per member).
    """
    key_batched, d_batched = in_batched
    if not key_batched:
        key = jnp.broadcast_to(key, (axis_size, *key.shape))
    if not d_batched:
        d = jnp.broadcast_to(d, (axis_size, *d.shape))
    keys = jax.vmap(jax.random.split)(key)
    n_lanes = d.shape[-1]
    x, u = jax.vmap(lambda k: _proposals(k, n_lanes, d.dtype))(keys[:, 0])
    c = lax.rsqrt(9.0 * d)
    ok, val = _mt_decide(x.reshape(-1), u.reshape(-1), d.reshape(-1), c.reshape(-1))
    ok, val = jax.vmap(_retry_rejected)(keys[:, 1], d, c, ok.reshape(d.shape), val.reshape(d.shape))
    return (ok, val), (True, True)


def _retry_rejected(key: jax.Array, d: jax.Array, c: jax.Array, ok: jax.Array,
                    val: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The rejection loop of :func:`gamma` over flat lanes: fresh proposals for rejected lanes only."""
    n_lanes = d.shape[0]
    if n_lanes == 0:  # nothing to retry (and no proposal count to divide by)
        return ok, val
    m = min(n_lanes, max(2, -(-n_lanes // _LANES_PER_RETRY)))
    limit = MAX_PROPOSALS * -(-n_lanes // m)

    def body(carry):
        k, ok, val, n = carry
        k, k_prop = jax.random.split(k)
        x, u = _proposals(k_prop, m, d.dtype)
        lane = jnp.nonzero(~ok, size=m, fill_value=n_lanes)[0]  # the first m rejected lanes; n_lanes: none
        at = jnp.minimum(lane, n_lanes - 1)
        accept, value = _mt_decide(x, u, d[at], c[at])
        to = jnp.where(accept & (lane < n_lanes), lane, n_lanes)  # out of range: dropped
        return k, ok.at[to].set(True, mode="drop"), val.at[to].set(value, mode="drop"), n + 1

    _, ok, val, _ = lax.while_loop(lambda s: ~jnp.all(s[1]) & (s[3] < limit), body, (key, ok, val, jnp.int32(0)))
    return ok, val


def beta(key: jax.Array, a: jax.Array, b: jax.Array, *, allow_small: bool = True) -> jax.Array:
    """Exact Beta(a, b) draws as X / (X + Y) with X ~ Gamma(a), Y ~ Gamma(b).

    Both gammas come from one call (one proposal array), which is what makes it fast.
    """
    a, b = jnp.broadcast_arrays(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32))
    g = gamma(key, jnp.stack([a, b]), allow_small=allow_small)
    return g[0] / (g[0] + g[1])


def categorical(key: jax.Array, probs: jax.Array) -> jax.Array:
    """Sample an index from the (possibly unnormalized) probability vector ``probs`` by inverting its CDF.

    One uniform per draw (``jax.random.categorical`` needs a Gumbel per candidate). The CDF is a
    log-depth parallel prefix sum (``lax.associative_scan``): on CPU ``jnp.cumsum`` lowers to
    windowed reductions that cost about 3x more at K = 60 (measured in
    ``experiments/benchmarks/README.md``, "Where the time goes in the bi-level policies"). A tree
    prefix sum need not be monotone to the last bit where ``probs`` has zeros, so the index is the
    *first positive-probability* candidate whose prefix sum exceeds the uniform (falling back to the
    last positive one): a candidate of probability zero is never returned.
    """
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
