"""The real-dataset model recipes, shipped with the package (``bayesfair fit --list`` lists them).

A recipe is a module of this package with a ``main(argv, *, out=None) -> int`` function and a
one-line docstring summary; :data:`RECIPES` names them. ``bayesfair fit NAME [ARGS]`` runs
``RECIPES[NAME].main(ARGS)``; the scripts of a checkout's ``models/`` folder are thin wrappers
that call the same functions (writing to ``models/artifacts/``).

- ``compas_group_bias``, ``family_income_group_bias``, ``adult_group_bias``: the posterior of the
  group-bias term on COMPAS, the Philippine family-income survey and UCI Adult;
- ``sbc_group_bias``: simulation-based calibration of the NUTS group-bias fit on the COMPAS design.

The shared machinery (flags, subsampling, fitting, checks, outputs) is
:mod:`bayesfair.workflow.recipes._group_bias`; the model checks it calls are public in
:mod:`bayesfair.diagnostics.model_checks`.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from types import ModuleType

__all__ = ["RECIPES", "describe", "load"]

#: The recipes shipped with the package: name -> module (each has ``main(argv, *, out=None) -> int``).
#: Modules are imported by :func:`load` only, so listing them (``bayesfair fit --list``) stays light.
RECIPES: dict[str, str] = {name: f"{__name__}.{name}" for name in (
    "adult_group_bias", "compas_group_bias", "family_income_group_bias", "sbc_group_bias")}


def _check(name: str) -> str:
    if name not in RECIPES:
        raise KeyError(f"no recipe {name!r}; shipped recipes: {', '.join(RECIPES)}")
    return RECIPES[name]


def load(name: str) -> ModuleType:
    """Import recipe ``name`` (a key of :data:`RECIPES`) and return its module."""
    return importlib.import_module(_check(name))


def describe(name: str) -> str:
    """The first line of recipe ``name``'s docstring (read from its source, without importing it)."""
    spec = importlib.util.find_spec(_check(name))
    with open(spec.origin, encoding="utf-8") as fh:
        doc = ast.get_docstring(ast.parse(fh.read())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""
