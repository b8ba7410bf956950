"""Reports of results files: the printed summary tables, the figures and the markdown/HTML report.

Used by the command line (``bayesfair demo``, ``simulate``, ``plot`` and ``report``,
:mod:`bayesfair.workflow.cli`) and usable on their own::

    from bayesfair.simulation import results as io
    from bayesfair.workflow import report

    ds = io.read_results("results/demo/demo.nc")
    figures = report.write_figures(ds, Path("out"), "demo")
    report.write_report(ds, Path("out"), "demo", figures)
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from bayesfair import plotting
from bayesfair.environments.prior import check_prior_match
from bayesfair.plotting import arm_labels
from bayesfair.simulation.metric_parts import METRIC_NAMES
from bayesfair.simulation.results import SCALAR_METRICS, write_text
from bayesfair.workflow.outputs import figure_file

__all__ = ["print_tables", "sweep_table", "write_figures", "write_report", "report_frame", "format_cell",
           "has_groups", "prior_check_rows", "prior_check_lines", "study_prior_check"]


def print_tables(ds: Any) -> None:
    """Print the report's tables of a study's results (``bayesfair demo`` and ``bayesfair simulate``):
    the final cumulative regrets per policy, the group table when the study has groups or floors,
    and the exposure share per arm, with the column names and ± of :func:`write_report`; then
    the prior check (:func:`prior_check_lines`) when the results record one."""
    for heading, header, rows in _display_tables(report_frame(ds), bool(_sweep_keys(ds))):
        widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]
        print(f"\n{heading}:")
        for line in (header, *rows):
            print("  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                            for i, (c, w) in enumerate(zip(line, widths, strict=True))).rstrip())
    lines = prior_check_lines(_config(ds).get("prior_check"))
    if lines:
        print()
        print("\n".join(lines))


# --------------------------------------------------------------------------- the prior check

_VERDICTS = (  # prefix of bayesfair.environments.prior.check_prior_match's note -> the verdict shown
    ("mismatched", "MISMATCH"),
    ("matched", "matched"),
    ("fixed instance", "fixed instance"),
    ("explicit per-run instances", "fixed instances"),
)


def prior_check_rows(notes: Any) -> list[tuple[str, str, str]]:
    """``(policy, verdict, detail)`` of every note of a prior check (``config["prior_check"]``).

    The verdict is ``"MISMATCH"`` (the instances are not drawn from the policy's prior: its
    regret is not its Bayesian regret), ``"matched"``, ``"fixed instance"`` or ``"fixed
    instances"`` (a frequentist regret); the detail is the rest of the note. No notes: ``[]``.
    """
    rows = []
    for policy, note in (notes or {}).items():
        note = str(note)
        verdict = next((shown for prefix, shown in _VERDICTS if note.startswith(prefix)), "unknown")
        detail = note.split(":", 1)[1].strip() if ":" in note else note
        rows.append((str(policy), verdict, detail))
    return rows


def prior_check_lines(notes: Any) -> list[str]:
    """The prior check said plainly, one line per Bayesian policy (``[]`` without notes).

    The first line says whether any policy's prior mismatches the distribution the
    environment draws its instances from, and which; mismatched policies come first.
    """
    rows = prior_check_rows(notes)
    if not rows:
        return []
    bad = [p for p, v, _ in rows if v == "MISMATCH"]
    if bad:
        head = (f"Prior check (Bayesian regret): MISMATCH for {', '.join(map(repr, bad))}: the environment's "
                "instances are not drawn from their prior, so their regret is not their Bayesian regret.")
    else:
        head = "Prior check (Bayesian regret): no mismatch."
    order = sorted(rows, key=lambda r: r[1] != "MISMATCH")
    return [head, *(f"  {p}: {v}: {d}" for p, v, d in order)]


def study_prior_check(study: Any) -> dict[str, str]:
    """The prior check of a study before it runs (``bayesfair simulate --dry-run``): the notes
    :func:`bayesfair.simulate` would store in ``config["prior_check"]``, its warning silenced
    (the caller prints the notes)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return check_prior_match(study.env, study.policies).get("prior_check", {})


def _config(ds: Any) -> dict[str, Any]:
    return json.loads(ds.attrs.get("config", "{}"))


def has_groups(ds: Any) -> bool:
    """Whether results have more than one group or exposure floors (then the group figure and table apply)."""
    return "group_exposure" in ds and ("group_floor" in ds or ds.sizes.get("group", 1) > 1)


def _sweep_keys(ds: Any) -> list[str]:
    if "sweep" not in ds.attrs:
        return []
    return list(json.loads(ds.attrs["sweep"])["keys"])


def sweep_table(ds: Any, checkpoint: int = -1):
    """Final metrics of a sweep: one row per point x policy, mean and standard error over runs."""
    import numpy as np
    import pandas as pd

    keys = _sweep_keys(ds)
    last = ds.isel(checkpoint=checkpoint)
    metrics = [*SCALAR_METRICS, *(["bf_regret"] if "bf_regret" in ds else [])]
    rows = []
    stacked = last[metrics].stack(point=keys)
    for j in range(stacked.sizes["point"]):
        pt = stacked.isel(point=j)
        for pol in ds["policy"].values:
            row = {k: pt[k].item() for k in keys}
            row["policy"] = str(pol)
            for m in metrics:
                v = pt[m].sel(policy=pol).values
                v = v[np.isfinite(v)]
                row[m] = v.mean() if v.size else float("nan")
                row[f"{m}_se"] = v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")
            rows.append(row)
    return pd.DataFrame(rows)


def write_figures(ds: Any, folder: Path, stem: str = "", logx: bool = False) -> list[Path]:
    """Regret and exposure figures of a study (or the sweep figure of a sweep) into ``folder``.

    A single study gives ``<stem>.regret.png`` (with the bi-level regret when recorded),
    ``<stem>.exposure.png`` and, when it has groups or floors, ``<stem>.groups.png`` (group
    exposure over rounds against the floors).
    """
    def figure(kind: str) -> Path:
        return figure_file(folder, stem, kind)

    keys = _sweep_keys(ds)
    if keys:
        table = sweep_table(ds)
        x = keys[0]
        if len(keys) > 1:  # one line per policy and combination of the other keys
            others = keys[1:]
            table["policy"] = table.apply(
                lambda r: f"{r['policy']} ({', '.join(f'{k.split(chr(46))[-1]}={r[k]}' for k in others)})", axis=1)
        metrics = ("fairness_regret", "reward_regret", *(("bf_regret",) if "bf_regret" in ds else ()))
        fig = plotting.plot_sweep(table, x=x, metrics=metrics,
                                  title=f"final regret over {x} (mean +- 1 s.e. over runs)")
        return [plotting.save_figure(fig, figure("sweep"))]
    out = [plotting.save_figure(plotting.plot_regret(ds, logx=logx), figure("regret")),
           plotting.save_figure(plotting.plot_exposure(ds), figure("exposure"))]
    if has_groups(ds):
        out.append(plotting.save_figure(plotting.plot_group_exposure(ds), figure("groups")))
    return out


# quantity -> (number format, standard error shown: "mc" always, "exact" never, "auto" when it varies over runs)
_QUANTITIES = {
    **{METRIC_NAMES[m]: (",.2f", "mc") for m in ("fairness_regret", "reward_regret", "regret", "bf_regret",
                                                 "group_fairness_regret")},
    METRIC_NAMES["reward"]: (",.2f", "mc"),
    "floors held (share of runs)": (".2f", "mc"),
    "wall time (s)": (".1f", "exact"),
    "exposure share at T": (".3f", "mc"),
    "pull share at T": (".3f", "mc"),
    "floor beta_g": (".3f", "exact"),
    "floor held (share of runs)": (".2f", "mc"),
    "mean mu": (".3f", "auto"),
    "fair share pi*": (".3f", "auto"),
}
_TABLES = {  # table -> (heading, label fields, column: "quantity" or "policy")
    "policies": ("Final cumulative regret per policy (mean ± Monte Carlo standard error over runs)", ["policy"],
                 "quantity"),
    "groups": ("Groups at T: exposure, pulls, floors and cumulative fairness regret per policy and group (mean ± "
               "standard error over runs)",
               ["policy", "group"], "quantity"),
    "arms": ("Exposure share per arm at T, one column per policy, vs the fair share pi* (mean ± standard error "
             "over runs)", ["arm"],
             "policy"),
}
FRAME_COLUMNS = ("table", "sweep point", "policy", "group", "arm", "quantity", "mean", "se", "runs")


def _stats(values: Any, kind: str) -> tuple[float, float, int]:
    import numpy as np

    v = np.asarray(values, np.float64).reshape(-1)
    v = v[np.isfinite(v)]
    if not v.size:
        return float("nan"), float("nan"), 0
    show = kind == "mc" or (kind == "auto" and np.ptp(v) > 1e-12)
    se = v.std(ddof=1) / np.sqrt(v.size) if show and v.size > 1 else float("nan")
    return float(v.mean()), float(se), int(v.size)


def _point_labels(ds: Any) -> list[tuple[str, dict[str, Any]]]:
    """(label, selection) of every sweep point: ``"floors = [0.2, 0.2]"``; one unlabelled point otherwise."""
    import itertools

    keys = _sweep_keys(ds)
    if not keys:
        return [("", {})]
    out = []
    for idx in itertools.product(*(range(ds.sizes[k]) for k in keys)):
        sel = dict(zip(keys, idx, strict=True))
        label = ", ".join(f"{k} = {ds[k].values[i]}" for k, i in sel.items())
        out.append((label, sel))
    return out


def report_frame(ds: Any):
    """The report's numbers as a tidy pandas DataFrame: one row per table cell.

    Columns ``table`` (``"policies"``, ``"groups"`` when the study has groups or floors, ``"arms"``
    for single studies), ``sweep point`` (the swept parameters, ``"key = value, ..."``; empty
    outside sweeps), ``policy``, ``group``, ``arm`` (``"arm 3 (mu=0.42)"``), ``quantity`` (the
    column name, with its unit), ``mean``, ``se`` (Monte Carlo standard error over runs; NaN for
    exact values: wall time, floors, a mean or pi* that is the same in every run) and ``runs``.
    The markdown and HTML reports show exactly these numbers (:func:`write_report`).
    """
    import pandas as pd

    rows: list[dict[str, Any]] = []

    def add(table: str, point: str, quantity: str, values: Any, policy: str = "", group: str = "", arm: str = ""):
        mean, se, n = _stats(values, _QUANTITIES[quantity][1])
        rows.append(dict(zip(FRAME_COLUMNS, (table, point, policy, group, arm, quantity, mean, se, n), strict=True)))

    sweep = bool(_sweep_keys(ds))
    for point, sel in _point_labels(ds):
        sub = ds.isel(sel)
        last = sub.isel(checkpoint=-1)
        t = float(sub["checkpoint"].values[-1])
        groups = [str(g) for g in sub["group"].values] if has_groups(sub) else []
        labels = arm_labels(sub)
        for pol in (str(p) for p in sub["policy"].values):
            p = last.sel(policy=pol)
            for m in ("fairness_regret", "reward_regret", "regret", "bf_regret"):
                if m in p:
                    add("policies", point, METRIC_NAMES[m], p[m].values, pol)
            if "reward" in p:
                add("policies", point, METRIC_NAMES["reward"], p["reward"].values, pol)
            if "anytime_slack" in p:
                held = (p["anytime_slack"].min("group") >= 0).values
                add("policies", point, "floors held (share of runs)", held, pol)
            if "seconds" in p:
                add("policies", point, "wall time (s)", p["seconds"].values, pol)
            for g, name in enumerate(groups):
                pg = p.isel(group=g)
                add("groups", point, "exposure share at T", pg["group_exposure"].values / t, pol, name)
                add("groups", point, "pull share at T", pg["group_pulls"].values / t, pol, name)
                if "group_floor" in sub:
                    add("groups", point, "floor beta_g", sub["group_floor"].values[g], pol, name)
                if "anytime_slack" in pg:
                    add("groups", point, "floor held (share of runs)", (pg["anytime_slack"] >= 0).values, pol, name)
                if "group_fairness_regret" in pg:
                    add("groups", point, METRIC_NAMES["group_fairness_regret"],
                        pg["group_fairness_regret"].values, pol, name)
            if not sweep:
                for a, lab in enumerate(labels):
                    add("arms", point, "exposure share at T", p["exposure"].isel(arm=a).values / t, pol, arm=lab)
        if not sweep:
            for a, lab in enumerate(labels):
                add("arms", point, "mean mu", sub["mean"].isel(arm=a).values, arm=lab)
                if "pi_star" in sub:
                    add("arms", point, "fair share pi*", sub["pi_star"].isel(arm=a).values, arm=lab)
    return pd.DataFrame(rows, columns=list(FRAME_COLUMNS))


def format_cell(mean: float, se: float, quantity: str) -> str:
    """A report cell: ``"1,234.56 ± 7.89"`` (``"± n/a"`` for a Monte Carlo value from one run;
    no ± for exact values)."""
    import numpy as np

    fmt, kind = _QUANTITIES[quantity]
    if not np.isfinite(mean):
        return ""
    text = format(mean, fmt)
    if np.isfinite(se):
        return f"{text} ± {format(se, fmt)}"
    return f"{text} ± n/a" if kind == "mc" else text


def _heading(table: str, sweep: bool) -> str:
    """The heading of a report table (``"... per sweep point, policy ..."`` in sweeps)."""
    heading = _TABLES[table][0]
    return heading.replace(" per ", " per sweep point, ", 1) if sweep else heading


def _display_tables(frame: Any, sweep: bool) -> list[tuple[str, list[str], list[list[str]]]]:
    """(heading, header, rows of cells) of every table of ``frame`` (see :func:`report_frame`)."""
    out = []
    for table, (heading, fields, by) in _TABLES.items():
        sub = frame[frame["table"] == table]
        if sub.empty:
            continue
        fields = (["sweep point"] if sweep else []) + fields
        heading = _heading(table, sweep)
        columns: list[str] = []
        cells: dict[tuple[str, ...], dict[str, str]] = {}
        for r in sub.itertuples(index=False):
            r = dict(zip(FRAME_COLUMNS, r, strict=True))
            col = r["policy"] if by == "policy" and r["policy"] else r["quantity"]
            if col not in columns:
                columns.append(col)
            cells.setdefault(tuple(r[f] for f in fields), {})[col] = format_cell(r["mean"], r["se"], r["quantity"])
        rows = [[*key, *(vals.get(c, "") for c in columns)] for key, vals in cells.items()]
        out.append((heading, [*fields, *columns], rows))
    return out


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in row) + "</tr>\n" for row in rows)
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>"


def _policy_params(entry: dict, *, from_study: bool) -> dict:
    """A policy's parameters: from the study's config table (``{"name": ..., **params}``) or, for a
    study built in Python, from the results' record of the policy (``{"name", "label", "params"}``)."""
    if from_study:
        return {k: x for k, x in entry.items() if k != "name"}
    return entry.get("params", {})


def write_report(ds: Any, folder: Path, stem: str, figures: list[Path]) -> tuple[Path, Path]:
    """Write ``<stem>.report.md``, ``<stem>.report.html`` (figures linked / embedded) and
    ``<stem>.report.csv`` (the tidy :func:`report_frame`: the same numbers as the tables)."""
    cfg = _config(ds)
    study = cfg.get("study", cfg)
    keys = _sweep_keys(ds)
    title = f"bayesfair report: {study.get('name', stem)}"
    meta = [("created", ds.attrs.get("created", "?")), ("git revision", ds.attrs.get("git_revision", "?")),
            ("versions", ", ".join(f"{k} {v}" for k, v in json.loads(ds.attrs.get("versions", "{}")).items())),
            ("runs x horizon", f"{ds.sizes['run']} x {int(ds['checkpoint'].values[-1]):,}"),
            ("seed", str(study.get("seed", cfg.get("seed", "?")))),
            ("environment", json.dumps(study.get("environment", cfg.get("environment", {})))),
            ("merit", json.dumps(study.get("merit", cfg.get("merit", {}))))]
    floors = study.get("floors")
    if floors is not None and "floors" not in keys:
        meta.append(("exposure floors", json.dumps(floors)))
    if study.get("description"):
        meta.insert(0, ("description", study["description"]))
    if keys:
        meta.append(("sweep", ", ".join(f"{k} = {json.dumps(v)}" for k, v in
                                         zip(keys, json.loads(ds.attrs["sweep"])["values"], strict=True))))
    meta.append(("numbers", "regrets are cumulative (summed over the T rounds); ± is the Monte Carlo standard "
                            "error over runs; shares are fractions of the T rounds"))
    prior_rows = prior_check_rows(cfg.get("prior_check"))
    if prior_rows:
        head = prior_check_lines(cfg["prior_check"])[0].split(": ", 1)[1]
        meta.insert(1 if study.get("description") else 0, ("prior check (Bayesian regret)", head))
    frame = report_frame(ds)
    tables = _display_tables(frame, bool(keys))
    if prior_rows:
        tables.append(("Prior check: is each Bayesian policy's prior the distribution the instances are drawn from?",
                       ["policy", "verdict", "detail"], [list(r) for r in prior_rows]))
    from_study = "policies" in study and study is not cfg
    policies = study["policies"] if from_study else cfg.get("policies", {})
    tables.append(("Policies (of the first sweep point)" if keys else "Policies",
                   ["policy", "constructor", "parameters"],
                   [[name, v.get("name") or "", json.dumps(_policy_params(v, from_study=from_study))]
                    for name, v in policies.items()]))

    md = [f"# {title}", ""]
    md += [f"- **{k}**: {v}" for k, v in meta]
    for heading, header, rows in tables:
        md += ["", f"## {heading}", "", _md_table(header, rows)]
    md += ["", "## Figures", ""]
    md += [f"![{p.stem}]({p.name})" for p in figures]
    body = [f"<h1>{html.escape(title)}</h1>", "<ul>"]
    body += [f"<li><b>{html.escape(k)}</b>: {html.escape(str(v))}</li>" for k, v in meta]
    body.append("</ul>")
    for heading, header, rows in tables:
        body += [f"<h2>{html.escape(heading)}</h2>", _html_table(header, rows)]
    body.append("<h2>Figures</h2>")
    for p in figures:
        data = base64.b64encode(p.read_bytes()).decode()
        body.append(f'<p><img alt="{html.escape(p.stem)}" src="data:image/png;base64,{data}"></p>')
    page = ("<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>" + html.escape(title) + "</title>"
            "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
            "table{border-collapse:collapse}td,th{padding:2px 10px;text-align:right}"
            "tr:nth-child(even){background:#f3f3f3}img{max-width:100%}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")
    md_path = write_text(folder / f"{stem}.report.md", "\n".join(md) + "\n")
    html_path = write_text(folder / f"{stem}.report.html", page)
    write_text(folder / f"{stem}.report.csv", frame.to_csv(index=False))
    return md_path, html_path
