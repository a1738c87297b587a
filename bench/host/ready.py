"""Readiness: poll a condition until it holds or a deadline passes; never a fixed sleep.

Input: a probe (TCP port, HTTP path, or any callable) and the Proc it belongs to.
Output: returns when ready; raises StartError with the component's log tail otherwise,
at once if the component exited (exit codes are not trusted: pgbouncer can exit 0 and die).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from bench.host.client import PLAIN, Client
from bench.host.procs import Proc, StartError


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def wait_until(
    probe: Callable[[], bool], what: str, proc: Proc | None, timeout_s: float = 30.0
) -> None:
    """Poll probe() with a short back-off until it returns True or timeout_s passes."""
    deadline = time.monotonic() + timeout_s
    delay = 0.02
    last_error = ""
    while True:
        if proc is not None and proc.exit_code() is not None:
            raise StartError(
                f"{proc.name} exited with code {proc.exit_code()} before {what}\n{proc.log_tail()}"
            )
        try:
            if probe():
                return
        except OSError as exc:
            last_error = f" (last error: {exc})"
        if time.monotonic() >= deadline:
            tail = f"\n{proc.log_tail()}" if proc is not None else ""
            name = proc.name if proc is not None else what
            raise StartError(f"{name}: not {what} after {timeout_s:.0f} s{last_error}{tail}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)


def http_status(
    host: str, port: int, path: str, timeout_s: float = 2.0, client: Client = PLAIN
) -> int:
    """Status of one GET, on a fresh connection, over the client's protocol."""
    return client.get(host, port, path, timeout_s).status


def wait_http(
    proc: Proc,
    port: int,
    path: str,
    timeout_s: float = 30.0,
    host: str = "127.0.0.1",
    client: Client = PLAIN,
) -> None:
    """Wait until GET path answers 200 over the client's protocol (any server process of the
    group may answer)."""
    wait_until(
        lambda: http_status(host, port, path, client=client) == 200,
        f"answering GET {path}" + (f" over {client.protocol.name}" if client != PLAIN else ""),
        proc,
        timeout_s,
    )
