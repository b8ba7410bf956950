"""Declarations: a constructor states its config form with ordinary Python types.

A policy, environment, posterior, merit or metric constructor declares itself once, with
:func:`declare`, and types its parameters as Python types with their ranges::

    @declare("policy", example={"epsilon": 0.1})
    def fairx_eg(merit: Merit, *, epsilon: Unit = 0.05) -> Policy: ...

where ``Unit = Annotated[float, Ge(0), Le(1)]`` (bounds are :mod:`annotated_types`'s ``Gt``, ``Ge``,
``Lt``, ``Le``). The annotations are the schema: :func:`check` coerces a config value and checks a
Python argument against them with the same message, naming the field and the allowed range
(``epsilon: out of range: allowed a number in [0, 1], got 2.0``). Types understood:

- ``bool``, ``int``, ``float``, ``str``, ``Literal[...]``, each optionally ``Annotated`` with bounds,
  :class:`Cap` (an upper bound on configs only, e.g. a size) or :class:`Inherit` (the study key
  that supplies the value when a config leaves it out);
- ``list[X]``, ``tuple[X, Y]`` (a fixed-length list), a ``TypedDict`` (a table with those keys),
  unions (``float | list[float]``; ``X | None`` is optional);
- the result types of the kinds (``Merit``, ``Posterior``, ...: classes carrying
  ``__bayesfair_kind__``), which a config gives as a nested table ``{name = ..., ...}``;
- any other class (an array type, a callable): Python-only values, passed to the constructor.

A declared policy or merit records its key as ``name`` and its bound arguments as ``params``
(nested objects as tables), so ``{"name": name, **params}`` is the config table that rebuilds it;
a declared environment records its key as ``name``. Every real number of a config or call must fit
the float32 simulator (:data:`REAL_MAX`, :data:`REAL_MIN`). Looking entries up by name, discovering the
shipped modules and building objects from config tables is :mod:`bayesfair.workflow.registry`.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal, TypedDict, get_args, get_origin

import annotated_types as at
import numpy as np

__all__ = [
    "ConfigError", "Param", "Entry", "KINDS", "REAL_MIN", "REAL_MAX", "Cap", "Inherit",
    "Positive", "Count", "Index", "NonNegative", "Unit", "OpenUnit", "Horizon", "Floors", "Pair", "Labels", "Range",
    "declare", "check", "python_only", "doc_summary", "set_callable_describer", "entries", "python_only_entries",
]

KINDS = ("policy", "environment", "posterior", "merit", "metric")


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


@dataclass(frozen=True)
class Cap:
    """An upper bound on what a config may ask for (a size), not on a Python call."""

    high: float


@dataclass(frozen=True)
class Inherit:
    """The study key (``merit``, ``horizon``, ``floors``) that supplies a value a config leaves out."""

    key: str


Positive = Annotated[float, at.Gt(0)]
Count = Annotated[int, at.Ge(1)]
Index = Annotated[int, at.Ge(0)]  # also seeds
NonNegative = Annotated[float, at.Ge(0)]
Unit = Annotated[float, at.Ge(0), at.Le(1)]
OpenUnit = Annotated[float, at.Gt(0), at.Lt(1)]  # a probability such as delta
Horizon = Annotated[int, at.Ge(1), Inherit("horizon")]
Floors = Annotated[list[Annotated[float, at.Gt(0), at.Le(1)]], Inherit("floors")]
Pair = tuple[float, float]
Labels = list[str] | list[Annotated[int, at.Ge(0)]]  # a group per item: names or indices


class Range(TypedDict):
    """``{low, high}``: numbers drawn uniformly per run (a number or one per item for each bound)."""

    low: float | list[float]
    high: float | list[float]


# Real numbers are used in float32 inside the simulator: a magnitude above 1e15 (a square above
# float32's range) or a positive parameter below 1e-15 overflows or underflows there.
REAL_MIN, REAL_MAX = 1e-15, 1e15
_REQUIRED = inspect.Parameter.empty


def _parts(tp: Any) -> tuple[Any, tuple[Any, ...]]:
    """``(base type, metadata)`` of a possibly ``Annotated`` type."""
    meta: tuple[Any, ...] = ()
    while get_origin(tp) is Annotated:
        meta += tuple(tp.__metadata__)
        tp = tp.__origin__
    return tp, tuple(m2 for m in meta for m2 in (m if isinstance(m, at.Interval) else [m]))


def _members(tp: Any) -> tuple[Any, ...]:
    return get_args(tp) if get_origin(tp) in (typing.Union, types.UnionType) else (tp,)


def _bounds(meta: tuple[Any, ...], cap: bool) -> tuple[float | None, bool, float | None, bool]:
    """``(low, low_open, high, high_open)`` of the bound metadata (caps included when ``cap``)."""
    lo = hi = None
    lo_open = hi_open = False
    for m in meta:
        if isinstance(m, (at.Gt, at.Ge)):
            lo, lo_open = float(m.gt if isinstance(m, at.Gt) else m.ge), isinstance(m, at.Gt)
        elif isinstance(m, (at.Lt, at.Le)):
            hi, hi_open = float(m.lt if isinstance(m, at.Lt) else m.le), isinstance(m, at.Lt)
        elif isinstance(m, Cap) and cap:
            hi, hi_open = float(m.high), False
    return lo, lo_open, hi, hi_open


def _num(v: float, integer: bool) -> str:
    return str(int(v)) if integer and float(v).is_integer() else f"{v:g}"


def describe(tp: Any, *, cap: bool = True) -> str:
    """What a value of type ``tp`` may be, as a reader writes it: ``a number in (0, inf)``."""
    members = [m for m in _members(tp) if m is not type(None)]
    written = [m for m in members if _form(m) not in ("any", "object")]  # what a config can write
    text = " or ".join(_describe_one(m, cap) for m in written or members)
    return text + (" (optional)" if len(members) < len(_members(tp)) else "")


def _describe_one(tp: Any, cap: bool) -> str:
    base, meta = _parts(tp)
    origin, args = get_origin(base), get_args(base)
    if origin is Literal:
        return "one of " + ", ".join(repr(c) for c in args)
    if origin in (list, Sequence):
        inner = _describe_one(args[0], cap) if args else "any value"
        if inner.startswith(("a ", "an ")):  # "a number in (0, 1]" -> "numbers in (0, 1]"
            word, _, rest = inner.split(" ", 1)[1].partition(" ")
            inner = f"{word}s {rest}".strip()
        return f"a list of {inner}"
    if origin is tuple:
        return f"a list of {len(args)} numbers [low, high]" if args == (float, float) else f"a list of {len(args)}"
    if isinstance(base, type) and typing.is_typeddict(base):
        return "a table {" + ", ".join(base.__annotations__) + "}"
    kind = getattr(base, "__bayesfair_kind__", None)
    if kind is not None:
        return {"merit": 'a merit table such as {name = "exponential", c = 4.0}',
                "posterior": 'a posterior table such as {name = "beta_bernoulli"}'}.get(kind, f"a {kind} table")
    what = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(base)
    if what is None:
        return "any value" if base is Any else f"a {getattr(base, '__name__', base)} (Python only)"
    lo, lo_open, hi, hi_open = _bounds(meta, cap)
    if lo is not None or hi is not None:
        what += (f" in {'(' if lo_open or lo is None else '['}{'-inf' if lo is None else _num(lo, base is int)}, "
                 f"{'inf' if hi is None else _num(hi, base is int)}{')' if hi_open or hi is None else ']'}")
    return what


def _fmt(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _shape(v: Any) -> str:
    """The coarse form of a value, to choose the member of a union it is meant as."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float, np.integer, np.floating)) or (getattr(v, "ndim", None) == 0):
        return "number"
    return {str: "str", list: "list", tuple: "list", dict: "table"}.get(type(v), "object")


def _form(tp: Any) -> str:
    base, _ = _parts(tp)
    origin = get_origin(base)
    if origin is Literal or base is str:
        return "str"
    if base in (int, float):
        return "number"
    if base is bool:
        return "bool"
    if origin in (list, Sequence, tuple):
        return "list"
    if (isinstance(base, type) and typing.is_typeddict(base)) or hasattr(base, "__bayesfair_kind__") \
            or origin in (dict, Mapping) or base is dict:
        return "table"
    return "any" if base is Any else "object"


def _kind(tp: Any) -> str:
    base, _ = _parts(tp)
    form, args = _form(tp), get_args(base)
    if form == "number":
        return "int" if base is int else "float"
    if form == "list":
        if get_origin(base) is tuple:
            return "pair"
        return {"int": "ints", "float": "floats", "str": "strs"}.get(_kind(args[0]) if args else "any", "any")
    if form == "table":
        return getattr(base, "__bayesfair_kind__", "table")
    return form if form in ("str", "bool") else "any"


def check(tp: Any, value: Any, path: str, *, config: bool = True) -> Any:
    """Check ``value`` against the declared type ``tp``; return it normalized (ints of a float
    field become floats, tuples of a list field lists).

    ``config=True`` checks a config value (TOML types only, caps apply); ``config=False`` a Python
    argument (arrays and objects pass to the constructor, which checks them). Both raise
    :class:`ConfigError` with the same message; its ``path`` is ``path``.
    """
    members = _members(tp)
    if value is None:
        if type(None) in members or not config:  # a Python None is the constructor's to refuse
            return None
        raise ConfigError(path, f"wrong type: expected {describe(tp, cap=config)}, got nothing")
    shape = _shape(value)
    if not config and shape == "object":
        return value
    options = [m for m in members if m is not type(None)]
    matched = [m for m in options if _form(m) in (shape, "any")
               or (shape == "str" and _form(m) == "table" and hasattr(_parts(m)[0], "__bayesfair_kind__"))]
    if not matched:
        if not config and any(_form(m) == "object" for m in options):
            return value
        raise ConfigError(path, f"wrong type: expected {describe(tp, cap=config)}, got {_fmt(value)} "
                                f"({type(value).__name__})")
    if shape == "list" and len(matched) > 1:  # list[str] | list[int]: by the first element
        inner = [m for m in matched if get_args(_parts(m)[0])
                 and _form(get_args(_parts(m)[0])[0]) in (_shape(value[0]) if value else "any", "any")]
        matched = inner or matched
    return _check_one(matched[0], value, path, config, tp)


def _check_one(tp: Any, value: Any, path: str, config: bool, whole: Any) -> Any:
    base, meta = _parts(tp)
    origin, args = get_origin(base), get_args(base)
    allowed = describe(whole, cap=config)
    if origin is Literal:
        if value not in args:
            raise ConfigError(path, f"invalid value: allowed {allowed}, got {_fmt(value)}")
        return value
    if base in (int, float):
        if base is int and not (isinstance(value, (int, np.integer)) or (not config and float(value).is_integer())):
            raise ConfigError(path, f"wrong type: expected {allowed}, got {_fmt(value)} ({type(value).__name__})")
        out = int(value) if base is int else float(value)
        if base is float and not math.isfinite(out):
            raise ConfigError(path, f"must be finite; allowed: {allowed}; got {_fmt(value)}")
        lo, lo_open, hi, hi_open = _bounds(meta, config)
        if (lo is not None and (out <= lo if lo_open else out < lo)) or \
                (hi is not None and (out >= hi if hi_open else out > hi)):
            raise ConfigError(path, f"out of range: allowed {allowed}, got {_fmt(value)}")
        if base is float and abs(out) > REAL_MAX:
            raise ConfigError(path, f"out of range: allowed {allowed} of magnitude at most {REAL_MAX:g} (the "
                                    f"simulator computes in float32), got {_fmt(value)}")
        if base is float and lo == 0 and lo_open and out < REAL_MIN:
            raise ConfigError(path, f"out of range: allowed {allowed}, at least {REAL_MIN:g} (smaller positive "
                                    f"values underflow in the float32 simulator), got {_fmt(value)}")
        return out
    if origin in (list, Sequence, tuple):
        if not value:
            raise ConfigError(path, f"wrong type: expected {allowed}, got an empty list")
        if origin is tuple and len(value) != len(args):
            raise ConfigError(path, f"expected {allowed}, got {len(value)} values: {_fmt(value)}")
        inner = args if origin is tuple else (args[0] if args else Any,) * len(value)
        out = [check(t, v, f"{path}[{i}]", config=config) for i, (t, v) in enumerate(zip(inner, value, strict=True))]
        return tuple(out) if origin is tuple and not config else out
    if isinstance(base, type) and typing.is_typeddict(base):
        keys = list(base.__annotations__)
        for k in value:
            if k not in keys:
                raise ConfigError(f"{path}.{k}", f"unknown key; allowed: {', '.join(keys)}")
        hints = typing.get_type_hints(base)
        for k in keys:
            if k not in value:
                raise ConfigError(f"{path}.{k}", f"required ({allowed})")
        return {k: check(hints[k], value[k], f"{path}.{k}", config=config) for k in keys}
    return value  # bool and str are checked by their form; tables and objects by their builders


@dataclass(frozen=True)
class Param:
    """One constructor parameter as a config key: its declared type and default.

    ``kind`` (``int``, ``float``, ``floats``, ``merit``, ...), ``low``/``high``, ``low_open``/
    ``high_open``, ``choices`` and ``inherit`` are read off the type for listings and the tests.
    """

    name: str
    type: Any = Any
    default: Any = _REQUIRED

    required = _REQUIRED

    @property
    def is_required(self) -> bool:
        return self.default is _REQUIRED and self.inherit is None

    @property
    def inherit(self) -> str | None:
        marks = [m for t in _members(self.type) for m in _parts(t)[1] if isinstance(m, Inherit)]
        if marks:
            return marks[0].key
        return "merit" if self.kind == "merit" else None

    @property
    def kind(self) -> str:
        """The coarse kind of the type (``float``, ``floats``, ``means``, ``posterior``, ...)."""
        kinds = [k for k in dict.fromkeys(_kind(m) for m in _members(self.type) if m is not type(None)) if k != "any"]
        combined = {("strs", "ints"): "labels", ("floats", "table"): "means", ("float", "floats"): "float_or_floats",
                    ("float", "str"): "float_or_str"}
        return combined.get(tuple(kinds), kinds[0] if kinds else "any")

    def _number(self) -> tuple[Any, tuple[Any, ...]]:
        for m in _members(self.type):
            base, meta = _parts(m)
            if get_origin(base) in (list, Sequence) and get_args(base):
                base, meta = _parts(get_args(base)[0])
            if base in (int, float):
                return base, meta
        return None, ()

    @property
    def low(self) -> float | None:
        return _bounds(self._number()[1], True)[0]

    @property
    def low_open(self) -> bool:
        return _bounds(self._number()[1], True)[1]

    @property
    def high(self) -> float | None:
        return _bounds(self._number()[1], True)[2]

    @property
    def high_open(self) -> bool:
        return _bounds(self._number()[1], True)[3]

    @property
    def choices(self) -> tuple | None:
        for m in _members(self.type):
            base = _parts(m)[0]
            if get_origin(base) in (list, Sequence) and get_args(base):
                base = _parts(get_args(base)[0])[0]
            if get_origin(base) is Literal:
                return get_args(base)
        return None

    def allowed(self) -> str:
        """What the parameter accepts in a config."""
        return describe(self.type)

    def describe(self) -> str:
        """``name=default`` (or ``name`` when required) for listings."""
        if self.inherit is not None and self.default is _REQUIRED:
            return f"{self.name}=<study {self.inherit}>"
        return f"{self.name} (required)" if self.default is _REQUIRED else f"{self.name}={self.default!r}"

    def check(self, value: Any, path: str | None = None, *, config: bool = True) -> Any:
        """:func:`check` of a value for this parameter (``path`` defaults to its name)."""
        return check(self.type, value, self.name if path is None else path, config=config)


@dataclass(frozen=True)
class Entry:
    """A declared constructor: its kind, name, function and contract-test examples.

    ``example`` holds config-style arguments that build it (a list for several cases); a policy's
    ``example_env`` is the environment table its examples run on (the tests' default when None).
    """

    kind: str
    name: str
    target: Callable[..., Any]
    hidden: tuple[str, ...] = ()
    example: Any = None
    example_env: Mapping[str, Any] | None = None
    _params: list[tuple[Param, ...]] = field(default_factory=list, compare=False, repr=False)

    def examples(self) -> list[dict[str, Any]]:
        """The declared examples as config tables ``{"name": ..., **arguments}``."""
        ex = self.example if isinstance(self.example, (list, tuple)) else [self.example or {}]
        return [{"name": self.name, **dict(e)} for e in ex]

    @property
    def path(self) -> str:
        """The import path of the constructor."""
        return f"{self.target.__module__}:{self.target.__qualname__}"

    def params(self) -> tuple[Param, ...]:
        """The schema: one :class:`Param` per config key, from the typed signature."""
        if not self._params:
            fn = inspect.unwrap(self.target)
            hints = typing.get_type_hints(fn, include_extras=True)
            out = []
            for p in inspect.signature(fn).parameters.values():
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in self.hidden:
                    continue
                tp = hints.get(p.name, Any)
                if p.name == "horizon" and p.default is p.empty and tp is int:
                    tp = Horizon  # a constructor that needs T gets the study's horizon
                out.append(Param(p.name, tp, p.default))
            self._params.append(tuple(out))
        return self._params[0]

    def returns(self) -> Any:
        """The declared result type (``Policy``, ``Posterior``, ...)."""
        return typing.get_type_hints(inspect.unwrap(self.target)).get("return")

    def summary(self) -> str:
        """The docstring's summary: :func:`doc_summary`."""
        return doc_summary(self.target)


def doc_summary(obj: Any) -> str:
    """The summary of ``obj``'s docstring: its first paragraph (up to the first blank line) on one
    line, so that a summary written over two lines is not cut after the first."""
    text = (inspect.getdoc(obj) or "").strip()
    return " ".join(text.split("\n\n", 1)[0].split())


_ENTRIES: dict[str, dict[str, Entry]] = {k: {} for k in KINDS}
_PYTHON_ONLY: dict[str, dict[str, tuple[Callable[..., Any], str]]] = {k: {} for k in KINDS}


def entries(kind: str) -> dict[str, Entry]:
    """The entries declared so far of one kind, by name (the registry discovers the shipped ones)."""
    return _ENTRIES[_check_kind(kind)]


def python_only_entries(kind: str) -> dict[str, tuple[Callable[..., Any], str]]:
    """Constructors of one kind available from Python only: ``{name: (function, reason)}``."""
    return _PYTHON_ONLY[_check_kind(kind)]


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return kind


def python_only(kind: str, reason: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a constructor as available from Python only, with the reason (e.g. it takes a model
    function or array layouts a config cannot express): ``bayesfair list`` shows it with the reason,
    and a config that names it is refused with the reason instead of "unknown"."""
    _check_kind(kind)

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        _PYTHON_ONLY[kind][fn.__name__] = (fn, reason)
        return fn

    return wrap


def declare(kind: str, name: str | None = None, *, hidden: tuple[str, ...] = (), example: Any = None,
            example_env: Mapping[str, Any] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a constructor of ``kind`` under ``name`` (default: the function's name).

    Parameters
    ----------
    kind : {"policy", "environment", "posterior", "merit", "metric"}
    name : str, optional
        The name configs use.
    hidden : tuple of str
        Parameters a config may not set (e.g. array-only ones).
    example : mapping or list of mappings, optional
        Config-style arguments that build it, for the contract tests (default ``{}``).
    example_env : mapping, optional
        For policies: the environment table its examples run on in the contract tests.

    Returns
    -------
    callable
        A decorator returning the constructor wrapped so that every argument is checked against
        its declared type (:func:`check` with ``config=False``; a bad one raises ``TypeError`` or
        ``ValueError`` with the config's message). A policy or merit it returns gets
        ``name=key`` and its bound arguments as ``params``; an environment gets ``name=key``.
    """
    _check_kind(kind)

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        key = name or fn.__name__
        sig = inspect.signature(fn)
        none_default = {p.name for p in sig.parameters.values() if p.default is None}

        @functools.wraps(fn)
        def constructor(*args: Any, **kwargs: Any) -> Any:
            bound = sig.bind(*args, **kwargs)
            types_ = {p.name: p.type for p in entry.params()}
            for arg, value in bound.arguments.items():
                if arg in types_:
                    try:
                        bound.arguments[arg] = check(types_[arg], value, arg, config=False)
                    except ConfigError as exc:
                        raise (TypeError if exc.message.startswith("wrong type") else ValueError)(str(exc)) from None
            out = fn(*bound.args, **bound.kwargs)
            if kind == "environment" and hasattr(out, "_replace"):
                out = out._replace(name=key)
            elif kind in ("policy", "merit"):  # the records that carry their key and arguments
                bound.apply_defaults()
                args = {k: v for k, v in bound.arguments.items() if not (v is None and k in none_default)}
                named = {"name": key, "params": _recipe(args, hidden)}
                out = out._replace(**named) if kind == "policy" else replace(out, **named)
            return out

        constructor.__bayesfair_entry__ = (kind, key)  # type: ignore[attr-defined]
        entry = Entry(kind, key, constructor, tuple(hidden), {} if example is None else example,
                      None if example_env is None else dict(example_env))
        _ENTRIES[kind][key] = entry
        return constructor

    return wrap


def _import_target(target: str, what: str) -> Callable[..., Any]:
    module, _, attr = target.partition(":")
    if not module or not attr:
        raise ConfigError("", f"{what}: import path must look like 'package.module:function', got {target!r}")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        raise ConfigError("", f"{what}: cannot import {module} ({type(exc).__name__}: {exc})") from None
    except AttributeError:
        raise ConfigError("", f"{what}: module {module} has no attribute {attr!r}") from None
    return fn


def _no_describer(value: Any) -> Any:
    raise TypeError(f"cannot record {value!r}: no describer for plain callables is installed")


_describe_callable: Callable[[Any], Any] = _no_describer


def set_callable_describer(fn: Callable[[Any], Any]) -> None:
    """Install how a plain callable argument is recorded in a policy's recipe.

    :mod:`bayesfair.core.merit` installs ``resolve_merit(fn).describe()`` (a plain function given
    where a merit is expected); the declarations stay below the merit module that uses them.
    """
    global _describe_callable
    _describe_callable = fn


def _plain(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value.tolist() if hasattr(value, "tolist") else value


def _recipe(arguments: Mapping[str, Any], hidden: tuple[str, ...]) -> dict[str, Any]:
    """A declared record's ``params`` from its constructor's bound arguments: merits and posteriors
    as nested tables ``{"name": ..., **params}`` (so their names cannot collide with the record's
    own), objects without a config form left out (the wrapper also leaves out arguments that are
    None by default and None here: a config omits them to get the same)."""
    out: dict[str, Any] = {}
    for arg, value in arguments.items():
        if arg in hidden:
            continue
        if getattr(value, "__bayesfair_kind__", None) == "merit":
            out[arg] = {"name": value.name, **value.params} if value.name is not None else value.describe()
        elif callable(value) and not hasattr(value, "init"):  # a merit given as a plain function
            out[arg] = _describe_callable(value)
        elif getattr(value, "__bayesfair_kind__", None) == "posterior":
            out[arg] = {"name": value.name, **{k: _plain(v) for k, v in value.params.items()}}
        elif value is None or isinstance(value, (bool, int, float, str, tuple, list)) or hasattr(value, "tolist"):
            out[arg] = _plain(value)
    return out
