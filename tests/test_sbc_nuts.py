"""SBC of the NUTS group-bias fit (bayesfair.inference.fitting.fit), every scale drawn from DEFAULT_PRIORS (slow).

100 replications on a small design (2 groups x 2 arms, d = 2, 200 rows), 4 chains x (500 + 250),
100 ranked draws each. Pass: bayesfair.inference.sbc's uniformity tests (family-wise alpha 1e-3), psi's 90%
coverage within 4 binomial standard errors of 0.9, and no replication whose chains froze (the
fit's own detector or an independent one: a chain whose log density did not move, or whose step
size is 1000x below the largest chain's) while its verdict said converged. The full-size run on
the COMPAS design is models/sbc_group_bias.py (results in models/README.md).
"""

import warnings

import jax
import numpy as np
import pytest

from bayesfair.inference import fitting
from bayesfair.inference.sbc import sbc
from bayesfair.posteriors.group_bias import group_bias_model

GROUPS = np.array([0, 0, 1, 1])
N_OBS, D, REPS, DRAWS = 200, 2, 100, 100


@pytest.mark.slow
def test_nuts_group_bias_fit_passes_sbc():
    from numpyro.handlers import condition, seed, trace

    rng = np.random.default_rng(0)
    arms = np.arange(N_OBS, dtype=np.int32) % GROUPS.size
    X = np.c_[rng.normal(size=(N_OBS, D - 1)), np.ones(N_OBS)]
    verdicts = []

    def prior_draw(key):
        with jax.enable_x64(True):
            tr = trace(seed(group_bias_model, key)).get_trace(arms, X, None, group_of_arm=GROUPS)
        v = {k: np.asarray(s["value"]) for k, s in tr.items()}
        return {"beta_bar": v["beta_bar"], "beta": v["beta"], "psi": v["psi_all"], "tau": v["tau"], "s": v["s"],
                "sigma": v["sigma"], "_latent": {k: v[k] for k in ("beta_bar", "z", "psi", "tau", "s", "sigma")}}

    def simulate(key, theta):
        with jax.enable_x64(True):
            tr = trace(seed(condition(group_bias_model, theta["_latent"]), key)).get_trace(
                arms, X, None, group_of_arm=GROUPS)
        return np.asarray(tr["y"]["value"])

    def fit(y, key):
        data = fitting.group_bias_data(arms, X, y, GROUPS)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            f = fitting.fit(data, num_warmup=500, num_samples=250, seed=int(jax.random.randint(key, (), 0, 2**30)),
                            warn=False)
        lp, steps = f.sample_stats["lp"], f.sample_stats["step_size"][:, -1]
        frozen = bool(f.convergence.frozen_chains) or any(
            np.std(lp[c]) < 1e-8 or steps[c] < 1e-3 * steps.max() for c in range(lp.shape[0]))
        verdicts.append((f.converged, frozen))
        c, n = f.samples["beta"].shape[:2]
        pick = np.linspace(0, c * n - 1, DRAWS).round().astype(int)
        return {k: f.samples[src].reshape(c * n, *f.samples[src].shape[2:])[pick]
                for k, src in (("beta_bar", "beta_bar"), ("beta", "beta"), ("psi", "psi_all"), ("tau", "tau"),
                               ("s", "s"), ("sigma", "sigma"))}

    def prior_draw_ranked(key):
        theta = prior_draw(key)
        prior_draw_ranked.latent = theta.pop("_latent")
        return theta

    def simulate_ranked(key, theta):
        return simulate(key, {"_latent": prior_draw_ranked.latent})

    res = sbc(prior_draw_ranked, simulate_ranked, fit, jax.random.key(17), replications=REPS, vectorize=False)
    assert not [v for v in verdicts if v[0] and v[1]], "a frozen chain was reported as converged"
    psi = [i for i, nm in enumerate(res.names) if nm.startswith("psi")]
    cover = float(np.mean(res.coverage[psi]))
    assert abs(cover - 0.9) < 4 * np.sqrt(0.09 / REPS), cover
    assert res.passed, res.summary()
