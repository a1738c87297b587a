"""Protocols the load speaks to the server (PROTOCOL=): names -> what each one is.

Input: nothing (declarations). Output: Protocol records: whether TLS wraps the connection,
whether it is HTTP/2, and the URL scheme. A server declares which of them it speaks in its
server.toml ([protocols.<name>], bench/core/registry.py); a load tool in its `protocols`
ClassVar (bench/load). http1 is what every server speaks with its own argv.

WebSocket is no PROTOCOL= value: a scenario carries it (SCENARIO=websocket, the Scenario's
`protocol`), over an HTTP/1.1 upgrade in clear text. A server declares it like the others
([protocols.websocket]: argv = [] with why, or unsupported = why not: a WSGI server).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Protocol:
    """One way of carrying HTTP requests between the load tool and the server."""

    name: str  # PROTOCOL= and the record's `protocol`
    tls: bool  # wrapped in TLS, with the certificate the harness makes per run
    http2: bool  # HTTP/2 frames (h2c: prior knowledge in clear text; h2: ALPN over TLS)
    about: str  # one line for make help and the docs

    @property
    def scheme(self) -> str:
        """The URL scheme: https under TLS."""
        return "https" if self.tls else "http"

    @property
    def version(self) -> str:
        """The HTTP version a response must come back in ("1.1" or "2")."""
        return "2" if self.http2 else "1.1"


HTTP1 = "http1"
PROTOCOLS: dict[str, Protocol] = {
    p.name: p
    for p in (
        Protocol(HTTP1, False, False, "HTTP/1.1 in clear text"),
        Protocol("https1", True, False, "HTTP/1.1 over TLS (the fair control for h2)"),
        Protocol("h2c", False, True, "HTTP/2 in clear text, by prior knowledge"),
        Protocol("h2", True, True, "HTTP/2 over TLS, negotiated by ALPN"),
    )
}


WEBSOCKET = "websocket"
# Protocols a scenario carries (not PROTOCOL= values): a server.toml declares them too.
SCENARIO_PROTOCOLS: dict[str, Protocol] = {
    WEBSOCKET: Protocol(WEBSOCKET, False, False, "WebSocket (RFC 6455) upgraded from HTTP/1.1"),
}


def protocol(name: str | None) -> Protocol:
    """The Protocol of a name (None, as in records before format 11: http1)."""
    return SCENARIO_PROTOCOLS.get(name or HTTP1) or PROTOCOLS[name or HTTP1]
