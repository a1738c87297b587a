"""oha output -> numbers, over real oha 1.16.0 output captured on this project's machine.

The fixtures and how each was made: tests/fixtures/oha/capture.sh (granian WSGI, 1 worker,
16 threads, a static body; tests/fixtures/oha/tiny_server.py for slow, failing and non-2xx
answers; a closed loopback port for refused connections).
"""

import gzip
import sqlite3
from pathlib import Path

import pytest

import bench.load.oha as oha_module
from bench.load import LoadError
from bench.load.oha import (
    OHA_VERSION,
    OhaParseError,
    classify_error,
    latency_summary_ms,
    merge_latency_ms,
    oha_argv,
    oha_binary,
    parse_oha,
    per_request_latencies_ms,
)

OHA = Path(__file__).resolve().parent.parent / "fixtures" / "oha"


def _parse(name: str, db: bool = False, offered_rps: float | None = None):
    per_request = OHA / f"{name}.db.gz" if db else None
    return parse_oha((OHA / f"{name}.json").read_text(), per_request, offered_rps=offered_rps)


def test_argv_is_an_open_loop_run_with_corrected_latency() -> None:
    """A fixed rate (-q) always with --latency-correction (oha ignores it without -q), a bounded
    duration in ms (humantime takes no "1.5s"), JSON on stdout, per-request sqlite, URL last."""
    argv = oha_argv("/x/oha", "http://127.0.0.1:8000/db", 1500, 20, 2.5, 3, True, "/t/r.db")
    assert argv == [
        "/x/oha",
        "--no-tui",
        "--output-format",
        "json",
        "-q",
        "1500",
        "--latency-correction",
        "-c",
        "20",
        "-z",
        "2500ms",
        "-t",
        "3000ms",
        "--db-url",
        "/t/r.db",
        "http://127.0.0.1:8000/db",
    ]


def test_argv_without_keepalive_timeout_or_db() -> None:
    """keepalive off adds --disable-keepalive; no timeout and no per-request file add nothing;
    a fractional rate is passed as is."""
    argv = oha_argv("oha", "http://127.0.0.1:1/", 12.5, 1, 1, None, False, None)
    assert "--disable-keepalive" in argv
    assert "-t" not in argv and "--db-url" not in argv
    assert argv[argv.index("-q") + 1] == "12.5"


@pytest.mark.parametrize("rate", [0, -1, float("inf"), float("nan")])
def test_argv_refuses_a_rate_that_is_not_open_loop(rate: float) -> None:
    """-q 0 means "unlimited" to oha, a closed-loop run: refused, like any non-positive rate."""
    with pytest.raises(ValueError):
        oha_argv("oha", "http://127.0.0.1:1/", rate, 1, 1, None, True, None)


def test_normal_run() -> None:
    """1,000 req/s for 3 s, all 200: 3,000 responses plus the one request in flight at the
    deadline (aborted, not an error); achieved = 2xx / elapsed; sub-ms p50 and p99."""
    result = _parse("normal", offered_rps=1000)
    assert (result.requests, result.responses, result.successes) == (3001, 3000, 3000)
    assert result.aborted == 1
    assert result.by_status == {200: 3000}
    assert result.errors == dict.fromkeys(
        ("connect", "read", "write", "timeout", "other", "non_2xx"), 0
    )
    assert result.duration_s == pytest.approx(3.002044116)
    assert result.offered_rps == 1000
    assert result.achieved_rps == pytest.approx(3000 / 3.002044116)
    assert result.latency_ms["p50"] == pytest.approx(0.144104)
    assert result.latency_ms["p99"] == pytest.approx(1.014444)
    assert result.latency_ms["p999"] == pytest.approx(6.148608)
    assert result.latency_ms["max"] == pytest.approx(6.463045)
    assert result.latency_source == "json"


@pytest.mark.parametrize("name", ["normal", "frozen", "non2xx"])
def test_per_request_file_reproduces_ohas_percentiles_exactly(name: str) -> None:
    """Recomputed from --db-url with oha's own rule, every percentile and the max equal oha's
    JSON to the nanosecond: the per-request files are a faithful basis for merging trials."""
    from_json = _parse(name)
    from_db = _parse(name, db=True)
    assert from_db.latency_source == "per-request"
    for key in ("p50", "p90", "p99", "p999", "max"):
        assert from_db.latency_ms[key] == from_json.latency_ms[key], key
    assert from_db.latency_ms["mean"] == pytest.approx(from_json.latency_ms["mean"])
    assert from_db.by_status == from_json.by_status


def test_frozen_server_shows_in_the_corrected_tail() -> None:
    """granian frozen by SIGSTOP for 1 s at t = 4 s of a 10 s run at 1,000 req/s: the arrivals
    that met the freeze waited for it, so p99 is hundreds of ms (905 ms) and the max about the
    freeze, while the median stays sub-millisecond; every arrival was answered."""
    result = _parse("frozen", db=True, offered_rps=1000)
    assert result.successes == 10_000
    assert result.latency_ms["p50"] < 1
    assert 300 < result.latency_ms["p99"] < 1100
    assert result.latency_ms["p99"] == pytest.approx(905.368222)
    assert 900 < result.latency_ms["max"] < 1100
    assert result.achieved_rps == pytest.approx(1000, rel=0.01)


def test_frozen_server_without_correction_hides_the_freeze_below_p999() -> None:
    """The same freeze without --latency-correction: only the 10 requests on the wire during
    the freeze see it, so p99 is a few ms (coordinated omission) and only p99.9 shows it."""
    result = _parse("frozen_uncorrected")
    assert result.latency_ms["p99"] < 10
    assert result.latency_ms["p999"] > 900


def test_refused_connections_are_connect_errors() -> None:
    """A closed loopback port: every arrival is "Connection refused (os error 111)", a connect
    error; no response, so no latency (None, never 0 ms) and achieved 0."""
    result = _parse("refused", offered_rps=200)
    assert result.errors["connect"] == result.requests == 200
    assert result.responses == result.successes == 0
    assert result.error_distribution == {"Connection refused (os error 111)": 200}
    assert all(value is None for value in result.latency_ms.values())
    assert result.achieved_rps == 0


def test_connection_closed_without_answer_is_a_read_error() -> None:
    """A server that closes the connection on each request: hyper's "connection closed before
    message completed", a read error."""
    result = _parse("closed")
    assert result.errors["read"] == 200
    assert result.errors["connect"] == 0


def test_non_2xx_responses_count_by_status_and_are_not_successes() -> None:
    """Every 4th answer 503: by status 300 x 200 and 100 x 503; non_2xx 100; achieved counts
    only the 2xx; the 503s are responses, so they are latency samples (as in oha and wrk)."""
    result = _parse("non2xx", db=True, offered_rps=400)
    assert result.by_status == {200: 300, 503: 100}
    assert result.errors["non_2xx"] == 100
    assert result.successes == 300
    assert result.responses == 400
    assert result.achieved_rps == pytest.approx(300 / 1.001920503)
    assert len(per_request_latencies_ms(OHA / "non2xx.db.gz")) == 400


def test_timeouts_are_timeout_errors_without_latency() -> None:
    """A 300 ms answer against -t 100ms at 50 req/s for 2 s: 94 "timeout" errors, the 5
    requests in flight at the deadline aborted; the 2 arrivals still queued are in no count."""
    result = _parse("timeouts", offered_rps=50)
    assert result.errors["timeout"] == 94
    assert result.aborted == 5
    assert result.requests == 99
    assert all(value is None for value in result.latency_ms.values())


def test_requests_in_flight_at_the_deadline_are_aborted_not_errors() -> None:
    """A 2 s answer in a 1 s run over 5 connections: one "aborted due to deadline" per busy
    connection, kept apart from the server's errors."""
    result = _parse("deadline")
    assert result.aborted == 5
    assert sum(result.errors.values()) == 0
    assert result.requests == 5


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("Connection refused (os error 111)", "connect"),
        ("Cannot assign requested address (os error 99)", "connect"),
        ("Too many open files (os error 24)", "connect"),
        ("connection closed before message completed", "read"),
        ("connection error", "read"),
        ("error writing a body to connection", "write"),
        ("Broken pipe (os error 32)", "write"),
        ("timeout", "timeout"),
        ("aborted due to deadline", "deadline"),
        ("No record returned from DNS", "other"),
    ],
)
def test_error_strings_map_to_classes(message: str, kind: str) -> None:
    """oha's error texts (its ClientError's Display) into the record's classes."""
    assert classify_error(message) == kind


def test_merge_pools_every_sample_of_every_trial() -> None:
    """Merging the normal and the frozen run's files gives the percentiles of all 13,000
    samples together, not the median or mean of each trial's percentiles."""
    merged = merge_latency_ms([OHA / "normal.db.gz", OHA / "frozen.db.gz"])
    samples = per_request_latencies_ms(OHA / "normal.db.gz") + per_request_latencies_ms(
        OHA / "frozen.db.gz"
    )
    assert len(samples) == 13_000
    assert merged == latency_summary_ms(samples)
    ordered = sorted(samples)
    assert merged["p99"] == ordered[int(0.99 * 13_000)]
    assert merged["max"] == pytest.approx(1002.010877)
    frozen_p99 = _parse("frozen", db=True).latency_ms["p99"]
    normal_p99 = _parse("normal", db=True).latency_ms["p99"]
    assert merged["p99"] != (frozen_p99 + normal_p99) / 2


def test_percentiles_follow_ohas_rule() -> None:
    """sorted[floor(p/100 * n)]: for 1..10, p50 is 6, p90 10, p99 10; no samples: all None."""
    summary = latency_summary_ms([float(x) for x in range(10, 0, -1)])
    assert (summary["p50"], summary["p90"], summary["p99"], summary["max"]) == (6, 10, 10, 10)
    assert summary["mean"] == 5.5
    assert set(latency_summary_ms([]).values()) == {None}


def test_unreadable_output_raises_parse_error(tmp_path: Path) -> None:
    """Text that is not oha's JSON, a file that is not sqlite, and a database of another run
    (a different number of responses) are refused with OhaParseError, a ValueError."""
    with pytest.raises(OhaParseError):
        parse_oha("Summary:\n  Success rate: 100.00%\n")
    with pytest.raises(OhaParseError):
        parse_oha('{"summary": {}}')
    not_db = tmp_path / "x.db"
    not_db.write_bytes(b"not a database")
    with pytest.raises(OhaParseError):
        per_request_latencies_ms(not_db)
    with pytest.raises(OhaParseError, match="not the same run"):
        parse_oha((OHA / "normal.json").read_text(), OHA / "non2xx.db.gz")
    assert issubclass(OhaParseError, ValueError)


def test_a_database_with_two_runs_is_refused(tmp_path: Path) -> None:
    """oha appends to an existing --db-url table: a file holding two runs is an error, not a
    silent mix."""
    db = tmp_path / "two.db"
    db.write_bytes(gzip.decompress((OHA / "non2xx.db.gz").read_bytes()))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE oha SET run = run + 1 WHERE rowid % 2 = 0")
    conn.close()
    with pytest.raises(OhaParseError, match="2 oha runs"):
        per_request_latencies_ms(db)


def test_oha_binary_is_the_one_setup_builds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """.bench/tools/bin/oha; when absent, the error says how to build it; the module's pin
    equals the one bench/setup.sh builds."""
    monkeypatch.setattr(oha_module, "STATE", tmp_path / ".bench")
    with pytest.raises(LoadError, match="OHA=1"):
        oha_binary()
    binary = tmp_path / ".bench" / "tools" / "bin" / "oha"
    binary.parent.mkdir(parents=True)
    binary.write_text("")
    assert oha_binary() == binary
    setup = (Path(__file__).resolve().parents[2] / "bench" / "setup.sh").read_text()
    assert f"oha_version={OHA_VERSION}\n" in setup
