"""The MCMC-fallback example of docs/mcmc.md, run as documented, against the fallback's own
convergence verdict (the in-loop thresholds ``max_rhat``, ``min_ess``, no divergences).

The example does not converge today (docs/mcmc.md says why, with the measurements), so the run
is a strict xfail: the day a change makes it converge, the test fails as XPASS and the docs'
paragraph and this marker are to be removed. The settings are read from the docs' code block,
so the test runs what a reader copies. Slow (about 5 minutes of CPU for 2 x 10 runs x 5,000
rounds with 50 NUTS refreshes each); the settings check runs by default.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import bayesfair as bf
from bayesfair.posteriors.hierarchical import hierarchical_logit_normal

DOC = Path(__file__).resolve().parents[1] / "docs" / "mcmc.md"


def _example() -> str:
    text = DOC.read_text(encoding="utf-8")
    block = text.split("```python", 1)[1].split("```", 1)[0]
    assert "hierarchical_logit_normal(env.spec.group_of_arm" in block
    return block


def test_the_example_is_the_one_tested():
    block = _example()
    assert re.search(r"post = hierarchical_logit_normal\(env\.spec\.group_of_arm, refresh_every=100\)", block)
    assert "bf.simulate(0, env, policies, 5000, 10, merit=merit)" in block
    assert 'bf.bernoulli_arms([0.2, 0.5, 0.55, 0.8], groups=[0, 0, 1, 1])' in block


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="docs/mcmc.md: the non-centred hierarchical model's refreshes fail the "
                                       "in-loop thresholds in this setting (divergences, ESS < 20)")
def test_the_documented_example_converges():
    merit = bf.merit.exponential(4.0)
    env = bf.bernoulli_arms([0.2, 0.5, 0.55, 0.8], groups=[0, 0, 1, 1])
    post = hierarchical_logit_normal(env.spec.group_of_arm, refresh_every=100)
    policies = {"FairX-TS (hier.)": bf.fairx_ts(post, merit), "BF-TS (hier.)": bf.bf_ts([0.2, 0.2], merit, post)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = bf.simulate(0, env, policies, 5000, 10, merit=merit)
    failed = [str(w.message) for w in caught if "MCMC refreshes failed" in str(w.message)]
    bad = results["track_mcmc_bad_refreshes"].isel(checkpoint=-1).values
    assert not failed and np.all(bad == 0), f"failed refreshes per policy and run: {bad.tolist()}; {failed}"
