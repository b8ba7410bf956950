"""Assertions shared by the policy contract tests."""

import jax.numpy as jnp
import numpy as np


def assert_valid_selection(action, probs, info, n_arms: int) -> None:
    """A batch of ``select`` outputs: documented shapes/dtypes, pi_t a probability vector, and
    every action drawn from pi_t (never an arm with zero probability)."""
    n = action.shape[0]
    assert action.shape == (n,) and action.dtype == jnp.int32
    assert probs.shape == (n, n_arms) and probs.dtype == jnp.float32
    assert isinstance(info, dict)
    p = np.asarray(probs)
    assert np.all(np.isfinite(p)) and np.all(p >= 0)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-5)
    a = np.asarray(action)
    assert np.all((a >= 0) & (a < n_arms))
    assert np.all(p[np.arange(n), a] > 0)


#: The environment policy examples run on unless they declare another (``example_env``): six
#: Bernoulli arms in three groups of sizes 1, 3, 2 (with study floors for the bi-level policies).
EXAMPLE_ENV = {"name": "bernoulli_arms", "means": [0.1, 0.26, 0.42, 0.58, 0.74, 0.9], "group_sizes": [1, 3, 2]}
#: The study values examples inherit (merit, horizon, group floors of :data:`EXAMPLE_ENV`).
EXAMPLE_STUDY = {"merit": {"name": "exponential", "c": 3.0}, "horizon": 1000, "floors": [0.2, 0.3, 0.25]}


def policy_examples(entry) -> list[dict]:
    """A policy entry's declared examples, with a posterior given by name expanded over every
    declared posterior family of the type the policy takes, so a newly declared family runs in
    every posterior-based policy's contract. The families' own examples are taken in turn (policy
    ``i`` uses example ``i mod n`` of each family), so each of them is exercised too."""
    from bayesfair.workflow import registry

    types = {p.name: p.type for p in entry.params()}
    shift = registry.names("policy").index(entry.name) if entry.name in registry.names("policy") else 0
    out = []
    for j, spec in enumerate(entry.examples()):
        if not isinstance(spec.get("posterior"), str):
            out.append((f"{entry.name}[{j}]", spec))
            continue
        for fam in registry.entries("posterior"):
            if fam.returns() is types["posterior"]:
                exs = fam.examples()
                out.append((f"{entry.name}[{j}]-{fam.name}", {**spec, "posterior": exs[(shift + j) % len(exs)]}))
    return out


def tracking_block(real_block, inside: list):
    """A stand-in for ``core._compile.cache_small_programs`` that runs the real block and keeps
    ``inside`` non-empty while a call is within it (so a test can see where compilations happen)."""
    import contextlib

    @contextlib.contextmanager
    def block():
        with real_block():
            inside.append(1)
            try:
                yield
            finally:
                inside.pop()

    return block
