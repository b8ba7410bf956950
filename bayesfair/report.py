"""Reports of results files: the printed summary tables, the figures and the markdown/HTML report.

Used by the command line (``bayesfair demo``, ``simulate``, ``plot`` and ``report``,
:mod:`bayesfair.cli`) and usable on their own::

    from bayesfair import io, report

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

__all__ = ["print_tables", "sweep_table", "write_figures", "write_report"]


def print_tables(ds: Any) -> None:
    """Print the final regret table and the exposure shares of a study's results (``bayesfair demo``
    and ``bayesfair simulate``)."""
    import pandas as pd

    from bayesfair import io

    with pd.option_context("display.width", 140, "display.max_columns", 20, "display.precision", 3):
        table = io.summary_table(ds)
        print("\nCumulative regret at T (mean and standard error over runs):")
        print(table[["fairness_regret", "fairness_regret_se", "reward_regret", "reward_regret_se",
                     "regret", "regret_se"]].to_string(float_format=lambda v: f"{v:,.1f}"))
        print("\nExposure share per arm at T (average pi_t over rounds and runs) vs merit share pi*:")
        print(io.exposure_table(ds).to_string(float_format=lambda v: f"{v:.3f}"))


def _sweep_keys(ds: Any) -> list[str]:
    if "sweep" not in ds.attrs:
        return []
    return list(json.loads(ds.attrs["sweep"])["keys"])


def sweep_table(ds: Any, checkpoint: int = -1):
    """Final metrics of a sweep: one row per point x policy, mean and standard error over runs."""
    import numpy as np
    import pandas as pd

    from bayesfair.io import SCALAR_METRICS

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
    """Regret and exposure figures of a study (or the sweep figure of a sweep) into ``folder``."""
    from bayesfair import plotting

    prefix = f"{stem}." if stem else ""
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
        return [plotting.save_figure(fig, folder / f"{prefix}sweep.png")]
    return [plotting.save_figure(plotting.plot_regret(ds, logx=logx), folder / f"{prefix}regret.png"),
            plotting.save_figure(plotting.plot_exposure(ds), folder / f"{prefix}exposure.png")]


def _md_table(df: Any, fmt: str = "{:,.3f}") -> str:
    import numpy as np

    cols = [df.index.name or ""] + [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for idx, row in df.iterrows():
        cells = [str(idx)]
        for v in row.values:
            if isinstance(v, (float, np.floating)):
                cells.append("" if np.isnan(v) else fmt.format(v))
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _regret_table(ds: Any):
    """Per policy: final regrets as 'mean ± se' strings, plus bi-level columns when present."""
    import numpy as np
    import pandas as pd

    from bayesfair import io

    t = io.summary_table(ds)
    out = pd.DataFrame(index=pd.Index(t.index, name="policy"))
    for m in io.SCALAR_METRICS:
        out[m] = [f"{a:,.2f} ± {b:,.2f}" if b == b else f"{a:,.2f}" for a, b in zip(t[m], t[f"{m}_se"], strict=True)]
    last = ds.isel(checkpoint=-1)
    if "bf_regret" in ds:
        vals = last["bf_regret"].values  # [policy, run]
        out["bf_regret"] = [f"{v.mean():,.2f}" for v in vals]
    if "anytime_slack" in ds:
        slack = last["anytime_slack"].min(("run", "group")).values
        out["floors_held"] = ["yes" if s >= 0 else f"no (min slack {s})" for s in slack]
    out["seconds"] = [f"{s:.1f}" for s in np.asarray(ds["seconds"].values, float)]
    return out


def write_report(ds: Any, folder: Path, stem: str, figures: list[Path]) -> tuple[Path, Path]:
    """Write ``<stem>.report.md`` and ``<stem>.report.html`` (figures linked / embedded)."""
    import pandas as pd

    from bayesfair import io
    from bayesfair.io import write_text

    cfg = json.loads(ds.attrs.get("config", "{}"))
    study = cfg.get("study", cfg)
    keys = _sweep_keys(ds)
    title = f"bayesfair report: {study.get('name', stem)}"
    meta = [("created", ds.attrs.get("created", "?")), ("git revision", ds.attrs.get("git_revision", "?")),
            ("versions", ", ".join(f"{k} {v}" for k, v in json.loads(ds.attrs.get("versions", "{}")).items())),
            ("runs x horizon", f"{ds.sizes['run']} x {int(ds['checkpoint'].values[-1]):,}"),
            ("seed", str(study.get("seed", cfg.get("seed", "?")))),
            ("environment", json.dumps(study.get("environment", cfg.get("environment", {})))),
            ("merit", json.dumps(study.get("merit", cfg.get("merit", {}))))]
    floors = study.get("floors", study.get("group_floors"))  # (group_floors: files before the rename)
    if floors is not None and not {"floors", "group_floors"} & set(keys):
        meta.append(("exposure floors", json.dumps(floors)))
    if study.get("description"):
        meta.insert(0, ("description", study["description"]))
    sections: list[tuple[str, Any, str]] = []  # (heading, DataFrame, float format)
    if keys:
        meta.append(("sweep", ", ".join(f"{k} = {json.dumps(v)}" for k, v in
                                         zip(keys, json.loads(ds.attrs["sweep"])["values"], strict=True))))
        table = sweep_table(ds)
        table.index = pd.Index([f"{i}" for i in range(len(table))], name="#")
        sections.append(("Final cumulative regret per sweep point (mean and standard error over runs)", table,
                         "{:,.2f}"))
    else:
        sections.append(("Final cumulative regret (mean ± standard error over runs)", _regret_table(ds), "{}"))
        sections.append(("Exposure share per arm at T vs merit share pi*", io.exposure_table(ds), "{:.3f}"))
    policies = study.get("policies", cfg.get("policies", {}))
    pol_table = pd.DataFrame({"constructor": [v.get("name", "") for v in policies.values()],
                              "parameters": [json.dumps({k: x for k, x in v.items() if k != "name"})
                                             for v in policies.values()]},
                             index=pd.Index(list(policies), name="policy"))
    sections.append(("Policies (of the first sweep point)" if keys else "Policies", pol_table, "{}"))

    md = [f"# {title}", ""]
    md += [f"- **{k}**: {v}" for k, v in meta]
    for heading, df, fmt in sections:
        md += ["", f"## {heading}", "", _md_table(df, fmt)]
    md += ["", "## Figures", ""]
    md += [f"![{p.stem}]({p.name})" for p in figures]
    body = [f"<h1>{html.escape(title)}</h1>", "<ul>"]
    body += [f"<li><b>{html.escape(k)}</b>: {html.escape(str(v))}</li>" for k, v in meta]
    body.append("</ul>")
    for heading, df, fmt in sections:
        shown = df.copy()
        for col in shown.columns:
            if shown[col].dtype.kind == "f":
                shown[col] = [fmt.format(v) if v == v else "" for v in shown[col]]
        body += [f"<h2>{html.escape(heading)}</h2>", shown.to_html(border=0, escape=True)]
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
    return md_path, html_path
