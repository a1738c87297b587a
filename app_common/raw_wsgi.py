"""The raw WSGI app: /plaintext, /json and /db with no framework (APP_FLAVOR=raw).

The same contract as the Flask app (app_common/wsgi.py): the same bodies, status codes and
Content-Type, Content-Length set, the same parameterized query through pgbouncer from a pool
per process; every other path answers 404. What a server costs per request is measured on
it: no routing table, no request object, no response object between the server and the bytes.
Configured by the environment like the Flask app (APP_DATABASE_URL, APP_POOL_SIZE).
"""

from __future__ import annotations

import json
import os
import random
import threading
from collections.abc import Callable, Iterable
from typing import Any

from app_common import common

TEXT = "text/plain; charset=utf-8"  # what Flask sends for mimetype="text/plain"
JSON = "application/json"
NOT_FOUND = b"Not Found"

StartResponse = Callable[..., Any]
Answer = tuple[str, str, bytes]  # status line, Content-Type, body

_lock = threading.Lock()
_pools: dict[int, Any] = {}


def db_pool() -> Any:
    """This process's pool of connections to pgbouncer, made on first use after fork."""
    pid = os.getpid()  # a pool made before fork would be shared by every worker
    pool = _pools.get(pid)
    if pool is None:
        with _lock:
            pool = _pools.get(pid)
            if pool is None:
                # Imported here: the in-process tests serve /plaintext without psycopg.
                from psycopg_pool import ConnectionPool

                pool = ConnectionPool(
                    common.database_url(),
                    min_size=1,
                    max_size=common.pool_size(),
                    # as the Flask app: no server-side prepared statements behind pgbouncer's
                    # transaction pooling, autocommit so a read is one round trip
                    kwargs={"prepare_threshold": None, "autocommit": True},
                    open=True,
                )
                _pools[pid] = pool
    return pool


def _json(data: object) -> Answer:
    return "200 OK", JSON, json.dumps(data, separators=(",", ":")).encode()


def plaintext() -> Answer:
    """Fixed text body."""
    return "200 OK", TEXT, common.PLAINTEXT


def json_route() -> Answer:
    """A fresh object serialised per request."""
    return _json({"message": common.JSON_MESSAGE})


def db() -> Answer:
    """One random world row, by the shared parameterized SELECT."""
    ident = random.randint(1, common.WORLD_ROWS)
    with db_pool().connection() as conn, conn.cursor() as cur:
        cur.execute(common.SELECT_WORLD, (ident,))
        found, number = cur.fetchone()
    return _json({"id": found, "randomNumber": number})


def interpreter() -> Answer:
    """The interpreter serving it, which the harness reads into records."""
    return _json(common.interpreter())


def health() -> Answer:
    """Touches nothing."""
    return "200 OK", TEXT, b"ok"


ROUTES: dict[str, Callable[[], Answer]] = {
    "/plaintext": plaintext,
    "/json": json_route,
    "/db": db,
    "/interpreter": interpreter,
    "/health": health,
}


def answer(method: str, path: str) -> Answer:
    """The status, Content-Type and body for one request line (404 and 405 as Flask's)."""
    route = ROUTES.get(path)
    if route is None:
        return "404 NOT FOUND", TEXT, NOT_FOUND
    if method not in ("GET", "HEAD"):
        return "405 METHOD NOT ALLOWED", TEXT, b"Method Not Allowed"
    return route()


def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """The WSGI callable."""
    method = environ.get("REQUEST_METHOD", "GET")
    status, content_type, body = answer(method, environ.get("PATH_INFO", ""))
    headers = [("Content-Type", content_type), ("Content-Length", str(len(body)))]
    if status.startswith("405"):
        headers.append(("Allow", "GET, HEAD"))
    start_response(status, headers)
    return [b""] if method == "HEAD" else [body]
