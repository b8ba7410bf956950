"""Studies: a validated config and the objects built from it (:class:`Study`), parsed from a
config mapping by :func:`parse_config`.

The config keys are described in :mod:`bayesfair.workflow.config` (which also reads TOML files and
dispatches sweeps, :func:`bayesfair.workflow.config.load_config`); this module knows nothing of sweeps,
so :mod:`bayesfair.workflow.sweep` builds its points from it without an import cycle.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

import annotated_types as at
import numpy as np

from bayesfair.core._atomic import WriteError
from bayesfair.core._validate import MAX_HORIZON, MAX_RUNS, MAX_SEED
from bayesfair.core.compat import IncompatibleError, check_policy_fits
from bayesfair.core.declare import Count, Index, Positive
from bayesfair.core.groups import validate_exposure_floors
from bayesfair.core.version import __version__
from bayesfair.datasets import data_folder
from bayesfair.policies.base import check_select
from bayesfair.simulation import results as io
from bayesfair.simulation.metric_parts import FairXRegrets, default_metrics
from bayesfair.simulation.results import canonical_json
from bayesfair.simulation.simulator import StudyMemoryError, check_memory, checkpoint_grid, estimate_memory, simulate
from bayesfair.workflow import registry
from bayesfair.workflow.logs import RoundLog, parquet_available, write_log
from bayesfair.workflow.outputs import (
    OutputError,
    check_free_space,
    check_name_limits,
    check_writable,
    output_folder,
    preflight,
    remove_leftover_temps,
    study_lock,
)
from bayesfair.workflow.persist import ResumeStore, describe_resume, run_with_store
from bayesfair.workflow.registry import ConfigError, Param

__all__ = ["ConfigError", "Study", "StudyOutput", "parse_config", "set_path", "TOP_LEVEL", "LOG_KEYS",
           "RESUME_KEYS", "DATA_KEYS"]

_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")

TOP_LEVEL: dict[str, Param] = {
    "name": Param("name", str | None, None),
    "description": Param("description", str | None, None),
    "seed": Param("seed", Annotated[Index, at.Le(MAX_SEED)], 0),
    "runs": Param("runs", Annotated[Count, at.Le(MAX_RUNS)]),
    "horizon": Param("horizon", Annotated[Count, at.Le(MAX_HORIZON)]),
    "checkpoints": Param("checkpoints", Any, 100),
    "chunk_size": Param("chunk_size", Count, 1024),
    "devices": Param("devices", Count | None, None),
    "floors": Param("floors", list[Annotated[float, at.Gt(0), at.Le(1)]] | None, None),
    "metrics": Param("metrics", Any, None),
    "output": Param("output", str | None, None),
}
_TABLES = ("merit", "environment", "policies", "sweep", "log", "resume", "data")
LOG_KEYS: dict[str, Param] = {
    "enabled": Param("enabled", bool, False),
    "format": Param("format", Literal["auto", "parquet", "csv"], "auto"),
    "max_rows": Param("max_rows", Count, 5_000_000),
    "true_reward": Param("true_reward", str, "true"),
}
RESUME_KEYS: dict[str, Param] = {
    "every_chunks": Param("every_chunks", Count | None, None),
    "every_seconds": Param("every_seconds", Positive, 30.0),
}
#: ``[data]``: where the study's data sets are read (``path``, a data folder; made absolute) and whether a
#: sweep on Dask ships them to its workers (``ship``; :mod:`bayesfair.workflow.sweep`). Where data comes
#: from does not change the numbers (every file is checked against the registry), so it is not part
#: of the fingerprint.
DATA_KEYS: dict[str, Param] = {
    "path": Param("path", str | None, None),
    "ship": Param("ship", Literal["auto", "always", "never"], "auto"),
}


def _unknown(path: str, key: str, allowed: list[str]) -> ConfigError:
    import difflib

    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    where = f"{path}.{key}" if path else key
    return ConfigError(where, f"unknown key{hint}; allowed: {', '.join(allowed)}")


def _check_table(raw: Any, schema: Mapping[str, Param], path: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError(path, f"wrong type: expected a table, got {raw!r}")
    for key in raw:
        if key not in schema:
            raise _unknown(path, key, list(schema))
    out = {}
    for key, p in schema.items():
        if key in raw:
            out[key] = p.check(raw[key], f"{path}.{key}")
        else:
            out[key] = p.default
    return out


def _checkpoints(value: Any, horizon: int) -> np.ndarray:
    if isinstance(value, bool) or not isinstance(value, (int, list)):
        raise ConfigError("checkpoints", f"wrong type: expected an integer n >= 1 (about n checkpoints) or a list "
                                         f"of rounds in [1, {horizon}], got {value!r}")
    if isinstance(value, int):
        if value < 1:
            raise ConfigError("checkpoints", f"out of range: allowed an integer >= 1, got {value}")
        return checkpoint_grid(horizon, value)
    if not value:
        raise ConfigError("checkpoints", "must not be empty")
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"checkpoints[{i}]", f"wrong type: expected an integer round, got {v!r}")
        if not 1 <= v <= horizon:
            raise ConfigError(f"checkpoints[{i}]", f"out of range: allowed rounds in [1, horizon={horizon}], got {v}")
    arr = np.unique(np.asarray(value, np.int64))
    return arr if arr[-1] == horizon else np.append(arr, horizon)


def _metric_names(value: Any) -> list[Any] | None:
    """``metrics``: names of declared metric components (``bayesfair list``; or the import path of a
    declared one), or ``{name = ..., only = [...]}`` tables for the components that record a subset
    of their variables (those declaring an ``only`` parameter)."""
    if value is None:
        return None
    known = registry.names("metric")
    if not isinstance(value, list) or not value:
        raise ConfigError("metrics", f"wrong type: expected a non-empty list of metric components "
                                     f"({', '.join(known)}), got {value!r}")
    out, names = [], []
    for i, entry in enumerate(value):
        name = entry.get("name") if isinstance(entry, dict) else entry
        if not isinstance(name, str) or (name not in known and ":" not in name):
            raise ConfigError(f"metrics[{i}]", f"invalid value: allowed {', '.join(known)} (or the import path of a "
                                               f"declared metric), got {entry!r}")
        params = {p.name: p for p in registry.get("metric", name, path=f"metrics[{i}]").params()}
        if isinstance(entry, dict):
            subsettable = [n for n in known if "only" in {p.name for p in registry.get("metric", n).params()}]
            if "only" not in params or set(entry) != {"name", "only"}:
                raise ConfigError(f"metrics[{i}]", "invalid value: a table is {name = ..., only = [...]} for "
                                                   f"{', '.join(subsettable)}, got {entry!r}")
            allowed = params["only"].choices
            only = entry["only"]
            if not isinstance(only, list) or not only or len(set(map(str, only))) != len(only):
                raise ConfigError(f"metrics[{i}].only", f"wrong type: expected a non-empty list of distinct names "
                                                        f"from {', '.join(allowed)}, got {only!r}")
            for j, var in enumerate(only):
                if var not in allowed:
                    raise ConfigError(f"metrics[{i}].only[{j}]",
                                      f"invalid value: allowed {', '.join(allowed)}, got {var!r}")
            entry = {"name": name, "only": [v for v in allowed if v in only]}
        out.append(entry)
        names.append(name)
    if len(set(names)) != len(names):
        raise ConfigError("metrics", f"each component at most once, got {value!r}")
    return out


class StudyOutput(NamedTuple):
    """Files written by :meth:`Study.execute`."""

    results: Path
    log: Path | None
    dataset: Any  # xarray.Dataset
    resumed: bool


@dataclass(eq=False)
class Study:
    """A validated study: the normalized config and the objects built from it.

    Use :meth:`run` for the results as an xarray Dataset, or :meth:`execute` to also write the
    results file (atomically), the per-round log and the resume file.

    Attributes
    ----------
    config : dict
        The normalized config: every key present, defaults filled in, JSON-able.
    raw : dict
        The config as read (sweeps and overrides apply to this).
    source : Path or None
        The file it was loaded from.
    merit, env, policies
        The built :class:`~bayesfair.core.merit.Merit`, :class:`~bayesfair.environments.Environment`
        and ``{label: Policy}``.

    A study whose environment reads files (``means_file``, ``theta_file``, ...) has one more key in
    its normalized config, ``inputs``: ``{"environment": {key: sha256}}`` of each file, hashed when it was
    read. It is part of :meth:`fingerprint` (a study whose instance file changed is another study:
    its saved progress and results are not reused, and the message names the file) and is
    recorded with the results.
    """

    config: dict[str, Any]
    raw: dict[str, Any]
    source: Path | None
    merit: Any
    env: Any
    policies: dict[str, Any]

    @property
    def name(self) -> str:
        return self.config["name"]

    @property
    def seed(self) -> int:
        return self.config["seed"]

    @property
    def runs(self) -> int:
        return self.config["runs"]

    @property
    def horizon(self) -> int:
        return self.config["horizon"]

    @property
    def checkpoints(self) -> np.ndarray:
        return _checkpoints(self.config["checkpoints"], self.horizon)

    @property
    def output(self) -> Path:
        return output_folder(self.config["output"])

    def fingerprint(self, *, log: bool | None = None) -> str:
        """Hash of everything that determines the numbers (not the output folder or cadence)."""
        cfg = {k: v for k, v in self.config.items()
               if k not in ("output", "description", "resume", "log", "name", "data")}
        enabled = self.config["log"]["enabled"] if log is None else log
        text = canonical_json({"config": cfg, "log": enabled, "bayesfair": __version__})
        return hashlib.sha256(text.encode()).hexdigest()

    def paths(self, out: str | os.PathLike | None = None) -> dict[str, Path]:
        """Where :meth:`execute` writes: ``results``, ``resume`` and ``log`` (suffix chosen on write)."""
        folder = output_folder(out) if out is not None else self.output
        return {"results": folder / f"{self.name}.nc", "resume": folder / f"{self.name}.resume.npz",
                "log": folder / f"{self.name}.log"}

    def run(self, progress: bool | Callable[[dict], None] = False, *, checkpointer: Any = None,
            round_log: Any = None):
        """Simulate the study and return the results Dataset (nothing is written).

        Parameters
        ----------
        progress : bool or callable
            As for :func:`bayesfair.simulate`.
        checkpointer : ResumeStore, optional
            Save/restore state at chunk boundaries (:class:`bayesfair.workflow.persist.ResumeStore`).
        round_log : RoundLog, optional
            Collect the per-round log (:class:`bayesfair.workflow.logs.RoundLog`).
        """
        parts = self.metrics()
        return simulate(
            self.seed, self.env, self.policies, self.horizon, self.runs, merit=self.merit,
            metrics=parts, floors=self.config["floors"] if parts is None else None,
            checkpoints=self.checkpoints, chunk_size=self.config["chunk_size"], devices=self.config["devices"],
            progress=progress, checkpointer=checkpointer, round_log=round_log,
            config={"job": self.name, "seed": self.seed, "study": self.config,
                    "fingerprint": self.fingerprint(log=round_log is not None)},
        )

    def memory_estimate(self, *, resumable: bool = True) -> Any:
        """The study's peak memory, estimated from its shapes without allocating anything
        (:func:`bayesfair.simulation.simulator.estimate_memory`); ``resumable``: run by :meth:`execute`,
        which keeps a resume file."""
        parts = self.metrics()
        if parts is None:
            parts = default_metrics(self.merit, self.config["floors"])
        return estimate_memory(self.env, self.policies, self.horizon, self.runs, metrics=parts,
                               checkpoints=self.checkpoints.size, log=self.config["log"]["enabled"],
                               resumable=resumable)

    def check_memory(self) -> None:
        """Raise :class:`ConfigError` (key ``runs``) if the study cannot fit in the memory this
        machine has available (:func:`bayesfair.simulation.simulator.check_memory`)."""
        try:
            check_memory(self.memory_estimate(), f"the study {self.name!r}")
        except StudyMemoryError as exc:
            raise ConfigError("runs", str(exc)) from None

    def metrics(self) -> list[Any] | None:
        """The metric components the config names (``metrics``), or None for the default set; each
        built by the registry, with the study's merit and floors."""
        names = self.config["metrics"]
        if names is None:
            return None
        merit_spec = self.config["merit"]
        study = {"merit": merit_spec, "floors": self.config["floors"], "horizon": self.horizon}
        out = []
        for i, entry in enumerate(names):
            _, spec = registry.check_params("metric", entry, f"metrics[{i}]", study=study)
            out.append(registry.build("metric", spec, f"metrics[{i}]",
                                      objects={"merit": self.merit, "merit_spec": merit_spec}))
        return out

    def make_log(self) -> Any:
        """A :class:`~bayesfair.workflow.logs.RoundLog` sized for this study (raises ConfigError if too large)."""
        cfg = self.config["log"]
        if cfg["format"] == "parquet" and not parquet_available():  # found before the run, not after it
            raise ConfigError("log.format", "'parquet' needs pyarrow, which is not installed here (pip install "
                              "pyarrow); or use format = 'csv' ('auto' writes parquet when pyarrow is there, csv "
                              "otherwise)")
        try:
            return RoundLog.for_study(self.env, self.horizon, self.runs, len(self.policies),
                                      max_rows=cfg["max_rows"], true_reward=cfg["true_reward"])
        except ValueError as exc:
            raise ConfigError("log.max_rows", str(exc)) from None

    def execute(self, out: str | os.PathLike | None = None, *, progress: bool | Callable[[dict], None] = False,
                resume: bool = False, restart: bool = False, overwrite: bool = False, log: bool | None = None,
                stop_after_chunks: int | None = None, every_chunks: int | None = None,
                every_seconds: float | None = None, say: Callable[[str], None] | None = None) -> StudyOutput:
        """Run the study and write its files; resumable.

        Writes ``<out>/<name>.nc`` (atomically) and, with logging on, ``<out>/<name>.log.parquet``
        (or ``.csv``). While running, the state is saved at chunk boundaries to
        ``<out>/<name>.resume.npz`` (every ``[resume]`` chunks/seconds, when a policy finishes and on
        Ctrl-C); the file is removed once the results are written.

        The whole call holds the study's lock in the output folder
        (:func:`bayesfair.workflow.outputs.study_lock`): a second process writing a study of the same
        name there is refused at once. Under it, temp files that an interrupted write of this study
        left are removed (each named through ``say``). Before the first round the output folder is
        checked (:func:`bayesfair.workflow.outputs.preflight`): it must be writable and have room for
        the first save (:meth:`first_save_bytes`); a directory where a file of the study goes is
        refused; results of a *different* study are not replaced without ``overwrite``; saved
        progress is not discarded without ``restart``; reports and figures of replaced results are
        removed. Refusals raise :class:`bayesfair.workflow.outputs.OutputError`.

        A write that fails during the run (disk full, read-only folder) raises
        :class:`bayesfair.core._atomic.WriteError` naming the file, the free space and the progress
        kept in the resume file (the last save that succeeded), which ``resume=True`` continues.

        Parameters
        ----------
        out : path-like, optional
            Output folder (default: the config's ``output``).
        progress : bool or callable
            Progress bar / callback.
        resume : bool
            Continue from the resume file if there is one (the numbers equal an uninterrupted
            run's). If the results exist and match this study, they are returned as they are.
        restart : bool
            Discard a resume file of an earlier run and start over.
        overwrite : bool
            Replace a results file of a different study (and its reports and figures).
        log : bool, optional
            Override ``[log] enabled``.
        stop_after_chunks : int, optional
            Test hook: save and raise :class:`bayesfair.workflow.persist.StudyInterrupted` after this many chunks.
        every_chunks, every_seconds : optional
            Override the ``[resume]`` cadence.
        say : callable, optional
            Receives notes (replaced results, removed reports, discarded progress).
        """
        say = say or (lambda msg: None)
        enabled = self.config["log"]["enabled"] if log is None else bool(log)
        if out is not None or enabled != self.config["log"]["enabled"]:  # record what runs, not the file's defaults
            cfg = {**self.config, "output": str(out if out is not None else self.output),
                   "log": {**self.config["log"], "enabled": enabled}}
            return dataclasses.replace(self, config=cfg).execute(
                None, progress=progress, resume=resume, restart=restart, overwrite=overwrite, log=None,
                stop_after_chunks=stop_after_chunks, every_chunks=every_chunks, every_seconds=every_seconds, say=say)
        folder = check_writable(self.output)
        with study_lock(folder, self.name):
            return self._execute_locked(progress, resume, restart, overwrite, stop_after_chunks, every_chunks,
                                        every_seconds, say)

    def log_files(self) -> list[Path]:
        """Where :meth:`execute` may write the per-round log (CSV or parquet, chosen on write)."""
        log = self.paths()["log"]
        return [log.with_name(f"{log.name}.{ext}") for ext in ("csv", "parquet")]

    def written_files(self) -> list[Path]:
        """Every file :meth:`execute` writes: results, resume file, per-round log (either format)."""
        paths = self.paths()
        return [paths["results"], paths["resume"], *self.log_files()]

    def first_save_bytes(self) -> int:
        """An estimate (from below) of the resume file's size at its first save: one policy's values,
        float64 at every checkpoint of every run, of the default metrics (2 per arm, 1 per group and
        4 scalars) or of one value per component named in ``metrics``."""
        spec = self.env.spec
        names = self.config["metrics"]
        width = 2 * spec.n_arms + spec.n_groups + 4 if names is None else len(names)
        return 8 * self.runs * (self.checkpoints.size + 1) * width

    def _execute_locked(self, progress, resume, restart, overwrite, stop_after_chunks, every_chunks, every_seconds,
                        say) -> StudyOutput:
        """:meth:`execute`'s work, under the study's lock."""
        paths = self.paths()
        too_long = check_name_limits(paths["results"].parent, self.name)
        if too_long is not None:
            raise OutputError(f"cannot write the study {self.name!r} into {paths['results'].parent}: {too_long[1]}")
        fp = self.fingerprint()
        remove_leftover_temps(self.written_files(), say)
        pre = preflight(results=paths["results"], resume_file=paths["resume"], fingerprint=fp, config=self.config,
                        resume=resume, restart=restart, overwrite=overwrite, read_resume=describe_resume,
                        others=self.log_files() if self.config["log"]["enabled"] else ())
        if pre.done is not None:
            return StudyOutput(paths["results"], None, pre.done, True)
        check_free_space(paths["results"].parent, self.first_save_bytes(), "the first save of the study's progress")
        for note in pre.notes:
            say(note)
        if restart and not resume and paths["resume"].exists():
            paths["resume"].unlink()
            say(f"discarded the saved progress {paths['resume']} (--restart)")
        round_log = self.make_log() if self.config["log"]["enabled"] else None
        rcfg = self.config["resume"]
        store = ResumeStore(
            paths["resume"], fp, resume=resume, extra=round_log, stop_after_chunks=stop_after_chunks,
            every_chunks=every_chunks if every_chunks is not None else rcfg["every_chunks"],
            every_seconds=every_seconds if every_seconds is not None else rcfg["every_seconds"],
            study=self.config,
        )
        resumed = bool(store.saved)
        if resume and not resumed:
            say(f"no saved progress in {paths['resume']}: starting from the first round")
        try:
            ds = run_with_store(lambda: self.run(progress, checkpointer=store, round_log=round_log), store)
            io.write_results(ds, paths["results"])
        except WriteError as exc:
            raise exc.with_note(_kept_progress(paths["resume"])) from exc
        pre.remove_stale(say)
        log_path = None
        if round_log is not None:
            try:
                log_path = write_log(round_log.to_frame(), paths["log"], self.config["log"]["format"])
            except WriteError as exc:
                raise exc.with_note(f"the results are in {paths['results']}; "
                                    + _kept_progress(paths["resume"])) from exc
        store.remove()
        return StudyOutput(paths["results"], log_path, ds, resumed)


def _kept_progress(resume: Path) -> str:
    """What a failed write leaves to continue from (for its error message)."""
    if not resume.is_file():
        return (f"no progress was saved ({resume} was never written): make room (or make the folder writable), then "
                "run the study again")
    try:
        text = describe_resume(resume)[2]
    except (OSError, ValueError) as exc:
        return f"the saved progress {resume} cannot be read ({exc})"
    return (f"the last saved progress is kept in {resume} ({text}): make room (or make the folder writable), then "
            "continue with --resume (Python: resume=True)")


# ---------------------------------------------------------------------------------------------
# parsing


def parse_config(raw: Mapping[str, Any], source: str | os.PathLike | None = None, *,
                 allow_sweep: bool = False, check_memory: bool = True) -> Study:
    """Validate a config mapping (as ``tomllib`` returns it) and build the :class:`Study`.

    Parameters
    ----------
    raw : mapping
        The config.
    source : path-like, optional
        The file it came from (default name = its stem).
    allow_sweep : bool
        Ignore a ``[sweep]`` table (it is validated by :mod:`bayesfair.workflow.sweep`); otherwise a sweep
        is an error here (use :func:`bayesfair.workflow.config.load_config`).
    check_memory : bool
        Refuse a study whose estimated peak memory (:meth:`Study.memory_estimate`) exceeds what this
        machine has available (default). ``False`` for a study that runs elsewhere (a sweep point
        on a remote Dask scheduler is checked on its worker); :func:`bayesfair.simulate` checks
        again before it compiles.

    Raises
    ------
    ConfigError
        Naming the key path, the value and what is allowed.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError("", f"a config must be a table, got {type(raw).__name__}")
    raw = copy.deepcopy(dict(raw))
    src = Path(source) if source is not None else None
    allowed = [*TOP_LEVEL, *_TABLES]
    for key in raw:
        if key not in allowed:
            raise _unknown("", key, allowed)
    if "sweep" in raw and not allow_sweep:
        raise ConfigError("sweep", "a config with a [sweep] table is a sweep: load it with load_config()")
    floors_key = "floors"
    cfg: dict[str, Any] = {}
    for key, p in TOP_LEVEL.items():
        if key == "checkpoints":
            continue
        if key == "floors" and floors_key in raw:
            cfg[key] = p.check(raw[floors_key], floors_key)
        elif key in raw:
            cfg[key] = p.check(raw[key], key)
        elif p.is_required:
            raise ConfigError(key, f"required: {p.allowed()}")
        else:
            cfg[key] = p.default
    if cfg["name"] is None:
        cfg["name"] = src.stem if src is not None else "study"
    if not _NAME_RE.match(cfg["name"]):
        raise ConfigError("name", f"invalid value: allowed letters, digits and _ . - (not starting with . or -), "
                                  f"got {cfg['name']!r}")
    cfg["checkpoints"] = raw.get("checkpoints", TOP_LEVEL["checkpoints"].default)
    _checkpoints(cfg["checkpoints"], cfg["horizon"])
    if cfg["output"] is None:
        cfg["output"] = str(Path("results") / cfg["name"])
    elif not cfg["output"].strip():
        raise ConfigError("output", "must not be empty: give an output folder (default results/<name>)")
    too_long = check_name_limits(cfg["output"], cfg["name"])
    if too_long is not None:
        raise ConfigError(*too_long)
    cfg["log"] = _check_table(raw.get("log", {}), LOG_KEYS, "log")
    cfg["resume"] = _check_table(raw.get("resume", {}), RESUME_KEYS, "resume")
    if "data" in raw:  # only then: the configs of studies without it stay what they were
        cfg["data"] = _data_table(raw["data"])

    for table in ("merit", "environment", "policies"):
        if table not in raw:
            example = {"merit": '[merit] name = "exponential", c = 4.0',
                       "environment": '[environment] name = "bernoulli_arms", means = [...]',
                       "policies": '[policies.FairX-TS] name = "fairx_ts", posterior = "beta_bernoulli"'}[table]
            raise ConfigError(table, f"required table missing (e.g. {example})")
    _, merit_spec = registry.check_params("merit", raw["merit"], "merit")
    cfg["merit"] = merit_spec
    merit = registry.build("merit", merit_spec, "merit")
    _, env_spec = registry.check_params("environment", raw["environment"], "environment",
                                        study={"horizon": cfg["horizon"]})
    cfg["environment"] = env_spec
    with data_folder(cfg.get("data", {}).get("path")):  # the data sets the environment reads
        env = registry.build("environment", env_spec, "environment")
    _check_true_reward(cfg["log"]["true_reward"], env)
    inputs = _input_files(env_spec, "environment")
    if inputs:  # only then: the fingerprints of studies without files stay what they were
        cfg["inputs"] = inputs
    cfg["metrics"] = _metric_names(cfg["metrics"])
    if cfg["metrics"] is not None and "floors" in cfg["metrics"] and cfg["floors"] is None:  # "floors": a name only
        raise ConfigError("metrics", "the component 'floors' needs the study's floors (set floors = [...])")
    if cfg["floors"] is not None:
        try:
            validate_exposure_floors(cfg["floors"], env.groups.n_groups)
        except ValueError as exc:
            raise ConfigError(floors_key, f"{exc} (the environment has {env.groups.n_groups} groups: "
                                              f"{', '.join(env.groups.names)})") from None

    pols_raw = raw["policies"]
    if not isinstance(pols_raw, dict) or not pols_raw:
        raise ConfigError("policies", "expected one or more [policies.<label>] tables")
    # bi-level policies inherit the study's floors (their groups_beta), merit and horizon
    inherit = {"merit": merit_spec, "horizon": cfg["horizon"], "floors": cfg["floors"]}
    cfg["policies"] = {}
    policies = {}
    for label, spec in pols_raw.items():
        path = f"policies.{label}"
        if "." in label or "::" in label or not label.strip():
            raise ConfigError(path, "invalid policy label: use letters, digits, spaces, _ and - (no dots)")
        _, norm = registry.check_params("policy", spec, path, study=inherit)
        cfg["policies"][label] = norm
        pol = registry.build("policy", norm, path, objects={"merit": merit, "merit_spec": merit_spec})
        _check_policy_fits(pol, env, path, label, cfg["horizon"])
        policies[label] = pol
    study = Study(cfg, raw, src, merit, env, policies)
    if check_memory:  # before anything of the study's size is drawn (the check below draws every run's means)
        study.check_memory()
    try:  # the merit fits the environment's means (checked even when no FairX metric is recorded)
        FairXRegrets(merit).check(env, cfg["seed"], cfg["runs"])
    except IncompatibleError as exc:
        raise ConfigError("merit", str(exc)) from None
    return study


def _data_table(raw: Any) -> dict[str, Any]:
    """The checked ``[data]`` table, its ``path`` made absolute (from the working directory) so
    that it names the same folder wherever the study runs (a Dask worker has another working directory)."""
    table = _check_table(raw, DATA_KEYS, "data")
    if table["path"] is not None:
        if not table["path"].strip():
            raise ConfigError("data.path", "must not be empty: give a data folder (laid out as "
                                           "<folder>/<dataset>/<file>), or leave the key out")
        table["path"] = str(Path(table["path"]).expanduser().absolute())
    return table


def _input_files(spec: Mapping[str, Any], path: str) -> dict[str, dict[str, str]]:
    """``{path: {key: sha256}}`` of every file a built object read: the spec's string values under keys ending in
    ``_file`` (``means_file``, ``theta_file``, ``beta_file``, ``psi_file``), resolved as the loader
    resolved them (relative to the working directory)."""
    out = {}
    for key, value in spec.items():
        if isinstance(key, str) and key.endswith("_file") and isinstance(value, str):
            digest = hashlib.sha256()
            with open(value, "rb") as f:  # the loader has just read it
                for block in iter(lambda f=f: f.read(1 << 20), b""):
                    digest.update(block)
            out.setdefault(path, {})[key] = digest.hexdigest()
    return out


def _check_true_reward(name: str, env: Any) -> None:
    """A ``[log] true_reward`` other than the default must name an entry of the environment's
    ``Round.extra`` (traced, no compute): a typo made the log's ``true_reward`` column the observed
    (biased) reward without a word."""
    if name == LOG_KEYS["true_reward"].default:
        return  # absent from an unbiased environment: the observed reward is the true one
    import jax
    import jax.numpy as jnp

    extra = jax.eval_shape(lambda k: env.step(k, env.reset(k), jnp.int32(1)).extra, jax.random.key(0)) or {}
    if name not in extra:
        raise ConfigError("log.true_reward", f"environment {env.label} reports no {name!r} with its rounds (its "
                          f"entries: {sorted(extra) or 'none'})")


def _check_policy_fits(policy: Any, env: Any, path: str, label: str | None = None, horizon: int | None = None) -> None:
    """The policy assumes rewards the environment returns (:mod:`bayesfair.core.compat`), and its
    ``init``/``select``/``update`` trace on the environment's shapes (no compute), ``select``
    returning the documented shapes and dtypes (:func:`bayesfair.policies.base.check_select`)."""
    import jax
    import jax.numpy as jnp

    try:
        check_policy_fits(policy, env, label, horizon)
    except IncompatibleError as exc:
        raise ConfigError(path, str(exc)) from None

    def one(key):
        k1, k2, k3 = jax.random.split(key, 3)
        params = env.reset(k1)
        rnd = env.step(k2, params, jnp.int32(1))
        state = policy.init(k3, env.spec)
        out = policy.select(k3, state, rnd.obs)
        action, _, _ = check_select(out, env.spec.n_arms, f"policy {policy.label!r}")  # shapes and dtypes
        return policy.update(state, rnd.obs, action, rnd.reward[action])

    try:
        jax.eval_shape(one, jax.random.key(0))
    except (ValueError, TypeError, IndexError) as exc:
        raise ConfigError(path, f"{policy.label} cannot run on environment {env.label!r}: {exc}") from None


def set_path(raw: dict[str, Any], key: str, value: Any, *, where: str = "") -> None:
    """Set ``raw[a][b][c] = value`` for ``key = "a.b.c"``; the tables on the way must exist
    (except the optional ``[log]`` and ``[resume]``, which are created).

    A bare string at a ``merit``/``posterior``/``environment`` position is a name shorthand and is
    expanded to ``{name = ...}`` when a parameter below it is set.
    """
    parts = key.split(".")
    if any(not p for p in parts):
        raise ConfigError(where or key, f"invalid key path {key!r}")
    node: Any = raw
    for i, part in enumerate(parts[:-1]):
        here = ".".join(parts[: i + 1])
        if i == 0 and isinstance(node, dict) and part in ("log", "resume") and part not in node:
            node[part] = {}  # optional tables may be created
        if not isinstance(node, dict) or part not in node:
            raise ConfigError(where or key, f"{here!r} is not in the config, so {key!r} cannot be set")
        if isinstance(node[part], str):
            node[part] = {"name": node[part]}
        node = node[part]
    if not isinstance(node, dict):
        raise ConfigError(where or key, f"{'.'.join(parts[:-1])!r} is not a table")
    node[parts[-1]] = value
