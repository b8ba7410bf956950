"""The study configs shipped with the package: the demo and the paper studies.

The configs live in the package (``bayesfair/data/configs/<name>.toml``), so an installed bayesfair
runs them without a source checkout: ``bayesfair configs list`` names them, ``bayesfair simulate
NAME`` runs one, ``bayesfair configs export NAME DIR`` copies one to edit. From Python::

    from bayesfair.workflow import shipped
    study = bf.load_config(shipped.config_path("bilevel"), ["runs=2", "horizon=500"])

How ``bayesfair simulate ARG`` reads its argument (:func:`resolve_config`): an argument ending in
``.toml`` or holding a path separator is a file path; a bare word (``demo``) is the shipped config
of that name, unless a file ``./demo`` or ``./demo.toml`` with other content is in the working
folder, which is an error naming both (give the file as ``./demo.toml``, or read the shipped one
through ``bayesfair configs path demo``); a bare word that names no shipped config is a file path.

No shipped config names an input file (``means_file``, ``theta_file``, ...): such paths are read
relative to the working folder, which an installed or exported config cannot know, so shipped
configs draw their instances from the seed or read registered data sets (the data folder of
:mod:`bayesfair.datasets`).
"""

from __future__ import annotations

import os
import shutil
import tomllib
from importlib import resources
from pathlib import Path

from bayesfair.core._atomic import atomic_write
from bayesfair.workflow.registry import ConfigError

__all__ = ["config_dir", "names", "config_path", "description", "export_config", "resolve_config",
           "ExistsError"]


class ExistsError(FileExistsError):
    """An export would replace a different file (pass ``force=True`` to replace it)."""


def config_dir() -> Path:
    """The folder of the shipped configs (inside the installed package)."""
    return Path(str(resources.files("bayesfair").joinpath("data", "configs")))


def names() -> list[str]:
    """The shipped configs' names, sorted (each ``<name>.toml`` in :func:`config_dir`)."""
    return sorted(p.stem for p in config_dir().glob("*.toml"))


def config_path(name: str) -> Path:
    """The path of the shipped config ``name``; a :class:`ConfigError` listing the names otherwise."""
    if not isinstance(name, str) or not name or name != Path(name).name or name not in names():
        raise ConfigError("", f"no shipped config {name!r}; the shipped configs are {', '.join(names())} "
                              "(bayesfair configs list)")
    return config_dir() / f"{name}.toml"


def description(name: str) -> str:
    """The ``description`` of the shipped config ``name`` (its one-line summary)."""
    with open(config_path(name), "rb") as f:
        return str(tomllib.load(f).get("description", ""))


def export_config(name: str, folder: str | os.PathLike, *, force: bool = False) -> Path:
    """Copy the shipped config ``name`` to ``folder/<name>.toml`` (the folder is created) and return
    that path.

    The copy is written atomically (a temp file renamed into place). A file already there with the
    same bytes is left as it is; one with other bytes is replaced only with ``force=True``, else
    :class:`ExistsError` names it and the fix.
    """
    source = config_path(name)
    target = Path(folder) / source.name
    if target.is_dir():
        raise ExistsError(f"{target} is a folder; export to another folder or move it")
    if target.exists():
        if target.is_file() and target.read_bytes() == source.read_bytes():
            return target
        if not force:
            raise ExistsError(f"{target} exists and differs from the shipped config {name!r}: not replaced "
                              "(--force, or force=True, replaces it; or export to another folder)")
    with atomic_write(target) as tmp:
        shutil.copyfile(source, tmp)
    return target


def _is_bare_name(arg: str) -> bool:
    seps = {os.sep} | ({os.altsep} if os.altsep else set())
    return bool(arg) and not arg.endswith(".toml") and not any(s in arg for s in seps) and arg not in (".", "..")


def resolve_config(arg: str | os.PathLike) -> tuple[Path, bool]:
    """The config file ``bayesfair simulate ARG`` runs, and whether it is a shipped one.

    ``arg`` ending in ``.toml`` or holding a path separator is a path; a bare word is the shipped
    config of that name, or a :class:`ConfigError` when ``./<word>`` or ``./<word>.toml`` in the
    working folder has other content; a bare word naming no shipped config is a path. A path
    that is no file: a :class:`ConfigError` (naming the shipped config when its stem is one).
    """
    text = os.fspath(arg)
    if _is_bare_name(text) and text in names():
        shipped = config_path(text)
        local = [Path(text), Path(f"{text}.toml")]
        clash = [p for p in local if p.is_file() and p.read_bytes() != shipped.read_bytes()]
        if clash:
            raise ConfigError("", f"{text!r} names the shipped config {text} and also the file {clash[0]} here, "
                                  f"which differs from it: run `bayesfair simulate ./{clash[0].name}` for the "
                                  f"file, or `bayesfair simulate \"$(bayesfair configs path {text})\"` for "
                                  "the shipped config")
        return shipped, True
    path = Path(text)
    if not path.is_file():
        stem = path.name.removesuffix(".toml")
        if stem in names():
            hint = f"; the shipped config {stem!r} runs as `bayesfair simulate {stem}`"
        else:
            hint = (f"{' and no shipped config of that name' if _is_bare_name(text) else ''}; the shipped configs "
                    f"(bayesfair configs list) are {', '.join(names())}")
        raise ConfigError("", f"no config file at {path}{hint}")
    return path, False
