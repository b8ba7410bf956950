"""The exposure-gap forest (:func:`plot_exposure_gap`), exported by :mod:`bayesfair.plotting`."""

from __future__ import annotations

from typing import Any

import numpy as np

from bayesfair.plotting.figures import _free_corner, pyplot, returns_figure

__all__ = ["plot_exposure_gap"]


def _row_label(row: Any, mu_varies: bool) -> str:
    if row["level"] == "group":
        return f"group {row['name']}"
    label = f"arm {row['name']}"
    if np.isfinite(row["mu"]):
        sign = "~" if mu_varies else "="
        label += f" (mu{sign}{row['mu']:.2f}" + (", post. mean" if row["mu_source"] == "posterior" else "") + ")"
    return label


@returns_figure
def plot_exposure_gap(gap: Any, levels: tuple[str, ...] = ("arm", "group"), ax: Any = None, title: str | None = None):
    """Forest of the exposure gap pi* - share from :func:`bayesfair.diagnostics.exposure_gap`.

    One row per arm (labelled with its mean: ``arm 3 (mu=0.42)``; ``mu~`` when the means were
    drawn per run and are averaged, ``post. mean`` when the environment's means were not
    recorded) and, with more than one group, per group below a separator. The thin line is the
    pooled posterior interval over runs, the dot the across-run mean gap with a black bar of
    +-2 Monte Carlo standard errors; the vertical line is zero (right of it: under-allocated).
    The right margin prints P(gap > 0). The legend takes a corner free of data, else the space
    right of the axes (past the margin).
    """
    if not hasattr(gap, "columns") or not {"level", "gap", "lower", "upper", "p_under"} <= set(gap.columns):
        raise TypeError("gap must be the DataFrame of bayesfair.diagnostics.exposure_gap")
    bad = [lv for lv in levels if lv not in ("arm", "group")]
    if bad or not levels:
        raise ValueError(f"levels must be a non-empty subset of ('arm', 'group'), got {levels!r}")
    rows = gap[gap["level"] == "arm"] if "arm" in levels else gap.iloc[:0]
    groups = gap[gap["level"] == "group"]
    if "group" in levels and (len(groups) > 1 or "arm" not in levels):
        import pandas as pd

        rows = pd.concat([rows, groups])
    if rows.empty:
        raise ValueError(f"gap has no rows at levels {levels}")
    mu_varies = bool(gap.attrs.get("mu_varies", False))
    labels = [_row_label(r, mu_varies) for _, r in rows.iterrows()]
    n = len(labels)
    is_group = (rows["level"] == "group").to_numpy()
    y = np.arange(n, dtype=float)[::-1]
    if is_group.any() and (~is_group).any():
        y[is_group] -= 0.6  # a gap between the arm rows and the group rows
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 1.6 + 0.34 * n))
    fig = ax.figure
    ci = gap.attrs.get("ci_prob", 0.9)
    runs = int(rows["runs"].iloc[0])
    ax.axvline(0.0, color="0.4", linewidth=1, zorder=1)
    color = np.where(is_group, "C1", "C0")
    for c, lab in (("C0", "arm"), ("C1", "group")):
        sel = color == c
        if sel.any():
            ax.hlines(y[sel], rows["lower"].to_numpy()[sel], rows["upper"].to_numpy()[sel], color=c, linewidth=2.2,
                      label=f"{lab}s: pooled {int(round(100 * ci))}% interval, {runs} runs")
            ax.plot(rows["gap"].to_numpy()[sel], y[sel], "o", color=c, markersize=5)
    mcse = rows["mcse"].to_numpy()
    if np.isfinite(mcse).any():
        ax.errorbar(rows["gap"].to_numpy(), y, xerr=2 * np.nan_to_num(mcse), fmt="none", ecolor="k", elinewidth=1,
                    capsize=3, label="mean gap +- 2 MCSE")
    trans = ax.get_yaxis_transform()
    for yi, p in zip(y, rows["p_under"].to_numpy(), strict=True):
        ax.text(1.01, yi, f"P(>0)={p:.2f}", transform=trans, va="center", fontsize=7)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    what = "exposure share" if gap.attrs.get("compare", "exposure") == "exposure" else "pull share"
    ax.set_xlabel(f"pi* - {what}   (> 0: under-allocated)")
    ax.grid(axis="x", alpha=0.3)
    lo, hi = float(rows["lower"].min()), float(rows["upper"].max())
    pad = 0.08 * max(hi - lo, 1e-6)
    ax.set_xlim(min(lo, 0.0) - pad, max(hi, 0.0) + pad)
    ax.set_ylim(y.min() - 0.7, y.max() + 0.7)
    if title is None and "policy" in gap.attrs:
        title = f"{gap.attrs['policy']}: exposure gap after round {gap.attrs.get('round', '?')}"
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    if not _free_corner(ax, fontsize=7):  # no free corner: below the axes, clear of the margin text
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16 - 1.2 / fig.get_size_inches()[1] / 4), fontsize=7,
                  ncol=2, frameon=False)
    fig.tight_layout()
    return fig
