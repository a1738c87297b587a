"""Two result sets side by side (benchstat's old/new): `make compare BASE=… HEAD=…` and the
summary's "Compare arches".

Input: the records of a BASE and a HEAD set. Output: per point present in both (same
scenario, configuration, load; any machine) the two figures, the ratio HEAD/BASE with its
interval and whether it is significant, Holm-corrected over the table (bench.report.stats);
the points only one set has; the machines of each side; with FAIL_BELOW/FAIL_ABOVE, the
regression gate's verdict per point (gate_verdict, the one decision; the CLI turns it into the
exit status).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from bench.core import defaults
from bench.core.record import Record, analysed, session_of, speed_of
from bench.report.cells import figure, host_of, knobs_label, num, session_label, via_label
from bench.report.groups import latency_values, point_key, rps_values, trial_count
from bench.report.stats import ALPHA, Difference, correct, difference, estimate
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


# The regression gate (`make compare FAIL_BELOW=0.97 FAIL_ABOVE=1.10`): one verdict per point
# and metric; any REGRESSED point makes the exit status 1.
REGRESSED = "regressed"
WITHIN = "within"
UNDECIDED = "undecided"


@dataclass(frozen=True)
class Bounds:
    """The gate's bounds on HEAD/BASE: req/s below `fail_below`, p99 above `fail_above`."""

    fail_below: float | None = None
    fail_above: float | None = None

    @property
    def given(self) -> bool:
        """Whether any bound is set (else no gate: exit 0 as before)."""
        return self.fail_below is not None or self.fail_above is not None


@dataclass(frozen=True)
class Verdict:
    """The gate's decision on one point and one metric, with its reason in words."""

    state: str  # REGRESSED, WITHIN or UNDECIDED
    text: str  # "regressed: interval [0.78–0.82] wholly below 0.97"


def _edge(value: float, bound: float) -> str:
    """An interval's end at 2 decimals, 3 where 2 would read as the bound itself."""
    text = f"{value:.2f}"
    return f"{value:.3f}" if text == f"{bound:.2f}" and value != bound else text


def gate_verdict(diff: Difference, bound: float, higher_is_better: bool, trials: int) -> Verdict:
    """Regressed when the HEAD/BASE interval lies wholly on the worse side of `bound` (req/s:
    high < bound; p99: low > bound), within when wholly on the other side, undecided when it
    spans the bound or there is none (`trials` < 2 on a side, no spread): never regressed."""
    if diff.ratio is None or diff.low is None or diff.high is None:
        if trials < 2:
            why = "1 trial on a side, no interval"
        elif diff.ratio is None:
            why = "no figure on a side, no interval"
        else:
            why = "no interval (identical trials on both sides: no spread to test)"
        return Verdict(UNDECIDED, f"{UNDECIDED}: {why}")
    interval = f"interval [{_edge(diff.low, bound)}–{_edge(diff.high, bound)}]"
    if higher_is_better:
        worse, fine = diff.high < bound, diff.low >= bound
        words = ("below", "at or above")
    else:
        worse, fine = diff.low > bound, diff.high <= bound
        words = ("above", "at or below")
    if worse:
        return Verdict(REGRESSED, f"{REGRESSED}: {interval} wholly {words[0]} {bound:g}")
    if fine:
        return Verdict(WITHIN, f"{WITHIN}: {interval} wholly {words[1]} {bound:g}")
    return Verdict(UNDECIDED, f"{UNDECIDED}: {interval} spans {bound:g}")


@dataclass(frozen=True)
class Gate:
    """The gate over a comparison: per paired point its req/s and p99 verdicts (None where
    that bound is not set)."""

    bounds: Bounds
    verdicts: list[tuple[Row, Verdict | None, Verdict | None]]

    @property
    def regressed(self) -> list[Row]:
        """The points regressed on either metric (exit status 1 when any)."""
        return [
            row
            for row, rps, p99 in self.verdicts
            if REGRESSED in (getattr(rps, "state", None), getattr(p99, "state", None))
        ]


def gate(comparison: Comparison, bounds: Bounds) -> Gate:
    """Each paired point judged against the bounds given (points only one set has are not)."""
    verdicts: list[tuple[Row, Verdict | None, Verdict | None]] = []
    for row in comparison.rows:
        trials = min(trial_count(row.base), trial_count(row.head))
        rps = p99 = None
        if bounds.fail_below is not None:
            rps = gate_verdict(row.rps, bounds.fail_below, True, trials)
        if bounds.fail_above is not None:
            p99 = gate_verdict(row.p99, bounds.fail_above, False, trials)
        verdicts.append((row, rps, p99))
    return Gate(bounds, verdicts)


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
    probes = [speed_of(g[0]) for g in groups]
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


def _point_name(rec: Record) -> str:
    """A point in a few words: `db granian w2 c50` (the via when not direct)."""
    return " ".join(c for c in _point_cells(rec) if c and c != "direct")


def _level_text(comparison: Comparison, bounds: Bounds) -> str:
    """At which confidence level the gate's intervals are (Holm's step's), per metric."""
    parts = []
    for name, bound, diffs in (
        ("req/s", bounds.fail_below, [row.rps for row in comparison.rows]),
        ("p99", bounds.fail_above, [row.p99 for row in comparison.rows]),
    ):
        m = max((d.family for d in diffs if d.testable), default=0)
        if bound is None or not m:
            continue
        low, top = (f"{100 * (1 - ALPHA / k):.1f} %".replace(".0 %", " %") for k in (1, m))
        span = f"from {low} to {top}" if m > 1 else low
        parts.append(f"{name}: {span} over {m} tested point{'s' if m > 1 else ''}")
    levels = "; ".join(parts) or "no point has an interval"
    return (
        "Each interval is the one in the table above: at the level Holm's step tested its point "
        f"at ({levels}), widened to reach 1.00× where the step-down stopped, so a point not "
        "significant after Holm is never regressed. A point with no interval (1 trial on a side, "
        "or no spread) is undecided, never regressed; points only one set has are not gated."
    )


def gate_answer(result: Gate) -> str:
    """The gate's answer in one line: regressed (which points) or passed, and the exit status."""
    bad = result.regressed
    if bad:
        names = "; ".join(_point_name(row.base[0]) for row in bad)
        return (
            f"Gate: regressed at {len(bad)} of {len(result.verdicts)} points, exit status 1: "
            f"{names}"
        )
    within = sum(
        1
        for _, rps, p99 in result.verdicts
        if all(v.state == WITHIN for v in (rps, p99) if v is not None)
    )
    return (
        f"Gate: passed, exit status 0: no point regressed ({within} within, "
        f"{len(result.verdicts) - within} undecided)"
    )


def gate_lines(comparison: Comparison, result: Gate) -> list[str]:
    """The gate's section: its bounds, the level of its intervals, a verdict per point."""
    bounds = result.bounds
    header = [*HEADER]
    if bounds.fail_below is not None:
        header.append(f"req/s HEAD/BASE, FAIL_BELOW={bounds.fail_below:g}")
    if bounds.fail_above is not None:
        header.append(f"p99 HEAD/BASE, FAIL_ABOVE={bounds.fail_above:g}")
    rows = [
        [*_point_cells(row.base[0]), *(v.text for v in (rps, p99) if v is not None)]
        for row, rps, p99 in result.verdicts
    ]
    return [
        "Gate, per point:",
        "",
        "Regressed: the HEAD/BASE interval lies wholly below FAIL_BELOW (req/s) or wholly above "
        "FAIL_ABOVE (p99); within: wholly on the other side; undecided: it spans the bound. "
        + _level_text(comparison, bounds),
        "",
        *markdown_table(header, rows, "l" * len(header)),
        "",
    ]


def render(
    base: list[Record], head: list[Record], base_dir: str, head_dir: str, bounds: Bounds = Bounds()
) -> list[str]:
    """`make compare`'s report (markdown). Raises CompareError on sets it cannot compare."""
    return gated(base, head, base_dir, head_dir, bounds)[0]


def gated(
    base: list[Record], head: list[Record], base_dir: str, head_dir: str, bounds: Bounds
) -> tuple[list[str], Gate]:
    """`make compare`'s report and its gate (no verdict where no bound is given). Raises
    CompareError on sets it cannot compare."""
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
    result = gate(comparison, bounds)
    base_ok = [r for r in base if analysed(r) and not r.emulated]
    head_ok = [r for r in head if analysed(r) and not r.emulated]
    lines = [
        f"# Compare: HEAD `{head_dir}` against BASE `{base_dir}`",
        "",
        *([f"- **{gate_answer(result)}** (per point: Gate, below)."] if bounds.given else []),
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
        *(gate_lines(comparison, result) if bounds.given else []),
        *_only_lines(comparison.only_base, "BASE"),
        *_only_lines(comparison.only_head, "HEAD"),
    ]
    return lines, result
