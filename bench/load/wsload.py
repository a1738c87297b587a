"""wsload: the WebSocket load generator (SCENARIO=websocket and websocket-push).

Input: a LoadRequest whose path is a WebSocket route with its message size and each
connection's rate in the query (bench.core.scenario: `/ws/echo?bytes=N&rate=M`), its
concurrency the connections held. Output: a LoadResult from wsload's JSON summary and its
per-message file (`wsload.messages.csv.gz`: intended send time, latency from it, 101), with
the WebSocket figures in `websocket` (connections opened and held, messages, the generator's
send lag and its own ceiling). wsload/wsload.py runs in its own venv (.bench/venvs/_wsload,
picows pinned in wsload/requirements.txt).

Each connection sends at M messages/s on a fixed schedule whatever the server does, so the
latency runs from each message's intended send time. It is no `open_loop` tool in the
harness's sense (its rate is the scenario's, per connection, and RATE= is not required) but
it is `paced`: RATE= (make capacity's steps) replaces that rate on the echo route with
messages/s over all the connections (request.rate), spread over them in turn.

Its own ceiling is measured once per venv and CPU count (prepare): wsload's flood mode (16
messages in flight on each of 50 connections) against wsload's picows echo server, messages
back per second. A run whose messages/s reaches LOAD_BOUND_SHARE of it is marked
`load_bound`: the generator, not the server, may be what limits it.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from bench.core import scenario
from bench.core.parse import ParseError
from bench.load import (
    OVERSTAY_S,
    Errors,
    Latency,
    LoadError,
    LoadRequest,
    LoadResult,
    Watch,
    latency_summary_ms,
    per_request_ms,
    run_bounded,
)

if TYPE_CHECKING:
    from bench.host.procs import ProcessTable
    from bench.observe.sample import Sampler

WSLOAD_DIR = Path(__file__).resolve().parents[2] / "wsload"
JSON_NAME = "wsload.json"
MESSAGES_NAME = "wsload.messages.csv.gz"
LOAD_BOUND_SHARE = 0.8  # messages/s at this share of the generator's ceiling: load-bound
# The ceiling's measurement: connections, messages in flight on each, seconds.
CEILING_CONNECTIONS, CEILING_WINDOW, CEILING_S = 50, 16, 3.0


def parse_wsload(json_text: str, csv_text: str | None) -> LoadResult:
    """wsload's summary and per-message lines -> the LoadResult a record holds.

    Mapping: requests = messages received in the window and verified (their latency is in
    the per-message file); rps = those per second; errors.connect = connections that failed
    to open; errors.read = connections the server closed during the run; errors.timeout =
    lost messages (echoes sent that never came back, or pushes due in the window, at least
    floor(rate x duration) per connection, that never arrived, both within a second after
    it); errors.non_2xx = messages received that were not what was sent (wrong bytes, out of
    order); by_status {101: connections held}."""
    try:
        data = json.loads(json_text)
        duration = float(data["duration_s"])
        counted = int(data["counted"])
        errors = {str(k): int(v) for k, v in data["errors"].items()}
        lag = data["send_lag_ms"]
        connected, held = int(data["connected"]), int(data["held"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ParseError(f"not wsload's JSON summary: {exc}") from exc
    samples = per_request_ms(csv_text, MESSAGES_NAME) if csv_text is not None else []
    if csv_text is not None and len(samples) != counted:
        raise ParseError(f"{MESSAGES_NAME} holds {len(samples)} messages, the JSON {counted}")
    connect = sum(v for k, v in errors.items() if k.startswith("connect:"))
    window = data.get("window")
    return LoadResult(
        requests=counted,
        duration_s=duration,
        rps=counted / duration if duration > 0 else 0.0,
        latency=Latency(**latency_summary_ms(samples)),
        errors=Errors(
            connect=connect,
            read=errors.get("closed by the server", 0),
            timeout=int(data.get("lost", 0)),
            non_2xx=int(data.get("mismatched", 0)),
            by_status={101: held},
            by_message=errors or None,
        ),
        raw={JSON_NAME: json_text},
        achieved_rps=counted / duration if duration > 0 else 0.0,
        window=(float(window[0]), float(window[1])) if window else None,
        per_request_name=MESSAGES_NAME if csv_text is not None else None,
        websocket={
            "mode": data.get("mode"),
            "message_bytes": data.get("message_bytes"),
            "rate_per_connection": data.get("rate_per_connection"),
            "connections_opened": connected,
            "connections_held": held,
            "messages_sent": data.get("sent"),
            "messages_received": data.get("received"),
            "messages_per_s": counted / duration if duration > 0 else 0.0,
            # the schedule's messages/s: a paced run's (RATE=), else every connection asked
            # for at its rate
            "offered_messages_per_s": data.get("offered_per_s")
            or int(data["connections"]) * int(data["rate_per_connection"]),
            "send_lag_ms": lag,
        },
    )


def ws_url(request: LoadRequest) -> str:
    """The route's ws:// URL (wss:// is not spoken: WebSocket runs in clear text here)."""
    return "ws" + request.base_url.removeprefix("http") + request.path


def measure_ceiling(python: Path, log: Path) -> dict[str, object]:
    """wsload flooding wsload's echo server on this machine: messages back per second."""
    from bench.host.procs import ProcessTable
    from bench.host.ready import free_port

    table = ProcessTable()
    port = free_port()
    out = log.with_name("wsload-ceiling.json")
    script = str(WSLOAD_DIR / "wsload.py")
    try:
        table.start("wsload-echo", [str(python), script, "serve", "--port", str(port)], log)
        time.sleep(1.0)  # the echo server binds its port
        argv = [str(python), script, "flood", f"ws://127.0.0.1:{port}/ws/echo?bytes=64"]
        argv += ["--connections", str(CEILING_CONNECTIONS), "--window", str(CEILING_WINDOW)]
        argv += ["--duration", str(CEILING_S), "--out", str(out)]
        flood = table.start("wsload-flood", argv, log.with_name("wsload-flood.log"))
        flood.popen.wait(timeout=CEILING_S + 30)
        data = json.loads(out.read_text())
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise LoadError(f"wsload's ceiling could not be measured: {exc}") from exc
    finally:
        table.stop_all()
    if not data.get("connected"):
        raise LoadError(f"wsload's ceiling: no connection to its echo server: {data}")
    return {
        "messages_per_s": round(float(data["messages_per_s"])),
        "cpus": len(os.sched_getaffinity(0)),
        "how": f"wsload flood, {CEILING_CONNECTIONS} connections x {CEILING_WINDOW} in flight, "
        f"{CEILING_S:g} s, against wsload's picows echo server on this machine",
    }


@dataclass
class WsLoad:
    """wsload in its own venv: WebSocket connections held, messages on a fixed schedule."""

    name: ClassVar[str] = "wsload"
    primes: ClassVar[bool] = True
    open_loop: ClassVar[bool] = False  # its rate is the scenario's per connection ...
    busy: ClassVar[bool] = False  # a rate per connection
    # ... unless RATE= paces it: messages/s over all the connections (make capacity)
    paced: ClassVar[bool] = True
    drives: ClassVar[str] = scenario.WS
    per_request: ClassVar[str | None] = MESSAGES_NAME
    selectable: ClassVar[bool] = True
    default: ClassVar[bool] = False
    variables: ClassVar[tuple[str, ...]] = ()  # the make variables of its own it reads
    protocols: ClassVar[tuple[str, ...]] = ("http1",)  # the upgrade is HTTP/1.1 in clear text
    caveat: ClassVar[str] = ""
    python: Path | None = None
    version: str | None = None  # read by prepare()
    ceiling: dict[str, object] | None = None  # measured by prepare(), cached per venv

    @classmethod
    def configured(cls, load_threads: int, load_workers: int) -> WsLoad:
        """wsload takes neither: one process, one event loop."""
        return cls()

    def prepare(self, log: Path) -> None:
        """wsload's venv (uv, wsload/requirements.txt), its version and its ceiling here."""
        from bench.host.venv import VenvError, make_venv

        try:
            self.python = make_venv("_wsload", WSLOAD_DIR / "requirements.txt", log=log)
        except VenvError as exc:
            raise LoadError(f"wsload's venv: {exc}") from exc
        script = str(WSLOAD_DIR / "wsload.py")
        result = subprocess.run(
            [str(self.python), script, "version"], capture_output=True, text=True, timeout=60
        )
        words = result.stdout.split()
        self.version = words[1] if len(words) > 1 else None
        cache = self.python.parent.parent / "ceiling.json"
        cpus = len(os.sched_getaffinity(0))
        try:
            cached = json.loads(cache.read_text())
        except (OSError, ValueError):
            cached = None
        if not isinstance(cached, dict) or cached.get("cpus") != cpus:
            cached = measure_ceiling(self.python, log)
            cache.write_text(json.dumps(cached, sort_keys=True))
        self.ceiling = cached

    def settings(self, concurrency: int) -> dict[str, int | None]:
        """No thread or worker setting: one process."""
        return {"load_threads": None, "load_workers": None}

    def run(
        self,
        table: ProcessTable,
        request: LoadRequest,
        watch: Watch | None = None,
        sampler: Sampler | None = None,
    ) -> LoadResult:
        """Hold request.concurrency connections for the duration; parse what wsload wrote."""
        if self.python is None:
            raise LoadError("wsload is not prepared")
        json_path = request.out.with_name(request.out.name + ".wsload.json")
        csv_path = request.out.with_name(request.out.name + ".wsload.csv")
        for path in (json_path, csv_path):
            path.unlink(missing_ok=True)
        argv = [str(self.python), str(WSLOAD_DIR / "wsload.py"), "run", ws_url(request)]
        argv += ["--connections", str(request.concurrency)]
        argv += ["--duration", f"{request.duration_s:g}", "--out", str(json_path)]
        argv += ["--per-message", str(csv_path)]
        if request.rate is not None:
            argv += ["--rate", str(request.rate)]
        log_path = request.out.with_name(request.out.name + ".wsload.log")
        limit_s = request.duration_s + request.timeout_s + OVERSTAY_S
        proc = run_bounded(table, "wsload", argv, log_path, limit_s, request, watch, sampler)
        if proc.exit_code() != 0 or not json_path.exists():
            raise LoadError(f"wsload exited with {proc.exit_code()}: {proc.log_tail(5)}")
        text = json_path.read_text()
        csv_text = csv_path.read_text() if csv_path.exists() else None
        try:
            result = parse_wsload(text, csv_text)
        except ParseError as exc:
            raise LoadError(f"unreadable wsload output: {exc}", {JSON_NAME: text}) from exc
        csv_path.unlink(missing_ok=True)  # kept compressed beside the record
        raw = dict(result.raw)
        if csv_text is not None:
            raw[MESSAGES_NAME] = gzip.compress(csv_text.encode(), 9, mtime=0)
        return with_ceiling(result, raw, self.ceiling)


def with_ceiling(
    result: LoadResult, raw: dict[str, str | bytes], ceiling: dict[str, object] | None
) -> LoadResult:
    """The result with its raw files, the generator's ceiling and whether it came near it."""
    from dataclasses import replace

    limit = ceiling.get("messages_per_s") if ceiling else None
    figures = dict(result.websocket or {})
    figures["load_ceiling_messages_per_s"] = limit
    rate = float(figures.get("messages_per_s") or 0.0)
    figures["load_bound"] = (
        rate >= LOAD_BOUND_SHARE * float(limit) if isinstance(limit, int | float) else None
    )
    return replace(result, raw=raw, websocket=figures)


TOOL = WsLoad
