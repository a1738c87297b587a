"""Verification of the user's app (APP=) against its route list (APP_ROUTES), before any load.

Input: a host:port serving the app, its Routes, and (optionally) the running Database.
Output: the record's `verify` ({checked, warnings, db_queries}); VerifyError naming every
route that answered something else (status, body substring, framing). The expected answers
are the user's (their route list): the harness knows nothing else about their app.
"""

from __future__ import annotations

from bench.core.app import Route
from bench.core.scenario import Response
from bench.host.client import PLAIN, Client
from bench.stack.components import Database
from bench.stack.verify import VerifyError, fetch

TIMEOUT_S = 30.0


def send(
    port: int,
    route: Route,
    host: str = "127.0.0.1",
    timeout_s: float = TIMEOUT_S,
    client: Client = PLAIN,
) -> Response:
    """One request of the route on a fresh connection over the client's protocol (an empty
    body for POST and the like)."""
    return fetch(port, route.path, host, timeout_s, route.method, client)


def check_route(route: Route, resp: Response) -> list[str]:
    """What is wrong with one answer: status, body substring, framing."""
    where = f"route {route.name!r} ({route.method} {route.path})"
    if resp.status != route.status:
        return [f"{where}: status {resp.status}, expected {route.status}: {resp.body[:120]!r}"]
    problems = []
    if route.body is not None and route.body.encode() not in resp.body:
        problems.append(f"{where}: body lacks {route.body!r}: {resp.body[:120]!r}")
    length = resp.headers.get("content-length")
    # HTTP/2 frames the body itself: neither header is needed there
    chunked = "chunked" in resp.headers.get("transfer-encoding", "") or resp.http_version == "2"
    if route.method != "HEAD" and length is not None and int(length) != len(resp.body):
        problems.append(f"{where}: Content-Length {length} but {len(resp.body)} bytes")
    elif length is None and not chunked and resp.status not in (204, 304):
        problems.append(f"{where}: neither Content-Length nor chunked encoding")
    return problems


def verify_routes(
    port: int,
    routes: tuple[Route, ...],
    db: Database | None = None,
    host: str = "127.0.0.1",
    client: Client = PLAIN,
) -> dict[str, object]:
    """Every route once, in file order; VerifyError listing every failure."""
    checked: list[str] = []
    problems: list[str] = []
    before = db.pgbouncer_stats() if db is not None else {}
    for route in routes:
        try:
            resp = send(port, route, host, client=client)
        except OSError as exc:
            problems.append(f"route {route.name!r} ({route.method} {route.path}): {exc}")
            continue
        found = check_route(route, resp)
        problems += found
        if not found:
            checked.append(f"{route.method} {route.path}")
    if problems:
        raise VerifyError("; ".join(problems))
    result: dict[str, object] = {"checked": checked, "warnings": []}
    if db is not None:
        after = db.pgbouncer_stats()
        key = "total_query_count"
        # What the routes cost in queries through pgbouncer: the app's DB settings reach it.
        result["db_queries"] = after.get(key, 0) - before.get(key, 0)
    return result
