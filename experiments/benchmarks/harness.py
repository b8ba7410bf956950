"""Shared scaffolding of the benchmarks in experiments/benchmarks/.

Each benchmark script keeps only what is its own: the NumPy reference implementation, the JAX run
(one ``bayesfair.simulate`` call or a plain scan), its report table and its target. This module
gives them the rest: the common command-line arguments, the machine description, the timing
methods, the NumPy-vs-JAX pairing and the JSON report.

Importing. The scripts say ``import harness``. Run as ``python experiments/benchmarks/<name>.py``
(as ``make bench`` does), Python itself puts the script's folder first on ``sys.path``, so no path
manipulation is needed; the tests import the scripts the same way (they put this folder on
``sys.path`` as the interpreter does for a script), and the fresh-process child below is started
as ``python experiments/benchmarks/harness.py --child module:function`` for the same reason.

Timing methods (rates in run-rounds per second, R * T / wall seconds):

- *NumPy* (:func:`time_numpy`): the reference called ``repeats`` times (seeds ``seed + rep``);
  the best (minimum) wall time counts. Its horizon may be shorter than JAX's (its cost per round
  does not grow with t).
- *JAX in process* (:func:`time_doubling`): an optional untimed warm-up call (one-time JAX
  start-up), then ``repeats`` calls of T and of 2T rounds, interleaved so slow drifts hit both
  alike; each time is the best of its repeats. Every ``simulate`` call traces and compiles its own
  chunk function, so *end-to-end* = R T / time(T) includes compilation; *steady-state* =
  R T / (time(2T) - time(T)) (compilation cancels), *resolved* only when the difference exceeds
  twice the spread of the repeated timings; *per-chunk* = the best rate between the first and the
  last chunk of the 2T calls (of the T calls without 2T), from ``simulate``'s progress callback;
  *compile estimate* = 2 time(T) - time(2T); *fixed cost* = time(T) - R T / per-chunk rate.
- *Fresh process* (:func:`time_fresh`): one side run in a new Python process, timed by the parent
  from spawn to exit: interpreter start-up, imports, tracing, compilation and the run, what a
  researcher waits for from the command line. :func:`fresh_grid` does this for both sides across
  run counts R and horizons T and reports the end-to-end ratio per cell, NumPy's call alone
  against JAX's whole process (conservative for JAX); :func:`steady_grid` gives the in-process
  ratios over the same cells.

A :class:`Pairing` holds a benchmark's two sides as module-level functions, so the same pairing
serves the in-process steady-state measurement (:func:`measure`) and the fresh-process one.
"""

import argparse
import datetime
import importlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import bayesfair  # one CPU device per core: must come before the first JAX operation (importing jax first is fine)

# isort: split
import jax
import numpy as np

from bayesfair.simulation.results import write_text

HERE = Path(__file__).resolve().parent
UNRESOLVED_NOTE = ("? time(2T) - time(T) is under twice the spread of repeated timings (compile-time jitter):"
                   " not resolved; use the per-chunk rate or a longer --horizon")
QUICK_NOTE = "(--quick smoke run: the numbers above are not meaningful)"


# ---------------------------------------------------------------------------------------------
# small helpers


def mean_se(x):
    """``(mean, standard error of the mean)`` of ``x`` (one value per run; s.e. NaN for one value)."""
    x = np.asarray(x, np.float64)
    return float(x.mean()), float(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else float("nan")


def ratio(a, b):
    """``a / b``, or None when either is None."""
    return None if a is None or b is None else a / b


def fmt(x, spec, missing="n/a"):
    """``format(x, spec)``, or ``missing`` when ``x`` is None."""
    return missing if x is None else format(x, spec)


def flag(resolved):
    """``"?"`` for a steady-state rate that is not resolved (``resolved is False``), else ``""``."""
    return "?" if resolved is False else ""


def load_average():
    """The 1/5/15-minute load averages (None where the platform has none)."""
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def machine_info():
    """CPU count, XLA devices, library versions and the load average now (a dict).

    Other work on the machine skews the timings, so :func:`finish` adds ``loadavg_at_end``.
    """
    return {
        "cpu_count": os.cpu_count(),
        "jax_local_device_count": jax.local_device_count(),
        "jax_version": jax.__version__,
        "numpy_version": np.__version__,
        "bayesfair_version": bayesfair.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "loadavg_at_start": load_average(),
    }


# ---------------------------------------------------------------------------------------------
# command line


def parser(doc, name, *, runs, repeats=3, chunk_size=1024, quick_help, seed_help="seed of both simulators"):
    """An argument parser with the arguments every benchmark takes.

    ``--runs``, ``--repeats``, ``--chunk-size``, ``--seed``, ``--quick`` and ``--out`` (default
    ``results/benchmarks/<name>_bench.json``, written atomically). The script adds its own
    (horizons, sizes, policies) and parses with :func:`parse`.

    Parameters
    ----------
    doc : str
        The script's docstring; its first line is the description.
    name : str
        The benchmark's name (``fairx_ts``, ``bilevel``, ...).
    runs, repeats, chunk_size : int
        Defaults of ``--runs``, ``--repeats`` and ``--chunk-size``.
    quick_help : str
        What ``--quick`` sets.
    seed_help : str
        Help of ``--seed``.

    Returns
    -------
    argparse.ArgumentParser
    """
    p = argparse.ArgumentParser(description=doc.strip().split("\n")[0])
    p.add_argument("--runs", type=int, default=runs, help=f"runs R (default {runs})")
    p.add_argument("--repeats", type=int, default=repeats,
                   help=f"timings per measurement; the best is kept (default {repeats})")
    p.add_argument("--chunk-size", type=int, default=chunk_size, help=f"simulate's chunk_size (default {chunk_size})")
    p.add_argument("--seed", type=int, default=0, help=f"{seed_help} (default 0)")
    p.add_argument("--quick", action="store_true", help=f"smoke run: {quick_help}; no verdict")
    out = Path("results/benchmarks") / f"{name}_bench.json"
    p.add_argument("--out", type=Path, default=out, help=f"JSON output, written atomically (default {out})")
    return p


def add_fresh_arguments(p):
    """Add ``--fresh-runs R ...`` and ``--fresh-horizons T ...`` (default ``--horizon``): the
    fresh-process grid, off by default."""
    p.add_argument("--fresh-runs", type=int, nargs="+", default=[],
                   help="also time both sides end to end in a fresh process (start-up, imports and compilation "
                        "included) for these run counts R, e.g. 50 500 2000 (default: not run)")
    p.add_argument("--fresh-horizons", type=int, nargs="+", default=[],
                   help="horizons T of the fresh-process grid (default: --horizon)")


def parse(p, argv, *, quick=None, positive=("runs", "repeats", "chunk_size")):
    """Parse ``argv``, apply the ``--quick`` overrides and check the values.

    Parameters
    ----------
    p : argparse.ArgumentParser
        From :func:`parser`, with the script's own arguments added.
    argv : list of str or None
        Arguments (None: ``sys.argv[1:]``).
    quick : dict, optional
        Attribute values that ``--quick`` sets.
    positive : sequence of str
        Attributes that must be >= 1 (an int, or every element of a list); ``--seed`` must be >= 0.

    Returns
    -------
    argparse.Namespace
    """
    args = p.parse_args(argv)
    if args.quick:
        for key, value in (quick or {}).items():
            setattr(args, key, value)
    for name in positive:
        value = getattr(args, name)
        if min(value, default=1) < 1 if isinstance(value, list) else value < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    for name in ("fresh_runs", "fresh_horizons"):
        if min(getattr(args, name, []), default=1) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if getattr(args, "fresh_runs", None) and not args.fresh_horizons:
        args.fresh_horizons = [args.horizon]
    if args.seed < 0:
        p.error(f"--seed must be >= 0, got {args.seed}")
    return args


# ---------------------------------------------------------------------------------------------
# timing


class Timed(NamedTuple):
    """One timed call: wall ``seconds``, ``stamps`` (seconds since the call began, run-rounds done)
    after every chunk, and the call's ``value``."""

    seconds: float
    stamps: list
    value: Any


def simulate(*args, **kwargs):
    """``bayesfair.simulate(*args, **kwargs)``, timed, with a time stamp after every chunk.

    Returns
    -------
    Timed
        ``value`` is the simulator's dataset.
    """
    stamps = []
    t0 = time.perf_counter()
    ds = bayesfair.simulate(*args, **kwargs,
                            progress=lambda info: stamps.append((time.perf_counter() - t0, info["done"])))
    return Timed(time.perf_counter() - t0, stamps, ds)


def chunk_rate(stamps):
    """Run-rounds per second between the first and the last chunk (None with fewer than two)."""
    if len(stamps) < 2:
        return None
    (ta, da), (tb, db) = stamps[0], stamps[-1]
    return (db - da) / (tb - ta) if tb > ta and db > da else None


def time_numpy(fn, runs, horizon, repeats, seed):
    """Best-of-``repeats`` wall time of a NumPy reference ``fn(runs, horizon, seed)``.

    Call ``rep`` uses seed ``seed + rep``.

    Returns
    -------
    dict
        ``numpy_horizon``, ``numpy_seconds`` and ``numpy_cpu_seconds`` (per call),
        ``numpy_rate`` (R T / best wall time).
    outputs : list
        What each call returned.
    """
    wall, cpu, outputs = [], [], []
    for rep in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        outputs.append(fn(runs, horizon, seed + rep))
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {"numpy_horizon": horizon, "numpy_seconds": wall, "numpy_cpu_seconds": cpu,
            "numpy_rate": runs * horizon / min(wall)}, outputs


def time_doubling(call, runs, horizon, repeats, *, warmup=None, double=True, prefix="jax"):
    """Time a JAX run at T and 2T rounds (module docstring, "JAX in process").

    Parameters
    ----------
    call : callable
        ``call(h) -> Timed`` runs h rounds (e.g. through :func:`simulate`).
    runs, horizon : int
        R and T.
    repeats : int
        Timed calls per horizon; the best counts.
    warmup : int, optional
        Rounds of an untimed warm-up call (None: no warm-up).
    double : bool
        Also time 2T (False: T only; no steady-state rate).
    prefix : str
        Prefix of the result keys (``jax`` or ``bayesfair``).

    Returns
    -------
    dict
        ``{prefix}_seconds_T``, ``_seconds_2T``, ``_end_to_end_rate``, ``_steady_rate``,
        ``_steady_resolved``, ``_timing_spread_seconds``, ``_chunk_rate``,
        ``_compile_seconds_estimate``, ``_fixed_seconds`` (None where not measured).
    calls : dict of int to list of Timed
        Every timed call per horizon, in order.
    """
    if warmup is not None:
        call(warmup)
    horizons = (horizon, 2 * horizon) if double else (horizon,)
    calls = {h: [] for h in horizons}
    for _ in range(repeats):  # interleave T and 2T so slow drifts hit both alike
        for h in horizons:
            calls[h].append(call(h))
    times = {h: [c.seconds for c in cs] for h, cs in calls.items()}
    best = min(times[horizon])
    rate_calls = calls[horizons[-1]]
    rates = [r for c in rate_calls if (r := chunk_rate(c.stamps)) is not None]
    per_chunk = max(rates) if rates else None
    steady = resolved = spread = compile_s = None
    if double:
        best2 = min(times[2 * horizon])
        steady = runs * horizon / (best2 - best) if best2 > best else None  # None: lost in noise
        compile_s = 2 * best - best2
        if repeats > 1:  # the difference measures T rounds only if it clearly exceeds the jitter
            spread = max(max(v) - min(v) for v in times.values())
            resolved = bool(best2 - best > 2 * spread)
    out = {"seconds_T": times[horizon], "seconds_2T": times.get(2 * horizon, []),
           "end_to_end_rate": runs * horizon / best, "steady_rate": steady, "steady_resolved": resolved,
           "timing_spread_seconds": spread, "chunk_rate": per_chunk, "compile_seconds_estimate": compile_s,
           "fixed_seconds": None if per_chunk is None else max(best - runs * horizon / per_chunk, 0.0)}
    return {f"{prefix}_{k}": v for k, v in out.items()}, calls


def ratios(numpy_rate, timing, prefix="jax"):
    """Steady-state, per-chunk and end-to-end rates of a :func:`time_doubling` result over NumPy's."""
    return {"ratio_steady": ratio(timing[f"{prefix}_steady_rate"], numpy_rate),
            "ratio_chunk": ratio(timing[f"{prefix}_chunk_rate"], numpy_rate),
            "ratio_end_to_end": timing[f"{prefix}_end_to_end_rate"] / numpy_rate}


# ---------------------------------------------------------------------------------------------
# the pairing


@dataclass(frozen=True)
class Pairing:
    """A benchmark's two sides, as module-level functions (so a fresh process can import them).

    Attributes
    ----------
    numpy : callable
        ``numpy(runs, horizon, seed, **params)``: the NumPy reference; returns its final metrics.
    jax : callable
        ``jax(runs, horizon, seed, chunk_size, **params) -> Timed``: one JAX run (e.g. via
        :func:`simulate`).
    params : dict
        The problem's fixed, JSON-serializable parameters (arm means, sizes), passed to both.
    numpy_params : dict
        Options of the NumPy reference alone (e.g. its solver).
    """

    numpy: Callable
    jax: Callable
    params: dict = field(default_factory=dict)
    numpy_params: dict = field(default_factory=dict)


def measure(pairing, runs, horizon, *, repeats, seed, chunk_size, numpy_horizon=None, warmup=True, double=True):
    """In-process steady-state measurement of a pairing: NumPy, then JAX at T and 2T.

    Parameters
    ----------
    pairing : Pairing
    runs, horizon, repeats, seed, chunk_size : int
    numpy_horizon : int, optional
        NumPy's horizon (default T).
    warmup : bool
        Make an untimed warm-up JAX call of ``min(T, chunk_size)`` rounds first.
    double : bool
        Also time 2T rounds (False: no steady-state rate).

    Returns
    -------
    result : dict
        :func:`time_numpy`, :func:`time_doubling` and :func:`ratios` keys.
    numpy_outputs : list
        The NumPy reference's outputs.
    calls : dict of int to list of Timed
        The JAX calls.
    """
    np_horizon = horizon if numpy_horizon is None else min(horizon, numpy_horizon)
    np_res, np_out = time_numpy(lambda r, t, s: pairing.numpy(r, t, s, **pairing.params, **pairing.numpy_params),
                                runs, np_horizon, repeats, seed)
    timing, calls = time_doubling(lambda h: pairing.jax(runs, h, seed, chunk_size, **pairing.params), runs,
                                  horizon, repeats,
                                  warmup=min(horizon, chunk_size) if warmup else None, double=double)
    return {**np_res, **timing, **ratios(np_res["numpy_rate"], timing)}, np_out, calls


def steady_grid(pairing, runs_list, horizons, *, repeats, seed, chunk_size):
    """:func:`measure` over every (R, T) cell (NumPy at every T); the per-cell ratios.

    Returns
    -------
    list of dict
        One row per cell: ``runs``, ``horizon`` and :func:`measure`'s result.
    """
    return [{"runs": r, "horizon": t, **measure(pairing, r, t, repeats=repeats, seed=seed, chunk_size=chunk_size)[0]}
            for r in runs_list for t in horizons]


def _target(fn):
    """``module:function`` of a module-level function, importable from this folder."""
    module = fn.__module__
    if module == "__main__":  # the running script: import it by its file name
        module = Path(sys.modules["__main__"].__file__).stem
    return f"{module}:{fn.__qualname__}"


def time_fresh(fn, **kwargs):
    """Run ``fn(**kwargs)`` in a new Python process and time it from spawn to exit.

    Parameters
    ----------
    fn : callable
        A module-level function of a module in this folder (e.g. a :class:`Pairing` side).
    **kwargs
        Its JSON-serializable arguments.

    Returns
    -------
    dict
        ``wall_seconds`` (spawn to exit: start-up, imports, compilation and the run),
        ``import_seconds`` (importing ``fn``'s module in the child) and ``call_seconds`` (the
        call alone, compilation included).

    Raises
    ------
    RuntimeError
        If the child fails (its stderr is in the message).
    """
    arguments = json.dumps(kwargs, default=lambda a: np.asarray(a).tolist())  # arrays as lists
    cmd = [sys.executable, str(HERE / "harness.py"), "--child", _target(fn), arguments]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"fresh-process run of {_target(fn)} failed (exit {proc.returncode}):\n{proc.stderr}")
    child = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"wall_seconds": wall, **child}


def fresh_grid(pairing, runs_list, horizons, *, seed, chunk_size):
    """Both sides of a pairing end to end in fresh processes, for every (R, T) cell.

    Returns
    -------
    list of dict
        Per cell: ``runs``, ``horizon``, ``numpy`` and ``jax`` (:func:`time_fresh` results) and
        ``ratio_end_to_end_fresh`` = NumPy's call seconds / JAX's wall seconds (> 1: JAX is
        faster). Conservative for JAX: the NumPy child imports the benchmark module, which imports
        bayesfair and JAX, so NumPy is charged for its call alone, JAX for everything.
    """
    rows = []
    for r in runs_list:
        for t in horizons:
            sys.stderr.write(f"fresh process: R={r}, T={t} ...\n")
            np_run = time_fresh(pairing.numpy, runs=r, horizon=t, seed=seed, **pairing.params,
                                **pairing.numpy_params)
            jax_run = time_fresh(pairing.jax, runs=r, horizon=t, seed=seed, chunk_size=min(chunk_size, t),
                                 **pairing.params)
            rows.append({"runs": r, "horizon": t, "numpy": np_run, "jax": jax_run,
                         "ratio_end_to_end_fresh": np_run["call_seconds"] / jax_run["wall_seconds"]})
    return rows


def print_fresh(rows):
    """Print a :func:`fresh_grid` table."""
    if not rows:
        return
    print("end to end in a fresh process (JAX: start-up, imports, compilation and the run; NumPy: its call "
          "alone; seconds):")
    head = f"{'R':>6} {'T':>9} {'numpy s':>9} {'jax s':>9} {'(jax call)':>10} {'np/jax':>7}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['runs']:>6} {r['horizon']:>9} {r['numpy']['call_seconds']:>9.2f} {r['jax']['wall_seconds']:>9.2f} "
              f"{r['jax']['call_seconds']:>10.2f} {r['ratio_end_to_end_fresh']:>7.2f}")


def _child(target, kwargs):
    """The fresh process: import ``module:function``, call it, print the timings as one JSON line."""
    module, name = target.split(":")
    t0 = time.perf_counter()
    fn = getattr(importlib.import_module(module), name)
    t1 = time.perf_counter()
    fn(**json.loads(kwargs))
    print(json.dumps({"import_seconds": t1 - t0, "call_seconds": time.perf_counter() - t1}))


# ---------------------------------------------------------------------------------------------
# report


def compare(name, numpy_values, jax_values):
    """Mean +- s.e. over runs of a final metric from both sides: ``numpy_<name>``, ``numpy_<name>_se``,
    ``jax_<name>``, ``jax_<name>_se`` (the statistical check; not asserted)."""
    (nm, ns), (jm, js) = mean_se(numpy_values), mean_se(jax_values)
    return {f"numpy_{name}": nm, f"numpy_{name}_se": ns, f"jax_{name}": jm, f"jax_{name}_se": js}


def print_preamble(report, problem, numpy_note="1 thread", jax_name="JAX"):
    """Print the machine line and ``<problem>, R=.., best of ..; rates in run-rounds/s (NumPy: <numpy_note>;
    <jax_name>: <n> devices)``."""
    m, s = report["machine"], report["settings"]
    print(machine_line(m))
    print(f"{problem}, R={s['runs']}, best of {s['repeats']}; rates in run-rounds/s (NumPy: {numpy_note}; "
          f"{jax_name}: {m['jax_local_device_count']} devices)")


def rate(x, missing="n/a"):
    """A rate in run-rounds/s as printed (``12,345``), or ``missing`` for None."""
    return fmt(x, ",.0f", missing)


def print_table(rows, columns, prefix=None):
    """Print ``rows`` as a table with a header line and a rule.

    Parameters
    ----------
    rows : list of dict
        One per line.
    columns : list of (str, str, callable)
        Per column: its title, its format spec (``">11"``, ``"<22"``) and ``cell(row) -> str``.
    prefix : str, optional
        With ``"jax"`` or ``"bayesfair"``: print :data:`UNRESOLVED_NOTE` after the table when a
        row's ``<prefix>_steady_resolved`` is False.
    """
    head = " ".join(format(title, spec) for title, spec, _ in columns)
    print(head)
    print("-" * len(head))
    for r in rows:
        print(" ".join(format(cell(r), spec) for _, spec, cell in columns))
    if prefix and any(r.get(f"{prefix}_steady_resolved") is False for r in rows):
        print(UNRESOLVED_NOTE)


def machine_line(m):
    """One printed line describing the machine of a report."""
    start, end = m.get("loadavg_at_start"), m.get("loadavg_at_end")
    load = "" if start is None else f", load average {start[0]:.2f}" + ("" if end is None else f" -> {end[0]:.2f}")
    return (f"machine: {m['cpu_count']} CPUs, jax.local_device_count()={m['jax_local_device_count']}, "
            f"jax {m['jax_version']}, numpy {m['numpy_version']}, {m['platform']}{load}")


def new_report(benchmark, argv, args, **settings):
    """The report's common head: name, date, command line, settings and machine.

    Parameters
    ----------
    benchmark : str
        Its name: the script is ``experiments/benchmarks/<benchmark>_bench.py``.
    argv : list of str or None
        The arguments given to ``main`` (None: ``sys.argv[1:]``).
    args : argparse.Namespace
        The parsed command line; its values are the settings (paths as strings).
    **settings
        Further settings (the problem's fixed parameters).

    Returns
    -------
    dict
    """
    script = f"experiments/benchmarks/{benchmark}_bench.py"
    values = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    return {"benchmark": benchmark,
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "command": " ".join(["python", script, *(sys.argv[1:] if argv is None else argv)]),
            "settings": {**values, **settings},
            "machine": machine_info()}


def finish(report, out, printer):
    """Record the load average at the end, print the report and write it to ``out`` as JSON.

    Parameters
    ----------
    report : dict
        From :func:`new_report`, completed by the script.
    out : path-like
        The JSON file, written atomically (:func:`bayesfair.simulation.results.write_text`).
    printer : callable
        The script's ``print_report(report)``.

    Returns
    -------
    dict
        ``report``.
    """
    report["machine"]["loadavg_at_end"] = load_average()
    printer(report)
    write_text(out, json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
    return report


def print_target(text, quick):
    """Print the target line ``target: <text>`` and, after a ``--quick`` run, that it means nothing."""
    print(f"target: {text}")
    if quick:
        print(QUICK_NOTE)


def steady_verdict(target, quick, missing):
    """The printed verdict of a steady-state target (``ratio_steady``, ``ratio_chunk``, ``met``,
    ``steady_resolved`` in ``target``); ``missing`` says why there is no ratio."""
    if quick:
        return "not evaluated in a --quick run"
    if target["ratio_steady"] is None:
        return f"not evaluated ({missing})"
    return (f"{'MET' if target['met'] else 'NOT MET'} (steady-state jax/numpy = {target['ratio_steady']:.2f}"
            f"{'' if target['steady_resolved'] is not False else ', NOT resolved'}; "
            f"per-chunk cross-check {fmt(target['ratio_chunk'], '.2f')})")


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "--child":
        sys.exit("usage: python experiments/benchmarks/harness.py --child module:function JSON-ARGUMENTS")
    _child(sys.argv[2], sys.argv[3])
