"""The notebooks of docs/notebooks execute top to bottom at their small size and render figures.

Each MyST notebook is read with jupytext and executed by nbclient in a fresh IPython kernel of
this interpreter (a temporary kernelspec whose argv is ``sys.executable``, so the kernel is the
test's own Python, whatever other kernels are installed). The kernel gets ``BAYESFAIR_DATA`` set
to the data folder of the one rule (``bayesfair.datasets.cache_dir()``), no ``BAYESFAIR_NOTEBOOK_FULL``
(so the notebooks run at their small size), and matplotlib's inline backend, which is headless
and is what turns figures into ``image/png`` outputs (``MPLBACKEND=Agg`` would silence them).
A cell that raises fails the test with the cell's traceback (nbclient's CellExecutionError); a
notebook that renders no image fails it too.

Executing a notebook costs about 30-60 s of CPU (compilation and, for COMPAS, NUTS), far more
wall time on a loaded machine: only the fastest (the bi-level study) runs in the default suite,
the other three are marked slow (``make test-slow``). The structural checks (pairing header,
kernelspec, the small/full switch, bayesfair imported before jax) run for all four by default.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest

from bayesfair.datasets import cache_dir

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "docs" / "notebooks"
DATA = cache_dir()  # the one data-folder rule (docs/datasets.md): BAYESFAIR_DATA, ../shared/data, user cache

# notebook -> data files it reads (relative to BAYESFAIR_DATA), and whether it is slow
CASES = {
    "bilevel_regret_study.md": ((), False),
    "fairx_yeast_diagnostics.md": (("yeast/yeast.arff",), True),
    "compas_group_bias.md": (("compas",), True),
    "fair_greedy_adult.md": (("adult",), True),
}
KERNEL = "bayesfair-notebook-test"
INLINE = "module://matplotlib_inline.backend_inline"


def test_every_notebook_is_tested():
    found = sorted(p.name for p in NOTEBOOKS.glob("*.md") if p.name != "README.md")
    assert found == sorted(CASES), "add new notebooks to CASES in tests/test_notebooks.py"


@pytest.mark.parametrize("name", sorted(CASES))
def test_notebook_structure(name):
    """Paired MyST format, the python3 kernelspec, the small/full switch, and `import bayesfair`
    before any jax/numpyro import in the first code cell (bayesfair sets the host device count,
    which must happen before jax initializes its backend)."""
    import jupytext

    text = (NOTEBOOKS / name).read_text()
    nb = jupytext.reads(text, fmt="md:myst")
    assert nb.metadata["jupytext"]["text_representation"]["format_name"] == "myst"
    assert nb.metadata["kernelspec"]["name"] == "python3"
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    markdown = [c.source for c in nb.cells if c.cell_type == "markdown"]
    assert len(code) >= 3 and markdown and markdown[0].startswith("# "), "a title, prose and code cells"
    first = code[0]
    assert 'os.environ.get("BAYESFAIR_NOTEBOOK_FULL", "") == ""' in first, "the SMALL / full-size switch"
    imports = [m.group(1) for m in re.finditer(r"^(?:import|from)\s+([\w.]+)", first, re.M)]
    assert "bayesfair" in [i.split(".")[0] for i in imports]
    first_bf = next(i for i, mod in enumerate(imports) if mod.split(".")[0] == "bayesfair")
    early = [mod for mod in imports[:first_bf] if mod.split(".")[0] in ("jax", "numpyro", "arviz")]
    assert not early, f"{early} imported before bayesfair"
    for later in code[1:]:
        assert "BAYESFAIR_NOTEBOOK_FULL" not in later, "one switch, in the first cell"


@pytest.fixture
def kernel_env(tmp_path, monkeypatch):
    """A kernelspec for this interpreter on JUPYTER_PATH, and the kernel's environment."""
    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "bayesfair test kernel", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("BAYESFAIR_DATA", str(DATA))
    monkeypatch.setenv("MPLBACKEND", INLINE)
    monkeypatch.delenv("BAYESFAIR_NOTEBOOK_FULL", raising=False)
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # no debugger warning in the outputs
    return spec


def execute(name: str):
    import jupytext
    from nbclient import NotebookClient

    nb = jupytext.read(NOTEBOOKS / name)
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": "bayesfair test kernel", "language": "python"}
    client = NotebookClient(nb, kernel_name=KERNEL, timeout=900, allow_errors=False,
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    t0 = time.perf_counter()
    client.execute()
    return nb, time.perf_counter() - t0


def _params():
    out = []
    for name, (files, slow) in sorted(CASES.items()):
        out.append(pytest.param(name, files, marks=[pytest.mark.slow] if slow else [], id=name.removesuffix(".md")))
    return out


@pytest.mark.parametrize(("name", "files"), _params())
def test_notebook_executes(name, files, kernel_env):
    missing = [f for f in files if not (DATA / f).exists()]
    if missing:
        pytest.skip(f"data not found under {DATA}: {missing}")
    nb, seconds = execute(name)
    errors, images, code_cells = [], 0, 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        code_cells += 1
        assert cell.get("execution_count"), f"a code cell of {name} did not run"
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                errors.append(f"{out.get('ename')}: {out.get('evalue')}")
            if out.get("output_type") in ("display_data", "execute_result") and "image/png" in out.get("data", {}):
                images += 1
    assert not errors, f"{name}: {errors}"
    assert images >= 1, f"{name} rendered no figure"
    print(f"{name}: {code_cells} code cells, {images} figures, {seconds:.1f} s")


DISPLAY_CELLS = [
    "import bayesfair as bf\nfrom bayesfair import diagnostics as dg\nfrom bayesfair import plotting\n"
    "merit = bf.merit.exponential(2.0)\npost = bf.beta_bernoulli()\n"
    "ds, states = dg.simulate_with_states(0, bf.bernoulli_arms([0.3, 0.6, 0.7]), {'TS': bf.fairx_ts(post, merit)}, "
    "30, 2, merit=merit)\ntree = dg.from_simulation(ds, states, 'TS', post, merit=merit, n_draws=200)",
    "plotting.plot_regret(ds)",                      # the cell's value: shown once
    "fig = plotting.plot_exposure(ds)",             # assigned, not displayed: not shown
    "fig",                                           # displayed: once
    "plotting.plot_merit_exposure(tree)\nplotting.plot_exposure_over_time(ds, 'TS', tree=tree)",  # the last: once
    "plt = plotting.pyplot()\nf, ax = plt.subplots()\n_ = plotting.plot_merit_exposure(tree, ax=ax)",  # pyplot's own
]
DISPLAY_IMAGES = [0, 1, 0, 1, 1, 1]


def test_figures_are_displayed_once_in_an_executed_notebook(kernel_env):
    """bayesfair.plotting figures in a real kernel with the inline backend: a figure returned as a
    cell's value is displayed once (not again by the backend's end-of-cell display of pyplot's
    figures), an assigned one not at all, and a figure the user made with pyplot still shows."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in DISPLAY_CELLS])
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": "bayesfair test kernel", "language": "python"}
    NotebookClient(nb, kernel_name=KERNEL, timeout=600, allow_errors=False).execute()
    images = [sum("image/png" in out.get("data", {}) for out in cell.outputs) for cell in nb.cells]
    assert images == DISPLAY_IMAGES, f"image outputs per cell {images}, expected {DISPLAY_IMAGES}"
