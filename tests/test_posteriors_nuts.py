"""The conjugate fast path agrees with NUTS on the family's own NumPyro model.

Every declared per-arm conjugate posterior family (``registry.entries("posterior")``, each of its
declared examples: a new family is checked by its declaration alone) is compared with NUTS on its
own reference model: for several data sets drawn from the family's prior predictive (its model run
forward), NUTS samples the model and the posterior mean and standard deviation of every arm's mean
are compared with the closed form. Tolerance: Z standard errors of the Monte Carlo estimate, with
the standard error computed from the effective sample size (mean: sd / sqrt(ESS); sd: sd *
sqrt((kurtosis - 1) / (4 ESS)), the kurtosis measured on 40,000 exact posterior draws with a 25%
margin). With 7 family examples x 3 data sets x 3 arms x 2 statistics = 126 comparisons at Z = 4.5
(each fails with probability ~7e-6 for a correct implementation) the suite's false-failure rate is
below 1e-3. A wrong update (e.g. a missing prior term, a variance used as a scale) moves the
moments by many standard errors at these sample sizes.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.diagnostics import effective_sample_size
from numpyro.infer import MCMC, NUTS, Predictive

from bayesfair.posteriors import fit
from bayesfair.posteriors.base import Outcome, Posterior
from bayesfair.posteriors.mcmc import is_mcmc_state
from bayesfair.workflow import registry

K = 3
N_OBS = 24
N_SETS = 3
Z = 4.5


def declared_families() -> dict[str, Posterior]:
    """``{"name[i]": posterior}``: each declared example of every per-arm conjugate family (a
    :class:`Posterior` whose state is not the MCMC fallback's)."""
    out = {}
    for entry in registry.entries("posterior"):
        for i, spec in enumerate(entry.examples()):
            _, norm = registry.check_params("posterior", spec, entry.name)
            post = registry.build("posterior", norm, entry.name)
            if isinstance(post, Posterior) and not is_mcmc_state(post.init(K)):
                out[f"{entry.name}[{i}]"] = post
    return out


FAMILIES = declared_families()


def _data(post: Posterior, seed: int):
    """Arms at random and rewards from the family's own prior predictive."""
    rng = np.random.default_rng(seed)
    arms = rng.integers(0, K, N_OBS).astype(np.int32)
    draw = Predictive(partial(post.model, n_arms=K), num_samples=1)(jax.random.key(seed), jnp.asarray(arms))
    return arms, np.asarray(draw["r"][0], np.float32)


def _kurtosis(post: Posterior, state) -> np.ndarray:
    draws = np.asarray(jax.vmap(post.sample, in_axes=(0, None))(jax.random.split(jax.random.key(5), 40_000), state),
                       np.float64)
    c = draws - draws.mean(0)
    return 1.25 * (c**4).mean(0) / (c**2).mean(0) ** 2


def check_conjugate_matches_nuts(name: str, post: Posterior) -> None:
    """The closed-form posterior moments of ``post`` equal NUTS's on its model (module docstring)."""
    mcmc = MCMC(NUTS(partial(post.model, n_arms=K)), num_warmup=800, num_samples=6000, num_chains=1,
                progress_bar=False, jit_model_args=True)
    key = jax.random.key(17)
    for i in range(N_SETS):
        arms, rewards = _data(post, 100 * len(name) + i)
        key, sub = jax.random.split(key)
        mcmc.run(sub, jnp.asarray(arms), jnp.asarray(rewards))
        draws = np.asarray(mcmc.get_samples(group_by_chain=True)["mu"])  # [1, S, K]
        ess = np.asarray(effective_sample_size(draws))
        state = fit(post, K, arms, rewards)
        kurt = _kurtosis(post, state)
        exact_mean = np.asarray(post.mean(state), np.float64)
        exact_sd = np.sqrt(np.asarray(post.variance(state), np.float64))
        nuts_mean = draws[0].mean(axis=0)
        nuts_sd = draws[0].std(axis=0, ddof=1)
        se_mean = exact_sd / np.sqrt(ess)
        se_sd = exact_sd * np.sqrt((kurt - 1.0) / (4.0 * ess))
        assert np.all(ess > 500), f"{name} set {i}: NUTS mixed poorly, ESS {ess}"
        assert np.all(np.abs(nuts_mean - exact_mean) < Z * se_mean), (
            f"{name} set {i}: means NUTS {nuts_mean} vs conjugate {exact_mean} (se {se_mean})")
        assert np.all(np.abs(nuts_sd - exact_sd) < Z * se_sd), (
            f"{name} set {i}: sds NUTS {nuts_sd} vs conjugate {exact_sd} (se {se_sd})")


def check_conjugate_sampler_matches_its_own_moments(name: str, post: Posterior) -> None:
    """TS draws from the conjugate state have the closed-form mean and variance."""
    arms, rewards = _data(post, 3)
    state = fit(post, K, arms, rewards)
    n = 40_000
    draws = np.asarray(jax.vmap(post.sample, in_axes=(0, None))(jax.random.split(jax.random.key(9), n), state))
    kurt = _kurtosis(post, state)
    mean = np.asarray(post.mean(state))
    sd = np.sqrt(np.asarray(post.variance(state)))
    assert np.all(np.abs(draws.mean(0) - mean) < Z * sd / np.sqrt(n)), name
    assert np.all(np.abs(draws.std(0) - sd) < Z * sd * np.sqrt((kurt - 1.0) / (4.0 * n))), name


def test_every_shipped_conjugate_family_is_checked():
    assert {n.split("[")[0] for n in FAMILIES} >= {"beta_bernoulli", "normal_known_variance", "normal_inverse_gamma"}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_conjugate_matches_nuts(family):
    check_conjugate_matches_nuts(family, FAMILIES[family])


@pytest.mark.parametrize("family", list(FAMILIES))
def test_conjugate_sampler_matches_its_own_moments(family):
    check_conjugate_sampler_matches_its_own_moments(family, FAMILIES[family])


def families_with_observation_models() -> dict[str, Posterior]:
    return {n: p for n, p in FAMILIES.items() if p.observation is not None}


@pytest.mark.parametrize("family", list(families_with_observation_models()))
def test_observation_model_is_the_numpyro_likelihood(family):
    """The hand-written observation model used for model checking (log-likelihood, predictive draws)
    is the family's NumPyro likelihood: its log density of every observation equals
    ``numpyro.infer.util.log_likelihood`` of the model's reward site at the same drawn parameters."""
    from numpyro.infer.util import log_likelihood

    post = FAMILIES[family]
    arms, rewards = _data(post, 11)
    state = fit(post, K, arms, rewards)
    params = jax.vmap(post.observation.draw, in_axes=(0, None))(jax.random.split(jax.random.key(4), 8), state)
    outcomes = Outcome(jnp.asarray(rewards), arm=jnp.asarray(arms))
    ours = jax.vmap(lambda p: jax.vmap(lambda o: post.observation.log_density(p, o))(outcomes))(params)
    theirs = log_likelihood(partial(post.model, n_arms=K), params, jnp.asarray(arms), jnp.asarray(rewards))["r"]
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=2e-5, atol=2e-5)
