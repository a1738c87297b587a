"""Verification: every route's status, headers and body, before any load is sent.

Input: a host:port serving app_common (either variant) and the running Database.
Output: a Verification (routes checked, warnings); VerifyError listing every failure otherwise.
The expected answers come from the database and db/ (never from the app's own code), and
pgbouncer's counters must show that the app really queried.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from bench.core.scenario import SCENARIOS, Check, Facts, Response
from bench.host import wsclient
from bench.host.client import PLAIN, Client
from bench.stack.components import Database


class VerifyError(AssertionError):
    """The server answered something other than the app's contract."""


@dataclass
class Verification:
    """What verify_server checked, and what it only warns about."""

    checked: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    db_queries: int = 0


def fetch(
    port: int,
    path: str,
    host: str = "127.0.0.1",
    timeout_s: float = 10.0,
    method: str = "GET",
    client: Client = PLAIN,
) -> Response:
    """`method` (GET by default) of path on a fresh connection, over the client's protocol
    (OSError when it answers over another HTTP version); an empty body for methods that
    carry one (POST and the like)."""
    return client.get(host, port, path, timeout_s, method)


INTERPRETER_PATH = "/interpreter"  # app_common's route (both variants): no input
INTERPRETER_KEYS = ("version", "build", "gil_enabled")


def read_interpreter(port: int, host: str = "127.0.0.1", client: Client = PLAIN) -> dict | None:
    """What app_common's /interpreter says inside the serving process (one worker's answer):
    version, build and gil_enabled; None when it does not answer that (not app_common, an
    older app, a failed request): a record then says nothing, never a guess."""
    try:
        resp = fetch(port, INTERPRETER_PATH, host, timeout_s=5.0, client=client)
        data = json.loads(resp.body) if resp.status == 200 else None
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not all(k in data for k in INTERPRETER_KEYS):
        return None
    return {k: data[k] for k in INTERPRETER_KEYS}


def check_headers(resp: Response, content_type: str, path: str, result: Verification) -> list[str]:
    """Content-Type and framing are required; Server and Date are noted when missing."""
    problems = []
    got = resp.headers.get("content-type", "")
    if not got.lower().replace(" ", "").startswith(content_type.replace(" ", "")):
        problems.append(f"{path}: Content-Type {got!r}, expected {content_type!r}")
    length = resp.headers.get("content-length")
    framed = resp.http_version == "2" or resp.headers.get("transfer-encoding") == "chunked"
    if length is None and not framed:
        problems.append(f"{path}: neither Content-Length nor chunked encoding")
    elif length is not None and int(length) != len(resp.body):
        problems.append(f"{path}: Content-Length {length} but {len(resp.body)} bytes")
    for name in ("server", "date"):
        if name not in resp.headers:
            note = f"no {name.title()} header"
            if note not in result.warnings:
                result.warnings.append(note)
    return problems


def verify_static(port: int, host: str = "127.0.0.1", client: Client = PLAIN) -> Verification:
    """A server that is not the app (nginx-static) only has to get /plaintext right."""
    result = Verification()
    resp = fetch(port, "/plaintext", host, client=client)
    problems = check_headers(resp, "text/plain", "/plaintext", result)
    if resp.status != 200 or resp.body != b"Hello, World!":
        problems.append(f"/plaintext: status {resp.status}, body {resp.body[:80]!r}")
    if problems:
        raise VerifyError("; ".join(problems))
    result.checked.append("/plaintext")
    return result


def _ask(port: int, check: Check, host: str, client: Client) -> Response:
    """The check's request: an HTTP GET, or a WebSocket exchange (its `send`)."""
    if check.send is None:
        return fetch(port, check.path, host, client=client)
    return wsclient.exchange(host, port, check.path, check.send, check.receive)


def _checks(
    websocket: bool, client: Client, scenarios: tuple[str, ...] | None = None
) -> list[Check]:
    """Every scenario's checks (`scenarios`: those scenarios' only, the routes an app serves);
    a WebSocket one only for a server that carries WebSockets (its server.toml:
    [protocols.websocket]), asked over HTTP/1.1 in clear text."""
    ws_ok = websocket and not client.protocol.tls and not client.protocol.http2
    return [
        c
        for s in SCENARIOS.values()
        if scenarios is None or s.name in scenarios
        for c in s.checks
        if c.send is None or ws_ok
    ]


def _ask_every_route(
    port: int,
    host: str,
    client: Client,
    websocket: bool,
    facts: Facts,
    result: Verification,
    problems: list[str],
    scenarios: tuple[str, ...] | None = None,
) -> int:
    """Ask each check's route and judge its answer (problems appended, passes recorded in
    `result`); the SELECTs the database routes needed in all."""
    expected_selects = 0
    for check in _checks(websocket, client, scenarios):
        expected_selects += check.selects
        try:
            resp = _ask(port, check, host, client)
        except OSError as exc:
            problems.append(f"{check.path}: request failed: {exc}")
            continue
        want = 200 if check.send is None else 101
        if resp.status != want:
            problems.append(
                f"{check.path}: status {resp.status}, expected {want}: {resp.body[:120]!r}"
            )
            continue
        if check.send is None:
            problems.extend(check_headers(resp, check.content_type, check.path, result))
        problems.extend(check.body(resp, facts))
        result.checked.append(check.path)
    return expected_selects


def _missing_route(port: int, host: str, client: Client) -> list[str]:
    """An unknown route must answer 404."""
    try:
        missing = fetch(port, "/no-such-route", host, client=client)
    except OSError as exc:
        return [f"/no-such-route: request failed: {exc}"]
    return (
        [] if missing.status == 404 else [f"/no-such-route: status {missing.status}, expected 404"]
    )


def verify_server(
    port: int,
    db: Database | None,
    host: str = "127.0.0.1",
    client: Client = PLAIN,
    websocket: bool = False,
    scenarios: tuple[str, ...] | None = None,
) -> Verification:
    """Check every scenario's routes on host:port over the client's protocol (with
    `websocket`, the WebSocket routes too: an echo returns what was sent, a push the declared
    bytes; `scenarios`: only theirs, as the raw app serves); raise VerifyError listing all
    failures.

    Without a Database (TARGET=: the server and its database run elsewhere) rows are
    checked for shape and range only, and that is said in the warnings."""
    result = Verification()
    problems: list[str] = []
    facts = Facts(db.world(), db.world) if db is not None else Facts(None, None)
    stats_before = db.pgbouncer_stats() if db is not None else {}
    if db is None:
        result.warnings.append(
            "remote target: database answers checked for shape and range only, not against "
            "the rows, and pgbouncer's query count not checked"
        )
    expected_selects = _ask_every_route(
        port, host, client, websocket, facts, result, problems, scenarios
    )
    problems.extend(_missing_route(port, host, client))

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
