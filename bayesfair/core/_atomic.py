"""The one atomic-write helper: every file bayesfair writes (results, resume and saved-policy
files, logs, reports, JSON summaries) goes through :func:`atomic_write`."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_temp", "atomic_write", "temp_name"]

_RANDOM_CHARS = 8  # the random part tempfile.mkstemp puts between prefix and suffix


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
    permissions a normal file would get (mkstemp creates it 0600)."""
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


@contextmanager
def atomic_write(path: str | os.PathLike) -> Iterator[str]:
    """Write ``path`` atomically: yields the name of a temp file in the same folder (created with
    its parents if needed) for the caller to write; on success the temp file is flushed to disk
    (fsync) and renamed over ``path``; on any exception (KeyboardInterrupt included) it is removed
    and ``path`` is left as it was (the previous file, or none), never truncated."""
    path = Path(path)
    _check_target(path)
    tmp = atomic_temp(path)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
