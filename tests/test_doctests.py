"""The Examples sections of the front-door functions' docstrings run as written (doctest).

Every function named in ``FUNCTIONS`` must have a numpy-style ``Examples`` section with at least
one ``>>>`` line; each docstring runs in a fresh namespace in an empty temporary folder and fails
on any output that differs from the one written (ELLIPSIS and NORMALIZE_WHITESPACE allowed). The
examples print structural facts and rounded values of seeded runs, so their output is the same on
every machine.
"""

from __future__ import annotations

import doctest
import importlib
import inspect

import pytest

# module -> functions whose docstring carries an Examples section
FUNCTIONS = {
    "bayesfair.core.merit": ["exponential", "fair_policy"],
    "bayesfair.simulation.simulator": ["simulate", "checkpoint_grid"],
    "bayesfair.simulation.results": ["tidy", "write_results"],
    "bayesfair.workflow.config": ["load_config"],
    "bayesfair.workflow.persist": ["save_policy", "load_policy"],
    "bayesfair.policies.fairx": ["fairx_ts", "fairx_ucb"],
    "bayesfair.policies.classic": ["thompson"],
    "bayesfair.posteriors.beta_bernoulli": ["beta_bernoulli"],
    "bayesfair.environments.arms": ["bernoulli_arms"],
    "bayesfair.environments.prior": ["prior_environment"],
    "bayesfair.diagnostics.posterior": ["from_posterior"],
}
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _cases():
    for module, names in FUNCTIONS.items():
        for name in names:
            yield pytest.param(module, name, id=f"{module.rsplit('.', 1)[-1]}.{name}")


@pytest.mark.parametrize(("module", "name"), list(_cases()))
def test_docstring_example(module, name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    obj = getattr(importlib.import_module(module), name)
    doc = inspect.cleandoc(obj.__doc__ or "")
    assert "\nExamples\n--------\n" in doc, f"{module}.{name}: no Examples section"
    tests = [t for t in doctest.DocTestFinder(recurse=False).find(obj, name, globs={}) if t.examples]
    assert tests, f"{module}.{name}: the Examples section has no >>> lines"
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{module}.{name}: {result.failed} of {result.attempted} examples failed (above)"


def test_the_front_door_names_are_covered():
    """The functions with examples are what ``bayesfair`` exports under those names."""
    import bayesfair as bf

    exported = {"simulate", "checkpoint_grid", "tidy", "write_results", "load_config", "save_policy", "load_policy",
                "fairx_ts", "fairx_ucb", "thompson", "beta_bernoulli", "bernoulli_arms"}
    for module, names in FUNCTIONS.items():
        for name in set(names) & exported:
            assert getattr(bf, name) is getattr(importlib.import_module(module), name) or \
                getattr(bf, name).__wrapped__ is getattr(importlib.import_module(module), name), name
