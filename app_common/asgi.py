"""The ASGI variant of the app (Quart, Flask's async twin): the same routes and answers.

Configured like the WSGI variant (APP_DATABASE_URL, APP_UPSTREAM_URL, APP_POOL_SIZE). The DB
pool (psycopg async) and the HTTP client (httpx) belong to the event loop of the process that
serves, so they are created lazily inside it, once per process.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import struct
import time

import httpx
from psycopg_pool import AsyncConnectionPool
from quart import Quart, Response, request, websocket

from app_common import common

app = Quart(__name__)
_state: dict[str, object] = {}
_lock = asyncio.Lock()


async def db_pool() -> AsyncConnectionPool:
    """This process's async pool of connections to pgbouncer."""
    key = f"db-{os.getpid()}"
    pool = _state.get(key)
    if pool is None:
        async with _lock:
            pool = _state.get(key)
            if pool is None:
                pool = AsyncConnectionPool(
                    common.database_url(),
                    min_size=1,
                    max_size=common.pool_size(),
                    # pgbouncer transaction mode: no server-side prepared statements;
                    # autocommit: a read is one round trip.
                    kwargs={"prepare_threshold": None, "autocommit": True},
                    open=False,
                )
                await pool.open()
                _state[key] = pool
    return pool  # type: ignore[return-value]


def http_client() -> httpx.AsyncClient:
    """This process's keep-alive HTTP client for the upstream API."""
    key = f"http-{os.getpid()}"
    client = _state.get(key)
    if client is None:
        size = common.http_pool_size()
        client = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=size, max_keepalive_connections=size),
            timeout=httpx.Timeout(common.MAX_MS / 1000 + 5),
        )
        _state[key] = client
    return client  # type: ignore[return-value]


def _json(data: object, status: int = 200) -> Response:
    return Response(json.dumps(data, separators=(",", ":")), status, mimetype="application/json")


async def _random_rows(cur: object, count: int) -> list[dict[str, int]]:
    rows = []
    for ident in random.sample(range(1, common.WORLD_ROWS + 1), count):
        await cur.execute(common.SELECT_WORLD, (ident,))  # type: ignore[attr-defined]
        found, number = await cur.fetchone()  # type: ignore[attr-defined]
        rows.append({"id": found, "randomNumber": number})
    return rows


@app.get("/plaintext")
async def plaintext() -> Response:
    """Fixed text body."""
    return Response(common.PLAINTEXT, mimetype="text/plain")


@app.get("/json")
async def json_route() -> Response:
    """A fresh object serialised per request."""
    return _json({"message": common.JSON_MESSAGE})


@app.get("/db")
async def db() -> Response:
    """One random world row."""
    async with (await db_pool()).connection() as conn, conn.cursor() as cur:
        return _json((await _random_rows(cur, 1))[0])


@app.get("/queries")
async def queries() -> Response:
    """n random world rows, one query each (n clamped to 1..500)."""
    count = common.clamp_queries(request.args.get("n"))
    async with (await db_pool()).connection() as conn, conn.cursor() as cur:
        return _json(await _random_rows(cur, count))


@app.get("/fortunes")
async def fortunes() -> Response:
    """All fortunes plus one, sorted and HTML-escaped."""
    async with (await db_pool()).connection() as conn, conn.cursor() as cur:
        await cur.execute(common.SELECT_FORTUNES)
        rows = await cur.fetchall()
    return Response(common.render_fortunes(rows), mimetype="text/html")


@app.get("/updates")
async def updates() -> Response:
    """n random rows given new random numbers, written in one batch, in id order."""
    count = common.clamp_queries(request.args.get("n"))
    async with (await db_pool()).connection() as conn, conn.transaction(), conn.cursor() as cur:
        rows = sorted(await _random_rows(cur, count), key=lambda row: row["id"])
        for row in rows:
            row["randomNumber"] = random.randint(1, 10_000)
        await cur.executemany(common.UPDATE_WORLD, [(r["randomNumber"], r["id"]) for r in rows])
    return _json(rows)


@app.get("/upstream")
async def upstream() -> Response:
    """A real HTTP call to the simulated external API, which answers after ms."""
    ms = common.clamp_ms(request.args.get("ms"))
    try:
        resp = await http_client().get(f"{common.upstream_url()}/delay?ms={ms}")
    except httpx.HTTPError as exc:
        return _json({"error": f"upstream failed: {type(exc).__name__}"}, 502)
    return _json({"upstream_ms": ms, "status": resp.status_code})


@app.get("/sleep")
async def sleep() -> Response:
    """asyncio.sleep(ms)."""
    ms = common.clamp_ms(request.args.get("ms"))
    await asyncio.sleep(ms / 1000)
    return _json({"slept_ms": ms})


@app.get("/dbwait")
async def dbwait() -> Response:
    """A query that waits ms inside PostgreSQL (pg_sleep)."""
    ms = common.clamp_ms(request.args.get("ms"))
    async with (await db_pool()).connection() as conn:
        await conn.execute(common.DB_WAIT, (ms / 1000,))
    return _json({"waited_ms": ms})


@app.get("/compute")
async def compute() -> Response:
    """CPU-bound pure Python, inline: it blocks the event loop, which is the point."""
    n = common.clamp_compute(request.args.get("n"))
    return _json({"n": n, "result": common.compute(n)})


@app.websocket("/ws/echo")
async def ws_echo() -> None:
    """Every message back as it came (text as text, bytes as bytes), until the client closes."""
    while True:
        await websocket.send(await websocket.receive())


# A pushed message: its number and the intended send time (Unix s), then padding to `bytes`.
PUSH_HEADER = "!Qd"


def _arg(name: str, low: int, high: int, default: int) -> int:
    try:
        return min(high, max(low, int(websocket.args.get(name, default))))
    except ValueError:
        return default


@app.websocket("/ws/push")
async def ws_push() -> None:
    """`bytes`-byte messages at `rate` per second on a fixed schedule (a late one is sent at
    once, its intended time kept in it); after `count` messages (0: none) the route closes."""
    size = _arg("bytes", struct.calcsize(PUSH_HEADER), 1_000_000, 64)
    rate = _arg("rate", 1, 100_000, 100)
    count = _arg("count", 0, 1_000_000_000, 0)
    padding = b"x" * (size - struct.calcsize(PUSH_HEADER))
    await websocket.accept()
    start = time.time()
    for number in itertools.count() if count == 0 else range(count):
        intended = start + number / rate
        delay = intended - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        await websocket.send(struct.pack(PUSH_HEADER, number, intended) + padding)


@app.get("/interpreter")
async def interpreter() -> Response:
    """The interpreter serving it (no input): version, build, whether the GIL is on."""
    return _json(common.interpreter())


@app.get("/health")
async def health() -> Response:
    """Touches nothing."""
    return Response(b"ok", mimetype="text/plain")


# The ASGI spec makes a scope's `scheme` optional (default "http", "ws" for a WebSocket) and
# Daphne leaves it out of WebSocket scopes; Quart 0.22 reads it unconditionally (KeyError:
# every upgrade answered 500). The spec's default filled in: a no-op for servers that send it.
_quart_asgi_app = app.asgi_app


async def _asgi_app_with_scheme(scope: dict, receive: object, send: object) -> None:
    if scope.get("type") in ("http", "websocket") and not scope.get("scheme"):
        scope = {**scope, "scheme": "ws" if scope["type"] == "websocket" else "http"}
    await _quart_asgi_app(scope, receive, send)  # type: ignore[arg-type]


app.asgi_app = _asgi_app_with_scheme  # type: ignore[method-assign]
