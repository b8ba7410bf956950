"""Figures (the only package importing matplotlib; imported lazily, Agg backend by default).

:mod:`.figures` draws results (regret, exposure, sweeps) and diagnostics trees (merit and exposure
forests, exposure over time, psi); :mod:`.gap` the exposure-gap forest.
"""

from bayesfair.plotting.figures import (
    arm_labels,
    place_legend,
    plot_exposure,
    plot_exposure_at,
    plot_exposure_over_time,
    plot_group_exposure,
    plot_merit_exposure,
    plot_psi_forest,
    plot_regret,
    plot_sweep,
    pyplot,
    save_figure,
)
from bayesfair.plotting.gap import plot_exposure_gap

__all__ = [
    "pyplot",
    "plot_regret",
    "plot_exposure",
    "plot_group_exposure",
    "plot_exposure_at",
    "plot_sweep",
    "plot_merit_exposure",
    "plot_exposure_over_time",
    "plot_psi_forest",
    "plot_exposure_gap",
    "save_figure",
    "place_legend",
    "arm_labels",
]
