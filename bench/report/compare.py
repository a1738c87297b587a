"""Two result sets side by side (benchstat's old/new): `make compare BASE=… HEAD=…` and the
summary's "Compare arches".

Input: the records of a BASE and a HEAD set. Output: per point present in both (same
scenario, configuration, load; any machine) the two figures, the ratio HEAD/BASE with its
interval and whether it is significant, Holm-corrected over the table (bench.report.stats);
the points only one set has; the machines of each side.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from bench.core import defaults, speedclass
from bench.core.record import Record, analysed, session_of
from bench.report.cells import figure, host_of, knobs_label, num, session_label, via_label
from bench.report.groups import latency_values, point_key, rps_values, trial_count
from bench.report.stats import Difference, correct, difference, estimate
from bench.report.table import markdown_table

SIGNIFICANT = "*"
NOT_SIGNIFICANT = "~"
UNTESTABLE = "?"
MARKS_NOTE = (
    f"`{SIGNIFICANT}`: significant after Holm's correction over every point of the table "
    f"(Welch's t-test on log values, adjusted p < 0.05), and the ratio's interval, at the level "
    f"Holm tested it at, excludes 1.00×; `{NOT_SIGNIFICANT}`: not significant, the two may "
    "well be equal; "
    f"`{UNTESTABLE}`: fewer than 2 trials on a side, or identical trials on both (no spread: "
    "rounded figures), no test possible. For req/s above "
    "1.00× means HEAD is faster; for p99 above 1.00× means HEAD is slower."
)


class CompareError(ValueError):
    """Two sets that cannot be compared (no records, nothing in common)."""


@dataclass(frozen=True)
class Row:
    base: list[Record]
    head: list[Record]
    rps: Difference
    p99: Difference


@dataclass(frozen=True)
class Comparison:
    rows: list[Row]
    only_base: list[list[Record]]
    only_head: list[list[Record]]


def _points(records: list[Record]) -> dict[tuple, list[Record]]:
    """Native analysed runs per point (emulated ones are a functional check, never in a
    ratio), of one session each: where a set measured a point in several sessions, the
    latest session's trials (two sessions' trials are never pooled)."""
    by_session: dict[tuple, dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        if analysed(rec) and not rec.emulated:
            by_session[point_key(rec)][session_of(rec)].append(rec)
    return {key: max(sessions.values(), key=_latest) for key, sessions in by_session.items()}


def _latest(group: list[Record]) -> str:
    return max(str(r.metadata.get("started_at", "")) for r in group)


def sessions_text(records: list[Record]) -> str:
    """The sessions of a set, oldest first: `session 1a2b3c (from 2026-11-24T01:02:23Z)`."""
    first: dict[str, tuple[str, Record]] = {}
    for rec in records:
        started = str(rec.metadata.get("started_at", ""))
        key = session_of(rec)
        if key not in first or started < first[key][0]:
            first[key] = (started, rec)
    ordered = sorted(first.values(), key=lambda item: item[0])
    return ", ".join(f"{session_label(rec)} (from {started or '?'})" for started, rec in ordered)


def _order(group: list[Record]) -> tuple:
    first = group[0]
    return (
        str(first.metadata.get("study") or ""),
        first.scenario,
        first.offered_rps or 0.0,
        first.concurrency,
        first.server,
        str(point_key(first)),
    )


def compare(base: list[Record], head: list[Record]) -> Comparison:
    """Every point of both sets: paired where both measured it, listed apart otherwise."""
    base_points, head_points = _points(base), _points(head)
    common = [key for key in base_points if key in head_points]
    # one family per metric: every point of the comparison, Holm-corrected
    rps = correct(
        [difference(rps_values(base_points[k]), rps_values(head_points[k])) for k in common]
    )
    p99 = correct(
        [difference(latency_values(base_points[k]), latency_values(head_points[k])) for k in common]
    )
    rows = [
        Row(base_points[k], head_points[k], r, p) for k, r, p in zip(common, rps, p99, strict=True)
    ]
    rows.sort(key=lambda row: _order(row.base))
    only_base = sorted((g for k, g in base_points.items() if k not in head_points), key=_order)
    only_head = sorted((g for k, g in head_points.items() if k not in base_points), key=_order)
    return Comparison(rows, only_base, only_head)


def mark(diff: Difference) -> str:
    if not diff.testable:
        return UNTESTABLE
    return SIGNIFICANT if diff.significant else NOT_SIGNIFICANT


def ratio_cell(diff: Difference) -> str:
    """`1.12× [1.05–1.19] *`."""
    if diff.ratio is None:
        return "–"
    if diff.low is None or diff.high is None:
        return f"{diff.ratio:.2f}× {mark(diff)}"
    return f"{diff.ratio:.2f}× [{diff.low:.2f}–{diff.high:.2f}] {mark(diff)}"


def _figure(values: list[float], digits: int) -> str:
    est = estimate(values)
    return num(est.center, digits) if est else "–"


def _machines(group: list[Record]) -> str:
    return ", ".join(sorted({f"{host_of(r)} ({r.arch})" for r in group}))


def _load_cell(rec: Record) -> str:
    if rec.offered_rps is not None:
        return f"{num(rec.offered_rps)}/s"
    return f"c{rec.concurrency}"


def _point_cells(rec: Record) -> list[str]:
    study = rec.metadata.get("study")
    where = f"{study}/{rec.metadata.get('study_arm')}" if study else rec.scenario
    return [where, rec.server, knobs_label(rec.knobs or {}), via_label(rec), _load_cell(rec)]


HEADER = ["scenario", "server", "knobs", "via", "load"]


def rows_table(comparison: Comparison, base_name: str, head_name: str) -> list[str]:
    """The paired points: figures side by side, ratios with intervals and marks."""
    header = [
        *HEADER,
        f"{base_name} req/s",
        f"{head_name} req/s",
        f"req/s {head_name}/{base_name}",
        f"{base_name} p99 ms",
        f"{head_name} p99 ms",
        f"p99 {head_name}/{base_name}",
        "trials",
    ]
    rows = [
        [
            *_point_cells(row.base[0]),
            _figure(rps_values(row.base), 0),
            _figure(rps_values(row.head), 0),
            ratio_cell(row.rps),
            _figure(latency_values(row.base), 2),
            _figure(latency_values(row.head), 2),
            ratio_cell(row.p99),
            f"{len(row.base)} / {len(row.head)}",
        ]
        for row in comparison.rows
    ]
    return markdown_table(header, rows, "lllllrrrrrrr")


def _only_lines(groups: list[list[Record]], name: str) -> list[str]:
    if not groups:
        return []
    rows = [[*_point_cells(g[0]), str(trial_count(g))] for g in groups]
    return [
        f"Only in {name} ({len(groups)} points):",
        "",
        *markdown_table([*HEADER, "trials"], rows, "lllllr"),
        "",
    ]


def summary_counts(comparison: Comparison) -> str:
    """`12 points in both: 3 faster, 1 slower, 8 not significantly different (req/s)`."""
    faster = sum(1 for r in comparison.rows if r.rps.significant and (r.rps.ratio or 0) > 1)
    slower = sum(1 for r in comparison.rows if r.rps.significant and (r.rps.ratio or 0) < 1)
    untestable = sum(1 for r in comparison.rows if not r.rps.testable)
    same = len(comparison.rows) - faster - slower - untestable
    text = (
        f"{len(comparison.rows)} points in both: req/s significantly higher in {faster}, "
        f"lower in {slower}, not significantly different in {same}"
    )
    return text + (f", untestable (1 trial or no spread) in {untestable}" if untestable else "")


def _probe(groups: list[list[Record]]) -> float | None:
    """The median host speed probe of the sessions these points were measured in; None when
    one of them predates the probe."""
    probes = [speedclass.probe_of(g[0].metadata) for g in groups]
    if not probes or any(p is None for p in probes):
        return None
    return statistics.median(p for p in probes if p is not None)


def speed_line(comparison: Comparison, tolerance: float = defaults.SPEED_TOLERANCE) -> str:
    """How fast HEAD's host ran against BASE's (their host speed probes, bench.host.speed):
    beyond the probe's noise, the ratios mix host speed with the change, and the line says so."""
    base = _probe([row.base for row in comparison.rows])
    head = _probe([row.head for row in comparison.rows])
    if base is None or head is None:
        side = "BASE" if base is None else "HEAD"
        return (
            f"Host speed: not probed on {side} (records before format 17): the ratios may mix "
            "a change of host speed with the change compared."
        )
    ratio = head / base
    probes = f"probe {figure(head)} vs {figure(base)} ops/s"
    if abs(ratio - 1) <= tolerance:
        return (
            f"Host speed: HEAD's host ran at {ratio:.2f}× BASE's ({probes}), within the probe's "
            f"noise (±{tolerance:.0%}): one speed class."
        )
    return (
        f"Host speed: HEAD's host ran at {ratio:.2f}× BASE's ({probes}): two speed classes; "
        "these ratios mix the host's speed with the change compared (a req/s ratio near "
        f"{ratio:.2f}× is the host, not the change)."
    )


def render(base: list[Record], head: list[Record], base_dir: str, head_dir: str) -> list[str]:
    """`make compare`'s report (markdown). Raises CompareError on sets it cannot compare."""
    if not base:
        raise CompareError(f"BASE={base_dir!r} holds no records")
    if not head:
        raise CompareError(f"HEAD={head_dir!r} holds no records")
    comparison = compare(base, head)
    if not comparison.rows:
        raise CompareError(
            f"BASE={base_dir!r} and HEAD={head_dir!r} have no point in common "
            "(same scenario, server, knobs, via and load)"
        )
    base_ok = [r for r in base if analysed(r) and not r.emulated]
    head_ok = [r for r in head if analysed(r) and not r.emulated]
    return [
        f"# Compare: HEAD `{head_dir}` against BASE `{base_dir}`",
        "",
        f"- BASE machines: {_machines(base_ok)}; sessions: {sessions_text(base_ok)}",
        f"- HEAD machines: {_machines(head_ok)}; sessions: {sessions_text(head_ok)}",
        "- A point a set measured in several sessions is compared on its latest session's "
        "trials (two sessions' trials are never pooled).",
        f"- {summary_counts(comparison)}.",
        f"- {speed_line(comparison)}",
        "",
        "Figures are geometric means over trials. " + MARKS_NOTE,
        "",
        *rows_table(comparison, "BASE", "HEAD"),
        "",
        *_only_lines(comparison.only_base, "BASE"),
        *_only_lines(comparison.only_head, "HEAD"),
    ]
