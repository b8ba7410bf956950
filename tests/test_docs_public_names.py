"""The documentation and the notebooks use bayesfair's public names only.

A reader copies what the docs show; a private name (one whose last part starts with an
underscore, such as a module ``bayesfair.core._validate`` or a helper ``plotting._x``) can change or
vanish without notice. Every ``.md``, ``.rst`` and ``.py`` file under docs/ (and the README) is
scanned for bayesfair names: dotted names rooted at ``bayesfair`` or at an alias the file binds
to a bayesfair module or name (``import bayesfair as bf``, ``from bayesfair import plotting``,
``from bayesfair import diagnostics as dg``), and the names imported ``from bayesfair... import``.
A part that starts with one underscore (not a dunder) is a finding. docs/developer/ is the
maintainers' guide to the package's inside (its skeletons import the internal validators on
purpose) and is not scanned.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = ("docs/developer/",)

_IMPORT_AS = re.compile(r"^\s*import\s+(bayesfair(?:\.\w+)*)(?:\s+as\s+(\w+))?", re.M)
_FROM = re.compile(r"^\s*from\s+(bayesfair(?:\.\w+)*)\s+import\s+\(?([^)\n]*(?:\n[^)\n]*)*?)\)?\s*$", re.M)
_NAME = re.compile(r"(?<![\w.])({roots})((?:\.\w+)+)")


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def private_names(text: str) -> list[str]:
    """The private bayesfair names ``text`` uses (see the module docstring)."""
    found: list[str] = []
    roots = {"bayesfair"}
    for m in _IMPORT_AS.finditer(text):
        roots.add(m.group(2) or m.group(1).split(".")[0])
        found += [m.group(1)] if any(_private(p) for p in m.group(1).split(".")) else []
    for m in _FROM.finditer(text):
        module = m.group(1)
        if any(_private(p) for p in module.split(".")):
            found.append(module)
        for item in re.split(r"[,\n]", m.group(2).split("#")[0]):
            words = item.split()
            if not words:
                continue
            name, alias = words[0], words[-1]
            if _private(name):
                found.append(f"{module}.{name}")
            roots.add(alias)
    pattern = re.compile(_NAME.pattern.format(roots="|".join(sorted(map(re.escape, roots)))))
    for m in pattern.finditer(text):
        if any(_private(p) for p in m.group(2).split(".")[1:]):
            found.append(m.group(0))
    return list(dict.fromkeys(found))  # each once, in order


def _files() -> list[Path]:
    files = [ROOT / "README.md"]
    for ext in ("md", "rst", "py"):
        files += sorted((ROOT / "docs").rglob(f"*.{ext}"))
    return [f for f in files if not f.relative_to(ROOT).as_posix().startswith(SKIP)]


def test_the_scan_finds_private_names():
    text = ("import bayesfair as bf\nfrom bayesfair import plotting, diagnostics as dg\n"
            "from bayesfair.core._validate import finite_float\nfrom bayesfair.plotting import _free_corner\n"
            "plt = plotting._plt()\nx = dg._names(1)\nbf.core._random.beta\nbf.simulate(0)\nbf.__version__\n"
            "plotting.pyplot()\n")
    assert private_names(text) == ["bayesfair.core._validate", "bayesfair.plotting._free_corner",
                                   "plotting._plt", "dg._names", "bf.core._random.beta"]
    assert private_names("import numpy as np\nnp._core\nplotting._plt()\n") == []  # not bayesfair's


def test_docs_and_notebooks_use_public_names_only():
    found = {f.relative_to(ROOT).as_posix(): names for f in _files()
             if (names := private_names(f.read_text(encoding="utf-8")))}
    assert not found, f"private bayesfair names in the docs (use a public one, or make it public): {found}"


def _resolves(dotted: str) -> bool:
    """Whether ``bayesfair.a.b`` names something: attributes from the package down, importing a
    submodule where an attribute is missing (``bayesfair.simulation.simulator``)."""
    import importlib

    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=1):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(".".join(parts[: i + 1]))
        except ImportError:
            return False
    return True


def missing_names(text: str) -> list[str]:
    """The names rooted at ``bf`` / ``bayesfair`` that ``text`` uses and the package does not have
    (a call's or an attribute's chain stops at the first ``(``, so ``bf.simulate(...).regret`` is
    ``bf.simulate``). Only ``import bayesfair as bf`` is followed as an alias."""
    found = []
    text = text.replace("\\_", "_")  # reStructuredText escapes underscores
    for m in re.finditer(r"(?<![\w.])(bf|bayesfair)((?:\.\w+)+)", text):
        dotted = "bayesfair" + m.group(2)
        if not _resolves(dotted):
            found.append(m.group(0))
    return list(dict.fromkeys(found))


def test_the_name_check_finds_a_missing_name():
    assert missing_names("bf.simulate(key)\nbf.policies.fairx_ts\nbayesfair.simulation.simulator.SimulationError") == []
    assert missing_names("bf.no_such_name\nbf.policies.nope\n") == ["bf.no_such_name", "bf.policies.nope"]


def test_every_bayesfair_name_in_the_docs_exists():
    found = {f.relative_to(ROOT).as_posix(): names for f in _files()
             if (names := missing_names(f.read_text(encoding="utf-8")))}
    assert not found, f"names the docs use that bayesfair does not have: {found}"
