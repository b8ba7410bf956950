"""Study configs: validation errors name the key path, the value and what is allowed; the demo config."""

import copy
import os
from pathlib import Path

import numpy as np
import pytest

import bayesfair as bf
from bayesfair.core.declare import Cap, _members, _num, _parts
from bayesfair.workflow import registry, shipped
from bayesfair.workflow.config import ConfigError, Study, load_config, parse_config, parse_override, set_path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = shipped.config_dir()

BASE = {
    "name": "t",
    "seed": 1,
    "runs": 2,
    "horizon": 50,
    "chunk_size": 16,
    "merit": {"name": "exponential", "c": 4.0},
    "environment": {"name": "bernoulli_arms", "means": [0.2, 0.5, 0.8], "groups": [0, 0, 1]},
    "policies": {
        "FX": {"name": "fairx_ts", "posterior": {"name": "beta_bernoulli"}},
        "EG": {"name": "fairx_eg", "epsilon": 0.1},
    },
}


def _with(key, value):
    raw = copy.deepcopy(BASE)
    set_path(raw, key, value)
    return raw


def _error(raw) -> ConfigError:
    with pytest.raises(ConfigError) as exc:
        parse_config(raw)
    return exc.value


def test_valid_config_builds_the_study():
    study = parse_config(BASE)
    assert isinstance(study, Study)
    assert list(study.policies) == ["FX", "EG"]
    assert study.policies["EG"].params["epsilon"] == 0.1
    # the study merit is inherited by policies that take one
    assert study.config["policies"]["FX"]["merit"] == {"name": "exponential", "c": 4.0}
    assert study.env.spec.n_arms == 3 and study.env.groups.n_groups == 2
    np.testing.assert_array_equal(study.checkpoints, bf.checkpoint_grid(50))
    assert study.output == Path("results/t")
    assert study.fingerprint() == parse_config(copy.deepcopy(BASE)).fingerprint()
    assert study.fingerprint() != parse_config(_with("seed", 2)).fingerprint()


@pytest.mark.parametrize("key, value, path, words", [
    # unknown keys, at every level
    ("horizn", 10, "horizn", ["unknown key", "did you mean 'horizon'", "allowed"]),
    ("policies.EG.epsilom", 0.1, "policies.EG.epsilom", ["unknown key", "'epsilon'", "initial_estimate"]),
    ("environment.mean", [0.5], "environment.mean", ["unknown key", "'means'"]),
    ("policies.FX.posterior.alpha", 1.0, "policies.FX.posterior.alpha", ["unknown key", "a0, b0"]),
    ("log.enable", True, "log.enable", ["unknown key", "'enabled'"]),
    # wrong types
    ("runs", "many", "runs", ["wrong type", "an integer", "'many'"]),
    ("horizon", 10.5, "horizon", ["wrong type", "an integer", "10.5"]),
    ("policies.EG.epsilon", "0.1", "policies.EG.epsilon", ["wrong type", "a number", "'0.1'"]),
    ("environment.means", "0.5", "environment.means", ["wrong type", "a list of numbers or a table"]),
    ("environment.means", [0.5, "x", 0.2], "environment.means[1]", ["wrong type", "a number", "'x'"]),
    ("policies.FX.posterior", 3, "policies.FX.posterior", ["wrong type", "posterior table"]),
    ("log.enabled", "yes", "log.enabled", ["wrong type", "true or false"]),
    # out-of-range values
    ("runs", 0, "runs", ["out of range", "an integer in [1, 10000000]", "got 0"]),
    ("policies.EG.epsilon", 1.5, "policies.EG.epsilon", ["out of range", "[0, 1]", "1.5"]),
    ("merit.c", -1.0, "merit.c", ["out of range", "(0, inf)", "-1.0"]),
    ("policies.FX.posterior.a0", 0, "policies.FX.posterior.a0", ["out of range", "(0, inf)"]),
    ("seed", -3, "seed", ["out of range", "[0, 4294967295]", "-3"]),
    ("seed", 2**32, "seed", ["out of range", "[0, 4294967295]", "4294967296"]),
    ("checkpoints", [1, 60], "checkpoints[1]", ["out of range", "[1, horizon=50]", "60"]),
    ("floors", [0.5, 0.6], "floors", ["(0, 1/m]", "2 groups"]),
    ("group_floors", [0.3, 0.3], "group_floors", ["unknown key", "floors"]),
    ("policies.EG.start", "up", "policies.EG.start", ["unknown key"]),
])
def test_invalid_values_name_path_value_and_allowed(key, value, path, words):
    err = _error(_with(key, value))
    assert err.path == path, str(err)
    for w in words:
        assert w in str(err), (w, str(err))


def test_choice_and_name_errors():
    err = _error(_with("policies.U", {"name": "fairx_ucb", "start": "middle"}))
    assert err.path == "policies.U.start" and "one of 'upper', 'center'" in str(err) and "'middle'" in str(err)
    err = _error(_with("policies.U", {"name": "fairx_tss"}))
    assert err.path == "policies.U.name" and "unknown policy 'fairx_tss'" in str(err)
    assert "did you mean 'fairx_ts'" in str(err) and "registered policies" in str(err)
    err = _error(_with("policies.FX.posterior", {"name": "beta_bernouli"}))
    assert err.path == "policies.FX.posterior.name" and "beta_bernoulli" in str(err)


def test_missing_required_values():
    raw = copy.deepcopy(BASE)
    del raw["horizon"]
    assert _error(raw).path == "horizon"
    raw = copy.deepcopy(BASE)
    del raw["merit"]
    assert _error(raw).path == "merit"
    err = _error(_with("policies.FX", {"name": "fairx_ts"}))
    assert err.path == "policies.FX.posterior" and "required" in str(err)
    err = _error(_with("policies.B", {"name": "bf_ucb"}))  # no groups_beta and no study floors
    assert err.path == "policies.B.groups_beta" and "study's floors" in str(err)


def test_constructor_and_fit_checks_run_on_load():
    # Bernoulli means must be in [0, 1]: the environment constructor's check, under the key path
    err = _error(_with("environment.means", [0.2, 1.5, 0.3]))
    assert err.path == "environment" and "[0, 1]" in str(err)
    # a linear policy cannot run on a multi-armed environment: found by tracing init/select
    err = _error(_with("policies.L", {"name": "linucb"}))
    assert err.path == "policies.L" and "cannot run on environment" in str(err)
    # floors of the wrong length for the environment's groups
    err = _error(_with("policies.B", {"name": "gef", "groups_beta": [0.2, 0.2, 0.2]}))
    assert err.path.startswith("policies.B")


def test_inheritance_of_floors_horizon_and_merit():
    raw = _with("floors", [0.3, 0.3])
    raw["policies"] = {"B": {"name": "bf_ucb", "delta": 0.05}, "U": {"name": "fairx_ucb"},
                       "M": {"name": "mf", "merit": {"name": "identity"}}}
    study = parse_config(raw)
    assert study.config["policies"]["B"]["groups_beta"] == [0.3, 0.3]
    assert study.policies["B"].params["groups_beta"] == [0.3, 0.3]
    assert study.config["policies"]["U"]["horizon"] == 50  # Theorem 3.2.1's T is the study horizon
    assert study.policies["M"].params["merit"]["name"] == "identity"
    assert "horizon" not in study.config["policies"]["M"]  # MF stays anytime unless told


def test_means_table_and_group_sizes():
    raw = _with("environment", {"name": "bernoulli_arms", "means": {"low": 0.6, "high": 0.85}, "n_arms": 5,
                                "group_sizes": [2, 3], "group_names": ["minority", "majority"]})
    study = parse_config(raw)
    assert study.env.spec.n_arms == 5 and study.env.groups.names == ("minority", "majority")
    err = _error(_with("environment.means", {"low": 0.1}))
    assert err.path == "environment.means.high"


def test_unknown_modules_are_listed_as_unavailable_not_import_errors(tmp_path, monkeypatch):
    # a module of the policies package that cannot be imported (a missing dependency)
    (tmp_path / "_no_such_module_.py").write_text("import _bayesfair_missing_dependency_\n")
    import bayesfair.policies

    monkeypatch.setattr(bayesfair.policies, "__path__", [*bayesfair.policies.__path__, str(tmp_path)])
    try:
        rows = [r for r in registry.table() if r["name"].startswith("bayesfair.policies._no_such_module_")]
        assert rows and not rows[0]["available"] and "No module named" in rows[0]["reason"]
        err = _error(_with("policies.X", {"name": "whatever"}))
        assert "not available: bayesfair.policies._no_such_module_" in str(err)
    finally:
        registry._BROKEN["policy"].pop("bayesfair.policies._no_such_module_", None)


def test_import_path_names_and_signature_schema():
    raw = _with("policies.X", {"name": "bayesfair.policies.classic:epsilon_greedy", "epsilon": 0.2})
    study = parse_config(raw)
    assert study.policies["X"].params["epsilon"] == 0.2
    err = _error(_with("policies.X", {"name": "bayesfair.policies.classic:nope"}))
    assert err.path == "policies.X.name" and "has no attribute 'nope'" in str(err)


def test_toml_file_errors_and_overrides(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("runs = [\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="no config file"):
        load_config(tmp_path / "missing.toml")
    assert parse_override("policies.EG.epsilon=0.2") == ("policies.EG.epsilon", 0.2)
    assert parse_override("output=results/x") == ("output", "results/x")
    assert parse_override("checkpoints=[1, 5]") == ("checkpoints", [1, 5])
    with pytest.raises(ConfigError, match="not in the config"):
        set_path(copy.deepcopy(BASE), "policies.NOPE.epsilon", 0.1)
    study = load_config(CONFIGS / "demo.toml", ["runs=3", "horizon=100", "policies.FairX-EG.epsilon=0.2"])
    assert (study.runs, study.horizon, study.policies["FairX-EG"].params["epsilon"]) == (3, 100, 0.2)
    assert study.name == "demo"


def test_demo_config_is_the_demo_study():
    """The shipped config demo builds exactly the objects `bayesfair demo` simulates.

    simulate() is deterministic given (seed, env, policies, horizon, runs, merit, checkpoints,
    chunk_size), so equal configurations give equal numbers (checked end to end in the slow test
    of tests/test_cli.py).
    """
    from bayesfair.workflow.cli import DEMO_MEANS

    study = load_config(CONFIGS / "demo.toml")
    merit = bf.merit.exponential(4.0)
    demo = {
        "FairX-TS": bf.fairx_ts(bf.beta_bernoulli(), merit),
        "FairX-UCB": bf.fairx_ucb(merit, horizon=20_000, delta=0.05),
        "FairX-EG": bf.fairx_eg(merit, epsilon=0.05),
        "TS": bf.thompson(bf.beta_bernoulli()),
        "UCB": bf.ucb1(),
    }
    assert list(study.policies) == list(demo)
    for name, pol in demo.items():
        assert (study.policies[name].name, study.policies[name].label) == (pol.name, pol.label)
        assert study.policies[name].params == pol.params, name
    env = bf.bernoulli_arms(DEMO_MEANS)
    assert study.env.params == env.params and study.env.label == env.label
    np.testing.assert_array_equal(study.env.groups.labels, env.groups.labels)
    assert study.merit.describe() == merit.describe()
    assert (study.seed, study.runs, study.horizon) == (0, 20, 20_000)
    np.testing.assert_array_equal(study.checkpoints, bf.checkpoint_grid(20_000))
    assert study.config["chunk_size"] == 1024 and study.config["floors"] is None


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_config_validates(path, monkeypatch):
    # configs on datasets (yeast, Adult) build their environment: read the shared data folder
    data = Path(os.environ.get("BAYESFAIR_DATA", ROOT.parent / "shared" / "data"))
    monkeypatch.setenv("BAYESFAIR_DATA", str(data))
    obj = load_config(path)
    assert obj.name


PYTHON_ONLY_POSTERIORS = ("group_bias_posterior", "hierarchical_logit_normal", "mcmc_posterior", "mcmc_beta_bernoulli",
                          "logistic_linear_mcmc")


def test_every_posterior_family_is_declared_or_listed_as_python_only(capsys):
    import inspect

    import bayesfair.posteriors as P
    from bayesfair.workflow.cli import main

    families = {n for n in P.__all__ if callable(getattr(P, n)) and not inspect.isclass(getattr(P, n))
                and "Posterior" in str(inspect.signature(getattr(P, n)).return_annotation)}
    declared = set(registry.names("posterior"))
    assert families - declared == set(PYTHON_ONLY_POSTERIORS)
    assert main(["list", "posteriors"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.count("(Python only:") == len(PYTHON_ONLY_POSTERIORS)
    err = _error(_with("policies.X", {"name": "thompson", "posterior": {"name": "hierarchical_logit_normal"}}))
    assert err.path == "policies.X.posterior.name" and "available from Python only: an MCMC-fallback" in str(err)


def _bounded_params():
    from _checks import EXAMPLE_STUDY

    cases = []
    for kind in ("policy", "environment", "posterior", "merit", "metric"):
        for e in registry.entries(kind):
            for p in e.params():
                if p.kind in ("int", "float") and p.low is not None:
                    cases.append(pytest.param(kind, e.name, p.name, int(p.low) - 1 if p.kind == "int" else p.low - 0.5,
                                              EXAMPLE_STUDY, id=f"{e.name}.{p.name}"))
    return cases


@pytest.mark.parametrize("kind, name, param, bad, study", _bounded_params())
def test_a_config_and_a_python_call_get_the_same_message(kind, name, param, bad, study):
    """One declared type checks both: a value below a declared bound gives the config error and
    the Python call's error with the same text, naming the field and the allowed range."""
    entry = registry.get(kind, name)
    example = entry.examples()[0]
    with pytest.raises(ConfigError) as config:
        registry.check_params(kind, {**example, param: bad}, kind, study=study)
    assert config.value.path == f"{kind}.{param}" and "allowed" in config.value.message
    _, norm = registry.check_params(kind, example, kind, study=study)
    with pytest.raises(ConfigError) as call:  # build() calls the constructor: its ValueError, wrapped
        registry.build(kind, {**norm, param: bad}, kind)
    expected = config.value.message
    if any(isinstance(m, Cap) for t in _members(entry_param(entry, param).type) for m in _parts(t)[1]):
        # a size cap bounds configs only: the Python call is told its own range
        expected = expected.replace(f", {_num(_cap(entry, param), True)}]", ", inf)")
    assert call.value.message == f"{name}: {param}: {expected}"


def entry_param(entry, name):
    return {p.name: p for p in entry.params()}[name]


def _cap(entry, name):
    return next(m.high for t in _members(entry_param(entry, name).type) for m in _parts(t)[1] if isinstance(m, Cap))
