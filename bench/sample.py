"""System samples: kernel socket state for a port, read from /proc.

Input: a TCP port. Output: numbers (listen-queue depth now). Pure parsing functions take the
file text so they are tested over fixtures.
"""

from __future__ import annotations

from pathlib import Path

TCP_LISTEN = "0A"


def parse_listen_queue(text: str, port: int) -> int | None:
    """Connections waiting in the accept queue of the LISTEN socket on port (None: no such)."""
    found = None
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 5 or fields[3] != TCP_LISTEN:
            continue
        local_port = int(fields[1].rsplit(":", 1)[1], 16)
        if local_port == port:
            # For a listening socket rx_queue is the current accept-queue length.
            rx_queue = int(fields[4].split(":")[1], 16)
            found = (found or 0) + rx_queue
    return found


def listen_queue(port: int) -> int | None:
    """Accept-queue depth of the listener on port, over IPv4 and IPv6 (None: not listening)."""
    total = None
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            depth = parse_listen_queue(Path(name).read_text(), port)
        except OSError:
            continue
        if depth is not None:
            total = (total or 0) + depth
    return total
