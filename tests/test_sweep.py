"""Sweeps: expansion and validation, combination along the swept keys, Dask equals local."""

import copy
import json

import numpy as np
import pytest
import xarray as xr

from bayesfair.workflow.config import ConfigError, load_config
from bayesfair.workflow.sweep import Sweep, combine, coordinate

BASE = {
    "name": "sw", "seed": 4, "runs": 2, "horizon": 40, "chunk_size": 16, "checkpoints": [10, 40],
    "floors": [0.3, 0.3],
    "merit": {"name": "identity"},
    "environment": {"name": "bernoulli_arms", "means": {"low": 0.6, "high": 0.85}, "n_arms": 4,
                    "group_sizes": [2, 2]},
    "policies": {"GEF": {"name": "gef", "groups_beta": [0.4, 0.4]}},
}


def _sweep(table, base=BASE):
    return Sweep.from_raw({**copy.deepcopy(base), "sweep": table}, "sw.toml")


def test_grid_expansion_and_point_configs():
    sw = _sweep({"policies.GEF.groups_beta": [[0.2, 0.2], [0.3, 0.3]], "merit.floor": [0.01, 0.1, 0.2]})
    assert len(sw.points) == 6 and sw.keys == ["policies.GEF.groups_beta", "merit.floor"]
    assert [p.name for p in sw.points[:2]] == ["sw-000", "sw-001"]
    assert sw.points[0].config["policies"]["GEF"]["groups_beta"] == [0.2, 0.2]
    assert sw.points[5].config["policies"]["GEF"]["groups_beta"] == [0.3, 0.3]  # first key slowest
    assert [p.config["merit"]["floor"] for p in sw.points] == [0.01, 0.1, 0.2] * 2
    assert str(sw.points[0].output).endswith("sw.points")
    assert sw.coords()[4] == {"policies.GEF.groups_beta": [0.3, 0.3], "merit.floor": 0.1}
    assert coordinate([0.2, 0.2]) == "[0.2, 0.2]" and coordinate(3) == 3


@pytest.mark.parametrize("table, path, words", [
    ({"runs": 3}, "sweep.\"runs\"", ["non-empty list"]),
    ({"runs": []}, "sweep.\"runs\"", ["non-empty list"]),
    ({"policies.NOPE.delta": [0.1]}, "sweep.\"policies.NOPE.delta\"", ["'policies.NOPE' is not in the config"]),
    ({"policies.GEF.delta": [0.1, 1.5]}, "policies.GEF.delta", ["out of range", "1.5",
                                                                "in the sweep point policies.GEF.delta = 1.5"]),
    ({"policies.GEF.deltta": [0.1]}, "policies.GEF.deltta", ["unknown key", "'delta'"]),
    ({"runs": [2, 2]}, "sweep.\"runs\"", ["distinct"]),
    ({"merit.c": [4, 4.0]}, "sweep.\"merit.c\"", ["distinct"]),  # one value: the same study twice
])
def test_sweep_errors(table, path, words):
    with pytest.raises(ConfigError) as exc:
        _sweep(table)
    assert exc.value.path == path, str(exc.value)
    for w in words:
        assert w in str(exc.value)


def _fake(n_arms, value):
    return xr.Dataset(
        {"regret": (("policy", "run", "checkpoint"), np.full((1, 2, 2), value)),
         "exposure": (("policy", "run", "checkpoint", "arm"), np.full((1, 2, 2, n_arms), value))},
        coords={"policy": ["P"], "run": [0, 1], "checkpoint": [5, 10], "arm": np.arange(n_arms),
                "arm_group": ("arm", np.zeros(n_arms, int))}, attrs={"created": "x"})


def test_combine_two_keys_with_outer_join():
    keys, values = ["environment.n_arms", "merit.c"], [[2, 3], [1.0, 4.0]]
    ds = combine([_fake(2, 0), _fake(2, 1), _fake(3, 2), _fake(3, 3)], keys, values, {"sweep": "s"})
    assert ds["regret"].dims == ("environment.n_arms", "merit.c", "policy", "run", "checkpoint")
    assert ds["environment.n_arms"].values.tolist() == [2, 3] and ds["merit.c"].values.tolist() == [1.0, 4.0]
    np.testing.assert_array_equal(ds["regret"].isel(run=0, checkpoint=0, policy=0).values, [[0, 1], [2, 3]])
    assert ds.sizes["arm"] == 3 and np.isnan(ds["exposure"].sel({"environment.n_arms": 2}).isel(arm=2)).all()
    assert ds.attrs == {"sweep": "s"}


@pytest.fixture(scope="module")
def dask_client():
    from bayesfair.workflow.sweep import dask_client as make

    client = make(n_workers=2, processes=False)
    yield client
    cluster = client.cluster
    client.close()
    cluster.close()


def test_dask_sweep_equals_local_sweep(tmp_path, dask_client):
    """Two workers of a LocalCluster (threads, see docs/workflow.md) give the local numbers exactly."""
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(
        'name = "sw"\nseed = 4\nruns = 2\nhorizon = 40\nchunk_size = 16\ncheckpoints = [10, 40]\n'
        'floors = [0.3, 0.3]\n[merit]\nname = "identity"\n'
        '[environment]\nname = "bernoulli_arms"\nmeans = { low = 0.6, high = 0.85 }\nn_arms = 4\n'
        'group_sizes = [2, 2]\n[policies.GEF]\nname = "gef"\n'
        '[sweep]\n"policies.GEF.groups_beta" = [[0.2, 0.2], [0.4, 0.4]]\n')
    sw = load_config(cfg)
    local = sw.execute(tmp_path / "local")
    remote = sw.execute(tmp_path / "dask", client=dask_client)
    assert local.results.name == "sw.nc" and remote.results.parent.name == "dask"
    a, b = local.dataset, remote.dataset
    assert a["policies.GEF.groups_beta"].values.tolist() == ["[0.2, 0.2]", "[0.4, 0.4]"]
    assert set(a.data_vars) == set(b.data_vars)
    for v in a.data_vars:
        if v != "seconds":
            np.testing.assert_array_equal(a[v].values, b[v].values, err_msg=v)
    # the points differ (the floors matter) and every point is its own study file
    ex = a["exposure"].isel(checkpoint=-1)
    assert not np.array_equal(ex.isel({"policies.GEF.groups_beta": 0}), ex.isel({"policies.GEF.groups_beta": 1}))
    assert sorted(p.name for p in (tmp_path / "dask" / "sw.points").glob("*.nc")) == ["sw-000.nc", "sw-001.nc"]
    assert json.loads(a.attrs["sweep"])["keys"] == ["policies.GEF.groups_beta"]
    # resume skips finished points
    said = []
    again = sw.execute(tmp_path / "dask", client=dask_client, resume=True, report=said.append)
    assert said == ["resume: 2 of 2 points already done"] and again.resumed
    # a point interrupted locally and then finished on Dask leaves no saved progress behind (the
    # next plain run would be refused as an interrupted point)
    from bayesfair.workflow.persist import StudyInterrupted

    with pytest.raises(StudyInterrupted):
        sw.execute(tmp_path / "mixed", stop_after_chunks=1)
    assert (tmp_path / "mixed" / "sw.points" / "sw-000.resume.npz").exists()
    sw.execute(tmp_path / "mixed", client=dask_client, resume=True)
    assert not list((tmp_path / "mixed" / "sw.points").glob("*.resume.npz"))
    assert sw.execute(tmp_path / "mixed").dataset is not None  # a plain run again: not refused


def test_set_on_a_swept_key_is_refused(tmp_path):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text('name = "sw"\nruns = 2\nhorizon = 40\n[merit]\nname = "exponential"\nc = 4.0\n'
                   '[environment]\nname = "bernoulli_arms"\nmeans = [0.2, 0.8]\n[policies.U]\nname = "uniform"\n'
                   '[sweep]\n"merit.c" = [1.0, 4.0]\n')
    with pytest.raises(ConfigError, match="'merit.c' is swept"):
        load_config(cfg, ["merit.c=9.0"])
    with pytest.raises(ConfigError, match="'merit.c' is swept"):
        load_config(cfg, ["merit={name='exponential', c=9.0}"])
    assert len(load_config(cfg, ["runs=3"]).points) == 2  # other keys are fine


def _failing_sweep(tmp_path):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text('name = "sw"\nruns = 2\nhorizon = 40\nchunk_size = 16\ncheckpoints = [20, 40]\n'
                   '[merit]\nname = "exponential"\nc = 4.0\n[environment]\nname = "bernoulli_arms"\n'
                   'means = [0.2, 0.8]\n[policies.EG]\nname = "fairx_eg"\nepsilon = 0.1\n'
                   '[sweep]\n"policies.EG.epsilon" = [0.1, 0.3]\n')
    return cfg


def _fails_at_epsilon_03(raw, inputs=None):
    from bayesfair.simulation.simulator import SimulationError

    if raw["policies"]["EG"]["epsilon"] == 0.3:
        raise SimulationError("policy 'EG' (FairX-EG) produced an invalid selection distribution")
    from bayesfair.workflow.sweep import parse_config

    return parse_config(raw).run(progress=False)


def test_a_failing_point_is_named_locally(tmp_path, capsys, monkeypatch):
    """A failing point's error did not say which point failed."""
    from bayesfair.workflow import cli
    from bayesfair.workflow.study import Study

    real = Study.execute

    def execute(self, *args, **kw):
        if self.config["policies"]["EG"]["epsilon"] == 0.3:
            _fails_at_epsilon_03(self.raw)
        return real(self, *args, **kw)

    monkeypatch.setattr(Study, "execute", execute)
    assert cli.main(["simulate", str(_failing_sweep(tmp_path)), "--out", str(tmp_path / "out"), "-q"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bayesfair: failed: sweep point 2 of 2 (policies.EG.epsilon = 0.3): policy 'EG' (FairX-EG) "
                          "produced an invalid selection distribution"), err
    assert (tmp_path / "out" / "sw.points" / "sw-000.nc").exists()  # the point before it is kept


def test_a_failing_point_is_named_on_dask(tmp_path, dask_client, monkeypatch):
    from bayesfair.simulation.simulator import SimulationError
    from bayesfair.workflow import sweep

    monkeypatch.setattr(sweep, "run_point", _fails_at_epsilon_03)
    sw = load_config(_failing_sweep(tmp_path))
    with pytest.raises(SimulationError, match=r"^sweep point 2 of 2 \(policies\.EG\.epsilon = 0\.3\): policy 'EG'"):
        sw.execute(tmp_path / "out", client=dask_client)
    # Sweep.run (nothing written) names it too
    from bayesfair.workflow.study import Study

    real = Study.run
    monkeypatch.setattr(Study, "run", lambda self, *a, **kw: _fails_at_epsilon_03(self.raw)
                        if self.config["policies"]["EG"]["epsilon"] == 0.3 else real(self, *a, **kw))
    with pytest.raises(SimulationError, match=r"^sweep point 2 of 2 \(policies\.EG\.epsilon = 0\.3\): policy 'EG'"):
        sw.run()


def test_a_point_error_that_cannot_be_rebuilt_gets_the_point_as_a_note():
    from bayesfair.workflow.sweep import _point_error

    class Picky(Exception):
        def __init__(self, a, b):
            super().__init__(f"{a}/{b}")

    exc = Picky(1, 2)
    assert _point_error(exc, "sweep point 1 of 2 (x = 1)") is exc and exc.__notes__ == ["sweep point 1 of 2 (x = 1)"]
    cfg = _point_error(ConfigError("merit.c", "out of range"), "sweep point 2 of 2 (x = 2)")
    assert cfg.path == "merit.c" and str(cfg) == "merit.c: out of range (in sweep point 2 of 2 (x = 2))"


def test_sweep_run_on_dask_ships_the_instance_file_and_keeps_its_path(tmp_path, dask_client, monkeypatch):
    """Sweep.run on a LocalCluster with a relative means_file (the same machine; tests/test_dask_cluster.py
    has the worker elsewhere): the task builds from the shipped copy, the results are the local ones."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inst.csv").write_text("0.2,0.7\n0.4,0.6\n")
    cfg = tmp_path / "sweep.toml"
    cfg.write_text('name = "sw"\nruns = 2\nhorizon = 40\nchunk_size = 20\ncheckpoints = [40]\n[merit]\n'
                   'name = "exponential"\nc = 1.0\n[environment]\nname = "bernoulli_arms"\nmeans_file = "inst.csv"\n'
                   '[policies.U]\nname = "uniform"\n[sweep]\n"seed" = [1, 2]\n')
    sw = load_config(cfg)
    local, remote = sw.run(), sw.run(client=dask_client)
    for v in local.data_vars:
        if v != "seconds":
            np.testing.assert_array_equal(local[v].values, remote[v].values, err_msg=v)
    assert local.attrs["point_configs"] == remote.attrs["point_configs"]
    assert json.loads(remote.attrs["point_configs"])[0]["environment"]["means_file"] == "inst.csv"
