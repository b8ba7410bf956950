"""Adding a policy, an environment, a posterior or a metric is one file: the skeletons of
docs/developer/skeletons/, dropped into their packages (bayesfair.policies, bayesfair.environments,
bayesfair.posteriors, bayesfair.simulation), appear in `bayesfair list`, build from a TOML config,
run a study through `bayesfair simulate`, and pass the declaration-driven checks (the contract test,
and for a posterior the closed-form-equals-NUTS test on its own model) with no other edit."""

import contextlib
import io
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import test_contract
import test_posteriors_nuts

import bayesfair.environments
import bayesfair.policies
import bayesfair.posteriors
import bayesfair.simulation
from bayesfair import read_results
from bayesfair.workflow import registry
from bayesfair.workflow.cli import main
from bayesfair.workflow.config import load_config

SKELETONS = Path(__file__).resolve().parents[1] / "docs" / "developer" / "skeletons"


@pytest.fixture
def dropped_in(tmp_path, monkeypatch):
    """Copy the two skeleton files into (a folder on the path of) the policy / environment packages."""
    added = []
    for package, name, folder_name in ((bayesfair.policies, "softmax_policy", "policy"),
                                       (bayesfair.environments, "uniform_noise_arms", "environment")):
        folder = tmp_path / folder_name
        folder.mkdir()
        shutil.copy(SKELETONS / f"{name}.py", folder / f"{name}.py")
        monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
        added.append(f"{package.__name__}.{name}")
    yield
    for module in added:  # forget them again (other tests see the shipped registry)
        sys.modules.pop(module, None)
        registry._DISCOVERED.discard(module)
    registry.declared("policy").pop("softmax", None)
    registry.declared("environment").pop("uniform_noise_arms", None)


def test_skeleton_policy_and_environment_are_registered_by_their_file_alone(dropped_in, tmp_path, capsys):
    assert main(["list", "policies"]) == 0
    out = capsys.readouterr().out
    assert "softmax" in out and "temperature=0.1" in out
    assert main(["list", "environments"]) == 0
    assert "uniform_noise_arms" in capsys.readouterr().out

    cfg = tmp_path / "study.toml"
    cfg.write_text(
        'name = "skeleton"\nruns = 2\nhorizon = 20\n'
        f'output = "{(tmp_path / "out").as_posix()}"\n'
        '[environment]\nname = "uniform_noise_arms"\nmeans = [0.2, 0.5, 0.8]\nwidth = 0.05\n'
        '[merit]\nname = "exponential"\nc = 3.0\n'
        '[policies.Softmax]\nname = "softmax"\ntemperature = 0.2\n'
        '[policies.FairX-EG]\nname = "fairx_eg"\n'
    )
    study = load_config(cfg)
    pol = study.policies["Softmax"]
    assert (pol.name, pol.label) == ("softmax", "Softmax")
    assert pol.params == {"temperature": 0.2, "initial_estimate": 0.5}
    with contextlib.redirect_stderr(io.StringIO()):
        res = study.run(progress=False)
    assert res is not None

    # the declared range is checked in configs and in Python calls, naming the field
    bad = tmp_path / "bad.toml"
    bad.write_text(cfg.read_text().replace("temperature = 0.2", "temperature = -1.0"))
    with pytest.raises(registry.ConfigError, match=r"policies.Softmax.temperature: out of range"):
        load_config(bad)
    softmax = registry.get("policy", "softmax").target
    with pytest.raises(ValueError, match=r"temperature: out of range: allowed a number in \(0, inf\), got -1.0"):
        softmax(temperature=-1.0)

    # the contract test picks both up from the registry, with no table to edit
    for i, spec in enumerate(registry.get("policy", "softmax").examples()):
        (tmp_path / f"p{i}").mkdir()
        test_contract.test_policy_contract("softmax", i, spec, tmp_path / f"p{i}")
    for i, spec in enumerate(registry.get("environment", "uniform_noise_arms").examples()):
        test_contract.test_environment_contract("uniform_noise_arms", i, spec)


@pytest.fixture
def four_dropped_in(tmp_path, monkeypatch):
    """One skeleton file per kind, each in (a folder on the path of) its package."""
    kinds = ((bayesfair.policies, "softmax_policy", "policy", "softmax"),
             (bayesfair.environments, "uniform_noise_arms", "environment", "uniform_noise_arms"),
             (bayesfair.posteriors, "gamma_poisson", "posterior", "gamma_poisson"),
             (bayesfair.simulation, "best_arm_share", "metric", "best_arm"))
    added = []
    for package, module, kind, _ in kinds:
        folder = tmp_path / f"pkg_{kind}"
        folder.mkdir()
        shutil.copy(SKELETONS / f"{module}.py", folder / f"{module}.py")
        monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
        added.append(f"{package.__name__}.{module}")
    yield
    for module in added:
        sys.modules.pop(module, None)
        registry._DISCOVERED.discard(module)
    for _, _, kind, name in kinds:
        registry.declared(kind).pop(name, None)


def test_each_kind_is_one_file_run_from_a_config_by_the_cli(four_dropped_in, tmp_path, capsys):
    for what, name in (("policies", "softmax"), ("environments", "uniform_noise_arms"),
                       ("posteriors", "gamma_poisson"), ("metrics", "best_arm")):
        assert main(["list", what]) == 0
        assert name in capsys.readouterr().out, what

    cfg = tmp_path / "four.toml"
    cfg.write_text(
        'name = "four"\nseed = 2\nruns = 3\nhorizon = 60\nchunk_size = 32\n'
        'metrics = ["conventional", "best_arm"]\n'
        '[environment]\nname = "uniform_noise_arms"\nmeans = [0.2, 0.5, 0.8]\nwidth = 0.05\n'
        '[merit]\nname = "exponential"\nc = 3.0\n'
        '[policies.Softmax]\nname = "softmax"\ntemperature = 0.2\n'
        '[policies.TS-Gamma]\nname = "thompson"\nposterior = {name = "gamma_poisson", a0 = 2.0, b0 = 4.0}\n'
    )
    out = tmp_path / "out"
    assert main(["simulate", str(cfg), "--out", str(out), "--quiet"]) == 0, capsys.readouterr().err
    ds = read_results(out / "four.nc")
    assert set(ds["policy"].values) == {"Softmax", "TS-Gamma"}
    plays = ds["best_arm_plays"].values  # [policy, run, checkpoint]: rounds that played arm 2 (mean 0.8)
    np.testing.assert_array_equal(plays, ds["pulls"].values[..., 2])
    assert np.all(ds["best_arm_probability"].values <= ds["checkpoint"].values + 1e-3)
    cfg_ts = json.loads(ds.attrs["config"])["study"]["policies"]["TS-Gamma"]
    assert cfg_ts["posterior"]["name"] == "gamma_poisson"

    # the declaration-driven checks pick the new posterior up with no table to edit
    for i, spec in enumerate(registry.get("posterior", "gamma_poisson").examples()):
        test_contract.test_posterior_contract("gamma_poisson", i, spec)
    assert "gamma_poisson[0]" in test_posteriors_nuts.declared_families()
    post = test_posteriors_nuts.declared_families()["gamma_poisson[1]"]
    test_posteriors_nuts.check_conjugate_matches_nuts("gamma_poisson[1]", post)

    # and it catches a wrong closed form: the same family with the rate update dropped fails it
    def wrong_update(state, obs):
        right = post.update(state, obs)
        return right._replace(rate=state.rate)

    with pytest.raises(AssertionError, match="gamma_poisson"):
        test_posteriors_nuts.check_conjugate_matches_nuts("gamma_poisson (wrong update)",
                                                          post._replace(update=wrong_update))
