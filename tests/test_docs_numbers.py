"""The numbers the documentation pages quote from a study are what the code produces now.

The c-sweep table of docs/workflow.md is the file ``docs/tables/workflow_c_sweep.md``, written by
``python experiments/docs_numbers.py c-sweep`` (named on the page). Studies are reproducible
(keys come from the seed; every sweep point has the config's seed), so rerunning a point must
give the table's rows digit for digit: the default test reruns the c = 1 point (10 runs x 20,000
rounds, three policies), the slow one the whole sweep, the figure's points included. A change to
a policy, an environment or a metric that moves a documented number fails here, and the fix is
to rerun the command and look at the new table and figure.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from bayesfair.datasets import cache_dir
from bayesfair.workflow.config import load_config
from bayesfair.workflow.report import sweep_table

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("docs_numbers", ROOT / "experiments" / "docs_numbers.py")
docs_numbers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(docs_numbers)

YEAST = cache_dir() / "yeast" / "yeast.arff"
needs_yeast = pytest.mark.skipif(not YEAST.exists(), reason=f"the yeast data is not in {YEAST.parent}")


def documented_rows() -> list[str]:
    text = docs_numbers.C_SWEEP_TABLE.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert tuple(lines[:2]) == docs_numbers.HEADER, "the table file's header changed: rerun the command"
    assert f"`{docs_numbers.COMMAND}`" in text, "the table must name the command that produced it"
    return [line for line in lines[2:] if line.startswith("| ")]


def test_the_page_includes_the_table_and_names_the_command():
    page = (ROOT / "docs" / "workflow.md").read_text(encoding="utf-8")
    assert "{include} tables/workflow_c_sweep.md" in page
    assert docs_numbers.COMMAND in page
    rows = documented_rows()
    assert len(rows) == 3 * len(docs_numbers.C_SWEEP_SHOWN)


@needs_yeast
def test_c_sweep_point_matches_the_documented_rows(monkeypatch):
    monkeypatch.setenv("BAYESFAIR_DATA", str(cache_dir()))
    sweep = load_config(docs_numbers.C_SWEEP_CONFIG)
    i = [float(c["merit.c"]) for c in sweep.coords()].index(1.0)
    ds = sweep.points[i].run()
    produced = docs_numbers.c_sweep_rows(docs_numbers.point_table(ds, 1.0))
    documented = [row for row in documented_rows() if row.startswith("| 1 |")]
    assert produced == documented, (f"docs/tables/workflow_c_sweep.md is stale; rerun `{docs_numbers.COMMAND}`\n"
                                    f"documented: {documented}\nproduced:   {produced}")


@pytest.mark.slow
@needs_yeast
def test_c_sweep_matches_the_documented_table(monkeypatch):
    monkeypatch.setenv("BAYESFAIR_DATA", str(cache_dir()))
    table = sweep_table(load_config(docs_numbers.C_SWEEP_CONFIG).run())
    produced = docs_numbers.c_sweep_markdown(table)
    assert produced == docs_numbers.C_SWEEP_TABLE.read_text(encoding="utf-8"), (
        f"docs/tables/workflow_c_sweep.md is stale; rerun `{docs_numbers.COMMAND}`")
