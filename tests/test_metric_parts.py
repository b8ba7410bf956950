"""Metric components (bayesfair.simulation.metric_parts): optional merit, explicit components, floors naming."""

import copy
import json

import jax.numpy as jnp
import numpy as np
import pytest

import bayesfair as bf
from bayesfair.simulation import metric_parts as mp
from bayesfair.simulation import results as io
from bayesfair.simulation.metrics import SUM, MetricSpec
from bayesfair.workflow.config import ConfigError, parse_config

T, R = 120, 3
FAIRX_VARS = {"fairness_regret", "reward_regret", "group_fairness_regret", "pi_star", "pi_star_within"}


def _pols(m):
    return {"ucb": bf.ucb1(), "eg": bf.fairx_eg(m, epsilon=0.1)}


def _same(a, b, names):
    for v in names:
        np.testing.assert_array_equal(a[v].values, b[v].values, err_msg=v)


def test_without_merit_the_fairx_metrics_are_not_computed(small_env, exp4):
    full = bf.simulate(2, small_env, _pols(exp4), T, R, merit=exp4, chunk_size=32)
    bare = bf.simulate(2, small_env, _pols(exp4), T, R, chunk_size=32)
    assert not FAIRX_VARS & set(bare.data_vars)
    assert FAIRX_VARS <= set(full.data_vars)
    assert set(bare.data_vars) == set(full.data_vars) - FAIRX_VARS
    _same(full, bare, [v for v in bare.data_vars if v != "seconds"])
    assert json.loads(bare.attrs["config"])["merit"] is None
    assert list(io.tidy(bare).columns) == ["policy", "run", "checkpoint", "regret", "reward"]
    assert list(io.summary_table(bare).columns) == ["regret", "regret_se", "reward", "reward_se"]
    assert "pi_star" not in io.exposure_table(bare).columns


def test_explicit_default_components_equal_the_default(small_env, exp4):
    a = bf.simulate(4, small_env, _pols(exp4), T, R, merit=exp4, floors=[0.3, 0.3], chunk_size=50)
    b = bf.simulate(4, small_env, _pols(exp4), T, R, metrics=mp.default_metrics(exp4, [0.3, 0.3]), chunk_size=50)
    # tidy's columns: every recorded scalar metric, the bi-level regret with floors included
    per_checkpoint = {v for v, da in a.data_vars.items() if da.dims == ("policy", "run", "checkpoint")}
    assert "bf_regret" in per_checkpoint
    assert set(io.tidy(a).columns) == {"policy", "run", "checkpoint"} | per_checkpoint
    assert set(a.data_vars) == set(b.data_vars)
    _same(a, b, [v for v in a.data_vars if v != "seconds"])
    cfg = json.loads(b.attrs["config"])
    assert [m["name"] for m in cfg["metrics"]] == ["fairx", "conventional", "extra_regrets", "floors", "tracked"]
    assert "metrics" not in json.loads(a.attrs["config"])


def test_a_subset_of_components(small_env, exp4):
    ds = bf.simulate(1, small_env, _pols(exp4), T, R, merit=exp4, metrics=[mp.Conventional()])
    assert set(ds.data_vars) == {"regret", "reward", "exposure", "pulls", "group_exposure", "group_pulls",
                                 "group_offered", "mean", "seconds"}
    only_floors = bf.simulate(1, small_env, _pols(exp4), T, R, metrics=[mp.Floors([0.3, 0.3])])
    assert set(only_floors.data_vars) == {"anytime_slack", "group_floor", "mean", "seconds"}


@pytest.mark.parametrize("fairx_only, conv_only", [
    (["group_fairness_regret"], ["reward", "exposure", "pulls", "group_pulls"]),
    (["reward_regret", "fairness_regret"], ["group_offered", "regret", "group_exposure"]),
])
def test_only_some_variables_are_recorded_with_the_full_study_s_numbers(small_env, exp4, fairx_only, conv_only):
    """only=: exactly the named variables (plus pi_star / pi_star_within, the means and the timing),
    each equal to the same variable of a study with every variable; the order given does not matter."""
    pols = _pols(exp4)
    full = bf.simulate(5, small_env, pols, T, R, metrics=[mp.FairXRegrets(exp4), mp.Conventional()], chunk_size=50)
    part = bf.simulate(5, small_env, pols, T, R, metrics=[mp.FairXRegrets(exp4, only=fairx_only),
                                                           mp.Conventional(only=conv_only)], chunk_size=50)
    assert set(part.data_vars) == {*fairx_only, *conv_only, "pi_star", "pi_star_within", "mean", "seconds"}
    _same(full, part, [v for v in part.data_vars if v != "seconds"])
    described = json.loads(part.attrs["config"])["metrics"]
    assert described[0]["only"] == [v for v in mp.FairXRegrets.VARIABLES if v in fairx_only]
    assert described[1]["only"] == [v for v in mp.Conventional.VARIABLES if v in conv_only]


def test_only_errors_name_the_component_and_the_allowed_variables(small_env, exp4):
    with pytest.raises(ValueError, match=r"FairXRegrets\(only=...\): unknown variable\(s\) 'regret'; allowed: "
                                         r"fairness_regret, reward_regret, group_fairness_regret"):
        mp.FairXRegrets(exp4, only=["regret"])
    with pytest.raises(ValueError, match=r"Conventional\(only=...\) must name each variable at most once"):
        mp.Conventional(only=["reward", "reward"])
    with pytest.raises(ValueError, match=r"at least one"):
        mp.Conventional(only=[])
    with pytest.raises(TypeError, match=r"Conventional\(only=...\) must be a list of variable names"):
        mp.Conventional(only="reward")
    # the bi-level regret (Floors with a merit) reads exposure: a Conventional without it is refused
    with pytest.raises(ValueError, match=r"'floors' needs 'exposure'.*only="):
        bf.simulate(1, small_env, _pols(exp4), T, R,
                    metrics=[mp.Conventional(only=["reward"]), mp.Floors([0.3, 0.3], exp4)])


def test_floors_keyword(small_env, exp4):
    a = bf.simulate(3, small_env, _pols(exp4), T, R, merit=exp4, floors=[0.3, 0.3])
    assert {"anytime_slack", "bf_regret", "group_floor"} <= set(a.data_vars)
    with pytest.raises(ValueError, match=r"^floors: "):
        bf.simulate(3, small_env, _pols(exp4), T, R, floors=[0.6, 0.3])
    # without a merit: the anytime check, no bi-level regret (it needs pi*_g)
    c = bf.simulate(3, small_env, _pols(exp4), T, R, floors=[0.3, 0.3])
    assert "anytime_slack" in c and "bf_regret" not in c
    np.testing.assert_array_equal(a["anytime_slack"].values, c["anytime_slack"].values)


class TopArmShare(mp.Metric):
    """A user component with a carried state: rounds on which the best arm had pi_t >= 1/2, and
    the running count of pulls of the best arm (kept in the state, recorded as a latest value)."""

    name = "top_arm"

    def specs(self, ctx):
        return (MetricSpec("top_half", (), (), np.float32, SUM, "rounds with pi_t(best) >= 1/2"),
                MetricSpec("top_pulls", (), (), np.float32, "last", "pulls of the best arm so far"))

    def init(self):
        return jnp.int32(0)

    def update(self, state, rnd):
        best = jnp.argmax(rnd.mean)
        state = state + (rnd.action == best).astype(jnp.int32)
        return state, {"top_half": (rnd.probs[best] >= 0.5).astype(jnp.float32), "top_pulls": state}


def test_a_user_component_is_chunk_size_independent(small_env, exp4):
    parts = [mp.Conventional(), TopArmShare()]
    a = bf.simulate(5, small_env, _pols(exp4), T, R, metrics=parts, chunk_size=7, checkpoints=[10, 50, T])
    b = bf.simulate(5, small_env, _pols(exp4), T, R, metrics=parts, chunk_size=1024, checkpoints=[10, 50, T])
    _same(a, b, ["top_half", "top_pulls", "pulls"])
    pulls = a["pulls"].values[..., 3]  # arm 3 (0.8) is the best arm
    np.testing.assert_array_equal(a["top_pulls"].values, pulls)
    assert np.all(a["top_half"].values <= a["checkpoint"].values)


def test_component_errors(small_env, exp4):
    with pytest.raises(TypeError, match="metrics must be a sequence"):
        bf.simulate(0, small_env, _pols(exp4), 10, 1, metrics=mp.Conventional())
    with pytest.raises(TypeError, match=r"metrics\[1\]"):
        bf.simulate(0, small_env, _pols(exp4), 10, 1, metrics=[mp.Conventional(), "tracked"])
    with pytest.raises(ValueError, match="'regret' is recorded by both"):
        bf.simulate(0, small_env, _pols(exp4), 10, 1, metrics=[mp.Conventional(), mp.Conventional()])
    with pytest.raises(ValueError, match="needs 'exposure'"):
        bf.simulate(0, small_env, _pols(exp4), 10, 1, metrics=[mp.Floors([0.3, 0.3], exp4)])
    with pytest.raises(ValueError, match="floors: .*length 2"):
        bf.simulate(0, small_env, _pols(exp4), 10, 1, metrics=[mp.Floors([0.3, 0.3, 0.2])])
    with pytest.raises(TypeError, match="Floors component"):
        bf.simulate(0, small_env, _pols(exp4), 10, 1, metrics=[mp.Conventional()], floors=[0.3, 0.3])
    # the declared components (config names): the FairX regrets need a merit; unknown names are refused
    from bayesfair.workflow import registry

    with pytest.raises(ConfigError, match=r"metrics\[0\]\.merit: required: a merit table .*study's merit"):
        registry.check_params("metric", "fairx", "metrics[0]")
    with pytest.raises(ConfigError, match="unknown metric 'nope'"):
        registry.check_params("metric", "nope", "metrics[0]")


STUDY = {
    "name": "parts", "seed": 1, "runs": 2, "horizon": 60, "chunk_size": 16,
    "merit": {"name": "exponential", "c": 3.0},
    "environment": {"name": "bernoulli_arms", "means": [0.2, 0.5, 0.6, 0.8], "groups": [0, 1, 0, 1]},
    "policies": {"UCB": {"name": "ucb1"}, "BF": {"name": "bf_ucb"}},
}


def test_config_floors_key():
    new = parse_config({**copy.deepcopy(STUDY), "floors": [0.2, 0.2]})
    assert new.config["floors"] == [0.2, 0.2]
    assert new.policies["BF"].params["groups_beta"] == [0.2, 0.2]  # bf_ucb inherits the floors
    with pytest.raises(ConfigError) as err:
        parse_config({**copy.deepcopy(STUDY), "floors": [0.6, 0.2]})
    assert err.value.path == "floors"


def test_config_metrics_key():
    base = {**copy.deepcopy(STUDY), "floors": [0.2, 0.2]}
    study = parse_config({**base, "metrics": ["conventional", "floors"]})
    assert study.config["metrics"] == ["conventional", "floors"]
    ds = study.run()
    assert "anytime_slack" in ds and "bf_regret" in ds and "fairness_regret" not in ds
    default = parse_config(copy.deepcopy(base))
    assert default.config["metrics"] is None and default.metrics() is None
    for bad, path in ((["conventional", "nope"], "metrics[1]"), ("fairx", "metrics"), ([], "metrics"),
                      (["tracked", "tracked"], "metrics")):
        with pytest.raises(ConfigError) as err:
            parse_config({**copy.deepcopy(base), "metrics": bad})
        assert err.value.path == path
    with pytest.raises(ConfigError, match="needs the study's floors") as err:
        parse_config({**copy.deepcopy(STUDY), "metrics": ["floors"], "policies": {"UCB": {"name": "ucb1"}}})
    # a table records some of a component's variables (normalized to the component's order)
    sub = parse_config({**base, "metrics": [{"name": "conventional", "only": ["pulls", "reward"]},
                                            {"name": "fairx", "only": ["group_fairness_regret"]}]})
    assert sub.config["metrics"] == [{"name": "conventional", "only": ["reward", "pulls"]},
                                     {"name": "fairx", "only": ["group_fairness_regret"]}]
    ds = sub.run()
    assert {"reward", "pulls", "group_fairness_regret"} <= set(ds.data_vars)
    assert not {"regret", "exposure", "fairness_regret", "reward_regret"} & set(ds.data_vars)
    for bad, path in (([{"name": "floors", "only": ["anytime_slack"]}], "metrics[0]"),
                      ([{"name": "conventional", "only": ["reward"], "x": 1}], "metrics[0]"),
                      ([{"name": "conventional", "only": []}], "metrics[0].only"),
                      ([{"name": "conventional", "only": ["reward", "nope"]}], "metrics[0].only[1]"),
                      (["conventional", {"name": "conventional", "only": ["reward"]}], "metrics")):
        with pytest.raises(ConfigError) as err:
            parse_config({**copy.deepcopy(base), "metrics": bad})
        assert err.value.path == path, bad


def test_resume_with_named_components_is_exact(tmp_path):
    from bayesfair.workflow.persist import StudyInterrupted

    raw = {**copy.deepcopy(STUDY), "floors": [0.2, 0.2], "metrics": ["conventional", "floors", "tracked"],
           "resume": {"every_chunks": 1}}
    study = parse_config(raw)
    full = study.run()
    with pytest.raises(StudyInterrupted):  # 4 chunks per policy: stop inside the second policy
        study.execute(tmp_path, stop_after_chunks=6)
    res = study.execute(tmp_path, resume=True)
    assert res.resumed
    resumed = io.read_results(res.results)
    assert set(resumed.data_vars) == set(full.data_vars) and "fairness_regret" not in full
    _same(full, resumed, [v for v in full.data_vars if v != "seconds"])
