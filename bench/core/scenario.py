"""Scenarios: what a run requests, how the answer is verified, what kind of load drives it.

Input: nothing (declarations). Output: SCENARIOS, name -> Scenario, in verification order.
Each Scenario owns its URL path, the checks verify_server runs on its route(s) before any
load (as each TechEmpower test type owns its URL and verify()), and what its load needs: one
URL requested over and over (URL) or a mix of routes played by users (MIX). Load tools say
which of the two they drive (bench.load); no scenario names a tool. Adding a scenario touches
this file only. Expected answers come from the database and db/ (never from the app's own code).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass

from bench.core import seed
from bench.core.protocol import WEBSOCKET

FORTUNE_EXTRA = (0, "Additional fortune added at request time.")
# TechEmpower's query-count cases: (raw n, expected row count).
QUERY_CASES = [("", 1), ("foo", 1), ("0", 1), ("-1", 1), ("20", 20), ("501", 500)]
UPSTREAM_MS = 50
SLEEP_MS = 10  # the sleep scenario's wait: one sync worker serves at most 1000/SLEEP_MS req/s
# How much earlier than asked an event loop's timer may fire, which /sleep and /upstream are
# verified with: uvloop's (libuv's) clock counts whole milliseconds, so asyncio.sleep(0.01)
# returns after 9.x ms at times (MagicStack/uvloop#739; gunicorn-uvicorn answered /sleep in
# 9.7 ms, 2026-11-27), and CPython documents that call_later may fire early by the clock's
# resolution (python/cpython#127859). A route that did not wait at all still fails.
TIMER_SLACK_MS = 1
COMPUTE_N = 1000
# What a scenario's load needs: one URL requested over and over, or a mix of routes (a
# scenario's `path` is then the mix's name). A load tool declares which one it drives.
URL = "url"
MIX = "mix"
# WebSocket connections held open, messages exchanged on them (SCENARIO=websocket): a URL
# path whose query says the message size and each connection's message rate.
WS = "websocket"
# The WebSocket scenarios' messages: WS_BYTES bytes each, WS_RATE per connection per second
# (about 10,000 messages/s at 100 connections: near what one Python process echoes here).
WS_BYTES = 64
WS_RATE = 100
# A pushed message: its sequence number (from 0) and the server's intended send time (Unix s,
# float), big-endian, then padding to the declared size (app_common/asgi.py writes it).
WS_PUSH_HEADER = "!Qd"
# SCENARIO=websocket-idle: connections held with no message either way (rate 0 in the path:
# wsload sends nothing); what it measures is what each open connection costs the server.
WS_IDLE_RATE = 0
WS_PUSH_COUNT = 3  # messages the verification asks of the push route before it closes
# What the verification sends to the echo route: each must come back unchanged, in order.
WS_ECHO_MESSAGES = (b"Hello, World!", bytes(range(256)) * 4, b"\x00")


@dataclass
class Response:
    """One HTTP answer, headers lower-cased."""

    status: int
    headers: dict[str, str]
    body: bytes
    elapsed_s: float
    # The HTTP version it came in: HTTP/2 frames a body itself (no Content-Length needed)
    http_version: str = "1.1"
    # A WebSocket check: the messages received after the upgrade (status 101), in order
    messages: tuple[bytes, ...] = ()

    def json(self) -> object:
        """The body parsed as JSON."""
        return json.loads(self.body)


@dataclass(frozen=True)
class Facts:
    """What a check may compare against: the world table (None for a remote target) and a
    reader of the live table (for /updates)."""

    world: dict[int, int] | None
    read_world: Callable[[], dict[int, int]] | None


@dataclass(frozen=True)
class Check:
    """One verified request: its path, content type, body check and the SELECTs it costs."""

    path: str
    content_type: str
    body: Callable[[Response, Facts], list[str]]
    selects: int = 0
    # A WebSocket check: the messages sent after the upgrade, and how many to read back (the
    # route may close first: fewer is a failure the body check names). None: an HTTP GET.
    send: tuple[bytes, ...] | None = None
    receive: int = 0


@dataclass(frozen=True)
class Scenario:
    """One thing to measure."""

    name: str
    path: str  # what the load tool requests (a mix's name for a MIX scenario)
    about: str
    checks: tuple[Check, ...]
    needs: str = URL  # URL, MIX or WS
    # The protocol the scenario itself carries (bench.core.protocol.SCENARIO_PROTOCOLS: a
    # server declares whether it speaks it); None: the run's PROTOCOL=.
    protocol: str | None = None
    # Whether WARMUP= runs before its measured run (False: the warmup's connections, opened
    # and closed, would leave memory the measured ones reuse: what websocket-idle measures)
    warms: bool = True
    # Whether its requests wait in the worker (a sleep, an upstream call): its capacity is
    # the workers' over the wait, reached with the server's CPU idle (not the machine's
    # jitter: bench.report.capacities ranks it as any other)
    waits: bool = False


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


def _json(resp: Response, where: str) -> tuple[object, list[str]]:
    try:
        return resp.json(), []
    except ValueError:
        return None, [f"{where}: body is not JSON: {resp.body[:80]!r}"]


def _plaintext(r: Response, facts: Facts) -> list[str]:
    return [] if r.body == b"Hello, World!" else [f"/plaintext: body {r.body[:80]!r}"]


def _json_body(r: Response, facts: Facts) -> list[str]:
    data, problems = _json(r, "/json")
    ok = not problems and data == {"message": "Hello, World!"}
    return [] if ok else [f"/json: body {r.body[:80]!r}"]


def _one_row(r: Response, facts: Facts) -> list[str]:
    data, problems = _json(r, "/db")
    return problems or _check_row(data, facts.world, "/db")


def _fortunes(r: Response, facts: Facts) -> list[str]:
    want = expected_fortunes_html()
    return [] if r.body == want else [f"/fortunes: body differs from {want[:60]!r}..."]


def _updates(r: Response, facts: Facts) -> list[str]:
    found = _rows(r, 5, None, "/updates")
    if found or facts.read_world is None:
        return found
    now = facts.read_world()
    return [
        f"/updates: id {row['id']} is {now[row['id']]} in the DB, answer said {row['randomNumber']}"
        for row in r.json()
        if now[row["id"]] != row["randomNumber"]
    ]


def _upstream(r: Response, facts: Facts) -> list[str]:
    data, problems = _json(r, "/upstream")
    if problems:
        return problems
    if not isinstance(data, dict) or data.get("upstream_ms") != UPSTREAM_MS:
        return [f"/upstream: body {data!r}"]
    if r.elapsed_s < (UPSTREAM_MS - TIMER_SLACK_MS) / 1000:
        return [
            f"/upstream: answered in {r.elapsed_s * 1000:.1f} ms < {UPSTREAM_MS} ms "
            f"(less {TIMER_SLACK_MS} ms of timer slack)"
        ]
    return []


def _sleep(r: Response, facts: Facts) -> list[str]:
    data, problems = _json(r, "/sleep")
    if problems:
        return problems
    if data != {"slept_ms": SLEEP_MS}:
        return [f"/sleep: body {data!r}"]
    if r.elapsed_s < (SLEEP_MS - TIMER_SLACK_MS) / 1000:
        return [
            f"/sleep: answered in {r.elapsed_s * 1000:.1f} ms < {SLEEP_MS} ms "
            f"(less {TIMER_SLACK_MS} ms of timer slack)"
        ]
    return []


def _compute(r: Response, facts: Facts) -> list[str]:
    data, problems = _json(r, "/compute")
    if problems:
        return problems
    ok = isinstance(data, dict) and data.get("n") == COMPUTE_N
    return [] if ok and isinstance(data.get("result"), int) else [f"/compute: {data!r}"]


def _ws_echo(r: Response, facts: Facts) -> list[str]:
    if r.messages == WS_ECHO_MESSAGES:
        return []
    got = [len(m) for m in r.messages]
    want = [len(m) for m in WS_ECHO_MESSAGES]
    return [f"/ws/echo: sent messages of {want} bytes, got back {got} bytes (or other bytes)"]


def _ws_push(r: Response, facts: Facts) -> list[str]:
    size = struct.calcsize(WS_PUSH_HEADER)
    if len(r.messages) != WS_PUSH_COUNT:
        return [f"/ws/push: {len(r.messages)} message(s), expected {WS_PUSH_COUNT}"]
    problems = []
    for number, message in enumerate(r.messages):
        if len(message) != WS_BYTES:
            problems.append(f"/ws/push: message {number} is {len(message)} bytes, not {WS_BYTES}")
            continue
        seq, _ = struct.unpack(WS_PUSH_HEADER, message[:size])
        if seq != number or message[size:] != b"x" * (WS_BYTES - size):
            problems.append(f"/ws/push: message {number} is {message[:24]!r}...")
    return problems


def _queries_check(raw: str, count: int) -> Check:
    where = f"/queries?n={raw}"
    return Check(
        where, "application/json", lambda r, f: _rows(r, count, f.world, where), selects=count
    )


JSON = "application/json"
_ALL = (
    Scenario(
        "plaintext",
        "/plaintext",
        "fixed text body: the server's own overhead",
        (Check("/plaintext", "text/plain", _plaintext),),
    ),
    Scenario(
        "json", "/json", "JSON serialisation per request", (Check("/json", JSON, _json_body),)
    ),
    Scenario("db", "/db", "one random row through pgbouncer", (Check("/db", JSON, _one_row, 1),)),
    Scenario(
        "queries",
        "/queries?n=20",
        "20 single-row queries per request",
        tuple(_queries_check(raw, count) for raw, count in QUERY_CASES),
    ),
    Scenario(
        "fortunes",
        "/fortunes",
        "query, sort and HTML template render",
        (Check("/fortunes", "text/html", _fortunes, 1),),
    ),
    Scenario(
        "updates",
        "/updates?n=20",
        "20 reads and a batched update per request",
        (Check("/updates?n=5", JSON, _updates, 5),),
    ),
    Scenario(
        "upstream",
        "/upstream?ms=100",
        "a real HTTP call to a stub answering after 100 ms",
        (Check(f"/upstream?ms={UPSTREAM_MS}", JSON, _upstream),),
        waits=True,
    ),
    Scenario(
        "compute",
        "/compute?n=10000",
        "CPU-bound pure Python work",
        (Check(f"/compute?n={COMPUTE_N}", JSON, _compute),),
    ),
    Scenario(
        "sleep",
        f"/sleep?ms={SLEEP_MS}",
        f"a {SLEEP_MS} ms wait in the worker: capacity known by construction (workers / wait)",
        (Check(f"/sleep?ms={SLEEP_MS}", JSON, _sleep),),
        waits=True,
    ),
    Scenario(
        "websocket",
        f"/ws/echo?bytes={WS_BYTES}&rate={WS_RATE}",
        f"WebSocket echo: {WS_BYTES}-byte messages at {WS_RATE}/s on each connection",
        (
            Check("/ws/echo", "", _ws_echo, send=WS_ECHO_MESSAGES, receive=len(WS_ECHO_MESSAGES)),
            Check(
                f"/ws/push?bytes={WS_BYTES}&rate={WS_RATE}&count={WS_PUSH_COUNT}",
                "",
                _ws_push,
                send=(),
                receive=WS_PUSH_COUNT,
            ),
        ),
        WS,
        WEBSOCKET,
    ),
    Scenario(
        "websocket-push",
        f"/ws/push?bytes={WS_BYTES}&rate={WS_RATE}",
        f"WebSocket server push: {WS_BYTES}-byte messages at {WS_RATE}/s to each connection",
        (),  # its route is verified with the websocket scenario's
        WS,
        WEBSOCKET,
    ),
    Scenario(
        "websocket-idle",
        f"/ws/echo?bytes={WS_BYTES}&rate={WS_IDLE_RATE}",
        "WebSocket connections held open with no message: the server's memory per connection",
        (),  # its route is verified with the websocket scenario's
        WS,
        WEBSOCKET,
        warms=False,
    ),
    # The mix's routes are the ones above: nothing more to verify.
    Scenario(
        "saas",
        "saas mix",
        "seed 000 SaaS users (login, plan, history, voice): DB and ~3 s upstream",
        (),
        MIX,
    ),
)
SCENARIOS: dict[str, Scenario] = {s.name: s for s in _ALL}


def needing(load: str) -> tuple[str, ...]:
    """The scenarios whose load is of this kind (URL or MIX), in declaration order."""
    return tuple(s.name for s in _ALL if s.needs == load)
