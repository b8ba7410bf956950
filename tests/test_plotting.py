"""Figures as objects: shown once in a notebook, kept for pyplot in a script; single-checkpoint studies.

Every ``plot_*`` function returns a Figure. Under IPython's inline backend (Jupyter's default)
that figure must not stay registered with pyplot, or the backend's end-of-cell display shows it
a second time next to the cell's value (tests/test_notebooks.py counts the outputs of a real
executed cell); under any other backend it stays registered, so a script's ``plt.show()`` shows
it. Here the backend test is ``figures._inline_backend`` replaced by a stand-in, so the
registry is checked for every plot function in this process. A study with one checkpoint draws
a dot and a bar per policy where a line through one point would draw nothing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import bayesfair as bf
from bayesfair import diagnostics as dg
from bayesfair import plotting
from bayesfair.plotting import figures

K, T = 4, 30
MERIT = bf.merit.exponential(2.0)
POST = bf.beta_bernoulli()


@pytest.fixture(scope="module")
def study():
    env = bf.bernoulli_arms([0.2, 0.5, 0.55, 0.8], groups=[0, 0, 1, 1])
    pols = {"BF-TS": bf.bf_ts([0.2, 0.2], MERIT, POST), "uniform": bf.uniform()}
    ds, states = dg.simulate_with_states(1, env, pols, T, 3, merit=MERIT, floors=[0.2, 0.2],
                                         checkpoints=[10, 20, T])
    tree = dg.from_simulation(ds, states, "BF-TS", POST, merit=MERIT, n_draws=200)
    gap = dg.exposure_gap(ds, states, "BF-TS", POST, MERIT, n_draws=200)
    return ds, tree, gap


def _figure_calls(ds, tree, gap):
    table = pd.DataFrame({"policy": ["a", "a", "b", "b"], "c": [1, 2, 1, 2], "fairness_regret": [1.0, 2, 3, 4],
                          "reward_regret": [0.5, 1, 1.5, 2]})
    psi_tree = dg.posterior_tree({"psi": np.random.default_rng(0).normal(size=(2, 50, 2))})
    return {
        "plot_regret": lambda: plotting.plot_regret(ds),
        "plot_exposure": lambda: plotting.plot_exposure(ds),
        "plot_group_exposure": lambda: plotting.plot_group_exposure(ds),
        "plot_exposure_at": lambda: plotting.plot_exposure_at(ds, [T]),
        "plot_sweep": lambda: plotting.plot_sweep(table, x="c"),
        "plot_merit_exposure": lambda: plotting.plot_merit_exposure(tree),
        "plot_exposure_over_time": lambda: plotting.plot_exposure_over_time(ds, "BF-TS", tree=tree),
        "plot_psi_forest": lambda: plotting.plot_psi_forest(psi_tree),
        "plot_exposure_gap": lambda: plotting.plot_exposure_gap(gap),
        "plot_power": lambda: plotting.plot_power(_POWER),
    }


def _share(p, n=10):
    return {"p": p, "se": (p * (1 - p) / n) ** 0.5, "wilson95": [max(p - 0.2, 0.0), min(p + 0.2, 1.0)], "k": 0, "n": n}


_POWER = {"rows": [{"effect": e, "true_estimand": 0.5 * e, "replicates": 10, "converged": 10, "coverage": _share(0.9),
                    "power": _share(p)} for e, p in ((0.0, 0.1), (0.5, 0.8))], "ci_prob": 0.9}


def test_every_plot_function_is_covered(study):
    public = {n for n in plotting.__all__ if n.startswith("plot_")}
    assert public == set(_figure_calls(*study)), "add the new plot function to _figure_calls"


@pytest.mark.parametrize("inline", [True, False], ids=["inline-backend", "script-backend"])
def test_returned_figures_leave_pyplot_only_under_the_inline_backend(study, monkeypatch, inline):
    plt = plotting.pyplot()
    plt.close("all")
    monkeypatch.setattr(figures, "_inline_backend", lambda: inline)
    for name, call in _figure_calls(*study).items():
        fig = call()
        registered = fig.number in plt.get_fignums() if hasattr(fig, "number") else False
        assert registered is not inline, f"{name}: registered with pyplot = {registered} under inline = {inline}"
        assert fig.axes and fig.canvas.get_renderer() is not None, f"{name}: the returned figure must stay drawable"
        plt.close(fig)
    assert plt.get_fignums() == []


def test_figures_drawn_into_the_callers_axes_stay_the_callers(study, monkeypatch):
    _, tree, gap = study
    plt = plotting.pyplot()
    plt.close("all")
    monkeypatch.setattr(figures, "_inline_backend", lambda: True)
    fig, axes = plt.subplots(1, 2)
    assert plotting.plot_merit_exposure(tree, ax=axes[0]) is fig
    assert plotting.plot_exposure_gap(gap, ("arm", "group"), axes[1]) is fig  # ax given by position
    assert plt.get_fignums() == [fig.number]
    plt.close(fig)


def _drawn_points(ax) -> int:
    """Finite data points that draw something: markers or segments of lines, and bars of vlines."""
    n = 0
    for line in ax.get_lines():
        xy = np.asarray(line.get_xydata(), float)
        xy = xy[np.isfinite(xy).all(axis=1)]
        if line.get_marker() not in (None, "", "None") or len(xy) > 1:
            n += len(xy) if line.get_transform() is ax.transData else 0
    for coll in ax.collections:
        n += sum(len(p.vertices) > 1 for p in coll.get_paths())
    return n


def test_single_checkpoint_figures_show_every_policy(study, tmp_path):
    """One checkpoint: the regret, group and exposure-over-time figures draw a dot and a bar per
    policy (or item) where lines would draw nothing; with several checkpoints they are lines."""
    ds, tree, _ = study
    one = ds.isel(checkpoint=[-1])
    names = [str(p) for p in ds["policy"].values]
    fig = plotting.plot_regret(one)
    for ax in fig.axes:
        assert [t.get_text() for t in ax.get_xticklabels()] == names
        dots = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
        assert [ln.get_label() for ln in dots] == names
        bars = [c for c in ax.collections if c.get_paths()]
        assert len(bars) == len(names)
        for dot, bar in zip(dots, bars, strict=True):  # the mean lies within the bar's range, drawn at its x
            (x, y), seg = dot.get_xydata()[0], bar.get_paths()[0].vertices
            assert np.allclose(seg[:, 0], x) and seg[:, 1].min() <= y + 1e-9 and y <= seg[:, 1].max() + 1e-9
        assert str(T) in ax.get_xlabel()
    plotting.save_figure(fig, tmp_path / "one.regret.png")
    fig = plotting.plot_group_exposure(one)
    for ax in fig.axes:
        assert sum(ln.get_marker() == "o" for ln in ax.get_lines()) == len(names)
    plotting.save_figure(fig, tmp_path / "one.groups.png")
    fig = plotting.plot_exposure_over_time(one, "BF-TS", tree=tree)
    assert _drawn_points(fig.axes[0]) >= K
    plotting.save_figure(fig, tmp_path / "one.over_time.png")
    fig = plotting.plot_regret(ds)
    assert all(len(ln.get_xdata()) == ds.sizes["checkpoint"] for ln in fig.axes[0].get_lines()[:len(names)])
    plotting.pyplot().close(fig)
