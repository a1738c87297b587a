"""The report: every record under RESULTS -> RESULTS/summary.md.

Input: records (from any number of machines) and the problem lines of files that were not.
Output: markdown, deterministic for the same records (a golden test holds it): machines, then
per scenario a table sorted by median p99 with the spread over trials, then the runs that
failed or are unsupported, with their reasons, then the files that were skipped.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from bench.cells import (
    host_of,
    knobs_label,
    machine,
    median,
    num,
    section_value,
    server_version,
    via_label,
)
from bench.openloop import open_loop_sections
from bench.plots import write_plots
from bench.production import production_sections
from bench.record import Record, load_records
from bench.table import markdown_table

SPREAD_FLAG = 0.10  # a min-max spread over 10 % of the median is flagged
# Below this share of connections with a request in flight (by Little's law), the latency
# figures leave out the connections the server never served: flagged as optimistic.
SERVED_MIN = 0.5
CEILING = "nginx-static"  # the server whose throughput is the ceiling for the others


def _rps_cell(values: list[float]) -> str:
    mid = statistics.median(values)
    if len(values) == 1:
        return num(mid)
    low, high = min(values), max(values)
    flag = " ⚠" if mid and (high - low) / mid > SPREAD_FLAG else ""
    return f"{num(mid)} ({num(low)}–{num(high)}){flag}"


def _socket_errors(rec: Record) -> int:
    errors = rec.errors or {}
    return sum(int(errors.get(k, 0)) for k in ("connect", "read", "write", "timeout"))


def served_share(rec: Record) -> float | None:
    """Share of the connections that had a request in flight on average (Little's law:
    mean latency × throughput = requests in flight). Near 1 when every connection is served;
    low when connections wait unserved, whose requests wrk never times."""
    mean = (rec.latency_ms or {}).get("mean")
    if mean is None or not rec.rps or not rec.concurrency:
        return None
    return min(1.0, mean / 1000 * rec.rps / rec.concurrency)


def _share(group: list[Record], ceiling_rps: float | None) -> str:
    # Throughput as a share of nginx answering the same route on the same machine and
    # concurrency: what this machine and load tool can do at all.
    if not ceiling_rps:
        return "–"
    return f"{statistics.median(r.rps or 0.0 for r in group) / ceiling_rps:.0%}"


def machines_table(records: list[Record]) -> list[str]:
    """One row per machine that produced records."""
    rows = {}
    for rec in records:
        meta = rec.metadata
        key = (meta.get("hostname", "?"), rec.arch, rec.emulated)
        rows[key] = [
            str(meta.get("hostname", "?")),
            rec.arch,
            "yes" if rec.emulated else "no",
            str(meta.get("cpu_model", "?")),
            str(meta.get("cpu_count", "?")),
            str(meta.get("kernel", "?")),
            str(meta.get("python_version", "?")),
        ]
    return markdown_table(
        ["host", "arch", "emulated", "CPU", "CPUs", "kernel", "Python"],
        [rows[k] for k in sorted(rows, key=str)],
        "llllrll",
    )


def load_label(rec: Record) -> str:
    """The load tool, with its worker processes (Locust's) when it had some."""
    if rec.load_workers:
        return f"{rec.load_tool} ×{rec.load_workers}"
    return rec.load_tool


def config_key(rec: Record) -> tuple:
    """What makes two runs comparable as trials of one configuration (not concurrency)."""
    keepalive = rec.keepalive or {}
    return (
        rec.server,
        rec.app,
        tuple(sorted((rec.knobs or {}).items())),
        rec.proxy,
        keepalive.get("client", True),
        keepalive.get("upstream"),
        rec.load_tool,
        rec.load_workers,
    )


def _proxy_count(group: list[Record], status: int) -> str:
    if not any(r.proxy for r in group):
        return "–"
    return num(
        sum(int(((r.errors or {}).get("proxy_by_status") or {}).get(str(status), 0)) for r in group)
    )


def _time_wait(group: list[Record]) -> str:
    total = median([section_value(r, "sockets", "time_wait_max") for r in group])
    upstream = median([section_value(r, "sockets", "time_wait_upstream_max") for r in group])
    if upstream is None:
        return num(total)
    client = median([section_value(r, "sockets", "time_wait_client_max") for r in group])
    return f"{num(total)} ({num(client)} / {num(upstream)})"


def _groups(records: list[Record]) -> dict[tuple, list[Record]]:
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for rec in records:
        if rec.status == "ok":
            key = (
                rec.scenario,
                *config_key(rec),
                rec.concurrency,
                rec.arch,
                rec.emulated,
                host_of(rec),
            )
            groups[key].append(rec)
    return groups


SPEED_HEADER = [
    "server",
    "app",
    "knobs",
    "via",
    "conc.",
    "req/s median (min–max)",
    "p50 ms",
    "p99 ms",
    "p99.9 ms",
    "socket errors",
    "non-2xx",
    "502",
    "504",
    "of ceiling",
    "trials",
    "load",
    "machine",
]
SYSTEM_HEADER = [
    "server",
    "knobs",
    "via",
    "conc.",
    "server CPU %",
    "nginx CPU %",
    "server RSS MB",
    "load CPU %",
    "TIME_WAIT max (client / upstream)",
    "accept queue max",
    "conns served",
    "listen overflows",
    "backlog",
    "pgbouncer conns max",
    "machine",
]


def _latency(group: list[Record], key: str) -> float | None:
    """Median over the group's trials of one latency figure (p50, p99, p999)."""
    return median([r.latency_ms.get(key) if r.latency_ms else None for r in group])


def _ceilings(groups: dict[tuple, list[Record]]) -> dict[tuple[int, str], float]:
    """The ceiling server's median req/s per (concurrency, machine), direct runs only."""
    return {
        (first.concurrency, host_of(first)): statistics.median(r.rps or 0.0 for r in group)
        for group in groups.values()
        if (first := group[0]).server == CEILING and not first.proxy
    }


def _speed_row(
    group: list[Record], p99: float | None, starved: bool, ceiling_rps: float | None
) -> list[str]:
    """One configuration's row of the speed table: throughput, latency, errors."""
    first = group[0]
    return [
        f"{first.server} {server_version(first.metadata)}",
        first.app,
        knobs_label(first.knobs or {}),
        via_label(first),
        str(first.concurrency),
        _rps_cell([r.rps or 0.0 for r in group]),
        num(_latency(group, "p50"), 2),
        num(p99, 2) + (" †" if starved else ""),
        num(_latency(group, "p999"), 2),
        num(sum(_socket_errors(r) for r in group)),
        num(sum(int((r.errors or {}).get("non_2xx", 0)) for r in group)),
        _proxy_count(group, 502),
        _proxy_count(group, 504),
        _share(group, ceiling_rps),
        str(len(group)),
        load_label(first),
        machine(first),
    ]


def _system_row(group: list[Record], served: float | None) -> list[str]:
    """One configuration's row of the system table: CPU, memory, sockets, pools."""
    first = group[0]
    return [
        f"{first.server} {server_version(first.metadata)}",
        knobs_label(first.knobs or {}),
        via_label(first),
        str(first.concurrency),
        num(median([section_value(r, "resources", "server_cpu_pct") for r in group])),
        num(median([section_value(r, "resources", "proxy_cpu_pct") for r in group])),
        num(median([section_value(r, "resources", "server_rss_mb") for r in group])),
        num(median([section_value(r, "resources", "load_cpu_pct") for r in group])),
        _time_wait(group),
        num(median([section_value(r, "sockets", "listen_queue_max") for r in group])),
        f"{served:.0%}" if served is not None else "–",
        num(sum(section_value(r, "sockets", "listen_overflows") or 0 for r in group)),
        num(median([r.backlog for r in group])),
        num(median([section_value(r, "db", "server_conns_max") for r in group])),
        machine(first),
    ]


STARVED_NOTE = (
    f"† Fewer than {SERVED_MIN:.0%} of the connections had a request being timed "
    "(conns served = mean latency × req/s ÷ connections, Little's law): the others "
    "waited unserved through the run, typically unaccepted in the accept queue while "
    "the server kept serving the keep-alive connections it held. wrk only times "
    "requests that complete, so theirs are missing and this latency is optimistic."
)


def _scenario_tables(
    speed_rows: list[list[str]], system_rows: list[list[str]], any_starved: bool
) -> list[str]:
    """The speed and system tables of one scenario, and the † note when a row has it."""
    lines = markdown_table(SPEED_HEADER, speed_rows, "llllrrrrrrrrrrrll")
    lines.append("")
    lines += markdown_table(SYSTEM_HEADER, system_rows, "lllrrrrrrrrrrrl")
    if any_starved:
        lines += ["", STARVED_NOTE]
    return lines


def scenario_section(scenario: str, records: list[Record], plot: str | None = None) -> list[str]:
    """The tables of one scenario: ok runs aggregated over trials, then the failed ones."""
    path = records[0].path
    lines = [f"## {scenario} (`{path}`)", ""]
    if plot:
        lines += [f"![{scenario}: req/s and p99 by concurrency]({plot})", ""]
    groups = _groups(records)
    ceilings = _ceilings(groups)
    rows = []
    for key, group in groups.items():
        first = group[0]
        p99 = _latency(group, "p99")
        served = median([served_share(r) for r in group])
        starved = served is not None and served < SERVED_MIN
        speed = _speed_row(group, p99, starved, ceilings.get((first.concurrency, host_of(first))))
        # One machine's servers together, ranked by p99: rankings never mix machines.
        sort_key = (machine(first), p99 if p99 is not None else float("inf"), str(key))
        rows.append((sort_key, speed, _system_row(group, served), starved))
    if rows:
        rows.sort(key=lambda row: row[0])  # sort_key is unique: it ends with the group's key
        speed_rows, system_rows = [row[1] for row in rows], [row[2] for row in rows]
        lines += _scenario_tables(speed_rows, system_rows, any(row[3] for row in rows))
    else:
        lines.append("No successful runs.")
    lines += _failures(records)
    return [*lines, ""]


def _failures(records: list[Record]) -> list[str]:
    bad = sorted(
        (r for r in records if r.status != "ok"),
        key=lambda r: (r.server, r.concurrency, r.trial, r.status),
    )
    if not bad:
        return []
    rows = [
        [
            rec.server,
            via_label(rec),
            str(rec.concurrency),
            str(rec.trial),
            rec.status,
            (rec.reason or "").replace("|", "\\|").replace("\n", " ")[:300],
        ]
        for rec in bad
    ]
    return [
        "",
        "Not measured:",
        "",
        *markdown_table(["server", "via", "conc.", "trial", "status", "reason"], rows, "llrrll"),
    ]


def _ratio(value: float | None, base: float | None) -> str:
    if value is None or not base:
        return "–"
    return f"{value / base:.2f}×"


ARCH_HEADER = [
    "scenario",
    "server",
    "knobs",
    "via",
    "conc.",
    "amd64 req/s",
    "arm64 req/s",
    "arm64/amd64 req/s",
    "amd64 p99 ms",
    "arm64 p99 ms",
    "arm64/amd64 p99",
    "amd64 machine",
    "arm64 machine",
]
EMULATED_HEADER = ["scenario", "server", "arch", "host arch", "emulator", "conc.", "status"]
EMULATED_HEADER += ["req/s", "p99 ms", "machine"]


def _by_arch(records: list[Record]) -> dict[tuple, dict[str, list[Record]]]:
    """Native ok runs (no study's) per configuration and concurrency, then per arch."""
    native = [
        r for r in records if r.status == "ok" and not r.emulated and "study" not in r.metadata
    ]
    by_arch: dict[tuple, dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for rec in native:
        by_arch[(rec.scenario, *config_key(rec), rec.concurrency)][rec.arch].append(rec)
    return by_arch


def _arch_row(amd: list[Record], arm: list[Record]) -> list[str]:
    """One configuration measured on both arches: medians side by side and their ratios."""
    amd_rps = median([r.rps for r in amd])
    arm_rps = median([r.rps for r in arm])
    amd_p99 = median([(r.latency_ms or {}).get("p99") for r in amd])
    arm_p99 = median([(r.latency_ms or {}).get("p99") for r in arm])
    first = amd[0]
    return [
        first.scenario,
        first.server,
        knobs_label(first.knobs or {}),
        via_label(first),
        str(first.concurrency),
        num(amd_rps),
        num(arm_rps),
        _ratio(arm_rps, amd_rps),
        num(amd_p99, 2),
        num(arm_p99, 2),
        _ratio(arm_p99, amd_p99),
        ", ".join(sorted({host_of(r) for r in amd})),
        ", ".join(sorted({host_of(r) for r in arm})),
    ]


def _arch_rows(records: list[Record]) -> list[list[str]]:
    """The rows of the arch comparison, sorted by scenario and server."""
    rows = []
    for key, arches in _by_arch(records).items():
        if "amd64" not in arches or "arm64" not in arches:
            continue
        first = arches["amd64"][0]
        sort_key = (first.scenario, first.server, str(key))
        rows.append((sort_key, _arch_row(arches["amd64"], arches["arm64"])))
    return [row for _, row in sorted(rows, key=lambda row: row[0])]  # unique sort keys


def _emulated_row(rec: Record) -> list[str]:
    """One emulated run: where it ran, under which emulator, and what it gave."""
    emulator = rec.metadata.get("emulator") or {}
    return [
        rec.scenario,
        rec.server,
        rec.arch,
        rec.host_arch,
        f"{emulator.get('name', '?')} {emulator.get('version', '')}",
        str(rec.concurrency),
        rec.status,
        num(rec.rps),
        num((rec.latency_ms or {}).get("p99"), 2),
        host_of(rec),
    ]


def _emulated_section(emulated: list[Record]) -> list[str]:
    """The emulated runs apart, as a functional check: a note and one row per run."""
    ordered = sorted(
        emulated, key=lambda r: (r.scenario, r.server, r.concurrency, r.trial, r.run_id)
    )
    return [
        "### Emulated runs (functional check)",
        "",
        "These ran the server under qemu user-mode emulation on a host of another arch: "
        "they show that the server and app work on that arch, not how fast it is "
        "(emulation costs 5–10× in throughput, the ranking of servers can flip, and memory "
        "is qemu's). Not ranked, not in any ratio, not in the tables above.",
        "",
        *markdown_table(EMULATED_HEADER, [_emulated_row(r) for r in ordered], "lllllrlrrl"),
        "",
    ]


def arch_section(records: list[Record]) -> list[str]:
    """Native amd64 and arm64 side by side where both measured the same configuration;
    emulated runs apart, as a functional check, never ranked nor in a ratio."""
    rows = _arch_rows(records)
    emulated = [r for r in records if r.emulated]
    if not rows and not emulated:
        return []
    lines = ["## Compare arches", ""]
    if rows:
        lines += [
            "Native runs only, medians over trials; a ratio above 1.00× means arm64 is higher "
            "(for p99: slower). Different machines differ in more than the arch (cores, clock, "
            "memory, kernel): read the machines table.",
            "",
            *markdown_table(ARCH_HEADER, rows, "llllrrrrrrrll"),
            "",
        ]
    else:
        lines += ["No configuration was measured natively on both amd64 and arm64 yet.", ""]
    if emulated:
        lines += _emulated_section(emulated)
    return lines


def render_summary(
    records: list[Record],
    problems: list[str],
    plots: dict[str, str] | None = None,
    extra: list[str] | None = None,
) -> str:
    """The whole summary.md text (plots: scenario -> relative path of its PNG; extra: more
    sections, before the skipped files)."""
    hosts = {r.metadata.get("hostname", "?") for r in records}
    lines = [
        "# Benchmark summary",
        "",
        f"{len(records)} records from {len(hosts)} machine(s); generated by `make report` "
        "from the JSON records in this directory. Requests/s is the median over trials with "
        f"the min–max spread (⚠: spread over {SPREAD_FLAG:.0%} of the median); latencies are "
        "medians over trials, measured by wrk, whose percentiles include its own post-hoc "
        "estimate of the requests a stalled server kept it from sending (`stats_correct`); "
        "open-loop runs (oha) are measured from each request's intended send time. CPU % is "
        "summed over the server's process tree "
        "(100 = one core); RSS is the peak of the tree's summed RSS; wrk CPU % shows whether "
        "the load generator itself was saturated. TIME_WAIT counts the sockets that entered "
        "TIME_WAIT during the run on the server's port and, behind nginx, the proxy's (client "
        "side / upstream side): a server that closes every connection piles them up; listen "
        "overflows are the kernel's TcpExtListenOverflows over the run (system-wide). "
        "'of ceiling' is the share of nginx-static's rate at the same concurrency on the same "
        "machine. Compare servers within one machine.",
        "",
        "## Machines",
        "",
        *machines_table(records),
        "",
    ]
    by_scenario: dict[str, list[Record]] = defaultdict(list)
    for rec in records:
        # Emulated runs are a functional check, study runs have their own sections, and
        # open-loop runs theirs (bench.openloop).
        if not rec.emulated and "study" not in rec.metadata and rec.offered_rps is None:
            by_scenario[rec.scenario].append(rec)
    for scenario in sorted(by_scenario):
        lines += scenario_section(scenario, by_scenario[scenario], (plots or {}).get(scenario))
    lines += arch_section(records)
    lines += extra or []
    if problems:
        lines += ["## Skipped files", "", *(f"- {p}" for p in problems), ""]
    return "\n".join(lines)


def plot_series(records: list[Record]) -> dict[str, dict[str, list[tuple]]]:
    """Per scenario, per configuration (and machine): (concurrency, median req/s, median p99)
    for the plots. Emulated runs are left out, as in the tables."""
    series: dict[str, dict[str, list[tuple]]] = defaultdict(lambda: defaultdict(list))
    hosts = {host_of(r) for r in records}
    main = [
        r for r in records if not r.emulated and "study" not in r.metadata and r.offered_rps is None
    ]
    for group in _groups(main).values():
        first = group[0]
        label = " ".join(
            part
            for part in (
                first.server,
                knobs_label(first.knobs or {}),
                "" if via_label(first) == "direct" else f"({via_label(first)})",
                f"[{host_of(first)}]" if len(hosts) > 1 else "",
            )
            if part
        )
        series[first.scenario][label].append(
            (
                first.concurrency,
                median([r.rps for r in group]),
                median([(r.latency_ms or {}).get("p99") for r in group]),
            )
        )
    return {scenario: dict(lines) for scenario, lines in series.items()}


def write_summary(
    results_dir: Path, sections: Callable[[list[Record]], list[str]] | None = None
) -> Path:
    """Rebuild results_dir/summary.md from the records on disk (replaced atomically);
    `sections` renders more sections from the records (the studies')."""
    records, problems = load_records(results_dir)
    for problem in problems:
        print(f"report: {problem}", file=sys.stderr)
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / "summary.md"
    plots = write_plots(results_dir, plot_series(records))
    fd, tmp = tempfile.mkstemp(dir=results_dir, prefix=".tmp-summary-", suffix=".md")
    try:
        with os.fdopen(fd, "w") as fh:
            extra = open_loop_sections(records, results_dir)
            extra += sections(records) if sections is not None else []
            extra += production_sections(records)
            fh.write(render_summary(records, problems, plots, extra))
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)  # no half-written summary left behind (e.g. summary.md is a directory)
        raise
    return path
