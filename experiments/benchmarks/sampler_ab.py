"""Steady-state A/B of the exact Gamma sampler inside ``simulate``, in ONE process.

The NumPy reference of ``grid_bench.py`` (FairX-TS or TS, Beta-Bernoulli, merit exp(4 mu),
fairness and reward regret at T/2 and T), bayesfair with ``bayesfair.core._random.gamma`` taken from
another copy of ``_random.py`` (``--old``, e.g. the file at an earlier commit:
``git show <commit>:bayesfair/core/_random.py > /tmp/old_random.py``), and bayesfair with the current
sampler, interleaved per repetition; medians. Each side gets its own policy object, so its own
trace and compiled program; the first call per side (compilation or cache load) is not timed.
Prints one JSON line: seconds per side, ratios to NumPy, the old/new speed-up, and the mean final
fairness regret of each side (a sanity check, not asserted).

Usage: ``python experiments/benchmarks/sampler_ab.py --old /tmp/old_random.py fairx_ts_k10 500 20000 1``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import grid_bench as gb  # noqa: E402

import bayesfair  # noqa: E402
from bayesfair.core import _random  # noqa: E402
from bayesfair.simulation.metric_parts import FairXRegrets  # noqa: E402

FAMILIES = {"fairx_ts_k10": (10, "fairx_ts"), "fairx_ts_k60": (60, "fairx_ts"), "ts_k10": (10, "ts")}


def _study(k: int, policy: str):
    merit = bayesfair.core.merit.exponential(gb.MERIT_C)
    env = bayesfair.bernoulli_arms(gb.bernoulli_means(k, 0))
    post = bayesfair.beta_bernoulli()
    pol = bayesfair.fairx_ts(post, merit) if policy == "fairx_ts" else bayesfair.thompson(post)
    return env, pol, merit


def _run(gamma, study, runs: int, horizon: int) -> tuple[float, float]:
    env, pol, merit = study
    _random.gamma = gamma  # looked up at trace time by _random.beta
    t0 = time.perf_counter()
    ds = bayesfair.simulate(0, env, {"p": pol}, horizon, runs, merit=merit, metrics=[FairXRegrets(merit)],
                            checkpoints=[max(horizon // 2, 1), horizon])
    return time.perf_counter() - t0, float(ds["fairness_regret"].sel(policy="p").values[:, -1].mean())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="path of the other _random.py")
    ap.add_argument("family", choices=sorted(FAMILIES))
    ap.add_argument("runs", type=int)
    ap.add_argument("horizon", type=int)
    ap.add_argument("repeats", type=int)
    args = ap.parse_args(argv)
    spec = importlib.util.spec_from_file_location("old_random", args.old)
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    gammas = {"old": old.gamma, "new": _random.gamma}
    k, policy = FAMILIES[args.family]
    studies = {side: _study(k, policy) for side in gammas}
    for side in gammas:  # compile or load, untimed (a short horizon: same program, chunk = min(1024, T))
        _run(gammas[side], studies[side], args.runs, min(args.horizon, 2048))
    times: dict[str, list[float]] = {"numpy": [], "old": [], "new": []}
    regret = {}
    for rep in range(args.repeats):
        t0 = time.perf_counter()
        out = gb.numpy_fairx(args.runs, args.horizon, rep, k, policy)
        times["numpy"].append(time.perf_counter() - t0)
        regret["numpy"] = float(out["fairness_regret"][:, -1].mean())
        for side in gammas:
            s, regret[side] = _run(gammas[side], studies[side], args.runs, args.horizon)
            times[side].append(s)
    med = {side: float(np.median(t)) for side, t in times.items()}
    print(json.dumps({"family": args.family, "runs": args.runs, "horizon": args.horizon, "repeats": args.repeats,
                      "median_seconds": med, "seconds": times, "mean_final_fairness_regret": regret,
                      "old_x_numpy": med["numpy"] / med["old"], "new_x_numpy": med["numpy"] / med["new"],
                      "speedup_new_over_old": med["old"] / med["new"]}))


if __name__ == "__main__":
    main()
