"""Named constructors for study configs: policies, environments, posteriors and merit functions.

A study config (:mod:`bayesfair.config`) names every object it needs, e.g.
``{name = "fairx_ts", posterior = {name = "beta_bernoulli", a0 = 1.0}}``; this module maps the
name to the constructor and knows the constructor's parameters (the *schema* used to validate a
config before anything is built).

Schemas
-------
The parameter list of an entry is read from the constructor's signature, so it never drifts from
the code: every keyword of the constructor is a config key, required when it has no default. The
kind of value and the allowed range come from a table keyed by parameter name (``epsilon`` in
[0, 1], ``delta`` in (0, 1), ``steps`` an integer in [0, 1000], ``start`` one of ``upper``/``center``,
``merit`` a merit table, ``posterior`` a posterior table, ...), with per-entry overrides; a
parameter the table does not know is typed by its default value. Every real number must also
fit the float32 simulator: a magnitude of at most 1e15, and a positive parameter (range (0, ...))
at least 1e-15 (:data:`REAL_MAX`, :data:`REAL_MIN`); sizes are bounded too (``n_arms`` and
``n_candidates`` <= 10,000, ``n_features`` and ``n_rff`` <= 1,000, ``steps`` <= 1,000).

Three parameters take their default from the study when the config leaves them out:
``merit`` (the study's ``[merit]``), ``groups_beta`` (the study's ``group_floors``) and ``horizon``
(the study's horizon) for constructors that require it and for ``fairx_ucb`` (Theorem 3.2.1's T);
an optional ``horizon`` (e.g. ``mf``'s, which selects a variant) is left alone.

Lazy entries
------------
Entries point at their constructor by import path (``"bayesfair.policies.linear:fairx_lints"``)
and modules still being written are registered as a whole (:func:`register_module`): their public
functions whose return annotation is ``Policy``/``Environment``/``...Posterior`` become entries
when the module can be imported. A module that cannot be imported shows up in :func:`table` as
*not available* with the import error, instead of breaking ``import bayesfair``. A config may
also name any constructor by path, ``name = "mypackage.module:my_policy"``.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "ConfigError",
    "Param",
    "Entry",
    "KINDS",
    "register",
    "register_module",
    "get",
    "names",
    "entries",
    "unavailable",
    "table",
    "check_params",
    "build",
]

KINDS = ("policy", "environment", "posterior", "merit")
_PLURAL = {"policy": "policies", "environment": "environments", "posterior": "posteriors", "merit": "merits"}
_RETURNS = {
    "policy": ("Policy",),
    "environment": ("Environment",),
    "posterior": ("Posterior", "LinearPosterior"),
    "merit": ("Merit",),
}


class ConfigError(ValueError):
    """A study config (or a registry lookup) is invalid.

    Attributes
    ----------
    path : str
        The key path of the offending value, e.g. ``"policies.FairX-EG.epsilon"`` ("" for the file).
    """

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


_REQUIRED = object()


@dataclass(frozen=True)
class Param:
    """One constructor parameter as a config key.

    Attributes
    ----------
    name : str
    kind : str
        ``int``, ``float``, ``bool``, ``str``, ``floats`` (list of numbers), ``ints``, ``strs``,
        ``pair`` (two numbers), ``float_or_floats``, ``float_or_str``, ``means`` (numbers, or a
        table ``{low, high}``), ``merit``, ``posterior``, or ``any``.
    default : Any
        The constructor's default (``Param.required`` when there is none).
    low, high : float, optional
        Allowed range of a number (of every element of a list).
    low_open, high_open : bool
        Whether the bounds are excluded.
    choices : tuple, optional
        Allowed values of a string.
    inherit : str, optional
        Study key that supplies the value when the config leaves it out.
    """

    name: str
    kind: str = "any"
    default: Any = _REQUIRED
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple | None = None
    inherit: str | None = None

    required = _REQUIRED

    @property
    def is_required(self) -> bool:
        return self.default is _REQUIRED and self.inherit is None

    def allowed(self) -> str:
        """Human description of what the parameter accepts."""
        what = {
            "int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
            "floats": "a list of numbers", "ints": "a list of integers", "strs": "a list of strings",
            "pair": "a list of two numbers [low, high]", "float_or_floats": "a number or a list of numbers",
            "float_or_str": "a number or a string", "means": "a list of numbers or a table {low, high}",
            "merit": 'a merit table such as {name = "exponential", c = 4.0}',
            "posterior": 'a posterior table such as {name = "beta_bernoulli"}', "any": "any value",
        }[self.kind]
        if self.choices is not None:
            what = "one of " + ", ".join(repr(c) for c in self.choices)
        if self.low is not None or self.high is not None:
            lo = "-inf" if self.low is None else f"{self.low:g}"
            hi = "inf" if self.high is None else f"{self.high:g}"
            lb = "(" if self.low_open or self.low is None else "["
            hb = ")" if self.high_open or self.high is None else "]"
            what += f" in {lb}{lo}, {hi}{hb}"
        if self.default is None:
            what += " (optional)"
        return what

    def describe(self) -> str:
        """``name=default`` (or ``name`` when required) for listings."""
        if self.inherit is not None and self.default is _REQUIRED:
            return f"{self.name}=<study {self.inherit}>"
        if self.default is _REQUIRED:
            return f"{self.name} (required)"
        return f"{self.name}={self.default!r}"


# Kinds and ranges by parameter name (shared by every constructor that uses the name).
_POS = {"low": 0.0, "low_open": True}
_BY_NAME: dict[str, dict[str, Any]] = {
    "merit": {"kind": "merit", "inherit": "merit"},
    "posterior": {"kind": "posterior"},
    "groups_beta": {"kind": "floats", "low": 0.0, "high": 1.0, "low_open": True, "inherit": "group_floors"},
    "epsilon": {"kind": "float", "low": 0.0, "high": 1.0},
    "delta": {"kind": "float", "low": 0.0, "high": 1.0, "low_open": True, "high_open": True},
    "learning_rate": {"kind": "float", **_POS},
    "steps": {"kind": "int", "low": 0, "high": 1000},  # per round (the papers use 10); 1e6 ran for hours
    "start": {"kind": "str", "choices": ("upper", "center")},
    "w0": {"kind": "float", **_POS},
    "horizon": {"kind": "int", "low": 1},
    "reward_range": {"kind": "pair"},
    "initial_estimate": {"kind": "float"},
    "c": {"kind": "float", **_POS},
    "floor": {"kind": "float", **_POS},
    "domain": {"kind": "pair"},
    "sigma": {"kind": "float", **_POS},
    "lam": {"kind": "float", **_POS},
    "beta": {"kind": "float", **_POS},
    "noise_sd": {"kind": "float", **_POS},
    "theta_bound": {"kind": "float", **_POS},
    "prior_mean": {"kind": "float_or_floats"},
    "m0": {"kind": "float_or_floats"},
    "prior_var": {"kind": "float", **_POS},
    "noise_var": {"kind": "float", **_POS},
    "kappa0": {"kind": "float", **_POS},
    "a0": {"kind": "float", **_POS},
    "b0": {"kind": "float", **_POS},
    "cholesky": {"kind": "str", "choices": ("refresh", "rank_one")},
    # sizes: arrays of n_arms x n_features per run and round, d x d per policy and run; 2**31 arms
    # or features asked numpy/XLA for 8-48 GB (MemoryError, exit 1) while building the study
    "n_arms": {"kind": "int", "low": 1, "high": 10_000},
    "n_features": {"kind": "int", "low": 1, "high": 1_000},
    "n_rff": {"kind": "int", "low": 1, "high": 1_000},
    "theta": {"kind": "floats"},
    "theta_scale": {"kind": "float", **_POS},
    "context_scale": {"kind": "float", **_POS},
    "noise": {"kind": "str", "choices": ("gaussian", "bernoulli")},
    "contexts": {"kind": "str", "choices": ("sphere", "gaussian")},
    "groups": {"kind": "ints", "low": 0},
    "group_sizes": {"kind": "ints", "low": 1},
    "group_names": {"kind": "strs"},
    "means": {"kind": "means"},
    "mode": {"kind": "str"},
    "split": {"kind": "str"},
    "rff_scale": {"kind": "float_or_str"},
    "key": {"kind": "int", "low": 0},
    "standardize": {"kind": "bool"},
    "bias": {"kind": "float", "low": 0.0},
    "ridge": {"kind": "float", "low": 0.0},
}


@dataclass(frozen=True)
class Entry:
    """A named constructor.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    name : str
        The config name.
    target : str or callable
        The constructor or its import path ``"module:attribute"`` (imported on first use).
    doc : str
        One-line description (defaults to the constructor's first docstring line).
    overrides : dict
        Per-parameter changes to the name-based schema, e.g. ``{"horizon": {"inherit": "horizon"}}``.
    hidden : tuple of str
        Constructor parameters not offered in configs (e.g. array-only ones).
    reason : str
        Why the entry is unavailable (placeholder entries of modules that failed to import).
    """

    kind: str
    name: str
    target: str | Callable[..., Any]
    doc: str = ""
    overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    hidden: tuple[str, ...] = ()
    reason: str = ""

    @property
    def path(self) -> str:
        """The import path of the constructor."""
        if isinstance(self.target, str):
            return self.target
        return f"{self.target.__module__}:{self.target.__qualname__}"

    def resolve(self) -> Callable[..., Any]:
        """Import and return the constructor (raises :class:`ConfigError` if unavailable)."""
        if self.reason:
            raise ConfigError("", f"{self.kind} {self.name!r} is not available: {self.reason}")
        if callable(self.target):
            return self.target
        return _import_target(self.target, f"{self.kind} {self.name!r}")

    def available(self) -> tuple[bool, str]:
        """``(True, "")`` or ``(False, reason)``."""
        try:
            self.resolve()
        except ConfigError as exc:
            return False, exc.message
        return True, ""

    def params(self) -> tuple[Param, ...]:
        """The schema: one :class:`Param` per config key, from the constructor's signature."""
        fn = self.resolve()
        out = []
        for p in inspect.signature(fn).parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in self.hidden:
                continue
            spec = dict(_BY_NAME.get(p.name, {}))
            if spec and not _fits(spec["kind"], p.default, p.empty):
                spec = {}  # the name means something else here (e.g. an array-valued ``beta``)
            if "kind" not in spec:
                spec["kind"] = _kind_of_default(p.default)
            if p.name == "horizon" and p.default is p.empty:
                spec["inherit"] = "horizon"  # a constructor that needs T gets the study's horizon
            spec.update(self.overrides.get(p.name, {}))
            default = _REQUIRED if p.default is p.empty else p.default
            out.append(Param(p.name, default=default, **spec))
        for name, spec in self.overrides.items():  # parameters reached through **kwargs
            if name not in {q.name for q in out} and spec.get("extra"):
                spec = {k: v for k, v in spec.items() if k != "extra"}
                out.append(Param(name, **{**_BY_NAME.get(name, {}), **spec}))
        return tuple(out)

    def summary(self) -> str:
        """The first line of the docstring (or ``doc``)."""
        if self.doc:
            return self.doc
        try:
            text = inspect.getdoc(self.resolve()) or ""
        except ConfigError:
            return ""
        return text.strip().splitlines()[0] if text.strip() else ""


def _fits(kind: str, default: Any, empty: Any) -> bool:
    """Whether a constructor default is compatible with the name-based kind."""
    if default is None or default is empty:
        return True
    if kind in ("int", "float"):
        return isinstance(default, (int, float)) and not isinstance(default, bool)
    if kind == "bool":
        return isinstance(default, bool)
    if kind == "str":
        return isinstance(default, str)
    if kind in ("floats", "ints", "strs", "pair"):
        return isinstance(default, (list, tuple))
    if kind in ("float_or_floats", "float_or_str"):
        return isinstance(default, (int, float, str, list, tuple)) and not isinstance(default, bool)
    return True


def _kind_of_default(default: Any) -> str:
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "float"
    if isinstance(default, str):
        return "str"
    return "any"


def _import_target(target: str, what: str) -> Callable[..., Any]:
    module, _, attr = target.partition(":")
    if not module or not attr:
        raise ConfigError("", f"{what}: import path must look like 'package.module:function', got {target!r}")
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError("", f"{what}: cannot import {module} ({type(exc).__name__}: {exc})") from None
    try:
        fn = getattr(mod, attr)
    except AttributeError:
        raise ConfigError("", f"{what}: module {module} has no attribute {attr!r}") from None
    if not callable(fn):
        raise ConfigError("", f"{what}: {target} is not callable")
    return fn


_ENTRIES: dict[str, dict[str, Entry]] = {k: {} for k in KINDS}
_MODULES: dict[str, list[str]] = {k: [] for k in KINDS}
_SCANNED: set[tuple[str, str]] = set()
_BROKEN: dict[str, dict[str, str]] = {k: {} for k in KINDS}  # module -> import error


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return kind


def register(kind: str, name: str, target: str | Callable[..., Any], *, doc: str = "",
             overrides: Mapping[str, Mapping[str, Any]] | None = None, hidden: tuple[str, ...] = ()) -> Entry:
    """Register (or replace) a named constructor.

    Parameters
    ----------
    kind : {"policy", "environment", "posterior", "merit"}
    name : str
        The name configs use.
    target : callable or str
        The constructor, or its import path ``"module:function"`` (imported lazily).
    doc : str
        One-line description (default: the constructor's docstring).
    overrides : mapping, optional
        Per-parameter schema changes (``kind``, ``low``, ``high``, ``choices``, ``inherit``, ...);
        ``{"extra": True, ...}`` declares a parameter the constructor takes through ``**kwargs``.
    hidden : tuple of str
        Constructor parameters that configs may not set.
    """
    _check_kind(kind)
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    entry = Entry(kind, name, target, doc, dict(overrides or {}), tuple(hidden))
    _ENTRIES[kind][name] = entry
    return entry


def register_module(kind: str, module: str) -> None:
    """Register every public constructor of ``module`` (looked up lazily, on first listing or lookup).

    A function listed in the module's ``__all__`` becomes an entry named after it when its return
    annotation is the kind's type (``Policy``, ``Environment``, ``Posterior``/``LinearPosterior``,
    ``Merit``). Explicitly registered names take precedence.
    """
    _check_kind(kind)
    if module not in _MODULES[kind]:
        _MODULES[kind].append(module)
        _SCANNED.discard((kind, module))


def _scan(kind: str) -> None:
    for module in _MODULES[kind]:
        if (kind, module) in _SCANNED:
            continue
        _SCANNED.add((kind, module))
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            _BROKEN[kind][module] = f"{type(exc).__name__}: {exc}"
            continue
        _BROKEN[kind].pop(module, None)
        for attr in getattr(mod, "__all__", ()):
            fn = getattr(mod, attr, None)
            if not inspect.isfunction(fn) or attr in _ENTRIES[kind]:
                continue
            ret = inspect.signature(fn).return_annotation
            ret = ret if isinstance(ret, str) else getattr(ret, "__name__", "")
            if ret.split(".")[-1] in _RETURNS[kind]:
                _ENTRIES[kind][attr] = Entry(kind, attr, f"{module}:{attr}")


def names(kind: str) -> list[str]:
    """Registered names of one kind (including discovered ones), in registration order."""
    _check_kind(kind)
    _scan(kind)
    return list(_ENTRIES[kind])


def entries(kind: str) -> list[Entry]:
    """Registered entries of one kind."""
    _check_kind(kind)
    _scan(kind)
    return list(_ENTRIES[kind].values())


def unavailable(kind: str) -> dict[str, str]:
    """Registered modules of one kind that cannot be imported: ``{module: error}``."""
    _check_kind(kind)
    _scan(kind)
    return dict(_BROKEN[kind])


def get(kind: str, name: str, *, path: str = "") -> Entry:
    """Look up an entry by name, or build one for an import path ``"module:function"``.

    Raises
    ------
    ConfigError
        Naming ``path``, the unknown name, the registered names and the unavailable modules.
    """
    _check_kind(kind)
    _scan(kind)
    if not isinstance(name, str) or not name:
        raise ConfigError(path, f"expected the name of a {kind} (a string), got {name!r}")
    if name in _ENTRIES[kind]:
        return _ENTRIES[kind][name]
    if ":" in name:
        entry = Entry(kind, name, name)
        ok, reason = entry.available()
        if not ok:
            raise ConfigError(path, reason)
        return entry
    known = list(_ENTRIES[kind])
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
            ok, reason = e.available()
            params = ", ".join(p.describe() for p in e.params()) if ok else ""
            rows.append({"kind": kind, "name": e.name, "target": e.path, "available": ok, "reason": reason,
                         "params": params, "doc": e.summary() if ok else ""})
        for module, err in unavailable(kind).items():
            rows.append({"kind": kind, "name": f"{module}.*", "target": module, "available": False,
                         "reason": err, "params": "", "doc": ""})
    return rows


# ---------------------------------------------------------------------------------------------
# value checks


def _fmt(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# Real numbers of a config are used in float32 inside the simulator: a magnitude above 1e15 (a
# square above float32's range) or a positive parameter below 1e-15 overflowed or underflowed
# there, e.g. a0 = 1e300 became inf and prior_var = 1e-300 became 0, and the study failed with NaN.
REAL_MIN, REAL_MAX = 1e-15, 1e15


def _check_magnitude(p: Param, v: float, path: str, value: Any) -> None:
    if abs(v) > REAL_MAX:
        raise ConfigError(path, f"out of range: allowed {p.allowed()} of magnitude at most {REAL_MAX:g} (the simulator "
                                f"computes in float32), got {_fmt(value)}")
    if p.low == 0 and p.low_open and 0 < v < REAL_MIN:
        raise ConfigError(path, f"out of range: allowed {p.allowed()}, at least {REAL_MIN:g} (smaller positive values "
                                f"underflow in the float32 simulator), got {_fmt(value)}")


def _check_range(p: Param, v: float, path: str, value: Any) -> None:
    if isinstance(v, float) and not math.isfinite(v):
        raise ConfigError(path, f"must be finite; allowed: {p.allowed()}; got {_fmt(value)}")
    bad = (p.low is not None and (v <= p.low if p.low_open else v < p.low)) or \
          (p.high is not None and (v >= p.high if p.high_open else v > p.high))
    if bad:
        raise ConfigError(path, f"out of range: allowed {p.allowed()}, got {_fmt(value)}")


def check_value(p: Param, value: Any, path: str) -> Any:
    """Check one config value against its :class:`Param`; return it normalized (ints -> floats etc.).

    Nested ``merit``/``posterior`` tables are returned unchanged (checked by :func:`check_params`).
    """
    if value is None:
        if p.default is None:
            return None
        raise ConfigError(path, f"expected {p.allowed()}, got nothing")
    k = p.kind

    def wrong() -> ConfigError:
        return ConfigError(path, f"wrong type: expected {p.allowed()}, got {_fmt(value)} ({type(value).__name__})")

    if k == "any":
        return value
    if k == "bool":
        if not isinstance(value, bool):
            raise wrong()
        return value
    if k == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise wrong()
        _check_range(p, value, path, value)
        return value
    if k == "float":
        if not _is_number(value):
            raise wrong()
        _check_range(p, float(value), path, value)
        _check_magnitude(p, float(value), path, value)
        return float(value)
    if k == "str":
        if not isinstance(value, str):
            raise wrong()
        if p.choices is not None and value not in p.choices:
            raise ConfigError(path, f"invalid value: allowed {p.allowed()}, got {_fmt(value)}")
        return value
    if k in ("floats", "ints", "strs", "pair"):
        if not isinstance(value, list) or not value:
            raise wrong()
        if k == "pair" and len(value) != 2:
            raise ConfigError(path, f"expected {p.allowed()}, got {len(value)} values: {_fmt(value)}")
        out = []
        for i, v in enumerate(value):
            if k == "strs":
                if not isinstance(v, str):
                    raise ConfigError(f"{path}[{i}]", f"wrong type: expected a string, got {_fmt(v)}")
                out.append(v)
                continue
            if k == "ints" and (isinstance(v, bool) or not isinstance(v, int)):
                raise ConfigError(f"{path}[{i}]", f"wrong type: expected an integer, got {_fmt(v)}")
            if not _is_number(v):
                raise ConfigError(f"{path}[{i}]", f"wrong type: expected a number, got {_fmt(v)}")
            _check_range(p, float(v), f"{path}[{i}]", v)
            if k != "ints":
                _check_magnitude(p, float(v), f"{path}[{i}]", v)
            out.append(v if k == "ints" else float(v))
        return out
    if k == "float_or_floats":
        if _is_number(value):
            return check_value(replace(p, kind="float"), value, path)
        return check_value(replace(p, kind="floats"), value, path)
    if k == "float_or_str":
        if isinstance(value, str):
            return value
        return check_value(replace(p, kind="float"), value, path)
    if k == "means":
        if isinstance(value, list):
            return check_value(replace(p, kind="floats"), value, path)
        if isinstance(value, dict):
            unknown = sorted(set(value) - {"low", "high"})
            if unknown:
                raise ConfigError(f"{path}.{unknown[0]}", "unknown key; allowed: low, high")
            out = {}
            for bound in ("low", "high"):
                if bound not in value:
                    raise ConfigError(f"{path}.{bound}", "required (means = {low = ..., high = ...})")
                out[bound] = check_value(Param(bound, "float_or_floats"), value[bound], f"{path}.{bound}")
            return out
        raise wrong()
    if k in ("merit", "posterior"):
        if not isinstance(value, (dict, str)):
            raise wrong()
        return value
    raise AssertionError(k)


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
        Values parameters may inherit (``merit``, ``horizon``, ``group_floors``).
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
    except (ValueError, TypeError) as exc:  # a signature that cannot be read
        raise ConfigError(path, str(exc)) from None
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
            value = check_value(p, spec[p.name], sub)
            if p.kind in ("merit", "posterior") and value is not None:
                _, value = check_params(p.kind, value, sub, study=study)
            out[p.name] = value
        elif p.inherit is not None and study.get(p.inherit) is not None:
            out[p.name] = study[p.inherit]
        elif p.default is _REQUIRED:
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
    fn = entry.resolve()
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
    want = _RETURNS[kind]
    if type(obj).__name__ not in want and not any(c.__name__ in want for c in type(obj).__mro__):
        raise ConfigError(f"{path}.name", f"{entry.name} returned a {type(obj).__name__}, not a bayesfair "
                                          f"{' or '.join(want)}: a {kind} name must be a registered {kind} or "
                                          f"the import path of a function that builds one")
    return obj


# ---------------------------------------------------------------------------------------------
# adapters: config-friendly signatures for constructors that take objects


def _arms(kind: str):
    def make(means: Any, n_arms: int | None = None, groups: list[int] | None = None,
             group_sizes: list[int] | None = None, group_names: list[str] | None = None,
             sigma: float = 1.0):
        from bayesfair.environments import UniformMeans, bernoulli_arms, gaussian_arms
        from bayesfair.groups import Groups

        if isinstance(means, Mapping):
            if n_arms is None and not any(isinstance(means[b], (list, tuple)) for b in ("low", "high")):
                raise ConfigError("n_arms", "required with means = {low, high} of two numbers: the number of arms "
                                            "whose means are drawn from U[low, high] per run (an integer >= 1)")
            means_obj: Any = UniformMeans(means["low"], means["high"], n_arms)
        else:
            if n_arms is not None and n_arms != len(means):
                raise ConfigError("n_arms", f"does not match the {len(means)} means given")
            means_obj = means
        if groups is not None and group_sizes is not None:
            raise ConfigError("group_sizes", "give either groups (a label per arm) or group_sizes, not both")
        grp = None
        if group_sizes is not None:
            grp = Groups.from_sizes(group_sizes, group_names)
        elif groups is not None:
            grp = Groups.from_labels(groups, group_names)
        elif group_names is not None:
            raise ConfigError("group_names", "needs groups or group_sizes")
        if kind == "bernoulli":
            return bernoulli_arms(means_obj, groups=grp)
        return gaussian_arms(means_obj, sigma=sigma, groups=grp)

    return make


def bernoulli_arms(means: Any, n_arms: int | None = None, groups: list[int] | None = None,
                   group_sizes: list[int] | None = None, group_names: list[str] | None = None):
    """K Bernoulli arms: fixed means, or means = {low, high} drawn per run (with n_arms)."""
    return _arms("bernoulli")(means, n_arms, groups, group_sizes, group_names)


def gaussian_arms(means: Any, sigma: float = 1.0, n_arms: int | None = None, groups: list[int] | None = None,
                  group_sizes: list[int] | None = None, group_names: list[str] | None = None):
    """K Gaussian arms N(mu_a, sigma^2): fixed means, or means = {low, high} drawn per run."""
    return _arms("gaussian")(means, n_arms, groups, group_sizes, group_names, sigma)


def linear_bandit(n_arms: int, n_features: int, theta: list[float] | None = None, theta_scale: float = 1.0,
                  contexts: str = "sphere", context_scale: float | None = None, noise: str = "gaussian",
                  sigma: float | None = None, groups: list[int] | None = None,
                  reward_range: list[float] | None = None):
    """Stochastic linear bandit with K candidates and d-dimensional contexts (sphere/gaussian)."""
    from bayesfair.environments.linear import linear_bandit as make

    return make(n_arms, n_features, theta=theta, theta_scale=theta_scale, contexts=contexts,
                context_scale=context_scale, noise=noise, sigma=sigma, groups=groups,
                reward_range=None if reward_range is None else tuple(reward_range))


def yeast_bandit(mode: str = "mab", split: str = "all", part: str = "all", validation_fraction: float = 0.2,
                 split_seed: int = 0, n_rff: int = 50, rff_scale: float | str = "median", key: int = 0,
                 standardize: bool = True, bias: float = 0.0, ridge: float = 1e-6, groups: list[int] | None = None):
    """The yeast multi-label bandit (14 arms; FairX Section 5.1); needs the yeast dataset.

    ``split`` picks MULAN's files (``all``/``train``/``test``); ``part`` then keeps all those rows,
    or the ``validation`` (``validation_fraction`` of them) or ``test`` part (the rest) of the
    random split :func:`bayesfair.tuning.validation_split` with ``split_seed`` -- Section 5.1's
    20% / 80% split, the one ``experiments/fairx_yeast/run.py --seed S`` uses (``split_seed = S``).
    A linear ``validation`` part with ``rff_scale = "median"`` takes the bandwidth of the ``test``
    part, so both parts share one random Fourier map, as in that script.
    """
    from bayesfair.environments.multilabel import yeast_bandit as make

    kw = {"mode": mode, "n_rff": n_rff, "rff_scale": rff_scale, "key": key, "standardize": standardize,
          "bias": bias, "ridge": ridge, "groups": groups}
    if part == "all":
        return make(split=split, **kw)
    import numpy as np

    from bayesfair.datasets import load_yeast
    from bayesfair.environments.multilabel import multilabel_bandit
    from bayesfair.tuning import validation_split

    df = load_yeast(split=split)
    s = validation_split(df[list(df.attrs["features"])].to_numpy(np.float64),
                         df[list(df.attrs["labels"])].to_numpy(np.float64), fraction=validation_fraction,
                         seed=split_seed)
    if part == "validation" and mode == "linear" and rff_scale == "median":
        kw["rff_scale"] = multilabel_bandit(s.test_features, s.test_labels, **kw).config["rff_scale"]
    x, y = (s.val_features, s.val_labels) if part == "validation" else (s.test_features, s.test_labels)
    prefix = "yeast" if split == "all" else f"yeast_{split}"
    return multilabel_bandit(x, y, name=f"{prefix}_{mode}_{'val' if part == 'validation' else part}", **kw)


def _register_defaults() -> None:
    P, E, Q, M = "policy", "environment", "posterior", "merit"
    for name, doc in (
        ("identity", "f(mu) = max(mu, floor)"),
        ("exponential", "f(mu) = exp(c mu), the FairX experiments' family"),
    ):
        register(M, name, f"bayesfair.merit:{name}", doc=doc)
    for name in ("beta_bernoulli", "normal_known_variance", "normal_inverse_gamma"):
        register(Q, name, f"bayesfair.posteriors:{name}")
    for name in ("linear_known_variance", "linear_normal_inverse_gamma"):
        register(Q, name, f"bayesfair.posteriors.linear:{name}")
    for name in ("fairx_ts", "fairx_eg"):
        register(P, name, f"bayesfair.policies.fairx:{name}")
    register(P, "fairx_ucb", "bayesfair.policies.fairx:fairx_ucb", overrides={"horizon": {"inherit": "horizon"}})
    for name in ("ucb1", "thompson", "epsilon_greedy", "uniform"):
        register(P, name, f"bayesfair.policies.classic:{name}")
    for name in ("bf_ucb", "bf_ts", "gef", "gef_ts", "mf", "mf_ts"):
        register(P, name, f"bayesfair.policies.bilevel:{name}")
    for name in ("fairx_lints", "fairx_linucb", "fairx_lineg", "lints", "linucb"):
        register(P, name, f"bayesfair.policies.linear:{name}")
    register_module(P, "bayesfair.policies.group_meritocratic")
    register_module(P, "bayesfair.policies.biased")
    register(E, "bernoulli_arms", bernoulli_arms)
    register(E, "gaussian_arms", gaussian_arms)
    # contexts of norm above ~100 (|x|^2 = 1e4 against a ridge of 0.1) leave the ridge precision
    # lam I + sum x x' singular in float32: LinUCB/LinTS/OFUL failed with NaN at context_scale = 1e3
    register(E, "linear_bandit", linear_bandit, overrides={
        "context_scale": {"kind": "float", "low": 0.0, "low_open": True, "high": 100.0}})
    register(E, "yeast_bandit", yeast_bandit, overrides={
        "mode": {"choices": ("mab", "linear")}, "split": {"choices": ("all", "train", "test")},
        "part": {"kind": "str", "choices": ("all", "validation", "test")},
        "validation_fraction": {"kind": "float", "low": 0.0, "high": 1.0, "low_open": True, "high_open": True},
        "split_seed": {"kind": "int", "low": 0}})
    # The group-meritocratic and biased-feedback constructors, registered by name so that their
    # parameters carry ranges (the constructors' own checks; a module scan would type them by default).
    gmp, gme = "bayesfair.policies.group_meritocratic", "bayesfair.environments.group_meritocratic"
    bp, be = "bayesfair.policies.biased", "bayesfair.environments.biased"
    unit_open = {"kind": "float", "low": 0.0, "high": 1.0, "low_open": True}  # (0, 1]
    pos_int, nonneg_int, nonneg = {"kind": "int", "low": 1}, {"kind": "int", "low": 0}, {"kind": "float", "low": 0.0}
    candidates = {"kind": "int", "low": 1, "high": 10_000}  # as n_arms
    for name in ("fair_greedy", "fair_greedy_multigroup"):
        register(P, name, f"{gmp}:{name}", overrides={"rho": unit_open, "block": pos_int})
    for name in ("oful", "greedy", "uniform_random"):
        register(P, name, f"{gmp}:{name}")
    for name in ("top_interval", "interval_chaining", "naive_fair"):
        register(P, name, f"{bp}:{name}", overrides={"ridge": {"kind": "float", **_POS}})
    register(P, "group_fair_top_interval", f"{bp}:group_fair_top_interval",
             overrides={"ridge": {"kind": "float", **_POS}, "reference": nonneg_int, "rho": {"kind": "float"}})
    register(P, "group_fair_ts", f"{bp}:group_fair_ts", overrides={
        "tau": {"kind": "float", **_POS}, "s": {"kind": "float", **_POS}, "prior_sd": {"kind": "float", **_POS},
        "reference": nonneg_int, "method": {"kind": "str", "choices": ("auto", "joint", "collapsed")}})
    block = {"group_weights": {"kind": "any"}, "n_groups": pos_int, "block_size": pos_int,
             "bias_step": {"kind": "float"}, "bias_weight": {"kind": "float"}, "cdf_seed": nonneg_int}
    register(E, "gmf_synthetic", f"{gme}:gmf_synthetic", overrides=block)
    register(E, "gmf_multigroup", f"{gme}:gmf_multigroup",
             overrides={**block, "n_candidates": candidates,
                        "proportions": {"kind": "floats", "low": 0.0, "high": 1.0}})
    register(E, "gmf_adult", f"{gme}:gmf_adult", hidden=("df",), overrides={
        "n_candidates": candidates, "group": {"kind": "str", "choices": ("race", "sex")},
        "split": {"choices": ("all", "train", "test")}, "min_group_size": pos_int})
    register(E, "synthetic_biased", f"{be}:synthetic_biased", hidden=("name",), overrides={
        "n_arms": {"kind": "int", "low": 4}, "n_sensitive": {"kind": "int", "low": 2}, "bias_mean": nonneg,
        "coef_high": {"kind": "float", **_POS}, "noise_sd": nonneg})
    register(E, "compas_bandit", f"{be}:compas_bandit", hidden=("name",), overrides={"noise_sd": nonneg})
    register(E, "family_income_bandit", f"{be}:family_income_bandit", hidden=("name",), overrides={
        "n_buckets": {"kind": "int", "low": 2}, "reward_scale": {"kind": "float", **_POS}, "noise_sd": nonneg})
    register_module(E, "bayesfair.environments.group_meritocratic")
    register_module(E, "bayesfair.environments.biased")


_register_defaults()
