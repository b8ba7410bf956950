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
plain config, builds and runs the study on the worker and returns the Dataset; the client writes
each point's file as it arrives, so ``--resume`` skips the finished points. :func:`dask_client`
starts a ``LocalCluster`` or connects to ``--scheduler ADDRESS``. A point's numbers do not depend
on where it runs: keys come from the seed and the round, not from the worker.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bayesfair.workflow.outputs import output_folder
from bayesfair.workflow.study import ConfigError, Study, parse_config, set_path

__all__ = ["Sweep", "run_point", "combine", "dask_client", "coordinate", "MAX_POINTS"]

MAX_POINTS = 10_000


def coordinate(value: Any) -> Any:
    """The coordinate label of a swept value: scalars as they are, anything else as JSON text."""
    if isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value, separators=(", ", ": "))


def run_point(raw: Mapping[str, Any]) -> Any:
    """Build and run one point's study from its plain config (the Dask task); returns the Dataset."""
    # importing this module imported the bayesfair package first, which set up the host devices
    return parse_config(raw).run(progress=False)


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


def dask_client(scheduler: str | None = None, *, n_workers: int = 2, processes: bool = False):
    """A ``dask.distributed`` Client: to ``scheduler`` if given, else on a new ``LocalCluster``.

    Parameters
    ----------
    scheduler : str, optional
        Address of a running scheduler (``tcp://host:8786``).
    n_workers : int
        Workers of the LocalCluster (one thread each).
    processes : bool
        Run LocalCluster workers as processes (default False: threads in this process, which
        share the already-imported JAX; see docs/workflow.md).
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ImportError("running sweeps on Dask needs the optional extra: pip install 'bayesfair[dask]'") from None
    if scheduler:
        return Client(scheduler)
    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=processes, dashboard_address=None)
    return Client(cluster)


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

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any], source: str | os.PathLike | None = None) -> Sweep:
        """Validate a config with a ``[sweep]`` table and expand it into studies."""
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
        base = parse_config(_first_point(raw, keys, values), source)
        name, output = base.name, base.output
        points = []
        for i, combo in enumerate(itertools.product(*values)):
            point = copy.deepcopy(raw)
            for key, v in zip(keys, combo, strict=True):
                set_path(point, key, copy.deepcopy(v), where=f"sweep.{json.dumps(key)}")
            point["name"] = f"{name}-{i:03d}"
            point["output"] = str(output / f"{name}.points")
            try:
                points.append(parse_config(point, source))
            except ConfigError as exc:
                at = ", ".join(f"{k} = {coordinate(v)}" for k, v in zip(keys, combo, strict=True))
                raise ConfigError(exc.path, f"{exc.message} (in the sweep point {at})") from None
        return cls(raw, keys, values, points, name, output, Path(source) if source is not None else None)

    @property
    def config(self) -> dict[str, Any]:
        """The first point's normalized config with the sweep's name and output."""
        return {**self.points[0].config, "name": self.name, "output": str(self.output),
                "sweep": {k: v for k, v in zip(self.keys, self.values, strict=True)}}

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
        from bayesfair.simulation.results import json_default

        first = dict(datasets[0].attrs)
        first.pop("config", None)
        config = {**self.config, "fingerprint": self.fingerprint()}
        return {**first, "config": json.dumps(config, default=json_default),
                "sweep": json.dumps({"keys": self.keys, "values": self.values}, default=json_default),
                "point_configs": json.dumps([p.config for p in self.points], default=json_default)}

    def run(self, progress: bool | Callable[[dict], None] = False, *, client: Any = None):
        """Run every point (on ``client`` if given) and return the combined Dataset; nothing is written."""
        if client is None:
            datasets = [p.run(progress=progress) for p in self.points]
        else:
            futures = [client.submit(run_point, p.raw, pure=False) for p in self.points]
            datasets = client.gather(futures)
        return combine(datasets, self.keys, self.values, self._attrs(datasets))

    def execute(self, out: str | os.PathLike | None = None, *, progress: bool | Callable[[dict], None] = False,
                resume: bool = False, restart: bool = False, overwrite: bool = False, client: Any = None,
                stop_after_chunks: int | None = None, report: Callable[[str], None] | None = None) -> Any:
        """Run the points, write each point's file and the combined results; returns the StudyOutput-like
        ``(results, None, dataset, resumed)``.

        With ``resume``, points whose file exists and matches are not run again (and locally a
        point interrupted half-way continues from its resume file). ``restart`` and ``overwrite``
        are as for :meth:`bayesfair.workflow.config.Study.execute`, for the combined file and every point;
        the output folders are checked before any point runs.
        """
        from bayesfair.simulation import results as io
        from bayesfair.workflow.outputs import OutputError, preflight
        from bayesfair.workflow.persist import describe_resume
        from bayesfair.workflow.study import StudyOutput

        say = report or (lambda msg: None)
        paths = self.paths(out)
        folder = paths["points"]
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
        if client is None:
            for i in todo:
                p = self.points[i]
                say(f"point {i + 1}/{len(self.points)}: " + _label(self.keys, self.coords()[i]))
                res = p.execute(folder, progress=progress, resume=resume, restart=restart, overwrite=overwrite,
                                log=False, stop_after_chunks=stop_after_chunks, say=say)
                done[i] = res.dataset
        else:
            from distributed import as_completed

            futures = {client.submit(run_point, self.points[i].raw, pure=False): i for i in todo}
            for n, fut in enumerate(as_completed(futures), start=1):
                i = futures[fut]
                ds = fut.result()
                point_paths = self.points[i].paths(folder)
                io.write_results(ds, point_paths["results"])
                # the point ran whole on a worker: saved progress of an earlier local run is obsolete
                # now (left behind, the next run would be refused as an interrupted point)
                point_paths["resume"].unlink(missing_ok=True)
                done[i] = ds
                elapsed = time.perf_counter() - t0
                eta = elapsed / n * (len(todo) - n)
                say(f"point {i + 1}/{len(self.points)} done ({n}/{len(todo)} this run, {elapsed:.0f} s, "
                    f"ETA {eta:.0f} s): " + _label(self.keys, self.coords()[i]))
        datasets = [done[i] for i in range(len(self.points))]
        ds = combine(datasets, self.keys, self.values, self._attrs(datasets))
        io.write_results(ds, paths["results"])
        pre.remove_stale(say)
        return StudyOutput(paths["results"], None, ds, not todo)


def _label(keys: Sequence[str], coords: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} = {coordinate(coords[k])}" for k in keys)


def _first_point(raw: Mapping[str, Any], keys: Sequence[str], values: Sequence[Sequence[Any]]) -> dict[str, Any]:
    point = copy.deepcopy(dict(raw))
    for key, v in zip(keys, values, strict=True):
        set_path(point, key, copy.deepcopy(v[0]), where=f"sweep.{json.dumps(key)}")
    return point


def _finished(path: Path, fingerprint: str) -> Any:
    """The results at ``path`` if they exist and belong to the study with ``fingerprint``."""
    from bayesfair.simulation import results as io

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
