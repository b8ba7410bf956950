"""The one atomic-write helper: every file bayesfair writes (results, resume and saved-policy
files, logs, reports, JSON summaries) goes through :func:`atomic_write`."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_temp", "atomic_write"]


def atomic_temp(path: Path) -> str:
    """A new temp file next to ``path`` (same filesystem, so ``os.replace`` is atomic), with the
    permissions a normal file would get (mkstemp creates it 0600)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix or ".tmp", dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    return tmp


@contextmanager
def atomic_write(path: str | os.PathLike) -> Iterator[str]:
    """Write ``path`` atomically: yields the name of a temp file in the same folder (created with
    its parents if needed) for the caller to write; on success the temp file is flushed to disk
    (fsync) and renamed over ``path``; on any exception (KeyboardInterrupt included) it is removed
    and ``path`` is left as it was (the previous file, or none), never truncated."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
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
