"""Reliability of the study workflow, one regression test per failure mode: nothing hangs, nothing
is lost or silently overwritten, and every bad input gets a clear error with the documented exit
code."""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesfair as bf
from bayesfair.core import _random
from bayesfair.core.compat import IncompatibleError
from bayesfair.core.types import Observation
from bayesfair.inference import fitting
from bayesfair.simulation import results as io
from bayesfair.simulation.simulator import SimulationError
from bayesfair.workflow import cli
from bayesfair.workflow.config import load_config

ROOT = Path(__file__).resolve().parent.parent

TINY = """
name = "tiny"
seed = 3
runs = 2
horizon = 40
chunk_size = 16
checkpoints = [1, 20, 40]

[merit]
name = "exponential"
c = 4.0

[environment]
name = "bernoulli_arms"
means = [0.2, 0.5, 0.8]

[policies.EG]
name = "fairx_eg"
epsilon = 0.1

[resume]
every_chunks = 1
"""


def _config(tmp_path, text=TINY, name="tiny.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _simulate(*args):
    return cli.main(["simulate", *map(str, args)])


# ---------------------------------------------------------------------------------------------
# 1. rewards that do not fit the policy: refused before the run; inside jit, no infinite loop


def test_beta_bernoulli_on_gaussian_rewards_is_refused_before_the_run():
    m = bf.merit.exponential(4.0)
    env = bf.gaussian_arms([0.2, 0.5])
    for pol in (bf.thompson(bf.beta_bernoulli()), bf.fairx_ts(bf.beta_bernoulli(), m)):
        with pytest.raises(IncompatibleError, match=r"binary rewards.*gaussian_arms.*normal_inverse_gamma"):
            bf.simulate(0, env, {"T": pol}, horizon=50, runs=1, merit=m)
    # the Gaussian posteriors fit
    ds = bf.simulate(0, env, {"T": bf.thompson(bf.normal_inverse_gamma())}, horizon=20, runs=1, merit=m)
    assert np.isfinite(ds["fairness_regret"].values).all()


@pytest.mark.parametrize("policy", ["fairx_ucb", "bf_ucb", "ucb1"])
def test_bounded_reward_policies_refuse_unbounded_rewards(tmp_path, capsys, policy):
    extra = {"bf_ucb": "groups_beta = [0.2, 0.2]\n", "fairx_ucb": "", "ucb1": ""}[policy]
    text = TINY.replace('name = "bernoulli_arms"', 'name = "gaussian_arms"') \
               .replace("means = [0.2, 0.5, 0.8]", "means = [0.2, 0.5, 0.8, 0.3]\ngroups = [0, 0, 1, 1]") \
               .replace('name = "fairx_eg"\nepsilon = 0.1', f'name = "{policy}"\n{extra}')
    assert _simulate(_config(tmp_path, text), "--dry-run") == 2
    err = capsys.readouterr().err
    assert "policies.EG" in err and "gaussian_arms" in err and "unbounded" in err and "Traceback" not in err


def test_a_policy_range_narrower_than_the_rewards_is_refused():
    env = bf.bernoulli_arms([0.2, 0.5])
    pol = bf.fairx_ucb(bf.merit.exponential(4.0), horizon=10, reward_range=(0.0, 0.5))
    with pytest.raises(IncompatibleError, match=r"reward_range = \[0, 1\]"):
        bf.simulate(0, env, {"U": pol}, horizon=10, runs=1, merit=bf.merit.exponential(4.0))


def test_sampler_on_an_invalid_posterior_returns_nan_without_looping():
    pol = bf.thompson(bf.beta_bernoulli())
    state = pol.init(jax.random.key(0), bf.gaussian_arms([0.2, 0.5]).spec)
    state = pol.update(state, Observation(jnp.int32(1)), jnp.int32(0), jnp.float32(-2.5))
    assert float(state.alpha[0]) == -1.5
    _, probs, info = pol.select(jax.random.key(1), state, Observation(jnp.int32(2)))
    assert np.isnan(np.asarray(info["mu"])[0]) and np.isnan(np.asarray(probs)).all()
    g = _random.gamma(jax.random.key(2), jnp.array([-1.5, 0.0, jnp.nan, jnp.inf, 0.2, 3.0]), allow_small=False)
    assert np.isnan(np.asarray(g)[:5]).all() and np.isfinite(np.asarray(g)[5])


def test_an_invalid_state_inside_a_run_is_an_error_naming_policy_run_and_round():
    """An environment that misstates its rewards gets past the pre-run check; the NaN draws it
    causes are reported, not played and not looped on. (sigma = 5: a reward below 0 or above 1
    pushes a Beta shape below 1 within a few pulls; at sigma = 1 a seed's path can stay valid for
    all 200 rounds, since the shapes drift upward.)"""
    env = bf.gaussian_arms([0.2, 0.5], sigma=5.0)
    liar = env._replace(spec=env.spec._replace(rewards="binary", reward_range=(0.0, 1.0)))
    with pytest.raises(SimulationError, match=r"policy 'T' \(TS\).*at round \d+ of run \d"):
        bf.simulate(0, liar, {"T": bf.thompson(bf.beta_bernoulli())}, horizon=200, runs=2,
                    merit=bf.merit.exponential(4.0), chunk_size=64)


def test_a_merit_outside_its_domain_on_a_contextual_environment_is_an_error_naming_the_metric():
    """A linear environment's means change every round, so they are not checked against the merit's
    domain before the study; a merit that is NaN outside it (sqrt at negative means) made the FairX
    regrets NaN without an error. The chunk's values are checked: the error names the metric, the
    policy, the run and the rounds."""
    env = bf.linear_bandit(5, 3)  # means <theta, x> in [-1, 1]
    sqrt_merit = bf.merit.custom(lambda mu: jnp.sqrt(mu) + 0.1, label="sqrt")  # domain [0, 1]
    with pytest.raises(SimulationError, match=r"metric 'fairness_regret' of policy 'L' \(LinTS\) became non-finite "
                                              r"\(NaN or inf\) in run \d+ between rounds 1 and 64 .*merit's domain"):
        bf.simulate(0, env, {"L": bf.policies.lints(bf.posteriors.linear_known_variance())}, horizon=200, runs=2,
                    merit=sqrt_merit, chunk_size=64)
    # the same study with a merit defined on all reals runs
    ds = bf.simulate(0, env, {"L": bf.policies.lints(bf.posteriors.linear_known_variance())}, horizon=200, runs=2,
                     merit=bf.merit.exponential(2.0), chunk_size=64)
    assert np.isfinite(ds["fairness_regret"].values).all()


def test_means_outside_the_merit_domain_are_refused(tmp_path, capsys):
    m = bf.merit.exponential(4.0)
    for mean in (5.0, 300.0):
        with pytest.raises(IncompatibleError, match=rf"mean {mean:g} .*outside the domain \[0, 1\]"):
            bf.simulate(0, bf.gaussian_arms([0.2, mean]), {"T": bf.thompson(bf.normal_known_variance())},
                        horizon=10, runs=1, merit=m)
    text = TINY.replace('name = "bernoulli_arms"', 'name = "gaussian_arms"').replace("0.8]", "5.0]")
    assert _simulate(_config(tmp_path, text), "--dry-run") == 2
    assert "merit: environment gaussian_arms: arm 2 has mean 5" in capsys.readouterr().err
    # a merit whose domain holds the means is fine
    ok = text.replace("c = 4.0", "c = 4.0\ndomain = [0.0, 5.0]")
    assert _simulate(_config(tmp_path, ok, "ok.toml"), "--dry-run") == 0


def test_nan_inputs_to_public_functions_raise():
    m = bf.merit.exponential(4.0)
    with pytest.raises(ValueError, match=r"mu must be finite: entry \[0\] is nan"):
        bf.merit.fair_policy(m, [float("nan"), 0.5])
    with pytest.raises(ValueError, match="finite"):
        bf.merit.fair_policy(m, jnp.array([0.1, jnp.inf]))
    np.testing.assert_allclose(bf.merit.fair_policy(m, [0.0, 0.0]), [0.5, 0.5])


def test_odd_simulate_and_tuning_arguments_are_named():
    """Each used to fail with an error that named nothing (OverflowError, a mapping TypeError, a
    checkpoint of -2**63, IndexError, an xarray KeyError after the whole validation run)."""
    env = bf.bernoulli_arms([0.2, 0.5, 0.8])
    pols = {"U": bf.uniform()}
    for seed in (2**32, 2**32 + 5, 2**63, 2**64):  # jax.random.key(2**32) is key(0) in 32-bit mode
        with pytest.raises(ValueError, match=r"seed must be a non-negative integer below 2\*\*32"):
            bf.simulate(seed, env, pols, 10, 1)
    with pytest.raises(ValueError, match=r"seed must be a non-negative integer below 2\*\*32"):
        fitting.fit(fitting.group_bias_data([0, 1], [[1.0], [2.0]], [0.1, 0.2], [0, 1]), seed=2**32)
    with pytest.raises(TypeError, match="config must be a mapping"):
        bf.simulate(0, env, pols, 10, 1, config=[("a", 1)])
    with pytest.raises(TypeError, match="checkpoints must be integer rounds"):
        bf.simulate(0, env, pols, 10, 1, checkpoints=[5.0, float("inf")])
    for n in (0, 1, 2.5):
        with pytest.raises(ValueError, match="n_check must be an integer >= 2"):
            bf.merit.custom(lambda x: x + 1, n_check=n)
    from bayesfair.workflow.tuning import grid_search

    with pytest.raises(ValueError, match="'fairness_regret' is a FairX regret.*give a merit"):
        grid_search(env, lambda epsilon: bf.fairx_eg(bf.merit.exponential(2.0), epsilon=epsilon), {"epsilon": [0.1]},
                    horizon=10, runs=1, merit=None)


@pytest.mark.parametrize(("setting", "message"), [
    ('output = ""', "output: must not be empty"),
    ("horizon = 1e15", "horizon"),
    ("horizon = 2147483647", "horizon: out of range"),
])
def test_validation_gaps_are_config_errors(tmp_path, capsys, setting, message):
    key = setting.split(" =")[0]
    text = "\n".join(line for line in TINY.splitlines() if not line.startswith(f"{key} ="))
    text = text.replace('name = "tiny"', f'name = "tiny"\n{setting}', 1)
    assert _simulate(_config(tmp_path, text), "--dry-run") == 2
    assert message in capsys.readouterr().err


def test_horizon_beyond_int32_rounds_is_refused_by_simulate():
    with pytest.raises(ValueError, match="32-bit"):
        bf.simulate(0, bf.bernoulli_arms([0.2, 0.5]), {"U": bf.uniform()}, horizon=2**31, runs=1,
                    merit=bf.merit.exponential(1.0))


# ---------------------------------------------------------------------------------------------
# 3. no silent overwrite, no lost progress


def test_a_different_study_does_not_replace_results(tmp_path, capsys):
    out = tmp_path / "out"
    cfg = _config(tmp_path)
    assert _simulate(cfg, "--out", out, "-q") == 0
    assert cli.main(["report", str(out / "tiny.nc")]) == 0
    before = (out / "tiny.nc").read_bytes()
    capsys.readouterr()
    other = _config(tmp_path, TINY.replace("runs = 2", "runs = 1").replace("horizon = 40", "horizon = 50"), "b.toml")
    assert _simulate(other, "--out", out, "-q") == 2
    err = capsys.readouterr().err
    assert "different study" in err and "horizon: 40 -> 50" in err and "runs: 2 -> 1" in err and "--overwrite" in err
    assert (out / "tiny.nc").read_bytes() == before and (out / "tiny.report.md").exists()
    # the same study again is allowed (the same numbers)
    assert _simulate(cfg, "--out", out, "-q") == 0
    # --overwrite replaces it and removes the report and figures that described the old one
    assert _simulate(other, "--out", out, "-q", "--overwrite") == 0
    assert io.read_results(out / "tiny.nc").sizes["run"] == 1
    assert not list(out.glob("tiny.report.*")) and not list(out.glob("tiny.*.png"))


def test_an_edited_instance_file_makes_another_study(tmp_path, capsys):
    """The instances a means_file holds are part of the study: edited between an interruption and
    --resume, the resumed results mixed two problems (policies before the cut on the old means,
    after it on the new) under the old file's recorded means. Its sha256 is in the config now."""
    inst = tmp_path / "inst.csv"
    inst.write_text("0.2,0.5,0.8\n0.3,0.4,0.6\n")
    text = TINY.replace("means = [0.2, 0.5, 0.8]", f"means_file = {json.dumps(str(inst))}")
    cfg, out = _config(tmp_path, text), tmp_path / "out"
    assert _simulate(cfg, "--out", out, "-q", "--stop-after-chunks", "1") != 0
    assert (out / "tiny.resume.npz").exists()
    inst.write_text("0.9,0.1,0.1\n0.9,0.1,0.1\n")
    capsys.readouterr()
    assert _simulate(cfg, "--out", out, "-q", "--resume") == 2
    err = capsys.readouterr().err
    assert "belongs to a different study (differs in inputs.environment.means_file:" in err
    inst.write_text("0.2,0.5,0.8\n0.3,0.4,0.6\n")  # the same bytes again: the same study, resumed
    assert _simulate(cfg, "--out", out, "-q", "--resume") == 0
    ds = io.read_results(out / "tiny.nc")
    stored = json.loads(ds.attrs["config"])["study"]["inputs"]["environment"]["means_file"]
    assert stored == hashlib.sha256(inst.read_bytes()).hexdigest()
    inst.write_text("0.9,0.1,0.1\n0.9,0.1,0.1\n")  # a finished study is not reused for other instances
    capsys.readouterr()
    assert _simulate(cfg, "--out", out, "-q", "--resume") == 2
    assert "inputs.environment.means_file" in capsys.readouterr().err


def test_resume_on_a_finished_study_with_changed_settings_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    cfg = _config(tmp_path)
    assert _simulate(cfg, "--out", out, "-q") == 0
    before = (out / "tiny.nc").read_bytes()
    capsys.readouterr()
    assert _simulate(cfg, "--out", out, "-q", "--resume", "--set", "horizon=50", "--set", "seed=4") == 2
    err = capsys.readouterr().err
    assert "finished study with other settings" in err and "horizon: 40 -> 50" in err and "seed: 3 -> 4" in err
    assert (out / "tiny.nc").read_bytes() == before


def test_saved_progress_is_not_discarded_without_restart(tmp_path, capsys):
    out = tmp_path / "out"
    cfg = _config(tmp_path)
    assert _simulate(cfg, "--out", out, "-q", "--stop-after-chunks", "2") == 130
    saved = (out / "tiny.resume.npz").read_bytes()
    capsys.readouterr()
    assert _simulate(cfg, "--out", out, "-q") == 2
    err = capsys.readouterr().err
    assert "saved progress" in err and "EG: 32 of 40 rounds" in err and "--resume" in err and "--restart" in err
    assert (out / "tiny.resume.npz").read_bytes() == saved
    assert _simulate(cfg, "--out", out, "-q", "--resume", "--restart") == 2  # contradictory
    # a resume file of a different study names the settings that differ
    assert _simulate(cfg, "--out", out, "-q", "--resume", "--set", "runs=3") == 2
    assert "belongs to a different study (differs in runs: 2 -> 3)" in capsys.readouterr().err
    assert _simulate(cfg, "--out", out, "--restart") == 0
    assert "discarded the saved progress" in capsys.readouterr().err
    assert not (out / "tiny.resume.npz").exists() and (out / "tiny.nc").exists()


def test_an_edited_resume_file_is_refused_not_resumed(tmp_path, capsys):
    """A running total edited by hand (header intact) resumed with exit 0 and wrong final numbers;
    the resume file's checksum refuses it, naming the file and the way out."""
    out = tmp_path / "out"
    cfg = _config(tmp_path)
    assert _simulate(cfg, "--out", out, "-q", "--stop-after-chunks", "2") == 130
    path = out / "tiny.resume.npz"
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    key = next(k for k in arrays if k.endswith("/totals/fairness_regret"))
    arrays[key] = arrays[key] + 1000.0
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    capsys.readouterr()
    assert _simulate(cfg, "--out", out, "-q", "--resume") == 2
    err = capsys.readouterr().err
    assert f"cannot continue from {path}" in err and "checksum mismatch" in err and "--restart" in err
    assert not (out / "tiny.nc").exists()
    assert _simulate(cfg, "--out", out, "-q", "--restart") == 0


def test_unwritable_output_folder_is_found_before_the_first_round(tmp_path, capsys, monkeypatch):
    def no_simulation(*args, **kwargs):
        raise AssertionError("the study was simulated before the output folder was checked")

    # refused up front: no round is played (Study.run's simulate)
    monkeypatch.setattr(sys.modules["bayesfair.workflow.study"], "simulate", no_simulation)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert _simulate(_config(tmp_path), "--out", blocker / "sub", "-q") == 2
    err = capsys.readouterr().err
    assert "cannot write into the output folder" in err and str(blocker / "sub") in err and ".tmp" not in err


def test_stale_report_without_results_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "tiny.report.md").write_text("# an old report")
    assert _simulate(_config(tmp_path), "--out", out, "-q") == 2
    assert "report, figures or per-round log of an earlier study" in capsys.readouterr().err
    assert _simulate(_config(tmp_path), "--out", out, "-q", "--overwrite") == 0
    assert not (out / "tiny.report.md").exists()
    # a per-round log is the study's too: an overwrite without --log does not leave the old one
    # beside other results; another study's figures (a name with a dot) are not taken for its own
    assert _simulate(_config(tmp_path), "--out", out, "-q", "--log", "--overwrite") == 0
    assert (out / "tiny.log.csv").exists() or (out / "tiny.log.parquet").exists()
    (out / "tiny.x.regret.png").write_bytes(b"a figure of the study named tiny.x")
    other = _config(tmp_path, TINY.replace("seed = 3", "seed = 4"), "other.toml")
    assert _simulate(other, "--out", out, "-q", "--overwrite") == 0
    assert not (out / "tiny.log.csv").exists() and not (out / "tiny.log.parquet").exists()
    assert (out / "tiny.x.regret.png").exists()


def test_demo_refuses_to_replace_a_demo_with_other_settings(tmp_path, capsys):
    args = ["demo", "--runs", "2", "--horizon", "50", "--out", str(tmp_path), "--no-progress"]
    assert cli.main(args) == 0
    before = (tmp_path / "demo.nc").read_bytes()
    capsys.readouterr()
    assert cli.main([*args[:4], "60", *args[5:]]) == 2  # refused before any simulation
    err = capsys.readouterr().err
    assert "horizon: 50 -> 60" in err and "--overwrite" in err
    assert (tmp_path / "demo.nc").read_bytes() == before


# ---------------------------------------------------------------------------------------------
# 5. the stored config is what ran


def test_out_and_log_are_in_the_printed_hashed_and_stored_config(tmp_path, capsys):
    out = tmp_path / "elsewhere"
    assert _simulate(_config(tmp_path), "--out", out, "--log") == 0
    err = capsys.readouterr().err
    assert f"output {out}" in err
    cfg = json.loads(io.read_results(out / "tiny.nc").attrs["config"])
    assert cfg["study"]["output"] == str(out) and cfg["study"]["log"]["enabled"] is True
    assert list(out.glob("tiny.log.*"))


# ---------------------------------------------------------------------------------------------
# 7. unclear errors become clear ones with exit code 2


def test_binary_config_is_a_config_error(tmp_path, capsys):
    path = tmp_path / "bin.toml"
    path.write_bytes(bytes(range(256)) * 4)
    assert _simulate(path) == 2
    err = capsys.readouterr().err
    assert "not a UTF-8 text file" in err and "UnicodeDecodeError" not in err


def test_import_path_to_a_non_constructor_is_a_config_error(tmp_path, capsys):
    text = TINY.replace('name = "fairx_eg"\nepsilon = 0.1', 'name = "os:getcwd"')
    assert _simulate(_config(tmp_path, text), "--dry-run") == 2
    err = capsys.readouterr().err
    assert "os:getcwd is not a declared bayesfair policy" in err and "AttributeError" not in err


@pytest.mark.parametrize("table", [
    '[policies.P]\nname = "os:system"\ncommand = "touch {mark}"',
    '[merit]\nname = "subprocess:getoutput"\ncmd = "touch {mark}"',
    '[policies.P]\nname = "{module}:undeclared"',
])
def test_a_config_cannot_call_an_undeclared_callable(tmp_path, capsys, monkeypatch, table):
    """An import path resolves only to a constructor declared for that kind: a shared config that
    names a shell command (or any undeclared function) is refused before anything is called, even by
    --dry-run and even when the function's module is the user's own."""
    mark = tmp_path / "PWNED"
    module = tmp_path / "user_mod_undeclared.py"
    module.write_text(f"def undeclared(**kw):\n    open({str(mark)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    section = table.format(mark=mark, module="user_mod_undeclared")
    text = TINY
    if section.startswith("[merit]"):
        text = re.sub(r"\[merit\]\n(?:[^\[\n][^\n]*\n)*", section + "\n\n", text, count=1)
    else:
        text = text + "\n" + section + "\n"
    for extra in (("--dry-run",), ()):
        assert _simulate(_config(tmp_path, text), *extra) == 2
        err = capsys.readouterr().err
        assert "not a declared bayesfair" in err and "nothing was called" in err, err
        assert not mark.exists()


def test_a_declared_constructor_in_a_user_module_can_be_named_by_import_path(tmp_path, monkeypatch):
    module = tmp_path / "user_mod_declared.py"
    module.write_text(
        "from bayesfair.core.declare import declare\n"
        "from bayesfair.policies.classic import epsilon_greedy\n\n\n"
        "@declare('policy', name='user_eps')\n"
        "def user_eps(epsilon: float = 0.1):\n"
        "    return epsilon_greedy(epsilon=epsilon)._replace(label='user eps')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    text = TINY + '\n[policies.U]\nname = "user_mod_declared:user_eps"\nepsilon = 0.3\n'
    study = load_config(_config(tmp_path, text))
    assert (study.policies["U"].name, study.policies["U"].label) == ("user_eps", "user eps")


def test_foreign_netcdf_is_refused_with_exit_2(tmp_path, capsys):
    import xarray as xr

    path = tmp_path / "foreign.nc"
    xr.Dataset({"x": ("t", np.arange(3.0))}).to_netcdf(path, engine="h5netcdf")
    for command in ("plot", "report"):
        assert cli.main([command, str(path)]) == 2
        err = capsys.readouterr().err
        assert "not a bayesfair results file" in err and "KeyError" not in err


def test_corrupted_data_file_exits_2_like_a_missing_one(tmp_path, monkeypatch, capsys):
    data = ROOT.parent / "shared" / "data"
    copy = tmp_path / "data"
    shutil.copytree(data / "yeast", copy / "yeast")
    for target in (copy / "yeast").glob("*.arff"):
        target.chmod(0o644)
        raw = bytearray(target.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        target.write_bytes(bytes(raw))
    monkeypatch.setenv("BAYESFAIR_DATA", str(copy))
    text = TINY.replace('[environment]\nname = "bernoulli_arms"\nmeans = [0.2, 0.5, 0.8]',
                        '[environment]\nname = "yeast_bandit"')
    assert _simulate(_config(tmp_path, text), "--dry-run") == 2
    err = capsys.readouterr().err
    assert "checksum" in err.lower() and "Traceback" not in err
    shutil.rmtree(copy / "yeast")
    assert _simulate(_config(tmp_path, text), "--dry-run") == 2


# ---------------------------------------------------------------------------------------------
# 2. interrupts: a real signal to a real process


LONG = TINY.replace("runs = 2", "runs = 64").replace("horizon = 40", "horizon = 3000000") \
           .replace("chunk_size = 16", "chunk_size = 2048").replace("checkpoints = [1, 20, 40]", "checkpoints = 10")


def _start(tmp_path, text=LONG, quiet=True):
    cfg = _config(tmp_path, text, "long.toml")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "bayesfair", "simulate", str(cfg), "--out", str(out)] + (["-q"] if quiet else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return proc, out


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_a_running_study_saves_it_and_exits_with_its_code(tmp_path, sig, code):
    proc, out = _start(tmp_path)
    deadline = time.time() + 240
    while not (out / "tiny.resume.npz").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert "continue with --resume" in err and "Traceback" not in err
    from bayesfair.workflow.persist import describe_resume

    fp, study, text = describe_resume(out / "tiny.resume.npz")
    assert study["horizon"] == 3_000_000 and "EG:" in text
    assert not (out / "tiny.nc").exists()
    # no temp files left, nor the lock's owner file; the (empty) lock file stays by design
    assert not [p for p in os.listdir(out) if p.startswith(".") and p != ".tiny.lock"]


def test_a_second_signal_exits_at_once_even_inside_xla(tmp_path):
    """Both signals arrive while the main thread is inside one XLA call (as during a long
    compilation; the hidden --hold-in-xla hook spins ~6 s), where no Python handler runs: only
    the watcher thread can end the process, and it does at the second signal."""
    import threading

    cfg = _config(tmp_path)
    cmd = [sys.executable, "-m", "bayesfair", "simulate", str(cfg), "--out", str(tmp_path / "out"), "-q",
           "--hold-in-xla", "6"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    holding = threading.Event()
    lines: list[str] = []

    def read():
        for line in proc.stderr:
            lines.append(line)
            if "holding in XLA" in line:
                holding.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert holding.wait(240), "".join(lines)
    time.sleep(0.5)
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    reader.join(10)
    err = "".join(lines)
    # ended by the second signal (the watcher's exit 130), not by finishing the first one's save
    assert proc.returncode == 130 and "second signal: exiting now" in err, err
    assert "continue with --resume" not in err and "Traceback" not in err


def test_a_signal_interrupts_the_wait_for_a_running_chunk_and_its_helper_thread_finishes_the_chunk():
    # wait_interruptibly blocks in a helper thread and waits on an event in the main thread: a
    # signal handler must still run (and may raise) while the computation is in flight, and the
    # helper (not a daemon, so an exiting process waits for it instead of tearing XLA down under
    # it) must end once the computation ends.
    import threading

    from bayesfair.simulation.simulator import wait_interruptibly

    class Stop(Exception):
        pass

    def handler(signum, frame):
        raise Stop

    @jax.jit
    def spin(x, n):  # n steps of dependent element-wise work (a dynamic trip count: one program)
        return jax.lax.fori_loop(0, n, lambda i, v: v * 0.9999999 + 1e-7, x)

    x = jnp.ones(4096)
    spin(x, 10).block_until_ready()
    t = time.perf_counter()
    spin(x, 20_000).block_until_ready()
    steps = int(20_000 * 1.5 / max(time.perf_counter() - t, 1e-4))  # ~1.5 s at this machine's speed and -O level
    previous = signal.signal(signal.SIGUSR1, handler)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGUSR1))
    try:
        out = spin(x, steps)
        before = set(threading.enumerate())
        timer.start()
        with pytest.raises(Stop):
            wait_interruptibly(out)
        interrupted_while_running = not out.is_ready()
        helpers = [t for t in set(threading.enumerate()) - before if t.name == "bayesfair-wait"]
    finally:
        timer.cancel()  # never deliver the signal after the default disposition (exit) is back
        timer.join()
        signal.signal(signal.SIGUSR1, previous)
    assert interrupted_while_running
    assert len(helpers) == 1 and not helpers[0].daemon
    out.block_until_ready()
    helpers[0].join(30)
    assert not helpers[0].is_alive()
    before = set(threading.enumerate())
    wait_interruptibly(out)  # a finished computation returns at once, without a helper
    assert not [t for t in set(threading.enumerate()) - before if t.name == "bayesfair-wait"]


def test_signal_watcher_never_reads_a_reused_descriptor(monkeypatch):
    # The CLI's watcher thread reads the wakeup pipe. If restore() closed its read end before the
    # thread first reached os.read, the number could be reused (e.g. by subprocess.run's stdout
    # pipe) and the late thread would read that stream away: seen as an empty `--help` output
    # after an in-process `bayesfair fit --list`. Here the thread is held until a new pipe exists.
    import os
    import threading

    from bayesfair.core import _signals

    go, real = threading.Event(), _signals.Interrupts._watch
    monkeypatch.setattr(_signals.Interrupts, "_watch", lambda self, fd: (go.wait(10), real(self, fd))[1])
    inter = _signals.Interrupts()
    before = set(threading.enumerate())
    inter.install()
    assert inter.pipe is not None
    (watcher,) = [t for t in set(threading.enumerate()) - before if t.name == "bayesfair-signals"]
    inter.restore()
    a, b = os.pipe()  # with the read end closed by restore(), this would take its number
    try:
        os.write(b, b"payload")
        go.set()
        watcher.join(10)
        assert not watcher.is_alive()  # it saw EOF on its own pipe and ended
        os.set_blocking(a, False)
        assert os.read(a, 64) == b"payload"
    finally:
        os.close(a)
        os.close(b)


# ---------------------------------------------------------------------------------------------
# 4. studies that cannot fit in memory are refused up front; long names; clear messages for raw
#    library errors (each case a reproduction of the reliability issue)

GIB = 2**30


def _available(monkeypatch, n_bytes):
    """Pretend this machine has ``n_bytes`` available (the check reads it when it runs)."""
    from bayesfair.core import _memory

    monkeypatch.setattr(_memory, "available_memory", lambda: _memory.Available(n_bytes, "available (test)"))
    monkeypatch.delenv("BAYESFAIR_NO_MEMORY_CHECK", raising=False)


def _tree_bytes(tree):
    return sum((jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x).nbytes
               for x in jax.tree.leaves(tree))


def test_the_memory_estimate_is_within_a_factor_two_of_the_arrays_a_small_study_makes():
    from bayesfair.simulation import simulator as sim
    from bayesfair.simulation.metric_parts import default_metrics

    env = bf.bernoulli_arms([0.2, 0.5, 0.8, 0.4, 0.6], groups=[0, 0, 1, 1, 1])
    m = bf.merit.exponential(4.0)
    pols = {"TS": bf.fairx_ts(bf.beta_bernoulli(), m), "U": bf.ucb1()}
    runs, horizon, chunk, floors = 32, 300, 64, [0.2, 0.3]
    grid = sim.checkpoint_grid(horizon, 20)
    metrics = default_metrics(m, sim.resolve_floors(floors, 2))
    est = sim.estimate_memory(env, pols, horizon, runs, metrics=metrics, checkpoints=grid.size)
    # the arrays themselves: every policy's run state and a chunk's checkpoint buffer, then the results
    keys = [jax.random.split(k, runs) for k in jax.random.split(jax.random.key(0))]
    carries, buffers = [], []
    for pol in pols.values():
        _, chunk_fn, _, carry = sim._prepare(env, pol, metrics, runs, chunk, 1, *keys, False)
        _, buf = chunk_fn(carry, *sim._chunk_args(chunk))
        carries.append(_tree_bytes(carry))
        buffers.append(_tree_bytes(buf))
    ds = bf.simulate(0, env, pols, horizon, runs, merit=m, floors=floors, checkpoints=grid, chunk_size=chunk)
    values = sum(v.nbytes for v in ds.data_vars.values() if v.dims[:3] == ("policy", "run", "checkpoint"))
    terms = dict((label, n) for label, n, _ in est.run_terms)
    assert 0.5 <= terms["run state"] / (2 * max(carries)) <= 2
    assert 0.5 <= terms["checkpoint buffers"] / (3 * max(buffers)) <= 2
    assert 0.5 <= terms["checkpoint values"] / values <= 2
    assert 0.5 <= dict((label, n) for label, n, _ in est.result_terms)["results Dataset"] / ds.nbytes <= 2
    measured = max(2 * max(carries) + 3 * max(buffers) + values, values + ds.nbytes)
    assert 0.5 <= est.peak / measured <= 2, (est, measured)
    assert est.per_run["policy state"] > 0 and est.per_run["metrics"] > 0


def test_a_study_that_cannot_fit_in_memory_is_refused_before_anything_of_its_size_is_made(tmp_path, capsys,
                                                                                         monkeypatch):
    from bayesfair.simulation import metric_parts
    from bayesfair.simulation.simulator import StudyMemoryError
    from bayesfair.workflow.config import load_config
    from bayesfair.workflow.registry import ConfigError

    cfg = _config(tmp_path, TINY.replace("runs = 2", "runs = 5000"))
    _available(monkeypatch, 2**20)

    def never(*args):
        raise AssertionError("the merit check drew every run's means before the memory check")

    monkeypatch.setattr(metric_parts.FairXRegrets, "check", never)
    with pytest.raises(ConfigError) as exc:
        load_config(cfg)
    assert exc.value.path == "runs"
    text = str(exc.value)
    assert "the study 'tiny' needs about" in text and "more than the 1.0 MiB available (test)" in text
    assert "checkpoint buffers" in text and "5,000 runs x 64 slots" in text and "BAYESFAIR_NO_MEMORY_CHECK=1" in text
    assert _simulate(cfg, "--dry-run") == 2
    err = capsys.readouterr().err
    assert err.startswith("bayesfair: config error: runs: the study 'tiny' needs about") and "Traceback" not in err
    # simulate() refuses before it compiles: a StudyMemoryError, both a SimulationError and a MemoryError
    env = bf.bernoulli_arms([0.2, 0.5, 0.8])
    with pytest.raises(StudyMemoryError, match=r"the study needs about .* more than the 1\.0 MiB") as info:
        bf.simulate(0, env, {"EG": bf.fairx_eg(bf.merit.exponential(4.0), epsilon=0.1)}, 40, 5000)
    assert isinstance(info.value, MemoryError) and isinstance(info.value, SimulationError)
    assert info.value.estimate.peak > info.value.available == 2**20
    monkeypatch.setattr(metric_parts.FairXRegrets, "check", lambda *args: None)
    monkeypatch.setenv("BAYESFAIR_NO_MEMORY_CHECK", "1")  # the documented way past the estimate
    assert _simulate(cfg, "--dry-run") == 0
    assert "memory about" in capsys.readouterr().out


# each reproduction, in a 6 GiB machine: OOM-killed during --dry-run (100,000 x 10,000 arms), 12 s
# into the run (10,000 runs x 1,000 features), MemoryError 34-37 s in after --dry-run said OK
_HUGE = {
    "runs-x-arms": ("runs = 100000\nhorizon = 1000", 'name = "bernoulli_arms"\nmeans = {low = 0.1, high = 0.9}\n'
                    'n_arms = 10000', 'name = "fairx_ts"\nposterior = "beta_bernoulli"', "checkpoint buffers"),
    "runs-x-features": ("runs = 10000\nhorizon = 1000", 'name = "linear_bandit"\nn_arms = 10\nn_features = 1000',
                        'name = "lints"\nposterior = "linear_known_variance"', "run state"),
    "1e7-runs-x-89-checkpoints": ("runs = 10000000\nhorizon = 100000\ncheckpoints = 89", None, None,
                                  "checkpoint values"),
    "every-round-checkpoints": ("runs = 20000\nhorizon = 1000000\ncheckpoints = 2000000", None, None,
                                "results Dataset"),
}


@pytest.mark.parametrize("case", list(_HUGE), ids=list(_HUGE))
def test_the_configs_that_ran_out_of_memory_are_refused_by_dry_run(tmp_path, capsys, monkeypatch, case):
    sizes, env, policy, term = _HUGE[case]
    sized = ("runs =", "horizon =", "checkpoints =")
    text = "\n".join(line for line in TINY.splitlines() if not line.startswith(sized))
    text = text.replace('name = "tiny"', f'name = "tiny"\n{sizes}', 1)
    if env is not None:
        text = text.replace('name = "bernoulli_arms"\nmeans = [0.2, 0.5, 0.8]', env)
        text = text.replace('name = "fairx_eg"\nepsilon = 0.1', policy)
        text = text.replace("c = 4.0", "c = 1.0\ndomain = [-50, 50]")
    _available(monkeypatch, 6 * GIB)
    assert _simulate(_config(tmp_path, text), "--dry-run") == 2
    err = capsys.readouterr().err
    assert "config error: runs: the study 'tiny' needs about" in err and "6.0 GiB available (test)" in err
    assert f"; {term} " in err or f": {term} " in err, err


def test_the_merit_check_draws_the_runs_means_block_by_block(monkeypatch):
    """A dry run checks every run's arm means against the merit's domain; all R x K of them at once
    was the allocation that got `--dry-run` OOM-killed. In blocks the message stays the same."""
    import resource

    from bayesfair.core.compat import check_merit_domain
    from bayesfair.environments import base
    from bayesfair.environments.base import run_means
    from bayesfair.simulation.metric_parts import FairXRegrets

    env = bf.gaussian_arms(bf.environments.UniformMeans(0.0, 1.2, n_arms=7))
    merit = bf.merit.exponential(4.0)  # domain [0, 1]: some means are outside
    with pytest.raises(IncompatibleError) as whole:
        check_merit_domain(merit, run_means(env, 5, 50), env.label)
    monkeypatch.setattr(base, "BLOCK_ELEMENTS", 7 * 8)  # blocks of 8 runs, the last one padded
    blocks = list(base.run_means_blocks(env, 5, 50, base.BLOCK_ELEMENTS))
    assert [b.shape for _, b in blocks] == [(8, 7)] * 6 + [(2, 7)]
    np.testing.assert_array_equal(np.concatenate([b for _, b in blocks]), run_means(env, 5, 50))
    with pytest.raises(IncompatibleError) as blocked:
        FairXRegrets(merit).check(env, 5, 50)
    assert str(blocked.value) == str(whole.value)
    monkeypatch.undo()
    # 100,000 runs x 1,000 arms under 1 GiB of address space to spare: drawn at once, XLA needed 1.2 GB
    big = bf.bernoulli_arms(bf.environments.UniformMeans(0.1, 0.9, n_arms=1000))
    FairXRegrets(merit).check(big, 0, 1000)  # compiled before the cap
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    size = int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (size + GIB if soft == resource.RLIM_INFINITY else min(soft, size + GIB),
                                            hard))
    try:
        FairXRegrets(merit).check(big, 0, 100_000)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_a_sweep_on_a_local_cluster_counts_its_points_running_at_once(tmp_path, monkeypatch):
    from bayesfair.workflow.config import load_config
    from bayesfair.workflow.registry import ConfigError

    cfg = _config(tmp_path, TINY + '\n[sweep]\n"policies.EG.epsilon" = [0.1, 0.2, 0.3]\n', "sw.toml")
    sweep = load_config(cfg)
    one = max(p.memory_estimate(resumable=False).peak for p in sweep.points)
    _available(monkeypatch, int(1.5 * one))
    sweep.check_memory(concurrent=1)
    with pytest.raises(ConfigError, match=r"runs: the sweep 'tiny' \(2 points at once, one per Dask worker; .*\) "
                                          r"needs about .*; or use fewer --workers"):
        sweep.check_memory(concurrent=2)
    assert _simulate(cfg, "--dry-run", "--dask", "--workers", "2") == 2


def _name_limit(folder):
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


@pytest.mark.parametrize("extra", [15, 35])  # with a 255-byte limit: 240 and 260 characters
def test_a_study_name_too_long_for_the_file_system_is_refused_by_dry_run(tmp_path, capsys, extra):
    """A 240-character name passed --dry-run and the pre-flight, ran, then failed at the first save
    (the temp file's name was too long: the work was lost); 260 failed at the start of the run."""
    limit = _name_limit(tmp_path)
    longest = limit - 30  # '.<name>.log.parquet.XXXXXXXX.parquet': 30 bytes besides the name
    name = "a" * (longest + extra)
    assert _simulate(_config(tmp_path), "--dry-run", "--set", f"name={name}", "--out", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bayesfair: config error: name: {len(name)} bytes are too long") and "Traceback" not in err
    assert "'.<name>.log.parquet.XXXXXXXX.parquet'" in err and f"at most {longest} characters" in err
    assert not (tmp_path / "out").exists()


def test_the_longest_study_name_that_fits_writes_every_file(tmp_path, capsys):
    name = "b" * (_name_limit(tmp_path) - 30)
    out = tmp_path / "out"
    assert _simulate(_config(tmp_path), "--set", f"name={name}", "--out", out, "--log", "-q") == 0
    assert cli.main(["report", str(out)]) == 0
    written = sorted(p.name[len(name):] for p in out.iterdir() if p.name != f".{name}.lock")  # the study's lock
    assert written == [".exposure.png", ".log.csv", ".nc", ".regret.png", ".report.csv", ".report.html",
                       ".report.md"], written


def test_write_results_and_tidy_name_the_object_and_the_fix(tmp_path):
    ds = bf.simulate(0, bf.bernoulli_arms([0.2, 0.8]), {"U": bf.uniform()}, 10, 2, merit=bf.merit.exponential(1.0))
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(NotADirectoryError, match=rf"cannot write {blocker}/x\.nc: {blocker} is a file, not a folder"):
        bf.write_results(ds, blocker / "x.nc")
    (tmp_path / "res.nc").mkdir()
    with pytest.raises(IsADirectoryError, match=r"res\.nc: it is a folder; give a file path \(e\.g\. .*nc/res\.nc"):
        bf.write_results(ds, tmp_path / "res.nc")
    assert os.listdir(tmp_path / "res.nc") == [] and not [p for p in os.listdir(tmp_path) if p.startswith(".")]
    for fn in (lambda x: bf.write_results(x, tmp_path / "d.nc"), bf.tidy):
        with pytest.raises(TypeError, match=r"expected an xarray\.Dataset of results .*got a dict \(\{'fairness_"):
            fn({"fairness_regret": [1.0]})
    with pytest.raises(ValueError, match=r"tidy: the Dataset has no scalar metric .*its variables: mean"):
        bf.tidy(ds[["mean"]])


def test_tidy_of_sweep_results_has_a_column_per_swept_key(tmp_path):
    from bayesfair.workflow.config import load_config

    text = TINY + '\n[sweep]\n"policies.EG.epsilon" = [0.1, 0.3]\n"runs" = [2, 3]\n'
    sw = load_config(_config(tmp_path, text, "sw.toml"))
    ds = sw.run()
    df = bf.tidy(ds)
    assert list(df.columns[:5]) == ["policies.EG.epsilon", "runs", "policy", "run", "checkpoint"]
    assert "fairness_regret" in df.columns and df["fairness_regret"].notna().all()
    # the runs = 2 points have no run 2 (NaN padding): their rows are left out
    assert len(df) == 2 * (2 + 3) * 3
    one = bf.tidy(sw.points[0].run())
    point = df[(df["policies.EG.epsilon"] == 0.1) & (df["runs"] == 2)].drop(columns=["policies.EG.epsilon", "runs"])
    np.testing.assert_array_equal(point["fairness_regret"].values, one["fairness_regret"].values)


def test_a_config_with_a_byte_order_mark_is_named(tmp_path, capsys):
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + TINY.encode())
    assert _simulate(path, "--dry-run") == 2
    err = capsys.readouterr().err
    assert "starts with a UTF-8 byte-order mark (BOM" in err and "without a BOM" in err and "Invalid" not in err


@pytest.mark.parametrize(("address", "why"), [
    ("not an address", "not of the form [tcp://]HOST:PORT"), ("127.0.0.1", "not of the form"),
    ("tcp://127.0.0.1:99999", "port 99999 is outside 1-65535"), ("http://host:8786", "'http' is not a Dask protocol"),
])
def test_a_scheduler_address_of_the_wrong_form_is_refused_at_once(tmp_path, capsys, address, why):
    cfg = _config(tmp_path, TINY + '\n[sweep]\n"policies.EG.epsilon" = [0.1, 0.2]\n', "sw.toml")
    assert _simulate(cfg, "--scheduler", address) == 2
    err = capsys.readouterr().err
    assert f"--scheduler {address!r} is not a Dask scheduler address: it" in err or why in err
    assert why in err and "tcp://127.0.0.1:8786" in err and "Traceback" not in err


def test_an_unreachable_scheduler_is_a_clear_error_after_the_connect_timeout(tmp_path, capsys):
    pytest.importorskip("distributed")
    cfg = _config(tmp_path, TINY + '\n[sweep]\n"policies.EG.epsilon" = [0.1, 0.2]\n', "sw.toml")
    assert _simulate(cfg, "--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "1") == 2
    err = capsys.readouterr().err
    assert err.startswith("bayesfair: error: no Dask scheduler answered at tcp://127.0.0.1:9 within 1 s")
    assert "dask scheduler" in err and "--dask" in err and "Traceback" not in err


def test_a_signal_stops_a_dask_sweep_at_once_with_one_line(tmp_path):
    """Ctrl-C during a sweep on a LocalCluster exited 130 only once its thread workers finished their
    points, with distributed's warnings and tracebacks; the points in flight now stop at their next
    chunk. The points here would run for minutes (the communicate timeout is a hang guard)."""
    pytest.importorskip("distributed")
    text = LONG.replace("horizon = 3000000", "horizon = 300000000") + \
        '\n[sweep]\n"policies.EG.epsilon" = [0.1, 0.2]\n'
    cfg = _config(tmp_path, text, "sweep.toml")
    cmd = [sys.executable, "-m", "bayesfair", "simulate", str(cfg), "--out", str(tmp_path / "out"), "--dask"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    started = proc.stderr.readline()
    while started and "sweep points on Dask" not in started:
        started = proc.stderr.readline()
    assert started, proc.communicate()
    time.sleep(3)  # the points compile and start their rounds
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted; continue with --resume" in err
    assert "Traceback" not in err and "distributed" not in err and "CancelledError" not in err, err


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped interrupt
def test_a_signal_whose_interrupt_a_library_swallows_still_exits_130(monkeypatch, capsys):
    """A Ctrl-C whose KeyboardInterrupt is raised where Python drops exceptions (a ``__del__``
    during the final results write, as a 109 MB write once showed: the study completed with exit 0)
    still gives exit 130 and says that the command completed."""
    import gc

    class Dropper:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)  # the handler's KeyboardInterrupt is raised here and ignored

    def run_list(args):
        Dropper()
        gc.collect()
        return 0

    monkeypatch.setattr(cli, "run_list", run_list)
    before = signal.getsignal(signal.SIGINT)
    try:
        code = cli.main(["list"])
    finally:  # an interrupted command leaves the default handlers (a second signal ends the process)
        signal.signal(signal.SIGINT, before)
    assert code == 130
    assert "interrupted while finishing: the command completed" in capsys.readouterr().err
