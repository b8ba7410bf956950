"""Boundary validation helpers: every error names the field and the allowed range."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "MAX_HORIZON",
    "MAX_RUNS",
    "positive_int",
    "finite_float",
    "positive_float",
    "float_in",
    "finite_array",
]


MAX_HORIZON = 2**31 - 1 - 2**20  # rounds are int32 inside the simulator's scan (with room for a chunk)
#: Runs are simulated together (vmapped, their states and metrics in memory at once): a bound well
#: above any regret study (the papers use 20-2,000 runs) that keeps per-run arrays addressable.
MAX_RUNS = 10_000_000


def positive_int(name: str, value: Any, *, minimum: int = 1) -> int:
    """Return ``value`` as an int >= ``minimum`` or raise a ValueError/TypeError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def finite_float(name: str, value: Any) -> float:
    """Return ``value`` as a finite float or raise naming ``name``."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(out):
        raise ValueError(f"{name} must be finite, got {out}")
    return out


def positive_float(name: str, value: Any) -> float:
    """Return ``value`` as a finite float > 0 or raise naming ``name``."""
    out = finite_float(name, value)
    if out <= 0:
        raise ValueError(f"{name} must be > 0, got {out}")
    return out


def float_in(
    name: str,
    value: Any,
    low: float,
    high: float,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Return ``value`` as a float inside the interval, or raise naming ``name`` and the range."""
    out = finite_float(name, value)
    lo_ok = out > low if low_open else out >= low
    hi_ok = out < high if high_open else out <= high
    if not (lo_ok and hi_ok):
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"{name} must be in {interval}, got {out}")
    return out


def finite_array(name: str, value: Any, *, ndim: int | None = None, size: int | None = None) -> np.ndarray:
    """Return ``value`` as a finite float64 array, checking its rank and length."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be an array of real numbers, got {value!r}") from None
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if size is not None and arr.shape[0] != size:
        raise ValueError(f"{name} must have length {size}, got {arr.shape[0]}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (no NaN or inf), got {arr}")
    return arr
