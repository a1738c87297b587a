"""The report: every record under RESULTS -> RESULTS/summary.md.

Input: records (from any number of machines) and the problem lines of files that were not.
Output: markdown, deterministic for the same records (a golden test holds it): machines, then
per scenario a table sorted by median p99 with the spread over trials, then the runs that
failed or are unsupported, with their reasons, then the files that were skipped.
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bench.core import speedclass
from bench.core.campaign import read_ledger
from bench.core.record import Record, of_study, replace_text, session_of
from bench.core.variables import parse_price
from bench.load import caveat, is_default
from bench.report import (
    arches,
    campaign,
    disturbed,
    precision,
    sessions,
    share,
    stability,
    standings,
    tuned,
    variance,
    websocket,
)
from bench.report.answer import answer_section, write_chart
from bench.report.cells import (
    app_label,
    figure,
    host_of,
    knobs_label,
    machine,
    median,
    num,
    scope_label,
    section_value,
    server_version,
    via_label,
)
from bench.report.compare import MARKS_NOTE, compare, rows_table
from bench.report.export import points
from bench.report.figures import figure_sections
from bench.report.glance import glance_section
from bench.report.groups import (
    CEILING,
    SERVED_MIN,
    config_key,
    groups,
    is_experiment,
    is_limited,
    latency_estimate,
    point_key,
    ranks,
    rps_estimate,
    served_share,
    socket_errors,
    starved,
    trial_count,
)
from bench.report.html import write_html
from bench.report.limits import Checks
from bench.report.openloop import open_loop_sections
from bench.report.plots import safe_name, write_plots
from bench.report.production import production_sections
from bench.report.recommend import recommendations_section
from bench.report.soak import soak_sections
from bench.report.stats import Estimate, Ranked
from bench.report.table import markdown_table

# write_summary's topic whose lines go into summary.md (bench.studies.sources), not a detail file
SOURCES_TOPIC = "sources"
# The studies' lines that belong under the Recommendations (bench.studies.sources.advice_lines:
# what an open question's study says about which configuration to run)
ADVICE_TOPIC = "advice"

__all__ = ["config_key", "render_summary", "served_share", "server_version", "write_summary"]


def _share(center: float | None, ceiling_rps: float | None) -> str:
    # Throughput as a share of nginx answering the same route on the same machine and
    # concurrency: what this machine and load tool can do at all.
    if not ceiling_rps or center is None:
        return "–"
    return f"{center / ceiling_rps:.0%}"


def interval_cell(est: Estimate | None, digits: int = 0) -> str:
    """`14,000 [13,100–15,000]`: the geometric mean over trials and its 95 % interval; with
    digits, a latency's three significant digits (`7.44 [6.9–8.12]`, cells.figure)."""
    if est is None:
        return "–"
    cell = figure if digits else num
    if est.low is None or est.high is None:
        return cell(est.center)
    return f"{cell(est.center)} [{cell(est.low)}–{cell(est.high)}]"


def machines_table(records: list[Record]) -> list[str]:
    """One row per machine that produced records."""
    rows = {}
    for rec in records:
        meta = rec.metadata
        key = (host_of(rec), rec.arch, rec.emulated)
        rows[key] = [
            host_of(rec),
            str(meta.get("hostname", "?")),
            str(meta.get("machine_id") or "–"),
            rec.arch,
            "yes" if rec.emulated else "no",
            str(meta.get("cpu_model", "?")),
            str(meta.get("cpu_count", "?")),
            str(meta.get("kernel", "?")),
            str(meta.get("python_version", "?")),
        ]
    return markdown_table(
        ["machine", "hostname", "identity", "arch", "emulated", "CPU", "CPUs", "kernel", "Python"],
        [rows[k] for k in sorted(rows, key=str)],
        "llllllrll",
    )


def load_label(rec: Record) -> str:
    """The load tool, with its worker processes (Locust's) when it had some."""
    if rec.load_workers:
        return f"{rec.load_tool} ×{rec.load_workers}"
    return rec.load_tool


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


def _ceilings(all_groups: dict[tuple, list[Record]]) -> dict[tuple, float]:
    """The ceiling server's req/s per (concurrency, machine) and per (concurrency, machine,
    session), direct runs only: a share is of the same session's ceiling where it has one."""
    found: dict[tuple, float] = {}
    for group in all_groups.values():
        first = group[0]
        if first.server != CEILING or first.proxy or (est := rps_estimate(group)) is None:
            continue
        found[(first.concurrency, host_of(first))] = est.center
        found[(first.concurrency, host_of(first), session_of(first))] = est.center
    return found


def _rank_cell(rank: Ranked | None) -> str:
    return rank.label if rank is not None else "–"


def _speed_row(
    group: list[Record],
    starved: bool,
    ceiling_rps: float | None,
    rank: tuple[Ranked | None, Ranked | None],
) -> dict[str, str]:
    """One configuration's cells of the speed tables by column name (SPEED_COLUMNS,
    LATENCY_COLUMNS): ranks, throughput, latency, errors, and its machine."""
    first = group[0]
    rps = rps_estimate(group)
    conc = str(first.concurrency)
    if not is_default(first.load_tool):
        conc += f" ({load_label(first)})"
    return {
        "rank req/s": _rank_cell(rank[0]),
        "rank p99": _rank_cell(rank[1]),
        "server": f"{first.server} {server_version(first.metadata)}{app_label(first)}",
        "knobs": knobs_label(first.knobs or {}),
        "via": via_label(first),
        "conc.": conc,
        "req/s [95 % CI]": interval_cell(rps),
        "p50 ms": figure(_latency(group, "p50")),
        "p99 ms [95 % CI]": interval_cell(latency_estimate(group), 2) + (" †" if starved else ""),
        "p99.9 ms": figure(_latency(group, "p999")),
        "errors: socket / non-2xx": f"{num(sum(socket_errors(r) for r in group))} / "
        f"{num(sum(int((r.errors or {}).get('non_2xx', 0)) for r in group))}",
        "502 / 504": f"{_proxy_count(group, 502)} / {_proxy_count(group, 504)}"
        if any(r.proxy for r in group)
        else "–",
        "of ceiling": _share(rps.center if rps else None, ceiling_rps),
        "trials": str(trial_count(group)),
        MACHINE_COLUMN: machine(first),
    }


def _system_row(group: list[Record], served: float | None) -> list[str]:
    """One configuration's row of the system table: CPU, memory, sockets, pools."""
    first = group[0]
    return [
        f"{first.server} {server_version(first.metadata)}{app_label(first)}",
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
    "requests that complete, so theirs are missing and this latency is optimistic; its req/s "
    "is what it gave the few connections it served. The row is ranked apart: no rank by req/s "
    "or p99 (–)."
)


# write_summary's plots: the first screen's chart under this name, beside the scenarios' plots
ANSWER_CHART = "(the answer)"
SESSIONS_NOTE = (
    "One row per machine, boot and session. The host speed probe (format 17) is a fixed amount "
    "of CPU work run at each session's start and end and between rounds (bench/host/speed.py); "
    "sessions of one machine whose probes differ by more than the probe's noise are separate "
    "speed classes (`class`: the class's speed as a share of the machine's fastest; `@?`: "
    "before the probe), never pooled or set side by side unlabelled; `drift`: the largest "
    "change of the probe within the session. See [method](method.md)."
)
RANK_NOTE = (
    "Rows: one configuration at one concurrency, ranked among those measured at the same "
    "concurrency on the same machine, by req/s (higher first) and by p99 (lower first). "
    "`2–4`: the ranks the data allow — 1 + the configurations significantly better, to the "
    "count minus those significantly worse (Welch's t-test on log values, Holm-corrected "
    "over every pair of the table's load; a single trial is never significant). "
    "Baselines (nginx-static, flask-dev) are reference lines: not ranked (–)."
)


def _scenario_rows(
    records: list[Record],
) -> tuple[list[tuple], bool]:
    """Per group of trials, its sort key, speed row and system row."""
    all_groups = groups(records)
    ceilings = _ceilings(all_groups)
    # ranked among the configurations that served their connections (a starved one's req/s
    # and p99 count only the requests it accepted: never rank 1, as At a glance)
    by_rps, by_p99 = ranks(all_groups, admit=lambda group: not starved(group))
    rows = []
    for key, group in all_groups.items():
        first = group[0]
        served = median([served_share(r) for r in group])
        unserved = starved(group)  # the one definition (bench.report.groups)
        ceiling = ceilings.get(
            (first.concurrency, host_of(first), session_of(first)),
            ceilings.get((first.concurrency, host_of(first))),
        )
        rank = (by_rps.get(key), by_p99.get(key))
        speed = _speed_row(group, unserved, ceiling, rank)
        # One machine's configurations together, per concurrency, best req/s first:
        # rankings never mix machines.
        rps = rps_estimate(group)
        sort_key = (machine(first), first.concurrency, -(rps.center if rps else 0.0), str(key))
        rows.append((sort_key, speed, _system_row(group, served), unserved))
    rows.sort(key=lambda row: row[0])  # sort_key is unique: it ends with the group's key
    return rows, any(row[3] for row in rows)


# The speed row's cells split into two tables of at most 9 columns, a block per machine:
# ranks, throughput and p99 first; the other percentiles, errors and the ceiling share after.
# Columns by name (the keys of _speed_row's cells): a new column is placed here by its name,
# never by counting positions.
CONFIGURATION = ("server", "knobs", "via", "conc.")
SPEED_COLUMNS = (
    "rank req/s",
    "rank p99",
    *CONFIGURATION,
    "req/s [95 % CI]",
    "p99 ms [95 % CI]",
    "trials",
)
LATENCY_COLUMNS = (
    *CONFIGURATION,
    "p50 ms",
    "p99.9 ms",
    "errors: socket / non-2xx",
    "502 / 504",
    "of ceiling",
)
MACHINE_COLUMN = "machine"
LATENCY_NOTE = (
    "Latency and errors of the same rows: p50 and p99.9 in ms (geometric means over trials); "
    "errors: socket errors / non-2xx responses over all trials; 502 / 504: nginx's counts "
    "(behind nginx, – direct); of ceiling: the share of nginx-static's req/s at the same "
    "concurrency on the same machine."
)


def _split_tables(rows: list[dict[str, str]]) -> list[str]:
    """Per machine, the speed table and the latency-and-errors table of its rows."""
    lines: list[str] = []
    machines_seen = list(dict.fromkeys(row[MACHINE_COLUMN] for row in rows))
    for name in machines_seen:
        mine = [row for row in rows if row[MACHINE_COLUMN] == name]
        lines += [f"**Machine {name}**", ""]
        lines += markdown_table(
            list(SPEED_COLUMNS), [[row[c] for c in SPEED_COLUMNS] for row in mine], "rrllllrrr"
        )
        lines += ["", "Latency and errors:", ""]
        lines += markdown_table(
            list(LATENCY_COLUMNS),
            [[row[c] for c in LATENCY_COLUMNS] for row in mine],
            "llllrrrrr",
        )
        lines.append("")
    return lines


def scenario_section(scenario: str, records: list[Record], plot: str | None = None) -> list[str]:
    """The speed tables of one scenario: ok runs aggregated over trials, then the failed ones."""
    path = records[0].path
    lines = [f"## {scenario} (`{path}`)", ""]
    if plot:
        lines += [f"![{scenario}: req/s and p99 by concurrency]({plot})", ""]
    rows, any_starved = _scenario_rows(records)
    if rows:
        lines += _split_tables([row[1] for row in rows])
        lines += [LATENCY_NOTE, ""]
        if any_starved:
            lines += [STARVED_NOTE, ""]
        lines += [f"{text}." for text in sorted({caveat(r.load_tool) for r in records}) if text]
        lines += [""] if any(caveat(r.load_tool) for r in records) else []
    else:
        lines.append("No successful runs.")
    lines += _failures(records)
    return [*lines, ""]


def system_section(scenario: str, records: list[Record]) -> list[str]:
    """The system table of one scenario (system.md)."""
    rows, _ = _scenario_rows(records)
    if not rows:
        return []
    return [
        f"## {scenario} (`{records[0].path}`)",
        "",
        *markdown_table(SYSTEM_HEADER, [row[2] for row in rows], "lllrrrrrrrrrrrl"),
        "",
    ]


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
            # the whole reason: a cut one reads as another ("restarts on file c")
            (rec.reason or "").replace("|", "\\|").replace("\n", " "),
        ]
        for rec in bad
    ]
    return [
        "",
        "Not measured:",
        "",
        *markdown_table(["server", "via", "conc.", "trial", "status", "reason"], rows, "llrrll"),
    ]


EMULATED_HEADER = ["scenario", "server", "knobs", "arch", "host arch", "emulator", "conc."]
EMULATED_HEADER += ["req/s", "p99 ms", "trials", "emulated/native req/s", "machine"]


def _emulated_rows(records: list[Record]) -> list[list[str]]:
    """One row per emulated point (geometric means over trials), with the ratio to the same
    point measured natively on the same host where there is one."""
    emulated = groups(r for r in records if r.emulated)
    native = groups(r for r in records if not r.emulated)
    native_by_point = {
        (point_key(g[0]), host_of(g[0])): g for g in native.values() if g[0].arch == g[0].host_arch
    }
    rows = []
    for group in emulated.values():
        first = group[0]
        emulator = first.metadata.get("emulator") or {}
        est, p99 = rps_estimate(group), latency_estimate(group)
        twin = native_by_point.get((point_key(first), host_of(first)))
        ratio = "–"
        if twin is not None and est is not None and (base := rps_estimate(twin)) is not None:
            ratio = f"{est.center / base.center:.2f}×" if base.center else "–"
        sort_key = (first.scenario, first.server, first.concurrency, str(point_key(first)))
        rows.append(
            (
                sort_key,
                [
                    first.scenario,
                    first.server,
                    knobs_label(first.knobs or {}),
                    first.arch,
                    first.host_arch,
                    f"{emulator.get('name', '?')} {emulator.get('version', '')}".strip(),
                    str(first.concurrency),
                    num(est.center if est else None),
                    figure(p99.center if p99 else None),
                    str(trial_count(group)),
                    ratio,
                    host_of(first),
                ],
            )
        )
    return [row for _, row in sorted(rows, key=lambda row: row[0])]


def _emulated_section(records: list[Record]) -> list[str]:
    """The emulated runs apart, as a functional check: a note and one row per point."""
    failed = [r for r in records if r.emulated and r.status != "ok"]
    lines = [
        "### Emulated runs (functional check)",
        "",
        "These ran the server under qemu user-mode emulation on a host of another arch: "
        "they show that the server and app work on that arch, not how fast it is "
        "(emulation costs 5–10× in throughput, the ranking of servers can flip, and memory "
        "is qemu's). Not ranked, not in any ratio but their own emulated/native one (the same "
        "point measured natively on the same host), not in the tables above.",
        "",
    ]
    rows = _emulated_rows(records)
    if rows:
        lines += [*markdown_table(EMULATED_HEADER, rows, "lllllllrrrrl"), ""]
    if failed:
        lines += [
            f"{len(failed)} emulated run(s) not measured: "
            + "; ".join(sorted({f"{r.server} {r.scenario}: {r.status}" for r in failed})),
            "",
        ]
    return lines


def arch_section(records: list[Record]) -> list[str]:
    """Native amd64 and arm64 side by side where both measured the same configuration (the
    code of `make compare`); emulated runs apart, as a functional check."""
    native = [r for r in records if not r.emulated and not of_study(r)]
    amd = [r for r in native if r.arch == "amd64"]
    arm = [r for r in native if r.arch == "arm64"]
    emulated = [r for r in records if r.emulated]
    comparison = compare(amd, arm) if amd and arm else None
    if comparison is None and not emulated:
        return []
    lines = ["## Compare arches", ""]
    if comparison is not None and comparison.rows:
        lines += [
            "Native runs only, geometric means over trials; arm64/amd64 ratios with their 95 % "
            "interval. " + MARKS_NOTE.replace("HEAD", "arm64") + " Different machines differ "
            "in more than the arch (cores, clock, memory, kernel): read the machines table "
            "(the same code as `make compare BASE=<amd64 results> HEAD=<arm64 results>`).",
            "",
            *rows_table(comparison, "amd64", "arm64"),
            "",
        ]
    else:
        lines += ["No configuration was measured natively on both amd64 and arm64 yet.", ""]
    if emulated:
        lines += _emulated_section(records)
    return lines


METHOD = (
    "The trial (one run) is the unit of every interval and test. Requests/s and each "
    "percentile are geometric means over trials with their 95 % confidence interval "
    "(Student's t on log values); open-loop percentiles are each trial's own, a single "
    "trial's p99 interval is a within-run block bootstrap (500 ms blocks), labelled so. Two "
    "configurations differ significantly when Welch's t-test on log values (degrees of "
    "freedom min(n) − 1) gives p < 0.05 after Holm's correction over the family: every pair "
    "at one load on one machine, or every point of a comparison. Ranks are intervals (`1–3`: "
    "1 + those significantly better to the count minus those significantly worse); "
    "baselines (nginx-static, flask-dev) are not ranked, nor achieved req/s at a fixed "
    "offered rate. A capacity is `X [lo–hi]`: where the share of passing steps crosses 1/2, "
    "with a bootstrap interval over repeated steps. Records without a machine identity are "
    "told apart by kernel build; a machine's name includes its CPU model. The trials of a "
    "point are one session's (one harness invocation; `legacy …`: derived for records "
    "before format 10), never pooled with another session's, and leave out each server's "
    "warm-up start and every run under foreign load that was repeated (named in the "
    "summary, as is a repeat under foreign load too, which stands in its run's place). "
    "Closed-loop latencies are measured by wrk, whose percentiles include its own post-hoc "
    "estimate of the requests a stalled server kept it from sending (`stats_correct`); "
    "open-loop runs (oha) are measured from each request's intended send time. Errors: "
    "socket errors / non-2xx responses; 502 / 504 are counted in nginx's log (behind nginx). "
    "'of ceiling' is the share of nginx-static's rate at the same concurrency on the same "
    "machine. CPU, memory, TIME_WAIT, accept queue and pool figures are in `system.md` beside "
    "this file. Compare servers within one machine."
)


def _by_scenario(records: list[Record]) -> dict[str, list[Record]]:
    """The closed-loop runs of the catalog per scenario: emulated runs are a functional
    check, study runs have their own sections, and open-loop runs theirs (bench.report.openloop)."""
    by_scenario: dict[str, list[Record]] = defaultdict(list)
    for rec in records:
        if (
            not rec.emulated
            and not of_study(rec)
            and rec.offered_rps is None
            and (not is_experiment(rec) or is_limited(rec))
        ):
            by_scenario[rec.scenario].append(rec)
    return by_scenario


DETAILS = "details"  # RESULTS/details/<topic>.md: every table the summary links to
# topic -> the title of its file and the line that links it from summary.md
TOPICS = {
    "capacity": (
        "Open loop: capacity and fixed arrival rates",
        "capacity at a p99 objective and runs at fixed arrival rates (oha), with the knee plots",
    ),
    "studies": ("Studies", "each study's claim, arms, figures and verdict"),
    "campaign": (
        "Reference campaign",
        "make reference: each question of reference.toml answered here or not asked yet, "
        "with its command",
    ),
    "noise": (
        "This machine's noise",
        "make noise: variance components of req/s per run, start and round, the A/A race",
    ),
    "websocket": (
        "WebSocket",
        "SCENARIO=websocket: messages/s, p99 from the intended send time, connections held, "
        "memory per 1,000 connections, the servers that do not carry WebSockets",
    ),
    "production": (
        "Production behaviours",
        "reload, recycling, CPU quota, memory over a soak, defaults behind a load balancer",
    ),
}


def _detail(title: str, lines: list[str]) -> str:
    """A detail file: its title, the way back, its sections (plot links one level up)."""
    body = "\n".join(lines).replace("](plots/", "](../plots/")
    return f"# {title}\n\n[Back to the summary](../summary.md)\n\n{body}\n"


FAILED_HEADER = ["server", "scenario", "via", "conc.", "trial", "status", "reason"]


def failed_file(records: list[Record], problems: list[str]) -> list[str]:
    """Every run that was not measured, with its whole reason, and the skipped files."""
    bad = sorted(
        (r for r in records if r.status != "ok"),
        key=lambda r: (r.server, r.scenario, r.concurrency, r.trial, r.status),
    )
    rows = [
        [
            r.server,
            r.scenario,
            via_label(r),
            str(r.concurrency),
            str(r.trial),
            r.status,
            (r.reason or "").replace("|", "\\|").replace("\n", " "),
        ]
        for r in bad
    ]
    lines = [f"{len(bad):,} run(s) not measured.", ""]
    if rows:
        lines += [*markdown_table(FAILED_HEADER, rows, "lllrrll"), ""]
    if problems:
        lines += ["## Skipped files", "", *(f"- {p}" for p in problems), ""]
    return lines


def _machines_file(records: list[Record], ledger: list[dict] | None) -> tuple[str, str]:
    """details/machines.md: each machine, every boot and session with its host speed, arches
    compared; and what it holds."""
    return (
        _detail(
            "Machines",
            [
                "## Machines",
                "",
                *machines_table(records),
                "",
                "## Boots and sessions",
                "",
                SESSIONS_NOTE,
                "",
                *sessions.sessions_table(records, ledger or []),
                "",
                *arch_section(records),
            ],
        ),
        "each machine's CPU, kernel, Python; every boot and session with its host speed; "
        "arches compared; emulated runs",
    )


def _details(
    records: list[Record],
    problems: list[str],
    plots: dict[str, str],
    topics: dict,
    ledger: list[dict] | None = None,
) -> dict[str, tuple[str, str]]:
    """Detail file name -> (text, what it holds), in the order the summary links them."""
    files: dict[str, tuple[str, str]] = {}
    by_scenario = _by_scenario(records)
    for scenario in sorted(by_scenario):
        lines = scenario_section(scenario, by_scenario[scenario], plots.get(scenario))
        files[f"speed-{safe_name(scenario)}.md"] = (
            _detail(f"Speed: {scenario}", [*lines, RANK_NOTE, ""]),
            f"{scenario}: req/s, latency, errors and ranks per configuration and load",
        )
    for topic, lines in topics.items():
        if lines:
            title, holds = TOPICS.get(topic, (topic, topic))
            files[f"{topic}.md"] = (_detail(title, lines), holds)
    files["system.md"] = (
        _detail("System figures", render_system(records).splitlines()[2:]),
        "CPU, memory, sockets, accept queue and pools per configuration",
    )
    paired = share.shares(records)
    if paired:  # APP_FLAVOR=raw beside the framework app in one session
        files[share.DETAILS_FILE] = (
            _detail(share.TITLE, share.detail_lines(paired)),
            share.HOLDS,
        )
    unstable = stability.unstable_points(records)
    if unstable:
        files["stability.md"] = (
            _detail("Unstable points", stability.detail_lines(unstable)),
            "points whose trials spread, held an outlier or drifted past pyperf's thresholds",
        )
    files["machines.md"] = _machines_file(records, ledger)
    files["failed.md"] = (
        _detail("Runs not measured", failed_file(records, problems)),
        "runs that failed or are unsupported, with their reasons",
    )
    files["method.md"] = (
        _detail("Method", [METHOD, "", RANK_NOTE]),
        "how every figure, interval, rank and capacity is computed",
    )
    return files


def render_report(
    records: list[Record],
    problems: list[str],
    plots: dict[str, str] | None = None,
    topics: dict[str, list[str]] | None = None,
    prices: dict[str, float] | None = None,
    answers: list[str] | None = None,
    campaign_lines: list[str] | None = None,
    checks: Checks | None = None,
    ledger: list[dict] | None = None,
) -> dict[str, str]:
    """summary.md and its detail files (path relative to RESULTS -> text). `topics`: more
    detail files by topic (capacity, studies, production); At a glance takes the studies'
    verdicts from them. `prices`: dollars per hour by arch or machine (PRICE=). `answers`:
    make tune's answers (bench.report.tuned.answers_summary). `campaign_lines`: which of
    reference.toml's questions these records answer (bench.report.campaign.summary_lines).
    `checks`: the container study's verdicts on its pairs (bench.report.limits). `ledger`: a
    reference campaign's (which question each record answered, for details/machines.md)."""
    topics = dict(topics or {})
    sources = topics.pop(SOURCES_TOPIC, [])  # in summary.md itself, after At a glance
    advice = topics.pop(ADVICE_TOPIC, [])  # in summary.md itself, after the recommendations
    details = _details(records, problems, plots or {}, topics, ledger)
    hosts = {host_of(r) for r in records}
    machines = {host_of(r).removesuffix(speedclass.label(r.metadata)) for r in records}
    links = [f"- [{name}]({DETAILS}/{name}): {holds}" for name, (_, holds) in details.items()]
    lines = [
        "# Benchmark summary",
        "",
        f"{len(records):,} records from {len(machines):,} machine(s)"
        + (f" in {len(hosts):,} speed classes" if len(hosts) > len(machines) else "")
        + "; generated by `make report` "
        f"from the JSON records in this directory; how figures are computed: "
        f"[method]({DETAILS}/method.md).",
        "",
        *([line, ""] if (line := sessions.speed_line(records)) else []),
        *answer_section(records, (plots or {}).get(ANSWER_CHART)),
        *(campaign_lines or []),
        *arches.summary_lines(records, prices),
        *recommendations_section(records, checks),
        *advice,
        *standings.summary_lines(records),
        *tuned.summary_lines(records),
        *(answers or []),
        *glance_section(records, [line for part in topics.values() for line in part]),
        *sources,
        *websocket.summary_lines(records, f"{DETAILS}/websocket.md"),
        *stability.summary_lines(stability.unstable_points(records), f"{DETAILS}/stability.md"),
        *disturbed.summary_lines(records),
        *precision.summary_lines(records),
        *variance.summary_lines(records, f"{DETAILS}/{variance.DETAILS_FILE}"),
        "## Details",
        "",
        *links,
        "",
    ]
    files = {f"{DETAILS}/{name}": text for name, (text, _) in details.items()}
    return {"summary.md": "\n".join(lines), **files}


def render_summary(
    records: list[Record],
    problems: list[str],
    plots: dict[str, str] | None = None,
    extra: list[str] | None = None,
) -> str:
    """summary.md's text (extra: study sections, for At a glance's verdict lines)."""
    return render_report(records, problems, plots, {"studies": extra or []})["summary.md"]


SYSTEM_NOTE = (
    "CPU % is summed over the server's process tree (100 = one core); RSS is the peak of the "
    "tree's summed RSS; load CPU % shows whether the load generator itself was saturated. "
    "TIME_WAIT counts the sockets that entered TIME_WAIT during the run on the server's port "
    "and, behind nginx, the proxy's (client side / upstream side): a server that closes every "
    "connection piles them up; listen overflows are the kernel's TcpExtListenOverflows over "
    "the run (system-wide); conns served is mean latency × req/s ÷ connections (Little's law)."
)


def render_system(records: list[Record]) -> str:
    """system.md: the resources and sockets of every closed-loop configuration, in the order
    of summary.md's tables."""
    lines = ["# System figures", "", SYSTEM_NOTE, ""]
    by_scenario = _by_scenario(records)
    for scenario in sorted(by_scenario):
        lines += system_section(scenario, by_scenario[scenario])
    return "\n".join(lines)


def plot_series(records: list[Record]) -> dict[str, dict[str, list[tuple]]]:
    """Per scenario, per configuration (and machine): (concurrency, req/s, p99, their 95 %
    intervals, starved) for the plots (bench.report.plots.Point): the runs the speed tables
    show (_by_scenario), no other (runs under a CPU quota were drawn unlabelled beside
    native ones in upstream.png while the table left them to their own section)."""
    series: dict[str, dict[str, list[tuple]]] = defaultdict(lambda: defaultdict(list))
    hosts = {scope_label(r) for r in records}
    main = [
        r for shown in _by_scenario(records).values() for r in shown if not variance.is_noise(r)
    ]
    for group in groups(main).values():
        first = group[0]
        label = " ".join(
            part
            for part in (
                first.server,
                knobs_label(first.knobs or {}),
                "" if via_label(first) == "direct" else f"({via_label(first)})",
                f"[{scope_label(first)}]" if len(hosts) > 1 else "",
            )
            if part
        )
        rps, p99 = rps_estimate(group), latency_estimate(group)
        series[first.scenario][label].append(
            (
                first.concurrency,
                rps.center if rps else None,
                p99.center if p99 else None,
                (rps.low, rps.high) if rps and rps.low is not None else None,
                (p99.low, p99.high) if p99 and p99.low is not None else None,
                starved(group),  # left connections unserved: marked in the plot
            )
        )
    return {scenario: dict(lines) for scenario, lines in series.items()}


def price_env() -> dict[str, float]:
    """PRICE= as the Makefile exports it (PYWEBBENCH_PRICE), parsed by its declaration."""
    raw = os.environ.get("PYWEBBENCH_PRICE", "").strip()
    return parse_price(raw) if raw else {}


@dataclass(frozen=True)
class StudyParts:
    """What the studies give the report (bench.studies.runner.sections_for): topic -> lines,
    and the container study's verdicts on its pairs, which Production behaviours and the
    recommendations show as the study's section does (bench.report.limits)."""

    topics: dict[str, list[str]]
    limit_checks: Checks = field(default_factory=dict)


Sections = Callable[[list[Record]], list[str] | dict[str, list[str]] | StudyParts]


def study_parts(records: list[Record], sections: Sections | None) -> StudyParts:
    """The studies' parts: `sections` renders details/studies.md's lines, topic -> lines
    (SOURCES_TOPIC: summary.md's source documents), or StudyParts."""
    found = sections(records) if sections is not None else []
    if isinstance(found, StudyParts):
        return found
    return StudyParts(found if isinstance(found, dict) else {"studies": found})


def study_topics(records: list[Record], sections: Sections | None) -> dict[str, list[str]]:
    """The studies' topics (study_parts)."""
    return study_parts(records, sections).topics


def write_summary(results_dir: Path, sections: Sections | None = None) -> Path:
    """Rebuild results_dir/summary.md and its detail files from the records on disk (each
    replaced atomically, world-readable); `sections` renders the studies' parts
    (study_parts: their topics and the container study's verdicts)."""
    # REFERENCE=1 (the Makefile exports it): the shipped reference merged into the user's set
    with_reference = os.environ.get("PYWEBBENCH_REFERENCE") == "1"
    records, problems = speedclass.load(results_dir, with_reference)
    for problem in problems:
        print(f"report: {problem}", file=sys.stderr)
    results_dir.mkdir(parents=True, exist_ok=True)
    plots = write_plots(results_dir, plot_series(records))
    if (chart := write_chart(records, results_dir)) is not None:
        plots[ANSWER_CHART] = chart
    ran_campaign = campaign.report(results_dir)  # one reading for the summary and its detail
    parts = study_parts(records, sections)
    checks = parts.limit_checks
    topics = {
        "capacity": open_loop_sections(records, results_dir),
        **parts.topics,
        "production": production_sections(records, checks)
        + figure_sections(records, results_dir)
        + soak_sections(records, results_dir),
        "noise": variance.detail_lines(records),
        "websocket": websocket.websocket_sections(records),
        "campaign": ran_campaign[1],
    }
    texts = render_report(
        records,
        problems,
        plots,
        topics,
        price_env(),
        tuned.answers_summary(results_dir),
        ran_campaign[0],
        checks,
        read_ledger(results_dir),
    )
    for name, text in texts.items():  # summary.md first: if it cannot be written, nothing is
        (results_dir / name).parent.mkdir(exist_ok=True)
        replace_text(results_dir / name, text)
    write_html(results_dir, points(records))
    prune_plots(results_dir, texts.values())
    prune_details(results_dir, texts)
    return results_dir / "summary.md"


def prune_details(results_dir: Path, written: Iterable[str]) -> list[str]:
    """The detail files this summary did not write (a scenario whose runs left the speed
    tables: a study's search runs, say), removed from results_dir/details: unlinked from the
    summary, their figures no longer what it says. Their names."""
    kept = {Path(name).name for name in written if Path(name).parent.name == DETAILS}
    stale = sorted(p.name for p in (results_dir / DETAILS).glob("*.md") if p.name not in kept)
    for name in stale:
        (results_dir / DETAILS / name).unlink(missing_ok=True)
    return stale


def prune_plots(results_dir: Path, texts: Iterable[str]) -> list[str]:
    """The plots no part of this summary shows any more (their records retired, a study's
    question asked again without that figure), removed from results_dir/plots: a plot is
    written only when its data is there, so one left from an earlier summary is stale.
    Their names."""
    shown = "\n".join(texts)
    stale = sorted(
        path.name
        for path in (results_dir / "plots").glob("*.png")
        if f"plots/{path.name}" not in shown
    )
    for name in stale:
        (results_dir / "plots" / name).unlink(missing_ok=True)
    return stale
