"""Where a fresh process's time goes: one ``grid_bench.py`` cell's bayesfair side, phase by phase.

``grid_bench.py`` reports a fresh process's end-to-end time (spawn to exit). This script splits
that time for one cell (default: TS, K = 10, R = 100, T = 2e4, with the user's warm persistent
compilation cache): the interpreter's start, ``import numpy``, ``import bayesfair`` (JAX's import
included), the first ``simulate`` call (with JAX's own accounting of tracing, lowering to MLIR
and XLA compilation or persistent-cache loading, from ``jax.monitoring``), a second identical
call (steady state), and the interpreter's exit (from the end of the script to the process's
end, as the parent sees it). Every stamp is wall-clock ``time.time()`` on the same machine.

``--freeze-at-exit`` adds processes that call ``gc.freeze()`` at the end of the script, so that
the interpreter's final garbage collections skip every object alive then: the difference from
the plain processes is what those collections cost. It is a measurement only; bayesfair does not
change how a user's interpreter exits.

Usage: ``python experiments/benchmarks/fresh_process.py [--family ts_k10] [--runs 100]
[--horizon 20000] [--repeats 3] [--freeze-at-exit] [--out FILE]``; writes JSON (atomically) and
prints a table of medians.
"""

from __future__ import annotations

import time

_T_START = time.time()  # first line the child runs: the interpreter has started

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
PHASES = ("interpreter start", "import numpy", "import bayesfair", "first call", "  of which JAX tracing",
          "  of which lowering", "  of which XLA compile / cache load", "second call (steady)", "exit")


def _child(family, runs, horizon, freeze):
    stamps = {"start": _T_START}
    import numpy  # noqa: F401

    stamps["numpy"] = time.time()
    import bayesfair  # noqa: F401

    stamps["bayesfair"] = time.time()
    from jax import monitoring

    jax_seconds = {"trace": 0.0, "lower": 0.0, "compile": 0.0}
    names = {"/jax/core/compile/jaxpr_trace_duration": "trace",
             "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
             "/jax/core/compile/backend_compile_duration": "compile"}

    def listen(event, duration, **_):
        if event in names and stamps.get("first") is None:
            jax_seconds[names[event]] += duration

    monitoring.register_event_duration_secs_listener(listen)
    sys.path.insert(0, str(HERE))
    import grid_bench

    fam = grid_bench.FAMILIES[family]
    call = getattr(grid_bench, fam.bayesfair)
    stamps["setup"] = time.time()
    call(runs, horizon, 1, 1024, **dict(fam.params))
    stamps["first"] = time.time()
    call(runs, horizon, 1, 1024, **dict(fam.params))
    stamps["second"] = time.time()
    if freeze:
        import gc

        gc.freeze()
    stamps["end"] = time.time()
    print(json.dumps({"stamps": stamps, "jax": jax_seconds}), flush=True)


def _one(family, runs, horizon, freeze):
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", family, str(runs), str(horizon), str(int(freeze))]
    spawn = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    exited = time.time()
    if proc.returncode != 0:
        raise RuntimeError(f"child failed (exit {proc.returncode}):\n{proc.stderr}")
    rep = json.loads(proc.stdout.strip().splitlines()[-1])
    s, j = rep["stamps"], rep["jax"]
    return {"interpreter start": s["start"] - spawn, "import numpy": s["numpy"] - s["start"],
            "import bayesfair": s["bayesfair"] - s["numpy"], "first call": s["first"] - s["setup"],
            "  of which JAX tracing": j["trace"], "  of which lowering": j["lower"],
            "  of which XLA compile / cache load": j["compile"], "second call (steady)": s["second"] - s["first"],
            "exit": exited - s["end"], "spawn to exit": exited - spawn}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--family", default="ts_k10")
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--horizon", type=int, default=20_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--freeze-at-exit", action="store_true")
    p.add_argument("--out", default="results/benchmarks/fresh_process.json")
    a = p.parse_args(argv)
    for name in ("runs", "horizon", "repeats"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(a, name)}")
    sys.path.insert(0, str(HERE))
    import grid_bench

    if a.family not in grid_bench.FAMILIES:
        p.error(f"--family must be one of {sorted(grid_bench.FAMILIES)}, got {a.family!r}")
    machine = grid_bench.machine_info()  # CPU count, versions, load average at the start (no JAX here)
    modes = [False, True] if a.freeze_at_exit else [False]
    _one(a.family, a.runs, a.horizon, False)  # untimed: fills the persistent cache if it is cold
    rows = {m: [] for m in modes}
    for _ in range(a.repeats):  # alternate the modes
        for m in modes:
            rows[m].append(_one(a.family, a.runs, a.horizon, m))
    med = {m: {k: statistics.median(r[k] for r in rows[m]) for k in rows[m][0]} for m in modes}
    label = grid_bench.FAMILIES[a.family].label
    print(f"{label}, R = {a.runs}, T = {a.horizon}: medians of {a.repeats} fresh processes (seconds), "
          f"load average {machine['loadavg_at_start'][0]:.2f} -> {os.getloadavg()[0]:.2f}")
    print(f"{'phase':<40}" + "".join(f"{'gc.freeze() at exit' if m else 'plain':>22}" for m in modes))
    for k in (*PHASES, "spawn to exit"):
        print(f"{k:<40}" + "".join(f"{med[m][k]:22.3f}" for m in modes))
    from bayesfair.simulation.results import write_text  # atomic; creates the folder

    report = {"benchmark": "fresh_process", "family": a.family, "label": label, "runs": a.runs, "horizon": a.horizon,
              "repeats": a.repeats, "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "machine": {**machine, "loadavg_at_end": list(os.getloadavg())},
              "medians": {("freeze_at_exit" if m else "plain"): med[m] for m in modes},
              "processes": {("freeze_at_exit" if m else "plain"): rows[m] for m in modes}}
    write_text(a.out, json.dumps(report, indent=1))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), bool(int(sys.argv[5])))
    else:
        main()
