"""The power curve of the bias estimand (:func:`plot_power`), exported by :mod:`bayesfair.plotting`."""

from __future__ import annotations

from typing import Any

import numpy as np

from bayesfair.plotting.figures import pyplot, returns_figure

__all__ = ["plot_power"]


def _rows(result: Any) -> tuple[list[dict], dict]:
    """(rows, the rest) of a :class:`~bayesfair.inference.glm_power.PowerResult` or of its
    ``as_dict()`` (e.g. read back from ``power.json``)."""
    d = result.as_dict() if hasattr(result, "as_dict") else result
    if not isinstance(d, dict) or "rows" not in d or not d["rows"]:
        raise TypeError("result must be a PowerResult of bayesfair.inference.glm_power.glm_power (or its as_dict())")
    need = {"effect", "true_estimand", "coverage", "power", "replicates", "converged"}
    missing = sorted(need - set(d["rows"][0]))
    if missing:
        raise ValueError(f"the result's rows lack {missing}: not a glm_power result")
    return sorted(d["rows"], key=lambda r: r["effect"]), d


def _points(ax: Any, x: np.ndarray, shares: list[dict], color: str, label: str) -> None:
    p = np.array([s["p"] for s in shares], float)
    lo = np.array([s["wilson95"][0] for s in shares], float)
    hi = np.array([s["wilson95"][1] for s in shares], float)
    ax.errorbar(x, p, yerr=[np.clip(p - lo, 0, None), np.clip(hi - p, 0, None)], fmt="o-", color=color, capsize=4,
                markersize=5, linewidth=1.4, label=label)


@returns_figure
def plot_power(result: Any, title: str | None = None):
    """Power and coverage of the bias estimand's interval against the effect size.

    Left: the share of replicates whose interval excludes 0 (the power; at effect 0 the false
    detection rate, nominally 1 - ci_prob for a calibrated interval, half of it on each side),
    with Wilson 95% intervals, and reference lines at 1 - ci_prob and 0.9. Right: the coverage of
    the true estimand, with a reference line at ci_prob. The x axis is the level shift ``delta``
    (the model's scale); each tick also gives the true estimand on the outcome's scale and the
    number of fits that failed the convergence verdict (counted in the shares, not dropped).
    ``result``: :func:`bayesfair.inference.glm_power.glm_power`'s result or its ``as_dict()``
    (e.g. ``json.load`` of a recipe's ``power.json``).
    """
    rows, d = _rows(result)
    ci = float(d.get("ci_prob", 0.9))
    x = np.array([r["effect"] for r in rows], float)
    plt = pyplot()
    fig, (ax_p, ax_c) = plt.subplots(1, 2, figsize=(10.0, 4.6), sharex=True, layout="constrained")
    _points(ax_p, x, [r["power"] for r in rows], "C0", f"P({int(round(100 * ci))}% interval excludes 0)")
    ax_p.axhline(1 - ci, color="0.35", linestyle="--", linewidth=1,
                 label=f"1 - {ci:g} = {1 - ci:.2f}: nominal at effect 0")
    ax_p.axhline(0.9, color="0.35", linestyle=":", linewidth=1, label="power 0.9")
    _points(ax_c, x, [r["coverage"] for r in rows], "C1", "coverage of the true estimand")
    ax_c.axhline(ci, color="0.35", linestyle="--", linewidth=1, label=f"nominal coverage {ci:g}")
    scale = d.get("scale") or "outcome scale"
    labels = []
    for e, r in zip(x, rows, strict=True):
        failed = r["replicates"] - r["converged"]
        labels.append(f"{e:g}\n({r['true_estimand']:+.3g})\n" + (f"{failed}/{r['replicates']} not conv."
                                                                  if failed else f"all {r['replicates']} conv."))
    for ax in (ax_p, ax_c):
        ax.set_xticks(x)
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_xlabel(f"level shift delta (log-odds / linear predictor)\n(true estimand, {scale}; fits that failed "
                      "the verdict, counted)", fontsize=9)
        ax.set_ylim(-0.04, 1.08)
        ax.grid(alpha=0.3)
    ax_p.set_ylabel("share of replicates")
    ax_p.set_title("power: the interval excludes 0", fontsize=10)
    ax_c.set_title("coverage of the true estimand", fontsize=10)
    if len(x) > 1:
        pad = 0.1 * float(np.ptp(x))
        ax_p.set_xlim(x.min() - pad, x.max() + pad)
    group, ref = d.get("group", "group"), d.get("reference", "reference")
    head = title or f"{group} vs {ref}"
    fig.suptitle(f"{head}\n{d.get('replicates', '?')} semi-synthetic replicates per effect, "
                 f"{d.get('design_rows', '?')} rows, {d.get('likelihood', '')} likelihood (bars: Wilson 95%)",
                 fontsize=10)
    handles, names = [], []
    for ax in (ax_p, ax_c):  # one legend below the panels: the curves may run through every corner
        for h, n in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.append(h)
            names.append(n)
    fig.legend(handles, names, loc="outside lower center", ncol=3, fontsize=7, frameon=False)
    return fig
