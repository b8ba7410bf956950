"""The CLI runs end to end on a tiny study and reports errors with exit code 2."""

import subprocess
import sys

import pytest

from bayesfair.workflow import cli


def test_demo_tiny(tmp_path, capsys):
    rc = cli.main(["demo", "--runs", "2", "--horizon", "200", "--out", str(tmp_path), "--no-progress"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "FairX-TS" in out and "fairness regret" in out and "fair share pi*" in out
    for name in ("regret.png", "exposure.png", "demo.nc"):
        assert (tmp_path / name).stat().st_size > 0


@pytest.mark.parametrize("args", [["demo", "--runs", "0"], ["demo", "--horizon", "abc"], ["demo", "--seed", "-1"]])
def test_bad_arguments_exit_2(args):
    with pytest.raises(SystemExit) as exc:
        cli.main(args)
    assert exc.value.code == 2


def test_console_script_help():
    res = subprocess.run([sys.executable, "-m", "bayesfair", "demo", "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and "--horizon" in res.stdout


# ---------------------------------------------------------------------------------------------
# the study workflow: simulate (with interrupt and resume), plot, report, list, fit, exit codes

import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from bayesfair.simulation import results as io  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TINY = """
name = "tiny"
seed = 9
runs = 2
horizon = 48
chunk_size = 16
checkpoints = [1, 16, 30, 48]
floors = [0.25, 0.25]

[merit]
name = "exponential"
c = 4.0

[environment]
name = "bernoulli_arms"
means = [0.2, 0.5, 0.55, 0.8]
groups = [0, 1, 0, 1]

[policies.EG]
name = "fairx_eg"
epsilon = 0.1

[resume]
every_chunks = 1
"""


@pytest.fixture
def tiny_config(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return path


def test_simulate_interrupt_resume_plot_report_end_to_end(tiny_config, tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["simulate", str(tiny_config), "--out", str(out), "--stop-after-chunks", "2", "-q"]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "--resume" in err
    assert (out / "tiny.resume.npz").is_file() and not (out / "tiny.nc").exists()
    assert cli.main(["simulate", str(tiny_config), "--out", str(out), "--resume"]) == 0
    captured = capsys.readouterr()
    assert "resuming from" in captured.err and "run-rounds/s" in captured.err and "ETA" in captured.err
    assert "fairness regret" in captured.out and f"wrote {out / 'tiny.nc'}" in captured.out
    assert "floors held (share of runs)" in captured.out and "floor beta_g" in captured.out
    assert not (out / "tiny.resume.npz").exists()
    ds = io.read_results(out / "tiny.nc")
    assert json.loads(ds.attrs["config"])["study"]["policies"]["EG"]["epsilon"] == 0.1
    assert int(ds["anytime_slack"].min()) >= -48  # the floors were tracked
    # resuming a finished study returns it as it is (not simulated again)
    mtime = (out / "tiny.nc").stat().st_mtime_ns
    assert cli.main(["simulate", str(tiny_config), "--out", str(out), "--resume", "-q"]) == 0
    assert (out / "tiny.nc").stat().st_mtime_ns == mtime
    assert cli.main(["plot", str(out)]) == 0
    assert (out / "tiny.regret.png").stat().st_size > 0 and (out / "tiny.exposure.png").stat().st_size > 0
    assert cli.main(["report", str(out / "tiny.nc"), "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "tiny.report.md").read_text()
    page = (tmp_path / "rep" / "tiny.report.html").read_text()
    assert "| EG |" in md and "![tiny.regret](tiny.regret.png)" in md and "floors held (share of runs)" in md
    assert "![tiny.groups](tiny.groups.png)" in md and (tmp_path / "rep" / "tiny.report.csv").is_file()
    assert "data:image/png;base64," in page and "<table" in page


def test_usage_and_config_errors_exit_2(tiny_config, tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(TINY.replace("epsilon = 0.1", "epsilon = 2.0"))
    assert cli.main(["simulate", str(bad)]) == 2
    assert "policies.EG.epsilon: out of range" in capsys.readouterr().err
    assert cli.main(["simulate", str(tmp_path / "none.toml")]) == 2
    assert cli.main(["simulate", str(tiny_config), "--set", "runz=3"]) == 2
    assert "unknown key" in capsys.readouterr().err
    assert cli.main(["simulate", str(tiny_config), "--dask"]) == 2
    assert cli.main(["plot", str(tmp_path / "missing.nc")]) == 2
    assert cli.main(["report", str(tmp_path)]) == 2  # a folder without results
    assert cli.main(["simulate", str(tiny_config), "--dry-run", "--set", "runs=7"]) == 0
    assert "7 runs x 48 rounds" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        cli.main(["simulate"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        cli.main(["simulate", str(tiny_config), "--workers", "0"])
    assert exc.value.code == 2


def test_an_empty_output_folder_is_refused(tiny_config, tmp_path, monkeypatch, capsys):
    """``Path("")`` is the current folder: ``simulate --out ''`` wrote ./tiny.nc with exit 0. An
    empty (or blank) folder name is refused everywhere, before anything runs."""
    from bayesfair.workflow.config import load_config
    from bayesfair.workflow.outputs import OutputError

    monkeypatch.chdir(tmp_path)
    for argv in (["simulate", str(tiny_config), "--out", ""], ["simulate", str(tiny_config), "--out", "  "],
                 ["demo", "--out", ""], ["plot", "x.nc", "--out", ""], ["report", "x.nc", "--out", ""]):
        with pytest.raises(SystemExit) as exc:
            cli.main(argv)
        assert exc.value.code == 2, argv
        assert "argument --out: must name a folder" in capsys.readouterr().err
    empty = tmp_path / "empty.toml"  # the config's own output, and an override of it
    empty.write_text(TINY.replace('name = "tiny"', 'name = "tiny"\noutput = ""'))
    assert cli.main(["simulate", str(empty), "-q"]) == 2
    assert "output: must not be empty" in capsys.readouterr().err
    assert cli.main(["simulate", str(tiny_config), "--set", 'output=""', "-q"]) == 2
    with pytest.raises(OutputError, match="the output folder is empty"):  # in Python
        load_config(tiny_config).execute("")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.toml", "tiny.toml"]


@pytest.mark.parametrize("command", ["simulate", "plot", "report", "fit", "list", "demo", "configs"])
def test_help_everywhere(command, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([command, "--help"])
    assert exc.value.code == 0
    assert "exit codes" in capsys.readouterr().out


def test_list_and_fit(tmp_path, capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for word in ("policies:", "fairx_ts", "bf_ucb", "environments:", "bernoulli_arms", "posteriors:",
                 "beta_bernoulli", "merits:", "exponential", "datasets", "yeast"):
        assert word in out, word
    assert cli.main(["list", "policies", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["registry"]
    assert {r["kind"] for r in rows} == {"policy"} and any(r["name"] == "fairx_ucb" for r in rows)

    models = tmp_path / "models"
    models.mkdir()
    (models / "echo.py").write_text('"""Echo the arguments."""\n\ndef main(argv):\n    print("args", argv)\n'
                                    '    return 0 if argv != ["fail"] else 3\n')
    (models / "broken.py").write_text("def main(argv):\n    raise RuntimeError('no data')\n")
    assert cli.main(["fit", "--models-dir", str(models)]) == 0
    assert "echo" in capsys.readouterr().out
    assert cli.main(["fit", "--models-dir", str(models), "echo", "--tiny", "x"]) == 0
    assert "args ['--tiny', 'x']" in capsys.readouterr().out
    assert cli.main(["fit", "--models-dir", str(models), "echo", "fail"]) == 3
    assert cli.main(["fit", str(models / "echo.py")]) == 0
    assert cli.main(["fit", "--models-dir", str(models), "nope"]) == 2
    assert "recipes in" in capsys.readouterr().err
    assert cli.main(["fit", "--models-dir", str(models), "broken"]) == 1
    assert "RuntimeError: no data" in capsys.readouterr().err


@pytest.mark.slow
def test_sigint_saves_state_and_resume_matches(tiny_config, tmp_path):
    """A real Ctrl-C on a subprocess: exit 130, a valid resume file, and resuming gives the numbers."""
    cfg = tmp_path / "long.toml"
    cfg.write_text(TINY.replace("horizon = 48", "horizon = 4000").replace("checkpoints = [1, 16, 30, 48]",
                                                                          "checkpoints = 20"))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "bayesfair", "simulate", str(cfg), "--out", str(out), "-q"]
    # a background shell starts children with SIGINT ignored; give this one the default (Ctrl-C) handling
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    while not (out / "tiny.resume.npz").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert not (out / "tiny.nc").exists() and (out / "tiny.resume.npz").is_file()
    assert not [p for p in os.listdir(out) if p.startswith(".")]  # no temp files
    res = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    full = subprocess.run(cmd[:-3] + ["--out", str(tmp_path / "full"), "-q"], capture_output=True, text=True,
                          timeout=600)
    assert full.returncode == 0
    a, b = io.read_results(out / "tiny.nc"), io.read_results(tmp_path / "full" / "tiny.nc")
    for v in a.data_vars:
        if v != "seconds":
            np.testing.assert_array_equal(a[v].values, b[v].values)


@pytest.mark.slow
def test_simulate_demo_config_reproduces_demo(tmp_path, capsys):
    """`bayesfair simulate demo` (the shipped config) gives `bayesfair demo`'s numbers."""
    args = ["--set", "runs=2", "--set", "horizon=300", "--out", str(tmp_path / "sim"), "-q"]
    assert cli.main(["simulate", "demo", *args]) == 0
    assert cli.main(["demo", "--runs", "2", "--horizon", "300", "--out", str(tmp_path / "demo"),
                     "--no-progress"]) == 0
    a, b = io.read_results(tmp_path / "sim" / "demo.nc"), io.read_results(tmp_path / "demo" / "demo.nc")
    assert set(a.data_vars) == set(b.data_vars)
    for v in a.data_vars:
        if v != "seconds":
            np.testing.assert_array_equal(a[v].values, b[v].values, err_msg=v)


def test_sweep_on_dask_then_plot_and_report_end_to_end(tmp_path, capsys):
    """`simulate SWEEP --dask` on a two-worker LocalCluster, then `plot` and `report` on the combined results."""
    cfg = tmp_path / "tsw.toml"
    cfg.write_text(TINY.replace('name = "tiny"', 'name = "tsw"') + '\n[sweep]\n"policies.EG.epsilon" = [0.05, 0.5]\n')
    out = tmp_path / "out"
    assert cli.main(["simulate", str(cfg), "--out", str(out), "--dask", "--workers", "2"]) == 0
    captured = capsys.readouterr()
    assert "on Dask (a LocalCluster of 2 workers)" in captured.err
    assert f"wrote {out / 'tsw.nc'} (2 points)" in captured.out
    ds = io.read_results(out / "tsw.nc")
    assert ds["policies.EG.epsilon"].values.tolist() == [0.05, 0.5]
    ex = ds["exposure"].isel(checkpoint=-1).values
    assert not np.array_equal(ex[0], ex[1])  # the swept value reached the policies
    assert sorted(p.name for p in (out / "tsw.points").glob("*.nc")) == ["tsw-000.nc", "tsw-001.nc"]
    assert cli.main(["plot", str(out)]) == 0
    assert (out / "tsw.sweep.png").stat().st_size > 0
    assert cli.main(["report", str(out)]) == 0
    md = (out / "tsw.report.md").read_text()
    assert "Final cumulative regret per sweep point" in md and "![tsw.sweep](tsw.sweep.png)" in md
    sweep_section = md.split("## Final cumulative regret per sweep point")[1].split("\n## ")[0]
    assert "policies.EG.epsilon" in sweep_section and sweep_section.count("| EG |") == 2  # one row per point
    assert "data:image/png;base64," in (out / "tsw.report.html").read_text()


@pytest.mark.parametrize("columns", [60, 83, 110, 140])
def test_list_shows_every_description_whole(capsys, monkeypatch, columns):
    """`bayesfair list` wraps descriptions at word boundaries (not inside hyphenated words such as
    "group-bias") instead of cutting them, at any terminal width."""
    from bayesfair.workflow import registry

    monkeypatch.setenv("COLUMNS", str(columns))
    assert cli.main(["list"]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    rows = [r for r in registry.table() if r["available"]]
    assert rows
    for r in rows:
        assert " ".join(cli._plain(r["doc"]).split()) in flat, r["name"]


def test_list_gives_whole_summaries_and_names_only_installed_things(capsys):
    """Each declared entry's description is its docstring's whole summary (the first paragraph,
    however many lines it spans), so it ends a sentence; `bayesfair list` shows Sphinx roles as
    plain names and points at nothing that an installed package lacks (the docs/ folder)."""
    from bayesfair.workflow import registry

    rows = [r for r in registry.table() if r["available"] and not r.get("python_only")]
    cut = [(r["name"], r["doc"][-40:]) for r in rows if not r["doc"].endswith(".")]
    assert not cut, f"descriptions that do not end a sentence: {cut}"
    fairx_ts = next(r["doc"] for r in rows if r["name"] == "fairx_ts")
    assert "posterior update (line 7)" in fairx_ts  # the summary's second line
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "docs/" not in out and ".md" not in out
    assert ":class:`" not in out and ":func:`" not in out and "``" not in out
    assert cli._plain("see :func:`~bayesfair.fairx_ts` and :class:`Posterior <bayesfair.Posterior>`") == \
        "see bayesfair.fairx_ts and Posterior"


# ---------------------------------------------------------------------------------------------
# option placement: an option means the same before and after a command's positional arguments


def _subparsers(parser):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def _commands(parser, prefix=()):
    """(words, parser) of every command and sub-command, the leaves only."""
    subs = list(_subparsers(parser))
    if not subs:
        yield prefix, parser
    for name, sub in subs:
        yield from _commands(sub, (*prefix, name))


def _sample(action, tmp_path):
    """A valid value for an option or positional argument."""
    if action.choices:
        return str(next(iter(action.choices)))
    if action.dest in ("config",):
        return "demo"
    if action.dest in ("name",):
        return "demo"
    return str(tmp_path / action.dest) if action.type is None or "folder" in getattr(action.type, "__name__", "") \
        else "3"


# `fit` hands the arguments after RECIPE to the recipe (argparse.REMAINDER): its own tests cover it
_PASS_THROUGH = {("fit",)}


@pytest.mark.parametrize("words", [w for w, _ in _commands(cli._parser()) if w not in _PASS_THROUGH],
                         ids=lambda w: " ".join(w))
def test_every_option_means_the_same_before_and_after_the_positionals(words, tmp_path):
    """For every option of every command, `CMD POSITIONALS --opt [V]` and `CMD --opt [V]
    POSITIONALS` parse to the same namespace (an option after a positional is never silently
    handed to something else), and abbreviated options are refused (an abbreviation would change
    meaning when an option is added)."""
    import argparse

    parser = dict(_commands(cli._parser()))[words]
    positionals = [a for a in parser._actions if not a.option_strings and a.nargs != 0]
    assert not [a.dest for a in positionals if a.nargs in (argparse.REMAINDER, argparse.PARSER)]
    pos = [_sample(a, tmp_path) for a in positionals if a.nargs not in ("?", "*")]
    options = [a for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS
               and not isinstance(a, argparse._HelpAction)]
    for opt in options:
        flag = max(opt.option_strings, key=len)
        given = [flag] if opt.nargs == 0 else [flag, _sample(opt, tmp_path)]
        before = cli._parser().parse_args([*words, *given, *pos])
        after = cli._parser().parse_args([*words, *pos, *given])
        assert vars(before) == vars(after), (words, flag)
        if len(flag) > 4 and flag.startswith("--"):
            with pytest.raises(SystemExit):
                cli._parser().parse_args([*words, *pos, flag[:-1], *given[1:]])


@pytest.mark.parametrize("given, said", [
    (["--dask", "--scheduler", "tcp://127.0.0.1:9"], "give one of them"),
    (["--workers", "3"], "--workers and --processes size the LocalCluster of --dask"),
    (["--processes"], "--workers and --processes size the LocalCluster of --dask"),
    (["--connect-timeout", "2"], "--connect-timeout is the wait for a --scheduler"),
    (["--out", "x", "--set", "output='y'"], "--out and --set output"),
    (["--log", "--set", "log.enabled=false"], "--log and --set log.enabled"),
])
def test_options_that_would_be_ignored_or_contradict_are_errors(given, said, tiny_config, capsys):
    """An option that would do nothing here (a LocalCluster size without --dask, a connect timeout
    without a scheduler) or that says the opposite of another is refused, naming both."""
    assert cli.main(["simulate", str(tiny_config), "--dry-run", *given]) == 2
    assert said in capsys.readouterr().err


def test_resume_cadence_options_are_refused_for_a_sweep(tmp_path, capsys):
    cfg = tmp_path / "sw.toml"
    cfg.write_text(TINY.replace('name = "tiny"', 'name = "sw"') + '\n[sweep]\n"policies.EG.epsilon" = [0.1, 0.2]\n')
    assert cli.main(["simulate", str(cfg), "--dry-run"]) == 0
    capsys.readouterr()
    assert cli.main(["simulate", str(cfg), "--dry-run", "--save-every-chunks", "2"]) == 2
    assert "are for single studies, not sweeps" in capsys.readouterr().err
