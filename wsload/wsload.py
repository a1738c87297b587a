"""The WebSocket load generator (LOAD=wsload, SCENARIO=websocket), run in its own venv.

Input (argv): `run URL --connections C --duration S --out JSON --per-message CSV` drives the
echo route (`/ws/echo?bytes=N&rate=M`: each connection sends N-byte messages at M per second
on a fixed schedule, open loop; `--rate R`: R messages per second over all of them) or the
push route (`/ws/push?...`: the server sends, this side times each message from the server's
intended send time written in it); rate 0 on the echo route holds the connections and sends
nothing (idle: what an open connection costs the server); `serve --port P` is a minimal echo
server, and `flood URL --connections C --duration S --window W` sends as fast as W messages
in flight per connection allow: with the two, the harness measures this generator's own
ceiling (bench/load/wsload.py).
Output: a JSON summary on --out (connections opened and held, messages sent, received,
verified, mismatched, lost, errors by message, the window in Unix seconds, how late the sends
left against their schedule) and, for `run`, one line per message received
(intended_ms,latency_ms,status: the intended send time from the first, the latency from
that intended time, 101) in --per-message. Latency runs from the intended send time, so a
slow server (or a late sender) shows in it: no coordinated omission.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import struct
import sys
import time
import urllib.parse
from collections import Counter

import uvloop
from picows import WSListener, WSMsgType, WSTransport, ws_connect, ws_create_server

HEADER = struct.Struct("!Qd")  # sequence number, intended send time (s); then padding
# After the window: how long a message due in it may still take to arrive (an echo in
# flight, a push the server sends late); counted with its latency, else lost.
GRACE_S = 1.0
CONNECT_AT_ONCE = 64  # handshakes in flight at once


class Side(WSListener):
    """One connection's end: checks and times every message it receives."""

    def __init__(self, stats: Stats, padding: bytes, push: bool) -> None:
        self.stats, self.padding, self.push = stats, padding, push
        self.next_seq = 0
        self.open = False

    def on_ws_connected(self, transport: WSTransport) -> None:
        self.open = True

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        self.open = False
        if not self.stats.closing:
            self.stats.errors["closed by the server"] += 1

    def on_ws_frame(self, transport: WSTransport, frame: object) -> None:
        kind = frame.msg_type  # type: ignore[attr-defined]
        if kind == WSMsgType.CLOSE:
            transport.disconnect()
            return
        if kind not in (WSMsgType.BINARY, WSMsgType.TEXT):
            return
        now = time.time() if self.push else time.monotonic()
        payload = frame.get_payload_as_bytes()  # type: ignore[attr-defined]
        self.stats.received += 1
        if len(payload) < HEADER.size or payload[HEADER.size :] != self.padding:
            self.stats.mismatched += 1
            return
        seq, intended = HEADER.unpack_from(payload)
        if seq != self.next_seq and not self.push:
            self.stats.mismatched += 1
            return
        self.next_seq = seq + 1
        self.stats.record(intended, now)


class Stats:
    """What the connections saw; the window's bounds decide which messages count."""

    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end
        self.received = self.mismatched = self.counted = 0
        self.lines: list[str] = []
        self.errors: Counter[str] = Counter()
        self.closing = False

    def record(self, intended: float, now: float) -> None:
        if self.start <= intended < self.end:
            self.counted += 1
            self.lines.append(
                f"{(intended - self.start) * 1000:.3f},{(now - intended) * 1000:.3f},101"
            )


def query(url: str) -> tuple[int, int]:
    """(bytes, rate) from the URL's query: the message size and each connection's rate."""
    args = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    return int(args.get("bytes", ["64"])[0]), int(args.get("rate", ["100"])[0])


async def connect_all(url: str, count: int, factory: object, stats: Stats) -> list:
    """`count` connections, CONNECT_AT_ONCE handshakes at a time; failures counted by reason."""
    gate = asyncio.Semaphore(CONNECT_AT_ONCE)

    async def one() -> tuple | None:
        async with gate:
            try:
                return await ws_connect(factory, url, websocket_handshake_timeout=10)  # type: ignore[arg-type]
            except Exception as exc:  # every reason a connection fails is counted, not raised
                stats.errors[f"connect: {type(exc).__name__}: {str(exc)[:80]}"] += 1
                return None

    made = await asyncio.gather(*(one() for _ in range(count)))
    return [pair for pair in made if pair is not None]


async def send_schedule(pairs: list, total: float, stats: Stats, padding: bytes) -> list[float]:
    """Message n of the whole run is due at start + n / total (total: C x each connection's
    rate, or --rate), on connection n mod C; sent when due (all the overdue ones at once when
    late). The lateness of each send (ms)."""
    seqs = [0] * len(pairs)
    lags: list[float] = []
    n = 0
    while True:
        due = stats.start + n / total
        if due >= stats.end:
            return lags
        now = time.monotonic()
        if due > now:
            await asyncio.sleep(due - now)
            now = time.monotonic()
        while n < total * (stats.end - stats.start) and stats.start + n / total <= now:
            intended = stats.start + n / total
            index = n % len(pairs)
            transport, side = pairs[index]
            if side.open:
                transport.send(WSMsgType.BINARY, HEADER.pack(seqs[index], intended) + padding)
                seqs[index] += 1
                lags.append((now - intended) * 1000)
            n += 1
    return lags


async def run(args: argparse.Namespace) -> dict:
    """One measured run against the echo or the push route."""
    size, rate = query(args.url)
    padding = b"x" * (size - HEADER.size)
    push = urllib.parse.urlsplit(args.url).path.endswith("/push")
    if args.rate is not None and (push or rate == 0):
        raise SystemExit("--rate paces the echo route's messages: not push, not idle (rate 0)")
    stats = Stats(0.0, 0.0)
    pairs = await connect_all(args.url, args.connections, lambda: Side(stats, padding, push), stats)
    clock = time.time if push else time.monotonic
    stats.start = clock() + 0.05
    stats.end = stats.start + args.duration
    wall_start = time.time() + 0.05
    lags: list[float] = []
    if push or rate == 0:
        # Push: each connection's pushes due in the window, at least floor(rate x duration).
        # Idle (rate 0): nothing is sent either way; the connections are only held.
        await asyncio.sleep(args.duration + 0.05)
        due = int(rate * args.duration) * len(pairs)
    else:
        total = args.rate if args.rate is not None else len(pairs) * rate
        lags = await send_schedule(pairs, total, stats, padding) if pairs else []
        due = len(lags)
    wait_until = time.monotonic() + GRACE_S
    while stats.counted < due and time.monotonic() < wait_until:
        await asyncio.sleep(0.01)
    held = sum(1 for _, side in pairs if side.open)
    stats.closing = True
    for transport, _ in pairs:
        transport.send_close()
        transport.disconnect()
    lags.sort()
    return {
        "mode": "push" if push else "idle" if rate == 0 else "echo",
        "url": args.url,
        "connections": args.connections,
        "connected": len(pairs),
        "held": held,
        "message_bytes": size,
        "rate_per_connection": rate,
        # the schedule's messages/s over all connections: --rate, else connections x rate
        "offered_per_s": args.rate if args.rate is not None else args.connections * rate,
        "duration_s": args.duration,
        "window": [wall_start, wall_start + args.duration],
        "sent": len(lags),
        "due": due,
        "received": stats.received,
        "counted": stats.counted,
        "mismatched": stats.mismatched,
        # echo: sent and never back; push: due in the window (at least) and never arrived
        "lost": max(0, due - stats.counted),
        "errors": dict(stats.errors),
        "send_lag_ms": {
            "p50": lags[len(lags) // 2] if lags else None,
            "p99": lags[min(len(lags) - 1, int(0.99 * len(lags)))] if lags else None,
            "max": lags[-1] if lags else None,
        },
        "lines": stats.lines,
    }


class Flooder(WSListener):
    """Keeps `window` messages in flight: one more sent for each one back."""

    def __init__(self, counter: list[int], window: int, payload: bytes) -> None:
        self.counter, self.window, self.payload = counter, window, payload

    def on_ws_connected(self, transport: WSTransport) -> None:
        for _ in range(self.window):
            transport.send(WSMsgType.BINARY, self.payload)

    def on_ws_frame(self, transport: WSTransport, frame: object) -> None:
        if frame.msg_type == WSMsgType.BINARY:  # type: ignore[attr-defined]
            self.counter[0] += 1
            transport.send(WSMsgType.BINARY, self.payload)


async def flood(args: argparse.Namespace) -> dict:
    """Messages back per second with `window` in flight on each connection: the ceiling."""
    size, _ = query(args.url)
    counter = [0]
    payload = b"x" * size
    stats = Stats(0.0, 0.0)
    pairs = await connect_all(
        args.url, args.connections, lambda: Flooder(counter, args.window, payload), stats
    )
    await asyncio.sleep(0.5)  # past the first burst
    before, start = counter[0], time.monotonic()
    await asyncio.sleep(args.duration)
    received, elapsed = counter[0] - before, time.monotonic() - start
    for transport, _ in pairs:
        transport.disconnect()
    return {
        "connected": len(pairs),
        "messages_per_s": received / elapsed,
        "errors": dict(stats.errors),
    }


class Echo(WSListener):
    """The echo server's side: every message back."""

    def on_ws_frame(self, transport: WSTransport, frame: object) -> None:
        kind = frame.msg_type  # type: ignore[attr-defined]
        if kind in (WSMsgType.BINARY, WSMsgType.TEXT):
            transport.send(kind, frame.get_payload_as_bytes())  # type: ignore[attr-defined]
        elif kind == WSMsgType.CLOSE:
            transport.disconnect()


async def serve(args: argparse.Namespace) -> None:
    """A picows echo server on 127.0.0.1:port until stopped."""
    server = await ws_create_server(lambda request: Echo(), "127.0.0.1", args.port)
    print(f"listening on {args.port}", flush=True)
    await server.serve_forever()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "flood"):
        one = sub.add_parser(name)
        one.add_argument("url")
        one.add_argument("--connections", type=int, required=True)
        one.add_argument("--duration", type=float, required=True)
        one.add_argument("--out", required=True)
        one.add_argument("--per-message")
        one.add_argument("--window", type=int, default=16)
        # run, echo route: messages/s over all the connections (a capacity search's step)
        # instead of each connection's rate from the URL
        one.add_argument("--rate", type=float)
    sub.add_parser("serve").add_argument("--port", type=int, required=True)
    sub.add_parser("version")
    args = parser.parse_args()
    if args.command == "version":
        from importlib.metadata import version

        print(f"wsload picows-{version('picows')}")
        return 0
    if args.command == "serve":
        uvloop.run(serve(args))
        return 0
    summary = uvloop.run(run(args) if args.command == "run" else flood(args))
    lines = summary.pop("lines", None)
    if lines is not None and args.per_message:
        with open(args.per_message, "w") as out:
            out.write("intended_ms,latency_ms,status\n")
            out.write("".join(line + "\n" for line in sorted(lines, key=_intended)))
    with open(args.out, "w") as out:
        json.dump(summary, out, indent=1, sort_keys=True)
    return 0


def _intended(line: str) -> float:
    return float(line.split(",", 1)[0])


if __name__ == "__main__":
    sys.exit(main())
