"""SCENARIO=websocket on the real stack: one short run (DURATION=1, one trial, one server and
a WSGI-only one beside it; a functional check, no speed asserted)."""

from pathlib import Path

import pytest

from bench.core.record import FORMAT_VERSION
from tests.integration.conftest import run_bench, trial_records

pytestmark = pytest.mark.integration


def test_echo_and_push_verified_measured_and_a_wsgi_server_shown_unsupported(
    tmp_path: Path,
) -> None:
    """uvicorn: its WebSocket routes verified before load (the echo returned what was sent,
    the push the declared bytes), both scenarios measured by wsload (LOAD unset) and
    recorded with protocol websocket; gunicorn-sync: unsupported, with its reason; exit 0."""
    results = tmp_path / "results"
    proc = run_bench(
        results,
        server="uvicorn,gunicorn-sync",
        scenario="websocket,websocket-push",
        concurrency=10,
        duration=1,
        warmup=1,
        trials=1,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = trial_records(results)
    measured = [r for r in records if r["server"] == "uvicorn"]
    assert {r["scenario"] for r in measured} == {"websocket", "websocket-push"}
    for rec in measured:
        assert rec["status"] == "ok", rec["reason"]
        assert rec["format_version"] == FORMAT_VERSION and rec["load_tool"] == "wsload"
        assert rec["protocol"] == "websocket" and rec["tls"] is False
        assert {"/ws/echo", "/ws/push?bytes=64&rate=100&count=3"} <= set(rec["verify"]["checked"])
        figures = rec["websocket"]
        assert figures["connections_held"] == 10 and rec["requests"] > 0
        assert rec["errors"]["non_2xx"] == 0 and rec["latency_ms"]["p99"] is not None
        assert figures["load_ceiling_messages_per_s"] > 0
    refused = [r for r in records if r["server"] == "gunicorn-sync"]
    assert refused and {r["status"] for r in refused} == {"unsupported"}
    assert all("no WebSocket interface" in r["reason"] for r in refused)
    summary = (results / "summary.md").read_text()
    assert "unsupported (no WebSocket interface): gunicorn-sync" in summary
