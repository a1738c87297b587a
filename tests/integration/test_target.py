"""TARGET=http://host:port: only the load tool runs here; the server is someone else's."""

from pathlib import Path

import pytest

from bench.core import registry
from bench.host.venv import ensure_venv
from bench.stack.components import Database, Stack
from tests.conftest import stack_processes
from tests.integration.conftest import run_bench, trial_records

pytestmark = pytest.mark.integration


def test_target_verifies_and_loads_a_server_started_elsewhere(
    stack: Stack, db: Database, tmp_path: Path
) -> None:
    """A granian started by the test (standing in for another machine): the harness starts
    no database, proxy or server of its own, verifies the routes (rows for shape only),
    measures, and says that server-side samples are absent."""
    spec = registry.load_spec(registry.SERVERS_DIR / "granian" / "server.toml")
    server = stack.start_server(
        spec, registry.resolve_knobs(spec, 1, {}), ensure_venv(spec), db, "target.log"
    )
    ours = set(stack_processes())
    try:
        target = f"http://127.0.0.1:{server.port}"
        results = tmp_path / "results"
        proc = run_bench(
            results,
            server="granian",
            scenario="plaintext,db",
            concurrency=4,
            duration=2,
            warmup=0,
            trials=1,
            target=target,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "starting PostgreSQL" not in proc.stderr
        records = trial_records(results)
        assert sorted(r["scenario"] for r in records) == ["db", "plaintext"]
        for rec in records:
            assert rec["status"] == "ok" and rec["target"] == target and rec["rps"] > 10
            assert rec["resources"]["server_cpu_pct"] is None
            assert rec["resources"]["load_cpu_pct"] is not None
            assert rec["sockets"] is None
            assert any("remote target" in w for w in rec["verify"]["warnings"])
        # everything the harness started has stopped; the "remote" server is still ours
        assert set(stack_processes()) == ours
    finally:
        stack.stop_server(server)


def test_target_that_is_not_a_url_is_refused(tmp_path: Path) -> None:
    """TARGET=localhost:80 (no scheme): exit 2, one line, nothing written."""
    proc = run_bench(tmp_path / "r", target="localhost:80")
    assert proc.returncode == 2 and "is not http://host:port" in proc.stderr
    assert not (tmp_path / "r").exists()
