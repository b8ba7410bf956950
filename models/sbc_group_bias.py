"""Simulation-based calibration of the NUTS group-bias fit (bayesfair.inference.fitting.fit) on the COMPAS design.

A thin script over :mod:`bayesfair.workflow.recipes.sbc_group_bias` (its docstring documents the data, the
model and the outputs); it writes to ``models/artifacts/`` by default. The same recipe runs from
an installed package as ``bayesfair fit sbc_group_bias [ARGS]`` (writing to ``./artifacts/``).

Usage: python models/sbc_group_bias.py [ARGS]      (--help lists them)
"""

from __future__ import annotations

import sys
from pathlib import Path

from bayesfair.workflow.recipes import sbc_group_bias as recipe

OUT = Path(__file__).resolve().parent / "artifacts" / "sbc_group_bias"


def main(argv: list[str] | None = None) -> int:
    return recipe.main(argv, out=OUT)


if __name__ == "__main__":
    sys.exit(main())
