"""Runnable examples in the docs: the ```python blocks marked ``<!-- doctest ... -->`` run as written.

A block is runnable when the line just before its opening fence is an HTML comment starting
with ``<!-- doctest`` (invisible in rendered markdown). Each one runs in a fresh namespace in an
empty temporary working directory; the test fails if it raises, including its own asserts.
Unmarked blocks (fragments that need a study's files, CLI transcripts, ...) are not run.
"""

import re
from pathlib import Path

import pytest
from test_notebooks import kernel_env  # noqa: F401, F811  (the fixture: a kernel of this interpreter)

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DOC_FILES = ["workflow.md", "online.md"]
MARKER = re.compile(r"^\s*<!--\s*doctest\b.*-->\s*$")


def runnable_blocks(text: str) -> list[tuple[int, str]]:
    """(line number of the opening fence, code) of every marked ```python block."""
    lines = text.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if not MARKER.match(line):
            continue
        if i + 1 >= len(lines) or lines[i + 1].strip() != "```python":
            raise ValueError(f"line {i + 1}: a doctest marker must be followed directly by a ```python fence")
        try:
            end = next(j for j in range(i + 2, len(lines)) if lines[j].strip() == "```")
        except StopIteration:
            raise ValueError(f"line {i + 2}: unterminated ```python block") from None
        blocks.append((i + 2, "\n".join(lines[i + 2:end]) + "\n"))
    return blocks


def _cases():
    for name in DOC_FILES:
        for line, code in runnable_blocks((DOCS / name).read_text(encoding="utf-8")):
            yield pytest.param(name, line, code, id=f"{name}:{line}")


def test_every_listed_doc_has_a_runnable_block():
    for name in DOC_FILES:
        assert runnable_blocks((DOCS / name).read_text(encoding="utf-8")), f"{name}: no <!-- doctest --> block"


def test_marker_parsing():
    text = ("x\n<!-- doctest -->\n```python\na = 1\n```\n"  # marked
            "```python\nb = 2\n```\n"  # not marked
            "<!-- doctest: note -->\n```python\nc\n```\n")
    assert runnable_blocks(text) == [(3, "a = 1\n"), (10, "c\n")]
    with pytest.raises(ValueError, match="followed directly"):
        runnable_blocks("<!-- doctest -->\n\n```python\na\n```\n")


@pytest.mark.parametrize(("doc", "line", "code"), list(_cases()))
def test_doc_example_runs(doc, line, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    filename = str(DOCS / doc)
    namespace = {"__name__": f"doctest_{Path(doc).stem}_{line}", "__file__": filename}
    # pad with blank lines so a traceback's line numbers are the markdown file's
    exec(compile("\n" * line + code, filename, "exec"), namespace)


# ----------------------------------------------------------------------------------------------
# The documentation site builds (Sphinx + myst-nb; notebooks not executed), warnings as errors


def test_docs_site_builds(tmp_path):
    """``make docs`` in a temporary folder, with notebook execution off: every page (the markdown
    pages, the developer docs, the experiment READMEs, the API reference generated from the
    docstrings, the notebooks and the executed pages, not executed here) builds with warnings as
    errors, so a broken cross-reference, a page left out of the table of contents or a docstring
    that is not valid reStructuredText fails here. The pages' code is executed by
    ``test_executed_page_runs`` below and tests/test_notebooks.py (``make docs`` itself executes
    them, through myst-nb's cache)."""
    import subprocess
    import sys

    for module in ("sphinx", "myst_nb", "furo"):
        pytest.importorskip(module, reason=f"the docs extra is not installed (no {module}): pip install -e '.[docs]'")
    out = tmp_path / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", "-E", "-D", "nb_execution_mode=off",
         "-d", str(tmp_path / "doctrees"), str(DOCS), str(out)],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"sphinx failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}"
    pages = [p.relative_to(DOCS).with_suffix(".html") for p in DOCS.rglob("*.md")
             if "_build" not in p.parts and "generated" not in p.parts]
    assert len(pages) >= 15
    missing = [str(p) for p in pages if not (out / p).is_file()]
    assert not missing, f"pages not built: {missing}"
    notebooks = [p for p in (DOCS / "notebooks").glob("*.md") if p.name != "README.md"]
    assert len(notebooks) == 4
    for notebook in notebooks:  # read by myst-nb as notebooks: code cells, with the small/full switch
        html = (out / "notebooks" / notebook.with_suffix(".html").name).read_text(encoding="utf-8")
        assert "cell_input" in html and "BAYESFAIR_NOTEBOOK_FULL" in html, f"{notebook.name}: code cells not rendered"
    # the API reference documents the public constructors, with their numpy-style sections
    fairx = (out / "generated" / "bayesfair.policies.fairx.html").read_text(encoding="utf-8")
    assert "fairx_ucb" in fairx and "Parameters" in fairx
    for page in EXECUTED_PAGES:  # read as notebooks too
        html = (out / page.replace(".md", ".html")).read_text(encoding="utf-8")
        assert "cell_input" in html, f"{page}: code cells not rendered"
    concepts = (out / "concepts.html").read_text(encoding="utf-8")
    assert "math notranslate" in concepts and "mathjax" in concepts.lower(), "concepts.md: math not rendered"
    index = (out / "index.html").read_text(encoding="utf-8")
    assert index.index("install.html") < index.index("quickstart.html") < index.index("concepts.html")
    for target in ("install.html", "quickstart.html", "bayesian_regret.html", "concepts.html", "workflow.html",
                   "datasets.html", "api.html", "notebooks/README.html",
                   "developer/index.html", "performance.html"):
        assert target in index, f"{target} not linked from the front page"


# the pages of docs/ that are MyST notebooks executed when the site is built (cached by make docs)
EXECUTED_PAGES = ["quickstart.md", "bayesian_regret.md"]
SLOW_PAGES = {"bayesian_regret.md"}  # 200 runs x 500 rounds x 3 policies: make test-slow (and make docs) run it


def test_executed_pages_are_notebooks():
    """Every page with code cells is listed here or in tests/test_notebooks.py (so its code runs in a test)."""
    pages = sorted(p.name for p in DOCS.glob("*.md") if "```{code-cell}" in p.read_text(encoding="utf-8"))
    assert pages == sorted(EXECUTED_PAGES)


@pytest.mark.parametrize("page", [pytest.param(p, marks=[pytest.mark.slow] if p in SLOW_PAGES else [])
                                  for p in EXECUTED_PAGES])
def test_executed_page_runs(page, kernel_env):  # noqa: F811  (the fixture imported above)
    """The executed pages run top to bottom in a fresh kernel (as myst-nb runs them), without
    errors, and the Bayesian-regret page draws its figure and shows the mismatch warning."""
    import jupytext
    from nbclient import NotebookClient

    nb = jupytext.read(DOCS / page)
    nb.metadata["kernelspec"] = {"name": kernel_env.name, "display_name": "bayesfair test kernel", "language": "python"}
    NotebookClient(nb, kernel_name=kernel_env.name, timeout=600, allow_errors=False,
                   resources={"metadata": {"path": str(DOCS)}}).execute()
    outputs = [out for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])]
    text = "".join(out.get("text", "") for out in outputs if out.get("output_type") == "stream")
    assert not [out for out in outputs if out.get("output_type") == "error"]
    if page == "bayesian_regret.md":
        assert any("image/png" in out.get("data", {}) for out in outputs), "no figure"
        assert "UserWarning" in text and "'TS (Beta(20, 20))'" in text and "matched:" in text
    if page == "quickstart.md":
        assert "wrote" in text.lower() or "results" in text, text[-2000:]


# ----------------------------------------------------------------------------------------------
# The README, the front door: what it claims exists

# the algorithm table's names -> the registry's (policies and posteriors)
TABLE_NAMES = {
    "FairX-TS": "fairx_ts", "FairX-UCB": "fairx_ucb", "FairX-EG": "fairx_eg", "UCB1": "ucb1",
    "Thompson sampling": "thompson", "epsilon-greedy": "epsilon_greedy", "uniform": "uniform",
    "Beta-Bernoulli": "beta_bernoulli", "Normal (known variance)": "normal_known_variance",
    "Normal-Inverse-Gamma": "normal_inverse_gamma", "FairX-LinTS": "fairx_lints", "FairX-LinUCB": "fairx_linucb",
    "FairX-LinEG": "fairx_lineg", "LinUCB": "linucb", "LinTS": "lints", "BF-UCB": "bf_ucb", "BF-TS": "bf_ts",
    "GEF": "gef", "MF": "mf", "TopInterval": "top_interval", "IntervalChaining": "interval_chaining",
    "NaiveFair": "naive_fair", "GroupFairTopInterval": "group_fair_top_interval", "GroupFair-TS": "group_fair_ts",
    "Fair-Greedy": "fair_greedy", "OFUL": "oful", "Greedy": "greedy",
}


def _readme_table() -> list[list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Algorithms"):]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| algorithm | paper | module | status |")
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows[1:] if not row.startswith("|---")]


def test_readme_algorithm_table_exists_in_the_code():
    """Every module of the algorithm table imports, and every algorithm it names is registered."""
    import importlib

    from bayesfair.workflow import registry

    rows = _readme_table()
    assert len(rows) >= 10
    algorithms = " ".join(r[0] for r in rows)
    modules = re.findall(r"`(bayesfair[\w.]*)`", " ".join(r[2] for r in rows))
    assert modules
    for module in modules:
        importlib.import_module(module)
    registered = set(registry.names("policy")) | set(registry.names("posterior"))
    for shown, name in TABLE_NAMES.items():
        assert re.search(rf"(?<![\w-]){re.escape(shown)}(?![\w-])", algorithms), f"{shown} not in the README table"
        assert name in registered, f"{shown} ({name}) is in the README table but not registered"


def test_readme_and_docs_links_resolve():
    """Relative links and images of the README and the docs pages point at files that exist, and the
    make targets the README names exist."""
    pages = [ROOT / "README.md", *(p for p in DOCS.rglob("*.md") if not {"_build", "generated"} & set(p.parts))]
    broken, checked = [], 0
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.split("#")[0]
            if path.startswith("/"):  # the site's root (docs/)
                resolved = DOCS / path.lstrip("/")
            else:
                resolved = page.parent / path
            checked += 1
            if not resolved.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    # the README has none (it is the PyPI page: tests/test_wheel.py), the docs pages some 40
    assert checked >= 30 and not broken, f"{checked} links checked; broken: {broken}"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for target in sorted(set(re.findall(r"`make ([\w-]+)", readme)) | set(re.findall(r"^make ([\w-]+)", readme, re.M))):
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"README names `make {target}`: no such target"
