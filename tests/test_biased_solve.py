"""The unrolled small-d triangular solves of the interval policies (bayesfair.policies.biased._tri_solve)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.linalg import solve_triangular

import bayesfair.policies.biased as pb
from bayesfair.core.types import Observation
from bayesfair.environments.biased import synthetic_biased


def _factor(rng, d):
    """A lower Cholesky factor of a random SPD matrix like the policies' (ridge + a few outer products)."""
    x = rng.uniform(-1.0, 1.0, (3 * d, d))
    return np.linalg.cholesky(1e-2 * np.eye(d) + x.T @ x).astype(np.float32)


@pytest.mark.parametrize("d", [1, 2, 3, 5, 8, 9])
@pytest.mark.parametrize("trans", [False, True])
def test_tri_solve_matches_lapack(d, trans):
    rng = np.random.default_rng(d)
    for _ in range(20):
        chol = jnp.asarray(_factor(rng, d))
        v = jnp.asarray(rng.normal(size=d), jnp.float32)
        got = np.asarray(jax.jit(lambda c, w: pb._tri_solve(c, w, trans=trans))(chol, v), np.float64)
        want = np.asarray(solve_triangular(chol, v, lower=True, trans=1 if trans else 0), np.float64)
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4 * np.abs(want).max())


@pytest.mark.parametrize("make", [lambda: pb.group_fair_top_interval(), lambda: pb.top_interval()])
def test_policy_bounds_do_not_depend_on_the_solver(monkeypatch, make):
    # The same state and contexts give the same upper bounds with the unrolled solves (d = 2) and
    # with LAPACK (threshold forced to 0), after enough updates that the fits are informative.
    env = synthetic_biased(8, 4, 2)
    rng = np.random.default_rng(3)
    arms = rng.integers(0, 8, 300)
    X = rng.uniform(0, 1, (300, 8, 2)).astype(np.float32)
    y = rng.normal(size=300).astype(np.float32) + X[np.arange(300), arms].sum(axis=1) * 3.0
    ctx = jnp.asarray(rng.uniform(0, 1, (8, 2)), jnp.float32)

    def uppers():
        pol = make()
        state = pol.init(jax.random.key(0), env.spec)
        # Jitted, as the simulator runs them (a fresh trace per call picks up the patched threshold).
        update, select = jax.jit(pol.update), jax.jit(pol.select)
        for t in range(300):
            state = update(state, Observation(jnp.int32(t + 1), jnp.asarray(X[t])), jnp.int32(arms[t]), y[t])
        obs = Observation(jnp.int32(301), ctx)
        uses_lapack = "triangular_solve" in str(jax.make_jaxpr(pol.select)(jax.random.key(1), state, obs))
        return np.asarray(select(jax.random.key(1), state, obs)[2]["upper"], np.float64), uses_lapack

    unrolled, lapack_in_unrolled = uppers()
    monkeypatch.setattr(pb, "_UNROLL_MAX_D", 0)
    lapack, lapack_in_lapack = uppers()
    assert not lapack_in_unrolled and lapack_in_lapack  # the two runs really took different solvers

    np.testing.assert_allclose(unrolled, lapack, rtol=1e-4, atol=1e-4 * np.abs(lapack).max())
