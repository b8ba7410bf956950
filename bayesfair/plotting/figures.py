"""The figures of results, diagnostics trees and sweeps, and the helpers they share."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bayesfair.core._atomic import atomic_write
from bayesfair.simulation.metric_parts import METRIC_NAMES

__all__ = ["pyplot", "returns_figure", "plot_regret", "plot_exposure", "plot_group_exposure", "plot_exposure_at",
           "plot_sweep", "plot_merit_exposure", "plot_exposure_over_time", "plot_psi_forest", "save_figure",
           "place_legend", "arm_labels"]


INLINE_BACKEND = "module://matplotlib_inline.backend_inline"


def pyplot():
    """matplotlib.pyplot, with the Agg backend unless an interactive or inline backend is in use."""
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", INLINE_BACKEND):
        try:
            matplotlib.use("Agg")
        except Exception:  # an interactive backend already in use: keep it
            pass
    import matplotlib.pyplot as plt

    return plt


def _inline_backend() -> bool:
    """Whether IPython's inline backend (Jupyter's default) draws pyplot's figures."""
    import matplotlib

    return matplotlib.get_backend().lower() == INLINE_BACKEND


def _release(fig: Any) -> None:
    """Close ``fig`` from pyplot and give it an Agg canvas of its own (closing leaves a bare canvas
    that cannot be drawn): a complete Figure that no figure manager displays."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    pyplot().close(fig)
    FigureCanvasAgg(fig)


def returns_figure(fn: Callable) -> Callable:
    """Mark ``fn`` as a figure function: the Figure it returns is displayed once in a notebook.

    A notebook displays a cell's value, and IPython's inline backend also displays, at the end of
    the cell, every figure still registered with pyplot: a returned pyplot figure appeared twice.
    Under the inline backend the figure ``fn`` made is therefore closed from pyplot before it is
    returned (it stays a complete Figure: the cell's value, ``display(fig)``, ``fig.savefig``
    and :func:`save_figure` work; assigned and not displayed, it is not shown). Under every other
    backend it stays registered, so a script's ``plt.show()`` shows it. A figure drawn into the
    caller's axes (``ax=``) is the caller's and is left alone.
    """
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any):
        fig = fn(*args, **kwargs)
        given_ax = signature.bind(*args, **kwargs).arguments.get("ax") is not None
        if not given_ax and _inline_backend():
            _release(fig)
        return fig

    return wrapper


def _compact_rounds(ax) -> None:
    """At most 6 round ticks with engineering suffixes (200k, 2M) so long horizons stay legible."""
    from matplotlib.ticker import EngFormatter, MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))


def _metric_label(metric: str) -> str:
    return METRIC_NAMES.get(metric, metric.replace("_", " "))


def _inside(box, xy: np.ndarray) -> bool:
    return bool(((xy[:, 0] >= box.x0) & (xy[:, 0] <= box.x1) & (xy[:, 1] >= box.y0) & (xy[:, 1] <= box.y1)).any())


def _legend_overlaps(ax, legend) -> bool:
    """Whether ``legend``'s box touches any line, band, bar or marker drawn in ``ax``."""
    from matplotlib.collections import PathCollection
    from matplotlib.path import Path as MPath

    renderer = ax.figure.canvas.get_renderer()
    box = legend.get_window_extent(renderer).padded(4)
    for line in ax.get_lines():
        xy = line.get_transform().transform(line.get_xydata())
        xy = xy[np.isfinite(xy).all(axis=1)]
        if len(xy) and (MPath(xy).intersects_bbox(box, filled=False) if line.get_linestyle() not in ("None", "")
                        else _inside(box, xy)):
            return True
    for patch in ax.patches:
        if patch.get_transform().transform_path(patch.get_path()).intersects_bbox(box, filled=True):
            return True
    for coll in ax.collections:
        if isinstance(coll, PathCollection):  # scatter markers: their positions
            xy = coll.get_offset_transform().transform(coll.get_offsets())
            if len(xy) and _inside(box, xy):
                return True
            continue
        trans = coll.get_transform()
        for path in coll.get_paths():  # bands, error bars, hlines
            if trans.transform_path(path).intersects_bbox(box, filled=True):
                return True
    return False


def place_legend(ax: Any, where: str = "auto", **kw: Any):
    """Put ``ax``'s legend where it covers no data.

    ``where="outside"``: to the right of the axes. ``"free"``/``"auto"``: the first of the four
    inside corners whose legend box touches no line, band, bar or marker of ``ax`` (checked
    against what is drawn, in display coordinates); ``"auto"`` falls back to outside when no
    corner is free, ``"free"`` raises ``ValueError``. Call it after the data are drawn and the
    layout is done (the check uses the final axes size). Returns the legend (None without labels).
    """
    if where not in ("auto", "free", "outside"):
        raise ValueError(f"where must be 'auto', 'free' or 'outside', got {where!r}")
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    kw.setdefault("fontsize", 8)
    if where != "outside":
        for loc in ("upper left", "upper right", "lower right", "lower left"):
            legend = ax.legend(handles, labels, loc=loc, **kw)
            if not _legend_overlaps(ax, legend):
                return legend
        if where == "free":
            raise ValueError("no corner of the axes is free of data for the legend")
    kw.setdefault("bbox_to_anchor", (1.02, 1.0))
    return ax.legend(handles, labels, loc="upper left", borderaxespad=0.0, **kw)


def _free_corner(ax, **kw: Any) -> bool:
    """Whether some inside corner of ``ax`` can hold its legend without covering data."""
    try:
        return place_legend(ax, "free", **kw) is not None
    except ValueError:
        return False


def _finish(fig, legend_axes: Any, where: str = "auto", **kw: Any):
    """Lay out ``fig``, place the legends of ``legend_axes`` (see :func:`place_legend`), lay out again."""
    fig.tight_layout()
    for ax in legend_axes:
        place_legend(ax, where, **kw)
    fig.tight_layout()
    return fig


def _needs_symlog(curves: list[np.ndarray], ratio: float = 30.0) -> tuple[bool, float]:
    """(symmetric log wanted, its linear threshold) for curves whose magnitudes differ by > ``ratio``.

    The magnitude of a curve is its largest absolute value; the threshold is the power of ten at
    or below the smallest magnitude (at least 1e-4 of the largest), so every curve leaves the
    linear band around 0 and stays readable.
    """
    mags = np.array([np.nanmax(np.abs(c)) if np.isfinite(c).any() else 0.0 for c in curves])
    mags = mags[mags > 0]
    if mags.size < 2 or mags.max() <= ratio * mags.min():
        return False, 1.0
    floor = max(mags.min(), mags.max() * 1e-4)
    return True, float(10.0 ** np.floor(np.log10(floor)))


def _scaled(ax, curves: list[np.ndarray], scale: str, label: str) -> str:
    """Apply ``scale`` ("auto", "linear", "symlog") to ``ax``'s y axis; returns the y label."""
    if scale not in ("auto", "linear", "symlog"):
        raise ValueError(f"scale must be 'auto', 'linear' or 'symlog', got {scale!r}")
    wanted, thresh = _needs_symlog(curves)
    if scale == "symlog" or (scale == "auto" and wanted):
        ax.set_yscale("symlog", linthresh=thresh)
        ax.axhline(0.0, color="0.4", linewidth=0.6)
        return f"{label}\n(symmetric log scale, linear within +-{thresh:g})"
    return label


def _band_label(band: tuple[float, float]) -> str:
    """``"10-90%"``, ``"2.5-97.5%"``: the band's quantiles in percent, not truncated."""
    return f"{100 * band[0]:.4g}-{100 * band[1]:.4g}%"


@returns_figure
def plot_regret(ds: Any, metrics: tuple[str, ...] | None = None, band: tuple[float, float] = (0.1, 0.9),
                logx: bool = False, scale: str = "auto"):
    """Cumulative regret over rounds: mean over runs with a quantile band, one panel per metric.

    ``metrics`` defaults to the fairness and reward regrets, plus the bi-level regret ``bf_regret``
    when the results have it (the conventional ``regret`` when a study without a merit has no
    FairX regret). ``scale="auto"`` draws a panel on a symmetric-log y axis when the
    policies' curves differ by more than a factor 30 in magnitude (so one policy at -9,000 does
    not flatten the others to a line at 0); ``"linear"``/``"symlog"`` force one. The legend sits
    in a corner free of data, else outside the axes.
    """
    if metrics is None:
        fairx = "fairness_regret" in ds or "regret" not in ds  # without a merit: the conventional regret
        metrics = (*(("fairness_regret", "reward_regret") if fairx else ("regret",)),
                   *(("bf_regret",) if "bf_regret" in ds else ()))
    missing = [m for m in metrics if m not in ds]
    if missing:
        raise ValueError(f"the results have no {missing} (variables: {list(ds.data_vars)})")
    plt = pyplot()
    t = ds["checkpoint"].values
    names = [str(p) for p in ds["policy"].values]
    single = t.size == 1  # a line through one point draws nothing: a dot and a bar per policy instead
    width = max(5.2, 1.1 * len(names) + 1.5) if single else 5.2
    fig, axes = plt.subplots(1, len(metrics), figsize=(width * len(metrics), 4.0), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        curves = []
        for i, name in enumerate(names):
            arr = ds[metric].sel(policy=name).values  # [run, checkpoint]
            mean = arr.mean(axis=0)
            lo, hi = np.quantile(arr, band, axis=0)
            if single:
                _dot_and_band(ax, i, mean[0], lo[0], hi[0], f"C{i % 10}", name)
            else:
                (line,) = ax.plot(t, mean, label=name)
                ax.fill_between(t, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
            curves.append(mean)
        ax.set_ylabel(_scaled(ax, curves, scale, f"cumulative {_metric_label(metric)}"))
        if single:
            _policy_axis(ax, names, int(t[0]))
        else:
            ax.set_xlabel("round t")
            if logx:
                ax.set_xscale("log")
            else:
                _compact_rounds(ax)
        ax.grid(alpha=0.3)
    what = "dot: mean, bar" if single else "band"
    fig.suptitle(f"mean over {ds.sizes['run']} runs, {what} {_band_label(band)} of runs", fontsize=9)
    return _finish(fig, [] if single else [axes[0][-1]], "outside")


def _dot_and_band(ax: Any, x: float, mean: float, lo: float, hi: float, color: str, label: str) -> None:
    """One policy's value at a single checkpoint: its mean (dot) and its quantile band over runs (bar)."""
    ax.vlines(x, lo, hi, color=color, linewidth=7, alpha=0.35)
    ax.plot([x], [mean], "o", color=color, markersize=7, label=label)


def _policy_axis(ax: Any, names: list[str], t: int) -> None:
    """The x axis of a single-checkpoint figure: one position per policy, the round in the label."""
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=20 if len(names) > 3 else 0, ha="right" if len(names) > 3 else "center",
                       fontsize=8)
    ax.set_xlim(-0.6, len(names) - 0.4)
    ax.set_xlabel(f"policy (the study's one checkpoint: round {t:,})")


def arm_labels(ds: Any, compact: bool = False) -> list[str]:
    """Arm labels with their mean and (with more than one group) group: ``"arm 3 (mu=0.42, minority)"``.

    ``mu~0.42`` marks a mean averaged over runs (means drawn per run). ``compact=True`` puts the
    parts on separate lines (``"arm 3\\nmu=0.42\\nminority"``) for axis ticks.
    """
    arms = ds["arm"].values
    parts = [[f"arm {a}"] for a in arms]
    if "mean" in ds:
        mean = np.asarray(ds["mean"].values, np.float64).reshape(-1, arms.size)
        sign = "~" if np.ptp(mean, axis=0).max() > 1e-9 else "="
        for p, m in zip(parts, mean.mean(axis=0), strict=True):
            p.append(f"mu{sign}{m:.2f}")
    if "arm_group" in ds.coords and "group" in ds.coords and ds.sizes.get("group", 1) > 1:
        groups = [str(g) for g in ds["group"].values]
        ag = np.asarray(ds["arm_group"].values).reshape(-1, arms.size)[0]
        for p, g in zip(parts, ag, strict=True):
            p.append(groups[int(g)])
    if compact:
        return ["\n".join(p) for p in parts]
    return [p[0] + (f" ({', '.join(p[1:])})" if len(p) > 1 else "") for p in parts]


def _arm_ticks(ax, ds: Any) -> None:
    arms = ds["arm"].values
    ax.set_xticks(arms)
    ax.set_xticklabels(arm_labels(ds, compact=True), fontsize=7)
    varies = "mean" in ds and np.ptp(np.asarray(ds["mean"].values).reshape(-1, arms.size), axis=0).max() > 1e-9
    ax.set_xlabel("arm (mu: its mean" + (", averaged over runs: drawn per run)" if varies else ")"))


@returns_figure
def plot_exposure(ds: Any, checkpoint: int = -1):
    """Average exposure share per arm of every policy next to the optimal fair exposure pi*.

    Arms are labelled by their mean (and group); the legend sits outside the axes.
    """
    plt = pyplot()
    t = int(ds["checkpoint"].values[checkpoint])
    share = (ds["exposure"].isel(checkpoint=checkpoint) / t).mean("run")  # [policy, arm]
    arms = ds["arm"].values
    names = list(ds["policy"].values)
    width = 0.8 / max(len(names), 1)
    fig, ax = plt.subplots(figsize=(max(7.0, 0.6 * arms.size * (1 + 0.15 * len(names))), 4.2))
    for i, name in enumerate(names):
        ax.bar(arms - 0.4 + width * (i + 0.5), share.sel(policy=name).values, width, label=str(name))
    if "pi_star" in ds:
        ax.plot(arms, ds["pi_star"].mean("run").values, "k_", markersize=18, markeredgewidth=2.5,
                label="optimal fair pi*")
    _arm_ticks(ax, ds)
    ax.set_ylabel(f"average exposure after {t:,} rounds")
    ax.grid(axis="y", alpha=0.3)
    return _finish(fig, [ax], "outside")


@returns_figure
def plot_group_exposure(ds: Any, band: tuple[float, float] = (0.1, 0.9)):
    """Group exposure over rounds against the exposure floors beta_g, one column per group.

    Top row: the expected exposure share (1/t) sum_s pi_s(g); bottom row: the pull share
    N_g,t / t, which the floors bound (a floor holds in a run when N_g,s >= floor(beta_g s) at
    every round s, the results' ``anytime_slack``). Lines: mean over runs with a ``band``
    quantile band; dashed: the floor; legend: each policy's share of runs where all floors held.
    Needs results with groups (``group_exposure``); the floor lines need ``group_floor``.
    """
    if "group_exposure" not in ds or "group" not in ds.dims:
        raise ValueError("the results have no groups (no group_exposure): nothing to plot per group")
    plt = pyplot()
    groups = [str(g) for g in ds["group"].values]
    t = ds["checkpoint"].values.astype(np.float64)
    floors = np.asarray(ds["group_floor"].values, np.float64) if "group_floor" in ds else None
    held = None
    if "anytime_slack" in ds:
        held = (ds["anytime_slack"].isel(checkpoint=-1).min("group") >= 0).mean("run").values
    names = [str(p) for p in ds["policy"].values]
    single = t.size == 1  # a line through one point draws nothing: a dot and a bar per policy instead
    width = max(4.6, 1.0 * len(names) + 1.2) if single else 4.6
    fig, axes = plt.subplots(2, len(groups), figsize=(width * len(groups) + 1.6, 6.4), squeeze=False,
                             sharex=True, sharey="row")
    rows = (("group_exposure", "exposure share (1/t) sum pi_s(g)"), ("group_pulls", "pull share N_g,t / t"))
    for r, (var, ylabel) in enumerate(rows):
        for g, ax in enumerate(axes[r]):
            for i, name in enumerate(names):
                arr = ds[var].sel(policy=name).isel(group=g).values / t[None, :]  # [run, checkpoint]
                label = name + (f" (floors held in {held[i]:.0%} of runs)" if held is not None else "")
                lo, hi = np.quantile(arr, band, axis=0)
                if single:
                    _dot_and_band(ax, i, arr.mean(), lo[0], hi[0], f"C{i % 10}", label)
                    continue
                (line,) = ax.plot(t, arr.mean(axis=0), label=label, linewidth=1.2)
                if arr.shape[0] > 1:
                    ax.fill_between(t, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
            if floors is not None:
                ax.axhline(floors[g], color="k", linestyle="--", linewidth=1.2, label="floor beta_g")
            ax.grid(alpha=0.3)
            if r == 0:
                ax.set_title(f"group {groups[g]}" + (f" (floor {floors[g]:g})" if floors is not None else ""),
                             fontsize=10)
            if single:
                _policy_axis(ax, names, int(t[0]))
                if r == 0:
                    ax.set_xlabel("")
            else:
                ax.set_xscale("log")
                if r == 1:
                    ax.set_xlabel("round t")
        axes[r][0].set_ylabel(ylabel)
    what = "dot: mean, bar" if single else "band"
    fig.suptitle(f"group exposure against the floors: mean over {ds.sizes['run']} runs, {what} "
                 f"{_band_label(band)} of runs", fontsize=9)
    return _finish(fig, [axes[0][-1]], "outside")


def save_figure(fig: Any, path: str | Path, dpi: int = 110) -> Path:
    """Save and close a figure (atomically: temp file, then rename)."""
    plt = pyplot()
    path = Path(path)
    try:
        with atomic_write(path) as tmp:
            fig.savefig(tmp, dpi=dpi, format=path.suffix.lstrip(".") or None)
    finally:
        plt.close(fig)
    return path


@returns_figure
def plot_exposure_at(ds: Any, rounds: Any, title: str | None = None):
    """Average exposure share per arm at several rounds (one panel each), next to pi*.

    ``rounds`` are checkpoint rounds of ``ds`` (e.g. ``(2000, 2000000)`` for FairX Figure 1);
    shares are averaged over runs. pi* is averaged over runs too (constant for MAB data bandits),
    and drawn only when recorded (a study with a merit). Arms are labelled by their mean; the
    legend sits outside the axes.
    """
    plt = pyplot()
    rounds = [int(r) for r in np.atleast_1d(rounds)]
    ckpts = ds["checkpoint"].values
    missing = [r for r in rounds if r not in ckpts]
    if missing:
        raise ValueError(f"rounds {missing} are not checkpoints of the results")
    arms = ds["arm"].values
    names = list(ds["policy"].values)
    pi_star = ds["pi_star"].mean("run").values if "pi_star" in ds else None  # recorded with a merit only
    width = 0.8 / max(len(names), 1)
    panel_w = max(5.0, 0.5 * arms.size * (1 + 0.15 * len(names)))
    fig, axes = plt.subplots(1, len(rounds), figsize=(panel_w * len(rounds), 4.0), squeeze=False, sharey=True)
    for ax, r in zip(axes[0], rounds, strict=True):
        share = (ds["exposure"].sel(checkpoint=r) / r).mean("run")  # [policy, arm]
        for i, name in enumerate(names):
            ax.bar(arms - 0.4 + width * (i + 0.5), share.sel(policy=name).values, width, label=str(name))
        if pi_star is not None:
            ax.plot(arms, pi_star, "k_", markersize=14, markeredgewidth=2.5, label="optimal fair pi*")
        _arm_ticks(ax, ds)
        ax.set_title(f"after {r:,} rounds", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel(f"average exposure (mean over {ds.sizes['run']} runs)")
    if title:
        fig.suptitle(title, fontsize=10)
    return _finish(fig, [axes[0][-1]], "outside")


@returns_figure
def plot_sweep(table: Any, x: str, metrics: tuple[str, ...] = ("fairness_regret", "reward_regret"),
               logy: bool = False, title: str | None = None, scale: str = "auto"):
    """Final metric vs a swept parameter: one line per policy with +-1 standard-error bars.

    ``table`` is a pandas DataFrame with columns ``policy``, ``x`` and, for every metric, the
    metric and (optionally) ``<metric>_se``. ``logy`` draws log y axes; otherwise ``scale``
    chooses linear or symmetric-log y axes as in :func:`plot_regret`. The legend sits outside.
    """
    plt = pyplot()
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.2 * len(metrics), 4.0), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        curves = []
        for name, sub in table.groupby("policy", sort=False):
            sub = sub.sort_values(x)
            se = sub[f"{metric}_se"].to_numpy() if f"{metric}_se" in sub else None
            xs = sub[x].to_numpy()
            xs = xs if xs.dtype.kind in "iuf" else np.asarray([str(v) for v in xs])
            ax.errorbar(xs, sub[metric].to_numpy(), yerr=se, marker="o", capsize=3, label=str(name))
            mag = np.abs(sub[metric].to_numpy(np.float64))  # a value within its s.e. of 0 has no scale
            curves.append(mag + (np.nan_to_num(np.asarray(se, np.float64)) if se is not None else 0.0))
        ax.set_xlabel(x)
        label = f"{_metric_label(metric)} at T"
        if logy:
            ax.set_yscale("log")
        else:
            label = _scaled(ax, curves, scale, label)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=10)
    return _finish(fig, [axes[0][-1]], "outside")


__all__ += ["plot_exposure_at", "plot_sweep"]


# --------------------------------------------------------------------------- posterior diagnostics
# Figures of bayesfair.diagnostics DataTrees. They read the tree's xarray groups with numpy only
# (arviz stays confined to bayesfair.diagnostics).


def _interval(values: np.ndarray, ci_prob: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median and equal-tailed ``ci_prob`` interval over the leading (sample) axis."""
    if not 0.0 < ci_prob < 1.0:
        raise ValueError(f"ci_prob must be in (0, 1), got {ci_prob}")
    lo, med, hi = np.quantile(values, [(1 - ci_prob) / 2, 0.5, (1 + ci_prob) / 2], axis=0)
    return med, lo, hi


def _flat_draws(tree: Any, var: str) -> Any:
    if not hasattr(tree, "children") or "posterior" not in tree.children:
        raise TypeError("expected a DataTree from bayesfair.diagnostics (with a posterior group)")
    post = tree["posterior"].dataset
    if var not in post:
        raise ValueError(f"the posterior has no variable {var!r} (variables: {list(post.data_vars)})")
    da = post[var]
    return da.stack(sample=("chain", "draw")).transpose("sample", ...)


_FOREST_LEVELS = {  # level -> (posterior variable, observed exposure share, pull share, under-exposure p)
    "arm": ("pi_star", "exposure_share", "pull_share", "p_arm"),
    "group": ("pi_star_group", "group_exposure_share", "group_pull_share", "p_group"),
    "within": ("pi_star_within", "within_exposure_share", "within_pull_share", "p_within"),
    "bilevel": ("pi_star_bilevel", "group_exposure_share", "group_pull_share", "p_bilevel"),
}


@returns_figure
def plot_merit_exposure(tree: Any, level: str = "arm", ci_prob: float = 0.9, ax: Any = None,
                        title: str | None = None):
    """Merit vs exposure forest: the posterior of the fair share next to the share received.

    One row per arm (``level="arm"``: pi*_a; ``"within"``: the within-group fair policy) or per
    group (``"group"``: pi*_g = sum_{a in g} pi*_a; ``"bilevel"``: the beta-bi-level optimum).
    The line is the equal-tailed ``ci_prob`` posterior interval with its median (dot); the
    observed average exposure (x) and pull share (+) come from the tree's ``observed_exposure``
    group, and the right margin prints P(under-exposed) when the tree has it. The legend takes a
    corner free of data, else the space right of the axes (past the P(under) margin).
    """
    if level not in _FOREST_LEVELS:
        raise ValueError(f"level must be one of {tuple(_FOREST_LEVELS)}, got {level!r}")
    var, exp_name, pull_name, p_name = _FOREST_LEVELS[level]
    draws = _flat_draws(tree, var)
    dim = draws.dims[-1]
    labels = [str(c) for c in draws[dim].values]
    med, lo, hi = _interval(np.asarray(draws.values), ci_prob)
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(6.0, 0.9 + 0.35 * len(labels)))
    fig = ax.figure
    y = np.arange(len(labels))[::-1]
    ax.hlines(y, lo, hi, color="C0", linewidth=2.5, label=f"posterior {var} ({int(100 * ci_prob)}% interval)")
    ax.plot(med, y, "o", color="C0", markersize=5)
    obs = tree["observed_exposure"].dataset if "observed_exposure" in tree.children else None
    if obs is not None and exp_name in obs:
        ax.plot(obs[exp_name].values, y, "x", color="C3", markersize=8, markeredgewidth=2,
                label="observed exposure (mean pi_t)")
    if obs is not None and pull_name in obs:
        ax.plot(obs[pull_name].values, y, "+", color="C2", markersize=9, markeredgewidth=1.5, label="pull share")
    under = tree["under_exposure"].dataset if "under_exposure" in tree.children else None
    margin = under is not None and p_name in under
    if margin:
        trans = ax.get_yaxis_transform()
        for yi, p in zip(y, under[p_name].values, strict=True):
            ax.text(1.01, yi, f"P(under)={p:.2f}", transform=trans, va="center", fontsize=7)
    ax.set_yticks(y)
    ax.set_yticklabels(labels)
    ax.set_ylabel(dim)
    ax.set_xlabel("share of exposure")
    ax.grid(axis="x", alpha=0.3)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    if not _free_corner(ax, fontsize=7):  # (a free corner found keeps the legend there)
        place_legend(ax, "outside", fontsize=7, bbox_to_anchor=(1.2 if margin else 1.02, 1.0))
    fig.tight_layout()
    return fig


@returns_figure
def plot_exposure_over_time(ds: Any, policy: str, tree: Any = None, level: str = "arm", run: int | None = None,
                            ci_prob: float = 0.9, band: tuple[float, float] = (0.1, 0.9), items: Any = None,
                            ax: Any = None):
    """Exposure share over rounds, with the posterior band of the fair share.

    Lines: the cumulative exposure share (1/t) sum_s pi_s of every arm (``level="arm"``) or group
    (``"group"``) of ``policy`` at the checkpoints of the results ``ds``: one run (``run=r``) or
    the mean over runs with a ``band`` quantile band over runs (``run=None``). With a diagnostics
    ``tree`` (one run's posterior after the last round), the ``ci_prob`` interval of pi*_a (or
    pi*_g) is drawn as a shaded band of the same color over the rounds, and its median dashed;
    ``run`` then defaults to the tree's run (``tree.attrs["run"]``), so lines and bands belong to
    the same run. ``items`` restricts the plot to some arm (group) coordinates. The legend takes a
    corner free of data, else the space right of the axes.
    """
    if level not in ("arm", "group"):
        raise ValueError(f"level must be 'arm' or 'group', got {level!r}")
    names = [str(p) for p in ds["policy"].values]
    if policy not in names:
        raise ValueError(f"policy {policy!r} is not in the results (policies: {names})")
    var = "exposure" if level == "arm" else "group_exposure"
    t = ds["checkpoint"].values.astype(np.float64)
    share = ds[var].sel(policy=policy).values / t[None, :, None]  # [run, checkpoint, n]
    if run is None and tree is not None and "run" in getattr(tree, "attrs", {}):
        run = int(tree.attrs["run"])
    if run is not None:
        if isinstance(run, bool) or not isinstance(run, (int, np.integer)) or not 0 <= run < share.shape[0]:
            raise ValueError(f"run must be an integer in [0, {share.shape[0] - 1}] or None, got {run!r}")
        share = share[run:run + 1]
    coords = [str(c) for c in ds[level].values]
    show = list(range(len(coords)))
    if items is not None:
        wanted = [str(i) for i in np.atleast_1d(items)]
        unknown = [w for w in wanted if w not in coords]
        if unknown:
            raise ValueError(f"items {unknown} are not {level} coordinates ({coords})")
        show = [coords.index(w) for w in wanted]
    post = None
    if tree is not None:
        post = _flat_draws(tree, "pi_star" if level == "arm" else "pi_star_group")
        if post.shape[-1] != len(coords):
            raise ValueError(f"the tree has {post.shape[-1]} {level}s, the results {len(coords)}")
        med, lo, hi = _interval(np.asarray(post.values), ci_prob)
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(7.0, 4.2))
    fig = ax.figure
    single = t.size == 1  # a line through one point draws nothing: a dot (and a bar for the runs' band)
    for j, i in enumerate(show):
        name, color = coords[i], f"C{j % 10}"
        ax.plot(t, share[:, :, i].mean(axis=0), "o" if single else "-", color=color, label=f"{level} {name}")
        if share.shape[0] > 1:
            qlo, qhi = np.quantile(share[:, :, i], band, axis=0)
            if single:
                ax.vlines(t, qlo, qhi, color=color, linewidth=6, alpha=0.3)
            else:
                ax.fill_between(t, qlo, qhi, color=color, alpha=0.15, linewidth=0)
        if post is not None:
            ax.axhspan(lo[i], hi[i], color=color, alpha=0.12, linewidth=0)
            ax.axhline(med[i], color=color, linestyle="--", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("round t")
    ax.set_ylabel(f"{level} exposure share (1/t) sum pi_s")
    what = f"run {run}" if run is not None else f"mean over {share.shape[0]} runs"
    extra = f"; shaded: posterior {int(100 * ci_prob)}% interval of the fair share" if post is not None else ""
    ax.set_title(f"{policy}: {what}{extra}", fontsize=9)
    ax.grid(alpha=0.3)
    return _finish(fig, [ax], "auto", fontsize=7)


@returns_figure
def plot_psi_forest(tree: Any, var: str = "psi", ci_prob: float = 0.9, ax: Any = None, title: str | None = None):
    """Forest of the group-bias posterior: median and ``ci_prob`` interval of every psi entry.

    One row per group (``psi`` [group]) or per (group, feature) pair (``psi`` [group, feature]),
    with the zero line (no bias) for reference.
    """
    draws = _flat_draws(tree, var)
    event_dims = draws.dims[1:]
    if not event_dims:
        raise ValueError(f"{var} has no group dimension to plot")
    flat = draws.stack(entry=event_dims) if len(event_dims) > 1 else draws
    entries = flat["entry"].values if len(event_dims) > 1 else flat[event_dims[0]].values
    labels = [", ".join(map(str, e)) if isinstance(e, tuple) else str(e) for e in entries]
    med, lo, hi = _interval(np.asarray(flat.values), ci_prob)
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 0.9 + 0.3 * len(labels)))
    fig = ax.figure
    y = np.arange(len(labels))[::-1]
    ax.axvline(0.0, color="0.5", linewidth=1)
    ax.hlines(y, lo, hi, color="C1", linewidth=2.5)
    ax.plot(med, y, "o", color="C1", markersize=5)
    ax.set_yticks(y)
    ax.set_yticklabels(labels)
    ax.set_ylabel(", ".join(event_dims))
    ax.set_xlabel(f"{var} (median, {int(100 * ci_prob)}% interval)")
    ax.grid(axis="x", alpha=0.3)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


