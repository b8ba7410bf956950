"""A sweep on a real Dask cluster: `dask scheduler` and `dask worker` started here as separate
processes on loopback, the worker in another working directory, with no data folder and an empty
home, and importing a copy of the package with no checkout beside it (as an installed bayesfair is),
so it can find neither the data sets nor the instance files by accident: everything it reads is what
the sweep's tasks carry. Its results must equal a local run's bit for bit.

Also: the shipped pieces on their own (fast, no cluster): data folders and recordings per context,
copies checked against the registry where they arrive, the worker-side error's words.
"""

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import bayesfair.datasets as bds
from bayesfair.datasets import ChecksumError, MissingFileError, shipping
from bayesfair.simulation.results import read_results
from bayesfair.workflow import cli
from bayesfair.workflow.config import ConfigError, load_config
from bayesfair.workflow.tasks import named_files, run_point, task_config, task_inputs

distributed = pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("BAYESFAIR_DATA", "").strip() or ROOT.parent / "shared" / "data").absolute()
START_TIMEOUT = 60.0  # seconds for the scheduler to write its address and the worker to register
#: Seconds after which the scheduler and the worker end by themselves (coreutils `timeout`), should
#: this process die without running the fixture's clean-up (SIGKILL).
LIFETIME = 900
YEAST = {"name": "yeast_bandit", "mode": "mab", "part": "test"}

needs_yeast = pytest.mark.skipif(not (DATA / "yeast" / "yeast.arff").is_file(),
                                 reason=f"the yeast data is not in {DATA}")


def _config(sweep: str, extra: str = "") -> str:
    """A small sweep of FairX-TS on the environment the sweep sets (one chunk program per point)."""
    return ('name = "cl"\nseed = 3\nruns = 2\nhorizon = 300\nchunk_size = 100\ncheckpoints = [100, 300]\n'
            '[merit]\nname = "exponential"\nc = 2.0\n'
            '[environment]\nname = "yeast_bandit"\nmode = "mab"\npart = "test"\n'
            '[policies.TS]\nname = "fairx_ts"\n'
            'posterior = { name = "normal_known_variance", prior_mean = 0.0, prior_var = 0.1, noise_var = 0.01 }\n'
            + extra + "[sweep]\n" + sweep)


# ---------------------------------------------------------------------------------------------
# the cluster: two processes, stopped whatever happens


def _start(args: list[str], cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    """``python -m dask ARGS`` in a session of its own, bounded by :data:`LIFETIME` where `timeout` exists."""
    bound = ["timeout", "-k", "10", str(LIFETIME)] if shutil.which("timeout") else []
    with open(log, "wb") as out:  # the child keeps its own descriptor
        return subprocess.Popen([*bound, sys.executable, "-m", "dask", *args], cwd=cwd, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def _stop(procs: list[subprocess.Popen]) -> None:
    """End each of ``procs`` and its process group (started by :func:`_start` in a session of its
    own): SIGTERM to all, then SIGKILL to any still running after 3 s."""
    for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 10.0)):
        running = [p for p in procs if p.poll() is None]
        for proc in running:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        for proc in running:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:] if log.is_file() else "(no log)"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``dask scheduler`` + one ``dask worker`` (1 thread, no nanny) on 127.0.0.1, free ports (the
    scheduler picks one and writes it to its scheduler file). The worker runs in its own empty
    folder, with HOME an empty folder, no BAYESFAIR_DATA or XDG_CACHE_HOME, and bayesfair imported
    from a copy outside any checkout; the rest of the environment (XLA flags, the compile cache
    folder) is this process's, as a cluster's workers share the client's software setup."""
    base = tmp_path_factory.mktemp("cluster")
    site, home, cwd, scratch = (base / n for n in ("site", "home", "worker-cwd", "worker-scratch"))
    for d in (home, cwd, scratch):
        d.mkdir()
    shutil.copytree(ROOT / "bayesfair", site / "bayesfair", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("BAYESFAIR_DATA", "XDG_CACHE_HOME", "PYTHONPATH")}
    env.update(HOME=str(home), PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1")
    address_file = base / "scheduler.json"
    logs = {"scheduler": base / "scheduler.log", "worker": base / "worker.log"}
    procs = []
    try:
        procs.append(_start(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                             "--scheduler-file", str(address_file)], cwd, env, logs["scheduler"]))
        deadline = time.monotonic() + START_TIMEOUT
        while not address_file.is_file():
            if procs[0].poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the scheduler did not start:\n{_tail(logs['scheduler'])}")
            time.sleep(0.1)
        time.sleep(0.2)  # the file is written in one go; let it land
        address = json.loads(address_file.read_text())["address"]
        procs.append(_start(["worker", "--scheduler-file", str(address_file), "--host", "127.0.0.1",
                             "--nthreads", "1", "--no-nanny", "--no-dashboard", "--local-directory", str(scratch),
                             "--name", "w1"], cwd, env, logs["worker"]))
        with distributed.Client(address, timeout=30) as client:
            try:
                client.wait_for_workers(1, timeout=START_TIMEOUT)
            except TimeoutError:
                pytest.fail(f"the worker did not register:\n{_tail(logs['worker'])}")
            where = client.run(lambda: (__import__("bayesfair").__file__, str(__import__("bayesfair").datasets
                                                                              .cache_dir()), os.getcwd()))
        [(worker_address, (package, data_dir, worker_cwd))] = where.items()
        yield {"address": address, "worker": worker_address, "package": Path(package), "data": Path(data_dir),
               "cwd": Path(worker_cwd), "home": home, "scratch": scratch, "site": site, "logs": logs}
    finally:
        _stop(procs)


def test_the_worker_cannot_find_the_data_or_the_files_by_itself(cluster):
    """The fixture's premise: the worker imports the copy and looks for data under the empty home."""
    assert cluster["package"].is_relative_to(cluster["site"]), cluster["package"]
    assert cluster["data"].is_relative_to(cluster["home"]) and not cluster["data"].exists(), cluster["data"]
    assert cluster["cwd"] != Path.cwd() and not list(cluster["cwd"].iterdir())
    assert cluster["worker"].startswith("tcp://127.0.0.1:")


@needs_yeast
def test_a_sweep_on_the_cluster_equals_the_local_run_bit_for_bit(cluster, tmp_path, monkeypatch, capsys):
    """One point on yeast (a registered data set, shipped) and one with a relative means_file (an
    instance file, shipped): the CLI on the cluster, then the same config locally without Dask."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BAYESFAIR_DATA", str(DATA))  # the client's data folder only
    Path("instances.csv").write_text("0.15,0.5,0.85\n0.3,0.45,0.6\n")  # run r plays row r
    envs = json.dumps([YEAST, {"name": "gaussian_arms", "means_file": "instances.csv"}])
    Path("sweep.toml").write_text(_config(f"environment = {_toml_list(envs)}\n"))
    assert cli.main(["simulate", "sweep.toml", "--scheduler", cluster["address"], "--out", "dask"]) == 0
    err = capsys.readouterr().err
    assert ("shipping to the workers: 1 instance file (instances.csv; 27 B) and 2 data files (yeast/yeast.arff, "
            "yeast/yeast.xml; 2.3 MiB)") in err, err
    assert cli.main(["simulate", "sweep.toml", "--out", "local", "-q"]) == 0

    remote, local = read_results("dask/cl.nc"), read_results("local/cl.nc")
    assert set(remote.data_vars) == set(local.data_vars) and remote.sizes == local.sizes
    for v in local.data_vars:
        if v != "seconds":  # the timings
            np.testing.assert_array_equal(remote[v].values, local[v].values, err_msg=v)
    # the config as written (the relative means_file, not the worker's copy), the same fingerprints;
    # only the output folders differ (--out)
    assert remote.attrs["sweep"] == local.attrs["sweep"]
    assert _without_output(remote.attrs["config"]) == _without_output(local.attrs["config"])
    configs = json.loads(remote.attrs["point_configs"])
    local_configs = json.loads(local.attrs["point_configs"])
    assert [_without_output(c) for c in configs] == [_without_output(c) for c in local_configs]
    assert configs[1]["environment"]["means_file"] == "instances.csv"
    assert configs[1]["inputs"]["environment"]["means_file"] == hashlib.sha256(
        Path("instances.csv").read_bytes()).hexdigest()
    for i in range(2):
        a, b = read_results(f"dask/cl.points/cl-00{i}.nc"), read_results(f"local/cl.points/cl-00{i}.nc")
        assert json.loads(a.attrs["config"])["fingerprint"] == json.loads(b.attrs["config"])["fingerprint"]
    # the two points differ (the sweep is not one study twice), and the worker read its own copies
    assert remote.sizes["arm"] == 14 and np.isnan(remote["mean"].isel(environment=1, arm=3)).all()
    copies = list(cluster["scratch"].rglob("bayesfair-inputs/data/yeast/yeast.arff"))
    assert len(copies) == 1 and copies[0].stat().st_size == bds.info("yeast").file("yeast.arff").size
    assert list(cluster["scratch"].rglob("bayesfair-inputs/files/*/instances.csv"))
    assert not cluster["data"].exists()  # nothing went to the worker's own data folder


def _without_output(config: str | dict) -> dict:
    config = json.loads(config) if isinstance(config, str) else dict(config)
    config.pop("output")
    return config


def _toml_list(json_list: str) -> str:
    """A JSON list of flat tables as a TOML array of inline tables."""
    items = json.loads(json_list)
    return "[" + ", ".join("{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in t.items()) + "}" for t in items) + "]"


@needs_yeast
def test_data_not_shipped_and_missing_on_the_worker_names_the_worker_the_folder_and_the_fix(
        cluster, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BAYESFAIR_DATA", str(DATA))
    Path("sweep.toml").write_text(_config('"merit.c" = [1.0]\n', extra='[data]\nship = "never"\n'))
    assert cli.main(["simulate", "sweep.toml", "--scheduler", cluster["address"], "--out", "out"]) == 2
    err = capsys.readouterr().err
    line = err[err.index("bayesfair: error:"):]
    host = socket.gethostname()
    assert line.startswith(f"bayesfair: error: sweep point 1 of 1 (merit.c = 1.0): on Dask worker {cluster['worker']} "
                           f"(host {host}), working directory {cluster['cwd']}, reading the data folder "
                           f"{cluster['data']} (the data sets were not shipped: [data] ship = \"never\"): "
                           f"dataset 'yeast': file 'yeast.arff' is not in the data folder {cluster['data']}"), line
    assert f"expected at: {cluster['data'] / 'yeast' / 'yeast.arff'}" in line
    assert "Fix: set [data] path in the config (or --set data.path=FOLDER) to a data folder that every worker " \
           "can read" in line and '[data] ship = "always"' in line
    assert "shipping to the workers" not in err and "no files shipped to the workers; the data sets were not " \
           "shipped" in err
    assert not (tmp_path / "out" / "cl.nc").exists()


@needs_yeast
def test_a_shared_data_path_is_read_by_the_worker(cluster, tmp_path, monkeypatch, capsys):
    """``[data] path``: nothing shipped, the worker reads the folder (here the same on both, as a
    shared file system would be); the results equal those of the shipped run's point."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BAYESFAIR_DATA", raising=False)
    shared = tmp_path / "shared-data"
    shutil.copytree(DATA / "yeast", shared / "yeast")
    os.symlink(shared, tmp_path / "rel")  # a relative path: made absolute on the client
    Path("sweep.toml").write_text(_config('"merit.c" = [2.0]\n', extra='[data]\npath = "rel"\n'))
    assert cli.main(["simulate", "sweep.toml", "--scheduler", cluster["address"], "--out", "out"]) == 0
    err = capsys.readouterr().err
    assert f"the config's [data] path is {tmp_path / 'rel'}" in err, err
    ds = read_results("out/cl.nc")
    assert json.loads(ds.attrs["point_configs"])[0]["data"] == {"path": str(tmp_path / "rel"), "ship": "auto"}
    assert not cluster["data"].exists()


# ---------------------------------------------------------------------------------------------
# the pieces, without a cluster


def test_data_folder_and_recording_hold_per_context(tmp_path, monkeypatch):
    monkeypatch.setenv("BAYESFAIR_DATA", str(tmp_path / "env"))
    assert bds.cache_dir() == tmp_path / "env"
    with bds.data_folder(tmp_path / "a") as a:
        assert a == bds.cache_dir() == tmp_path / "a"
        with bds.data_folder(None):
            assert bds.cache_dir() == tmp_path / "a"
    assert bds.cache_dir() == tmp_path / "env"
    if (DATA / "yeast" / "yeast.xml").is_file():
        with bds.data_folder(DATA), bds.recording() as reads:
            bds.path("yeast", "yeast.xml")
            bds.path("yeast", "yeast.xml")
        assert reads == [("yeast", "yeast.xml", DATA / "yeast" / "yeast.xml")]
        with bds.data_folder(DATA):
            bds.path("yeast", "yeast-test.arff")
        assert reads == [("yeast", "yeast.xml", DATA / "yeast" / "yeast.xml")]  # not recorded after the block


@needs_yeast
def test_a_shipped_copy_is_checked_against_the_registry_where_it_arrives(tmp_path):
    content = shipping.read_verified("yeast", "yeast.xml", DATA / "yeast" / "yeast.xml")
    dest = shipping.place(tmp_path, "yeast", "yeast.xml", content, "shipped to here")
    assert dest == tmp_path / "yeast" / "yeast.xml" and dest.read_bytes() == content
    damaged = content[:-1] + b"!"
    with pytest.raises(ChecksumError, match=r"the copy of file 'yeast.xml' shipped to Dask worker tcp://x:1 is not "
                                            r"the registered file \(checksum mismatch\)"):
        shipping.place(tmp_path / "other", "yeast", "yeast.xml", damaged, "shipped to Dask worker tcp://x:1")
    assert not (tmp_path / "other" / "yeast" / "yeast.xml").exists()
    dest.write_bytes(damaged)  # a damaged copy left from before is replaced
    assert shipping.place(tmp_path, "yeast", "yeast.xml", content, "here").read_bytes() == content


def test_named_files_finds_every_file_key():
    raw = {"environment": {"name": "x", "means_file": "a.npy"},
           "policies": {"P": {"name": "p", "posterior": {"name": "q", "prior_file": "b.csv"}}},
           "log": {"enabled": False}, "runs": 2}
    assert named_files(raw) == [(("environment", "means_file"), "a.npy"),
                                (("policies", "P", "posterior", "prior_file"), "b.csv")]


def _point(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.savetxt("inst.csv", [[0.2, 0.7], [0.4, 0.6]], delimiter=",")
    Path("sw.toml").write_text('name = "p"\nruns = 2\nhorizon = 50\nchunk_size = 25\ncheckpoints = [50]\n'
                               '[merit]\nname = "exponential"\nc = 1.0\n[environment]\nname = "bernoulli_arms"\n'
                               'means_file = "inst.csv"\n[policies.U]\nname = "uniform"\n[sweep]\n"seed" = [1]\n')
    return load_config("sw.toml")


def test_run_point_builds_from_the_shipped_copy_and_keeps_the_config_as_written(tmp_path, monkeypatch):
    sw = _point(tmp_path, monkeypatch)
    content = Path("inst.csv").read_bytes()
    item = {"key": ["environment", "means_file"], "path": "inst.csv", "name": "inst.csv",
            "sha256": hashlib.sha256(content).hexdigest(), "content": content}
    raw = task_config(sw.points[0])
    local = sw.points[0].run()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # the worker's folder: no inst.csv here
    ds = run_point(raw, {"files": [item], "data": [], "note": None})
    assert ds.attrs["config"] == local.attrs["config"]
    np.testing.assert_array_equal(ds["fairness_regret"].values, local["fairness_regret"].values)
    with pytest.raises(ConfigError, match=r"environment.means_file: the copy of 'inst.csv' shipped to this process "
                                          r"\(host .*\) is damaged \(sha256 [0-9a-f]{64}, expected"):
        run_point(raw, {"files": [{**item, "content": content + b"0"}], "data": [], "note": None})


def test_a_file_changed_after_loading_is_refused_before_shipping(tmp_path, monkeypatch):
    sw = _point(tmp_path, monkeypatch)
    Path("inst.csv").write_text("0.3,0.3\n0.3,0.3\n")
    with pytest.raises(ConfigError, match=r"environment.means_file: inst.csv changed since the config was loaded"):
        task_inputs(sw.points, sw.reads, client=None)


def test_the_worker_side_error_without_a_worker_names_this_process(tmp_path, monkeypatch):
    """run_point outside Dask (no worker): the data error still says where it ran and the fix."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BAYESFAIR_DATA", str(tmp_path / "nothing"))
    raw = json.loads(json.dumps({"runs": 2, "horizon": 10, "merit": {"name": "exponential", "c": 1.0},
                                 "environment": YEAST, "policies": {"U": {"name": "uniform"}}}))
    with pytest.raises(MissingFileError) as exc:
        run_point(raw, {"files": [], "data": [], "note": "the data sets were not shipped: [data] ship = \"never\""})
    text = str(exc.value)
    assert text.startswith(f"on this process (host {socket.gethostname()}), working directory {tmp_path}, reading "
                           f"the data folder {tmp_path / 'nothing'} (the data sets were not shipped")
    assert "Fix: set [data] path in the config" in text


def test_the_worker_side_error_for_a_data_path_names_it_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    raw = {"runs": 2, "horizon": 10, "merit": {"name": "exponential", "c": 1.0}, "environment": dict(YEAST),
           "policies": {"U": {"name": "uniform"}}, "data": {"path": str(tmp_path / "mnt" / "data")}}
    with pytest.raises(MissingFileError) as exc:
        run_point(raw, {"files": [], "data": [], "note": "the data sets were not shipped: the config's [data] path is "
                                                          f"{tmp_path / 'mnt' / 'data'}"})
    text = str(exc.value)
    assert f"reading the data folder {tmp_path / 'mnt' / 'data'} (the data sets were not shipped" in text
    assert (f"Fix: the config's [data] path {tmp_path / 'mnt' / 'data'} must hold the data at that same path on every "
            "worker") in text and '[data] ship = "always"' in text
