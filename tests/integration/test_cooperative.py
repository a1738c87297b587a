"""Cooperative I/O really cooperates: one worker overlaps N waits instead of serialising them.

The classic trap: a DB driver or HTTP client that blocks under gevent/eventlet turns one
worker into a queue. Measured as a ratio in the same run: N concurrent requests to a route
that waits W ms, against one request to it, on a server with exactly one worker process.
Threaded servers (one process, T threads) overlap up to T waits and queue the rest.
"""

import dataclasses
import threading
import time

import pytest

from bench.core import registry
from bench.host.venv import ensure_venv
from bench.stack.components import Database, Stack
from bench.stack.verify import fetch

pytestmark = pytest.mark.integration
N = 8
WAIT_MS = 400
COOPERATIVE = [
    "gunicorn-gevent",
    "gunicorn-eventlet",
    "uvicorn",
    "granian-asgi",
    "gunicorn-uvicorn",
    "hypercorn",
]
# One process, a pool of threads: waits overlap up to the thread count, then queue.
THREADED = ["waitress", "gunicorn-gthread"]


def _concurrent(port: int, path: str, count: int) -> tuple[float, list[int]]:
    """Elapsed seconds for `count` simultaneous GETs, and their statuses."""
    statuses: list[int] = []
    barrier = threading.Barrier(count)

    def one() -> None:
        barrier.wait()
        statuses.append(fetch(port, path, timeout_s=30).status)

    threads = [threading.Thread(target=one) for _ in range(count)]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.monotonic() - start, statuses


def _one_worker(server_id: str, stack: Stack, db: Database):  # type: ignore[no-untyped-def]
    spec = registry.load_spec(registry.SERVERS_DIR / server_id / "server.toml")
    knobs = registry.resolve_knobs(spec, 1, {"workers": 1})
    return stack.start_server(spec, knobs, ensure_venv(spec), db, f"coop-{server_id}.log")


@pytest.mark.parametrize("server_id", COOPERATIVE)
@pytest.mark.parametrize("route", ["/upstream", "/dbwait"])
def test_one_worker_overlaps_waits(server_id: str, route: str, stack: Stack, db: Database) -> None:
    """8 concurrent 400 ms waits on one worker take about one wait, not eight."""
    server = _one_worker(server_id, stack, db)
    try:
        path = f"{route}?ms={WAIT_MS}"
        single, _ = _concurrent(server.port, path, 1)
        together, statuses = _concurrent(server.port, path, N)
        assert statuses == [200] * N
        assert together < 2.5 * single, (
            f"{server_id} {route}: {N} concurrent took {together:.2f} s, one took {single:.2f} s"
        )
    finally:
        stack.stop_server(server)


@pytest.mark.parametrize("server_id", THREADED)
@pytest.mark.parametrize("route", ["/upstream", "/dbwait"])
def test_threads_overlap_waits_up_to_their_count(
    server_id: str, route: str, stack: Stack, db: Database
) -> None:
    """One process with T threads: T concurrent waits take about one wait, 2T take about two."""
    server = _one_worker(server_id, stack, db)
    threads = server.knobs["threads"]
    try:
        path = f"{route}?ms={WAIT_MS}"
        single, _ = _concurrent(server.port, path, 1)
        within, statuses = _concurrent(server.port, path, threads)
        assert statuses == [200] * threads
        assert within < 1.8 * single, (
            f"{server_id} {route}: {threads} concurrent took {within:.2f} s, one {single:.2f} s"
        )
        beyond, statuses = _concurrent(server.port, path, 2 * threads)
        assert statuses == [200] * (2 * threads)
        assert beyond > 1.8 * WAIT_MS / 1000, (
            f"{server_id} {route}: {2 * threads} concurrent took {beyond:.2f} s, {threads} threads"
        )
    finally:
        stack.stop_server(server)


def test_sync_worker_serialises_waits(stack: Stack, db: Database) -> None:
    """The control: gunicorn-sync with one worker really does queue them (so the check above
    can fail)."""
    server = _one_worker("gunicorn-sync", stack, db)
    try:
        single, _ = _concurrent(server.port, f"/upstream?ms={WAIT_MS}", 1)
        together, statuses = _concurrent(server.port, f"/upstream?ms={WAIT_MS}", 4)
        assert statuses == [200] * 4
        assert together > 3.5 * WAIT_MS / 1000 and together > 3 * single
    finally:
        stack.stop_server(server)


def test_eventlet_without_wait_select_blocks_on_the_database(stack: Stack, db: Database) -> None:
    """The trap the eventlet declaration avoids: psycopg's default wait function blocks the
    whole eventlet worker, so concurrent pg_sleep queries run one after another."""
    spec = registry.load_spec(registry.SERVERS_DIR / "gunicorn-eventlet" / "server.toml")
    env = {k: v for k, v in spec.env.items() if k != "PSYCOPG_WAIT_FUNC"}
    trapped = dataclasses.replace(spec, env=env)
    knobs = registry.resolve_knobs(trapped, 1, {"workers": 1})
    server = stack.start_server(trapped, knobs, ensure_venv(spec), db, "coop-trap.log")
    try:
        single, _ = _concurrent(server.port, f"/dbwait?ms={WAIT_MS}", 1)
        together, statuses = _concurrent(server.port, f"/dbwait?ms={WAIT_MS}", 4)
        assert statuses == [200] * 4
        assert together > 3 * single
    finally:
        stack.stop_server(server)
