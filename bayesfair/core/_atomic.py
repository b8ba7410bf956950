"""The one atomic-write helper: every file bayesfair writes (results, resume and saved-policy
files, logs, reports, JSON summaries) goes through :func:`atomic_write`.

A write that fails (disk full, read-only or vanished folder, quota) raises :class:`WriteError`,
naming the file and the free space of its file system, and leaves the previous file as it was. A
process killed in the middle of a write leaves its temp file (``.<name>.XXXXXXXX<suffix>``
beside the target); :func:`leftover_temps` finds them for the next run to remove.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bayesfair.core._memory import format_bytes

__all__ = ["atomic_temp", "atomic_write", "temp_name", "WriteError", "free_space", "leftover_temps"]

_RANDOM_CHARS = 8  # the random part tempfile.mkstemp puts between prefix and suffix


class WriteError(OSError):
    """A file could not be written (disk full, read-only folder, ...). ``str()`` names the file, the
    reason and the free space of its file system; ``errno`` is the cause's (e.g. ``ENOSPC``)."""

    def __init__(self, path: str | os.PathLike, cause: OSError, written: int | None = None):
        super().__init__(cause.errno, cause.strerror or str(cause))
        self.filename = str(path)
        self.cause = cause
        after = f" after {format_bytes(written)} of it" if written else ""
        self.message = f"cannot write {path}: {cause.strerror or cause}{after} ({free_space(Path(path).parent)})"

    def __str__(self) -> str:
        return self.message

    def with_note(self, note: str) -> WriteError:
        """The same error with ``note`` appended to its message (what was kept, how to continue)."""
        out = WriteError(self.filename, self.cause)
        out.message = f"{self.message}; {note}"
        return out


def free_space(folder: str | os.PathLike) -> str:
    """``'680.0 KiB free of 1.5 MiB on the file system of <folder>'`` (of its nearest existing
    ancestor when ``folder`` does not exist), for error messages."""
    p = Path(folder)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        usage = shutil.disk_usage(p)
    except OSError:
        return f"free space on the file system of {p} unknown"
    return f"{format_bytes(usage.free)} free of {format_bytes(usage.total)} on the file system of {p}"


def _temp_parts(name: str) -> tuple[str, str]:
    return f".{name}.", Path(name).suffix or ".tmp"


def temp_name(name: str) -> str:
    """The shape of :func:`atomic_temp`'s name for a file called ``name``, with ``X`` for the random
    part: ``.results.nc.XXXXXXXX.nc`` (the longest name written next to ``name``: checked against the
    file system's name limit before a study runs)."""
    prefix, suffix = _temp_parts(name)
    return prefix + "X" * _RANDOM_CHARS + suffix


def atomic_temp(path: Path) -> str:
    """A new temp file next to ``path`` (same filesystem, so ``os.replace`` is atomic), with the
    permissions a normal file would get (mkstemp creates it 0600). Its name is
    ``.<name>.XXXXXXXX<suffix>`` (:func:`temp_name`; :func:`leftover_temps` finds the ones a killed
    process left)."""
    prefix, suffix = _temp_parts(path.name)
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    return tmp


def _check_target(path: Path) -> None:
    """Create ``path``'s folder; an OSError naming ``path`` and the fix when it cannot be a file:
    it is a folder, a file stands where a folder on the way should be, or the folder cannot be made."""
    if path.is_dir():
        raise IsADirectoryError(f"cannot write {path}: it is a folder; give a file path (e.g. {path / path.name})")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise NotADirectoryError(f"cannot write {path}: {parent} is a file, not a folder; give a path in a "
                                         "folder (or move the file)")
            break
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise type(exc)(f"cannot write {path}: cannot create its folder {path.parent} "
                        f"({exc.strerror or exc})") from None


def leftover_temps(path: str | os.PathLike) -> list[Path]:
    """The temp files :func:`atomic_write` made for ``path`` and never renamed or removed (their
    process was killed mid-write): ``.<name>.`` + 8 random characters (``tempfile``'s) + the suffix.
    Only call this while no other process writes ``path``."""
    path = Path(path)
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[a-z0-9_]{{8}}{re.escape(_temp_parts(path.name)[1])}")
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []
    return sorted(path.parent / n for n in names if pattern.fullmatch(n) and (path.parent / n).is_file())


def _fsync_folder(folder: Path) -> None:
    """Flush the folder entry of a rename to disk (best effort: not every file system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_write(path: str | os.PathLike) -> Iterator[str]:
    """Write ``path`` atomically: yields the name of a temp file in the same folder (created with
    its parents if needed) for the caller to write; on success the temp file is flushed to disk
    (fsync) and renamed over ``path``; on any exception (KeyboardInterrupt included) it is removed
    and ``path`` is left as it was (the previous file, or none), never truncated.

    Raises
    ------
    WriteError
        (an ``OSError``) Creating, writing, flushing or renaming the file failed: the message names
        ``path``, the reason and the free space.
    """
    path = Path(path)
    _check_target(path)  # a folder in the way, or no folder for it: an error naming the fix
    try:
        tmp = atomic_temp(path)
    except OSError as exc:
        raise WriteError(path, exc) from exc
    try:
        try:
            yield tmp
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except WriteError:
            raise
        except OSError as exc:  # the caller's write into tmp, the fsync or the rename
            written = _size(tmp)
            _discard(tmp)  # first, so that the message gives the free space the failed write leaves
            raise WriteError(path, exc, written) from exc
        _fsync_folder(path.parent)
    finally:
        _discard(tmp)


def _size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def _discard(tmp: str) -> None:
    try:
        Path(tmp).unlink(missing_ok=True)
    except OSError:  # e.g. the folder became read-only: the error being raised is the one to report
        pass
