"""Sessions and speed classes: every boot and session of every machine, and the summary's line
on how many speeds a record set holds.

Input: records stamped with their speed class (bench.core.speedclass.load) and, for a
reference campaign, its ledger (which records answered which question). Output: the table of
details/machines.md (one row per machine, boot and session: kernel, clock, probe, class,
drift within the session, records, questions) and the summary's first-screen sentence.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from bench.core import speedclass
from bench.core.record import Record, session_of, speed_of
from bench.report.cells import figure, host_of, session_label
from bench.report.table import markdown_table


def drift(records: list[Record]) -> float | None:
    """The largest change of the host's probe within a session, as a share of its start probe
    (metadata.speed.latest against .start); None before the probe."""
    changes = [
        abs(float(speed["change"]) - 1)
        for r in records
        if isinstance(speed := r.metadata.get("speed"), dict) and speed.get("change") is not None
    ]
    return max(changes) if changes else None


def questions_by_run(ledger: Iterable[dict]) -> dict[str, str]:
    """A campaign ledger's record names -> the question they answered (the record file's
    last part is its run id's first 8 characters)."""
    out: dict[str, str] = {}
    for entry in ledger:
        for name in entry.get("records", []):
            out[str(name).removesuffix(".json").rsplit("_", 1)[-1]] = str(entry.get("question"))
    return out


def _row(group: list[Record], questions: dict[str, str]) -> list[str]:
    meta = group[0].metadata
    found = meta.get("speed_class") or {}
    probe = speed_of(group[0])
    moved = drift(group)
    asked = sorted({questions[r.run_id[:8]] for r in group if r.run_id[:8] in questions})
    starts = sorted(str(r.metadata.get("started_at") or "?") for r in group)
    return [
        host_of(group[0]),
        str(meta.get("boot_id") or "–")[:6],
        session_label(group[0]),
        str(meta.get("kernel") or "?"),
        f"{meta['cpu_mhz']} MHz" if meta.get("cpu_mhz") else "–",
        f"{figure(probe)} ops/s" if probe is not None else "unknown (before the probe)",
        str(found.get("label", speedclass.UNKNOWN)),
        "–" if moved is None else f"{moved:.0%}",
        f"{starts[0]} – {starts[-1]}",
        f"{len(group):,}",
        ", ".join(asked) or "–",
    ]


def sessions_table(records: list[Record], ledger: Iterable[dict] = ()) -> list[str]:
    """details/machines.md's sessions: one row per machine, boot and session, oldest first."""
    by_session: dict[tuple, list[Record]] = defaultdict(list)
    for rec in records:
        meta = rec.metadata
        by_session[speedclass.machine_of(meta), meta.get("boot_id"), session_of(rec)].append(rec)
    questions = questions_by_run(ledger)
    rows = [_row(group, questions) for group in by_session.values()]
    rows.sort(key=lambda row: (row[0], row[8]))
    return markdown_table(
        [
            "machine",
            "boot",
            "session",
            "kernel",
            "clock",
            "host speed probe",
            "class",
            "drift",
            "runs (UTC)",
            "records",
            "questions",
        ],
        rows,
        "lllllrlrlrl",
    )


def speed_line(records: list[Record]) -> str:
    """The first screen's sentence on host speed: how many speed classes, and what rests on
    records of unknown speed."""
    classes, unknown = speedclass.count(records)
    older = sum(1 for r in records if speed_of(r) is None)
    if not records:
        return ""
    if older == len(records):
        return (
            "Host speed: not probed (every record predates the host speed probe, format 17): "
            "sessions of one machine may have run at different speeds; see "
            "[machines](details/machines.md)."
        )
    text = (
        f"Host speed: {classes:,} speed class(es) — sessions of one machine whose host speed "
        "probes differ by more than the probe's noise are named apart (`@0.31`: 0.31× the "
        "machine's fastest class); see [machines](details/machines.md)."
    )
    if unknown:
        text += (
            f" {older:,} records predate the probe: rows labelled `@?` rest on them "
            "(speed unknown)."
        )
    if moved := changed_sessions(records):
        text += (
            f" The host changed under {', '.join(moved)} (a probe within the session moved "
            "beyond the probe's noise): figures before and after it are not comparable."
        )
    return text


def changed_sessions(records: list[Record]) -> list[str]:
    """The sessions (as tables name them) whose host speed changed under them: a record's
    latest probe beyond the tolerance of the session's start (metadata.speed.changed)."""
    return sorted(
        {
            session_label(r)
            for r in records
            if isinstance(speed := r.metadata.get("speed"), dict) and speed.get("changed")
        }
    )
