"""Export: every measured point as one row, for spreadsheets and scripts (`make export`).

Input: records (any number of machines). Output: the rows (a point = the ok trials of one
configuration at one load on one machine, grouped by bench.report.groups, with the estimates
of bench.report.stats: geometric mean and 95 % interval over trials) as CSV or JSON text.
Each column is described in COLUMNS (docs/export.md is this list); the HTML report draws its
interactive charts from the same rows.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable

from bench.core.outcome import Outcome
from bench.core.record import Record, flavor_of
from bench.report.cells import host_of, knobs_label, server_version, session_label, via_label
from bench.report.groups import (
    groups,
    is_experiment,
    latency_estimate,
    latency_values,
    rps_estimate,
    rps_values,
    trial_count,
)

# 1: first version (the columns below); 2: + session (a point is one session's trials)
# 3: + app_flavor (APP_FLAVOR=: framework or raw; a raw-app point is one of its own, and its
#    `via` ends in ", raw app")
EXPORT_VERSION = 3

# name -> what it holds (with its unit): the export's contract, extended, never renamed.
COLUMNS: dict[str, str] = {
    "scenario": "the scenario (route) measured: plaintext, db, upstream, saas, ...",
    "path": "the URL path requested (or the Locust mix)",
    "server": "server id (servers/<id>/)",
    "server_version": "the server package's version",
    "knobs": "the server's knobs, short form: w workers, t threads, c connections, b backlog",
    "via": "direct, or the proxy in front (nginx, alb) with keep-alive settings",
    "load_tool": "wrk, oha, locust (or race for the balancer study)",
    "load_model": "closed (connections wait for answers) or open (fixed arrival rate)",
    "concurrency": "open connections (closed loop) or the connection pool (open loop)",
    "offered_rps": "open loop: requests/s offered whatever the server did; empty closed loop",
    "study": "the study this point belongs to (empty: a catalog run)",
    "study_arm": "the study's arm id",
    "kind": "catalog, study, capacity (a step of a capacity search) or experiment "
    "(reload, recycling, CPU quota, soak, balancer namespace)",
    "machine": "the machine's label (hostname, or MACHINE=, with its identity and CPU model)",
    "session": "the harness invocation whose trials these are (`legacy …`: derived, records "
    "before format 10)",
    "arch": "amd64 or arm64",
    "emulated": "true when the server ran under qemu emulation (a functional check only)",
    "trials": "number of ok trials in the point",
    "rps": "requests/s: geometric mean over trials (open loop: successful responses/s)",
    "rps_low": "lower end of the 95 % interval of rps (empty with fewer than 2 trials)",
    "rps_high": "upper end of the 95 % interval of rps",
    "rps_trials": "each trial's requests/s (CSV: separated by ';')",
    "p99_ms": "p99 latency in ms: geometric mean over trials",
    "p99_ms_low": "lower end of the 95 % interval of p99_ms",
    "p99_ms_high": "upper end of the 95 % interval of p99_ms",
    "p99_ms_trials": "each trial's p99 in ms (CSV: separated by ';')",
    "failed": "requests sent that got no 2xx answer (socket errors, non-2xx), all trials",
    "unserved": "arrivals without a 2xx answer: failed plus arrivals never sent (open loop)",
    "app_flavor": "framework (app_common's Flask/Quart app; every record before it) or raw "
    "(the same routes with no framework: APP_FLAVOR=raw)",
}


def _kind(rec: Record) -> str:
    if "study" in rec.metadata:
        return "study"
    if "capacity" in rec.metadata:
        return "capacity"
    return "experiment" if is_experiment(rec) else "catalog"


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(float(value), digits)


def point_row(group: list[Record]) -> dict[str, object]:
    """One point: its configuration, load, machine and estimates."""
    first = group[0]
    rps, p99 = rps_estimate(group), latency_estimate(group)
    return {
        "scenario": first.scenario,
        "path": first.path,
        "server": first.server,
        "server_version": server_version(first.metadata),
        "knobs": knobs_label(first.knobs or {}),
        "via": via_label(first),
        "load_tool": first.load_tool,
        "load_model": "open" if first.offered_rps is not None else "closed",
        "concurrency": first.concurrency,
        "offered_rps": first.offered_rps,
        "study": first.metadata.get("study"),
        "study_arm": first.metadata.get("study_arm"),
        "kind": _kind(first),
        "machine": host_of(first),
        "session": session_label(first),
        "arch": first.arch,
        "emulated": bool(first.emulated),
        "trials": trial_count(group),
        "rps": _round(rps.center if rps else None),
        "rps_low": _round(rps.low if rps else None),
        "rps_high": _round(rps.high if rps else None),
        "rps_trials": [_round(v) for v in rps_values(group)],
        "p99_ms": _round(p99.center if p99 else None),
        "p99_ms_low": _round(p99.low if p99 else None),
        "p99_ms_high": _round(p99.high if p99 else None),
        "p99_ms_trials": [_round(v) for v in latency_values(group)],
        "failed": sum(Outcome.of_record(r).failed for r in group),
        "unserved": sum(Outcome.of_record(r).unserved for r in group),
        "app_flavor": flavor_of(first),
    }


SORT_KEYS = (
    "scenario",
    "machine",
    "session",
    "kind",
    "study",
    "server",
    "knobs",
    "via",
    "app_flavor",
    "load_tool",
)
SORT_KEYS += ("concurrency", "offered_rps", "study_arm")


def points(records: list[Record]) -> list[dict[str, object]]:
    """Every point of the records, in a stable order (scenario, machine, server, load)."""
    rows = [point_row(group) for group in groups(records).values()]
    return sorted(
        rows,
        key=lambda r: tuple(str(r[k]) for k in SORT_KEYS),
    )


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ";".join(_cell(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def to_csv(rows: list[dict[str, object]]) -> str:
    """CSV with a header row of COLUMNS' names; lists joined by ';', missing values empty."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([_cell(row[name]) for name in COLUMNS])
    return out.getvalue()


def to_json(rows: list[dict[str, object]]) -> str:
    """{"export_version", "columns": {name: description}, "points": [row, ...]}."""
    doc = {"export_version": EXPORT_VERSION, "columns": COLUMNS, "points": rows}
    return json.dumps(doc, indent=1, sort_keys=False, ensure_ascii=False) + "\n"


# FORMAT= -> its writer: a new format is one function here.
FORMATS: dict[str, Callable[[list[dict[str, object]]], str]] = {"csv": to_csv, "json": to_json}


def export(records: list[Record], fmt: str) -> str:
    """The records' points in one of FORMATS."""
    return FORMATS[fmt](points(records))
