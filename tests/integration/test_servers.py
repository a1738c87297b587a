"""Every declared server starts on the real stack, passes verification, and stops clean."""

import dataclasses
import os
import sys
from pathlib import Path

import psutil
import pytest

from bench.core import registry
from bench.host.procs import ProcessTable
from bench.host.venv import ensure_venv
from bench.stack import verify
from bench.stack.components import Database, Stack

pytestmark = pytest.mark.integration
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _group_members(pgid: int) -> list[int]:
    return [p.pid for p in psutil.process_iter() if _pgid(p.pid) == pgid]


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


@pytest.mark.parametrize("server_id", registry.server_ids())
def test_server_verifies_and_stops_clean(
    server_id: str, stack: Stack, db: Database, table: ProcessTable
) -> None:
    """Start from the declaration, verify every route, stop: no process of its group remains."""
    spec = registry.load_spec(registry.SERVERS_DIR / server_id / "server.toml")
    python = ensure_venv(spec) if spec.requirements else Path(sys.executable)
    knobs = registry.resolve_knobs(spec, 2, {})
    server = stack.start_server(spec, knobs, python, db, f"{server_id}.log")
    pgid = server.proc.pid
    try:
        assert len(_group_members(pgid)) >= 1 + (knobs.get("workers", 1) > 1)
        if spec.app == "static":
            assert verify.verify_static(server.port).checked == ["/plaintext"]
        else:
            result = verify.verify_server(server.port, db)
            assert "/fortunes" in result.checked and "/updates?n=5" in result.checked
            assert result.db_queries >= 1 + 1 + 500 + 20
    finally:
        stack.stop_server(server)
    assert _group_members(pgid) == []
    assert server.proc not in table.procs


def _serve_broken(stack: Stack, db: Database, target: str):  # type: ignore[no-untyped-def]
    """gunicorn-sync serving one of the deliberately wrong apps of tests/fixtures/broken_app."""
    spec = registry.load_spec(registry.SERVERS_DIR / "gunicorn-sync" / "server.toml")
    argv = tuple(f"tests.fixtures.broken_app:{target}" if a == "{app}" else a for a in spec.argv)
    broken = dataclasses.replace(spec, argv=argv)
    knobs = registry.resolve_knobs(broken, 1, {"workers": 1})
    return stack.start_server(broken, knobs, ensure_venv(spec), db, f"broken-{target}.log")


def test_verification_fails_on_a_wrong_body(stack: Stack, db: Database) -> None:
    """An app that leaves one fortune unescaped is refused, and the error names /fortunes."""
    server = _serve_broken(stack, db, "app")
    try:
        with pytest.raises(verify.VerifyError, match="/fortunes") as exc:
            verify.verify_server(server.port, db)
        assert "/plaintext" not in str(exc.value)
    finally:
        stack.stop_server(server)


def test_verification_fails_when_the_db_is_not_queried(stack: Stack, db: Database) -> None:
    """An app that answers /db from a cache instead of the database fails the pgbouncer check."""
    server = _serve_broken(stack, db, "cached")
    try:
        with pytest.raises(verify.VerifyError, match="pgbouncer saw"):
            verify.verify_server(server.port, db)
    finally:
        stack.stop_server(server)


def test_a_foreign_server_on_our_port_is_refused(
    stack: Stack, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If another program holds the port and answers like the app, the harness says so and
    does not benchmark it in our server's name."""
    import http.server
    import threading

    from bench.host.procs import StartError
    from bench.stack import components as stack_module

    class Impostor(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "13")
            self.end_headers()
            self.wfile.write(b"Hello, World!")

        def log_message(self, *args: object) -> None:
            pass

    impostor = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Impostor)
    thread = threading.Thread(target=impostor.serve_forever, daemon=True)
    thread.start()
    try:
        port = impostor.server_address[1]
        monkeypatch.setattr(stack_module.ready, "free_port", lambda host="127.0.0.1": port)
        spec = registry.load_spec(registry.SERVERS_DIR / "granian" / "server.toml")
        knobs = registry.resolve_knobs(spec, 1, {})
        with pytest.raises(StartError, match="another program took the port"):
            stack.start_server(spec, knobs, ensure_venv(spec), db, "impostor.log")
    finally:
        impostor.shutdown()
        impostor.server_close()
