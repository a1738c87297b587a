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
from pathlib import Path

from bench.record import Record, load_records

SPREAD_FLAG = 0.10  # a min-max spread over 10 % of the median is flagged
# Below this share of connections with a request in flight (by Little's law), the latency
# figures leave out the connections the server never served: flagged as optimistic.
SERVED_MIN = 0.5
CEILING = "nginx-static"  # the server whose throughput is the ceiling for the others


def _num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _machine(rec: Record) -> str:
    meta = rec.metadata
    label = f"{meta.get('hostname', '?')} ({rec.arch}"
    return label + (", emulated)" if rec.emulated else ")")


def server_version(meta: dict) -> str:
    """The server package's version from a record's metadata, "?" when it was not recorded."""
    # server_version is a shortcut run.py writes; packages[server_package] is the source, and
    # the only one in records written by other tools or by hand.
    version = meta.get("server_version")
    if not version:
        packages = meta.get("packages") or {}
        version = packages.get(meta.get("server_package") or "")
    return version or "?"


def _rps_cell(values: list[float]) -> str:
    mid = statistics.median(values)
    if len(values) == 1:
        return _num(mid)
    low, high = min(values), max(values)
    flag = " ⚠" if mid and (high - low) / mid > SPREAD_FLAG else ""
    return f"{_num(mid)} ({_num(low)}–{_num(high)}){flag}"


def _socket_errors(rec: Record) -> int:
    errors = rec.errors or {}
    return sum(int(errors.get(k, 0)) for k in ("connect", "read", "write", "timeout"))


def _section(rec: Record, section: str, key: str) -> float | None:
    values = getattr(rec, section) or {}
    return values.get(key)


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
        rows[key] = (
            f"| {meta.get('hostname', '?')} | {rec.arch} | {'yes' if rec.emulated else 'no'} "
            f"| {meta.get('cpu_model', '?')} | {meta.get('cpu_count', '?')} "
            f"| {meta.get('kernel', '?')} | {meta.get('python_version', '?')} |"
        )
    return [
        "| host | arch | emulated | CPU | CPUs | kernel | Python |",
        "|---|---|---|---|---:|---|---|",
        *(rows[k] for k in sorted(rows, key=str)),
    ]


def scenario_section(scenario: str, records: list[Record]) -> list[str]:
    """The table of one scenario: ok runs aggregated over trials, then the failed ones."""
    path = records[0].path
    lines = [f"## {scenario} (`{path}`)", ""]
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for rec in records:
        if rec.status == "ok":
            key = (
                rec.server,
                rec.app,
                rec.concurrency,
                rec.arch,
                rec.emulated,
                rec.metadata.get("hostname", "?"),
            )
            groups[key].append(rec)
    ceiling = {
        (key[2], key[5]): statistics.median(r.rps or 0.0 for r in group)
        for key, group in groups.items()
        if key[0] == CEILING
    }
    rows = []
    any_starved = False
    for key, group in groups.items():
        p99 = _median([r.latency_ms.get("p99") if r.latency_ms else None for r in group])
        first = group[0]
        queue = _median([_section(r, "sockets", "listen_queue_max") for r in group])
        served = _median([served_share(r) for r in group])
        starved = served is not None and served < SERVED_MIN
        any_starved = any_starved or starved
        version = server_version(first.metadata)
        cells = [
            f"{first.server} {version}",
            first.app,
            str(first.concurrency),
            _rps_cell([r.rps or 0.0 for r in group]),
            _num(_median([r.latency_ms.get("p50") if r.latency_ms else None for r in group]), 2),
            _num(p99, 2) + (" †" if starved else ""),
            _num(_median([r.latency_ms.get("p999") if r.latency_ms else None for r in group]), 2),
            _num(sum(_socket_errors(r) for r in group)),
            _num(sum(int((r.errors or {}).get("non_2xx", 0)) for r in group)),
            _num(_median([_section(r, "resources", "server_cpu_pct") for r in group])),
            _num(_median([_section(r, "resources", "server_rss_mb") for r in group])),
            _num(_median([_section(r, "resources", "load_cpu_pct") for r in group])),
            _num(_median([_section(r, "sockets", "time_wait_max") for r in group])),
            _num(queue),
            f"{served:.0%}" if served is not None else "–",
            _num(sum(_section(r, "sockets", "listen_overflows") or 0 for r in group)),
            _share(group, ceiling.get((key[2], key[5]))),
            str(len(group)),
            _machine(first),
        ]
        sort_key = (p99 if p99 is not None else float("inf"), key[0], key[2], str(key))
        rows.append((sort_key, "| " + " | ".join(cells) + " |"))
    if rows:
        lines += [
            "| server | app | conc. | req/s median (min–max) | p50 ms | p99 ms | p99.9 ms "
            "| socket errors | non-2xx | server CPU % | server RSS MB | wrk CPU % "
            "| TIME_WAIT max | accept queue max | conns served | listen overflows | of ceiling "
            "| trials | machine |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:"
            "|---|",
            *(row for _, row in sorted(rows)),
        ]
        if any_starved:
            lines += [
                "",
                f"† Fewer than {SERVED_MIN:.0%} of the connections had a request being timed "
                "(conns served = mean latency × req/s ÷ connections, Little's law): the others "
                "waited unserved through the run, typically unaccepted in the accept queue while "
                "the server kept serving the keep-alive connections it held. wrk only times "
                "requests that complete, so theirs are missing and this latency is optimistic.",
            ]
    else:
        lines.append("No successful runs.")
    bad = sorted(
        (r for r in records if r.status != "ok"),
        key=lambda r: (r.server, r.concurrency, r.trial, r.status),
    )
    if bad:
        lines += [
            "",
            "Not measured:",
            "",
            "| server | conc. | trial | status | reason |",
            "|---|---:|---:|---|---|",
        ]
        for rec in bad:
            reason = (rec.reason or "").replace("|", "\\|").replace("\n", " ")[:300]
            lines.append(
                f"| {rec.server} | {rec.concurrency} | {rec.trial} | {rec.status} | {reason} |"
            )
    return [*lines, ""]


def render_summary(records: list[Record], problems: list[str]) -> str:
    """The whole summary.md text."""
    hosts = {r.metadata.get("hostname", "?") for r in records}
    lines = [
        "# Benchmark summary",
        "",
        f"{len(records)} records from {len(hosts)} machine(s); generated by `make report` "
        "from the JSON records in this directory. Requests/s is the median over trials with "
        f"the min–max spread (⚠: spread over {SPREAD_FLAG:.0%} of the median); latencies are "
        "medians over trials, measured by wrk. CPU % is summed over the server's process tree "
        "(100 = one core); RSS is the peak of the tree's summed RSS; wrk CPU % shows whether "
        "the load generator itself was saturated. TIME_WAIT counts sockets on the server's "
        "port during the run (a server that closes every connection piles them up); listen "
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
        by_scenario[rec.scenario].append(rec)
    for scenario in sorted(by_scenario):
        lines += scenario_section(scenario, by_scenario[scenario])
    if problems:
        lines += ["## Skipped files", "", *(f"- {p}" for p in problems), ""]
    return "\n".join(lines)


def write_summary(results_dir: Path) -> Path:
    """Rebuild results_dir/summary.md from the records on disk (replaced atomically)."""
    records, problems = load_records(results_dir)
    for problem in problems:
        print(f"report: {problem}", file=sys.stderr)
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / "summary.md"
    fd, tmp = tempfile.mkstemp(dir=results_dir, prefix=".tmp-summary-", suffix=".md")
    with os.fdopen(fd, "w") as fh:
        fh.write(render_summary(records, problems))
    os.replace(tmp, path)
    return path
