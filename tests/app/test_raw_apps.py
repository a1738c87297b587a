"""The raw apps (APP_FLAVOR=raw) in-process: the WSGI callable called with a minimal environ,
the ASGI app with a scope and send/receive. Their answers pass the same checks the harness
verifies a server with (bench.core.scenario's, bench.stack.verify.check_headers); /db runs the
shared parameterized SELECT on a fake pool (no database here); other paths answer 404."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from app_common import common, raw_asgi, raw_wsgi
from bench.core.registry import RAW_SCENARIOS
from bench.core.scenario import SCENARIOS, Facts, Response
from bench.stack.verify import Verification, check_headers

WORLD = {ident: ident % 97 + 1 for ident in range(1, common.WORLD_ROWS + 1)}


class FakeCursor:
    """Answers SELECT_WORLD from WORLD and remembers what it was asked."""

    def __init__(self, asked: list[tuple[str, tuple]]) -> None:
        self.asked = asked
        self.row: tuple[int, int] | None = None

    def execute(self, sql: str, params: tuple) -> None:
        self.asked.append((sql, params))
        self.row = (params[0], WORLD[params[0]])

    def fetchone(self) -> tuple[int, int] | None:
        return self.row

    def __enter__(self) -> FakeCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class FakePool:
    """A pool whose connections hand out FakeCursors."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, tuple]] = []

    @contextlib.contextmanager
    def connection(self) -> Iterator[FakePool]:
        yield self

    def cursor(self) -> FakeCursor:
        return FakeCursor(self.asked)


class AsyncFakeCursor(FakeCursor):
    """FakeCursor for psycopg's async API."""

    async def execute(self, sql: str, params: tuple) -> None:  # type: ignore[override]
        FakeCursor.execute(self, sql, params)

    async def fetchone(self) -> tuple[int, int] | None:  # type: ignore[override]
        return self.row

    async def __aenter__(self) -> AsyncFakeCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class AsyncFakePool(FakePool):
    """FakePool for psycopg_pool's AsyncConnectionPool."""

    @contextlib.asynccontextmanager
    async def connection(self):  # type: ignore[override]
        yield self

    def cursor(self) -> AsyncFakeCursor:  # type: ignore[override]
        return AsyncFakeCursor(self.asked)


@pytest.fixture
def pools(monkeypatch: pytest.MonkeyPatch) -> tuple[FakePool, AsyncFakePool]:
    """This process's pools replaced by fakes."""
    sync, aio = FakePool(), AsyncFakePool()
    monkeypatch.setitem(raw_wsgi._pools, os.getpid(), sync)
    monkeypatch.setitem(raw_asgi._pools, os.getpid(), aio)
    return sync, aio


def call_wsgi(path: str, method: str = "GET") -> Response:
    """One request to the raw WSGI callable."""
    started: list[tuple[str, list[tuple[str, str]]]] = []
    body = b"".join(
        raw_wsgi.app(
            {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": ""},
            lambda status, headers: started.append((status, headers)),
        )
    )
    status, headers = started[0]
    return Response(int(status[:3]), {k.lower(): v for k, v in headers}, body, 0.0)


def call_asgi(path: str, method: str = "GET") -> Response:
    """One request to the raw ASGI app."""
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "query_string": b""}
    asyncio.run(raw_asgi.app(scope, receive, send))
    start, body = sent
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return Response(start["status"], headers, body["body"], 0.0)


CALLS = {"wsgi": call_wsgi, "asgi": call_asgi}


@pytest.mark.parametrize("kind", CALLS)
@pytest.mark.parametrize("name", RAW_SCENARIOS)
def test_each_raw_route_passes_the_harness_checks(
    kind: str, name: str, pools: tuple[FakePool, AsyncFakePool]
) -> None:
    """/plaintext, /json and /db answer 200 with the body, Content-Type and Content-Length
    the scenario's checks ask of the framework apps."""
    for check in SCENARIOS[name].checks:
        resp = CALLS[kind](check.path)
        result = Verification()
        assert resp.status == 200
        assert check_headers(resp, check.content_type, check.path, result) == []
        assert check.body(resp, Facts(WORLD, lambda: WORLD)) == []


@pytest.mark.parametrize("kind", CALLS)
def test_db_runs_the_shared_parameterized_select(
    kind: str, pools: tuple[FakePool, AsyncFakePool]
) -> None:
    """One query per /db: common.SELECT_WORLD with the id as a parameter, within the table."""
    pool = pools[0] if kind == "wsgi" else pools[1]
    for _ in range(20):
        CALLS[kind]("/db")
    assert len(pool.asked) == 20
    assert all(sql == common.SELECT_WORLD for sql, _ in pool.asked)
    assert all(1 <= params[0] <= common.WORLD_ROWS for _, params in pool.asked)


@pytest.mark.parametrize("kind", CALLS)
@pytest.mark.parametrize("path", ["/queries", "/fortunes", "/no-such-route", "/", "/db/x"])
def test_other_paths_answer_404(kind: str, path: str) -> None:
    """A path the raw app does not serve is a 404 with a framed body (the harness's
    unknown-route check), never a framework route."""
    resp = CALLS[kind](path)
    assert resp.status == 404
    assert int(resp.headers["content-length"]) == len(resp.body)


@pytest.mark.parametrize("kind", CALLS)
def test_another_method_is_405_and_head_has_no_body(kind: str) -> None:
    """POST on a served path: 405 with Allow; HEAD: the GET's headers, no body."""
    post = CALLS[kind]("/plaintext", "POST")
    assert post.status == 405 and post.headers["allow"] == "GET, HEAD"
    head = CALLS[kind]("/plaintext", "HEAD")
    assert head.status == 200 and head.body == b""
    assert head.headers["content-length"] == str(len(common.PLAINTEXT))


def test_asgi_lifespan_completes_and_a_websocket_is_refused() -> None:
    """Servers that send lifespan events get them completed; a WebSocket is closed."""
    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    sent: list[dict] = []

    async def receive() -> dict:
        return next(messages)

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(raw_asgi.app({"type": "lifespan"}, receive, send))
    assert [m["type"] for m in sent] == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    sent.clear()
    asyncio.run(raw_asgi.app({"type": "websocket", "path": "/ws/echo"}, receive, send))
    assert sent == [{"type": "websocket.close", "code": 1000}]


def test_the_raw_apps_import_no_framework() -> None:
    """Neither raw module imports Flask, Quart or Werkzeug (read from the source)."""
    for module in (raw_wsgi, raw_asgi):
        text = Path(str(module.__file__)).read_text().lower()
        assert not any(f"import {name}" in text for name in ("flask", "quart", "werkzeug"))
