"""Speed classes: sessions of one machine whose host ran at one speed.

Input: records (their metadata.speed, format 17: the host speed probe of bench.host.speed
taken at the session's start). Output: the same records, each with metadata.speed_class
stamped (not stored on disk): the class of its session among the sessions of its machine
(machine identity and CPU model) in this record set.

Why: a VM keeps its machine id while its host changes; the reference's "one machine" was 8
boots whose speeds differ 3×. Sessions whose probes differ by more than the probe's own noise
(bench.core.defaults.SPEED_TOLERANCE) are separate speed classes; the summary names a machine
with its class (`vm·a5ad [AMD EPYC] @0.31`) wherever the machine has more than one, so two
speeds are never set side by side unlabelled. Records written before the probe (format < 17)
have no speed: their sessions form one class "@?" (speed unknown) of their machine.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from bench.core import defaults
from bench.core.record import Record, load_records, session_of, speed_of

UNKNOWN = "@?"


def machine_of(meta: dict) -> tuple[str, str]:
    """What one machine is here: its stable identity (the host name before format 5) and CPU
    model; speed classes are drawn within it."""
    return (str(meta.get("machine_id") or meta.get("hostname") or "?"), str(meta.get("cpu_model")))


def classes(probes: dict[str, float], tolerance: float) -> dict[str, tuple[int, float]]:
    """Sessions (id -> probe) in classes: the fastest session opens a class and every slower
    one within `tolerance` (a share of the opener's probe) joins it; the next one opens the
    next. Returns session -> (class index, fastest first; the class's median probe)."""
    ordered = sorted(probes.items(), key=lambda item: (-item[1], item[0]))
    members: list[list[str]] = []
    opener = 0.0
    for session, value in ordered:
        if not members or value < opener * (1 - tolerance):
            members.append([])
            opener = value
        members[-1].append(session)
    out: dict[str, tuple[int, float]] = {}
    for index, sessions in enumerate(members):
        middle = statistics.median(probes[s] for s in sessions)
        out |= {s: (index, middle) for s in sessions}
    return out


def stamp(records: Iterable[Record], tolerance: float = defaults.SPEED_TOLERANCE) -> list[Record]:
    """Each record with metadata.speed_class: {label ("@1.00", "@0.31", "@?"), ratio (its
    class's median probe over the machine's fastest class's; None unknown), probe (its
    session's), classes (how many the machine has in this set, unknown counted), index}."""
    records = list(records)
    by_machine: dict[tuple[str, str], dict[str, float | None]] = defaultdict(dict)
    for rec in records:
        by_machine[machine_of(rec.metadata)][session_of(rec)] = speed_of(rec)
    stamps: dict[tuple[tuple[str, str], str], dict[str, object]] = {}
    for machine, sessions in by_machine.items():
        known = {s: v for s, v in sessions.items() if v is not None}
        drawn = classes(known, tolerance)
        top = max((middle for _, middle in drawn.values()), default=None)
        count = len({index for index, _ in drawn.values()}) + (len(known) < len(sessions))
        for session, value in sessions.items():
            if value is None or top is None:
                stamps[machine, session] = {
                    "label": UNKNOWN, "ratio": None, "probe": None, "classes": count,
                    "index": None,
                }  # fmt: skip
                continue
            index, middle = drawn[session]
            stamps[machine, session] = {
                "label": f"@{middle / top:.2f}", "ratio": middle / top, "probe": value,
                "classes": count, "index": index,
            }  # fmt: skip
    return [
        dataclasses.replace(
            rec,
            metadata={
                **rec.metadata,
                "speed_class": stamps[machine_of(rec.metadata), session_of(rec)],
            },
        )
        for rec in records
    ]


def label(meta: dict) -> str:
    """The class to print after a machine's name: '' where its machine has one class in this
    set (nothing to tell apart), else ' @0.31' or ' @?' (speed unknown)."""
    found = meta.get("speed_class") or {}
    if int(found.get("classes") or 1) < 2:
        return ""
    return f" {found['label']}"


def count(records: Iterable[Record]) -> tuple[int, int]:
    """How many speed classes a record set holds over all its machines, and how many of them
    are of unknown speed (records before the probe)."""
    seen = {
        (machine_of(r.metadata), (r.metadata.get("speed_class") or {}).get("label", UNKNOWN))
        for r in records
    }
    return len(seen), sum(1 for _, found in seen if found == UNKNOWN)


def load(
    results_dir: Path, with_reference: bool = False, exclude: Path | None = None
) -> tuple[list[Record], list[str]]:
    """bench.core.record.load_records, each record stamped with its speed class in this set:
    what every report, comparison and export reads."""
    records, problems = load_records(results_dir, with_reference, exclude)
    return stamp(records), problems
