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
fresh proposals per iteration, handed to the first rejected lanes (issue 18: re-proposing for
every lane in every iteration made the loop cost several times the first proposal, since nearly
every round of a simulation has some rejected lane among its runs x arms x 2 lanes).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["gamma", "beta", "categorical", "random_argmax", "argmax_set"]


MAX_PROPOSALS = 32  # proposals per lane (on average) before giving up with NaN (see the module docstring)
_LANES_PER_RETRY = 16  # a retry of the rejection loop makes one fresh proposal per this many lanes (rounded up)
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


def _mt_proposal(key: jax.Array, d: jax.Array, c: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One Marsaglia-Tsang (2000) proposal per lane: returns (accepted, value)."""
    kx, ku = jax.random.split(key)
    x = jax.random.normal(kx, d.shape, d.dtype)
    u = jax.random.uniform(ku, d.shape, d.dtype, minval=jnp.finfo(d.dtype).tiny)
    v = 1.0 + c * x
    ok = jnp.log(u) < _mt_log_accept(x, d, c)
    return ok, d * v * v * v


def gamma(key: jax.Array, shape_param: jax.Array, *, allow_small: bool = True) -> jax.Array:
    """Exact Gamma(shape_param, 1) draws, one per element.

    Marsaglia & Tsang (2000) for shapes >= 1; shapes < 1 use the boost
    Gamma(a) = Gamma(a + 1) * U**(1/a). ``allow_small=False`` is a static promise that every
    shape is >= 1 (true for conjugate posteriors whose prior shape is >= 1), which skips the
    extra uniform per lane.

    Every lane gets one proposal (one normal and one uniform call for the whole array). The
    lanes it rejects (< 5% for shapes >= 1, far fewer for the large shapes of long runs) are
    retried in a ``while_loop`` whose every iteration draws M = ceil(L / 16) fresh proposals (L
    lanes) and hands proposal i to the i-th still-rejected lane in lane order. The assignment
    depends only on earlier accept/reject outcomes, never on the proposal it hands out, so each
    lane still sees a sequence of independent fresh proposals and keeps the first accepted one:
    the accepted value has exactly the Gamma law, independently across lanes. Under ``vmap`` (the
    simulator's runs) an iteration costs M proposals per run instead of L, which is what made
    the loop cheap (issue 18; ``experiments/benchmarks/README.md``).

    A shape that is not a positive finite number gives NaN (without entering the rejection
    loop), and the loop stops after ``MAX_PROPOSALS * ceil(L / M)`` iterations (as many
    proposals as :data:`MAX_PROPOSALS` per lane), so no input can make it run forever; a lane
    still rejected then is NaN.
    """
    a = jnp.asarray(shape_param)
    if not jnp.issubdtype(a.dtype, jnp.floating):
        a = a.astype(jnp.float32)
    k_first, k_loop, k_boost = jax.random.split(key, 3)
    a_eff = a
    if allow_small:
        small = a < 1.0
        a_eff = jnp.where(small, a + 1.0, a)
    invalid = ~(a > 0.0) | ~jnp.isfinite(a)  # NaN shapes included (comparisons with NaN are false)
    a_eff = jnp.where(invalid, 1.0, a_eff)  # any valid shape, so the loop does not wait on these lanes
    d = a_eff - 1.0 / 3.0
    c = lax.rsqrt(9.0 * d)
    ok, val = _mt_proposal(k_first, d, c)
    ok, val = _retry_rejected(k_loop, d.reshape(-1), c.reshape(-1), ok.reshape(-1), val.reshape(-1))
    val = jnp.where(ok.reshape(a.shape) & ~invalid, val.reshape(a.shape), jnp.nan)
    if allow_small:
        u = jax.random.uniform(k_boost, a.shape, val.dtype, minval=jnp.finfo(val.dtype).tiny)
        val = jnp.where(small, val * u ** (1.0 / a), val)
    return val


def _retry_rejected(key: jax.Array, d: jax.Array, c: jax.Array, ok: jax.Array,
                    val: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The rejection loop of :func:`gamma` over flat lanes: fresh proposals for rejected lanes only."""
    n_lanes = d.shape[0]
    m = max(1, -(-n_lanes // _LANES_PER_RETRY))
    limit = MAX_PROPOSALS * -(-n_lanes // m)
    tiny = jnp.finfo(d.dtype).tiny

    def body(carry):
        k, ok, val, n = carry
        k, kx, ku = jax.random.split(k, 3)
        x = jax.random.normal(kx, (m,), d.dtype)
        u = jax.random.uniform(ku, (m,), d.dtype, minval=tiny)
        rank = jnp.cumsum(~ok) - 1  # i-th rejected lane (lane order) -> i
        take = ~ok & (rank < m)
        slot = jnp.clip(rank, 0, m - 1)
        x_lane, u_lane = x[slot], u[slot]
        accept = take & (jnp.log(u_lane) < _mt_log_accept(x_lane, d, c))
        v = 1.0 + c * x_lane
        return k, ok | accept, jnp.where(accept, d * v * v * v, val), n + 1

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
