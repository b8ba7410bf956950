"""Boundary validation helpers: every error names the field and the allowed range."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "MAX_HORIZON",
    "MAX_RUNS",
    "MAX_SEED",
    "seed_int",
    "as_key",
    "positive_int",
    "finite_float",
    "positive_float",
    "float_in",
    "finite_array",
    "group_labels",
]


MAX_HORIZON = 2**31 - 1 - 2**20  # rounds are int32 inside the simulator's scan (with room for a chunk)
#: Runs are simulated together (vmapped, their states and metrics in memory at once): a bound well
#: above any regret study (the papers use 20-2,000 runs) that keeps per-run arrays addressable.
MAX_RUNS = 10_000_000
#: An integer seed becomes ``jax.random.key(seed)``, which keeps only its low 32 bits when JAX runs
#: in 32-bit mode (the default): seeds 0 and 2**32 gave the same numbers. Larger seeds are refused.
MAX_SEED = 2**32 - 1


def seed_int(name: str, value: Any) -> int:
    """``value`` as an int seed in [0, 2**32 - 1], or a TypeError/ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer seed, got {value!r}")
    if not 0 <= int(value) <= MAX_SEED:
        raise ValueError(f"{name} must be a non-negative integer below 2**32 (a JAX key keeps 32 bits of an integer "
                         f"seed, so a larger one would repeat a smaller one's numbers), got {value}")
    return int(value)


def as_key(key: Any, name: str = "seed") -> Any:
    """A JAX key from a JAX key or an integer seed (:func:`seed_int`): integers only at the edges."""
    import jax
    import jax.numpy as jnp

    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return jax.random.key(seed_int(name, key))
    if isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    raise TypeError(f"key must be a jax.random.key(...) or a non-negative int seed, got {key!r}")


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


def group_labels(name: str, labels: Any) -> tuple[np.ndarray, tuple[str, ...] | None]:
    """A label per item (arm, candidate, row) as integer group codes, and the groups' names.

    Parameters
    ----------
    name : str
        The argument's name, for the error messages.
    labels : sequence of int or sequence of str, 1-d
        Either group indices (integers >= 0, or floats with integral values), returned as they
        are, or names such as ``["women", "men", "women"]``: any hashable non-numeric labels
        (strings in practice), mapped to the codes 0..m-1 in the order the labels first appear.

    Returns
    -------
    codes : numpy.ndarray
        int64 array [n] of group indices.
    names : tuple of str or None
        The distinct labels in first-appearance order (``names[code]``) when ``labels`` were names,
        None when they were indices (the caller names the groups).
    """
    if isinstance(labels, str):
        raise TypeError(f"{name} must be a sequence with a label per item, got the string {labels!r}")
    if isinstance(labels, (list, tuple)) and any(isinstance(x, str) for x in labels):
        arr = np.empty(len(labels), dtype=object)  # numpy would turn [1, "a"] into the strings "1", "a"
        arr[:] = labels
    else:
        arr = np.asarray(labels)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d sequence of group labels, got shape {arr.shape}")
    if arr.dtype.kind in "USO":  # names: strings (an object array may also hold numbers: refused below)
        items = arr.tolist()
        kinds = {type(x) for x in items}
        if not all(isinstance(x, str) for x in items):
            raise TypeError(f"{name} must be all integers (group indices) or all strings (group names), got "
                            f"{sorted(t.__name__ for t in kinds)}")
        order: dict[str, int] = {}
        codes = np.array([order.setdefault(x, len(order)) for x in items], dtype=np.int64)
        return codes, tuple(order)
    if arr.dtype.kind == "b":
        raise TypeError(f"{name} must be integer group indices or group names (strings), got booleans")
    arr = integer_indices(name, arr, "group indices or group names (strings)", verb="be")
    if arr.min() < 0:
        raise ValueError(f"{name} must be >= 0 (group indices), got {arr.min()}")
    return arr.astype(np.int64), None


def integer_indices(name: str, values: Any, what: str = "indices", *, verb: str = "hold") -> np.ndarray:
    """``values`` as an int64 array: integers, or floats with integral values; anything else is a
    TypeError naming ``name`` ("<name> must <verb> integer <what>, got dtype ...")."""
    arr = np.asarray(values)
    if not np.issubdtype(arr.dtype, np.integer):
        if not (np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))):
            raise TypeError(f"{name} must {verb} integer {what}, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def arm_groups(name: str, values: Any, n_arms: int | None = None) -> np.ndarray:
    """A group index per arm (int64 [n]): integral, >= 0, one per arm when ``n_arms`` is given,
    and every group 0..m-1 holding an arm; errors name ``name``."""
    arr = np.asarray(values)
    if n_arms is not None and (arr.ndim != 1 or arr.size != n_arms):
        raise ValueError(f"{name} must have one group per arm ({n_arms}), got shape {arr.shape}")
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d array (one group per arm), got shape {arr.shape}")
    arr = integer_indices(name, arr, "group indices")
    if arr.min() < 0:
        raise ValueError(f"{name} must be >= 0, got {arr.min()}")
    m = int(arr.max()) + 1
    empty = np.flatnonzero(np.bincount(arr, minlength=m) == 0)
    if empty.size:
        raise ValueError(f"every group 0..{m - 1} must hold an arm; group(s) {empty.tolist()} are empty")
    return arr

def check_reward_range(reward_range: Any) -> tuple[float, float]:
    try:
        lo, hi = reward_range
    except (TypeError, ValueError):
        raise TypeError(f"reward_range must be a pair (low, high), got {reward_range!r}") from None
    lo = finite_float("reward_range[0]", lo)
    hi = finite_float("reward_range[1]", hi)
    if not lo < hi:
        raise ValueError(f"reward_range must satisfy low < high, got ({lo}, {hi})")
    return lo, hi
