"""Declarations: how a constructor (policy, environment, posterior, merit) states its config form.

Each constructor declares itself once, next to its signature, with :func:`declare`::

    @declare("policy", epsilon=real(0, 1), example={"merit": EXAMPLE_MERIT})
    def fairx_eg(merit: Merit, *, epsilon: float = 0.05) -> Policy: ...

That declaration gives the registry entry (configs, ``bayesfair list``, saved-policy recipes),
the schema a config is checked against before anything is built (:func:`check_value`), the checks
of a Python call (``fairx_eg(merit, epsilon=2.0)`` raises ``ValueError: epsilon must be in [0.0,
1.0], got 2.0``), a policy's ``config`` (``{"algorithm": name, <bound arguments>}``, recorded in
result files) and the example arguments the contract test (``tests/test_contract.py``) builds it
with. Looking entries up by name, discovering the shipped modules and building objects from config
tables is the study layer's :mod:`bayesfair.workflow.registry`.

Schemas
-------
Every keyword of the constructor is a config key, required when it has no default. Its kind and
range are the declared spec (:func:`real`, :func:`integer`, :func:`choice`, :func:`floats`, ...);
an undeclared parameter is typed by its annotation (``Merit`` is a merit table inheriting the
study's ``[merit]``, ``Posterior``/``LinearPosterior`` a posterior table) or its default value. Every
real number of a config must also fit the float32 simulator: a magnitude of at most 1e15, and a
positive parameter at least 1e-15 (:data:`REAL_MAX`, :data:`REAL_MIN`); size caps (``cap=True``, e.g.
``n_arms`` <= 10,000) bound configs only, not Python calls. A required ``horizon`` takes the study's
horizon when the config leaves it out.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from bayesfair.core import _validate as v

__all__ = [
    "ConfigError",
    "Param",
    "Entry",
    "KINDS",
    "REAL_MIN",
    "REAL_MAX",
    "declare",
    "register",
    "real",
    "integer",
    "choice",
    "floats",
    "ints",
    "strs",
    "group_label_list",
    "pair",
    "POSITIVE",
    "check_value",
    "set_callable_describer",
    "python_only",
    "doc_summary",
    "EXAMPLE_ENV",
    "EXAMPLE_STUDY",
    "EXAMPLE_POSTERIORS",
]

KINDS = ("policy", "environment", "posterior", "merit", "metric")
_PLURAL = {"policy": "policies", "environment": "environments", "posterior": "posteriors", "merit": "merits",
           "metric": "metrics"}
_RETURNS = {
    "policy": ("Policy",),
    "environment": ("Environment",),
    "posterior": ("Posterior", "LinearPosterior"),
    "merit": ("Merit",),
    "metric": ("Metric",),
}
_PACKAGES = {"policy": "bayesfair.policies", "environment": "bayesfair.environments",
             "posterior": "bayesfair.posteriors", "merit": "bayesfair.core.merit",
             "metric": "bayesfair.simulation"}


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


def _bound(value: float, kind: str) -> str:
    """A range bound as a reader writes it: integers in full (10000000, not 1e+07)."""
    if kind in ("int", "ints") and float(value).is_integer():
        return str(int(value))
    return f"{value:g}"


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
    cap : bool
        ``high`` (or ``choices``) restricts configs only (what a study may ask for), not Python calls.
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
    cap: bool = False

    required = _REQUIRED

    @property
    def is_required(self) -> bool:
        return self.default is _REQUIRED and self.inherit is None

    def allowed(self) -> str:
        """Human description of what the parameter accepts."""
        what = {
            "int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
            "floats": "a list of numbers", "ints": "a list of integers", "strs": "a list of strings",
            "labels": "a list with a label per item: group names (strings) or group indices (integers)",
            "pair": "a list of two numbers [low, high]", "float_or_floats": "a number or a list of numbers",
            "float_or_str": "a number or a string", "means": "a list of numbers or a table {low, high}",
            "merit": 'a merit table such as {name = "exponential", c = 4.0}',
            "posterior": 'a posterior table such as {name = "beta_bernoulli"}', "any": "any value",
        }[self.kind]
        if self.choices is not None:
            what = "one of " + ", ".join(repr(c) for c in self.choices)
        if self.low is not None or self.high is not None:
            lo = "-inf" if self.low is None else _bound(self.low, self.kind)
            hi = "inf" if self.high is None else _bound(self.high, self.kind)
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

    def check_call(self, value: Any) -> Any:
        """Check a Python argument against the declared range; errors name the parameter.

        Only numbers and strings are checked (arrays, objects and ``None`` pass through to the
        constructor); the messages are :mod:`bayesfair.core._validate`'s (``sigma must be > 0, got -1.0``).
        """
        n = self.name
        if value is None or isinstance(value, (list, tuple, dict)) or getattr(value, "ndim", 0) != 0:
            return value  # containers and arrays are the constructor's to check
        if not isinstance(value, (bool, int, float, str)) and getattr(value, "ndim", None) != 0:
            return value  # objects (merits, posteriors, tables)
        if self.kind in ("float", "float_or_floats") or (self.kind == "float_or_str" and not isinstance(value, str)):
            lo, hi = self.low, None if self.cap else self.high
            if lo is not None and hi is not None:
                v.float_in(n, value, float(lo), float(hi), low_open=self.low_open, high_open=self.high_open)
                return value
            out = v.finite_float(n, value)
            if lo is not None and (out <= lo if self.low_open else out < lo):
                raise ValueError(f"{n} must be {'>' if self.low_open else '>='} {lo:g}, got {out}")
            if hi is not None and (out >= hi if self.high_open else out > hi):
                raise ValueError(f"{n} must be {'<' if self.high_open else '<='} {hi:g}, got {out}")
        elif self.kind == "int":
            lo = None if self.low is None else int(math.ceil(self.low)) + (1 if self.low_open else 0)
            out = v.positive_int(n, value, minimum=lo) if lo is not None else value
            if self.high is not None and not self.cap and out > self.high:
                raise ValueError(f"{n} must be an integer in [{lo}, {self.high:g}], got {out}")
        elif self.kind == "str" and self.choices is not None and not self.cap and value not in self.choices:
            raise ValueError(f"{n} must be one of {', '.join(repr(c) for c in self.choices)}, got {value!r}")
        return value


# ---------------------------------------------------------------------------------------------
# parameter specs for declarations


def real(low: float | None = None, high: float | None = None, *, low_open: bool = False, high_open: bool = False,
         cap: bool = False) -> dict[str, Any]:
    """A real number in [low, high] (bounds optional; ``low_open``/``high_open`` exclude them)."""
    return {"kind": "float", "low": low, "high": high, "low_open": low_open, "high_open": high_open, "cap": cap}


#: A real number > 0.
POSITIVE = real(0.0, low_open=True)


def integer(low: int | None = None, high: int | None = None, *, cap: bool = False,
            inherit: str | None = None) -> dict[str, Any]:
    """An integer in [low, high]; ``cap=True`` makes ``high`` a config-only size cap; ``inherit``
    names the study key that supplies it when a config leaves it out (e.g. ``"horizon"``)."""
    return {"kind": "int", "low": low, "high": high, "cap": cap, "inherit": inherit}


def choice(*choices: str, cap: bool = False) -> dict[str, Any]:
    """One of the given strings; ``cap=True`` restricts configs only (the Python constructor also
    takes other forms, e.g. an array of contexts)."""
    return {"kind": "str", "choices": tuple(choices), "cap": cap}


def floats(low: float | None = None, high: float | None = None, *, low_open: bool = False,
           high_open: bool = False, inherit: str | None = None) -> dict[str, Any]:
    """A list of numbers, each in [low, high] (``inherit``: the study key supplying a default)."""
    return {"kind": "floats", "low": low, "high": high, "low_open": low_open, "high_open": high_open,
            "inherit": inherit}


def ints(low: int | None = None, high: int | None = None) -> dict[str, Any]:
    """A list of integers, each in [low, high]."""
    return {"kind": "ints", "low": low, "high": high}


def strs(*choices: str) -> dict[str, Any]:
    """A list of strings (each one of ``choices`` when given)."""
    return {"kind": "strs", "choices": choices or None}


def group_label_list() -> dict[str, Any]:
    """A group label per item: all strings (names) or all integers >= 0 (indices)."""
    return {"kind": "labels", "low": 0}


def pair() -> dict[str, Any]:
    """Two numbers ``[low, high]`` (passed to the constructor as a tuple)."""
    return {"kind": "pair"}


# ---------------------------------------------------------------------------------------------
# entries


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
    specs : dict
        Declared kinds and ranges per parameter (see :func:`declare`).
    hidden : tuple of str
        Constructor parameters not offered in configs (e.g. array-only ones).
    example : dict, list of dicts or None
        Config-style arguments the contract test builds it with (``{}`` when none are needed; a
        list for several cases).
    example_env : dict or None
        For policies: the environment table the contract test runs the examples on (default: the
        Bernoulli arms of :data:`EXAMPLE_ENV`).
    """

    kind: str
    name: str
    target: str | Callable[..., Any]
    doc: str = ""
    specs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    hidden: tuple[str, ...] = ()
    example: Any = None
    example_env: Mapping[str, Any] | None = None

    def examples(self) -> list[dict[str, Any]]:
        """The declared examples as config tables ``{"name": ..., **arguments}``."""
        ex = self.example if isinstance(self.example, (list, tuple)) else [self.example or {}]
        return [{"name": self.name, **dict(e)} for e in ex]

    @property
    def path(self) -> str:
        """The import path of the constructor."""
        if isinstance(self.target, str):
            return self.target
        return f"{self.target.__module__}:{self.target.__qualname__}"

    def resolve(self) -> Callable[..., Any]:
        """Import and return the constructor (raises :class:`ConfigError` if unavailable)."""
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
        """The schema: one :class:`Param` per config key, from the signature and the declaration."""
        fn = inspect.unwrap(self.resolve())
        out = []
        for p in inspect.signature(fn).parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in self.hidden:
                continue
            spec = dict(self.specs.get(p.name) or _infer(p))
            if p.name == "horizon" and p.default is p.empty:
                spec.setdefault("inherit", "horizon")  # a constructor that needs T gets the study's horizon
            default = _REQUIRED if p.default is p.empty else p.default
            out.append(Param(p.name, default=default, **spec))
        return tuple(out)

    def summary(self) -> str:
        """The docstring's summary (or ``doc``): :func:`doc_summary`."""
        if self.doc:
            return self.doc
        try:
            return doc_summary(self.resolve())
        except ConfigError:
            return ""


def doc_summary(obj: Any) -> str:
    """The summary of ``obj``'s docstring: its first paragraph (up to the first blank line) on one
    line, so that a summary written over two lines is not cut after the first."""
    text = (inspect.getdoc(obj) or "").strip()
    return " ".join(text.split("\n\n", 1)[0].split())


def _infer(p: inspect.Parameter) -> dict[str, Any]:
    """Kind of an undeclared parameter: from its annotation (merit/posterior objects) or its default."""
    ann = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", "")
    words = set(re.findall(r"\w+", ann or ""))
    if "Merit" in words:
        return {"kind": "merit", "inherit": "merit"}
    if words & {"Posterior", "LinearPosterior"}:
        return {"kind": "posterior"}
    d = p.default
    if isinstance(d, bool):
        return {"kind": "bool"}
    if isinstance(d, int):
        return {"kind": "int"}
    if isinstance(d, float):
        return {"kind": "float"}
    if isinstance(d, str):
        return {"kind": "str"}
    return {"kind": "any"}


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
_BROKEN: dict[str, dict[str, str]] = {k: {} for k in KINDS}  # module -> import error
_DISCOVERED: set[str] = set()


_PYTHON_ONLY: dict[str, dict[str, tuple[Callable[..., Any], str]]] = {k: {} for k in KINDS}


def python_only(kind: str, reason: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a constructor as available from Python only, with the reason (e.g. it takes a model
    function or array layouts a config cannot express): ``bayesfair list`` shows it with the reason,
    and a config that names it is refused with the reason instead of "unknown"."""
    _check_kind(kind)

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        _PYTHON_ONLY[kind][fn.__name__] = (fn, reason)
        return fn

    return wrap


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return kind


def register(kind: str, name: str, target: str | Callable[..., Any], *, doc: str = "",
             specs: Mapping[str, Mapping[str, Any]] | None = None, hidden: tuple[str, ...] = (),
             example: Any = None, example_env: Mapping[str, Any] | None = None) -> Entry:
    """Register (or replace) a named constructor; :func:`declare` is the decorator form.

    Parameters
    ----------
    kind : {"policy", "environment", "posterior", "merit"}
    name : str
        The name configs use.
    target : callable or str
        The constructor, or its import path ``"module:function"`` (imported lazily).
    doc : str
        One-line description (default: the constructor's docstring).
    specs : mapping, optional
        Kind and range per parameter (:func:`real`, :func:`integer`, :func:`choice`, ... or a dict
        of :class:`Param` fields).
    hidden : tuple of str
        Constructor parameters that configs may not set.
    example : mapping, optional
        Config-style arguments that build it (for the contract test); required parameters need one.
    example_env : mapping, optional
        For policies: the environment table its examples run on.
    """
    _check_kind(kind)
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    entry = Entry(kind, name, target, doc, dict(specs or {}), tuple(hidden), example,
                  None if example_env is None else dict(example_env))
    _ENTRIES[kind][name] = entry
    return entry


def declare(kind: str, name: str | None = None, *, doc: str = "", hidden: tuple[str, ...] = (),
            example: Any = None, example_env: Mapping[str, Any] | None = None,
            **specs: Mapping[str, Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a constructor: its name, kind and parameter ranges, next to its signature.

    Parameters
    ----------
    kind : {"policy", "environment", "posterior", "merit"}
    name : str, optional
        The config name (default: the function's name).
    doc, hidden
        As for :func:`register`.
    example : mapping or list of mappings, optional
        Config-style arguments that build it, for the contract test (default ``{}``).
    example_env : mapping, optional
        For policies: the environment table (``{"name": "linear_bandit", ...}``) its examples run
        on in the contract test (default :data:`EXAMPLE_ENV`, Bernoulli arms in three groups).
    **specs
        Kind and range of parameters (:func:`real`, :func:`integer`, :func:`choice`, ...).

    Returns
    -------
    callable
        A decorator returning the constructor wrapped so that its arguments are checked against the
        declared ranges; a policy that records no ``config`` of its own gets
        ``{"algorithm": name, <bound arguments>}`` (merits by description, posteriors by name and
        parameters).
    """
    _check_kind(kind)

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        key = name or fn.__name__
        sig = inspect.signature(fn)
        unknown = sorted(set(specs) - set(sig.parameters))
        if unknown:
            raise TypeError(f"declare({key!r}): {fn.__name__} has no parameter {unknown[0]!r}")
        params: dict[str, Param] = {}

        @functools.wraps(fn)
        def constructor(*args: Any, **kwargs: Any) -> Any:
            if not params:
                params.update({p.name: p for p in entry.params()})
            bound = sig.bind(*args, **kwargs)
            for arg, value in bound.arguments.items():
                if arg in specs:
                    bound.arguments[arg] = params[arg].check_call(value)
            out = fn(*bound.args, **bound.kwargs)
            if kind == "policy" and hasattr(out, "_replace") and not out.config:
                bound.apply_defaults()
                out = out._replace(config=_config_of(key, bound.arguments, hidden))
            return out

        constructor.__bayesfair_entry__ = key  # type: ignore[attr-defined]
        constructor.__bayesfair_kind__ = kind  # type: ignore[attr-defined]
        entry = register(kind, key, constructor, doc=doc, specs=specs, hidden=hidden,
                         example={} if example is None else example, example_env=example_env)
        return constructor

    return wrap


def _config_value(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_config_value(v) for v in value]
    if hasattr(value, "tolist") and not hasattr(value, "describe"):
        return value.tolist()
    return value


def _no_describer(value: Any) -> Any:
    raise TypeError(f"cannot record {value!r}: no describer for plain callables is installed")


_describe_callable: Callable[[Any], Any] = _no_describer


def set_callable_describer(fn: Callable[[Any], Any]) -> None:
    """Install how a plain callable argument is recorded in a policy's config.

    :mod:`bayesfair.core.merit` installs ``resolve_merit(fn).describe()`` (a plain function given
    where a merit is expected); the declarations stay below the merit module that uses them.
    """
    global _describe_callable
    _describe_callable = fn


def _config_of(name: str, arguments: Mapping[str, Any], hidden: tuple[str, ...]) -> dict[str, Any]:
    """A policy's recorded config from its bound arguments: merits by their description,
    posteriors as a nested table ``{"name": family, **hyper-parameters}`` (so their names cannot
    collide with the policy's own), objects without a JSON form left to the constructor."""
    out: dict[str, Any] = {"algorithm": name}
    for arg, value in arguments.items():
        if arg in hidden:
            continue
        if hasattr(value, "describe") and callable(value.describe):  # a Merit
            out[arg] = value.describe()
        elif callable(value) and not hasattr(value, "init"):  # a merit given as a plain function
            out[arg] = _describe_callable(value)
        elif hasattr(value, "params") and isinstance(getattr(value, "name", None), str):  # a posterior
            out[arg] = {"name": value.name, **{k: _config_value(v) for k, v in value.params.items()}}
        elif value is None or isinstance(value, (bool, int, float, str, tuple, list)) or hasattr(value, "tolist"):
            out[arg] = _config_value(value)
    return out



#: The environment policy examples run on unless they declare another: six Bernoulli arms in
#: three groups of sizes 1, 3, 2 (with study floors for the bi-level policies).
EXAMPLE_ENV = {"name": "bernoulli_arms", "means": [0.1, 0.26, 0.42, 0.58, 0.74, 0.9], "group_sizes": [1, 3, 2]}
#: Conjugate multi-armed posteriors the examples of posterior-based policies run with.
EXAMPLE_POSTERIORS = [
    "beta_bernoulli", {"name": "beta_bernoulli", "a0": 0.5, "b0": 0.5},
    {"name": "normal_known_variance", "prior_mean": 0.5, "prior_var": 1.0, "noise_var": 0.25},
    {"name": "normal_inverse_gamma", "m0": 0.5, "kappa0": 1.0, "a0": 2.0, "b0": 0.5},
    {"name": "normal_inverse_gamma", "m0": 0.5, "kappa0": 1.0, "a0": 0.5, "b0": 0.5},
]
#: The study values examples inherit (merit, horizon, group floors of :data:`EXAMPLE_ENV`).
EXAMPLE_STUDY = {"merit": {"name": "exponential", "c": 3.0}, "horizon": 1000, "floors": [0.2, 0.3, 0.25]}



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
    if k == "labels":
        if not isinstance(value, list) or not value:
            raise wrong()
        if all(isinstance(v, str) for v in value):
            return value
        return check_value(replace(p, kind="ints"), value, path)
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


