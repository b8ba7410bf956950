"""Gradient cost of the group-bias GLM on all rows vs on its distinct cells, per recipe design.

:func:`bayesfair.inference.glm_fit.fit_glm` fits the model on
:func:`~bayesfair.inference.glm_fit.compress_design`'s distinct (group, bucket, x, y) rows with
their counts: the same log-density (checked here, to 1e-9 relative), fewer rows per gradient. For
each recipe's default design on all rows (COMPAS ordered logistic, Adult Bernoulli by sex and by
race, family income skew-t) this prints the rows and cells, and the steady-state time of one
jitted value-and-gradient of the potential (float64, best of 3 repeats of 30 calls) on rows and
on cells, in the same process; and on cells with X as a dense array instead of ``build_glm``'s
sparse one-hot columns (:mod:`bayesfair.posteriors.indicators`; the same value, checked).

Usage: python experiments/benchmarks/glm_cells_bench.py [compas] [adult_sex] [adult_race] [income]
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import numpy as np
from numpyro.infer.util import initialize_model

import bayesfair  # noqa: F401  (one CPU device per core, before JAX starts)
from bayesfair.inference.glm_fit import build_glm, compress_design, glm_design
from bayesfair.workflow.recipes import adult_group_bias, compas_group_bias, family_income_group_bias


def design(name: str):
    """The recipe's default --model glm design on all rows."""
    if name == "compas":
        table, _ = compas_group_bias.build(None)
        y, keep, _ = compas_group_bias.response(table, argparse.Namespace(likelihood="ordered_logistic"))
        return glm_design(table, likelihood="ordered_logistic", y=y, keep=keep, n_levels=10)
    if name.startswith("adult_"):
        table = adult_group_bias.adult_table(name.removeprefix("adult_"), min_level_rows=50)
        return glm_design(table, likelihood="bernoulli")
    table = family_income_group_bias.glm_table(min_level_rows=50)
    ns = argparse.Namespace(likelihood="skew_t", raw_income=False)
    y, keep, _ = family_income_group_bias.response(table, ns)
    return glm_design(table, likelihood="skew_t", y=y, keep=keep)


def grad_ms(model, args) -> tuple[float, float]:
    """(potential at the initial point, ms per jitted value-and-gradient)."""
    info = initialize_model(jax.random.key(0), model, model_args=args)
    f = jax.jit(jax.value_and_grad(info.potential_fn))
    z = info.param_info.z
    value = float(f(z)[0])
    best = np.inf
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(30):
            v, _g = f(z)
        v.block_until_ready()
        best = min(best, (time.perf_counter() - t) / 30)
    return value, 1e3 * best


def main(argv: list[str]) -> int:
    jax.config.update("jax_enable_x64", True)
    for name in argv or ["compas", "adult_sex", "adult_race", "income"]:
        rows = design(name)
        cells, counts = compress_design(rows)
        v_rows, t_rows = grad_ms(*build_glm(rows))
        model, args = build_glm(cells, weights=counts)
        v_cells, t_cells = grad_ms(model, args)
        v_dense, t_dense = grad_ms(model, (*args[:2], cells.X, *args[3:]))
        assert abs(v_rows - v_cells) <= 1e-9 * abs(v_rows), (v_rows, v_cells)
        assert abs(v_dense - v_cells) <= 1e-9 * abs(v_rows), (v_dense, v_cells)
        load = " ".join(open("/proc/loadavg").read().split()[:3])
        print(f"{name}: {rows.y.size:,} rows -> {cells.y.size:,} cells; value-and-gradient {t_rows:.2f} ms on rows, "
              f"{t_cells:.2f} ms on cells ({t_rows / t_cells:.1f}x), {t_dense:.2f} ms on cells with a dense X "
              f"({t_dense / t_cells:.1f}x); load {load}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
