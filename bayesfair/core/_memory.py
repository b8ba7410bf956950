"""The machine's memory: how much a new study may still allocate (:func:`available_memory`).

Read without third-party packages: ``MemAvailable`` of ``/proc/meminfo`` (Linux; ``psutil``, when
installed, elsewhere), bounded by the process's control-group limit (cgroup v2 ``memory.max`` minus
``memory.current``, or cgroup v1 ``memory.limit_in_bytes`` minus ``memory.usage_in_bytes``: the
limit a container or a batch scheduler kills at, whatever the machine has free) and by the
address-space limit ``ulimit -v`` (``RLIMIT_AS``) minus what the process has mapped already.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

__all__ = ["Available", "available_memory", "format_bytes", "memory_check_disabled", "NO_CHECK_VARIABLE"]

#: Set to anything but ``0``/``false``/``no`` to skip the memory check of studies (the estimate is
#: an estimate: a machine with swap, or a study whose estimate is known to be pessimistic).
NO_CHECK_VARIABLE = "BAYESFAIR_NO_MEMORY_CHECK"
_UNLIMITED = 1 << 60  # cgroup v1 reports "no limit" as a number near 2**63


class Available(NamedTuple):
    """Bytes a process may still allocate, and where that bound comes from (for messages)."""

    bytes: int | None  # None: nothing could be read
    source: str


def memory_check_disabled() -> bool:
    """Whether :data:`NO_CHECK_VARIABLE` turns the studies' memory check off."""
    return os.environ.get(NO_CHECK_VARIABLE, "").strip().lower() not in ("", "0", "false", "no")


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _meminfo() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:  # not Linux: psutil when it is installed (it comes with the dask extra)
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().available)


def _cgroup_dir() -> tuple[Path | None, Path | None]:
    """(cgroup v2 folder, cgroup v1 memory folder) of this process, where they exist."""
    v2 = v1 = None
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None, None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        rel = parts[2].lstrip("/")
        if parts[0] == "0" and parts[1] == "":
            v2 = Path("/sys/fs/cgroup") / rel
        elif "memory" in parts[1].split(","):
            v1 = Path("/sys/fs/cgroup/memory") / rel
    return v2, v1


def _cgroup_headroom() -> int | None:
    v2, v1 = _cgroup_dir()
    candidates = []
    if v2 is not None:
        candidates += [(v2, "memory.max", "memory.current"), (Path("/sys/fs/cgroup"), "memory.max", "memory.current")]
    if v1 is not None:
        candidates.append((v1, "memory.limit_in_bytes", "memory.usage_in_bytes"))
    candidates.append((Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes", "memory.usage_in_bytes"))
    for folder, limit_name, usage_name in candidates:
        limit, usage = _read_int(folder / limit_name), _read_int(folder / usage_name)
        if limit is not None and limit < _UNLIMITED and usage is not None:
            return max(limit - usage, 0)
    return None


def _address_space_headroom() -> int | None:
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return None
    try:
        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        mapped = 0
    return max(soft - mapped, 0)


def available_memory() -> Available:
    """The bytes this process may still allocate: the smallest of the machine's available memory,
    the control group's headroom and the address-space limit's headroom (see the module docstring)."""
    found = [(n, what) for n, what in ((_meminfo(), "available on this machine (MemAvailable)"),
                                       (_cgroup_headroom(), "left under this process's cgroup memory limit"),
                                       (_address_space_headroom(), "left under the address-space limit (ulimit -v)"))
             if n is not None]
    if not found:
        return Available(None, "unknown")
    n, what = min(found)
    return Available(n, what)


def format_bytes(n: float) -> str:
    """``n`` bytes for a reader: ``812 B``, ``3.4 MiB``, ``66.0 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # unreachable
