"""Compilation cost per policy of the demo study: cold cache, warm cache, and a second call in process.

Each measurement runs in a new Python process (``--child``) that loads the demo config
(the shipped config ``demo``: five policies on 10 Bernoulli arms), shrinks it to ``--runs`` runs of
``--horizon`` rounds (compilation does not depend on either beyond the chunk size), calls
``simulate`` twice with the same objects and reports, per policy, the seconds ``simulate`` spent
compiling (tracing, lowering and compiling, or loading from the persistent cache; from the
``compile_seconds`` its progress callback reports). The first process uses an empty cache folder
(cold), the second the same folder again (warm); ``--no-cache`` adds a process with the
persistent cache turned off (``BAYESFAIR_NO_COMPILE_CACHE=1``) and ``--serial`` a cold process (its
own empty folder) with the policies compiled one after another (``BAYESFAIR_SERIAL_COMPILE=1``)
instead of concurrently. With concurrent compilation (``simulate``'s default for several policies)
the joint compile time is reported with the first policy; the ``total`` column compares the modes.
Writes JSON (atomically) and prints a table.

Usage: ``python experiments/benchmarks/compile_bench.py [--runs R] [--horizon T] [--no-cache] [--serial]
[--out FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _child(runs, horizon):
    t0 = time.perf_counter()
    import bayesfair
    from bayesfair.workflow.cli import demo_config
    from bayesfair.workflow.config import load_config

    study = load_config(demo_config(), [f"runs={runs}", f"horizon={horizon}"])
    imported = time.perf_counter() - t0
    calls = []
    for _ in range(2):
        per_policy, last = {}, [0.0]

        def progress(info, per_policy=per_policy, last=last):
            per_policy[info["policy"]] = per_policy.get(info["policy"], 0.0) + info["compile_seconds"] - last[0]
            last[0] = info["compile_seconds"]

        t = time.perf_counter()
        bayesfair.simulate(0, study.env, study.policies, horizon, runs, merit=study.merit,
                           progress=progress)
        calls.append({"seconds": time.perf_counter() - t, "compile_seconds": per_policy})
    print(json.dumps({"import_seconds": imported, "calls": calls, "wall_to_end": time.perf_counter() - t0}))


def _run(runs, horizon, env):
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(runs), str(horizon)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    return {"wall_seconds": time.perf_counter() - t0, **json.loads(proc.stdout.strip().splitlines()[-1])}


def main(argv=None):
    """Run the cold / warm (/ no-cache) processes, print the table, write the JSON."""
    p = argparse.ArgumentParser(description=__doc__.strip().split("\n")[0])
    p.add_argument("--runs", type=int, default=20, help="runs R (default 20, the demo's)")
    p.add_argument("--horizon", type=int, default=2048, help="rounds T (default 2048: two chunks)")
    p.add_argument("--no-cache", action="store_true", help="also a process with the persistent cache off")
    p.add_argument("--serial", action="store_true", help="also a cold process compiling the policies one by one")
    p.add_argument("--out", type=Path, default=Path("results/benchmarks/compile_bench.json"))
    args = p.parse_args(argv)
    for name in ("runs", "horizon"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    folder = tempfile.mkdtemp(prefix="bayesfair-compile-bench-")
    base = {k: v for k, v in os.environ.items()
            if k not in ("BAYESFAIR_NO_COMPILE_CACHE", "JAX_COMPILATION_CACHE_DIR", "BAYESFAIR_SERIAL_COMPILE")}
    modes = {"cold": {**base, "BAYESFAIR_COMPILE_CACHE_DIR": folder},
             "warm": {**base, "BAYESFAIR_COMPILE_CACHE_DIR": folder}}
    if args.serial:
        own = tempfile.mkdtemp(prefix="bayesfair-compile-bench-")
        modes = {"cold serial": {**base, "BAYESFAIR_COMPILE_CACHE_DIR": own, "BAYESFAIR_SERIAL_COMPILE": "1"}, **modes}
    if args.no_cache:
        modes = {"no cache": {**base, "BAYESFAIR_NO_COMPILE_CACHE": "1"}, **modes}
    report = {"benchmark": "compile", "settings": {"runs": args.runs, "horizon": args.horizon},
              "cpu_count": os.cpu_count(), "loadavg_at_start": list(os.getloadavg()), "modes": {}}
    for mode, env in modes.items():
        report["modes"][mode] = _run(args.runs, args.horizon, env)
    report["loadavg_at_end"] = list(os.getloadavg())
    print(f"demo study, R={args.runs}, T={args.horizon}; load average {report['loadavg_at_start'][0]:.2f} -> "
          f"{report['loadavg_at_end'][0]:.2f}; compile seconds per policy (first call / second call in process)")
    policies = list(next(iter(report["modes"].values()))["calls"][0]["compile_seconds"])
    print(f"{'mode':<11} {'process s':>9} {'total':>15} " + " ".join(f"{name:>17}" for name in policies))
    for mode, r in report["modes"].items():
        first, second = r["calls"][0]["compile_seconds"], r["calls"][1]["compile_seconds"]
        total = f"{sum(first.values()):.2f} / {sum(second.values()):.2f}"
        print(f"{mode:<11} {r['wall_seconds']:>9.1f} {total:>15} "
              + " ".join(f"{first[n]:>8.2f} / {second[n]:>5.2f}" for n in policies))
    from bayesfair.simulation.results import write_text  # atomic (imports JAX: only here, the children stay light)

    write_text(args.out, json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return report


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        _child(int(sys.argv[2]), int(sys.argv[3]))
    else:
        main()
