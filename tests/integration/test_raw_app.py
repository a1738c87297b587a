"""APP_FLAVOR=raw on the real stack: granian started with app_common's raw WSGI callable,
verified on the raw app's routes (/plaintext, /json, /db through pgbouncer), measured briefly,
its records saying app_flavor "raw" and no framework."""

from pathlib import Path

import pytest

from bench.core import registry
from bench.host.procs import ProcessTable
from bench.host.venv import ensure_venv
from bench.stack import verify
from bench.stack.components import Database, Stack
from tests.conftest import stack_processes
from tests.integration.conftest import run_bench, trial_records

pytestmark = pytest.mark.integration


def test_granian_and_uvicorn_serve_the_raw_app_verified_and_recorded(tmp_path: Path) -> None:
    """Each server's argv names app_common's raw module of its kind (WSGI, ASGI); /plaintext
    and /db verify and measure; every record is the raw app's."""
    results = tmp_path / "results"
    before = set(stack_processes())
    done = run_bench(
        results,
        server="granian,uvicorn",
        scenario="plaintext,db",
        app_flavor="raw",
        duration=1,
        warmup=0,
        trials=1,
        concurrency=2,
    )
    assert done.returncode == 0, done.stderr
    records = trial_records(results)
    assert sorted((r["server"], r["scenario"]) for r in records) == [
        ("granian", "db"),
        ("granian", "plaintext"),
        ("uvicorn", "db"),
        ("uvicorn", "plaintext"),
    ]
    for rec in records:
        assert rec["status"] == "ok", rec["reason"]
        assert (rec["app_flavor"], rec["app_framework"]) == ("raw", None)
        assert registry.RAW_APPS[rec["app"]] in rec["metadata"]["argv"]
        # the raw app's routes were verified, and only those
        assert {"/plaintext", "/json", "/db"} <= set(rec["verify"]["checked"])
        assert "/fortunes" not in rec["verify"]["checked"]
        assert rec["requests"] > 0
    for db in (r for r in records if r["scenario"] == "db"):
        assert db["db"]["queries"] >= db["requests"] * 0.9  # each /db went through pgbouncer
    assert set(stack_processes()) <= before, "a process outlived the run"


@pytest.mark.parametrize("server_id", ["granian", "uvicorn"])
def test_the_raw_app_starts_and_verifies_on_the_stack(
    server_id: str, stack: Stack, db: Database, table: ProcessTable
) -> None:
    """A WSGI server and an ASGI server started with flavor raw: the raw app's routes pass
    the unchanged checks (/db's rows against the table, pgbouncer's query count), and a
    framework route is a 404 there."""
    spec = registry.load_spec(registry.SERVERS_DIR / server_id / "server.toml")
    knobs = registry.resolve_knobs(spec, 1, {})
    server = stack.start_server(
        spec, knobs, ensure_venv(spec), db, f"{server_id}-raw.log", flavor=registry.RAW
    )
    try:
        assert registry.RAW_APPS[spec.app] in server.argv
        result = verify.verify_server(server.port, db, scenarios=registry.RAW_SCENARIOS)
        assert result.checked == ["/plaintext", "/json", "/db"]
        assert result.db_queries >= 1
        assert verify.fetch(server.port, "/fortunes").status == 404
    finally:
        stack.stop_server(server)
