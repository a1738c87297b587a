"""The host-speed probe: /proc/stat parsed, the start and drift lines, the record's speed
(format 17), the speed file written once, and the real probe on this machine."""

import json
import os
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from bench.core import plan
from bench.core.record import (
    FORMAT_VERSION,
    KNOWN_VERSIONS,
    PROBE_VERSION,
    Record,
    load_records,
    speed_of,
    write_record,
)
from bench.harness.recorder import Recorder
from bench.harness.run import execute
from bench.harness.session import Harness
from bench.host import speed
from bench.host.placement import cpu_placement
from tests.fakes import FakeProbe, FakeSite, FakeTool

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# a format-16 record of the reference (before the probe existed)
BEFORE_17 = (
    FIXTURES / "race-quota-upstream" / "20261128T041057Z_vm_gunicorn-gthread_upstream_c10_t2_"
    "e7a7deec.json"
)


def _entry(session: str, ops: float, at: str = "2026-11-27T10:00:00Z", **kw: object) -> dict:
    base = {
        "session_id": session,
        "machine_id": "a5adb7fdd6e1",
        "cpu_model": "AMD EPYC",
        "at": at,
        "start_ops_per_s": ops,
        "end_ops_per_s": ops,
        "version": PROBE_VERSION,
    }
    return base | kw


def _log(tmp_path: Path, speeds: list[float]) -> speed.SpeedLog:
    ident = {k: v for k, v in _entry("thissession0001", 0).items() if k in speed.identity()}
    ident |= {"boot_id": "b00t", "kernel": "6.8.0-test"}
    return speed.SpeedLog(FakeProbe(speeds), tmp_path / "state" / "history.jsonl", 0.10, ident)


def test_proc_stat_parses_the_aggregate_line_of_a_real_capture() -> None:
    """The `cpu` line of a real /proc/stat, by column; steal over two captures a second apart
    as a percentage of the CPUs' time between them."""
    before = speed.cpu_times((FIXTURES / "proc" / "stat-before.txt").read_text())
    after = speed.cpu_times((FIXTURES / "proc" / "stat-after.txt").read_text())
    assert before == {
        "user": 56757,
        "nice": 0,
        "system": 12690,
        "idle": 17970,
        "iowait": 409,
        "irq": 0,
        "softirq": 89,
        "steal": 72,
    }
    assert after["user"] == 56936 and after["steal"] == 72
    assert speed.steal_pct(before, after) == 0.0
    # 25 jiffies stolen of the 201 + 50 that passed on both CPUs
    assert speed.steal_pct(before, after | {"steal": 72 + 25, "idle": 17970 + 25}) == 9.96


def test_steal_is_none_where_the_kernel_does_not_count_it() -> None:
    """An old kernel's line without the steal column, or no time between: None, not 0."""
    old = speed.cpu_times("cpu  10 0 5 100 1 0 0\nintr 1\n")
    assert "steal" not in old and speed.steal_pct(old, old) is None
    same = speed.cpu_times("cpu  10 0 5 100 1 0 0 3 0 0\n")
    assert speed.steal_pct(same, same) is None
    with pytest.raises(ValueError):
        speed.cpu_times("cpu0 1 2 3\n")


def test_start_line_says_a_slower_host_is_not_comparable() -> None:
    """0.31x the last session's speed: the one line naming that session (6 characters) and its
    date; within tolerance, the short line."""
    earlier = _entry("e9f988aa11223344", 20000.0)
    slower = _entry("8235fe0011223344", 6200.0, at="2026-11-28T09:00:00Z")
    assert speed.start_line(earlier, slower, 0.10) == (
        "this host runs at 0.31× the speed it had in session e9f988 (2026-11-27): "
        "figures are not comparable with that session's"
    )
    near = _entry("8235fe0011223344", 20400.0)
    assert speed.start_line(earlier, near, 0.10) == (
        "host speed: 1.02× session e9f988's (within ±10 %)"
    )


def test_last_session_is_this_machines_latest_of_the_same_probe() -> None:
    """Another machine, another CPU model, another probe version and this very session are
    never what the start line compares with; none at all: None."""
    now = _entry("now", 1.0)
    entries = [
        _entry("old", 900.0),
        _entry("mine", 1000.0),
        _entry("other-machine", 5.0, machine_id="ffff"),
        _entry("other-cpu", 5.0, cpu_model="Intel"),
        _entry("other-version", 5.0, version=PROBE_VERSION + 1),
        _entry("now", 5.0),
    ]
    assert speed.last_session(entries, now)["session_id"] == "mine"
    assert speed.last_session(entries[2:], now) is None


def test_a_session_says_its_start_line_and_a_drift_once(tmp_path: Path) -> None:
    """The first probe against the history says the start line; a later probe beyond
    tolerance says the host changed, once; a between-rounds probe within a minute of the
    last is skipped."""
    log = _log(tmp_path, [700.0, 690.0, 1000.0, 500.0])
    log.history.parent.mkdir(parents=True)
    log.history.write_text(json.dumps(_entry("e9f988aa", 1000.0)) + "\nnot json\n")
    said: list[str] = []
    log.checkpoint(said.append)
    assert said == [
        "this host runs at 0.70× the speed it had in session e9f988 (2026-11-27): "
        "figures are not comparable with that session's"
    ]
    assert log.checkpoint(said.append, spaced=True) is None and len(log.probes) == 1
    log.checkpoint(said.append)  # 690: within 10 % of 700
    log.checkpoint(said.append)  # 1000: 1.43x
    log.checkpoint(said.append)  # 500: beyond again, not said twice
    assert len(said) == 2 and said[1].startswith("the host changed under this run: it now runs")
    assert "1.43×" in said[1]
    field = log.speed()
    assert field is not None and field["start"]["ops_per_s"] == 700.0
    assert field["latest"]["ops_per_s"] == 500.0 and field["change"] == 0.7143
    assert field["changed"] is True and log.changed() is True


def test_no_start_line_without_an_earlier_session(tmp_path: Path) -> None:
    """A machine's first session says nothing at its start; its speed is within itself."""
    log = _log(tmp_path, [1000.0, 1050.0])
    said: list[str] = []
    log.checkpoint(said.append)
    log.checkpoint(said.append)
    assert said == []
    assert log.speed() == {
        "start": log.probes[0],
        "latest": log.probes[1],
        "change": 1.05,
        "changed": False,
    }


def test_speed_file_is_written_once_and_never_overwritten(tmp_path: Path) -> None:
    """The session's file holds every probe in order and the identity; a second finish of the
    same session raises and leaves the first file byte-identical; the history gains one line."""
    log = _log(tmp_path, [1000.0, 800.0])
    log.checkpoint(lambda _: None)
    log.checkpoint(lambda _: None)
    path = log.finish(tmp_path / "results")
    assert path == tmp_path / "results" / "raw" / "speed-thissession0001.json"
    data = json.loads(path.read_text())
    assert data == {
        "session_id": "thissession0001",
        "machine_id": "a5adb7fdd6e1",
        "cpu_model": "AMD EPYC",
        "boot_id": "b00t",
        "kernel": "6.8.0-test",
        "probes": log.probes,
        "changed": True,
    }
    before = path.read_bytes()
    with pytest.raises(FileExistsError):
        log.finish(tmp_path / "results")
    assert path.read_bytes() == before
    assert not list((tmp_path / "results" / "raw").glob(".tmp-*"))
    history = speed.read_history(log.history)
    assert history == [
        {
            "session_id": "thissession0001",
            "machine_id": "a5adb7fdd6e1",
            "cpu_model": "AMD EPYC",
            "at": "2026-11-29T00:00:01Z",
            "start_ops_per_s": 1000.0,
            "end_ops_per_s": 800.0,
            "version": PROBE_VERSION,
        }
    ]


def test_nothing_is_written_when_nothing_was_probed(tmp_path: Path) -> None:
    """A command refused before its lock (no probe): no speed file, no history line."""
    log = _log(tmp_path, [1000.0])
    with speed.recording(tmp_path / "results", log):
        assert speed.record_field() is None
    assert not (tmp_path / "results").exists() and not log.history.exists()
    assert speed.checkpoint(lambda _: None) is None  # nothing recording: no probe


def test_record_round_trips_at_format_17_with_its_speed(tmp_path: Path) -> None:
    """A format-17 record with metadata.speed loads back equal; speed_of reads its start."""
    assert FORMAT_VERSION == 17 and 17 in KNOWN_VERSIONS
    rec = Record.from_dict(json.loads(BEFORE_17.read_text()))
    log = _log(tmp_path, [1234.5, 1200.0])
    log.checkpoint(lambda _: None)
    log.checkpoint(lambda _: None)
    rec = replace(rec, format_version=17, metadata={**rec.metadata, "speed": log.speed()})
    write_record(tmp_path / "r", rec, {})
    loaded, problems = load_records(tmp_path / "r")
    assert problems == [] and loaded == [replace(rec, raw_files=[])]
    assert speed_of(loaded[0]) == 1234.5
    other = {**log.speed(), "start": {**log.probes[0], "version": PROBE_VERSION + 1}}
    assert speed_of(replace(rec, metadata={**rec.metadata, "speed": other})) is None


def test_a_format_16_record_loads_unchanged_with_speed_unknown() -> None:
    """Records written before the probe existed load as they are; their speed is None."""
    data = json.loads(BEFORE_17.read_text())
    rec = Record.from_dict(data)
    assert rec.format_version == 16 and "speed" not in rec.metadata
    # every key a later format added reads as None (app_flavor, 17's other key: "framework")
    assert rec.to_dict() == data | {"app_flavor": None} and speed_of(rec) is None


def test_the_real_probe_gives_positive_figures_for_every_usable_cpu() -> None:
    """On this machine: one positive figure per usable CPU, a positive median and ratio, and
    no probe child left behind (wall-clock values are not asserted)."""
    taken = speed.probe(units=2000)
    cpus = len(os.sched_getaffinity(0))
    assert taken["version"] == PROBE_VERSION and taken["at"].endswith("Z")
    assert len(taken["per_cpu_ops_per_s"]) == cpus
    assert all(v > 0 for v in taken["per_cpu_ops_per_s"])
    assert taken["ops_per_s"] > 0 and taken["cpu_wall_ratio"] > 0 and taken["wall_s"] > 0
    assert taken["steal_pct"] is None or taken["steal_pct"] >= 0
    assert psutil.Process().children() == []


def test_an_interrupted_probe_leaves_no_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the children wait for their start: every child is killed and reaped."""

    def interrupted(procs):  # type: ignore[no-untyped-def]
        assert len(procs) == len(os.sched_getaffinity(0))
        raise KeyboardInterrupt

    monkeypatch.setattr(speed, "_timed", interrupted)
    with pytest.raises(KeyboardInterrupt):
        speed.probe(units=10)
    assert psutil.Process().children() == []


def test_a_failed_probe_is_said_and_the_session_goes_on(tmp_path: Path) -> None:
    """A probe that cannot be taken is one line; the session has no probe from it."""

    def broken() -> dict:
        raise speed.SpeedError("probe child exited with 1")

    log = speed.SpeedLog(broken, tmp_path / "h.jsonl", 0.10, speed.identity())
    said: list[str] = []
    assert log.checkpoint(said.append) is None
    assert said == ["host speed: not measured (probe child exited with 1)"]
    assert log.speed() is None and log.finish(tmp_path) is None


def test_the_work_is_deterministic() -> None:
    """The same units give the same check value in every process (no salted hash in it)."""
    assert speed.work(300) == speed.work(300)


def _options(results: Path) -> plan.Options:
    return plan.Options(
        servers=("granian",),
        scenarios=("plaintext",),
        concurrency=(10,),
        trials=2,
        duration_s=1,
        warmup_s=0,
        arch="amd64",
        results=results,
        overrides={},
        load_threads=1,
        seed=3,
    )


def test_every_record_of_a_session_carries_its_start_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """make bench with fakes, recording with a fake probe: probes at the start, between the
    rounds and at the end; every record's speed has the session's start, the latest probe
    before it, and the speed file lists every probe in order."""
    monkeypatch.setattr("bench.harness.run.state_base", lambda: tmp_path / "state")
    monkeypatch.setattr(speed, "BETWEEN_MIN_S", 0.0)  # every round begins with a probe
    (tmp_path / "state").mkdir()
    results = tmp_path / "results"
    site, tool = FakeSite(), FakeTool()

    def harness(first, arms, table, run_dir, progress) -> Harness:
        recorder = Recorder({"hostname": "test"}, cpu_placement(False), tool, progress)
        return Harness(site, tool, recorder, table, run_dir, progress)

    log = _log(tmp_path, [1000.0, 990.0, 980.0, 970.0, 960.0])
    with speed.recording(results, log):
        assert execute(_options(results), harness=harness) == 0
    records = [json.loads(p.read_text()) for p in sorted((results / "records").glob("*.json"))]
    assert len(records) == 3  # the warm-up start and two trials
    starts = {json.dumps(r["metadata"]["speed"]["start"]) for r in records}
    assert len(starts) == 1 and records[0]["metadata"]["speed"]["start"] == log.probes[0]
    assert all(r["metadata"]["speed"]["changed"] is False for r in records)
    latest = [r["metadata"]["speed"]["latest"]["at"] for r in records]
    assert latest == sorted(latest) and len(set(latest)) > 1
    assert 3 <= len(log.probes) <= 5  # start, one per round, end
    saved = json.loads((results / "raw" / "speed-thissession0001.json").read_text())
    assert saved["probes"] == log.probes and saved["changed"] is False


def test_make_bench_through_the_cli_probes_under_the_lock_and_says_the_start_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two `python -m bench run` sessions (the run itself replaced by a supervised body that
    measures nothing): each probes at its start and end, writes its speed file and history
    line; the second, on a host at 0.31x, says so in one line naming the first."""
    from bench import cli
    from bench.harness import run

    monkeypatch.setattr(run, "state_base", lambda: tmp_path / "state")
    (tmp_path / "state").mkdir()
    monkeypatch.setattr(
        run, "execute", lambda options, sections: run.supervised(lambda t, d: 0, "x")
    )
    history, results = tmp_path / "history.jsonl", tmp_path / "results"
    logs = []

    def session(name: str, ops: float):  # type: ignore[no-untyped-def]
        def make() -> speed.SpeedLog:
            ident = {**speed.identity(), "session_id": name}
            logs.append(speed.SpeedLog(FakeProbe([ops]), history, 0.10, ident))
            return logs[-1]

        return make

    argv = ["run", "--server=granian", "--scenario=plaintext", f"--results={results}"]
    assert cli.main(argv, speeds=session("aaaaaa111", 1000.0)) == 0
    assert "host runs" not in capsys.readouterr().err  # no earlier session here
    assert cli.main(argv, speeds=session("bbbbbb222", 310.0)) == 0
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if "speed" in line] == [
        "bench: this host runs at 0.31× the speed it had in session aaaaaa (2026-11-29): "
        "figures are not comparable with that session's"
    ]
    assert [len(log.probes) for log in logs] == [2, 2]  # start and end
    assert sorted(p.name for p in (results / "raw").iterdir()) == [
        "speed-aaaaaa111.json",
        "speed-bbbbbb222.json",
    ]
    assert [e["session_id"] for e in speed.read_history(history)] == ["aaaaaa111", "bbbbbb222"]


def test_every_measuring_command_and_reference_question_records_a_session() -> None:
    """The commands that probe are commands, and every make reference question's command is
    one of them (each question is its own `python -m bench <command>`: its own session)."""
    from bench.cli.commands import COMMANDS, MEASURING
    from bench.core.campaign import COMMANDS as QUESTION_COMMANDS

    assert set(MEASURING) <= set(COMMANDS)
    assert set(QUESTION_COMMANDS.values()) <= set(MEASURING)
