"""PROTOCOL= and STREAMS=: the declarations, the refusals, the load tool's command line, the
certificate a run makes, the client that verifies over the protocol, and the records."""

from __future__ import annotations

import http.server
import json
import ssl
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bench.core import registry, variables
from bench.core.protocol import protocol
from bench.core.record import Record
from bench.core.validate import UsageError
from bench.host import tls
from bench.host.client import Client, parse_head
from bench.load.oha import oha_argv
from bench.report.groups import groups

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TOML = Path("servers/x/server.toml")


def _protocols(raw: dict) -> tuple[dict, dict]:
    return registry.validate_protocols(TOML, raw, set())


def test_a_declared_protocol_appends_its_flags_and_says_why() -> None:
    """[protocols.<name>]: argv with why is spoken; unsupported keeps why not; http1 always."""
    spoken, why = _protocols(
        {
            "h2c": {"argv": ["--http", "2"], "why": "the docs say so"},
            "h2": {"unsupported": "no TLS here"},
        }
    )
    assert spoken == {"h2c": ("--http", "2")}
    spec = replace(registry.load_all()["granian"], protocols=spoken, protocol_why=why)
    assert spec.speaks("http1") and spec.speaks("h2c") and not spec.speaks("h2")
    assert spec.why_not("h2") == "no TLS here"
    assert spec.why_not("https1") == "no [protocols.https1] in its server.toml"


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ({"http1": {"argv": [], "why": "x"}}, "valid names are"),
        ({"h3": {"argv": [], "why": "x"}}, "valid names are"),
        ({"h2c": {"argv": ["--http", "2"]}}, "must be argv = "),
        ({"h2c": {"argv": ["x"], "why": "x", "unsupported": "y"}}, "must be argv = "),
        ({"h2c": {"argv": ["{nope}"], "why": "x"}}, "placeholders ['nope'] are unknown"),
        ({"https1": {"argv": ["--tls"], "why": "x"}}, "is TLS: its argv must use {certfile}"),
    ],
)
def test_a_malformed_protocol_table_is_refused(raw: dict, says: str) -> None:
    """Each mistake is a DeclarationError naming the table."""
    with pytest.raises(registry.DeclarationError) as caught:
        _protocols(raw)
    assert says in str(caught.value)


def test_every_tls_declaration_uses_the_run_certificate() -> None:
    """The catalog: a TLS protocol a server speaks names {certfile} and {keyfile}."""
    for spec in registry.load_all().values():
        for name, argv in spec.protocols.items():
            if protocol(name).tls:
                assert any("{certfile}" in a for a in argv), spec.id
                assert any("{keyfile}" in a for a in argv), spec.id


def test_a_server_that_cannot_serve_the_protocol_is_refused_in_one_line() -> None:
    """The refusal names the server, its declaration's reason and the servers that can."""
    specs = registry.load_all()
    line = registry.protocol_refusal(specs, ["granian", "uvicorn"], "h2c")
    assert line is not None and "\n" not in line
    assert line.startswith("SERVER=uvicorn cannot serve PROTOCOL=h2c (uvicorn: ")
    assert "valid for h2c: SERVER=" in line and "granian" in line.split("valid for")[1]
    assert registry.protocol_refusal(specs, ["granian", "hypercorn"], "h2") is None
    assert registry.protocol_refusal(specs, ["waitress"], "http1") is None


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"PROTOCOL": "h2c"}, "PROTOCOL=h2c needs LOAD=oha"),
        ({"PROTOCOL": "h2", "LOAD": "wrk"}, "PROTOCOL=h2 needs LOAD=oha"),
        ({"PROTOCOL": "https1", "PROXY": "nginx"}, "PROTOCOL=https1 and PROXY= cannot go"),
        ({"STREAMS": "8"}, "STREAMS needs PROTOCOL=h2c or h2"),
        (
            {"PROTOCOL": "h2c", "LOAD": "oha", "RATE": "5", "KEEPALIVE": "0"},
            "KEEPALIVE=0 needs PROTOCOL=http1 or https1",
        ),
        ({"PROTOCOL": "spdy"}, "unknown PROTOCOL 'spdy'; valid: http1, https1, h2c, h2"),
    ],
)
def test_the_rules_between_protocol_and_the_other_variables(given: dict, says: str) -> None:
    """Declared once (bench/core/variables.py), applied by the pre-check and the CLI."""
    with pytest.raises(UsageError) as caught:
        variables.check("run", given)
    assert says in str(caught.value)


def test_what_each_load_tool_speaks_comes_from_its_declaration() -> None:
    """wrk speaks HTTP/1.1 in clear and over TLS; oha all four; Locust HTTP/1.1 only."""
    assert variables.protocol_loads("https1") == ("wrk", "oha")
    assert variables.protocol_loads("h2c") == ("oha",)
    assert "locust" in variables.protocol_loads("http1")
    values = variables.check("run", {"PROTOCOL": "h2", "LOAD": "oha", "RATE": "50", "STREAMS": "4"})
    assert values["PROTOCOL"] == "h2" and values["STREAMS"] == 4


def test_oha_speaks_http2_with_streams_and_verifies_the_certificate() -> None:
    """--http2 with -p (streams per connection) and --cacert: never --insecure."""
    argv = oha_argv("oha", "https://127.0.0.1:1/x", 100, 4, 2, None, True, None,
                    http2=True, streams=8, cafile="/run/cert.pem")  # fmt: skip
    assert argv[argv.index("-p") + 1] == "8" and "--http2" in argv
    assert argv[argv.index("--cacert") + 1] == "/run/cert.pem"
    assert "--insecure" not in argv
    plain = oha_argv("oha", "http://127.0.0.1:1/x", 100, 4, 2, None, True, None)
    assert "--http2" not in plain and "--cacert" not in plain
    with pytest.raises(ValueError, match="streams are HTTP/2's"):
        oha_argv("oha", "http://127.0.0.1:1/x", 100, 4, 2, None, True, None, streams=2)


def test_curl_heads_are_read_from_their_last_block() -> None:
    """An interim 100 Continue comes first; headers lower-cased; no status line: OSError."""
    text = (
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/2 200\r\ncontent-type: text/plain\r\nServer: x\r\n\r\n"
    )
    assert parse_head(text) == (200, {"content-type": "text/plain", "server": "x"})
    with pytest.raises(OSError):
        parse_head("garbage\r\n\r\n")


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[int, tls.Certificate]]:
    """A standard-library HTTPS server on loopback with a certificate made as a run makes it."""
    cert = tls.make(tmp_path)

    class Hello(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            body = b"Hello, World!"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert.cert, cert.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], cert
    finally:
        server.shutdown()
        server.server_close()


def test_the_run_certificate_verifies_the_server_and_is_removed(
    tls_server: tuple[int, tls.Certificate], tmp_path: Path
) -> None:
    """https1 verified against the run's certificate (an IP subjectAltName for 127.0.0.1);
    another certificate is refused; the key is the owner's only; remove() leaves nothing."""
    port, cert = tls_server
    assert cert.key.stat().st_mode & 0o077 == 0
    resp = Client(protocol("https1"), cert.ca).get("127.0.0.1", port, "/plaintext")
    assert (resp.status, resp.body) == (200, b"Hello, World!")
    other = tls.make(tmp_path / "other")
    with pytest.raises(OSError):  # ssl.SSLCertVerificationError is an OSError
        Client(protocol("https1"), other.ca).get("127.0.0.1", port, "/plaintext")
    with pytest.raises(OSError):  # clear text to a TLS port: no answer
        Client().get("127.0.0.1", port, "/plaintext", timeout_s=2)
    tls.remove(tmp_path)
    assert not (tmp_path / "tls").exists()


def test_records_carry_the_protocol_and_never_pool_across_protocols() -> None:
    """A format-10 record reads as http1 (None), and pools with an http1 record; an h2c
    record of the same point is a group of its own."""
    data = json.loads((FIXTURES / "records" / "machine-a" / "rec0.json").read_text())
    old = Record.from_dict(data)
    assert old.protocol is None and old.tls is None and old.streams is None
    meta = {**old.metadata, "session_id": "s1"}
    http1 = replace(old, run_id="1" * 32, trial=1, metadata=meta, protocol="http1", streams=1)
    legacy = replace(old, run_id="2" * 32, trial=2, metadata=meta)
    h2c = replace(http1, run_id="3" * 32, protocol="h2c", tls=False)
    assert sorted(len(g) for g in groups([http1, legacy, h2c]).values()) == [1, 2]
