"""What a sweep point's Dask task carries, and how a worker runs it (:mod:`bayesfair.workflow.sweep`).

A worker may be another machine, with another working directory and no data folder. So every
file a point's config names (a string value of a key ending in ``_file``: ``means_file``,
``theta_file``, ``beta_file``, ``psi_file``; :func:`named_files`) is read and checksummed on the
client and travels by content; the worker checks the sha256, writes the copy into its own local
directory and builds the study from it, the study's config keeping the path as written (so its
results and fingerprint are the client's). The registered data files a point reads (recorded by
:func:`bayesfair.datasets.recording` while the client built it) travel the same way when the
config's ``[data]`` table says so (``ship``: ``"auto"``, the default, when no ``[data] path`` is
set and the sweep's data files total at most :data:`bayesfair.datasets.shipping.SHIP_LIMIT`, 64
MiB; ``"always"``; ``"never"``); each worker checks them against the registry and reads its copy.
Data not shipped is read on the worker from ``[data] path`` (a folder every worker sees at that
path, e.g. a shared file system) or else from the worker's own data folder; a file missing there
is an error naming the worker (address and host), the folder it looked in and the fix.

Contents travel as Dask data (``Client.scatter``, one key per sha256, so a file that many points
read is sent once to each worker that runs them), not inside the task graph.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import os
import socket
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bayesfair.core._atomic import atomic_write
from bayesfair.core._memory import format_bytes
from bayesfair.datasets import DatasetError, cache_dir, data_folder, shipping
from bayesfair.workflow.study import ConfigError, Study, parse_config

__all__ = ["named_files", "run_point", "task_config", "shipping_plan", "task_inputs", "Read"]

#: ``(dataset, file, local path)`` of a registered data file a point read (:func:`bayesfair.datasets.recording`).
Read = tuple[str, str, Path]


def named_files(raw: Mapping[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    """``(key path, file)`` of every file a config names: the string values of keys ending in
    ``_file`` (``means_file``, ``theta_file``, ``beta_file``, ``psi_file``), at any depth."""
    found: list[tuple[tuple[str | int, ...], str]] = []

    def walk(obj: Any, at: tuple[str | int, ...]) -> None:
        items = obj.items() if isinstance(obj, Mapping) else enumerate(obj) if isinstance(obj, list) else ()
        for key, value in items:
            if isinstance(key, str) and key.endswith("_file") and isinstance(value, str):
                found.append(((*at, key), value))
            else:
                walk(value, (*at, key))

    walk(raw, ())
    return found


def run_point(raw: Mapping[str, Any], inputs: Mapping[str, Any] | None = None) -> Any:
    """Build and run one point's study from its plain config (the Dask task); returns the Dataset.

    ``inputs`` is what :meth:`bayesfair.workflow.sweep.Sweep.execute` ships with the task (the module docstring): the
    contents of the files the config names (``files``: key path, path as written, sha256,
    content) and of the data files the point reads (``data``: dataset, file, content), and
    ``note``, why data was not shipped. Each content is checked (the instance file's sha256, the
    data file's registry checksum) and written into this worker's local directory; the study is
    built from those copies, its config keeping the paths as written. A data file missing on the
    worker raises its :class:`~bayesfair.datasets.DatasetError` naming the worker, the folder it
    looked in and the fix.
    """
    # importing this module imported the bayesfair package first, which set up the host devices
    if inputs is None:
        return parse_config(raw).run(progress=False)
    here, scratch = _this_worker()
    raw = copy.deepcopy(dict(raw))
    restore: list[tuple[tuple[str | int, ...], Any]] = []
    for item in inputs["files"]:
        key = tuple(item["key"])
        restore.append((key, item["path"]))
        _set_in(raw, key, str(_place_file(item, scratch / "files", here)))
    folder = None
    if inputs["data"]:
        folder = scratch / "data"
        for item in inputs["data"]:
            shipping.place(folder, item["dataset"], item["file"], item["content"], f"shipped to {here}")
        table = raw.get("data")
        if isinstance(table, dict) and table.get("path") is not None:  # the shipped copies are read, not it
            restore.append((("data", "path"), table.pop("path")))
    table = raw.get("data") if isinstance(raw.get("data"), dict) else {}
    with data_folder(folder or table.get("path")):  # the folder the study reads (for the message)
        looked = cache_dir()
    with data_folder(folder):
        try:
            study = parse_config(raw)
        except DatasetError as exc:
            raise _worker_data_error(exc, here, looked, raw, inputs["note"]) from None
    for key, value in restore:  # the config as the client wrote it: same results attributes, same fingerprint
        _set_in(study.raw, key, value)
        with contextlib.suppress(KeyError, IndexError, TypeError):
            _set_in(study.config, key, value, create=False)
    return study.run(progress=False)


def _this_worker() -> tuple[str, Path]:
    """Where this task runs, for messages ("Dask worker tcp://10.0.0.7:40123 (host node7)"), and a
    scratch folder there for what the task was shipped (in the worker's local directory)."""
    host = socket.gethostname()
    try:
        from distributed import get_worker  # optional extra; only here, where a task runs
        worker = get_worker()
    except (ImportError, ValueError):  # called outside a Dask worker
        return f"this process (host {host})", Path(tempfile.gettempdir()) / "bayesfair-sweep-inputs"
    return f"Dask worker {worker.address} (host {host})", Path(worker.local_directory) / "bayesfair-inputs"


def _set_in(obj: Any, key: Sequence[str | int], value: Any, *, create: bool = True) -> None:
    for part in key[:-1]:
        obj = obj[part]
    if not create and isinstance(obj, dict) and key[-1] not in obj:
        raise KeyError(key[-1])
    obj[key[-1]] = value


def _place_file(item: Mapping[str, Any], folder: Path, here: str) -> Path:
    """A shipped instance file, checked against its sha256 and written as ``<folder>/<sha256>/<name>``
    (the name keeps the suffix that says how it is read); a whole copy already there is kept."""
    content, expected = item["content"], item["sha256"]
    actual = hashlib.sha256(content).hexdigest()
    if actual != expected:
        raise ConfigError(".".join(map(str, item["key"])),
                          f"the copy of {item['path']!r} shipped to {here} is damaged (sha256 {actual}, expected "
                          f"{expected}, as the client read it): nothing was run; run the sweep again")
    dest = folder / expected / item["name"]
    if not (dest.is_file() and hashlib.sha256(dest.read_bytes()).hexdigest() == expected):
        dest.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(dest) as tmp, open(tmp, "wb") as out:
            out.write(content)
    return dest


def _worker_data_error(exc: DatasetError, here: str, looked: Path, raw: Mapping[str, Any],
                       note: str | None) -> DatasetError:
    """``exc`` (a data file missing or corrupt where a worker read it) as the same type, naming
    the worker, its working directory, the folder it looked in and the fix."""
    table = raw.get("data") if isinstance(raw.get("data"), dict) else {}
    if table.get("path") is not None:
        fix = (f"the config's [data] path {table['path']} must hold the data at that same path on every worker "
               "(a shared file system mounted there); or ship the data to the workers instead ([data] ship = "
               "\"always\")")
    else:
        fix = ("set [data] path in the config (or --set data.path=FOLDER) to a data folder that every worker can "
               "read at that same path (laid out as FOLDER/<dataset>/<file>), or ship the data to the workers "
               f"([data] ship = \"always\"; \"auto\" ships up to {format_bytes(shipping.SHIP_LIMIT)})")
    why = f" ({note})" if note else ""
    text = (f"on {here}, working directory {os.getcwd()}, reading the data folder {looked}{why}: {exc}\n"
            f"Fix: {fix}.")
    try:
        return type(exc)(text)
    except Exception:  # noqa: BLE001 - a subclass that takes other arguments
        return DatasetError(text)


def task_config(point: Study) -> dict[str, Any]:
    """The plain config a point's Dask task builds its study from: the point's config as written,
    its ``[data] path`` made absolute (as the study normalized it)."""
    raw = copy.deepcopy(point.raw)
    path = point.config.get("data", {}).get("path")
    if path is not None:
        raw["data"]["path"] = path
    return raw

def shipping_plan(points: Sequence[Study], reads: Sequence[Sequence[Read]]) -> tuple[list[bool], str | None]:
    """Which points' data files (``reads``: per point, what it read when it was built) go to the
    workers with their tasks (``[data] ship``; the module docstring), and why they are not (None
    when they are, or when no point reads any)."""
    tables = [p.config.get("data", {}) for p in points]
    auto = {(n, f): path for point_reads, t in zip(reads, tables, strict=True)
            if t.get("ship", "auto") == "auto" and t.get("path") is None for n, f, path in point_reads}
    auto_bytes = sum(path.stat().st_size for path in auto.values())
    plan = []
    for point_reads, t in zip(reads, tables, strict=True):
        mode = t.get("ship", "auto")
        plan.append(bool(point_reads) and (mode == "always" or (mode == "auto" and t.get("path") is None
                                                          and auto_bytes <= shipping.SHIP_LIMIT)))
    modes = {t.get("ship", "auto") for t in tables}
    paths = sorted({t["path"] for t in tables if t.get("path") is not None})
    if any(plan) or not any(reads):
        note = None
    elif "never" in modes:
        note = "the data sets were not shipped: [data] ship = \"never\""
    elif paths:
        note = f"the data sets were not shipped: the config's [data] path is {', '.join(paths)}"
    else:
        note = (f"the data sets were not shipped: their {format_bytes(auto_bytes)} are over the "
                f"{format_bytes(shipping.SHIP_LIMIT)} a sweep ships by itself")
    return plan, note

def task_inputs(points: Sequence[Study], reads: Sequence[Sequence[Read]], client: Any,
                say: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """What each point's Dask task carries besides its config (:func:`run_point`'s ``inputs``):
    the files its config names and, as :func:`shipping_plan` says, the data files it reads, each
    read and checked here and scattered to the cluster by ``client`` once per content (keyed by
    sha256); ``say`` gets one line saying what is sent.

    Raises
    ------
    ConfigError
        A file the config names changed since the config was loaded (its sha256 is no longer
        the one in the point's ``inputs``).
    """
    plan, note = shipping_plan(points, reads)
    contents: dict[str, bytes] = {}
    per_point = []
    for i, p in enumerate(points):
        files = []
        for key, name in named_files(p.raw):
            file = Path(name)
            if not file.is_file():  # not a file here: the point is refused on the worker as it would be here
                continue
            content = file.read_bytes()
            sha = hashlib.sha256(content).hexdigest()
            loaded = p.config.get("inputs", {}).get(str(key[0]), {}).get(str(key[-1]), sha)
            if sha != loaded:
                raise ConfigError(".".join(map(str, key)), f"{name} changed since the config was loaded (sha256 "
                                  f"{sha}, was {loaded}): load the config again")
            contents[sha] = content
            files.append({"key": list(key), "path": name, "name": file.name, "sha256": sha})
        data = []
        if plan[i]:
            for dataset, fname, path in reads[i]:
                content = shipping.read_verified(dataset, fname, path)
                sha = hashlib.sha256(content).hexdigest()
                contents[sha] = content
                data.append({"dataset": dataset, "file": fname, "sha256": sha})
        per_point.append({"files": files, "data": data, "note": note})
    line = _shipping_line(per_point, contents, note)
    if say is not None and line is not None:
        say(line)
    if contents:
        futures = client.scatter({f"bayesfair-file-{sha}": c for sha, c in contents.items()})
        for entry in per_point:
            for item in [*entry["files"], *entry["data"]]:
                item["content"] = futures[f"bayesfair-file-{item['sha256']}"]
    return per_point


def _shipping_line(per_point: Sequence[Mapping[str, Any]], contents: Mapping[str, bytes],
                   note: str | None) -> str | None:
    """What the tasks carry, in one line for the command's report (None: nothing, and no data either)."""
    files = {i["sha256"]: i["path"] for e in per_point for i in e["files"]}
    data = {i["sha256"]: f"{i['dataset']}/{i['file']}" for e in per_point for i in e["data"]}
    size = lambda shas: format_bytes(sum(len(contents[s]) for s in shas))  # noqa: E731
    parts = []
    if files:
        parts.append(f"{len(files)} instance file{'s' * (len(files) > 1)} ({', '.join(sorted(set(files.values())))}; "
                     f"{size(files)})")
    if data:
        parts.append(f"{len(data)} data file{'s' * (len(data) > 1)} ({', '.join(sorted(data.values()))}; {size(data)})")
    if not parts and note is None:
        return None
    line = "shipping to the workers: " + " and ".join(parts) if parts else "no files shipped to the workers"
    if note is not None:
        line += f"; {note}, so each worker reads them from the [data] path or its own data folder"
    return line
