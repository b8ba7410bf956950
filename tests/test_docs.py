"""Runnable examples in the docs: the ```python blocks marked ``<!-- doctest ... -->`` run as written.

A block is runnable when the line just before its opening fence is an HTML comment starting
with ``<!-- doctest`` (invisible in rendered markdown). Each one runs in a fresh namespace in an
empty temporary working directory; the test fails if it raises, including its own asserts.
Unmarked blocks (fragments that need a study's files, CLI transcripts, ...) are not run.
"""

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
DOC_FILES = ["workflow.md"]
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
    """``make docs`` in a temporary folder: every page (the markdown pages, the developer docs, the
    experiment READMEs, the API reference generated from the docstrings and the four notebooks,
    not executed) builds with warnings as errors, so a broken cross-reference, a page left out of
    the table of contents or a docstring that is not valid reStructuredText fails here."""
    import subprocess
    import sys

    for module in ("sphinx", "myst_nb", "furo"):
        pytest.importorskip(module, reason=f"the docs extra is not installed (no {module}): pip install -e '.[docs]'")
    out = tmp_path / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", "-E",
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
    index = (out / "index.html").read_text(encoding="utf-8")
    for target in ("concepts.html", "workflow.html", "datasets.html", "api.html", "notebooks/README.html",
                   "developer/index.html", "performance.html"):
        assert target in index, f"{target} not linked from the front page"
