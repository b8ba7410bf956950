"""Reports and study figures: human columns, ± everywhere, group tables iff groups, sweep labels,
the same numbers in the markdown, the HTML and the tidy DataFrame; legends clear of the data."""

import copy
import json
import re

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from bayesfair import plotting
from bayesfair.plotting import figures
from bayesfair.workflow import report
from bayesfair.workflow.config import parse_config

T, R = 40, 3
BASE = {
    "name": "rep", "seed": 5, "runs": R, "horizon": T, "chunk_size": 20, "checkpoints": [1, 10, 20, T],
    "merit": {"name": "exponential", "c": 2.0},
    "environment": {"name": "bernoulli_arms", "means": [0.2, 0.45, 0.6, 0.8]},
    "policies": {"EG": {"name": "fairx_eg", "epsilon": 0.2}, "UCB": {"name": "ucb1"}},
}


def _run(**extra):
    cfg = copy.deepcopy(BASE)
    for k, v in extra.items():
        if isinstance(v, dict):
            cfg[k].update(v)
        else:
            cfg[k] = v
    return parse_config(cfg).run()


@pytest.fixture(scope="module")
def plain():
    return _run()


@pytest.fixture(scope="module")
def grouped():
    return _run(floors=[0.3, 0.3], environment={"groups": [0, 1, 0, 1], "group_names": ["a", "b"]})


@pytest.fixture(scope="module")
def swept(grouped):
    """A two-point sweep over the EG epsilon, shaped as bayesfair.workflow.sweep combines points."""
    key = "policies.EG.epsilon"
    other = grouped.copy(deep=True)
    for m in ("fairness_regret", "reward_regret", "regret", "reward"):
        other[m] = other[m] * 1.5
    ds = xr.concat([grouped, other], dim=pd.Index([0.2, 0.5], name=key), coords="minimal",
                   compat="override", combine_attrs="override")
    ds.attrs["sweep"] = json.dumps({"keys": [key], "values": [[0.2, 0.5]]})
    return ds


def _md_tables(md: str) -> dict[str, list[list[str]]]:
    out = {}
    for block in md.split("\n## ")[1:]:
        heading, _, rest = block.partition("\n")
        rows = [line for line in rest.splitlines() if line.startswith("|")]
        if rows:
            out[heading] = [[c.strip() for c in r.strip("|").split("|")] for r in rows if not r.startswith("|---")]
    return out


def _html_tables(page: str) -> dict[str, list[list[str]]]:
    out = {}
    for heading, table in re.findall(r"<h2>(.*?)</h2>\s*<table>(.*?)</table>", page, re.S):
        rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
        out[heading] = [[re.sub("<.*?>", "", c).strip() for c in re.findall(r"<t[hd]>(.*?)</t[hd]>", r, re.S)]
                        for r in rows]
    return out


def _unescape(tables):
    import html

    return {html.unescape(h): [[html.unescape(c) for c in row] for row in rows] for h, rows in tables.items()}


def _written(ds, tmp_path, stem="rep"):
    figures = report.write_figures(ds, tmp_path, stem)
    md_path, html_path = report.write_report(ds, tmp_path, stem, figures)
    labels = {c: str for c in ("table", "sweep point", "policy", "group", "arm", "quantity")}
    frame = pd.read_csv(tmp_path / f"{stem}.report.csv", dtype=labels, keep_default_na=False,
                        na_values={"mean": [""], "se": [""]})
    return md_path.read_text(), _unescape(_html_tables(html_path.read_text())), frame, figures


def _number(text: str) -> float:
    return float(text.replace(",", ""))


@pytest.mark.parametrize("which", ["plain", "grouped", "swept"])
def test_markdown_html_and_frame_agree(which, request, tmp_path):
    ds = request.getfixturevalue(which)
    md, page_tables, frame, _ = _written(ds, tmp_path)
    md_tables = _md_tables(md)
    data_tables = {h: rows for h, rows in md_tables.items() if h != "Figures"}
    assert data_tables == page_tables  # the same cells in the markdown and the HTML
    direct = report.report_frame(ds)
    pd.testing.assert_frame_equal(frame, direct, check_dtype=False)
    sweep = which == "swept"
    for table, (_, fields, by) in report._TABLES.items():
        rows = direct[direct["table"] == table]
        if rows.empty:
            continue
        header, *cells = md_tables[report._heading(table, sweep)]
        fields = (["sweep point"] if sweep else []) + fields
        assert header[: len(fields)] == fields
        index = {tuple(c[: len(fields)]): c for c in cells}
        for r in rows.to_dict("records"):
            col = r["policy"] if by == "policy" and r["policy"] else r["quantity"]
            cell = index[tuple(r[f] for f in fields)][header.index(col)]
            decimals = len(cell.split(" ")[0].split(".")[1]) if "." in cell else 0
            mean, _, se = cell.partition(" ± ")
            assert abs(_number(mean) - r["mean"]) <= 0.51 * 10.0 ** -decimals, (table, col, cell, r)
            if np.isfinite(r["se"]):
                assert abs(_number(se) - r["se"]) <= 0.51 * 10.0 ** -decimals, (table, col, cell, r)


@pytest.mark.parametrize("which", ["plain", "grouped", "swept"])
def test_human_columns_pm_everywhere_and_group_table_iff_groups(which, request, tmp_path):
    ds = request.getfixturevalue(which)
    md, _, frame, figures = _written(ds, tmp_path)
    tables = _md_tables(md)
    heading = next(h for h in tables if h.startswith("Final cumulative regret per"))
    header, *rows = tables[heading]
    for raw in ("fairness_regret", "reward_regret", "bf_regret", "floors_held", "seconds"):
        assert raw not in header
    assert "fairness regret" in header and "wall time (s)" in header
    has_groups = which != "plain"
    assert ("floors held (share of runs)" in header) == has_groups
    assert ("bi-level regret R*_beta" in header) == ("bf_regret" in ds)
    metric_cols = [i for i, h in enumerate(header) if h not in ("sweep point", "policy", "wall time (s)")]
    assert metric_cols and all(" ± " in row[i] for row in rows for i in metric_cols)  # ± for every metric, R > 1
    mc = frame[~frame["quantity"].isin(["wall time (s)", "floor beta_g", "mean mu", "fair share pi*"])]
    assert mc["se"].notna().all() and (mc["runs"] == R).all()
    groups_heading = [h for h in tables if h.startswith("Groups at T")]
    assert bool(groups_heading) == has_groups == bool((frame["table"] == "groups").any())
    assert any(p.name.endswith(".groups.png") for p in figures) == (has_groups and which != "swept")
    if has_groups:
        # floors held: the share of runs whose exact anytime slack stayed >= 0 in every group
        ds1 = ds if which == "grouped" else ds.isel({"policies.EG.epsilon": 0})
        want = (ds1["anytime_slack"].isel(checkpoint=-1).min("group") >= 0).mean("run")
        got = frame[(frame["quantity"] == "floors held (share of runs)")].iloc[: ds1.sizes["policy"]]
        np.testing.assert_allclose(got["mean"].to_numpy(), want.values)
        ghead, *grows = tables[groups_heading[0]]
        assert {"exposure share at T", "floor beta_g", "floor held (share of runs)"} <= set(ghead)
        assert {r[ghead.index("group")] for r in grows} == {"a", "b"}
        assert {r[ghead.index("floor beta_g")] for r in grows} == {"0.300"}


def test_sweep_points_are_labelled_by_their_parameters(swept, tmp_path):
    md, _, frame, _ = _written(swept, tmp_path)
    header, *rows = _md_tables(md)[next(h for h in _md_tables(md) if h.startswith("Final cumulative regret per"))]
    assert header[0] == "sweep point" and "#" not in header
    assert [r[0] for r in rows] == ["policies.EG.epsilon = 0.2"] * 2 + ["policies.EG.epsilon = 0.5"] * 2
    assert set(frame["sweep point"]) == {"policies.EG.epsilon = 0.2", "policies.EG.epsilon = 0.5"}
    assert not (frame["table"] == "arms").any()


def test_arm_labels_carry_means_and_groups(plain, grouped):
    assert plotting.arm_labels(plain) == ["arm 0 (mu=0.20)", "arm 1 (mu=0.45)", "arm 2 (mu=0.60)", "arm 3 (mu=0.80)"]
    assert plotting.arm_labels(grouped)[1] == "arm 1 (mu=0.45, b)"
    assert plotting.arm_labels(grouped, compact=True)[2] == "arm 2\nmu=0.60\na"
    fig = plotting.plot_exposure(grouped)
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks == plotting.arm_labels(grouped, compact=True)
    plotting.pyplot().close(fig)


def test_regret_figure_bf_panel_and_scale(grouped):
    import matplotlib.pyplot as plt

    metrics = ("fairness_regret", "reward_regret", *(("bf_regret",) if "bf_regret" in grouped else ()))
    fig = plotting.plot_regret(grouped)
    assert [ax.get_ylabel().split("\n")[0] for ax in fig.axes] == [
        f"cumulative {report.METRIC_NAMES[m]}" for m in metrics]
    plt.close(fig)
    rng = np.random.default_rng(0)
    for _ in range(5):  # one policy orders of magnitude apart -> symmetric log; comparable -> linear
        ds = grouped.copy(deep=True)
        rr = ds["reward_regret"].values
        rr[:] = np.cumsum(rng.uniform(0.5, 1.0, rr.shape), axis=-1)
        factor = 10.0 ** rng.uniform(2.0, 4.0)
        rr[0] *= -factor
        fig = plotting.plot_regret(ds, metrics=("reward_regret",))
        assert fig.axes[0].get_yscale() == "symlog"
        plt.close(fig)
        rr[0] /= -factor / rng.uniform(1.0, 5.0)
        fig = plotting.plot_regret(ds, metrics=("reward_regret",))
        assert fig.axes[0].get_yscale() == "linear"
        plt.close(fig)
    with pytest.raises(ValueError, match="scale"):
        plotting.plot_regret(grouped, scale="log")
    with pytest.raises(ValueError, match="no"):
        plotting.plot_regret(grouped, metrics=("nope",))


def test_figures_of_results_without_a_merit_and_band_titles(plain):
    """Results of a study without a merit have no FairX regret and no pi*: plot_regret draws the
    conventional regret and plot_exposure_at the shares alone. Band titles are not truncated."""
    import matplotlib.pyplot as plt

    bare = plain.drop_vars([v for v in ("fairness_regret", "reward_regret", "group_fairness_regret", "pi_star",
                                        "pi_star_within") if v in plain])
    fig = plotting.plot_regret(bare)
    assert [ax.get_ylabel().split("\n")[0] for ax in fig.axes] == [f"cumulative {report.METRIC_NAMES['regret']}"]
    plt.close(fig)
    last = int(bare["checkpoint"].values[-1])
    fig = plotting.plot_exposure_at(bare, [last])
    assert not [ln for ln in fig.axes[0].get_lines() if ln.get_label() == "optimal fair pi*"]
    plt.close(fig)
    fig = plotting.plot_exposure_at(plain, [last])
    assert [ln for ln in fig.axes[0].get_lines() if ln.get_label() == "optimal fair pi*"]
    plt.close(fig)
    fig = plotting.plot_regret(plain, band=(0.025, 0.975))
    assert "band 2.5-97.5% of runs" in fig._suptitle.get_text()
    plt.close(fig)


def test_group_exposure_figure_has_floors(grouped, plain):
    import matplotlib.pyplot as plt

    fig = plotting.plot_group_exposure(grouped)
    assert len(fig.axes) == 4  # 2 rows (exposure, pulls) x 2 groups
    for ax in fig.axes:
        floors = [ln for ln in ax.get_lines() if ln.get_label() == "floor beta_g"]
        assert len(floors) == 1 and np.allclose(floors[0].get_ydata(), 0.3)
    plt.close(fig)
    with pytest.raises(ValueError, match="groups"):
        plotting.plot_group_exposure(plain.drop_vars("group_exposure"))


def test_legends_never_cover_data_on_random_axes():
    """place_legend picks a free corner or goes outside; the legend never touches a line, band or bar."""
    plt = plotting.pyplot()
    rng = np.random.default_rng(1)
    for trial in range(12):
        fig, ax = plt.subplots(figsize=(5, 3.5))
        x = np.linspace(0, 1, 50)
        for i in range(rng.integers(1, 6)):
            y = rng.uniform(0, 1) + rng.normal(0, 0.3) * x + 0.1 * np.sin(rng.uniform(2, 12) * x)
            ax.plot(x, y, label=f"line {i}")
            if trial % 2:
                ax.fill_between(x, y - 0.1, y + 0.1, alpha=0.2)
        if trial % 3 == 0:
            ax.bar(rng.uniform(0, 1, 4), rng.uniform(0, 1.5, 4), 0.1, label="bars")
        fig.tight_layout()
        legend = plotting.place_legend(ax, "auto")
        fig.tight_layout()
        assert not figures._legend_overlaps(ax, legend)
        plt.close(fig)
    fig, ax = plt.subplots()
    ax.fill_between([0, 1], [0, 0], [1, 1], label="everywhere")
    with pytest.raises(ValueError, match="no corner"):
        plotting.place_legend(ax, "free")
    legend = plotting.place_legend(ax, "auto")
    assert not figures._legend_overlaps(ax, legend)
    with pytest.raises(ValueError, match="where"):
        plotting.place_legend(ax, "inside")
    plt.close(fig)


def test_the_policies_table_gives_each_policys_parameters_from_a_config_and_from_python(plain, tmp_path):
    """A study from a config lists its table's parameters; a study built in Python lists the
    results' record of each policy (its declared params), whatever keys those params have."""
    rows = {r[0]: r[1:] for r in _md_tables(report.write_report(plain, tmp_path, "cfg", [])[0].read_text())
            ["Policies"][1:]}
    assert rows["EG"][0] == "fairx_eg" and json.loads(rows["EG"][1])["epsilon"] == 0.2 and rows["UCB"][0] == "ucb1"
    import bayesfair as bf

    env = bf.bernoulli_arms([0.2, 0.6])
    ds = bf.simulate(1, env, {"TS": bf.thompson(bf.beta_bernoulli())}, horizon=10, runs=2)
    rows = {r[0]: r[1:] for r in _md_tables(report.write_report(ds, tmp_path, "py", [])[0].read_text())
            ["Policies"][1:]}
    params = bf.thompson(bf.beta_bernoulli()).params
    assert rows["TS"][0] == "thompson" and json.loads(rows["TS"][1]) == json.loads(json.dumps(params))
    assert set(json.loads(rows["TS"][1])) == {"posterior"}
