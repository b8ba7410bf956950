"""The CLI runs end to end on a tiny study and reports errors with exit code 2."""

import subprocess
import sys

import pytest

from bayesfair import cli


def test_demo_tiny(tmp_path, capsys):
    rc = cli.main(["demo", "--runs", "2", "--horizon", "200", "--out", str(tmp_path), "--no-progress"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "FairX-TS" in out and "fairness_regret" in out and "pi_star" in out
    for name in ("regret.png", "exposure.png", "demo.nc"):
        assert (tmp_path / name).stat().st_size > 0


@pytest.mark.parametrize("args", [["demo", "--runs", "0"], ["demo", "--horizon", "abc"], ["demo", "--seed", "-1"]])
def test_bad_arguments_exit_2(args):
    with pytest.raises(SystemExit) as exc:
        cli.main(args)
    assert exc.value.code == 2


def test_console_script_help():
    res = subprocess.run([sys.executable, "-m", "bayesfair.cli", "demo", "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and "--horizon" in res.stdout
