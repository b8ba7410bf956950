"""The tables and figures of the documentation pages that come from a study, written by one command.

Each entry of ``TABLES`` names a study config, the page table it produces (a markdown file under
``docs/tables/``, included by the page) and its figure (under ``docs/figures/``). The page says
which command produced it; ``tests/test_docs_numbers.py`` runs the study (or part of it) again and
fails when a number in the table file no longer matches what the code produces.

Usage::

    BAYESFAIR_DATA=../shared/data python experiments/docs_numbers.py c-sweep
    python experiments/docs_numbers.py c-sweep --results runs/csweep/fairx_yeast_c_sweep.nc  # from a run

``c-sweep``: the shipped config ``fairx_yeast_c_sweep`` (FairX-UCB, FairX-TS and FairX-EG on
yeast, 10 runs x 20,000 rounds, c in {1, 2, 4, 6, 8, 10}); the table shows c = 1, 4 and 10, the
figure all six points (``bayesfair report``'s sweep figure).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import bayesfair  # noqa: F401  (before jax: exposes one CPU device per core)
from bayesfair import plotting
from bayesfair.simulation.results import SCALAR_METRICS, read_results, write_text
from bayesfair.workflow import shipped
from bayesfair.workflow.config import load_config
from bayesfair.workflow.report import sweep_table

ROOT = Path(__file__).resolve().parents[1]
C_SWEEP_CONFIG = shipped.config_path("fairx_yeast_c_sweep")
C_SWEEP_TABLE = ROOT / "docs" / "tables" / "workflow_c_sweep.md"
C_SWEEP_FIGURE = ROOT / "docs" / "figures" / "workflow_c_sweep.png"
C_SWEEP_SHOWN = (1.0, 4.0, 10.0)  # the table's c values (the figure has every point)
COMMAND = "python experiments/docs_numbers.py c-sweep"
HEADER = ("| merit.c | policy | fairness regret | s.e. | reward regret | s.e. |", "|---|---|---|---|---|---|")


def c_sweep_rows(table, shown=C_SWEEP_SHOWN) -> list[str]:
    """The markdown rows of the c-sweep table (``sweep_table``'s frame: one row per c and policy),
    for the c values ``shown``: final fairness and reward regret, mean and s.e. over the runs."""
    rows = []
    for _, r in table.iterrows():
        if float(r["merit.c"]) not in shown:
            continue
        rows.append(f"| {float(r['merit.c']):g} | {r['policy']} | {r['fairness_regret']:,.1f} | "
                    f"{r['fairness_regret_se']:,.1f} | {r['reward_regret']:,.1f} | {r['reward_regret_se']:,.1f} |")
    return rows


def c_sweep_markdown(table) -> str:
    """The whole table file: the header, the rows and the line naming the command."""
    return "\n".join([*HEADER, *c_sweep_rows(table), "",
                      f"Produced by `{COMMAND}` (the figure below too).", ""])


def point_table(ds, c: float):
    """``sweep_table``'s rows for one point run on its own (a study Dataset, without the sweep
    dimension), with the ``merit.c`` column the sweep would give it."""
    import pandas as pd  # heavy; only the docs' tables need it here

    last = ds.isel(checkpoint=-1)
    rows = []
    for pol in ds["policy"].values:
        row = {"merit.c": c, "policy": str(pol)}
        for m in SCALAR_METRICS:
            v = last[m].sel(policy=pol).values
            row[m] = v.mean()
            row[f"{m}_se"] = v.std(ddof=1) / len(v) ** 0.5
        rows.append(row)
    return pd.DataFrame(rows)


def c_sweep(results: Path | None) -> None:
    if results is None:
        ds = load_config(C_SWEEP_CONFIG).run(progress=sys.stderr.isatty())
    else:
        ds = read_results(results)
    table = sweep_table(ds)
    C_SWEEP_TABLE.parent.mkdir(parents=True, exist_ok=True)
    write_text(C_SWEEP_TABLE, c_sweep_markdown(table))
    fig = plotting.plot_sweep(table, x="merit.c", metrics=("fairness_regret", "reward_regret"),
                              title="final regret over merit.c (mean +- 1 s.e. over runs)")
    plotting.save_figure(fig, C_SWEEP_FIGURE)
    print(f"wrote {C_SWEEP_TABLE.relative_to(ROOT)} and {C_SWEEP_FIGURE.relative_to(ROOT)}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["c-sweep"])
    p.add_argument("--results", type=Path, help="a finished run's results file instead of running the study")
    args = p.parse_args(argv)
    c_sweep(args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
