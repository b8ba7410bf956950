"""What a full compilation-cache folder costs a new process: JAX's own size bound against bayesfair's trim.

With ``jax_compilation_cache_max_size`` set, JAX's cache lists the whole folder and reads one
small ``<key>-atime`` file per entry before *every* write (``LRUCache._evict_if_needed``), so
a write's cost grows with the entries already there. bayesfair leaves that bound off and trims
the folder itself on a background thread, at most once an hour (``bayesfair.core._compile.trim_cache``).
This script measures both:

1. **One write**, in this process: the median time of 20 writes of 20 KB into a folder that
   already holds N entries (each with its ``-atime`` file, as JAX's bound leaves them), through
   JAX's cache class with the bound on (2 GiB) and off (-1).
2. **A new process's first NUTS fit and first study** (the group-bias model, 4 chains, 200 + 200
   draws: on 2 cores the chains run one after the other and numpyro initializes each op by op,
   ~270 small programs that bayesfair keeps in the cache; then a FairX-TS study, K = 10, 20 runs,
   2,000 rounds) with the folder pre-filled with N entries from other programs (random keys:
   every program of the fit misses and is written, as for a user whose folder other studies
   filled), bayesfair's setting against JAX's bound turned on in the same process. Each process
   gets its own copy of the pre-filled folder; the two settings alternate.

The second part uses only public settings; the first reads JAX's private ``jax._src.lru_cache``
(the class behind the persistent cache) to time a write alone.

Usage: ``python experiments/benchmarks/cache_write_bench.py [--entries 0 2000 7000] [--repeats 2]
[--out FILE]``; prints two tables and writes JSON (atomically).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
_BOUND = 2 << 30  # the bound bayesfair used to give JAX (2 GiB)
_SIZE = 20_000  # bytes per filler entry (a small program's entry is a few KB to ~100 KB)


def _fill(folder: Path, n: int, seed: int = 0) -> None:
    """``n`` filler entries with random keys, each with its ``-atime`` file."""
    import random

    rng = random.Random(seed)
    blob = os.urandom(_SIZE)
    stamp = time.time_ns().to_bytes(8, "little")
    folder.mkdir(parents=True, exist_ok=True)
    for _ in range(n):
        key = f"jit_filler-{rng.getrandbits(256):064x}"
        (folder / f"{key}-cache").write_bytes(blob)
        (folder / f"{key}-atime").write_bytes(stamp)


def _need_filelock() -> None:
    import importlib.util

    if importlib.util.find_spec("filelock") is None:
        raise RuntimeError("cache_write_bench.py times JAX's own cache-size bound, which needs the filelock package "
                           "(pip install filelock; bayesfair itself depends on it)")


def write_cost(entries: list[int], writes: int = 20) -> list[dict]:
    """Part 1: median seconds per write into a folder of N entries, JAX's bound on and off."""
    _need_filelock()
    from jax._src.lru_cache import LRUCache

    rows = []
    value = os.urandom(_SIZE)
    for n in entries:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            _fill(folder, n)
            row = {"entries": n}
            for label, bound in (("jax_bound", _BOUND), ("no_bound", -1)):
                cache = LRUCache(str(folder), max_size=bound)
                times = []
                for i in range(writes):
                    t0 = time.perf_counter()
                    cache.put(f"probe-{label}-{i}", value)
                    times.append(time.perf_counter() - t0)
                row[label] = statistics.median(times)
            rows.append(row)
    return rows


_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import jax
import bayesfair
from bayesfair.core import _compile
from bayesfair.inference import fitting
_compile.enable_persistent_cache()
if sys.argv[1] == "jax_bound":
    jax.config.update("jax_compilation_cache_max_size", int(sys.argv[2]))
rng = np.random.default_rng(3)
groups = np.array([0, 0, 1, 1])
arms = rng.integers(0, 4, 240)
X = np.c_[rng.normal(size=(240, 1)), np.ones(240)]
y = X @ np.array([0.5, 0.2]) + 0.8 * (groups[arms] == 1) + 0.6 * rng.normal(size=240)
data = fitting.group_bias_data(arms, X, y, groups)
t1 = time.perf_counter()
# 4 chains (the default); only timed, so no warning, but whether it converged goes into the report
fit = fitting.fit(data, s=1.0, num_warmup=200, num_samples=200, seed=1, warn=False)
t2 = time.perf_counter()
env = bayesfair.bernoulli_arms(np.linspace(0.1, 0.9, 10))
pol = bayesfair.fairx_ts(bayesfair.beta_bernoulli(), bayesfair.core.merit.exponential(4.0))
bayesfair.simulate(1, env, {"fairx_ts": pol}, 2000, 20)
t3 = time.perf_counter()
print(json.dumps({"fit": t2 - t1, "study": t3 - t2, "process": t3 - t0, "converged": bool(fit.converged),
                  "max_rhat": float(fit.convergence.max_rhat)}))
"""


def first_fit(entries: list[int], repeats: int) -> list[dict]:
    """Part 2: a new process's first fit and study, the folder pre-filled with N entries."""
    rows = []
    for n in entries:
        with tempfile.TemporaryDirectory() as tmp:
            template = Path(tmp) / "template"
            _fill(template, n, seed=n)
            res = {"no_bound": [], "jax_bound": []}
            for r in range(repeats):
                for label in ("no_bound", "jax_bound"):
                    folder = Path(tmp) / f"{label}-{r}"
                    shutil.copytree(template, folder)
                    before = sum(1 for p in folder.iterdir() if p.name.endswith("-cache"))
                    env = {**os.environ, "BAYESFAIR_COMPILE_CACHE_DIR": str(folder)}
                    env.pop("JAX_COMPILATION_CACHE_DIR", None)
                    out = subprocess.run([sys.executable, "-c", _CHILD, label, str(_BOUND)], env=env,
                                         capture_output=True, text=True, check=False)
                    if out.returncode != 0:
                        raise RuntimeError(f"child ({label}, {n} entries) failed:\n{out.stderr}")
                    rep = json.loads(out.stdout.strip().splitlines()[-1])
                    rep["written"] = sum(1 for p in folder.iterdir() if p.name.endswith("-cache")) - before
                    res[label].append(rep)
                    shutil.rmtree(folder)
            row = {"entries": n}
            for label, reps in res.items():
                for k in ("fit", "study", "written"):
                    row[f"{label}_{k}"] = statistics.median(x[k] for x in reps)
            row["processes"] = res
            rows.append(row)
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--entries", type=int, nargs="+", default=[0, 2000, 7000])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--out", default="results/benchmarks/cache_write_bench.json")
    a = p.parse_args(argv)
    if a.repeats < 1:
        p.error(f"--repeats must be >= 1, got {a.repeats}")
    if any(n < 0 for n in a.entries):
        p.error(f"--entries must be >= 0, got {a.entries}")
    try:
        _need_filelock()
    except RuntimeError as e:
        p.error(str(e))
    sys.path.insert(0, str(HERE))
    import grid_bench

    machine = grid_bench.machine_info()
    writes = write_cost(a.entries)
    print("one write of 20 KB (median of 20, ms)")
    print(f"{'entries':>8} {'JAX bound':>10} {'no bound':>10}")
    for r in writes:
        print(f"{r['entries']:>8} {r['jax_bound'] * 1e3:>10.1f} {r['no_bound'] * 1e3:>10.2f}")
    fits = first_fit(a.entries, a.repeats)
    print(f"\na new process's first fit and study, seconds (medians of {a.repeats})")
    print(f"{'entries':>8} {'written':>8} {'fit: bound':>11} {'no bound':>9} {'study: bound':>13} {'no bound':>9}")
    for r in fits:
        print(f"{r['entries']:>8} {r['no_bound_written']:>8.0f} {r['jax_bound_fit']:>11.2f} {r['no_bound_fit']:>9.2f} "
              f"{r['jax_bound_study']:>13.2f} {r['no_bound_study']:>9.2f}")
    fits_run = [rep for r in fits for reps in r["processes"].values() for rep in reps]
    bad = [rep for rep in fits_run if not rep["converged"]]
    print(f"the timed fits: {len(fits_run) - len(bad)} of {len(fits_run)} converged (R-hat, ESS, divergences: "
          f"bayesfair.inference.fitting's checks); max R-hat {max(rep['max_rhat'] for rep in fits_run):.3f}")
    from bayesfair.simulation.results import write_text  # atomic; creates the folder

    created = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    report = {"benchmark": "cache_write_bench", "created": created,
              "machine": {**machine, "loadavg_at_end": list(os.getloadavg())}, "entry_bytes": _SIZE,
              "jax_bound_bytes": _BOUND, "write_seconds": writes, "first_fit": fits}
    write_text(a.out, json.dumps(report, indent=1))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
