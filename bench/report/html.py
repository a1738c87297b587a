"""The HTML report: RESULTS/index.html, one file that opens offline in any browser.

Input: the summary just written (RESULTS/summary.md and the markdown files it links to inside
RESULTS), its PNGs, and the records' points (bench.report.export). Output: index.html with
the summary's sections as HTML (the PNGs embedded as data URIs), filters (scenario, server,
machine, load model) over the sections' table rows, the interactive charts and the table of
points, and per scenario and load model an interactive chart (plotly) whose hover shows each
point's trials and 95 % interval. plotly.js is embedded once, inline: no network needed.
"""

from __future__ import annotations

import base64
import html
import os
import re
import tempfile
from collections import defaultdict
from pathlib import Path

from bench.report.plots import MAX_SERIES, PALETTE, is_baseline

MD_LINK = re.compile(r"\]\((?!https?:)([^)#\s]+\.md)(#[^)\s]*)?\)")
IMG_SRC = re.compile(r'<img alt="([^"]*)" src="([^"]+\.png)"')
FILTERS = (("scenario", "scenario"), ("server", "server"), ("machine", "machine"))
FILTERS += (("load_model", "load model"),)

STYLE = """
body{font-family:system-ui,sans-serif;margin:0 auto;max-width:1400px;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:0.85em;margin:0.5em 0}
td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}
th{background:#f3f3f3}
img{max-width:100%}
#filters{position:sticky;top:0;background:#fff;border-bottom:1px solid #ccc;padding:0.5em 0;
  z-index:9}
#filters label{margin-right:1em}
.hidden{display:none}
"""


def _file_id(name: str) -> str:
    return "file-" + re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")


def _embed_images(body: str, base: Path) -> str:
    """<img src="plots/x.png"> -> a data URI (the file works alone); missing files stay."""

    def embed(match: re.Match) -> str:
        path = base / match.group(2)
        if not path.is_file():
            return match.group(0)
        data = base64.b64encode(path.read_bytes()).decode()
        return f'<img alt="{match.group(1)}" src="data:image/png;base64,{data}"'

    return IMG_SRC.sub(embed, body)


def _sections_html(text: str, base: Path, scenarios: set[str]) -> str:
    """Markdown -> HTML, each `## ` section in a <section> tagged with its scenario (when its
    heading starts with one) and load model (open loop sections), for the filters."""
    import markdown

    parts = re.split(r"(?m)^(?=## )", text)
    out = []
    for part in parts:
        heading = (
            part.split("\n", 1)[0].removeprefix("## ").strip() if part.startswith("## ") else ""
        )
        first = heading.split(" ", 1)[0] if heading else ""
        scenario = first if first in scenarios else ""
        load = "open" if heading.lower().startswith("open loop") else ""
        body = markdown.markdown(
            MD_LINK.sub(lambda m: f"](#{_file_id(m.group(1))})", part),
            extensions=["tables", "md_in_html"],
        )
        out.append(
            f'<section data-scenario="{html.escape(scenario)}" data-load_model="{load}">'
            f"{_embed_images(body, base)}</section>"
        )
    return "\n".join(out)


def linked_files(results: Path, text: str) -> list[Path]:
    """The markdown files summary.md links to inside RESULTS, in link order."""
    found = []
    for match in MD_LINK.finditer(text):
        path = (results / match.group(1)).resolve()
        if path.is_file() and path.is_relative_to(results.resolve()) and path not in found:
            found.append(path)
    return found


def _hover(row: dict) -> str:
    """Hover text of a point: configuration, estimates with intervals, every trial."""

    def interval(name: str, unit: str) -> str:
        value, low, high = row[name], row[f"{name}_low"], row[f"{name}_high"]
        if value is None:
            return f"{unit}: –"
        spread = f" [{low:,.4g}–{high:,.4g}] 95 % CI" if low is not None else " (no interval)"
        trials = "; ".join(f"{v:,.4g}" for v in row[f"{name}_trials"])
        return f"{unit}: {value:,.4g}{spread}<br>  trials: {trials}"

    load = (f"{row['offered_rps']:,.0f} req/s offered, " if row["offered_rps"] else "") + (
        f"{row['concurrency']} connections ({row['load_tool']})"
    )
    return (
        f"<b>{row['server']} {row['knobs']}</b> via {row['via']} on {row['machine']}<br>{load}"
        f"<br>{row['trials']} trial(s)<br>{interval('rps', 'req/s')}<br>"
        f"{interval('p99_ms', 'p99 ms')}"
    )


# What a load model's chart draws against its load: closed loop, req/s against connections;
# open loop, p99 against the offered rate (achieved req/s there is the offered rate itself up
# to the knee: the line y = x, which says nothing). (points column, axis title, log axis)
CHART_METRIC = {
    "closed": ("rps", "requests/s", False),
    "open": ("p99_ms", "p99 ms (log scale)", True),
}


def _traces(rows: list[dict], metric: str = "rps") -> list[dict]:
    """One trace per configuration and session: `metric` (a points column: rps, p99_ms)
    against the load, error bars = its 95 % interval where the point has one. A line never
    joins two sessions' points (c10 of a fast boot and c50 of a slow one read as a 3× fall)."""
    by_config: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        key = (row["server"], row["knobs"], row["via"], row["machine"], row["session"])
        by_config[key].append(row)
    sessions = {key[4] for key in by_config}
    best = {key: max((r["rps"] or 0) for r in group) for key, group in by_config.items()}
    order = sorted(by_config, key=lambda key: (is_baseline(key[0]), -best[key], key))
    traces = []
    for index, key in enumerate(order):
        group = sorted(by_config[key], key=lambda r: r["offered_rps"] or r["concurrency"])
        xs = [r["offered_rps"] or r["concurrency"] for r in group]
        ys = [r[metric] for r in group]
        low, high = f"{metric}_low", f"{metric}_high"
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "x": xs,
                "y": ys,
                "name": " ".join(k for k in key[:3] if k and k != "direct")
                + f" [{key[3]}"
                + (f" · {key[4]}]" if len(sessions) > 1 else "]"),
                "error_y": {
                    "type": "data",
                    "symmetric": False,
                    "array": [(r[high] - r[metric]) if r[high] else 0 for r in group],
                    "arrayminus": [(r[metric] - r[low]) if r[low] else 0 for r in group],
                },
                "hovertext": [_hover(r) for r in group],
                "hoverinfo": "text",
                "line": {"dash": "dash", "color": "#777777"}
                if is_baseline(key[0])
                else {"color": PALETTE[index % len(PALETTE)]},
                # Beyond the leading configurations a trace starts hidden (one click in the
                # legend shows it): at most MAX_SERIES drawn at once, as in the PNGs.
                "visible": True if is_baseline(key[0]) or index < MAX_SERIES else "legendonly",
                "meta": {
                    "scenario": group[0]["scenario"],
                    "server": key[0],
                    "machine": key[3],
                    "load_model": group[0]["load_model"],
                },
            }
        )
    return traces


def charts_html(rows: list[dict]) -> str:
    """Per scenario and load model of the catalog runs, an interactive chart: req/s against
    connections (closed loop), p99 against the offered rate (open loop)."""
    import plotly.graph_objects as go

    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        metric = CHART_METRIC[row["load_model"]][0]
        if row["kind"] == "catalog" and not row["emulated"] and row[metric] is not None:
            groups[(row["scenario"], row["load_model"])].append(row)
    out = []
    for index, ((scenario, model), members) in enumerate(sorted(groups.items())):
        x_title = "offered requests/s" if model == "open" else "concurrency (connections)"
        metric, y_title, log = CHART_METRIC[model]
        fig = go.Figure(data=_traces(members, metric))
        what = y_title.removesuffix(" (log scale)")
        fig.update_layout(
            title=f"{scenario}, {model} loop: {what} (geometric mean, error bars: 95 % CI)",
            xaxis={"title": x_title, "type": "log"},
            yaxis={"title": y_title, "type": "log"}
            if log
            else {"title": y_title, "rangemode": "tozero"},
            height=480,
            margin={"t": 50},
            legend={"font": {"size": 10}},
        )
        body = fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"chart-{index}")
        out.append(
            f'<div class="chart" data-scenario="{html.escape(scenario)}" '
            f'data-load_model="{model}">{body}</div>'
        )
    return "\n".join(out)


POINT_COLUMNS = ("scenario", "server", "knobs", "via", "load_model", "concurrency", "offered_rps")
POINT_COLUMNS += ("machine", "kind", "trials", "rps", "rps_low", "rps_high", "p99_ms", "failed")


def points_table(rows: list[dict]) -> str:
    """Every point (the rows of `make export`), each row tagged for the filters."""
    head = "".join(f"<th>{c}</th>" for c in POINT_COLUMNS)
    body = []
    for row in rows:
        tags = " ".join(f'data-{k}="{html.escape(str(row[k]))}"' for k, _ in FILTERS)
        cells = "".join(
            f"<td>{'' if row[c] is None else html.escape(str(row[c]))}</td>" for c in POINT_COLUMNS
        )
        body.append(f'<tr class="point" {tags}>{cells}</tr>')
    return f'<table id="points"><tr>{head}</tr>{"".join(body)}</table>'


def _filters(rows: list[dict]) -> str:
    selects = []
    for key, label in FILTERS:
        values = sorted({str(r[key]) for r in rows if r["kind"] == "catalog"} or set())
        options = "".join(
            f'<option value="{html.escape(v)}">{html.escape(v)}</option>' for v in values
        )
        selects.append(
            f'<label>{label} <select id="filter-{key}" data-key="{key}">'
            f'<option value="">all</option>{options}</select></label>'
        )
    return '<div id="filters">' + "".join(selects) + '<span id="shown-count"></span></div>'


SCRIPT = Path(__file__).with_name("html_filters.js")


def render_html(title: str, sections: str, rows: list[dict], details: str = "") -> str:
    """The whole page: plotly.js inline, filters, the summary's sections (the answer first),
    the charts, the detail files the summary links, the points."""
    from plotly.offline import get_plotlyjs

    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{html.escape(title)}</title><style>{STYLE}</style>",
            # plotly.js once for every chart (include_plotlyjs=True per chart would repeat it)
            f"<script>{get_plotlyjs()}</script></head><body>",
            _filters(rows),
            f'<div id="points-data" data-count="{len(rows)}"></div>',
            sections,
            '<h2 id="explore">Explore: requests/s by load (hover: trials and interval)</h2>',
            charts_html(rows),
            details,
            f"<h2>All points ({len(rows)}, the rows of <code>make export</code>)</h2>",
            "<details><summary>show the table</summary>" + points_table(rows) + "</details>",
            f"<script>{SCRIPT.read_text()}</script>",
            "</body></html>",
        ]
    )


def write_html(results: Path, rows: list[dict]) -> Path:
    """RESULTS/index.html from summary.md (and the files it links) and the points."""
    summary = results / "summary.md"
    text = summary.read_text()
    scenarios = {str(r["scenario"]) for r in rows}
    parts = []
    for path in linked_files(results, text):
        name = str(path.relative_to(results.resolve()))
        parts.append(f'<article id="{_file_id(name)}">')
        parts.append(_sections_html(path.read_text(), path.parent, scenarios) + "</article>")
    sections = _sections_html(text, results, scenarios)
    page = render_html("Benchmark summary", sections, rows, "\n".join(parts))
    target = results / "index.html"
    fd, tmp = tempfile.mkstemp(dir=results, prefix=".tmp-", suffix=".html")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(page)
        os.chmod(tmp, 0o644)  # a results file is for reading
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise
    return target
