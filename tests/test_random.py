"""The exact samplers: distributional checks (Kolmogorov-Smirnov) over many draws.

Each KS test uses the 0.001 critical value 1.95/sqrt(n): a correct sampler fails a given case
with probability 0.001; the cases are fixed keys, so the suite is deterministic.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import betainc, gammainc

from bayesfair.core import _random

N = 20_000
KS_CRIT = 1.95 / np.sqrt(N)


def _ks(samples: np.ndarray, cdf_values: np.ndarray) -> float:
    n = samples.size
    ecdf_hi = np.arange(1, n + 1) / n
    ecdf_lo = np.arange(0, n) / n
    return float(max(np.max(ecdf_hi - cdf_values), np.max(cdf_values - ecdf_lo)))


@pytest.mark.parametrize("shape", [0.3, 1.0, 2.5, 40.0, 5000.0, 2.0e6])
def test_gamma_matches_cdf(shape):
    x = np.sort(np.asarray(_random.gamma(jax.random.key(1), jnp.full((N,), shape))))
    assert np.all(np.isfinite(x)) and np.all(x > 0)
    with jax.enable_x64(True):  # the float32 gammainc is too coarse at shape 2e6 (KS 0.45 on exact draws)
        cdf = np.asarray(gammainc(jnp.float64(shape), jnp.asarray(x, jnp.float64)))
    d = _ks(x, cdf)
    assert d < KS_CRIT, f"KS distance {d:.4f} >= {KS_CRIT:.4f} for Gamma({shape})"


@pytest.mark.parametrize("shape", [0.3, 1.0, 40.0, 1.0e6])
def test_gamma_matches_cdf_in_float64(shape):
    # Under x64 a float64 shape gets float64 proposals: two Threefry evaluations per proposal, 52-bit
    # uniforms (a separate code path in _lane_proposals).
    with jax.enable_x64(True):
        x = np.sort(np.asarray(_random.gamma(jax.random.key(4), jnp.full((N,), shape, jnp.float64))))
        assert x.dtype == np.float64 and np.all(np.isfinite(x)) and np.all(x > 0)
        d = _ks(x, np.asarray(gammainc(jnp.float64(shape), jnp.asarray(x))))
    assert d < KS_CRIT, f"KS distance {d:.4f} >= {KS_CRIT:.4f} for float64 Gamma({shape})"


@pytest.mark.parametrize("a,b", [(1.0, 1.0), (0.5, 0.5), (3.0, 20.0), (500.0, 700.0)])
def test_beta_matches_cdf(a, b):
    x = np.sort(np.asarray(_random.beta(jax.random.key(2), jnp.full((N,), a), jnp.full((N,), b))))
    d = _ks(x, np.asarray(betainc(a, b, jnp.asarray(x))))
    assert d < KS_CRIT, f"KS distance {d:.4f} for Beta({a}, {b})"


@pytest.mark.parametrize("shape", [1.0, 1.5, 3.0, 10.0, 1e3, 1e4, 1e5, 1e6, 1e7])
def test_marsaglia_tsang_decisions_match_float64(shape):
    # The float32 acceptance test must decide as the float64 one on the same (x, u) wherever the
    # two sides are more than float32 rounding apart. The textbook form failed this from shape
    # ~1e4 on (cancellation in d - d v^3 + d log v^3: 0.13% of proposals wrongly rejected at 1e5,
    # with margins up to ~1e-2), which is where long Beta-Bernoulli posteriors live.
    n = 200_000
    kx, ku = jax.random.split(jax.random.key(11))
    d = jnp.full((n,), shape - 1.0 / 3.0, jnp.float32)
    c = jax.lax.rsqrt(9.0 * d)
    x = jax.random.normal(kx, (n,), jnp.float32)
    log_u = jnp.log(jax.random.uniform(ku, (n,), jnp.float32, minval=jnp.finfo(jnp.float32).tiny))
    ok32 = np.asarray(log_u < _random._mt_log_accept(x, d, c))
    x64, d64, c64 = (np.asarray(v, np.float64) for v in (x, d, c))
    v = 1.0 + c64 * x64
    with np.errstate(invalid="ignore", divide="ignore"):
        rhs = np.where(v > 0, 0.5 * x64**2 + d64 - d64 * v**3 + 3.0 * d64 * np.log(np.where(v > 0, v, 1.0)), -np.inf)
    gap = np.abs(np.asarray(log_u, np.float64) - rhs)
    wrong = ok32 != (np.asarray(log_u, np.float64) < rhs)
    assert not np.any(wrong & (gap > 1e-5)), f"{int(np.sum(wrong))} decisions differ, max gap {gap[wrong].max():.2e}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_goldberg_log1p_is_as_accurate_as_jnp_log1p(dtype):
    # _mt_log_accept's log1p: within 4 ulps of log1p computed in extended precision over (-1, 20],
    # near -1, near 0 on both sides (where 1 + y rounds to 1) and exactly 0. A plain log(1 + y)
    # is off by up to ~1e7 ulps near 0 and fails this.
    near0 = np.geomspace(1e-30, 0.5, 20_000)
    y = np.concatenate([np.linspace(-1, 20, 400_001)[1:], -1 + np.geomspace(1e-7, 0.5, 20_000),
                        near0, -near0, [0.0]]).astype(dtype)
    ref = np.log1p(y.astype(np.longdouble))
    ulp = np.spacing(np.abs(ref).astype(dtype)).astype(np.longdouble)
    with jax.enable_x64(dtype == np.float64):
        got = np.asarray(jax.jit(_random._log1p)(jnp.asarray(y)))
        plain = np.asarray(jax.jit(lambda v: jnp.log(1 + v))(jnp.asarray(y)))
    assert got.dtype == dtype
    err = np.abs(got.astype(np.longdouble) - ref) / ulp
    worst = int(np.argmax(err))
    assert float(err.max()) <= 4.0, f"{dtype.__name__}: max error {float(err[worst]):.2f} ulps at y = {y[worst]!r}"
    assert float((np.abs(plain.astype(np.longdouble) - ref) / ulp).max()) > 1e3  # the check can fail


def test_gamma_retries_under_vmap_keep_the_law_of_every_lane():
    # The simulator's layout: one gamma call per run (vmap) on 20 lanes; the batching rule lays all
    # runs' lanes out flat and the retry loop serves the first rejected lanes of all runs in flat
    # order. Shapes 1 (5% rejected) and 2.5 alternate, so lanes of different shapes are
    # retried side by side; every shape, and the last lane alone (served last), must keep the exact
    # Gamma law.
    batch = 2000
    shapes = jnp.tile(jnp.array([1.0, 2.5]), 10)
    keys = jax.random.split(jax.random.key(21), batch)
    g = np.asarray(jax.jit(jax.vmap(lambda k: _random.gamma(k, shapes, allow_small=False)))(keys))
    assert np.all(np.isfinite(g)) and np.all(g > 0)
    for lanes, shape in ((slice(0, None, 2), 1.0), (slice(1, None, 2), 2.5), (slice(19, 20), 2.5)):
        x = np.sort(g[:, lanes].reshape(-1))
        d = _ks(x, np.asarray(gammainc(shape, jnp.asarray(x))))
        assert d < 1.95 / np.sqrt(x.size), f"KS distance {d:.4f} for Gamma({shape}), lanes {lanes}"


def test_gamma_batching_rule_gives_each_run_the_numbers_of_its_own_key():
    # Under vmap, gamma's batching rule runs the sampler on all runs' lanes as one flat array
    # (first proposals and retry loop). Each run must still get exactly what the unbatched call with
    # its key gives (so a run's numbers never depend on the other runs or on R), whether the shapes are
    # batched or shared, with small shapes (boost), rejected lanes (shape 1) and invalid ones (NaN),
    # and under a second vmap.
    shapes = jnp.asarray(np.random.default_rng(5).choice([1.0, 1.0, 2.5, 0.4, 40.0, np.nan], (64, 20)), jnp.float32)
    keys = jax.random.split(jax.random.key(22), 64)
    single = jax.jit(_random.gamma)  # compiled once: the unbatched call, key by key
    one_by_one = np.stack([np.asarray(single(k, s)) for k, s in zip(keys, shapes, strict=True)])
    batched = np.asarray(jax.jit(jax.vmap(_random.gamma))(keys, shapes))
    np.testing.assert_array_equal(np.isnan(batched), np.isnan(one_by_one))
    np.testing.assert_allclose(batched, one_by_one, rtol=2e-6)
    assert np.isnan(batched).sum() == np.isnan(np.asarray(shapes)).sum()  # only the invalid shapes
    shared = np.asarray(jax.vmap(lambda k: _random.gamma(k, shapes[0]))(keys))
    np.testing.assert_allclose(shared, np.stack([np.asarray(single(k, shapes[0])) for k in keys]), rtol=2e-6)
    nested = np.asarray(jax.vmap(jax.vmap(_random.gamma))(keys.reshape(8, 8), shapes.reshape(8, 8, 20)))
    np.testing.assert_allclose(nested.reshape(64, 20), one_by_one, rtol=2e-6)
    one_key = np.asarray(jax.vmap(lambda s: _random.gamma(keys[0], s))(shapes))  # the rule's unbatched-key path
    np.testing.assert_allclose(one_key, np.stack([np.asarray(single(keys[0], s)) for s in shapes]), rtol=2e-6)


def test_a_lanes_gamma_depends_on_its_key_lane_and_shape_only(monkeypatch):
    # A lane's proposals are Threefry at (attempt, lane) under its run's key words, so neither how
    # many rejected lanes a retry iteration serves (M) nor the batch it sits in may change a value;
    # and a lane whose first proposal was accepted keeps that value when the per-lane budget is
    # one proposal, while the lanes that needed a retry become NaN (shape 1: ~5% of them).
    shapes = jnp.asarray(np.random.default_rng(7).choice([1.0, 1.0, 2.5, 40.0], (48, 20)), jnp.float32)
    keys = jax.random.split(jax.random.key(23), 48)

    def draw():
        return np.asarray(jax.jit(jax.vmap(lambda k, s: _random.gamma(k, s, allow_small=False)))(keys, shapes))

    base = draw()
    assert np.all(np.isfinite(base))
    for lanes_per_retry in (1, 7, 10_000):
        monkeypatch.setattr(_random, "_LANES_PER_RETRY", lanes_per_retry)
        np.testing.assert_array_equal(draw(), base)
    monkeypatch.setattr(_random, "_LANES_PER_RETRY", 32)
    few = np.asarray(jax.jit(jax.vmap(lambda k, s: _random.gamma(k, s, allow_small=False)))(keys[5:8], shapes[5:8]))
    np.testing.assert_allclose(few, base[5:8], rtol=2e-6)
    monkeypatch.setattr(_random, "MAX_PROPOSALS", 1)
    first_only = draw()
    kept = np.isfinite(first_only)
    assert 0.01 < 1.0 - kept[np.asarray(shapes) == 1.0].mean() < 0.12  # shape 1 rejects ~5% of first proposals
    np.testing.assert_array_equal(first_only[kept], base[kept])


def test_threefry_is_jax_threefry_bit_for_bit():
    # The sampler's unrolled Threefry-2x32 must be JAX's generator exactly: random key and counter
    # words (with broadcast keys, as the sampler uses them), compared word for word.
    from jax.extend.random import threefry2x32_p

    rng = np.random.default_rng(9)
    k1, k2, x1, x2 = (jnp.asarray(rng.integers(0, 2**32, 50_000, dtype=np.uint64).astype(np.uint32))
                      for _ in range(4))
    for args in ((k1, k2, x1, x2), (k1[:1], k2[:1], x1, x2)):
        want = jax.jit(lambda *a: threefry2x32_p.bind(*a))(*args)
        got = jax.jit(_random._threefry2x32)(*args)
        for w, g in zip(want, got, strict=True):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_unrolled_threefry_scope_keeps_jax_random_s_numbers():
    # Inside unrolled_threefry() programs lower jax.random's hash to the unrolled form (no while
    # loop in the lowered program: the rule is really in use) and give the same bits as outside.
    def draws(key):
        k1, k2 = jax.random.split(key)
        keys = jax.random.split(jax.random.fold_in(k1, 7), 33)
        return (jax.random.key_data(keys), jax.random.bits(k2, (5, 3)), jax.random.normal(k2, (1000,)),
                jax.vmap(lambda k: jax.random.categorical(k, jnp.log(jnp.arange(1.0, 5.0))))(keys))

    key = jax.random.key(3)
    outside_text = jax.jit(draws).lower(key).as_text()
    outside = jax.jit(draws)(key)
    with _random.unrolled_threefry() as installed:
        assert installed  # this JAX version has the CPU rule the scope falls back on
        fresh = jax.jit(lambda k: draws(k))  # a new function (JAX caches the lowering of `draws`)
        inside_text = fresh.lower(key).as_text()
        inside = fresh(key)
    assert "stablehlo.while" in outside_text and "stablehlo.while" not in inside_text
    for a, b in zip(jax.tree.leaves(outside), jax.tree.leaves(inside), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_first_true_is_nonzero_with_a_size():
    # The retry loop's compaction (prefix count + binary search) must give jnp.nonzero's indices
    # exactly: random masks of several densities and sizes, all-false, all-true, size above the count.
    rng = np.random.default_rng(8)
    cases = [rng.random(n) < p for n in (1, 2, 33, 1000, 20_000) for p in (0.0, 0.01, 0.3, 1.0)]
    for mask in cases:
        for size in sorted({1, max(1, mask.size // 32), mask.size}):
            got = np.asarray(_random._first_true(jnp.asarray(mask), size))
            want = np.asarray(jnp.nonzero(jnp.asarray(mask), size=size, fill_value=mask.size)[0])
            np.testing.assert_array_equal(got, want, err_msg=f"n={mask.size} true={mask.sum()} size={size}")


def test_gamma_and_beta_of_empty_arrays_are_empty():
    assert _random.gamma(jax.random.key(0), jnp.zeros((0,))).shape == (0,)
    assert _random.beta(jax.random.key(0), jnp.zeros((0, 3)), jnp.zeros((0, 3))).shape == (0, 3)
    keys = jax.random.split(jax.random.key(1), 4)
    assert jax.vmap(lambda k: _random.gamma(k, jnp.zeros((0,))))(keys).shape == (4, 0)


def test_allow_small_false_matches_for_large_shapes():
    a = jnp.full((N,), 7.0)
    x = np.sort(np.asarray(_random.gamma(jax.random.key(3), a, allow_small=False)))
    assert _ks(x, np.asarray(gammainc(7.0, jnp.asarray(x)))) < KS_CRIT


def test_categorical_frequencies():
    p = jnp.array([0.1, 0.2, 0.3, 0.4])
    keys = jax.random.split(jax.random.key(4), N)
    draws = np.asarray(jax.vmap(lambda k: _random.categorical(k, p))(keys))
    freq = np.bincount(draws, minlength=4) / N
    se = np.sqrt(np.asarray(p) * (1 - np.asarray(p)) / N)
    assert np.all(np.abs(freq - np.asarray(p)) < 4.5 * se)


@pytest.mark.parametrize("k", [12, 60])
def test_categorical_never_returns_a_zero_probability_candidate_and_matches_frequencies(k):
    # Many random vectors with zeros (leading, inner and trailing), unnormalized and of mixed
    # magnitudes: the tree prefix sum of categorical() is not guaranteed monotone to the last bit,
    # so this checks the guard, and the frequencies are checked against probs / sum(probs).
    rng = np.random.default_rng(k)
    n_vec, n_draw = 40, 4000
    p = rng.exponential(size=(n_vec, k)) * 10.0 ** rng.integers(-6, 3, size=(n_vec, k))
    p[rng.random((n_vec, k)) < 0.5] = 0.0
    p[:, -3:] = 0.0
    p[:, 0] = np.where(np.arange(n_vec) % 2 == 0, 0.0, p[:, 0])
    p[p.sum(axis=1) == 0, 5] = 1.0
    p = jnp.asarray(p, jnp.float32)
    keys = jax.random.split(jax.random.key(6), n_draw)
    draws = np.asarray(jax.vmap(lambda kk: jax.vmap(_random.categorical)(jax.random.split(kk, n_vec), p))(keys))
    pn = np.asarray(p, np.float64)
    assert np.all(pn[np.arange(n_vec), draws] > 0)
    freq = np.stack([np.bincount(draws[:, i], minlength=k) for i in range(n_vec)]) / n_draw
    target = pn / pn.sum(axis=1, keepdims=True)
    se = np.sqrt(target * (1 - target) / n_draw) + 1e-12
    # at most 40 x 60 cells at 5 s.e.: false-failure rate below 2400 * 6e-7 ~ 1.4e-3
    assert np.all(np.abs(freq - target) < 5 * se + 1.0 / n_draw)
    # an all-zero vector gives the last index, as before
    assert int(_random.categorical(jax.random.key(0), jnp.zeros(4))) == 3


def test_random_argmax_breaks_ties_uniformly():
    x = jnp.array([1.0, 3.0, 3.0, 0.0, 3.0])
    keys = jax.random.split(jax.random.key(5), N)
    draws = np.asarray(jax.vmap(lambda k: _random.random_argmax(k, x))(keys))
    freq = np.bincount(draws, minlength=5) / N
    assert freq[0] == 0 and freq[3] == 0
    se = np.sqrt(1 / 3 * 2 / 3 / N)
    assert np.all(np.abs(freq[[1, 2, 4]] - 1 / 3) < 4.5 * se)
    np.testing.assert_allclose(np.asarray(_random.argmax_set(x)), [0, 1 / 3, 1 / 3, 0, 1 / 3], rtol=1e-6)


def test_argmax_set_is_all_nan_when_any_entry_is_nan():
    # A NaN anywhere, eagerly, jitted and under vmap (the simulator's layout), must make every
    # entry NaN, so that the simulator reports the invalid pi_t; infinities and ties stay valid
    # distributions. (Dropping the explicit isnan check and relying on max() propagating the NaN
    # into 0 / 0 fails this: compiled, XLA's CPU code returns 0 for every entry.)
    rng = np.random.default_rng(12)
    x = rng.random((64, 10)).astype(np.float32)
    where = rng.integers(0, 10, 64)
    x[np.arange(64), where] = np.nan
    x[:8] = rng.random((8, 10))  # the first 8 rows are valid
    x[0, 3] = x[0, 7] = np.float32(np.inf)
    x[1, :] = -np.inf
    for f in (_random.argmax_set, jax.jit(_random.argmax_set)):
        got = np.asarray(jax.vmap(f)(jnp.asarray(x)))
        assert np.all(np.isnan(got[8:])) and np.all(np.isfinite(got[:8]))
        np.testing.assert_allclose(got[:8].sum(axis=1), 1.0, rtol=1e-6)
        np.testing.assert_allclose(got[0, [3, 7]], 0.5)
        np.testing.assert_allclose(got[1], 0.1, rtol=1e-6)
        assert np.all(np.isnan(np.asarray(f(jnp.asarray(x[20])))))


@pytest.mark.parametrize("shape", [(), (7,), (14, 10), (3, 4, 5), (0, 3)])
def test_flat_normal_and_uniform_are_jax_randoms_draws(shape):
    """_random.normal / uniform draw flat and reshape (faster under vmap on CPU). The random bits
    must be jax.random's own for any shape (threefry's counters run over the flattened shape), so
    the values are jax.random's up to the rounding of the float transform, which XLA may compile
    differently for the two layouts (measured: 1 ulp on 4 of 300 normals of shape (3, 4, 5));
    under vmap over keys, with broadcast bounds and in float64."""
    keys = jax.random.split(jax.random.key(11), 5)
    size = int(np.prod(shape))
    bits = jax.vmap(lambda k: jax.random.bits(k, (size,)).reshape(shape))(keys)
    np.testing.assert_array_equal(np.asarray(bits), np.asarray(jax.vmap(lambda k: jax.random.bits(k, shape))(keys)))
    for dtype in (jnp.float32, jnp.float64):
        with jax.enable_x64(dtype == jnp.float64):
            got = jax.vmap(lambda k, dt=dtype: _random.normal(k, shape, dt))(keys)
            want = jax.vmap(lambda k, dt=dtype: jax.random.normal(k, shape, dt))(keys)
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_max_ulp(np.asarray(got), np.asarray(want), maxulp=2)
            got = jax.vmap(lambda k, dt=dtype: _random.uniform(k, shape, dt, -2.0, 3.0))(keys)
            want = jax.vmap(lambda k, dt=dtype: jax.random.uniform(k, shape, dt, -2.0, 3.0))(keys)
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_max_ulp(np.asarray(got), np.asarray(want), maxulp=2)
    if len(shape) == 2 and shape[0] > 0:  # bounds that broadcast along the first axis
        lo = jnp.linspace(-1.0, 0.0, shape[-1])
        hi = lo + jnp.arange(1, shape[-1] + 1)
        np.testing.assert_array_max_ulp(np.asarray(_random.uniform(keys[0], shape, jnp.float32, lo, hi)),
                                        np.asarray(jax.random.uniform(keys[0], shape, jnp.float32, lo, hi)), maxulp=2)


def test_flat_normal_batching_rule_keeps_jax_randoms_numbers():
    """Under vmap, _random.normal's batching rule turns all runs' bits into normals as one flat
    array (behind an optimization barrier: the simulator's speed; design.md, "Normal draws").
    Nested vmaps, jit, a key shared by all runs (unbatched) and a batched call inside a larger
    jitted computation must all give jax.random.normal's numbers, each run those of its own key."""
    keys = jax.random.split(jax.random.key(5), 6)
    want = jax.vmap(lambda k: jax.random.normal(k, (10,)))(keys)
    nested = jax.jit(jax.vmap(jax.vmap(lambda k: _random.normal(k, (10,)))))(keys.reshape(2, 3))
    np.testing.assert_array_max_ulp(np.asarray(nested).reshape(6, 10), np.asarray(want), maxulp=2)
    shared = jax.vmap(lambda x, k=keys[2]: x + _random.normal(k, (10,)))(jnp.zeros(4))
    for row in np.asarray(shared):
        np.testing.assert_array_max_ulp(row, np.asarray(want[2]), maxulp=2)
    mu = jnp.linspace(0.0, 1.0, 10)
    probs = jax.jit(jax.vmap(lambda k: jax.nn.softmax(4.0 * (mu + 0.3 * _random.normal(k, (10,))))))(keys)
    ref = jax.nn.softmax(4.0 * (mu + 0.3 * want), axis=-1)
    np.testing.assert_allclose(np.asarray(probs), np.asarray(ref), rtol=1e-5)
    assert float(jnp.std(want)) > 0.5  # not a constant stream
    with jax.enable_x64(True):  # the default dtype is jax.random.normal's: float64 under x64
        got = jax.vmap(lambda k: _random.normal(k, (4,)))(keys)
        assert got.dtype == jnp.float64
        ref = jax.vmap(lambda k: jax.random.normal(k, (4,)))(keys)
        np.testing.assert_array_max_ulp(np.asarray(got), np.asarray(ref), maxulp=2)
