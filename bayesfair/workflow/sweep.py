"""Parameter sweeps: a grid over config values, run locally or on a Dask cluster, combined in one Dataset.

A config with a ``[sweep]`` table is a sweep::

    [sweep]
    "policies.BF-UCB.groups_beta" = [[0.2, 0.2], [0.3, 0.3], [0.4, 0.4]]
    "environment.n_arms" = [10, 20]

Every key is a dotted path into the config (the tables on the way must exist) and every value a
non-empty list; the cartesian product (first key slowest) gives the points, each one a complete
study validated on load (an error names the sweep key and the value). Point ``i`` is named
``<name>-<i:03d>`` and writes ``<output>/<name>.points/<name>-<i:03d>.nc``; the combined results
go to ``<output>/<name>.nc``: one xarray Dataset with one dimension per swept key, named by the key
(scalar values are the coordinates; lists are coordinates as their JSON text). Points whose
shapes differ (e.g. ``n_arms`` or ``horizon``) are aligned by an outer join (padding is NaN). The
attributes hold the base config (``config``), the sweep (``sweep``) and every point's config
(``point_configs``).

Where the points run
--------------------
Locally, one after the other (default; each point is resumable like a study). With a
``dask.distributed`` client (``bayesfair[dask]``), one task per point: the task gets the point's
plain config and what it reads (below), builds and runs the study on the worker and returns the
Dataset; the client writes each point's file as it arrives, so ``--resume`` skips the finished
points. :func:`dask_client` starts a ``LocalCluster`` or connects to ``--scheduler ADDRESS``. A
point's numbers do not depend on where it runs: keys come from the seed and the round, not from
the worker.

What the tasks carry
--------------------
Every file a point's config names and, when small enough or asked for, the data sets it reads,
by content, checked where they arrive (:mod:`bayesfair.workflow.tasks`); data not shipped is read
from the config's ``[data] path`` or the worker's own data folder.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bayesfair.core import _signals
from bayesfair.datasets import recording
from bayesfair.simulation import results as io
from bayesfair.simulation.results import json_default
from bayesfair.simulation.simulator import MemoryEstimate, StudyMemoryError, check_memory
from bayesfair.workflow.outputs import (
    OutputError,
    check_writable,
    output_folder,
    preflight,
    remove_leftover_temps,
    study_lock,
)
from bayesfair.workflow.persist import StudyInterrupted, describe_resume
from bayesfair.workflow.study import ConfigError, Study, StudyOutput, parse_config, set_path
from bayesfair.workflow.tasks import Read, run_point, task_config, task_inputs

__all__ = ["Sweep", "run_point", "combine", "dask_client", "check_scheduler_address", "close_dask", "coordinate",
           "MAX_POINTS", "CONNECT_TIMEOUT"]

MAX_POINTS = 10_000
#: Seconds :func:`dask_client` waits for a scheduler to answer (distributed's own default is 30).
CONNECT_TIMEOUT = 10.0
_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
_ADDRESS = re.compile(r"^(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://)?"
                      r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?):(?P<port>[0-9]{1,5})$")


def coordinate(value: Any) -> Any:
    """The coordinate label of a swept value: scalars as they are, anything else as JSON text."""
    if isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value, separators=(", ", ": "))


def combine(datasets: Sequence[Any], keys: Sequence[str], values: Sequence[Sequence[Any]],
            attrs: Mapping[str, Any] | None = None):
    """Combine point Datasets (in grid order, first key slowest) along one dimension per key.

    ``arm_group`` becomes a data variable (it may differ between points); attributes are replaced
    by ``attrs``.
    """
    import xarray as xr

    shape = [len(v) for v in values]
    prepared = []
    for i, ds in enumerate(datasets):
        idx = _unravel(i, shape)
        if "arm_group" in ds.coords:
            ds = ds.reset_coords("arm_group")
        ds = ds.drop_attrs() if hasattr(ds, "drop_attrs") else ds.assign_attrs({})
        ds = ds.expand_dims({key: [coordinate(v[j])] for key, v, j in zip(keys, values, idx, strict=True)})
        prepared.append(ds)

    def nest(level: int, offset: int) -> Any:
        if level == len(shape):
            return prepared[offset]
        stride = 1
        for n in shape[level + 1:]:
            stride *= n
        return [nest(level + 1, offset + j * stride) for j in range(shape[level])]

    out = xr.combine_nested(nest(0, 0), concat_dim=list(keys), join="outer", combine_attrs="drop",
                            data_vars="all", coords="different", compat="no_conflicts")
    return out.assign_attrs(dict(attrs or {}))


def _unravel(i: int, shape: Sequence[int]) -> list[int]:
    idx = []
    for n in reversed(shape):
        idx.append(i % n)
        i //= n
    return idx[::-1]


def check_scheduler_address(address: str) -> str:
    """``address`` if it has the form of a Dask scheduler address, ``[tcp://]HOST:PORT`` (also
    ``tls``, ``ws``, ``wss``, ``ucx``; IPv6 hosts in brackets; ``inproc://...``); else a ValueError
    saying what is expected. Checked before connecting: distributed's own errors come late
    (after its connect timeout) or name no address."""
    text = str(address).strip()
    if text.startswith("inproc://") and len(text) > len("inproc://"):
        return text
    m = _ADDRESS.match(text)
    problem = None
    if m is None:
        problem = "it is not of the form [tcp://]HOST:PORT"
    elif m.group("scheme") is not None and m.group("scheme").lower() not in _SCHEMES:
        problem = f"{m.group('scheme')!r} is not a Dask protocol ({', '.join(_SCHEMES)}, inproc)"
    elif not 1 <= int(m.group("port")) <= 65535:
        problem = f"port {m.group('port')} is outside 1-65535"
    if problem is not None:
        raise ValueError(f"--scheduler {address!r} is not a Dask scheduler address: {problem}; give the address "
                         "the scheduler prints, e.g. tcp://127.0.0.1:8786 (or use --dask for a local cluster)")
    return text


def dask_client(scheduler: str | None = None, *, n_workers: int = 2, processes: bool = False,
                timeout: float = CONNECT_TIMEOUT):
    """A ``dask.distributed`` Client: to ``scheduler`` if given, else on a new ``LocalCluster``.

    Parameters
    ----------
    scheduler : str, optional
        Address of a running scheduler (``tcp://host:8786``), checked by :func:`check_scheduler_address`.
    n_workers : int
        Workers of the LocalCluster (one thread each).
    processes : bool
        Run LocalCluster workers as processes (default False: threads in this process, which
        share the already-imported JAX; see docs/workflow.md).
    timeout : float
        Seconds to wait for the scheduler to answer (:data:`CONNECT_TIMEOUT`).

    Raises
    ------
    ImportError
        Without the ``dask`` extra.
    ValueError
        ``scheduler`` is not an address.
    ConnectionError
        No scheduler answers at ``scheduler`` within ``timeout`` seconds.
    """
    if scheduler:
        scheduler = check_scheduler_address(scheduler)
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ImportError("running sweeps on Dask needs the optional extra: pip install 'bayesfair[dask]'") from None
    if scheduler:
        try:
            return Client(scheduler, timeout=timeout)
        except (OSError, TimeoutError) as exc:
            raise ConnectionError(
                f"no Dask scheduler answered at {scheduler} within {timeout:g} s ({exc}): check that it runs "
                "(`dask scheduler` prints its address) and that host and port are right, or run on a local "
                "cluster with --dask") from None
    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=processes, dashboard_address=None)
    return Client(cluster)


def _quiet_logs() -> None:
    """Silence distributed's log in this process (its warnings and tracebacks about cancelled tasks)."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL)


def close_dask(client: Any, *, own_cluster: bool, interrupted: bool = False) -> None:
    """Close ``client`` (and its LocalCluster when ``own_cluster``). After an interrupt the
    workers' own reports of the cancelled tasks (distributed's log warnings and tracebacks) are
    silenced: the command's one line says what happened."""
    if interrupted:
        _quiet_logs()
    cluster = getattr(client, "cluster", None)
    client.close()
    if cluster is not None and own_cluster:
        cluster.close()


@contextlib.contextmanager
def _naming(where: str) -> Iterator[None]:
    """Re-raise an error of a sweep point naming the point (:func:`_point_error`); an interrupt
    passes as it is."""
    try:
        yield
    except StudyInterrupted:
        raise
    except Exception as exc:  # noqa: BLE001 - re-raised, naming the point
        err = _point_error(exc, where)
        if err is exc:
            raise
        raise err from exc


def _point_error(exc: Exception, where: str) -> Exception:
    """``exc`` of a sweep point, its message naming the point (``where``): the same exception
    type, so the command's exit code stays what the failure is; a note where it cannot be rebuilt."""
    if str(exc).startswith("sweep point"):
        return exc
    if isinstance(exc, ConfigError):
        return ConfigError(exc.path, f"{exc.message} (in {where})")
    text = f"{where}: {exc}"
    try:
        new = type(exc)(text)
    except Exception:  # noqa: BLE001 - a constructor that takes other arguments
        new = None
    if new is None or str(new) != text:
        exc.add_note(where)
        return exc
    return new


@dataclass(eq=False)
class Sweep:
    """A grid of studies from one config (see the module docstring).

    Attributes
    ----------
    raw : dict
        The config without its ``[sweep]`` table.
    keys : list of str
        Swept key paths.
    values : list of list
        Values of each key.
    points : list of Study
        One validated study per grid point (first key slowest).
    name, output
        The sweep's name and output folder.
    """

    raw: dict[str, Any]
    keys: list[str]
    values: list[list[Any]]
    points: list[Study]
    name: str
    output: Path
    source: Path | None = None
    #: Per point, ``(dataset, file, local path)`` of the registered data files it read when it was built.
    reads: list[list[Read]] = field(default_factory=list)

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any], source: str | os.PathLike | None = None, *,
                 check_memory: bool = True) -> Sweep:
        """Validate a config with a ``[sweep]`` table and expand it into studies (``check_memory``:
        as for :func:`bayesfair.workflow.study.parse_config`, for every point)."""
        raw = copy.deepcopy(dict(raw))
        table = raw.pop("sweep")
        if not isinstance(table, dict) or not table:
            raise ConfigError("sweep", "expected a table of \"key.path\" = [values, ...]")
        keys, values = [], []
        for key, vals in table.items():
            where = f"sweep.{json.dumps(key)}"
            if not isinstance(vals, list) or not vals:
                raise ConfigError(where, f"wrong type: expected a non-empty list of values, got {vals!r}")
            if key.split(".")[0] in ("sweep", "name", "output"):
                raise ConfigError(where, "cannot sweep over name, output or sweep")
            labels = [coordinate(v) for v in vals]
            # 4 and 4.0 are one value (the same study twice, and a repeated coordinate)
            same = [float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else repr(v) for v in labels]
            if len(set(same)) != len(labels):
                raise ConfigError(where, f"values must be distinct, got {vals!r}")
            keys.append(key)
            values.append(vals)
        n = 1
        for v in values:
            n *= len(v)
        if n > MAX_POINTS:
            raise ConfigError("sweep", f"{n:,} points is more than {MAX_POINTS:,}")
        # the sweep's own name/output come from the base config
        base = parse_config(_first_point(raw, keys, values), source, check_memory=False)  # the points are checked
        name, output = base.name, base.output
        points, reads = [], []
        for i, combo in enumerate(itertools.product(*values)):
            point = copy.deepcopy(raw)
            for key, v in zip(keys, combo, strict=True):
                set_path(point, key, copy.deepcopy(v), where=f"sweep.{json.dumps(key)}")
            point["name"] = f"{name}-{i:03d}"
            point["output"] = str(output / f"{name}.points")
            try:
                with recording() as read:  # the data files it reads: what a Dask worker is shipped
                    points.append(parse_config(point, source, check_memory=check_memory))
            except ConfigError as exc:
                at = ", ".join(f"{k} = {coordinate(v)}" for k, v in zip(keys, combo, strict=True))
                raise ConfigError(exc.path, f"{exc.message} (in the sweep point {at})") from None
            reads.append(read)
        return cls(raw, keys, values, points, name, output, Path(source) if source is not None else None, reads)

    @property
    def config(self) -> dict[str, Any]:
        """The first point's normalized config with the sweep's name and output."""
        return {**self.points[0].config, "name": self.name, "output": str(self.output),
                "sweep": {k: v for k, v in zip(self.keys, self.values, strict=True)}}

    def check_memory(self, concurrent: int) -> None:
        """Refuse (:class:`ConfigError`, key ``runs``) a sweep whose ``concurrent`` largest points,
        run at once on this machine (a LocalCluster's workers), cannot fit in its available memory."""
        estimates = sorted((p.memory_estimate(resumable=False) for p in self.points), key=lambda e: -e.peak)
        top = estimates[:max(1, concurrent)]
        together = MemoryEstimate(sum(e.peak for e in top), top[0].run_terms, top[0].result_terms, top[0].per_run)
        try:
            check_memory(together, f"the sweep {self.name!r} ({len(top)} points at once, one per Dask worker; the "
                                   "terms below are its largest point's)")
        except StudyMemoryError as exc:
            raise ConfigError("runs", f"{exc}; or use fewer --workers") from None

    def coords(self) -> list[dict[str, Any]]:
        """The swept values of every point, ``[{key: value}]`` in grid order."""
        return [dict(zip(self.keys, combo, strict=True)) for combo in itertools.product(*self.values)]

    def paths(self, out: str | os.PathLike | None = None) -> dict[str, Path]:
        """``results`` (combined) and ``points`` (folder of point files)."""
        folder = output_folder(out) if out is not None else self.output
        return {"results": folder / f"{self.name}.nc", "points": folder / f"{self.name}.points"}

    def fingerprint(self) -> str:
        """Hash of the swept keys and every point's fingerprint (what determines the combined numbers)."""
        import hashlib

        text = json.dumps({"keys": self.keys, "points": [p.fingerprint(log=False) for p in self.points]})
        return hashlib.sha256(text.encode()).hexdigest()

    def _attrs(self, datasets: Sequence[Any]) -> dict[str, Any]:
        first = dict(datasets[0].attrs)
        first.pop("config", None)
        config = {**self.config, "fingerprint": self.fingerprint()}
        return {**first, "config": json.dumps(config, default=json_default),
                "sweep": json.dumps({"keys": self.keys, "values": self.values}, default=json_default),
                "point_configs": json.dumps([p.config for p in self.points], default=json_default)}

    def run(self, progress: bool | Callable[[dict], None] = False, *, client: Any = None):
        """Run every point (on ``client`` if given) and return the combined Dataset; nothing is written."""
        if client is None:
            datasets = []
            for i, p in enumerate(self.points):
                with _naming(f"sweep point {i + 1} of {len(self.points)} ({_label(self.keys, self.coords()[i])})"):
                    datasets.append(p.run(progress=progress))
        else:
            inputs = task_inputs(self.points, self.reads, client)
            futures = [client.submit(run_point, task_config(p), inputs[i], pure=False)
                       for i, p in enumerate(self.points)]
            datasets = []
            for i, fut in enumerate(futures):
                with _naming(f"sweep point {i + 1} of {len(self.points)} ({_label(self.keys, self.coords()[i])})"):
                    datasets.append(fut.result())
        return combine(datasets, self.keys, self.values, self._attrs(datasets))

    def execute(self, out: str | os.PathLike | None = None, *, progress: bool | Callable[[dict], None] = False,
                resume: bool = False, restart: bool = False, overwrite: bool = False, client: Any = None,
                stop_after_chunks: int | None = None, report: Callable[[str], None] | None = None) -> Any:
        """Run the points, write each point's file and the combined results; returns the StudyOutput-like
        ``(results, None, dataset, resumed)``.

        With ``resume``, points whose file exists and matches are not run again (and locally a
        point interrupted half-way continues from its resume file). ``restart`` and ``overwrite``
        are as for :meth:`bayesfair.workflow.config.Study.execute`, for the combined file and every point;
        the output folders are checked before any point runs. The whole call holds the sweep's lock
        in its folder (:func:`bayesfair.workflow.outputs.study_lock`; each point run here also holds
        its own), and temp files that interrupted writes of the sweep left are removed first.
        """
        paths = self.paths(out)
        with study_lock(check_writable(paths["results"].parent), self.name):
            return self._execute_locked(paths, progress, resume, restart, overwrite, client, stop_after_chunks,
                                        report or (lambda msg: None))

    def _execute_locked(self, paths, progress, resume, restart, overwrite, client, stop_after_chunks, say) -> Any:
        """:meth:`execute`'s work, under the sweep's lock."""
        folder = paths["points"]
        point_files = [p.paths(folder)[kind] for p in self.points for kind in ("results", "resume")]
        remove_leftover_temps([paths["results"], *point_files], say)
        pre = preflight(results=paths["results"], resume_file=None, fingerprint=self.fingerprint(),
                        config={**self.config, "fingerprint": self.fingerprint()}, resume=False, overwrite=overwrite)
        for note in pre.notes:
            say(note)
        for i, p in enumerate(self.points):  # refuse before any point runs, not at point i
            pp = p.paths(folder)
            if resume and _finished(pp["results"], p.fingerprint(log=False)) is not None:
                continue
            try:
                preflight(results=pp["results"], resume_file=pp["resume"], fingerprint=p.fingerprint(log=False),
                          config=p.config, resume=resume, restart=restart, overwrite=overwrite,
                          read_resume=describe_resume)
            except OutputError as exc:
                raise OutputError(f"sweep point {i + 1} ({_label(self.keys, self.coords()[i])}): {exc}") from None
        done: dict[int, Any] = {}
        if resume:
            for i, p in enumerate(self.points):
                ds = _finished(p.paths(folder)["results"], p.fingerprint(log=False))
                if ds is not None:
                    done[i] = ds
            if done:
                say(f"resume: {len(done)} of {len(self.points)} points already done")
        todo = [i for i in range(len(self.points)) if i not in done]
        t0 = time.perf_counter()
        n_points = len(self.points)
        where = lambda i: f"sweep point {i + 1} of {n_points} ({_label(self.keys, self.coords()[i])})"  # noqa: E731
        if client is None:
            for i in todo:
                p = self.points[i]
                say(f"point {i + 1}/{n_points}: " + _label(self.keys, self.coords()[i]))
                with _naming(where(i)):
                    res = p.execute(folder, progress=progress, resume=resume, restart=restart, overwrite=overwrite,
                                    log=False, stop_after_chunks=stop_after_chunks, say=say)
                done[i] = res.dataset
        else:
            from distributed import as_completed

            inputs = task_inputs(self.points, self.reads, client, say) if todo else []
            futures = {client.submit(run_point, task_config(self.points[i]), inputs[i], pure=False): i for i in todo}
            try:
                finished = as_completed(futures)
                for n, fut in enumerate(finished, start=1):
                    i = futures[fut]
                    try:
                        with _naming(where(i)):
                            ds = fut.result()
                    except Exception:
                        client.cancel([f for f in futures if f is not fut])  # the others are not waited for
                        raise
                    self._write_point(io, i, ds, folder, done, n, len(todo), t0, say)
            except KeyboardInterrupt:  # stop the points in flight at their next chunk, drop the rest
                _signals.request_stop()
                if getattr(client, "cluster", None) is not None:  # our LocalCluster: its workers' logs too
                    _quiet_logs()
                    with contextlib.suppress(Exception):
                        client.run(_quiet_logs)
                client.cancel(list(futures))
                raise
        datasets = [done[i] for i in range(len(self.points))]
        ds = combine(datasets, self.keys, self.values, self._attrs(datasets))
        with _local_locks():
            io.write_results(ds, paths["results"])
        pre.remove_stale(say)
        return StudyOutput(paths["results"], None, ds, not todo)

    def _write_point(self, io: Any, i: int, ds: Any, folder: Path, done: dict[int, Any], n: int, n_todo: int,
                     t0: float, say: Callable[[str], None]) -> None:
        """A point's Dataset from a Dask worker: written as it arrives (``--resume`` then skips it)."""
        point_paths = self.points[i].paths(folder)
        with _local_locks():
            io.write_results(ds, point_paths["results"])
        # the point ran whole on a worker: saved progress of an earlier local run is obsolete
        # now (left behind, the next run would be refused as an interrupted point)
        point_paths["resume"].unlink(missing_ok=True)
        done[i] = ds
        elapsed = time.perf_counter() - t0
        eta = elapsed / n * (n_todo - n)
        say(f"point {i + 1}/{len(self.points)} done ({n}/{n_todo} this run, {elapsed:.0f} s, "
            f"ETA {eta:.0f} s): " + _label(self.keys, self.coords()[i]))


@contextlib.contextmanager
def _local_locks() -> Iterator[None]:
    """Write results with this process's locks while a Dask client is the default scheduler:
    xarray otherwise takes a distributed lock named by the in-memory file object, which a remote
    scheduler never knows ("Semaphore or Lock ... not known")."""
    try:
        import dask  # present whenever a client is (the dask extra)
    except ImportError:
        yield
        return
    with dask.config.set(scheduler="synchronous"):
        yield


def _label(keys: Sequence[str], coords: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} = {coordinate(coords[k])}" for k in keys)


def _first_point(raw: Mapping[str, Any], keys: Sequence[str], values: Sequence[Sequence[Any]]) -> dict[str, Any]:
    point = copy.deepcopy(dict(raw))
    for key, v in zip(keys, values, strict=True):
        set_path(point, key, copy.deepcopy(v[0]), where=f"sweep.{json.dumps(key)}")
    return point


def _finished(path: Path, fingerprint: str) -> Any:
    """The results at ``path`` if they exist and belong to the study with ``fingerprint``."""
    if not path.is_file():
        return None
    try:
        ds = io.read_results(path)
    except (OSError, ValueError):
        return None
    try:
        fp = json.loads(ds.attrs.get("config", "{}")).get("fingerprint")
    except json.JSONDecodeError:
        return None
    return ds if fp == fingerprint else None
