"""Adding a policy (or an environment) is one file: the skeletons of docs/developer/skeletons/,
dropped into the bayesfair.policies / bayesfair.environments packages, appear in `bayesfair list`,
build from a TOML config, run a study and pass the registry-driven contract test."""

import contextlib
import io
import shutil
import sys
from pathlib import Path

import pytest
import test_contract

import bayesfair.environments
import bayesfair.policies
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
    registry._ENTRIES["policy"].pop("softmax", None)
    registry._ENTRIES["environment"].pop("uniform_noise_arms", None)


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
    assert pol.name == "Softmax"
    assert pol.config == {"algorithm": "softmax", "temperature": 0.2, "initial_estimate": 0.5}
    with contextlib.redirect_stderr(io.StringIO()):
        res = study.run(progress=False)
    assert res is not None

    # the declared range is checked in configs and in Python calls, naming the field
    bad = tmp_path / "bad.toml"
    bad.write_text(cfg.read_text().replace("temperature = 0.2", "temperature = -1.0"))
    with pytest.raises(registry.ConfigError, match=r"policies.Softmax.temperature: out of range"):
        load_config(bad)
    softmax = registry.get("policy", "softmax").resolve()
    with pytest.raises(ValueError, match="temperature must be > 0"):
        softmax(temperature=-1.0)

    # the contract test picks both up from the registry, with no table to edit
    for i, spec in enumerate(registry.get("policy", "softmax").examples()):
        (tmp_path / f"p{i}").mkdir()
        test_contract.test_policy_contract("softmax", i, spec, tmp_path / f"p{i}")
    for i, spec in enumerate(registry.get("environment", "uniform_noise_arms").examples()):
        test_contract.test_environment_contract("uniform_noise_arms", i, spec)
