"""bayesfair's group-bias GLM fit and an independent PyMC + nutpie fit of the same model agree.

The design is the Adult-by-sex recipe's (Bernoulli, 300 rows), built by the recipe itself
(experiments/benchmarks/nutpie_bench.py's ``recipe_design``); the PyMC model is the benchmark's
``pymc_model``, written from the model's docstring. Needs the ``bench`` extra (pymc, nutpie) and
the Adult data; skipped otherwise.
"""

import os
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = ROOT / "experiments" / "benchmarks"
DATA = Path(os.environ.get("BAYESFAIR_DATA", ROOT.parent / "shared" / "data"))
ADULT = DATA / "adult"

#: |z| bound per scalar. z = (mean_bf - mean_nutpie) / sqrt(MCSE_bf^2 + MCSE_nutpie^2) is ~N(0, 1)
#: when both chains target one posterior; P(|z| > 4) = 6.3e-5 per scalar, so over the design's
#: 74 scalars (every coordinate of every sampled site and the bias estimand) the false-failure
#: rate is <= 74 x 6.3e-5 = 0.5% (Bonferroni).
K_MCSE = 4.0


@pytest.mark.slow
def test_bayesfair_and_nutpie_posteriors_agree(monkeypatch):
    pytest.importorskip("pymc")
    pytest.importorskip("nutpie")
    if not ADULT.is_dir():
        pytest.skip(f"Adult data not found under {DATA}")
    monkeypatch.setenv("BAYESFAIR_DATA", str(DATA))
    # the benchmark is a script in experiments/benchmarks (not a package): import it as Python
    # imports a script's neighbours
    monkeypatch.syspath_prepend(str(BENCH_DIR))
    import nutpie_bench as nb

    design = nb.recipe_design("adult_sex", 300, seed=0)
    res = nb.compare(design, 0, nb._CompileClock())
    for side in ("bayesfair", "nutpie"):
        row = res[side]
        # MCSE (and so z) is trustworthy only for chains that mixed: R-hat < 1.01 and a bulk ESS of
        # at least 200 on every scalar (the full verdict's 400 is not needed for a mean's MCSE)
        assert row["max_rhat"] < 1.01 and row["min_ess_bulk"] >= 200, (
            f"{side} did not mix: R-hat {row['max_rhat']:.3f}, bulk ESS {row['min_ess_bulk']:.0f}, "
            f"{row['divergences']} divergences, failing {row['failing']}")
    agree = res["agreement"]
    assert agree["n_scalars"] == 74  # 2 groups, 5 buckets (4 zero-sum coordinates), 30 features: K_MCSE's count
    bound = K_MCSE
    assert agree["max_abs_z"] <= bound, (
        f"posterior means differ by {agree['max_abs_z']:.2f} combined MCSE (bound {bound}) at {agree['worst']}; "
        f"worst: {agree['worst_scalars']}")
    assert np.isfinite(res["bayesfair"]["ess_per_s_delta"]) and np.isfinite(res["nutpie"]["ess_per_s_delta"])


@pytest.mark.parametrize("likelihood", ["bernoulli", "binomial", "beta_binomial", "ordered_logistic", "gaussian",
                                        "student_t", "skew_t"])
def test_pymc_model_has_bayesfairs_log_density(likelihood, monkeypatch):
    """The benchmark's PyMC model and bayesfair's NumPyro model have the same log density (with
    the transforms' Jacobians) at random unconstrained points, on a synthetic 3-group design (no
    sampling; skipped without pymc)."""
    pm = pytest.importorskip("pymc")
    import jax
    from numpyro.infer.util import initialize_model, potential_energy

    from bayesfair.inference.glm_fit import GlmDesign, build_glm

    monkeypatch.syspath_prepend(str(BENCH_DIR))
    import nutpie_bench as nb

    rng = np.random.default_rng(3)
    n, d = 40, 3
    group, bucket = rng.integers(0, 3, n).astype(np.int32), rng.integers(0, 2, n).astype(np.int32)
    y = {"bernoulli": rng.integers(0, 2, n), "binomial": rng.integers(0, 10, n),
         "beta_binomial": rng.integers(0, 10, n), "ordered_logistic": rng.integers(0, 5, n),
         "gaussian": rng.normal(2.0, 0.7, n), "student_t": rng.standard_t(3, n),
         "skew_t": rng.standard_t(3, n)}[likelihood].astype(np.float64)
    design = GlmDesign(group, bucket, rng.normal(size=(n, d)), y, 3, 2, 1, likelihood, 9,
                       5 if likelihood == "ordered_logistic" else None)
    model, args = build_glm(design)
    pmodel = nb.pymc_model(design)
    logp = pmodel.compile_logp(mode="FAST_COMPILE")
    with jax.enable_x64(True):
        for seed in range(3):
            z = initialize_model(jax.random.key(seed), model, model_args=args).param_info.z
            z = {k: np.asarray(v) + rng.normal(0, 0.5, np.shape(v)) for k, v in z.items()}  # away from the init
            point = {pmodel.rvs_to_values[rv].name: z[rv.name] for rv in pmodel.free_RVs}
            assert sorted(rv.name for rv in pmodel.free_RVs) == sorted(z)
            expected = -float(potential_energy(model, args, {}, z))
            # rel 1e-6: PyMC's binomial family takes log(sigmoid(eta)), NumPyro's a log-sigmoid, which
            # differ by ~1e-7 relative at these random points; a model difference is O(1)
            assert float(logp(point)) == pytest.approx(expected, rel=1e-6), likelihood
    del pm
