"""Fuzzing the study CLI: generated configs either work or fail clearly.

A property-based test (hypothesis) generates study configs across the registry -- every policy,
environment, posterior and merit, with constructor arguments drawn per :class:`~bayesfair.workflow.registry.Param`
(defaults, in-range and boundary values, out-of-range values, wrong types, NaN/inf, huge values,
lists with a bad element, unknown keys, missing or mistyped tables, policies that do not fit the
environment) -- writes each as TOML and runs ``bayesfair simulate CONFIG --dry-run`` or a tiny study
(a few runs of 5-30 rounds). Every case must end in

* exit code 0, and for a study a results file whose regret/exposure variables are finite; or
* exit code 2 with a short ``bayesfair: config error: <key path>: ...`` (or ``bayesfair: error:``)
  message and no traceback.

Exit code 1, a traceback, an uncaught exception, a case over its time limit (hang) or a non-finite
result is a *finding*. Cases are collected (not stopped at the first finding) and the test prints a
summary line (``pytest -s``) with the counts, then fails listing every finding with its TOML.

Generated configs are *clean* (every value valid on its own; the combination may still not fit),
*dirty* (some generic, often bad, values, unknown keys, broken tables) or, for tiny studies,
*extreme* (valid but extreme values: 1e-15, 1e15, next to an open bound).

Profiles: the default suite runs a derandomized profile of ~45 s (240 in-process dry-runs under a
SIGALRM time limit and an address-space limit, and 12 in-process tiny studies);
``pytest -m slow tests/test_fuzz.py -s`` runs a larger random profile (``BAYESFAIR_FUZZ_EXAMPLES``
cases, default 300, a tenth of them tiny studies in a subprocess with a timeout;
``BAYESFAIR_FUZZ_SEED`` replays a run; ``BAYESFAIR_FUZZ_TRACE=file`` keeps the TOML of the case
being run, should the whole process die). Both print ``fuzz[...]: N cases (...): S successes, E
clear errors, F findings`` (``-s``).

Findings the fuzzer made are kept as plain cases: ``REGRESSIONS`` (fixed) and ``OPEN_FINDINGS``
(in modules outside this test's remit, ``xfail(strict=True)`` with the reproduction).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _checks import EXAMPLE_ENV, EXAMPLE_STUDY  # noqa: E402

import bayesfair  # noqa: F401  (must precede jax)
from bayesfair.core.declare import REAL_MAX, REAL_MIN
from bayesfair.workflow import registry

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"

NAN, INF = float("nan"), float("inf")

# ---------------------------------------------------------------------------------------------
# a small TOML writer (tomllib only reads)

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k: str) -> str:
    return k if _BARE.match(k) else _string(k)


def _string(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        text = repr(v)
        return text if any(c in text for c in ".eE") else text + ".0"
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"TOML cannot hold {v!r}")


def toml_dumps(doc: dict[str, Any]) -> str:
    """TOML text of a document of str/bool/int/float (incl. nan, inf)/list/dict values.

    Top-level and nested tables become ``[a."b c".d]`` sections; tables inside arrays are inline.
    """
    lines: list[str] = []

    def table(d: dict[str, Any], prefix: list[str]) -> None:
        subs = [(k, v) for k, v in d.items() if isinstance(v, dict)]
        for k, v in d.items():
            if not isinstance(v, dict):
                lines.append(f"{_key(k)} = {_value(v)}")
        for k, v in subs:
            path = [*prefix, _key(k)]
            lines.append("")
            lines.append(f"[{'.'.join(path)}]")
            table(v, path)

    table(doc, [])
    return "\n".join(lines) + "\n"


def _same(a: Any, b: Any) -> bool:
    """Equality with nan == nan (for the writer's round-trip check)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


# ---------------------------------------------------------------------------------------------
# value strategies, per registry Param

JUNK = ["x", "", " ", 1.5, -1, 0, True, False, [1.0], [], {}, {"a": 1}, NAN, INF, -INF, 10**18, [[1]], ["a"],
        "nan", "1", [True], -0.0]
TEXTS = ["a", "abc", "median", "ünï", 'q"uo\\te', "tab\there", "line\nbreak", "  ", "x" * 60, "é漢字", "0.5"]
HUGE = [1e300, -1e300, 1e-300, 5e-324, 2**31, 2**53 + 1, 2**62, -(2**62), 1e20, 1.7976931348623157e308]


def _floats(lo: float, hi: float, *, exclude_min: bool = False, exclude_max: bool = False):
    return st.floats(lo, hi, exclude_min=exclude_min, exclude_max=exclude_max, allow_nan=False,
                     allow_infinity=False, allow_subnormal=False)


def _in_range_float(p: registry.Param):
    lo = p.low if p.low is not None else (p.high - 10.0 if p.high is not None else -10.0)
    hi = p.high if p.high is not None else lo + 10.0
    return _floats(lo, hi, exclude_min=p.low is not None and p.low_open, exclude_max=p.high is not None and p.high_open)


def _in_range_int(p: registry.Param):
    lo = int(math.ceil(p.low)) if p.low is not None else -3
    if p.low is not None and p.low_open and lo == p.low:
        lo += 1
    hi = int(p.high) if p.high is not None else lo + 12
    return st.integers(lo, max(lo, hi))


def _extremes(p: registry.Param) -> list[Any]:
    """Valid but extreme values of a number parameter (within the registry's float32-safe
    magnitudes, ``REAL_MIN``/``REAL_MAX``)."""
    if p.kind == "int":
        lo = int(math.ceil(p.low)) if p.low is not None else -(10**6)
        return [lo, lo + 1, 10**6 if p.high is None else int(p.high)]
    big, tiny = REAL_MAX, REAL_MIN
    lo = -big if p.low is None else (float(np.nextafter(p.low, np.inf)) if p.low_open else float(p.low))
    hi = big if p.high is None else (float(np.nextafter(p.high, -np.inf)) if p.high_open else float(p.high))
    out = [max(lo, -big), min(hi, big)]
    if p.low is not None and p.low_open and p.low == 0:
        out = [tiny, 1e-12, *out[1:]]
    if p.high is None:
        out += [1e12]
    return out


def _boundaries(p: registry.Param) -> list[Any]:
    out = []
    for b in (p.low, p.high):
        if b is not None:
            out += [b, b - 1, b + 1] if p.kind == "int" else [float(b), float(b) - 0.5, float(b) + 0.5,
                                                                 float(np.nextafter(b, -np.inf)),
                                                                 float(np.nextafter(b, np.inf))]
    return out or [0, -1]


def chance(p: float):
    """True with probability ``p`` (hypothesis' integers and floats favour small values; a
    sampled_from index is near-uniform)."""
    return st.sampled_from(range(1000)).map(lambda v: v < p * 1000)


BAD_RATE = 0.3  # share of generic (often bad) values in a dirty case
EXTREME_RATE = 0.35  # share of extreme in-range values in an extreme case


@st.composite
def param_value(draw, p: registry.Param, valid: Any = None, mode: str = "dirty"):
    """A value for ``p``: ``valid`` (a strategy of context-aware good values, else the generic
    in-range values), or in a ``dirty`` case with probability ``BAD_RATE`` a generic in-range,
    boundary, out-of-range, non-finite, huge or wrongly typed value, or in an ``extreme`` case with
    probability ``EXTREME_RATE`` a valid but extreme value (1e-300, 1e300, next to an open bound)."""
    cat = "valid"
    if mode == "extreme" and p.kind in ("int", "float", "floats", "float_or_floats") and p.choices is None \
            and draw(chance(EXTREME_RATE)):
        v = draw(st.sampled_from(_extremes(p)))
        return [v] if p.kind == "floats" else v
    if mode == "dirty" and draw(chance(BAD_RATE)):
        cat = draw(st.sampled_from(["generic", "boundary", "wrong", "nonfinite", "huge", "listbad"]))
    if cat == "valid" and valid is not None:
        return draw(valid)
    k = p.kind
    if cat in ("valid", "generic"):
        if p.choices is not None:
            return draw(st.sampled_from(list(p.choices)))
        if k == "int":
            return draw(_in_range_int(p))
        if k == "float":
            return draw(_in_range_float(p))
        if k == "bool":
            return draw(st.booleans())
        if k == "str":
            return draw(st.sampled_from(TEXTS))
        if k in ("floats", "pair", "float_or_floats", "means"):
            n = 2 if k == "pair" else draw(st.integers(1, 5))
            elems = _in_range_float(p) if (p.low is not None or p.high is not None) else _floats(-2.0, 2.0)
            out = draw(st.lists(elems, min_size=n, max_size=n))
            return sorted(out) if k == "pair" else out
        if k in ("ints", "labels"):
            return draw(st.lists(_in_range_int(p), min_size=1, max_size=5))
        if k == "strs":
            return draw(st.lists(st.sampled_from(TEXTS), min_size=1, max_size=4))
        if k == "float_or_str":
            return draw(st.one_of(_floats(0.01, 5.0), st.sampled_from(["median", "auto", "x"])))
        if k in ("merit", "posterior"):
            return draw(merit_table(mode) if k == "merit" else posterior_table(mode=mode))
        return draw(st.sampled_from(JUNK))
    if cat == "boundary":
        if k in ("int", "float"):
            return draw(st.sampled_from(_boundaries(p)))
        if k in ("floats", "ints", "labels", "pair", "means", "float_or_floats"):
            b = draw(st.sampled_from(_boundaries(p)))
            return [b, b] if k == "pair" else [b]
        return draw(st.sampled_from(JUNK))
    if cat == "nonfinite":
        v = draw(st.sampled_from([NAN, INF, -INF]))
        if k in ("floats", "pair", "means", "float_or_floats", "ints", "labels"):
            return draw(st.sampled_from([[v], [0.5, v], [v, 1.0]]))
        return v
    if cat == "huge":
        v = draw(st.sampled_from(HUGE))
        if k in ("floats", "pair", "means", "float_or_floats", "ints", "labels"):
            return draw(st.sampled_from([[v], [0.5, v], [-v, v]]))
        return v
    if cat == "listbad" and k in ("floats", "ints", "labels", "strs", "pair", "means", "float_or_floats"):
        return draw(st.sampled_from([[0.5, "x"], [[0.5]], [True, 0.5], [0.1, 0.2, 0.3], [{}], [1, 2.5]]))
    return draw(st.sampled_from(JUNK))


# ---------------------------------------------------------------------------------------------
# registry tables

def _params(kind: str, name: str) -> dict[str, registry.Param]:
    return {p.name: p for p in registry.get(kind, name).params()}


def _table_of(kind: str, name: str, valid: dict[str, Any] | None = None, *, p_set: float = 0.3,
              mode: str = "dirty"):
    """``{name = ..., param = ...}`` with each parameter set with probability ``p_set`` (required
    ones always), from ``valid[param]`` strategies when given, else the generic values."""
    valid = valid or {}

    @st.composite
    def make(draw):
        out: dict[str, Any] = {"name": name}
        for pname, p in _params(kind, name).items():
            if p.kind == "any" and pname not in valid and not p.is_required:
                continue
            if p.is_required or draw(chance(p_set)):
                out[pname] = draw(param_value(p, valid.get(pname), mode))
        if mode == "dirty" and draw(chance(0.03)):
            out[draw(st.sampled_from(["bogus", "epsilom", "Name", "prior"]))] = draw(st.sampled_from(JUNK))
        if mode == "dirty" and draw(chance(0.02)):
            del out["name"]
        return out

    return make()


def merit_table(mode: str = "dirty"):
    return st.one_of(
        _table_of("merit", "exponential", {"c": _floats(0.1, 8.0), "domain": st.sampled_from(
            [[0.0, 1.0], [-5.0, 5.0], [-100.0, 100.0], [0.0, 0.5]])}, mode=mode),
        _table_of("merit", "identity", {"floor": _floats(1e-3, 0.5), "domain": st.sampled_from(
            [[0.0, 1.0], [-5.0, 5.0], [0.0, 0.5]])}, mode=mode),
        st.sampled_from(["identity", "expo", "bayesfair.core.merit:exponential", 4.0, "bayesfair.core.merit:nope"]
                        if mode == "dirty" else ["identity"]),
    )


_POSTERIOR_VALID = {"a0": _floats(0.1, 5.0), "b0": _floats(0.1, 5.0), "prior_var": _floats(0.1, 5.0),
                    "noise_var": _floats(0.1, 5.0), "kappa0": _floats(0.1, 5.0),
                    "prior_mean": _floats(-1.0, 1.0), "m0": _floats(-1.0, 1.0)}


def _built_example(kind: str, entry: registry.Entry) -> Any:
    _, norm = registry.check_params(kind, entry.examples()[0], kind, study=EXAMPLE_STUDY)
    return registry.build(kind, norm, kind)


def _is_contextual(env: dict[str, Any]) -> bool:
    """Whether the environment table builds a contextual environment (candidates with features)."""
    _, norm = registry.check_params("environment", env, "environment")
    return registry.build("environment", norm, "environment").spec.n_features > 0


def _split_by_declaration() -> tuple[list[str], list[str], list[str], list[str]]:
    """Every declared posterior and policy, split into multi-armed and contextual ones: posteriors by
    the type their first example builds, policies by the environment their examples run on in the
    contract test (``example_env``). A newly declared one is fuzzed with no edit here."""
    mab_post, lin_post, mab_pol, lin_pol = [], [], [], []
    for e in registry.entries("posterior"):
        linear = type(_built_example("posterior", e)).__name__ == "LinearPosterior"
        (lin_post if linear else mab_post).append(e.name)
    for e in registry.entries("policy"):
        (lin_pol if _is_contextual(dict(e.example_env or EXAMPLE_ENV)) else mab_pol).append(e.name)
    return mab_post, lin_post, mab_pol, lin_pol


MAB_POSTERIORS, LIN_POSTERIORS, MAB_POLICIES, LIN_POLICIES = _split_by_declaration()


def posterior_table(names: list[str] | None = None, mode: str = "dirty"):
    names = names or MAB_POSTERIORS + LIN_POSTERIORS
    return st.one_of(*(_table_of("posterior", n, _POSTERIOR_VALID, mode=mode) for n in names),
                     st.sampled_from([*names, "beta_bernouli"] if mode == "dirty" else names))


# ---------------------------------------------------------------------------------------------
# environments: context-aware good values, then the generic perturbations

CHEAP_MAB = ["bernoulli_arms", "gaussian_arms"]
CHEAP_LIN = ["linear_bandit", "synthetic_biased", "gmf_synthetic", "gmf_multigroup"]
DATA_ENVS = ["yeast_bandit", "compas_bandit", "family_income_bandit", "gmf_adult"]
ARRAY_ENVS = ["gmf_population", "biased_linear_bandit", "biased_data_bandit"]
# every other declared environment is fuzzed from its declared examples (then perturbed)
OTHER_ENVS = [n for n in registry.names("environment") if n not in {*CHEAP_MAB, *CHEAP_LIN, *DATA_ENVS, *ARRAY_ENVS}]


@st.composite
def _group_spec(draw, k: int) -> dict[str, Any]:
    """groups / group_sizes / group_names for k arms (usually consistent)."""
    out: dict[str, Any] = {}
    how = draw(st.sampled_from(["none", "labels", "sizes", "none"]))
    n_groups = 1
    if how == "labels":
        n_groups = draw(st.integers(1, min(3, k)))
        labels = [i % n_groups for i in range(k)]
        out["groups"] = draw(st.permutations(labels))
    elif how == "sizes" and k >= 1:
        n_groups = draw(st.integers(1, min(3, k)))
        cuts = sorted(draw(st.lists(st.integers(1, k - 1), min_size=n_groups - 1, max_size=n_groups - 1,
                                    unique=True))) if k > 1 else []
        n_groups = len(cuts) + 1
        bounds = [0, *cuts, k]
        out["group_sizes"] = [b - a for a, b in zip(bounds, bounds[1:], strict=False)]
    if how != "none" and draw(st.booleans()):
        out["group_names"] = [f"g{i}" for i in range(n_groups)]
    return out


@st.composite
def env_table(draw, name: str, mode: str = "dirty") -> dict[str, Any]:
    params = _params("environment", name)
    out: dict[str, Any] = {"name": name}
    if name in ("bernoulli_arms", "gaussian_arms"):
        k = draw(st.integers(1, 6))
        lo, hi = (0.0, 1.0) if name == "bernoulli_arms" or draw(st.booleans()) else (-3.0, 3.0)
        if draw(st.integers(0, 3)) == 0:
            a, b = sorted(draw(st.lists(_floats(lo, hi), min_size=2, max_size=2)))
            out["means"] = {"low": a, "high": b}
            out["n_arms"] = k
        else:
            out["means"] = draw(st.lists(_floats(lo, hi), min_size=k, max_size=k))
        out.update(draw(_group_spec(k)))
        if name == "gaussian_arms" and draw(st.booleans()):
            out["sigma"] = draw(_floats(0.05, 3.0))
    elif name == "linear_bandit":
        k, d = draw(st.integers(1, 5)), draw(st.integers(1, 4))
        out.update(n_arms=k, n_features=d)
        if draw(st.booleans()):
            out["theta"] = draw(st.lists(_floats(-1.0, 1.0), min_size=d, max_size=d))
        out["noise"] = draw(st.sampled_from(["gaussian", "bernoulli"]))
        out["contexts"] = draw(st.sampled_from(["sphere", "gaussian"]))
        if draw(st.booleans()):
            out["groups"] = [i % 2 for i in range(k)]
        if draw(chance(0.25)) and (mode == "dirty" or (out["noise"] == "gaussian" and "theta" in out
                                              and out["contexts"] == "sphere")):
            out["reward_range"] = draw(st.sampled_from([[0.0, 1.0], [-10.0, 10.0], [-1.0, 2.0]]))
    elif name == "synthetic_biased":
        n = draw(st.integers(4, 7))
        out.update(n_arms=n, n_sensitive=draw(st.integers(2, n - 2)), n_features=draw(st.integers(1, 3)))
    elif name in ("gmf_synthetic", "gmf_multigroup"):
        g = 4
        if draw(st.booleans()):
            g, m = draw(st.integers(1, 3)), draw(st.integers(1, 3))
            out["group_weights"] = [[float(1 + (i + j) % 3) for j in range(m)] for i in range(g)]
            if mode != "clean" and draw(chance(0.5)):
                out["group_weights"][0][0] = draw(st.sampled_from([1e12, -1e15, 1e-15, 0.0] if mode == "extreme"
                                                                  else [1e300, NAN, "x", [1.0]]))
            if draw(st.booleans()):
                out.update(n_groups=g, block_size=m)
        if name == "gmf_multigroup":
            out["n_candidates"] = draw(st.integers(1, 4))
            out["proportions"] = [1.0 / g] * g
    elif name == "yeast_bandit":
        out["mode"] = draw(st.sampled_from(["mab", "linear"]))
        out["n_rff"] = draw(st.integers(2, 8))
        if draw(st.booleans()):
            out["part"] = draw(st.sampled_from(["validation", "test"]))
    elif name == "gmf_adult":
        out["n_candidates"] = draw(st.integers(1, 5))
        out["group"] = draw(st.sampled_from(["race", "sex"]))
    elif name == "family_income_bandit":
        out["n_buckets"] = draw(st.integers(2, 5))
    elif name == "gmf_population" and mode != "dirty":
        n, d, g = draw(st.integers(2, 8)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
        out["features"] = draw(st.lists(st.lists(_floats(-2.0, 2.0), min_size=d, max_size=d), min_size=n, max_size=n))
        out["mean_reward"] = draw(st.lists(_floats(-1.0, 1.0), min_size=n, max_size=n))
        out["groups"] = [i % g for i in range(n)]
        out["n_candidates"] = draw(st.integers(1, 4))
    elif name == "biased_linear_bandit" and mode != "dirty":
        k = draw(st.integers(2, 3))
        out["group_of_arm"] = [0] * k + [1] * draw(st.integers(2, 3))
        out["n_features"] = draw(st.integers(1, 3))
    elif name in OTHER_ENVS:
        out.update(draw(st.sampled_from(registry.get("environment", name).examples())))
    elif name in ARRAY_ENVS:
        for pname, p in params.items():
            if p.is_required:
                out[pname] = draw(st.sampled_from([[[0.1, 0.2], [0.3, 0.4]], [0, 1], [0.5, 0.7], 3, "x", [[0]],
                                                   [[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]], {"a": [1, 2]}]))
    # perturb: each parameter with a small probability gets a generic (possibly bad) value
    n_mut = draw(st.sampled_from([0, 0, 1, 1, 2])) if mode != "clean" else 0
    for _ in range(n_mut):
        pname = draw(st.sampled_from(sorted(params)))
        out[pname] = draw(param_value(params[pname], mode=mode if draw(chance(0.7)) else "clean"))
    if n_mut and draw(st.integers(0, 5)) == 0 and len(out) > 1:
        del out[draw(st.sampled_from(sorted(k for k in out if k != "name")))]
    return out


# ---------------------------------------------------------------------------------------------
# policies

_POLICY_VALID = {
    "epsilon": _floats(0.0, 1.0), "delta": _floats(0.01, 0.5), "steps": st.integers(0, 12),
    "learning_rate": _floats(1e-3, 0.5), "lam": _floats(0.05, 3.0), "noise_sd": _floats(0.1, 3.0),
    "theta_bound": _floats(0.1, 20.0), "sigma": _floats(0.1, 3.0), "ridge": _floats(1e-3, 1.0),
    "rho": _floats(0.01, 1.0), "tau": _floats(0.1, 5.0), "s": _floats(0.1, 20.0), "prior_sd": _floats(0.1, 10.0),
    "w0": _floats(0.1, 3.0), "initial_estimate": _floats(0.0, 1.0), "block": st.integers(1, 8),
    "horizon": st.integers(1, 40), "reference": st.integers(0, 1),
    "reward_range": st.sampled_from([[0.0, 1.0], [-1.0, 2.0], [-20.0, 20.0]]),
    "groups_beta": st.sampled_from([[0.2, 0.2], [0.1, 0.3], [0.5], [0.3, 0.3, 0.3]]),
}


def policy_table(name: str, linear: bool, mode: str = "dirty"):
    valid = dict(_POLICY_VALID)
    valid["posterior"] = posterior_table(LIN_POSTERIORS if linear else MAB_POSTERIORS, mode)
    valid["merit"] = merit_table(mode)
    return _table_of("policy", name, valid, p_set=0.4 if mode == "extreme" else 0.25, mode=mode)


# ---------------------------------------------------------------------------------------------
# whole configs

TOP_UNKNOWN = ["horizn", "policy", "seeds", "Runs", "environments"]


@dataclass
class Case:
    raw: dict[str, Any]
    run: bool  # a tiny study (else a dry-run)
    note: str = ""


def _n_groups(env: dict[str, Any]) -> int | None:
    """The number of groups of a generated environment table, when easy to tell."""
    name = env.get("name")
    try:
        if name in ("bernoulli_arms", "gaussian_arms"):
            if isinstance(env.get("group_sizes"), list):
                return len(env["group_sizes"])
            return len(set(env["groups"])) if isinstance(env.get("groups"), list) else 1
        if name == "linear_bandit":
            return len(set(env["groups"])) if isinstance(env.get("groups"), list) else 1
        if name in ("gmf_synthetic", "gmf_multigroup"):
            return len(env["group_weights"]) if isinstance(env.get("group_weights"), list) else 4
        if name == "synthetic_biased":
            return 2
    except TypeError:
        return None
    return None


GROUP_POLICIES = ("bf_ucb", "bf_ts", "gef", "gef_ts", "naive_fair", "group_fair_top_interval", "group_fair_ts")


def _fit(env: dict[str, Any], policies: dict[str, Any], merit: Any) -> None:
    """Make a clean case fit more often (in place): two groups of >= 2 arms for group policies,
    floors of the right length, a merit domain that holds Gaussian means."""
    names = {t.get("name") for t in policies.values() if isinstance(t, dict)}
    k = env.get("n_arms") if env.get("name") == "linear_bandit" else (
        len(env["means"]) if isinstance(env.get("means"), list) else env.get("n_arms"))
    if names & set(GROUP_POLICIES) and env.get("name") in CHEAP_MAB + ["linear_bandit"] and isinstance(k, int) \
            and k >= 4:
        env.pop("group_sizes", None)
        env.pop("group_names", None)
        env["groups"] = [i % 2 for i in range(k)]
    n = _n_groups(env)
    for t in policies.values():
        if isinstance(t, dict) and "groups_beta" in t and n:
            t["groups_beta"] = [round(0.9 / n / 2, 6)] * n
    if env.get("name") == "gaussian_arms" and isinstance(merit, dict) and "domain" not in merit:
        merit["domain"] = [-5.0, 5.0]


@st.composite
def study_case(draw, *, run: bool | None = None, mode: str | None = None, data_envs: bool = True) -> Case:
    """A whole config: a clean one (every value valid on its own; the combination may still not
    fit, e.g. a multi-armed policy on a contextual environment), a dirty one (some generic,
    often bad, values, unknown keys, broken tables) or an extreme one (valid extreme values)."""
    if run is None:
        run = draw(chance(0.1))
    if mode is None:
        mode = draw(st.sampled_from(["clean", "clean", "extreme"] if run else ["clean", "dirty"]))
    dirty = mode == "dirty"
    data = DATA_ENVS if data_envs and SHARED.is_dir() else []
    arrays = ["gmf_population", "biased_linear_bandit"]
    pool = CHEAP_MAB * 4 + CHEAP_LIN * 2 + arrays + data if run else \
        CHEAP_MAB * 3 + CHEAP_LIN * 2 + ARRAY_ENVS + OTHER_ENVS + data
    env_name = draw(st.sampled_from(pool))
    env = draw(env_table(env_name, mode))
    linear = env_name not in CHEAP_MAB and not (env_name == "yeast_bandit" and env.get("mode") != "linear")
    if env_name in OTHER_ENVS:
        try:
            linear = _is_contextual(env)
        except (registry.ConfigError, ValueError, TypeError):  # a perturbed table: either pool will do
            pass
    fitting = LIN_POLICIES if linear else MAB_POLICIES
    n_pol = draw(st.integers(1, 1 if run else 2))
    policies: dict[str, Any] = {}
    for i in range(n_pol):
        pool_p = MAB_POLICIES + LIN_POLICIES if draw(chance(0.15)) else fitting
        pname = draw(st.sampled_from(pool_p))
        label = f"{pname}-{i}"
        if dirty and draw(chance(0.05)):
            label = draw(st.sampled_from([f"P{i} {pname}", "a.b", " ", "ünï", "a::b"]))
        policies[label] = draw(policy_table(pname, pname in LIN_POLICIES, mode))
    merit = draw(merit_table(mode))
    if not dirty and draw(chance(0.8)):
        _fit(env, policies, merit)
    horizon = draw(st.integers(5, 30)) if run else draw(st.integers(1, 200))
    raw: dict[str, Any] = {
        "name": "fz", "seed": draw(st.integers(0, 2**31)), "runs": draw(st.integers(1, 2 if run else 4)),
        "horizon": horizon, "merit": merit, "environment": env, "policies": policies,
    }
    if draw(chance(0.5)):
        raw["chunk_size"] = draw(st.integers(1, 40))
    if draw(chance(0.3)):
        raw["checkpoints"] = draw(st.one_of(st.integers(1, 10), st.lists(st.integers(1, horizon), min_size=1,
                                                                           max_size=4)))
    n_groups = _n_groups(env)
    needs_floors = any(isinstance(t, dict) and t.get("name") in ("bf_ucb", "bf_ts", "gef", "gef_ts")
                       and "groups_beta" not in t for t in policies.values())
    if draw(chance(0.8 if needs_floors else 0.2)) and (n_groups or dirty):
        n = n_groups or 2
        raw["floors"] = [round(0.9 / n / 2, 6)] * n if not dirty or draw(chance(0.7)) else \
            draw(st.sampled_from([[0.2, 0.2], [0.1, 0.3], [0.3], [0.2, 0.2, 0.2], [0.5, 0.5]]))
    if draw(chance(0.15)):
        raw["log"] = draw(st.sampled_from([{"enabled": True}, {"enabled": False, "format": "csv"},
                                           {"enabled": True, "format": "csv"}, {"max_rows": 10}]))
    if draw(chance(0.15)):
        raw["description"] = draw(st.sampled_from(TEXTS))
    if dirty and not run:
        # top-level perturbations: generic values for a top-level key, unknown keys, broken tables
        from bayesfair.workflow.config import TOP_LEVEL

        for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2]))):
            key = draw(st.sampled_from(sorted(TOP_LEVEL)))
            p = TOP_LEVEL[key]
            if key == "checkpoints":
                # (a huge count, e.g. 10**9: test_regression_huge_checkpoint_count)
                raw[key] = draw(st.sampled_from([0, -1, [], [0], [horizon + 1], [1.5], "x", [True], 10**5, 2,
                                                 [horizon, 1, 1]]))
            elif key == "runs":  # (huge run counts: test_regression_huge_runs)
                raw[key] = draw(st.sampled_from([0, -1, 1.5, "2", [2], NAN, 10**5]))
            elif key in ("horizon", "chunk_size", "seed", "devices"):
                raw[key] = draw(st.one_of(param_value(p), st.sampled_from([0, -1, 2**31, 2**63 - 1, 10**5])))
            elif key == "output":
                raw[key] = draw(st.sampled_from(["", " ", "results/x", 3, ["a"], "/dev/null/x"]))
            elif key == "name":
                raw[key] = draw(st.sampled_from(["", ".x", "-x", "a b", "ok_name", "a/b", 3]))
            else:
                raw[key] = draw(param_value(p))
        what = draw(st.sampled_from(["none"] * 8 + ["unknown", "delete", "table", "resume", "log", "sweep"]))
        if what == "unknown":
            raw[draw(st.sampled_from(TOP_UNKNOWN))] = 1
        elif what == "delete":
            del raw[draw(st.sampled_from(["merit", "environment", "policies", "runs", "horizon"]))]
        elif what == "table":
            raw[draw(st.sampled_from(["merit", "environment", "policies", "log", "resume"]))] = \
                draw(st.sampled_from([3, "x", [1], [], {}, True, {"name": 3}]))
        elif what == "resume":
            raw["resume"] = draw(st.sampled_from([{"every_chunks": 0}, {"every_seconds": -1.0}, {"every_x": 1},
                                                  {"every_chunks": 2, "every_seconds": NAN}]))
        elif what == "log":
            raw["log"] = draw(st.sampled_from([{"format": "xml"}, {"max_rows": 0}, {"enabled": "yes"},
                                               {"true_reward": 3}, {"max_rows": 1, "enabled": True}]))
        elif what == "sweep":
            label = next(iter(policies))
            raw["sweep"] = draw(st.sampled_from([
                {"runs": [1, 2]}, {"seed": [0, 1]}, {"horizon": [5, 0]}, {"runs": []}, {"runs": 3},
                {f"policies.{label}.name": ["uniform", "ucb1"]}, {"nope.key": [1]}, {"merit.c": [1.0, -1.0]},
            ]))
    return Case(raw, run, mode)


# ---------------------------------------------------------------------------------------------
# running one case


class Hang(BaseException):
    """A case over its time limit (BaseException: not swallowed by the CLI's catch-all)."""


@contextlib.contextmanager
def _time_limit(seconds: int):
    """Raise :class:`Hang` after ``seconds`` (SIGALRM, main thread). The simulator waits on its
    chunks interruptibly, so a run that never ends is caught; an XLA compilation is not interrupted
    (the alarm fires when it returns), and a computation cut short keeps running in the background
    -- which is why the slow profile runs its studies in a subprocess that is killed instead."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def handler(signum, frame):
        raise Hang(f"over {seconds} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


MEMORY_HEADROOM = 6 * 2**30  # bytes of address space a case may add (huge sizes fail instead of OOM-killing)


@contextlib.contextmanager
def _memory_limit(headroom: int = MEMORY_HEADROOM):
    """Lower the soft address-space limit to the current size + ``headroom`` (restored after; an
    enclosing, lower limit stays)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        size = next(int(ln.split()[1]) * 1024 for ln in Path("/proc/self/status").read_text().splitlines()
                    if ln.startswith("VmSize:"))
    except (ImportError, OSError, StopIteration, ValueError):
        yield
        return
    limit = size + headroom
    for bound in (soft, hard):  # never raise an enclosing limit
        if bound != resource.RLIM_INFINITY:
            limit = min(limit, bound)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


_KEYS = ("name", "description", "seed", "runs", "horizon", "checkpoints", "chunk_size", "devices", "floors", "metrics",
         "output", "merit", "environment", "policies", "sweep", "log", "resume", *TOP_UNKNOWN)
_CONFIG_ERROR = re.compile(r"^bayesfair: config error: (?P<path>[^\n]+?): (?P<msg>.+)", re.S)


def _clear_error(err: str) -> str | None:
    """None if ``err`` is a clear exit-2 message, else what is wrong with it."""
    if "Traceback" in err:
        return "traceback on stderr"
    text = err.strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return "exit 2 without a message"
    if len(lines) > 4 or len(text) > 4000:
        return f"message of {len(lines)} lines / {len(text)} characters"
    m = _CONFIG_ERROR.match(text)
    if m:
        head = re.split(r"[.\[]", m.group("path"), maxsplit=1)[0]
        if head not in _KEYS and not m.group("path").startswith("--set"):
            return f"config error does not name a key of the config: {m.group('path')!r}"
        return None
    if text.startswith("bayesfair: error: "):
        return None
    return "exit 2 message is neither 'bayesfair: config error: <key>: ...' nor 'bayesfair: error: ...'"


def _non_finite(results: Path) -> str | None:
    from bayesfair.simulation import results as bio

    ds = bio.read_results(results)
    bad = []
    for name, var in ds.data_vars.items():
        if ("regret" in name or "exposure" in name) and np.issubdtype(var.dtype, np.floating):
            if not np.all(np.isfinite(var.values)):
                bad.append(name)
    return f"non-finite values in {', '.join(bad)}" if bad else None


@dataclass
class Outcome:
    rc: int | None
    err: str
    finding: str | None
    seconds: float


def run_case(case: Case, folder: Path, *, subprocess_runs: bool = False, timeout_dry: int = 60,
             timeout_run: int = 300) -> Outcome:
    """Write the config, run the CLI and judge the outcome."""
    from bayesfair.workflow import cli

    text = toml_dumps(case.raw)
    import tomllib

    assert _same(tomllib.loads(text), case.raw), f"TOML writer round trip failed:\n{text}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.toml"
    path.write_text(text, encoding="utf-8")
    if os.environ.get("BAYESFAIR_FUZZ_TRACE"):  # the case being run, for a crash of the whole process
        Path(os.environ["BAYESFAIR_FUZZ_TRACE"]).write_text(text, encoding="utf-8")
    out = folder / "out"
    argv = ["simulate", str(path), "--dry-run"] if not case.run else \
        ["simulate", str(path), "--out", str(out), "-q", "--overwrite", "--restart"]
    t0 = time.perf_counter()
    rc: int | None
    if case.run and subprocess_runs:
        try:
            proc = subprocess.run([sys.executable, "-m", "bayesfair", *argv], capture_output=True, text=True,
                                  timeout=timeout_run, env={**os.environ, "BAYESFAIR_DEBUG": ""}, cwd=folder)
        except subprocess.TimeoutExpired:
            return Outcome(None, "", f"hang: over {timeout_run} s", time.perf_counter() - t0)
        rc, err = proc.returncode, proc.stderr
    else:
        buf_out, buf_err = io.StringIO(), io.StringIO()
        cwd = os.getcwd()
        try:
            os.chdir(folder)
            with _time_limit(timeout_run if case.run else timeout_dry), _memory_limit(), \
                    contextlib.redirect_stdout(buf_out), contextlib.redirect_stderr(buf_err):
                rc = cli.main(argv)
        except Hang as exc:
            return Outcome(None, buf_err.getvalue(), f"hang: {exc}", time.perf_counter() - t0)
        except SystemExit as exc:  # argparse
            rc = exc.code if isinstance(exc.code, int) else 2
        except BaseException as exc:  # noqa: BLE001 - an uncaught exception is a finding
            import traceback

            return Outcome(None, buf_err.getvalue(), f"uncaught {type(exc).__name__}: {exc}\n"
                           + "".join(traceback.format_exception(exc)[-6:]), time.perf_counter() - t0)
        finally:
            os.chdir(cwd)
        err = buf_err.getvalue()
    dt = time.perf_counter() - t0
    if rc == 0:
        if "Traceback" in err:
            return Outcome(rc, err, "exit 0 with a traceback on stderr", dt)
        if case.run:
            results = out / "fz.nc"
            if not results.is_file():
                return Outcome(rc, err, f"exit 0 but no results file at {results}", dt)
            return Outcome(rc, err, _non_finite(results), dt)
        return Outcome(rc, err, None, dt)
    if rc == 2:
        return Outcome(rc, err, _clear_error(err), dt)
    return Outcome(rc, err, f"exit code {rc}: {err.strip()[-1500:]}", dt)


@dataclass
class Stats:
    cases: int = 0
    dry: int = 0
    studies: int = 0
    ok: int = 0
    studies_ok: int = 0
    clear_errors: int = 0
    seconds: float = 0.0
    findings: list[str] = field(default_factory=list)
    errors_by_head: dict[str, int] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)

    def record(self, case: Case, res: Outcome) -> None:
        self.cases += 1
        self.studies += case.run
        self.dry += not case.run
        self.seconds += res.seconds
        if res.finding is not None:
            self.findings.append(f"{res.finding}\n--- config ({'study' if case.run else 'dry-run'}) ---\n"
                                 f"{toml_dumps(case.raw)}")
        elif res.rc == 0:
            self.ok += 1
            self.studies_ok += case.run
        else:
            self.clear_errors += 1
            m = _CONFIG_ERROR.match(res.err.strip())
            head = re.split(r"[.\[]", m.group("path"), maxsplit=1)[0] if m else "error"
            self.errors_by_head[head] = self.errors_by_head.get(head, 0) + 1
            self.messages.append(f"[{case.note}] {res.err.strip()}")

    def summary(self, label: str) -> str:
        return (f"fuzz[{label}]: {self.cases} cases ({self.dry} dry-runs, {self.studies} tiny studies): "
                f"{self.ok} successes ({self.studies_ok} studies run), {self.clear_errors} clear errors, "
                f"{len(self.findings)} findings; "
                f"{self.seconds:.0f} s in the CLI; errors by key: {json.dumps(self.errors_by_head, sort_keys=True)}")


MIN_PER_GROUP = 5  # cases of each group (clean / dirty dry-runs, tiny studies) whatever the time budget


def _fuzz(tmp: Path, *, dry_runs: int, studies: int, derandomize: bool, seed: int | None, subprocess_runs: bool,
          label: str, time_budget: float | None = None) -> Stats:
    """Run ``dry_runs`` dry-run cases (half clean, half dirty) and ``studies`` tiny studies (one
    third with extreme valid values), each group its own hypothesis test; returns the counts and
    findings. ``time_budget`` (seconds) bounds the whole fuzz on a slow or loaded machine, but never
    below ``MIN_PER_GROUP`` cases of each group: the cheap dry-runs go first, and the budget only
    cuts cases beyond that minimum, so a loaded machine runs fewer cases, never none of a kind."""
    stats = Stats()
    t_start = time.perf_counter()
    counter = iter(range(10**9))
    groups = [(dry_runs - dry_runs // 2, study_case(run=False, mode="clean")),
              (dry_runs // 2, study_case(run=False, mode="dirty")), (studies, study_case(run=True))]
    for n, strategy in groups:
        if n <= 0:
            continue
        done = iter(range(10**9))

        @settings(max_examples=n, deadline=None, derandomize=derandomize, database=None,
                  suppress_health_check=list(HealthCheck), phases=[hypothesis.Phase.generate])
        @given(case=strategy)
        def inner(case):
            # inner runs within this iteration of the loop, so `done` is this group's counter
            if next(done) >= MIN_PER_GROUP and time_budget is not None and time.perf_counter() - t_start > time_budget:  # noqa: B023
                return
            stats.record(case, run_case(case, tmp / f"c{next(counter)}", subprocess_runs=subprocess_runs))

        if seed is not None:
            inner = hypothesis.seed(seed)(inner)
        inner()
    print("\n" + stats.summary(label))
    return stats


def _report(stats: Stats) -> str:
    return f"{len(stats.findings)} findings:\n\n" + "\n\n".join(stats.findings)


@pytest.fixture
def data_env(monkeypatch):
    monkeypatch.setenv("BAYESFAIR_DATA", str(SHARED))
    monkeypatch.setenv("no_proxy", "*")
    monkeypatch.delenv("BAYESFAIR_DEBUG", raising=False)


# ---------------------------------------------------------------------------------------------
# tests


def test_toml_writer_round_trips():
    import tomllib

    doc = {"a": 1, "b": -0.5, "c": NAN, "d": INF, "e": -INF, "f": 'q"\\\n\t\x7fé', "g": [1, "x", [2.5], {"k": True}],
           "h": {"x y": {"z": [], "w": 1e300}, "i": 5e-324}, "policies": {"P 1.x": {"name": "ucb1"}}}
    assert _same(tomllib.loads(toml_dumps(doc)), doc)


def test_fuzz_cli(tmp_path, data_env):
    """Default profile (derandomized, ~45 s): dry-runs plus a few in-process tiny studies."""
    stats = _fuzz(tmp_path, dry_runs=int(os.environ.get("BAYESFAIR_FUZZ_DRY_RUNS", 240)),
                  studies=int(os.environ.get("BAYESFAIR_FUZZ_STUDIES", 12)), derandomize=True, seed=None,
                  subprocess_runs=False, label="default",
                  time_budget=float(os.environ.get("BAYESFAIR_FUZZ_BUDGET", 90)))
    assert stats.cases >= 10
    assert not stats.findings, _report(stats)


@pytest.mark.slow
def test_fuzz_cli_slow(tmp_path, data_env):
    """Larger random profile: ``BAYESFAIR_FUZZ_EXAMPLES`` cases (default 300), tiny studies in a
    subprocess with a timeout; ``BAYESFAIR_FUZZ_SEED`` replays a run."""
    seed = os.environ.get("BAYESFAIR_FUZZ_SEED")
    n = int(os.environ.get("BAYESFAIR_FUZZ_EXAMPLES", 300))
    studies = int(os.environ.get("BAYESFAIR_FUZZ_STUDIES", max(n // 10, 1)))
    stats = _fuzz(tmp_path, dry_runs=n - studies, studies=studies, derandomize=False,
                  seed=int(seed) if seed else None, subprocess_runs=True, label="slow")
    assert not stats.findings, _report(stats)


# ---------------------------------------------------------------------------------------------
# regressions: findings of the fuzzer, reduced to one key each


def _study(env: dict[str, Any], policies: dict[str, Any], merit: dict[str, Any] | None = None,
           **top: Any) -> dict[str, Any]:
    raw = {"name": "fz", "seed": 1, "runs": 1, "horizon": 8, "chunk_size": 8,
           "merit": merit or {"name": "exponential", "c": 1.0}, "environment": env, "policies": policies}
    raw.update(top)
    return raw


_BERN = {"name": "bernoulli_arms", "means": [0.2, 0.5, 0.6]}
_GAUSS = {"name": "gaussian_arms", "means": [0.2, 0.5, 0.6], "sigma": 0.1}
_LIN = {"name": "linear_bandit", "n_arms": 3, "n_features": 2}

# (id, config, tiny study?, expected exit code, key path the exit-2 message must start with)
REGRESSIONS = [
    # math.exp(c * high) overflowed in merit.exponential: OverflowError, exit 1 (was a dry-run crash)
    ("exponential-merit-overflow", _study(_BERN, {"U": {"name": "ucb1"}},
                                          {"name": "exponential", "c": 7.55, "domain": [-100.0, 100.0]}),
     False, 2, "merit"),
    ("exponential-merit-huge-c", _study(_BERN, {"U": {"name": "ucb1"}}, {"name": "exponential", "c": 1e300}),
     False, 2, "merit.c"),
    # Beta(a0, b0) draws of shapes well below 1 were 0 / 0 = NaN (Beta(0.01, 0.01): 18% of draws), exit 1
    ("beta-bernoulli-small-prior", _study(_BERN, {"TS": {"name": "thompson", "posterior": {
        "name": "beta_bernoulli", "a0": 0.01, "b0": 0.01}}}), True, 0, ""),
    # an inverse-gamma draw of a0 < 1 underflowed to 0, so sigma^2 = inf and the draw NaN, exit 1
    ("linear-nig-small-a0", _study(_LIN, {"TS": {"name": "lints", "posterior": {
        "name": "linear_normal_inverse_gamma", "a0": 0.01}}}), True, 0, ""),
    # a ridge below float32's resolution left the precision singular: Cholesky NaN, exit 1
    ("linucb-tiny-ridge", _study(_LIN, {"LinUCB": {"name": "linucb", "lam": 1e-12},
                                        "Greedy": {"name": "fairx_lineg", "lam": 1e-12}},
                                 {"name": "exponential", "c": 1.0, "domain": [-5.0, 5.0]}), True, 0, ""),
    # numbers beyond float32 became inf/0 inside the simulator: NaN, exit 1
    ("beta-bernoulli-huge-prior", _study(_BERN, {"TS": {"name": "thompson", "posterior": {
        "name": "beta_bernoulli", "a0": 1e300}}}), False, 2, "policies.TS.posterior.a0"),
    ("normal-tiny-noise-var", _study(_GAUSS, {"TS": {"name": "thompson", "posterior": {
        "name": "normal_known_variance", "noise_var": 1e-300}}}, {"name": "identity"}),
     False, 2, "policies.TS.posterior.noise_var"),
    ("bf-ucb-tiny-delta", _study({**_BERN, "groups": [0, 0, 1]}, {"BF": {"name": "bf_ucb", "delta": 1e-300}},
                                 floors=[0.2, 0.2]), False, 2, "policies.BF.delta"),
    ("synthetic-biased-huge-coef", _study({"name": "synthetic_biased", "coef_high": 1e300},
                                          {"U": {"name": "uniform"}},
                                          {"name": "exponential", "c": 1.0, "domain": [-100.0, 100.0]}),
     False, 2, "environment.coef_high"),
    ("fairx-eg-huge-initial-estimate", _study(_BERN, {"EG": {"name": "fairx_eg", "initial_estimate": 1e300}}),
     False, 2, "policies.EG.initial_estimate"),
    # the ascent steps were unrolled at trace time: 1,000 steps took XLA 5+ minutes to compile (a hang
    # that Ctrl-C could not stop); now a loop beyond 32 steps, and at most 1,000 steps per round
    ("mf-many-steps", _study({**_BERN, "groups": [0, 0, 1]}, {"MF": {"name": "mf", "steps": 1000}}), True, 0, ""),
    ("fairx-ucb-huge-steps", _study(_BERN, {"UCB": {"name": "fairx_ucb", "steps": 10**6}}), False, 2,
     "policies.UCB.steps"),
    # numbers in tables the registry cannot type ("any") overflowed float32 too
    ("gmf-huge-group-weights", _study({"name": "gmf_synthetic", "group_weights": [[1e300, 1.0], [1.0, 2.0]]},
                                      {"O": {"name": "oful"}}, {"name": "identity", "domain": [-1e15, 1e15]}),
     False, 2, "environment"),
    ("group-fair-ts-huge-true-psi", _study({"name": "synthetic_biased"}, {"G": {
        "name": "group_fair_ts", "true_psi": [[0.0, 0.0], [1e300, 1.0]]}},
        {"name": "identity", "domain": [-1e15, 1e15]}), False, 2, "policies.G"),
    # sizes of 2**31 asked numpy/XLA for 8-48 GB while building the study: MemoryError, exit 1
    ("bernoulli-huge-n-arms", _study({"name": "bernoulli_arms", "means": {"low": 0.1, "high": 0.9}, "n_arms": 2**31},
                                     {"U": {"name": "ucb1"}}), False, 2, "environment.n_arms"),
    ("linear-huge-n-features", _study({"name": "linear_bandit", "n_arms": 3, "n_features": 2**31},
                                      {"U": {"name": "linucb"}}), False, 2, "environment.n_features"),
    ("multigroup-huge-n-candidates", _study({"name": "gmf_multigroup", "n_candidates": 2**31,
                                             "proportions": [0.25, 0.25, 0.25, 0.25]},
                                            {"U": {"name": "uniform"}}), False, 2, "environment.n_candidates"),
    # contexts of norm 1e3+ left the ridge precision singular in float32: Cholesky NaN, exit 1
    ("linear-bandit-huge-context-scale", _study({**_LIN, "context_scale": 1e12}, {"L": {"name": "linucb"}}),
     False, 2, "environment.context_scale"),
]


@pytest.mark.parametrize("raw, run, rc, path", [pytest.param(*r[1:], id=r[0]) for r in REGRESSIONS])
def test_regression(tmp_path, data_env, raw, run, rc, path):
    res = run_case(Case(raw, run), tmp_path)
    assert res.finding is None, res.finding
    assert res.rc == rc, res.err
    if rc == 2:
        assert res.err.startswith(f"bayesfair: config error: {path}"), res.err


def test_beta_small_shapes_exact_and_finite():
    """The log-space fallback of beta_bernoulli: no NaN for small shapes, the same bits as
    ``_random.beta`` wherever that was finite, invalid shapes still NaN."""
    import jax
    import jax.numpy as jnp

    from bayesfair.core import _random
    from bayesfair.posteriors.beta_bernoulli import _beta_small_shapes

    a = jnp.tile(jnp.array([0.5, 0.05, 0.01, 1e-3, 1e-30, 3.0], jnp.float32), 2000)
    b = jnp.tile(jnp.array([0.5, 0.05, 0.02, 1e-3, 1e-30, 0.01], jnp.float32), 2000)
    key = jax.random.key(7)
    old, new = np.asarray(_random.beta(key, a, b)), np.asarray(_beta_small_shapes(key, a, b))
    assert np.isnan(old).mean() > 0.1  # the bug
    assert not np.isnan(new).any()
    ok = ~np.isnan(old)
    np.testing.assert_array_equal(new[ok], old[ok])
    means = new.reshape(2000, 6).mean(axis=0)
    np.testing.assert_allclose(means, np.asarray(a[:6] / (a[:6] + b[:6])), atol=0.03)
    bad = np.asarray(_beta_small_shapes(key, jnp.array([0.0, -1.0, jnp.nan, 0.5]), jnp.full(4, 0.5)))
    assert np.isnan(bad[:3]).all() and np.isfinite(bad[3])


def test_exponential_merit_overflow_is_a_clear_error():
    from bayesfair.core import merit

    with pytest.raises(ValueError, match=r"c and domain\[1\] too large.*c = 800"):
        merit.exponential(800.0)
    assert math.isfinite(merit.exponential(700.0).lipschitz)


# Former findings (fixed): a dry-run allocated arrays of the config's size before anything was
# checked, so a huge count exhausted the memory (MemoryError / RESOURCE_EXHAUSTED, exit 1). Now
# checkpoint_grid(T, n) with n/2 >= T is 1..T without building n points, and runs are bounded
# (MAX_RUNS, exit 2 naming the key). Run under a 1 GiB memory cap.
OPEN_FINDINGS = [
    pytest.param(_study(_BERN, {"U": {"name": "ucb1"}}, runs=2**31), id="runs-2e31"),
    pytest.param(_study(_BERN, {"U": {"name": "ucb1"}}, runs=2**63 - 1), id="runs-int64-max"),
]


@pytest.mark.parametrize("raw", OPEN_FINDINGS)
def test_open_finding(tmp_path, data_env, raw):
    with _memory_limit(2**30):
        res = run_case(Case(raw, False), tmp_path)
    assert res.finding is None, res.finding


def test_huge_checkpoint_count_is_every_round(tmp_path, data_env):
    """checkpoints = 1e9 on T = 100: the grid is 1..100, built without 1e9 points (checked under
    the memory cap; the study itself then runs uncapped, since compiling needs more address space)."""
    from bayesfair.simulation.simulator import checkpoint_grid

    with _memory_limit(2**30):
        grid = checkpoint_grid(100, 10**9)
    np.testing.assert_array_equal(grid, np.arange(1, 101))
    res = run_case(Case(_study(_BERN, {"U": {"name": "ucb1"}}, horizon=100, checkpoints=10**9), False), tmp_path)
    assert res.finding is None, res.finding
