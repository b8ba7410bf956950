"""Cheng's algorithm BB (``_random.beta(..., allow_small=False)``): the law, the float32 acceptance
test against float64, the retry loop and the batching rule.

KS tests use the 0.001 critical value 1.95/sqrt(n) (a correct sampler fails a case with
probability 0.001); the cases are fixed keys, so the suite is deterministic.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import betainc

from bayesfair.core import _random

N = 20_000
KS_CRIT = 1.95 / np.sqrt(N)

# Shapes where BB's branches differ: a closed-form side (1), shapes just above 1 (beta -> 1, the
# lowest acceptance), a >> b and b >> a (the flipped output), moderate, and the huge shapes of long
# Beta-Bernoulli runs where the acceptance test is summed as series.
SHAPES = [(1.0, 1.0), (1.0, 5.0), (7.0, 1.0), (1.0001, 1.0001), (1.0001, 5.0), (1.01, 1.0e6), (1.5, 2.0),
          (2.0, 2.0), (50.0, 2.0), (10.0, 100.0), (1.0e3, 1.0e4), (1.0e5, 1.0e5), (3.0e6, 1.0e6), (2.0, 1.0e6),
          (1.0e7, 1.0e7)]


def _ks_beta(x: np.ndarray, a: float, b: float) -> float:
    x = np.sort(np.asarray(x, np.float64))
    with jax.enable_x64(True):  # the float32 betainc is too coarse at shapes ~1e6
        cdf = np.asarray(betainc(jnp.float64(a), jnp.float64(b), jnp.asarray(x)))
    n = x.size
    return float(max(np.max(np.arange(1, n + 1) / n - cdf), np.max(cdf - np.arange(n) / n)))


def _bb(key, a, b):
    return _random.beta(key, a, b, allow_small=False)


@pytest.mark.parametrize("a,b", SHAPES)
def test_cheng_bb_matches_the_beta_cdf(a, b):
    x = np.asarray(jax.jit(_bb)(jax.random.key(31), jnp.full((N,), a), jnp.full((N,), b)))
    assert x.dtype == np.float32 and np.all(np.isfinite(x)) and np.all((x >= 0) & (x <= 1))
    d = _ks_beta(x, a, b)
    assert d < KS_CRIT, f"KS distance {d:.4f} >= {KS_CRIT:.4f} for Beta({a}, {b})"


def test_cheng_bb_mean_is_exact_to_a_million_draws():
    # A KS test of 20,000 draws misses a bias below ~1%; the mean of 1e6 draws pins it to ~0.1% of a
    # standard deviation per shape (|z| < 4.5 over the cases: a false alarm has probability < 1e-4).
    n = 1_000_000
    f = jax.jit(_bb)
    for i, (a, b) in enumerate([(2.0, 2.0), (1.2, 30.0), (1.0001, 5.0), (40.0, 3.0)]):
        x = np.asarray(f(jax.random.key(40 + i), jnp.full((n,), a), jnp.full((n,), b)), np.float64)
        sd = np.sqrt(a * b / (a + b) ** 2 / (a + b + 1) / n)
        z = (x.mean() - a / (a + b)) / sd
        assert abs(z) < 4.5, f"Beta({a}, {b}): mean off by {z:.2f} standard errors"


def _bb_margin64(a0, b0, be, u1, u2):
    """The float64 margin of the paper's test, gamma v - log 4 + alpha log(alpha / (b0 + w)) - log(u1^2 u2)."""
    al = a0 + b0
    v = be * np.log(u1 / (1 - u1))
    return (a0 + 1 / be) * v - np.log(4) - al * np.log1p(a0 * np.expm1(v) / al) - np.log(u1 * u1 * u2)


@pytest.mark.parametrize("a0,b0", [(1.0001, 5.0), (1.01, 1e6), (2.0, 50.0), (300.0, 700.0), (3e3, 3e3),
                                   (1e5, 1e5), (1e6, 3e6), (5e3, 1e7), (1e7, 1e7)])
def test_cheng_decisions_match_float64(a0, b0):
    # The float32 acceptance test must decide as the float64 one on the same uniforms wherever the
    # two margins are more than float32 rounding apart. The paper's form, evaluated in float32,
    # fails this at large shapes (a0 v and alpha log1p(q) cancel); the check below shows it can fail.
    n = 200_000
    rng = np.random.default_rng(int(a0 * 7 + b0) % 2**32)
    u1, u2 = ((rng.integers(0, 2**23, (2, n)) + 0.5) * 2.0**-23).astype(np.float32)
    a0, b0 = np.float32(a0), np.float32(b0)
    a1, b1 = a0 - np.float32(1), b0 - np.float32(1)
    be = np.sqrt((a1 + b1) / (np.float32(2) * a1 * b1 + a1 + b1)).astype(np.float32)

    @jax.jit
    def margin32(u1, u2):
        logit = jnp.log(u1 / (1 - u1))
        return _random._bb_log_accept(logit, be * logit, a0, a0 + b0) - jnp.log(u1 * u1 * u2)

    @jax.jit
    def textbook32(u1, u2):
        v = be * jnp.log(u1 / (1 - u1))
        al = a0 + b0
        return (a0 + 1 / be) * v - np.float32(np.log(4)) + al * jnp.log(al / (b0 + a0 * jnp.exp(v))) - jnp.log(
            u1 * u1 * u2)

    m64 = _bb_margin64(*(np.float64(v) for v in (a0, b0, be)), u1.astype(np.float64), u2.astype(np.float64))
    wrong = (np.asarray(margin32(u1, u2)) >= 0) != (m64 >= 0)
    assert not np.any(wrong & (np.abs(m64) > 1e-4)), (
        f"{int(wrong.sum())} decisions differ, max margin {np.abs(m64[wrong]).max():.2e}")
    if a0 >= 1e5:
        naive = (np.asarray(textbook32(u1, u2)) >= 0) != (m64 >= 0)
        assert np.sum(naive & (np.abs(m64) > 1e-4)) > 0  # the check can fail


def test_cheng_retries_under_vmap_keep_the_law_of_every_lane():
    # The simulator's layout: one call per run (vmap) on 10 arms; the batching rule lays all runs'
    # lanes out flat and the retry loop serves rejected lanes of all runs together. Shapes with
    # ~32% rejection (1.0001, 1e6), ~11% (50, 60), none (1, 3), and a flipped pair alternate.
    batch = 2000
    a = jnp.tile(jnp.array([1.0001, 50.0, 1.0, 9.0, 3.0]), 2)
    b = jnp.tile(jnp.array([1.0e6, 60.0, 3.0, 2.0, 3.0]), 2)
    keys = jax.random.split(jax.random.key(41), batch)
    x = np.asarray(jax.jit(jax.vmap(lambda k: _bb(k, a, b)))(keys))
    assert np.all(np.isfinite(x))
    for lane in (0, 1, 2, 3, 9):
        d = _ks_beta(x[:, lane], float(a[lane]), float(b[lane]))
        assert d < 1.95 / np.sqrt(batch), f"KS distance {d:.4f} for lane {lane}"


def test_cheng_batching_rule_gives_each_run_the_numbers_of_its_own_key():
    # Under vmap every run must get exactly what the unbatched call with its key gives, whether the
    # shapes are batched or shared and under a second vmap; invalid shapes (NaN, inf, below 1: the
    # allow_small=False promise broken) are NaN and only they are.
    rng = np.random.default_rng(8)
    a = jnp.asarray(rng.choice([1.0, 1.0001, 2.5, 40.0, 3e5, np.nan, 0.5], (64, 12)), jnp.float32)
    b = jnp.asarray(rng.choice([1.0, 1.3, 7.0, 2e6, np.inf], (64, 12)), jnp.float32)
    keys = jax.random.split(jax.random.key(42), 64)
    single = jax.jit(_bb)
    one_by_one = np.stack([np.asarray(single(k, x, y)) for k, x, y in zip(keys, a, b, strict=True)])
    invalid = ~((np.minimum(a, b) >= 1) & np.isfinite(a) & np.isfinite(b))
    np.testing.assert_array_equal(np.isnan(one_by_one), invalid)
    batched = np.asarray(jax.jit(jax.vmap(_bb))(keys, a, b))
    np.testing.assert_array_equal(batched, one_by_one)
    nested = np.asarray(jax.vmap(jax.vmap(_bb))(keys.reshape(8, 8), a.reshape(8, 8, 12), b.reshape(8, 8, 12)))
    np.testing.assert_array_equal(nested.reshape(64, 12), one_by_one)
    shared = np.asarray(jax.vmap(lambda k: _bb(k, a[0], b[0]))(keys))
    np.testing.assert_array_equal(shared, np.stack([np.asarray(single(k, a[0], b[0])) for k in keys]))


def test_a_beta_lane_depends_on_its_key_lane_and_shapes_only(monkeypatch):
    # How many rejected lanes a retry iteration gathers must not change any value; with a budget of
    # one proposal the first-accepted lanes keep their values and the others are NaN, at BB's
    # rejection rate (~11% at shapes (50, 60); never for a closed-form side of 1).
    a = jnp.asarray(np.random.default_rng(9).choice([1.0, 50.0, 2.0], (48, 10)), jnp.float32)
    b = jnp.full((48, 10), 60.0)
    keys = jax.random.split(jax.random.key(43), 48)

    def draw():
        return np.asarray(jax.jit(jax.vmap(_bb))(keys, a, b))

    base = draw()
    assert np.all(np.isfinite(base))
    for lanes_per_retry in (1, 3, 10_000):
        monkeypatch.setattr(_random, "_BETA_LANES_PER_RETRY", lanes_per_retry)
        np.testing.assert_array_equal(draw(), base)
    monkeypatch.setattr(_random, "BETA_MAX_PROPOSALS", 1)
    first_only = draw()
    kept = np.isfinite(first_only)
    assert kept[np.asarray(a) == 1.0].all()
    assert 0.04 < 1.0 - kept[np.asarray(a) == 50.0].mean() < 0.2
    np.testing.assert_array_equal(first_only[kept], base[kept])


def test_cheng_of_empty_and_scalar_shapes():
    assert _bb(jax.random.key(0), jnp.zeros((0, 3)), jnp.zeros((0, 3))).shape == (0, 3)
    x = _bb(jax.random.key(0), 2.0, 3.0)
    assert x.shape == () and 0.0 < float(x) < 1.0


def test_the_acceptance_series_are_accurate_to_float32_over_their_ranges():
    # expm1(v) - v and q - log1p(q), summed as truncated series where |v| < 0.5 and |q| < 0.25:
    # within a few float32 ulps of float64 references (the truncation is below float32 rounding).
    # The references are 30-term float64 series, checked against the closed forms where those do
    # not cancel (|x| > 1e-3): the closed forms lose all digits near 0 even in float64.
    x = np.concatenate([np.linspace(-0.5, 0.5, 200_001), np.geomspace(1e-20, 0.5, 2_000)]).astype(np.float32)

    def reference(x64, coeff):
        return x64 * x64 * sum(coeff(k) * x64 ** (k - 2) for k in range(2, 32))

    cases = (("phi", _random._PHI_COEFFS, _random._PHI_SERIES_BELOW, lambda k: 1.0 / math.factorial(k),
              lambda y: np.expm1(y) - y),
             ("psi", _random._PSI_COEFFS, _random._PSI_SERIES_BELOW, lambda k: (-1.0) ** k / k,
              lambda y: y - np.log1p(y)))
    for name, coeffs, below, coeff, closed in cases:
        arg = x[np.abs(x) < below]
        got = np.asarray(jax.jit(lambda y, c=coeffs: y * y * _random._horner(y, c))(arg), np.float64)
        y64 = arg.astype(np.float64)
        want = reference(y64, coeff)
        far = np.abs(y64) > 1e-3
        np.testing.assert_allclose(want[far], closed(y64[far]), rtol=1e-10)
        ok = want > 1e-30  # below, the float32 square underflows
        rel = np.abs(got[ok] - want[ok]) / want[ok]
        assert rel.max() < 5e-7, f"{name}: relative error {rel.max():.2e} at {arg[ok][np.argmax(rel)]!r}"
