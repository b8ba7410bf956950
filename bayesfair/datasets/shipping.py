"""Registered data files carried to another machine by content: read and verified where they are,
checked against the registry again where they arrive, and written there into a data folder.

A sweep on a Dask cluster uses this to give its workers the data sets its points read
(:mod:`bayesfair.workflow.sweep`): the client reads each file with :func:`read_verified`, the bytes
travel with the tasks, and each worker :func:`place`\\ s them in a folder of its own, laid out as a
data folder (``<folder>/<dataset>/<file>``), which it then reads through
:func:`bayesfair.datasets.data_folder`. What the registry accepts is what arrives: the file's
registered sha256, or for a gzip file the sha256 of its decompressed content (see
:mod:`bayesfair.datasets`), so a copy damaged on the way is refused by name, never used.

:data:`SHIP_LIMIT` is the size up to which a sweep ships data without being asked: every
registered data set is far below it (the largest folder, COMPAS, is under 10 MB), and at that
size one copy per worker costs well under a second on a 1 Gb/s network.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from pathlib import Path

from bayesfair.core._atomic import atomic_write
from bayesfair.datasets.catalog import ChecksumError, DataFile, Dataset
from bayesfair.datasets.files import _check, _dataset

__all__ = ["SHIP_LIMIT", "read_verified", "check_content", "place"]

#: Bytes of data-set files (all points together, each distinct file once) that a sweep ships to
#: its Dask workers by default (``[data] ship = "auto"``): 64 MiB.
SHIP_LIMIT = 64 * 2**20


def _record(name: str, file: str) -> tuple[Dataset, DataFile]:
    ds = _dataset(name)
    return ds, ds.file(file)


def _matches(f: DataFile, content: bytes) -> tuple[bool, str]:
    """Whether ``content`` is the registered file ``f`` (its sha256, or for gzip its content's), and its sha256."""
    actual = hashlib.sha256(content).hexdigest()
    if actual == f.sha256:
        return True, actual
    if f.transform == "gzip":
        try:
            inner = hashlib.sha256(gzip.decompress(content)).hexdigest()
        except (OSError, EOFError, zlib.error):
            inner = None
        if inner == f.content_sha256:
            return True, actual
    return False, actual


def read_verified(name: str, file: str, path: str | Path) -> bytes:
    """The bytes of registered file ``file`` of dataset ``name`` at ``path``, checked against the registry.

    Raises
    ------
    ChecksumError
        The bytes read are not the registered file (changed since :func:`bayesfair.datasets.path`
        verified it, say).
    """
    content = Path(path).read_bytes()
    check_content(name, file, content, f"read from {path}")
    return content


def check_content(name: str, file: str, content: bytes, where: str) -> None:
    """Raise :class:`ChecksumError` unless ``content`` is registered file ``file`` of dataset ``name``;
    the message says ``where`` the bytes came from (e.g. "shipped to Dask worker tcp://...")."""
    ds, f = _record(name, file)
    ok, actual = _matches(f, content)
    if not ok:
        raise ChecksumError(
            f"dataset {ds.name!r}: the copy of file {f.name!r} {where} is not the registered file "
            f"(checksum mismatch)\n  expected sha256: {f.sha256}\n  actual sha256:   {actual} ({len(content):,} "
            f"bytes; registered: {f.size:,})\nNothing was written; run the sweep again (a copy damaged on the way), "
            f"or check the file where it was read.")


def place(folder: str | Path, name: str, file: str, content: bytes, where: str) -> Path:
    """Write ``content`` as ``<folder>/<name>/<file>`` after checking it (:func:`check_content`)
    and return that path; a verified copy already there is kept as it is. The write is atomic, so
    tasks of one worker placing the same file at once leave one whole copy."""
    ds, f = _record(name, file)
    check_content(name, file, content, where)
    dest = Path(folder) / ds.name / f.name
    if dest.is_file():
        try:
            _check(ds, f, dest)
            return dest
        except (ChecksumError, OSError):
            pass  # a damaged copy from before: replaced below by the verified bytes
    dest.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(dest) as tmp, open(tmp, "wb") as out:
        out.write(content)
    _check(ds, f, dest)
    return dest
