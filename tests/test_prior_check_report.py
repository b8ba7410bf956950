"""The prior check of a Bayesian-regret study (``config["prior_check"]``) is said plainly by the
report, the printed tables and ``bayesfair simulate --dry-run``: which policies' priors mismatch
the distribution the environment draws its instances from, and how."""

from __future__ import annotations

import warnings

import pytest

from bayesfair.workflow import cli, report
from bayesfair.workflow.config import parse_config

TOML = """
name = "prior_check"
seed = 1
runs = 2
horizon = 12
checkpoints = [12]
output = "{out}"

[merit]
name = "exponential"
c = 2.0

[environment]
name = "bernoulli_arms"
means = {{ low = 0.0, high = 1.0 }}
n_arms = 3

[policies.TS]
name = "thompson"
posterior = {{ name = "beta_bernoulli", a0 = 1.0, b0 = 1.0 }}

[policies.TS20]
name = "thompson"
posterior = {{ name = "beta_bernoulli", a0 = 20.0, b0 = 20.0 }}
{extra}
"""
MISMATCH = ("Prior check (Bayesian regret): MISMATCH for 'TS20': the environment's instances are not drawn from "
            "their prior, so their regret is not their Bayesian regret.")


def _config(tmp_path, extra: str = "") -> str:
    path = tmp_path / "study.toml"
    path.write_text(TOML.format(out=(tmp_path / "out").as_posix(), extra=extra))
    return str(path)


def _raw(mismatched: bool = True) -> dict:
    policies = {"TS": {"name": "thompson", "posterior": {"name": "beta_bernoulli", "a0": 1.0, "b0": 1.0}},
                "UCB": {"name": "ucb1"}}
    if mismatched:
        policies["TS20"] = {"name": "thompson", "posterior": {"name": "beta_bernoulli", "a0": 20.0, "b0": 20.0}}
    return {"name": "pc", "seed": 1, "runs": 2, "horizon": 12, "checkpoints": [12],
            "merit": {"name": "exponential", "c": 2.0},
            "environment": {"name": "bernoulli_arms", "means": {"low": 0.0, "high": 1.0}, "n_arms": 3},
            "policies": policies}


def test_dry_run_names_the_mismatched_policies(tmp_path, capsys):
    assert cli.main(["simulate", _config(tmp_path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert MISMATCH in out
    lines = out.splitlines()
    detail = next(ln for ln in lines if ln.startswith("  TS20: MISMATCH: "))
    assert '"a0": 1.0' in detail and '"a0": 20.0' in detail  # the environment's prior and the policy's
    assert "  TS: matched: instances are drawn from the policy's prior (Bayesian regret)" in lines
    assert not (tmp_path / "out").exists(), "a dry run runs nothing"
    # a fixed instance: no mismatch, the regret is frequentist; a sweep states it for its first point
    fixed = tmp_path / "fixed"
    fixed.mkdir()
    path = _config(fixed)
    text = open(path).read().replace("means = { low = 0.0, high = 1.0 }\nn_arms = 3", "means = [0.2, 0.5, 0.7]")
    open(path, "w").write(text)
    assert cli.main(["simulate", path, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "Prior check (Bayesian regret): no mismatch." in out
    assert "TS20: fixed instance: the regret is frequentist" in out
    swept = tmp_path / "swept"
    swept.mkdir()
    assert cli.main(["simulate", _config(swept, '[sweep]\n"runs" = [2, 3]\n'), "--dry-run"]) == 0
    assert "Prior check of the first point (Bayesian regret): MISMATCH for 'TS20'" in capsys.readouterr().out


def test_report_and_tables_state_the_prior_check(tmp_path, capsys):
    with pytest.warns(UserWarning, match="'TS20' are Bayesian but"):
        ds = parse_config(_raw()).run()
    md, page = report.write_report(ds, tmp_path, "pc", [])
    text = md.read_text()
    assert ("- **prior check (Bayesian regret)**: MISMATCH for 'TS20': the environment's instances are not drawn "
            "from their prior") in text
    section = text.split("## Prior check")[1].split("\n## ")[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| T")]
    assert rows[0].startswith("| TS | matched | ") and rows[1].startswith("| TS20 | MISMATCH | instances come from")
    assert "UCB" not in section, "a policy without a prior is not checked"
    assert "MISMATCH for &#x27;TS20&#x27;" in page.read_text() or "MISMATCH for 'TS20'" in page.read_text()
    report.print_tables(ds)
    assert MISMATCH in capsys.readouterr().out
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # matched priors: silent, and said so
        matched = parse_config(_raw(mismatched=False)).run()
    md, _ = report.write_report(matched, tmp_path, "matched", [])
    assert "- **prior check (Bayesian regret)**: no mismatch." in md.read_text()
    assert report.prior_check_lines({}) == [] and report.prior_check_rows(None) == []
