"""oha (open-loop load at a fixed arrival rate): its command line, and its output -> numbers.

The parsing is pure functions, re-runnable offline on raw files. Written against oha 1.16.0
(the version bench/setup.sh pins; source references are to its crate, src/...).

How oha measures, as its source does it:
- `-q RATE` starts a generator that wakes at start + i/RATE and queues one arrival stamped with
  the time it woke (client.rs, work_until_with_qps_latency_correction); `-c N` connections take
  arrivals from that unbounded queue. With `--latency-correction` a request's latency runs from
  its arrival stamp, so time spent queued behind a stalled server counts (RequestResult::duration
  = end - start_latency_correction). Without `-q`, `--latency-correction` is ignored (lib.rs).
- `-z D`: arrivals stop at the deadline. Requests in flight then are aborted and counted once per
  busy connection as the error "aborted due to deadline" (unless `-w`); arrivals still queued
  and never sent are dropped without a trace: they are in no count.
- "Success" in oha means "an HTTP response arrived", whatever its status (result_data.rs): the
  latency statistics, the status distribution and `--db-url` cover responses; everything else is
  a string in the error distribution (the Display text of its ClientError).
- Percentiles: the sorted sample at index floor(p/100 * n) (result_data.rs, percentile_iter);
  recomputed here the same way, so per-request files reproduce oha's own figures exactly.

Input: a LoadRequest with a rate; offline, oha's `--output-format json` text and optionally
its `--db-url` sqlite file (raw or .gz). Output: a LoadResult (latency recomputed exactly from
the per-request file; each response's intended send time, latency and status kept beside the
record as `oha.requests.csv.gz`, so trials can be merged exactly), or OhaParseError when the
text or file is not oha's.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import re
import sqlite3
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from bench.core import scenario
from bench.core.parse import ParseError
from bench.core.protocol import protocol
from bench.host.netns import Namespace
from bench.host.procs import ProcessTable, StartError
from bench.host.state import STATE
from bench.load import (
    OVERSTAY_S,
    PER_REQUEST_HEADER,
    PERCENTILES,
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

#: The error classes of a record (wrk's, plus what oha tells apart).
ERROR_CLASSES = ("connect", "read", "write", "timeout", "other")
#: oha's text for a request cut off by `-z` (client.rs, ClientError::Deadline).
DEADLINE = "aborted due to deadline"
#: The version bench/setup.sh builds (keep the two equal).
OHA_VERSION = "1.16.0"


def oha_binary() -> Path:
    """The oha that bench/setup.sh built: .bench/tools/bin/oha; LoadError saying how to build
    it when it is absent."""
    path = STATE / "tools" / "bin" / "oha"
    if not path.is_file():
        raise LoadError(
            f"{path} is missing: run `make setup OHA=1` (or `OHA=1 bash bench/setup.sh`)"
        )
    return path


class OhaParseError(ParseError):
    """The text or file is not oha's output (or not of the same run)."""


@dataclass(frozen=True)
class OhaResult:
    """One oha run, in the record's units (ms, requests per second)."""

    requests: int  # every outcome oha counted: responses + errors (incl. aborted at the deadline)
    responses: int  # HTTP responses of any status
    successes: int  # 2xx responses
    duration_s: float  # oha's elapsed time, from start until every connection stopped
    offered_rps: float | None  # the -q rate, when the caller says it
    achieved_rps: float  # successes per second of duration_s
    latency_ms: dict[str, float | None]  # p50 p90 p99 p999 max mean over responses; None: none
    errors: dict[str, int]  # connect read write timeout other, and non_2xx (responses)
    aborted: int  # requests in flight at the deadline, cut off by oha (not the server's fault)
    by_status: dict[int, int] = field(default_factory=dict)
    error_distribution: dict[str, int] = field(default_factory=dict)  # oha's raw strings
    latency_source: str = "json"  # "json" (oha's summary) or "per-request" (recomputed)


def oha_argv(
    binary: str | Path,
    url: str,
    rate: float,
    connections: int,
    duration_s: float,
    timeout_s: float | None,
    keepalive: bool,
    out_db: str | Path | None,
    *,
    http2: bool = False,
    streams: int = 1,
    cafile: str | Path | None = None,
) -> list[str]:
    """The oha command line for one open-loop run: `rate` arrivals/s for `duration_s` seconds.

    JSON summary on stdout; each response's timings into the sqlite file `out_db` (which must not
    exist yet: oha appends to an existing table). `timeout_s` None: no per-request timeout.
    http2: `--http2` (prior knowledge on an http:// URL, ALPN on https://) with `streams`
    requests in flight per connection (`-p`: c × p in flight at most); cafile: the certificate
    an https:// server must present (`--cacert`: verified, never `--insecure`).
    """
    if not rate > 0 or not math.isfinite(rate):
        # -q 0 means "no limit" to oha (lib.rs, work_mode): that would be a closed-loop run.
        raise ValueError(f"rate must be a positive number of requests/s, not {rate!r}")
    if connections < 1:
        raise ValueError(f"connections must be at least 1, not {connections!r}")
    if not duration_s > 0:
        raise ValueError(f"duration must be positive, not {duration_s!r}")
    argv = [
        str(binary),
        "--no-tui",
        "--output-format",
        "json",
        "-q",
        _number(rate),
        "--latency-correction",
        "-c",
        str(connections),
        "-z",
        _ms(duration_s),
    ]
    if timeout_s is not None:
        if not timeout_s > 0:
            raise ValueError(f"timeout must be positive, not {timeout_s!r}")
        argv += ["-t", _ms(timeout_s)]
    if not keepalive:
        argv.append("--disable-keepalive")
    if http2:
        argv += ["--http2", "-p", str(streams)]
    elif streams != 1:
        raise ValueError(f"streams are HTTP/2's: {streams} without http2")
    if cafile is not None:
        argv += ["--cacert", str(cafile)]
    if out_db is not None:
        argv += ["--db-url", str(out_db)]
    argv.append(url)
    return argv


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _ms(seconds: float) -> str:
    # humantime (oha's duration parser) takes "1500ms", not "1.5s".
    return f"{round(seconds * 1000)}ms"


def classify_error(message: str) -> str:
    """One of ERROR_CLASSES (or "deadline") for an error string of oha's error distribution.

    oha keeps only the text. A bare OS error ("Connection refused (os error 111)") comes from
    connecting (client.rs, Client::client: TcpStream::connect); hyper's errors come from an
    established connection: its write side ("error writing ...") or its read side. "timeout" is
    either `-t` or `--connect-timeout`: oha reports both with the same text.
    """
    text = message.strip().lower()
    if text == DEADLINE:
        return "deadline"
    if text == "timeout":
        return "timeout"
    if text.startswith("error writing") or "broken pipe" in text or "os error 32)" in text:
        return "write"
    if text.startswith(_HYPER_READ):
        return "read"
    if re.search(r"\(os error \d+\)$", text) or "too many open files" in text:
        return "connect"
    return "other"


# hyper 1.x error texts of a connection that was established (hyper/src/error.rs, description()).
_HYPER_READ = (
    "connection closed before message completed",
    "connection error",
    "received unexpected message from connection",
    "invalid http",
    "error reading a body from connection",
    "message head is too large",
    "unexpected end of file",
    "operation was canceled",
    "channel closed",
    "error shutting down connection",
)


def parse_oha(
    json_text: str,
    per_request_file: str | Path | None = None,
    *,
    offered_rps: float | None = None,
) -> OhaResult:
    """One run from oha's JSON summary; latency recomputed from its per-request file if given.

    `offered_rps` is the `-q` rate (oha's JSON does not carry it).
    """
    try:
        data = json.loads(json_text)
        summary = data["summary"]
        duration_s = float(summary["total"])
        by_status = {int(k): int(v) for k, v in data["statusCodeDistribution"].items()}
        raw_errors = {str(k): int(v) for k, v in data["errorDistribution"].items()}
        percentiles = data["latencyPercentiles"]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise OhaParseError(f"not oha's JSON summary: {exc}") from exc
    responses = sum(by_status.values())
    successes = sum(n for code, n in by_status.items() if 200 <= code < 300)
    errors = dict.fromkeys(ERROR_CLASSES, 0)
    aborted = 0
    for message, count in raw_errors.items():
        kind = classify_error(message)
        if kind == "deadline":
            aborted += count
        else:
            errors[kind] += count
    errors["non_2xx"] = responses - successes
    if per_request_file is not None:
        samples = per_request_latencies_ms(per_request_file)
        if len(samples) != responses:
            raise OhaParseError(
                f"{per_request_file} holds {len(samples)} responses, the JSON {responses}: "
                "not the same run"
            )
        latency = latency_summary_ms(samples)
        source = "per-request"
    else:
        latency = _json_latency_ms(summary, percentiles, responses)
        source = "json"
    return OhaResult(
        requests=responses + sum(raw_errors.values()),
        responses=responses,
        successes=successes,
        duration_s=duration_s,
        offered_rps=float(offered_rps) if offered_rps is not None else None,
        achieved_rps=successes / duration_s if duration_s > 0 else 0.0,
        latency_ms=latency,
        errors=errors,
        aborted=aborted,
        by_status=dict(sorted(by_status.items())),
        error_distribution=dict(sorted(raw_errors.items())),
        latency_source=source,
    )


def _json_latency_ms(summary: dict, percentiles: dict, responses: int) -> dict[str, float | None]:
    # No response: oha's percentiles are NaN and its min/max infinite, which serde_json writes
    # as null. That is "no samples", never "0 ms".
    if responses == 0:
        return dict.fromkeys((*PERCENTILES, "max", "mean"))
    try:
        out: dict[str, float | None] = {
            key: _to_ms(float(percentiles[f"p{_pct(p)}"])) for key, p in PERCENTILES.items()
        }
        out["max"] = _to_ms(float(summary["slowest"]))
        out["mean"] = _to_ms(float(summary["average"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise OhaParseError(f"oha's JSON has no latency for {responses} responses: {exc}") from exc
    return out


def _pct(p: float) -> str:
    # oha's keys: "p50", "p99.9" (Rust's f64 Display: no ".0" on whole numbers).
    return str(int(p)) if p.is_integer() else str(p)


def _read_bytes(path: str | Path) -> bytes:
    path = Path(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise OhaParseError(f"cannot read {path}: {exc}") from exc
    return raw


def _read_db(path: str | Path) -> sqlite3.Connection:
    raw = _read_bytes(path)
    if not raw.startswith(b"SQLite format 3\x00"):
        raise OhaParseError(f"{path} is not an sqlite database")
    conn = sqlite3.connect(":memory:")
    conn.deserialize(raw)
    return conn


REQUESTS_HEADER = PER_REQUEST_HEADER


def requests_csv(db_path: str | Path) -> str:
    """oha's per-request database as the compact CSV kept beside a record: per response, its
    intended send time (ms from the run's first), its latency from that time and its status,
    to the µs. The database repeats the URL and absolute times on every row: 5× the size."""
    conn = _read_db(db_path)
    try:
        rows = conn.execute(
            "SELECT start_latency_correction, duration, status FROM oha "
            "ORDER BY start_latency_correction"
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        raise OhaParseError(f"{db_path} is not oha's database: {exc}") from exc
    finally:
        conn.close()
    first = rows[0][0] if rows else 0.0
    lines = [REQUESTS_HEADER]
    lines += [f"{(t - first) * 1000:.3f},{d * 1000:.3f},{status}" for t, d, status in rows]
    return "\n".join(lines) + "\n"


def _csv_latencies_ms(text: str, path: str | Path) -> list[float]:
    try:
        return per_request_ms(text, path)
    except ParseError as exc:
        raise OhaParseError(str(exc)) from exc


def per_request_latencies_ms(path: str | Path) -> list[float]:
    """Every response's latency (ms) from oha's `--db-url` file or the CSV made of it by
    requests_csv (either raw or gzip-compressed).

    With `--latency-correction` oha's `duration` column runs from the intended send time.
    One file holds one run: oha appends to an existing file, so several runs is an error.
    """
    head = _read_bytes(path)
    if head.startswith(REQUESTS_HEADER.encode()):
        return _csv_latencies_ms(head.decode(), path)
    conn = _read_db(path)
    try:
        runs = conn.execute("SELECT COUNT(DISTINCT run) FROM oha").fetchone()[0]
        if runs > 1:
            raise OhaParseError(f"{path} holds {runs} oha runs; one file per run")
        rows = conn.execute("SELECT duration FROM oha").fetchall()
    except sqlite3.DatabaseError as exc:
        raise OhaParseError(f"{path} is not oha's database: {exc}") from exc
    finally:
        conn.close()
    return [_to_ms(row[0]) for row in rows]


def _to_ms(seconds: float) -> float:
    # oha's clock has nanosecond resolution: 6 decimals of a millisecond keep all of it.
    return round(seconds * 1000, 6)


def merge_latency_ms(per_request_files: Iterable[str | Path]) -> dict[str, float | None]:
    """Percentiles over every sample of several trials' per-request files (not a median of
    each trial's percentiles)."""
    samples: list[float] = []
    for path in per_request_files:
        samples.extend(per_request_latencies_ms(path))
    return latency_summary_ms(samples)


JSON_NAME = "oha.json"
DEADLINE_SLACK_S = 0.01
REQUESTS_NAME = "oha.requests.csv.gz"


def to_load_result(
    parsed: OhaResult, rate: float, duration_s: float, raw: dict[str, str | bytes]
) -> LoadResult:
    """An oha run as the record holds it. `requests` and `rps` count responses of any status
    (as wrk's do); achieved_rps only 2xx. Arrivals oha scheduled (rate × duration) but never
    sent because every connection was busy at the deadline are in none of oha's counts: they
    are errors.unsent here (but for those due in the last 10 ms), so offered − achieved is
    accounted for."""
    outcomes = parsed.requests
    # Arrivals due in the last DEADLINE_SLACK_S before the deadline may or may not go out
    # (oha's timer against its deadline): not counted as unsent.
    scheduled = math.floor(rate * (duration_s - DEADLINE_SLACK_S))
    return LoadResult(
        per_request_name=REQUESTS_NAME if REQUESTS_NAME in raw else None,
        requests=parsed.responses,
        duration_s=parsed.duration_s,
        rps=parsed.responses / parsed.duration_s if parsed.duration_s > 0 else 0.0,
        latency=Latency(**parsed.latency_ms),
        errors=Errors(
            connect=parsed.errors["connect"],
            read=parsed.errors["read"],
            write=parsed.errors["write"],
            timeout=parsed.errors["timeout"],
            non_2xx=parsed.errors["non_2xx"],
            by_status=parsed.by_status,
            other=parsed.errors["other"],
            aborted=parsed.aborted,
            unsent=max(0, scheduled - outcomes),
            by_message=parsed.error_distribution,
        ),
        raw=raw,
        achieved_rps=parsed.achieved_rps,
    )


@dataclass
class Oha:
    """oha at a fixed arrival rate (RATE=), latency from each request's intended send time."""

    name: ClassVar[str] = "oha"
    primes: ClassVar[bool] = True
    open_loop: ClassVar[bool] = True
    busy: ClassVar[bool] = True  # without RATE= each connection sends again at once
    drives: ClassVar[str] = scenario.URL
    per_request: ClassVar[str | None] = REQUESTS_NAME
    selectable: ClassVar[bool] = True
    default: ClassVar[bool] = False
    variables: ClassVar[tuple[str, ...]] = ("RATE", "STREAMS")  # the make variables it reads
    # PROTOCOL= values it speaks: --http2 for h2c and h2 (STREAMS=: its -p)
    protocols: ClassVar[tuple[str, ...]] = ("http1", "https1", "h2c", "h2")
    caveat: ClassVar[str] = ""
    version: str | None = None  # read by prepare()

    @classmethod
    def configured(cls, load_threads: int, load_workers: int) -> Oha:
        """oha takes neither: a thread per physical core."""
        return cls()

    def prepare(self, log: Path) -> None:
        """oha is built by bench/setup.sh (LOAD=oha or OHA=1): only its version is read."""
        binary = oha_binary()
        try:
            words = subprocess.run(
                [str(binary), "--version"], capture_output=True, text=True, timeout=30
            ).stdout.split()
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise LoadError(f"{binary} does not run: {exc}") from exc
        self.version = words[1] if len(words) > 1 else None

    def settings(self, concurrency: int) -> dict[str, int | None]:
        """No thread or worker setting: oha uses a thread per physical core."""
        return {"load_threads": None, "load_workers": None}

    def run(
        self,
        table: ProcessTable,
        request: LoadRequest,
        watch: Watch | None = None,
        sampler: Sampler | None = None,
    ) -> LoadResult:
        """Run oha once at request.rate; parse its JSON and per-request database."""
        if request.rate is None:
            raise LoadError("oha needs a rate (RATE=)")
        json_path = request.out.with_name(request.out.name + ".oha.json")
        db_path = request.out.with_name(request.out.name + ".oha.db")
        for path in (json_path, db_path):
            path.unlink(missing_ok=True)  # oha appends to an existing database
        argv = oha_argv(
            oha_binary(),
            request.url,
            request.rate,
            request.concurrency,
            request.duration_s,
            request.timeout_s,
            request.keepalive,
            db_path,
            http2=protocol(request.protocol).http2,
            streams=request.streams,
            cafile=request.cafile,
        )
        log_path = request.out.with_name(request.out.name + ".oha.log")
        limit_s = request.duration_s + request.timeout_s + OVERSTAY_S
        proc = run_bounded(
            table, "oha", argv, log_path, limit_s, request, watch, sampler, stdout_path=json_path
        )
        text = json_path.read_text(errors="replace")
        if proc.exit_code() != 0:
            raise LoadError(f"oha exited with {proc.exit_code()}: {proc.log_tail(5)}")
        raw: dict[str, str | bytes] = {JSON_NAME: text}
        has_db = db_path.exists() and db_path.stat().st_size > 0
        try:
            parsed = parse_oha(text, offered_rps=request.rate)
            if has_db:
                # The database is read once, into the compact file kept beside the record;
                # the record's percentiles are that file's (to the µs), so anyone recomputing
                # them from it, or merging trials, gets the same figures.
                csv_text = requests_csv(db_path)
                raw[REQUESTS_NAME] = gzip.compress(csv_text.encode(), 9, mtime=0)
                samples = _csv_latencies_ms(csv_text, REQUESTS_NAME)
                if len(samples) != parsed.responses:
                    raise OhaParseError(
                        f"{db_path} holds {len(samples)} responses, the JSON "
                        f"{parsed.responses}: not the same run"
                    )
                latency = latency_summary_ms(samples)
                parsed = dataclasses.replace(
                    parsed, latency_ms=latency, latency_source="per-request"
                )
        except OhaParseError as exc:
            raise LoadError(f"unreadable oha output: {exc}", raw) from exc
        return to_load_result(parsed, request.rate, request.duration_s, raw)


def run_oha(
    table: ProcessTable,
    ns: Namespace,
    out: Path,
    url: str,
    rate: float,
    connections: int,
    duration_s: float,
    timeout_s: float,
    keepalive: bool,
) -> str:
    """oha inside ns for duration_s at `rate` arrivals/s; its JSON summary. Bounded: stopped
    at duration + timeout + 30 s whatever happens."""
    argv = oha_argv(oha_binary(), url, rate, connections, duration_s, timeout_s, keepalive, None)
    json_path = out.with_suffix(".oha.json")
    json_path.unlink(missing_ok=True)
    proc = table.start(
        "oha", ns.exec_argv(argv), out.with_suffix(".oha.log"), stdout_path=json_path
    )
    deadline = time.monotonic() + duration_s + timeout_s + 30
    while proc.exit_code() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if proc.exit_code() is None:
        table.stop(proc, grace_s=2)
        raise StartError(f"oha did not stop by itself within {duration_s + timeout_s + 30:.0f} s")
    table.stop(proc)
    if proc.exit_code() != 0:
        raise StartError(f"oha exited with {proc.exit_code()}: {proc.log_tail(5)}")
    return json_path.read_text(errors="replace")


TOOL = Oha
