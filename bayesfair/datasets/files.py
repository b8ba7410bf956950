"""The data folder, checksums and downloads of :mod:`bayesfair.datasets`.

:func:`path` hands out a file only after its sha256 matched (remembered per process by path, size
and mtime); a download goes to a temp file in the target folder, is checked, then renamed into place.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import logging
import os
import sys
import tempfile
import urllib.request
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bayesfair.core._atomic import atomic_temp
from bayesfair.core.version import __version__
from bayesfair.datasets.catalog import (
    _REGISTRY,
    ChecksumError,
    DataFile,
    Dataset,
    DownloadError,
    MissingFileError,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["cache_dir", "data_folder", "recording", "info", "list_datasets", "path", "fetch"]

_log = logging.getLogger("bayesfair.datasets")

_CHUNK = 1 << 20
_TIMEOUT = 60.0  # seconds per socket operation

# ----------------------------------------------------------------------------------------------
# Cache folder, lookup, validation
# ----------------------------------------------------------------------------------------------


#: The source checkout this package was imported from (its folder holds ``pyproject.toml``), or
#: None for an installed copy: ``shared/data`` beside a checkout is the second place looked in.
_CHECKOUT: Path | None = next((p for p in [Path(__file__).resolve().parents[2]] if (p / "pyproject.toml").is_file()),
                              None)


def _user_cache() -> Path:
    """The platform's per-user cache folder for bayesfair."""
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        xdg = os.environ.get("XDG_CACHE_HOME", "")
        base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return (base / "bayesfair").absolute()


#: The data folder :func:`data_folder` set for the code running now (None: the rule of :func:`cache_dir`).
_FOLDER: ContextVar[Path | None] = ContextVar("bayesfair_data_folder", default=None)
#: The files :func:`path` handed out inside :func:`recording` (None outside it).
_READS: ContextVar[list[tuple[str, str, Path]] | None] = ContextVar("bayesfair_data_reads", default=None)


@contextmanager
def data_folder(folder: str | os.PathLike | None) -> Iterator[Path | None]:
    """Use ``folder`` as the data folder (:func:`cache_dir`) inside the block, in this thread or
    task only (a context variable: other threads, such as other Dask tasks of the same worker,
    keep theirs). ``None`` leaves the data folder as it is.

    A study's ``[data] path`` is applied this way while its environment is built, and a Dask worker
    reads the data files shipped to it from the folder it wrote them to.
    """
    if folder is None:
        yield None
        return
    where = Path(folder).expanduser().absolute()
    token = _FOLDER.set(where)
    try:
        yield where
    finally:
        _FOLDER.reset(token)


@contextmanager
def recording() -> Iterator[list[tuple[str, str, Path]]]:
    """Collect ``(dataset, file, local path)`` of every registered file :func:`path` hands out
    inside the block (each once, in first-use order): the data files a study reads while it is
    built, which a sweep ships to its Dask workers."""
    reads: list[tuple[str, str, Path]] = []
    token = _READS.set(reads)
    try:
        yield reads
    finally:
        _READS.reset(token)


def cache_dir() -> Path:
    """The data folder in use, by the one rule every command follows (the library, ``bayesfair
    simulate``, ``bayesfair fit``, the model recipes, the experiments and the notebooks):

    0. the folder :func:`data_folder` set for the code running now: a study's ``[data] path``
       while its environment is built, or the folder a Dask worker wrote the data files shipped to
       it into;
    1. else ``BAYESFAIR_DATA``, if set (and not empty);
    2. else ``shared/data`` beside the source checkout that bayesfair is imported from
       (``<checkout>/../shared/data``), if that folder exists: the project's layout, found from the
       package's location, so it does not depend on the working directory;
    3. else the platform's per-user cache folder: ``$XDG_CACHE_HOME/bayesfair``
       (``~/.cache/bayesfair``) on Linux, ``~/Library/Caches/bayesfair`` on macOS,
       ``%LOCALAPPDATA%\\bayesfair`` on Windows (where downloads go by default).

    Returns
    -------
    pathlib.Path
        An absolute path (it need not exist yet). Files live at ``<cache_dir>/<dataset>/<file>``.
    """
    chosen = _FOLDER.get()
    if chosen is not None:
        return chosen
    env = os.environ.get("BAYESFAIR_DATA", "").strip()
    if env:
        return Path(env).expanduser().absolute()
    if _CHECKOUT is not None and (_CHECKOUT.parent / "shared" / "data").is_dir():
        return (_CHECKOUT.parent / "shared" / "data").absolute()
    return _user_cache()


def _dataset(name: Any) -> Dataset:
    known = ", ".join(sorted(_REGISTRY))
    if not isinstance(name, str):
        raise TypeError(f"name must be a dataset name (one of {known}), got {name!r}")
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; name must be one of {known}") from None


def _choice(arg: str, value: Any, allowed: Iterable[str]) -> str:
    allowed = tuple(allowed)
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{arg} must be one of {', '.join(repr(a) for a in allowed)}, got {value!r}")
    return value


def _flag(arg: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{arg} must be True or False, got {value!r}")
    return value


def info(name: str) -> Dataset:
    """The registry record of dataset ``name`` (files, URLs, checksums, source, licence, citation)."""
    return _dataset(name)


def list_datasets() -> pd.DataFrame:
    """The registered datasets, one row each (no I/O).

    Returns
    -------
    pandas.DataFrame
        Indexed by ``name``; columns ``title``, ``description``, ``files`` (comma-separated file
        names), ``size_bytes`` (total of the reference copies), ``loader`` (the function of this
        module that reads it), ``license`` (as the sources state it), ``source`` and ``citation``.
    """
    import pandas as pd

    rows = [{
        "name": d.name,
        "title": d.title,
        "description": d.description,
        "files": ", ".join(d.file_names),
        "size_bytes": sum(f.size for f in d.files),
        "loader": d.loader,
        "license": d.license,
        "source": d.source,
        "citation": d.citation,
    } for d in _REGISTRY.values()]
    return pd.DataFrame(rows).set_index("name")


# ----------------------------------------------------------------------------------------------
# Checksums
# ----------------------------------------------------------------------------------------------

# (absolute path, size, mtime_ns, expected sha256) of files that verified in this process.
_VERIFIED: set[tuple[str, int, int, str]] = set()


def _stamp(p: Path, f: DataFile) -> tuple[str, int, int, str]:
    st = p.stat()
    return (str(p), st.st_size, st.st_mtime_ns, f.sha256)


def _sha256_file(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _sha256_gunzip(p: Path) -> str | None:
    """sha256 of the decompressed content of a gzip file, None if it is not valid gzip."""
    h = hashlib.sha256()
    try:
        with gzip.open(p, "rb") as fh:
            while chunk := fh.read(_CHUNK):
                h.update(chunk)
    except (OSError, EOFError, zlib.error):
        return None
    return h.hexdigest()


def _how_to_get(ds: Dataset, f: DataFile, dest: Path, lead: str = "To get it, either", *, fetch: bool = True) -> str:
    """Instructions for getting ``f`` to ``dest``, as a bulleted list after ``lead``."""
    if f.transform == "gzip":
        by_hand = (f"download {f.url}\n"
                   f"    (the uncompressed file: {f.content_size:,} bytes, sha256 {f.content_sha256}),\n"
                   f"    compress it with gzip (e.g. `gzip -9 -n`) and save the result as\n    {dest}")
    elif f.transform == "zip-member":
        by_hand = f"download {f.url} (a zip archive),\n    extract {f.member} from it and save it as\n    {dest}"
    else:
        by_hand = f"download {f.url}\n    and save it as\n    {dest}"
    items = []
    if fetch:
        items.append(f"run bayesfair.datasets.fetch({ds.name!r}) (or pass download=True) to download and check it")
    items += [by_hand, f"set BAYESFAIR_DATA to a folder that holds {ds.name}/{f.name}"]
    return lead + "\n" + ", or\n".join(f"  - {item}" for item in items) + "."


def _check(ds: Dataset, f: DataFile, p: Path) -> None:
    """Raise ChecksumError unless the file at ``p`` is the registered one (remembered per process)."""
    stamp = _stamp(p, f)
    if stamp in _VERIFIED:
        return
    actual = _sha256_file(p)
    if actual != f.sha256:
        detail = ""
        if f.transform == "gzip":
            content = _sha256_gunzip(p)
            if content == f.content_sha256:
                _VERIFIED.add(stamp)
                return
            detail = (f"\n  expected decompressed content sha256: {f.content_sha256}"
                      f"\n  actual decompressed content sha256:   {content or '(not a valid gzip file)'}")
        raise ChecksumError(
            f"dataset {ds.name!r}: file {f.name!r} at {p} is corrupt or a different version "
            f"(checksum mismatch)\n  expected sha256: {f.sha256}\n  actual sha256:   {actual}{detail}\n"
            f"{_how_to_get(ds, f, p, 'Delete it, then either')}")
    _VERIFIED.add(stamp)


# ----------------------------------------------------------------------------------------------
# Downloads
# ----------------------------------------------------------------------------------------------


class _TransferError(Exception):
    pass


def _stream(url: str, out) -> tuple[str, int]:
    """Copy the body at ``url`` into the binary file ``out``; return (sha256, byte count)."""
    req = urllib.request.Request(url, headers={"User-Agent": f"bayesfair/{__version__} (dataset download)"})
    h = hashlib.sha256()
    n = 0
    try:
        with urllib.request.urlopen(req, timeout=_TIMEOUT) as resp:
            length = resp.headers.get("Content-Length")
            while chunk := resp.read(_CHUNK):
                h.update(chunk)
                out.write(chunk)
                n += len(chunk)
    except (OSError, http.client.HTTPException) as e:  # URLError/HTTPError, timeouts, resets, IncompleteRead
        raise _TransferError(f"{type(e).__name__}: {e}") from e
    if length is not None and length.strip().isdigit() and n != int(length):
        raise _TransferError(f"the connection closed after {n:,} of {int(length):,} bytes")
    return h.hexdigest(), n


def _download(ds: Dataset, f: DataFile, dest: Path) -> None:
    """Download ``f`` to ``dest`` atomically: temp file in the same folder, check, ``os.replace``."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(atomic_temp(dest))
    except OSError as e:
        raise DownloadError(f"dataset {ds.name!r}: cannot write {f.name!r} into {dest.parent}: {e}\n"
                            f"{_how_to_get(ds, f, dest, 'Make that folder writable, or:', fetch=False)}") from e
    _log.info("downloading %s/%s from %s", ds.name, f.name, f.url)
    try:
        try:
            if f.transform == "gzip":
                with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9,
                                                           mtime=0) as gz:
                    digest, _ = _stream(f.url, gz)
                expected, what = f.content_sha256, "the downloaded (uncompressed) content"
            elif f.transform == "zip-member":
                with tempfile.TemporaryFile(dir=dest.parent) as archive:
                    _stream(f.url, archive)
                    archive.seek(0)
                    try:
                        with zipfile.ZipFile(archive) as zf, zf.open(f.member) as src, open(tmp, "wb") as out:
                            h = hashlib.sha256()
                            while chunk := src.read(_CHUNK):
                                h.update(chunk)
                                out.write(chunk)
                    except (zipfile.BadZipFile, KeyError) as e:
                        raise _TransferError(f"cannot extract {f.member} from the archive: {e}") from e
                digest = h.hexdigest()
                expected, what = f.sha256, f"{f.member} extracted from the download"
            else:
                with open(tmp, "wb") as out:
                    digest, _ = _stream(f.url, out)
                expected, what = f.sha256, "the download"
        except _TransferError as e:
            raise DownloadError(f"dataset {ds.name!r}: downloading {f.name!r} from {f.url} failed: {e}\n"
                                f"Nothing was written to {dest}.\n"
                                f"{_how_to_get(ds, f, dest, 'To get it by hand, either', fetch=False)}") from e
        if digest != expected:
            registered = f"sha256 {f.sha256}"
            if f.transform == "gzip":
                registered += f", or any gzip file whose content has sha256 {f.content_sha256}"
            raise ChecksumError(
                f"dataset {ds.name!r}: {what} for file {f.name!r} from {f.url} does not match the registry "
                f"(checksum mismatch)\n  expected sha256: {expected}\n  actual sha256:   {digest}\n"
                f"Nothing was written to {dest}. The source may have changed: put a copy of the registered "
                f"version ({registered}) at that path, or set BAYESFAIR_DATA to a folder that holds "
                f"{ds.name}/{f.name}.")
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if f.transform == "gzip":
        _check(ds, f, dest)  # content was checked while streaming; this records the new file's stamp
    else:
        _VERIFIED.add(_stamp(dest, f))


def path(name: str, file: str | None = None, *, download: bool = False) -> Path:
    """Local path of a registered file, after checking its sha256.

    Parameters
    ----------
    name : str
        Dataset name (see :func:`list_datasets`).
    file : str, optional
        File name inside the dataset (``info(name).file_names``); default: the dataset's main file.
    download : bool, default False
        Download the file if it is missing (atomically, checksum verified). A present but corrupt
        file is never replaced silently: it raises :class:`ChecksumError`.

    Returns
    -------
    pathlib.Path
        ``<cache_dir()>/<name>/<file>``.

    Raises
    ------
    ValueError
        Unknown dataset or file name (the message lists the known ones).
    MissingFileError
        The file is missing and ``download`` is False; the message says where to put it.
    ChecksumError
        The file (or the download) does not have the registered sha256.
    DownloadError
        The download failed; nothing is left behind.
    """
    ds = _dataset(name)
    f = ds.file(ds.default if file is None else file)
    _flag("download", download)
    dest = cache_dir() / ds.name / f.name
    if dest.is_file():
        _check(ds, f, dest)
        _record(ds.name, f.name, dest)
        return dest
    if not download:
        raise MissingFileError(
            f"dataset {ds.name!r}: file {f.name!r} is not in the data folder {cache_dir()}\n"
            f"  expected at: {dest}\n  sha256:      {f.sha256}\n  source:      {f.url}\n"
            f"{_how_to_get(ds, f, dest)}")
    _download(ds, f, dest)
    _record(ds.name, f.name, dest)
    return dest


def _record(name: str, file: str, dest: Path) -> None:
    reads = _READS.get()
    if reads is not None and all((n, fl) != (name, file) for n, fl, _ in reads):
        reads.append((name, file, dest))


def fetch(name: str, *, download: bool = True) -> Path:
    """Make sure every file of dataset ``name`` is present and verified; return its folder.

    Parameters
    ----------
    name : str
        Dataset name.
    download : bool, default True
        Download missing files. With False this only verifies (raising for a missing file).

    Returns
    -------
    pathlib.Path
        ``<cache_dir()>/<name>``.
    """
    ds = _dataset(name)
    _flag("download", download)
    for f in ds.files:
        path(ds.name, f.name, download=download)
    return cache_dir() / ds.name
