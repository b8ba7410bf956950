"""Bad input gets a clear error naming the field."""

import jax.numpy as jnp
import numpy as np
import pytest

import bayesfair as bf
from bayesfair.core import merit


@pytest.mark.parametrize(
    "fn,match",
    [
        (lambda mu: mu - 0.5, "must be > 0"),
        (lambda mu: jnp.log(mu - 0.5), "finite"),
        (lambda mu: 2.0 - mu, "nondecreasing"),
        (lambda mu: jnp.where(mu > 0.3, jnp.nan, 1.0), "finite"),
    ],
)
def test_custom_merit_rejects_bad_functions(fn, match):
    with pytest.raises(ValueError, match=match):
        merit.custom(fn)


def test_merit_constructors_validate():
    with pytest.raises(ValueError, match="floor"):
        merit.identity(floor=0.0)
    with pytest.raises(ValueError, match=r"c: out of range: allowed a number in \(0, inf\), got -1.0"):
        merit.exponential(-1.0)
    with pytest.raises(ValueError, match="domain"):
        merit.exponential(1.0, domain=(1.0, 0.0))
    with pytest.raises(TypeError, match="callable"):
        merit.custom(3.0)
    m = merit.custom(lambda mu: 1.0 + mu)
    assert m.gamma == pytest.approx(1.0) and m.lipschitz == pytest.approx(1.0, rel=1e-3)


def test_exponential_constants():
    m = merit.exponential(4.0)
    assert m.gamma == pytest.approx(1.0)
    assert m.lipschitz == pytest.approx(4.0 * np.exp(4.0))


@pytest.mark.parametrize(
    "means,match",
    [
        ([0.2, 1.2], r"Bernoulli means must be in \[0, 1\]"),
        ([0.2, -0.1], r"Bernoulli means must be in \[0, 1\]"),
        ([0.2, np.nan], "means must be finite"),
        ([], "means must not be empty"),
        ([[[0.1, 0.2]]], r"means must be \[K\] \(fixed\) or \[runs, K\]"),  # [[...]] is one run's row now
    ],
)
def test_bernoulli_means_validated(means, match):
    with pytest.raises(ValueError, match=match):
        bf.bernoulli_arms(means)


def test_uniform_means_validated():
    with pytest.raises(ValueError, match="means.low must be <= means.high"):
        bf.bernoulli_arms(bf.environments.UniformMeans([0.5, 0.9], [0.4, 1.0]))
    with pytest.raises(ValueError, match="one value per arm"):
        bf.bernoulli_arms(bf.environments.UniformMeans([0.1, 0.2, 0.3], [0.5, 0.6]))


def test_groups_validated():
    with pytest.raises(ValueError, match=r"group\(s\) \[1\] have no arm"):
        bf.Groups.from_labels([0, 0, 2])
    with pytest.raises(ValueError, match="groups has 3 arms but means has 2"):
        bf.bernoulli_arms([0.1, 0.2], groups=[0, 1, 1])
    with pytest.raises(ValueError, match="one name per group"):
        bf.Groups.from_labels([0, 1], names=["a"])
    with pytest.raises(ValueError, match=r"beta\[1\] must be in \(0, 1/m\]"):
        from bayesfair.core.groups import validate_exposure_floors

        validate_exposure_floors([0.2, 0.6], 2)


def test_simulate_validates(small_env, exp4):
    pols = {"u": bf.uniform()}
    with pytest.raises(ValueError, match="horizon must be an integer >= 1"):
        bf.simulate(0, small_env, pols, 0, 2, merit=exp4)
    with pytest.raises(ValueError, match="runs must be an integer >= 1"):
        bf.simulate(0, small_env, pols, 10, -1, merit=exp4)
    with pytest.raises(TypeError, match="runs must be an integer"):
        bf.simulate(0, small_env, pols, 10, 2.5, merit=exp4)
    with pytest.raises(ValueError, match="non-empty mapping"):
        bf.simulate(0, small_env, {}, 10, 2, merit=exp4)
    with pytest.raises(TypeError, match=r"policies\['u'\] must be a bayesfair Policy"):
        bf.simulate(0, small_env, {"u": object()}, 10, 2, merit=exp4)
    with pytest.raises(ValueError, match=r"checkpoints must be rounds in \[1, horizon=10\]"):
        bf.simulate(0, small_env, pols, 10, 2, merit=exp4, checkpoints=[0, 5])
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        bf.simulate(-3, small_env, pols, 10, 2, merit=exp4)


def test_policy_and_posterior_constructors_validate(exp4):
    # the declared type (core.declare)
    with pytest.raises(ValueError, match=r"a0: out of range: allowed a number in \(0, inf\)"):
        bf.beta_bernoulli(0.0, 1.0)
    with pytest.raises(ValueError, match=r"noise_var: out of range: allowed a number in \(0, inf\)"):
        bf.normal_known_variance(noise_var=0.0)
    with pytest.raises(ValueError, match=r"kappa0: out of range: allowed a number in \(0, inf\)"):
        bf.normal_inverse_gamma(kappa0=-1.0)
    with pytest.raises(ValueError, match=r"epsilon: out of range: allowed a number in \[0, 1\]"):
        bf.fairx_eg(exp4, epsilon=1.5)
    with pytest.raises(ValueError, match="needs w0, or horizon"):
        bf.fairx_ucb(exp4)
    with pytest.raises(ValueError, match=r"delta: out of range: allowed a number in \(0, 1\)"):
        bf.fairx_ucb(exp4, horizon=100, delta=1.0)
    with pytest.raises(ValueError, match="start: invalid value: allowed one of"):
        bf.fairx_ucb(exp4, w0=1.0, start="middle")
    with pytest.raises(TypeError, match="posterior must be a bayesfair Posterior"):
        bf.fairx_ts("beta", exp4)
    with pytest.raises(ValueError, match="merit fn must be > 0"):
        bf.fairx_ts(bf.beta_bernoulli(), lambda mu: mu - 2.0)


# Ranges are declared once (@declare); the declaration checks every scalar a Python caller can pass,
# not only floats and ints: numeric strings and 0-d NumPy/JAX arrays out of range are refused with
# the parameter named, as the constructors' own checks did before they were folded in.
@pytest.mark.parametrize("build, field, bad", [
    (lambda v: bf.policies.epsilon_greedy(epsilon=v), "epsilon", 2.0),
    (lambda v: bf.fairx_eg(merit.exponential(2.0), epsilon=v), "epsilon", -0.5),
    (lambda v: bf.fairx_ucb(merit.exponential(2.0), delta=v), "delta", 1.5),
    (lambda v: bf.beta_bernoulli(a0=v), "a0", -1.0),
    (lambda v: bf.linear_bandit(n_arms=v, n_features=2), "n_arms", 0),
])
@pytest.mark.parametrize("form", [str, np.float32, jnp.float32, float], ids=["str", "np0d", "jax0d", "float"])
def test_declared_ranges_refuse_odd_scalars(build, field, bad, form):
    with pytest.raises((ValueError, TypeError), match=field):
        build(form(bad))


def test_the_top_level_namespace_is_the_documented_api():
    """``dir(bayesfair)`` lists only ``__all__`` and bayesfair's own submodules (no stray imports
    such as ``os``, ``sys`` or ``annotations``), and every name of ``__all__`` exists."""
    import types

    import bayesfair

    stray = [n for n in dir(bayesfair) if not n.startswith("_") and n not in bayesfair.__all__
             and not (isinstance(getattr(bayesfair, n), types.ModuleType)
                      and getattr(bayesfair, n).__name__.startswith("bayesfair."))]
    assert stray == []
    assert [n for n in bayesfair.__all__ if not hasattr(bayesfair, n)] == []
