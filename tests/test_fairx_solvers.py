"""FairX-UCB's optimistic step (Algorithm 1 line 7) solved exactly, against brute force.

The exact solver evaluates K + 1 threshold vertices of the confidence box; brute force evaluates
all 2^K vertices (and, for the merits where the maximum is a vertex, a dense random sample of
the box must never beat it). Both in float64 on many random boxes.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayesfair.core import merit as merits
from bayesfair.policies.fairx import exact_box_argmax, fairx_ucb

# float64 ratio of sums of K <= 10 terms: rounding is ~1e-15 relative; 1e-12 leaves room and still
# catches any wrong vertex (distinct vertices of the random boxes differ by far more).
TOL = 1e-12


def _values(f, mu, member):
    """Group values of each row of ``mu [n, K]``: ``[n, m]``."""
    w = f(mu)
    return ((w * mu) @ member) / (w @ member)


def _brute(f, low, high, member):
    """Best value per group over all 2^K vertices (groups are independent)."""
    bits = np.array(list(itertools.product((False, True), repeat=len(low))))
    return _values(f, np.where(bits, high, low), member).max(axis=0)


def _boxes(rng, n, k):
    """``n`` random boxes of ``k`` arms, ~15% of the arms with a point box: ``[n, k]`` twice."""
    a, b = rng.uniform(0, 1, (n, k)), rng.uniform(0, 1, (n, k))
    low, high = np.minimum(a, b), np.maximum(a, b)
    return low, np.where(rng.uniform(size=(n, k)) < 0.15, low, high)


def _member(k):
    """Two non-empty groups (one when k = 1), arms assigned alternately."""
    return np.eye(min(k, 2))[np.arange(k) % min(k, 2)]


MERITS = [merits.exponential(4.0), merits.exponential(0.5), merits.exponential(20.0), merits.identity()]


@pytest.mark.parametrize("merit", MERITS, ids=lambda m: m.label)
def test_exact_matches_brute_force_over_all_vertices(merit):
    rng = np.random.default_rng(19)
    f64 = lambda m: np.asarray(merit.fn(jnp.asarray(m)))  # noqa: E731
    floor = merit.params.get("floor", -np.inf)
    with jax.enable_x64(True):
        for k in (1, 3, 6, 10):
            member = _member(k)
            solve = jax.jit(jax.vmap(lambda lo, hi, mem: exact_box_argmax(merit, lo, hi, mem), (0, 0, None)))
            lows, highs = _boxes(rng, 15, k)
            mus = np.asarray(solve(jnp.asarray(lows), jnp.asarray(highs), jnp.asarray(member)))
            assert mus.dtype == np.float64
            for low, high, mu in zip(lows, highs, mus, strict=True):
                assert np.all(mu >= low) and np.all(mu <= high)
                got = _values(f64, mu[None], member)[0]
                # the identity merit is constant below its floor: the floor beats a lower end there
                lifted = np.maximum(low, np.minimum(floor, high))
                np.testing.assert_allclose(got, _brute(f64, lifted, high, member), rtol=TOL, atol=TOL)
                assert np.all(got >= _brute(f64, low, high, member) - TOL)
                # log-concave merits: no point inside the box beats the best vertex
                inner = _values(f64, rng.uniform(low, high, (200, k)), member)
                assert np.all(inner <= got + TOL)


def test_exact_is_vmappable_and_matches_per_box():
    merit = merits.exponential(4.0)
    rng = np.random.default_rng(3)
    low = rng.uniform(0, 0.5, (16, 60))
    high = low + rng.uniform(0, 0.5, (16, 60))
    with jax.enable_x64(True):
        batched = np.asarray(jax.jit(jax.vmap(lambda lo, hi: exact_box_argmax(merit, lo, hi)))(low, high))
        single = np.stack([np.asarray(exact_box_argmax(merit, jnp.asarray(lo), jnp.asarray(hi)))
                           for lo, hi in zip(low, high, strict=True)])
    np.testing.assert_array_equal(batched, single)


def test_exact_beats_or_ties_projected_gradient_ascent():
    """The exact optimistic value is never below what the paper's 10 ascent steps reach."""
    merit = merits.exponential(4.0)
    rng = np.random.default_rng(7)
    value = lambda m: jnp.sum(jax.nn.softmax(4.0 * m) * m)  # noqa: E731
    grad = jax.grad(value)

    def pga(low, high, mu):
        for _ in range(10):
            mu = jnp.clip(mu + 0.01 * grad(mu), low, high)
        return value(mu)

    @jax.jit
    def gap(low, high):
        exact = value(exact_box_argmax(merit, low, high))
        return jnp.minimum(exact - pga(low, high, high), exact - pga(low, high, 0.5 * (low + high)))

    low, high = _boxes(rng, 200, 12)
    gaps = np.asarray(jax.vmap(gap)(jnp.asarray(low, jnp.float32), jnp.asarray(high, jnp.float32)))
    assert np.all(gaps >= -1e-6)  # float32 rounding of a value in [0, 1]


def test_fairx_ucb_solver_and_initial_estimate_params():
    from bayesfair.core.types import Spec

    merit = merits.exponential(4.0)
    with pytest.raises(ValueError, match="solver: invalid value: allowed one of"):
        fairx_ucb(merit, w0=1.0, solver="newton")
    # initial_estimate moves the 'center' start of never-pulled arms' ascent only
    spec = Spec(n_arms=4, group_of_arm=np.zeros(4, int), n_groups=1)
    outs = []
    for est in (0.0, 1.0):
        pol = fairx_ucb(merit, w0=0.5, start="center", initial_estimate=est)
        state = pol.init(jax.random.key(0), spec)
        outs.append(np.asarray(pol.select(jax.random.key(1), state, None)[2]["mu"]))
    assert np.all(outs[0] < outs[1])
    # the exact solver ignores it (a never-pulled arm's box is the whole range)
    outs = []
    for est in (0.0, 1.0):
        pol = fairx_ucb(merit, w0=0.5, solver="exact", initial_estimate=est)
        state = pol.init(jax.random.key(0), spec)
        outs.append(np.asarray(pol.select(jax.random.key(1), state, None)[2]["mu"]))
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], np.ones(4))  # exp merit, whole range: the upper corner


def test_bf_ucb_exact_solver_maximizes_every_group():
    """BF-UCB's line 5 with ``solver="exact"``: after the initialization, every group's optimistic
    value equals the best over its box's vertices (brute force) and is >= the paper's ascent."""
    from bayesfair.core.types import Spec
    from bayesfair.policies import bilevel

    merit = merits.exponential(4.0)
    groups = np.array([0, 0, 0, 1, 1, 1, 1])
    member = np.eye(2)[groups]
    spec = Spec(n_arms=7, group_of_arm=groups, n_groups=2)
    f64 = lambda m: np.exp(4.0 * np.asarray(m, np.float64))  # noqa: E731
    exact, pga = bilevel.bf_ucb((0.2, 0.2), merit, solver="exact"), bilevel.bf_ucb((0.2, 0.2), merit)
    assert exact.params["solver"] == "exact" and pga.params["solver"] == "pga"
    with pytest.raises(ValueError, match="solver: invalid value: allowed one of"):
        bilevel.mf(merit, solver="newton")
    rng = np.random.default_rng(5)
    for _ in range(10):
        pulls = rng.integers(1, 30, 7).astype(np.float32)
        state = exact.init(jax.random.key(0), spec)._replace(
            stats=jnp.asarray(rng.binomial(pulls.astype(int), rng.uniform(0, 1, 7)), jnp.float32),
            arm_pulls=jnp.asarray(pulls), group_pulls=jnp.asarray(pulls @ member, jnp.int32))
        _, low, high = bilevel._confidence_box(state, 0.01, 0.0, 1.0)
        low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
        mu_exact = np.asarray(exact.select(jax.random.key(1), state, None)[2]["mu"], np.float64)
        mu_pga = np.asarray(pga.select(jax.random.key(1), state, None)[2]["mu"], np.float64)
        got = _values(f64, mu_exact[None], member)[0]
        np.testing.assert_allclose(got, _brute(f64, low, high, member), rtol=1e-5)  # float32 box
        assert np.all(got >= _values(f64, mu_pga[None], member)[0] - 1e-5)
