"""Output-folder safety: nothing a user made is overwritten or discarded without being told to.

Before a study (or sweep) plays its first round, :func:`preflight` checks its output folder:

- the folder can be created and written (a test file is made and removed), so an unwritable
  folder is found before the work, not at the first save;
- a results file already there is only replaced when it holds the *same* study (same
  fingerprint: same numbers), or with ``overwrite=True`` (CLI ``--overwrite``); a file of a
  different study, or one that cannot be read, is refused with the settings that differ;
- ``resume=True`` on a finished study whose settings changed is refused, naming the settings;
- a resume file (saved progress) is continued only with ``resume=True`` and discarded only with
  ``restart=True`` (CLI ``--restart``); otherwise the study is refused, saying which round it
  reached;
- reports, figures and the per-round log named after the study (``<name>.report.md``/``.html``/
  ``.csv``, ``<name>.regret.png`` and the other figures of :data:`FIGURE_KINDS`,
  ``<name>.log.csv``/``.parquet``) describe the results file next to them: when a new results
  file replaces another study's, they are removed (and listed); stale ones with no results file
  beside them are refused unless ``overwrite=True``;
- a directory (or anything but a plain file) where the study writes its results, resume file or
  per-round log is refused, ``overwrite`` or not (nothing would remove it, and the write at the
  end of the study would fail);
- (:func:`check_free_space`, called by the study when it will run) the folder's file system has
  room for the study's first save (an estimate).

Every refusal is an :class:`OutputError` (the CLI's exit code 2).

While a study runs, :func:`study_lock` holds ``<folder>/.<name>.lock`` (a :mod:`filelock` lock; the
owner's PID is in ``<folder>/.<name>.lock.pid``), so a second process writing the same study name in
the same folder is refused at once; studies of other names share the folder freely. Under the lock,
:func:`remove_leftover_temps` removes the temp files an interrupted write of the study left behind.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import filelock

from bayesfair.core._atomic import leftover_temps, temp_name
from bayesfair.core._memory import format_bytes
from bayesfair.simulation import results as io

__all__ = ["OutputError", "Preflight", "preflight", "check_writable", "output_folder", "config_diff", "derived_files",
           "stored_study", "study_file_names", "check_name_limits", "study_lock", "lock_file",
           "remove_leftover_temps", "check_free_space"]


class OutputError(ValueError):
    """The output folder holds something this run would destroy, or cannot be written."""


def output_folder(folder: str | os.PathLike) -> Path:
    """``folder`` as a Path; an empty (or blank) name raises OutputError.

    ``Path("")`` is the current folder, so an empty name (an empty ``--out``, an ``out=""``) would
    put the files there without a word; the current folder is given as ``"."``. Check the name
    before it becomes a Path: ``str(Path(""))`` is ``"."``.
    """
    if not str(folder).strip():
        raise OutputError(f"the output folder is empty ({str(folder)!r}): give a folder name ('.' for the current "
                          "folder)")
    return Path(folder)


def check_writable(folder: str | os.PathLike) -> Path:
    """Create ``folder`` if needed and write (then remove) a test file in it; raise OutputError if not possible."""
    folder = output_folder(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".bayesfair-write-test.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputError(f"cannot write into the output folder {folder}: {exc.strerror or exc}") from None
    return folder


def check_free_space(folder: Path, need_bytes: int, what: str) -> None:
    """Raise OutputError if the file system of ``folder`` has less than ``need_bytes`` free (for ``what``)."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return  # no figure to compare: the writes themselves will report a full disk
    if free < need_bytes:
        raise OutputError(f"{folder} has {format_bytes(free)} free, but {what} needs about {format_bytes(need_bytes)}: "
                          "make room, or write elsewhere with --out")


def _refuse_non_files(paths: Iterable[Path]) -> None:
    """Raise OutputError if one of ``paths`` exists but is not a plain file (e.g. a directory)."""
    for p in paths:
        if p.exists() and not p.is_file():
            kind = "a directory" if p.is_dir() else "not a plain file"
            raise OutputError(f"{p} is {kind}, where the study writes a file; it is not replaced, even with "
                              "--overwrite: remove or rename it, or write elsewhere with --out")


# ---------------------------------------------------------------------------------------------
# one writer per study


def lock_file(folder: Path, name: str) -> Path:
    """The lock file of the study ``name`` in ``folder``: ``<folder>/.<name>.lock``."""
    return folder / f".{name}.lock"


def _owner_file(lock: Path) -> Path:
    return lock.with_name(lock.name + ".pid")


def _describe_owner(lock: Path) -> str:
    try:
        owner = json.loads(_owner_file(lock).read_text(encoding="utf-8"))
        return f"PID {int(owner['pid'])} on {owner['host']}, since {owner['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "PID not recorded"


@contextmanager
def study_lock(folder: Path, name: str) -> Iterator[Path]:
    """Hold the lock of the study ``name`` in ``folder`` (:func:`lock_file`) for the block.

    Refused at once, with :class:`OutputError` naming the lock file and the owner's PID, when
    another process holds it. The lock is the operating system's (``flock``, through
    :mod:`filelock`): it ends with its process, however that ends. The lock file itself stays
    (empty); the owner's PID is written beside it (``.<name>.lock.pid``) and removed on release.
    """
    path = lock_file(folder, name)
    lock = filelock.FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise OutputError(f"another process ({_describe_owner(path)}) is writing the study {name!r} in {folder} "
                          f"(it holds {path}); wait for it to finish, or write elsewhere with --out (studies of other "
                          "names can share the folder)") from None
    except OSError as exc:
        raise OutputError(f"cannot lock the study {name!r} in {folder} ({path}): {exc.strerror or exc}") from None
    owner = _owner_file(path)
    try:
        _write_owner(owner)
        yield path
    finally:
        try:
            owner.unlink(missing_ok=True)
        finally:
            lock.release()


def _write_owner(owner: Path) -> None:
    """Write this process's PID, host and start time to ``owner`` (for a refused second writer's message).
    Best effort: without it the refusal says the PID is unknown; the lock holds either way."""
    text = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S")})
    try:
        fd = os.open(owner, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def remove_leftover_temps(targets: Iterable[Path], say: Callable[[str], None] | None = None) -> list[Path]:
    """Remove the temp files that interrupted writes of ``targets`` left
    (:func:`bayesfair.core._atomic.leftover_temps`); ``say`` gets one line per file. Call it only
    under the study's lock (:func:`study_lock`)."""
    removed = []
    for target in targets:
        for p in leftover_temps(target):
            try:
                size = p.stat().st_size
                p.unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise OutputError(f"cannot remove {p}, left by an interrupted write of {target.name}: "
                                  f"{exc.strerror or exc}; remove it by hand") from None
            removed.append(p)
            if say is not None:
                say(f"removed {p} ({format_bytes(size)}), left by an interrupted write of {target.name}")
    return removed


def config_diff(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted key paths whose values differ between two JSON-like configs."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out: list[str] = []
        for key in sorted(set(old) | set(new), key=str):
            where = f"{prefix}.{key}" if prefix else str(key)
            if key not in old or key not in new:
                out.append(where)
            else:
                out += config_diff(old[key], new[key], where)
        return out
    same = json.dumps(old, sort_keys=True, default=str) == json.dumps(new, sort_keys=True, default=str)
    return [] if same else [prefix or "(whole config)"]


def _describe_diff(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str:
    if old is None:
        return "its settings are not recorded"
    skip = ("output", "description", "resume", "name", "fingerprint")
    diff = [d for d in config_diff({k: v for k, v in old.items() if k not in skip},
                                   {k: v for k, v in new.items() if k not in skip})]
    if not diff:
        return "same settings, other bayesfair version or per-round log setting"
    shown = []
    for d in diff[:6]:
        o, n = _lookup(old, d), _lookup(new, d)
        shown.append(f"{d}: {_short(o)} -> {_short(n)}")
    more = f" and {len(diff) - 6} more" if len(diff) > 6 else ""
    return "differs in " + "; ".join(shown) + more


def _lookup(cfg: Any, dotted: str) -> Any:
    node = cfg
    for part in dotted.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            return "(absent)"
    return node


def _short(v: Any) -> str:
    text = v if isinstance(v, str) and v == "(absent)" else json.dumps(v, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


#: The figures :func:`bayesfair.workflow.report.write_figures` writes, ``<stem>.<kind>.png`` (:func:`figure_file`).
FIGURE_KINDS = ("regret", "exposure", "groups", "sweep")


def figure_file(folder: Path, stem: str, kind: str) -> Path:
    """Where the figure ``kind`` of the results ``<folder>/<stem>.nc`` goes (one rule for writing
    and for :func:`derived_files`)."""
    if kind not in FIGURE_KINDS:
        raise ValueError(f"figure kind must be one of {FIGURE_KINDS}, got {kind!r}")
    return folder / (f"{stem}.{kind}.png" if stem else f"{kind}.png")


def derived_files(folder: Path, stem: str) -> list[Path]:
    """Files written for the results ``<folder>/<stem>.nc`` besides them: the reports and figures
    (by plot/report) and the per-round log. Exactly these names: a study named ``a`` does not own
    the figures of a study named ``a.b``."""
    if not folder.is_dir():
        return []
    found = [folder / f"{stem}.report.{ext}" for ext in ("md", "html", "csv")]
    found += [figure_file(folder, stem, kind) for kind in FIGURE_KINDS]
    found += [folder / f"{stem}.log.{ext}" for ext in ("csv", "parquet")]
    return [p for p in found if p.is_file()]


def study_file_names(stem: str) -> list[str]:
    """Every file name written for the study ``stem`` in its output folder (results, resume file,
    per-round log, reports, figures) and the temp name each is first written under
    (:func:`bayesfair.core._atomic.temp_name`)."""
    names = [f"{stem}.nc", f"{stem}.resume.npz"]
    names += [f"{stem}.log.{ext}" for ext in ("csv", "parquet")]
    names += [f"{stem}.report.{ext}" for ext in ("md", "html", "csv")]
    names += [figure_file(Path(), stem, kind).name for kind in FIGURE_KINDS]
    return names + [temp_name(n) for n in names]


def _existing(folder: Path) -> Path:
    """The nearest folder at or above ``folder`` that exists (where the limits are read)."""
    here = folder.absolute()
    while not here.is_dir() and here != here.parent:
        here = here.parent
    return here


def _limit(folder: Path, name: str, default: int) -> tuple[int, bool]:
    try:
        value = os.pathconf(folder, name)
    except (OSError, ValueError, AttributeError):  # not POSIX, or not reported for this file system
        return default, False
    return (value, True) if value and value > 0 else (default, False)


def check_name_limits(folder: str | os.PathLike, stem: str) -> tuple[str, str] | None:
    """Why the files of the study ``stem`` in ``folder`` cannot be created: ``("name", reason)`` or
    ``("output", reason)``; None if they can.

    Every file name of :func:`study_file_names` (temp names included) and every folder name on the
    way must fit the file system's name limit (``PC_NAME_MAX``, 255 bytes when not reported), and
    the full paths its path limit (``PC_PATH_MAX``, 4096); checked before a study runs, so a long
    name is refused up front, not at its first save.
    """
    folder = Path(folder)
    base = _existing(folder)
    name_max, known = _limit(base, "PC_NAME_MAX", 255)
    where = f"the file system of {base}" if known else "file systems (255 bytes, assumed)"
    names = study_file_names(stem)
    i = max(range(len(names)), key=lambda j: len(os.fsencode(names[j])))
    longest, size, own = names[i], len(os.fsencode(names[i])), len(os.fsencode(stem))
    if size > name_max:
        shape = study_file_names("<name>")[i]
        return "name", (f"{own} bytes are too long: the longest file name bayesfair writes for a study, "
                        f"{shape!r}, would have {size} bytes ({size - own} besides the name), more than the "
                        f"{name_max} {where} allows; use a name of at most {name_max - (size - own)} characters")
    for part in folder.parts:
        if len(os.fsencode(part)) > name_max:
            return "output", (f"the output folder {str(folder)!r} has a folder name of {len(os.fsencode(part))} "
                              f"bytes, more than the {name_max} {where} allows: use a shorter folder name")
    path_max, _ = _limit(base, "PC_PATH_MAX", 4096)
    full = len(os.fsencode(str(folder.absolute() / longest)))
    if full > path_max:
        return "output", (f"the path of the study's longest file in {str(folder)!r} has {full} bytes, more than "
                          f"the {path_max} the file system allows for a path: use a shorter name or output folder")
    return None


def stored_study(path: Path) -> tuple[str | None, dict[str, Any] | None]:
    """(fingerprint, normalized study config) recorded in a results file; raises on unreadable files."""
    ds = io.read_results(path)
    cfg = json.loads(ds.attrs.get("config", "{}"))
    return cfg.get("fingerprint"), cfg.get("study", cfg)


class Preflight:
    """What :func:`preflight` found: ``done`` (the finished results to return as they are, or
    None) and ``stale`` (derived files to remove once the new results are written)."""

    def __init__(self, done: Any = None, stale: list[Path] | None = None, notes: list[str] | None = None):
        self.done = done
        self.stale = stale or []
        self.notes = notes or []

    def remove_stale(self, say: Callable[[str], None] | None = None) -> list[Path]:
        removed = []
        for p in self.stale:
            try:
                p.unlink()
                removed.append(p)
            except FileNotFoundError:
                pass
        if removed and say is not None:
            say("removed the report, figures and log of the replaced results: " + ", ".join(p.name for p in removed))
        return removed


def preflight(*, results: Path, resume_file: Path | None, fingerprint: str, config: Mapping[str, Any],
              resume: bool = False, restart: bool = False, overwrite: bool = False,
              read_resume: Callable[[Path], tuple[str | None, Mapping[str, Any] | None, str]] | None = None,
              others: Iterable[Path] = ()) -> Preflight:
    """Check the output folder of one study before it runs (see the module docstring).

    ``read_resume(path) -> (fingerprint, config, progress text)`` describes a resume file.
    ``others`` are further files the study writes (the per-round log).
    Returns a :class:`Preflight`; raises :class:`OutputError` when the run would destroy something.
    """
    folder = check_writable(results.parent)
    _refuse_non_files([results, *([resume_file] if resume_file is not None else []), *others])
    stem = results.stem
    derived = derived_files(folder, stem)
    have_resume = resume_file is not None and resume_file.is_file()
    if have_resume and not resume:
        if not restart:
            progress = ""
            if read_resume is not None:
                try:
                    progress = " (" + read_resume(resume_file)[2] + ")"
                except (OSError, ValueError) as exc:
                    progress = f" (unreadable: {exc})"
            raise OutputError(f"{resume_file} holds the saved progress of an interrupted run{progress}; continue it "
                              "with --resume (Python: resume=True), or discard it with --restart (restart=True)")
    if have_resume and resume and read_resume is not None:
        try:
            fp, old_cfg, _ = read_resume(resume_file)
        except (OSError, ValueError) as exc:
            raise OutputError(f"cannot continue from {resume_file}: {exc}; discard it with --restart") from None
        if fp != fingerprint:
            raise OutputError(f"{resume_file} belongs to a different study ({_describe_diff(old_cfg, config)}); "
                              "--resume continues only the same study: discard the saved progress with "
                              "--restart, or write elsewhere with --out")
    if results.exists():
        try:
            old_fp, old_cfg = stored_study(results)
        except (OSError, ValueError, KeyError) as exc:  # unreadable, damaged or foreign
            if not overwrite:
                raise OutputError(f"{results} exists and cannot be read as bayesfair results ({exc}); refusing to "
                                  "overwrite it: replace it with --overwrite (overwrite=True), or write elsewhere "
                                  "with --out") from None
            return Preflight(stale=derived, notes=[f"replacing the unreadable {results}"])
        if old_fp == fingerprint:
            if resume and not have_resume:
                return Preflight(done=io.read_results(results))
            return Preflight()  # the same study: the same numbers are written again
        what = _describe_diff(old_cfg, config)
        if resume and not have_resume:
            raise OutputError(f"{results} holds a finished study with other settings ({what}); --resume continues "
                              "only the same study: run without --resume and with --overwrite to replace it, or "
                              "write elsewhere with --out")
        if not overwrite:
            raise OutputError(f"{results} holds the results of a different study ({what}); refusing to overwrite "
                              "them: replace them with --overwrite (overwrite=True), or write elsewhere with --out")
        return Preflight(stale=derived, notes=[f"replacing {results} ({what})"])
    if derived and not overwrite:
        raise OutputError(f"{folder} holds a report, figures or per-round log of an earlier study named {stem!r} "
                          f"({', '.join(p.name for p in derived)}) but no results file; they would describe the "
                          "wrong study: remove them, use --overwrite (overwrite=True), or write elsewhere with --out")
    return Preflight(stale=derived)

