"""Sphinx configuration of the bayesfair documentation site (``make docs`` / ``make docs-full``).

The pages are MyST markdown (myst-nb, which includes myst-parser); the API reference is generated
by autosummary/autodoc from the numpy-style docstrings (napoleon); the four notebooks of
``docs/notebooks`` and the executed pages (quickstart, Bayesian regret) are jupytext MyST
notebooks that myst-nb reads and executes. ``nb_execution_mode = "cache"``: ``make docs`` executes
a notebook only when its code cells changed since the last build (jupyter-cache keeps the outputs
in ``docs/_build/.jupyter_cache``), so later builds execute nothing that did not change; the cache is keyed
on the code cells, not on the package, so ``make docs-full`` (``-D nb_execution_mode=force``)
executes every notebook again. The test suite builds with ``-D nb_execution_mode=off``
(tests/test_docs.py) and executes the pages' code separately: tests/test_notebooks.py the
notebooks (the bi-level one by default, the others slow), tests/test_docs.py the quickstart (by
default) and the Bayesian-regret page (slow).

Intersphinx links to Python, NumPy, JAX, NumPyro, ArviZ and xarray come from the inventories in
``docs/_inv/`` (``make docs-inventories`` downloads them, where there is a network): a project
whose inventory file is absent is left out of the mapping, so an offline build has no such links
and no warnings, and a build never reaches the network by itself.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # document this checkout's bayesfair, installed or not

import bayesfair  # noqa: E402  (before jax: sets the host device count)

project = "bayesfair"
author = "the bayesfair authors"
copyright = "the bayesfair authors, MIT licence"
release = version = bayesfair.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
]

exclude_patterns = ["_build", "_inv", "_templates", "developer/skeletons", "**.ipynb_checkpoints"]
templates_path = ["_templates"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb"}  # .rst first: autosummary writes rst stubs
root_doc = "index"

# MyST: heading anchors so that links such as workflow.md#7-per-round-logs resolve
myst_heading_anchors = 3
myst_enable_extensions = ["amsmath", "dollarmath", "colon_fence"]

# notebooks: executed when their code changed (jupyter-cache); make docs-full sets force, the tests off
nb_execution_mode = "cache"
nb_execution_cache_path = str(ROOT / "docs" / "_build" / ".jupyter_cache")
nb_execution_timeout = 900
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

# API reference from the docstrings
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "show-inheritance": False}
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # the numpy-style docstrings give the types
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True  # "Attributes" sections as fields: the attributes are not documented twice
# a bare name such as `n` in a docstring type may match several attributes (CountState.n, MCMCState.n)
suppress_warnings = ["ref.python"]

# intersphinx: the projects whose inventory is in docs/_inv (docs/_inv/fetch.py); never the network
INVENTORIES = ROOT / "docs" / "_inv"
sys.path.insert(0, str(INVENTORIES))
from fetch import PROJECTS  # noqa: E402  (the one list of projects and their documentation URLs)

intersphinx_mapping = {name: (url, str(INVENTORIES / f"{name}.inv")) for name, url in PROJECTS.items()
                       if (INVENTORIES / f"{name}.inv").is_file()}
intersphinx_disabled_reftypes = ["std:doc"]  # a bare {doc} link is always one of these pages


def _site_links(app, docname, source):
    """Links from the pages to ``experiments/<name>/README.md`` and to ``CHANGELOG.md`` (outside
    docs/, the form that works when browsing the repository) point at the site's page that
    includes that file."""
    source[0] = re.sub(r"\]\((?:\.\./)+experiments/(\w+)/README\.md", r"](/experiments/\1.md", source[0])
    source[0] = re.sub(r"\]\((?:\.\./)+CHANGELOG\.md", "](/changelog.md", source[0])


_LITERAL = re.compile(r"(``.+?``)")


def _plain_text_docstrings(app, what, name, obj, options, lines):
    """The docstrings write math as plain text (``|g|``, ``x^2``), not reStructuredText: escape the
    bars (substitution syntax otherwise), let a literal be followed by ``^``, and end a field list
    or block with a blank line before the paragraph that follows it."""
    out: list[str] = []
    for line in lines:
        parts = _LITERAL.split(line)  # odd indices: ``literals``
        for i in range(0, len(parts), 2):
            parts[i] = parts[i].replace("|", "\\|")
            if i and re.match(r"[\^\w]", parts[i]):
                parts[i] = "\\ " + parts[i]
        line = "".join(parts)
        prev = out[-1] if out else ""
        if line.strip() and not line[0].isspace() and not line.startswith(":") and prev.strip() and (
                prev[0].isspace() or prev.startswith(":")):
            out.append("")
        out.append(line)
    lines[:] = out


def _trailing_prose(app, what, name, obj, options, lines):
    """A paragraph after a numpy "Attributes"/"Parameters" list (unindented prose, no ``name : type``)
    would be read by napoleon as one more entry: give it a "Notes" heading (before napoleon runs)."""
    section, out = None, []
    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if nxt.strip() and set(nxt.strip()) == {"-"} and len(nxt.strip()) == len(line.strip()):
            section = line.strip()
        elif (section in ("Attributes", "Parameters", "Other Parameters") and line.strip() and not line[0].isspace()
              and " : " not in line and " " in line.strip() and out and not out[-1].strip()):
            out += ["Notes", "-----"]
            section = "Notes"
        out.append(line)
    lines[:] = out


def _skip_foreign(app, what, name, obj, skip, options):
    """Document bayesfair's own objects only (``bayesfair.core.types.Array`` is ``jax.Array``)."""
    module = getattr(obj, "__module__", None)
    if what == "module" and isinstance(module, str) and not module.startswith("bayesfair"):
        return True
    return None


def setup(app):
    app.connect("source-read", _site_links)
    app.connect("autodoc-process-docstring", _trailing_prose, priority=400)  # before napoleon
    app.connect("autodoc-process-docstring", _plain_text_docstrings, priority=600)  # after napoleon
    app.connect("autodoc-skip-member", _skip_foreign)


html_theme = "furo"
html_title = f"bayesfair {release}"
html_static_path: list[str] = []
