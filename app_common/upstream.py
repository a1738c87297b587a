"""The simulated external API: `GET /delay?ms=N` answers after N ms (the AI-API wait of seed
000, the httpbin wait of seed 001). Stdlib asyncio only, so it runs from any interpreter.

Run: python -m app_common.upstream --host 127.0.0.1 --port N. HTTP/1.1 with keep-alive,
thousands of concurrent connections, no access log; exits 0 on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from urllib.parse import parse_qs, urlsplit

MAX_MS = 10_000
MAX_HEADER_BYTES = 16_384


def _response(status: str, body: bytes, close: bool) -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: {'close' if close else 'keep-alive'}\r\n\r\n"
    )
    return head.encode() + body


def _delay_ms(target: str) -> int:
    values = parse_qs(urlsplit(target).query).get("ms", ["0"])
    try:
        return max(0, min(MAX_MS, int(values[0][:12])))
    except ValueError:
        return 0


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Serve requests on one connection until the client closes or asks to."""
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3:
                writer.write(_response("400 Bad Request", b'{"error":"bad request"}', True))
                return
            method, target, version = parts
            headers = {
                k.strip().lower(): v.strip()
                for k, _, v in (h.partition(":") for h in lines[1:] if h)
            }
            close = headers.get("connection", "").lower() == "close" or version == "HTTP/1.0"
            length = int(headers.get("content-length", "0") or 0)
            if length:
                await reader.readexactly(length)
            path = urlsplit(target).path
            if method == "GET" and path == "/delay":
                ms = _delay_ms(target)
                await asyncio.sleep(ms / 1000)
                writer.write(_response("200 OK", b'{"delayed_ms":%d}' % ms, close))
            elif method == "GET" and path == "/health":
                writer.write(_response("200 OK", b'"ok"', close))
            else:
                writer.write(_response("404 Not Found", b'{"error":"not found"}', close))
            await writer.drain()
            if close:
                return
    except (ConnectionError, asyncio.CancelledError):
        # Cancelled: the stub is shutting down with requests in flight; nothing to report.
        return
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def serve(host: str, port: int) -> None:
    """Listen until SIGTERM/SIGINT."""
    server = await asyncio.start_server(
        handle, host, port, backlog=4096, limit=MAX_HEADER_BYTES, reuse_address=True
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main() -> None:
    """Parse --host/--port and serve."""
    parser = argparse.ArgumentParser(description="simulated external API")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    try:
        import uvloop  # type: ignore[import-not-found]

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
