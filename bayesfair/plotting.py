"""Figures (the only module importing matplotlib; imported lazily, Agg backend by default)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["plot_regret", "plot_exposure", "save_figure"]


def _plt():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        try:
            matplotlib.use("Agg")
        except Exception:  # an interactive backend already in use: keep it
            pass
    import matplotlib.pyplot as plt

    return plt


def plot_regret(ds: Any, metrics: tuple[str, ...] = ("fairness_regret", "reward_regret"),
                band: tuple[float, float] = (0.1, 0.9), logx: bool = False):
    """Cumulative regret over rounds: mean over runs with a quantile band, one panel per metric."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.2 * len(metrics), 4.0), squeeze=False)
    t = ds["checkpoint"].values
    for ax, metric in zip(axes[0], metrics, strict=True):
        for name in ds["policy"].values:
            arr = ds[metric].sel(policy=name).values  # [run, checkpoint]
            mean = arr.mean(axis=0)
            lo, hi = np.quantile(arr, band, axis=0)
            (line,) = ax.plot(t, mean, label=str(name))
            ax.fill_between(t, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set_xlabel("round t")
        ax.set_ylabel(metric.replace("_", " "))
        if logx:
            ax.set_xscale("log")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"mean over {ds.sizes['run']} runs, band {int(band[0] * 100)}-{int(band[1] * 100)}% of runs",
                 fontsize=9)
    fig.tight_layout()
    return fig


def plot_exposure(ds: Any, checkpoint: int = -1):
    """Average exposure share per arm of every policy next to the optimal fair exposure pi*."""
    plt = _plt()
    t = int(ds["checkpoint"].values[checkpoint])
    share = (ds["exposure"].isel(checkpoint=checkpoint) / t).mean("run")  # [policy, arm]
    pi_star = ds["pi_star"].mean("run").values
    arms = ds["arm"].values
    names = list(ds["policy"].values)
    width = 0.8 / max(len(names), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * arms.size * (1 + 0.15 * len(names))), 4.0))
    for i, name in enumerate(names):
        ax.bar(arms - 0.4 + width * (i + 0.5), share.sel(policy=name).values, width, label=str(name))
    ax.plot(arms, pi_star, "k_", markersize=18, markeredgewidth=2.5, label="optimal fair pi*")
    ax.set_xticks(arms)
    ax.set_xlabel("arm")
    ax.set_ylabel(f"average exposure after {t:,} rounds")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def save_figure(fig: Any, path: str | Path, dpi: int = 110) -> Path:
    """Save and close a figure (atomically: temp file, then rename)."""
    import os

    from bayesfair.io import atomic_temp

    plt = _plt()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = atomic_temp(path)
    try:
        fig.savefig(tmp, dpi=dpi)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
        plt.close(fig)
    return path
