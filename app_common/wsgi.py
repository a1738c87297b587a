"""The WSGI variant of the app (Flask): the routes every WSGI server serves.

Configured by the environment only (APP_DATABASE_URL, APP_UPSTREAM_URL, APP_POOL_SIZE,
APP_DB_CONNECT=per-request for a connection per request instead of the pool). The
DB pool and the HTTP pool are per process and created lazily after fork, since servers fork
their workers after importing the app.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import threading
import time
from collections.abc import Iterator

import psycopg
import urllib3
from flask import Flask, Response, request
from psycopg_pool import ConnectionPool

from app_common import common

app = Flask(__name__)

if os.environ.get("APP_QUIET") == "1":
    # Servers that cannot turn their access log off (the Flask development server logs every
    # request through werkzeug's logger): logging per request would skew the comparison.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)

_lock = threading.Lock()
_state: dict[str, object] = {}


def _per_process(name: str, make: object) -> object:
    # A pool made before fork would be shared by every worker: re-create it per PID.
    key = (name, os.getpid())
    found = _state.get(str(key))
    if found is None:
        with _lock:
            found = _state.get(str(key))
            if found is None:
                found = make()  # type: ignore[operator]
                _state[str(key)] = found
    return found


def db_pool() -> ConnectionPool:
    """This process's pool of connections to pgbouncer."""
    return _per_process(  # type: ignore[return-value]
        "db",
        lambda: ConnectionPool(
            common.database_url(),
            min_size=1,
            max_size=common.pool_size(),
            # pgbouncer in transaction mode cannot keep server-side prepared statements;
            # autocommit: a read is one round trip, not BEGIN + SELECT + COMMIT.
            kwargs={"prepare_threshold": None, "autocommit": True},
            open=True,
        ),
    )


@contextlib.contextmanager
def db_connection() -> Iterator[psycopg.Connection]:
    """A connection for one request: from this process's pool, or (APP_DB_CONNECT=per-request,
    the pool-less app of source 004) a new one, closed after the request."""
    if os.environ.get("APP_DB_CONNECT") == "per-request":
        with psycopg.connect(
            common.database_url(), prepare_threshold=None, autocommit=True
        ) as conn:
            yield conn
    else:
        with db_pool().connection() as conn:
            yield conn


def http_pool() -> urllib3.PoolManager:
    """This process's keep-alive HTTP pool for the upstream API."""
    return _per_process(  # type: ignore[return-value]
        "http",
        lambda: urllib3.PoolManager(
            maxsize=common.http_pool_size(),
            block=True,
            timeout=urllib3.Timeout(total=common.MAX_MS / 1000 + 5),
            retries=False,
        ),
    )


def _json(data: object, status: int = 200) -> Response:
    return Response(json.dumps(data, separators=(",", ":")), status, mimetype="application/json")


def _random_rows(cur: object, count: int) -> list[dict[str, int]]:
    rows = []
    for ident in random.sample(range(1, common.WORLD_ROWS + 1), count):
        cur.execute(common.SELECT_WORLD, (ident,))  # type: ignore[attr-defined]
        found, number = cur.fetchone()  # type: ignore[attr-defined]
        rows.append({"id": found, "randomNumber": number})
    return rows


@app.get("/plaintext")
def plaintext() -> Response:
    """Fixed text body."""
    return Response(common.PLAINTEXT, mimetype="text/plain")


@app.get("/json")
def json_route() -> Response:
    """A fresh object serialised per request."""
    return _json({"message": common.JSON_MESSAGE})


@app.get("/db")
def db() -> Response:
    """One random world row."""
    with db_connection() as conn, conn.cursor() as cur:
        return _json(_random_rows(cur, 1)[0])


@app.get("/queries")
def queries() -> Response:
    """n random world rows, one query each (n clamped to 1..500)."""
    count = common.clamp_queries(request.args.get("n"))
    with db_connection() as conn, conn.cursor() as cur:
        return _json(_random_rows(cur, count))


@app.get("/fortunes")
def fortunes() -> Response:
    """All fortunes plus one, sorted and HTML-escaped."""
    with db_connection() as conn, conn.cursor() as cur:
        cur.execute(common.SELECT_FORTUNES)
        rows = cur.fetchall()
    return Response(common.render_fortunes(rows), mimetype="text/html")


@app.get("/updates")
def updates() -> Response:
    """n random rows given new random numbers, written in one batch, in id order."""
    count = common.clamp_queries(request.args.get("n"))
    with db_connection() as conn, conn.transaction(), conn.cursor() as cur:
        rows = sorted(_random_rows(cur, count), key=lambda row: row["id"])
        for row in rows:
            row["randomNumber"] = random.randint(1, 10_000)
        cur.executemany(common.UPDATE_WORLD, [(r["randomNumber"], r["id"]) for r in rows])
    return _json(rows)


@app.get("/upstream")
def upstream() -> Response:
    """A real HTTP call to the simulated external API, which answers after ms."""
    ms = common.clamp_ms(request.args.get("ms"))
    try:
        resp = http_pool().request("GET", f"{common.upstream_url()}/delay?ms={ms}")
    except urllib3.exceptions.HTTPError as exc:
        return _json({"error": f"upstream failed: {type(exc).__name__}"}, 502)
    return _json({"upstream_ms": ms, "status": resp.status})


@app.get("/sleep")
def sleep() -> Response:
    """time.sleep(ms): cooperative where gevent/eventlet patch time."""
    ms = common.clamp_ms(request.args.get("ms"))
    time.sleep(ms / 1000)
    return _json({"slept_ms": ms})


@app.get("/dbwait")
def dbwait() -> Response:
    """A query that waits ms inside PostgreSQL (pg_sleep)."""
    ms = common.clamp_ms(request.args.get("ms"))
    with db_connection() as conn:
        conn.execute(common.DB_WAIT, (ms / 1000,))
    return _json({"waited_ms": ms})


@app.get("/compute")
def compute() -> Response:
    """CPU-bound pure Python."""
    n = common.clamp_compute(request.args.get("n"))
    return _json({"n": n, "result": common.compute(n)})


@app.get("/interpreter")
def interpreter() -> Response:
    """The interpreter serving it (no input): version, build, whether the GIL is on."""
    return _json(common.interpreter())


@app.get("/health")
def health() -> Response:
    """Touches nothing."""
    return Response(b"ok", mimetype="text/plain")
