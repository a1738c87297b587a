"""Speed classes: sessions of one machine are told apart by their host speed probe
(bench.core.speedclass), and the summary names them wherever two meet."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bench.core import speedclass
from bench.core.record import PROBE_VERSION, Record, load_records, speed_of
from bench.report import sessions
from bench.report.cells import host_of
from bench.report.groups import groups

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _probed(rec: Record, session: str, ops: float | None, change: float = 1.0) -> Record:
    """A fixture record as if its session had probed its host at `ops` (None: before 17)."""
    meta = {**rec.metadata, "session_id": session, "machine_id": "a5adb7fd86ee"}
    if ops is not None:
        start = {"version": PROBE_VERSION, "ops_per_s": ops, "at": "2026-11-29T00:00:00Z"}
        meta["speed"] = {"start": start, "latest": start, "change": change, "changed": False}
    return dataclasses.replace(rec, metadata=meta)


def _one() -> Record:
    records, _ = load_records(FIXTURES / "records")
    return next(r for r in records if r.status == "ok" and not r.emulated)


def test_sessions_within_the_tolerance_are_one_class_and_slower_ones_another() -> None:
    """The fastest session opens a class; one 5 % slower joins it, one 69 % slower opens the
    next; each class is named by its median's share of the fastest class's."""
    drawn = speedclass.classes({"a": 1000.0, "b": 950.0, "c": 310.0, "d": 300.0}, 0.10)
    assert drawn["a"][0] == drawn["b"][0] == 0
    assert drawn["c"][0] == drawn["d"][0] == 1
    assert drawn["c"][1] == 305.0


def test_two_speeds_of_one_machine_are_labelled_and_never_pooled() -> None:
    """Records of one machine at two speeds: host_of carries `@1.00` and `@0.31`, and the
    groups of trials carry the class with the machine (every table names it)."""
    rec = _one()
    fast = [_probed(rec, "s-fast", 1000.0), _probed(rec, "s-fast2", 980.0)]
    slow = [_probed(rec, "s-slow", 310.0)]
    stamped = speedclass.stamp(fast + slow)
    labels = {r.metadata["session_id"]: host_of(r) for r in stamped}
    assert labels["s-fast"].endswith(" @1.00") and labels["s-fast2"].endswith(" @1.00")
    assert labels["s-slow"].endswith(" @0.31")
    keys = [str(key) for key in groups(stamped)]
    assert sum(" @0.31" in key for key in keys) == 1 and sum(" @1.00" in key for key in keys) == 2


def test_one_speed_leaves_the_machine_unlabelled_and_unknown_speed_is_said() -> None:
    """One class: no label (nothing to tell apart). A session before the probe beside a probed
    one: `@?`, and the first screen says which rows rest on unknown speed."""
    rec = _one()
    alone = speedclass.stamp([_probed(rec, "s1", 1000.0), _probed(rec, "s2", 990.0)])
    assert not host_of(alone[0]).endswith(("@1.00", "@?"))
    mixed = speedclass.stamp([_probed(rec, "s1", 1000.0), _probed(rec, "old", None)])
    assert host_of(mixed[1]).endswith(" @?")
    assert speedclass.count(mixed) == (2, 1)
    line = sessions.speed_line(mixed)
    assert "2 speed class(es)" in line and "1 records predate the probe" in line


def test_another_probe_version_is_not_compared() -> None:
    """A probe of another version is read as no probe (its work differs)."""
    rec = _one()
    other = dataclasses.replace(
        rec, metadata={**rec.metadata, "speed": {"start": {"version": 99, "ops_per_s": 5.0}}}
    )
    assert speed_of(other) is None and speed_of(rec) is None
    stamped = speedclass.stamp([other, _probed(rec, "s1", 1000.0)])
    assert {r.metadata["speed_class"]["label"] for r in stamped} == {"@?", "@1.00"}


def test_the_sessions_table_lists_every_session_with_its_probe_class_and_drift() -> None:
    """details/machines.md: one row per machine, boot and session, with probe, class, drift
    within the session and the campaign question its records answered."""
    rec = _one()
    stamped = speedclass.stamp(
        [_probed(rec, "s-fast", 1000.0, change=0.97), _probed(rec, "s-slow", 310.0)]
    )
    ledger = [{"question": "direct", "records": [f"x_y_{stamped[0].run_id[:8]}.json"]}]
    table = "\n".join(sessions.sessions_table(stamped, ledger))
    assert "1,000 ops/s" in table and "310 ops/s" in table
    assert "@0.31" in table and "| 3% |" in table and "| direct |" in table


def test_the_interactive_chart_never_joins_two_sessions_in_one_line() -> None:
    """c10 of one session and c50 of another are two traces, each named by its session."""
    from bench.report.html import _traces

    base = {"server": "granian", "knobs": "w2", "via": "direct", "machine": "vm·a5ad"}
    base |= {"scenario": "db", "load_model": "closed", "offered_rps": None, "trials": 3}
    base |= {"rps_low": None, "rps_high": None, "rps_trials": [], "p99_ms": 1.0}
    base |= {"p99_ms_low": None, "p99_ms_high": None, "p99_ms_trials": [], "load_tool": "wrk"}
    rows = [
        base | {"concurrency": 10, "rps": 6000.0, "session": "session aaaaaa"},
        base | {"concurrency": 50, "rps": 2000.0, "session": "session bbbbbb"},
    ]
    traces = _traces(rows)
    assert len(traces) == 2 and all(len(t["x"]) == 1 for t in traces)
    assert {t["name"].split(" · ")[-1] for t in traces} == {"session aaaaaa]", "session bbbbbb]"}


def test_the_first_screen_names_a_session_whose_host_changed_under_it() -> None:
    """A record whose latest probe moved beyond the tolerance (speed.changed): the speed line
    names its session; none when no probe moved."""
    rec = _one()
    steady = speedclass.stamp([_probed(rec, "s-steady", 1000.0)])
    assert "changed under" not in sessions.speed_line(steady)
    moved = _probed(rec, "s-moved", 1000.0, change=0.6)
    moved = dataclasses.replace(
        moved, metadata={**moved.metadata, "speed": {**moved.metadata["speed"], "changed": True}}
    )
    line = sessions.speed_line(speedclass.stamp([moved]))
    assert "The host changed under session s-move" in line
