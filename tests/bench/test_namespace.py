"""Namespace arms become records through the Recorder (bench.studies.namespace.record_arm):
a real race record's measurement, written again, renders the same row; an oha arm's record
carries its rate, unsent arrivals, namespace facts and sockets; unreadable oha output is a
failed record with the output kept."""

from collections import Counter
from dataclasses import replace
from pathlib import Path

from bench.core.progress import Progress
from bench.core.record import Record, load_records
from bench.harness.recorder import Recorder
from bench.host.placement import cpu_placement
from bench.load import tools
from bench.load.race import RaceResult
from bench.studies import network, schema
from bench.studies.arms import arm_options, base_options
from bench.studies.namespace import ArmRun, record_arm

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _recorder() -> Recorder:
    return Recorder({"hostname": "test"}, cpu_placement(False), tools()["oha"], Progress(1, 0))


def _rerun_of(rec: Record) -> ArmRun:
    """What measure_arm returned for a race record, rebuilt from the record."""
    race = rec.network["race"]
    result = RaceResult(
        gaps_ms=list(race["gaps_ms"]),
        burst=race["burst"],
        rounds=race["rounds"],
        by_gap={int(g): v for g, v in race["by_gap"].items()},
        by_status=Counter({int(k): v for k, v in rec.errors["by_status"].items()}),
        errors=dict(rec.errors["by_message"]),
        duration_s=rec.duration_s,
    )
    net = {k: v for k, v in rec.network.items() if k != "race"}
    return ArmRun(
        race=result,
        idle_close_s=race["idle_close_s"],
        network=net,
        proxy_statuses={int(k): v for k, v in rec.errors["proxy_by_status"].items()},
        knobs=dict(rec.knobs),
        backlog=rec.backlog,
    )


def test_a_race_record_written_again_renders_the_same_row(tmp_path: Path) -> None:
    """Gunicorn gevent's race (one 502 in 480, at the 1953 ms gap): the Recorder's record has
    the same counts, network facts, sockets and settings as the one the study wrote, and the
    study's table shows the same row."""
    (old,) = [r for r in load_records(FIXTURES / "lb-race")[0] if r.server == "gunicorn-gevent"]
    study = schema.load_study("lb-keepalive-race")
    arm = study.arm("gevent-default")
    opts = arm_options(study, arm, base_options(tmp_path, 1), str(old.metadata["study_run"]))
    path = record_arm(_recorder(), study, arm, opts, _rerun_of(old), ("2026-11-23T15:56:05Z", 1))
    assert path is not None
    (new,) = load_records(tmp_path)[0]
    assert new.status == "ok" and new.load_tool == "race" and new.offered_rps is None
    for key in ("requests", "rps", "duration_s", "concurrency", "proxy", "keepalive", "knobs"):
        assert getattr(new, key) == getattr(old, key), key
    assert new.network == old.network and new.sockets == old.sockets
    assert {k: new.errors[k] for k in old.errors} == old.errors
    assert new.metadata["study"] == "lb-keepalive-race"
    assert new.metadata["study_arm"] == "gevent-default"
    rows = [
        network.study_section(study, [replace(r, load_tool_version="1")])[8:] for r in (old, new)
    ]
    assert rows[0] == rows[1]
    assert any("| 480 | 1 | 20.8 [0.5–116] (1 in 480) | 1953 (1) |" in line for line in rows[1])


def test_an_oha_arm_record(tmp_path: Path) -> None:
    """A port-exhaustion arm measured by oha: ok, its offered rate and unsent arrivals, nginx
    in front with upstream keep-alive off, the namespace's facts and socket peaks."""
    study = schema.load_study("port-exhaustion")
    arm = study.arm("ka-off-reuse-0")
    opts = arm_options(study, arm, base_options(tmp_path, 1), "r1")
    text = (FIXTURES / "oha" / "normal.json").read_text()
    net = {
        "namespace": "pwb-1-1",
        "sysctls": {"net.ipv4.tcp_tw_reuse": "0"},
        "kernel_counters": {"TcpExtListenOverflows": 0, "TcpExtListenDrops": 0},
        "time_wait_max": 1030,
        "listen_queue_max": 2,
        "proxy_error_reasons": {},
    }
    measured = ArmRun(oha_json=text, network=net, proxy_statuses={200: 10, 502: 3})
    assert record_arm(_recorder(), study, arm, opts, measured, ("2026-01-01T00:00:00Z", 1))
    (rec,) = load_records(tmp_path)[0]
    assert rec.status == "ok" and rec.load_tool == "oha" and rec.offered_rps == 500.0
    assert rec.proxy == "nginx" and rec.keepalive == {"client": True, "upstream": False}
    assert rec.concurrency == 8 and rec.scenario == "plaintext" and rec.path == "/plaintext"
    assert "unsent" in rec.errors and rec.errors["proxy_by_status"] == {"200": 10, "502": 3}
    assert rec.network == net and rec.sockets["time_wait_max"] == 1030
    assert rec.knobs["threads"] == 4 and rec.metadata["study_arm"] == "ka-off-reuse-0"


def test_unreadable_oha_output_is_a_failed_record(tmp_path: Path) -> None:
    """oha's output that is not its JSON: a failed record saying so, the output kept."""
    study = schema.load_study("port-exhaustion")
    arm = study.arm("ka-on-reuse-1")
    opts = arm_options(study, arm, base_options(tmp_path, 1), "r1")
    recorder = _recorder()
    measured = ArmRun(oha_json="not json", network={"kernel_counters": {}})
    assert record_arm(recorder, study, arm, opts, measured, ("2026-01-01T00:00:00Z", 1)) is None
    (rec,) = load_records(tmp_path)[0]
    assert rec.status == "failed" and rec.reason.startswith("unreadable oha output")
    assert recorder.failures == 1
    assert any(name.endswith("oha.json") for name in rec.raw_files)
