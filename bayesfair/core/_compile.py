"""Compilation reuse for the simulator: a persistent JAX cache on disk and an in-process cache.

- :func:`enable_persistent_cache` points JAX's persistent compilation cache at the user's cache
  directory (``$BAYESFAIR_COMPILE_CACHE_DIR``, else ``$XDG_CACHE_HOME/bayesfair/jax``, else
  ``~/.cache/bayesfair/jax``), so a new process loads a study's compiled chunk functions instead
  of compiling them again. JAX keys every entry by the computation (HLO), the compile options,
  the backend and the jax/jaxlib versions, so one folder is safe across package and JAX versions
  (a changed program is a new key, never a stale hit). ``BAYESFAIR_NO_COMPILE_CACHE=1`` opts out;
  a cache folder the user configured for JAX (``jax_compilation_cache_dir``, or the
  ``JAX_COMPILATION_CACHE_DIR`` variable) is left alone, with its thresholds.
- :func:`trim_cache` bounds bayesfair's folder (2 GiB, least recently used entries first): the
  first process in an hour to use the folder runs it on a background thread. JAX's own bound
  (``jax_compilation_cache_max_size``) is not used: with it set, every write to the cache lists
  the whole folder and reads one small file per entry, so a write costs ~22 us per entry already
  there (``experiments/benchmarks/cache_write_bench.py``: 1.8 ms in an empty folder, 47 ms with
  2,000 entries, 160 ms with 7,000), and a folder only grows (a first NUTS fit of a new model
  writes ~270 entries) until the bound.
- :class:`TraceCache` keeps the jitted functions and compiled executables of recent ``simulate``
  calls, keyed by :func:`trace_key` of everything that determines the trace, so a second call
  with the same policy, environment and metrics compiles nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import threading
import time
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any

import jax
import numpy as np

__all__ = ["enable_persistent_cache", "cache_small_programs", "caches_small_programs", "cache_dir", "trim_cache",
           "trace_key", "TraceCache"]

_MIN_COMPILE_SECONDS = 0.02  # cache what takes longer to compile: the chunk functions (seconds) and the
# finalization's small programs (~40 ms each, 30-40 per study: ~1.5 s a process when not cached)
_MAX_CACHE_BYTES = 2 << 30  # trim_cache removes least recently used entries past this size
_ENTRY, _SIDECAR = "-cache", "-atime"  # JAX's file names: <key>-cache, and <key>-atime when its bound is on
_lock = threading.Lock()
_enabled: str | None | bool = False  # False: not decided yet; None: off; str: the folder in use
_ours = False  # whether bayesfair chose the cache's settings (not the user's own jax config)
_small_depth = 0  # open cache_small_programs blocks (they nest and may overlap across threads)
_small_saved: float | None = None
_trim_started = False


def cache_dir() -> Path:
    """The folder bayesfair gives JAX's persistent compilation cache.

    ``$BAYESFAIR_COMPILE_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/bayesfair/jax``, else
    ``~/.cache/bayesfair/jax``.
    """
    explicit = os.environ.get("BAYESFAIR_COMPILE_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "bayesfair" / "jax"


def _opted_out() -> bool:
    return os.environ.get("BAYESFAIR_NO_COMPILE_CACHE", "").strip().lower() not in ("", "0", "false", "no")


def _configured_dir() -> str | None:
    """The cache folder already given to JAX (``jax_compilation_cache_dir``), if any."""
    return jax.config.jax_compilation_cache_dir or None


def enable_persistent_cache() -> str | None:
    """Turn on JAX's persistent compilation cache in :func:`cache_dir` (once per process).

    Does nothing when ``BAYESFAIR_NO_COMPILE_CACHE`` is set (to anything but ``0``/``false``/``no``),
    or when the user already configured ``jax_compilation_cache_dir`` (that folder is used, with
    the user's settings). Otherwise sets the folder and caches every computation that takes at least
    0.02 s to compile (inside NUTS fits and the diagnostics, every one: :func:`cache_small_programs`),
    and starts :func:`trim_cache` on a background thread (once per process; it skips the folder
    if another process trimmed it within the hour), which keeps the folder under 2 GiB. A folder
    that cannot be created turns the cache off rather than failing the simulation.

    Called first by everything that compiles on a user's behalf: ``simulate`` and its pre-flight
    checks (``run_means``, ``check_study``), ``fitting.fit``, ``sbc`` and the diagnostics entry
    points (``diagnostics.posterior_draws``, ``from_posterior``, ``from_group_bias_fit``,
    ``diagnostics_tree.posterior_tree``, ``diagnostics_checks.model_check``, ``fit_from_log``, through
    the decorator :func:`caches_small_programs`).

    Returns
    -------
    str or None
        The cache folder in use (the user's or bayesfair's), or None when the cache is off.
    """
    global _enabled, _ours
    with _lock:
        if _enabled is not False:
            return _enabled
        configured = _configured_dir()
        if configured:
            _enabled = str(configured)
        elif _opted_out():
            _enabled = None
        else:
            path = cache_dir()
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError:
                _enabled = None
            else:
                jax.config.update("jax_compilation_cache_dir", str(path))
                jax.config.update("jax_persistent_cache_min_compile_time_secs", _MIN_COMPILE_SECONDS)
                # JAX's default: no bound of its own (a bound makes each write scan the folder);
                # trim_cache keeps the folder bounded instead
                jax.config.update("jax_compilation_cache_max_size", -1)
                _enabled = str(path)
                _ours = True
                _start_trim(path)
        return _enabled


def _start_trim(path: Path) -> None:
    """Run :func:`trim_cache` on ``path`` on a daemon thread, once per process."""
    global _trim_started
    if _trim_started:
        return
    _trim_started = True
    threading.Thread(target=_trim_quietly, args=(path,), name="bayesfair-cache-trim", daemon=True).start()


_TRIM_EVERY = 3600.0  # seconds: processes started within this time of the last trim skip theirs
_TRIM_MARK = ".bayesfair-trimmed"  # its modification time is the last trim's start


def _trim_quietly(path: Path) -> None:
    """:func:`trim_cache` of ``path`` unless a process trimmed it within the last hour (a sweep's
    many processes list a folder of 7,000 entries once, not each: ~0.07 s per listing)."""
    mark = Path(path) / _TRIM_MARK
    try:
        if time.time() - mark.stat().st_mtime < _TRIM_EVERY:
            return
    except OSError:  # no mark yet
        pass
    try:
        mark.touch()
        trim_cache(path)
    except FileNotFoundError:  # the folder was removed meanwhile: nothing to bound
        pass
    except OSError as e:  # the cache still works, but its folder is no longer bounded: say so
        warnings.warn(f"bayesfair: could not trim the compilation cache folder {str(path)!r} to "
                      f"{_MAX_CACHE_BYTES >> 30} GiB ({type(e).__name__}: {e}); compiled programs still load "
                      "from it, but it may grow. Remove old files there by hand, or set "
                      "BAYESFAIR_COMPILE_CACHE_DIR to a folder you can write.", RuntimeWarning, stacklevel=1)


def trim_cache(folder: str | os.PathLike, max_bytes: int = _MAX_CACHE_BYTES) -> tuple[int, int]:
    """Keep a JAX compilation-cache folder at most ``max_bytes`` large: remove its least recently
    used entries first.

    An entry is a ``<key>-cache`` file (JAX's layout); "recently used" is the later of its access
    and modification times (on the usual ``relatime`` mounts the access time moves on the first
    read after a write and at most once a day after that, so entries read within the last day
    count as used today). A ``<key>-atime`` file (written when JAX's own bound is on, e.g. by an
    earlier bayesfair) is removed with its entry, or alone when its entry is gone; nothing else in
    the folder is touched. Entries another process removes meanwhile are skipped; a process that
    reads an entry while it is removed gets JAX's warning and compiles the program instead.

    One pass lists the folder once (~10 us per entry); :func:`enable_persistent_cache` runs it on a
    background thread in the first process that uses the folder in an hour.

    Parameters
    ----------
    folder : path
        The cache folder.
    max_bytes : int
        The bound in bytes (>= 0).

    Returns
    -------
    (int, int)
        Entries removed and bytes freed.
    """
    if max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
    folder = Path(folder)
    entries, sidecars, total = [], set(), 0
    with os.scandir(folder) as it:
        for e in it:
            if e.name.endswith(_SIDECAR):
                sidecars.add(e.name[:-len(_SIDECAR)])
            elif e.name.endswith(_ENTRY):
                try:
                    if not e.is_file(follow_symlinks=False):
                        continue
                    st = e.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                entries.append((max(st.st_atime_ns, st.st_mtime_ns), e.name[:-len(_ENTRY)], st.st_size))
                total += st.st_size
    present = {key for _, key, _ in entries}
    for key in sidecars - present:  # orphans
        (folder / (key + _SIDECAR)).unlink(missing_ok=True)
    removed = freed = 0
    entries.sort()
    for _, key, size in entries:
        if total <= max_bytes:
            break
        (folder / (key + _ENTRY)).unlink(missing_ok=True)
        (folder / (key + _SIDECAR)).unlink(missing_ok=True)
        total -= size
        removed += 1
        freed += size
    return removed, freed


@contextlib.contextmanager
def cache_small_programs():
    """Within the block, the persistent cache keeps every program, however quick its compilation.

    For NUTS fits (``fitting.fit``): numpyro initializes each chain by running the model op by op
    and builds fresh closures per chain, ~290 programs of ~10 ms each for the group-bias model, all
    under the usual 0.02 s threshold and so compiled again in every process. Measured (4 chains,
    500 + 500 draws, fresh processes): the fit 6.6-7.2 s with the threshold, 3.5-3.6 s with these
    programs cached; the first, cold fit ~0.8 s slower (the writes) and 1.7 MB more in the folder.
    Elsewhere the threshold stays: for ``simulate`` caching everything measured no faster, and the
    test suite slower. Does nothing when the cache is off or the user configured their own
    (their settings are kept). Blocks may nest and overlap across threads; the threshold is
    restored when the last one ends.
    """
    global _small_depth, _small_saved
    if enable_persistent_cache() is None or not _ours:
        yield
        return
    with _lock:
        if _small_depth == 0:
            _small_saved = jax.config.jax_persistent_cache_min_compile_time_secs
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        _small_depth += 1
    try:
        yield
    finally:
        with _lock:
            _small_depth -= 1
            if _small_depth == 0:
                jax.config.update("jax_persistent_cache_min_compile_time_secs", _small_saved)


def caches_small_programs(fn):
    """Decorator: ``fn`` runs inside :func:`cache_small_programs` (the diagnostics entry points:
    a fresh kernel's ``from_posterior`` on a Beta-Bernoulli state with observations, 48
    programs, 1.31-1.44 s with only the slow ones cached, 0.88-0.99 s with all of them)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with cache_small_programs():
            return fn(*args, **kwargs)

    return wrapper


def _reset_for_tests() -> None:
    """Forget the decision of :func:`enable_persistent_cache` (tests only; the JAX settings stay)."""
    global _enabled, _ours
    with _lock:
        _enabled, _ours = False, False


# ---------------------------------------------------------------------------------------------
# in-process reuse


def trace_key(obj: Any, keep: list) -> Any:
    """A hashable key of ``obj`` that is equal for two objects only if they trace the same program.

    Plain data (None, bools, numbers, strings, tuples, lists, dicts, NumPy and concrete JAX arrays,
    dataclasses and other objects' attributes) is compared by value, together with its type;
    callables and anything else are compared by identity, and appended to ``keep`` so the caller
    can hold them alive (an identity is only unique while its object lives). Two distinct policy
    or environment records therefore never share a key unless every function in them is the same
    object and every datum is equal.

    Parameters
    ----------
    obj : object
        A policy, environment, metric component or any nesting of them.
    keep : list
        Receives the objects keyed by identity.

    Returns
    -------
    hashable
    """
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        return (type(obj), obj)
    concrete = isinstance(obj, jax.Array) and not isinstance(obj, jax.core.Tracer)
    if isinstance(obj, (np.ndarray, np.generic)) or concrete:
        arr = np.asarray(obj)
        return ("array", type(obj), arr.dtype.str, arr.shape, arr.tobytes())
    if isinstance(obj, (tuple, list)):
        return (type(obj), tuple(trace_key(x, keep) for x in obj))
    if isinstance(obj, dict):
        items = sorted(((repr(k), trace_key(k, keep), trace_key(v, keep)) for k, v in obj.items()),
                       key=lambda kv: kv[0])
        return (dict, tuple(items))
    if callable(obj) or isinstance(obj, type):
        keep.append(obj)
        return ("id", id(obj))
    if dataclasses.is_dataclass(obj):
        keep.append(type(obj))
        return (id(type(obj)), tuple((f.name, trace_key(getattr(obj, f.name), keep))
                                     for f in dataclasses.fields(obj)))
    if hasattr(obj, "__dict__"):
        keep.append(type(obj))
        return (id(type(obj)), trace_key(vars(obj), keep))
    keep.append(obj)
    return ("id", id(obj))


class TraceCache:
    """A small least-recently-used map from :func:`trace_key` keys to built functions.

    Each entry holds the objects its key refers to by identity, so their identities cannot be
    reused by other objects while the entry lives.

    Parameters
    ----------
    maxsize : int
        Entries kept (the oldest is dropped first).
    """

    def __init__(self, maxsize: int = 16):
        self.maxsize = maxsize
        self._entries: OrderedDict[Any, tuple[list, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, parts: tuple, build):
        """The value cached for ``parts`` (any nesting :func:`trace_key` accepts), or ``build()``'s, stored.

        Returns
        -------
        (value, bool)
            The value and whether it came from the cache.
        """
        keep: list = []
        key = trace_key(parts, keep)
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                return hit[1], True
        value = build()
        with self._lock:
            self._entries[key] = (keep, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        return value, False

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
