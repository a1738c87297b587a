"""The raw ASGI app: /plaintext, /json and /db with no framework (APP_FLAVOR=raw).

The same contract as the Quart app (app_common/asgi.py): the same bodies, status codes and
Content-Type, Content-Length set, the same parameterized query through pgbouncer from an async
pool per process; every other path answers 404 and a WebSocket is refused. Answers are built
by app_common.raw_wsgi's route table, awaited where a route goes to the database.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections.abc import Awaitable, Callable
from typing import Any

from app_common import common, raw_wsgi

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_lock = asyncio.Lock()
_pools: dict[int, Any] = {}


async def db_pool() -> Any:
    """This process's async pool of connections to pgbouncer, opened on first use in its loop."""
    pid = os.getpid()
    pool = _pools.get(pid)
    if pool is None:
        async with _lock:
            pool = _pools.get(pid)
            if pool is None:
                # Imported here: the in-process tests serve /plaintext without psycopg.
                from psycopg_pool import AsyncConnectionPool

                pool = AsyncConnectionPool(
                    common.database_url(),
                    min_size=1,
                    max_size=common.pool_size(),
                    kwargs={"prepare_threshold": None, "autocommit": True},
                    open=False,
                )
                await pool.open()
                _pools[pid] = pool
    return pool


async def db() -> raw_wsgi.Answer:
    """One random world row, by the shared parameterized SELECT."""
    ident = random.randint(1, common.WORLD_ROWS)
    async with (await db_pool()).connection() as conn, conn.cursor() as cur:
        await cur.execute(common.SELECT_WORLD, (ident,))
        found, number = await cur.fetchone()
    body = json.dumps({"id": found, "randomNumber": number}, separators=(",", ":"))
    return "200 OK", raw_wsgi.JSON, body.encode()


async def answer(method: str, path: str) -> raw_wsgi.Answer:
    """The status, Content-Type and body for one request (the WSGI app's, /db awaited)."""
    if path == "/db" and method in ("GET", "HEAD"):
        return await db()
    return raw_wsgi.answer(method, path)


async def _lifespan(receive: Receive, send: Send) -> None:
    # Nothing to set up: pools open on first use, inside the worker that serves.
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """The ASGI app."""
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    if scope["type"] != "http":
        await send({"type": "websocket.close", "code": 1000})
        return
    method = scope.get("method", "GET")
    status, content_type, body = await answer(method, scope.get("path", ""))
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    if status.startswith("405"):
        headers.append((b"allow", b"GET, HEAD"))
    await send({"type": "http.response.start", "status": int(status[:3]), "headers": headers})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
