"""The WebSocket section: SCENARIO=websocket (echo) and websocket-push, per server.

Input: records (those with a `websocket` figure set, format 13, and the unsupported ones of a
WebSocket scenario). Output: markdown lines: per scenario and configuration, at each
connection count, the connections held, messages/s offered and achieved, p99 from the
intended send time, lost or wrong messages, the generator's share of its own ceiling; the
server's memory per 1,000 connections (the slope of its RSS against the connections held
over every run of the configuration, scipy.stats.linregress, with its 95 % interval); and the
servers that do not carry WebSockets, with their reason. `summary_lines` is the summary's
short version.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from scipy import stats

from bench.core.record import Record, analysed
from bench.core.scenario import SCENARIOS
from bench.report.table import markdown_table

HEADER = [
    "server",
    "connections",
    "held",
    "msg/s offered",
    "msg/s achieved",
    "p99 ms",
    "lost / wrong",
    "of generator ceiling",
    "RSS MB",
]
MEMORY_HEADER = ["scenario", "server", "runs", "connections held", "MB per 1,000 connections"]


def _carried(rec: Record) -> bool:
    scenario = SCENARIOS.get(rec.scenario)
    return scenario is not None and scenario.protocol is not None


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _num(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _row(server: str, connections: int, group: list[Record]) -> list[str]:
    figures = [r.websocket or {} for r in group]
    p99 = [r.latency_ms["p99"] for r in group if r.latency_ms and r.latency_ms.get("p99")]
    bad = sum(int((r.errors or {}).get(k) or 0) for r in group for k in ("timeout", "non_2xx"))
    shares = [
        f["messages_per_s"] / f["load_ceiling_messages_per_s"]
        for f in figures
        if f.get("load_ceiling_messages_per_s")
    ]
    bound = any(f.get("load_bound") for f in figures)
    share = _median(shares)
    rss = [r.resources["server_rss_mb"] for r in group if (r.resources or {}).get("server_rss_mb")]
    return [
        server,
        str(connections),
        _num(_median([float(f.get("connections_held") or 0) for f in figures])),
        _num(_median([float(f.get("offered_messages_per_s") or 0) for f in figures])),
        _num(_median([float(f.get("messages_per_s") or 0) for f in figures])),
        _num(_median(p99), 2),
        str(bad),
        ("–" if share is None else f"{share:.0%}") + (" load-bound" if bound else ""),
        _num(_median(rss), 1),
    ]


def rss_growth(rec: Record) -> tuple[float, float] | None:
    """(RSS before the load connected, MB the RSS grew per connection held) of one WebSocket
    run: the peak over its window minus the first sample, over the connections held at its
    end. None: no connection held, no first sample (records before it was kept), or no
    growth seen."""
    held = (rec.websocket or {}).get("connections_held")
    resources = rec.resources or {}
    peak, start = resources.get("server_rss_mb"), resources.get("server_rss_start_mb")
    if not held or peak is None or start is None or peak <= start:
        return None
    return float(start), (peak - start) / held


def memory_per_1000(group: list[Record]) -> tuple[float, float, float] | None:
    """The slope of the server's RSS (MB) against connections held, x 1,000, with its 95 %
    interval (t over n − 2 degrees of freedom); None with fewer than two connection counts."""
    points = [
        (float((r.websocket or {}).get("connections_held") or 0), float(rss))
        for r in group
        if (rss := (r.resources or {}).get("server_rss_mb")) is not None
    ]
    if len({held for held, _ in points}) < 2 or len(points) < 3:
        return None
    fit = stats.linregress([p[0] for p in points], [p[1] for p in points])
    half = stats.t.ppf(0.975, len(points) - 2) * fit.stderr
    return fit.slope * 1000, (fit.slope - half) * 1000, (fit.slope + half) * 1000


def unsupported_lines(records: list[Record]) -> list[str]:
    """One line per server that does not carry a WebSocket scenario, with its reason."""
    reasons: dict[str, str] = {}
    for rec in records:
        if rec.status == "unsupported" and _carried(rec):
            reasons.setdefault(rec.server, rec.reason or "unsupported")
    return [f"- {server}: unsupported: {reasons[server]}" for server in sorted(reasons)]


def websocket_sections(records: list[Record]) -> list[str]:
    """The detail file's lines (empty when no WebSocket scenario was asked for)."""
    measured = [r for r in records if analysed(r) and r.websocket is not None]
    unsupported = unsupported_lines(records)
    if not measured and not unsupported:
        return []
    lines = [
        "Messages of the declared size on a fixed schedule per connection (echo: the client "
        "sends, push: the server sends); p99 from each message's intended send time (medians "
        "over trials). `lost / wrong`: echoes that never came back and messages that were not "
        "what was sent, summed. `of generator ceiling`: achieved msg/s against wsload's own "
        "ceiling on this machine; from 80 % the generator, not the server, may be the limit.",
        "",
    ]
    groups: dict[tuple[str, str, int], list[Record]] = defaultdict(list)
    for rec in measured:
        groups[(rec.scenario, rec.server, rec.concurrency)].append(rec)
    for scenario in sorted({key[0] for key in groups}):
        rows = [
            _row(server, connections, group)
            for (name, server, connections), group in sorted(groups.items())
            if name == scenario
        ]
        lines += [f"## {scenario}", "", *markdown_table(HEADER, rows, "lrrrrrrrr"), ""]
    lines += memory_lines(measured)
    if unsupported:
        lines += ["## Servers that do not carry WebSockets", "", *unsupported, ""]
    return lines


def memory_lines(measured: list[Record]) -> list[str]:
    """The memory table: RSS per 1,000 connections held, per scenario and server."""
    by_server: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for rec in measured:
        by_server[(rec.scenario, rec.server)].append(rec)
    rows = []
    for (scenario, server), group in sorted(by_server.items()):
        held = sorted({int((r.websocket or {}).get("connections_held") or 0) for r in group})
        rows.append([scenario, server, str(len(group)), ", ".join(map(str, held)), _memory(group)])
    return [
        "## Memory per 1,000 connections",
        "",
        "The slope of the server's RSS (its process tree, the peak over each window) against "
        "the connections it held, over every run of the configuration, × 1,000, with its 95 % "
        "interval (linear least squares). † One connection count: each run's growth over "
        "its window from the RSS before the load connected, per connection held, × 1,000.",
        "",
        *markdown_table(MEMORY_HEADER, rows, "llrll"),
        "",
    ]


def _memory(group: list[Record]) -> str:
    """The slope over connection counts with its interval; with one count, the median of each
    run's growth from its RSS before connecting (marked †)."""
    fit = memory_per_1000(group)
    if fit is not None:
        return f"{fit[0]:,.1f} [{fit[1]:,.1f}, {fit[2]:,.1f}]"
    grown = [g[1] * 1000 for r in group if (g := rss_growth(r)) is not None]
    if grown:
        return f"{statistics.median(grown):,.1f} † (median of {len(grown)})"
    return "needs runs at two connection counts"


def summary_lines(records: list[Record], link: str) -> list[str]:
    """summary.md's WebSocket paragraph: the servers measured and those that do not carry it."""
    measured = sorted({r.server for r in records if analysed(r) and r.websocket is not None})
    unsupported = sorted({r.server for r in records if r.status == "unsupported" and _carried(r)})
    if not measured and not unsupported:
        return []
    parts = []
    if measured:
        parts.append(f"measured: {', '.join(measured)}")
    if unsupported:
        parts.append(f"unsupported (no WebSocket interface): {', '.join(unsupported)}")
    bound = sum(1 for r in records if analysed(r) and (r.websocket or {}).get("load_bound"))
    if bound:
        parts.append(f"{bound} run(s) near the generator's own ceiling (load-bound)")
    return [f"**WebSocket**: {'; '.join(parts)}. Details: [websocket]({link}).", ""]
