"""The registry: named constructors looked up, listed and built from config tables.

Constructors declare themselves with :func:`bayesfair.core.declare.declare`; this module finds them
by name. It imports every module of :mod:`bayesfair.policies`, :mod:`bayesfair.environments`,
:mod:`bayesfair.posteriors` and :mod:`bayesfair.core.merit` on first lookup, so a new module dropped
in one of those packages is registered by its decorators alone. A module that cannot be imported
shows up in :func:`table` as *not available* with the import error, instead of breaking
``import bayesfair``. A config may also name any constructor by path,
``name = "mypackage.module:my_policy"``; a module imported by the user registers its declarations
too.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Mapping
from typing import Any

from bayesfair.core.declare import (
    KINDS,
    ConfigError,
    Entry,
    Param,
    _fmt,
    _import_target,
    declare,
    doc_summary,
    python_only_entries,
)
from bayesfair.core.declare import entries as declared

__all__ = ["ConfigError", "Param", "Entry", "KINDS", "declare", "get", "names", "entries", "unavailable", "table",
           "check_params", "build"]

_PLURAL = {"policy": "policies", "environment": "environments", "posterior": "posteriors", "merit": "merits",
           "metric": "metrics"}
_PACKAGES = {"policy": "bayesfair.policies", "environment": "bayesfair.environments",
             "posterior": "bayesfair.posteriors", "merit": "bayesfair.core.merit", "metric": "bayesfair.simulation"}
_BROKEN: dict[str, dict[str, str]] = {k: {} for k in KINDS}  # module -> import error
_DISCOVERED: set[str] = set()


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return kind


def _discover(kind: str) -> None:
    """Import every module of the kind's package (their declarations register them)."""
    package = _PACKAGES[kind]
    try:
        pkg = importlib.import_module(package)
    except ImportError as exc:  # pragma: no cover - the package itself is broken
        _BROKEN[kind][package] = f"{type(exc).__name__}: {exc}"
        return
    for info in pkgutil.iter_modules(getattr(pkg, "__path__", []) or []):
        module = f"{package}.{info.name}"
        if module in _DISCOVERED:
            continue
        try:
            importlib.import_module(module)
        except ImportError as exc:
            _BROKEN[kind][module] = f"{type(exc).__name__}: {exc}"
            continue
        _DISCOVERED.add(module)
        _BROKEN[kind].pop(module, None)


def names(kind: str) -> list[str]:
    """Registered names of one kind, in registration order."""
    _check_kind(kind)
    _discover(kind)
    return list(declared(kind))


def entries(kind: str) -> list[Entry]:
    """Registered entries of one kind."""
    _check_kind(kind)
    _discover(kind)
    return list(declared(kind).values())


def unavailable(kind: str) -> dict[str, str]:
    """Modules of one kind's package that cannot be imported: ``{module: error}``."""
    _check_kind(kind)
    _discover(kind)
    return dict(_BROKEN[kind])


def _declared_at(kind: str, target: str, path: str) -> Entry:
    """The entry of the constructor at import path ``target``: it must carry a declaration of this
    kind (:func:`~bayesfair.core.declare.declare`). Anything else is refused before it is called,
    so a config cannot run an arbitrary callable (``os:system``); the module itself is imported."""
    try:
        fn = _import_target(target, f"{kind} {target!r}")
    except ConfigError as exc:
        raise ConfigError(path, exc.message) from None
    declared_as = getattr(fn, "__bayesfair_entry__", None)
    entry = declared(kind).get(declared_as[1]) if declared_as and declared_as[0] == kind else None
    if entry is None or entry.target is not fn:
        what = (f"a declared bayesfair {declared_as[0]}, not a {kind}" if declared_as
                else f"not a declared bayesfair {kind}")
        raise ConfigError(path, f"{target} is {what}: a config may name only constructors declared with "
                                f"@bayesfair.core.declare.declare({kind!r}) (nothing was called). Declare it in "
                                "your module, or name a registered one (`bayesfair list`)")
    return entry


def get(kind: str, name: str, *, path: str = "") -> Entry:
    """Look up an entry by name, or by the import path ``"module:function"`` of a declared constructor.

    Raises
    ------
    ConfigError
        Naming ``path``, the unknown name, the registered names and the unavailable modules.
    """
    _check_kind(kind)
    _discover(kind)
    if not isinstance(name, str) or not name:
        raise ConfigError(path, f"expected the name of a {kind} (a string), got {name!r}")
    if name in declared(kind):
        return declared(kind)[name]
    if name in python_only_entries(kind):
        raise ConfigError(path, f"{kind} {name!r} is available from Python only: {python_only_entries(kind)[name][1]}")
    if ":" in name:
        return _declared_at(kind, name, path)
    known = list(declared(kind))
    msg = f"unknown {kind} {name!r}"
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        msg += f" (did you mean {close[0]!r}?)"
    msg += f"; registered {_PLURAL[kind]}: {', '.join(known)}"
    if _BROKEN[kind]:
        msg += "; not available: " + "; ".join(f"{m} ({e})" for m, e in _BROKEN[kind].items())
    msg += "; or give an import path 'package.module:function'"
    raise ConfigError(path, msg)


def table() -> list[dict[str, Any]]:
    """Every entry of every kind as rows ``{kind, name, target, available, reason, params, doc}``."""
    rows = []
    for kind in KINDS:
        for e in entries(kind):
            rows.append({"kind": kind, "name": e.name, "target": e.path, "available": True, "reason": "",
                         "params": ", ".join(p.describe() for p in e.params()), "doc": e.summary()})
        for name, (fn, reason) in python_only_entries(kind).items():
            rows.append({"kind": kind, "name": name, "target": f"{fn.__module__}:{fn.__qualname__}", "available": True,
                         "reason": "", "params": "", "doc": f"{doc_summary(fn)} (Python only: {reason})",
                         "python_only": reason})
        for module, err in unavailable(kind).items():
            rows.append({"kind": kind, "name": f"{module}.*", "target": module, "available": False,
                         "reason": err, "params": "", "doc": ""})
    return rows



def check_params(kind: str, spec: Any, path: str, *, study: Mapping[str, Any] | None = None,
                 extra_keys: tuple[str, ...] = ()) -> tuple[Entry, dict[str, Any]]:
    """Validate one ``{name = ..., param = ...}`` table against its entry's schema.

    Parameters
    ----------
    kind : str
        Entry kind.
    spec : dict or str
        The table (a bare string is the name with default parameters).
    path : str
        Key path of the table, for error messages.
    study : mapping, optional
        Values parameters may inherit (``merit``, ``horizon``, ``floors``).
    extra_keys : tuple of str
        Further keys allowed in the table (handled by the caller).

    Returns
    -------
    (Entry, dict)
        The entry and the normalized parameters: defaults are left out, inherited values filled
        in, nested ``merit``/``posterior`` tables normalized recursively.
    """
    if isinstance(spec, str):
        spec = {"name": spec}
    if not isinstance(spec, dict):
        raise ConfigError(path, f"wrong type: expected a table with a 'name' key, got {_fmt(spec)}")
    if "name" not in spec:
        raise ConfigError(f"{path}.name", f"required: the registered {kind} to use (see `bayesfair list`)")
    entry = get(kind, spec["name"], path=f"{path}.name")
    try:
        params = entry.params()
    except (NameError, TypeError) as exc:  # annotations that cannot be evaluated
        raise ConfigError(path, f"{entry.name}: cannot read its declared types ({type(exc).__name__}: {exc})") from None
    by_name = {p.name: p for p in params}
    allowed = ["name", *by_name, *extra_keys]
    for key in spec:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{path}.{key}", f"unknown key{hint}; allowed keys for {kind} {entry.name!r}: "
                                               f"{', '.join(allowed)}")
    out: dict[str, Any] = {"name": entry.name}
    study = study or {}
    for p in params:
        sub = f"{path}.{p.name}"
        if p.name in spec:
            value = p.check(spec[p.name], sub)
            if p.kind in ("merit", "posterior") and value is not None:
                _, value = check_params(p.kind, value, sub, study=study)
            out[p.name] = value
        elif p.inherit is not None and study.get(p.inherit) is not None:
            out[p.name] = study[p.inherit]
        elif p.default is Param.required:
            hint = f" (or set the study's {p.inherit})" if p.inherit else ""
            raise ConfigError(sub, f"required: {p.allowed()}{hint}")
    for key in extra_keys:
        if key in spec:
            out[key] = spec[key]
    return entry, out


def build(kind: str, spec: Mapping[str, Any], path: str, *, objects: Mapping[str, Any] | None = None) -> Any:
    """Build the object of a normalized spec (from :func:`check_params`).

    Nested ``merit``/``posterior`` specs are built first; ``objects`` supplies already-built values
    for inherited keys (``{"merit": Merit}``), used when a spec's value is the study's own.
    Constructor errors become :class:`ConfigError` naming ``path``.
    """
    entry = get(kind, spec["name"], path=f"{path}.name")
    fn = entry.target
    by_name = {p.name: p for p in entry.params()}
    kwargs: dict[str, Any] = {}
    for key, value in spec.items():
        if key == "name" or key not in by_name:
            continue
        p = by_name[key]
        if p.kind in ("merit", "posterior") and isinstance(value, Mapping):
            if objects is not None and p.inherit is not None and value is objects.get(f"{p.inherit}_spec"):
                kwargs[key] = objects[p.inherit]
            else:
                kwargs[key] = build(p.kind, value, f"{path}.{key}", objects=objects)
        elif p.kind == "pair" and value is not None:
            kwargs[key] = tuple(value)
        else:
            kwargs[key] = value
    try:
        obj = fn(**kwargs)
    except ConfigError as exc:
        raise ConfigError(f"{path}.{exc.path}" if exc.path else path, exc.message) from None
    except (ValueError, TypeError) as exc:
        raise ConfigError(path, f"{entry.name}: {exc}") from None
    want = entry.returns()
    if isinstance(want, type) and not isinstance(obj, want):
        raise ConfigError(f"{path}.name", f"{entry.name} returned a {type(obj).__name__}, not a {want.__name__}")
    return obj
