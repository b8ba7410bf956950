"""The package's layers contract (pyproject.toml, [tool.importlinter]): imports run only downward
and no two modules import each other, checked by import-linter on the import graph of every module
(in-function imports included)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _lint(cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess:
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))")
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          env={"PYTHONPATH": str(pythonpath), "PATH": "/usr/bin:/bin"})


def test_layers_contract_is_kept():
    res = _lint(ROOT, ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "2 kept, 0 broken" in res.stdout


def test_layers_contract_catches_an_upward_import_and_a_cycle(tmp_path):
    """The same contracts on a copy with one upward import (core -> workflow) and one cycle inside
    a layer (simulation.metrics <-> simulation.results) are broken, both named."""
    shutil.copytree(ROOT / "bayesfair", tmp_path / "bayesfair", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / "bayesfair" / "core" / "groups.py", "a") as f:
        f.write("\n\ndef _upward():\n    from bayesfair.workflow import study  # noqa: F401\n")
    with open(tmp_path / "bayesfair" / "simulation" / "metrics.py", "a") as f:
        f.write("\n\ndef _cycle():\n    from bayesfair.simulation import results  # noqa: F401\n")
    res = _lint(tmp_path, tmp_path)
    assert res.returncode != 0
    assert "0 kept, 2 broken" in res.stdout, res.stdout
    assert "bayesfair.core.groups -> bayesfair.workflow.study" in res.stdout
    cycles = res.stdout.split("no import cycles", 1)[1]
    assert "bayesfair.simulation" in cycles and ".results -> .metric_parts" in cycles, cycles
