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


def test_wsload_paced_by_a_rate_sends_it_over_all_connections(tmp_path: Path) -> None:
    """wsload run --rate 400 over 4 connections for 1 s against its own echo server (what
    make capacity's steps ask): about 400 messages sent, every one back and verified, the
    offered rate the one asked, the intended send times 2.5 ms apart in turn over the
    connections (a few seconds)."""
    import itertools
    import json
    import subprocess
    import time

    from bench.host.procs import ProcessTable
    from bench.host.ready import free_port
    from bench.host.venv import make_venv
    from bench.load.wsload import WSLOAD_DIR

    python = make_venv("_wsload", WSLOAD_DIR / "requirements.txt", log=tmp_path / "venv.log")
    script = str(WSLOAD_DIR / "wsload.py")
    table, port = ProcessTable(), free_port()
    try:
        table.start("echo", [str(python), script, "serve", "--port", str(port)], tmp_path / "e")
        deadline = time.monotonic() + 20
        while "listening" not in (tmp_path / "e").read_text():
            assert time.monotonic() < deadline, "wsload's echo server never listened"
            time.sleep(0.05)
        out, csv = tmp_path / "run.json", tmp_path / "run.csv"
        url = f"ws://127.0.0.1:{port}/ws/echo?bytes=64&rate=1"
        argv = [str(python), script, "run", url, "--connections", "4", "--duration", "1"]
        argv += ["--rate", "400", "--out", str(out), "--per-message", str(csv)]
        subprocess.run(argv, check=True, timeout=60)
    finally:
        table.stop_all()
    data = json.loads(out.read_text())
    assert data["offered_per_s"] == 400 and data["mode"] == "echo"
    assert abs(data["sent"] - 400) <= 2 and data["counted"] == data["sent"]
    assert data["lost"] == 0 and data["mismatched"] == 0
    intended = sorted(float(line.split(",")[0]) for line in csv.read_text().splitlines()[1:])
    gaps = [b - a for a, b in itertools.pairwise(intended)]
    assert all(abs(gap - 2.5) < 0.01 for gap in gaps)
