"""bench.observe.lifecycle over real captured runs: oha at 300 req/s on /db for 10 s, SIGHUP to the
server at 5 s (LIFECYCLE=reload): Gunicorn sync (2 workers) stalled ~0.9 s while its new
workers started, Granian (2 workers) respawned them one by one."""

import json
from pathlib import Path

import pytest

from bench.core.outcome import Outcome
from bench.core.record import Record
from bench.load.oha import parse_oha, to_load_result
from bench.observe import lifecycle

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "lifecycle"


def _run(server: str) -> tuple[bytes, dict, Record]:
    requests = (FIXTURES / f"{server}-reload.oha.requests.csv.gz").read_bytes()
    result = to_load_result(
        parse_oha((FIXTURES / f"{server}-reload.oha.json").read_text(), offered_rps=300),
        300,
        10,
        {},
    )
    rec = Record.from_dict(json.loads((FIXTURES / f"{server}-reload.record.json").read_text()))
    return requests, result.errors.to_dict(), rec


def test_per_request_file_is_every_response() -> None:
    """The kept CSV holds one row per response, intended times from 0 over the 10 s window."""
    requests, _errors, rec = _run("gunicorn-sync")
    rows = lifecycle.parse_requests(requests)
    assert len(rows) == rec.requests == 3000
    assert rows[0][0] == 0.0 and 9.9 < rows[-1][0] < 10.0
    assert {status for _, _, status in rows} == {200}


@pytest.mark.parametrize("server", ["gunicorn-sync", "granian"])
def test_failed_is_the_load_tools_count(server: str) -> None:
    """failed = the tool's own failures by class (here none: every arrival got a 200)."""
    requests, errors, _ = _run(server)
    outcome = lifecycle.analyse(requests, errors, 300, 10, 5.0)
    assert outcome["failed"] == sum(outcome["failed_by_class"].values())  # type: ignore[arg-type]
    assert outcome["failed"] == Outcome.of(0, errors).unserved


def test_gunicorn_stall_shows_around_the_reload_and_recovers() -> None:
    """Gunicorn's HUP: p99 within 2 s of the signal far above before; the rate is served again
    within the window, after a disruption."""
    requests, errors, _ = _run("gunicorn-sync")
    outcome = lifecycle.analyse(requests, errors, 300, 10, 5.0)
    before, around = outcome["p99_before_ms"], outcome["p99_around_ms"]
    assert isinstance(before, float) and isinstance(around, float)
    assert around > 5 * before
    recovery = outcome["recovery_s"]
    assert isinstance(recovery, float) and 0 < recovery < 4
    assert outcome["disrupted_s"] > 0  # type: ignore[operator]


def test_granian_recovers_no_later_than_gunicorn() -> None:
    """Granian's respawn (new worker before the old one stops) disturbs less."""
    g_requests, g_errors, _ = _run("granian")
    u_requests, u_errors, _ = _run("gunicorn-sync")
    granian = lifecycle.analyse(g_requests, g_errors, 300, 10, 5.0)
    gunicorn = lifecycle.analyse(u_requests, u_errors, 300, 10, 5.0)
    assert granian["recovery_s"] is not None
    assert granian["recovery_s"] <= gunicorn["recovery_s"]  # type: ignore[operator]
    assert granian["p99_around_ms"] < gunicorn["p99_around_ms"]  # type: ignore[operator]


def test_arrivals_due_per_bin() -> None:
    """At 300 req/s an open-loop tool sends at i/300 s: 150 per half second, 3000 in 10 s."""
    assert lifecycle.due(300, 0, 0.5) == 150
    assert lifecycle.due(300, 0, 10) == 3000
    assert lifecycle.due(7, 0.1, 0.3) == 2  # i = 1 at 0.143 s, i = 2 at 0.286 s
    assert lifecycle.due(7, 0.1, 0.3) + lifecycle.due(7, 0.3, 1.0) == lifecycle.due(7, 0.1, 1.0)


def test_a_window_never_served_again_has_no_recovery() -> None:
    """Responses stop at the signal: recovery None, every later judged bin disrupted."""
    rows = [(i / 100, 5.0, 200) for i in range(500)]  # 100 req/s until 5 s, then nothing
    recovery, disrupted = lifecycle.recovery(rows, 100, 10, 5.0, 50.0)
    assert recovery is None and disrupted == 4.0  # bins 5.0 .. 9.0 (the last second not judged)


def test_the_trigger_fires_once_at_its_second() -> None:
    """The timer calls the function once and notes when; stop() after it is harmless."""
    calls: list[int] = []
    trigger = lifecycle.Trigger(0.05, lambda: calls.append(1))
    trigger.start()
    while trigger.fired_at_s is None:
        pass
    trigger.stop()
    assert calls == [1] and trigger.fired_at_s >= 0.05 and trigger.error is None


def test_a_signal_that_cannot_be_sent_is_an_error_not_a_crash() -> None:
    """The server is gone when the signal is due: the record says so."""

    def gone() -> None:
        raise ProcessLookupError(3, "No such process")

    trigger = lifecycle.Trigger(0.0, gone)
    trigger.start()
    trigger.stop()
    assert trigger.error is not None and "No such process" in trigger.error
