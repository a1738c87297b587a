"""Verification: every route's status, headers and body, before any load is sent.

Input: a host:port serving app_common (either variant) and the running Database.
Output: a Verification (routes checked, warnings); VerifyError listing every failure otherwise.
The expected answers come from the database and db/ (never from the app's own code), and
pgbouncer's counters must show that the app really queried.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bench import seed
from bench.stack import Database

FORTUNE_EXTRA = (0, "Additional fortune added at request time.")
# TechEmpower's query-count cases: (raw n, expected row count).
QUERY_CASES = [("", 1), ("foo", 1), ("0", 1), ("-1", 1), ("20", 20), ("501", 500)]
UPSTREAM_MS = 50
COMPUTE_N = 1000


class VerifyError(AssertionError):
    """The server answered something other than the app's contract."""


@dataclass
class Response:
    """One HTTP answer, headers lower-cased."""

    status: int
    headers: dict[str, str]
    body: bytes
    elapsed_s: float

    def json(self) -> object:
        """The body parsed as JSON."""
        return json.loads(self.body)


@dataclass
class Verification:
    """What verify_server checked, and what it only warns about."""

    checked: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    db_queries: int = 0


def fetch(port: int, path: str, host: str = "127.0.0.1", timeout_s: float = 10.0) -> Response:
    """GET path on a fresh connection."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    start = time.monotonic()
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
        headers: dict[str, str] = {}
        for key, value in resp.getheaders():
            headers.setdefault(key.lower(), value)
        return Response(resp.status, headers, body, time.monotonic() - start)
    finally:
        conn.close()


def escape_html(text: str) -> str:
    """HTML escaping as Jinja2/MarkupSafe does it (the app's template engine)."""
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&#34;")
        .replace("'", "&#39;")
    )


def expected_fortunes_html() -> bytes:
    """The exact /fortunes page for the seeded fortune table."""
    rows = sorted([*seed.fortunes(), FORTUNE_EXTRA], key=lambda r: r[1])
    cells = "".join(f"<tr><td>{i}</td><td>{escape_html(m)}</td></tr>" for i, m in rows)
    return (
        "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
        f"<tr><th>id</th><th>message</th></tr>{cells}</table></body></html>"
    ).encode()


def check_headers(resp: Response, content_type: str, path: str, result: Verification) -> list[str]:
    """Content-Type and framing are required; Server and Date are noted when missing."""
    problems = []
    got = resp.headers.get("content-type", "")
    if not got.lower().replace(" ", "").startswith(content_type.replace(" ", "")):
        problems.append(f"{path}: Content-Type {got!r}, expected {content_type!r}")
    length = resp.headers.get("content-length")
    if length is None and resp.headers.get("transfer-encoding") != "chunked":
        problems.append(f"{path}: neither Content-Length nor chunked encoding")
    elif length is not None and int(length) != len(resp.body):
        problems.append(f"{path}: Content-Length {length} but {len(resp.body)} bytes")
    for name in ("server", "date"):
        if name not in resp.headers:
            note = f"no {name.title()} header"
            if note not in result.warnings:
                result.warnings.append(note)
    return problems


def _check_row(row: object, world: dict[int, int] | None, where: str) -> list[str]:
    if not (isinstance(row, dict) and set(row) == {"id", "randomNumber"}):
        return [f"{where}: row {row!r} is not {{id, randomNumber}}"]
    ident, number = row["id"], row["randomNumber"]
    if not (isinstance(ident, int) and 1 <= ident <= seed.WORLD_ROWS):
        return [f"{where}: id {ident!r} out of 1..{seed.WORLD_ROWS}"]
    if not (isinstance(number, int) and 1 <= number <= 10_000):
        return [f"{where}: randomNumber {number!r} out of 1..10000"]
    if world is not None and world[ident] != number:
        return [f"{where}: id {ident} has randomNumber {world[ident]} in the DB, got {number}"]
    return []


def _rows(resp: Response, count: int, world: dict[int, int] | None, where: str) -> list[str]:
    try:
        rows = resp.json()
    except ValueError:
        return [f"{where}: body is not JSON: {resp.body[:80]!r}"]
    if not isinstance(rows, list) or len(rows) != count:
        size = len(rows) if isinstance(rows, list) else type(rows).__name__
        return [f"{where}: expected a list of {count} rows, got {size}"]
    return [p for row in rows for p in _check_row(row, world, where)]


def verify_static(port: int, host: str = "127.0.0.1") -> Verification:
    """A server that is not the app (nginx-static) only has to get /plaintext right."""
    result = Verification()
    resp = fetch(port, "/plaintext", host)
    problems = check_headers(resp, "text/plain", "/plaintext", result)
    if resp.status != 200 or resp.body != b"Hello, World!":
        problems.append(f"/plaintext: status {resp.status}, body {resp.body[:80]!r}")
    if problems:
        raise VerifyError("; ".join(problems))
    result.checked.append("/plaintext")
    return result


def verify_server(port: int, db: Database | None, host: str = "127.0.0.1") -> Verification:
    """Check every route of the app on host:port; raise VerifyError listing all failures.

    Without a Database (TARGET=: the server and its database run elsewhere) rows are
    checked for shape and range only, and that is said in the warnings."""
    result = Verification()
    problems: list[str] = []
    world = db.world() if db is not None else None
    stats_before = db.pgbouncer_stats() if db is not None else {}
    if db is None:
        result.warnings.append(
            "remote target: database answers checked for shape and range only, not against "
            "the rows, and pgbouncer's query count not checked"
        )
    expected_selects = 0

    def check(path: str, content_type: str, body_check: Callable[[Response], list[str]]) -> None:
        try:
            resp = fetch(port, path, host)
        except OSError as exc:
            problems.append(f"{path}: request failed: {exc}")
            return
        if resp.status != 200:
            problems.append(f"{path}: status {resp.status}, expected 200: {resp.body[:120]!r}")
            return
        problems.extend(check_headers(resp, content_type, path, result))
        problems.extend(body_check(resp))
        result.checked.append(path)

    check(
        "/plaintext",
        "text/plain",
        lambda r: [] if r.body == b"Hello, World!" else [f"/plaintext: body {r.body[:80]!r}"],
    )

    def json_body(r: Response) -> list[str]:
        try:
            ok = r.json() == {"message": "Hello, World!"}
        except ValueError:
            ok = False
        return [] if ok else [f"/json: body {r.body[:80]!r}"]

    check("/json", "application/json", json_body)

    def one_row(r: Response) -> list[str]:
        try:
            return _check_row(r.json(), world, "/db")
        except ValueError:
            return [f"/db: body is not JSON: {r.body[:80]!r}"]

    check("/db", "application/json", one_row)
    expected_selects += 1
    for raw, count in QUERY_CASES:
        check(
            f"/queries?n={raw}",
            "application/json",
            lambda r, c=count, q=raw: _rows(r, c, world, f"/queries?n={q}"),
        )
        expected_selects += count

    def fortunes_body(r: Response) -> list[str]:
        want = expected_fortunes_html()
        return [] if r.body == want else [f"/fortunes: body differs from {want[:60]!r}..."]

    check("/fortunes", "text/html", fortunes_body)
    expected_selects += 1

    def updates_body(r: Response) -> list[str]:
        found = _rows(r, 5, None, "/updates")
        if found or db is None:
            return found
        now = db.world()
        return [
            f"/updates: id {row['id']} is {now[row['id']]} in the DB, answer said "
            f"{row['randomNumber']}"
            for row in r.json()
            if now[row["id"]] != row["randomNumber"]
        ]

    check("/updates?n=5", "application/json", updates_body)
    expected_selects += 5

    def upstream_body(r: Response) -> list[str]:
        try:
            data = r.json()
        except ValueError:
            return [f"/upstream: body is not JSON: {r.body[:80]!r}"]
        if not isinstance(data, dict) or data.get("upstream_ms") != UPSTREAM_MS:
            return [f"/upstream: body {data!r}"]
        if r.elapsed_s < UPSTREAM_MS / 1000:
            return [f"/upstream: answered in {r.elapsed_s * 1000:.0f} ms < {UPSTREAM_MS} ms"]
        return []

    check(f"/upstream?ms={UPSTREAM_MS}", "application/json", upstream_body)

    def compute_body(r: Response) -> list[str]:
        try:
            data = r.json()
        except ValueError:
            return [f"/compute: body is not JSON: {r.body[:80]!r}"]
        ok = isinstance(data, dict) and data.get("n") == COMPUTE_N
        return [] if ok and isinstance(data.get("result"), int) else [f"/compute: {data!r}"]

    check(f"/compute?n={COMPUTE_N}", "application/json", compute_body)

    try:
        missing = fetch(port, "/no-such-route", host)
        if missing.status != 404:
            problems.append(f"/no-such-route: status {missing.status}, expected 404")
    except OSError as exc:
        problems.append(f"/no-such-route: request failed: {exc}")

    if db is None:
        if problems:
            raise VerifyError("; ".join(problems))
        return result
    # The app must really have gone to the database through pgbouncer.
    stats_after = db.pgbouncer_stats()
    queried = stats_after.get("total_query_count", 0) - stats_before.get("total_query_count", 0)
    result.db_queries = queried
    if queried < expected_selects:
        problems.append(
            f"pgbouncer saw {queried} queries, the DB routes needed at least {expected_selects}"
        )
    if problems:
        raise VerifyError("; ".join(problems))
    return result
