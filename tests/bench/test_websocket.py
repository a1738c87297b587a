"""SCENARIO=websocket: wsload's output read from captured runs (tests/fixtures/wsload, a
hypercorn echo and push at 10 connections), the verification's WebSocket client and checks,
the declarations (WSGI-only servers unsupported, with their reason), the load tool chosen for
the scenario, the refusal recorded by the harness, and the report section."""

from __future__ import annotations

import contextlib
import gzip
import json
import re
import socket
import struct
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from bench.core import registry, variables
from bench.core.parse import ParseError
from bench.core.record import Record
from bench.core.scenario import (
    SCENARIOS,
    WS_BYTES,
    WS_ECHO_MESSAGES,
    WS_PUSH_COUNT,
    WS_PUSH_HEADER,
    Response,
)
from bench.host import wsclient
from bench.load import LoadRequest, default_for, per_request_ms
from bench.load.wsload import LOAD_BOUND_SHARE, MESSAGES_NAME, parse_wsload, with_ceiling, ws_url
from bench.report import websocket

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "wsload"


def _captured(name: str) -> tuple[str, str]:
    text = (FIXTURES / f"{name}.wsload.json").read_text()
    csv_text = gzip.decompress((FIXTURES / f"{name}.messages.csv.gz").read_bytes()).decode()
    return text, csv_text


def test_an_echo_run_reads_into_the_record_figures() -> None:
    """The captured echo run: every message sent came back verified; requests are those
    messages, latency their percentiles (from the intended send times), 101 the connections
    held, the WebSocket figures beside them."""
    text, csv_text = _captured("echo-hypercorn-c10")
    data = json.loads(text)
    result = parse_wsload(text, csv_text)
    samples = sorted(per_request_ms(csv_text, MESSAGES_NAME))
    assert result.requests == data["counted"] == len(samples) == 2000
    assert result.rps == pytest.approx(2000 / data["duration_s"])
    assert result.latency.max == samples[-1] and result.latency.p50 == samples[len(samples) // 2]
    assert result.errors.by_status == {101: 10} and result.errors.timeout == 0
    assert result.errors.non_2xx == 0 and result.window == tuple(data["window"])
    figures = result.websocket or {}
    assert figures["mode"] == "echo" and figures["connections_held"] == 10
    assert figures["messages_sent"] == 2000 and figures["offered_messages_per_s"] == 1000
    assert figures["send_lag_ms"] == data["send_lag_ms"]


def test_a_push_run_counts_the_window_only() -> None:
    """The captured push run: messages received outside the window (before it, or after) are
    not counted; nothing was sent, so nothing can be lost."""
    text, csv_text = _captured("push-hypercorn-c10")
    result = parse_wsload(text, csv_text)
    figures = result.websocket or {}
    assert figures["mode"] == "push" and figures["messages_sent"] == 0
    assert figures["messages_received"] > result.requests == 2000
    assert result.errors.timeout == 0 and result.latency.p99 is not None


def test_wrong_and_lost_messages_are_errors() -> None:
    """Mismatched messages count as wrong answers (non_2xx), lost echoes as timeouts,
    connections that failed to open as connect errors, closed ones as read errors."""
    text, csv_text = _captured("echo-hypercorn-c10")
    data = json.loads(text) | {
        "mismatched": 3,
        "lost": 7,
        "errors": {"connect: ConnectionRefusedError: x": 2, "closed by the server": 1},
    }
    result = parse_wsload(json.dumps(data), csv_text)
    errors = result.errors
    assert (errors.non_2xx, errors.timeout, errors.connect, errors.read) == (3, 7, 2, 1)
    assert errors.by_message == data["errors"]


def test_unreadable_output_is_a_parse_error() -> None:
    """Not wsload's JSON, or a per-message file of another run: ParseError."""
    text, csv_text = _captured("echo-hypercorn-c10")
    with pytest.raises(ParseError, match="not wsload's JSON"):
        parse_wsload("{}", None)
    with pytest.raises(ParseError, match="holds 1999 messages"):
        parse_wsload(text, "\n".join(csv_text.splitlines()[:-1]) + "\n")


def test_a_run_near_the_generators_ceiling_is_load_bound() -> None:
    """From LOAD_BOUND_SHARE of the ceiling measured here the run is marked load-bound."""
    text, csv_text = _captured("echo-hypercorn-c10")
    result = parse_wsload(text, csv_text)
    rate = result.websocket["messages_per_s"]  # type: ignore[index]
    near = with_ceiling(result, result.raw, {"messages_per_s": rate / LOAD_BOUND_SHARE})
    far = with_ceiling(result, result.raw, {"messages_per_s": 100 * rate})
    assert near.websocket["load_bound"] is True  # type: ignore[index]
    assert far.websocket["load_bound"] is False  # type: ignore[index]
    assert with_ceiling(result, result.raw, None).websocket["load_bound"] is None  # type: ignore[index]


def test_the_url_is_the_routes_ws_url() -> None:
    """http://host:port + the scenario's path -> ws://host:port/path?query."""
    request = LoadRequest(
        "http://127.0.0.1:8000", SCENARIOS["websocket"].path, "websocket", 10, 2, Path("x")
    )
    assert ws_url(request) == f"ws://127.0.0.1:8000/ws/echo?bytes={WS_BYTES}&rate=100"


# -- the verification's client and checks -------------------------------------------------


def test_the_accept_key_is_rfc_6455s() -> None:
    """RFC 6455 section 1.3's example key and answer."""
    assert wsclient.accept_key(b"dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


@pytest.mark.parametrize("size", [0, 125, 126, 65535, 65536])
def test_a_frame_reads_back_across_each_length_encoding(size: int) -> None:
    """A masked client frame of each length form is read back as its payload."""
    payload = bytes(i % 251 for i in range(size))
    left, right = socket.socketpair()
    with left, right:
        threading.Thread(target=left.sendall, args=(wsclient.frame(0x2, payload),)).start()
        assert wsclient.read_frame(right) == (0x2, True, payload)


def _echo_server(listener: socket.socket, push: bool) -> None:
    conn, _ = listener.accept()
    with conn:
        head = b""
        while b"\r\n\r\n" not in head:
            head += conn.recv(1)
        key = next(
            line.split(b":", 1)[1].strip()
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"sec-websocket-key")
        )
        conn.sendall(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + f"Sec-WebSocket-Accept: {wsclient.accept_key(key)}\r\n\r\n".encode()
        )
        if push:  # the app's push: numbered messages of the declared size, then a close
            pad = b"x" * (WS_BYTES - struct.calcsize(WS_PUSH_HEADER))
            for n in range(WS_PUSH_COUNT):
                message = struct.pack(WS_PUSH_HEADER, n, 1.0) + pad
                conn.sendall(struct.pack("!BB", 0x82, len(message)) + message)
            conn.sendall(b"\x88\x02\x03\xe8")
        else:
            conn.sendall(b"\x89\x00")  # a ping first: the client answers it and reads on
            for _ in WS_ECHO_MESSAGES:
                opcode, _, payload = wsclient.read_frame(conn)
                if opcode == wsclient.OP_PONG:
                    opcode, _, payload = wsclient.read_frame(conn)
                conn.sendall(bytes([0x80 | opcode]) + _unmasked(payload))
        # Read on to the client's close: closing with its pong or close frame unread would
        # send a reset that can destroy the last echo before the client reads it.
        with contextlib.suppress(OSError):
            while wsclient.read_frame(conn)[0] != wsclient.OP_CLOSE:
                pass


def _unmasked(payload: bytes) -> bytes:
    size = len(payload)
    if size < 126:
        return struct.pack("!B", size) + payload
    return struct.pack("!BH", 126, size) + payload


@pytest.mark.parametrize("push", [False, True])
def test_an_exchange_passes_the_scenarios_checks(push: bool) -> None:
    """Against a server that does what the app does, the echo and the push checks pass."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    thread = threading.Thread(target=_echo_server, args=(listener, push))
    thread.start()
    check = SCENARIOS["websocket"].checks[1 if push else 0]
    with listener:
        resp = wsclient.exchange("127.0.0.1", port, check.path, check.send or (), check.receive)
        thread.join(5)
    assert resp.status == 101 and check.body(resp, None) == []  # type: ignore[arg-type]


def test_the_checks_name_what_differs() -> None:
    """An echo that changed a message, a push of the wrong size or count: each is named."""
    echo, push = SCENARIOS["websocket"].checks
    changed = Response(101, {}, b"", 0.0, messages=(b"Hello", *WS_ECHO_MESSAGES[1:]))
    assert "got back" in echo.body(changed, None)[0]  # type: ignore[arg-type]
    short = Response(101, {}, b"", 0.0, messages=(b"x" * 16,) * WS_PUSH_COUNT)
    assert f"not {WS_BYTES}" in push.body(short, None)[0]  # type: ignore[arg-type]
    few = Response(101, {}, b"", 0.0, messages=())
    assert push.body(few, None) == [f"/ws/push: 0 message(s), expected {WS_PUSH_COUNT}"]  # type: ignore[arg-type]


# -- declarations and the load tool chosen ------------------------------------------------


def test_every_server_says_whether_it_carries_websockets() -> None:
    """Each server.toml declares [protocols.websocket]; the ASGI ones carry it, the WSGI-only
    ones (and nginx-static) do not, each with its reason."""
    specs = registry.load_all()
    for spec in specs.values():
        assert "websocket" in spec.protocol_why, spec.id
    carried = {s for s, spec in specs.items() if spec.speaks("websocket")}
    assert carried == {s for s, spec in specs.items() if spec.app == "asgi"}
    assert "WSGI" in specs["gunicorn-sync"].why_not("websocket")


def test_a_websocket_table_takes_no_flags() -> None:
    """The server is started once for every scenario of its block: websocket's argv is []."""
    with pytest.raises(registry.DeclarationError, match="argv = \\[\\]"):
        registry.validate_protocols(
            Path("servers/x/server.toml"), {"websocket": {"argv": ["--ws"], "why": "x"}}, set()
        )


@pytest.mark.parametrize(
    ("scenarios", "tool"),
    [(("websocket",), "wsload"), (("websocket", "websocket-push"), "wsload"), ((), "wrk")],
)
def test_the_websocket_scenarios_choose_their_tool(scenarios: tuple, tool: str) -> None:
    """LOAD unset: wsload for the WebSocket scenarios (no HTTP tool drives them), the default
    otherwise; the pre-check's declaration-side twin agrees."""
    assert default_for(scenarios) == variables.default_load(scenarios) == tool


def test_websocket_beside_http_scenarios_is_refused_in_one_line() -> None:
    """SCENARIO=plaintext,websocket: no one tool drives both; refused naming the valid ones."""
    values = variables.check("run", {"SCENARIO": "plaintext,websocket", "SERVER": "uvicorn"})
    assert values["LOAD"] is None or values["LOAD"] == "wrk"
    from bench.core.validate import UsageError
    from bench.precheck import check_plan

    with pytest.raises(UsageError, match="SCENARIO=websocket cannot run with LOAD=wrk"):
        check_plan("run", {"SCENARIO": "plaintext,websocket"}, values)


# -- the report ------------------------------------------------------------------------


def _record(server: str, held: int, rss: float, status: str = "ok") -> Record:
    text, csv_text = _captured("echo-hypercorn-c10")
    result = parse_wsload(text, csv_text)
    data = json.loads((FIXTURES / "record-echo-hypercorn-c10.json").read_text())
    return replace(
        Record.from_dict(data),
        server=server,
        scenario="websocket",
        status=status,
        reason=None if status == "ok" else "websocket not served by the server: WSGI",
        concurrency=held,
        requests=result.requests,
        latency_ms=result.latency.to_dict(),
        errors=result.errors.to_dict(),
        websocket={**(result.websocket or {}), "connections_held": held},
        resources={"server_rss_mb": rss},
        metadata={**data["metadata"], "warmup_start": False, "unsupported": "protocol"},
        foreign_load=False,
    )


def test_memory_per_1000_connections_is_the_rss_slope() -> None:
    """RSS rising 2 MB per 100 connections held is 20 MB per 1,000, interval around it."""
    group = [
        _record("uvicorn", held, 100 + held * 0.02 + noise)
        for held, noise in [(10, 0.1), (50, -0.1), (100, 0.05), (10, -0.05), (50, 0.1), (100, -0.1)]
    ]
    slope, low, high = websocket.memory_per_1000(group) or (0.0, 0.0, 0.0)
    assert slope == pytest.approx(20, abs=1) and low < slope < high
    assert websocket.memory_per_1000(group[:1]) is None


def test_the_summary_names_servers_that_do_not_carry_it() -> None:
    """A WSGI server's unsupported websocket records are shown as such, with the reason."""
    records = [_record("uvicorn", 10, 100.0), _record("gunicorn-sync", 10, 0.0, "unsupported")]
    lines = websocket.summary_lines(records, "details/websocket.md")
    assert (
        "measured: uvicorn" in lines[0]
        and "unsupported (no WebSocket interface): gunicorn-sync" in lines[0]
    )
    detail = "\n".join(websocket.websocket_sections(records))
    assert "- gunicorn-sync: unsupported: websocket not served by the server: WSGI" in detail


# -- the harness: a WSGI-only server is recorded unsupported, never started ------------------


def test_a_wsgi_server_is_recorded_unsupported_and_never_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SERVER=hypercorn,gunicorn-sync SCENARIO=websocket: gunicorn-sync's runs are unsupported
    records naming the protocol and its server.toml's reason, and it is never started;
    hypercorn's are measured with protocol websocket; exit 0."""
    from bench.core import plan
    from bench.harness.recorder import Recorder
    from bench.harness.run import Harness, execute
    from bench.host.placement import cpu_placement
    from tests.fakes import FakeSite, FakeTool

    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setattr("bench.harness.run.state_base", lambda: state)
    site, tool = FakeSite(), FakeTool()

    def harness(first, arms, table, run_dir, progress) -> Harness:
        recorder = Recorder({"hostname": "test"}, cpu_placement(False), tool, progress)
        return Harness(site, tool, recorder, table, run_dir, progress)

    opts = plan.Options(
        servers=("hypercorn", "gunicorn-sync"),
        scenarios=("websocket",),
        concurrency=(10,),
        duration_s=2,
        warmup_s=1,
        trials=1,
        arch="amd64",
        results=tmp_path / "results",
        overrides={},
        load_threads=1,
        seed=3,
    )
    assert execute(opts, harness=harness) == 0
    records = [json.loads(p.read_text()) for p in (tmp_path / "results/records").glob("*.json")]
    refused = [r for r in records if r["server"] == "gunicorn-sync"]
    assert refused and all(r["status"] == "unsupported" for r in refused)
    assert {r["metadata"]["unsupported"] for r in refused} == {"protocol"}
    assert all("WSGI (PEP 3333) has no WebSocket interface" in r["reason"] for r in refused)
    assert "gunicorn-sync" not in site.stopped
    measured = [r for r in records if r["server"] == "hypercorn"]
    assert {(r["status"], r["protocol"], r["tls"]) for r in measured} == {
        ("ok", "websocket", False)
    }


def test_through_a_proxy_or_over_http2_a_websocket_run_is_unsupported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PROXY=nginx (its templates pass no Upgrade header) or PROTOCOL=h2c: recorded
    unsupported saying which, the server never started for them."""
    from bench.core import plan
    from bench.harness.recorder import Recorder
    from bench.harness.run import Harness, execute
    from bench.host.placement import cpu_placement
    from tests.fakes import FakeSite, FakeTool

    monkeypatch.setattr("bench.harness.run.state_base", lambda: tmp_path)
    for extra, says in (({"proxy": "nginx"}, "PROXY=nginx"), ({"protocol": "h2c"}, "PROTOCOL=h2c")):
        site, tool = FakeSite(), FakeTool()

        def harness(first, arms, table, run_dir, progress, tool=tool, site=site) -> Harness:
            recorder = Recorder({"hostname": "test"}, cpu_placement(False), tool, progress)
            return Harness(site, tool, recorder, table, run_dir, progress)

        results = tmp_path / says
        opts = plan.Options(
            servers=("hypercorn",),
            scenarios=("websocket",),
            concurrency=(10,),
            duration_s=2,
            warmup_s=1,
            trials=1,
            arch="amd64",
            results=results,
            overrides={},
            load_threads=1,
            seed=3,
            **extra,  # type: ignore[arg-type]
        )
        assert execute(opts, harness=harness) == 0
        records = [json.loads(p.read_text()) for p in (results / "records").glob("*.json")]
        assert records and {r["status"] for r in records} == {"unsupported"}
        assert all(says in r["reason"] for r in records) and site.stopped == []


def test_message_size_and_rate_reach_the_runs_path() -> None:
    """MESSAGE_BYTES= and MESSAGE_RATE=: the WebSocket runs' path carries them (the route and
    wsload read it); LOAD unset is wsload; unset, the scenario's declared path."""
    from bench import cli
    from bench.core import plan

    parse = cli.build_parser().parse_args
    opts = cli.options_from(
        parse(["run", "--scenario=websocket-push", "--message-bytes=256", "--message-rate=20"])
    )
    assert opts.load_tool == "wsload"
    paths = {r.path for block in plan.make_plan(opts) for r in block.runs}
    assert paths == {"/ws/push?bytes=256&rate=20"}
    plain = cli.options_from(parse(["run", "--scenario=websocket"]))
    paths = {r.path for block in plan.make_plan(plain) for r in block.runs}
    assert paths == {SCENARIOS["websocket"].path}
    with pytest.raises(Exception, match="MESSAGE_BYTES"):
        variables.check("run", {"SCENARIO": "websocket", "MESSAGE_BYTES": "8"})


# -- SCENARIO=websocket-idle: connections held, no message --------------------------------

IDLE = "idle-uvicorn-c1000"  # a harness run: uvicorn holding 1,000 idle connections for 2 s


def _idle_record() -> Record:
    return Record.from_dict(json.loads((FIXTURES / f"record-{IDLE}.json").read_text()))


def test_an_idle_run_holds_connections_and_sends_nothing() -> None:
    """The captured idle run: every connection held, no message either way, no latency; the
    run measured something (its connections), one that held none measured nothing."""
    text = (FIXTURES / f"{IDLE}.wsload.json").read_text()
    data = json.loads(text)
    result = parse_wsload(text, "intended_ms,latency_ms,status\n")
    figures = result.websocket or {}
    assert figures["mode"] == "idle" and figures["connections_held"] == data["held"] == 1000
    assert figures["messages_sent"] == figures["messages_received"] == result.requests == 0
    assert figures["offered_messages_per_s"] == 0 and result.latency.p99 is None
    assert result.errors.timeout == 0 and result.empty_reason() is None
    dropped = parse_wsload(json.dumps(data | {"held": 0}), None)
    assert dropped.empty_reason() == "no connection held"
    echo_text, csv_text = _captured("echo-hypercorn-c10")
    assert parse_wsload(echo_text, csv_text).empty_reason() is None
    none = parse_wsload(json.dumps(json.loads(echo_text) | {"counted": 0}), None)
    assert none.empty_reason() == "no request completed"


def test_the_idle_scenario_keeps_rate_0_whatever_message_rate_says() -> None:
    """SCENARIO=websocket-idle MESSAGE_RATE=20: its path still asks for no message (wsload and
    the route read it), with the size asked; LOAD unset is wsload."""
    from bench import cli
    from bench.core import plan

    parse = cli.build_parser().parse_args
    opts = cli.options_from(
        parse(["run", "--scenario=websocket-idle", "--message-bytes=128", "--message-rate=20"])
    )
    assert opts.load_tool == "wsload"
    paths = {r.path for block in plan.make_plan(opts) for r in block.runs}
    assert paths == {"/ws/echo?bytes=128&rate=0"}


def test_memory_per_connection_is_the_growth_from_before_the_load() -> None:
    """The captured idle record: MB per 1,000 connections is (peak RSS - RSS before the load
    connected) / held x 1,000; the connections that fit in the declared limit follow from
    it; a record without the RSS before (older) gives neither; the detail's memory column
    says it with one connection count (†)."""
    from bench.studies.metrics import WS_MEMORY_LIMIT_MB, metric_value

    rec = _idle_record()
    resources = rec.resources or {}
    peak, start = resources["server_rss_mb"], resources["server_rss_start_mb"]
    assert peak > start and rec.status == "ok" and rec.offered_rps is None
    per_1000 = (peak - start) / 1000 * 1000
    assert metric_value(rec, "connections_held") == 1000
    assert metric_value(rec, "rss_per_1000_mb") == pytest.approx(per_1000)
    fits = metric_value(rec, "held_in_limit")
    assert fits == pytest.approx((WS_MEMORY_LIMIT_MB - start) / (per_1000 / 1000))
    older = replace(rec, resources={"server_rss_mb": peak})
    assert metric_value(older, "rss_per_1000_mb") is None
    assert metric_value(older, "held_in_limit") is None
    detail = "\n".join(websocket.websocket_sections([rec]))
    assert f"{per_1000:,.1f} † (median of 1)" in detail


# -- make capacity over messages/s: wsload paced by RATE= on the echo route -----------------


@pytest.mark.parametrize(
    ("command", "given", "says"),
    [
        ("capacity", {"LOAD": "wsload", "CONCURRENCY": "100"}, None),
        ("run", {"LOAD": "wsload", "RATE": "500"}, None),
        ("capacity", {"LOAD": "wsload"}, "CONCURRENCY=<connections> (one number)"),
        ("capacity", {"LOAD": "wsload", "CONCURRENCY": "10,100"}, "(one number)"),
        (
            "capacity",
            {"LOAD": "wsload", "CONCURRENCY": "100", "SCENARIO": "websocket-push"},
            "SCENARIO=websocket-push cannot take it",
        ),
        ("run", {"RATE": "500", "SCENARIO": "websocket-idle"}, "valid: SCENARIO=websocket"),
        ("capacity", {"LOAD": "wrk", "SCENARIO": "db"}, "valid: LOAD=oha or wsload"),
    ],
)
def test_rate_paces_wsload_on_the_echo_route_only(
    command: str, given: dict[str, str], says: str | None
) -> None:
    """RATE= (make capacity's steps) is messages/s over the echo route's connections: taken
    with one connection count; the push route (the server's rate) and the idle scenario (no
    message) refuse it in one line naming what is valid."""
    from bench.core.validate import UsageError

    full = {"SERVER": "uvicorn", "SCENARIO": "websocket", "SLO_P99_MS": "50"} | given
    if command == "run":
        full.pop("SLO_P99_MS")
    if says is None:
        values = variables.check(command, full)
        assert values["LOAD"] == "wsload"
        return
    with pytest.raises(UsageError, match=re.escape(says)):
        variables.check(command, full)


def test_a_paced_run_offers_the_rate_asked() -> None:
    """wsload's summary of a paced run (--rate): the offered messages/s are the rate asked,
    not connections x the URL's rate."""
    text, csv_text = _captured("echo-hypercorn-c10")
    paced = json.loads(text) | {"offered_per_s": 750.0}
    figures = parse_wsload(json.dumps(paced), csv_text).websocket or {}
    assert figures["offered_messages_per_s"] == 750.0
    assert (parse_wsload(text, csv_text).websocket or {})["offered_messages_per_s"] == 1000
