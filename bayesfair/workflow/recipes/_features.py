"""Feature columns of the group-bias GLM recipes: one-hot levels with rare levels merged."""

from __future__ import annotations

from typing import Any

import numpy as np


def one_hot(df: Any, columns: Any, min_level_rows: int) -> tuple[dict[str, np.ndarray], dict[str, str],
                                                                  dict[str, list[str]]]:
    """One-hot columns ``"<column>=<level>"`` of every column of ``df`` in ``columns``.

    Levels with fewer than ``min_level_rows`` rows are merged into one ``other`` level first (a
    rare level is often perfectly separated, bounded only by its prior); the most frequent level
    of each column is its baseline and gets no column. Returns ``(columns, baselines, merged)``:
    the 0/1 columns by name, the baseline of each column, and the merged levels of each column
    that had any.
    """
    cols: dict[str, np.ndarray] = {}
    baselines: dict[str, str] = {}
    merged: dict[str, list[str]] = {}
    for c in columns:
        levels = df[c].astype(str)
        counts = levels.value_counts()
        rare = sorted(counts.index[counts < min_level_rows])
        if rare:
            merged[c] = rare
            levels = levels.where(~levels.isin(rare), "other")
            counts = levels.value_counts()
        baselines[c] = str(counts.index[0])
        for level in sorted(counts.index[1:]):
            cols[f"{c}={level}"] = (levels == level).to_numpy(np.float64)
    return cols, baselines, merged
