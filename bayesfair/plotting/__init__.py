"""Figures (the only package importing matplotlib; imported lazily, Agg backend by default).

:mod:`.figures` draws results (regret, exposure, sweeps) and diagnostics trees (merit and exposure
forests, exposure over time, psi); :mod:`.gap` the exposure-gap forest; :mod:`.power` the power
curve of the group-bias estimand.

Every ``plot_*`` function returns a matplotlib Figure. In a notebook (IPython's inline backend,
Jupyter's default) the returned figure is displayed once, as the cell's value: it is closed from
pyplot before it is returned, so the backend's end-of-cell display does not show it a second
time (assign it and it is not shown; ``display(fig)`` shows it). In a script (Agg or an
interactive backend) the figure stays registered with pyplot: ``plt.show()`` shows it and
:func:`save_figure` writes and closes it. :func:`pyplot` is the public way to reach
``matplotlib.pyplot`` with the package's backend rule; :func:`returns_figure` gives a figure
function of your own the same notebook behaviour.
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
    returns_figure,
    save_figure,
)
from bayesfair.plotting.gap import plot_exposure_gap
from bayesfair.plotting.power import plot_power

__all__ = [
    "pyplot",
    "returns_figure",
    "plot_regret",
    "plot_exposure",
    "plot_group_exposure",
    "plot_exposure_at",
    "plot_sweep",
    "plot_merit_exposure",
    "plot_exposure_over_time",
    "plot_psi_forest",
    "plot_exposure_gap",
    "plot_power",
    "save_figure",
    "place_legend",
    "arm_labels",
]
