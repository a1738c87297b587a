"""The summary's open-loop sections: runs at fixed arrival rates (LOAD=oha) per scenario,
each server's capacity at a latency objective (make capacity), and the knee plots.

Input: every record and the results directory (per-request latencies are merged exactly over
trials from the per-request files their load tool kept beside the records, bench.load;
records copied without them fall back to medians of trials, marked ~). Output: markdown lines
and the knee plots RESULTS/plots/knee-<scenario>-<objective>.png.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from bench.core.outcome import Outcome
from bench.core.parse import ParseError
from bench.core.record import Record
from bench.load import latency_summary_ms, per_request_files, read_per_request_ms
from bench.report.cells import host_of, knobs_label, machine, median, num, section_value, via_label
from bench.report.groups import is_experiment
from bench.report.plots import plot_knee
from bench.report.stats import quantile_interval
from bench.report.table import markdown_table

LATENCY_NOTE = (
    "Latency here is measured by oha from each request's intended send time (`-q` with "
    "`--latency-correction`): time a request waited because the server stalled counts, as it "
    "would for a user. (wrk's percentiles in the closed-loop tables are its own post-hoc "
    "estimate, `stats_correct`, over the requests it did send.)"
)
RATE_HEADER = [
    "server",
    "knobs",
    "via",
    "offered req/s",
    "achieved req/s",
    "p50 ms",
    "p90 ms",
    "p99 ms [95 % CI]",
    "p99.9 ms",
    "max ms",
    "failed",
    "unsent",
    "server CPU %",
    "oha CPU %",
    "trials",
    "machine",
]
CAPACITY_HEADER = [
    "server",
    "knobs",
    "capacity req/s",
    "errors from req/s",
    "p99 ms at 50 %",
    "p99 ms at 80 %",
    "at 120 %: achieved, p99 ms, failed, overflows",
    "at 150 %: achieved, p99 ms, failed, overflows",
    "steps",
    "machine",
]
PROFILE_FACTORS = {"50": 0.5, "80": 0.8}
PAST_NOTE = (
    "◇: this rate past the capacity met the objective: near the knee a step's p99 varies "
    "from one 5 s step to the next on this machine, and the capacity found is a lower bound. "
    "Longer steps (DURATION) or a looser objective make it steadier."
)


def failed_requests(rec: Record) -> int:
    """Requests without a 2xx answer, arrivals never sent included (bench.core.outcome)."""
    return Outcome.of_record(rec).failed


def is_open_loop(rec: Record) -> bool:
    """A run at a fixed offered rate."""
    return rec.offered_rps is not None


def _per_request(results: Path, group: list[Record]) -> list[float] | None:
    """Every request's latency over the group's trials (None without the files)."""
    files = [
        results / name for rec in group for name in per_request_files(rec.load_tool, rec.raw_files)
    ]
    if len(files) != len(group) or not all(f.exists() for f in files):
        return None
    try:
        return [v for f in files for v in read_per_request_ms(f)]
    except ParseError:
        return None


def _latency_cells(results: Path, group: list[Record]) -> list[str]:
    samples = _per_request(results, group)
    if samples is not None:
        merged = latency_summary_ms(samples)
        cells = [num(merged[k], 2) for k in ("p50", "p90", "p99", "p999", "max")]
        interval = quantile_interval(samples, 0.99)
        if interval is not None:  # p99 with its distribution-free 95 % interval
            cells[2] += f" [{num(interval[1], 2)}–{num(interval[2], 2)}]"
        return cells
    # Without the per-request files: medians of the trials' figures, marked as such.
    return [
        "~" + num(median([(r.latency_ms or {}).get(k) for r in group]), 2)
        for k in ("p50", "p90", "p99", "p999", "max")
    ]


def _rate_row(results: Path, group: list[Record]) -> list[str]:
    first = group[0]
    return [
        first.server,
        knobs_label(first.knobs or {}),
        via_label(first),
        num(first.offered_rps),
        num(median([r.achieved_rps for r in group])),
        *_latency_cells(results, group),
        num(sum(failed_requests(r) for r in group)),
        num(sum(int((r.errors or {}).get("unsent") or 0) for r in group)),
        num(median([section_value(r, "resources", "server_cpu_pct") for r in group])),
        num(median([section_value(r, "resources", "load_cpu_pct") for r in group])),
        str(len(group)),
        machine(first),
    ]


def rate_section(scenario: str, records: list[Record], results: Path) -> list[str]:
    """Fixed-rate runs of one scenario (not capacity steps): a row per configuration and
    offered rate, latencies over every trial's requests."""
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for rec in records:
        if rec.status == "ok":
            key = (rec.server, tuple(sorted((rec.knobs or {}).items())), via_label(rec))
            groups[(*key, rec.offered_rps, rec.concurrency, host_of(rec))].append(rec)
    if not groups:
        return []
    rows = [_rate_row(results, groups[key]) for key in sorted(groups, key=str)]
    path = records[0].path
    return [
        f"### {scenario} (`{path}`) at fixed rates",
        "",
        *markdown_table(RATE_HEADER, rows, "lllrrrrrrrrrrrrl"),
        "",
    ]


def _step_cells(steps: list[Record], phase: str, factor: float, found: float) -> str:
    target = round(found * factor)
    match = [s for s in steps if s.metadata["capacity"]["phase"] == phase and s.offered_rps]
    match = [s for s in match if abs((s.offered_rps or 0) - target) <= 1]
    if not match:
        return "–"
    rec = match[-1]
    p99 = (rec.latency_ms or {}).get("p99")
    overflows = section_value(rec, "sockets", "listen_overflows")
    cell = f"{num(rec.achieved_rps)}, {num(p99, 1)}, {num(failed_requests(rec))}, {num(overflows)}"
    # A rate past capacity that meets the objective: the knee is noisy here (short steps on
    # shared CPUs), the capacity a lower bound.
    return cell + (" ◇" if rec.metadata["capacity"].get("passed") else "")


def _capacity_row(steps: list[Record]) -> list[str]:
    first = steps[0]
    found = capacity_found(steps)
    erring = [s.offered_rps for s in steps if s.status == "ok" and failed_requests(s) > 0]
    profile = []
    for factor in PROFILE_FACTORS.values():
        match = [
            s
            for s in steps
            if found
            and s.metadata["capacity"]["phase"] == "profile"
            and abs((s.offered_rps or 0) - round(found * factor)) <= 1
        ]
        profile.append(num((match[-1].latency_ms or {}).get("p99"), 1) if match else "–")
    passed = [s.offered_rps for s in steps if s.metadata["capacity"].get("passed")]
    capacity_cell = num(found) if found else f"not confirmed (≥ {num(max(passed, default=0))})"
    return [
        first.server,
        knobs_label(first.knobs or {}),
        capacity_cell,
        num(min(erring)) if erring else "none seen",
        *profile,
        _step_cells(steps, "past", 1.2, found) if found else "–",
        _step_cells(steps, "past", 1.5, found) if found else "–",
        str(len(steps)),
        machine(first),
    ]


def searches(records: list[Record]) -> dict[tuple, dict[str, list[Record]]]:
    """Capacity steps per (objective p99 ms, scenario), then per search."""
    found: dict[tuple, dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        capacity = rec.metadata.get("capacity")
        if capacity and not rec.emulated and "study" not in rec.metadata:
            key = (capacity["objective"]["p99_ms"], rec.scenario)
            found[key][capacity["search"]].append(rec)
    return found


def capacity_found(steps: list[Record]) -> float | None:
    """The capacity a search confirmed, or None."""
    results = [s.metadata["capacity"].get("result_rps") for s in steps]
    return next((r for r in results if r is not None), None)


def capacity_sections(records: list[Record], results: Path, plots: dict[str, str]) -> list[str]:
    """Per objective and scenario: each server's capacity, below and past it, and the knee."""
    lines: list[str] = []
    for (p99_ms, scenario), by_search in sorted(searches(records).items()):
        steps = [
            sorted(s, key=lambda r: r.metadata["capacity"]["step"]) for s in by_search.values()
        ]
        rows = sorted((_capacity_row(s) for s in steps), key=lambda row: (row[-1], row[0]))
        lines += [f"### Capacity at p99 ≤ {p99_ms:g} ms: {scenario} (`{steps[0][0].path}`)", ""]
        plot = plots.get(f"knee-{scenario}-{p99_ms:g}")
        if plot:
            lines += [f"![{scenario}: p99 against offered rate]({plot})", ""]
        lines += [*markdown_table(CAPACITY_HEADER, rows, "llrrrrllrl"), ""]
        if any("◇" in cell for row in rows for cell in row):
            lines += [PAST_NOTE, ""]
    return lines


def knee_series(records: list[Record]) -> dict[tuple[str, float], dict[str, list[tuple]]]:
    """Per (scenario, objective): per server, (offered, p99) of every capacity step."""
    series: dict[tuple[str, float], dict[str, list[tuple]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        capacity = rec.metadata.get("capacity")
        if capacity and rec.status == "ok" and rec.offered_rps:
            label = f"{rec.server} {knobs_label(rec.knobs or {})} [{host_of(rec)}]"
            p99 = (rec.latency_ms or {}).get("p99")
            key = (rec.scenario, float(capacity["objective"]["p99_ms"]))
            series[key][label].append((rec.offered_rps, p99))
    return {key: dict(lines) for key, lines in series.items()}


def write_knee_plots(results: Path, records: list[Record]) -> dict[str, str]:
    """A knee plot per scenario and objective; key -> path relative to results."""
    written = {}
    for (scenario, p99_ms), lines in sorted(knee_series(records).items()):
        name = f"knee-{scenario}-{p99_ms:g}"
        path = results / "plots" / f"{name}.png"
        plot_knee(scenario, p99_ms, lines, path)
        written[name] = str(path.relative_to(results))
    return written


def open_loop_sections(records: list[Record], results: Path) -> list[str]:
    """Everything open-loop in the summary, or nothing when no run was."""
    # Studies render their own open-loop arms (bench.studies.study).
    # Reloads, recycling, quotas and soaks have their own sections (bench.report.production).
    open_records = [
        r
        for r in records
        if is_open_loop(r) and not r.emulated and "study" not in r.metadata and not is_experiment(r)
    ]
    if not open_records:
        return []
    lines = ["## Open loop: fixed arrival rates (oha)", "", LATENCY_NOTE, ""]
    plots = write_knee_plots(results, open_records)
    lines += capacity_sections(open_records, results, plots)
    by_scenario: dict[str, list[Record]] = defaultdict(list)
    for rec in open_records:
        if "capacity" not in rec.metadata:
            by_scenario[rec.scenario].append(rec)
    for scenario in sorted(by_scenario):
        lines += rate_section(scenario, by_scenario[scenario], results)
    failed = [r for r in open_records if r.status == "failed"]
    if failed:
        lines += ["Open-loop runs that failed:", ""]
        lines += [
            f"- {r.server} {r.scenario} at {num(r.offered_rps)} req/s: {r.reason}" for r in failed
        ]
        lines.append("")
    return lines
